//! What a read returns: [`ReadOptions`] (query type, projection, filters, batch size, data
//! skipping, parallelism).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_timeline::InstantTime;

use super::filter::PartitionFilter;

/// Rows per output batch unless [`ReadOptions::batch_size`] says otherwise.
pub const DEFAULT_BATCH_SIZE: usize = 8192;

/// Options of [`TableReader::read`](super::TableReader::read) and
/// [`TableReader::read_stream`](super::TableReader::read_stream), built by consuming methods:
///
/// ```
/// use arbor_table::read::{PartitionFilter, ReadOptions};
/// let options = ReadOptions::new()
///     .columns(["_hoodie_record_key", "fare"])
///     .filter(PartitionFilter::eq("city", "sf"))
///     .batch_size(1024);
/// assert_eq!(options.get_batch_size(), 1024);
/// ```
///
/// The default is a snapshot of the latest state, all columns, every partition. The query type
/// is a snapshot (optionally [`as_of`](Self::as_of)), a read-optimized query (base files only,
/// optionally as of an instant) or an [`incremental`](Self::incremental) query; an incremental
/// query combined with `as_of` or `read_optimized` is [`TableError::InvalidInput`](crate::TableError::InvalidInput)
/// when read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    as_of: Option<InstantTime>,
    columns: Option<Vec<String>>,
    partition_filters: Vec<PartitionFilter>,
    batch_size: usize,
    read_optimized: bool,
    incremental: Option<(Option<InstantTime>, Option<InstantTime>)>,
    data_skipping: bool,
    parallelism: usize,
    file_groups: Option<Arc<FileGroupSet>>,
}

/// File ids per partition path ([`ReadOptions::file_groups`]).
pub type FileGroupSet = BTreeMap<String, BTreeSet<String>>;

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            as_of: None,
            columns: None,
            partition_filters: Vec::new(),
            batch_size: DEFAULT_BATCH_SIZE,
            read_optimized: false,
            incremental: None,
            data_skipping: true,
            parallelism: super::parallel::default_parallelism(),
            file_groups: None,
        }
    }
}

impl ReadOptions {
    /// A snapshot of the latest state: all columns, every partition, batches of
    /// [`DEFAULT_BATCH_SIZE`] rows.
    pub fn new() -> Self {
        Self::default()
    }

    /// Time travel: the state as of `instant` (instants requested at or before it). An
    /// instant in the future is refused when the query is planned
    /// ([`TableReader::check_as_of`](crate::read::TableReader::check_as_of)).
    pub fn as_of(mut self, instant: InstantTime) -> Self {
        self.as_of = Some(instant);
        self
    }

    /// Time travel when `instant` is `Some`, else the latest state.
    pub fn as_of_opt(mut self, instant: Option<InstantTime>) -> Self {
        self.as_of = instant;
        self
    }

    /// Output exactly these columns (of the read schema, meta columns included), in this order.
    /// An unknown name is [`TableError::InvalidInput`](crate::TableError::InvalidInput) naming
    /// it when read.
    pub fn columns<I, S>(mut self, columns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.columns = Some(columns.into_iter().map(Into::into).collect());
        self
    }

    /// Adds a filter on any column or partition field (all filters must hold).
    pub fn filter(mut self, filter: PartitionFilter) -> Self {
        self.partition_filters.push(filter);
        self
    }

    /// Replaces the filters (all must hold).
    pub fn partition_filters(mut self, filters: Vec<PartitionFilter>) -> Self {
        self.partition_filters = filters;
        self
    }

    /// Most rows per output batch (0 counts as 1).
    pub fn batch_size(mut self, rows: usize) -> Self {
        self.batch_size = rows.max(1);
        self
    }

    /// Base files only (the read-optimized query of a merge-on-read table).
    pub fn read_optimized(mut self, enabled: bool) -> Self {
        self.read_optimized = enabled;
        self
    }

    /// An incremental query: the records written by instants that completed in
    /// `(start, end]` (`None`: open bound), in their latest state as of `end`. Bounds are
    /// completion times, as in Java Hudi (a write requested at `start` that completed after it
    /// is included).
    pub fn incremental(mut self, start: Option<InstantTime>, end: Option<InstantTime>) -> Self {
        self.incremental = Some((start, end));
        self
    }

    /// Whether the plan may skip files by the metadata table's statistics and indexes
    /// (column stats, partition stats, record index, secondary indexes; default true). With
    /// `false` only partition values prune. Either way the same rows are returned.
    pub fn data_skipping(mut self, enabled: bool) -> Self {
        self.data_skipping = enabled;
        self
    }

    /// How many file slices are read (decoded, merged) at once; default
    /// `std::thread::available_parallelism()`, 0 counts as 1. Any value returns the same
    /// batches in the same order; more slices in flight use more cores and more memory.
    pub fn parallelism(mut self, slices: usize) -> Self {
        self.parallelism = slices.max(1);
        self
    }

    /// Reads only these file groups (partition path -> file ids; groups absent or replaced in
    /// the state read are left out), planning only their slices: the plan's cost beyond the
    /// partitions' listings follows the groups named, not the table. Partition filters still
    /// apply; data skipping is not used. Not for incremental queries (refused when read).
    pub fn file_groups(mut self, groups: FileGroupSet) -> Self {
        self.file_groups = Some(Arc::new(groups));
        self
    }

    /// The file groups read ([`ReadOptions::file_groups`]; `None`: every one).
    pub fn get_file_groups(&self) -> Option<&FileGroupSet> {
        self.file_groups.as_deref()
    }

    /// How many file slices are read at once ([`ReadOptions::parallelism`]).
    pub fn get_parallelism(&self) -> usize {
        self.parallelism
    }

    /// Whether statistics and indexes may skip files ([`ReadOptions::data_skipping`]).
    pub fn is_data_skipping(&self) -> bool {
        self.data_skipping
    }

    /// The time-travel instant.
    pub fn get_as_of(&self) -> Option<&InstantTime> {
        self.as_of.as_ref()
    }

    /// The projection (`None`: every column of the read schema).
    pub fn get_columns(&self) -> Option<&[String]> {
        self.columns.as_deref()
    }

    /// The filters.
    pub fn get_partition_filters(&self) -> &[PartitionFilter] {
        &self.partition_filters
    }

    /// Most rows per output batch.
    pub fn get_batch_size(&self) -> usize {
        self.batch_size
    }

    /// Whether only base files are read.
    pub fn is_read_optimized(&self) -> bool {
        self.read_optimized
    }

    /// The incremental range, if this is an incremental query.
    pub fn get_incremental(&self) -> Option<(Option<&InstantTime>, Option<&InstantTime>)> {
        self.incremental
            .as_ref()
            .map(|(s, e)| (s.as_ref(), e.as_ref()))
    }
}
