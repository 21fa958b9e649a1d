//! Conformance suites (feature `conformance`): every [`crate::Storage`] and
//! [`crate::LockProvider`] implementation's tests call these, so all backends are held to one
//! contract. A failing check panics with a message naming the backend and the property broken;
//! these functions are test code and are only compiled with the feature.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod lock;
mod lock_recovery;
mod storage;

pub use lock::run_lock_suite;
pub use lock_recovery::run_object_lock_recovery_suite;
pub use storage::run_storage_suite;
