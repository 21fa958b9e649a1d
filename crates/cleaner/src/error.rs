//! The error type of this crate.

/// Result of a cleaner, savepoint or restore operation.
pub type Result<T, E = CleanerError> = std::result::Result<T, E>;

/// Everything table services can fail with; variants name the instant or file concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CleanerError {
    /// Storage failed.
    #[error(transparent)]
    Storage(#[from] arbor_storage::StorageError),
    /// The timeline or table config failed.
    #[error(transparent)]
    Timeline(#[from] arbor_timeline::TimelineError),
    /// The file-system view failed.
    #[error(transparent)]
    FsView(#[from] arbor_fsview::FsViewError),
    /// The metadata table failed.
    #[error(transparent)]
    Mdt(#[from] arbor_mdt::MdtError),
    /// A table operation (lock, rollback, metadata-table sync) failed.
    #[error(transparent)]
    Table(#[from] arbor_table::TableError),
    /// The request cannot be carried out in the table's current state (e.g. savepointing a
    /// pending instant, restoring past a newer savepoint); nothing was changed.
    #[error("{operation}: {reason}")]
    Refused {
        /// What was asked (`savepoint 2024...`, `restore to ...`, `clean`).
        operation: String,
        /// Why it is refused.
        reason: String,
    },
    /// A file on the timeline holds content that cannot be acted on safely.
    #[error("corrupt {path}: {reason}")]
    Corrupt {
        /// The file's key.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

impl CleanerError {
    /// A refusal of `operation` for `reason` (nothing was changed).
    pub fn refused(operation: impl Into<String>, reason: impl Into<String>) -> Self {
        CleanerError::Refused {
            operation: operation.into(),
            reason: reason.into(),
        }
    }
}
