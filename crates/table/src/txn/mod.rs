//! State changes of a table: the [`Transaction`] that owns the commit protocol, and the
//! operations built on it, one file each.
//!
//! # The protocol
//!
//! Every locked step of every operation is run by `Transaction::run` (inside this crate) or
//! [`crate::Table::transact`] (outside it), the only code that takes the table lock (through
//! `write::commit::with_lock`, which renews the lease while the step runs). A step is entered
//! in one of four ways (`transaction::Entry`):
//! - *begin* (every new state change): check that main has not moved for a handle opened as
//!   main ([`crate::TableError::MainMoved`]), then roll back failed writes (pending writes
//!   whose writer's heartbeat lapsed) and finish unfinished rollbacks;
//! - *service* (compaction, which leaves pending writes alone): the main-moved check only;
//! - *resume* (the commit of an instant a *begin* step started): the main-moved check; when
//!   main moved the instant is rolled back, as it can never complete there;
//! - *abort* (removing this writer's own instant after a failure): the lock only.
//!
//! A write (spec 2.3) then runs in two locked steps with the data files written in between:
//! 1. the input is validated (schema, keys, non-empty) before anything is written;
//! 2. *begin*, then `Transaction::start_instant`: refuse while a restore is pending, take an
//!    instant time, write the heartbeat (renewed in the background every third of
//!    `heartbeat_timeout` until the write commits or is dropped) and create
//!    `<t>.<action>.requested`;
//! 3. without the lock: index lookup, planning, base and log files, then (after checking
//!    the requested file still exists: a rollback by another writer deletes it)
//!    `<t>.<action>.inflight` with the workload profile (`write`);
//! 4. *resume*: ownership (the instant is still requested and inflight, no rollback names
//!    it, its heartbeat is live; else [`crate::TableError::InstantRolledBack`] and what is
//!    left of the write is removed), the conflict check against writes completed since the
//!    plan (a shared file group, or a partition one of the two deletes with
//!    `DELETE_PARTITION` while the other wrote to it: `write::partition_conflict`; else the
//!    instant is rolled back and [`crate::TableError::CommitConflict`]), the
//!    MDT deltacommit, then the completed instant created if absent with a completion time
//!    after every time on the timeline: the commit point (`prepared`);
//! 5. inline compaction of merge-on-read tables, when configured (`compact`).
//!
//! # Files
//!
//! `context.rs` ([`Table`](crate::Table) and its `context::TableContext`: storage,
//! metadata root, config, layout, lock provider, instant generator, options, schema; the
//! main-moved and restore checks), `transaction/` ([`Transaction`], with its tests),
//! `create.rs`, and one file per operation: `write.rs` (validate, prepare), `prepared.rs`
//! ([`PreparedWrite`] and its commit, shared by every write-like operation),
//! `retry.rs` ([`crate::Table::write`]'s retries of a write that lost a race, with backoff),
//! `delete_partitions.rs`, `compact.rs` (incl. inline compaction), `init_metadata_table.rs`,
//! `create_index.rs` (record and secondary indexes), `ttl.rs` (partition TTL runs and policy
//! changes), `upgrade.rs` (`arbor upgrade`: version 6
//! or 8 to 8 or 9, crash-safe); `writable.rs` holds the checks that refuse a state change on a
//! table arbor only reads (version 6, unsupported merge settings). `crate::table` holds the
//! methods of
//! [`Table`](crate::Table), each forwarding to one of these.
//!
//! # Adding an operation
//!
//! A new operation (partition TTL, shallow clone, ...) is a new file here with a function
//! taking `&Table`, forwarded to by one method of [`crate::Table`]. It runs each of its locked
//! steps through `Transaction::run` (`Entry::Begin` for a new state change) and makes its
//! changes with the transaction's methods (timeline, instant start, rollback, MDT records,
//! property mirroring); a write-like operation builds a [`PreparedWrite`] as
//! `delete_partitions.rs` does and completes it with `prepared::commit`, so the commit point
//! stays in one place. It never takes the lock or rolls back failed writes itself.

pub(crate) mod cluster;
pub(crate) mod compact;
pub(crate) mod context;
pub(crate) mod create;
pub(crate) mod create_index;
pub(crate) mod delete_partitions;
pub(crate) mod distributed;
pub(crate) mod fragment;
pub(crate) mod init_metadata_table;
pub(crate) mod prepared;
pub(crate) mod retry;
pub(crate) mod route;
pub(crate) mod stream_files;
pub(crate) mod stream_pool;
pub(crate) mod transaction;
pub mod ttl;
pub mod upgrade;
pub(crate) mod writable;
pub(crate) mod write;
pub(crate) mod write_files;
pub(crate) mod write_reread;
pub(crate) mod write_stream;

pub use distributed::WriteTransaction;
pub use fragment::{Fragment, WriteContext};
pub use prepared::PreparedWrite;
pub use transaction::Transaction;
