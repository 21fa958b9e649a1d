//! Rollback of failed or conflicting writes (hudi-format §3.8, §7.4).
//!
//! # Protocol
//! A rollback `R` of a pending instant `T`:
//! 1. **plan**: lists every partition (through the fsview [`StorageListing`]) and collects the
//!    data files whose name carries `T` (base files written by `T`; v8 log files, which are named
//!    with the deltacommit that wrote them), plus the files named in `T`'s inflight write stats;
//!    writes `R.rollback.requested` holding a `HoodieRollbackPlan` (one request per partition,
//!    keys relative to the table base, as Spark's shape with `fileId`/`latestBaseInstant` `""`);
//! 2. `R.rollback.inflight` (0 bytes, as Spark);
//! 3. deletes the planned files in batches, then the files the target's write markers name
//!    (`.hoodie/.temp/T/`, written by a distributed write's fragments) and the markers; any
//!    failed delete stops here (`T` stays pending, so
//!    its files stay invisible, and the next writer resumes `R`);
//! 4. completes `R_C.rollback` with a `HoodieRollbackMetadata` (`commitsRollback = [T]`);
//! 5. deletes `T`'s timeline files: `T.<action>.inflight`, then `T.<action>.requested`.
//!
//! # Crash safety
//! `T` keeps at least one timeline file until step 5, so until then `T` is pending and none of
//! its files is visible to any reader (a file of a pending instant is never committed, and `T`
//! still bounds the archival boundary from below, hudi-format §2.4). Data files are gone before
//! `T` disappears from the timeline, so no leftover of `T` can become visible through the
//! boundary rule. A crash at any point leaves one of:
//! - a pending `R` (requested or inflight): [`rollback_failed_writes`] (and [`rollback_instant`]
//!   of `T`) executes its plan again; deleting an already deleted file is not an error;
//! - a completed `R` and a pending `T` (step 5 interrupted): the remaining timeline files of `T`
//!   are deleted.
//!
//! Completed instants are never rolled back. When the table has a metadata table, the target's
//! MDT deltacommit (if any) is removed between steps 3 and 4, while the target is still pending.
//!
//! # Caller obligations
//! The caller holds the table lock, and every instant rolled back must belong to a writer that
//! is no longer running: a live writer could add files after the plan was made, and those would
//! survive the rollback. Writers that run concurrently with [`rollback_failed_writes`] must be
//! excluded with [`rollback_failed_writes_where`] (e.g. by a heartbeat).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant as StdInstant;

use arbor_fsview::listing::validate_partition;
use arbor_fsview::slice::join;
use arbor_fsview::{parse_data_file_name, PartitionListing, StorageListing};
use arbor_storage::{Storage, MAX_DELETE_BATCH};
use arbor_timeline::avro::{
    decode, decode_instant, encode_instant_for, HoodieInstantInfo, HoodieRollbackMetadata,
    HoodieRollbackPartitionMetadata, HoodieRollbackPlan, HoodieRollbackRequest, InstantContent,
};
use arbor_timeline::{
    Action, ActiveTimeline, Instant, InstantTime, InstantTimeGenerator, State, TableLayout,
    TimelineError,
};
use bytes::Bytes;

use crate::error::{Result, TableError};

/// The `version` arbor writes in rollback plans and metadata (as Spark 1.x does).
pub const ROLLBACK_SCHEMA_VERSION: i32 = 1;

/// The pending actions [`rollback_failed_writes`] rolls back.
const WRITE_ACTIONS: [Action; 3] = [Action::Commit, Action::DeltaCommit, Action::ReplaceCommit];

/// Rolls back every pending write instant (requested or inflight `commit`, `deltacommit`,
/// `replacecommit`) of the timeline: deletes its data files, writes a completed `rollback`
/// instant, then deletes the instant's own timeline files. Pending compactions, clustering and
/// other table services are left alone (a pending compaction is finished by
/// [`super::compaction::run_compaction`]). Rollbacks a crash left unfinished are finished first.
/// The caller holds the table lock and knows that no writer of a pending instant is still
/// running (module doc). Returns the rolled-back instant times, ascending.
pub async fn rollback_failed_writes(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
) -> Result<Vec<InstantTime>> {
    rollback_failed_writes_where(storage, layout, generator, |_| true).await
}

/// [`rollback_failed_writes`] limited to the pending write instants `select` accepts (e.g. those
/// whose writer's heartbeat expired). Unfinished rollbacks are always finished, whatever
/// `select` says: their plan was already decided. Returns the rolled-back instant times,
/// ascending.
pub async fn rollback_failed_writes_where<F>(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
    select: F,
) -> Result<Vec<InstantTime>>
where
    F: Fn(&Instant) -> bool,
{
    let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    rollback_failed_writes_on(tl, generator, select).await
}

/// [`rollback_failed_writes_where`] on the timeline `tl` the caller just loaded (under the lock),
/// so that what `select` decided about its pending instants is decided on that same listing.
pub(crate) async fn rollback_failed_writes_on<F>(
    mut tl: ActiveTimeline,
    generator: &InstantTimeGenerator,
    select: F,
) -> Result<Vec<InstantTime>>
where
    F: Fn(&Instant) -> bool,
{
    let storage = &tl.storage().clone();
    let mut done: BTreeSet<InstantTime> = BTreeSet::new();
    let restoring = !tl
        .filter(&[Action::Restore], &[State::Requested, State::Inflight])
        .is_empty();
    for r in tl.filter(&[Action::Rollback], &[State::Requested, State::Inflight]) {
        let plan = read_plan(&tl, &r).await?;
        // A pending restore rolls back completed instants, newest first, each through a
        // rollback of its own (Java's restore stops at one it may not roll back, a savepointed
        // commit, and resumes when asked to restore again): that rollback is the restore's to
        // finish (`arbor restore`, or Java's `rollback_to_savepoint` to the same savepoint), not
        // a failed write's.
        if restoring && rolls_back_completed(&tl, &r, &plan)? {
            tracing::info!(rollback = %r, "leaving a pending restore's rollback of a completed instant to the restore");
            continue;
        }
        let target = execute(storage, &mut tl, &r, &plan, generator).await?;
        done.insert(target.requested_time);
    }
    let pending: Vec<Instant> = tl
        .pending()
        .into_iter()
        .filter(|i| WRITE_ACTIONS.contains(&i.action) && !done.contains(&i.requested_time))
        .filter(|i| select(i))
        .collect();
    if pending.is_empty() {
        return Ok(done.into_iter().collect());
    }
    let finished = completed_rollback_targets(&tl).await?;
    for instant in pending {
        if finished.contains_key(&instant.requested_time) {
            delete_timeline_files(storage, &mut tl, &instant.requested_time, instant.action)
                .await?;
        } else {
            start_rollback(storage, &mut tl, &instant, generator).await?;
        }
        done.insert(instant.requested_time);
    }
    Ok(done.into_iter().collect())
}

/// Rolls back one pending instant (e.g. the writer's own after a commit conflict, or a pending
/// compaction that should be dropped): plan, delete its data files, complete a `rollback`
/// instant, delete its timeline files (module doc). An unfinished rollback of the same instant is
/// resumed instead of starting a second one. Returns the rollback's instant time.
///
/// Errors: `Timeline(InstantNotFound)` when `instant` has no file on the timeline;
/// `Timeline(InvalidTransition)` when it is completed (completed instants are never rolled
/// back); storage failures (the rollback then stays pending and is resumed by the next call).
/// The caller holds the table lock.
pub async fn rollback_instant(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    instant: &Instant,
    generator: &InstantTimeGenerator,
) -> Result<InstantTime> {
    let mut tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let time = &instant.requested_time;
    let files =
        tl.get(time, instant.action)
            .cloned()
            .ok_or_else(|| TimelineError::InstantNotFound {
                instant: format!("{time} ({})", instant.action),
            })?;
    let target = files
        .latest()
        .cloned()
        .ok_or_else(|| TimelineError::InstantNotFound {
            instant: format!("{time} ({})", instant.action),
        })?;
    if let Some(done) = &files.completed {
        return Err(TimelineError::InvalidTransition {
            instant: done.to_string(),
            reason: "a completed instant is never rolled back".into(),
        }
        .into());
    }
    for r in tl.filter(&[Action::Rollback], &[State::Requested, State::Inflight]) {
        let plan = read_plan(&tl, &r).await?;
        if plan_target(&plan, &r)?.0 == *time {
            execute(storage, &mut tl, &r, &plan, generator).await?;
            return Ok(r.requested_time);
        }
    }
    let finished = completed_rollback_targets(&tl).await?;
    if let Some(r) = finished.get(time) {
        delete_timeline_files(storage, &mut tl, time, target.action).await?;
        return Ok(r.clone());
    }
    start_rollback(storage, &mut tl, &target, generator).await
}

/// Plans the rollback of `target` (a pending instant in its latest state), writes the requested
/// rollback instant and executes it.
async fn start_rollback(
    storage: &Arc<dyn Storage>,
    tl: &mut ActiveTimeline,
    target: &Instant,
    generator: &InstantTimeGenerator,
) -> Result<InstantTime> {
    let plan = plan_rollback(storage, tl, target).await?;
    let r_time = tl.next_instant_time(generator).await?;
    let requested = Instant::requested(r_time.clone(), Action::Rollback);
    let bytes = encode_instant_for(
        &requested,
        &InstantContent::RollbackPlan(Box::new(plan.clone())),
    )?;
    let requested = tl
        .create_requested(r_time.clone(), Action::Rollback, Bytes::from(bytes))
        .await?;
    execute(storage, tl, &requested, &plan, generator).await?;
    Ok(r_time)
}

/// The files of `target` to delete, per partition: every data file whose name carries the
/// instant time, found by listing every partition, plus such files named in the inflight write
/// stats (when the inflight file holds commit metadata). Write stats naming an invalid
/// partition path, or a path outside their partition, are ignored with a warning: every planned
/// key is `<valid partition>/<data file name carrying the target's instant time>`.
pub async fn plan_rollback(
    storage: &Arc<dyn Storage>,
    timeline: &ActiveTimeline,
    target: &Instant,
) -> Result<HoodieRollbackPlan> {
    let time = &target.requested_time;
    let mut files: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let listing = StorageListing::new(storage.clone());
    let partitions = listing
        .list_partitions()
        .await
        .map_err(TableError::from_fsview)?;
    for partition in partitions {
        for f in listing
            .list_files(&partition)
            .await
            .map_err(TableError::from_fsview)?
        {
            if written_by(&f.name, time) {
                files
                    .entry(partition.clone())
                    .or_default()
                    .insert(join(&partition, &f.name));
            }
        }
    }
    let inflight = timeline
        .get(time, target.action)
        .and_then(|f| f.inflight.clone());
    if let Some(inflight) = inflight {
        let key = timeline.key_of(&inflight)?;
        let bytes = timeline.read(&inflight).await?;
        match decode_instant(&inflight, &bytes, &key, false) {
            Ok(InstantContent::Commit(m)) => {
                for (partition, stat) in m.write_stats() {
                    match stat_key(partition, stat.path.as_deref(), time) {
                        Ok(Some(key)) => {
                            files.entry(partition.to_string()).or_default().insert(key);
                        }
                        Ok(None) => {}
                        Err(reason) => {
                            tracing::warn!(file = %key, partition, path = ?stat.path, %reason, "ignoring a write stat of the rolled-back instant");
                        }
                    }
                }
            }
            Ok(_) => {}
            // The listing is authoritative; the inflight profile only adds what it names.
            Err(e) => {
                tracing::warn!(file = %key, error = %e, "ignoring unreadable inflight metadata")
            }
        }
    }
    let requests = files
        .into_iter()
        .map(|(partition, keys)| HoodieRollbackRequest {
            partition_path: partition,
            file_id: Some(String::new()),
            latest_base_instant: Some(String::new()),
            files_to_be_deleted: keys.into_iter().collect(),
            log_blocks_to_be_deleted: Some(BTreeMap::new()),
        })
        .collect();
    Ok(HoodieRollbackPlan {
        instant_to_rollback: Some(HoodieInstantInfo {
            commit_time: time.to_string(),
            action: target.action.name().to_string(),
        }),
        rollback_requests: Some(requests),
        version: Some(ROLLBACK_SCHEMA_VERSION),
    })
}

/// The key of the data file a write stat of instant `time` names, when it is one `time` wrote:
/// `Ok(None)` for a stat without a path or naming another instant's file, `Err` for one that
/// cannot be trusted (invalid partition, a path outside its partition).
fn stat_key(
    partition: &str,
    path: Option<&str>,
    time: &InstantTime,
) -> std::result::Result<Option<String>, String> {
    validate_partition(partition).map_err(|e| e.to_string())?;
    let Some(path) = path else {
        return Ok(None);
    };
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    if dir != partition {
        return Err(format!(
            "the stat's path {path:?} is not inside its partition {partition:?}"
        ));
    }
    Ok(written_by(name, time).then(|| join(partition, name)))
}

/// Deletes every data file instant `time` wrote in `partitions` (one LIST per partition): what
/// an interrupted attempt of a pending table service left, before the service runs again. The
/// caller knows `time` is not completed.
pub(crate) async fn delete_files_written_by(
    storage: &Arc<dyn Storage>,
    partitions: &BTreeSet<String>,
    time: &InstantTime,
) -> Result<()> {
    let mut keys = Vec::new();
    for p in partitions {
        let (objects, _) = storage.list_dir(p).await?;
        for o in objects {
            let name = o.key.rsplit('/').next().unwrap_or(&o.key);
            if written_by(name, time) {
                keys.push(o.key.clone());
            }
        }
    }
    for chunk in keys.chunks(arbor_storage::MAX_DELETE_BATCH) {
        for r in storage.delete_batch(chunk).await? {
            r?;
        }
    }
    Ok(())
}

/// True if `name` is a data file (base or log) written by instant `time`. Such a name never
/// holds a `/` (it must parse as a data file name).
fn written_by(name: &str, time: &InstantTime) -> bool {
    if name.contains('/') {
        return false;
    }
    matches!(parse_data_file_name(name, 0), Ok(Some(d)) if d.instant_time() == time)
}

/// The instant a plan rolls back (time and action name).
fn plan_target(plan: &HoodieRollbackPlan, rollback: &Instant) -> Result<(InstantTime, String)> {
    let info =
        plan.instant_to_rollback
            .as_ref()
            .ok_or_else(|| TimelineError::InvalidTransition {
                instant: rollback.to_string(),
                reason: "the rollback plan names no instant to roll back".into(),
            })?;
    Ok((InstantTime::parse(&info.commit_time)?, info.action.clone()))
}

/// Whether rollback `r` (with `plan`) targets an instant completed on `tl`.
fn rolls_back_completed(
    tl: &ActiveTimeline,
    r: &Instant,
    plan: &HoodieRollbackPlan,
) -> Result<bool> {
    let (time, action) = plan_target(plan, r)?;
    Ok(Action::from_name(&action)
        .and_then(|a| tl.get(&time, a))
        .is_some_and(|f| f.completed.is_some()))
}

async fn read_plan(tl: &ActiveTimeline, rollback: &Instant) -> Result<HoodieRollbackPlan> {
    let requested = rollback.with_state(State::Requested);
    let key = tl.key_of(&requested)?;
    let bytes = tl.read(&requested).await?;
    Ok(decode::<HoodieRollbackPlan>(&bytes, &key)?)
}

/// Rolled-back instant time -> the completed rollback that names it, for every completed
/// rollback on the active timeline.
async fn completed_rollback_targets(
    tl: &ActiveTimeline,
) -> Result<BTreeMap<InstantTime, InstantTime>> {
    let mut out = BTreeMap::new();
    for r in tl.filter(&[Action::Rollback], &[State::Completed]) {
        let key = tl.key_of(&r)?;
        let bytes = tl.read(&r).await?;
        let meta: HoodieRollbackMetadata = decode(&bytes, &key)?;
        for t in &meta.commits_rollback {
            if let Ok(t) = InstantTime::parse(t) {
                out.insert(t, r.requested_time.clone());
            }
        }
    }
    Ok(out)
}

/// Executes a planned rollback `r` (requested or inflight): inflight, delete the files, complete,
/// delete the target's timeline files. Returns the rolled-back instant.
async fn execute(
    storage: &Arc<dyn Storage>,
    tl: &mut ActiveTimeline,
    r: &Instant,
    plan: &HoodieRollbackPlan,
    generator: &InstantTimeGenerator,
) -> Result<Instant> {
    let started = StdInstant::now();
    let (target_time, target_action) = plan_target(plan, r)?;
    let target_action =
        Action::from_name(&target_action).ok_or_else(|| TimelineError::InvalidTransition {
            instant: r.to_string(),
            reason: format!("the rollback plan names unknown action {target_action:?}"),
        })?;
    if let Some(done) = tl
        .get(&target_time, target_action)
        .and_then(|f| f.completed.clone())
    {
        return Err(TimelineError::InvalidTransition {
            instant: done.to_string(),
            reason: format!("{r} would roll back a completed instant; arbor never does"),
        }
        .into());
    }
    let inflight = match r.state {
        State::Requested => tl.transition_to_inflight(r, Bytes::new()).await?,
        _ => r.with_state(State::Inflight),
    };

    // Keys to delete, checked: only data files written by the target, in valid partition
    // paths, are ever deleted (the plan may come from another writer).
    let mut partitions: BTreeMap<String, HoodieRollbackPartitionMetadata> = BTreeMap::new();
    let mut keys: Vec<String> = Vec::new();
    for req in plan.rollback_requests.iter().flatten() {
        // An invalid partition path is neither deleted from nor recorded in the metadata.
        if let Err(e) = validate_partition(&req.partition_path) {
            tracing::warn!(rollback = %r, error = %e, files = ?req.files_to_be_deleted, "not deleting files of an invalid partition path");
            continue;
        }
        let meta = partitions
            .entry(req.partition_path.clone())
            .or_insert_with(|| HoodieRollbackPartitionMetadata {
                partition_path: req.partition_path.clone(),
                success_delete_files: Vec::new(),
                failed_delete_files: Vec::new(),
                rollback_log_files: Some(BTreeMap::new()),
                log_files_from_failed_commit: Some(BTreeMap::new()),
            });
        for path in &req.files_to_be_deleted {
            let name = path.rsplit('/').next().unwrap_or(path);
            if written_by(name, &target_time) {
                keys.push(join(&req.partition_path, name));
                meta.success_delete_files.push(path.clone());
            } else {
                tracing::warn!(rollback = %r, file = %path, "not deleting a file the rolled-back instant did not write");
                meta.failed_delete_files.push(path.clone());
            }
        }
    }
    for chunk in keys.chunks(MAX_DELETE_BATCH) {
        for result in storage.delete_batch(chunk).await? {
            result?;
        }
    }
    delete_marked_files(storage, &target_time).await?;

    // The target's MDT deltacommit goes while the target is still pending (its blocks are
    // invalid until then, spec 6.5); a completed rollback would make them valid again.
    super::mdt_sync::rollback_instant(storage, &target_time).await?;

    let total = partitions
        .values()
        .map(|p| p.success_delete_files.len())
        .sum::<usize>();
    let metadata = HoodieRollbackMetadata {
        start_rollback_time: r.requested_time.to_string(),
        time_taken_in_millis: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        total_files_deleted: i32::try_from(total).unwrap_or(i32::MAX),
        commits_rollback: vec![target_time.to_string()],
        partition_metadata: partitions,
        version: Some(ROLLBACK_SCHEMA_VERSION),
        instants_rollback: vec![HoodieInstantInfo {
            commit_time: target_time.to_string(),
            action: target_action.name().to_string(),
        }],
    };
    let completion = tl.next_instant_time(generator).await?;
    let mut completed = inflight.with_state(State::Completed);
    completed.completion_time = Some(completion.clone());
    let bytes = encode_instant_for(&completed, &InstantContent::Rollback(Box::new(metadata)))?;
    match tl.complete(&inflight, completion, Bytes::from(bytes)).await {
        Ok(_) | Err(TimelineError::AlreadyCompleted { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    delete_timeline_files(storage, tl, &target_time, target_action).await?;
    Ok(Instant::requested(target_time, target_action))
}

/// Deletes the data files the write markers of `target` name (a distributed write's fragments
/// mark every file before storing it, [`super::markers`]), those the target wrote only, then
/// the markers.
async fn delete_marked_files(storage: &Arc<dyn Storage>, target: &InstantTime) -> Result<()> {
    let (files, markers) = super::markers::marked_files(storage.as_ref(), target.as_str()).await?;
    let files: Vec<String> = files
        .into_iter()
        .filter(|k| written_by(k.rsplit('/').next().unwrap_or(k), target))
        .collect();
    super::markers::delete_keys(storage.as_ref(), &files).await?;
    super::markers::delete_keys(storage.as_ref(), &markers).await
}

/// Deletes the pending timeline files of a rolled-back instant: inflight first, requested last
/// (so the instant stays known as pending until nothing of it is left). Refuses to touch a
/// completed instant.
async fn delete_timeline_files(
    storage: &Arc<dyn Storage>,
    tl: &mut ActiveTimeline,
    time: &InstantTime,
    action: Action,
) -> Result<()> {
    tl.reload().await?;
    let Some(files) = tl.get(time, action).cloned() else {
        return Ok(());
    };
    if let Some(done) = files.completed {
        return Err(TimelineError::InvalidTransition {
            instant: done.to_string(),
            reason: "a completed instant is never rolled back".into(),
        }
        .into());
    }
    for instant in [files.inflight, files.requested].into_iter().flatten() {
        let key = tl.key_of(&instant)?;
        for result in storage.delete_batch(std::slice::from_ref(&key)).await? {
            result?;
        }
    }
    tl.reload().await?;
    Ok(())
}
