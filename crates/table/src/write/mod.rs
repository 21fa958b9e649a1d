//! The write path: creating tables, writing Arrow batches as Hudi commits, optimistic
//! concurrency, rollback of failed writes, compaction.
//!
//! Module map (each file one concept): `options.rs` (CreateOptions, WriteOptions,
//! WriteOperation, CommitResult), `table.rs` (Table: create/open/write/delete_partitions),
//! `index.rs` (the Index trait and the simple index), `planner.rs` (assigning records to file
//! groups, small-file packing), `cow.rs` / `mor.rs` (writing base files / log files),
//! `commit.rs` (instant lifecycle, commit metadata, conflict check under the lock),
//! `rollback.rs`, `compaction.rs`.

pub mod commit;
pub mod compaction;
pub mod convert;
pub mod cow;
pub mod index;
pub mod mdt_sync;
pub mod mor;
pub mod options;
mod partial;
pub mod planner;
pub mod record_index;
pub mod rollback;
pub mod schema;
pub mod secondary_index;
pub mod table;

pub use convert::cast_exact;
pub use index::{Index, RecordLocation, SimpleIndex};
pub use options::{CommitResult, CreateOptions, WriteOperation, WriteOptions};
pub use record_index::{KeyMove, RecordIndex};
pub use schema::{storage_notes, storage_type, ConformOptions, SchemaChange, StorageNote};
pub use secondary_index::secondary_lookup;
pub use table::{PreparedWrite, Table};
