//! Reclaiming a deleted partition of a copy of a Spark-written fixture table (skipped, visibly,
//! without `../shared/fixtures`): `delete_partitions` of one partition, then a clean removes its
//! files, marker and directory and its metadata-table entry; arbor reads the other partitions'
//! rows unchanged, hudi-rs reads what arbor reads, the metadata table validates.

use std::sync::Arc;

use arbor_cleaner::clean;
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::Table;
use arrow::array::{Array, AsArray, RecordBatch};

use crate::partition_reclaim::{dir_files, keep, listed_partitions};

/// Rows of a snapshot and how many of them are in `partition` (`_hoodie_partition_path`).
fn count(batches: &[RecordBatch], partition: &str) -> (usize, usize) {
    let mut total = 0;
    let mut inside = 0;
    for b in batches {
        total += b.num_rows();
        let col = b
            .column_by_name("_hoodie_partition_path")
            .expect("a table with meta fields");
        let col = col.as_string::<i32>();
        inside += (0..col.len())
            .filter(|i| col.is_valid(*i) && col.value(*i) == partition)
            .count();
    }
    (total, inside)
}

async fn reclaim_on_fixture(relative: &str) {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("partition reclaim on fixtures") else {
        return;
    };
    let zip = root.join(relative);
    let (_tmp, base) = arbor_testkit::unzip_table(&zip);
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let table = Table::open(storage.clone()).await.unwrap();
    let partitions = listed_partitions(&storage).await;
    assert!(partitions.len() > 1, "{relative}: {partitions:?}");
    let victim = partitions[0].clone();
    let before = TableReader::open(storage.clone())
        .await
        .unwrap()
        .snapshot(None)
        .await
        .unwrap();
    let (total, inside) = count(&before, &victim);
    assert!(inside > 0, "{relative}: {victim} holds no row");

    table
        .delete_partitions(std::slice::from_ref(&victim))
        .await
        .unwrap();
    let out = clean(&table, &keep(1)).await.unwrap();
    assert!(
        out.partitions_deleted.contains(&victim),
        "{relative}: {victim} not removed: {out:?}"
    );
    assert!(
        dir_files(&base, &victim).is_empty() && !base.join(&victim).exists(),
        "{relative}: {:?}",
        dir_files(&base, &victim)
    );
    let listed = listed_partitions(&storage).await;
    assert!(!listed.contains(&victim), "{relative}: {listed:?}");
    assert_eq!(listed.len(), partitions.len() - 1, "{relative}: {listed:?}");

    let reader = TableReader::open(storage.clone()).await.unwrap();
    let after = reader.snapshot(None).await.unwrap();
    assert_eq!(
        count(&after, &victim),
        (total - inside, 0),
        "{relative}: rows"
    );
    let report = arbor_mdt::validate::validate_table(storage.clone())
        .await
        .unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "{relative}: {:?}",
        report.discrepancies
    );
    if let Some(python) = arbor_testkit::peer_python_or_skip("partition reclaim fixture peer") {
        arbor_testkit::assert_peer_snapshot_matches(
            &python,
            &base,
            reader.schema(),
            &after,
            &format!("{relative}: after the clean"),
        );
    }
}

#[tokio::test]
async fn test_reclaim_on_spark_mor_v9_table_with_metadata_table() {
    reclaim_on_fixture("sample_table/mor/avro/v9_txns_simple_meta.zip").await;
}

#[tokio::test]
async fn test_reclaim_on_spark_cow_v8_two_level_hive_table() {
    reclaim_on_fixture("sample_table/cow/v8_complexkeygen_hivestyle.zip").await;
}
