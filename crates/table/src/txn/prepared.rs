//! [`PreparedWrite`]: a write whose files are written and whose instant is inflight, and its
//! completion ([`crate::Table::commit`]): the commit point of every write operation (write,
//! delete_partitions).

use std::collections::{BTreeMap, BTreeSet};

use arbor_mdt::index_writer::RecordIndexDelta;
use arbor_mdt::secondary_index_writer::SecondaryIndexDeltas;
use arbor_timeline::avro::{
    encode_instant_for, HoodieCommitMetadata, HoodieReplaceCommitMetadata, InstantContent,
    WriteOperationType,
};
use arbor_timeline::{Action, ActiveTimeline, Instant, InstantTime, State};
use bytes::Bytes;

use super::context::{Table, TableContext};
use super::transaction::{Entry, Transaction};
use crate::error::{Result, TableError};
use crate::write::commit::{self, Conflict, Heartbeat};
use crate::write::log_conflict::{LogAppends, LogConflictCheck};
use crate::write::mdt_sync;
use crate::write::options::CommitResult;
use crate::write::partition_conflict::Changes;
use crate::write::schema::SchemaChange;

/// A write whose files are written and whose instant is inflight, waiting for
/// [`crate::Table::commit`]. While it (or a clone) exists, its writer's heartbeat is renewed
/// in the background every third of the heartbeat timeout, so other writers leave it alone
/// however long the caller waits before committing. Dropping it stops the renewals and leaves
/// the instant pending; the next writer rolls it back once its heartbeat lapses.
#[derive(Debug, Clone)]
pub struct PreparedWrite {
    pub(crate) inflight: Instant,
    pub(crate) heartbeat: Heartbeat,
    pub(crate) operation: WriteOperationType,
    pub(crate) metadata: HoodieCommitMetadata,
    pub(crate) replaced: Option<BTreeMap<String, Vec<String>>>,
    pub(crate) planned_against: BTreeSet<InstantTime>,
    pub(crate) touched: BTreeSet<(String, String)>,
    pub(crate) inserted: u64,
    pub(crate) updated: u64,
    pub(crate) deleted: u64,
    pub(crate) skipped_stale: u64,
    pub(crate) index_delta: Option<RecordIndexDelta>,
    pub(crate) secondary_deltas: Option<SecondaryIndexDeltas>,
    pub(crate) schema_changes: Vec<SchemaChange>,
}

impl PreparedWrite {
    /// The instant (requested) time.
    pub fn instant(&self) -> &InstantTime {
        &self.inflight.requested_time
    }

    /// The action the instant completes as.
    pub fn action(&self) -> Action {
        self.inflight.action
    }

    /// The file groups written or replaced, as `(partition, fileId)`.
    pub fn file_groups(&self) -> &BTreeSet<(String, String)> {
        &self.touched
    }

    /// The commit metadata that completing will write.
    pub fn metadata(&self) -> &HoodieCommitMetadata {
        &self.metadata
    }

    /// Records `value` under `key` in the commit's `extraMetadata` (as Java writers record
    /// custom commit metadata; readers ignore keys they do not know). The keys arbor itself
    /// writes (`schema`) are refused with [`TableError::InvalidInput`].
    pub fn insert_extra_metadata(&mut self, key: &str, value: &str) -> Result<()> {
        if key == arbor_timeline::avro::SCHEMA_KEY || key.is_empty() {
            return Err(TableError::InvalidInput {
                column: None,
                row: None,
                reason: format!("extraMetadata key {key:?} is written by arbor itself"),
            });
        }
        self.metadata.insert_extra(key, value);
        Ok(())
    }

    /// Narrows the writes this one counts as already seen to those in `seen` (requested
    /// times): the commit's conflict check then also covers every write completed after the
    /// caller computed its input from the table, not only those completed after this write
    /// was planned.
    pub fn seen_only(&mut self, seen: &BTreeSet<InstantTime>) {
        self.planned_against.retain(|t| seen.contains(t));
    }
}

/// After a failure between starting instant `requested` (of `action`) on `tl` and the commit
/// point: stops the heartbeat and removes the instant in its latest state (best effort).
pub(crate) async fn abort_started(
    table: &Table,
    tl: &ActiveTimeline,
    requested: Instant,
    action: Action,
    heartbeat: &Heartbeat,
) {
    let latest = tl
        .get(&requested.requested_time, action)
        .and_then(|f| f.latest().cloned())
        .unwrap_or(requested);
    heartbeat.stop().await;
    abort(table, &latest).await;
}

/// Best-effort removal of this writer's own instant after a failure before the commit point.
pub(crate) async fn abort(table: &Table, instant: &Instant) {
    let _ = Transaction::run(table, Entry::Abort, |txn| async move {
        txn.rollback_instant(instant).await?;
        let _ = commit::stop_heartbeat(txn.view_storage(), &instant.requested_time).await;
        Ok(())
    })
    .await;
}

/// The first locked step of a write: entered as [`Entry::Begin`] (main-moved check, rollback
/// of failed writes), then [`Transaction::start_instant`].
pub(crate) async fn begin_instant(
    table: &Table,
    action: Action,
    operation: WriteOperationType,
) -> Result<(ActiveTimeline, Instant, Heartbeat)> {
    Transaction::run(table, Entry::Begin, |txn| async move {
        txn.start_instant(action, operation).await
    })
    .await
}

/// Phase two of a write: under the table lock, checks for conflicts with writes completed
/// since the plan was made and completes the instant (the commit point). On a conflict the
/// instant is rolled back and [`TableError::CommitConflict`] names the other instant and the
/// shared file groups, or the partitions one of the two deletes (`DELETE_PARTITION`) and the
/// other wrote to. Runs inline compaction afterwards when configured (a compaction
/// failure is logged; the write stays committed).
pub(crate) async fn commit(table: &Table, prepared: PreparedWrite) -> Result<CommitResult> {
    let ctx = &table.ctx;
    let result = Transaction::run(table, Entry::Resume(&prepared.inflight), |txn| {
        commit_locked(txn, &prepared)
    })
    .await;
    prepared.heartbeat.stop().await;
    if let Err(e) = &result {
        if lost_the_table(e) {
            // Nothing of this write is visible: remove its instant and files now, so that a
            // retry does not wait for its heartbeat to lapse.
            let prepared = &prepared;
            let _ = Transaction::run(table, Entry::Abort, |txn| async move {
                clean_up_lost(txn, prepared).await;
                Ok(())
            })
            .await;
        }
    }
    let completed = result?;
    let _ = commit::stop_heartbeat(&ctx.storage, prepared.instant()).await;
    let completion_time = completed
        .completion_time
        .clone()
        .unwrap_or_else(|| completed.requested_time.clone());
    let result = CommitResult {
        instant: prepared.instant().clone(),
        completion_time,
        action: completed.action,
        operation: prepared.operation,
        inserted: prepared.inserted,
        updated: prepared.updated,
        deleted: prepared.deleted,
        files_written: prepared.metadata.write_stats().count(),
        file_groups_replaced: prepared
            .replaced
            .as_ref()
            .map_or(0, |r| r.values().map(Vec::len).sum()),
        skipped_stale: prepared.skipped_stale,
        schema_changes: prepared.schema_changes.clone(),
        attempts: 1,
    };
    super::compact::inline_compaction(table).await;
    Ok(result)
}

/// True for the errors of a commit point that did not pass because this writer lost the table
/// lock (its lease lapsed, or another writer committed since its locked step began): the
/// write's instant did not complete and never will.
pub(crate) fn lost_the_table(e: &TableError) -> bool {
    use arbor_timeline::TimelineError::CommitPointLost;
    match e {
        TableError::LockLost { .. } | TableError::Timeline(CommitPointLost { .. }) => true,
        // The metadata table's deltacommit, completed first, passes the same gate.
        TableError::Mdt(m) => matches!(
            m.as_ref(),
            arbor_mdt::MdtError::Timeline(CommitPointLost { .. })
        ),
        _ => false,
    }
}

/// The commit point, under the lock (entered as [`Entry::Resume`]): ownership, conflict
/// check, MDT deltacommit, completion.
async fn commit_locked(txn: Transaction<'_>, prepared: &PreparedWrite) -> Result<Instant> {
    let table = txn.table();
    let ctx = &table.ctx;
    let mut tl = txn.timeline().await?;
    if let Err(e) = commit::check_ownership(
        &ctx.storage,
        &tl,
        &prepared.inflight,
        ctx.options.heartbeat_timeout,
    )
    .await
    {
        if matches!(e, TableError::InstantRolledBack { .. }) {
            clean_up_lost(txn, prepared).await;
        }
        return Err(e);
    }
    let changes = Changes::of_prepared(
        prepared.operation,
        &prepared.touched,
        prepared.replaced.as_ref(),
    );
    let appends = LogAppends::of_metadata(prepared.inflight.action, &prepared.metadata);
    let mut logs = LogConflictCheck::new(&ctx.storage, &appends);
    if let Some(Conflict {
        other,
        file_groups,
        partitions,
    }) = commit::find_conflict(
        &tl,
        prepared.instant(),
        &prepared.planned_against,
        &changes,
        &mut logs,
    )
    .await?
    {
        match txn.rollback_instant(&prepared.inflight).await {
            Ok(_) => {
                let _ = commit::stop_heartbeat(&ctx.storage, prepared.instant()).await;
            }
            Err(TableError::Unsupported { .. }) => {}
            Err(e) => return Err(e),
        }
        return Err(TableError::CommitConflict {
            instant: prepared.instant().to_string(),
            other: other.requested_time.to_string(),
            file_groups: file_groups.join(","),
            partitions: partitions.join(","),
        });
    }
    let touched: BTreeSet<String> = prepared
        .replaced
        .as_ref()
        .map(|r| r.keys().cloned().collect())
        .unwrap_or_default();
    mdt_sync::record_instant(
        &ctx.storage,
        prepared.instant(),
        &prepared.metadata,
        &touched,
        prepared.index_delta.as_ref(),
        prepared.secondary_deltas.as_ref(),
        &ctx.generator,
    )
    .await?;
    let completion = tl.next_instant_time(&ctx.generator).await?;
    let mut completed = prepared.inflight.with_state(State::Completed);
    // A clustering completes as a replacecommit.
    completed.action = completed.action.completed_action();
    completed.completion_time = Some(completion.clone());
    let content = match &prepared.replaced {
        Some(replaced) => InstantContent::ReplaceCommit(Box::new(
            HoodieReplaceCommitMetadata::from_commit_metadata(
                prepared.metadata.clone(),
                replaced.clone(),
            ),
        )),
        None => InstantContent::Commit(Box::new(prepared.metadata.clone())),
    };
    let bytes = encode_instant_for(&completed, &content)?;
    // Fencing: the lease must still be ours, with its token, at the commit point.
    commit::confirm_held_lease().await?;
    let done = tl
        .complete(&prepared.inflight, completion, Bytes::from(bytes))
        .await?;
    txn.maintain_mdt().await;
    Ok(done)
}

/// After [`commit::check_ownership`] failed (the caller holds the lock): finishes or starts
/// the rollback of this writer's instant if any of its timeline files is left, and deletes
/// the data files its write stats name (a rollback planned before they were written would
/// have missed them). Best effort: failures are logged.
async fn clean_up_lost(txn: Transaction<'_>, prepared: &PreparedWrite) {
    let ctx = &txn.table().ctx;
    let time = prepared.instant();
    let left = match ActiveTimeline::load(ctx.storage.clone(), ctx.layout.clone()).await {
        Ok(tl) => tl
            .get(time, prepared.inflight.action)
            .and_then(|f| f.latest().cloned()),
        Err(e) => {
            tracing::warn!(instant = %time, error = %e, "cleaning up a rolled-back write");
            None
        }
    };
    if let Some(latest) = left.filter(|i| i.state != State::Completed) {
        if let Err(e) = txn.rollback_instant(&latest).await {
            tracing::warn!(instant = %time, error = %e, "rolling back a lost write failed");
        }
    }
    let keys: Vec<String> = prepared
        .metadata
        .write_stats()
        .filter_map(|(_, s)| s.path.clone())
        .collect();
    delete_own_files(ctx, time, &keys).await;
    let _ = commit::stop_heartbeat(&ctx.storage, time).await;
}

/// Best-effort deletion of data files this writer wrote for `time` (never committed).
pub(crate) async fn delete_own_files(ctx: &TableContext, time: &InstantTime, keys: &[String]) {
    let keys: Vec<String> = keys.iter().filter(|k| !k.is_empty()).cloned().collect();
    for chunk in keys.chunks(arbor_storage::MAX_DELETE_BATCH) {
        match ctx.storage.delete_batch(chunk).await {
            Ok(results) => {
                for r in results.into_iter().filter_map(|r| r.err()) {
                    tracing::warn!(instant = %time, error = %r, "deleting a file of a lost write failed");
                }
            }
            Err(e) => {
                tracing::warn!(instant = %time, error = %e, "deleting files of a lost write failed")
            }
        }
    }
}
