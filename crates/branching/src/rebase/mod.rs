//! Rebase: a working branch moved onto main's head with its changes carried over, so that a
//! strict fast-forward publication is possible afterwards.
//!
//! A rebase of branch `b`:
//! 1. compares `b` with main as [`crate::merge()`] of `b` into main would (same merge base,
//!    same conflict rules and strategies; with `fail`, conflicts refuse the rebase before
//!    anything is written);
//! 2. creates the branch `<b>~rebase` from main's head (its identity names `b` and `b`'s id,
//!    `rebaseOf`) and merges `b` into it: one upsert commit carrying every change `b` made
//!    since its base (the branch's writes are carried as one commit, not one by one);
//! 3. under one table lock, checks that `b` has no write the merge did not carry (else it
//!    carries the new ones and tries again), keeps `b`'s earlier history on branch
//!    `<b>-pre-rebase` when `b` has a tag the rebased state would lack (its tags stay
//!    readable there, `tag:T`), drops `b`, installs `<b>~rebase`'s metadata as `b` (a new
//!    branch id, based at main's head) and drops `<b>~rebase`.
//!
//! Files are shared, never copied. Main is not changed (its savepoint pinning the new base
//! aside). A rebase killed at any point is finished (or, before step 3, redone) by running it
//! again; until then `b` reads as before, or (while step 3 was interrupted between the drop
//! and the install) does not exist and its reads name the interrupted rebase.

pub(crate) mod names;
mod outcome;
mod swap;

use std::sync::Arc;

use arbor_storage::Storage;
use arbor_table::Table;
use arbor_timeline::layout::RebaseRecord;
use arbor_timeline::metaroot::normalize_branch_name;
use arbor_timeline::{resolve_main, InstantTime, MetaRoot};

use crate::branch::{create_locked, drop_locked, ensure_droppable, BranchSource};
use crate::diff::{merge_base, resolve, RefSpec};
use crate::error::{BranchingError, Result};
use crate::identity::BranchInfo;
use crate::merge::options::require_ordering;
use crate::merge::{merge, MergeOptions, MergeRefusal, MergeStrategy};
use crate::roots::read_identity;
use names::staging_name;
use swap::{install, swap, Swap};

pub use outcome::RebaseOutcome;

/// How many times the rebase carries writes the branch got while it was being rebased
/// before giving up.
const ATTEMPTS: usize = 3;

/// Rebases working branch `branch` (any Unicode spelling of its name) onto main's head, as the
/// module doc says, with `options.strategy` settling conflicts (a dry run writes nothing and
/// reports what the branch would carry and every conflict). `table` is any handle of the
/// table (its lock provider and write options are used).
///
/// Refused, with nothing written, when the branch does not exist, a clone pin names it, it
/// has pending instants, main has pending instants that could change its head, or (strategy
/// `fail`) the branch and main changed a key differently. A branch already based on main's
/// head is reported up to date.
pub async fn rebase(table: &Table, branch: &str, options: &MergeOptions) -> Result<RebaseOutcome> {
    let storage: Arc<dyn Storage> = table.table_storage().clone();
    let found = read_identity(&storage, branch).await?;
    let name = match &found {
        Some(info) => info.name.clone(),
        None => normalize_branch_name(branch)?,
    };
    let staging_name = staging_name(&name)?;
    let staging = read_identity(&storage, &staging_name).await?;
    if let Some(s) = &staging {
        if s.rebase_of.as_ref().is_none_or(|r| r.branch != name) {
            return Err(BranchingError::refused(
                format!("rebase {name}"),
                format!(
                    "branch {staging_name} exists and is not a rebase of {name}; rename or \
                     drop it"
                ),
            ));
        }
    }
    let mut outcome = RebaseOutcome {
        branch: name.clone(),
        previous_base: found
            .as_ref()
            .and_then(|f| f.base_instant.as_deref())
            .and_then(|b| InstantTime::parse(b).ok()),
        onto: None,
        changes: None,
        kept: None,
        up_to_date: false,
        dry_run: options.dry_run,
        resumed: staging.is_some(),
    };
    match (found, staging) {
        (None, None) => Err(BranchingError::BranchNotFound {
            name,
            interrupted_rebase: None,
        }),
        (None, Some(staging)) => {
            // Interrupted between the drop of the branch and its install.
            if options.dry_run {
                return Ok(outcome);
            }
            table.with_table_lock(install(table, &staging)).await?;
            outcome.onto = base_of(&staging);
            Ok(outcome)
        }
        (Some(info), Some(staging)) => {
            let of = staging.rebase_of.as_ref().map(|r| r.branch_id.as_str());
            if of == Some(info.branch_id.as_str()) {
                if options.dry_run {
                    return Ok(outcome);
                }
                carry(table, &info, &staging, options, &mut outcome).await?;
                return Ok(outcome);
            }
            // The branch was installed; only the staging branch was left.
            if info.base_instant == staging.base_instant && !options.dry_run {
                table
                    .with_table_lock(drop_locked(table, &staging.name))
                    .await?;
                outcome.onto = base_of(&info);
                outcome.previous_base = None;
                return Ok(outcome);
            }
            Err(BranchingError::refused(
                format!("rebase {name}"),
                format!(
                    "branch {} is left from a rebase of an earlier branch {name}; drop it and \
                     rebase again",
                    staging.name
                ),
            ))
        }
        (Some(info), None) => {
            start(table, &info, &staging_name, options, &mut outcome).await?;
            Ok(outcome)
        }
    }
}

/// The base instant an identity records.
fn base_of(info: &BranchInfo) -> Option<InstantTime> {
    info.base_instant
        .as_deref()
        .and_then(|b| InstantTime::parse(b).ok())
}

/// A rebase from the start: up-to-date check, conflict check, the staging branch, then
/// [`carry`].
async fn start(
    table: &Table,
    info: &BranchInfo,
    staging_name: &str,
    options: &MergeOptions,
    outcome: &mut RebaseOutcome,
) -> Result<()> {
    let storage = table.table_storage().clone();
    let name = info.name.as_str();
    let op = format!("rebase {name} onto main");
    let ordering = table.config().ordering_fields().into_iter().next();
    require_ordering(&op, options.strategy, ordering.as_deref())?;
    let (mref, mtl) = resolve(&storage, &RefSpec::Main).await?;
    let (bref, btl) = resolve(&storage, &RefSpec::Branch(name.to_string())).await?;
    let base = merge_base(&btl, bref.instant.as_ref(), &mtl, mref.instant.as_ref());
    outcome.onto = mref.instant.clone();
    if base == mref.instant {
        outcome.up_to_date = true;
        return Ok(());
    }
    table
        .with_table_lock(ensure_droppable(table, name, true))
        .await?;
    let main = table
        .reopen_at(resolve_main(storage.as_ref()).await?)
        .await?;
    if options.dry_run || options.strategy == MergeStrategy::Fail {
        let preview = MergeOptions {
            dry_run: true,
            ..options.clone()
        };
        let seen = merge(&main, &RefSpec::Branch(name.to_string()), &preview).await?;
        if options.strategy == MergeStrategy::Fail && seen.conflict_count > 0 && !options.dry_run {
            return Err(BranchingError::MergeConflicts(Box::new(MergeRefusal {
                operation: op,
                source_ref: name.to_string(),
                target: "main".to_string(),
                since: base.map_or_else(|| "the table's start".to_string(), |b| b.to_string()),
                count: seen.conflict_count,
                conflicts: seen.conflicts,
            })));
        }
        if options.dry_run {
            outcome.changes = Some(seen);
            return Ok(());
        }
    }
    let record = RebaseRecord {
        branch: name.to_string(),
        branch_id: info.branch_id.clone(),
    };
    let staging = table
        .transact(|txn| create_locked(txn, staging_name, BranchSource::MainHead, Some(record)))
        .await?;
    outcome.onto = base_of(&staging);
    match carry(table, info, &staging, options, outcome).await {
        Err(e @ (BranchingError::MergeConflicts(_) | BranchingError::Refused { .. })) => {
            // Refused after all (the branch moved since the check, or its changes cannot
            // be carried): nothing of the rebase is kept.
            table
                .with_table_lock(drop_locked(table, &staging.name))
                .await?;
            Err(e)
        }
        other => other,
    }
}

/// Merges the branch into the staging branch and swaps them (see the module doc), carrying
/// again what the branch got meanwhile, up to [`ATTEMPTS`] times.
async fn carry(
    table: &Table,
    info: &BranchInfo,
    staging: &BranchInfo,
    options: &MergeOptions,
    outcome: &mut RebaseOutcome,
) -> Result<()> {
    let target = table
        .reopen_at(MetaRoot::Branch(staging.name.clone()))
        .await?;
    let source = RefSpec::Branch(info.name.clone());
    outcome.onto = base_of(staging);
    for _ in 0..ATTEMPTS {
        let merged = merge(&target, &source, options)
            .await
            .map_err(|e| as_rebase(e, &info.name))?;
        let carried = merged.source.instant.clone();
        if outcome.changes.is_none() || !merged.is_up_to_date() {
            outcome.changes = Some(merged);
        }
        let done = table
            .with_table_lock(swap(table, info, staging, carried.as_ref()))
            .await?;
        if let Swap::Done(kept) = done {
            outcome.kept = kept;
            return Ok(());
        }
        tracing::info!(branch = %info.name, "the branch moved during its rebase; carrying its new writes");
    }
    Err(BranchingError::refused(
        format!("rebase {}", info.name),
        format!(
            "the branch got new writes {ATTEMPTS} times while being rebased; rerun when its \
             writers pause (the rebase resumes from {})",
            staging.name
        ),
    ))
}

/// A refusal of the merge into the staging branch, told as the rebase's.
fn as_rebase(e: BranchingError, branch: &str) -> BranchingError {
    let op = format!("rebase {branch} onto main");
    match e {
        BranchingError::Refused { reason, .. } => BranchingError::Refused {
            operation: op,
            reason,
        },
        BranchingError::MergeConflicts(mut r) => {
            r.operation = op;
            r.target = "main".to_string();
            BranchingError::MergeConflicts(r)
        }
        other => other,
    }
}
