//! [`ArborSqlError`]: everything the provider, its factory and its sink can fail with, each
//! naming the table location, option, column or row at fault.

use datafusion::error::DataFusionError;

/// The errors of `arbor-datafusion`. Every variant names what it is about; converted into
/// [`DataFusionError::External`] at the DataFusion boundary, so a query's error message is this
/// one's.
#[derive(Debug, thiserror::Error)]
pub enum ArborSqlError {
    /// A table option is unknown, or its value is malformed or contradicts another option.
    #[error("table option {key:?}: {reason}")]
    InvalidOption {
        /// The option key as given.
        key: String,
        /// What is wrong, with the accepted values or keys.
        reason: String,
    },
    /// The table at `location` could not be opened, read or written.
    #[error("{location}: {source}")]
    Table {
        /// The table location.
        location: String,
        /// The table error.
        #[source]
        source: Box<arbor_table::TableError>,
    },
    /// A branch or tag of the table at `location` could not be resolved.
    #[error("{location}: {source}")]
    Branching {
        /// The table location.
        location: String,
        /// The branching error.
        #[source]
        source: Box<arbor_branching::BranchingError>,
    },
    /// The storage at `location` could not be opened or read.
    #[error("{location}: {source}")]
    Storage {
        /// The table location.
        location: String,
        /// The storage error.
        #[source]
        source: Box<arbor_storage::StorageError>,
    },
    /// A write was asked of a table opened read-only (at a tag, as of an instant, or as an
    /// incremental range).
    #[error("{location}: cannot write: {reason}")]
    ReadOnly {
        /// The table location.
        location: String,
        /// Why the table is read-only.
        reason: String,
    },
    /// DataFusion failed while the provider was being built.
    #[error(transparent)]
    DataFusion(Box<DataFusionError>),
    /// The rows of an INSERT cannot be written as given.
    #[error("{location}: INSERT: {reason}")]
    InvalidInsert {
        /// The table location.
        location: String,
        /// What is wrong with the rows, naming the column (and row).
        reason: String,
    },
}

/// `Result` with [`ArborSqlError`].
pub type Result<T, E = ArborSqlError> = std::result::Result<T, E>;

impl From<ArborSqlError> for DataFusionError {
    fn from(e: ArborSqlError) -> Self {
        match e {
            ArborSqlError::DataFusion(e) => *e,
            other => DataFusionError::External(Box::new(other)),
        }
    }
}

impl From<DataFusionError> for ArborSqlError {
    fn from(e: DataFusionError) -> Self {
        ArborSqlError::DataFusion(Box::new(e))
    }
}

impl ArborSqlError {
    /// A table error of the table at `location`.
    pub(crate) fn table(location: &str, source: arbor_table::TableError) -> Self {
        ArborSqlError::Table {
            location: location.to_string(),
            source: Box::new(source),
        }
    }

    /// A branching error of the table at `location`.
    pub(crate) fn branching(location: &str, source: arbor_branching::BranchingError) -> Self {
        ArborSqlError::Branching {
            location: location.to_string(),
            source: Box::new(source),
        }
    }

    /// A storage error of the table at `location`.
    pub(crate) fn storage(location: &str, source: arbor_storage::StorageError) -> Self {
        ArborSqlError::Storage {
            location: location.to_string(),
            source: Box::new(source),
        }
    }
}
