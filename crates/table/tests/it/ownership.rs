//! Ownership of pending instants: a writer whose heartbeat lapsed and whose instant another writer
//! rolled back can neither commit nor resurrect the instant; a live writer's heartbeat is renewed
//! while it waits; compaction through `Table::compact` is serialised by the table lock; corrupt
//! compaction plans are refused before any of their fields becomes a storage key.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arbor_storage::{ListPage, ObjectMeta, Storage, StorageError, Version};
use arbor_table::write::compaction::run_compaction;
use arbor_table::write::compaction::schedule_compaction;
use arbor_table::{Table, TableError, WriteOperation, WriteOptions};
use arbor_timeline::avro::{decode, encode_instant_for, HoodieCompactionPlan, InstantContent};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{Action, InstantTime, InstantTimeGenerator, State, TableConfig, TableLayout};
use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Notify;

use super::write_support::*;

/// A storage wrapper that can cut a writer off from its heartbeat (puts under
/// `.hoodie/.heartbeat` fail) and hold the creation of the next base file until released.
#[derive(Debug)]
struct Gated {
    inner: Arc<dyn Storage>,
    freeze_heartbeats: AtomicBool,
    hold_base_file: AtomicBool,
    reached: Notify,
    release: Notify,
}

impl Gated {
    fn new(inner: Arc<dyn Storage>) -> Arc<Gated> {
        Arc::new(Gated {
            inner,
            freeze_heartbeats: AtomicBool::new(false),
            hold_base_file: AtomicBool::new(false),
            reached: Notify::new(),
            release: Notify::new(),
        })
    }
}

impl fmt::Display for Gated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gated({})", self.inner)
    }
}

#[async_trait]
impl Storage for Gated {
    async fn get(&self, key: &str) -> arbor_storage::Result<(Bytes, ObjectMeta)> {
        self.inner.get(key).await
    }
    async fn get_range(&self, key: &str, range: Range<u64>) -> arbor_storage::Result<Bytes> {
        self.inner.get_range(key, range).await
    }
    async fn head(&self, key: &str) -> arbor_storage::Result<ObjectMeta> {
        self.inner.head(key).await
    }
    async fn put(&self, key: &str, data: Bytes) -> arbor_storage::Result<Version> {
        if key.starts_with(".hoodie/.heartbeat") && self.freeze_heartbeats.load(Ordering::SeqCst) {
            return Err(StorageError::NotSupported {
                operation: "put",
                backend: "gated (heartbeats frozen)".into(),
            });
        }
        self.inner.put(key, data).await
    }
    async fn put_if_absent(&self, key: &str, data: Bytes) -> arbor_storage::Result<Version> {
        if key.ends_with(".parquet") && self.hold_base_file.swap(false, Ordering::SeqCst) {
            self.reached.notify_one();
            self.release.notified().await;
        }
        self.inner.put_if_absent(key, data).await
    }
    async fn put_if_match(
        &self,
        key: &str,
        data: Bytes,
        expected: &Version,
    ) -> arbor_storage::Result<Version> {
        self.inner.put_if_match(key, data, expected).await
    }
    async fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> arbor_storage::Result<ListPage> {
        self.inner.list_page(prefix, start_after, max_keys).await
    }
    async fn list_dir(
        &self,
        prefix: &str,
    ) -> arbor_storage::Result<(Vec<ObjectMeta>, Vec<String>)> {
        self.inner.list_dir(prefix).await
    }
    async fn delete_batch(
        &self,
        keys: &[String],
    ) -> arbor_storage::Result<Vec<arbor_storage::Result<()>>> {
        self.inner.delete_batch(keys).await
    }
    async fn copy(&self, from: &str, to: &str) -> arbor_storage::Result<()> {
        self.inner.copy(from, to).await
    }
}

fn options(heartbeat_timeout: Duration) -> WriteOptions {
    WriteOptions {
        // Every write makes new file groups, so the two writers never conflict.
        small_file_limit: 0,
        heartbeat_timeout,
        ..WriteOptions::default()
    }
}

/// A committed table (keys 0..8), a handle `a` on gated storage and a handle `b` on the plain
/// storage, both with `timeout`.
async fn setup(timeout: Duration) -> (TestTable, Arc<Gated>, Table, Table) {
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..8, 1, "a")).await;
    let gated = Gated::new(t.storage.clone());
    let a = Table::open(gated.clone())
        .await
        .unwrap()
        .with_write_options(options(timeout));
    let b = Table::open(t.storage.clone())
        .await
        .unwrap()
        .with_write_options(options(timeout));
    (t, gated, a, b)
}

/// Keys in storage (outside the lock and heartbeat directories) that carry `instant`.
async fn files_of(t: &TestTable, instant: &InstantTime) -> Vec<String> {
    t.listing()
        .await
        .into_iter()
        .filter(|k| k.contains(instant.as_str()))
        .collect()
}

fn assert_rolled_back(e: TableError, instant: &InstantTime) {
    match e {
        TableError::InstantRolledBack { instant: i, .. } => assert_eq!(i, instant.to_string()),
        other => panic!("expected InstantRolledBack for {instant}, got {other:?}"),
    }
}

#[tokio::test]
async fn test_commit_heartbeat_lapsed_and_rolled_back_fails_and_leaves_nothing() {
    let timeout = Duration::from_millis(300);
    let (t, gated, a, b) = setup(timeout).await;
    let a_rows = rows(100..104, 2, "a");
    let prepared = a
        .prepare(WriteOperation::Insert, vec![batch(&a_rows)])
        .await
        .unwrap();
    let a_time = prepared.instant().clone();
    assert!(!files_of(&t, &a_time).await.is_empty());
    // A stalls: its heartbeat is no longer written, and lapses.
    gated.freeze_heartbeats.store(true, Ordering::SeqCst);
    tokio::time::sleep(timeout * 3).await;
    let b_rows = rows(200..202, 2, "b");
    b.write(WriteOperation::Insert, vec![batch(&b_rows)])
        .await
        .unwrap();
    assert!(
        t.timeline().await.get(&a_time, Action::Commit).is_none(),
        "B rolled A back"
    );
    let e = a.commit(prepared).await.unwrap_err();
    assert_rolled_back(e, &a_time);
    assert!(t
        .completed()
        .await
        .iter()
        .all(|i| i.requested_time != a_time));
    assert_eq!(files_of(&t, &a_time).await, Vec::<String>::new());
    let mut m = Model::default();
    m.upsert(&rows(0..8, 1, "a"));
    m.upsert(&b_rows);
    assert_snapshot(&t, &m, "A rolled back, B committed").await;
}

#[tokio::test]
async fn test_prepare_rolled_back_while_writing_does_not_resurrect_instant() {
    let timeout = Duration::from_millis(300);
    let (t, gated, a, b) = setup(timeout).await;
    gated.hold_base_file.store(true, Ordering::SeqCst);
    let a_rows = rows(100..104, 2, "a");
    let a2 = a.clone();
    let batches = vec![batch(&a_rows)];
    let task = tokio::spawn(async move { a2.prepare(WriteOperation::Insert, batches).await });
    // A has started its instant and is about to write its first base file.
    gated.reached.notified().await;
    let pending = t.timeline().await.pending();
    assert_eq!(pending.len(), 1);
    let a_time = pending[0].requested_time.clone();
    gated.freeze_heartbeats.store(true, Ordering::SeqCst);
    tokio::time::sleep(timeout * 3).await;
    let b_rows = rows(200..202, 2, "b");
    b.write(WriteOperation::Insert, vec![batch(&b_rows)])
        .await
        .unwrap();
    // A resumes (its heartbeat writes work again): it must notice it lost its instant.
    gated.freeze_heartbeats.store(false, Ordering::SeqCst);
    gated.release.notify_one();
    let result = task.await.unwrap();
    let outcome = match result {
        Ok(prepared) => a.commit(prepared).await.map(|_| ()),
        Err(e) => Err(e),
    };
    assert_rolled_back(outcome.unwrap_err(), &a_time);
    let tl = t.timeline().await;
    assert!(
        tl.get(&a_time, Action::Commit).is_none(),
        "A's instant must not reappear on the timeline"
    );
    assert_eq!(files_of(&t, &a_time).await, Vec::<String>::new());
    let mut m = Model::default();
    m.upsert(&rows(0..8, 1, "a"));
    m.upsert(&b_rows);
    assert_snapshot(&t, &m, "A rolled back while preparing").await;
}

#[tokio::test]
async fn test_prepare_slow_writer_heartbeat_renewed_commit_succeeds() {
    let timeout = Duration::from_secs(1);
    let (t, _gated, a, b) = setup(timeout).await;
    let a_rows = rows(100..104, 2, "a");
    let prepared = a
        .prepare(WriteOperation::Insert, vec![batch(&a_rows)])
        .await
        .unwrap();
    let a_time = prepared.instant().clone();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let b_rows = rows(200..202, 2, "b");
    b.write(WriteOperation::Insert, vec![batch(&b_rows)])
        .await
        .unwrap();
    let pending = t.timeline().await.get(&a_time, Action::Commit).cloned();
    assert!(
        pending.is_some_and(|f| f.inflight.is_some()),
        "B must not roll back A, whose heartbeat is renewed"
    );
    let done = a.commit(prepared).await.unwrap();
    assert_eq!(done.instant, a_time);
    let mut m = Model::default();
    m.upsert(&rows(0..8, 1, "a"));
    m.upsert(&a_rows);
    m.upsert(&b_rows);
    assert_snapshot(&t, &m, "slow A and B both committed").await;
}

async fn mor_with_logs() -> TestTable {
    let t = create(TableType::MergeOnRead, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..8, 1, "a")).await;
    t.write(WriteOperation::Upsert, &rows(0..8, 2, "b")).await;
    t.write(WriteOperation::Upsert, &rows(0..4, 3, "c")).await;
    t
}

#[tokio::test]
async fn test_compact_concurrent_calls_complete_exactly_one_compaction() {
    let t = mor_with_logs().await;
    let other = Table::open(t.storage.clone()).await.unwrap();
    let (r1, r2) = tokio::join!(t.table.compact(), other.compact());
    let (r1, r2) = (r1.unwrap(), r2.unwrap());
    assert_eq!(r1.len() + r2.len(), 1, "{r1:?} {r2:?}");
    let tl = t.timeline().await;
    let compactions: Vec<_> = tl
        .instants()
        .into_iter()
        .filter(|i| i.action == Action::Compaction || i.action == Action::Commit)
        .collect();
    assert!(
        tl.filter(&[Action::Compaction], &[State::Requested, State::Inflight])
            .is_empty(),
        "no compaction left pending: {compactions:?}"
    );
    let completed_compactions = tl
        .completed()
        .into_iter()
        .filter(|i| i.action == Action::Commit)
        .count();
    assert_eq!(completed_compactions, 1, "{compactions:?}");
    let mut m = Model::default();
    m.upsert(&rows(0..8, 1, "a"));
    m.upsert(&rows(0..8, 2, "b"));
    m.upsert(&rows(0..4, 3, "c"));
    assert_snapshot(&t, &m, "two concurrent compactions").await;
}

#[tokio::test]
async fn test_compact_copy_on_write_is_unsupported() {
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..2, 1, "a")).await;
    assert!(matches!(
        t.table.compact().await,
        Err(TableError::Unsupported { .. })
    ));
}

#[tokio::test]
async fn test_run_compaction_corrupt_plan_fails_naming_plan_and_deletes_nothing() {
    type Corruption = fn(&mut arbor_timeline::avro::HoodieCompactionOperation);
    let cases: [(&str, Corruption); 4] = [
        ("partition ..", |op| {
            op.partition_path = Some("../outside".into())
        }),
        ("meta partition", |op| {
            op.partition_path = Some(".hoodie".into())
        }),
        ("file id with _", |op| op.file_id = Some("x_y".into())),
        ("file id with /", |op| op.file_id = Some("a/b".into())),
    ];
    for (what, corrupt) in cases {
        let t = mor_with_logs().await;
        let config = TableConfig::load(t.storage.as_ref(), DEFAULT_META_DIR)
            .await
            .unwrap();
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config).unwrap();
        let generator = InstantTimeGenerator::new();
        let c = schedule_compaction(&t.storage, &layout, &generator)
            .await
            .unwrap()
            .unwrap();
        let tl = t.timeline().await;
        let requested = tl
            .get(&c, Action::Compaction)
            .unwrap()
            .requested
            .clone()
            .unwrap();
        let key = tl.key_of(&requested).unwrap();
        let mut plan: HoodieCompactionPlan =
            decode(&tl.read(&requested).await.unwrap(), &key).unwrap();
        corrupt(plan.operations.as_mut().unwrap().first_mut().unwrap());
        let bytes =
            encode_instant_for(&requested, &InstantContent::Compaction(Box::new(plan))).unwrap();
        t.storage.put(&key, Bytes::from(bytes)).await.unwrap();
        let before = t.listing().await;
        match run_compaction(&t.storage, &layout, &c, &generator).await {
            Err(TableError::Corrupt { path, .. }) => assert_eq!(path, key, "{what}"),
            other => panic!("{what}: expected Corrupt, got {other:?}"),
        }
        assert_eq!(
            t.listing().await,
            before,
            "{what}: nothing written or deleted"
        );
    }
}
