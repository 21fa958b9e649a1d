//! The `extraMetadata` keys a merge commit records.

/// `extraMetadata` key: the merged source's label.
pub const MERGE_SOURCE: &str = "arbor.merge.source";
/// `extraMetadata` key: the merged source's identity (`branchId`, or `main`).
pub const MERGE_SOURCE_ID: &str = "arbor.merge.sourceId";
/// `extraMetadata` key: the source instant the merge carried.
pub const MERGE_SOURCE_INSTANT: &str = "arbor.merge.sourceInstant";
/// `extraMetadata` key: where the merge's compared changes started on the source.
pub const MERGE_SINCE: &str = "arbor.merge.since";
/// `extraMetadata` key: the strategy.
pub const MERGE_STRATEGY: &str = "arbor.merge.strategy";
