//! How a reader opens a table: where its file lists come from ([`ListingSource`]), whether it
//! may use the process-wide cache ([`CacheMode`]), both in [`OpenOptions`].

/// Where a reader's file lists come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ListingSource {
    /// The metadata table's FILES partition when the table lists it, else directory listing.
    #[default]
    Auto,
    /// Always directory listing.
    Storage,
    /// Always the metadata table (an error when the table has none).
    MetadataTable,
    /// As [`ListingSource::Auto`], but the metadata table's FILES records are read one
    /// partition at a time, when a partition is first asked for: an open reads no listing,
    /// and a read of a few partitions (or of chosen file groups,
    /// [`ReadOptions::file_groups`](super::ReadOptions::file_groups)) decodes only theirs.
    /// Listing every partition reads the whole FILES partition, as `Auto` does at open.
    AutoPerPartition,
}

/// Whether an open may use the process-wide cache ([`crate::read::cache`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CacheMode {
    /// Use the cache (when [`crate::read::cache::set_enabled`] has not turned it off and the
    /// storage names a real location) and fill it on a miss.
    #[default]
    Shared,
    /// Load everything from storage and leave the cache untouched (cold paths, benchmarks).
    Bypass,
}

/// How [`TableReader::open_view_opts`](crate::read::TableReader::open_view_opts) opens a
/// table. The default lists files from [`ListingSource::Auto`] and uses the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OpenOptions {
    /// Where file lists come from.
    pub listing: ListingSource,
    /// Whether the process-wide cache is used.
    pub cache: CacheMode,
}

impl OpenOptions {
    /// The defaults: [`ListingSource::Auto`], [`CacheMode::Shared`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Lists files from `source`.
    pub fn listing(mut self, source: ListingSource) -> Self {
        self.listing = source;
        self
    }

    /// Uses the cache according to `mode`.
    pub fn cache(mut self, mode: CacheMode) -> Self {
        self.cache = mode;
        self
    }
}
