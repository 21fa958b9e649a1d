//! The write client on copy-on-write tables: insert, upsert, delete, insert overwrite and
//! delete partition, checked after every commit against an in-memory model, arbor's reader and
//! the peer reader (hudi-rs 0.5.0); and the commit metadata a COW write records.

use arbor_table::WriteOperation;
use arbor_timeline::avro::{decode_instant, InstantContent, SCHEMA_KEY};
use arbor_timeline::config::TableType;
use arbor_timeline::Action;

use super::write_support::*;

/// Runs the standard sequence on a new table and checks every step; returns the table.
pub async fn run_scenario(table_type: TableType, layout: Layout) -> TestTable {
    let t = create(table_type, layout).await;
    let partitioned = layout != Layout::None;
    let mut m = Model::default();
    let snap = [Query::Snapshot];

    let r1 = rows(0..20, 1, "a");
    let res = t.write(WriteOperation::Insert, &r1).await;
    m.upsert(&r1);
    assert_eq!((res.inserted, res.updated, res.deleted), (20, 0, 0));
    assert_snapshot(&t, &m, "insert").await;
    assert_peer_agrees(&t, &snap, "insert").await;

    let mut r2 = rows(0..6, 2, "b");
    r2.extend(rows(20..26, 2, "b"));
    let res = t.write(WriteOperation::Upsert, &r2).await;
    m.upsert(&r2);
    assert_eq!((res.inserted, res.updated), (6, 6));
    assert_snapshot(&t, &m, "upsert").await;
    assert_peer_agrees(&t, &snap, "upsert").await;

    // Event-time ordering: records older than the stored ones do not win.
    let r3 = rows(6..8, 0, "stale");
    let stale = t.write(WriteOperation::Upsert, &r3).await;
    m.upsert(&r3);
    assert_snapshot(&t, &m, "stale upsert").await;
    assert_peer_agrees(&t, &snap, "stale upsert").await;

    let r4 = rows(8..11, 9, "gone");
    let res = t.write(WriteOperation::Delete, &r4).await;
    m.delete(&r4);
    assert_eq!(res.deleted, 3);
    assert_snapshot(&t, &m, "delete").await;
    assert_peer_agrees(&t, &snap, "delete").await;

    let r5: Vec<Row> = rows(100..106, 1, "o")
        .into_iter()
        .filter(|r| r.1 == "eu")
        .collect();
    let res = t.write(WriteOperation::InsertOverwrite, &r5).await;
    assert_eq!(res.action, Action::ReplaceCommit);
    assert!(res.file_groups_replaced >= 1);
    m.overwrite(&r5, partitioned);
    assert_snapshot(&t, &m, "insert overwrite").await;
    assert_peer_agrees(&t, &snap, "insert overwrite").await;

    let res = t
        .table
        .delete_partitions(&[t.partition("us")])
        .await
        .unwrap();
    assert_eq!(res.action, Action::ReplaceCommit);
    if partitioned {
        m.drop_region("us");
    } else {
        m.rows.clear();
    }
    assert_snapshot(&t, &m, "delete partition").await;
    assert_peer_agrees(&t, &snap, "delete partition").await;

    let r7 = rows(200..204, 1, "c");
    t.write(WriteOperation::BulkInsert, &r7).await;
    m.upsert(&r7);
    assert_snapshot(&t, &m, "bulk insert").await;

    // Every instant: time travel, and the incremental range it completed in.
    let completed = t.completed().await;
    let mut queries = vec![Query::Snapshot];
    let mut prev: Option<String> = None;
    for i in &completed {
        queries.push(Query::AsOf(i.requested_time.to_string()));
        let c = i.completion_time.as_ref().unwrap().to_string();
        // Known reader divergence (not a writer matter): for a merge-on-read slice whose log
        // holds records that lose to the base under event-time ordering, hudi-rs 0.5.0's
        // incremental query returns the losing log records, arbor's (like Java's) returns the
        // merged state, i.e. nothing. That one range is left out here.
        let skip = table_type == TableType::MergeOnRead && i.requested_time == stale.instant;
        if let (Some(p), false) = (prev, skip) {
            queries.push(Query::Incremental(p, c.clone()));
        }
        prev = Some(c);
    }
    assert_peer_agrees(&t, &queries, "the whole sequence").await;
    t
}

#[tokio::test]
async fn test_write_cow_hive_partitioned_sequence_matches_model_and_peer() {
    run_scenario(TableType::CopyOnWrite, Layout::Hive).await;
}

#[tokio::test]
async fn test_write_cow_plain_partitioned_sequence_matches_model_and_peer() {
    run_scenario(TableType::CopyOnWrite, Layout::Plain).await;
}

#[tokio::test]
async fn test_write_cow_non_partitioned_sequence_matches_model_and_peer() {
    run_scenario(TableType::CopyOnWrite, Layout::None).await;
}

#[tokio::test]
async fn test_write_cow_upsert_rewrites_group_with_spec_write_stats() {
    let t = create(TableType::CopyOnWrite, Layout::Hive).await;
    let first = t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    let second = t.write(WriteOperation::Upsert, &rows(0..2, 2, "b")).await;
    assert_eq!(second.action, Action::Commit);
    let tl = t.timeline().await;
    let inst = tl
        .completed_writes()
        .into_iter()
        .find(|i| i.requested_time == second.instant)
        .unwrap();
    let bytes = tl.read(&inst).await.unwrap();
    let InstantContent::Commit(meta) = decode_instant(&inst, &bytes, "x", false).unwrap() else {
        panic!("not commit metadata");
    };
    assert!(meta.extra(SCHEMA_KEY).unwrap().contains("t_record"));
    assert_eq!(meta.operation_type.as_deref(), Some("UPSERT"));
    let stats: Vec<_> = meta.write_stats().collect();
    // Keys 0 (us) and 1 (eu): one rewritten file group per partition.
    assert_eq!(stats.len(), 2);
    for (p, s) in stats {
        assert!(p == "region=us" || p == "region=eu");
        assert_eq!(s.prev_commit.as_deref(), Some(first.instant.as_str()));
        assert_eq!(s.num_update_writes, Some(1));
        assert_eq!(s.num_writes, Some(2));
        assert_eq!(s.total_write_bytes, s.file_size_in_bytes);
        let path = s.path.as_deref().unwrap();
        assert!(path.starts_with(p) && path.ends_with(&format!("_{}.parquet", second.instant)));
        let size = t.storage.head(path).await.unwrap().size as i64;
        assert_eq!(s.file_size_in_bytes, Some(size));
        assert_eq!(s.partition_path.as_deref(), Some(p));
    }
    // Untouched rows keep their original commit time.
    let reader = t.reader().await;
    let batches = reader.snapshot(None).await.unwrap();
    let mut times = std::collections::BTreeMap::new();
    for b in &batches {
        use arrow::array::AsArray;
        let k = b
            .column_by_name("_hoodie_record_key")
            .unwrap()
            .as_string::<i32>();
        let c = b
            .column_by_name("_hoodie_commit_time")
            .unwrap()
            .as_string::<i32>();
        for i in 0..b.num_rows() {
            times.insert(k.value(i).to_string(), c.value(i).to_string());
        }
    }
    assert_eq!(times["k0000"], second.instant.to_string());
    assert_eq!(times["k0003"], first.instant.to_string());
}

#[tokio::test]
async fn test_write_cow_insert_packs_small_files_and_splits_large_input() {
    let t = create(TableType::CopyOnWrite, Layout::None).await;
    t.write(WriteOperation::Insert, &rows(0..5, 1, "a")).await;
    t.write(WriteOperation::Insert, &rows(5..10, 1, "a")).await;
    let slices = t
        .reader()
        .await
        .view()
        .latest_file_slices(None, None)
        .await
        .unwrap();
    assert_eq!(
        slices.len(),
        1,
        "the second insert is packed into the small file"
    );

    let tiny = arbor_table::WriteOptions {
        max_file_size: 1,
        ..arbor_table::WriteOptions::default()
    };
    let t2 = create(TableType::CopyOnWrite, Layout::None).await;
    let table = t2.table.clone().with_write_options(tiny);
    table
        .write(WriteOperation::BulkInsert, vec![batch(&rows(0..3, 1, "a"))])
        .await
        .unwrap();
    let slices = t2
        .reader()
        .await
        .view()
        .latest_file_slices(None, None)
        .await
        .unwrap();
    assert_eq!(
        slices.len(),
        3,
        "max_file_size splits the input into file groups"
    );
}

#[tokio::test]
async fn test_write_cow_reopened_table_keeps_writing() {
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    let reopened = arbor_table::Table::open(t.storage.clone()).await.unwrap();
    assert_eq!(reopened.schema(), t.table.schema());
    reopened
        .write(WriteOperation::Upsert, vec![batch(&rows(0..1, 5, "z"))])
        .await
        .unwrap();
    let mut m = Model::default();
    m.upsert(&rows(0..4, 1, "a"));
    m.upsert(&rows(0..1, 5, "z"));
    assert_snapshot(&t, &m, "reopen").await;
}
