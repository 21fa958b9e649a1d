//! The common end of a merge and a cherry-pick: both sides' changes joined partition by
//! partition, conflicts settled or refused, and what the target receives written as one
//! commit: an upsert (with deletes), or a `delete_partition` / `insert_overwrite` when all it
//! receives is whole partitions the source deleted / overwrote.

use std::collections::BTreeSet;

use arbor_table::read::OrderKey;
use arbor_table::{KnownLocations, Table, WriteOperation, WriteOptions};
use arbor_timeline::InstantTime;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use super::conflict::MergeRefusal;
use super::options::{MergeOptions, MergeStrategy};
use super::outcome::{MergeOutcome, CONFLICTS_SHOWN};
use super::resolve::merge_partition;
use super::side::Side;
use crate::diff::PartitionChanges;
use crate::error::{BranchingError, Result};

/// What [`apply`] needs besides the two sides.
pub(crate) struct Apply<'a> {
    /// The target's write handle.
    pub target: &'a Table,
    /// The target's completed writes when its state was read (the commit's conflict check
    /// covers every later one).
    pub seen: &'a BTreeSet<InstantTime>,
    /// The schema both sides' records are compared and written in.
    pub schema: SchemaRef,
    /// The table's ordering field.
    pub ordering: Option<String>,
    /// The operation, for messages (`merge dev into main`).
    pub op: String,
    /// Where the source's compared changes start, for the refusal's message.
    pub since: String,
    /// `extraMetadata` of the commit.
    pub extra: Vec<(&'static str, String)>,
    /// The source's and the target's changes start from the same state (a first merge, a
    /// cherry-pick): a key the target side did not read is where the source's earlier state
    /// has it.
    pub same_since: bool,
}

/// Partitions the source deleted or overwrote whole while the target left them as they were
/// (so the merged partition is the source's): the source's records of each (none when it
/// deleted it), and the changes by key that carry them otherwise.
#[derive(Default)]
struct Replaced {
    partitions: Vec<String>,
    rows: Vec<RecordBatch>,
    upserts: Vec<RecordBatch>,
    deletes: Vec<RecordBatch>,
}

/// Where the target holds each key of `s` and `t` (changed on either side) in its latest
/// state, as far as the two sides' reads tell (see [`Apply::same_since`]).
fn locations(
    known: &mut KnownLocations,
    s: &PartitionChanges,
    t: &PartitionChanges,
    ordering: Option<&str>,
    same_since: bool,
) {
    let order = |b: &RecordBatch, row: usize| {
        ordering
            .and_then(|f| b.column_by_name(f))
            .map_or(OrderKey::Default, |c| OrderKey::from_column(c, row))
    };
    // Without file names on the records read, nothing is known.
    let (Some(t_after), Some(t_before), Some(s_before)) = (&t.after_at, &t.before_at, &s.before_at)
    else {
        return;
    };
    for k in s.changes.keys().chain(t.changes.keys()) {
        let at = if let Some((row, file)) = t_after.get(k) {
            Some((file.clone(), order(&t.after, *row)))
        } else if t_before.contains_key(k) {
            None
        } else if same_since {
            s_before
                .get(k)
                .map(|(row, file)| (file.clone(), order(&s.before, *row)))
        } else {
            continue;
        };
        known.insert(&s.partition, k, at);
    }
}

/// Joins the source's changes `s` with the target's `t`, settles or refuses their conflicts as
/// `options` say, and (unless a dry run, or nothing is to be written) commits what the target
/// receives. `outcome` comes in with its refs and is returned filled in.
pub(crate) async fn apply(
    a: Apply<'_>,
    s: &Side,
    t: &Side,
    options: &MergeOptions,
    mut outcome: MergeOutcome,
) -> Result<MergeOutcome> {
    let mut partitions: BTreeSet<String> = s.groups.keys().cloned().collect();
    partitions.extend(t.groups.keys().cloned());
    let mut upserts: Vec<RecordBatch> = Vec::new();
    let mut deletes: Vec<RecordBatch> = Vec::new();
    let mut replaced = Replaced::default();
    let mut known = KnownLocations::new();
    for p in &partitions {
        // A partition only the target changed needs no reading unless the source replaced
        // the table.
        if !s.groups.contains_key(p) && !s.overwrites.table {
            continue;
        }
        let sc = s.changes(p, &a.schema).await?;
        let tc = t.changes(p, &a.schema).await?;
        let m = merge_partition(
            p,
            &sc,
            &tc,
            (&s.overwrites, &t.overwrites),
            options.strategy,
            a.ordering.as_deref(),
            &a.op,
        )?;
        outcome.inserts += m.inserts;
        outcome.updates += m.updates;
        outcome.deletes += m.deleted;
        outcome.conflict_count += m.conflicts.len();
        let conflicted = !m.conflicts.is_empty();
        for c in m.conflicts {
            if outcome.conflicts.len() < CONFLICTS_SHOWN {
                outcome.conflicts.push(c);
            }
        }
        let whole = s.overwrites.partitions.contains(p)
            && !s.overwrites.table
            && !t.overwrites.table
            && !t.groups.contains_key(p)
            && !conflicted;
        if whole && (m.upserts.is_some() || m.deletes.is_some()) {
            replaced.partitions.push(p.clone());
            if sc.after.num_rows() > 0 {
                replaced.rows.push(sc.after.clone());
            }
            replaced.upserts.extend(m.upserts);
            replaced.deletes.extend(m.deletes);
        } else {
            upserts.extend(m.upserts);
            deletes.extend(m.deletes);
        }
        locations(&mut known, &sc, &tc, a.ordering.as_deref(), a.same_since);
    }
    if options.strategy == MergeStrategy::Fail && outcome.conflict_count > 0 {
        if options.dry_run {
            return Ok(outcome);
        }
        return Err(BranchingError::MergeConflicts(Box::new(MergeRefusal {
            operation: a.op,
            source_ref: outcome.source.label.clone(),
            target: outcome.target.branch_label().to_string(),
            since: a.since,
            count: outcome.conflict_count,
            conflicts: outcome.conflicts,
        })));
    }
    if options.dry_run
        || (upserts.is_empty() && deletes.is_empty() && replaced.partitions.is_empty())
    {
        return Ok(outcome);
    }
    let write_options = WriteOptions {
        schema_evolution: true,
        ..a.target.write_options().clone()
    };
    let writer = a.target.clone().with_write_options(write_options);
    // Only whole partitions the source deleted, or only ones it overwrote: the target
    // receives the same Hudi operation (`delete_partition`, or `insert_overwrite` of the
    // source's records of them), every file group of them replaced. With other changes
    // besides (or both kinds), one commit must carry all of them: those partitions' changes
    // go by key into the upsert commit.
    // (The write futures are boxed: inlined, they made this future too large for the stack
    // of a debug build's rebase, which awaits a merge inside its own.)
    if upserts.is_empty() && deletes.is_empty() {
        let whole = if replaced.rows.is_empty() {
            Some(Box::pin(writer.prepare_delete_partitions(&replaced.partitions)).await?)
        } else if replaced.rows.len() == replaced.partitions.len() {
            let rows = std::mem::take(&mut replaced.rows);
            Some(Box::pin(writer.prepare(WriteOperation::InsertOverwrite, rows)).await?)
        } else {
            None
        };
        if let Some(mut prepared) = whole {
            for (k, v) in &a.extra {
                prepared.insert_extra_metadata(k, v)?;
            }
            prepared.seen_only(a.seen);
            outcome.commit = Some(Box::pin(writer.commit(prepared)).await?);
            return Ok(outcome);
        }
    }
    upserts.append(&mut replaced.upserts);
    deletes.append(&mut replaced.deletes);
    let mut prepared = Box::pin(writer.prepare_changes_with(upserts, deletes, known)).await?;
    for (k, v) in &a.extra {
        prepared.insert_extra_metadata(k, v)?;
    }
    prepared.seen_only(a.seen);
    outcome.commit = Some(Box::pin(writer.commit(prepared)).await?);
    Ok(outcome)
}
