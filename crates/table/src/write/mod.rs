//! The write path's building blocks, used by the operations of [`crate::txn`]: options and
//! results, schema conformance, indexes, planning, file writers, the instant lifecycle,
//! rollback, compaction, and keeping the metadata table in step.
//!
//! Module map (each file one concept): `options.rs` (CreateOptions, WriteOptions,
//! RetryPolicy, WriteOperation, KeyMove, CommitResult), `schema.rs` / `convert.rs` (conforming input to the
//! table schema, exact casts), `partial.rs` (partial updates), `index.rs` (the Index trait and
//! the simple index), `known.rs` (locations a caller already knows, as an Index), `record_index.rs` (the record index as an Index, key moves),
//! `secondary_index.rs`, `stored_keys.rs` (record keys of stored rows, meta column or key
//! generator), `planner.rs` (assigning records to file groups, small-file
//! packing), `bucket_index.rs` (tables Java wrote with a bucket index: evidence, refusing new keys), `cow.rs` / `mor.rs` (writing base files / log files), `commit.rs` (the lock
//! helpers, heartbeats, ownership, commit metadata, the conflict check),
//! `partition_conflict.rs` (what an instant changed, for that check: file groups, and the
//! partitions a `DELETE_PARTITION` deletes), `log_conflict.rs` (merge-on-read log appends to
//! one file group that do not conflict: disjoint record keys, docs/concurrency.md), `mdt_sync.rs` (metadata-table deltacommits,
//! initialisation, repair), `rollback.rs`, `compaction.rs`.
//!
//! Public here are the types of the write API and two low-level table services, [`compaction`]
//! and [`rollback`], for tools that drive a service step by step (the interop harness, crash
//! tests); their functions expect the caller to hold the table lock. Everything else is
//! internal: state changes go through [`crate::Table`] and [`crate::Transaction`].

pub(crate) mod base_format;
pub(crate) mod bucket_index;
pub(crate) mod column_stats;
pub(crate) mod commit;
pub mod compaction;
pub(crate) mod convert;
pub(crate) mod cow;
pub(crate) mod history_scope;
pub(crate) mod index;
pub(crate) mod known;
pub mod log_compaction;
pub(crate) mod log_conflict;
pub(crate) mod markers;
pub(crate) mod mdt_sync;
pub(crate) mod mor;
pub(crate) mod options;
pub(crate) mod partial;
pub(crate) mod partition_conflict;
pub(crate) mod planner;
pub(crate) mod record_index;
pub(crate) mod repeated_keys;
pub mod rollback;
pub(crate) mod schema;
pub(crate) mod secondary_index;
pub(crate) mod stored_keys;
pub(crate) mod text;

pub use convert::cast_exact;
pub use index::{Index, RecordLocation, SimpleIndex};
pub use known::KnownLocations;
pub use mdt_sync::files_delta;
pub use options::{
    BaseFormat, CommitResult, CreateOptions, KeyMove, RetryPolicy, WriteOperation, WriteOptions,
};
pub use planner::Input;
pub use record_index::RecordIndex;
pub use schema::{storage_notes, storage_type, ConformOptions, SchemaChange, StorageNote};
pub use secondary_index::{secondary_lookup, table_entries};
pub use text::{cast_text_exact, is_number_text, parses_text_into};
