//! The `extraMetadata` keys a merge commit records.

/// `extraMetadata` key: the merged source's label.
pub const MERGE_SOURCE: &str = "arbor.merge.source";
/// `extraMetadata` key: where the merge's compared changes started on the source.
pub const MERGE_SINCE: &str = "arbor.merge.since";
/// `extraMetadata` key: the strategy.
pub const MERGE_STRATEGY: &str = "arbor.merge.strategy";

/// `extraMetadata` keys the cleaner reads too (it keeps the states the next merge compares from).
pub use arbor_cleaner::merge_bases::{MERGE_SOURCE_ID, MERGE_SOURCE_INSTANT};
