//! Partition TTL on copies of Spark-written fixture tables: a count policy over their
//! partition values deletes the smallest ones as one DELETE_PARTITION replacecommit, and arbor
//! and hudi-rs then read the same rows (every row of the deleted partitions gone). Skipped,
//! visibly, when `../shared/fixtures` is absent.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_format::meta;
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::ttl::{PolicyScope, Retention, TtlPolicy, TtlRunOptions, TtlStrategy};
use arbor_table::Table;
use arbor_testkit::{fixtures_root_or_skip, unzip_table};
use arrow::array::AsArray;
use arrow::record_batch::RecordBatch;

use super::ttl_support::assert_peer_reads;

/// The number of rows and the rows' partition paths.
fn partitions_of(batches: &[RecordBatch]) -> (usize, Vec<String>) {
    let mut out = Vec::new();
    for b in batches {
        let col = b
            .column_by_name(meta::PARTITION_PATH)
            .unwrap()
            .as_string::<i32>()
            .clone();
        for i in 0..b.num_rows() {
            out.push(col.value(i).to_string());
        }
    }
    (out.len(), out)
}

async fn run_on_fixture(zip: &str, keep: u64, expect_deleted: &[&str]) {
    let Some(root) = fixtures_root_or_skip("TTL on fixture tables") else {
        return;
    };
    let (_tmp, base) = unzip_table(&root.join(zip));
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let before = TableReader::open(storage.clone())
        .await
        .unwrap()
        .snapshot(None)
        .await
        .unwrap();
    let (_, before_parts) = partitions_of(&before);
    let table = Table::open(storage.clone()).await.unwrap();
    table
        .set_ttl_policy(TtlPolicy {
            strategy: TtlStrategy::Count,
            retain: Retention::Count(keep),
            scope: PolicyScope::Default { fields: vec![] },
            time_field: None,
            format: None,
        })
        .await
        .unwrap();
    let dry = table
        .run_ttl(&TtlRunOptions {
            dry_run: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let run = table.run_ttl(&TtlRunOptions::default()).await.unwrap();
    assert_eq!(run.plan.expired, dry.plan.expired, "{zip}");
    let deleted: BTreeSet<String> = run.plan.expired_partitions().into_iter().collect();
    let want: BTreeSet<String> = expect_deleted.iter().map(|s| s.to_string()).collect();
    assert_eq!(deleted, want, "{zip}: {:?}", run.plan);
    assert!(run.commit.is_some(), "{zip}");
    let reader = TableReader::open(storage.clone()).await.unwrap();
    let after = reader.snapshot(None).await.unwrap();
    let (n, after_parts) = partitions_of(&after);
    let expected = before_parts
        .iter()
        .filter(|p| !deleted.contains(*p))
        .count();
    assert!(
        expected < before_parts.len(),
        "{zip}: the run must delete rows"
    );
    assert_eq!(n, expected, "{zip}: rows left");
    assert!(after_parts.iter().all(|p| !deleted.contains(p)), "{zip}");
    let report = arbor_mdt::validate::validate_table(storage.clone())
        .await
        .unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "{zip}: {:?}",
        report.discrepancies
    );
    let idx = arbor_table::validate_indexes(storage.clone())
        .await
        .unwrap();
    assert!(
        idx.discrepancies.is_empty(),
        "{zip}: {:?}",
        idx.discrepancies
    );
    assert_peer_reads(&base, &reader, &after, &format!("TTL on {zip}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_ttl_count_on_spark_cow_two_level_fixture() {
    // byteField=10/shortField=300, 20/100, 30/100: byte values compare as integers.
    run_on_fixture(
        "sample_table/cow/v8_complexkeygen_hivestyle.zip",
        2,
        &["byteField=10/shortField=300"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_ttl_count_on_spark_mor_fixture_with_indexes() {
    // city=chennai < city=san_francisco < city=sao_paulo; the table has the MDT with the
    // record index, a secondary index, column and partition stats.
    run_on_fixture(
        "quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip",
        2,
        &["city=chennai"],
    )
    .await;
}
