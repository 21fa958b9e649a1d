//! Compaction of merge-on-read tables ([`crate::Table::compact`]) and inline compaction after a
//! write (`WriteOptions::inline_compact_every`).

use arbor_timeline::config::TableType;
use arbor_timeline::Action;

use super::context::{refuse_during_restore, Table};
use super::transaction::{Entry, Transaction};
use crate::error::{Result, TableError};
use crate::write::options::CommitResult;
use crate::write::{compaction, log_compaction};

/// Merge-on-read with `inline_compact_every = Some(n)`: when `n` or more deltacommits
/// completed since the last compaction, runs [`compact`] (schedule and run under the
/// lock). Failures are logged as warnings; the write stays committed.
pub(crate) async fn inline_compaction(table: &Table) {
    let ctx = &table.ctx;
    let Some(n) = ctx.options.inline_compact_every else {
        return;
    };
    if ctx.table_type() != TableType::MergeOnRead || n == 0 {
        return;
    }
    let r = async {
        let tl = ctx.timeline().await?;
        let last = tl
            .completed()
            .into_iter()
            .filter(|i| i.action == Action::Commit)
            .map(|i| i.requested_time)
            .max();
        let since = tl
            .completed()
            .into_iter()
            .filter(|i| i.action == Action::DeltaCommit)
            .filter(|i| last.as_ref().is_none_or(|l| &i.requested_time > l))
            .count();
        if since < n as usize {
            return Ok(());
        }
        compact(table).await?;
        Ok::<_, TableError>(())
    }
    .await;
    if let Err(e) = r {
        tracing::warn!(error = %e, "inline compaction failed; the write is committed");
    }
}

/// Compacts the table under the table lock: runs every pending compaction (oldest first),
/// then schedules a new one if some file group's latest slice has log files and runs it.
/// Returns what each completed compaction did (empty when nothing needed compacting).
///
/// The lock is held from before scheduling until the last compaction completed (its lease
/// is renewed while the work runs), so concurrent `compact` calls, inline compactions and
/// writers' commits are serialised with it: two runners never execute (or clean up after)
/// the same compaction. Writers wait for the lock up to their `lock_timeout`. Use this
/// rather than the free functions of [`crate::write::compaction`] when other writers may be active.
///
/// Errors: `Unsupported` for a copy-on-write table (checked before the lock is taken);
/// `Lock` when the lock cannot be taken or its lease not renewed (a compaction cut short
/// stays pending and is completed by the next call); `Corrupt` for an invalid compaction
/// plan; timeline, storage and format failures.
pub(crate) async fn compact(table: &Table) -> Result<Vec<CommitResult>> {
    let ctx = &table.ctx;
    if ctx.table_type() != TableType::MergeOnRead {
        return Err(TableError::Unsupported {
            reason: format!(
                "compaction of table {:?}: only merge-on-read tables are compacted",
                ctx.config.name()
            ),
        });
    }
    super::writable::refuse_change_data_capture(&ctx.config, "compaction")?;
    Transaction::run(table, Entry::Service, |txn| async move {
        refuse_during_restore(&txn.timeline().await?)?;
        // A log compaction a crash left pending finishes first: it names the slices of now.
        let mut out =
            log_compaction::run_pending_log_compactions(&ctx.storage, &ctx.layout, &ctx.generator)
                .await?;
        out.extend(
            compaction::run_pending_compactions(&ctx.storage, &ctx.layout, &ctx.generator).await?,
        );
        if let Some(t) =
            compaction::schedule_compaction(&ctx.storage, &ctx.layout, &ctx.generator).await?
        {
            out.push(
                compaction::run_compaction(&ctx.storage, &ctx.layout, &t, &ctx.generator).await?,
            );
        }
        if !out.is_empty() {
            txn.maintain_mdt().await;
        }
        Ok(out)
    })
    .await
}

/// Runs only the compactions already pending on the table (scheduled by another writer such
/// as Spark, or left by a killed run), oldest first, under the table lock; schedules nothing.
/// Returns what each did (empty when none was pending).
pub(crate) async fn compact_pending(table: &Table) -> Result<Vec<CommitResult>> {
    let ctx = &table.ctx;
    if ctx.table_type() != TableType::MergeOnRead {
        return Ok(Vec::new());
    }
    super::writable::refuse_change_data_capture(&ctx.config, "compaction")?;
    Transaction::run(table, Entry::Service, |txn| async move {
        refuse_during_restore(&txn.timeline().await?)?;
        let out =
            compaction::run_pending_compactions(&ctx.storage, &ctx.layout, &ctx.generator).await?;
        if !out.is_empty() {
            txn.maintain_mdt().await;
        }
        Ok(out)
    })
    .await
}

/// Rolls back every pending compaction (its output files and plan), under the table lock;
/// the slices it planned read as before and can be compacted again. Returns the rolled-back
/// compaction instants.
pub(crate) async fn rollback_pending_compactions(
    table: &Table,
) -> Result<Vec<arbor_timeline::InstantTime>> {
    Transaction::run(table, Entry::Service, |txn| async move {
        let tl = txn.timeline().await?;
        let mut done = Vec::new();
        for pending in tl.filter(
            &[Action::Compaction],
            &[
                arbor_timeline::State::Requested,
                arbor_timeline::State::Inflight,
            ],
        ) {
            let Some(latest) = tl
                .get(&pending.requested_time, Action::Compaction)
                .and_then(|f| f.latest().cloned())
            else {
                continue;
            };
            if done.contains(&latest.requested_time) {
                continue;
            }
            txn.rollback_instant(&latest).await?;
            done.push(latest.requested_time);
        }
        Ok(done)
    })
    .await
}

/// Log-compacts a merge-on-read table under the table lock (see
/// [`crate::write::log_compaction`]): runs every pending log compaction, then schedules one of
/// the slices with at least `threshold` log files (the table's
/// `hoodie.log.compaction.blocks.threshold`, else 5, when `None`) and runs it. Returns what
/// each did (empty when no slice qualifies).
pub(crate) async fn log_compact(
    table: &Table,
    threshold: Option<usize>,
) -> Result<Vec<CommitResult>> {
    let ctx = &table.ctx;
    if ctx.table_type() != TableType::MergeOnRead {
        return Err(TableError::Unsupported {
            reason: format!(
                "log compaction of table {:?}: only merge-on-read tables have log files",
                ctx.config.name()
            ),
        });
    }
    super::writable::refuse_change_data_capture(&ctx.config, "log compaction")?;
    let threshold = threshold.unwrap_or_else(|| {
        ctx.config
            .get(log_compaction::LOG_COMPACTION_THRESHOLD_KEY)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(log_compaction::DEFAULT_LOG_COMPACTION_THRESHOLD)
    });
    Transaction::run(table, Entry::Service, |txn| async move {
        refuse_during_restore(&txn.timeline().await?)?;
        let mut out =
            log_compaction::run_pending_log_compactions(&ctx.storage, &ctx.layout, &ctx.generator)
                .await?;
        if let Some(t) = log_compaction::schedule_log_compaction(
            &ctx.storage,
            &ctx.layout,
            &ctx.generator,
            threshold,
        )
        .await?
        {
            out.push(
                log_compaction::run_log_compaction(&ctx.storage, &ctx.layout, &t, &ctx.generator)
                    .await?,
            );
        }
        if !out.is_empty() {
            txn.maintain_mdt().await;
        }
        Ok(out)
    })
    .await
}
