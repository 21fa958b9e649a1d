//! `arbor-table`: opening, creating, writing and reading Hudi tables.
//!
//! This crate will own the write client (COW and MOR), indexes, optimistic concurrency,
//! rollback, compaction and the snapshot/time-travel/incremental readers. It is not implemented
//! yet (issue 3); it exports nothing so that no caller can mistake it for working code.
