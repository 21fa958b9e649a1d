//! The instant lifecycle around a write: the table lock, writer heartbeats, rollback of failed
//! writes, partition markers, commit metadata, and the optimistic-concurrency conflict check.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use arbor_fsview::slice::join;
use arbor_storage::{Lease, LockError, LockProvider, Storage, StorageError, StorageExt};
use arbor_timeline::avro::{
    decode, decode_instant, HoodieCommitMetadata, HoodieRollbackMetadata, HoodieRollbackPlan,
    HoodieWriteStat, WriteOperationType, SCHEMA_KEY,
};
use arbor_timeline::{
    Action, ActiveTimeline, Instant, InstantTime, InstantTimeGenerator, State, TableLayout,
};
use bytes::Bytes;

use super::cow::WrittenGroup;
use super::log_conflict::{LogAppends, LogConflictCheck};
use super::partition_conflict::Changes;
use super::planner::WritePlan;
use super::rollback;
use crate::error::{Result, TableError};

/// The table lock's name and directory, writers' heartbeats and the partition marker: paths
/// of the table layout (`arbor_timeline::layout::paths`).
pub use arbor_timeline::layout::paths::{LOCK_NAME, PARTITION_MARKER};

/// How long a lease of the table lock lasts. Short, so that the lock of a writer that died
/// holding it (killed, crashed, cut off) is free again within seconds; [`with_lock`] renews it
/// every third of its length while the work under the lock runs. Waiters wait longer than this
/// (`WriteOptions::lock_timeout`, default 120 s).
pub const LEASE: Duration = Duration::from_secs(10);

/// Takes the table lock, waiting at most `timeout`. When the lock is held, says so (a warning
/// naming the holder, its token and lease end) before waiting.
pub async fn acquire(lock: &dyn LockProvider, timeout: Duration) -> Result<Lease> {
    match lock.acquire(LOCK_NAME, LEASE, Duration::ZERO).await {
        Ok(lease) => {
            log_lease("granted", &lease, now_us());
            return Ok(lease);
        }
        Err(LockError::Timeout { holder, .. }) if !timeout.is_zero() => {
            let holder = holder.map_or_else(|| "an unknown writer".to_string(), |h| h.to_string());
            tracing::warn!(
                "waiting up to {} s for the table lock, held by {holder}",
                timeout.as_secs()
            );
        }
        Err(e) => return Err(e.into()),
    }
    let lease = lock.acquire(LOCK_NAME, LEASE, timeout).await?;
    log_lease("granted", &lease, now_us());
    Ok(lease)
}

/// The tracing target of the table lock's holder log: one DEBUG event per grant, renewal,
/// release and loss of the table lock by this process (`ARBOR_LOG=arbor::lock=debug` shows
/// them), so that the logs of all writers of a table together show every holder.
pub const LOCK_LOG_TARGET: &str = "arbor::lock";

/// Logs `event` (`granted`, `renewed`, `released`, `release_failed`, `lost`) of `lease` on
/// [`LOCK_LOG_TARGET`]. `at_us` is the wall clock in microseconds: taken after the provider
/// answered for a grant or renewal, and before asking it for a release, so that the interval a
/// log shows for a holder lies inside the interval it really held the lock.
fn log_lease(event: &'static str, lease: &Lease, at_us: i64) {
    tracing::debug!(
        target: LOCK_LOG_TARGET,
        event,
        lock = %lease.lock,
        owner = %lease.owner,
        token = lease.token,
        expires_at_us = lease.expires_at.timestamp_micros(),
        at_us,
        pid = std::process::id(),
        "table lock {event}"
    );
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Releases the table lock; a failure is logged (the lease expires by itself) unless `result`
/// is already an error, which is then returned unchanged.
pub async fn release<T>(lock: &dyn LockProvider, lease: &Lease, result: Result<T>) -> Result<T> {
    let at = now_us();
    let released = lock.release(lease).await;
    log_lease(
        if released.is_ok() {
            "released"
        } else {
            "release_failed"
        },
        lease,
        at,
    );
    match released {
        Ok(()) => result,
        Err(e) => match result {
            Ok(v) => {
                tracing::warn!(lock = %lease.lock, error = %e, "releasing the table lock failed");
                Ok(v)
            }
            Err(orig) => Err(orig),
        },
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn heartbeat_key(instant: &InstantTime) -> String {
    arbor_timeline::layout::paths::heartbeat_key(instant)
}

/// Records that the writer of `instant` is alive now.
pub async fn beat(storage: &Arc<dyn Storage>, instant: &InstantTime) -> Result<()> {
    storage
        .put(&heartbeat_key(instant), Bytes::from(now_ms().to_string()))
        .await?;
    Ok(())
}

/// Removes the heartbeat of `instant` (after it completed or was rolled back).
pub async fn stop_heartbeat(storage: &Arc<dyn Storage>, instant: &InstantTime) -> Result<()> {
    storage.delete(&heartbeat_key(instant)).await?;
    Ok(())
}

/// A running heartbeat of one pending instant: a background task that writes the heartbeat
/// every `timeout / 3` until [`Heartbeat::stop`] is called or the last clone is dropped (which
/// aborts the task). Cloning shares the task.
#[derive(Clone)]
pub struct Heartbeat {
    inner: Arc<HeartbeatTask>,
}

struct HeartbeatTask {
    instant: InstantTime,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeat")
            .field("instant", &self.inner.instant)
            .finish_non_exhaustive()
    }
}

impl Drop for HeartbeatTask {
    fn drop(&mut self) {
        let handle = match self.task.get_mut() {
            Ok(h) => h.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(h) = handle {
            h.abort();
        }
    }
}

impl Heartbeat {
    /// Starts renewing the heartbeat of `instant` every `timeout / 3` (at least every 10 ms).
    /// With a zero `timeout` (every pending write counts as failed) or outside a tokio runtime
    /// nothing is renewed. A failed renewal is logged and retried at the next interval.
    pub fn start(storage: Arc<dyn Storage>, instant: InstantTime, timeout: Duration) -> Heartbeat {
        let task = if timeout.is_zero() {
            None
        } else {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    let every = (timeout / 3).max(Duration::from_millis(10));
                    let t = instant.clone();
                    Some(rt.spawn(async move {
                        loop {
                            tokio::time::sleep(every).await;
                            if let Err(e) = beat(&storage, &t).await {
                                tracing::warn!(instant = %t, error = %e, "renewing the heartbeat failed");
                            }
                        }
                    }))
                }
                Err(_) => {
                    tracing::warn!(instant = %instant, "no tokio runtime: the heartbeat is not renewed");
                    None
                }
            }
        };
        Heartbeat {
            inner: Arc::new(HeartbeatTask {
                instant,
                task: std::sync::Mutex::new(task),
            }),
        }
    }

    /// Stops the renewals and waits until the task has ended (so that no renewal lands after
    /// this returns).
    pub async fn stop(&self) {
        let handle = match self.inner.task.lock() {
            Ok(mut h) => h.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(h) = handle {
            h.abort();
            let _ = h.await;
        }
    }
}

/// Checks, under the table lock, that the pending write `inflight` still belongs to this
/// writer: its requested and inflight files are on the timeline, no rollback instant (pending or
/// completed) targets it, and (unless `heartbeat_timeout` is zero) its heartbeat has not
/// expired. Fails with [`TableError::InstantRolledBack`] otherwise. `tl` is the timeline as the
/// caller just listed it, under the lock.
pub async fn check_ownership(
    storage: &Arc<dyn Storage>,
    tl: &ActiveTimeline,
    inflight: &Instant,
    heartbeat_timeout: Duration,
) -> Result<()> {
    let time = &inflight.requested_time;
    let lost = |reason: String| TableError::InstantRolledBack {
        instant: time.to_string(),
        reason,
    };
    let files = tl.get(time, inflight.action);
    match files {
        Some(f) if f.completed.is_some() => {}
        Some(f) if f.requested.is_some() && f.inflight.is_some() => {}
        Some(f) if f.requested.is_none() => {
            return Err(lost(format!(
                "its {}.requested file is gone",
                inflight.action
            )))
        }
        Some(_) => {
            return Err(lost(format!(
                "its {}.inflight file is gone",
                inflight.action
            )))
        }
        None => return Err(lost("its timeline files are gone".into())),
    }
    if let Some(r) = rollback_targeting(tl, time).await? {
        return Err(lost(format!("rollback {r} targets it")));
    }
    if !heartbeat_timeout.is_zero() && !is_alive(storage, time, heartbeat_timeout).await? {
        return Err(lost(format!(
            "its heartbeat is older than {heartbeat_timeout:?}, so other writers may roll it back"
        )));
    }
    Ok(())
}

/// The first rollback instant newer than `target` whose plan (pending) or metadata (completed)
/// names `target`.
async fn rollback_targeting(tl: &ActiveTimeline, target: &InstantTime) -> Result<Option<Instant>> {
    let target_str = target.to_string();
    for r in tl.filter(
        &[Action::Rollback],
        &[State::Requested, State::Inflight, State::Completed],
    ) {
        if &r.requested_time <= target {
            continue;
        }
        let names_target = if r.state == State::Completed {
            let key = tl.key_of(&r)?;
            let meta: HoodieRollbackMetadata = decode(&tl.read(&r).await?, &key)?;
            meta.commits_rollback.iter().any(|t| t == &target_str)
                || meta
                    .instants_rollback
                    .iter()
                    .any(|i| i.commit_time == target_str)
        } else {
            let requested = r.with_state(State::Requested);
            let key = tl.key_of(&requested)?;
            let plan: HoodieRollbackPlan = decode(&tl.read(&requested).await?, &key)?;
            plan.instant_to_rollback
                .is_some_and(|i| i.commit_time == target_str)
        };
        if names_target {
            return Ok(Some(r));
        }
    }
    Ok(None)
}

/// Checks, before moving `requested` to inflight, that its requested file still exists: a
/// rollback by another writer deletes it, and creating the inflight file then would resurrect
/// the rolled-back instant.
pub async fn check_still_requested(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    requested: &Instant,
) -> Result<()> {
    let key = layout.instant_key(&requested.with_state(State::Requested))?;
    if storage.exists(&key).await? {
        Ok(())
    } else {
        Err(TableError::InstantRolledBack {
            instant: requested.requested_time.to_string(),
            reason: format!("{key} is gone"),
        })
    }
}

/// Runs `work` holding the table lock, renewing the lease every third of its duration while it
/// runs; releases the lock afterwards. If a renewal fails, `work` runs on: its commit points
/// are conditional on the table's commit record, so they fail ([`TableError::LockLost`] at a
/// lease confirmation, `CommitPointLost` at the record) instead of overwriting another
/// writer's commit. `work` must still be safe to cancel at any await point (the caller may be
/// cancelled).
pub async fn with_lock<T, F>(lock: Arc<dyn LockProvider>, timeout: Duration, work: F) -> Result<T>
where
    F: std::future::Future<Output = Result<T>>,
{
    // Boxed, so that the (often large) work future is not laid out again inside
    // `with_lock_fenced`'s future: deep callers' stacks stay as small as before.
    let work = Box::pin(work);
    with_lock_fenced(lock, timeout, move |_| work).await
}

/// The lease [`with_lock_fenced`] holds, for the work under the lock to check at its commit
/// point that it still holds the lock with the token it was granted.
#[derive(Debug, Clone)]
pub struct Fence {
    lock: Arc<dyn LockProvider>,
    current: Arc<std::sync::Mutex<Lease>>,
}

tokio::task_local! {
    /// The lease of the innermost [`with_lock_fenced`] the current task runs inside.
    static HELD: Fence;
}

/// Confirms, at a commit point, that the current task still holds the table lock with the token
/// it was granted ([`Fence::confirm`] on the lease of the innermost [`with_lock`] /
/// [`with_lock_fenced`] around the caller). Fails with [`TableError::LockLost`] when it does
/// not, or when the caller runs outside any of them.
pub async fn confirm_held_lease() -> Result<()> {
    let fence = HELD
        .try_with(Fence::clone)
        .map_err(|_| TableError::LockLost {
            token: 0,
            reason: "the commit point was reached without holding the table lock".to_string(),
        })?;
    fence.confirm().await
}

/// The fencing token of the lease of the innermost [`with_lock`] / [`with_lock_fenced`]
/// around the caller (0 outside any).
pub fn held_token() -> u64 {
    HELD.try_with(|f| f.lease().token).unwrap_or(0)
}

impl Fence {
    /// The lease as last renewed.
    fn lease(&self) -> Lease {
        match self.current.lock() {
            Ok(l) => l.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set(&self, lease: Lease) {
        match self.current.lock() {
            Ok(mut l) => *l = lease,
            Err(poisoned) => *poisoned.into_inner() = lease,
        }
    }

    /// Renews the lease now, with the same owner and token, for a full [`LEASE`]: on success the
    /// caller holds the lock for at least that long from now. Fails with
    /// [`TableError::LockLost`] when the lease lapsed and another writer took the lock (or the
    /// provider cannot confirm it): the caller must not make its change visible.
    pub async fn confirm(&self) -> Result<()> {
        let held = self.lease();
        match self.lock.renew(&held, LEASE).await {
            Ok(renewed) if renewed.token == held.token => {
                log_lease("renewed", &renewed, now_us());
                self.set(renewed);
                Ok(())
            }
            Ok(renewed) => {
                log_lease("lost", &held, now_us());
                Err(TableError::LockLost {
                    token: held.token,
                    reason: format!("the provider renewed it with token {}", renewed.token),
                })
            }
            Err(e) => {
                log_lease("lost", &held, now_us());
                Err(TableError::LockLost {
                    token: held.token,
                    reason: e.to_string(),
                })
            }
        }
    }
}

/// [`with_lock`], handing `work` a [`Fence`] on the lease so that it can confirm, just before
/// its commit point, that it still holds the lock with its token.
pub async fn with_lock_fenced<T, F, Fut>(
    lock: Arc<dyn LockProvider>,
    timeout: Duration,
    work: F,
) -> Result<T>
where
    F: FnOnce(Fence) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let lease = acquire(lock.as_ref(), timeout).await?;
    let fence = Fence {
        lock: lock.clone(),
        current: Arc::new(std::sync::Mutex::new(lease)),
    };
    let renewals = async {
        loop {
            tokio::time::sleep(LEASE / 3).await;
            let held = fence.lease();
            match lock.renew(&held, LEASE).await {
                Ok(l) => {
                    log_lease("renewed", &l, now_us());
                    fence.set(l);
                }
                Err(e) => {
                    log_lease("lost", &held, now_us());
                    return e;
                }
            }
        }
    };
    let renewals = Box::pin(renewals);
    let work = Box::pin(HELD.scope(fence.clone(), work(fence.clone())));
    let mut work = work;
    // A failed renewal (the lease lapsed, e.g. this process stalled, and another writer may
    // hold the lock) does not cancel the work: its commit points are conditional
    // (`arbor_timeline::commit_point`) and fail by themselves when another writer committed
    // meanwhile, so the work ends reporting exactly what took effect.
    let result = tokio::select! {
        r = &mut work => r,
        e = renewals => {
            tracing::warn!(lock = %fence.lease().lock, error = %e, "the table lock's lease could not be renewed; this step's commit points now succeed only if no other writer committed");
            work.await
        }
    };
    release(lock.as_ref(), &fence.lease(), result).await
}

/// Java's liveness window for its own heartbeats: `hoodie.client.heartbeat.interval_in_ms`
/// (60 s) times `hoodie.client.heartbeat.tolerable.misses` (2), the defaults of Hudi 1.x.
const JAVA_HEARTBEAT_WINDOW: Duration = Duration::from_secs(120);

/// When the writer of a heartbeat file last beat (ms since the epoch): arbor writes the time
/// into the file; Java's `HoodieHeartbeatClient` (re)creates an empty file and reads its
/// modification time (`HoodieHeartbeatUtils.getLastHeartbeatTime`). Returns the time and
/// whether it is a Java beat.
pub(crate) fn last_beat_ms(bytes: &[u8], meta: &arbor_storage::ObjectMeta) -> (i64, bool) {
    match String::from_utf8_lossy(bytes).trim().parse::<i64>() {
        Ok(ms) => (ms, false),
        Err(_) => (meta.last_modified.timestamp_millis(), true),
    }
}

/// How long a Java writer's heartbeat counts as alive: at least Java's own window.
pub(crate) fn java_heartbeat_window(timeout: Duration) -> Duration {
    timeout.max(JAVA_HEARTBEAT_WINDOW)
}

/// True if the writer of `instant` beat within `timeout` (a Java writer, which beats only every
/// 60 s: within Java's own window, if longer).
pub async fn is_alive(
    storage: &Arc<dyn Storage>,
    instant: &InstantTime,
    timeout: Duration,
) -> Result<bool> {
    let Some((bytes, meta)) = storage.get_opt(&heartbeat_key(instant)).await? else {
        return Ok(false);
    };
    let (last, java) = last_beat_ms(&bytes, &meta);
    let window = if java {
        java_heartbeat_window(timeout)
    } else {
        timeout
    };
    let limit = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
    Ok(now_ms().saturating_sub(last) <= limit)
}

/// Rolls back the pending writes (`commit`, `deltacommit`, `replacecommit`; table services are
/// left alone) whose writer's heartbeat is missing or older than `heartbeat_timeout` (with a
/// zero timeout: every pending write), and finishes rollbacks a crash left unfinished, through
/// `rollback::rollback_failed_writes_where`. The caller holds the table lock. Returns the
/// rolled-back instants.
pub async fn rollback_failed(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
    heartbeat_timeout: Duration,
) -> Result<Vec<InstantTime>> {
    let mut alive: BTreeSet<InstantTime> = BTreeSet::new();
    // One listing for the liveness checks and the rollbacks: a pending instant that appears
    // after it is neither checked nor rolled back.
    let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    if !heartbeat_timeout.is_zero() {
        for instant in tl.pending() {
            if matches!(
                instant.action,
                Action::Commit | Action::DeltaCommit | Action::ReplaceCommit
            ) && is_alive(storage, &instant.requested_time, heartbeat_timeout).await?
            {
                alive.insert(instant.requested_time);
            }
        }
    }
    let done =
        rollback::rollback_failed_writes_on(tl, generator, |i| !alive.contains(&i.requested_time))
            .await?;
    for t in &done {
        stop_heartbeat(storage, t).await?;
    }
    super::mdt_sync::repair(storage, layout).await?;
    Ok(done)
}

/// Creates the partition marker of `partition` if absent (spec 1.4).
pub async fn ensure_partition_marker(
    storage: &Arc<dyn Storage>,
    partition: &str,
    instant: &str,
) -> Result<()> {
    let key = join(partition, PARTITION_MARKER);
    if storage.exists(&key).await? {
        return Ok(());
    }
    let depth = if partition.is_empty() {
        0
    } else {
        partition.split('/').count()
    };
    let text = format!(
        "#partition metadata\n#written by arbor at {instant}\ncommitTime={instant}\npartitionDepth={depth}\n"
    );
    match storage.put_if_absent(&key, Bytes::from(text)).await {
        Ok(_) | Err(StorageError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The commit metadata of a write: the stats per partition (an empty map when nothing was
/// written), `extraMetadata.schema` (always), the operation, `compacted=false`, version 1.
pub fn commit_metadata(
    operation: WriteOperationType,
    schema_json: &str,
    written: &[WrittenGroup],
) -> HoodieCommitMetadata {
    let mut m = HoodieCommitMetadata {
        partition_to_write_stats: Some(BTreeMap::new()),
        compacted: Some(false),
        version: Some(1),
        ..HoodieCommitMetadata::default()
    };
    for w in written {
        m.add_write_stat(w.partition.clone(), w.stat.clone());
    }
    m.insert_extra(SCHEMA_KEY, schema_json);
    m.set_operation_type(operation);
    m
}

/// The inflight workload profile (spec 3.3): one stat per partition with `fileId=""`,
/// `prevCommit="null"` and the planned insert/update/delete counts.
pub fn workload_profile(
    operation: WriteOperationType,
    schema_json: &str,
    plan: &WritePlan,
) -> HoodieCommitMetadata {
    let mut per: BTreeMap<String, (i64, i64, i64)> = BTreeMap::new();
    for g in &plan.groups {
        let e = per.entry(g.partition.clone()).or_default();
        e.0 += g.inserts.len() as i64;
        e.1 += g.updates.len() as i64;
        e.2 += g.deletes.len() as i64;
    }
    profile_of(operation, schema_json, per)
}

/// The workload profile of `written` (the commit metadata of written files): their insert,
/// update and delete counts summed per partition.
pub fn written_profile(written: &HoodieCommitMetadata) -> HoodieCommitMetadata {
    let mut per: BTreeMap<String, (i64, i64, i64)> = BTreeMap::new();
    for (p, stat) in written.write_stats() {
        let e = per.entry(p.to_string()).or_default();
        e.0 += stat.num_inserts.unwrap_or(0);
        e.1 += stat.num_update_writes.unwrap_or(0);
        e.2 += stat.num_deletes.unwrap_or(0);
    }
    let operation = written
        .operation_type()
        .unwrap_or(WriteOperationType::Unknown);
    profile_of(operation, written.schema().unwrap_or_default(), per)
}

/// A workload profile of the `(inserts, updates, deletes)` per partition.
fn profile_of(
    operation: WriteOperationType,
    schema_json: &str,
    per: BTreeMap<String, (i64, i64, i64)>,
) -> HoodieCommitMetadata {
    let mut m = HoodieCommitMetadata {
        partition_to_write_stats: Some(BTreeMap::new()),
        compacted: Some(false),
        version: Some(1),
        ..HoodieCommitMetadata::default()
    };
    for (p, (ins, upd, del)) in per {
        m.add_write_stat(
            p.clone(),
            HoodieWriteStat {
                file_id: Some(String::new()),
                prev_commit: Some("null".to_string()),
                num_inserts: Some(ins),
                num_update_writes: Some(upd),
                num_deletes: Some(del),
                partition_path: Some(p),
                ..HoodieWriteStat::default()
            },
        );
    }
    m.insert_extra(SCHEMA_KEY, schema_json);
    m.set_operation_type(operation);
    m
}

/// A completed write that changed what this instant also changes: shared file groups, or a
/// partition one of the two deletes (`DELETE_PARTITION`) and the other wrote to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other instant.
    pub other: Instant,
    /// The shared file groups, as `partition/fileId` (may be empty for a partition conflict).
    pub file_groups: Vec<String>,
    /// The partitions one of the two deletes and the other wrote to or replaced file groups
    /// in (empty for a file-group conflict between ordinary writes).
    pub partitions: Vec<String>,
}

/// The OCC check, run under the table lock on a freshly loaded timeline: every completed
/// `commit`/`deltacommit`/`replacecommit` that is neither `ours` nor in `planned_against` (the
/// completed instants of the state the write was planned on) and is not a compaction is a
/// conflict when its write stats or replaced file ids name a `(partition, fileId)` of
/// `changes`, or when one of the two is a `DELETE_PARTITION` naming a partition the other
/// wrote a file group in (new ones included) or replaced one in
/// ([`super::partition_conflict`]). A shared file group that both instants wrote as
/// merge-on-read log appends only, with no record key in common, is not a conflict
/// (`logs`, [`super::log_conflict`]). Returns the earliest such instant.
pub(crate) async fn find_conflict(
    timeline: &ActiveTimeline,
    ours: &InstantTime,
    planned_against: &BTreeSet<InstantTime>,
    changes: &Changes,
    logs: &mut LogConflictCheck<'_>,
) -> Result<Option<Conflict>> {
    if changes.file_groups.is_empty() && changes.deleted_partitions.is_empty() {
        return Ok(None);
    }
    for instant in timeline.completed_writes() {
        // Known when the plan was made and older than ours: the plan built on it. A write
        // requested after ours is a candidate even if it completed before the plan: its files
        // are newer than ours (slices order by instant time), so ours would lose to them.
        if &instant.requested_time == ours
            || (planned_against.contains(&instant.requested_time) && &instant.requested_time < ours)
        {
            continue;
        }
        let bytes = timeline.read(&instant).await?;
        let key = timeline.key_of(&instant)?;
        let content = decode_instant(&instant, &bytes, &key, false)?;
        let Some(theirs) = Changes::of_completed(&content) else {
            continue;
        };
        let shared = changes.shared_file_groups(&theirs);
        let shared = if shared.is_empty() {
            shared
        } else {
            let appends = LogAppends::of_content(instant.action, &content);
            logs.still_conflicting(shared, &appends).await?
        };
        let file_groups: Vec<String> = shared.iter().map(|(p, f)| join(p, f)).collect();
        let partitions = changes.shared_deleted_partitions(&theirs);
        if !file_groups.is_empty() || !partitions.is_empty() {
            return Ok(Some(Conflict {
                other: instant,
                file_groups,
                partitions,
            }));
        }
    }
    Ok(None)
}
