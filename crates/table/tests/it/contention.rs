//! Writers under contention (docs/concurrency.md): merge-on-read log appends of disjoint keys
//! to one file group both commit without a retry and read back through arbor and hudi-rs;
//! overlapping keys still conflict; copy-on-write writers of disjoint keys in shared file
//! groups all land through `Table::write`'s retries; the retry policy's limit is a clear
//! error; rollback instants of lost races are archived.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arbor_storage::{ListPage, ObjectMeta, ObjectStoreStorage, Storage, StorageError, Version};
use arbor_table::{CreateOptions, RetryPolicy, Table, TableError, WriteOperation, WriteOptions};
use arbor_timeline::archive::{ArchivalPolicy, Archiver, TimelineHistory};
use arbor_timeline::config::{RecordMergeMode, TableType};
use arbor_timeline::{Action, State};
use async_trait::async_trait;
use bytes::Bytes;

use super::write_support::*;

/// Rows of `ids` that all live in region `us` (even ids), as [`rows`] lays them out.
fn us_rows(ids: &[u32], ts: i64, tag: &str) -> Vec<Row> {
    ids.iter()
        .flat_map(|&i| rows(i..i + 1, ts, tag))
        .inspect(|r| assert_eq!(r.1, "us"))
        .collect()
}

fn fast_retries(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(100),
        jitter: true,
    }
}

#[tokio::test]
async fn test_mor_disjoint_keys_in_one_file_group_both_commit_without_retry() {
    let t = create(TableType::MergeOnRead, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..8, 1, "a")).await;
    let other = Table::open(t.storage.clone()).await.unwrap();
    let a = us_rows(&[0], 2, "first");
    let b = us_rows(&[2, 4], 2, "second");
    let p1 = t
        .table
        .prepare(WriteOperation::Upsert, vec![batch(&a)])
        .await
        .unwrap();
    let p2 = other
        .prepare(WriteOperation::Upsert, vec![batch(&b)])
        .await
        .unwrap();
    let shared: Vec<_> = p1
        .file_groups()
        .intersection(p2.file_groups())
        .cloned()
        .collect();
    assert_eq!(shared.len(), 1, "both write the us file group");
    t.table.commit(p1).await.unwrap();
    // The later commit sees the earlier one completed in its file group and still commits.
    let c2 = other.commit(p2).await.unwrap();
    assert_eq!(c2.attempts, 1);
    // Both log files are in the group's latest slice.
    let (partition, file_id) = &shared[0];
    let logs: Vec<String> = t
        .listing()
        .await
        .into_iter()
        .filter(|k| k.starts_with(partition.as_str()) && k.contains(&format!(".{file_id}_")))
        .filter(|k| k.contains(".log."))
        .collect();
    assert_eq!(logs.len(), 2, "{logs:?}");
    let rollbacks = t
        .timeline()
        .await
        .filter(&[Action::Rollback], &[State::Completed]);
    assert!(rollbacks.is_empty(), "{rollbacks:?}");
    let mut m = Model::default();
    m.upsert(&rows(0..8, 1, "a"));
    m.upsert(&a);
    m.upsert(&b);
    assert_snapshot(&t, &m, "two log appends").await;
    assert_peer_agrees(&t, &[Query::Snapshot], "two log appends").await;
}

#[tokio::test]
async fn test_mor_overlapping_keys_conflict_and_the_retry_lands() {
    let t = create(TableType::MergeOnRead, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..8, 1, "a")).await;
    let other = Table::open(t.storage.clone()).await.unwrap();
    let a = us_rows(&[0, 2], 2, "first");
    let b = us_rows(&[2, 4], 3, "second");
    let p1 = t
        .table
        .prepare(WriteOperation::Upsert, vec![batch(&a)])
        .await
        .unwrap();
    let p2 = other
        .prepare(WriteOperation::Upsert, vec![batch(&b)])
        .await
        .unwrap();
    let loser = p2.instant().to_string();
    t.table.commit(p1).await.unwrap();
    match other.commit(p2).await.unwrap_err() {
        TableError::CommitConflict {
            instant,
            file_groups,
            ..
        } => {
            assert_eq!(instant, loser);
            assert!(!file_groups.is_empty());
        }
        e => panic!("expected CommitConflict, got {e:?}"),
    }
    let mut m = Model::default();
    m.upsert(&rows(0..8, 1, "a"));
    m.upsert(&a);
    assert_snapshot(&t, &m, "after the conflict").await;
    // The writer that lost writes again (re-planned on the new state): nothing is lost.
    other
        .write(WriteOperation::Upsert, vec![batch(&b)])
        .await
        .unwrap();
    m.upsert(&b);
    assert_snapshot(&t, &m, "after the retry").await;
    assert_peer_agrees(&t, &[Query::Snapshot], "after the retry").await;
}

#[tokio::test]
async fn test_mor_concurrent_writers_of_one_key_all_land_through_retries() {
    let t = create(TableType::MergeOnRead, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..8, 1, "a")).await;
    let mut tasks = Vec::new();
    for w in 0..3i64 {
        let table = Table::open(t.storage.clone())
            .await
            .unwrap()
            .with_write_options(WriteOptions {
                retry: fast_retries(50),
                ..WriteOptions::default()
            });
        tasks.push(tokio::spawn(async move {
            let row = us_rows(&[0], 10 + w, &format!("w{w}-"));
            table
                .write(WriteOperation::Upsert, vec![batch(&row)])
                .await
                .unwrap()
        }));
    }
    let mut attempts = 0;
    for task in tasks {
        attempts += task.await.unwrap().attempts;
    }
    assert!(attempts >= 3);
    // Event-time ordering: the largest ts wins whatever the commit order.
    let mut m = Model::default();
    m.upsert(&rows(0..8, 1, "a"));
    m.upsert(&us_rows(&[0], 12, "w2-"));
    assert_snapshot(&t, &m, "three writers of one key").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_cow_contention_every_commit_lands_nothing_lost_or_duplicated() {
    const WRITERS: u32 = 4;
    const COMMITS: u32 = 4;
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..(WRITERS * 2), 1, "a"))
        .await;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let table = Table::open(t.storage.clone())
            .await
            .unwrap()
            .with_write_options(WriteOptions {
                retry: fast_retries(100),
                ..WriteOptions::default()
            });
        tasks.push(tokio::spawn(async move {
            let mut attempts = Vec::new();
            for c in 0..COMMITS {
                // Writer w owns keys 2w (us) and 2w+1 (eu): disjoint keys, shared file groups.
                let mine = rows(2 * w..2 * w + 2, 2 + i64::from(c), &format!("w{w}c{c}-"));
                let r = table
                    .write(WriteOperation::Upsert, vec![batch(&mine)])
                    .await
                    .unwrap();
                attempts.push(r.attempts);
            }
            attempts
        }));
    }
    let mut total_attempts = 0;
    for task in tasks {
        total_attempts += task.await.unwrap().iter().sum::<u32>();
    }
    let completed: Vec<_> = t
        .completed()
        .await
        .into_iter()
        .filter(|i| i.action == Action::Commit)
        .collect();
    assert_eq!(completed.len() as u32, 1 + WRITERS * COMMITS);
    let rollbacks = t
        .timeline()
        .await
        .filter(&[Action::Rollback], &[State::Completed])
        .len() as u32;
    assert_eq!(rollbacks, total_attempts - WRITERS * COMMITS);
    let mut m = Model::default();
    for w in 0..WRITERS {
        let last = COMMITS - 1;
        m.upsert(&rows(
            2 * w..2 * w + 2,
            2 + i64::from(last),
            &format!("w{w}c{last}-"),
        ));
    }
    // assert_snapshot compares sorted rows: a duplicated key would be a second row.
    assert_snapshot(&t, &m, "contended writers").await;
    assert_peer_agrees(&t, &[Query::Snapshot], "contended writers").await;
}

/// A storage that hides every `.requested` file from `head`/`exists`, so that each write
/// attempt finds its instant "rolled back" before moving it to inflight.
#[derive(Debug)]
struct HideRequested {
    inner: Arc<dyn Storage>,
    hidden: AtomicU32,
}

impl fmt::Display for HideRequested {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hide-requested({})", self.inner)
    }
}

#[async_trait]
impl Storage for HideRequested {
    async fn get(&self, key: &str) -> arbor_storage::Result<(Bytes, ObjectMeta)> {
        self.inner.get(key).await
    }
    async fn get_range(&self, key: &str, range: Range<u64>) -> arbor_storage::Result<Bytes> {
        self.inner.get_range(key, range).await
    }
    async fn head(&self, key: &str) -> arbor_storage::Result<ObjectMeta> {
        if key.ends_with(".commit.requested") {
            self.hidden.fetch_add(1, Ordering::SeqCst);
            return Err(StorageError::NotFound {
                path: key.to_string(),
            });
        }
        self.inner.head(key).await
    }
    async fn put(&self, key: &str, data: Bytes) -> arbor_storage::Result<Version> {
        self.inner.put(key, data).await
    }
    async fn put_if_absent(&self, key: &str, data: Bytes) -> arbor_storage::Result<Version> {
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

#[tokio::test]
async fn test_retry_policy_max_attempts_gives_up_with_an_error_naming_them() {
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    let hiding = Arc::new(HideRequested {
        inner: t.storage.clone(),
        hidden: AtomicU32::new(0),
    });
    let table = Table::open(hiding.clone())
        .await
        .unwrap()
        .with_write_options(WriteOptions {
            retry: fast_retries(3),
            ..WriteOptions::default()
        });
    let err = table
        .write(WriteOperation::Upsert, vec![batch(&rows(0..1, 2, "x"))])
        .await
        .unwrap_err();
    match &err {
        TableError::RetriesExhausted { attempts, last } => {
            assert_eq!(*attempts, 3);
            assert!(
                matches!(**last, TableError::InstantRolledBack { .. }),
                "{last:?}"
            );
        }
        e => panic!("expected RetriesExhausted, got {e:?}"),
    }
    assert!(err.to_string().contains("3 attempts"), "{err}");
    assert!(hiding.hidden.load(Ordering::SeqCst) >= 3);
    // One attempt: the error itself, unwrapped.
    let once = table.clone().with_write_options(WriteOptions {
        retry: RetryPolicy::none(),
        ..WriteOptions::default()
    });
    assert!(matches!(
        once.write(WriteOperation::Upsert, vec![batch(&rows(0..1, 2, "x"))])
            .await,
        Err(TableError::InstantRolledBack { .. })
    ));
    // Nothing of the attempts is visible; no instant is left pending.
    let mut m = Model::default();
    m.upsert(&rows(0..4, 1, "a"));
    assert_snapshot(&t, &m, "after giving up").await;
    assert!(t.timeline().await.pending().is_empty());
}

/// A copy-on-write table without metadata table (whose missing compaction would hold
/// archival back), keys 0..4 inserted.
async fn table_without_mdt() -> (tempfile::TempDir, Arc<dyn Storage>, Table) {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    std::fs::create_dir_all(&base).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let table = Table::create(
        storage.clone(),
        CreateOptions {
            name: "t".into(),
            table_type: TableType::CopyOnWrite,
            record_key_fields: vec!["id".into()],
            partition_fields: vec!["region".into()],
            hive_style_partitioning: false,
            ordering_field: Some("ts".into()),
            merge_mode: Some(RecordMergeMode::EventTimeOrdering),
            schema: schema(),
            metadata_table: false,
            table_version: Default::default(),
            base_format: Default::default(),
        },
    )
    .await
    .unwrap();
    table
        .write(WriteOperation::Insert, vec![batch(&rows(0..4, 1, "a"))])
        .await
        .unwrap();
    (tmp, storage, table)
}

#[tokio::test]
async fn test_rollback_instants_of_lost_races_are_archived() {
    let (_tmp, storage, table) = table_without_mdt().await;
    let other = Table::open(storage.clone()).await.unwrap();
    // Two lost races: each leaves one completed rollback (and one winning commit).
    for i in 0..2i64 {
        let winner = table
            .prepare(
                WriteOperation::Upsert,
                vec![batch(&rows(0..1, 10 + i, "w"))],
            )
            .await
            .unwrap();
        let loser = other
            .prepare(
                WriteOperation::Upsert,
                vec![batch(&rows(2..3, 10 + i, "l"))],
            )
            .await
            .unwrap();
        table.commit(winner).await.unwrap();
        assert!(matches!(
            other.commit(loser).await,
            Err(TableError::CommitConflict { .. })
        ));
    }
    // Four abandoned writes, each rolled back by the next writer (zero heartbeat timeout).
    let impatient = table.clone().with_write_options(WriteOptions {
        heartbeat_timeout: Duration::ZERO,
        ..WriteOptions::default()
    });
    for i in 0..4i64 {
        let p = impatient
            .prepare(
                WriteOperation::Upsert,
                vec![batch(&rows(1..2, 20 + i, "x"))],
            )
            .await
            .unwrap();
        drop(p);
    }
    impatient
        .write(WriteOperation::Upsert, vec![batch(&rows(3..4, 30, "y"))])
        .await
        .unwrap();
    let layout = table.layout().clone();
    let count = |tl: &arbor_timeline::ActiveTimeline, action| {
        tl.filter(&[action], &[State::Completed]).len()
    };
    let before = arbor_timeline::ActiveTimeline::load(storage.clone(), layout.clone())
        .await
        .unwrap();
    assert_eq!(count(&before, Action::Rollback), 6);
    assert_eq!(count(&before, Action::Commit), 4);
    assert!(before.pending().is_empty());
    // Commits within the policy's maximum: only the rollbacks' own rule archives anything,
    // and only above the maximum.
    let policy = |max_commits| ArchivalPolicy {
        min_commits: 2,
        max_commits,
        ..ArchivalPolicy::default()
    };
    let none = Archiver::new(storage.clone(), layout.clone(), policy(6))
        .unwrap()
        .run()
        .await
        .unwrap();
    assert!(none.archived.is_empty(), "{:?}", none.archived);
    let outcome = Archiver::new(storage.clone(), layout.clone(), policy(5))
        .unwrap()
        .run()
        .await
        .unwrap();
    let after = arbor_timeline::ActiveTimeline::load(storage.clone(), layout.clone())
        .await
        .unwrap();
    assert_eq!(count(&after, Action::Commit), 4, "commits stay active");
    assert_eq!(
        count(&after, Action::Rollback),
        2,
        "the newest two stay active"
    );
    assert_eq!(outcome.archived.len(), 4);
    assert!(outcome
        .archived
        .iter()
        .all(|i| i.action == Action::Rollback));
    let oldest_active = after
        .filter(&[Action::Rollback], &[State::Completed])
        .into_iter()
        .map(|i| i.requested_time)
        .min()
        .unwrap();
    assert!(outcome
        .archived
        .iter()
        .all(|i| i.requested_time < oldest_active));
    // Every rollback is in the history exactly once, archived or active.
    let history = TimelineHistory::load(storage.clone(), layout)
        .await
        .unwrap();
    let rollbacks: BTreeMap<_, _> = history
        .instants()
        .filter(|h| h.instant.action == Action::Rollback)
        .map(|h| (h.instant.requested_time.clone(), h.location))
        .collect();
    assert_eq!(rollbacks.len(), 6);
    // The table still reads and writes.
    table
        .write(WriteOperation::Upsert, vec![batch(&rows(3..4, 99, "z"))])
        .await
        .unwrap();
    let reader = arbor_table::read::TableReader::open(storage).await.unwrap();
    let got = rows_of(&reader.snapshot(None).await.unwrap());
    assert_eq!(got.len(), 4);
}
