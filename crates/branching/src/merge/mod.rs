//! Three-way merge of one ref into a branch (or main), by record key.
//!
//! The merge compares what each side changed since they last agreed:
//! - the first time, since their **merge base** (the latest completed write both hold, see
//!   [`mod@crate::diff`]);
//! - after an earlier merge of the same source into the same target, the source's changes
//!   since the source instant that merge carried and the target's since that merge's commit
//!   (recorded in its `extraMetadata`), so repeated merges carry only new changes.
//!
//! A key changed on one side only takes that side's record. A key changed on both sides to
//! different records (or deleted on one and changed on the other) is a conflict, as is a
//! partition one side deleted or overwrote (or a whole table one side overwrote) while the
//! other changed records in it. [`MergeStrategy`] says what a conflict does: `fail` refuses
//! the merge ([`BranchingError::MergeConflicts`] names up to 20, with both values), `source`
//! and `target` take one side (a partition the taken side replaced ends exactly as that side
//! left it), `ordering` keeps the record with the greater ordering field as Hudi's event-time
//! merge would (ties go to the source; a delete carries the ordering value of the record it
//! deleted).
//!
//! What the target receives is written as **one ordinary upsert commit** carrying the upserted
//! records and the deleted keys ([`arbor_table::Table::prepare_changes`]), so every engine
//! reads the merged target and its indexes, statistics and metadata table stay exact; its
//! `extraMetadata` records the merge (`arbor.merge.*`). Columns only the source has are added
//! to the target (schema evolution); widened types are widened. The commit checks for
//! conflicts with every target write completed since the merge read the target, as any
//! commit does. The source is not changed and stays writable.

mod apply;
mod cherry_pick;
pub(crate) mod conflict;
mod keys;
pub(crate) mod options;
mod outcome;
mod resolve;
mod side;

use std::sync::Arc;

use arbor_fsview::WriteTouch;
use arbor_storage::Storage;
use arbor_table::Table;
use arbor_timeline::metaroot::MAIN;
use arbor_timeline::InstantTime;

use crate::diff::state::{unify, Groups};
use crate::diff::{add_groups, merge_base, resolve, writes_after, RefSpec, RootTimeline};
use crate::error::{BranchingError, Result};
use crate::roots::branch_identity;
use apply::{apply, Apply};
use options::require_ordering;
use side::{spec_of, Side};

pub use cherry_pick::{cherry_pick, CHERRY_PICK_INSTANT, CHERRY_PICK_SOURCE};
pub use conflict::{MergeConflict, MergeRefusal};
pub use keys::{MERGE_SINCE, MERGE_SOURCE, MERGE_SOURCE_ID, MERGE_SOURCE_INSTANT, MERGE_STRATEGY};
pub use options::{MergeOptions, MergeStrategy};
pub use outcome::{MergeOutcome, CONFLICTS_SHOWN};

/// The latest merge of `source_id` into the target among `writes`, valid for `source`: its
/// commit and the source instant it carried.
fn last_merge(
    writes: &[WriteTouch],
    source_id: &str,
    source: &RootTimeline,
    source_at: Option<&InstantTime>,
) -> Option<(InstantTime, InstantTime)> {
    writes.iter().rev().find_map(|w| {
        if w.extra.get(MERGE_SOURCE_ID).map(String::as_str) != Some(source_id) {
            return None;
        }
        let carried = InstantTime::parse(w.extra.get(MERGE_SOURCE_INSTANT)?).ok()?;
        let valid = source.writes.contains(&carried) && source_at.is_some_and(|a| &carried <= a);
        valid.then(|| (w.instant.requested_time.clone(), carried))
    })
}

/// Merges `source` into `target` (a handle on main or a working branch) as `options` say;
/// see the module doc. Refused, with nothing written, when the source is the target itself,
/// `ordering` is asked on a table without an ordering field, a column's types on the two
/// sides are not a widening, a key is stored twice in a compared partition, or (strategy
/// `fail`, not a dry run) there are conflicts.
pub async fn merge(
    target: &Table,
    source: &RefSpec,
    options: &MergeOptions,
) -> Result<MergeOutcome> {
    let storage: Arc<dyn Storage> = target.table_storage().clone();
    let (tref, ttl) = resolve(&storage, &spec_of(target.root())).await?;
    let (sref, stl) = resolve(&storage, source).await?;
    let op = format!("merge {} into {}", sref.label, tref.branch_label());
    if sref.root == tref.root {
        return Err(BranchingError::refused(
            op,
            "the source is on the target branch itself",
        ));
    }
    let ordering = target.config().ordering_fields().into_iter().next();
    require_ordering(&op, options.strategy, ordering.as_deref())?;
    let source_id = match &sref.branch {
        Some(b) => branch_identity(&storage, b).await?.branch_id,
        None => MAIN.to_string(),
    };
    let base = merge_base(&stl, sref.instant.as_ref(), &ttl, tref.instant.as_ref());
    let target_writes = writes_after(&ttl, base.as_ref(), tref.instant.as_ref()).await?;
    let previous = last_merge(&target_writes, &source_id, &stl, sref.instant.as_ref());
    let (source_since, target_since) = match &previous {
        Some((commit, carried)) => (Some(carried.clone()), Some(commit.clone())),
        None => (base.clone(), base.clone()),
    };
    // A first merge compares both sides from the merge base: one state.
    let same_since = source_since == target_since;
    let s_writes = writes_after(&stl, source_since.as_ref(), sref.instant.as_ref()).await?;
    let mut s_groups = Groups::new();
    add_groups(&mut s_groups, &s_writes);
    let s = Side::plan(
        (&stl, source_since.as_ref()),
        (&stl, sref.instant.as_ref()),
        s_groups,
        &s_writes,
        sref.label.clone(),
    )
    .await
    .map_err(|e| since_lost(&op, previous.as_ref(), e))?;
    let t_writes = writes_after(&ttl, target_since.as_ref(), tref.instant.as_ref()).await?;
    let mut t_groups = Groups::new();
    add_groups(&mut t_groups, &t_writes);
    let t = Side::plan(
        (&ttl, target_since.as_ref()),
        (&ttl, tref.instant.as_ref()),
        t_groups,
        &t_writes,
        tref.label.clone(),
    )
    .await
    .map_err(|e| since_lost(&op, previous.as_ref(), e))?;
    let schema = unify(
        unify(t.before.schema(), t.after.schema(), &op)?.as_ref(),
        unify(s.before.schema(), s.after.schema(), &op)?.as_ref(),
        &op,
    )?;
    let outcome = MergeOutcome {
        source: sref.clone(),
        target: tref.clone(),
        source_since: source_since.clone(),
        target_since,
        inserts: 0,
        updates: 0,
        deletes: 0,
        conflicts: Vec::new(),
        conflict_count: 0,
        file_groups_read: s.file_groups() + t.file_groups(),
        commit: None,
    };
    let mut extra = vec![
        (MERGE_SOURCE, sref.label.clone()),
        (MERGE_SOURCE_ID, source_id),
        (MERGE_STRATEGY, options.strategy.name().to_string()),
    ];
    if let Some(t) = &sref.instant {
        extra.push((MERGE_SOURCE_INSTANT, t.to_string()));
    }
    if let Some(t) = &source_since {
        extra.push((MERGE_SINCE, t.to_string()));
    }
    let since = source_since
        .clone()
        .map_or_else(|| "the table's start".to_string(), |t| t.to_string());
    apply(
        Apply {
            target,
            seen: &ttl.writes,
            schema,
            ordering,
            op,
            since,
            extra,
            same_since,
        },
        &s,
        &t,
        options,
        outcome,
    )
    .await
}

/// A state a repeated merge compares from could not be read: says which merge it belongs to
/// (a clean may have removed its files; the first merge's base is pinned, later ones are not).
fn since_lost(
    op: &str,
    previous: Option<&(InstantTime, InstantTime)>,
    e: BranchingError,
) -> BranchingError {
    match previous {
        Some((commit, carried)) => BranchingError::refused(
            op,
            format!(
                "it compares from the last merge (the source as of {carried}, the target as of \
                 its merge commit {commit}), and a state it needs can no longer be read ({e}), \
                 so what changed since cannot be told; to keep them through cleans, tag both \
                 instants right after a merge (arbor tag create ... --instant)"
            ),
        ),
        None => e,
    }
}
