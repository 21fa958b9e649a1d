//! Stalled writers (issue 32): a pause longer than the lease before **every** storage operation
//! of a write (copy-on-write and merge-on-read), a publication, a tag, a clean, a TTL run and a
//! clone, with a second writer committing during the pause. The stalled operation's lease lapses
//! during the pause (its lock state is rewritten as expired and its renewals are held back, as
//! for a stopped process), so the second writer takes the lock over and commits.
//!
//! Checked at every point: no lost update (every write that reported success is visible, every
//! one that reported failure is not), each operation's result says exactly whether it took
//! effect, and main opens and reads.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbor_branching::clone::{clone_table, CloneAt, CloneRequest};
use arbor_branching::tag::find_tag;
use arbor_branching::{create_branch, create_tag, publish, BranchSource};
use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_storage::{
    FaultInjectingStorage, Lease, LockProvider, LockResult, LockState, ObjectStoreLockProvider,
    ObjectStoreStorage, Storage, StorageExt,
};
use arbor_table::read::TableReader;
use arbor_table::ttl::{PolicyScope, Retention, TtlPolicy, TtlRunOptions, TtlStrategy};
use arbor_table::{RetryPolicy, Table, WriteOperation, WriteOptions};
use arbor_testkit_tables::{batch, rows, rows_of, Row};
use arbor_timeline::config::{RecordMergeMode, TableType};
use arbor_timeline::layout::clone_records::{CloneDescriptor, CloneState, PinRecord};
use arbor_timeline::layout::paths::{LOCK_DIR, LOCK_NAME};
use arbor_timeline::{resolve_main, Action, MetaRoot};
use bytes::Bytes;
use futures::future::BoxFuture;

use crate::clone_detach_support::MapOpener;
use tokio::sync::watch;

/// A lock whose renewals can be held back (a stopped process renews nothing).
#[derive(Debug)]
struct Freezable {
    inner: ObjectStoreLockProvider,
    frozen: watch::Sender<bool>,
}

impl Freezable {
    fn new(storage: Arc<dyn Storage>) -> Self {
        Freezable {
            inner: ObjectStoreLockProvider::new(storage, LOCK_DIR),
            frozen: watch::channel(false).0,
        }
    }
}

#[async_trait::async_trait]
impl LockProvider for Freezable {
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease> {
        self.inner.acquire(lock, lease, timeout).await
    }

    async fn renew(&self, held: &Lease, lease: Duration) -> LockResult<Lease> {
        let mut rx = self.frozen.subscribe();
        let _ = rx.wait_for(|frozen| !frozen).await;
        self.inner.renew(held, lease).await
    }

    async fn release(&self, held: &Lease) -> LockResult<()> {
        self.inner.release(held).await
    }
}

/// Makes the current holder's lease lapse (as the time of a long stall would).
async fn expire_holder(storage: &Arc<dyn Storage>) {
    let key = format!("{LOCK_DIR}/{LOCK_NAME}.json");
    let Some((bytes, _)) = storage.get_opt(&key).await.unwrap() else {
        return;
    };
    let mut state: LockState = serde_json::from_slice(&bytes).unwrap();
    if state.owner.is_some() {
        state.expires_at = Some(chrono::Utc::now() - chrono::TimeDelta::seconds(1));
        storage
            .put(&key, Bytes::from(serde_json::to_vec(&state).unwrap()))
            .await
            .unwrap();
    }
}

/// What the stalled operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    WriteCow,
    WriteMor,
    Publish,
    Tag,
    Clean,
    Ttl,
    Clone,
}

const SOURCE: &str = "memory://stall-source";
const TARGET: &str = "memory://stall-clone";

fn no_retries() -> WriteOptions {
    WriteOptions {
        retry: RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        },
        ..WriteOptions::default()
    }
}

/// A fresh table in memory for `op`, with its history.
async fn setup(op: Op) -> Arc<dyn Storage> {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let table_type = if op == Op::WriteMor {
        TableType::MergeOnRead
    } else {
        TableType::CopyOnWrite
    };
    let t = Table::create(
        storage.clone(),
        arbor_table::CreateOptions {
            name: "t".into(),
            table_type,
            record_key_fields: vec!["id".into()],
            partition_fields: vec!["region".into()],
            hive_style_partitioning: true,
            ordering_field: Some("ts".into()),
            merge_mode: Some(RecordMergeMode::EventTimeOrdering),
            schema: arbor_testkit_tables::schema(),
            metadata_table: true,
            table_version: Default::default(),
            base_format: Default::default(),
        },
    )
    .await
    .unwrap();
    t.write(WriteOperation::Insert, vec![batch(&rows(0..8, 1, "s"))])
        .await
        .unwrap();
    match op {
        Op::Clean => {
            for ts in 2..4 {
                t.write(WriteOperation::Upsert, vec![batch(&rows(0..8, ts, "u"))])
                    .await
                    .unwrap();
            }
        }
        Op::Ttl => {
            t.set_ttl_policy(TtlPolicy {
                strategy: TtlStrategy::Count,
                retain: Retention::parse(TtlStrategy::Count, "1").unwrap(),
                scope: PolicyScope::Default { fields: vec![] },
                time_field: None,
                format: None,
            })
            .await
            .unwrap();
        }
        Op::Publish => {
            create_branch(&t, "b", BranchSource::MainHead)
                .await
                .unwrap();
            let b = arbor_branching::open_branch(storage.clone(), "b")
                .await
                .unwrap();
            b.write(WriteOperation::Upsert, vec![batch(&rows(20..22, 5, "p"))])
                .await
                .unwrap();
        }
        _ => {}
    }
    storage
}

/// The second writer: an upsert of main of keys the stalled operation does not touch (even
/// ids: region `us`, which a TTL keeping one partition keeps). `Ok` when it committed.
async fn other_writer(storage: Arc<dyn Storage>) -> bool {
    let Ok(t) = Table::open(storage).await else {
        return false;
    };
    t.with_write_options(no_retries())
        .write(WriteOperation::Upsert, vec![batch(&b_rows())])
        .await
        .is_ok()
}

fn b_rows() -> Vec<Row> {
    vec![
        ("k0030".into(), "us".into(), 9, "b30".into()),
        ("k0032".into(), "us".into(), 9, "b32".into()),
    ]
}

/// Runs the stalled operation on `storage` (the stalling view of the table) with `lock`.
/// Returns whether it reported success.
async fn run(
    op: Op,
    storage: Arc<dyn Storage>,
    lock: Arc<dyn LockProvider>,
    clone: &Arc<dyn Storage>,
) -> bool {
    let open = || async {
        Table::open(storage.clone()).await.map(|t| {
            t.with_lock_provider(lock.clone())
                .with_write_options(no_retries())
        })
    };
    match op {
        Op::WriteCow | Op::WriteMor => match open().await {
            Ok(t) => t
                .write(WriteOperation::Upsert, vec![batch(&rows(0..6, 2, "a"))])
                .await
                .is_ok(),
            Err(_) => false,
        },
        Op::Publish => {
            let Ok(b) = arbor_branching::open_branch(storage.clone(), "b").await else {
                return false;
            };
            publish(&b.with_lock_provider(lock.clone())).await.is_ok()
        }
        Op::Tag => match open().await {
            Ok(t) => create_tag(&t, "v1", None, None).await.is_ok(),
            Err(_) => false,
        },
        Op::Clean => match open().await {
            Ok(t) => arbor_branching::clean(
                &t,
                CleanOptions {
                    policy: CleanPolicy::KeepLatestCommits(1),
                    dry_run: false,
                    archive: false,
                    extra_sources: Vec::new(),
                },
            )
            .await
            .is_ok_and(|o| o.instant.is_some()),
            Err(_) => false,
        },
        Op::Ttl => match open().await {
            Ok(t) => t
                .run_ttl(&TtlRunOptions::default())
                .await
                .is_ok_and(|o| o.commit.is_some()),
            Err(_) => false,
        },
        Op::Clone => {
            let opener = MapOpener(vec![
                (SOURCE.to_string(), storage.clone()),
                (TARGET.to_string(), clone.clone()),
            ]);
            clone_table(
                &opener,
                &CloneRequest {
                    source: SOURCE.to_string(),
                    target: TARGET.to_string(),
                    at: CloneAt::Main,
                    tag_branch: None,
                    deep: false,
                },
            )
            .await
            .inspect_err(|e| eprintln!("clone: {e}"))
            .is_ok()
        }
    }
}

/// The rows of main.
async fn main_rows(storage: &Arc<dyn Storage>) -> Vec<Row> {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    rows_of(&reader.snapshot(None).await.unwrap())
}

fn has(rows: &[Row], id: &str, name: &str) -> bool {
    rows.iter().any(|r| r.0 == id && r.3 == name)
}

/// Completed instants of `action` on main.
async fn completed(storage: &Arc<dyn Storage>, action: Action) -> usize {
    let main = resolve_main(storage.as_ref()).await.unwrap();
    let t = Table::open_at(storage.clone(), main).await.unwrap();
    let tl = arbor_timeline::ActiveTimeline::load(t.view_storage().clone(), t.layout().clone())
        .await
        .unwrap();
    tl.instants()
        .iter()
        .filter(|i| i.state == arbor_timeline::State::Completed && i.action == action)
        .count()
}

/// Whether the stalled operation took effect, judged from storage alone.
async fn took_effect(
    op: Op,
    storage: &Arc<dyn Storage>,
    clone: &Arc<dyn Storage>,
    before: usize,
    label: &str,
) -> bool {
    let rows = main_rows(storage).await;
    match op {
        Op::WriteCow | Op::WriteMor => {
            let a = has(&rows, "k0001", "a1");
            // All or nothing: every row of the write or none.
            for i in 0..6u32 {
                let id = format!("k{i:04}");
                assert_eq!(
                    has(&rows, &id, &format!("a{i}")),
                    a,
                    "{label}: {id} of a partial write"
                );
            }
            a
        }
        Op::Publish => {
            let published = matches!(
                resolve_main(storage.as_ref()).await.unwrap(),
                MetaRoot::Publication(_)
            );
            assert_eq!(
                published,
                has(&rows, "k0021", "p21"),
                "{op:?}: main and the branch's rows"
            );
            published
        }
        Op::Tag => {
            let t = Table::open(storage.clone()).await.unwrap();
            find_tag(t.view_storage(), "v1").await.unwrap().is_some()
        }
        Op::Clean => completed(storage, Action::Clean).await > before,
        Op::Ttl => {
            let gone = !rows.iter().any(|r| r.1 == "eu");
            let done = completed(storage, Action::ReplaceCommit).await > before;
            assert_eq!(
                gone, done,
                "{op:?}: partition deleted without a completed run, or the reverse"
            );
            done
        }
        Op::Clone => {
            let pins = PinRecord::list(storage.as_ref()).await.unwrap();
            let active = CloneDescriptor::load(clone.as_ref())
                .await
                .unwrap()
                .is_some_and(|(d, _)| d.state == CloneState::Active);
            // A clone that is not finished may keep its pin (a retry resumes it), but a finished
            // one always has it.
            assert!(
                !active || !pins.is_empty(),
                "{label}: an active clone without a pin"
            );
            active
        }
    }
}

async fn before_count(op: Op, storage: &Arc<dyn Storage>) -> usize {
    match op {
        Op::Clean => completed(storage, Action::Clean).await,
        Op::Ttl => completed(storage, Action::ReplaceCommit).await,
        _ => 0,
    }
}

/// Stalls `op` before each of its storage operations in turn (at most `max_points` of them,
/// spread evenly when there are more); returns how many points were run.
async fn sweep(op: Op, stride: usize) -> usize {
    let mut points = 0;
    let mut n = 0;
    loop {
        let inner = setup(op).await;
        let before = before_count(op, &inner).await;
        let clone: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        let faulty = Arc::new(FaultInjectingStorage::new(inner.clone()));
        let lock = Arc::new(Freezable::new(inner.clone()));
        let b_ok: Arc<Mutex<Option<bool>>> = Arc::new(Mutex::new(None));
        {
            let (inner, lock, b_ok) = (inner.clone(), lock.clone(), b_ok.clone());
            faulty.set_stall(
                n,
                Arc::new(move || -> BoxFuture<'static, ()> {
                    let (inner, lock, b_ok) = (inner.clone(), lock.clone(), b_ok.clone());
                    Box::pin(async move {
                        lock.frozen.send_replace(true);
                        expire_holder(&inner).await;
                        let ok = other_writer(inner.clone()).await;
                        *b_ok.lock().unwrap() = Some(ok);
                        lock.frozen.send_replace(false);
                    })
                }),
            );
        }
        let a_ok = run(op, faulty.clone(), lock.clone(), &clone).await;
        if !faulty.has_stalled() {
            assert!(
                a_ok,
                "{op:?}: the operation failed without any stall (after {n} points)"
            );
            return points;
        }
        points += 1;
        let b_ok = b_ok.lock().unwrap().unwrap_or(false);
        let main = main_rows(&inner).await;
        let label = format!("{op:?} stalled before operation {n}");
        // The other writer: its result says exactly whether its rows are there.
        assert_eq!(
            b_ok,
            has(&main, "k0030", "b30"),
            "{label}: the other writer"
        );
        assert_eq!(
            a_ok,
            took_effect(op, &inner, &clone, before, &label).await,
            "{label}: the stalled operation's result (ops: {:?})",
            faulty
                .ops()
                .get(n.saturating_sub(2)..(n + 2).min(faulty.op_count()))
        );
        // Whatever happened, the table takes the next write.
        let next = Table::open(inner.clone()).await.unwrap();
        next.write(WriteOperation::Upsert, vec![batch(&rows(40..41, 10, "n"))])
            .await
            .unwrap_or_else(|e| panic!("{label}: the next write: {e}"));
        n += stride;
    }
}

#[tokio::test]
async fn test_stall_before_every_operation_of_a_cow_write_loses_no_update() {
    assert!(sweep(Op::WriteCow, 1).await > 20);
}

#[tokio::test]
async fn test_stall_before_every_operation_of_a_mor_write_loses_no_update() {
    assert!(sweep(Op::WriteMor, 1).await > 20);
}

#[tokio::test]
async fn test_stall_before_every_operation_of_a_publication_reports_what_took_effect() {
    assert!(sweep(Op::Publish, 1).await > 10);
}

#[tokio::test]
async fn test_stall_before_every_operation_of_a_tag_reports_what_took_effect() {
    assert!(sweep(Op::Tag, 1).await > 5);
}

#[tokio::test]
async fn test_stall_before_every_operation_of_a_clean_reports_what_took_effect() {
    assert!(sweep(Op::Clean, 1).await > 5);
}

#[tokio::test]
async fn test_stall_before_every_operation_of_a_ttl_run_reports_what_took_effect() {
    assert!(sweep(Op::Ttl, 1).await > 5);
}

#[tokio::test]
async fn test_stall_before_every_operation_of_a_clone_reports_what_took_effect() {
    assert!(sweep(Op::Clone, 1).await > 5);
}
