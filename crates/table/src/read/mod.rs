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
//!   of the admitted instants;
//! - log blocks count only when their instant is committed; a rollback command block
//!   invalidates the earlier blocks of its target instant.
//!
//! Partition filters prune before any file is read: only the partitions whose path values
//! match are listed (snapshot and read-optimized queries) and only their slices are read;
//! they are then applied to the rows read (see [`PartitionPruner`]).

mod datetime;
mod filter;
mod merge;
mod options;
mod ordering;
mod schema;
mod stream;

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use arbor_format::meta;
use arbor_fsview::{FileSlice, FileSystemView, PartitionListing, StorageListing};
use arbor_mdt::{MdtFilesListing, MetadataTable, FILES_PARTITION, MDT_META_DIR};
use arbor_storage::Storage;
use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::config::RecordMergeMode;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{resolve_main, InstantTime, TableConfig, TableLayout};
use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

pub use datetime::{parse_datetime, ParsedDateTime};
pub use filter::{FilterOp, PartitionFilter, PartitionPruner};
pub use merge::{merge_slice, LogPart, MergeMode};
pub use options::{ReadOptions, DEFAULT_BATCH_SIZE};
pub use ordering::{newer_wins, OrderKey};

use crate::error::{Result, TableError};
use stream::{SlicePlan, SliceReader};

/// How many partitions are listed at once by a filtered read.
const LISTING_CONCURRENCY: usize = 8;

/// Where a reader's file lists come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListingSource {
    /// The metadata table's FILES partition when the table lists it, else directory listing.
    #[default]
    Auto,
    /// Always directory listing.
    Storage,
    /// Always the metadata table (an error when the table has none).
    MetadataTable,
}

/// Reads one table (main) at the state it had when opened.
#[derive(Debug)]
pub struct TableReader {
    config: TableConfig,
    slices: SliceReader,
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
        let root = resolve_main(storage.as_ref()).await?;
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
        let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
        let use_mdt = match source {
            ListingSource::Storage => false,
            ListingSource::MetadataTable => true,
            ListingSource::Auto => {
                config.version().code() >= 8
                    && config
                        .metadata_partitions()
                        .iter()
                        .any(|p| p == FILES_PARTITION)
            }
        };
        let mut listing: Arc<dyn PartitionListing> = Arc::new(StorageListing::new(storage.clone()));
        // One timeline load serves both the FILES listing (its block-validity rule) and the
        // view: a write completing in between must not be seen by one and not the other
        // (writers plan against the view's completed instants).
        let history = TimelineHistory::load(storage.clone(), layout.clone())
            .await
            .map_err(TableError::from)?;
        if use_mdt {
            match MetadataTable::open_with(storage.clone(), history.active()).await? {
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
        let schema = schema::resolve_read_schema(&storage, &config, &view).await?;
        let ordering_field = config.ordering_fields().into_iter().next();
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
            },
        })
    }

    /// The read schema: meta columns (when the table populates them) then data columns.
    pub fn schema(&self) -> &SchemaRef {
        &self.slices.schema
    }

    /// The table config.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// The file-system view the reader plans with.
    pub fn view(&self) -> &FileSystemView {
        &self.slices.view
    }

    /// The schema of the batches [`TableReader::read`] returns for `options`: the requested
    /// columns in the requested order, else the read schema. An unknown column is
    /// [`TableError::InvalidInput`] naming it.
    pub fn output_schema(&self, options: &ReadOptions) -> Result<SchemaRef> {
        let schema = self.schema();
        let Some(columns) = options.get_columns() else {
            return Ok(schema.clone());
        };
        let fields = columns
            .iter()
            .map(|c| {
                schema
                    .field_with_name(c)
                    .map(|f| Arc::new(f.clone()))
                    .map_err(|_| unknown_column(schema, c))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(Schema::new(fields)))
    }

    /// The rows `options` select, as batches of at most `options.get_batch_size()` rows with
    /// the [`output_schema`](Self::output_schema). Empty batches are left out.
    pub async fn read(&self, options: ReadOptions) -> Result<Vec<RecordBatch>> {
        self.read_stream(options).await?.try_collect().await
    }

    /// [`TableReader::read`] as a stream: the query is planned (and partitions pruned) now, the
    /// file slices are read when the stream is polled, one at a time, so at most one merged
    /// slice is held in memory. Slices without log files to merge stream their base file's
    /// batches with the projection pushed down to the parquet reader.
    pub async fn read_stream(
        &self,
        options: ReadOptions,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let output = self.output_schema(&options)?;
        let pruner =
            PartitionPruner::new(&self.config, self.schema(), options.get_partition_filters())?;
        let view = &self.slices.view;
        let (slices, admitted) = match options.get_incremental() {
            Some((start, end)) => {
                if options.get_as_of().is_some() || options.is_read_optimized() {
                    return Err(TableError::InvalidInput {
                        column: None,
                        row: None,
                        reason: "an incremental query cannot be combined with as_of or \
                                 read_optimized"
                            .into(),
                    });
                }
                let inc = view
                    .completed_between(start, end)
                    .await
                    .map_err(TableError::from_fsview)?;
                let admitted: BTreeSet<String> = inc
                    .instants
                    .iter()
                    .map(|i| i.requested_time.to_string())
                    .collect();
                if admitted.is_empty() {
                    return Ok(futures::stream::empty().boxed());
                }
                let mut slices = Vec::new();
                for s in inc.file_slices {
                    if pruner.matches(&s.partition)? {
                        slices.push(s);
                    }
                }
                (slices, Some(admitted))
            }
            None => (
                self.pruned_slices(&pruner, options.get_as_of()).await?,
                None,
            ),
        };
        let work = self.work_schema(&options, admitted.is_some(), &pruner.row_columns())?;
        let projection = output
            .fields()
            .iter()
            .map(|f| {
                work.index_of(f.name())
                    .map_err(|_| unknown_column(&work, f.name()))
            })
            .collect::<Result<Vec<_>>>()?;
        let plan = Arc::new(SlicePlan {
            as_of: options.get_as_of().cloned(),
            base_only: options.is_read_optimized(),
            work,
            projection,
            admitted,
            batch_size: options.get_batch_size(),
            row_filter: (!pruner.is_empty()).then_some(pruner),
        });
        let reader = self.slices.clone();
        Ok(futures::stream::iter(slices)
            .map(move |slice| reader.clone().slice_stream(slice, plan.clone()))
            .flatten()
            .boxed())
    }

    /// The latest slices (as of `as_of`) of the partitions `pruner` keeps; only those
    /// partitions are listed.
    async fn pruned_slices(
        &self,
        pruner: &PartitionPruner,
        as_of: Option<&InstantTime>,
    ) -> Result<Vec<FileSlice>> {
        let view = &self.slices.view;
        if pruner.is_empty() {
            return view
                .latest_file_slices(None, as_of)
                .await
                .map_err(TableError::from_fsview);
        }
        let mut kept = Vec::new();
        for p in view
            .partitions()
            .await
            .map_err(TableError::from_fsview)?
            .iter()
        {
            if pruner.matches(p)? {
                kept.push(p.clone());
            }
        }
        let per_partition: Vec<Vec<FileSlice>> = futures::stream::iter(kept)
            .map(|p| async move {
                view.latest_file_slices(Some(&p), as_of)
                    .await
                    .map_err(TableError::from_fsview)
            })
            .buffered(LISTING_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(per_partition.into_iter().flatten().collect())
    }

    /// The columns read and merged for `options`: the output columns plus what the merge
    /// needs (record key, ordering field, `_hoodie_is_deleted`), the columns partition filters
    /// are applied to (`filtered`) and, for incremental queries, `_hoodie_commit_time`; in
    /// read-schema order.
    fn work_schema(
        &self,
        options: &ReadOptions,
        incremental: bool,
        filtered: &[&str],
    ) -> Result<SchemaRef> {
        let schema = self.schema();
        let Some(columns) = options.get_columns() else {
            return Ok(schema.clone());
        };
        let mut needed: HashSet<&str> = columns.iter().map(String::as_str).collect();
        needed.insert(meta::RECORD_KEY);
        needed.insert(meta::IS_DELETED);
        needed.extend(filtered.iter().copied());
        if let Some(f) = self.slices.ordering_field.as_deref() {
            needed.insert(f);
        }
        if incremental {
            needed.insert(meta::COMMIT_TIME);
        }
        let fields: Vec<_> = schema
            .fields()
            .iter()
            .filter(|f| needed.contains(f.name().as_str()))
            .cloned()
            .collect();
        Ok(Arc::new(Schema::new(fields)))
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

fn unknown_column(schema: &SchemaRef, column: &str) -> TableError {
    let known: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    TableError::InvalidInput {
        column: Some(column.to_string()),
        row: None,
        reason: format!("unknown column {column:?} (columns: {})", known.join(", ")),
    }
}
