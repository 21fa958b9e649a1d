//! Column and partition stats kept in step by every write: after each insert, upsert, delete,
//! insert overwrite, delete partition and (MOR) compaction, the stored `column_stats` records
//! of every latest-slice file equal the statistics recomputed from the file, the
//! `partition_stats` records equal the tight aggregation of the partition's latest slices,
//! `validate_indexes` finds nothing, and hudi-rs still reads the table. A corrupted record is
//! reported by validation. A Spark fixture with column stats (v8) takes arbor writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_mdt::column_stats::{
    read_column_stats, read_column_stats_of, read_partition_stats, read_partition_stats_of,
};
use arbor_mdt::column_stats_compute::{file_ranges, partition_ranges};
use arbor_mdt::column_stats_writer::{delta_files, StatsConfig};
use arbor_mdt::{MetadataTable, MDT_BASE};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::{Table, WriteOperation};
use arbor_timeline::config::TableType;

use super::write_support::*;

/// Asserts the stored stats equal the recomputed ones exactly (module doc).
async fn assert_stats_exact(storage: &Arc<dyn Storage>, step: &str) {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    let mdt = MetadataTable::open(storage.clone()).await.unwrap().unwrap();
    let cfg = StatsConfig::load(storage.as_ref()).await.unwrap();
    let cs = read_column_stats(storage.as_ref(), &mdt).await.unwrap();
    let ps = read_partition_stats(storage.as_ref(), &mdt).await.unwrap();
    // A read of one column's records (data skipping's) equals the full read's records of it.
    for column in &cfg.columns {
        let of = |r: &arbor_format::hfile::mdt_column_stats::ColumnStatsRecord| {
            r.column_name.as_deref() == Some(column.as_str())
        };
        let one = read_column_stats_of(storage.as_ref(), &mdt, &[column.as_str()])
            .await
            .unwrap();
        let want: BTreeMap<_, _> = cs.records().iter().filter(|(_, r)| of(r)).collect();
        assert_eq!(
            one.records().iter().collect::<BTreeMap<_, _>>(),
            want,
            "{step}: {column}"
        );
        assert!(
            cs.is_empty() || !one.is_empty(),
            "{step}: {column}: no column_stats record"
        );
        let one = read_partition_stats_of(storage.as_ref(), &mdt, &[column.as_str()])
            .await
            .unwrap();
        let want: BTreeMap<_, _> = ps.records().iter().filter(|(_, r)| of(r)).collect();
        assert_eq!(
            one.records().iter().collect::<BTreeMap<_, _>>(),
            want,
            "{step}: {column}"
        );
    }
    let mut partitions_with_data = 0;
    for partition in reader.view().partitions().await.unwrap().iter() {
        let mut ranges = Vec::new();
        for slice in reader
            .view()
            .latest_file_slices(Some(partition), None)
            .await
            .unwrap()
        {
            for key in slice
                .base_file_path()
                .into_iter()
                .chain(slice.log_file_paths())
            {
                let name = key.rsplit('/').next().unwrap().to_string();
                let r = file_ranges(storage, &key, &cfg.columns, cfg.version)
                    .await
                    .unwrap();
                let stored = cs.file(partition, &name);
                assert_eq!(stored.len(), cfg.columns.len(), "{step}: {key} stats");
                for range in &r {
                    assert_eq!(
                        stored.get(&range.column).copied(),
                        Some(&range.to_record(&name, false)),
                        "{step}: {key} {}",
                        range.column
                    );
                }
                ranges.push(r);
            }
        }
        let merged = partition_ranges(&cfg.columns, ranges.iter().map(Vec::as_slice));
        let stored = ps.partition(partition);
        if merged.is_empty() {
            continue;
        }
        partitions_with_data += 1;
        for range in &merged {
            assert_eq!(
                stored.get(&range.column).copied(),
                Some(&range.to_record(partition, true)),
                "{step}: partition {partition} {}",
                range.column
            );
        }
    }
    assert!(partitions_with_data > 0, "{step}: no data");
    let v = arbor_table::validate_indexes(storage.clone())
        .await
        .unwrap();
    assert!(v.discrepancies.is_empty(), "{step}: {:?}", v.discrepancies);
    assert!(
        v.checked.iter().any(|(n, _)| n == "column_stats"),
        "{step}: {:?}",
        v.checked
    );
}

async fn run_every_write_kind(table_type: TableType) {
    let t = create(table_type, Layout::Hive).await;
    t.write(WriteOperation::Insert, &rows(0..20, 1, "a")).await;
    let n = t.table.create_stats_indexes(true, true).await.unwrap();
    assert!(n > 0);
    let props = std::fs::read_to_string(t.base.join(".hoodie/hoodie.properties")).unwrap();
    assert!(
        props.contains("column_stats") && props.contains("partition_stats"),
        "{props}"
    );
    let defs = std::fs::read_to_string(t.base.join(".hoodie/.index_defs/index.json")).unwrap();
    assert!(
        defs.contains("\"_hoodie_commit_time\"") && defs.contains("\"name\""),
        "{defs}"
    );
    assert!(t.table.create_stats_indexes(true, false).await.is_err());
    assert_stats_exact(&t.storage, "create").await;

    t.write(WriteOperation::Upsert, &rows(10..30, 2, "b")).await;
    assert_stats_exact(&t.storage, "upsert").await;
    t.write(WriteOperation::Delete, &rows(0..3, 3, "c")).await;
    assert_stats_exact(&t.storage, "delete").await;
    t.write(WriteOperation::Insert, &rows(40..44, 4, "d")).await;
    assert_stats_exact(&t.storage, "insert").await;
    if table_type == TableType::MergeOnRead {
        t.table.compact().await.unwrap();
        assert_stats_exact(&t.storage, "compaction").await;
    }
    let us: Vec<Row> = rows(100..104, 7, "o")
        .into_iter()
        .filter(|r| r.1 == "us")
        .collect();
    t.write(WriteOperation::InsertOverwrite, &us).await;
    t.write(WriteOperation::Upsert, &rows(100..101, 8, "p"))
        .await;
    assert_stats_exact(&t.storage, "insert overwrite").await;
    t.table
        .delete_partitions(&["region=eu".to_string()])
        .await
        .unwrap();
    t.write(WriteOperation::Upsert, &rows(102..103, 9, "q"))
        .await;
    assert_stats_exact(&t.storage, "delete partition").await;
    let reopened = Table::open(t.storage.clone()).await.unwrap();
    reopened
        .write(WriteOperation::Upsert, vec![batch(&rows(0..2, 10, "r"))])
        .await
        .unwrap();
    assert_stats_exact(&t.storage, "reopened").await;
    assert_peer_agrees(
        &t,
        &[Query::Snapshot],
        &format!("{table_type:?} column stats"),
    )
    .await;
}

#[tokio::test]
async fn test_column_stats_cow_every_write_kind_equal_recomputation() {
    run_every_write_kind(TableType::CopyOnWrite).await;
}

#[tokio::test]
async fn test_column_stats_mor_every_write_kind_equal_recomputation() {
    run_every_write_kind(TableType::MergeOnRead).await;
}

/// A `column_stats` record planted with a wrong maximum (as a later valid log block) is
/// reported by validation, naming the file and column.
#[tokio::test]
async fn test_validate_reports_corrupted_column_stats_record() {
    let t = create(TableType::CopyOnWrite, Layout::Hive).await;
    let done = t.write(WriteOperation::Insert, &rows(0..6, 1, "a")).await;
    t.table.create_stats_indexes(true, false).await.unwrap();
    let mdt = MetadataTable::open(t.storage.clone())
        .await
        .unwrap()
        .unwrap();
    let cs = read_column_stats(t.storage.as_ref(), &mdt).await.unwrap();
    let (key, rec) = cs
        .records()
        .iter()
        .find(|(_, r)| r.column_name.as_deref() == Some("name"))
        .unwrap();
    let mut bad = rec.clone();
    bad.max_value = Some(arbor_mdt::column_stats::StatValue::String("zzz".into()));
    let records = BTreeMap::from([(key.clone(), bad)]);
    let cfg = StatsConfig::load(t.storage.as_ref()).await.unwrap();
    let instant = done.instant.clone();
    for (rel, bytes, _) in delta_files(
        "column_stats",
        &instant,
        &records,
        2,
        "null",
        cfg.schema_json,
    )
    .unwrap()
    {
        let rel = rel.replace(".log.1_", ".log.2_");
        t.storage
            .put(&format!("{MDT_BASE}/{rel}"), bytes)
            .await
            .unwrap();
    }
    let v = arbor_table::validate_indexes(t.storage.clone())
        .await
        .unwrap();
    let text: Vec<String> = v.discrepancies.iter().map(|d| d.to_string()).collect();
    let file = rec.file_name.clone().unwrap();
    assert!(
        text.iter()
            .any(|d| d.contains("column_stats") && d.contains(&file) && d.contains("name")),
        "{text:?}"
    );
}

/// The Spark-written v8 fixture with column and partition stats (and a record index and a
/// secondary index) takes arbor upserts and deletes; validation finds nothing and the new
/// files' stats equal the recomputation.
#[tokio::test]
async fn test_spark_v8_fixture_with_column_stats_takes_writes() {
    spark_fixture_takes_writes("quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip").await;
}

/// The same on the Spark-written v9 fixtures (records with `valueType`, index version V2).
#[tokio::test]
async fn test_spark_v9_fixtures_with_column_stats_take_writes() {
    for zip in [
        "sample_table/cow/v9_txns_simple_meta.zip",
        "sample_table/mor/avro/v9_txns_simple_meta.zip",
        "sample_table/mor/avro/v9_nonpartitioned_rollback.zip",
    ] {
        spark_fixture_takes_writes(zip).await;
    }
}

async fn spark_fixture_takes_writes(zip: &str) {
    let Some(root) = arbor_testkit::fixtures::fixtures_root_or_skip("column stats fixture writes")
    else {
        return;
    };
    let zip = root.join(zip);
    let (_tmp, base) = arbor_testkit::fixtures::unzip_table(&zip);
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let v = arbor_table::validate_indexes(storage.clone())
        .await
        .unwrap();
    assert!(v.discrepancies.is_empty(), "spark: {:?}", v.discrepancies);
    let table = Table::open(storage.clone()).await.unwrap();
    let reader = TableReader::open(storage.clone()).await.unwrap();
    let rows = reader.snapshot(None).await.unwrap();
    let first = rows.first().unwrap().clone();
    let data: Vec<_> = first
        .schema()
        .fields()
        .iter()
        .filter(|f| !f.name().starts_with("_hoodie_"))
        .map(|f| f.name().clone())
        .collect();
    let projected = first
        .project(
            &data
                .iter()
                .map(|n| first.schema().index_of(n).unwrap())
                .collect::<Vec<_>>(),
        )
        .unwrap()
        .slice(0, 1);
    table
        .write(WriteOperation::Upsert, vec![projected.clone()])
        .await
        .unwrap();
    let v = arbor_table::validate_indexes(storage.clone())
        .await
        .unwrap();
    assert!(
        v.discrepancies.is_empty(),
        "{zip:?} after upsert: {:?}",
        v.discrepancies
    );
    table
        .write(WriteOperation::Delete, vec![projected])
        .await
        .unwrap();
    let v = arbor_table::validate_indexes(storage.clone())
        .await
        .unwrap();
    assert!(
        v.discrepancies.is_empty(),
        "{zip:?} after delete: {:?}",
        v.discrepancies
    );
}

/// Partition stats are refused on a non-partitioned table (Hudi keeps none); column stats
/// are created and kept in step.
#[tokio::test]
async fn test_partition_stats_refused_on_non_partitioned_table() {
    let t = create(TableType::CopyOnWrite, Layout::None).await;
    t.write(WriteOperation::Insert, &rows(0..6, 1, "a")).await;
    let before = t.listing().await;
    let err = t.table.create_stats_indexes(false, true).await.unwrap_err();
    assert!(err.to_string().contains("non-partitioned"), "{err}");
    assert_eq!(t.listing().await, before, "a refusal writes nothing");
    t.table.create_stats_indexes(true, false).await.unwrap();
    t.write(WriteOperation::Upsert, &rows(0..3, 2, "b")).await;
    let v = arbor_table::validate_indexes(t.storage.clone())
        .await
        .unwrap();
    assert!(v.discrepancies.is_empty(), "{:?}", v.discrepancies);
    let mdt = MetadataTable::open(t.storage.clone())
        .await
        .unwrap()
        .unwrap();
    let cs = read_column_stats(t.storage.as_ref(), &mdt).await.unwrap();
    assert!(!cs.is_empty());
}
