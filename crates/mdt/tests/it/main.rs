//! Integration tests of `arbor-mdt`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod column_stats;
mod column_stats_fidelity;
mod files;
mod ranged_lookup;
mod record_index;
