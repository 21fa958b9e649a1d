//! The error type of arbor-lance.

use arbor_storage::StorageError;

/// An error reading or writing a Lance file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LanceError {
    /// The storage failed (missing file, I/O, permissions).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The file is not a Lance file arbor can read, or Lance could not decode or encode it.
    #[error("lance file {path}: {reason}")]
    Lance {
        /// Key of the file.
        path: String,
        /// What Lance reported.
        reason: String,
    },
    /// A column asked for or given does not fit the file (unknown name, unsupported type).
    #[error("lance file {path}: column {column:?}: {reason}")]
    Schema {
        /// Key of the file.
        path: String,
        /// The column.
        column: String,
        /// What is wrong.
        reason: String,
    },
    /// Moving arrays between Lance's arrow version and arbor's failed (a type one of them
    /// does not know).
    #[error("lance file {path}: passing arrays between arrow versions: {reason}")]
    Bridge {
        /// Key of the file.
        path: String,
        /// The arrow error.
        reason: String,
    },
}

/// The result type of arbor-lance.
pub type Result<T, E = LanceError> = std::result::Result<T, E>;

/// A [`LanceError::Lance`] for `path` from any displayable error.
pub(crate) fn lance_error(path: &str, err: impl std::fmt::Display) -> LanceError {
    LanceError::Lance {
        path: path.to_string(),
        reason: err.to_string(),
    }
}
