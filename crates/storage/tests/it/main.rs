//! Integration tests of `arbor-storage`: the conformance suites on every backend (local, memory,
//! S3 via moto, Azure via Azurite), fault-injection crash sweeps and lock providers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
#![allow(missing_docs)]

mod azure;
mod local_backend;
mod lock_state_loss;
mod locks;
mod locks_zookeeper;
mod prefixed;
mod storage_backends;
mod support;
