//! One partition of a merge: the source's and the target's changes joined by key, conflicts
//! found and settled by the strategy, and the rows the target receives.

use std::collections::BTreeSet;

use arbor_table::read::{newer_wins, OrderKey};
use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::util::display::{ArrayFormatter, FormatOptions};

use super::conflict::MergeConflict;
use super::options::MergeStrategy;
use crate::diff::state::arrow_error;
use crate::diff::{KeyChange, PartitionChanges};
use crate::error::Result;

/// What one side did to a partition as a whole.
#[derive(Debug, Clone, Default)]
pub(crate) struct Overwrites {
    /// The side replaced the whole table (`insert_overwrite_table`).
    pub table: bool,
    /// Partitions it deleted or overwrote (`delete_partition`, `insert_overwrite`).
    pub partitions: BTreeSet<String>,
}

impl Overwrites {
    fn covers(&self, partition: &str) -> bool {
        self.table || self.partitions.contains(partition)
    }
}

/// The rows one partition contributes to the merge commit, and its conflicts.
#[derive(Default)]
pub(crate) struct PartitionMerge {
    pub upserts: Option<RecordBatch>,
    pub deletes: Option<RecordBatch>,
    pub inserts: usize,
    pub updates: usize,
    pub deleted: usize,
    pub conflicts: Vec<MergeConflict>,
}

/// The text of row `row` of `batch`, column `c`.
fn cell(batch: &RecordBatch, c: usize, row: usize) -> String {
    let options = FormatOptions::default().with_null("null");
    match ArrayFormatter::try_new(batch.column(c).as_ref(), &options) {
        Ok(f) => {
            let text = f.value(row).to_string();
            if text.chars().count() > 60 {
                format!("{}…", text.chars().take(59).collect::<String>())
            } else {
                text
            }
        }
        Err(_) => "?".to_string(),
    }
}

/// Both sides' values of a conflicting key: the columns where they differ (all columns when
/// one side deleted it).
fn describe(
    s: &PartitionChanges,
    sc: &KeyChange,
    t: &PartitionChanges,
    tc: &KeyChange,
) -> (Option<String>, Option<String>) {
    let schema = s.after.schema();
    let render = |batch: &RecordBatch, row: usize, cols: &[usize]| -> String {
        cols.iter()
            .map(|&c| format!("{}={}", schema.field(c).name(), cell(batch, c, row)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let all: Vec<usize> = (0..schema.fields().len()).collect();
    match (sc.after, tc.after) {
        (Some(i), Some(j)) => {
            let differ: Vec<usize> = all
                .iter()
                .copied()
                .filter(|&c| {
                    s.after.column(c).slice(i, 1).to_data()
                        != t.after.column(c).slice(j, 1).to_data()
                })
                .collect();
            (
                Some(render(&s.after, i, &differ)),
                Some(render(&t.after, j, &differ)),
            )
        }
        (Some(i), None) => (Some(render(&s.after, i, &all)), None),
        (None, Some(j)) => (None, Some(render(&t.after, j, &all))),
        (None, None) => (None, None),
    }
}

/// True when both sides left the key in the same state.
fn same_outcome(
    s: &PartitionChanges,
    sc: &KeyChange,
    t: &PartitionChanges,
    tc: &KeyChange,
) -> bool {
    match (sc.after, tc.after) {
        (None, None) => true,
        (Some(i), Some(j)) => (0..s.after.num_columns()).all(|c| {
            s.after.column(c).slice(i, 1).to_data() == t.after.column(c).slice(j, 1).to_data()
        }),
        _ => false,
    }
}

/// The ordering value a side's change carries: its new record's, or for a delete the value of
/// the record it deleted.
fn order_of(change: &KeyChange, after: &ArrayRef, before: &ArrayRef) -> OrderKey {
    match (change.after, change.before) {
        (Some(j), _) => OrderKey::from_column(after, j),
        (None, Some(i)) => OrderKey::from_column(before, i),
        (None, None) => OrderKey::Default,
    }
}

/// Row indices taken from the four batches of a partition's merge.
#[derive(Default)]
struct Picks {
    /// Rows of the source's later state, upserted.
    source_after: Vec<u32>,
    /// Rows of the source's earlier state, whose keys are deleted.
    source_before: Vec<u32>,
    /// Rows of the target's earlier state, upserted (a target change undone).
    target_before: Vec<u32>,
    /// Rows of the target's later state, whose keys are deleted (a target insert undone).
    target_after: Vec<u32>,
}

fn row(r: usize) -> u32 {
    u32::try_from(r).unwrap_or(u32::MAX)
}

impl PartitionMerge {
    /// Takes the source's change of a key (`target_has`: the target holds the key too).
    fn take_source(&mut self, picks: &mut Picks, sc: &KeyChange, target_has: bool) {
        match (sc.before, sc.after) {
            (before, Some(j)) => {
                picks.source_after.push(row(j));
                if before.is_none() && !target_has {
                    self.inserts += 1;
                } else {
                    self.updates += 1;
                }
            }
            (Some(i), None) => {
                picks.source_before.push(row(i));
                self.deleted += 1;
            }
            (None, None) => {}
        }
    }
}

/// Merges one partition. `s`/`t`: the source's and target's changes there (empty when a side
/// did not touch it), in one schema.
pub(crate) fn merge_partition(
    partition: &str,
    s: &PartitionChanges,
    t: &PartitionChanges,
    (s_over, t_over): (&Overwrites, &Overwrites),
    strategy: MergeStrategy,
    ordering: Option<&str>,
    label: &str,
) -> Result<PartitionMerge> {
    let mut out = PartitionMerge::default();
    let mut picks = Picks::default();
    // A side that replaced the partition against a side that changed records in it.
    let partition_conflict = (s_over.covers(partition) && !t.changes.is_empty())
        || (t_over.covers(partition) && !s.changes.is_empty());
    if partition_conflict {
        let what = |o: &Overwrites, n: usize| -> String {
            if o.covers(partition) {
                if o.table {
                    "overwrote the whole table".to_string()
                } else {
                    "deleted or overwrote the partition".to_string()
                }
            } else {
                format!("changed {n} key(s) in it")
            }
        };
        out.conflicts.push(MergeConflict {
            partition: partition.to_string(),
            key: None,
            source: Some(what(s_over, s.changes.len())),
            target: Some(what(t_over, t.changes.len())),
        });
    }
    // With the target's side taken, nothing of the source lands in a partition the target
    // replaced.
    let source_dropped = strategy == MergeStrategy::Target && t_over.covers(partition);
    let col = |b: &RecordBatch| ordering.and_then(|f| b.column_by_name(f).cloned());
    for (key, sc) in &s.changes {
        let Some(tc) = t.changes.get(key) else {
            if !source_dropped {
                out.take_source(&mut picks, sc, false);
            }
            continue;
        };
        if same_outcome(s, sc, t, tc) {
            continue;
        }
        let (source, target) = describe(s, sc, t, tc);
        out.conflicts.push(MergeConflict {
            partition: partition.to_string(),
            key: Some(key.clone()),
            source,
            target,
        });
        let source_wins = match strategy {
            MergeStrategy::Fail | MergeStrategy::Target => false,
            MergeStrategy::Source => true,
            MergeStrategy::Ordering => {
                match (col(&s.after), col(&s.before), col(&t.after), col(&t.before)) {
                    (Some(sa), Some(sb), Some(ta), Some(tb)) => {
                        newer_wins(&order_of(tc, &ta, &tb), &order_of(sc, &sa, &sb))
                    }
                    _ => true,
                }
            }
        };
        if source_wins && !source_dropped {
            out.take_source(&mut picks, sc, tc.after.is_some());
        }
    }
    // With the source's side taken, a partition the source replaced ends as the source left
    // it: the target's own changes there are undone.
    if strategy == MergeStrategy::Source && s_over.covers(partition) {
        for (key, tc) in &t.changes {
            if s.changes.contains_key(key) {
                continue;
            }
            match (tc.before, tc.after) {
                (Some(i), _) => {
                    picks.target_before.push(row(i));
                    out.updates += 1;
                }
                (None, Some(j)) => {
                    picks.target_after.push(row(j));
                    out.deleted += 1;
                }
                (None, None) => {}
            }
        }
    }
    let take = |b: &RecordBatch, rows: Vec<u32>| -> Result<Option<RecordBatch>> {
        if rows.is_empty() {
            return Ok(None);
        }
        take_record_batch(b, &UInt32Array::from(rows))
            .map(Some)
            .map_err(|e| arrow_error(label, e))
    };
    out.upserts = concat(
        [
            take(&s.after, picks.source_after)?,
            take(&t.before, picks.target_before)?,
        ],
        label,
    )?;
    out.deletes = concat(
        [
            take(&s.before, picks.source_before)?,
            take(&t.after, picks.target_after)?,
        ],
        label,
    )?;
    Ok(out)
}

fn concat(parts: [Option<RecordBatch>; 2], label: &str) -> Result<Option<RecordBatch>> {
    let parts: Vec<RecordBatch> = parts.into_iter().flatten().collect();
    match parts.first() {
        None => Ok(None),
        Some(first) => arrow::compute::concat_batches(&first.schema(), &parts)
            .map(Some)
            .map_err(|e| arrow_error(label, e)),
    }
}
