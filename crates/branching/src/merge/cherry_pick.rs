//! Cherry-pick: one completed write of a branch (or of main) applied to another branch.

use std::sync::Arc;

use arbor_storage::Storage;
use arbor_table::Table;
use arbor_timeline::avro::WriteOperationType;
use arbor_timeline::InstantTime;

use super::apply::{apply, Apply};
use super::options::{require_ordering, MergeOptions};
use super::outcome::MergeOutcome;
use super::side::{spec_of, Side};
use crate::diff::state::{unify, Groups};
use crate::diff::{add_groups, merge_base, resolve, writes_after, RefSpec, TableRef};
use crate::error::{BranchingError, Result};

/// `extraMetadata` key: the branch a cherry-picked write came from.
pub const CHERRY_PICK_SOURCE: &str = "arbor.cherryPick.source";
/// `extraMetadata` key: the cherry-picked write's instant.
pub const CHERRY_PICK_INSTANT: &str = "arbor.cherryPick.instant";

/// Applies what completed write `instant` of `from` (a branch, or main) changed to `target` (a
/// handle on main or a working branch), as one upsert commit, with the conflict rules and
/// strategies of [`crate::merge()`]: the write's changes are the records it made differ from
/// the state just before it (its parent), and a key the target holds differently from that
/// parent state (changed there since the two diverged) is a conflict unless the target already
/// has the write's outcome.
///
/// Refused, with nothing written, when `instant` is not a completed write of `from`, is also
/// on the target's timeline (it is already there), or is a table service (compaction,
/// clustering: it changes no record); and as a merge is refused.
pub async fn cherry_pick(
    target: &Table,
    from: &RefSpec,
    instant: &InstantTime,
    options: &MergeOptions,
) -> Result<MergeOutcome> {
    let storage: Arc<dyn Storage> = target.table_storage().clone();
    let (tref, ttl) = resolve(&storage, &spec_of(target.root())).await?;
    let (from_ref, stl) = resolve(&storage, from).await?;
    let op = format!(
        "cherry-pick {instant} from {} into {}",
        from_ref.branch_label(),
        tref.branch_label()
    );
    if !stl.writes.contains(instant) {
        return Err(BranchingError::refused(
            op,
            format!(
                "{instant} is not a completed write of {}",
                from_ref.branch_label()
            ),
        ));
    }
    if ttl.writes.contains(instant) {
        return Err(BranchingError::refused(
            op,
            format!("{instant} is already on {}", tref.branch_label()),
        ));
    }
    let parent = stl.writes.range(..instant.clone()).next_back().cloned();
    let picked = writes_after(&stl, parent.as_ref(), Some(instant)).await?;
    if picked.iter().any(|w| {
        matches!(
            w.operation,
            Some(
                WriteOperationType::Compact
                    | WriteOperationType::LogCompact
                    | WriteOperationType::Cluster
            )
        )
    }) {
        return Err(BranchingError::refused(
            op,
            "it is a table service (compaction or clustering), which changes no record",
        ));
    }
    let mut s_groups = Groups::new();
    add_groups(&mut s_groups, &picked);
    let label = format!("{}@{instant}", from_ref.branch_label());
    let s = Side::plan(
        (&stl, parent.as_ref()),
        (&stl, Some(instant)),
        s_groups.clone(),
        &picked,
        label.clone(),
    )
    .await?;
    // The target against the parent state: only the picked write's partitions matter; there a
    // key may sit in any file group either side wrote since they diverged.
    let base = merge_base(&stl, parent.as_ref(), &ttl, tref.instant.as_ref());
    let source_since = writes_after(&stl, base.as_ref(), parent.as_ref()).await?;
    let target_since = writes_after(&ttl, base.as_ref(), tref.instant.as_ref()).await?;
    let mut t_groups = s_groups;
    let mut wider = Groups::new();
    add_groups(&mut wider, &source_since);
    add_groups(&mut wider, &target_since);
    for (p, ids) in wider {
        if let Some(mine) = t_groups.get_mut(&p) {
            mine.extend(ids);
        }
    }
    let t = Side::plan(
        (&stl, parent.as_ref()),
        (&ttl, tref.instant.as_ref()),
        t_groups,
        &target_since,
        tref.label.clone(),
    )
    .await?;
    let schema = unify(
        unify(t.before.schema(), t.after.schema(), &op)?.as_ref(),
        unify(s.before.schema(), s.after.schema(), &op)?.as_ref(),
        &op,
    )?;
    let outcome = MergeOutcome {
        source: TableRef {
            label,
            branch: from_ref.branch.clone(),
            root: from_ref.root.clone(),
            instant: Some(instant.clone()),
        },
        target: tref.clone(),
        source_since: parent.clone(),
        target_since: base,
        inserts: 0,
        updates: 0,
        deletes: 0,
        conflicts: Vec::new(),
        conflict_count: 0,
        file_groups_read: s.file_groups() + t.file_groups(),
        commit: None,
    };
    let extra = vec![
        (CHERRY_PICK_SOURCE, from_ref.branch_label().to_string()),
        (CHERRY_PICK_INSTANT, instant.to_string()),
    ];
    let ordering = target.config().ordering_fields().into_iter().next();
    require_ordering(&op, options.strategy, ordering.as_deref())?;
    let since = parent.map_or_else(|| "the table's start".to_string(), |t| t.to_string());
    apply(
        Apply {
            target,
            seen: &ttl.writes,
            schema,
            ordering,
            op,
            since,
            extra,
            same_since: true,
        },
        &s,
        &t,
        options,
        outcome,
    )
    .await
}
