//! Readers to Arrow: snapshot, time travel, incremental and read-optimized queries, with
//! projection, partition filters and streaming ([`TableReader::read`],
//! [`TableReader::read_stream`], [`ReadOptions`]).
//!
//! Semantics follow hudi-rs 0.5.0 (the peer reader arbor is checked against):
//! - the read schema is the table's latest schema (`extraMetadata.schema` of the latest
//!   completed write, meta columns first), and every file's rows are shaped to it;
//! - time travel "as of T" sees instants whose requested time is `<= T`;
//! - an incremental query over `(start, end]` bounds completion times (table version 8 and
//!   later; requested times for version 6) and keeps the rows whose `_hoodie_commit_time` is one
//!   of the admitted instants (as Java Hudi's `hoodie.datasource.read.begin.instanttime`);
//! - log blocks count only when their instant is committed; a rollback command block
//!   invalidates the earlier blocks of its target instant.
//!
//! Partition filters prune before any file is read: only the partitions whose path values
//! match are listed (snapshot and read-optimized queries) and only their slices are read;
//! they are then applied to the rows read (see [`PartitionPruner`]).

mod as_of;
pub mod cache;
mod datetime;
mod filter;
mod merge;
mod options;
mod ordering;
mod parallel;
mod plan;
mod retained;
mod schema;
pub(crate) mod schema_history;
pub(crate) mod skipping;
mod source;
mod stream;
mod write_open;

use std::sync::Arc;

use arbor_fsview::{FileSlice, FileSystemView, PartitionListing, StorageListing};
use arbor_mdt::{MdtFilesListing, MdtScopedListing, MetadataTable, FILES_PARTITION, MDT_META_DIR};
use arbor_storage::Storage;
use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::config::RecordMergeMode;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{resolve_main, InstantTime, TableConfig, TableLayout};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use futures::stream::BoxStream;
use futures::TryStreamExt;

pub use datetime::{parse_datetime, parse_time, ParsedDateTime};
pub use filter::{FilterOp, PartitionFilter, PartitionPruner};
pub use merge::{merge_slice, LogPart, MergeMode};
pub use options::{FileGroupSet, ReadOptions, DEFAULT_BATCH_SIZE};
pub use ordering::{newer_wins, OrderKey};
pub use plan::{PartitionScan, ScanPlan};
pub use skipping::{PruningReport, SkipReason};
pub use source::{CacheMode, ListingSource, OpenOptions};

use crate::error::{Result, TableError};
use cache::{Lookup, ReaderState};
use stream::SliceReader;

/// Reads one table (main) at the state it had when opened.
///
/// Opening uses the process-wide [`cache`] unless told not to ([`OpenOptions::cache`]): the
/// state is then shared with the other handles of the process that opened the same table
/// location and metadata root, and is never older than the timeline as listed by this open.
#[derive(Debug)]
pub struct TableReader {
    config: TableConfig,
    slices: SliceReader,
    cache_use: CacheUse,
}

/// How a [`TableReader`]'s state was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CacheUse {
    /// Loaded from storage (cache bypassed, missed, or unusable).
    Loaded,
    /// The cached state, unchanged: the timeline had not moved since it was loaded.
    Hit,
    /// The cached state refreshed with the instants completed since (see [`cache`]).
    Refreshed,
}

impl TableReader {
    /// Opens main of the table whose base path `storage` is rooted at: config, timeline (active
    /// and archived) and the read schema. Main is resolved first ([`resolve_main`]): the root
    /// metadata until a publication, then the latest completed publication.
    pub async fn open(storage: Arc<dyn Storage>) -> Result<Self> {
        Self::open_with(storage, ListingSource::Auto).await
    }

    /// Opens main (resolved as [`TableReader::open`] does) listing files from `source`.
    pub async fn open_with(storage: Arc<dyn Storage>, source: ListingSource) -> Result<Self> {
        // A commit whose writer stopped between its commit point and its file took effect: the
        // opener finishes it first (best effort; a reader that cannot write leaves it to the
        // next writer).
        if let Err(e) = arbor_timeline::commit_point::roll_forward(&storage).await {
            tracing::warn!(error = %e, "could not roll the last commit forward");
        }
        let root = resolve_main(storage.as_ref()).await?;
        crate::open_hooks::adopt_java_drops_on_open(&storage, &root).await;
        Self::open_view_with(root.view(storage), source).await
    }

    /// Opens the metadata at `.hoodie/` of `storage` exactly as given, without resolving main:
    /// for a view of one metadata root ([`arbor_timeline::MetaRoot::view`], [`crate::Table::view_storage`]).
    pub async fn open_view(storage: Arc<dyn Storage>) -> Result<Self> {
        Self::open_view_with(storage, ListingSource::Auto).await
    }

    /// [`TableReader::open_view`] listing files from `source`.
    ///
    /// With [`ListingSource::Auto`] the FILES partition of the metadata table is used when the
    /// table lists `files` in `hoodie.table.metadata.partitions` (table version 8 and later)
    /// and directory listing otherwise; a listed but absent metadata table falls back to
    /// directory listing with a warning (as hudi-rs does), while a metadata table that exists
    /// but cannot be read fails the open.
    pub async fn open_view_with(storage: Arc<dyn Storage>, source: ListingSource) -> Result<Self> {
        Self::open_view_opts(storage, OpenOptions::new().listing(source)).await
    }

    /// [`TableReader::open_view_with`] with every open option: the listing source and whether
    /// the process-wide [`cache`] is used. With [`CacheMode::Shared`] (the default) the open
    /// lists the active timeline directory (and the metadata table's, when listing through
    /// it) and reuses the cached state only when nothing changed since it was loaded;
    /// otherwise it loads from storage and caches the result. Either way the reader answers
    /// exactly as a cold open at this moment would.
    pub async fn open_view_opts(storage: Arc<dyn Storage>, options: OpenOptions) -> Result<Self> {
        let source = options.listing;
        let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
        let use_mdt = match source {
            ListingSource::Storage => false,
            ListingSource::MetadataTable => true,
            ListingSource::Auto | ListingSource::AutoPerPartition => {
                config.version().code() >= 8
                    && config
                        .metadata_partitions()
                        .iter()
                        .any(|p| p == FILES_PARTITION)
            }
        };
        let key = match options.cache {
            CacheMode::Shared if cache::is_enabled() => cache::key(&storage, source),
            _ => None,
        };
        let Some(key) = key else {
            return Self::load(storage, config, layout, use_mdt, source).await;
        };
        match cache::lookup(&key, &storage, &config, &layout, use_mdt).await? {
            Lookup::Hit(state) => return Ok(Self::from_state(state, CacheUse::Hit)),
            Lookup::Stale { state, now } if !use_mdt && state.config == config => {
                match Self::refreshed(state, storage.clone()).await {
                    Ok(reader) => {
                        cache::insert(key, now, None, reader.state()).await;
                        return Ok(reader);
                    }
                    // The cold open below reports what is wrong, exactly as without cache.
                    Err(e) => tracing::debug!(error = %e, "refreshing the cached table failed"),
                }
            }
            Lookup::Stale { .. } | Lookup::Miss => {}
        }
        let mdt_dir = if use_mdt {
            match cache::mdt_timeline_dir(&storage).await {
                Ok(dir) => dir,
                // The cold open reports what is wrong with the metadata table.
                Err(_) => return Self::load(storage, config, layout, use_mdt, source).await,
            }
        } else {
            None
        };
        // Taken before loading: whatever completes during the load changes the listing, so
        // the next open reloads rather than trusting a state older than its fingerprint.
        let fingerprint =
            cache::fingerprint(&storage, &config, &layout, use_mdt, mdt_dir.as_deref()).await?;
        let reader = Self::load(storage, config, layout, use_mdt, source).await?;
        cache::insert(key, fingerprint, mdt_dir, reader.state()).await;
        Ok(reader)
    }

    /// Loads config, timeline, listing and schema from storage (no cache).
    async fn load(
        storage: Arc<dyn Storage>,
        config: TableConfig,
        layout: TableLayout,
        use_mdt: bool,
        source: ListingSource,
    ) -> Result<Self> {
        let mut listing: Arc<dyn PartitionListing> = Arc::new(StorageListing::new(storage.clone()));
        // One timeline load serves both the FILES listing (its block-validity rule) and the
        // view: a write completing in between must not be seen by one and not the other
        // (writers plan against the view's completed instants).
        let history = TimelineHistory::load(storage.clone(), layout.clone())
            .await
            .map_err(TableError::from)?;
        if use_mdt {
            match MetadataTable::open_with(storage.clone(), history.active()).await? {
                Some(mdt) if source == ListingSource::AutoPerPartition => {
                    listing = Arc::new(MdtScopedListing::new(Arc::new(mdt)))
                }
                Some(mdt) => listing = Arc::new(MdtFilesListing::load(&mdt).await?),
                None if source == ListingSource::MetadataTable => {
                    return Err(TableError::Corrupt {
                        path: MDT_META_DIR.to_string(),
                        reason: "the table has no metadata table".to_string(),
                    })
                }
                None => tracing::warn!(
                    "the table lists metadata partition files but has no metadata table; \
                     listing directories instead"
                ),
            }
        }
        let view = FileSystemView::from_history(storage.clone(), layout, history, listing)
            .await
            .map_err(TableError::from_fsview)?;
        TableReader::from_loaded_view(storage, config, view).await
    }

    /// A reader over a view just loaded: resolves the read schema and the merge mode from
    /// `config` (shared by every open path).
    pub(crate) async fn from_loaded_view(
        storage: Arc<dyn Storage>,
        config: TableConfig,
        view: FileSystemView,
    ) -> Result<Self> {
        let schema = schema::resolve_read_schema(&storage, &config, &view).await?;
        let (renamed, refusal) = schema_history::load(storage.as_ref()).await?.split();
        let ordering_field = config.ordering_fields().into_iter().next();
        let key_field = stream::plain_key_field(&config, &schema);
        let mode = match config.record_merge_mode()? {
            Some(RecordMergeMode::EventTimeOrdering) => Some(MergeMode::EventTime),
            Some(RecordMergeMode::CommitTimeOrdering) => Some(MergeMode::CommitTime),
            Some(RecordMergeMode::Custom) => None,
            None if ordering_field.is_some() => Some(MergeMode::EventTime),
            None => Some(MergeMode::CommitTime),
        };
        Ok(TableReader {
            config,
            slices: SliceReader {
                storage,
                view: Arc::new(view),
                schema,
                mode,
                ordering_field,
                renamed,
                refusal,
                key_field,
            },
            cache_use: CacheUse::Loaded,
        })
    }

    fn from_state(state: ReaderState, cache_use: CacheUse) -> Self {
        TableReader {
            config: state.config,
            slices: state.slices,
            cache_use,
        }
    }

    /// A cached state brought up to the timeline: the view forked and refreshed (only the
    /// partitions named by newly completed instants are listed again), the read schema
    /// resolved again.
    async fn refreshed(state: ReaderState, storage: Arc<dyn Storage>) -> Result<Self> {
        let mut view = state.slices.view.fork();
        view.refresh().await.map_err(TableError::from_fsview)?;
        let schema = schema::resolve_read_schema(&storage, &state.config, &view).await?;
        let mut slices = state.slices;
        (slices.renamed, slices.refusal) = schema_history::load(storage.as_ref()).await?.split();
        slices.view = Arc::new(view);
        slices.key_field = stream::plain_key_field(&state.config, &schema);
        slices.schema = schema;
        slices.storage = storage;
        Ok(TableReader {
            config: state.config,
            slices,
            cache_use: CacheUse::Refreshed,
        })
    }

    fn state(&self) -> ReaderState {
        ReaderState {
            config: self.config.clone(),
            slices: self.slices.clone(),
        }
    }

    /// True when this reader's state came from the process-wide [`cache`] as it was (after
    /// checking that the timeline had not changed).
    pub fn is_from_cache(&self) -> bool {
        self.cache_use == CacheUse::Hit
    }

    /// How this reader's state was obtained.
    pub fn cache_use(&self) -> CacheUse {
        self.cache_use
    }

    /// The read schema: meta columns (when the table populates them) then data columns.
    pub fn schema(&self) -> &SchemaRef {
        &self.slices.schema
    }

    /// The table config.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// The storage the reader reads through (rooted at the table base, or at the metadata
    /// root it was opened on): what [`ScanPlan::execute`] and
    /// [`ScanPlan::execute_partition`] take to read this reader's plans.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.slices.storage
    }

    /// Checks that time travel to `instant` reads a table that existed: an instant before the
    /// first completed write is [`TableError::InvalidInput`] naming both (a read as of it would
    /// silently return nothing). A table without completed writes accepts any instant.
    pub fn check_not_before_first(&self, instant: &InstantTime) -> Result<()> {
        let writes = self.slices.view.history().completed_writes();
        let Some(first) = writes.iter().map(|i| &i.requested_time).min() else {
            return Ok(());
        };
        if instant < first {
            return Err(TableError::InvalidInput {
                column: None,
                row: None,
                reason: format!(
                    "{instant} is before the table's first commit {first}; the table did not \
                     exist yet"
                ),
            });
        }
        Ok(())
    }

    /// Checks a time-travel instant a user gave: [`TableReader::check_not_before_first`],
    /// and not after the current time. An instant after this machine's current time (read on
    /// the table's instant-time clock, `hoodie.table.timeline.timezone`) and after the
    /// table's latest completed write would silently read the latest state: it is
    /// [`TableError::InvalidInput`] naming the instant, the current time and the latest
    /// commit. [`TableReader::plan`] refuses such an instant too.
    pub fn check_as_of(&self, instant: &InstantTime) -> Result<()> {
        self.check_not_before_first(instant)?;
        as_of::check_not_future(
            self.slices.view.history(),
            self.config.timeline_timezone(),
            instant,
        )
    }

    /// A warning for a read as of `instant` when the table's clock runs ahead of this
    /// machine (its latest commit time is after now) and `instant` is before that time: writes
    /// made before `instant` by the wall clock may carry later instant times and be left out.
    /// `None` when there is nothing to warn about. [`TableReader::plan`] logs the same note
    /// (target `arbor::as_of`, level WARN).
    pub fn as_of_clock_note(&self, instant: &InstantTime) -> Option<String> {
        as_of::clock_ahead_note(
            self.slices.view.history(),
            self.config.timeline_timezone(),
            instant,
        )
    }

    /// The file-system view the reader plans with.
    pub fn view(&self) -> &FileSystemView {
        &self.slices.view
    }

    /// The schema of the batches [`TableReader::read`] returns for `options`: the requested
    /// columns in the requested order, else the read schema. An unknown column is
    /// [`TableError::InvalidInput`] naming it.
    pub fn output_schema(&self, options: &ReadOptions) -> Result<SchemaRef> {
        plan::output_schema(self.schema(), options)
    }

    /// Plans the query `options` describe without reading any data file: the file slices
    /// per partition (partitions pruned by the filters), the merge mode, schemas, projection,
    /// predicate, as-of instant, incremental range and read-optimized flag
    /// ([`ScanPlan`]). Errors are those [`TableReader::read`] reports before reading; an
    /// as-of instant in the future is one ([`TableReader::check_as_of`]).
    pub async fn plan(&self, options: &ReadOptions) -> Result<ScanPlan> {
        plan::plan(&self.config, &self.slices, options).await
    }

    /// Executes `plan` (made by [`TableReader::plan`] of this reader, or of another reader of
    /// the same table) through this reader's storage.
    pub fn execute(&self, plan: ScanPlan) -> BoxStream<'static, Result<RecordBatch>> {
        plan.execute(self.slices.storage.clone())
    }

    /// The rows `options` select, as batches of at most `options.get_batch_size()` rows with
    /// the [`output_schema`](Self::output_schema). Empty batches are left out.
    pub async fn read(&self, options: ReadOptions) -> Result<Vec<RecordBatch>> {
        self.read_stream(options).await?.try_collect().await
    }

    /// [`TableReader::read`] as a stream: the query is planned (and partitions pruned) now, the
    /// file slices are read when the stream is polled, up to [`ReadOptions::parallelism`] at
    /// once (as tasks of the current tokio runtime), so memory is bounded by the slices in
    /// flight, never by the table. The batches are those of [`TableReader::read`], in the same
    /// order (partition, then file id), whatever the parallelism. Slices without log files to
    /// merge stream their base file's batches with the projection pushed down to the parquet
    /// reader; a slice with log files is merged whole, then cut into batches.
    pub async fn read_stream(
        &self,
        options: ReadOptions,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let plan = self.plan(&options).await?;
        Ok(self.execute(plan))
    }

    /// The latest state (`as_of == None`) or the state as of an instant (time travel by
    /// requested time), merged per file group.
    pub async fn snapshot(&self, as_of: Option<&InstantTime>) -> Result<Vec<RecordBatch>> {
        self.read(ReadOptions::new().as_of_opt(as_of.cloned()))
            .await
    }

    /// Base files only (read-optimized query of a merge-on-read table).
    pub async fn read_optimized(&self, as_of: Option<&InstantTime>) -> Result<Vec<RecordBatch>> {
        self.read(
            ReadOptions::new()
                .as_of_opt(as_of.cloned())
                .read_optimized(true),
        )
        .await
    }

    /// The records written by instants that completed in `(start, end]` (`None`: open bound),
    /// in their latest state as of `end`.
    pub async fn incremental(
        &self,
        start: Option<&InstantTime>,
        end: Option<&InstantTime>,
    ) -> Result<Vec<RecordBatch>> {
        self.read(ReadOptions::new().incremental(start.cloned(), end.cloned()))
            .await
    }

    /// One slice's log files merged without its base file: surviving rows (read schema), every
    /// delete record in log order, the instants of the blocks read (log compaction's input).
    pub(crate) async fn merge_log_only(
        &self,
        slice: &FileSlice,
    ) -> Result<(
        Option<RecordBatch>,
        Vec<arbor_format::log::DeleteRecord>,
        Vec<String>,
    )> {
        self.slices.merge_log_only(slice).await
    }

    /// Reads and merges one file slice with only the columns of `work`, a subset of the read
    /// schema in its order that keeps what the merge needs (record key, ordering field,
    /// `_hoodie_is_deleted`): the others are not decoded.
    pub(crate) async fn read_slice_columns(
        &self,
        slice: &FileSlice,
        work: &SchemaRef,
    ) -> Result<Option<RecordBatch>> {
        self.slices.read_slice(slice, None, false, work).await
    }

    /// Reads and merges one file slice (all columns of the read schema).
    pub async fn read_slice(
        &self,
        slice: &FileSlice,
        as_of: Option<&InstantTime>,
        base_only: bool,
    ) -> Result<Option<RecordBatch>> {
        self.slices
            .read_slice(slice, as_of, base_only, &self.slices.schema)
            .await
    }
}
