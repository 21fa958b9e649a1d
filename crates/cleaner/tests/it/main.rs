//! Integration tests of arbor-cleaner.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod branches;
mod clean;
mod column_stats;
mod crash;
mod model;
mod restore;
