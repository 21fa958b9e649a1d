//! Integration tests of `arbor-fsview` (one binary; one module per topic).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod synthetic;

mod golden;
mod robustness;
mod view;
