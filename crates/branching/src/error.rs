//! The error type of this crate.

/// Result of a branching operation.
pub type Result<T, E = BranchingError> = std::result::Result<T, E>;

/// Everything branch and tag operations can fail with; variants name the file, branch or tag.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BranchingError {
    /// The timeline, config or a name check failed.
    #[error(transparent)]
    Timeline(#[from] arbor_timeline::TimelineError),
    /// A `branch.json` or tag definition cannot be read as one.
    #[error("invalid {path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}
