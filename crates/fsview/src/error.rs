//! The error type of this crate.

use arbor_storage::StorageError;
use arbor_timeline::TimelineError;

/// Result of a file-system view operation.
pub type Result<T, E = FsViewError> = std::result::Result<T, E>;

/// Everything the file-system view can fail with. Variants carry the path (relative to the table
/// base), the file name or the instant concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsViewError {
    /// The storage underneath failed.
    #[error(transparent)]
    Storage(#[from] StorageError),

    /// Loading or decoding the timeline failed (the error names the instant file).
    #[error(transparent)]
    Timeline(#[from] TimelineError),

    /// A name is not a base file or log file name (returned by the parsers; the view itself skips
    /// such names).
    #[error("invalid data file name {name:?}: {reason}")]
    InvalidFileName {
        /// The rejected file name.
        name: String,
        /// Why.
        reason: String,
    },

    /// A partition path is not acceptable (absolute, `.`/`..` segment, empty segment).
    #[error("invalid partition path {partition:?}: {reason}")]
    InvalidPartition {
        /// The rejected partition path.
        partition: String,
        /// Why.
        reason: String,
    },

    /// A [`crate::PartitionListing`] implementation failed for one partition (or, with an empty
    /// partition, while listing the partitions).
    #[error("listing partition {partition:?} failed: {source}")]
    Listing {
        /// The partition being listed (`""` for the partition list or the non-partitioned root).
        partition: String,
        /// What the implementation reported.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// An instant's content contradicts the view's expectations (e.g. a compaction plan without
    /// a file id).
    #[error("invalid content of instant {instant}: {reason}")]
    InvalidInstantContent {
        /// The instant, as `<time>.<action>.<state>`.
        instant: String,
        /// What is wrong.
        reason: String,
    },
}

impl FsViewError {
    pub(crate) fn file_name(name: &str, reason: impl Into<String>) -> Self {
        FsViewError::InvalidFileName {
            name: name.to_string(),
            reason: reason.into(),
        }
    }
}
