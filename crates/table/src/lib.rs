//! `arbor-table`: opening, creating, writing and reading Hudi tables.
//!
//! Built so far: key generation ([`keygen`]: record keys and partition paths from Arrow
//! batches) and the readers ([`read`]). The write client, indexes, optimistic concurrency,
//! rollback and compaction follow (issue 3).

mod error;
pub mod keygen;
pub mod read;
pub mod validate_indexes;
pub mod write;

pub use error::{Result, TableError};
pub use read::ListingSource;
pub use validate_indexes::validate_indexes;
pub use write::{
    cast_exact, secondary_lookup, storage_notes, storage_type, CommitResult, ConformOptions,
    CreateOptions, KeyMove, RecordIndex, SchemaChange, StorageNote, Table, WriteOperation,
    WriteOptions,
};
