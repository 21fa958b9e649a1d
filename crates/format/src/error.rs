//! The error type of this crate.

use arbor_storage::StorageError;

/// Result of a format operation.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;

/// Everything reading or writing file contents can fail with. Variants name the file (key
/// relative to the table base, or a description for in-memory data) and, for log files, the
/// byte offset of the block.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The storage underneath failed.
    #[error(transparent)]
    Storage(#[from] StorageError),

    /// A log block is corrupt (bad magic, impossible length, wrong reverse pointer, ...).
    #[error("corrupt log block in {path} at offset {offset}: {reason}")]
    CorruptBlock {
        /// The log file.
        path: String,
        /// Byte offset of the block's magic.
        offset: u64,
        /// What is wrong.
        reason: String,
    },

    /// A log block type or content version arbor does not read.
    #[error("unsupported log block in {path} at offset {offset}: {reason}")]
    UnsupportedBlock {
        /// The log file.
        path: String,
        /// Byte offset of the block.
        offset: u64,
        /// What is unsupported.
        reason: String,
    },

    /// Avro data could not be decoded or encoded.
    #[error("avro error in {path}: {reason}")]
    Avro {
        /// The file (or what was being converted).
        path: String,
        /// What went wrong.
        reason: String,
    },

    /// Parquet data could not be read or written.
    #[error("parquet error in {path}: {reason}")]
    Parquet {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },

    /// Lance data could not be read or written.
    #[error("lance error in {path}: {reason}")]
    Lance {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },

    /// Arrow data could not be built or converted.
    #[error("arrow error in {path}: {reason}")]
    Arrow {
        /// The file (or what was being converted).
        path: String,
        /// What went wrong.
        reason: String,
    },

    /// A schema is invalid or cannot be mapped (Avro <-> Arrow), naming the field.
    #[error("schema error{}: {reason}", field.as_ref().map(|f| format!(" in field {f:?}")).unwrap_or_default())]
    Schema {
        /// The offending field, when one is at fault.
        field: Option<String>,
        /// What is wrong.
        reason: String,
    },

    /// An HFile (MDT base file or HFILE_DATA log block content) is corrupt, truncated or uses
    /// a feature arbor does not read, or an HFile could not be written.
    #[error("hfile error in {path}: {reason}")]
    HFile {
        /// The file (or a description of in-memory content).
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// A file format arbor does not read (ORC or HFile base files; Lance ones without the
    /// `lance` feature).
    #[error("unsupported file format of {path}: {reason}")]
    UnsupportedFormat {
        /// The file.
        path: String,
        /// What is unsupported.
        reason: String,
    },
}
