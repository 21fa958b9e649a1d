//! The write client on merge-on-read tables: the same sequence as copy-on-write (updates and
//! deletes as log files), checked against the model, arbor's reader and hudi-rs 0.5.0; the
//! write stats of log files.

use arbor_table::WriteOperation;
use arbor_timeline::avro::{decode_instant, InstantContent};
use arbor_timeline::config::TableType;
use arbor_timeline::Action;

use super::write_cow::run_scenario;
use super::write_support::*;

#[tokio::test]
async fn test_write_mor_hive_partitioned_sequence_matches_model_and_peer() {
    run_scenario(TableType::MergeOnRead, Layout::Hive).await;
}

#[tokio::test]
async fn test_write_mor_plain_partitioned_sequence_matches_model_and_peer() {
    run_scenario(TableType::MergeOnRead, Layout::Plain).await;
}

#[tokio::test]
async fn test_write_mor_non_partitioned_sequence_matches_model_and_peer() {
    run_scenario(TableType::MergeOnRead, Layout::None).await;
}

#[tokio::test]
async fn test_write_mor_update_and_delete_write_one_log_file_with_spec_stats() {
    let t = create(TableType::MergeOnRead, Layout::None).await;
    let first = t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    assert_eq!(first.action, Action::DeltaCommit);
    let up = t.write(WriteOperation::Upsert, &rows(0..2, 2, "b")).await;
    let del = t.write(WriteOperation::Delete, &rows(3..4, 0, "x")).await;
    assert_eq!(del.deleted, 1);

    let slices = t
        .reader()
        .await
        .view()
        .latest_file_slices(None, None)
        .await
        .unwrap();
    assert_eq!(slices.len(), 1);
    let slice = &slices[0];
    let base = slice.base_file.as_ref().unwrap();
    assert_eq!(base.instant_time, first.instant);
    assert_eq!(slice.log_files.len(), 2, "one log file per deltacommit");
    assert!(slice.log_files.iter().all(|l| l.version == 1));

    let tl = t.timeline().await;
    let inst = tl
        .completed_writes()
        .into_iter()
        .find(|i| i.requested_time == up.instant)
        .unwrap();
    let bytes = tl.read(&inst).await.unwrap();
    let InstantContent::Commit(meta) = decode_instant(&inst, &bytes, "x", false).unwrap() else {
        panic!("not commit metadata");
    };
    let stats: Vec<_> = meta.write_stats().collect();
    assert_eq!(stats.len(), 1);
    let (p, s) = stats[0];
    assert_eq!(p, "");
    let log = format!(".{}_{}.log.1_0-0-0", slice.file_id, up.instant);
    assert_eq!(s.path.as_deref(), Some(log.as_str()));
    assert_eq!(s.log_files.as_deref(), Some(&[log.clone()][..]));
    assert_eq!(s.base_file.as_deref(), Some(base.file_name().as_str()));
    assert_eq!((s.log_version, s.log_offset), (Some(1), Some(0)));
    assert_eq!(s.num_update_writes, Some(2));
    assert_eq!(s.total_write_bytes, s.file_size_in_bytes);
    let size = t.storage.head(&log).await.unwrap().size as i64;
    assert_eq!(s.file_size_in_bytes, Some(size));

    let mut m = Model::default();
    m.upsert(&rows(0..4, 1, "a"));
    m.upsert(&rows(0..2, 2, "b"));
    m.delete(&rows(3..4, 0, "x"));
    assert_snapshot(&t, &m, "update and delete").await;
    assert_peer_agrees(&t, &[Query::Snapshot], "update and delete").await;
}

#[tokio::test]
async fn test_write_mor_inline_compaction_every_two_deltacommits_compacts() {
    let t = create(TableType::MergeOnRead, Layout::Hive).await;
    let table = t
        .table
        .clone()
        .with_write_options(arbor_table::WriteOptions {
            inline_compact_every: Some(2),
            ..arbor_table::WriteOptions::default()
        });
    table
        .write(WriteOperation::Insert, vec![batch(&rows(0..6, 1, "a"))])
        .await
        .unwrap();
    assert!(t
        .completed()
        .await
        .iter()
        .all(|i| i.action != Action::Commit));
    table
        .write(WriteOperation::Upsert, vec![batch(&rows(0..3, 2, "b"))])
        .await
        .unwrap();
    let compactions: Vec<_> = t
        .completed()
        .await
        .into_iter()
        .filter(|i| i.action == Action::Commit)
        .collect();
    assert_eq!(
        compactions.len(),
        1,
        "the second deltacommit triggers a compaction"
    );
    let slices = t
        .reader()
        .await
        .view()
        .latest_file_slices(None, None)
        .await
        .unwrap();
    assert!(slices.iter().all(|s| s.log_files.is_empty()));
    let mut m = Model::default();
    m.upsert(&rows(0..6, 1, "a"));
    m.upsert(&rows(0..3, 2, "b"));
    assert_snapshot(&t, &m, "inline compaction").await;
    assert_peer_agrees(&t, &[Query::Snapshot], "inline compaction").await;
}

/// The record keys of the data blocks of the log files `result` wrote.
async fn logged_keys(t: &TestTable, result: &arbor_table::CommitResult) -> Vec<String> {
    use arbor_format::log::{decode_data_block, read_log_bytes, ReadMode};
    let slices = t
        .reader()
        .await
        .view()
        .latest_file_slices(None, None)
        .await
        .unwrap();
    let mut keys = Vec::new();
    for slice in &slices {
        for path in slice.log_file_paths() {
            if !path.contains(&format!("_{}.log.", result.instant)) {
                continue;
            }
            let bytes = t.storage.get(&path).await.unwrap().0;
            let contents = read_log_bytes(&bytes, &path, ReadMode::Strict).unwrap();
            for block in &contents.blocks {
                for b in decode_data_block(block, &path, None).unwrap_or_default() {
                    let col = b.column_by_name("_hoodie_record_key").unwrap();
                    let col = col
                        .as_any()
                        .downcast_ref::<arrow::array::StringArray>()
                        .unwrap();
                    keys.extend(col.iter().flatten().map(str::to_string));
                }
            }
        }
    }
    keys.sort();
    keys
}

#[tokio::test]
async fn test_write_mor_stale_upsert_writes_no_log_record_and_peer_incremental_agrees() {
    let t = create(TableType::MergeOnRead, Layout::None).await;
    let first = t.write(WriteOperation::Insert, &rows(0..4, 5, "a")).await;
    let mut model = Model::default();
    model.upsert(&rows(0..4, 5, "a"));

    // An insert packed into the (base-only) file group holding its key with a greater
    // ordering value: dropped, nothing written.
    let ins = t
        .write(WriteOperation::Insert, &rows(1..2, 2, "late"))
        .await;
    assert_eq!(
        (ins.inserted, ins.skipped_stale, ins.files_written),
        (0, 1, 0)
    );

    // k0000 and k0001 arrive late (ts 3 < 5), k0002 is newer, k0003 ties (the newer wins).
    let mut input = rows(0..2, 3, "late");
    input.extend(rows(2..3, 9, "b"));
    input.extend(rows(3..4, 5, "tie"));
    let up = t.write(WriteOperation::Upsert, &input).await;
    model.upsert(&input);
    assert_eq!(
        (up.inserted, up.updated, up.skipped_stale),
        (0, 2, 2),
        "stale records count neither as inserts nor as updates"
    );
    assert_eq!(
        logged_keys(&t, &up).await,
        vec!["k0002".to_string(), "k0003".to_string()],
        "the log file holds no record of the stale keys"
    );

    // Only stale records: an empty deltacommit, no log file.
    let stale = t
        .write(WriteOperation::Upsert, &rows(0..1, 1, "late"))
        .await;
    assert_eq!(stale.action, Action::DeltaCommit);
    assert_eq!(
        (
            stale.inserted,
            stale.updated,
            stale.skipped_stale,
            stale.files_written
        ),
        (0, 0, 1, 0)
    );
    assert!(logged_keys(&t, &stale).await.is_empty());

    assert_snapshot(&t, &model, "stale upserts").await;
    let c = |r: &arbor_table::CommitResult| r.completion_time.to_string();
    assert_peer_agrees(
        &t,
        &[
            Query::Snapshot,
            Query::Incremental(c(&first), c(&ins)),
            Query::Incremental(c(&ins), c(&up)),
            Query::Incremental(c(&up), c(&stale)),
            Query::Incremental(c(&first), c(&stale)),
        ],
        "stale upserts",
    )
    .await;
    let reader = t.reader().await;
    let incr = rows_of(
        &reader
            .incremental(Some(&ins.completion_time), Some(&up.completion_time))
            .await
            .unwrap(),
    );
    let ids: Vec<&str> = incr.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(ids, vec!["k0002", "k0003"]);
}

/// The record keys of the latest slices' base files, and how many log files those slices hold.
async fn keys_in_base_files(t: &TestTable) -> (std::collections::BTreeSet<String>, usize) {
    let slices = t
        .reader()
        .await
        .view()
        .latest_file_slices(None, None)
        .await
        .unwrap();
    let mut keys = std::collections::BTreeSet::new();
    let mut logs = 0;
    for slice in &slices {
        logs += slice.log_files.len();
        let Some(base) = &slice.base_file else {
            continue;
        };
        let key = arbor_fsview::slice::join(&slice.partition, &base.file_name());
        let batches = arbor_format::base::read_base_file(
            t.storage.clone(),
            &key,
            None,
            Some(&["_hoodie_record_key".to_string()]),
        )
        .await
        .unwrap();
        for b in &batches {
            let col = b
                .column(0)
                .as_any()
                .downcast_ref::<arrow::array::StringArray>()
                .unwrap();
            keys.extend(col.iter().flatten().map(str::to_string));
        }
    }
    (keys, logs)
}

/// Java's default indexes (SIMPLE, BLOOM) find keys in base files only, so a new key written
/// into a log file would be written again by Spark's next upsert. arbor packs inserts only into
/// base-only slices, rewritten as a new base file; slices with log files take updates only.
#[tokio::test]
async fn test_write_mor_new_keys_always_land_in_base_files() {
    let t = create(TableType::MergeOnRead, Layout::None).await;
    let mut m = Model::default();
    let mut steps: Vec<(WriteOperation, Vec<Row>)> =
        vec![(WriteOperation::Insert, rows(0..4, 1, "a"))];
    // An update and new keys into the base-only group: one new base file, no log.
    let mut mixed = rows(1..2, 2, "b");
    mixed.extend(rows(4..6, 2, "b"));
    steps.push((WriteOperation::Upsert, mixed));
    // An update alone: a log file.
    steps.push((WriteOperation::Upsert, rows(2..3, 3, "c")));
    // New keys while the only group has a log file: a new group's base file.
    steps.push((WriteOperation::Upsert, rows(6..9, 4, "d")));
    steps.push((WriteOperation::Insert, rows(9..10, 5, "e")));
    let mut logs_seen = Vec::new();
    for (i, (op, batch)) in steps.iter().enumerate() {
        t.write(*op, batch).await;
        m.upsert(batch);
        let (keys, logs) = keys_in_base_files(&t).await;
        let expected: std::collections::BTreeSet<String> = m.rows.keys().cloned().collect();
        assert_eq!(keys, expected, "step {i}: every key in a base file");
        logs_seen.push(logs);
        assert_snapshot(&t, &m, &format!("step {i}")).await;
    }
    assert_eq!(logs_seen[1], 0, "inserts into a base-only slice rewrite it");
    assert_eq!(logs_seen[2], 1, "an update alone appends a log file");
    assert_eq!(logs_seen[3], 1, "a slice with a log file takes no inserts");
    assert_peer_agrees(&t, &[Query::Snapshot], "new keys").await;
}
