//! Reading one planned file slice as a stream of batches (several slices are read at once by
//! `parallel`).
//!
//! A slice whose rows need no merge (no log file, or a read-optimized query) streams its base
//! file's batches straight from the parquet decoder, reading only the columns needed; a slice
//! with log files is merged whole (base rows and log blocks, restricted to the columns the
//! output and the merge need) and comes out batch by batch in base order (one output batch per
//! base batch, then the new records). Memory is bounded by one merged slice.
//!
//! When the record key field holds the record keys themselves ([`plain_key_field`]), a base
//! file's key is read once: `_hoodie_record_key` is that field's column, and the merge keeps it
//! as it is in a base batch that loses no row.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_format::base::{check_base_file_format, BaseFileReader};
use arbor_format::log::{
    conform_batch, decode_data_block, decode_delete_block, read_log_bytes, BlockType,
    CommandBlockType, ReadMode,
};
use arbor_format::meta;
use arbor_fsview::{FileSlice, FileSystemView};
use arbor_storage::Storage;
use arbor_timeline::InstantTime;
use arrow::array::{AsArray, BooleanArray};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use futures::stream::{self, BoxStream};
use futures::{StreamExt, TryStreamExt};

use super::merge::{merge_slice, merge_slice_batches, LogPart, MergeMode};
use super::schema_history::{RenamedColumns, VersionNames};
use crate::error::{Result, TableError};

/// Everything needed to read slices of one table, cheap to clone into a `'static` stream.
#[derive(Debug, Clone)]
pub(crate) struct SliceReader {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) view: Arc<FileSystemView>,
    /// The full read schema.
    pub(crate) schema: SchemaRef,
    pub(crate) mode: Option<MergeMode>,
    pub(crate) ordering_field: Option<String>,
    /// Columns renamed under schema on read ([`super::schema_history`]): each file's columns
    /// take their latest names by the schema version of the file's instant.
    pub(crate) renamed: Option<Arc<RenamedColumns>>,
    /// Why rows of this table cannot be read correctly (fields renamed inside lists or maps):
    /// every slice read fails with it.
    pub(crate) refusal: Option<Arc<str>>,
    /// The record key field whose values are the record keys themselves (see
    /// [`plain_key_field`]): base files are read without `_hoodie_record_key`, whose column is
    /// then this field's column, shared.
    pub(crate) key_field: Option<Arc<str>>,
}

/// The record key field of a table whose `_hoodie_record_key` holds exactly that field's
/// string values: meta fields populated, a SIMPLE (or TIMESTAMP, or one-field NON_PARTITION)
/// key generator and a top-level string field. Java writes such a key as the value itself
/// and refuses a null or empty one, so reading the field once serves both columns.
pub(crate) fn plain_key_field(
    config: &arbor_timeline::TableConfig,
    schema: &SchemaRef,
) -> Option<Arc<str>> {
    if !config.populate_meta_fields() || schema.index_of(meta::RECORD_KEY).is_err() {
        return None;
    }
    let generator = crate::keygen::KeyGenerator::from_table_config(config).ok()?;
    generator.record_key_column(schema).map(Arc::from)
}

/// `batch` with its `_hoodie_record_key` column replaced by (or, absent, added as) the column
/// `field` when that is a string column; `batch` as it is otherwise.
fn key_from_field(batch: RecordBatch, field: &str) -> Result<RecordBatch> {
    let Some(values) = batch
        .column_by_name(field)
        .filter(|c| c.data_type() == &DataType::Utf8)
        .cloned()
    else {
        return Ok(batch);
    };
    let schema = batch.schema();
    let mut fields: Vec<arrow::datatypes::FieldRef> = schema.fields().iter().cloned().collect();
    let mut columns = batch.columns().to_vec();
    let key = Arc::new(arrow::datatypes::Field::new(
        meta::RECORD_KEY,
        DataType::Utf8,
        true,
    ));
    match schema.index_of(meta::RECORD_KEY) {
        Ok(i) => {
            if let (Some(f), Some(c)) = (fields.get_mut(i), columns.get_mut(i)) {
                *f = key;
                *c = values;
            }
        }
        Err(_) => {
            fields.push(key);
            columns.push(values);
        }
    }
    let options =
        arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(
        Arc::new(arrow::datatypes::Schema::new(fields)),
        columns,
        &options,
    )
    .map_err(|e| TableError::Unsupported {
        reason: format!("sharing the record key column {field}: {e}"),
    })
}

/// How every slice of one query is read and shaped.
#[derive(Debug)]
pub(crate) struct SlicePlan {
    pub(crate) as_of: Option<InstantTime>,
    pub(crate) base_only: bool,
    /// The columns read and merged (a subset of the read schema, in its order).
    pub(crate) work: SchemaRef,
    /// Indices into `work` of the output columns, in output order.
    pub(crate) projection: Vec<usize>,
    /// Incremental queries: the requested times whose records are kept.
    pub(crate) admitted: Option<BTreeSet<String>>,
    pub(crate) batch_size: usize,
    /// How many slices are read at once.
    pub(crate) parallelism: usize,
    /// Partition filters applied to the rows (before the projection); `None` without filters.
    pub(crate) row_filter: Option<super::filter::PartitionPruner>,
}

impl SlicePlan {
    /// Filters (incremental, partition filters on rows) and projects one batch read with the
    /// work schema.
    fn shape(&self, batch: RecordBatch, context: &str) -> Result<RecordBatch> {
        let batch = match &self.admitted {
            Some(admitted) => keep_admitted(&batch, admitted, context)?,
            None => batch,
        };
        let batch = match &self.row_filter {
            Some(f) => f.filter_rows(batch)?,
            None => batch,
        };
        batch
            .project(&self.projection)
            .map_err(|e| TableError::Unsupported {
                reason: format!("projecting {context}: {e}"),
            })
    }
}

fn keep_admitted(
    batch: &RecordBatch,
    admitted: &BTreeSet<String>,
    context: &str,
) -> Result<RecordBatch> {
    let Some(col) = batch.column_by_name(meta::COMMIT_TIME) else {
        return Err(TableError::Unsupported {
            reason: "incremental queries need the _hoodie_commit_time column".into(),
        });
    };
    let err = |e: arrow::error::ArrowError| TableError::Unsupported {
        reason: format!("incremental filter of {context}: {e}"),
    };
    let col = arrow::compute::cast(col, &DataType::Utf8).map_err(err)?;
    let keep: BooleanArray = col
        .as_string::<i32>()
        .iter()
        .map(|v| Some(v.is_some_and(|t| admitted.contains(t))))
        .collect();
    arrow::compute::filter_record_batch(batch, &keep).map_err(err)
}

/// The columns of `work` that the file has (the others are filled with nulls by
/// `conform_batch`), by the names of the file's schema version when columns were renamed.
fn file_columns(
    work: &SchemaRef,
    file_schema: &SchemaRef,
    names: Option<&VersionNames>,
) -> Vec<String> {
    if let Some(names) = names {
        return names.file_columns(work, file_schema);
    }
    work.fields()
        .iter()
        .map(|f| f.name().clone())
        .filter(|n| file_schema.index_of(n).is_ok())
        .collect()
}

/// `columns` without `_hoodie_record_key` when the key is read as the field `shared`.
fn without_key(mut columns: Vec<String>, shared: Option<&str>) -> Vec<String> {
    if shared.is_some() {
        columns.retain(|c| c != meta::RECORD_KEY);
    }
    columns
}

/// A batch read from a file, with the latest names when columns were renamed, conformed to
/// `work`.
fn conform(
    batch: &RecordBatch,
    work: &SchemaRef,
    path: &str,
    names: Option<&VersionNames>,
) -> Result<RecordBatch> {
    match names {
        Some(names) => Ok(conform_batch(&names.to_latest(batch, path)?, work, path)?),
        None => Ok(conform_batch(batch, work, path)?),
    }
}

fn slice_context(slice: &FileSlice) -> String {
    format!(
        "file group {} in partition {:?}",
        slice.file_id, slice.partition
    )
}

impl SliceReader {
    /// Reads and merges one slice with the columns of `work` (a subset of the read schema that
    /// holds the columns the merge needs).
    pub(crate) async fn read_slice(
        &self,
        slice: &FileSlice,
        as_of: Option<&InstantTime>,
        base_only: bool,
        work: &SchemaRef,
    ) -> Result<Option<RecordBatch>> {
        let (base, parts) = self.load_slice(slice, as_of, base_only, work).await?;
        let context = slice_context(slice);
        let (mode, ordering) = self.merge_mode(&parts, &context)?;
        merge_slice(work, mode, ordering, base, parts, &context)
    }

    /// [`SliceReader::read_slice`] as the batches of [`merge_slice_batches`] (the merged
    /// slice's rows in the same order, not copied into one batch).
    async fn read_slice_batches(
        &self,
        slice: &FileSlice,
        as_of: Option<&InstantTime>,
        base_only: bool,
        work: &SchemaRef,
    ) -> Result<Vec<RecordBatch>> {
        let (base, parts) = self.load_slice(slice, as_of, base_only, work).await?;
        let context = slice_context(slice);
        let (mode, ordering) = self.merge_mode(&parts, &context)?;
        merge_slice_batches(work, mode, ordering, base, parts, &context)
    }

    /// How a slice with log parts `parts` is merged: commit-time without any (only soft
    /// deletes are dropped), else the table's mode; CUSTOM is refused.
    fn merge_mode(&self, parts: &[LogPart], context: &str) -> Result<(MergeMode, Option<&str>)> {
        if parts.is_empty() {
            return Ok((MergeMode::CommitTime, None));
        }
        let mode = self.mode.ok_or_else(|| TableError::Unsupported {
            reason: format!(
                "{context} has log files, and merge mode CUSTOM is not supported by arbor"
            ),
        })?;
        Ok((mode, self.ordering_field.as_deref()))
    }

    /// The base rows of a slice (the columns of `work`) and its committed log parts in order.
    async fn load_slice(
        &self,
        slice: &FileSlice,
        as_of: Option<&InstantTime>,
        base_only: bool,
        work: &SchemaRef,
    ) -> Result<(Vec<RecordBatch>, Vec<LogPart>)> {
        if let Some(reason) = &self.refusal {
            return Err(TableError::Unsupported {
                reason: reason.to_string(),
            });
        }
        let mut base = Vec::new();
        if let (Some(path), Some(file)) = (slice.base_file_path(), slice.base_file.as_ref()) {
            check_base_file_format(&path)?;
            let names = self.names_at(file.instant_time.as_str());
            // The size from the listing saves a `head` per file.
            let reader = if file.size > 0 {
                BaseFileReader::open_with_size(self.storage.clone(), &path, file.size).await?
            } else {
                BaseFileReader::open(self.storage.clone(), &path).await?
            };
            let shared = self.shared_key(work, &reader.schema(), names);
            let projection = (shared.is_some()
                || names.is_some()
                || work.fields().len() != self.schema.fields().len())
            .then(|| without_key(file_columns(work, &reader.schema(), names), shared));
            let options = arbor_format::base::ReadOptions {
                projection,
                ..arbor_format::base::ReadOptions::default()
            };
            let batches: Vec<RecordBatch> = reader.stream(&options)?.try_collect().await?;
            for b in batches {
                let b = match shared {
                    Some(field) => key_from_field(b, field)?,
                    None => b,
                };
                base.push(conform(&b, work, &path, names)?);
            }
        }
        let parts = if base_only {
            Vec::new()
        } else {
            self.log_parts(slice, as_of, work).await?
        };
        Ok((base, parts.into_iter().map(|(_, p)| p).collect()))
    }

    /// A slice's log files merged without its base file (a log compaction's input): the
    /// merged rows of every key the log holds that is not deleted, every delete record in log
    /// order, and the instants of the blocks read. `None` rows when no record survives.
    pub(crate) async fn merge_log_only(
        &self,
        slice: &FileSlice,
    ) -> Result<(
        Option<RecordBatch>,
        Vec<arbor_format::log::DeleteRecord>,
        Vec<String>,
    )> {
        if let Some(reason) = &self.refusal {
            return Err(TableError::Unsupported {
                reason: reason.to_string(),
            });
        }
        let parts = self.log_parts(slice, None, &self.schema).await?;
        let mut instants: Vec<String> = parts.iter().map(|(t, _)| t.clone()).collect();
        instants.dedup();
        let deletes = parts
            .iter()
            .flat_map(|(_, p)| match p {
                LogPart::Deletes(d) => d.clone(),
                LogPart::Rows(_) => Vec::new(),
            })
            .collect();
        let context = slice_context(slice);
        let mode = self.mode.ok_or_else(|| TableError::Unsupported {
            reason: format!(
                "{context} has log files, and merge mode CUSTOM is not supported by arbor"
            ),
        })?;
        let rows = merge_slice(
            &self.schema,
            mode,
            self.ordering_field.as_deref(),
            Vec::new(),
            parts.into_iter().map(|(_, p)| p).collect(),
            &context,
        )?;
        Ok((rows, deletes, instants))
    }

    /// The committed blocks of a slice's log files, in log order, with their instants (rolled
    /// back blocks removed).
    async fn log_parts(
        &self,
        slice: &FileSlice,
        as_of: Option<&InstantTime>,
        work: &SchemaRef,
    ) -> Result<Vec<(String, LogPart)>> {
        let mut parts: Vec<(String, LogPart)> = Vec::new();
        {
            for path in slice.log_file_paths() {
                let bytes = self.storage.get(&path).await?.0;
                let contents = read_log_bytes(&bytes, &path, ReadMode::Lenient)?;
                for block in contents.blocks {
                    // Blocks without a usable instant are skipped, as Java and hudi-rs do, but
                    // never silently.
                    let Some(instant) = block.instant_time().map(str::to_string) else {
                        tracing::warn!(file = %path, offset = block.offset, block_type = %block.block_type, "skipping a log block without an INSTANT_TIME header");
                        continue;
                    };
                    let time = match InstantTime::parse(&instant) {
                        Ok(time) => time,
                        Err(e) => {
                            tracing::warn!(file = %path, offset = block.offset, instant = %instant, error = %e, "skipping a log block whose INSTANT_TIME header does not parse");
                            continue;
                        }
                    };
                    if !self.view.is_committed(&time) || as_of.is_some_and(|a| &time > a) {
                        continue;
                    }
                    match block.block_type {
                        BlockType::AvroData | BlockType::ParquetData => {
                            match self.names_at(&instant) {
                                None => {
                                    let shared = self.shared_key(work, work, None);
                                    for b in decode_data_block(&block, &path, Some(work))? {
                                        let b = match shared {
                                            Some(field) => conform(
                                                &key_from_field(b, field)?,
                                                work,
                                                &path,
                                                None,
                                            )?,
                                            None => b,
                                        };
                                        parts.push((instant.clone(), LogPart::Rows(b)));
                                    }
                                }
                                Some(names) => {
                                    for b in decode_data_block(&block, &path, None)? {
                                        let b = conform(&b, work, &path, Some(names))?;
                                        parts.push((instant.clone(), LogPart::Rows(b)));
                                    }
                                }
                            }
                        }
                        BlockType::Delete => {
                            let d = decode_delete_block(&block, &path)?;
                            parts.push((instant, LogPart::Deletes(d)));
                        }
                        BlockType::Command
                            if block.command_type() == Some(CommandBlockType::Rollback) =>
                        {
                            if let Some(target) = block.rollback_target() {
                                parts.retain(|(t, _)| t != target);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(parts)
    }

    /// The plain record key field ([`plain_key_field`]) when `work` holds both it and
    /// `_hoodie_record_key`, the file (of schema `file_schema`) has it as a string column and
    /// no column was renamed: the file's key column is then read once, as that field.
    fn shared_key(
        &self,
        work: &SchemaRef,
        file_schema: &SchemaRef,
        names: Option<&VersionNames>,
    ) -> Option<&str> {
        let field = self.key_field.as_deref()?;
        let in_file = file_schema
            .field_with_name(field)
            .is_ok_and(|f| f.data_type() == &DataType::Utf8);
        let both = work.index_of(meta::RECORD_KEY).is_ok() && work.index_of(field).is_ok();
        (names.is_none() && self.renamed.is_none() && in_file && both).then_some(field)
    }

    /// The names of the schema version a file or block written at `instant` has, when
    /// columns were renamed.
    fn names_at(&self, instant: &str) -> Option<&VersionNames> {
        self.renamed
            .as_ref()
            .and_then(|r| r.at(instant))
            .map(|n| n.as_ref())
    }

    /// The output batches of one slice, lazily: nothing is read until the stream is polled.
    pub(crate) fn slice_stream(
        self,
        slice: FileSlice,
        plan: Arc<SlicePlan>,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        let streams_base =
            slice.base_file.is_some() && (plan.base_only || slice.log_files.is_empty());
        if streams_base {
            return stream::once(self.base_stream(slice, plan))
                .try_flatten()
                .boxed();
        }
        stream::once(async move {
            let context = slice_context(&slice);
            let merged = self
                .read_slice_batches(&slice, plan.as_of.as_ref(), plan.base_only, &plan.work)
                .await?;
            let mut out = Vec::new();
            for batch in merged {
                let shaped = plan.shape(batch, &context)?;
                let rows = shaped.num_rows();
                let mut offset = 0;
                while offset < rows {
                    let len = plan.batch_size.min(rows - offset);
                    out.push(shaped.slice(offset, len));
                    offset += len;
                }
            }
            Ok::<_, TableError>(out)
        })
        .map_ok(|batches| stream::iter(batches.into_iter().map(Ok)))
        .try_flatten()
        .boxed()
    }

    /// Streams the base file of a slice that needs no merge, with the work columns pushed
    /// down to the parquet reader.
    async fn base_stream(
        self,
        slice: FileSlice,
        plan: Arc<SlicePlan>,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let (Some(path), Some(base)) = (slice.base_file_path(), slice.base_file.as_ref()) else {
            return Ok(stream::empty().boxed());
        };
        check_base_file_format(&path)?;
        let names = self
            .renamed
            .as_ref()
            .and_then(|r| r.at(base.instant_time.as_str()))
            .cloned();
        let reader = BaseFileReader::open_with_size(self.storage.clone(), &path, base.size).await?;
        let shared = self
            .shared_key(&plan.work, &reader.schema(), names.as_deref())
            .map(str::to_string);
        let options = arbor_format::base::ReadOptions {
            projection: Some(without_key(
                file_columns(&plan.work, &reader.schema(), names.as_deref()),
                shared.as_deref(),
            )),
            batch_size: plan.batch_size,
        };
        let context = slice_context(&slice);
        let batches = reader.stream(&options)?;
        Ok(batches
            .map(move |b| -> Result<Option<RecordBatch>> {
                let b = match &shared {
                    Some(field) => key_from_field(b?, field)?,
                    None => b?,
                };
                let b = conform(&b, &plan.work, &path, names.as_deref())?;
                // Without log parts the merge only drops soft-deleted rows.
                let Some(b) = merge_slice(
                    &plan.work,
                    MergeMode::CommitTime,
                    None,
                    vec![b],
                    Vec::new(),
                    &context,
                )?
                else {
                    return Ok(None);
                };
                let b = plan.shape(b, &context)?;
                Ok((b.num_rows() > 0).then_some(b))
            })
            .try_filter_map(|b| async move { Ok(b) })
            .boxed())
    }
}
