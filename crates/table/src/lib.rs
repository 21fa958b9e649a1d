//! `arbor-table`: opening, creating, writing and reading Hudi tables.
//!
//! [`Table`] is the handle writers use: every state change is an operation of [`txn`] that
//! runs its locked steps through one [`Transaction`] (the commit protocol: lock, rollback of
//! failed writes, main-moved check, instant and heartbeat, MDT deltacommit, conflict check,
//! completion). [`write`](mod@write) holds the write path's building blocks (options, schema
//! conformance, indexes, planner, file writers, rollback, compaction), [`read`] the readers,
//! [`keygen`] record keys and partition paths from Arrow batches, [`ttl`] partition TTL
//! policies and their evaluation.
//!
//! Modules: [`txn`] (the Transaction and one file per operation), [`write`](mod@write) (the
//! write path's building blocks), [`read`] (snapshot, time travel, incremental and
//! read-optimized readers, partition filters, the scan plan and the process-wide cache),
//! [`keygen`] (record keys and partition paths, as Java's key generators) and
//! [`validate_indexes`] (the indexes checked against the data).

pub mod cluster;
pub mod doctor;
mod error;
pub mod keygen;
mod open_hooks;
pub mod read;
mod table;
pub mod ttl;
pub mod txn;
pub mod validate_indexes;
pub mod write;

pub use error::{Result, TableError};
pub use read::ListingSource;
pub use txn::context::Table;
pub use txn::upgrade::{TableUpgrade, UpgradeReport};
pub use txn::{Fragment, PreparedWrite, Transaction, WriteContext, WriteTransaction};
pub use validate_indexes::validate_indexes;
pub use write::{
    cast_exact, cast_text_exact, is_number_text, parses_text_into, secondary_lookup, storage_notes,
    storage_type, BaseFormat, CommitResult, ConformOptions, CreateOptions, KeyMove, KnownLocations,
    RecordIndex, RetryPolicy, SchemaChange, StorageNote, WriteOperation, WriteOptions,
};
