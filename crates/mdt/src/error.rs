//! The error type of this crate.

use arbor_format::FormatError;
use arbor_fsview::FsViewError;
use arbor_storage::StorageError;
use arbor_timeline::TimelineError;

/// Result of a metadata-table operation.
pub type Result<T, E = MdtError> = std::result::Result<T, E>;

/// Everything reading the metadata table can fail with. Variants name the file (key relative
/// to the data table base) or the MDT partition concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MdtError {
    /// The storage underneath failed (the error names the key).
    #[error(transparent)]
    Storage(#[from] StorageError),

    /// Loading the MDT config or timeline failed (the error names the file).
    #[error(transparent)]
    Timeline(#[from] TimelineError),

    /// Building the MDT file-system view failed.
    #[error(transparent)]
    FsView(#[from] FsViewError),

    /// An HFile, log file or metadata record of the MDT could not be decoded.
    #[error("metadata table file {path}: {source}")]
    Format {
        /// The file, relative to the data table base.
        path: String,
        /// What the decoder reported.
        #[source]
        source: FormatError,
    },

    /// A file of the MDT is readable but its content is not what the format requires.
    #[error("metadata table file {path}: {reason}")]
    Invalid {
        /// The file, relative to the data table base.
        path: String,
        /// What is wrong.
        reason: String,
    },
}
