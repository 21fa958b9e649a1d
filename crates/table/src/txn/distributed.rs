//! A write split across processes ([`crate::Table::begin_write`]): the coordinator starts the
//! instant (requested, with its heartbeat renewed while the [`WriteTransaction`] lives);
//! fragment writers anywhere plan and write their rows under it
//! ([`crate::Table::write_fragment`]), marking every data file before storing it; the
//! coordinator combines the fragments ([`super::fragment::combine`]), deletes the marked files
//! no fragment names (attempts that died or were retried), moves the instant to inflight and
//! completes it through the commit point every write uses ([`super::prepared::commit`]).
//!
//! Failure: until the commit point the instant is pending and none of its files is visible. A
//! coordinator that fails calls [`abort`] (the instant is rolled back, its files deleted); one
//! that dies stops renewing the heartbeat and the next writer rolls the instant back. A fragment
//! writer checks before returning that the instant still waits for fragments (requested, not
//! yet inflight): otherwise it deletes its own files, which no commit names.

use std::collections::BTreeSet;

use arbor_storage::StorageExt;
use arbor_timeline::avro::{encode_instant_for, InstantContent};
use arbor_timeline::{Action, ActiveTimeline, Instant, InstantTime, State};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;

use super::context::{invalid, latest_written_schema, Table};
use super::fragment::{combine, Fragment, WriteContext};
use super::prepared::{abort_started, begin_instant, delete_own_files};
use super::write::{
    action_for, refuse_unwritable, validate_with_schema, write_input, RowRoles, Validated,
};
use crate::error::{Result, TableError};
use crate::write::commit::{self, Heartbeat};
use crate::write::markers::{delete_keys, marked_files};
use crate::write::options::{CommitResult, WriteOperation};
use crate::write::record_index::has_record_index;
use crate::write::schema::DataSchema;

/// A distributed write begun by its coordinator ([`crate::Table::begin_write`]): its instant is
/// requested and, while this value lives, its heartbeat is renewed in the background, so no
/// other writer rolls it back however long the fragments take. Send
/// [`WriteTransaction::context`] to the fragment writers; complete it with
/// [`crate::Table::commit_fragments`] or give it up with [`crate::Table::abort_write`].
/// Dropped without either, the instant stays pending and the next writer rolls it back once
/// the heartbeat lapses.
#[derive(Debug)]
pub struct WriteTransaction {
    context: WriteContext,
    requested: Instant,
    heartbeat: Heartbeat,
    planned_against: BTreeSet<InstantTime>,
    schema: DataSchema,
}

impl WriteTransaction {
    /// What fragment writers need ([`crate::Table::write_fragment`]).
    pub fn context(&self) -> &WriteContext {
        &self.context
    }

    /// The instant (requested time).
    pub fn instant(&self) -> &InstantTime {
        &self.requested.requested_time
    }
}

/// [`crate::Table::begin_write`].
pub(crate) async fn begin(table: &Table, operation: WriteOperation) -> Result<WriteTransaction> {
    let ctx = &table.ctx;
    refuse_unwritable(table, operation).await?;
    if !ctx.options.drop_columns.is_empty() {
        return Err(TableError::Unsupported {
            reason: "a distributed write does not drop columns (WriteOptions::drop_columns): \
                     use Table::write"
                .into(),
        });
    }
    let action = action_for(table, operation);
    let (tl, requested, heartbeat) =
        begin_instant(table, action, operation.operation_type()).await?;
    let schema = match latest_written_schema(&tl).await {
        Ok(s) => s.unwrap_or_else(|| ctx.schema.clone()),
        Err(e) => {
            abort_started(table, &tl, requested, action, &heartbeat).await;
            return Err(e);
        }
    };
    let planned_against = tl
        .completed_writes()
        .into_iter()
        .filter(|i| i.requested_time != requested.requested_time)
        .map(|i| i.requested_time)
        .collect();
    let context = WriteContext::new(
        &requested.requested_time,
        action,
        operation,
        ctx.root.data_meta_dir(),
    );
    Ok(WriteTransaction {
        context,
        requested,
        heartbeat,
        planned_against,
        schema,
    })
}

/// [`crate::Table::write_fragment`].
pub(crate) async fn write_fragment(
    table: &Table,
    context: &WriteContext,
    task: u64,
    batches: Vec<RecordBatch>,
) -> Result<Fragment> {
    write_fragment_packing(table, context, task, batches, false).await
}

/// [`write_fragment`], packing new keys into small existing file groups as [`crate::Table::write`]
/// does when `pack` is true: only for a fragment that alone writes every partition it touches.
pub(crate) async fn write_fragment_packing(
    table: &Table,
    context: &WriteContext,
    task: u64,
    batches: Vec<RecordBatch>,
    pack: bool,
) -> Result<Fragment> {
    let ctx = &table.ctx;
    let own = ctx.root.data_meta_dir();
    if context.root() != own {
        return Err(invalid(
            None,
            format!(
                "the write of instant {} belongs to the table root {}, this table handle is \
                 opened on {} ({}): open the same branch as the coordinator",
                context.instant(),
                context.root(),
                own,
                ctx.root
            ),
        ));
    }
    let operation = context.operation();
    let instant = context.instant_time()?;
    let requested = Instant::requested(instant.clone(), context.action()?);
    still_waiting(table, &requested).await?;
    let batches = if ctx.options.partial_updates && operation == WriteOperation::Upsert {
        crate::write::partial::fill_missing_columns(ctx, batches).await?
    } else {
        batches
    };
    // New keys go to new file groups: packing them into a small existing group could make two
    // fragments rewrite the same group (unless this fragment alone writes its partitions).
    let mut fragment_table = table.clone();
    if !pack {
        fragment_table.ctx.options.small_file_limit = 0;
    }
    let Validated {
        input,
        schema,
        changes,
    } = validate_with_schema(&fragment_table, operation, &batches)?;
    drop(batches);
    let tl = ActiveTimeline::load(ctx.storage.clone(), ctx.layout.clone()).await?;
    let written = write_input(
        &fragment_table,
        operation,
        (&input, &RowRoles::default()),
        (&schema, changes),
        &tl,
        (&instant, Some(task)),
    )
    .await?;
    if let Err(e) = still_waiting(table, &requested).await {
        // Committed or rolled back without this fragment: its files are nobody's.
        delete_own_files(ctx, &instant, &written.file_keys()).await;
        return Err(e);
    }
    let keys = matches!(operation, WriteOperation::Upsert | WriteOperation::Delete)
        .then_some((&input.keys[..], has_record_index(&ctx.config)));
    Ok(Fragment::new(&instant, task, written, keys))
}

/// Whether the write of `requested` still waits for fragments: requested, not yet inflight
/// (the coordinator moves it to inflight when it commits). Otherwise
/// [`TableError::InstantRolledBack`].
async fn still_waiting(table: &Table, requested: &Instant) -> Result<()> {
    let ctx = &table.ctx;
    commit::check_still_requested(&ctx.storage, &ctx.layout, requested).await?;
    let inflight = ctx
        .layout
        .instant_key(&requested.with_state(State::Inflight))?;
    if ctx.storage.exists(&inflight).await? {
        return Err(TableError::InstantRolledBack {
            instant: requested.requested_time.to_string(),
            reason: "the write is already being committed: a fragment written now would not \
                     be part of it"
                .into(),
        });
    }
    Ok(())
}

/// [`crate::Table::commit_fragments`].
pub(crate) async fn commit_fragments(
    table: &Table,
    transaction: WriteTransaction,
    fragments: Vec<Fragment>,
) -> Result<CommitResult> {
    let ctx = &table.ctx;
    let WriteTransaction {
        context,
        requested,
        heartbeat,
        planned_against,
        schema,
    } = transaction;
    let action = requested.action;
    let instant = requested.requested_time.to_string();
    let staged = async {
        let mut combined = combine(&context, &schema, fragments)?;
        combined.planned_against = combined
            .planned_against
            .intersection(&planned_against)
            .cloned()
            .collect();
        let named: BTreeSet<String> = combined.file_keys().into_iter().collect();
        let (marked, markers) = marked_files(ctx.storage.as_ref(), &instant).await?;
        let strays: Vec<String> = marked.difference(&named).cloned().collect();
        if !strays.is_empty() {
            tracing::info!(instant = %instant, files = strays.len(), "deleting files of fragment attempts no fragment names");
            delete_keys(ctx.storage.as_ref(), &strays).await?;
        }
        let mut tl = ActiveTimeline::load(ctx.storage.clone(), ctx.layout.clone()).await?;
        let bytes = encode_instant_for(
            &requested.with_state(State::Inflight),
            &InstantContent::Commit(Box::new(combined.profile.clone())),
        )?;
        commit::check_still_requested(&ctx.storage, &ctx.layout, &requested).await?;
        let inflight = tl
            .transition_to_inflight(&requested, Bytes::from(bytes))
            .await?;
        commit::beat(&ctx.storage, &requested.requested_time).await?;
        Ok::<_, TableError>((combined, inflight, markers))
    }
    .await;
    let (combined, inflight, markers) = match staged {
        Ok(s) => s,
        Err(e) => {
            abort_instant(table, requested, action, &heartbeat).await;
            return Err(e);
        }
    };
    let operation = context.operation().operation_type();
    let prepared = combined.into_prepared(inflight, heartbeat, operation);
    let result = table.commit(prepared).await;
    if result.is_ok() {
        // The markers served their purpose; a failure leaves them for the rollback.
        if let Err(e) = delete_keys(ctx.storage.as_ref(), &markers).await {
            tracing::warn!(instant = %instant, error = %e, "deleting the write's markers");
        }
    }
    result
}

/// [`crate::Table::abort_write`].
pub(crate) async fn abort(table: &Table, transaction: WriteTransaction) {
    let WriteTransaction {
        requested,
        heartbeat,
        ..
    } = transaction;
    let action = requested.action;
    abort_instant(table, requested, action, &heartbeat).await;
}

/// Rolls back the distributed write's instant (its files, in every partition, included) and
/// deletes its markers; best effort.
async fn abort_instant(table: &Table, requested: Instant, action: Action, heartbeat: &Heartbeat) {
    let ctx = &table.ctx;
    let instant = requested.requested_time.to_string();
    match ActiveTimeline::load(ctx.storage.clone(), ctx.layout.clone()).await {
        Ok(tl) => abort_started(table, &tl, requested, action, heartbeat).await,
        Err(e) => {
            heartbeat.stop().await;
            tracing::warn!(instant = %instant, error = %e, "aborting a distributed write");
        }
    }
    // The rollback found the files it could list; the markers name every file an attempt
    // may have stored.
    if let Ok((files, markers)) = marked_files(ctx.storage.as_ref(), &instant).await {
        let files: Vec<String> = files.into_iter().collect();
        if delete_keys(ctx.storage.as_ref(), &files).await.is_ok() {
            let _ = delete_keys(ctx.storage.as_ref(), &markers).await;
        }
    }
}
