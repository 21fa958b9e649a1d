//! The methods of [`Table`], the handle writers use (its state: [`crate::txn::context`]).
//! Each state change is an operation of [`crate::txn`]
//! (one file each) that runs its locked steps through a [`Transaction`]; this file only
//! opens handles and forwards to them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use arbor_storage::{LockProvider, Storage};
use arbor_timeline::{
    resolve_main, InstantTime, InstantTimeGenerator, MetaRoot, TableConfig, TableLayout,
};
use arrow::record_batch::RecordBatch;

use crate::error::{Result, TableError};
use crate::read::TableReader;
use crate::ttl::{TtlOutcome, TtlPolicies, TtlPolicy, TtlRunOptions};
use crate::txn::context::{Table, TableContext};
use crate::txn::transaction::{Entry, Transaction};
use crate::txn::{
    compact, create, create_index, delete_partitions, init_metadata_table, prepared, ttl, write,
};
use crate::write::known::KnownLocations;
use crate::write::options::{CommitResult, CreateOptions, WriteOperation, WriteOptions};
use crate::write::planner::Input;
use crate::{Fragment, PreparedWrite, WriteContext, WriteTransaction};

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
        Ok(Table {
            ctx: create::create(storage, options).await?,
        })
    }

    /// Opens main of an existing table (version 8; older or newer versions are `Unsupported`
    /// for writing): main is resolved first ([`resolve_main`]: the root metadata until a
    /// publication, then the latest completed publication), so every writer follows it. The
    /// data schema is the latest completed write's `extraMetadata.schema`, else
    /// `hoodie.table.create.schema`, else what readers resolve.
    pub async fn open(storage: Arc<dyn Storage>) -> Result<Table> {
        roll_forward_on_open(&storage).await;
        let root = resolve_main(storage.as_ref()).await?;
        crate::open_hooks::adopt_java_drops_on_open(&storage, &root).await;
        let mut table = Table {
            ctx: TableContext::open_at(storage, root).await?,
        };
        table.ctx.follows_main = true;
        Ok(table)
    }

    /// Opens the table as metadata root `root` sees it (main's root, a publication, or a
    /// working branch: `arbor-branching` checks a branch's identity before calling this).
    /// Writes and table services of the returned handle land only in that root's timelines.
    pub async fn open_at(table_storage: Arc<dyn Storage>, root: MetaRoot) -> Result<Table> {
        roll_forward_on_open(&table_storage).await;
        Ok(Table {
            ctx: TableContext::open_at(table_storage, root).await?,
        })
    }

    /// Uses `lock` as the table lock (default: an object-store lock under `.hoodie/.locks`).
    pub fn with_lock_provider(mut self, lock: Arc<dyn LockProvider>) -> Self {
        self.ctx.lock = Some(lock);
        self
    }

    /// Uses the lock provider the table's `hoodie.write.lock.*` properties name (Hudi's
    /// ZooKeeper, file-system or in-process providers, or a lock URL), when they name one;
    /// otherwise the handle keeps its lock (by default the object-store lock under
    /// `.hoodie/.locks`). A provider the properties name but that cannot be made (an unknown
    /// class, a ZooKeeper setting without its URL) is [`TableError::Lock`].
    pub async fn with_configured_lock(self) -> Result<Self> {
        let config = self.config();
        let lock = arbor_storage::lock_provider_from_hudi_config(
            |k| config.get(k).map(str::to_string),
            Some(config.name()),
            self.table_storage(),
        )
        .await?;
        Ok(match lock {
            Some(l) => self.with_lock_provider(l),
            None => self,
        })
    }

    /// Replaces the write options.
    pub fn with_write_options(mut self, options: WriteOptions) -> Self {
        self.ctx.generator.set_max_ahead(options.max_clock_ahead);
        self.ctx.options = options;
        self
    }

    /// Uses `generator` for instant and completion times (e.g. one on a manual clock in tests).
    /// The generator follows the table's shared instant clock (unless it already follows one).
    pub fn with_generator(mut self, generator: Arc<InstantTimeGenerator>) -> Self {
        generator.share_clock(self.ctx.storage.clone());
        generator.set_max_ahead(self.ctx.options.max_clock_ahead);
        self.ctx.generator = generator;
        self
    }

    /// The table config.
    pub fn config(&self) -> &TableConfig {
        &self.ctx.config
    }

    /// The data schema writes must match (Arrow, no meta columns; every column nullable).
    pub fn schema(&self) -> &arrow::datatypes::SchemaRef {
        &self.ctx.schema.arrow
    }

    /// The write options in use.
    pub fn write_options(&self) -> &WriteOptions {
        &self.ctx.options
    }

    /// The table as this handle's metadata root sees it ([`MetaRoot::view`]: the root's
    /// `.hoodie` over the table's data files). For main before any publication this is the
    /// table's base; for a branch or publication it is not.
    pub fn view_storage(&self) -> &Arc<dyn Storage> {
        &self.ctx.storage
    }

    /// The table's own storage at its base path, shared by every metadata root (for work
    /// across branches).
    pub fn table_storage(&self) -> &Arc<dyn Storage> {
        &self.ctx.root_storage
    }

    /// The metadata root this handle reads and writes.
    pub fn root(&self) -> &MetaRoot {
        &self.ctx.root
    }

    /// The layout of the table's timeline.
    pub fn layout(&self) -> &TableLayout {
        &self.ctx.layout
    }

    /// The instant time generator this handle (and its clones) uses.
    pub fn generator(&self) -> &InstantTimeGenerator {
        &self.ctx.generator
    }

    /// Runs `work` as one [`Transaction`]: holding the table lock (renewed while it runs),
    /// after checking that main has not moved (a handle opened as main; else
    /// [`TableError::MainMoved`] and `work` does not run) and rolling back failed writes whose
    /// heartbeat expired. `work` must be safe to cancel at any await point (it is dropped if
    /// the lease cannot be renewed). This is how an operation outside this crate (clean,
    /// restore, savepoint, tag, branch) changes the table.
    pub fn transact<'a, T, E, F, Fut>(
        &'a self,
        work: F,
    ) -> Pin<Box<impl Future<Output = std::result::Result<T, E>> + 'a>>
    where
        T: 'a,
        E: From<TableError> + 'a,
        F: FnOnce(Transaction<'a>) -> Fut + 'a,
        Fut: Future<Output = std::result::Result<T, E>> + 'a,
    {
        Box::pin(async move {
            Transaction::run(self, Entry::Begin, |txn| async move { Ok(work(txn).await) })
                .await
                .map_err(E::from)?
        })
    }

    /// [`Table::transact`] for work that needs no [`Transaction`] value.
    pub fn with_table_lock<'a, T, E, F>(
        &'a self,
        work: F,
    ) -> Pin<Box<impl Future<Output = std::result::Result<T, E>> + 'a>>
    where
        T: 'a,
        E: From<TableError> + 'a,
        F: Future<Output = std::result::Result<T, E>> + 'a,
    {
        self.transact(|_| work)
    }

    /// A handle of the same table at metadata root `root`, sharing this handle's lock provider,
    /// write options and instant time generator (so work under this handle's lock can change
    /// another root).
    pub async fn reopen_at(&self, root: MetaRoot) -> Result<Table> {
        let mut t = Table::open_at(self.ctx.root_storage.clone(), root).await?;
        t.ctx.lock = self.ctx.lock.clone();
        t.ctx.options = self.ctx.options.clone();
        t.ctx.generator = self.ctx.generator.clone();
        Ok(t)
    }

    /// Rolls back this root's failed writes (pending, heartbeat expired), as every transaction
    /// does first ([`Transaction::rollback_failed`]). The caller must hold the table lock.
    /// Returns the instants rolled back.
    pub async fn rollback_failed_locked(&self) -> Result<Vec<InstantTime>> {
        crate::write::commit::rollback_failed(
            &self.ctx.storage,
            &self.ctx.layout,
            &self.ctx.generator,
            self.ctx.options.heartbeat_timeout,
        )
        .await
    }

    /// For a handle opened as main: fails with [`TableError::MainMoved`] when main now resolves
    /// to other metadata (a publication completed since the handle was opened). Every
    /// transaction runs it under the table lock before its work.
    pub async fn ensure_still_main(&self) -> Result<()> {
        self.ctx.ensure_still_main().await
    }

    /// Writes `batches` (data columns only, matching the table schema) as one commit: a
    /// `commit` (copy-on-write), `deltacommit` (merge-on-read) or, for insert overwrite, a
    /// `replacecommit` ([`Table::prepare`] then [`Table::commit`]); on any error before the
    /// commit point readers see nothing of the write.
    ///
    /// A write that loses a race to another writer (a commit conflict, or its instant rolled
    /// back by another writer) is prepared and committed again on the fresh timeline, after a
    /// backoff, as [`WriteOptions::retry`] allows; [`CommitResult::attempts`] says how many
    /// attempts it took, and [`TableError::RetriesExhausted`] names them when every one lost.
    ///
    /// Runs on a tokio runtime (as object_store does): files are stored and existing keys read
    /// on tasks of the current runtime, encoding runs on `WriteOptions::parallelism` threads.
    pub async fn write(
        &self,
        operation: WriteOperation,
        batches: Vec<RecordBatch>,
    ) -> Result<CommitResult> {
        crate::txn::retry::write_with_retries(self, operation, batches).await
    }

    /// Whether [`Table::write_stream`] takes `operation` on this table (bulk inserts, on tables
    /// without a record index or secondary indexes); when it does not, [`Table::write`] does.
    pub async fn streams(&self, operation: WriteOperation) -> Result<bool> {
        Ok(crate::txn::write_stream::refusal(self, operation)
            .await?
            .is_none())
    }

    /// A bulk insert of a stream of batches, as one commit, holding the open files (within
    /// `WriteOptions::stream_memory`, closing the largest early when over it) and the batches
    /// in hand rather than the whole input: each batch is validated and keyed as it arrives
    /// (errors name its number), its rows go to an open base file of their partition, encoded
    /// on `WriteOptions::parallelism` threads, and a file is stored (create-if-absent) as soon
    /// as it reaches `WriteOptions::max_file_size`, when a new file group opens for the
    /// partition's next rows.
    /// Every batch must conform to the schema the first one does. The instant, its conflict
    /// check and its completion are those of [`Table::write`]; on any error (a bad batch, an
    /// error of the stream itself, storage) the instant is rolled back and its files deleted,
    /// so the table reads as before. Only [`WriteOperation::BulkInsert`] streams (other
    /// operations look up or deduplicate keys across the whole input), and not on tables with
    /// a record index or secondary indexes, which need every key at the commit; both are
    /// refused before anything is written. Not retried: a stream is consumed once. Runs on a
    /// tokio runtime; encoding runs on blocking threads of it, storing on its tasks.
    pub async fn write_stream<S, E>(
        &self,
        operation: WriteOperation,
        input: S,
    ) -> Result<CommitResult>
    where
        S: futures::Stream<Item = std::result::Result<RecordBatch, E>> + Unpin,
        E: std::fmt::Display,
    {
        crate::txn::write_stream::write_stream(self, operation, input).await
    }

    /// An upsert or delete (other operations: as [`Table::write`]) of an input that `open`
    /// reads again from the start each time it is called, as one commit, holding its keys
    /// rather than its rows when it is large. The first read validates the key and partition
    /// columns of every batch (errors name the input row). An input within four times
    /// `WriteOptions::stream_memory` (Arrow's in-memory size) is then written as
    /// [`Table::write`] writes it, retries included. A larger one is written in waves of about
    /// that size, each one more read of the input whose rows are written as a fragment of one
    /// distributed write ([`Table::begin_write`]), completed as one commit
    /// ([`Table::commit_fragments`]): a partition that fits in a wave goes whole to one wave;
    /// a larger one (every one, with a global record index) is split by where the index finds
    /// its keys, every file group's rows in one wave. New keys go to new file groups, never
    /// packed into small existing ones. Memory is bounded by the keys and one wave, not by the
    /// input. The input must read the same every time: a different number of rows is an
    /// error. On any error the write is rolled back and its files deleted, so the table reads
    /// as before; a write in waves is not retried. With `WriteOptions::drop_columns` the input
    /// is held whole, as [`Table::write`] holds it.
    pub async fn write_reread<F, S, E>(
        &self,
        operation: WriteOperation,
        open: F,
    ) -> Result<CommitResult>
    where
        F: FnMut() -> S,
        S: futures::Stream<Item = std::result::Result<RecordBatch, E>> + Unpin,
        E: std::fmt::Display,
    {
        crate::txn::write_reread::write_reread(self, operation, open).await
    }

    /// Validates the input against the table: non-empty; every input column is a table column
    /// whose values convert exactly (or, with schema evolution, a new column or a wider type);
    /// every table column present (deletes need only the key and partition columns); no null
    /// or empty record key. Returns the rows shaped to the schema the write records, with their
    /// keys. Writes nothing.
    pub fn validate(&self, operation: WriteOperation, batches: &[RecordBatch]) -> Result<Input> {
        write::validate(self, operation, batches)
    }

    /// Phase one of a write: validates; in a transaction starts the instant (requested file and
    /// heartbeat); without the lock plans, writes the data files and moves the instant to
    /// inflight. Nothing is visible to readers until [`Table::commit`]; on an error the
    /// instant is rolled back.
    pub async fn prepare(
        &self,
        operation: WriteOperation,
        batches: Vec<RecordBatch>,
    ) -> Result<PreparedWrite> {
        write::prepare(self, operation, batches).await
    }

    /// Phase one of a write that upserts `upserts` and deletes the keys of `deletes` in one
    /// `upsert` commit (Hudi's upsert with delete records: one instant, so readers see all of
    /// it or none of it). `upserts` are validated as an [`WriteOperation::Upsert`]'s input,
    /// `deletes` as a [`WriteOperation::Delete`]'s (only the key and partition columns are
    /// needed); a key in both is [`TableError::InvalidInput`]. Either may be empty (not both).
    /// Complete it with [`Table::commit`], as [`Table::prepare`].
    pub async fn prepare_changes(
        &self,
        upserts: Vec<RecordBatch>,
        deletes: Vec<RecordBatch>,
    ) -> Result<PreparedWrite> {
        write::prepare_changes(self, upserts, deletes, KnownLocations::new()).await
    }

    /// [`Table::prepare_changes`] for a caller that knows where keys are stored in the table's
    /// latest state (a merge that read the target's file groups): the listed keys are not
    /// looked up by the table's index (which, without a record index, reads every file group
    /// of the partitions written), the others are.
    pub async fn prepare_changes_with(
        &self,
        upserts: Vec<RecordBatch>,
        deletes: Vec<RecordBatch>,
        known: KnownLocations,
    ) -> Result<PreparedWrite> {
        write::prepare_changes(self, upserts, deletes, known).await
    }

    /// Phase two of a write, in a transaction: checks the instant is still this writer's
    /// (else [`TableError::InstantRolledBack`]) and has no conflict with writes completed since
    /// the plan was made (else it is rolled back and [`TableError::CommitConflict`] names the
    /// other instant and the shared file groups, or the partitions a `DELETE_PARTITION` of
    /// one of the two deletes while the other wrote to them, new file groups included),
    /// records it in the MDT and completes it (the commit point). Runs inline compaction afterwards when configured (a compaction failure
    /// is logged; the write stays committed).
    ///
    /// Then, when the root's `hoodie.properties` has `hoodie.partition.ttl.inline=true`, runs
    /// partition TTL ([`Table::run_ttl`]); its failure is [`TableError::InlineTtl`], which says
    /// the write committed.
    pub async fn commit(&self, prepared: PreparedWrite) -> Result<CommitResult> {
        let result = prepared::commit(self, prepared).await?;
        Box::pin(ttl::inline_ttl(self, &result)).await?;
        Ok(result)
    }

    /// Begins a write split across processes or machines (the coordinator's first step): in a
    /// transaction, as every write begins, starts the instant of `operation`. Send
    /// [`WriteTransaction::context`] (serializable) to the fragment writers, each of which opens
    /// the same table and branch and calls [`Table::write_fragment`]; then complete the write
    /// with [`Table::commit_fragments`] on this handle. Nothing is visible to readers before
    /// that. Refused: tables with change data capture, renamed columns, and
    /// `WriteOptions::drop_columns`.
    pub async fn begin_write(&self, operation: WriteOperation) -> Result<WriteTransaction> {
        crate::txn::distributed::begin(self, operation).await
    }

    /// Writes one fragment of a distributed write (runs anywhere: another thread, process or
    /// machine), as task `task` (a number unique among the write's fragments, such as the
    /// index of the task in a Ray or Spark job): validates `batches` as [`Table::write`] does,
    /// routes their keys against the table's latest state (its index: existing keys to their
    /// file groups, new keys to new file groups, never packed into existing small ones), writes
    /// base and log files under the write's instant (each marked first in
    /// `.hoodie/.temp/<instant>/`, as Java's direct markers) and returns their description with
    /// the index changes they make. Touches no timeline file. The rows of one file group must all go to one
    /// fragment, and for upserts and deletes each key to one fragment: the commit refuses
    /// fragments that break this. The handle must be opened on the write's branch.
    /// [`TableError::InstantRolledBack`] when the write no longer waits for fragments (it was
    /// committed, aborted or rolled back); the fragment's files are then deleted.
    pub async fn write_fragment(
        &self,
        context: &WriteContext,
        task: u64,
        batches: Vec<RecordBatch>,
    ) -> Result<Fragment> {
        crate::txn::distributed::write_fragment(self, context, task, batches).await
    }

    /// The route (a non-negative 63-bit number) of each row of `batches` for a distributed
    /// `operation` (upsert or delete):
    /// rows whose key the table's index finds in one file group share a route (the hash of
    /// the partition and file id), and rows of one new key share one (the hash of the
    /// partition and the key). Give the rows of each route to one fragment writer (shuffle by
    /// it) and every file group and key is written by one fragment, as
    /// [`Table::commit_fragments`] requires. Validates the rows as [`Table::write`] does; reads
    /// only the index. Stable across processes: routes computed by several workers agree.
    pub async fn route(
        &self,
        operation: WriteOperation,
        batches: &[RecordBatch],
    ) -> Result<Vec<u64>> {
        crate::txn::route::route(self, operation, batches).await
    }

    /// Completes a distributed write with `fragments` as one commit: combines them (refusing,
    /// with [`TableError::InvalidInput`], fragments of another instant or written twice, two
    /// fragments writing one file group, for upserts and deletes one key in two fragments, and
    /// different schemas), deletes the marked files no fragment names (attempts that failed or
    /// were retried), moves the instant to inflight and commits it as [`Table::commit`] does:
    /// conflict check against writes completed since [`Table::begin_write`], MDT and index
    /// updates, completion. On any error before the commit point the instant is rolled back
    /// and every file of the write deleted: the table reads as before.
    pub async fn commit_fragments(
        &self,
        transaction: WriteTransaction,
        fragments: Vec<Fragment>,
    ) -> Result<CommitResult> {
        crate::txn::distributed::commit_fragments(self, transaction, fragments).await
    }

    /// Gives up a distributed write: rolls its instant back and deletes every file its
    /// fragments wrote (best effort; what is left is rolled back by the next writer once the
    /// heartbeat lapses).
    pub async fn abort_write(&self, transaction: WriteTransaction) {
        crate::txn::distributed::abort(self, transaction).await
    }

    /// Compacts a merge-on-read table in one transaction: runs every pending compaction
    /// (oldest first), then schedules a new one if some file group's latest slice has log
    /// files and runs it. Returns what each completed compaction did (empty when nothing
    /// needed compacting). Concurrent `compact` calls, inline compactions and commits are
    /// serialised by the lock. Errors: `Unsupported` for a copy-on-write table; `Lock` when the
    /// lock cannot be taken or kept (a compaction cut short stays pending and is completed by
    /// the next call); `Corrupt` for an invalid compaction plan.
    pub async fn compact(&self) -> Result<Vec<CommitResult>> {
        compact::compact(self).await
    }

    /// Clusters the table as `options` say (module [`crate::cluster`]): schedules a plan under
    /// the lock (`<t>.clustering.requested`), rewrites its groups' small file slices as sorted
    /// file groups of the target size without the lock, and completes a `CLUSTER`
    /// replacecommit through the same commit point as a write (conflict check, metadata
    /// table, record index re-pointed). `instant: None` when nothing needs clustering. Plans
    /// already pending are left alone ([`Table::run_pending_clustering`]). On a failure before
    /// the commit point the instant and its files are removed. Errors: `InvalidInput` for bad
    /// options, an unknown partition or sort column; `CommitConflict` when a write completed
    /// since the plan touched one of its file groups (the clustering is rolled back).
    pub async fn cluster(
        &self,
        options: &crate::cluster::ClusterOptions,
    ) -> Result<crate::cluster::ClusterOutcome> {
        crate::txn::cluster::cluster(self, options).await
    }

    /// What [`Table::cluster`] with `options` would rewrite now; writes nothing, takes no lock.
    pub async fn plan_clustering(
        &self,
        options: &crate::cluster::ClusterOptions,
    ) -> Result<crate::cluster::ClusterOutcome> {
        crate::txn::cluster::plan_only(self, options).await
    }

    /// The clustering plans pending on the table (this writer's, crashed ones, or another
    /// engine's), oldest first, with whether their writer's heartbeat is live.
    pub async fn pending_clustering(&self) -> Result<Vec<crate::cluster::PendingClustering>> {
        crate::txn::cluster::pending(self).await
    }

    /// Runs every pending clustering plan whose writer is not running, oldest first, exactly
    /// as its plan says (Java's plans included: sort columns from its strategy parameters,
    /// else the table's `hoodie.clustering.*` keys). A plan a live writer runs is an error
    /// naming it. A failed run leaves the plan pending (a rerun removes what it wrote).
    pub async fn run_pending_clustering(&self) -> Result<Vec<crate::cluster::ClusterOutcome>> {
        crate::txn::cluster::run_pending(self).await
    }

    /// Rolls back every pending clustering plan whose writer is not running: its files and
    /// instant go, its file groups take updates again. Returns the rolled-back instants.
    pub async fn rollback_pending_clustering(&self) -> Result<Vec<arbor_timeline::InstantTime>> {
        crate::txn::cluster::rollback_pending(self).await
    }

    /// Log-compacts a merge-on-read table under the lock ([`crate::write::log_compaction`]):
    /// pending log compactions first, then the slices with at least `threshold` log files
    /// (default: the table's `hoodie.log.compaction.blocks.threshold`, else 5) each get one
    /// compacted log file; base files are not rewritten. Empty when nothing qualifies.
    /// Errors: `Unsupported` for a copy-on-write table.
    pub async fn log_compact(&self, threshold: Option<usize>) -> Result<Vec<CommitResult>> {
        compact::log_compact(self, threshold).await
    }

    /// Runs only the compactions already pending (another writer's plans, such as Spark's, or
    /// one a killed run left), oldest first, under the lock; schedules nothing. Empty for a
    /// copy-on-write table or when nothing is pending.
    pub async fn compact_pending(&self) -> Result<Vec<CommitResult>> {
        compact::compact_pending(self).await
    }

    /// Rolls back every pending compaction (output files and plan) under the lock; returns
    /// the rolled-back compaction instants.
    pub async fn rollback_pending_compactions(&self) -> Result<Vec<arbor_timeline::InstantTime>> {
        compact::rollback_pending_compactions(self).await
    }

    /// Deletes whole partitions (a `delete_partition` replacecommit): every file group of the
    /// partitions is replaced, no file is written, `extraMetadata.schema` is recorded. Fails
    /// with `InvalidInput` for an empty list; partitions without file groups are accepted.
    pub async fn delete_partitions(&self, partitions: &[String]) -> Result<CommitResult> {
        delete_partitions::delete_partitions(self, partitions).await
    }

    /// Phase one of [`Table::delete_partitions`]: starts the `delete_partition` replacecommit
    /// and names the file groups it replaces; complete it with [`Table::commit`] (which checks
    /// for conflicts with writes completed since, as for any prepared write). Lets a caller
    /// record `extraMetadata` or narrow the writes counted as seen
    /// ([`PreparedWrite::seen_only`]) first.
    pub async fn prepare_delete_partitions(&self, partitions: &[String]) -> Result<PreparedWrite> {
        delete_partitions::prepare_delete_partitions(self, partitions).await
    }

    /// The TTL policies of the handle's config (as the table was opened: a handle does not see
    /// later changes; [`Table::run_ttl`] reads them afresh). Errors: contradicting or invalid
    /// TTL keys, named.
    pub fn ttl_policies(&self) -> Result<TtlPolicies> {
        TtlPolicies::from_config(&self.ctx.config)
    }

    /// Sets a TTL policy, replacing the policy of the same scope (the default, or the same
    /// spec), in the root's `hoodie.properties` (RFC keys; Java's policy keys are rewritten in
    /// them) under the table lock, mirrored to the root files when main is a publication.
    /// Validated against the table first (fields exist and are partition fields; a default
    /// with fields uses leading partition fields; count and size leave at least one level below
    /// the group; event-time has a partition time field and a valid format; the retention is
    /// the strategy's kind): on an error nothing is written. Returns the new set.
    pub async fn set_ttl_policy(&self, policy: TtlPolicy) -> Result<TtlPolicies> {
        ttl::set_policy(self, policy).await
    }

    /// Removes the default TTL policy (`spec` None) or the explicit policy of `spec`, under
    /// the table lock. Errors: `InvalidInput` when there is no such policy (nothing is
    /// written). Returns the new set.
    pub async fn unset_ttl_policy(&self, spec: Option<&str>) -> Result<TtlPolicies> {
        ttl::unset_policy(self, spec).await
    }

    /// Runs partition TTL ([`crate::ttl`]): under the table lock, evaluates the policies of the
    /// root's `hoodie.properties` at `options.now` (default: now) over the partition statistics
    /// (from the MDT when the table has one) and deletes the expired partitions, oldest first
    /// up to the cap, as one `DELETE_PARTITION` replacecommit (MDT updated in the same
    /// instant). Nothing expired: no instant. `dry_run`: nothing is written (no lock either)
    /// and the plan is the one a run at that time would execute.
    pub async fn run_ttl(&self, options: &TtlRunOptions) -> Result<TtlOutcome> {
        Box::pin(ttl::run(self, options)).await
    }

    /// Archives the metadata table's timeline down to what the data timeline still needs (the
    /// data timeline's earliest active instant, and never the MDT's latest compaction or
    /// anything after it), with the default archival policy; the caller holds the table lock,
    /// as for archiving the data timeline, which should come first. Returns the MDT instants
    /// archived (0 without a metadata table, or when its timeline is within the policy).
    pub async fn archive_metadata_timeline(&self) -> Result<usize> {
        crate::write::mdt_sync::archive_metadata_timeline(&self.ctx.storage, &self.ctx.layout).await
    }

    /// Creates the metadata table of a table that has none (in a transaction), from a
    /// directory listing of its committed files; from then on every commit updates it and
    /// readers list through it. Returns the number of files recorded. Errors: `Unsupported`
    /// on a branch, when the table already has one or has pending instants.
    pub async fn init_metadata_table(&self) -> Result<usize> {
        init_metadata_table::init_metadata_table(self).await
    }

    /// Creates the record index (in the metadata table, which must exist) in a transaction:
    /// from then on upserts and deletes find their file groups through it and keys are global
    /// (see [`WriteOptions::key_move`]). Returns the number of keys indexed. Errors:
    /// `Unsupported` on a branch, without a metadata table, with a record index, or with
    /// pending instants.
    pub async fn create_record_index(&self) -> Result<usize> {
        create_index::record_index(self).await
    }

    /// Creates secondary index `name` (MDT partition `secondary_index_<name>`) on `column` in a
    /// transaction: from then on every write keeps it in step and [`crate::secondary_lookup`]
    /// answers from it. Returns the number of (value, key) entries indexed. Errors:
    /// `Unsupported` on a branch, without a metadata table, with pending instants, for an
    /// existing index of that name or a column type without a known text form;
    /// `InvalidInput` for an unknown column or a bad name.
    pub async fn create_secondary_index(&self, name: &str, column: &str) -> Result<usize> {
        create_index::secondary(self, name, column).await
    }

    /// Creates the `column_stats` and/or `partition_stats` partitions of the metadata table in
    /// a transaction, computed from the latest file slices as Hudi computes them (columns: the
    /// table's `column_stats` definition, else Hudi's default rule); from then on every write,
    /// compaction, clean and delete-partition keeps them in step. Returns the number of records
    /// written. Errors: `Unsupported` on a branch, without a metadata table, with pending
    /// instants, or when a requested partition exists; `InvalidInput` when neither is asked.
    pub async fn create_stats_indexes(
        &self,
        column_stats: bool,
        partition_stats: bool,
    ) -> Result<usize> {
        create_index::stats(self, column_stats, partition_stats).await
    }

    /// A reader of the state of this handle's metadata root.
    pub async fn reader(&self) -> Result<TableReader> {
        TableReader::open_view(self.ctx.storage.clone()).await
    }
}

/// A commit whose writer stopped between its commit point and its completed file (or
/// publication `_SUCCESS`) is finished by the next opener, before main is resolved. Best effort:
/// an opener that cannot write leaves it to the next writer, whose locked step rolls it forward
/// first.
async fn roll_forward_on_open(storage: &Arc<dyn Storage>) {
    if let Err(e) = arbor_timeline::commit_point::roll_forward(storage).await {
        tracing::warn!(error = %e, "could not roll the last commit forward");
    }
}
