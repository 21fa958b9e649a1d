//! Diffs between two states of a table, by record key.
//!
//! A state is a ref ([`RefSpec`]): main, a working branch, a tag, or a root as of an instant.
//! Two states descend from their **merge base**, the latest completed write both timelines
//! hold (instant times are unique table-wide, and a branch's timeline starts as a copy of
//! main's). Only the file groups that the writes after the merge base changed on either side
//! (their commit metadata names them: write stats and replaced file groups) can hold a key
//! whose record differs, so only those file groups are read, in both states: the cost grows
//! with what changed, not with the table or its history.
//!
//! Records are compared by partition path and record key on their data columns (the meta
//! columns `_hoodie_commit_time`, `_hoodie_commit_seqno`, `_hoodie_file_name` and
//! `_hoodie_operation` are not compared: an upsert that rewrote a record with the same values
//! is no change). Both states' columns are shaped to one schema: a column only one state has
//! is null in the other, a widened type is compared at the wider type; a column whose types
//! are not a widening is refused. A key stored twice in one partition (inserts that did not
//! look keys up) is refused: a diff by key needs unique keys.
//!
//! The changes come out as Arrow batches ([`TableDiff::changes`]), partition by partition
//! (only one partition's compared file groups are in memory at a time), in key order, with
//! the change-data-feed convention of delta-rs and Spark: a [`CHANGE_TYPE`] column holding
//! `insert`, `delete`, `update_preimage` and `update_postimage`.

mod changes;
mod refs;
pub(crate) mod state;

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_fsview::WriteTouch;
use arbor_storage::Storage;
use arbor_timeline::InstantTime;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::stream::{self, BoxStream, StreamExt};

pub use changes::{ChangeKind, CHANGE_TYPE};
pub use refs::{RefSpec, TableRef};

pub(crate) use changes::{compare, KeyChange, PartitionChanges};
pub(crate) use refs::{resolve, RootTimeline};

use crate::error::Result;
use changes::change_schema;
use state::{unify, Groups, StateScan};

/// Counts of changed keys in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionStat {
    /// The partition path (`""` for a non-partitioned table).
    pub partition: String,
    /// Keys only in the later state.
    pub inserts: usize,
    /// Keys in both with other values.
    pub updates: usize,
    /// Keys only in the earlier state.
    pub deletes: usize,
}

/// A planned diff between two states: which writes and file groups it compares. Nothing is
/// read until [`TableDiff::changes`] or [`TableDiff::stat`].
#[derive(Clone)]
pub struct TableDiff {
    from: TableRef,
    to: TableRef,
    base: Option<InstantTime>,
    writes: usize,
    groups: Arc<Groups>,
    data: SchemaRef,
    from_scan: StateScan,
    to_scan: StateScan,
}

/// The latest completed write both states hold, at or before each state's instant.
pub(crate) fn merge_base(
    a: &RootTimeline,
    a_at: Option<&InstantTime>,
    b: &RootTimeline,
    b_at: Option<&InstantTime>,
) -> Option<InstantTime> {
    let (a_at, b_at) = (a_at?, b_at?);
    a.writes
        .range(..=a_at.clone())
        .rev()
        .find(|t| *t <= b_at && b.writes.contains(*t))
        .cloned()
}

/// The writes of `timeline` in `(after, upto]` (none when `upto` is `None`).
pub(crate) async fn writes_after(
    timeline: &RootTimeline,
    after: Option<&InstantTime>,
    upto: Option<&InstantTime>,
) -> Result<Vec<WriteTouch>> {
    match upto {
        Some(u) if after.is_none_or(|a| a < u) => {
            Ok(timeline.reader.view().writes_between(after, u).await?)
        }
        _ => Ok(Vec::new()),
    }
}

/// Adds every file group `writes` changed to `groups`.
pub(crate) fn add_groups(groups: &mut Groups, writes: &[WriteTouch]) {
    for w in writes {
        for (p, f) in w.file_groups() {
            groups.entry(p.clone()).or_default().insert(f.clone());
        }
    }
}

/// Plans the diff that turns state `from` into state `to` of the table at `storage` (the
/// table's base location).
pub async fn diff(storage: &Arc<dyn Storage>, from: &RefSpec, to: &RefSpec) -> Result<TableDiff> {
    let (from, from_tl) = resolve(storage, from).await?;
    let (to, to_tl) = resolve(storage, to).await?;
    let base = merge_base(&from_tl, from.instant.as_ref(), &to_tl, to.instant.as_ref());
    let from_writes = writes_after(&from_tl, base.as_ref(), from.instant.as_ref()).await?;
    let to_writes = writes_after(&to_tl, base.as_ref(), to.instant.as_ref()).await?;
    let mut groups = Groups::new();
    add_groups(&mut groups, &from_writes);
    add_groups(&mut groups, &to_writes);
    let what = format!("diff {} {}", from.label, to.label);
    let (from_scan, to_scan, data) = plan_states(
        (&from_tl, from.instant.as_ref(), &from.label),
        (&to_tl, to.instant.as_ref(), &to.label),
        &groups,
        &what,
    )
    .await?;
    Ok(TableDiff {
        base,
        writes: from_writes.len() + to_writes.len(),
        groups: Arc::new(groups),
        data,
        from_scan,
        to_scan,
        from,
        to,
    })
}

/// Plans both states over the partitions of `groups` and the one schema their data columns
/// are compared in.
pub(crate) async fn plan_states(
    (a_tl, a_at, a_label): (&RootTimeline, Option<&InstantTime>, &str),
    (b_tl, b_at, b_label): (&RootTimeline, Option<&InstantTime>, &str),
    groups: &Groups,
    what: &str,
) -> Result<(StateScan, StateScan, SchemaRef)> {
    let a = StateScan::plan(&a_tl.reader, a_at, groups, a_label).await?;
    let b = StateScan::plan(&b_tl.reader, b_at, groups, b_label).await?;
    let data = unify(a.schema(), b.schema(), what)?;
    Ok((a, b, data))
}

/// The changes of each partition of `groups` between states `a` and `b`, partition by
/// partition (partitions without a change are left out).
pub(crate) fn partition_changes(
    a: StateScan,
    b: StateScan,
    groups: Arc<Groups>,
    data: SchemaRef,
    label: String,
) -> BoxStream<'static, Result<PartitionChanges>> {
    let partitions: Vec<String> = groups.keys().cloned().collect();
    stream::iter(partitions)
        .then(move |p| {
            let (a, b, groups, data, label) = (
                a.clone(),
                b.clone(),
                groups.clone(),
                data.clone(),
                label.clone(),
            );
            async move {
                let empty = BTreeSet::new();
                let ids = groups.get(&p).unwrap_or(&empty);
                let before = a.read(&p, ids).await?;
                let after = b.read(&p, ids).await?;
                compare(&p, &before, &after, &data, &label)
            }
        })
        .filter(|r| {
            let keep = !matches!(r, Ok(c) if c.changes.is_empty());
            async move { keep }
        })
        .boxed()
}

impl TableDiff {
    /// The earlier state.
    pub fn from(&self) -> &TableRef {
        &self.from
    }

    /// The later state.
    pub fn to(&self) -> &TableRef {
        &self.to
    }

    /// The merge base: the latest completed write both states hold (`None`: none, so every
    /// write of both is compared).
    pub fn base(&self) -> Option<&InstantTime> {
        self.base.as_ref()
    }

    /// How many completed writes after the merge base (both sides) the diff looked at.
    pub fn writes(&self) -> usize {
        self.writes
    }

    /// How many file groups are read (in each state).
    pub fn file_groups(&self) -> usize {
        self.groups.values().map(BTreeSet::len).sum()
    }

    /// The data columns compared (both states' columns in one schema).
    pub fn data_schema(&self) -> &SchemaRef {
        &self.data
    }

    /// The schema of [`TableDiff::changes`]: [`CHANGE_TYPE`], `_hoodie_partition_path`,
    /// `_hoodie_record_key`, then (unless `keys_only`) the data columns.
    pub fn schema(&self, keys_only: bool) -> SchemaRef {
        change_schema(&self.data, keys_only)
    }

    fn label(&self) -> String {
        format!("diff {} {}", self.from.label, self.to.label)
    }

    /// The change rows, partition by partition, in key order within each (schema:
    /// [`TableDiff::schema`]). Reads only the compared file groups.
    pub fn changes(&self, keys_only: bool) -> BoxStream<'static, Result<RecordBatch>> {
        let schema = self.schema(keys_only);
        let label = self.label();
        partition_changes(
            self.from_scan.clone(),
            self.to_scan.clone(),
            self.groups.clone(),
            self.data.clone(),
            label.clone(),
        )
        .map(move |c| c.and_then(|c| c.rows(&schema, keys_only, &label)))
        .boxed()
    }

    /// Counts of changed keys per partition (partitions without a change left out), like
    /// `git diff --stat`.
    pub async fn stat(&self) -> Result<Vec<PartitionStat>> {
        let mut out = Vec::new();
        let mut changes = partition_changes(
            self.from_scan.clone(),
            self.to_scan.clone(),
            self.groups.clone(),
            self.data.clone(),
            self.label(),
        );
        while let Some(c) = changes.next().await {
            let c = c?;
            let (inserts, updates, deletes) = c.counts();
            out.push(PartitionStat {
                partition: c.partition.clone(),
                inserts,
                updates,
                deletes,
            });
        }
        Ok(out)
    }
}

impl std::fmt::Debug for TableDiff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableDiff")
            .field("from", &self.from)
            .field("to", &self.to)
            .field("base", &self.base)
            .field("writes", &self.writes)
            .field("file_groups", &self.file_groups())
            .finish()
    }
}
