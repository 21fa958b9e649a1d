//! Integration tests of `arbor-timeline` (one binary; one module per topic).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod active;
mod archive;
mod avro_fixtures;
mod config;
mod generator;
mod peer;
