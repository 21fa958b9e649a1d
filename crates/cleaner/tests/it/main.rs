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
mod failed_writes;
mod mdt_archive;
mod model;
mod partition_reclaim;
mod partition_reclaim_crash;
mod partition_reclaim_fixtures;
mod restore;
mod retention_union;
mod ttl_model;
