//! The streamed bulk insert ([`crate::Table::write_stream`]): batches are validated, keyed and
//! encoded as they arrive, each partition's rows going into an open base file that is stored
//! (create-if-absent) once it reaches `WriteOptions::max_file_size`, when a new file group
//! opens. Memory is bounded by the open files (one per partition the input touches, at most
//! `max_file_size` of encoded rows each) and the batch in hand, not by the input.
//!
//! The instant follows the same protocol as [`crate::Table::write`]: requested before the first
//! file, every partition marker before its first data file, inflight once every file is
//! stored, then [`crate::Table::commit`]. On any error (a bad batch, the stream's own, storage)
//! the instant is rolled back, its files deleted: the table reads as before.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

use arbor_format::base::{BaseFileStream, BaseFileWriter};
use arbor_timeline::avro::{encode_instant_for, InstantContent};
use arbor_timeline::{ActiveTimeline, Instant, InstantTime, State};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::context::{invalid, Table};
use super::prepared::{abort_started, begin_instant, delete_own_files, PreparedWrite};
use super::write::{action_for, validate_with_schema, Validated};
use crate::error::{Result, TableError};
use crate::keygen::KeyGenerator;
use crate::write::commit::{self, Heartbeat};
use crate::write::cow::{
    input_rows, rows_record_keys, store_base_file, write_token, EncodedGroup, WrittenGroup,
};
use crate::write::options::{CommitResult, WriteOperation};
use crate::write::planner::{new_file_id, rows_by_partition, Input};
use crate::write::record_index::has_record_index;
use crate::write::schema::{DataSchema, SchemaChange};
use crate::write::secondary_index;
use crate::write::stored_keys::StoredKeys;

/// One open base file: a new file group of one partition.
struct OpenFile {
    file_id: String,
    key: String,
    stream: BaseFileStream,
}

/// What the files of a streamed write are written with.
struct FileSettings<'a> {
    table: &'a Table,
    instant: String,
    schema: DataSchema,
    avro_with_meta: String,
    meta_values: bool,
    record_key_column: Option<usize>,
    max_file_size: usize,
}

/// [`crate::Table::write_stream`].
pub(crate) async fn write_stream<S, E>(
    table: &Table,
    operation: WriteOperation,
    mut input: S,
) -> Result<CommitResult>
where
    S: Stream<Item = std::result::Result<RecordBatch, E>> + Unpin,
    E: Display,
{
    if let Some(reason) = refusal(table, operation).await? {
        return Err(TableError::Unsupported { reason });
    }
    // The first non-empty batch fixes the schema the write records; nothing is started
    // before it is valid.
    let mut batch_number = 0usize;
    let first = loop {
        match input.next().await {
            None => return Err(invalid(None, "the input has no rows")),
            Some(Err(e)) => return Err(stream_error(batch_number, e)),
            Some(Ok(b)) if b.num_rows() == 0 => batch_number += 1,
            Some(Ok(b)) => break b,
        }
    };
    let validated = validate_with_schema(table, operation, std::slice::from_ref(&first))?;
    let action = action_for(table, operation);
    let (mut tl, requested, heartbeat) =
        begin_instant(table, action, operation.operation_type()).await?;
    let mut written = Vec::new();
    let outcome = stream_files(
        table,
        &requested.requested_time,
        validated,
        (batch_number, &mut input),
        &mut written,
    )
    .await;
    let prepared = match outcome {
        Ok((schema, changes)) => {
            finish_prepare(
                table,
                operation,
                (&mut tl, &requested, heartbeat.clone()),
                &schema,
                changes,
                &written,
            )
            .await
        }
        Err(e) => Err(e),
    };
    match prepared {
        Ok(p) => table.commit(p).await,
        Err(e) => {
            abort_started(table, &tl, requested, action, &heartbeat).await;
            Err(e)
        }
    }
}

/// Why [`write_stream`] refuses `operation` on `table`, or `None` when it takes it.
pub(crate) async fn refusal(table: &Table, operation: WriteOperation) -> Result<Option<String>> {
    let ctx = &table.ctx;
    if operation != WriteOperation::BulkInsert {
        return Ok(Some(format!(
            "a streamed write takes bulk inserts, not {operation:?}: other operations look up \
             or deduplicate keys over the whole input (use Table::write)"
        )));
    }
    if !ctx.options.drop_columns.is_empty() {
        return Ok(Some(
            "a streamed write does not drop columns (WriteOptions::drop_columns): use \
             Table::write"
                .into(),
        ));
    }
    if has_record_index(&ctx.config)
        || !secondary_index::secondary_indexes(ctx.storage.as_ref(), &ctx.config)
            .await?
            .is_empty()
    {
        return Ok(Some(
            "a streamed write does not maintain the record index or secondary indexes yet \
             (they need every key of the input at the commit): use Table::write"
                .into(),
        ));
    }
    Ok(None)
}

fn stream_error(batch: usize, e: impl Display) -> TableError {
    TableError::InvalidInput {
        column: None,
        row: None,
        reason: format!("reading input batch {batch}: {e}"),
    }
}

/// Writes every row of `first` and of the rest of the stream into base files; stores each
/// file as it closes (appending its result to `written`). Returns the schema the write records
/// and its changes.
async fn stream_files<S, E>(
    table: &Table,
    instant: &InstantTime,
    first: Validated,
    (mut batch_number, input): (usize, &mut S),
    written: &mut Vec<WrittenGroup>,
) -> Result<(DataSchema, Vec<SchemaChange>)>
where
    S: Stream<Item = std::result::Result<RecordBatch, E>> + Unpin,
    E: Display,
{
    let ctx = &table.ctx;
    let Validated {
        input: first_input,
        schema,
        changes,
    } = first;
    let settings = FileSettings {
        table,
        instant: instant.to_string(),
        avro_with_meta: BaseFileWriter::avro_schema_with_meta_fields(&schema.avro_json)?,
        meta_values: matches!(StoredKeys::for_table(&ctx.config)?, StoredKeys::Meta),
        record_key_column: KeyGenerator::from_table_config(&ctx.config)?
            .record_key_column(&schema.arrow)
            .and_then(|name| schema.arrow.index_of(name).ok()),
        max_file_size: usize::try_from(ctx.options.max_file_size).unwrap_or(usize::MAX),
        schema,
    };
    let mut open: BTreeMap<String, OpenFile> = BTreeMap::new();
    let mut marked: BTreeSet<String> = BTreeSet::new();
    let mut next = Some(first_input);
    while let Some(batch_input) = next.take() {
        for (partition, rows) in
            rows_by_partition(&batch_input, (0..batch_input.keys.len()).collect())?
        {
            append_rows(
                &settings,
                &mut open,
                &mut marked,
                partition,
                &batch_input,
                &rows,
                written,
            )
            .await?;
        }
        drop(batch_input);
        batch_number += 1;
        while let Some(item) = input.next().await {
            let batch = item.map_err(|e| stream_error(batch_number, e))?;
            if batch.num_rows() == 0 {
                batch_number += 1;
                continue;
            }
            let v = validate_with_schema(table, WriteOperation::BulkInsert, &[batch])
                .map_err(|e| in_batch(batch_number, e))?;
            if v.schema.arrow != settings.schema.arrow {
                return Err(invalid(
                    None,
                    format!(
                        "input batch {batch_number} has another schema than the first: a \
                         streamed write records one schema"
                    ),
                ));
            }
            next = Some(v.input);
            break;
        }
    }
    for (_, file) in std::mem::take(&mut open) {
        written.push(store(&settings, partition_of(&file.key), file).await?);
    }
    Ok((settings.schema, changes))
}

/// Names the input batch in a validation error.
fn in_batch(batch: usize, e: TableError) -> TableError {
    match e {
        TableError::InvalidInput {
            column,
            row,
            reason,
        } => TableError::InvalidInput {
            column,
            row,
            reason: format!("input batch {batch}: {reason}"),
        },
        other => other,
    }
}

/// The partition of a base file's storage key (`<partition>/<file>`, or `<file>`).
fn partition_of(key: &str) -> String {
    key.rsplit_once('/')
        .map_or_else(String::new, |(p, _)| p.to_string())
}

/// Appends input rows `rows` of `partition` to its open file (opening one, and its partition
/// marker, first); stores the file once it reaches the maximum size.
async fn append_rows(
    settings: &FileSettings<'_>,
    open: &mut BTreeMap<String, OpenFile>,
    marked: &mut BTreeSet<String>,
    partition: &str,
    input: &Input,
    rows: &[usize],
    written: &mut Vec<WrittenGroup>,
) -> Result<()> {
    let ctx = &settings.table.ctx;
    let key_hint = if partition.is_empty() {
        "<root>".to_string()
    } else {
        partition.to_string()
    };
    let data = input_rows(input, rows, &key_hint)?;
    let record_keys = rows_record_keys(settings.record_key_column, &data, input, rows, &key_hint)?;
    if !marked.contains(partition) {
        commit::ensure_partition_marker(&ctx.storage, partition, &settings.instant).await?;
        marked.insert(partition.to_string());
    }
    if !open.contains_key(partition) {
        let file = open_file(settings, partition, written.len() + open.len(), &data)?;
        open.insert(partition.to_string(), file);
    }
    let full = match open.get_mut(partition) {
        Some(file) => {
            file.stream.write(&data, &record_keys)?;
            file.stream.size_estimate() >= settings.max_file_size
        }
        None => false,
    };
    if full {
        if let Some(file) = open.remove(partition) {
            written.push(store(settings, partition.to_string(), file).await?);
        }
    }
    Ok(())
}

/// Opens a new file group of `partition` written as task `task`; `sample` (its first rows)
/// decides the columns written without a dictionary.
fn open_file(
    settings: &FileSettings<'_>,
    partition: &str,
    task: usize,
    sample: &RecordBatch,
) -> Result<OpenFile> {
    let file_id = new_file_id();
    let task = task as u64;
    let name = format!(
        "{file_id}_{}_{}.parquet",
        write_token((0, 0), task),
        settings.instant
    );
    let key = arbor_fsview::slice::join(partition, &name);
    let writer = BaseFileWriter::new(
        settings.instant.clone(),
        name,
        partition.to_string(),
        settings.avro_with_meta.clone(),
    )
    .task_partition_id(task)
    .populate_meta_fields(settings.meta_values);
    let stream = writer.open_stream(
        &key,
        settings.schema.arrow.clone(),
        std::slice::from_ref(sample),
    )?;
    Ok(OpenFile {
        file_id,
        key,
        stream,
    })
}

/// Finishes and stores `file` (create-if-absent).
async fn store(
    settings: &FileSettings<'_>,
    partition: String,
    file: OpenFile,
) -> Result<WrittenGroup> {
    let encoded = file.stream.finish()?;
    let group = EncodedGroup::inserted(file.key, partition, file.file_id, encoded);
    store_base_file(settings.table.ctx.storage.as_ref(), group).await
}

/// Moves the instant to inflight with the written files' stats and returns the write ready
/// for [`crate::Table::commit`].
async fn finish_prepare(
    table: &Table,
    operation: WriteOperation,
    (tl, requested, heartbeat): (&mut ActiveTimeline, &Instant, Heartbeat),
    schema: &DataSchema,
    schema_changes: Vec<SchemaChange>,
    written: &[WrittenGroup],
) -> Result<PreparedWrite> {
    let ctx = &table.ctx;
    let op_type = operation.operation_type();
    let metadata = commit::commit_metadata(op_type, &schema.avro_json, written);
    let inflight_instant = requested.with_state(State::Inflight);
    let inflight_bytes = encode_instant_for(
        &inflight_instant,
        &InstantContent::Commit(Box::new(metadata.clone())),
    )?;
    if let Err(e) = commit::check_still_requested(&ctx.storage, &ctx.layout, requested).await {
        let keys: Vec<String> = written.iter().filter_map(|w| w.stat.path.clone()).collect();
        delete_own_files(ctx, &requested.requested_time, &keys).await;
        let _ = commit::stop_heartbeat(&ctx.storage, &requested.requested_time).await;
        return Err(e);
    }
    // Written files are all new file groups: a conflict is only a concurrent replacement of
    // their partitions, which the commit checks against the writes completed since the start.
    let planned_against: BTreeSet<InstantTime> = tl
        .completed_writes()
        .into_iter()
        .filter(|i| i.requested_time != requested.requested_time)
        .map(|i| i.requested_time)
        .collect();
    let inflight = tl
        .transition_to_inflight(requested, Bytes::from(inflight_bytes))
        .await?;
    commit::beat(&ctx.storage, &requested.requested_time).await?;
    let touched = written
        .iter()
        .filter_map(|w| w.stat.file_id.clone().map(|f| (w.partition.clone(), f)))
        .collect();
    Ok(PreparedWrite {
        inflight,
        heartbeat,
        operation: op_type,
        metadata,
        replaced: None,
        planned_against,
        touched,
        inserted: written.iter().map(|w| w.inserted).sum(),
        updated: 0,
        deleted: 0,
        skipped_stale: 0,
        index_delta: None,
        secondary_deltas: None,
        schema_changes,
    })
}
