//! Integration tests of arbor-format.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod avro_arrow;
mod base;
mod hfile;
mod hfile_ranged;
mod log;
mod robustness;
