//! Integration tests of arbor-lance: every Spark-written Lance base file of the fixtures reads
//! (rows, schema, Hudi's metadata), and arbor's own files round-trip.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod fixtures;
mod round_trip;
