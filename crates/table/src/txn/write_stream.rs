//! The streamed bulk insert ([`crate::Table::write_stream`]): batches are validated and keyed
//! as they arrive; their rows go to their partition's lane of new file groups, encoded on a
//! pool of `WriteOptions::parallelism` threads and stored (create-if-absent) as each file
//! closes at `WriteOptions::max_file_size` (`stream_files.rs`, `stream_pool.rs`). Memory is
//! bounded by `WriteOptions::stream_memory` (open files and files not yet stored) and the
//! batches in hand, not by the input.
//!
//! The instant follows the same protocol as [`crate::Table::write`]: requested before the first
//! file, every partition marker before its first data file, inflight once every file is
//! stored, then [`crate::Table::commit`]. On any error (a bad batch, the stream's own, storage)
//! the instant is rolled back, its files deleted: the table reads as before.

use std::collections::BTreeSet;
use std::fmt::Display;

use arbor_format::base::BaseFileWriter;
use arbor_timeline::avro::{encode_instant_for, InstantContent};
use arbor_timeline::{ActiveTimeline, Instant, InstantTime, State};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::context::{invalid, Table};
use super::prepared::{abort_started, begin_instant, delete_own_files, PreparedWrite};
use super::stream_files::OpenFiles;
use super::stream_pool::FileSpec;
use super::write::{action_for, validate_with_schema, Validated};
use crate::error::{Result, TableError};
use crate::keygen::KeyGenerator;
use crate::write::commit::{self, Heartbeat};
use crate::write::cow::WrittenGroup;
use crate::write::options::{CommitResult, WriteOperation};
use crate::write::planner::Input;
use crate::write::record_index::has_record_index;
use crate::write::schema::{DataSchema, SchemaChange};
use crate::write::secondary_index;
use crate::write::stored_keys::StoredKeys;

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
    let outcome = stream_files(
        table,
        &requested.requested_time,
        validated,
        (batch_number, &mut input),
    )
    .await;
    let prepared = match outcome {
        Ok((schema, changes, written)) => {
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

/// An error of the input stream itself, naming the batch it came at.
pub(super) fn stream_error(batch: usize, e: impl Display) -> TableError {
    TableError::InvalidInput {
        column: None,
        row: None,
        reason: format!("reading input batch {batch}: {e}"),
    }
}

/// Writes every row of `first` and of the rest of the stream into base files, stored as
/// they close ([`OpenFiles`]). Returns the schema the write records, its changes and the
/// stored files; on an error, only once every store it started has ended.
async fn stream_files<S, E>(
    table: &Table,
    instant: &InstantTime,
    first: Validated,
    (mut batch_number, input): (usize, &mut S),
) -> Result<(DataSchema, Vec<SchemaChange>, Vec<WrittenGroup>)>
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
    let spec = FileSpec {
        instant: instant.to_string(),
        avro_with_meta: BaseFileWriter::avro_schema_with_meta_fields(&schema.avro_json)?,
        meta_values: matches!(StoredKeys::for_table(&ctx.config)?, StoredKeys::Meta),
        record_key_column: KeyGenerator::from_table_config(&ctx.config)?
            .record_key_column(&schema.arrow)
            .and_then(|name| schema.arrow.index_of(name).ok()),
        schema: schema.arrow.clone(),
        base_format: crate::write::base_format::of_table(&ctx.config)?,
        max_file_size: ctx.options.max_file_size,
        row_group_memory: std::sync::atomic::AtomicU64::new(ctx.options.stream_memory / 2),
    };
    let mut files = OpenFiles::new(table, schema, spec);
    let mut next = Some(first_input);
    let outcome = async {
        while let Some(batch_input) = next.take() {
            files.add(batch_input).await?;
            batch_number += 1;
            next = next_input(table, files.schema(), (&mut batch_number, &mut *input)).await?;
        }
        Ok::<_, TableError>(())
    }
    .await;
    match outcome {
        Ok(()) => {
            let schema = files.schema().clone();
            let written = files.finish().await?;
            Ok((schema, changes, written))
        }
        Err(e) => {
            files.abandon().await;
            Err(e)
        }
    }
}

/// The next non-empty batch of the stream, validated against the write's schema (`None` at
/// its end).
async fn next_input<S, E>(
    table: &Table,
    schema: &DataSchema,
    (batch_number, input): (&mut usize, &mut S),
) -> Result<Option<Input>>
where
    S: Stream<Item = std::result::Result<RecordBatch, E>> + Unpin,
    E: Display,
{
    while let Some(item) = input.next().await {
        let batch = item.map_err(|e| stream_error(*batch_number, e))?;
        if batch.num_rows() == 0 {
            *batch_number += 1;
            continue;
        }
        let v = validate_with_schema(table, WriteOperation::BulkInsert, &[batch])
            .map_err(|e| in_batch(*batch_number, e))?;
        if v.schema.arrow != schema.arrow {
            return Err(invalid(
                None,
                format!(
                    "input batch {batch_number} has another schema than the first: a \
                     streamed write records one schema"
                ),
            ));
        }
        return Ok(Some(v.input));
    }
    Ok(None)
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
