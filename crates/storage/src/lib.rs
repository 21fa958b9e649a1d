//! `arbor-storage`: everything arbor reads or writes goes through the [`Storage`] trait, and every
//! multi-step change that needs mutual exclusion goes through a [`LockProvider`].
//!
//! This crate knows nothing of Hudi. It offers:
//! - [`Storage`], a small async trait over `object_store` with the two conditional writes a table
//!   format needs for atomic commits: [`Storage::put_if_absent`] (create-if-absent) and
//!   [`Storage::put_if_match`] (compare-and-swap on a [`Version`]);
//! - backends for the local file system (the default) and memory, and behind cargo features S3
//!   (`s3`), Azure Blob (`azure`) and Google Cloud Storage (`gcs`), opened from a URL or a plain
//!   path by [`open_storage`] through a process-wide registry of [`StorageFactory`]s keyed by URL
//!   scheme, which other crates extend with [`register_storage_factory`]; [`StorageOptions`] holds
//!   their options, namespaced per backend (`s3.*`, `azure.*`, `gs.*`);
//! - [`LockProvider`], a leased lock with fencing tokens, with in-process, local-file,
//!   object-store, (feature `postgres`) PostgreSQL and (feature `zookeeper`) ZooKeeper
//!   implementations, chosen by URL ([`lock_provider_from_url`]) or by Hudi's lock configuration
//!   ([`lock_provider_from_hudi_config`]); a process-wide registry of held leases
//!   ([`TrackedLockProvider`], [`release_held_leases`]) lets a process release its locks on exit;
//! - [`FaultInjectingStorage`], a wrapper that fails or "crashes" at the N-th operation, for crash
//!   sweeps;
//! - [`PrefixedStorage`], the subtree under a key prefix as a storage of its own (the Hudi
//!   metadata table under `.hoodie/metadata`);
//! - (feature `conformance`) the suites every `Storage` and `LockProvider` implementation runs.

mod backends;
mod durable;
mod error;
mod factory;
mod fault;
mod location;
mod lock;
mod object;
mod options;
mod path;
mod prefixed;
mod registry;
mod storage;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use error::{LockError, LockHolder, LockResult, Result, StorageError};
pub use factory::StorageFactory;
pub use fault::{FaultInjectingStorage, FaultMode, OpKind, OpRecord};
pub use location::bucket_and_prefix;
#[cfg(feature = "postgres")]
pub use lock::postgres::PostgresLockProvider;
#[cfg(feature = "zookeeper")]
pub use lock::zookeeper::ZookeeperLockProvider;
pub use lock::{
    file::FileLockProvider,
    from_config::{
        lock_provider_from_hudi_config, lock_provider_from_url, ACCEPTED_HUDI_PROVIDERS,
        ACCEPTED_LOCK_URLS, HUDI_LOCK_PROVIDER, HUDI_ZK_BASE_PATH, HUDI_ZK_LOCK_KEY, HUDI_ZK_PORT,
        HUDI_ZK_SESSION_TIMEOUT_MS, HUDI_ZK_URL, TABLE_LOCK_DIR,
    },
    held::{held_leases, release_held_leases, TrackedLockProvider},
    memory::InProcessLockProvider,
    object::ObjectStoreLockProvider,
    validate_lock_name, Lease, LockProvider, LockState, TABLE_DURABLE_FENCE_DIR,
};
pub use object::ObjectStoreStorage;
pub use options::{normalize_key, OptionSpec, StorageOptions};
pub use path::validate_key;
pub use prefixed::PrefixedStorage;
pub use registry::{open_storage, register_storage_factory, registered_schemes};
pub use storage::{ListPage, ObjectMeta, Storage, StorageExt, Version, MAX_DELETE_BATCH};
