//! `Table`: the handle writers use.
//!
//! A write follows the commit protocol of spec 2.3 in two phases, [`Table::prepare`] and
//! [`Table::commit`] ([`Table::write`] runs both):
//! 1. the input is validated (schema, keys, non-empty) before anything is written;
//! 2. under the table lock: failed writes are rolled back (pending writes whose writer's heartbeat
//!    lapsed), an instant time is generated and `<t>.<action>.requested` is created; the writer's
//!    heartbeat is written first, then renewed in the background every third of
//!    `heartbeat_timeout` until the write commits or is dropped;
//! 3. without the lock: the index locates existing keys, the planner assigns rows to file
//!    groups, base files (COW, and new groups of MOR) or log files (MOR) are written, then
//!    `<t>.<action>.inflight` with the workload profile;
//!    Before the inflight file is created, the requested file is checked to still exist (a
//!    rollback by another writer deletes it; creating the inflight file would resurrect it).
//! 4. under the table lock: ownership is checked (the instant is still requested and inflight,
//!    no rollback names it, its heartbeat is live; else [`TableError::InstantRolledBack`] and
//!    whatever of the write is left is removed); the timeline is reloaded and checked for conflicts (completed writes
//!    the plan did not see that touched the same file groups: this instant is then rolled back
//!    and [`TableError::CommitConflict`] returned); else the completed instant is created with a
//!    completion time after every time on the timeline. That creation is the commit point.
//! 5. Inline compaction of merge-on-read tables, when configured.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_format::base::BaseFileWriter;
use arbor_storage::{LockProvider, ObjectStoreLockProvider, Storage};
use arbor_timeline::avro::{
    decode_instant, encode_instant_for, HoodieCommitMetadata, HoodieReplaceCommitMetadata,
    HoodieRequestedReplaceMetadata, InstantContent, WriteOperationType,
};
use arbor_timeline::config::{RecordMergeMode, TableType};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{
    resolve_main, Action, ActiveTimeline, Instant, InstantTime, InstantTimeGenerator, MetaRoot,
    State, TableConfig, TableLayout,
};
use arrow::compute::concat_batches;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;

use super::commit::{self, Conflict, Heartbeat, LOCK_DIR};
use super::compaction;
use super::cow::{write_base_file, FileWriteContext, WrittenGroup};
use super::index::{Index, SimpleIndex};
use super::mdt_sync;
use super::mor::write_log_file;
use super::options::{CommitResult, CreateOptions, WriteOperation, WriteOptions};
use super::planner::{self, Combine, Input, PlanContext, WritePlan};
use super::record_index::{
    delta_of, has_record_index, replaced_keys, route_moved_keys, RecordIndex,
};
use super::rollback;
use super::schema::{ConformOptions, DataSchema, SchemaChange};
use super::secondary_index;
use crate::error::{Result, TableError};
use crate::keygen::KeyGenerator;
use crate::read::{MergeMode, TableReader};
use arbor_mdt::index_writer::RecordIndexDelta;
use arbor_mdt::secondary_index_writer::SecondaryIndexDeltas;

/// A Hudi table opened for writing: main (resolved as RFC-116 says) or one metadata root, such
/// as a working branch ([`Table::open_at`]).
///
/// Cloning is cheap; clones share the instant time generator. Several handles (in one process
/// or many, on any branch) may write concurrently: the table lock, the table-wide instant clock
/// and the conflict check keep commits consistent.
#[derive(Debug, Clone)]
pub struct Table {
    /// The table as [`Table::root`] sees it ([`MetaRoot::view`]).
    storage: Arc<dyn Storage>,
    /// The table's own storage (every root).
    table_storage: Arc<dyn Storage>,
    root: MetaRoot,
    /// Opened as main: every state change first checks (under the lock) that main still
    /// resolves to `root`, so no write lands in metadata a publication has replaced.
    follows_main: bool,
    config: TableConfig,
    lock: Option<Arc<dyn LockProvider>>,
    options: WriteOptions,
    generator: Arc<InstantTimeGenerator>,
    schema: DataSchema,
    layout: TableLayout,
}

/// A write whose files are written and whose instant is inflight, waiting for
/// [`Table::commit`]. While it (or a clone) exists, its writer's heartbeat is renewed in the
/// background every third of the heartbeat timeout, so other writers leave it alone however
/// long the caller waits before committing. Dropping it stops the renewals and leaves the
/// instant pending; the next writer rolls it back once its heartbeat lapses.
#[derive(Debug, Clone)]
pub struct PreparedWrite {
    inflight: Instant,
    heartbeat: Heartbeat,
    operation: WriteOperationType,
    metadata: HoodieCommitMetadata,
    replaced: Option<BTreeMap<String, Vec<String>>>,
    planned_against: BTreeSet<InstantTime>,
    touched: BTreeSet<(String, String)>,
    inserted: u64,
    updated: u64,
    deleted: u64,
    skipped_stale: u64,
    index_delta: Option<RecordIndexDelta>,
    secondary_deltas: Option<SecondaryIndexDeltas>,
    schema_changes: Vec<SchemaChange>,
}

/// Input checked against the table, with the schema its write records.
struct Validated {
    input: Input,
    schema: DataSchema,
    changes: Vec<SchemaChange>,
}

impl PreparedWrite {
    /// The instant (requested) time.
    pub fn instant(&self) -> &InstantTime {
        &self.inflight.requested_time
    }

    /// The action the instant completes as.
    pub fn action(&self) -> Action {
        self.inflight.action
    }

    /// The file groups written or replaced, as `(partition, fileId)`.
    pub fn file_groups(&self) -> &BTreeSet<(String, String)> {
        &self.touched
    }

    /// The commit metadata that completing will write.
    pub fn metadata(&self) -> &HoodieCommitMetadata {
        &self.metadata
    }
}

/// Writes and table services wait for an interrupted restore to be finished: the restore rolls
/// back a planned list of instants, and a write landing in between could be lost or half
/// rolled back.
fn refuse_during_restore(tl: &ActiveTimeline) -> Result<()> {
    match tl
        .filter(&[Action::Restore], &[State::Requested, State::Inflight])
        .first()
    {
        Some(r) => Err(TableError::Unsupported {
            reason: format!(
                "restore {} is pending; finish it (arbor restore) before writing",
                r.requested_time
            ),
        }),
        None => Ok(()),
    }
}

fn invalid(column: Option<&str>, reason: impl Into<String>) -> TableError {
    TableError::InvalidInput {
        column: column.map(str::to_string),
        row: None,
        reason: reason.into(),
    }
}

/// The merge mode and ordering field a table's config says writers and readers use.
fn merge_of(config: &TableConfig) -> Result<(MergeMode, Option<String>)> {
    let ordering = config.ordering_fields().into_iter().next();
    let mode = match config.record_merge_mode()? {
        Some(RecordMergeMode::EventTimeOrdering) => MergeMode::EventTime,
        Some(RecordMergeMode::CommitTimeOrdering) => MergeMode::CommitTime,
        Some(RecordMergeMode::Custom) => {
            return Err(TableError::Unsupported {
                reason: "writing tables with merge mode CUSTOM".into(),
            })
        }
        None if ordering.is_some() => MergeMode::EventTime,
        None => MergeMode::CommitTime,
    };
    Ok((mode, ordering))
}

impl Table {
    /// Creates a new version-8 table at the storage root (fails if one exists).
    ///
    /// Validates `options` against the schema: record key, partition and ordering columns must
    /// exist, data columns must not be `_hoodie_*` meta columns; event-time ordering needs an
    /// ordering field; CUSTOM merging is unsupported. Writes `.hoodie/hoodie.properties` with
    /// the key generator (SIMPLE, COMPLEX or NON_PARTITION), explicit merge mode, UTC timeline,
    /// and `hoodie.table.create.schema` (the Avro schema of the data columns, record
    /// `<name>_record` in namespace `hoodie.<name>`; every column nullable). With
    /// `options.metadata_table` the metadata table is created next and `files` then listed in
    /// `hoodie.table.metadata.partitions` (a crash in between leaves a valid table without
    /// one; `arbor mdt init` adds it). Errors: `InvalidInput` naming the column,
    /// `Storage(AlreadyExists)` for an existing table.
    pub async fn create(storage: Arc<dyn Storage>, options: CreateOptions) -> Result<Table> {
        if options.name.is_empty() {
            return Err(invalid(None, "the table name is empty"));
        }
        if options.record_key_fields.is_empty() {
            return Err(invalid(None, "a table needs at least one record key field"));
        }
        let schema = DataSchema::for_new_table(&options.name, &options.schema)?;
        let has = |c: &str| schema.arrow.field_with_name(c).is_ok();
        for (what, cols) in [
            ("record key", &options.record_key_fields),
            ("partition", &options.partition_fields),
        ] {
            for c in cols {
                if !has(c) {
                    return Err(invalid(
                        Some(c),
                        format!("the {what} column is not in the schema"),
                    ));
                }
            }
        }
        if let Some(o) = &options.ordering_field {
            if !has(o) {
                return Err(invalid(Some(o), "the ordering column is not in the schema"));
            }
        }
        let mode = match options.merge_mode {
            Some(m) => m,
            None if options.ordering_field.is_some() => RecordMergeMode::EventTimeOrdering,
            None => RecordMergeMode::CommitTimeOrdering,
        };
        match mode {
            RecordMergeMode::Custom => {
                return Err(TableError::Unsupported {
                    reason: "merge mode CUSTOM".into(),
                })
            }
            RecordMergeMode::EventTimeOrdering if options.ordering_field.is_none() => {
                return Err(invalid(None, "EVENT_TIME_ORDERING needs an ordering field"))
            }
            _ => {}
        }
        let mut builder = TableConfig::builder_v8(options.name.clone(), options.table_type)
            .record_key_fields(options.record_key_fields.iter().cloned())
            .partition_fields(options.partition_fields.iter().cloned())
            .hive_style_partitioning(options.hive_style_partitioning)
            .merge_mode(mode)
            .create_schema(schema.avro_json.clone());
        if let Some(o) = &options.ordering_field {
            builder = builder.ordering_field(o.clone());
        }
        let config = builder.build()?;
        // Key generation must accept the config before the table exists.
        KeyGenerator::from_table_config(&config)?;
        TableConfig::create(storage.as_ref(), DEFAULT_META_DIR, &config).await?;
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
        let generator = Arc::new(InstantTimeGenerator::new());
        generator.share_clock(storage.clone());
        let config = if options.metadata_table {
            mdt_sync::init(&storage, &layout, &generator).await?;
            TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?
        } else {
            config
        };
        Ok(Table {
            table_storage: storage.clone(),
            root: MetaRoot::Root,
            follows_main: true,
            storage,
            config,
            lock: None,
            options: WriteOptions::default(),
            generator,
            schema,
            layout,
        })
    }

    /// Opens main of an existing table (version 8; older or newer versions are `Unsupported`
    /// for writing): main is resolved first ([`resolve_main`]: the root metadata until a
    /// publication, then the latest completed publication), so every writer follows it. The
    /// data schema is the latest completed write's `extraMetadata.schema`, else
    /// `hoodie.table.create.schema`, else what readers resolve.
    pub async fn open(storage: Arc<dyn Storage>) -> Result<Table> {
        let root = resolve_main(storage.as_ref()).await?;
        let mut table = Self::open_at(storage, root).await?;
        table.follows_main = true;
        Ok(table)
    }

    /// Opens the table as metadata root `root` sees it (main's root, a publication, or a
    /// working branch: `arbor-branching` checks a branch's identity before calling this).
    /// Writes and table services of the returned handle land only in that root's timelines.
    pub async fn open_at(table_storage: Arc<dyn Storage>, root: MetaRoot) -> Result<Table> {
        let storage = root.view(table_storage.clone());
        let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
        if config.version().code() != 8 {
            return Err(TableError::Unsupported {
                reason: format!(
                    "arbor writes table version 8; this table is version {}",
                    config.version().code()
                ),
            });
        }
        // Writers keep every metadata partition in step with each commit; refuse tables with
        // partitions arbor does not maintain.
        mdt_sync::check_supported(&config)?;
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
        let schema = Self::load_schema(&storage, &config, &layout).await?;
        let generator = Arc::new(InstantTimeGenerator::new());
        generator.share_clock(storage.clone());
        Ok(Table {
            storage,
            table_storage,
            root,
            follows_main: false,
            config,
            lock: None,
            options: WriteOptions::default(),
            generator,
            schema,
            layout,
        })
    }

    async fn load_schema(
        storage: &Arc<dyn Storage>,
        config: &TableConfig,
        layout: &TableLayout,
    ) -> Result<DataSchema> {
        let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
        if let Some(schema) = Self::latest_written_schema(&tl).await? {
            return Ok(schema);
        }
        if let Some(json) = config.get("hoodie.table.create.schema") {
            return DataSchema::from_avro_json(&json.replace("\\:", ":"));
        }
        let reader = TableReader::open_view(storage.clone()).await?;
        DataSchema::from_read_schema(config.name(), reader.schema())
    }

    /// The schema the latest completed write on `tl` recorded, if any does.
    async fn latest_written_schema(tl: &ActiveTimeline) -> Result<Option<DataSchema>> {
        for instant in tl.completed_writes().iter().rev() {
            let bytes = tl.read(instant).await?;
            let key = tl.key_of(instant)?;
            let json = match decode_instant(instant, &bytes, &key, false)? {
                InstantContent::Commit(m) => m.schema().map(str::to_string),
                InstantContent::ReplaceCommit(m) => m.schema().map(str::to_string),
                _ => None,
            };
            if let Some(json) = json.filter(|s| !s.trim().is_empty()) {
                return DataSchema::from_avro_json(&json).map(Some);
            }
        }
        Ok(None)
    }

    /// Uses `lock` as the table lock (default: an object-store lock under `.hoodie/.locks`).
    pub fn with_lock_provider(mut self, lock: Arc<dyn LockProvider>) -> Self {
        self.lock = Some(lock);
        self
    }

    /// Replaces the write options.
    pub fn with_write_options(mut self, options: WriteOptions) -> Self {
        self.options = options;
        self
    }

    /// Uses `generator` for instant and completion times (e.g. one on a manual clock in tests).
    /// The generator follows the table's shared instant clock (unless it already follows one).
    pub fn with_generator(mut self, generator: Arc<InstantTimeGenerator>) -> Self {
        generator.share_clock(self.storage.clone());
        self.generator = generator;
        self
    }

    /// The table config.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// The data schema writes must match (Arrow, no meta columns; every column nullable).
    pub fn schema(&self) -> &arrow::datatypes::SchemaRef {
        &self.schema.arrow
    }

    /// The write options in use.
    pub fn write_options(&self) -> &WriteOptions {
        &self.options
    }

    /// The storage rooted at the table base.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The table's own storage, shared by every metadata root (for work across branches).
    pub fn table_storage(&self) -> &Arc<dyn Storage> {
        &self.table_storage
    }

    /// The metadata root this handle reads and writes.
    pub fn root(&self) -> &MetaRoot {
        &self.root
    }

    /// The layout of the table's timeline.
    pub fn layout(&self) -> &TableLayout {
        &self.layout
    }

    /// The instant time generator this handle (and its clones) uses.
    pub fn generator(&self) -> &InstantTimeGenerator {
        &self.generator
    }

    /// Runs `work` holding the table lock (renewed while it runs), as every table service does:
    /// failed writes whose heartbeat expired are rolled back first. `work` must be safe to
    /// cancel at any await point (it is dropped if the lease cannot be renewed).
    pub async fn with_table_lock<T, E, F>(&self, work: F) -> std::result::Result<T, E>
    where
        F: std::future::Future<Output = std::result::Result<T, E>>,
        E: From<TableError>,
    {
        let lock = self.lock_provider();
        commit::with_lock(lock.as_ref(), self.options.lock_timeout, async {
            self.ensure_still_main().await?;
            commit::rollback_failed(
                &self.storage,
                &self.layout,
                &self.generator,
                self.options.heartbeat_timeout,
            )
            .await?;
            Ok(work.await)
        })
        .await
        .map_err(E::from)?
    }

    /// A handle of the same table at metadata root `root`, sharing this handle's lock provider,
    /// write options and instant time generator (so work under this handle's lock can change
    /// another root).
    pub async fn reopen_at(&self, root: MetaRoot) -> Result<Table> {
        let mut t = Table::open_at(self.table_storage.clone(), root).await?;
        t.lock = self.lock.clone();
        t.options = self.options.clone();
        t.generator = self.generator.clone();
        Ok(t)
    }

    /// Rolls back this root's failed writes (pending, heartbeat expired), as every locked
    /// operation does first. The caller must hold the table lock. Returns the instants rolled
    /// back.
    pub async fn rollback_failed_locked(&self) -> Result<Vec<InstantTime>> {
        commit::rollback_failed(
            &self.storage,
            &self.layout,
            &self.generator,
            self.options.heartbeat_timeout,
        )
        .await
    }

    /// For a handle opened as main: fails with [`TableError::MainMoved`] when main now resolves
    /// to other metadata (a publication completed since the handle was opened). Called under the
    /// table lock before every state change.
    pub async fn ensure_still_main(&self) -> Result<()> {
        if !self.follows_main {
            return Ok(());
        }
        let now = resolve_main(self.table_storage.as_ref()).await?;
        if now != self.root {
            return Err(TableError::MainMoved {
                opened: self.root.to_string(),
                now: now.to_string(),
            });
        }
        self.sync_legacy_root(&now).await;
        Ok(())
    }

    /// When `main` (resolved under the table lock) is a publication, makes the root
    /// `hoodie.properties` files lead branch-unaware readers to it
    /// ([`arbor_timeline::legacy::sync_legacy_root`]: finishes a publication interrupted after
    /// `_SUCCESS`, mirrors main's property changes). A failure is logged, not returned: main's
    /// own state is unaffected and the next state change retries.
    async fn sync_legacy_root(&self, main: &MetaRoot) {
        if !matches!(main, MetaRoot::Publication(_)) {
            return;
        }
        if let Err(e) =
            arbor_timeline::legacy::sync_legacy_root(self.table_storage.as_ref(), main).await
        {
            tracing::warn!(error = %e, "root hoodie.properties not yet pointing at {main}");
        }
    }

    /// After a change of main's properties: mirrors them into the root files when main is a
    /// publication (see [`Table::sync_legacy_root`]).
    async fn mirror_properties(&self) -> Result<()> {
        let main = resolve_main(self.table_storage.as_ref()).await?;
        if main == self.root {
            self.sync_legacy_root(&main).await;
        }
        Ok(())
    }

    /// Table definitions (metadata table, indexes) are fixed across branches (RFC-116): they
    /// change only on main.
    fn refuse_on_branch(&self, what: &str) -> Result<()> {
        if let MetaRoot::Branch(b) = &self.root {
            return Err(TableError::Unsupported {
                reason: format!(
                    "{what} on working branch {b}: table definitions change only on main"
                ),
            });
        }
        Ok(())
    }

    fn lock_provider(&self) -> Arc<dyn LockProvider> {
        match &self.lock {
            Some(l) => l.clone(),
            None => Arc::new(ObjectStoreLockProvider::new(self.storage.clone(), LOCK_DIR)),
        }
    }

    fn table_type(&self) -> TableType {
        self.config.table_type()
    }

    /// Writes `batches` (data columns only, matching the table schema) as one commit: a
    /// `commit` (copy-on-write), `deltacommit` (merge-on-read) or, for insert overwrite, a
    /// `replacecommit`. See the module doc for the protocol; on any error before the commit
    /// point readers see nothing of the write.
    pub async fn write(
        &self,
        operation: WriteOperation,
        batches: Vec<RecordBatch>,
    ) -> Result<CommitResult> {
        let prepared = self.prepare(operation, batches).await?;
        self.commit(prepared).await
    }

    /// Validates the input against the table: non-empty; every input column is a table column
    /// whose values convert exactly (or, with schema evolution, a new column or a wider type:
    /// see [`DataSchema::conform`](super::schema::DataSchema::conform)); every table column
    /// present (deletes need only the key and partition columns); no null or empty record key.
    /// Returns the rows shaped to the schema the write records, with their keys. Writes
    /// nothing.
    pub fn validate(&self, operation: WriteOperation, batches: &[RecordBatch]) -> Result<Input> {
        self.validate_with_schema(operation, batches)
            .map(|v| v.input)
    }

    /// [`Table::validate`] with the schema the write records and its changes.
    fn validate_with_schema(
        &self,
        operation: WriteOperation,
        batches: &[RecordBatch],
    ) -> Result<Validated> {
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if rows == 0 {
            return Err(invalid(None, "the input has no rows"));
        }
        let is_delete = operation == WriteOperation::Delete;
        if is_delete {
            let needed = self
                .config
                .record_key_fields()
                .into_iter()
                .chain(self.config.partition_fields());
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
        let conformed = self.schema.conform(
            batches,
            ConformOptions {
                allow_missing: is_delete,
                evolve: self.options.schema_evolution && !is_delete,
            },
        )?;
        let batch = concat_batches(&conformed.schema.arrow, &conformed.batches)
            .map_err(|e| invalid(None, e.to_string()))?;
        let keys = KeyGenerator::from_table_config(&self.config)?.keys(&batch)?;
        Ok(Validated {
            input: Input { batch, keys },
            schema: conformed.schema,
            changes: conformed.changes,
        })
    }

    fn action_for(&self, operation: WriteOperation) -> Action {
        match operation {
            WriteOperation::InsertOverwrite | WriteOperation::InsertOverwriteTable => {
                Action::ReplaceCommit
            }
            _ if self.table_type() == TableType::MergeOnRead => Action::DeltaCommit,
            _ => Action::Commit,
        }
    }

    /// Under the lock: rolls back failed writes, creates the heartbeat and the requested file.
    async fn start_instant(
        &self,
        action: Action,
        operation: WriteOperationType,
    ) -> Result<(ActiveTimeline, Instant, Heartbeat)> {
        let lock = self.lock_provider();
        // Boxed: keeps the callers' futures (and stacks) small.
        commit::with_lock(
            lock.as_ref(),
            self.options.lock_timeout,
            Box::pin(async {
                self.ensure_still_main().await?;
                commit::rollback_failed(
                    &self.storage,
                    &self.layout,
                    &self.generator,
                    self.options.heartbeat_timeout,
                )
                .await?;
                let mut tl =
                    ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
                refuse_during_restore(&tl)?;
                let time = tl.next_instant_time(&self.generator).await?;
                let requested = Instant::requested(time.clone(), action);
                let content = if action == Action::ReplaceCommit {
                    let plan = HoodieRequestedReplaceMetadata {
                        operation_type: Some(operation.name().to_string()),
                        version: Some(1),
                        ..HoodieRequestedReplaceMetadata::default()
                    };
                    Bytes::from(encode_instant_for(
                        &requested,
                        &InstantContent::RequestedReplace(Box::new(plan)),
                    )?)
                } else {
                    Bytes::new()
                };
                commit::beat(&self.storage, &time).await?;
                let heartbeat = Heartbeat::start(
                    self.storage.clone(),
                    time.clone(),
                    self.options.heartbeat_timeout,
                );
                let requested = tl.create_requested(time, action, content).await?;
                Ok::<_, TableError>((tl, requested, heartbeat))
            }),
        )
        .await
    }

    /// Best-effort removal of this writer's own instant after a failure before the commit point.
    async fn abort(&self, instant: &Instant) {
        let lock = self.lock_provider();
        let _ = commit::with_lock(
            lock.as_ref(),
            self.options.lock_timeout,
            Box::pin(async {
                let r = rollback::rollback_instant(
                    &self.storage,
                    &self.layout,
                    instant,
                    &self.generator,
                )
                .await;
                if r.is_ok() {
                    let _ = commit::stop_heartbeat(&self.storage, &instant.requested_time).await;
                }
                r
            }),
        )
        .await;
    }

    /// Phase one of a write: validates, starts the instant, plans, writes the data files and
    /// moves the instant to inflight. Nothing is visible to readers until [`Table::commit`].
    pub async fn prepare(
        &self,
        operation: WriteOperation,
        batches: Vec<RecordBatch>,
    ) -> Result<PreparedWrite> {
        let batches = if self.options.partial_updates && operation == WriteOperation::Upsert {
            super::partial::fill_missing_columns(self, batches).await?
        } else {
            batches
        };
        let Validated {
            input,
            schema,
            changes,
        } = self.validate_with_schema(operation, &batches)?;
        drop(batches);
        let action = self.action_for(operation);
        let op_type = operation.operation_type();
        let (mut tl, requested, heartbeat) = self.start_instant(action, op_type).await?;
        match self
            .prepare_started(
                operation,
                &input,
                (&schema, changes),
                &mut tl,
                &requested,
                heartbeat.clone(),
            )
            .await
        {
            Ok(p) => Ok(p),
            Err(e) => {
                let latest = tl
                    .get(&requested.requested_time, action)
                    .and_then(|f| f.latest().cloned())
                    .unwrap_or(requested);
                heartbeat.stop().await;
                self.abort(&latest).await;
                Err(e)
            }
        }
    }

    async fn prepare_started(
        &self,
        operation: WriteOperation,
        input: &Input,
        (schema, schema_changes): (&DataSchema, Vec<SchemaChange>),
        tl: &mut ActiveTimeline,
        requested: &Instant,
        heartbeat: Heartbeat,
    ) -> Result<PreparedWrite> {
        // The table's schema may have changed since this handle was opened (a write through
        // it or another writer evolved it): the write then records the schema evolved from
        // the current one, never one that drops a column or narrows a type again.
        let rechecked;
        let (input, schema, schema_changes) = match Self::latest_written_schema(tl).await? {
            Some(latest) if latest.arrow != schema.arrow => {
                let conformed = latest.conform(
                    std::slice::from_ref(&input.batch),
                    ConformOptions {
                        allow_missing: operation == WriteOperation::Delete,
                        evolve: self.options.schema_evolution
                            && operation != WriteOperation::Delete,
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
                (&rechecked.0, &rechecked.1, conformed.changes)
            }
            _ => (input, schema, schema_changes),
        };
        let instant = requested.requested_time.to_string();
        let reader = Arc::new(TableReader::open_view(self.storage.clone()).await?);
        let view = reader.view();
        // With a record index (global keys), rows whose key lives in another partition are
        // routed first (KeyMove).
        let rli = RecordIndex::open(self.storage.clone(), reader.clone()).await?;
        let mut forced_deletes = Vec::new();
        let routed = match &rli {
            Some(r) => route_moved_keys(r, input, operation, self.options.key_move).await?,
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
        let (mode, ordering_field) = merge_of(&self.config)?;
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
        let simple = SimpleIndex::new(self.storage.clone(), reader.clone());
        let index: &dyn Index = match &rli {
            Some(r) => r,
            None => &simple,
        };
        let ctx = PlanContext {
            operation,
            table_type: self.table_type(),
            view,
            index,
            forced_deletes,
            options: &self.options,
            combine: Combine {
                mode,
                ordering: if mode == MergeMode::EventTime {
                    ordering_col.as_ref()
                } else {
                    None
                },
            },
            all_partitions,
            stale_ordering_field: match (self.table_type(), mode) {
                (TableType::MergeOnRead, MergeMode::EventTime) => ordering_field.as_deref(),
                _ => None,
            },
        };
        let plan = planner::plan(&ctx, input).await?;
        let index_delta = match &rli {
            Some(_) => Some(
                delta_of(
                    &self.storage,
                    &reader,
                    &input.keys,
                    &plan,
                    &requested.requested_time,
                )
                .await?,
            ),
            None => None,
        };
        let si_defs =
            secondary_index::secondary_indexes(self.storage.as_ref(), reader.config()).await?;
        let event_ordering = match mode {
            MergeMode::EventTime => ordering_field.as_deref(),
            _ => None,
        };
        let secondary_deltas = Some(
            secondary_index::deltas_of(
                &self.storage,
                &reader,
                input,
                &plan,
                &si_defs,
                event_ordering,
            )
            .await?,
        );
        let written = self
            .write_files(&instant, input, schema, &plan, mode, ordering_field)
            .await?;
        let op_type = operation.operation_type();
        let profile = commit::workload_profile(op_type, &schema.avro_json, &plan);
        let inflight_instant = requested.with_state(State::Inflight);
        let inflight_bytes = encode_instant_for(
            &inflight_instant,
            &InstantContent::Commit(Box::new(profile)),
        )?;
        if let Err(e) = commit::check_still_requested(&self.storage, &self.layout, requested).await
        {
            // Rolled back while writing: files written after the rollback was planned are
            // still ours to remove.
            let keys: Vec<String> = written.iter().filter_map(|w| w.stat.path.clone()).collect();
            self.delete_own_files(&requested.requested_time, &keys)
                .await;
            let _ = commit::stop_heartbeat(&self.storage, &requested.requested_time).await;
            return Err(e);
        }
        let inflight = tl
            .transition_to_inflight(requested, Bytes::from(inflight_bytes))
            .await?;
        commit::beat(&self.storage, &requested.requested_time).await?;
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
        Ok(PreparedWrite {
            inflight,
            heartbeat,
            operation: op_type,
            metadata: commit::commit_metadata(op_type, &schema.avro_json, &written),
            replaced,
            planned_against,
            touched,
            inserted: written.iter().map(|w| w.inserted).sum(),
            updated: written.iter().map(|w| w.updated).sum(),
            deleted: written.iter().map(|w| w.deleted).sum(),
            skipped_stale: plan.skipped_stale + written.iter().map(|w| w.kept).sum::<u64>(),
            index_delta,
            secondary_deltas,
            schema_changes,
        })
    }

    async fn write_files(
        &self,
        instant: &str,
        input: &Input,
        schema: &DataSchema,
        plan: &WritePlan,
        mode: MergeMode,
        ordering_field: Option<String>,
    ) -> Result<Vec<WrittenGroup>> {
        let ctx = FileWriteContext {
            storage: self.storage.clone(),
            instant: instant.to_string(),
            schema: schema.clone(),
            avro_with_meta: BaseFileWriter::avro_schema_with_meta_fields(&schema.avro_json)?,
            mode,
            ordering_field,
        };
        let partitions: BTreeSet<&str> = plan.groups.iter().map(|g| g.partition.as_str()).collect();
        for p in partitions {
            commit::ensure_partition_marker(&self.storage, p, instant).await?;
        }
        let mor = self.table_type() == TableType::MergeOnRead;
        let mut out = Vec::with_capacity(plan.groups.len());
        for (task, group) in plan.groups.iter().enumerate() {
            let task = task as u64;
            let w = if mor && group.existing.is_some() {
                write_log_file(&ctx, input, group, task).await?
            } else {
                write_base_file(&ctx, input, group, task).await?
            };
            out.push(w);
        }
        Ok(out)
    }

    /// Phase two of a write: under the table lock, checks for conflicts with writes completed
    /// since the plan was made and completes the instant (the commit point). On a conflict the
    /// instant is rolled back and [`TableError::CommitConflict`] names the other instant and the
    /// shared file groups. Runs inline compaction afterwards when configured (a compaction
    /// failure is logged; the write stays committed).
    pub async fn commit(&self, prepared: PreparedWrite) -> Result<CommitResult> {
        let lock = self.lock_provider();
        let result = commit::with_lock_fenced(lock.as_ref(), self.options.lock_timeout, |fence| {
            Box::pin(self.commit_locked(&prepared, fence))
        })
        .await;
        prepared.heartbeat.stop().await;
        let completed = result?;
        let _ = commit::stop_heartbeat(&self.storage, prepared.instant()).await;
        let completion_time = completed
            .completion_time
            .clone()
            .unwrap_or_else(|| completed.requested_time.clone());
        let result = CommitResult {
            instant: prepared.instant().clone(),
            completion_time,
            action: completed.action,
            operation: prepared.operation,
            inserted: prepared.inserted,
            updated: prepared.updated,
            deleted: prepared.deleted,
            files_written: prepared.metadata.write_stats().count(),
            file_groups_replaced: prepared
                .replaced
                .as_ref()
                .map_or(0, |r| r.values().map(Vec::len).sum()),
            skipped_stale: prepared.skipped_stale,
            schema_changes: prepared.schema_changes.clone(),
        };
        self.inline_compaction().await;
        Ok(result)
    }

    async fn commit_locked(
        &self,
        prepared: &PreparedWrite,
        fence: commit::Fence<'_>,
    ) -> Result<Instant> {
        if let Err(e) = self.ensure_still_main().await {
            // The write can never complete on main: remove it from the metadata it started in.
            if let Ok(()) = rollback::rollback_instant(
                &self.storage,
                &self.layout,
                &prepared.inflight,
                &self.generator,
            )
            .await
            .map(|_| ())
            {
                let _ = commit::stop_heartbeat(&self.storage, prepared.instant()).await;
            }
            return Err(e);
        }
        if let Err(e) = commit::check_ownership(
            &self.storage,
            &self.layout,
            &prepared.inflight,
            self.options.heartbeat_timeout,
        )
        .await
        {
            if matches!(e, TableError::InstantRolledBack { .. }) {
                self.clean_up_lost(prepared).await;
            }
            return Err(e);
        }
        let mut tl = ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
        if let Some(Conflict { other, file_groups }) = commit::find_conflict(
            &tl,
            prepared.instant(),
            &prepared.planned_against,
            &prepared.touched,
        )
        .await?
        {
            match rollback::rollback_instant(
                &self.storage,
                &self.layout,
                &prepared.inflight,
                &self.generator,
            )
            .await
            {
                Ok(_) => {
                    let _ = commit::stop_heartbeat(&self.storage, prepared.instant()).await;
                }
                Err(TableError::Unsupported { .. }) => {}
                Err(e) => return Err(e),
            }
            return Err(TableError::CommitConflict {
                instant: prepared.instant().to_string(),
                other: other.requested_time.to_string(),
                file_groups: file_groups.join(","),
            });
        }
        let touched: BTreeSet<String> = prepared
            .replaced
            .as_ref()
            .map(|r| r.keys().cloned().collect())
            .unwrap_or_default();
        mdt_sync::record_instant(
            &self.storage,
            prepared.instant(),
            &prepared.metadata,
            &touched,
            prepared.index_delta.as_ref(),
            prepared.secondary_deltas.as_ref(),
            &self.generator,
        )
        .await?;
        let completion = tl.next_instant_time(&self.generator).await?;
        let mut completed = prepared.inflight.with_state(State::Completed);
        completed.completion_time = Some(completion.clone());
        let content = match &prepared.replaced {
            Some(replaced) => InstantContent::ReplaceCommit(Box::new(
                HoodieReplaceCommitMetadata::from_commit_metadata(
                    prepared.metadata.clone(),
                    replaced.clone(),
                ),
            )),
            None => InstantContent::Commit(Box::new(prepared.metadata.clone())),
        };
        let bytes = encode_instant_for(&completed, &content)?;
        // Fencing: the lease must still be ours, with its token, at the commit point.
        fence.confirm().await?;
        let done = tl
            .complete(&prepared.inflight, completion, Bytes::from(bytes))
            .await?;
        mdt_sync::maintain(&self.storage, &self.layout, &self.generator).await;
        Ok(done)
    }

    /// After [`commit::check_ownership`] failed (the caller holds the lock): finishes or starts
    /// the rollback of this writer's instant if any of its timeline files is left, and deletes
    /// the data files its write stats name (a rollback planned before they were written would
    /// have missed them). Best effort: failures are logged.
    async fn clean_up_lost(&self, prepared: &PreparedWrite) {
        let time = prepared.instant();
        let left = match ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await {
            Ok(tl) => tl
                .get(time, prepared.inflight.action)
                .and_then(|f| f.latest().cloned()),
            Err(e) => {
                tracing::warn!(instant = %time, error = %e, "cleaning up a rolled-back write");
                None
            }
        };
        if let Some(latest) = left.filter(|i| i.state != State::Completed) {
            if let Err(e) =
                rollback::rollback_instant(&self.storage, &self.layout, &latest, &self.generator)
                    .await
            {
                tracing::warn!(instant = %time, error = %e, "rolling back a lost write failed");
            }
        }
        let keys: Vec<String> = prepared
            .metadata
            .write_stats()
            .filter_map(|(_, s)| s.path.clone())
            .collect();
        self.delete_own_files(time, &keys).await;
        let _ = commit::stop_heartbeat(&self.storage, time).await;
    }

    /// Best-effort deletion of data files this writer wrote for `time` (never committed).
    async fn delete_own_files(&self, time: &InstantTime, keys: &[String]) {
        let keys: Vec<String> = keys.iter().filter(|k| !k.is_empty()).cloned().collect();
        for chunk in keys.chunks(arbor_storage::MAX_DELETE_BATCH) {
            match self.storage.delete_batch(chunk).await {
                Ok(results) => {
                    for r in results.into_iter().filter_map(|r| r.err()) {
                        tracing::warn!(instant = %time, error = %r, "deleting a file of a lost write failed");
                    }
                }
                Err(e) => {
                    tracing::warn!(instant = %time, error = %e, "deleting files of a lost write failed")
                }
            }
        }
    }

    /// Merge-on-read with `inline_compact_every = Some(n)`: when `n` or more deltacommits
    /// completed since the last compaction, runs [`Table::compact`] (schedule and run under the
    /// lock). Failures are logged as warnings; the write stays committed.
    async fn inline_compaction(&self) {
        let Some(n) = self.options.inline_compact_every else {
            return;
        };
        if self.table_type() != TableType::MergeOnRead || n == 0 {
            return;
        }
        let r = async {
            let tl = ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
            let last = tl
                .completed()
                .into_iter()
                .filter(|i| i.action == Action::Commit)
                .map(|i| i.requested_time)
                .max();
            let since = tl
                .completed()
                .into_iter()
                .filter(|i| i.action == Action::DeltaCommit)
                .filter(|i| last.as_ref().is_none_or(|l| &i.requested_time > l))
                .count();
            if since < n as usize {
                return Ok(());
            }
            self.compact().await?;
            Ok::<_, TableError>(())
        }
        .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "inline compaction failed; the write is committed");
        }
    }

    /// Compacts the table under the table lock: runs every pending compaction (oldest first),
    /// then schedules a new one if some file group's latest slice has log files and runs it.
    /// Returns what each completed compaction did (empty when nothing needed compacting).
    ///
    /// The lock is held from before scheduling until the last compaction completed (its lease
    /// is renewed while the work runs), so concurrent `compact` calls, inline compactions and
    /// writers' commits are serialised with it: two runners never execute (or clean up after)
    /// the same compaction. Writers wait for the lock up to their `lock_timeout`. Use this
    /// rather than the free functions of [`super::compaction`] when other writers may be active.
    ///
    /// Errors: `Unsupported` for a copy-on-write table (checked before the lock is taken);
    /// `Lock` when the lock cannot be taken or its lease not renewed (a compaction cut short
    /// stays pending and is completed by the next call); `Corrupt` for an invalid compaction
    /// plan; timeline, storage and format failures.
    pub async fn compact(&self) -> Result<Vec<CommitResult>> {
        if self.table_type() != TableType::MergeOnRead {
            return Err(TableError::Unsupported {
                reason: format!(
                    "compaction of table {:?}: only merge-on-read tables are compacted",
                    self.config.name()
                ),
            });
        }
        let lock = self.lock_provider();
        commit::with_lock(lock.as_ref(), self.options.lock_timeout, async {
            self.ensure_still_main().await?;
            refuse_during_restore(
                &ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?,
            )?;
            let mut out =
                compaction::run_pending_compactions(&self.storage, &self.layout, &self.generator)
                    .await?;
            if let Some(t) =
                compaction::schedule_compaction(&self.storage, &self.layout, &self.generator)
                    .await?
            {
                out.push(
                    compaction::run_compaction(&self.storage, &self.layout, &t, &self.generator)
                        .await?,
                );
            }
            if !out.is_empty() {
                mdt_sync::maintain(&self.storage, &self.layout, &self.generator).await;
            }
            Ok(out)
        })
        .await
    }

    /// Deletes whole partitions (a `delete_partition` replacecommit): every file group of the
    /// partitions is replaced, no file is written, `extraMetadata.schema` is recorded. Fails
    /// with `InvalidInput` for an empty list; partitions without file groups are accepted.
    pub async fn delete_partitions(&self, partitions: &[String]) -> Result<CommitResult> {
        if partitions.is_empty() {
            return Err(invalid(None, "no partitions to delete"));
        }
        for p in partitions {
            arbor_fsview::listing::validate_partition(p).map_err(|e| TableError::InvalidInput {
                column: None,
                row: None,
                reason: format!("partition {p:?}: {e}"),
            })?;
        }
        let op = WriteOperationType::DeletePartition;
        let (mut tl, requested, heartbeat) = self.start_instant(Action::ReplaceCommit, op).await?;
        let prepared = async {
            let reader = TableReader::open_view(self.storage.clone()).await?;
            let planned_against: BTreeSet<InstantTime> = reader
                .view()
                .index()
                .completed_writes()
                .map(|i| i.requested_time.clone())
                .collect();
            let mut replaced: BTreeMap<String, Vec<String>> = BTreeMap::new();
            let mut touched = BTreeSet::new();
            for p in partitions {
                let slices = reader
                    .view()
                    .latest_file_slices(Some(p), None)
                    .await
                    .map_err(TableError::from_fsview)?;
                let ids: Vec<String> = slices.into_iter().map(|s| s.file_id).collect();
                for id in &ids {
                    touched.insert((p.clone(), id.clone()));
                }
                if !ids.is_empty() {
                    replaced.insert(p.clone(), ids);
                }
            }
            let metadata = commit::commit_metadata(op, &self.schema.avro_json, &[]);
            let index_delta = if has_record_index(reader.config()) {
                let mut d = RecordIndexDelta::default();
                for (p, ids) in &replaced {
                    d.deletes
                        .extend(replaced_keys(&self.storage, &reader, p, ids).await?);
                }
                Some(d)
            } else {
                None
            };
            let si_defs =
                secondary_index::secondary_indexes(self.storage.as_ref(), reader.config()).await?;
            let plan = WritePlan {
                replaced: replaced.clone(),
                ..WritePlan::default()
            };
            let no_input = Input {
                batch: RecordBatch::new_empty(self.schema.arrow.clone()),
                keys: Vec::new(),
            };
            let secondary_deltas = Some(
                secondary_index::deltas_of(
                    &self.storage,
                    &reader,
                    &no_input,
                    &plan,
                    &si_defs,
                    None,
                )
                .await?,
            );
            let inflight_instant = requested.with_state(State::Inflight);
            let bytes = encode_instant_for(
                &inflight_instant,
                &InstantContent::Commit(Box::new(metadata.clone())),
            )?;
            commit::check_still_requested(&self.storage, &self.layout, &requested).await?;
            let inflight = tl
                .transition_to_inflight(&requested, Bytes::from(bytes))
                .await?;
            Ok::<_, TableError>(PreparedWrite {
                inflight,
                heartbeat: heartbeat.clone(),
                operation: op,
                metadata,
                replaced: Some(replaced),
                planned_against,
                touched,
                inserted: 0,
                updated: 0,
                deleted: 0,
                skipped_stale: 0,
                index_delta,
                secondary_deltas,
                schema_changes: Vec::new(),
            })
        }
        .await;
        match prepared {
            Ok(p) => self.commit(p).await,
            Err(e) => {
                let latest = tl
                    .get(&requested.requested_time, Action::ReplaceCommit)
                    .and_then(|f| f.latest().cloned())
                    .unwrap_or(requested);
                heartbeat.stop().await;
                self.abort(&latest).await;
                Err(e)
            }
        }
    }

    /// Creates the metadata table of a table that has none (under the table lock, after rolling
    /// back failed writes), from a directory listing of its committed files; from then on
    /// every commit updates it and readers list through it. Returns the number of files
    /// recorded. Errors: `Unsupported` when the table already has one or has pending instants
    /// (e.g. a live writer's).
    pub async fn init_metadata_table(&self) -> Result<usize> {
        self.refuse_on_branch("creating the metadata table")?;
        // Refused before the lock is taken (and checked again under it).
        let config = TableConfig::load(self.storage.as_ref(), DEFAULT_META_DIR).await?;
        if config
            .metadata_partitions()
            .iter()
            .any(|p| p == arbor_mdt::FILES_PARTITION)
        {
            return Err(TableError::Unsupported {
                reason: "the table already has a metadata table with partition files".to_string(),
            });
        }
        let lock = self.lock_provider();
        commit::with_lock(lock.as_ref(), self.options.lock_timeout, async {
            self.ensure_still_main().await?;
            commit::rollback_failed(
                &self.storage,
                &self.layout,
                &self.generator,
                self.options.heartbeat_timeout,
            )
            .await?;
            let out = mdt_sync::init(&self.storage, &self.layout, &self.generator).await?;
            self.mirror_properties().await?;
            Ok(out)
        })
        .await
    }

    /// Creates the record index (in the metadata table, which must exist) under the table lock:
    /// from then on upserts and deletes find their file groups through it and keys are global
    /// (see [`WriteOptions::key_move`]). Returns the number of keys indexed. Errors:
    /// `Unsupported` without a metadata table, with a record index, or with pending instants.
    pub async fn create_record_index(&self) -> Result<usize> {
        self.refuse_on_branch("creating a record index")?;
        let config = TableConfig::load(self.storage.as_ref(), DEFAULT_META_DIR).await?;
        if has_record_index(&config) {
            return Err(TableError::Unsupported {
                reason: "the table already has a record index".to_string(),
            });
        }
        let lock = self.lock_provider();
        commit::with_lock(lock.as_ref(), self.options.lock_timeout, async {
            self.ensure_still_main().await?;
            commit::rollback_failed(
                &self.storage,
                &self.layout,
                &self.generator,
                self.options.heartbeat_timeout,
            )
            .await?;
            let out =
                mdt_sync::init_record_index(&self.storage, &self.layout, &self.generator).await?;
            self.mirror_properties().await?;
            Ok(out)
        })
        .await
    }

    /// Creates secondary index `name` (MDT partition `secondary_index_<name>`) on `column`
    /// under the table lock (after rolling back failed writes): from then on every write keeps
    /// it in step and [`crate::secondary_lookup`] answers from it. Returns the number of
    /// (value, key) entries indexed. Errors: `Unsupported` without a metadata table, with
    /// pending instants, for an existing index of that name or a column type without a known
    /// text form; `InvalidInput` for an unknown column or a bad name.
    pub async fn create_secondary_index(&self, name: &str, column: &str) -> Result<usize> {
        self.refuse_on_branch("creating a secondary index")?;
        let lock = self.lock_provider();
        commit::with_lock(lock.as_ref(), self.options.lock_timeout, async {
            self.ensure_still_main().await?;
            commit::rollback_failed(
                &self.storage,
                &self.layout,
                &self.generator,
                self.options.heartbeat_timeout,
            )
            .await?;
            let out = secondary_index::init_secondary_index(
                &self.storage,
                &self.layout,
                &self.generator,
                &self.schema.arrow,
                name,
                column,
            )
            .await?;
            self.mirror_properties().await?;
            Ok(out)
        })
        .await
    }

    /// A reader of the table's current state.
    pub async fn reader(&self) -> Result<TableReader> {
        TableReader::open_view(self.storage.clone()).await
    }
}
