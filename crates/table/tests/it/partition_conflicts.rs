//! Partition-level conflicts (issue 14, item 3): a write that lands in a partition a concurrent
//! `DELETE_PARTITION` (a TTL run, `delete_partitions`) deletes conflicts, whichever of the two
//! commits first, even when the write only created new file groups there (Java Hudi compares
//! file ids only and lets both commit). Writes to other partitions, and deletes of other
//! partitions, still commit side by side.
//!
//! Interleavings are deterministic: a write's two phases (`Table::prepare`, `Table::commit`)
//! go around a delete; a delete's plan and commit go around a write through
//! [`CommitWhileDeleteInflight`], a table lock that runs the other writer's commit just before
//! the delete takes the lock for its commit point.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbor_storage::{Lease, LockProvider, LockResult, ObjectStoreLockProvider, Storage};
use arbor_table::read::TableReader;
use arbor_table::{CommitResult, Table, TableError, WriteOperation, WriteOptions};
use arbor_testkit::{assert_peer_snapshot_matches, fixtures_root_or_skip, unzip_table};
use arbor_timeline::avro::{decode_instant, InstantContent, WriteOperationType};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::paths::LOCK_DIR;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{Action, ActiveTimeline, State, TableConfig, TableLayout};
use arrow::array::{ArrayRef, RecordBatch, StringArray};
use futures::future::BoxFuture;

use super::write_support::*;

type Outcome = Result<CommitResult, TableError>;

/// The default table lock (object-store lock under `.hoodie/.locks`), which, the first time it
/// is asked for while a `replacecommit` is inflight (a delete between its plan and its commit
/// point) and a hook is armed, first runs the hook (another writer's commit, with the lock
/// free) and keeps its outcome. Test-only: nothing in the library knows of it.
struct CommitWhileDeleteInflight {
    inner: ObjectStoreLockProvider,
    storage: Arc<dyn Storage>,
    hook: tokio::sync::Mutex<Option<BoxFuture<'static, Outcome>>>,
    outcome: Mutex<Option<Outcome>>,
}

impl std::fmt::Debug for CommitWhileDeleteInflight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommitWhileDeleteInflight")
    }
}

impl CommitWhileDeleteInflight {
    fn new(storage: Arc<dyn Storage>, hook: BoxFuture<'static, Outcome>) -> Arc<Self> {
        Arc::new(CommitWhileDeleteInflight {
            inner: ObjectStoreLockProvider::new(storage.clone(), LOCK_DIR),
            storage,
            hook: tokio::sync::Mutex::new(Some(hook)),
            outcome: Mutex::new(None),
        })
    }

    /// The hook's outcome; panics if it never ran.
    fn take_outcome(&self) -> Outcome {
        self.outcome
            .lock()
            .unwrap()
            .take()
            .expect("the hook never ran: no replacecommit was inflight at a lock request")
    }
}

async fn load_timeline(storage: &Arc<dyn Storage>) -> ActiveTimeline {
    let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR)
        .await
        .unwrap();
    let layout = TableLayout::from_config(DEFAULT_META_DIR, &config).unwrap();
    ActiveTimeline::load(storage.clone(), layout).await.unwrap()
}

#[async_trait::async_trait]
impl LockProvider for CommitWhileDeleteInflight {
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease> {
        let mut hook = self.hook.lock().await;
        if hook.is_some() {
            let inflight = load_timeline(&self.storage)
                .await
                .pending()
                .into_iter()
                .any(|i| i.action == Action::ReplaceCommit && i.state == State::Inflight);
            if inflight {
                if let Some(h) = hook.take() {
                    let r = h.await;
                    *self.outcome.lock().unwrap() = Some(r);
                }
            }
        }
        drop(hook);
        self.inner.acquire(lock, lease, timeout).await
    }

    async fn renew(&self, held: &Lease, lease: Duration) -> LockResult<Lease> {
        self.inner.renew(held, lease).await
    }

    async fn release(&self, held: &Lease) -> LockResult<()> {
        self.inner.release(held).await
    }
}

const CASES: [(TableType, Layout); 4] = [
    (TableType::CopyOnWrite, Layout::Hive),
    (TableType::CopyOnWrite, Layout::Plain),
    (TableType::MergeOnRead, Layout::Hive),
    (TableType::MergeOnRead, Layout::Plain),
];

/// The initial rows: k0000..k0007, even ids in `us`, odd ones in `eu`.
fn initial() -> Vec<Row> {
    rows(0..8, 1, "a")
}

fn in_region(rows: Vec<Row>, region: &str) -> Vec<Row> {
    rows.into_iter().filter(|r| r.1 == region).collect()
}

/// A table with the initial rows, and a second handle on it that writes new keys into new file
/// groups only (no small-file packing).
async fn setup(table_type: TableType, layout: Layout) -> (TestTable, Table) {
    let t = create(table_type, layout).await;
    t.write(WriteOperation::Insert, &initial()).await;
    let writer = Table::open(t.storage.clone())
        .await
        .unwrap()
        .with_write_options(WriteOptions {
            small_file_limit: 0,
            ..WriteOptions::default()
        });
    (t, writer)
}

/// The file ids of the latest slices of `partition`.
async fn file_ids(storage: &Arc<dyn Storage>, partition: &str) -> BTreeSet<String> {
    let reader = TableReader::open_view(storage.clone()).await.unwrap();
    reader
        .view()
        .latest_file_slices(Some(partition), None)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.file_id)
        .collect()
}

/// `err` is a `CommitConflict` lost by `loser` against `winner`, naming exactly `partition`.
/// Returns its `file_groups`.
fn assert_partition_conflict(
    err: &TableError,
    loser: &str,
    winner: &str,
    partition: &str,
) -> String {
    match err {
        TableError::CommitConflict {
            instant,
            other,
            file_groups,
            partitions,
        } => {
            assert_eq!(instant, loser, "{err}");
            assert_eq!(other, winner, "{err}");
            assert_eq!(partitions, partition, "{err}");
            let text = err.to_string();
            assert!(
                text.contains(&format!("partition {partition}"))
                    && text.contains("DELETE_PARTITION"),
                "{text}"
            );
            file_groups.clone()
        }
        e => panic!("expected CommitConflict naming {partition}, got {e:?}"),
    }
}

/// Nothing of `loser` is left: no timeline file but its rollback's, no data file.
async fn assert_nothing_left_of(t: &TestTable, loser: &str) {
    let left: Vec<String> = t
        .listing()
        .await
        .into_iter()
        .filter(|k| k.contains(loser) && !k.contains(".rollback") && !k.contains("metadata/"))
        .collect();
    assert!(left.is_empty(), "left of {loser}: {left:?}");
    assert!(
        t.completed()
            .await
            .iter()
            .all(|i| i.requested_time.to_string() != loser),
        "{loser} completed"
    );
}

/// The newest completed replacecommit is a DELETE_PARTITION of exactly `partitions`.
async fn assert_last_delete_names(t: &TestTable, partitions: &[String]) {
    let tl = t.timeline().await;
    let last = tl
        .completed_writes()
        .into_iter()
        .rfind(|i| i.action == Action::ReplaceCommit)
        .unwrap();
    let bytes = tl.read(&last).await.unwrap();
    let key = tl.key_of(&last).unwrap();
    match decode_instant(&last, &bytes, &key, false).unwrap() {
        InstantContent::ReplaceCommit(m) => {
            assert_eq!(
                m.operation_type(),
                Some(WriteOperationType::DeletePartition)
            );
            let named: Vec<String> = m
                .partition_to_replace_file_ids
                .unwrap_or_default()
                .into_keys()
                .collect();
            assert_eq!(named, partitions);
        }
        c => panic!("{c:?}"),
    }
}

/// 1. A write prepared into `eu` (new file groups only), then `eu` deleted: the write's commit
///    fails naming `eu`, the table reads as after the delete (arbor and hudi-rs).
#[tokio::test]
async fn test_insert_into_partition_deleted_since_its_plan_conflicts() {
    for (table_type, layout) in CASES {
        let (t, writer) = setup(table_type, layout).await;
        let eu = t.partition("eu");
        let before = file_ids(&t.storage, &eu).await;
        let new_rows = in_region(rows(100..108, 2, "n"), "eu");
        let prepared = writer
            .prepare(WriteOperation::Insert, vec![batch(&new_rows)])
            .await
            .unwrap();
        assert!(
            prepared
                .file_groups()
                .iter()
                .all(|(p, f)| p == &eu && !before.contains(f)),
            "the insert must only create new file groups in {eu}: {:?} vs {before:?}",
            prepared.file_groups()
        );
        let loser = prepared.instant().to_string();
        let delete = t
            .table
            .delete_partitions(std::slice::from_ref(&eu))
            .await
            .unwrap();
        let err = writer.commit(prepared).await.unwrap_err();
        let groups = assert_partition_conflict(&err, &loser, &delete.instant.to_string(), &eu);
        assert!(groups.is_empty(), "no shared file group: {groups}");
        let mut m = Model::default();
        m.upsert(&initial());
        m.drop_region("eu");
        let step = format!("{table_type:?} {layout:?}: insert lost to delete");
        assert_snapshot(&t, &m, &step).await;
        assert_nothing_left_of(&t, &loser).await;
        assert_last_delete_names(&t, std::slice::from_ref(&eu)).await;
        assert_peer_agrees(&t, &[Query::Snapshot], &step).await;
    }
}

/// 2. A delete of `eu` plans, then a write of new file groups into `eu` commits, then the
///    delete reaches its commit point: the delete fails naming `eu`, the table reads as after
///    the write (arbor and hudi-rs).
#[tokio::test]
async fn test_delete_of_partition_written_since_its_plan_conflicts() {
    for (table_type, layout) in CASES {
        let (t, writer) = setup(table_type, layout).await;
        let eu = t.partition("eu");
        let new_rows = in_region(rows(100..108, 2, "n"), "eu");
        let prepared = writer
            .prepare(WriteOperation::Insert, vec![batch(&new_rows)])
            .await
            .unwrap();
        let winner = prepared.instant().to_string();
        let lock = CommitWhileDeleteInflight::new(
            t.storage.clone(),
            Box::pin(async move { writer.commit(prepared).await }),
        );
        let deleter = Table::open(t.storage.clone())
            .await
            .unwrap()
            .with_lock_provider(lock.clone());
        let err = deleter
            .delete_partitions(std::slice::from_ref(&eu))
            .await
            .unwrap_err();
        let write = lock.take_outcome().unwrap();
        assert_eq!(write.instant.to_string(), winner);
        let loser = match &err {
            TableError::CommitConflict { instant, .. } => instant.clone(),
            e => panic!("expected CommitConflict, got {e:?}"),
        };
        assert_partition_conflict(&err, &loser, &winner, &eu);
        let mut m = Model::default();
        m.upsert(&initial());
        m.upsert(&new_rows);
        let step = format!("{table_type:?} {layout:?}: delete lost to insert");
        assert_snapshot(&t, &m, &step).await;
        assert_nothing_left_of(&t, &loser).await;
        assert!(t
            .completed()
            .await
            .iter()
            .all(|i| i.action != Action::ReplaceCommit));
        assert_peer_agrees(&t, &[Query::Snapshot], &step).await;
        // The table stays writable: the delete, retried, now replaces the new file groups too.
        t.table
            .delete_partitions(std::slice::from_ref(&eu))
            .await
            .unwrap();
        m.drop_region("eu");
        assert_snapshot(&t, &m, &format!("{step}, then retried")).await;
    }
}

/// 3. Writes into `us` around a delete of `eu`, and a delete of `eu` around a write into `us`:
///    every one commits.
#[tokio::test]
async fn test_writes_and_deletes_of_other_partitions_do_not_conflict() {
    for (table_type, layout) in CASES {
        let (t, writer) = setup(table_type, layout).await;
        let (us, eu) = (t.partition("us"), t.partition("eu"));
        let mut m = Model::default();
        m.upsert(&initial());
        // A write prepared into us (a new file group and an update of an existing one), eu
        // deleted, the write commits.
        let us_rows: Vec<Row> = in_region(rows(0..2, 3, "u"), "us")
            .into_iter()
            .chain(in_region(rows(200..202, 3, "u"), "us"))
            .collect();
        let prepared = writer
            .prepare(WriteOperation::Upsert, vec![batch(&us_rows)])
            .await
            .unwrap();
        assert!(prepared.file_groups().iter().all(|(p, _)| p == &us));
        t.table
            .delete_partitions(std::slice::from_ref(&eu))
            .await
            .unwrap();
        writer.commit(prepared).await.unwrap();
        m.drop_region("eu");
        m.upsert(&us_rows);
        assert_snapshot(&t, &m, "write into us around a delete of eu").await;
        // eu written again; a delete of eu plans, a write into us commits in between, the
        // delete commits.
        t.write(
            WriteOperation::Insert,
            &in_region(rows(300..304, 4, "e"), "eu"),
        )
        .await;
        m.upsert(&in_region(rows(300..304, 4, "e"), "eu"));
        let more_us = in_region(rows(400..404, 4, "v"), "us");
        let prepared = writer
            .prepare(WriteOperation::Insert, vec![batch(&more_us)])
            .await
            .unwrap();
        let lock = CommitWhileDeleteInflight::new(
            t.storage.clone(),
            Box::pin(async move { writer.commit(prepared).await }),
        );
        let deleter = Table::open(t.storage.clone())
            .await
            .unwrap()
            .with_lock_provider(lock.clone());
        let delete = deleter
            .delete_partitions(std::slice::from_ref(&eu))
            .await
            .unwrap();
        let write = lock.take_outcome().unwrap();
        assert!(delete.completion_time > write.completion_time);
        m.upsert(&more_us);
        m.drop_region("eu");
        let step = format!("{table_type:?} {layout:?}: delete of eu around a write into us");
        assert_snapshot(&t, &m, &step).await;
        assert_peer_agrees(&t, &[Query::Snapshot], &step).await;
    }
}

/// 4. An upsert into `eu` (existing file groups) around a delete of `eu` conflicts as before,
///    now naming the partition as well as the shared file groups.
#[tokio::test]
async fn test_upsert_into_deleted_partition_conflicts_naming_it() {
    for (table_type, layout) in CASES {
        let (t, writer) = setup(table_type, layout).await;
        let eu = t.partition("eu");
        let before = file_ids(&t.storage, &eu).await;
        let updates = in_region(rows(0..4, 5, "x"), "eu");
        let prepared = writer
            .prepare(WriteOperation::Upsert, vec![batch(&updates)])
            .await
            .unwrap();
        assert!(prepared
            .file_groups()
            .iter()
            .any(|(p, f)| p == &eu && before.contains(f)));
        let loser = prepared.instant().to_string();
        let delete = t
            .table
            .delete_partitions(std::slice::from_ref(&eu))
            .await
            .unwrap();
        let err = writer.commit(prepared).await.unwrap_err();
        let groups = assert_partition_conflict(&err, &loser, &delete.instant.to_string(), &eu);
        assert!(
            before.iter().any(|f| groups.contains(f.as_str())),
            "{groups} names none of {before:?}"
        );
        let mut m = Model::default();
        m.upsert(&initial());
        m.drop_region("eu");
        assert_snapshot(&t, &m, "upsert lost to delete").await;
        assert_nothing_left_of(&t, &loser).await;
    }
}

/// A copy of `batch` whose `column` (a string column) holds `prefix` + row number.
fn with_new_keys(batch: &RecordBatch, column: &str, prefix: &str) -> RecordBatch {
    let schema = batch.schema();
    let idx = schema.index_of(column).unwrap();
    let keys: ArrayRef = Arc::new(StringArray::from_iter_values(
        (0..batch.num_rows()).map(|i| format!("{prefix}{i}")),
    ));
    let mut cols = batch.columns().to_vec();
    cols[idx] = keys;
    RecordBatch::try_new(schema, cols).unwrap()
}

/// The data columns (meta columns dropped) of the rows of `partition`, as one batch.
fn data_rows_of(batches: &[RecordBatch], partition: &str) -> RecordBatch {
    let schema = batches[0].schema();
    let all = arrow::compute::concat_batches(&schema, batches).unwrap();
    let paths = all
        .column_by_name("_hoodie_partition_path")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    let mask: arrow::array::BooleanArray =
        paths.iter().map(|p| Some(p == Some(partition))).collect();
    let rows = arrow::compute::filter_record_batch(&all, &mask).unwrap();
    let keep: Vec<usize> = (0..rows.num_columns())
        .filter(|&i| !rows.schema().field(i).name().starts_with("_hoodie_"))
        .collect();
    rows.project(&keep).unwrap()
}

async fn snapshot_of(base: &Path) -> (arrow::datatypes::SchemaRef, Vec<RecordBatch>) {
    let storage: Arc<dyn Storage> =
        Arc::new(arbor_storage::ObjectStoreStorage::local(base).unwrap());
    let reader = TableReader::open(storage).await.unwrap();
    let batches = reader.snapshot(None).await.unwrap();
    (reader.schema().clone(), batches)
}

fn count(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

/// Both orders on copies of Spark-written partitioned tables (COW and MOR, version 9, with a
/// metadata table, record index and secondary indexes): an insert of new keys into a
/// partition loses to a delete of it, and a delete of it loses to such an insert; hudi-rs
/// reads what arbor reads after each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_partition_conflicts_on_spark_fixture_tables() {
    let Some(root) = fixtures_root_or_skip("partition conflicts on Spark fixture tables") else {
        return;
    };
    let python = crate::support_tables::peer_python();
    for fixture in [
        "sample_table/cow/v9_txns_simple_meta.zip",
        "sample_table/mor/avro/v9_txns_simple_meta.zip",
    ] {
        for delete_first in [true, false] {
            let step = |s: &str| format!("{fixture} (delete first: {delete_first}): {s}");
            let (_tmp, base) = unzip_table(&root.join(fixture));
            let storage: Arc<dyn Storage> =
                Arc::new(arbor_storage::ObjectStoreStorage::local(&base).unwrap());
            let (_, batches) = snapshot_of(&base).await;
            let start = count(&batches);
            let paths = batches[0]
                .column_by_name("_hoodie_partition_path")
                .unwrap()
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            let part = paths.value(0).to_string();
            let in_part = data_rows_of(&batches, &part);
            let new_rows = with_new_keys(&in_part, "txn_id", "TXN-CONFLICT-");
            let writer = Table::open(storage.clone())
                .await
                .unwrap()
                .with_write_options(WriteOptions {
                    small_file_limit: 0,
                    ..WriteOptions::default()
                });
            let prepared = writer
                .prepare(WriteOperation::Insert, vec![new_rows.clone()])
                .await
                .unwrap();
            let write_instant = prepared.instant().to_string();
            let expected = if delete_first {
                let table = Table::open(storage.clone()).await.unwrap();
                let delete = table
                    .delete_partitions(std::slice::from_ref(&part))
                    .await
                    .unwrap();
                let err = writer.commit(prepared).await.unwrap_err();
                assert_partition_conflict(&err, &write_instant, &delete.instant.to_string(), &part);
                start - in_part.num_rows()
            } else {
                let lock = CommitWhileDeleteInflight::new(
                    storage.clone(),
                    Box::pin(async move { writer.commit(prepared).await }),
                );
                let deleter = Table::open(storage.clone())
                    .await
                    .unwrap()
                    .with_lock_provider(lock.clone());
                let err = deleter
                    .delete_partitions(std::slice::from_ref(&part))
                    .await
                    .unwrap_err();
                lock.take_outcome().unwrap();
                let loser = match &err {
                    TableError::CommitConflict { instant, .. } => instant.clone(),
                    e => panic!("{}: expected CommitConflict, got {e:?}", step("delete")),
                };
                assert_partition_conflict(&err, &loser, &write_instant, &part);
                start + new_rows.num_rows()
            };
            let (schema, after) = snapshot_of(&base).await;
            assert_eq!(count(&after), expected, "{}", step("rows"));
            if let Some(python) = &python {
                assert_peer_snapshot_matches(python, &base, &schema, &after, &step("conflict"));
            }
        }
    }
}
