//! Three-way merge of one ref into a branch (or main), by record key.
//!
//! The merge compares what each side changed since they last agreed:
//! - the first time, since their **merge base** (the latest completed write both hold, see
//!   [`crate::diff`]);
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

pub(crate) mod conflict;
mod options;
mod resolve;

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_fsview::WriteTouch;
use arbor_storage::Storage;
use arbor_table::{CommitResult, Table, WriteOptions};
use arbor_timeline::avro::WriteOperationType;
use arbor_timeline::metaroot::MAIN;
use arbor_timeline::{InstantTime, MetaRoot};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::diff::state::{unify, Groups, StateScan};
use crate::diff::{
    add_groups, compare, merge_base, resolve, writes_after, PartitionChanges, RefSpec,
    RootTimeline, TableRef,
};
use crate::error::{BranchingError, Result};
use crate::roots::branch_identity;
pub use conflict::MergeConflict;
pub use options::{MergeOptions, MergeStrategy};
use resolve::{merge_partition, Overwrites};

/// `extraMetadata` key: the merged source's label.
pub const MERGE_SOURCE: &str = "arbor.merge.source";
/// `extraMetadata` key: the merged source's identity (`branchId`, or `main`).
pub const MERGE_SOURCE_ID: &str = "arbor.merge.sourceId";
/// `extraMetadata` key: the source instant the merge carried.
pub const MERGE_SOURCE_INSTANT: &str = "arbor.merge.sourceInstant";
/// `extraMetadata` key: where the merge's compared changes started on the source.
pub const MERGE_SINCE: &str = "arbor.merge.since";
/// `extraMetadata` key: the strategy.
pub const MERGE_STRATEGY: &str = "arbor.merge.strategy";

/// Most conflicts a [`BranchingError::MergeConflicts`] names.
pub const CONFLICTS_SHOWN: usize = 20;

/// What a merge did (or, in a dry run, would do).
#[derive(Debug, Clone)]
pub struct MergeOutcome {
    /// The merged ref.
    pub source: TableRef,
    /// The target branch, before the merge.
    pub target: TableRef,
    /// Where the source's compared changes start.
    pub source_since: Option<InstantTime>,
    /// Where the target's compared changes start.
    pub target_since: Option<InstantTime>,
    /// Keys the target receives that it did not hold.
    pub inserts: usize,
    /// Keys whose record the target receives anew.
    pub updates: usize,
    /// Keys deleted from the target.
    pub deletes: usize,
    /// Conflicts found (settled by the strategy; in a dry run with `fail`, those that would
    /// refuse the merge), at most [`CONFLICTS_SHOWN`] of them.
    pub conflicts: Vec<MergeConflict>,
    /// How many conflicts in all.
    pub conflict_count: usize,
    /// File groups read (each in two states).
    pub file_groups_read: usize,
    /// The merge commit (`None`: a dry run, or nothing to write).
    pub commit: Option<CommitResult>,
}

impl MergeOutcome {
    /// True when the source had nothing new for the target.
    pub fn is_up_to_date(&self) -> bool {
        self.inserts == 0 && self.updates == 0 && self.deletes == 0 && self.conflict_count == 0
    }
}

/// The spec naming `root`'s branch.
fn spec_of(root: &MetaRoot) -> RefSpec {
    match root {
        MetaRoot::Branch(b) => RefSpec::Branch(b.clone()),
        _ => RefSpec::Main,
    }
}

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

/// What `writes` replaced wholesale.
fn overwrites(writes: &[WriteTouch]) -> Overwrites {
    let mut o = Overwrites::default();
    for w in writes {
        match w.operation {
            Some(WriteOperationType::InsertOverwriteTable) => o.table = true,
            Some(WriteOperationType::InsertOverwrite | WriteOperationType::DeletePartition) => {
                o.partitions.extend(w.file_groups().map(|(p, _)| p.clone()));
            }
            _ => {}
        }
    }
    o
}

/// One side of a merge, planned: its changes' two states over the file groups it touched.
struct Side {
    groups: Groups,
    before: StateScan,
    after: StateScan,
    overwrites: Overwrites,
    label: String,
}

impl Side {
    async fn plan(
        timeline: &RootTimeline,
        since: Option<&InstantTime>,
        at: Option<&InstantTime>,
        label: String,
    ) -> Result<Side> {
        let writes = writes_after(timeline, since, at).await?;
        let mut groups = Groups::new();
        add_groups(&mut groups, &writes);
        let partitions: BTreeSet<String> = groups.keys().cloned().collect();
        let before = StateScan::plan(&timeline.reader, since, &partitions, &label).await?;
        let after = StateScan::plan(&timeline.reader, at, &partitions, &label).await?;
        Ok(Side {
            overwrites: overwrites(&writes),
            groups,
            before,
            after,
            label,
        })
    }

    /// The side's changes in `partition`, in `schema` (empty when it did not touch it).
    async fn changes(&self, partition: &str, schema: &SchemaRef) -> Result<PartitionChanges> {
        let empty = BTreeSet::new();
        let ids = self.groups.get(partition).unwrap_or(&empty);
        let before = self.before.read(partition, ids).await?;
        let after = self.after.read(partition, ids).await?;
        compare(partition, &before, &after, schema, &self.label)
    }
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
    if options.strategy == MergeStrategy::Ordering && ordering.is_none() {
        return Err(BranchingError::refused(
            op,
            "--strategy ordering needs the table's ordering field \
             (hoodie.table.ordering.fields), and this table has none",
        ));
    }
    let source_id = match &sref.branch {
        Some(b) => branch_identity(&storage, b).await?.branch_id,
        None => MAIN.to_string(),
    };
    let base = merge_base(&stl, sref.instant.as_ref(), &ttl, tref.instant.as_ref());
    let target_writes = writes_after(&ttl, base.as_ref(), tref.instant.as_ref()).await?;
    let (source_since, target_since) =
        match last_merge(&target_writes, &source_id, &stl, sref.instant.as_ref()) {
            Some((commit, carried)) => (Some(carried), Some(commit)),
            None => (base.clone(), base.clone()),
        };
    let s = Side::plan(
        &stl,
        source_since.as_ref(),
        sref.instant.as_ref(),
        sref.label.clone(),
    )
    .await?;
    let t = Side::plan(
        &ttl,
        target_since.as_ref(),
        tref.instant.as_ref(),
        tref.label.clone(),
    )
    .await?;
    let schema = unify(
        unify(t.before.schema(), t.after.schema(), &op)?.as_ref(),
        unify(s.before.schema(), s.after.schema(), &op)?.as_ref(),
        &op,
    )?;
    let mut partitions: BTreeSet<String> = s.groups.keys().cloned().collect();
    partitions.extend(t.groups.keys().cloned());
    let mut outcome = MergeOutcome {
        source: sref.clone(),
        target: tref.clone(),
        source_since: source_since.clone(),
        target_since,
        inserts: 0,
        updates: 0,
        deletes: 0,
        conflicts: Vec::new(),
        conflict_count: 0,
        file_groups_read: s.groups.values().map(BTreeSet::len).sum::<usize>()
            + t.groups.values().map(BTreeSet::len).sum::<usize>(),
        commit: None,
    };
    let mut upserts: Vec<RecordBatch> = Vec::new();
    let mut deletes: Vec<RecordBatch> = Vec::new();
    for p in &partitions {
        // A partition only the target changed needs no reading unless the source replaced
        // the table.
        if !s.groups.contains_key(p) && !s.overwrites.table {
            continue;
        }
        let sc = s.changes(p, &schema).await?;
        let tc = t.changes(p, &schema).await?;
        let m = merge_partition(
            p,
            &sc,
            &tc,
            (&s.overwrites, &t.overwrites),
            options.strategy,
            ordering.as_deref(),
            &op,
        )?;
        outcome.inserts += m.inserts;
        outcome.updates += m.updates;
        outcome.deletes += m.deleted;
        outcome.conflict_count += m.conflicts.len();
        for c in m.conflicts {
            if outcome.conflicts.len() < CONFLICTS_SHOWN {
                outcome.conflicts.push(c);
            }
        }
        upserts.extend(m.upserts);
        deletes.extend(m.deletes);
    }
    if options.strategy == MergeStrategy::Fail && outcome.conflict_count > 0 {
        if options.dry_run {
            return Ok(outcome);
        }
        return Err(BranchingError::MergeConflicts {
            source_ref: sref.label.clone(),
            target: tref.branch_label().to_string(),
            since: source_since.map_or_else(|| "the table's start".to_string(), |t| t.to_string()),
            count: outcome.conflict_count,
            conflicts: outcome.conflicts,
        });
    }
    if options.dry_run || (upserts.is_empty() && deletes.is_empty()) {
        return Ok(outcome);
    }
    let write_options = WriteOptions {
        schema_evolution: true,
        ..target.write_options().clone()
    };
    let writer = target.clone().with_write_options(write_options);
    let mut prepared = writer.prepare_changes(upserts, deletes).await?;
    prepared.insert_extra_metadata(MERGE_SOURCE, &sref.label)?;
    prepared.insert_extra_metadata(MERGE_SOURCE_ID, &source_id)?;
    if let Some(t) = &sref.instant {
        prepared.insert_extra_metadata(MERGE_SOURCE_INSTANT, t.as_str())?;
    }
    if let Some(t) = &outcome.source_since {
        prepared.insert_extra_metadata(MERGE_SINCE, t.as_str())?;
    }
    prepared.insert_extra_metadata(MERGE_STRATEGY, options.strategy.name())?;
    prepared.seen_only(&ttl.writes);
    outcome.commit = Some(writer.commit(prepared).await?);
    Ok(outcome)
}
