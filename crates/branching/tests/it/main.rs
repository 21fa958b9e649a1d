//! Integration tests of arbor-branching.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod base_pins;
mod basics;
mod clone_basics;
mod clone_clean;
mod clone_crash;
mod clone_deep;
mod clone_deep_crash;
mod clone_detach;
mod clone_detach_crash;
mod clone_detach_support;
mod clone_fixture;
mod clone_legacy_readers;
mod clone_ops;
mod clone_pins;
mod clone_race;
mod clone_s3;
mod clone_support;
mod cluster_tags;
mod concurrency;
mod crash;
mod distributed;
mod legacy;
mod maintain;
mod mdt_clean;
mod merge_crash;
mod merge_model;
mod merge_partitions;
mod model;
mod model_clones;
mod names;
mod rebase;
mod rebase_crash;
mod reclaim;
mod schema;
mod stall;
mod ttl_branch;
