//! The write operation ([`crate::Table::write`], [`crate::Table::prepare`]): validating the
//! input, starting the instant, planning, writing the data files and moving the instant to
//! inflight. [`super::prepared`] completes it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_mdt::index_writer::RecordIndexDelta;
use arbor_mdt::secondary_index_writer::SecondaryIndexDeltas;
use arbor_timeline::avro::{HoodieCommitMetadata, WriteOperationType};

use arbor_timeline::avro::{encode_instant_for, InstantContent};
use arbor_timeline::config::{keys, TableType};
use arbor_timeline::{Action, ActiveTimeline, Instant, InstantTime, State};
use arrow::compute::concat_batches;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;

use super::context::{invalid, latest_written_schema, merge_of, Table};
use super::prepared::{abort_started, begin_instant, delete_own_files, PreparedWrite};
use super::write_files::{write_files, FileSet};
use crate::error::{Result, TableError};
use crate::keygen::KeyGenerator;
use crate::read::{MergeMode, TableReader};
use crate::write::bucket_index;
use crate::write::commit::{self, Heartbeat};
use crate::write::history_scope::WriteHistory;
use crate::write::index::{Index, SimpleIndex};
use crate::write::known::{KnownIndex, KnownLocations};
use crate::write::options::WriteOperation;
use crate::write::partial;
use crate::write::planner::{self, Combine, Input, PlanContext};
use crate::write::record_index::{delta_of, route_moved_keys, RecordIndex};
use crate::write::schema::{ConformOptions, DataSchema, SchemaChange};
use crate::write::secondary_index;
use crate::write::stored_keys::StoredKeys;

/// Input checked against the table, with the schema its write records.
pub(super) struct Validated {
    pub(super) input: Input,
    pub(super) schema: DataSchema,
    pub(super) changes: Vec<SchemaChange>,
}

/// Validates the input against the table: non-empty; every input column is a table column
/// whose values convert exactly (or, with schema evolution, a new column or a wider type:
/// see [`DataSchema::conform`](super::schema::DataSchema::conform)); every table column
/// present (deletes need only the key and partition columns); no null or empty record key.
/// Returns the rows shaped to the schema the write records, with their keys. Writes
/// nothing.
pub(crate) fn validate(
    table: &Table,
    operation: WriteOperation,
    batches: &[RecordBatch],
) -> Result<Input> {
    validate_with_schema(table, operation, batches).map(|v| v.input)
}

/// [`Table::validate`] with the schema the write records and its changes.
pub(super) fn validate_with_schema(
    table: &Table,
    operation: WriteOperation,
    batches: &[RecordBatch],
) -> Result<Validated> {
    let ctx = &table.ctx;
    // A key generator arbor does not implement is refused by name before anything else.
    let keygen = KeyGenerator::from_table_config(&ctx.config)?;
    let drops_partition_columns = ctx
        .config
        .get(keys::DROP_PARTITION_COLUMNS)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if drops_partition_columns && keygen.is_partitioned() {
        return Err(TableError::Unsupported {
            reason: format!(
                "arbor does not write tables with {}=true (Spark leaves the partition columns \
                 out of the data files and readers recover them from the paths)",
                keys::DROP_PARTITION_COLUMNS
            ),
        });
    }
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if rows == 0 {
        return Err(invalid(None, "the input has no rows"));
    }
    if !ctx.config.populate_meta_fields() && ctx.table_type() == TableType::MergeOnRead {
        return Err(TableError::Unsupported {
            reason: "arbor does not write merge-on-read tables without meta fields \
                     (hoodie.populate.meta.fields=false): their log records would need keys \
                     from the data columns on every merge"
                .into(),
        });
    }
    let is_delete = operation == WriteOperation::Delete;
    if is_delete {
        let needed = ctx
            .config
            .record_key_fields()
            .into_iter()
            .chain(ctx.config.partition_fields());
        for c in needed {
            let top = c.split('.').next().unwrap_or(&c).to_string();
            if batches.iter().any(|b| b.column_by_name(&top).is_none()) {
                return Err(invalid(
                    Some(&top),
                    "a delete needs the record key and partition columns",
                ));
            }
        }
    }
    let drop = &ctx.options.drop_columns;
    check_droppable(&ctx.config, drop)?;
    let (base, dropped) = ctx.schema.without(drop)?;
    let kept: Vec<RecordBatch>;
    let batches = if drop.is_empty() {
        batches
    } else {
        kept = without_columns(batches, drop)?;
        &kept[..]
    };
    let mut conformed = base.conform(
        batches,
        ConformOptions {
            allow_missing: is_delete,
            evolve: ctx.options.schema_evolution && !is_delete,
        },
    )?;
    conformed.changes.splice(0..0, dropped);
    // The rows are copied into one batch while the keys are computed on the other threads.
    let threads = ctx.options.parallelism.get();
    let (batch, keys) = std::thread::scope(|scope| {
        let concat = scope.spawn(|| concat_batches(&conformed.schema.arrow, &conformed.batches));
        let keys = keygen.keys_in_parallel(&conformed.batches, threads);
        (concat.join(), keys)
    });
    let batch = match batch {
        Ok(b) => b.map_err(|e| invalid(None, e.to_string()))?,
        Err(_) => {
            return Err(TableError::Unsupported {
                reason: "copying the input rows stopped unexpectedly (its thread panicked)".into(),
            })
        }
    };
    let keys = keys?;
    Ok(Validated {
        input: Input { batch, keys },
        schema: conformed.schema,
        changes: conformed.changes,
    })
}

pub(super) fn action_for(table: &Table, operation: WriteOperation) -> Action {
    let ctx = &table.ctx;
    match operation {
        WriteOperation::InsertOverwrite | WriteOperation::InsertOverwriteTable => {
            Action::ReplaceCommit
        }
        _ if ctx.table_type() == TableType::MergeOnRead => Action::DeltaCommit,
        _ => Action::Commit,
    }
}

/// Phase one of a write: validates, starts the instant, plans, writes the data files and
/// moves the instant to inflight. Nothing is visible to readers until [`Table::commit`].
pub(crate) async fn prepare(
    table: &Table,
    operation: WriteOperation,
    batches: Vec<RecordBatch>,
) -> Result<PreparedWrite> {
    let ctx = &table.ctx;
    refuse_unwritable(table, operation).await?;
    let batches = if ctx.options.partial_updates && operation == WriteOperation::Upsert {
        partial::fill_missing_columns(ctx, batches).await?
    } else {
        batches
    };
    let Validated {
        input,
        schema,
        changes,
    } = validate_with_schema(table, operation, &batches)?;
    drop(batches);
    prepare_validated(
        table,
        operation,
        input,
        (schema, changes),
        RowRoles::default(),
    )
    .await
}

/// Refuses a write of `operation` on a table arbor does not write that way: change data
/// capture, or columns Java renamed (read by column id).
pub(super) async fn refuse_unwritable(table: &Table, operation: WriteOperation) -> Result<()> {
    let ctx = &table.ctx;
    super::writable::refuse_change_data_capture(
        &ctx.config,
        &operation.operation_type().name().to_ascii_lowercase(),
    )?;
    crate::read::schema_history::refuse_renamed_columns(ctx.storage.as_ref(), "writing").await
}

/// The roles of input rows in one upsert commit carrying several kinds of change.
#[derive(Debug, Default)]
pub(super) struct RowRoles {
    /// Rows that delete their key (`PlanContext::delete_rows`).
    deletes: BTreeSet<usize>,
    /// Rows that replace the stored record of their key whatever its ordering value
    /// (`PlanContext::replace`).
    replace: BTreeSet<usize>,
    /// Where the caller knows keys are stored.
    known: Option<KnownLocations>,
}

/// Phase one of a write of upserts and deletes as one `upsert` commit
/// ([`Table::prepare_changes`]): both inputs are validated as [`prepare`] validates an upsert
/// and a delete, the deletes shaped to the upserts' schema (missing columns null), and no key
/// may be in both. Every upserted row replaces the stored record of its key, even one with a
/// greater ordering value.
pub(crate) async fn prepare_changes(
    table: &Table,
    upserts: Vec<RecordBatch>,
    deletes: Vec<RecordBatch>,
    known: KnownLocations,
) -> Result<PreparedWrite> {
    let ctx = &table.ctx;
    super::writable::refuse_change_data_capture(&ctx.config, "upsert")?;
    crate::read::schema_history::refuse_renamed_columns(ctx.storage.as_ref(), "writing").await?;
    let has_rows = |b: &[RecordBatch]| b.iter().any(|b| b.num_rows() > 0);
    let (input, schema, changes, first_delete) = match (has_rows(&upserts), has_rows(&deletes)) {
        (false, false) => return Err(invalid(None, "the input has no rows")),
        (true, false) => {
            let up = validate_with_schema(table, WriteOperation::Upsert, &upserts)?;
            let n = up.input.keys.len();
            (up.input, up.schema, up.changes, n)
        }
        (false, true) => {
            let del = validate_with_schema(table, WriteOperation::Delete, &deletes)?;
            (del.input, del.schema, del.changes, 0)
        }
        (true, true) => {
            let up = validate_with_schema(table, WriteOperation::Upsert, &upserts)?;
            let del = validate_with_schema(table, WriteOperation::Delete, &deletes)?;
            let upsert_keys: std::collections::HashSet<&crate::keygen::HoodieKey> =
                up.input.keys.iter().collect();
            if let Some((row, k)) = del
                .input
                .keys
                .iter()
                .enumerate()
                .find(|(_, k)| upsert_keys.contains(k))
            {
                return Err(TableError::InvalidInput {
                    column: None,
                    row: Some(row),
                    reason: format!(
                        "key {:?} of partition {:?} is both upserted and deleted",
                        k.record_key, k.partition_path
                    ),
                });
            }
            let shaped = up.schema.conform(
                std::slice::from_ref(&del.input.batch),
                ConformOptions {
                    allow_missing: true,
                    evolve: false,
                },
            )?;
            let mut parts = vec![up.input.batch.clone()];
            parts.extend(shaped.batches);
            let batch = concat_batches(&up.schema.arrow, &parts)
                .map_err(|e| invalid(None, e.to_string()))?;
            let first_delete = up.input.keys.len();
            let mut keys = up.input.keys;
            keys.extend(del.input.keys);
            (Input { batch, keys }, up.schema, up.changes, first_delete)
        }
    };
    let roles = RowRoles {
        replace: (0..first_delete).collect(),
        deletes: (first_delete..input.keys.len()).collect(),
        known: (!known.is_empty()).then_some(known),
    };
    prepare_validated(
        table,
        WriteOperation::Upsert,
        input,
        (schema, changes),
        roles,
    )
    .await
}

/// Phase one after validation: starts the instant, plans, writes, moves to inflight.
async fn prepare_validated(
    table: &Table,
    operation: WriteOperation,
    input: Input,
    (schema, changes): (DataSchema, Vec<SchemaChange>),
    roles: RowRoles,
) -> Result<PreparedWrite> {
    let action = action_for(table, operation);
    let op_type = operation.operation_type();
    let (mut tl, requested, heartbeat) = begin_instant(table, action, op_type).await?;
    match prepare_started(
        table,
        operation,
        (&input, &roles),
        (&schema, changes),
        &mut tl,
        &requested,
        heartbeat.clone(),
    )
    .await
    {
        Ok(p) => Ok(p),
        Err(e) => {
            abort_started(table, &tl, requested, action, &heartbeat).await;
            Err(e)
        }
    }
}

async fn prepare_started(
    table: &Table,
    operation: WriteOperation,
    (input, roles): (&Input, &RowRoles),
    (schema, schema_changes): (&DataSchema, Vec<SchemaChange>),
    tl: &mut ActiveTimeline,
    requested: &Instant,
    heartbeat: Heartbeat,
) -> Result<PreparedWrite> {
    let ctx = &table.ctx;
    let written = write_input(
        table,
        operation,
        (input, roles),
        (schema, schema_changes),
        tl,
        (&requested.requested_time, None),
    )
    .await?;
    let inflight_instant = requested.with_state(State::Inflight);
    let inflight_bytes = encode_instant_for(
        &inflight_instant,
        &InstantContent::Commit(Box::new(written.profile.clone())),
    )?;
    if let Err(e) = commit::check_still_requested(&ctx.storage, &ctx.layout, requested).await {
        // Rolled back while writing: files written after the rollback was planned are
        // still ours to remove.
        delete_own_files(ctx, &requested.requested_time, &written.file_keys()).await;
        let _ = commit::stop_heartbeat(&ctx.storage, &requested.requested_time).await;
        return Err(e);
    }
    let inflight = tl
        .transition_to_inflight(requested, Bytes::from(inflight_bytes))
        .await?;
    commit::beat(&ctx.storage, &requested.requested_time).await?;
    Ok(written.into_prepared(inflight, heartbeat, operation.operation_type()))
}

/// What writing one input under an instant produced, before the instant moves to inflight:
/// the commit metadata, the index changes and the counts ([`write_input`]).
#[derive(Debug, Clone)]
pub(super) struct WrittenInput {
    /// The workload profile the inflight file records.
    pub(super) profile: HoodieCommitMetadata,
    pub(super) metadata: HoodieCommitMetadata,
    pub(super) replaced: Option<BTreeMap<String, Vec<String>>>,
    pub(super) planned_against: BTreeSet<InstantTime>,
    pub(super) touched: BTreeSet<(String, String)>,
    pub(super) inserted: u64,
    pub(super) updated: u64,
    pub(super) deleted: u64,
    pub(super) skipped_stale: u64,
    pub(super) index_delta: Option<RecordIndexDelta>,
    pub(super) secondary_deltas: Option<SecondaryIndexDeltas>,
    pub(super) schema_changes: Vec<SchemaChange>,
}

impl WrittenInput {
    /// The storage keys of the data files written.
    pub(super) fn file_keys(&self) -> Vec<String> {
        self.metadata
            .write_stats()
            .filter_map(|(_, s)| s.path.clone())
            .collect()
    }

    /// The write, its instant now `inflight`, ready for [`crate::Table::commit`].
    pub(super) fn into_prepared(
        self,
        inflight: Instant,
        heartbeat: Heartbeat,
        operation: WriteOperationType,
    ) -> PreparedWrite {
        PreparedWrite {
            inflight,
            heartbeat,
            operation,
            metadata: self.metadata,
            replaced: self.replaced,
            planned_against: self.planned_against,
            touched: self.touched,
            inserted: self.inserted,
            updated: self.updated,
            deleted: self.deleted,
            skipped_stale: self.skipped_stale,
            index_delta: self.index_delta,
            secondary_deltas: self.secondary_deltas,
            schema_changes: self.schema_changes,
        }
    }
}

/// Plans `input` against the table's latest state and writes its data files under
/// `instant_time`, with the index changes they make; `tl` is the timeline the latest written
/// schema is taken from. `fragment`: the task number of a fragment of a distributed write
/// (the files' write-token stage; each file is marked before it is stored, see
/// [`crate::write::markers`]), `None` for a write in one process. Touches no timeline file.
pub(super) async fn write_input(
    table: &Table,
    operation: WriteOperation,
    (input, roles): (&Input, &RowRoles),
    (schema, schema_changes): (&DataSchema, Vec<SchemaChange>),
    tl: &ActiveTimeline,
    (instant_time, fragment): (&InstantTime, Option<u64>),
) -> Result<WrittenInput> {
    let ctx = &table.ctx;
    // The table's schema may have changed since this handle was opened (a write through
    // it or another writer evolved it): the write then records the schema evolved from
    // the current one, never one that drops a column (unless this write drops it,
    // `WriteOptions::drop_columns`) or narrows a type again.
    let rechecked;
    let latest = match latest_written_schema(tl).await? {
        // Columns this write drops (those still in the latest schema) are left out of it.
        Some(latest) => {
            let drop: Vec<String> = ctx
                .options
                .drop_columns
                .iter()
                .filter(|c| latest.arrow.field_with_name(c).is_ok())
                .cloned()
                .collect();
            Some(latest.without(&drop)?.0)
        }
        None => None,
    };
    let (input, schema, schema_changes) = match latest {
        Some(latest) if latest.arrow != schema.arrow => {
            let conformed = latest.conform(
                std::slice::from_ref(&input.batch),
                ConformOptions {
                    allow_missing: operation == WriteOperation::Delete,
                    evolve: ctx.options.schema_evolution && operation != WriteOperation::Delete,
                },
            )?;
            let batch = concat_batches(&conformed.schema.arrow, &conformed.batches)
                .map_err(|e| invalid(None, e.to_string()))?;
            rechecked = (
                Input {
                    batch,
                    keys: input.keys.clone(),
                },
                conformed.schema,
            );
            let mut changes: Vec<SchemaChange> = schema_changes
                .into_iter()
                .filter(|c| matches!(c, SchemaChange::Dropped { .. }))
                .collect();
            changes.extend(conformed.changes);
            (&rechecked.0, &rechecked.1, changes)
        }
        _ => (input, schema, schema_changes),
    };
    let instant = instant_time.to_string();
    // Inserted once per run of rows sharing one path allocation (the key generator shares
    // it): comparing strings for every row would cost more than the rest of the planning.
    let mut partitions: BTreeSet<&str> = BTreeSet::new();
    let mut previous: Option<&Arc<str>> = None;
    for k in &input.keys {
        if previous.is_some_and(|p| Arc::ptr_eq(p, &k.partition_path)) {
            continue;
        }
        partitions.insert(&k.partition_path);
        previous = Some(&k.partition_path);
    }
    let partitions: Vec<&str> = partitions.into_iter().collect();
    let reader = Arc::new(TableReader::open_for_write(ctx.storage.clone(), &partitions).await?);
    let view = reader.view();
    let history = WriteHistory {
        active: view.history(),
        storage: &ctx.storage,
        layout: &ctx.layout,
    };
    // With a record index (global keys), rows whose key lives in another partition are
    // routed first (KeyMove).
    let rli = RecordIndex::open(ctx.storage.clone(), reader.clone()).await?;
    let mut forced_deletes = Vec::new();
    let routed = match &rli {
        Some(r) => {
            route_moved_keys(
                r,
                input,
                operation,
                ctx.options.key_move,
                Some(&roles.deletes),
            )
            .await?
        }
        None => None,
    };
    let input: &Input = match &routed {
        Some((moved, forced)) => {
            forced_deletes = forced.clone();
            moved
        }
        None => input,
    };
    let planned_against: BTreeSet<InstantTime> = view
        .index()
        .completed_writes()
        .map(|i| i.requested_time.clone())
        .collect();
    let (mode, ordering_field) = merge_of(&ctx.config)?;
    let ordering_col = ordering_field
        .as_ref()
        .and_then(|f| input.batch.column_by_name(f).cloned());
    let all_partitions = if operation == WriteOperation::InsertOverwriteTable {
        view.partitions()
            .await
            .map_err(TableError::from_fsview)?
            .as_ref()
            .clone()
    } else {
        Vec::new()
    };
    let simple = SimpleIndex::new(ctx.storage.clone(), reader.clone())
        .with_parallelism(ctx.options.parallelism);
    // A delete must remove every copy of a key; the record index knows one, so where the
    // timeline shows writes that may have stored a key twice, deletes also scan partitions.
    let duplicates = match (&rli, operation) {
        (Some(_), WriteOperation::Delete) => history.duplicate_risk().await?.is_some(),
        (Some(_), _) if !roles.deletes.is_empty() => history.duplicate_risk().await?.is_some(),
        _ => false,
    };
    let every_copy;
    let index: &dyn Index = match &rli {
        Some(r) if duplicates => {
            every_copy = crate::write::index::EveryCopyIndex {
                primary: r,
                scan: &simple,
            };
            &every_copy
        }
        Some(r) => r,
        None => &simple,
    };
    let known_index;
    let index: &dyn Index = match &roles.known {
        Some(known) => {
            known_index = KnownIndex {
                known,
                fallback: index,
                view,
            };
            &known_index
        }
        None => index,
    };
    let plan_ctx = PlanContext {
        operation,
        table_type: ctx.table_type(),
        view,
        index,
        forced_deletes,
        delete_rows: Some(&roles.deletes),
        replace: match (mode, ordering_field.as_deref()) {
            (MergeMode::EventTime, Some(f)) if !roles.replace.is_empty() => {
                Some((&roles.replace, f))
            }
            _ => None,
        },
        options: &ctx.options,
        combine: Combine {
            mode,
            ordering: if mode == MergeMode::EventTime {
                ordering_col.as_ref()
            } else {
                None
            },
        },
        all_partitions,
        stale_ordering_field: match (ctx.table_type(), mode) {
            (TableType::MergeOnRead, MergeMode::EventTime) => ordering_field.as_deref(),
            _ => None,
        },
    };
    let plan = planner::plan(&plan_ctx, input).await?;
    plan.refuse_pending_clustering(view)?;
    let new_keys: usize = plan.groups.iter().map(|g| g.inserts.len()).sum();
    // Only a write that places new keys or replaces file groups can be refused, so only such
    // a write looks for evidence of a bucket index (which lists the partitions' file groups).
    if operation != WriteOperation::Delete && (new_keys > 0 || !plan.replaced.is_empty()) {
        let evidence = bucket_index::evidence(ctx.root_storage.as_ref(), view, &partitions).await?;
        let example = plan
            .groups
            .iter()
            .find(|g| !g.inserts.is_empty())
            .map(|g| g.partition.as_str());
        bucket_index::refuse_new_keys(
            new_keys,
            example,
            !plan.replaced.is_empty(),
            evidence.as_deref(),
        )?;
    }
    let index_delta = match &rli {
        Some(_) => Some(delta_of(&ctx.storage, &reader, &input.keys, &plan, instant_time).await?),
        None => None,
    };
    let si_defs = secondary_index::secondary_indexes(ctx.storage.as_ref(), reader.config()).await?;
    let event_ordering = match mode {
        MergeMode::EventTime => ordering_field.as_deref(),
        _ => None,
    };
    let secondary_deltas = Some(
        secondary_index::deltas_of(
            &ctx.storage,
            &reader,
            input,
            &plan,
            &si_defs,
            event_ordering,
        )
        .await?,
    );
    let rewrite = match ctx.table_type() {
        TableType::MergeOnRead => {
            let mut rewrite = crate::write::repeated_keys::groups_to_rewrite(
                &ctx.storage,
                &StoredKeys::for_table(&ctx.config)?,
                history,
                input,
                &plan,
                // Secondary-index maintenance reads the updated rows anyway.
                rli.is_none() || !si_defs.is_empty(),
            )
            .await?;
            // New keys go to base files, where Java's default index finds them.
            rewrite.extend(plan.packed_groups());
            rewrite
        }
        TableType::CopyOnWrite => BTreeSet::new(),
    };
    let files = FileSet {
        plan: &plan,
        rewrite: &rewrite,
        reader: &reader,
        mor: ctx.table_type() == TableType::MergeOnRead,
        fragment,
    };
    let written = write_files(
        table,
        &instant,
        input,
        schema,
        files,
        (mode, ordering_field),
    )
    .await?;
    let op_type = operation.operation_type();
    let profile = commit::workload_profile(op_type, &schema.avro_json, &plan);
    let mut touched: BTreeSet<(String, String)> = written
        .iter()
        .filter_map(|w| w.stat.file_id.clone().map(|f| (w.partition.clone(), f)))
        .collect();
    for (p, ids) in &plan.replaced {
        for id in ids {
            touched.insert((p.clone(), id.clone()));
        }
    }
    let replaced = matches!(
        operation,
        WriteOperation::InsertOverwrite | WriteOperation::InsertOverwriteTable
    )
    .then(|| plan.replaced.clone());
    Ok(WrittenInput {
        profile,
        metadata: commit::commit_metadata(op_type, &schema.avro_json, &written),
        replaced,
        planned_against,
        touched,
        // A key moved to a new file group is one update for the user (its write stats keep
        // the delete and the insert, as the files have them).
        inserted: written
            .iter()
            .map(|w| w.inserted)
            .sum::<u64>()
            .saturating_sub(plan.moved),
        updated: written.iter().map(|w| w.updated).sum::<u64>() + plan.moved,
        deleted: written
            .iter()
            .map(|w| w.deleted)
            .sum::<u64>()
            .saturating_sub(plan.moved),
        skipped_stale: plan.skipped_stale + written.iter().map(|w| w.kept).sum::<u64>(),
        index_delta,
        secondary_deltas,
        schema_changes,
    })
}

/// Refuses dropping a record key, partition or ordering column (`WriteOptions::drop_columns`).
fn check_droppable(config: &arbor_timeline::TableConfig, drop: &[String]) -> Result<()> {
    let needed = config
        .record_key_fields()
        .into_iter()
        .chain(config.partition_fields())
        .chain(config.ordering_fields());
    for c in needed {
        let top = c
            .split(':')
            .next()
            .unwrap_or(&c)
            .split('.')
            .next()
            .unwrap_or(&c)
            .to_string();
        if drop.contains(&top) {
            return Err(invalid(
                Some(&top),
                "a record key, partition or ordering column cannot be dropped",
            ));
        }
    }
    Ok(())
}

/// `batches` without the columns named in `drop` (those they have).
fn without_columns(batches: &[RecordBatch], drop: &[String]) -> Result<Vec<RecordBatch>> {
    batches
        .iter()
        .map(|b| {
            let keep: Vec<usize> = b
                .schema()
                .fields()
                .iter()
                .enumerate()
                .filter(|(_, f)| !drop.iter().any(|d| d == f.name()))
                .map(|(i, _)| i)
                .collect();
            b.project(&keep).map_err(|e| invalid(None, e.to_string()))
        })
        .collect()
}
