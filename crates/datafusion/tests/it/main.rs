//! Integration tests of arbor-datafusion: SQL over arbor's tables and Spark's fixtures, equal to
//! arbor's reader and hudi-rs; refs (branch, tag, as-of, incremental); pruning; INSERT INTO.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod fixtures;
mod insert;
mod insert_types;
mod pruning;
mod refs;
mod support;
