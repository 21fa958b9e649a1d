//! Assigning input records to file groups: updates and deletes to the group holding their key,
//! inserts packed into small file groups up to the maximum file size, the rest into new groups.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use arbor_fsview::{FileSlice, FileSystemView};
use arbor_timeline::config::TableType;
use arrow::array::{ArrayRef, RecordBatch};

use super::index::Index;
use super::options::{WriteOperation, WriteOptions};
use crate::error::{Result, TableError};
use crate::keygen::HoodieKey;
use crate::read::{newer_wins, MergeMode, OrderKey};

/// The validated input of one write: one batch in the table's data schema and the key of each
/// row.
#[derive(Debug, Clone)]
pub struct Input {
    /// All input rows, shaped to the table's data schema.
    pub batch: RecordBatch,
    /// Record key and partition path of each row.
    pub keys: Vec<HoodieKey>,
}

/// What one file group receives in a write.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupPlan {
    /// The partition path.
    pub partition: String,
    /// The file group id (new groups: a fresh `<uuid>-0`).
    pub file_id: String,
    /// The latest slice of an existing group; `None` for a new group.
    pub existing: Option<FileSlice>,
    /// Input rows inserted (new keys).
    pub inserts: Vec<usize>,
    /// Input rows replacing existing records of the group.
    pub updates: Vec<usize>,
    /// Input rows whose keys are deleted from the group.
    pub deletes: Vec<usize>,
}

impl GroupPlan {
    fn new(partition: &str, file_id: String, existing: Option<FileSlice>) -> Self {
        GroupPlan {
            partition: partition.to_string(),
            file_id,
            existing,
            inserts: Vec::new(),
            updates: Vec::new(),
            deletes: Vec::new(),
        }
    }

    /// True if nothing is written to the group.
    pub fn is_empty(&self) -> bool {
        self.inserts.is_empty() && self.updates.is_empty() && self.deletes.is_empty()
    }
}

/// Where every input record goes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WritePlan {
    /// File groups written, ordered by partition then file id (new groups in creation order).
    pub groups: Vec<GroupPlan>,
    /// File groups replaced (insert overwrite), per partition.
    pub replaced: BTreeMap<String, Vec<String>>,
    /// Partitions the input touches.
    pub partitions: BTreeSet<String>,
    /// Input rows dropped because they lose to the stored record of their key (see
    /// [`PlanContext::stale_ordering_field`]); in no group.
    pub skipped_stale: u64,
    /// Rows that replace their key's record from a new file group ([`PlanContext::replace`]):
    /// each is one delete in the group that held the key and one insert in a new group, and
    /// one update for the user.
    pub moved: u64,
}

impl WritePlan {
    /// `Err(Unsupported)` when the plan updates or deletes records of a file group that a
    /// pending clustering plan (a requested or inflight replacecommit/clustering) is rewriting,
    /// naming the group and the clustering instant. The clustering would replace the group with
    /// its own copy of the old records and lose the change; Java's default
    /// `SparkRejectUpdateStrategy` refuses such a write the same way. Inserts never go there
    /// (the small-file rule skips those groups).
    pub fn refuse_pending_clustering(&self, view: &FileSystemView) -> Result<()> {
        let clustering = view.pending_clustering_file_groups();
        if clustering.is_empty() {
            return Ok(());
        }
        for g in &self.groups {
            if g.updates.is_empty() && g.deletes.is_empty() {
                continue;
            }
            if let Some(instant) = clustering.get(&(g.partition.clone(), g.file_id.clone())) {
                return Err(TableError::Unsupported {
                    reason: format!(
                        "updating {} record(s) of file group {} in partition {:?}, which the \
                         pending clustering {instant} is rewriting (Java's default \
                         SparkRejectUpdateStrategy refuses this too): finish it (`arbor cluster \
                         --pending`, or Spark's CALL run_clustering) or roll it back (`arbor \
                         cluster --rollback-pending`), then write again. Nothing was written",
                        g.updates.len() + g.deletes.len(),
                        g.file_id,
                        g.partition
                    ),
                });
            }
        }
        Ok(())
    }

    /// The indices (in [`WritePlan::groups`]) of existing file groups that receive inserts
    /// (small-file packing). On merge-on-read the writer rewrites them as a new base file
    /// rather than appending a log file, so that every key stays findable by an index that
    /// reads base files only (Java's default).
    pub fn packed_groups(&self) -> impl Iterator<Item = usize> + '_ {
        self.groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.existing.is_some() && !g.inserts.is_empty())
            .map(|(i, _)| i)
    }
}

/// A fresh file id: a UUID v4 and the suffix `-0`; never one shaped like a bucket index's
/// (eight decimal digits first), which would make arbor take its own table for a
/// bucket-indexed one (see `bucket_index`).
pub fn new_file_id() -> String {
    loop {
        let id = format!("{}-0", uuid::Uuid::new_v4());
        if !super::bucket_index::is_bucket_file_id(&id) {
            return id;
        }
    }
}

/// How duplicates within one input are combined (Hudi's pre-combine before upsert/delete).
#[derive(Debug, Clone)]
pub struct Combine<'a> {
    /// The table's merge mode.
    pub mode: MergeMode,
    /// The ordering column of the input, if event-time ordering applies.
    pub ordering: Option<&'a ArrayRef>,
}

/// Keeps one row per (partition, key): the later one, unless event-time ordering says the
/// earlier wins ([`newer_wins`]: a greater ordering value, or a non-null one against a null).
/// Rows keep input order.
pub fn dedupe(input: &Input, combine: &Combine<'_>) -> Vec<usize> {
    let mut chosen: HashMap<&HoodieKey, usize> = HashMap::new();
    for (row, key) in input.keys.iter().enumerate() {
        let keep_old = match (chosen.get(key), combine.mode, combine.ordering) {
            (Some(&old), MergeMode::EventTime, Some(col)) => !newer_wins(
                &OrderKey::from_column(col, old),
                &OrderKey::from_column(col, row),
            ),
            _ => false,
        };
        if !keep_old {
            chosen.insert(key, row);
        }
    }
    let mut rows: Vec<usize> = chosen.into_values().collect();
    rows.sort_unstable();
    rows
}

/// The input rows `rows` (ascending) per partition path, ascending in each. Rows are grouped
/// first by the allocation of their path (the key generator shares one per partition and
/// thread, so this hashes a pointer per row and compares no string), then merged by path.
pub(crate) fn rows_by_partition(
    input: &Input,
    rows: Vec<usize>,
) -> Result<BTreeMap<&str, Vec<usize>>> {
    let mut by_allocation: HashMap<*const u8, (&str, Vec<usize>)> = HashMap::new();
    for row in rows {
        let key = input
            .keys
            .get(row)
            .ok_or_else(|| TableError::InvalidInput {
                column: None,
                row: Some(row),
                reason: "row without key".into(),
            })?;
        let path: &str = &key.partition_path;
        by_allocation
            .entry(path.as_ptr())
            .or_insert_with(|| (path, Vec::new()))
            .1
            .push(row);
    }
    let mut by_partition: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut merged: BTreeSet<&str> = BTreeSet::new();
    for (path, rows) in by_allocation.into_values() {
        match by_partition.entry(path) {
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(rows);
            }
            std::collections::btree_map::Entry::Occupied(mut e) => {
                e.get_mut().extend(rows);
                merged.insert(path);
            }
        }
    }
    for path in merged {
        if let Some(rows) = by_partition.get_mut(path) {
            rows.sort_unstable();
        }
    }
    Ok(by_partition)
}

/// Everything the planner needs besides the input.
pub struct PlanContext<'a> {
    /// The operation.
    pub operation: WriteOperation,
    /// The table type.
    pub table_type: TableType,
    /// The view of the state the write is planned against.
    pub view: &'a FileSystemView,
    /// The index answering key lookups.
    pub index: &'a dyn Index,
    /// Input rows that delete their key from a given file group, whatever the operation
    /// (`(row, partition, file id)`): a key a global index found in another partition, when
    /// the write moves it (delete there, insert where the row says).
    pub forced_deletes: Vec<(usize, String, String)>,
    /// Upserts only: input rows that delete their key (from every file group of their
    /// partition holding it, as a delete does) instead of writing it, so one commit can carry
    /// both (`crate::Table::prepare_changes`). `None`: none.
    pub delete_rows: Option<&'a BTreeSet<usize>>,
    /// Upserts under event-time ordering: input rows that replace the stored record of their
    /// key even when its ordering value (the field named) is greater: such a row deletes its
    /// key from the group holding it and is written to a new file group (a merge taking one
    /// side's record, `crate::Table::prepare_changes`). `None`: none.
    pub replace: Option<(&'a BTreeSet<usize>, &'a str)>,
    /// Sizes.
    pub options: &'a WriteOptions,
    /// Pre-combining of duplicate keys.
    pub combine: Combine<'a>,
    /// For `InsertOverwriteTable`: every partition of the table.
    pub all_partitions: Vec<String>,
    /// The ordering field when records that lose to the stored record of their key are dropped
    /// at write time (merge-on-read under event-time ordering, where such a record would
    /// otherwise be written to a log file that readers of the log range alone, like hudi-rs
    /// 0.5.0's incremental query, return). Then an upsert row whose key the index locates with
    /// a greater ordering value (same class, [`OrderKey::compare`]) is dropped, as is an insert
    /// packed into the file group holding its key with a greater ordering value. `None`: no row
    /// is dropped for its ordering value.
    pub stale_ordering_field: Option<&'a str>,
}

/// True if a new record with `new` as ordering value loses to a stored record with `stored`
/// (the reader's merge, [`newer_wins`]: same-class values compare, a null value loses to any
/// other, the newer wins on ties and across classes; an unknown stored value never wins).
pub fn loses_to_stored(new: &OrderKey, stored: Option<&OrderKey>) -> bool {
    stored.is_some_and(|old| !newer_wins(old, new))
}

/// Estimated bytes per row of the input (its in-memory size, at least 1).
fn bytes_per_row(batch: &RecordBatch) -> u64 {
    let rows = batch.num_rows().max(1) as u64;
    (batch.get_array_memory_size() as u64 / rows).max(1)
}

/// Plans a write (see the module doc).
pub async fn plan(ctx: &PlanContext<'_>, input: &Input) -> Result<WritePlan> {
    use WriteOperation as Op;
    let forced_rows: BTreeSet<usize> = ctx.forced_deletes.iter().map(|f| f.0).collect();
    let mut rows: Vec<usize> = match ctx.operation {
        Op::Upsert | Op::Delete => dedupe(input, &ctx.combine),
        _ => (0..input.keys.len()).collect(),
    };
    rows.retain(|r| !forced_rows.contains(r));
    let mut by_partition = rows_by_partition(input, rows)?;
    let mut forced: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for (row, partition, file_id) in &ctx.forced_deletes {
        forced
            .entry(partition.clone())
            .or_default()
            .push((*row, file_id.clone()));
        by_partition.entry(partition.as_str()).or_default();
    }
    let bpr = bytes_per_row(&input.batch);
    let rows_per_file = (ctx.options.max_file_size / bpr).max(1);
    let mut plan = WritePlan {
        partitions: by_partition.keys().map(|p| p.to_string()).collect(),
        ..WritePlan::default()
    };

    if matches!(
        ctx.operation,
        Op::InsertOverwrite | Op::InsertOverwriteTable
    ) {
        let replace_in: Vec<String> = if ctx.operation == Op::InsertOverwriteTable {
            let mut all: BTreeSet<String> = ctx.all_partitions.iter().cloned().collect();
            all.extend(plan.partitions.iter().cloned());
            all.into_iter().collect()
        } else {
            plan.partitions.iter().cloned().collect()
        };
        for p in replace_in {
            let slices = latest_slices(ctx.view, &p).await?;
            let ids: Vec<String> = slices.into_iter().map(|s| s.file_id).collect();
            if !ids.is_empty() {
                plan.replaced.insert(p, ids);
            }
        }
    }

    for (partition, rows) in by_partition {
        let partition = partition.to_string();
        let mut groups: BTreeMap<String, GroupPlan> = BTreeMap::new();
        // The partition's latest slices, listed only when needed: a write that updates or
        // deletes located keys reads the slices of those groups alone (below), so its cost
        // does not grow with the partition; inserts that may pack small files list them all.
        let mut slices: Option<Vec<FileSlice>> = match ctx.operation {
            Op::InsertOverwrite | Op::InsertOverwriteTable | Op::BulkInsert => Some(Vec::new()),
            _ => None,
        };
        let mut inserts: Vec<usize> = Vec::new();
        // Rows that replace a stored record from a new file group (`PlanContext::replace`).
        let mut fresh: Vec<usize> = Vec::new();
        for (row, file_id) in forced.remove(&partition).unwrap_or_default() {
            groups
                .entry(file_id.clone())
                .or_insert_with(|| GroupPlan::new(&partition, file_id.clone(), None))
                .deletes
                .push(row);
        }
        match ctx.operation {
            Op::Upsert | Op::Delete => {
                let (delete_rows, rows): (Vec<usize>, Vec<usize>) = rows.iter().partition(|&&r| {
                    ctx.operation == Op::Delete || ctx.delete_rows.is_some_and(|d| d.contains(&r))
                });
                let key_of = |rows: &[usize]| -> Vec<String> {
                    rows.iter()
                        .filter_map(|&r| input.keys.get(r).map(|k| k.record_key.clone()))
                        .collect()
                };
                let keys = key_of(&rows);
                let stale_check = match (ctx.operation, ctx.stale_ordering_field) {
                    (Op::Upsert, Some(f)) => ctx.combine.ordering.map(|col| (f, col)),
                    _ => None,
                };
                if !delete_rows.is_empty() {
                    // Every file group holding a key loses it (a key may be stored more than
                    // once by inserts that did not look keys up).
                    let delete_keys = key_of(&delete_rows);
                    let found = ctx.index.locate_all(&partition, &delete_keys).await?;
                    for (&row, key) in delete_rows.iter().zip(&delete_keys) {
                        for loc in found.get(key).into_iter().flatten() {
                            let group = groups.entry(loc.file_id.clone()).or_insert_with(|| {
                                GroupPlan::new(&partition, loc.file_id.clone(), None)
                            });
                            group.deletes.push(row);
                        }
                    }
                }
                if !rows.is_empty() {
                    let replace_field = ctx.replace.map(|(_, f)| f);
                    let found = match stale_check.map(|(f, _)| f).or(replace_field) {
                        Some(f) => ctx.index.locate_with_ordering(&partition, &keys, f).await?,
                        None => ctx
                            .index
                            .locate(&partition, &keys)
                            .await?
                            .into_iter()
                            .map(|(k, l)| (k, (l, None)))
                            .collect(),
                    };
                    for (&row, key) in rows.iter().zip(&keys) {
                        let replacing = ctx.replace.is_some_and(|(set, _)| set.contains(&row));
                        // An index that does not know the stored ordering value (the record
                        // index) may hide a record that would win: such a key is replaced
                        // from a new group too.
                        let loses = |stored: &Option<OrderKey>| {
                            ctx.combine.ordering.is_some_and(|col| {
                                stored.is_none()
                                    || loses_to_stored(
                                        &OrderKey::from_column(col, row),
                                        stored.as_ref(),
                                    )
                            })
                        };
                        match found.get(key) {
                            Some((_, stored))
                                if !replacing
                                    && stale_check.is_some_and(|(_, col)| {
                                        loses_to_stored(
                                            &OrderKey::from_column(col, row),
                                            stored.as_ref(),
                                        )
                                    }) =>
                            {
                                plan.skipped_stale += 1;
                            }
                            Some((loc, stored)) => {
                                let group =
                                    groups.entry(loc.file_id.clone()).or_insert_with(|| {
                                        GroupPlan::new(&partition, loc.file_id.clone(), None)
                                    });
                                if ctx.operation == Op::Delete {
                                    group.deletes.push(row);
                                } else if replacing && loses(stored) {
                                    // The stored record would win the merge: the key leaves
                                    // its group and the row starts a new one.
                                    group.deletes.push(row);
                                    fresh.push(row);
                                } else {
                                    group.updates.push(row);
                                }
                            }
                            None if ctx.operation == Op::Upsert => inserts.push(row),
                            None => {}
                        }
                    }
                }
            }
            _ => inserts = rows,
        }
        // The latest slices of the groups named so far.
        let named: BTreeSet<String> = groups.keys().cloned().collect();
        if !named.is_empty() {
            let found = match &slices {
                Some(all) => all
                    .iter()
                    .filter(|s| named.contains(&s.file_id))
                    .cloned()
                    .collect(),
                None => ctx
                    .view
                    .latest_file_slices_of(&BTreeMap::from([(partition.clone(), named)]), None)
                    .await
                    .map_err(TableError::from_fsview)?,
            };
            for slice in found {
                if let Some(g) = groups.get_mut(&slice.file_id) {
                    g.existing = Some(slice);
                }
            }
        }
        // A group the index names must have a latest slice; anything else is a stale index.
        for g in groups.values() {
            if g.existing.is_none() {
                return Err(TableError::Unsupported {
                    reason: format!(
                        "the index located records in file group {} of partition {partition:?}, \
                         which has no latest slice",
                        g.file_id
                    ),
                });
            }
        }
        let mut rest = inserts.as_slice();
        // On merge-on-read, an insert holding one key twice goes to new base files only,
        // which keep both copies as copy-on-write does (never merged into an existing slice).
        let repeats_keys =
            ctx.table_type == TableType::MergeOnRead && ctx.operation == Op::Insert && {
                let mut seen = std::collections::HashSet::new();
                rest.iter().any(|&r| {
                    input
                        .keys
                        .get(r)
                        .is_some_and(|k| !seen.insert(k.record_key.as_str()))
                })
            };
        let packing = matches!(ctx.operation, Op::Insert | Op::Upsert)
            && ctx.options.small_file_limit > 0
            && !repeats_keys;
        if packing && !rest.is_empty() {
            let all = match slices.take() {
                Some(all) => all,
                None => latest_slices(ctx.view, &partition).await?,
            };
            for slice in small_files(ctx, &all) {
                if rest.is_empty() {
                    break;
                }
                let size = slice_size(ctx.table_type, slice);
                let room = ctx.options.max_file_size.saturating_sub(size) / bpr;
                let take = usize::try_from(room).unwrap_or(usize::MAX).min(rest.len());
                if take == 0 {
                    continue;
                }
                let (now, later) = rest.split_at(take);
                groups
                    .entry(slice.file_id.clone())
                    .or_insert_with(|| {
                        GroupPlan::new(&partition, slice.file_id.clone(), Some(slice.clone()))
                    })
                    .inserts
                    .extend_from_slice(now);
                rest = later;
            }
        }
        if ctx.operation == Op::Insert {
            drop_stale_inserts(ctx, input, &partition, &mut groups, &mut plan.skipped_stale)
                .await?;
        }
        plan.groups
            .extend(groups.into_values().filter(|g| !g.is_empty()));
        let tail: Vec<usize>;
        plan.moved += fresh.len() as u64;
        if !fresh.is_empty() {
            // Never packed with other inserts into a group that may hold their key.
            tail = rest.iter().chain(fresh.iter()).copied().collect();
            rest = &tail;
        }
        if !rest.is_empty() {
            let n_files = rest
                .len()
                .div_ceil(usize::try_from(rows_per_file).unwrap_or(usize::MAX));
            let per_file = rest.len().div_ceil(n_files.max(1));
            for chunk in rest.chunks(per_file.max(1)) {
                let mut g = GroupPlan::new(&partition, new_file_id(), None);
                g.inserts.extend_from_slice(chunk);
                plan.groups.push(g);
            }
        }
    }
    Ok(plan)
}

/// Inserts packed into an existing file group that already holds their key with a greater
/// ordering value would be losing log records: drops them (see
/// [`PlanContext::stale_ordering_field`]). Inserts into other groups stay (insert semantics:
/// duplicates across file groups are the caller's choice).
async fn drop_stale_inserts(
    ctx: &PlanContext<'_>,
    input: &Input,
    partition: &str,
    groups: &mut BTreeMap<String, GroupPlan>,
    skipped: &mut u64,
) -> Result<()> {
    let (Some(field), Some(col)) = (ctx.stale_ordering_field, ctx.combine.ordering) else {
        return Ok(());
    };
    let key_of = |r: usize| input.keys.get(r).map(|k| k.record_key.clone());
    let keys: Vec<String> = groups
        .values()
        .filter(|g| g.existing.is_some())
        .flat_map(|g| g.inserts.iter().filter_map(|&r| key_of(r)))
        .collect();
    if keys.is_empty() {
        return Ok(());
    }
    let found = ctx
        .index
        .locate_with_ordering(partition, &keys, field)
        .await?;
    for g in groups.values_mut().filter(|g| g.existing.is_some()) {
        let before = g.inserts.len();
        g.inserts.retain(|&r| {
            let stale = key_of(r)
                .and_then(|k| found.get(&k))
                .is_some_and(|(loc, stored)| {
                    loc.file_id == g.file_id
                        && loses_to_stored(&OrderKey::from_column(col, r), stored.as_ref())
                });
            !stale
        });
        *skipped += before.saturating_sub(g.inserts.len()) as u64;
    }
    Ok(())
}

async fn latest_slices(view: &FileSystemView, partition: &str) -> Result<Vec<FileSlice>> {
    view.latest_file_slices(Some(partition), None)
        .await
        .map_err(TableError::from_fsview)
}

/// The size counted against the small-file limit: the base file (COW) or the whole slice (MOR).
fn slice_size(table_type: TableType, slice: &FileSlice) -> u64 {
    match table_type {
        TableType::CopyOnWrite => slice.base_file.as_ref().map_or(0, |b| b.size),
        _ => slice.total_size(),
    }
}

/// Slices that may receive inserts: below the small-file limit, not in a pending compaction or
/// clustering, with a base file; on merge-on-read also without log files. Smallest first.
///
/// Merge-on-read follows Java's `SparkUpsertDeltaCommitPartitioner` for indexes that cannot
/// index log files (Spark's default SIMPLE and BLOOM indexes, which read record keys from base
/// files only): a new key must land in a base file, or Spark's next upsert would not find it
/// and would write the key a second time. So only base-only slices take inserts, and the
/// writer rewrites them as a new base file of the deltacommit (see `WritePlan::packed_groups`),
/// as Java's `handleUpdate` does for small files.
fn small_files<'s>(ctx: &PlanContext<'_>, slices: &'s [FileSlice]) -> Vec<&'s FileSlice> {
    let pending_compaction: BTreeSet<(&str, &str)> = ctx
        .view
        .pending_compaction_operations()
        .iter()
        .map(|op| (op.partition.as_str(), op.file_id.as_str()))
        .collect();
    let clustering = ctx.view.pending_clustering_file_groups();
    let mut out: Vec<&FileSlice> = slices
        .iter()
        .filter(|s| {
            !pending_compaction.contains(&(s.partition.as_str(), s.file_id.as_str()))
                && !clustering.contains_key(&(s.partition.clone(), s.file_id.clone()))
                && s.base_file.is_some()
                && (ctx.table_type == TableType::CopyOnWrite || s.log_files.is_empty())
                && slice_size(ctx.table_type, s) < ctx.options.small_file_limit
        })
        .collect();
    out.sort_by_key(|s| (slice_size(ctx.table_type, s), s.file_id.clone()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn input(keys: &[&str], ts: &[i64]) -> Input {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("ts", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(keys.to_vec())),
                Arc::new(Int64Array::from(ts.to_vec())),
            ],
        )
        .unwrap();
        Input {
            batch,
            keys: keys
                .iter()
                .map(|k| HoodieKey {
                    record_key: k.to_string(),
                    partition_path: Arc::from(""),
                })
                .collect(),
        }
    }

    #[test]
    fn test_dedupe_commit_time_keeps_last() {
        let i = input(&["a", "b", "a"], &[5, 1, 1]);
        let c = Combine {
            mode: MergeMode::CommitTime,
            ordering: None,
        };
        assert_eq!(dedupe(&i, &c), vec![1, 2]);
    }

    #[test]
    fn test_dedupe_event_time_keeps_greatest_ordering() {
        let i = input(&["a", "b", "a"], &[5, 1, 1]);
        let col = i.batch.column(1).clone();
        let c = Combine {
            mode: MergeMode::EventTime,
            ordering: Some(&col),
        };
        assert_eq!(dedupe(&i, &c), vec![0, 1]);
    }

    #[test]
    fn test_dedupe_event_time_null_loses_to_value() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("ts", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a", "a", "b", "b"])),
                Arc::new(Int64Array::from(vec![Some(10), None, None, None])),
            ],
        )
        .unwrap();
        let i = Input {
            keys: ["a", "a", "b", "b"]
                .iter()
                .map(|k| HoodieKey {
                    record_key: k.to_string(),
                    partition_path: Arc::from(""),
                })
                .collect(),
            batch,
        };
        let col = i.batch.column(1).clone();
        let c = Combine {
            mode: MergeMode::EventTime,
            ordering: Some(&col),
        };
        assert_eq!(
            dedupe(&i, &c),
            vec![0, 3],
            "a: 10 beats null; b: nulls tie, later wins"
        );
    }

    #[test]
    fn test_loses_to_stored_only_smaller_same_class() {
        let long = OrderKey::Long;
        assert!(loses_to_stored(&long(3), Some(&long(5))));
        assert!(
            !loses_to_stored(&long(5), Some(&long(5))),
            "ties: newer wins"
        );
        assert!(!loses_to_stored(&long(6), Some(&long(5))));
        assert!(
            !loses_to_stored(&long(3), Some(&OrderKey::Default)),
            "a stored null loses"
        );
        assert!(
            loses_to_stored(&OrderKey::Default, Some(&long(10))),
            "a new null loses to a stored value"
        );
        assert!(!loses_to_stored(&OrderKey::Double(1.0), Some(&long(5))));
        assert!(!loses_to_stored(&long(3), None), "unknown stored value");
    }

    #[test]
    fn test_new_file_id_has_no_underscore_and_suffix() {
        let id = new_file_id();
        assert!(id.ends_with("-0") && !id.contains('_'));
    }

    #[test]
    fn test_rows_by_partition_merges_paths_of_separate_allocations_in_row_order() {
        let mut i = input(&["a", "b", "c", "d", "e", "f"], &[0; 6]);
        // Two threads' allocations of "p" (rows 0, 1 and 4, 5) and one of "q" (2, 3).
        let (p1, p2, q): (Arc<str>, Arc<str>, Arc<str>) =
            (Arc::from("p"), Arc::from("p"), Arc::from("q"));
        for (row, path) in [&p1, &p1, &q, &q, &p2, &p2].into_iter().enumerate() {
            i.keys[row].partition_path = path.clone();
        }
        let grouped = rows_by_partition(
            &i,
            vec![5, 0, 1, 2, 3, 4]
                .into_iter()
                .filter(|&r| r != 3)
                .collect(),
        )
        .unwrap();
        let got: Vec<(&str, Vec<usize>)> = grouped.into_iter().collect();
        assert_eq!(got, vec![("p", vec![0, 1, 4, 5]), ("q", vec![2])]);
        let err = rows_by_partition(&i, vec![9]).unwrap_err();
        assert!(err.to_string().contains('9'), "{err}");
    }
}
