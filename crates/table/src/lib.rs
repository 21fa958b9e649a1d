//! `arbor-table`: opening, creating, writing and reading Hudi tables.
//!
//! - [`keygen`]: record keys and partition paths from Arrow batches, as Java's key generators;
//! - [`read`]: the readers (snapshot, time travel, incremental, read-optimized, partition
//!   filters) of copy-on-write and merge-on-read tables;
//! - [`write`]: the write client ([`Table`]): create and open, writes under the table lock with
//!   optimistic concurrency, rollback of failed writes, compaction, the metadata table, the
//!   record and secondary indexes;
//! - [`validate_indexes`]: the indexes checked against the data.

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
