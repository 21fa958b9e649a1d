//! The CLI's error type: library errors plus usage errors, each printed as one line.

/// Anything a command can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad command-line input.
    #[error("{0}")]
    Usage(String),
    /// A storage failure.
    #[error(transparent)]
    Storage(#[from] arbor_storage::StorageError),
    /// The table lock provider could not be chosen or reached (`--lock`, the table's lock
    /// properties).
    #[error("table lock: {0}")]
    Lock(#[from] arbor_storage::LockError),
    /// A timeline failure (config, instants, archive).
    #[error(transparent)]
    Timeline(#[from] arbor_timeline::TimelineError),
    /// A table failure (create, open, write, read).
    #[error(transparent)]
    Table(#[from] arbor_table::TableError),
    /// A branch, tag or publication failure (names the branch or tag).
    #[error(transparent)]
    Branching(#[from] arbor_branching::BranchingError),
    /// An input file cannot be read or does not fit the table.
    #[error("{path}: {reason}")]
    Input {
        /// The input file as given on the command line.
        path: String,
        /// What is wrong, naming the column (and row) at fault where there is one.
        reason: String,
    },
    /// A failure concerning one table, prefixed with the table's location.
    #[error("{location}: {source}")]
    AtTable {
        /// The table location as given on the command line.
        location: String,
        /// What went wrong.
        #[source]
        source: Box<CliError>,
    },
    /// A state change on a table whose version arbor only reads (version 6): one line naming
    /// the command that converts it.
    #[error(
        "table version {version} (Hudi {release}) is read-only in arbor; run `arbor upgrade {location}` to convert it to version 9"
    )]
    ReadOnlyVersion {
        /// The table location as given on the command line.
        location: String,
        /// The table's version.
        version: u32,
        /// The Hudi release line that writes that version.
        release: &'static str,
    },
    /// A SQL statement failed (`arbor sql`): DataFusion's message, or arbor's when the
    /// provider failed.
    #[cfg(feature = "sql")]
    #[error("{0}")]
    Sql(String),
    /// Writing output failed.
    #[error("cannot write output: {0}")]
    Output(String),
}

/// Result of a command.
pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    /// A short name of what kind of failure this is, for `--json` errors: `usage`, `storage`,
    /// `lock`, `timeline`, `table`, `branching`, `input`, `read_only_version`, `sql` or
    /// `output` (an error about one table has the kind of its cause).
    pub fn kind(&self) -> &'static str {
        match self {
            CliError::Usage(_) => "usage",
            CliError::Storage(_) => "storage",
            CliError::Lock(_) => "lock",
            CliError::Timeline(_) => "timeline",
            CliError::Table(_) => "table",
            CliError::Branching(_) => "branching",
            CliError::Input { .. } => "input",
            CliError::AtTable { source, .. } => source.kind(),
            CliError::ReadOnlyVersion { .. } => "read_only_version",
            #[cfg(feature = "sql")]
            CliError::Sql(_) => "sql",
            CliError::Output(_) => "output",
        }
    }

    /// Wraps an error with the table location it concerns.
    pub fn at(location: &str, source: impl Into<CliError>) -> Self {
        let source = source.into();
        if let CliError::Table(arbor_table::TableError::ReadOnlyVersion { version, release }) =
            source
        {
            return CliError::ReadOnlyVersion {
                location: location.to_string(),
                version,
                release,
            };
        }
        CliError::AtTable {
            location: location.to_string(),
            source: Box::new(source),
        }
    }
}
