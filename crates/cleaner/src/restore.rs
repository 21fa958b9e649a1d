//! Restore to a savepoint (spec 3.8, 7.4): every data-changing instant after the savepointed
//! instant is rolled back, and a `restore` instant records what was done.
//!
//! # Protocol (under the table lock)
//! 1. A restore a crash left pending is finished first, from its plan.
//! 2. **Refusals** (nothing written): no completed data-side savepoint at `S`; a newer completed
//!    savepoint (named in the error: restoring would roll back the instant it protects); a
//!    pending clean; a pending write after `S` whose writer is still alive; a metadata-table
//!    partition initialised after a write the restore would roll back (its base files hold that
//!    write's entries); metadata-table history needed to undo a metadata-table compaction that
//!    was archived; on a clone (`.hoodie/clone.json` in its own location), `S` before the clone
//!    point (the clone keeps no history before it; restoring to the clone point is allowed).
//! 3. **Plan**: every instant after `S` (by requested time) that changed data: completed or
//!    pending `commit`, `deltacommit`, `replacecommit`, compaction, clustering and log
//!    compaction, newest first. Completed cleans and rollbacks after `S` stay: the savepoint kept
//!    the files the restored snapshot needs. `R.restore.requested` holds the
//!    `HoodieRestorePlan` (version 2), then `R.restore.inflight` (empty).
//! 4. **Metadata table**: every MDT compaction after `S` is removed (completed file first, so
//!    its base files stop being read, then its base files and pending files). The MDT then reads
//!    the base files of its latest compaction at or before `S` plus every later log file; each
//!    still belongs to a completed instant, so readers see the same listing as before this
//!    step, and rolling back a data instant (which deletes its MDT deltacommit's log files) now
//!    really removes its entries from FILES and the indexes.
//! 5. **Rollbacks**, newest first: a completed instant is made pending (its completed file is
//!    deleted: its files and its MDT blocks stop being visible at once), then rolled back like a
//!    failed write ([`Transaction::rollback_instant`]: its data files, its MDT
//!    deltacommit, a `rollback` instant, its timeline files). An instant no longer on the
//!    timeline was rolled back already and is skipped.
//! 6. `R_<c>.restore` with the `HoodieRestoreMetadata` (the rollback metadata of every instant).
//!
//! # Crash safety
//! Every step is idempotent: a crash leaves a pending restore (finished from its plan by the
//! next [`restore`]), instants it made pending (rolled back by the next writer as failed writes,
//! or by the restore), or a pending rollback (finished by either). A reader between two steps
//! sees a consistent table whose state lies between the original and the restored one.
//!
//! # Caller obligations
//! Writers that start while a restore is pending (after a crash) write on a partly restored
//! table; finish the restore (run it again) before writing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant as StdInstant;

use arbor_fsview::{parse_data_file_name, DataFile};
use arbor_mdt::compaction::rollback_pending_compactions;
use arbor_mdt::validity::is_init_instant;
use arbor_mdt::{MdtWriter, MDT_BASE};
use arbor_storage::{Storage, StorageError, StorageExt};
use arbor_table::{Table, Transaction};
use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::avro::{
    decode, encode_instant_for, HoodieInstantInfo, HoodieRestoreMetadata, HoodieRestorePlan,
    HoodieRollbackMetadata, InstantContent,
};
use arbor_timeline::layout::CloneDescriptor;
use arbor_timeline::{Action, ActiveTimeline, Instant, InstantTime, State, TimelineError};
use bytes::Bytes;

use crate::error::{CleanerError, Result};
use crate::roots::check_no_shared_instants;

/// Refuses (nothing changed) a restore to `to` of a clone (a table whose own location holds
/// `arbor_timeline::layout::CLONE_FILE`, active or detached) when `to` is before its clone point:
/// it would roll back the clone point's snapshot and restore history the clone never had (a
/// clone keeps only its source's snapshot at the clone point; older files may be gone from the
/// source and were never copied by a detach). A restore to the clone point itself rolls back
/// only the clone's own instants and is allowed. `storage` is the table's storage (every root
/// of a clone reads the same descriptor from the clone's own location).
async fn check_clone_point(storage: &Arc<dyn Storage>, to: &InstantTime) -> Result<()> {
    let Some((descriptor, _)) = CloneDescriptor::load(storage.as_ref()).await? else {
        return Ok(());
    };
    let Some(point) = descriptor.clone_point()? else {
        return Ok(());
    };
    if *to >= point {
        return Ok(());
    }
    let source = descriptor
        .sources
        .first()
        .map_or("its source", |s| s.location.as_str());
    Err(CleanerError::refused(
        format!("restore to {to}"),
        format!(
            "the table is clone {} of {source} at {point}: instant {to} is before its clone point,              whose history the clone does not keep; restore the clone to {point} or later, or              restore the source itself",
            descriptor.id
        ),
    ))
}

/// The restore plan's version (spec 3.8).
const RESTORE_PLAN_VERSION: i32 = 2;

/// The restore metadata's version (spec 3.8).
const RESTORE_METADATA_VERSION: i32 = 1;

/// The actions a restore rolls back (in any state; completed compaction and clustering carry
/// `commit` and `replacecommit`).
const RESTORED_ACTIONS: [Action; 6] = [
    Action::Commit,
    Action::DeltaCommit,
    Action::ReplaceCommit,
    Action::Compaction,
    Action::Clustering,
    Action::LogCompaction,
];

/// What [`restore`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreOutcome {
    /// The completed restore instant.
    pub instant: InstantTime,
    /// The instants rolled back, newest first (the restore plan's order).
    pub rolled_back: Vec<InstantTime>,
}

/// Restores the table to its savepoint at `to` under the table lock (module doc): afterwards
/// the latest snapshot is the savepoint's snapshot, and every instant after `to` that changed
/// data is gone from the active timeline. Refused ([`CleanerError::Refused`], nothing written)
/// when there is no completed savepoint at `to`, a newer savepoint exists (named), a clean is
/// pending, a write after `to` is still running, or the metadata table cannot be restored with
/// it, or when an instant it would roll back is also completed on another live root of the
/// table (rolling it back would delete files that root reads; the roots are discovered from
/// storage), when a clone pin holds an instant after `to` on this root (the clone reads that
/// snapshot; the pins are named), or when the table is a shallow or detached clone and `to` is
/// before its clone point (history the clone does not keep). A restore a crash left pending is
/// finished first.
pub async fn restore(table: &Table, to: &InstantTime) -> Result<RestoreOutcome> {
    table.transact(|txn| restore_locked(txn, to)).await
}

/// [`restore`] as a step of transaction `txn` (which holds the table lock) on its handle (the
/// other live roots are checked here too).
pub async fn restore_locked(txn: Transaction<'_>, to: &InstantTime) -> Result<RestoreOutcome> {
    let table = txn.table();
    let storage = table.view_storage();
    let root = crate::savepoint::root_label(table.root());
    let pinned: Vec<String> = arbor_timeline::layout::PinRecord::list(storage.as_ref())
        .await?
        .into_iter()
        .filter(|p| p.root == root && p.instant_time().is_ok_and(|t| t > *to))
        .map(|p| format!("{} at {} (instant {})", p.clone_id, p.location, p.instant))
        .collect();
    if !pinned.is_empty() {
        return Err(CleanerError::refused(
            format!("restore to {to}"),
            format!(
                "clone(s) {} read a snapshot this restore would roll back (see `arbor clone \
                 list`); detach or forget them first",
                pinned.join(", ")
            ),
        ));
    }
    let own = TimelineHistory::load(storage.clone(), table.layout().clone()).await?;
    // Only what the restore rolls back (step 3 of the module doc): a clean, rollback or
    // savepoint after `to` stays, so another root having it too (a branch inherits main's
    // timeline, cleans after its base included) is no conflict.
    let rolled: BTreeSet<InstantTime> = own
        .active()
        .instants()
        .into_iter()
        .filter(|i| i.requested_time > *to && RESTORED_ACTIONS.contains(&i.action))
        .map(|i| i.requested_time)
        .collect();
    check_no_shared_instants(table.table_storage(), table.root(), to, &rolled).await?;
    check_clone_point(table.table_storage(), to).await?;
    let tl = ActiveTimeline::load(storage.clone(), table.layout().clone()).await?;
    let mut finished = None;
    for pending in tl.filter(&[Action::Restore], &[State::Requested, State::Inflight]) {
        let requested = pending.with_state(State::Requested);
        let key = tl.key_of(&requested)?;
        let plan: HoodieRestorePlan = decode(&tl.read(&requested).await?, &key)?;
        let savepoint = savepoint_of(&plan, &key)?;
        tracing::info!(restore = %pending.requested_time, to = %savepoint, "finishing a pending restore");
        let outcome = execute(txn, &pending, &plan, &savepoint).await?;
        if savepoint == *to {
            finished = Some(outcome);
        }
    }
    if let Some(outcome) = finished {
        return Ok(outcome);
    }

    let mut tl = ActiveTimeline::load(storage.clone(), table.layout().clone()).await?;
    let op = format!("restore to {to}");
    if tl
        .get(to, Action::Savepoint)
        .is_none_or(|f| f.completed.is_none())
    {
        return Err(CleanerError::refused(
            op,
            "there is no completed savepoint at this instant; create one with `arbor savepoint \
             create`",
        ));
    }
    let newer: Vec<String> = tl
        .filter(&[Action::Savepoint], &[State::Completed])
        .into_iter()
        .filter(|s| s.requested_time > *to)
        .map(|s| s.requested_time.to_string())
        .collect();
    if !newer.is_empty() {
        return Err(CleanerError::refused(
            op,
            format!(
                "newer savepoint(s) {} would be rolled back; delete them first or restore to the \
                 newest",
                newer.join(", ")
            ),
        ));
    }
    if let Some(c) = tl
        .filter(&[Action::Clean], &[State::Requested, State::Inflight])
        .first()
    {
        return Err(CleanerError::refused(
            op,
            format!(
                "clean {} is pending; run `arbor clean` to finish it first",
                c.requested_time
            ),
        ));
    }
    // Failed writes were rolled back when the lock was taken: a pending write left is alive.
    if let Some(w) = tl
        .pending()
        .into_iter()
        .find(|i| i.action.is_write() && i.requested_time > *to)
    {
        return Err(CleanerError::refused(
            op,
            format!(
                "write {} is still running; wait for it to finish (or its heartbeat to expire)",
                w.requested_time
            ),
        ));
    }

    let planned: Vec<Instant> = tl
        .instants()
        .into_iter()
        .rev()
        .filter(|i| i.requested_time > *to && RESTORED_ACTIONS.contains(&i.action))
        .collect();
    check_metadata_table(storage, &tl, to, &planned, &op).await?;

    let plan = HoodieRestorePlan {
        instants_to_rollback: planned
            .iter()
            .map(|i| HoodieInstantInfo {
                commit_time: i.requested_time.to_string(),
                action: i.action.name().to_string(),
            })
            .collect(),
        version: Some(RESTORE_PLAN_VERSION),
        savepoint_to_restore_timestamp: Some(to.to_string()),
    };
    let time = tl.next_instant_time(table.generator()).await?;
    let requested = Instant::requested(time.clone(), Action::Restore);
    let bytes = encode_instant_for(
        &requested,
        &InstantContent::RestorePlan(Box::new(plan.clone())),
    )?;
    let requested = tl
        .create_requested(time, Action::Restore, Bytes::from(bytes))
        .await?;
    execute(txn, &requested, &plan, to).await
}

/// The savepoint a stored restore plan restores to.
fn savepoint_of(plan: &HoodieRestorePlan, path: &str) -> Result<InstantTime> {
    let corrupt = |reason: String| CleanerError::Corrupt {
        path: path.to_string(),
        reason,
    };
    let text = plan
        .savepoint_to_restore_timestamp
        .as_deref()
        .ok_or_else(|| corrupt("the restore plan names no savepoint".to_string()))?;
    InstantTime::parse(text).map_err(|e| corrupt(format!("savepoint {text:?}: {e}")))
}

/// The planned instants of a stored plan, checked (time, action).
fn planned_instants(
    plan: &HoodieRestorePlan,
    savepoint: &InstantTime,
    path: &str,
) -> Result<Vec<(InstantTime, Action)>> {
    let corrupt = |reason: String| CleanerError::Corrupt {
        path: path.to_string(),
        reason,
    };
    plan.instants_to_rollback
        .iter()
        .map(|info| {
            let t = InstantTime::parse(&info.commit_time)
                .map_err(|e| corrupt(format!("instant {:?}: {e}", info.commit_time)))?;
            let a = Action::from_name(&info.action)
                .filter(|a| RESTORED_ACTIONS.contains(a))
                .ok_or_else(|| {
                    corrupt(format!("{t}: a restore never rolls back {:?}", info.action))
                })?;
            if t <= *savepoint {
                return Err(corrupt(format!(
                    "{t} is not after the savepoint {savepoint}"
                )));
            }
            Ok((t, a))
        })
        .collect()
}

/// Checks that the metadata table can follow the restore (read only):
/// - no MDT partition was initialised (a base file built from the whole table) after a write
///   the restore rolls back completed: that base file holds the write's entries;
/// - when MDT compactions after `to` are to be removed, every MDT log file they folded (after
///   the latest compaction at or before `to`) still belongs to an instant on an active timeline:
///   an archived one's blocks would no longer be read.
async fn check_metadata_table(
    storage: &Arc<dyn Storage>,
    data: &ActiveTimeline,
    to: &InstantTime,
    planned: &[Instant],
    op: &str,
) -> Result<()> {
    let Some(writer) = MdtWriter::open(storage.clone()).await? else {
        return Ok(());
    };
    let mdt = ActiveTimeline::load(storage.clone(), writer.layout().clone()).await?;
    let first_rolled_back_completion = planned
        .iter()
        .filter_map(|i| i.completion_time.clone())
        .min();
    if let Some(first) = &first_rolled_back_completion {
        for init in mdt.completed() {
            if is_init_instant(&init.requested_time)
                && init.completion_time.as_ref().is_some_and(|c| c > first)
            {
                return Err(CleanerError::refused(
                    op,
                    format!(
                        "metadata-table partition initialisation {} completed after {first}, when \
                         a write this restore rolls back had completed; its base files cannot be \
                         rolled back",
                        init.requested_time
                    ),
                ));
            }
        }
    }
    let compactions: Vec<InstantTime> = mdt
        .completed()
        .into_iter()
        .filter(|i| i.action == Action::Commit && !is_init_instant(&i.requested_time))
        .map(|i| i.requested_time)
        .collect();
    if !compactions.iter().any(|c| c > to) {
        return Ok(());
    }
    let base = compactions.iter().filter(|c| *c <= to).max();
    let mdt_deltas: BTreeSet<InstantTime> = mdt
        .completed()
        .into_iter()
        .filter(|i| i.action == Action::DeltaCommit)
        .map(|i| i.requested_time)
        .collect();
    let data_writes: BTreeSet<InstantTime> = data
        .completed_writes()
        .into_iter()
        .map(|i| i.requested_time)
        .collect();
    let (_objects, dirs) = storage.list_dir(MDT_BASE).await?;
    for dir in dirs {
        if dir.rsplit('/').next().is_some_and(|n| n.starts_with('.')) {
            continue;
        }
        let (objects, _) = storage.list_dir(&dir).await?;
        for o in objects {
            let name = o.key.rsplit('/').next().unwrap_or(&o.key);
            let Ok(Some(DataFile::Log(log))) = parse_data_file_name(name, o.size) else {
                continue;
            };
            let t = &log.delta_commit_time;
            let needed = !is_init_instant(t) && base.is_none_or(|b| t > b) && t <= to;
            if needed && !mdt_deltas.contains(t) && !data_writes.contains(t) {
                return Err(CleanerError::refused(
                    op,
                    format!(
                        "metadata-table compactions after {to} must be undone, but instant {t} \
                         of {} was archived; its blocks would no longer be read",
                        o.key
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Removes every MDT compaction after `to` (module doc, step 4). Returns their instants.
async fn remove_mdt_compactions_after(
    storage: &Arc<dyn Storage>,
    to: &InstantTime,
) -> Result<Vec<InstantTime>> {
    let Some(writer) = MdtWriter::open(storage.clone()).await? else {
        return Ok(Vec::new());
    };
    let layout = writer.layout().clone();
    let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let mut removed = Vec::new();
    let mut newest_first: Vec<_> = tl
        .instant_files()
        .filter(|((t, a), _)| *a == Action::Commit && t > to && !is_init_instant(t))
        .map(|(k, f)| (k.0.clone(), f.clone()))
        .collect();
    newest_first.reverse();
    for (time, files) in newest_first {
        if let Some(done) = &files.completed {
            if files.requested.is_none() && files.inflight.is_none() {
                // Keep the compaction known as pending once its completed file is gone.
                let requested = Instant::requested(time.clone(), Action::Compaction);
                put_if_absent(storage, &layout.instant_key(&requested)?).await?;
            }
            storage.delete(&layout.instant_key(done)?).await?;
        }
        removed.push(time);
    }
    // Deletes the base files and timeline files of every pending MDT compaction.
    rollback_pending_compactions(&writer).await?;
    Ok(removed)
}

async fn put_if_absent(storage: &Arc<dyn Storage>, key: &str) -> Result<()> {
    match storage.put_if_absent(key, Bytes::new()).await {
        Ok(_) | Err(StorageError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Rolled-back instant time -> the metadata of the completed rollback naming it.
async fn rollback_metadata(
    tl: &ActiveTimeline,
) -> Result<BTreeMap<InstantTime, HoodieRollbackMetadata>> {
    let mut out = BTreeMap::new();
    for r in tl.filter(&[Action::Rollback], &[State::Completed]) {
        let key = tl.key_of(&r)?;
        let meta: HoodieRollbackMetadata = match decode(&tl.read(&r).await?, &key) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(path = %key, error = %e, "unreadable rollback metadata");
                continue;
            }
        };
        for t in &meta.commits_rollback {
            if let Ok(t) = InstantTime::parse(t) {
                out.insert(t, meta.clone());
            }
        }
    }
    Ok(out)
}

/// Executes restore `restore` (requested or inflight) with `plan`: module doc steps 4–6.
async fn execute(
    txn: Transaction<'_>,
    restore: &Instant,
    plan: &HoodieRestorePlan,
    to: &InstantTime,
) -> Result<RestoreOutcome> {
    let table = txn.table();
    let storage = table.view_storage();
    let layout = table.layout();
    let started = StdInstant::now();
    let mut tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let plan_key = tl.key_of(&restore.with_state(State::Requested))?;
    let planned = planned_instants(plan, to, &plan_key)?;
    let inflight = match tl.get(&restore.requested_time, Action::Restore) {
        Some(f) if f.inflight.is_some() => restore.with_state(State::Inflight),
        _ => {
            tl.transition_to_inflight(&restore.with_state(State::Requested), Bytes::new())
                .await?
        }
    };

    let removed = remove_mdt_compactions_after(storage, to).await?;
    if !removed.is_empty() {
        tracing::info!(compactions = ?removed, "removed metadata-table compactions after the savepoint");
    }

    for (time, action) in &planned {
        tl.reload().await?;
        let Some(files) = tl.get(time, *action).cloned() else {
            continue; // rolled back already
        };
        if let Some(done) = &files.completed {
            if files.requested.is_none() && files.inflight.is_none() {
                // Keep the instant known as pending once its completed file is gone: its MDT
                // blocks must stay invalid until they are removed.
                let requested = Instant::requested(time.clone(), files.pending_action);
                put_if_absent(storage, &tl.key_of(&requested)?).await?;
            }
            storage.delete(&tl.key_of(done)?).await?;
        }
        let target = Instant::requested(time.clone(), files.pending_action);
        let r = txn.rollback_instant(&target).await?;
        tracing::info!(instant = %time, rollback = %r, "rolled back for a restore");
    }

    tl.reload().await?;
    let rollbacks = rollback_metadata(&tl).await?;
    let metadata = HoodieRestoreMetadata {
        start_restore_time: restore.requested_time.to_string(),
        time_taken_in_millis: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        instants_to_rollback: planned.iter().map(|(t, _)| t.to_string()).collect(),
        hoodie_restore_metadata: planned
            .iter()
            .map(|(t, _)| {
                (
                    t.to_string(),
                    rollbacks.get(t).cloned().map(Some).into_iter().collect(),
                )
            })
            .collect(),
        version: Some(RESTORE_METADATA_VERSION),
        restore_instant_info: plan.instants_to_rollback.clone(),
        extra_metadata: None,
    };
    let completion = tl.next_instant_time(table.generator()).await?;
    let mut completed = inflight.with_state(State::Completed);
    completed.completion_time = Some(completion.clone());
    let bytes = encode_instant_for(&completed, &InstantContent::Restore(Box::new(metadata)))?;
    match tl.complete(&inflight, completion, Bytes::from(bytes)).await {
        Ok(_) | Err(TimelineError::AlreadyCompleted { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(RestoreOutcome {
        instant: restore.requested_time.clone(),
        rolled_back: planned.into_iter().map(|(t, _)| t).collect(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn plan(instants: &[(&str, &str)], savepoint: Option<&str>) -> HoodieRestorePlan {
        HoodieRestorePlan {
            instants_to_rollback: instants
                .iter()
                .map(|(t, a)| HoodieInstantInfo {
                    commit_time: t.to_string(),
                    action: a.to_string(),
                })
                .collect(),
            version: Some(RESTORE_PLAN_VERSION),
            savepoint_to_restore_timestamp: savepoint.map(str::to_string),
        }
    }

    #[test]
    fn test_planned_instants_valid_plan_keeps_order_and_actions() {
        let sp = InstantTime::parse("20240101000000000").unwrap();
        let p = plan(
            &[
                ("20240101000000003", "commit"),
                ("20240101000000002", "compaction"),
            ],
            Some("20240101000000000"),
        );
        assert_eq!(savepoint_of(&p, "k").unwrap(), sp);
        let got = planned_instants(&p, &sp, "k").unwrap();
        assert_eq!(
            got,
            vec![
                (
                    InstantTime::parse("20240101000000003").unwrap(),
                    Action::Commit
                ),
                (
                    InstantTime::parse("20240101000000002").unwrap(),
                    Action::Compaction
                ),
            ]
        );
    }

    #[test]
    fn test_planned_instants_untrusted_plan_is_corrupt() {
        let sp = InstantTime::parse("20240101000000005").unwrap();
        for bad in [
            plan(&[("20240101000000006", "clean")], None),
            plan(&[("20240101000000004", "commit")], None),
            plan(&[("nope", "commit")], None),
        ] {
            assert!(matches!(
                planned_instants(&bad, &sp, "k"),
                Err(CleanerError::Corrupt { .. })
            ));
        }
        assert!(matches!(
            savepoint_of(&plan(&[], None), "k"),
            Err(CleanerError::Corrupt { .. })
        ));
    }
}
