//! Writing base files: a new file group's first base file, or a copy-on-write rewrite of an
//! existing group (old rows merged with the changes), in three steps so that encoding can run
//! on several threads: [`load_current`] (async reads), [`encode_base_file`] (CPU only: row
//! selection by `take`/`interleave` kernels, meta columns, parquet encoding) and
//! [`store_base_file`] (create-if-absent).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arbor_format::base::{read_base_file, BaseFileWriter, EncodedBaseFile};
use arbor_format::log::conform_batch;
use arbor_format::meta;
use arbor_fsview::slice::join;
use arbor_storage::Storage;
use arbor_timeline::avro::HoodieWriteStat;
use arrow::array::{
    Array, ArrayRef, AsArray, RecordBatch, StringArray, StringBuilder, UInt64Array,
};
use arrow::compute::{concat_batches, interleave_record_batch, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::planner::{GroupPlan, Input};
use super::schema::DataSchema;
use super::stored_keys::StoredKeys;
use crate::error::{Result, TableError};
use crate::read::{newer_wins, MergeMode, OrderKey, TableReader};

/// What every file writer of one instant shares.
#[derive(Debug, Clone)]
pub struct FileWriteContext {
    /// The storage.
    pub storage: Arc<dyn Storage>,
    /// The instant writing the files.
    pub instant: String,
    /// The table's data schema.
    pub schema: DataSchema,
    /// The Avro schema with the five meta fields first.
    pub avro_with_meta: String,
    /// The merge mode deciding whether an update replaces a record (event time compares the
    /// ordering field).
    pub mode: MergeMode,
    /// The ordering field.
    pub ordering_field: Option<String>,
    /// Where the keys of stored rows come from (the meta column, or the key generator for a
    /// table without meta fields, whose files are then written with null meta values).
    pub stored_keys: StoredKeys,
    /// The reader merging an existing merge-on-read slice that has log files, when
    /// [`encode_base_file`] rewrites it (see [`super::repeated_keys`]); `None` where every
    /// rewritten slice is a base file alone (copy-on-write).
    pub slice_reader: Option<Arc<TableReader>>,
    /// The index (in the data schema) of the `Utf8` column whose value is each row's record
    /// key ([`crate::keygen::KeyGenerator::record_key_column`]): a new group's keys are then
    /// that column of its rows, not a copy of the computed keys.
    pub record_key_column: Option<usize>,
    /// The stage and attempt in the files' write tokens ([`write_token`]).
    pub stage: (u64, u64),
    /// The format new base files are written in (the table's).
    pub base_format: arbor_format::base::BaseFormat,
}

/// One written file and its write stat, with the record counts of the group.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenGroup {
    /// The partition path.
    pub partition: String,
    /// The write stat (spec 3.3).
    pub stat: HoodieWriteStat,
    /// Records inserted.
    pub inserted: u64,
    /// Records updated.
    pub updated: u64,
    /// Records deleted.
    pub deleted: u64,
    /// Incoming records dropped because the stored record of their key wins under event-time
    /// ordering (copy-on-write; the stored record is rewritten unchanged); counted neither as
    /// inserted nor as updated.
    pub kept: u64,
}

/// The write token of the `task`-th file of an instant (Hudi's
/// `<partitionId>-<stageId>-<attemptId>`), written by stage `stage` in attempt `attempt`:
/// `(0, 0)` for a write in one process; a fragment of a distributed write
/// ([`crate::Table::write_fragment`]) has its task number as the stage and a random attempt,
/// so that files two fragments, or two attempts of one, append to a file group never share a
/// name.
pub fn write_token((stage, attempt): (u64, u64), task: u64) -> String {
    format!("{task}-{stage}-{}", attempt.wrapping_add(task))
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn arrow_err(context: &str, e: impl std::fmt::Display) -> TableError {
    TableError::Unsupported {
        reason: format!("{context}: {e}"),
    }
}

/// The string values of a column (nulls as `None`).
pub(crate) fn strings(col: &ArrayRef, what: &str) -> Result<Vec<Option<String>>> {
    let col = arrow::compute::cast(col, &DataType::Utf8).map_err(|e| arrow_err(what, e))?;
    let s = col.as_string::<i32>();
    Ok((0..s.len())
        .map(|i| s.is_valid(i).then(|| s.value(i).to_string()))
        .collect())
}

/// The file schema of a base file as read: meta columns then data columns.
pub(crate) fn full_schema(data: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Arc<Field>> = meta::META_COLUMNS
        .iter()
        .map(|n| Arc::new(Field::new(*n, DataType::Utf8, true)))
        .collect();
    fields.extend(data.fields().iter().cloned());
    Arc::new(Schema::new(fields))
}

/// The rows of `group`'s current slice (`None` for a new group) and the path naming them in
/// errors: the base file's rows, or the merged slice where it has log files.
async fn current_rows(
    ctx: &FileWriteContext,
    group: &GroupPlan,
) -> Result<Option<(String, Vec<RecordBatch>)>> {
    let Some(slice) = group.existing.as_ref() else {
        return Ok(None);
    };
    if slice.log_files.is_empty() {
        return Ok(match slice.base_file_path() {
            Some(path) => {
                let rows = read_base_file(ctx.storage.clone(), &path, slice.base_file_size(), None)
                    .await?;
                Some((path, rows))
            }
            None => None,
        });
    }
    let context = format!(
        "file slice {}/{} at {}",
        group.partition, group.file_id, slice.base_instant
    );
    let reader = ctx
        .slice_reader
        .as_ref()
        .ok_or_else(|| TableError::Unsupported {
            reason: format!("{context}: rewriting a slice with log files needs a reader"),
        })?;
    let merged = reader.read_slice(slice, None, false).await?;
    Ok(Some((context, merged.into_iter().collect())))
}

/// The rows of an existing group's current slice, shaped for a rewrite: data columns, the
/// stored commit times, sequence numbers and keys, and the instant of the slice.
#[derive(Debug)]
pub struct CurrentRows {
    data: RecordBatch,
    times: Vec<Option<String>>,
    seqnos: Vec<Option<String>>,
    keys: Vec<Option<String>>,
    prev_commit: String,
}

/// Loads the current rows of `group` (`None` for a new group): its base file, merged with
/// its log files where it has some (a merge-on-read group rewritten as a new base file).
/// Reads only; the first step of writing a base file ([`encode_base_file`] is the second).
pub async fn load_current(
    ctx: &FileWriteContext,
    group: &GroupPlan,
) -> Result<Option<CurrentRows>> {
    let Some((path, rows)) = current_rows(ctx, group).await? else {
        return Ok(None);
    };
    let data_schema = ctx.schema.arrow.clone();
    let full = full_schema(&data_schema);
    let mut batches = Vec::new();
    for b in rows {
        batches.push(conform_batch(&b, &full, &path)?);
    }
    let all = concat_batches(&full, &batches).map_err(|e| arrow_err(&path, e))?;
    let col = |name: &str| -> Result<Vec<Option<String>>> {
        let c = all
            .column_by_name(name)
            .ok_or_else(|| arrow_err(&path, format!("no column {name}")))?;
        strings(c, &path)
    };
    let times = col(meta::COMMIT_TIME)?;
    let seqnos = col(meta::COMMIT_SEQNO)?;
    let keys = ctx.stored_keys.keys(&all, &path)?;
    let data = conform_batch(&all, &data_schema, &path)?;
    let prev_commit = group
        .existing
        .as_ref()
        .map(|s| s.base_instant.to_string())
        .unwrap_or_else(|| "null".to_string());
    Ok(Some(CurrentRows {
        data,
        times,
        seqnos,
        keys,
        prev_commit,
    }))
}

/// A base file encoded in memory with its write stat's facts, not yet stored; the second of
/// the steps of writing a base file, made by [`encode_base_file`].
#[derive(Debug)]
pub struct EncodedGroup {
    key: String,
    partition: String,
    file_id: String,
    prev_commit: String,
    encoded: EncodedBaseFile,
    inserted: u64,
    updated: u64,
    deleted: u64,
    kept: u64,
}

impl EncodedGroup {
    /// A new file group `file_id` of `partition` holding only inserted rows, encoded at `key`.
    pub fn inserted(
        key: String,
        partition: String,
        file_id: String,
        encoded: EncodedBaseFile,
    ) -> Self {
        let inserted = encoded.num_rows;
        EncodedGroup {
            key,
            partition,
            file_id,
            prev_commit: "null".to_string(),
            encoded,
            inserted,
            updated: 0,
            deleted: 0,
            kept: 0,
        }
    }

    /// The storage key the base file will be stored at.
    pub fn key(&self) -> &str {
        &self.key
    }
}

/// The output rows of a group and their meta values, before encoding.
struct GroupRows {
    data: RecordBatch,
    record_keys: StringArray,
    /// Commit times and sequence numbers when some rows keep their stored ones; `None`: every
    /// row is new (the writer computes them).
    preserved: Option<(StringArray, StringArray)>,
    counts: (u64, u64, u64, u64),
}

/// The input rows `rows` in order: a zero-copy slice when they are consecutive, else one
/// `take` per column.
pub(crate) fn input_rows(input: &Input, rows: &[usize], key: &str) -> Result<RecordBatch> {
    let first = rows.first().copied().unwrap_or(0);
    let consecutive = rows.iter().enumerate().all(|(i, &r)| r == first + i);
    if consecutive && first + rows.len() <= input.batch.num_rows() {
        return Ok(input.batch.slice(first, rows.len()));
    }
    let indices = UInt64Array::from_iter_values(rows.iter().map(|&r| r as u64));
    take_record_batch(&input.batch, &indices).map_err(|e| arrow_err(key, e))
}

/// The record keys of input rows `rows`, whose data `data` holds (taken in that order):
/// column `key_column` of `data` when the keys are that string column's values (see
/// [`crate::keygen::KeyGenerator::record_key_column`]; validation refused null and empty
/// keys), else a copy of the computed keys ([`input_keys`]).
pub(crate) fn rows_record_keys(
    key_column: Option<usize>,
    data: &RecordBatch,
    input: &Input,
    rows: &[usize],
    key: &str,
) -> Result<StringArray> {
    let from_column = key_column
        .and_then(|i| data.columns().get(i))
        .and_then(|c| c.as_string_opt::<i32>())
        .filter(|c| c.null_count() == 0)
        .cloned();
    match from_column {
        Some(keys) => Ok(keys),
        None => input_keys(input, rows, key),
    }
}

/// The record keys of input rows `rows`, in one pre-sized string array.
pub(crate) fn input_keys(input: &Input, rows: &[usize], key: &str) -> Result<StringArray> {
    let mut bytes = 0usize;
    for &r in rows {
        let k = input
            .keys
            .get(r)
            .ok_or_else(|| arrow_err(key, format!("input row {r} has no key")))?;
        bytes += k.record_key.len();
    }
    let mut builder = StringBuilder::with_capacity(rows.len(), bytes);
    for &r in rows {
        if let Some(k) = input.keys.get(r) {
            builder.append_value(&k.record_key);
        }
    }
    Ok(builder.finish())
}

/// The rows of a new group receiving only inserts: the input rows, no merge. Their record
/// keys are the key column of those rows when the keys are a string column's values (the
/// key generator computed each from it, and validation refused null and empty ones).
fn new_group_rows(
    ctx: &FileWriteContext,
    input: &Input,
    group: &GroupPlan,
    key: &str,
) -> Result<GroupRows> {
    let data = input_rows(input, &group.inserts, key)?;
    let record_keys = rows_record_keys(ctx.record_key_column, &data, input, &group.inserts, key)?;
    Ok(GroupRows {
        data,
        record_keys,
        preserved: None,
        counts: (group.inserts.len() as u64, 0, 0, 0),
    })
}

/// The rows of an existing group merged with the group's changes (see [`encode_base_file`]).
fn merged_rows(
    ctx: &FileWriteContext,
    input: &Input,
    group: &GroupPlan,
    current: Option<&CurrentRows>,
    task: u64,
    key: &str,
) -> Result<GroupRows> {
    let empty = RecordBatch::new_empty(ctx.schema.arrow.clone());
    let (old_data, old_times, old_seqnos, old_keys): (&RecordBatch, &[_], &[_], &[_]) =
        match current {
            Some(c) => (&c.data, &c.times, &c.seqnos, &c.keys),
            None => (&empty, &[], &[], &[]),
        };
    let deletes: HashSet<&str> = group
        .deletes
        .iter()
        .filter_map(|&r| input.keys.get(r).map(|k| k.record_key.as_str()))
        .collect();
    let updates: HashMap<&str, usize> = group
        .updates
        .iter()
        .filter_map(|&r| input.keys.get(r).map(|k| (k.record_key.as_str(), r)))
        .collect();
    let ordering_old = ctx
        .ordering_field
        .as_ref()
        .and_then(|f| old_data.column_by_name(f).cloned());
    let ordering_new = ctx
        .ordering_field
        .as_ref()
        .and_then(|f| input.batch.column_by_name(f).cloned());

    let mut indices: Vec<(usize, usize)> = Vec::new();
    let mut times: Vec<String> = Vec::new();
    let mut seqnos: Vec<String> = Vec::new();
    let mut record_keys: Vec<String> = Vec::new();
    let (mut inserted, mut updated, mut deleted, mut kept) = (0u64, 0u64, 0u64, 0u64);
    let mut used_updates: HashSet<&str> = HashSet::new();
    let new_meta = |pos: usize, times: &mut Vec<String>, seqnos: &mut Vec<String>| {
        times.push(ctx.instant.clone());
        seqnos.push(format!("{}_{task}_{pos}", ctx.instant));
    };

    for (row, key) in old_keys.iter().enumerate() {
        let key_str = key.as_deref().unwrap_or_default();
        if key.is_some() && deletes.contains(key_str) {
            deleted += 1;
            continue;
        }
        if let Some(&new_row) = key.as_ref().and_then(|k| updates.get(k.as_str())) {
            used_updates.insert(key_str);
            let keep_old = ctx.mode == MergeMode::EventTime
                && match (&ordering_old, &ordering_new) {
                    (Some(o), Some(n)) => !newer_wins(
                        &OrderKey::from_column(o, row),
                        &OrderKey::from_column(n, new_row),
                    ),
                    _ => false,
                };
            // As Java's merge handle: an incoming record that loses to the stored one is
            // dropped and not counted as an update (the stored record is rewritten as it was).
            if keep_old {
                kept += 1;
            } else {
                updated += 1;
                let pos = indices.len();
                indices.push((1, new_row));
                new_meta(pos, &mut times, &mut seqnos);
                record_keys.push(key_str.to_string());
                continue;
            }
        }
        indices.push((0, row));
        times.push(old_times.get(row).cloned().flatten().unwrap_or_default());
        seqnos.push(old_seqnos.get(row).cloned().flatten().unwrap_or_default());
        record_keys.push(key_str.to_string());
    }
    // Updates whose key the file no longer holds, and inserts, are appended.
    let mut appended: Vec<usize> = group
        .updates
        .iter()
        .copied()
        .filter(|&r| {
            input
                .keys
                .get(r)
                .is_some_and(|k| !used_updates.contains(k.record_key.as_str()))
        })
        .collect();
    inserted += appended.len() as u64;
    appended.extend(group.inserts.iter().copied());
    inserted += group.inserts.len() as u64;
    for r in appended {
        let k = input
            .keys
            .get(r)
            .ok_or_else(|| arrow_err(key, format!("input row {r} has no key")))?;
        let pos = indices.len();
        indices.push((1, r));
        new_meta(pos, &mut times, &mut seqnos);
        record_keys.push(k.record_key.clone());
    }
    let data = interleave_record_batch(&[old_data, &input.batch], &indices)
        .map_err(|e| arrow_err(key, e))?;
    Ok(GroupRows {
        data,
        record_keys: StringArray::from_iter_values(record_keys),
        preserved: Some((
            StringArray::from_iter_values(times),
            StringArray::from_iter_values(seqnos),
        )),
        counts: (inserted, updated, deleted, kept),
    })
}

/// The file name of `group`'s base file written as task `task`.
fn base_file_name(ctx: &FileWriteContext, group: &GroupPlan, task: u64) -> String {
    format!(
        "{}_{}_{}.{}",
        group.file_id,
        write_token(ctx.stage, task),
        ctx.instant,
        ctx.base_format.extension()
    )
}

/// Builds and encodes the base file of `group` as task `task` in memory: for an existing
/// group its current rows (`current`, from [`load_current`]) merged with the group's changes
/// (deleted keys dropped; updated keys replaced unless event-time ordering keeps the stored
/// record, see [`newer_wins`], counted in [`WrittenGroup::kept`] and not as updated;
/// untouched rows keep their commit time and sequence number), then the inserts; a new group
/// receiving only inserts is its input rows (one `take`, or a slice when they are
/// consecutive). CPU only, no I/O: safe to run on any thread, and the same inputs always give
/// the same bytes. [`store_base_file`] creates the file.
pub fn encode_base_file(
    ctx: &FileWriteContext,
    input: &Input,
    group: &GroupPlan,
    current: Option<&CurrentRows>,
    task: u64,
) -> Result<EncodedGroup> {
    let file_name = base_file_name(ctx, group, task);
    let key = join(&group.partition, &file_name);
    let rows = if current.is_none() && group.updates.is_empty() && group.deletes.is_empty() {
        new_group_rows(ctx, input, group, &key)?
    } else {
        merged_rows(ctx, input, group, current, task, &key)?
    };
    let mut writer = BaseFileWriter::new(
        ctx.instant.clone(),
        file_name,
        group.partition.clone(),
        ctx.avro_with_meta.clone(),
    )
    .task_partition_id(task)
    .populate_meta_fields(matches!(ctx.stored_keys, StoredKeys::Meta));
    if let Some((times, seqnos)) = rows.preserved {
        writer = writer.preserve_commit_metadata_arrays(times, seqnos);
    }
    let encoded = writer.encode_keyed(&key, &[rows.data], &rows.record_keys)?;
    let (inserted, updated, deleted, kept) = rows.counts;
    Ok(EncodedGroup {
        key,
        partition: group.partition.clone(),
        file_id: group.file_id.clone(),
        prev_commit: current.map_or_else(|| "null".to_string(), |c| c.prev_commit.clone()),
        encoded,
        inserted,
        updated,
        deleted,
        kept,
    })
}

/// Stores an encoded base file with create-if-absent and returns its write stat; the last
/// step of writing a base file.
pub async fn store_base_file(storage: &dyn Storage, group: EncodedGroup) -> Result<WrittenGroup> {
    let written = group.encoded.store(storage, &group.key).await?;
    let size = to_i64(written.size);
    let stat = HoodieWriteStat {
        file_id: Some(group.file_id),
        path: Some(group.key),
        prev_commit: Some(group.prev_commit),
        num_writes: Some(to_i64(written.num_rows)),
        num_deletes: Some(to_i64(group.deleted)),
        num_update_writes: Some(to_i64(group.updated)),
        num_inserts: Some(to_i64(group.inserted)),
        total_write_bytes: Some(size),
        total_write_errors: Some(0),
        partition_path: Some(group.partition.clone()),
        file_size_in_bytes: Some(size),
        ..HoodieWriteStat::default()
    };
    Ok(WrittenGroup {
        partition: group.partition,
        stat,
        inserted: group.inserted,
        updated: group.updated,
        deleted: group.deleted,
        kept: group.kept,
    })
}
