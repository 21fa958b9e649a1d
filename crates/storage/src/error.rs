//! The error types of this crate.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// A boxed source error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result of a storage operation.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Result of a lock operation.
pub type LockResult<T, E = LockError> = std::result::Result<T, E>;

/// Everything a [`crate::Storage`] operation can fail with. Every variant names the key (path
/// relative to the storage root) or URL it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The object does not exist.
    #[error("not found: {path}")]
    NotFound {
        /// Key of the missing object.
        path: String,
    },
    /// A create-if-absent write found an object already there.
    #[error("already exists: {path}")]
    AlreadyExists {
        /// Key of the existing object.
        path: String,
    },
    /// A compare-and-swap write found a different version than expected (or no object).
    #[error("precondition failed (object changed since it was read): {path}")]
    PreconditionFailed {
        /// Key of the object.
        path: String,
    },
    /// A key is not acceptable (empty segment, `.`/`..`, absolute, control characters ...).
    #[error("invalid key {path:?}: {reason}")]
    InvalidKey {
        /// The rejected key.
        path: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A storage URL or option could not be understood.
    #[error("invalid storage location {url:?}: {reason}")]
    InvalidLocation {
        /// The URL or path given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A request argument is out of range (e.g. more than [`crate::MAX_DELETE_BATCH`] keys).
    #[error("invalid argument for {operation}: {reason}")]
    InvalidArgument {
        /// The operation.
        operation: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The backend cannot perform this operation.
    #[error("{operation} is not supported by {backend}")]
    NotSupported {
        /// The operation.
        operation: &'static str,
        /// The backend's name.
        backend: String,
    },
    /// A fault injected by [`crate::FaultInjectingStorage`].
    #[error("injected fault at operation #{index} ({operation} {path})")]
    Injected {
        /// Zero-based index of the operation that failed.
        index: usize,
        /// The operation.
        operation: &'static str,
        /// The key it concerned.
        path: String,
    },
    /// The local backend gave up waiting for the OS file lock that serialises the mutations of
    /// one object: another process held it for the whole timeout
    /// ([`crate::ObjectStoreStorage::with_local_lock_timeout`]). A process that is stopped
    /// (`SIGSTOP`, a debugger) or hung inside its few-microsecond critical section keeps the lock
    /// until it resumes or exits. Nothing was changed; the operation can be retried.
    #[error(
        "{operation} {path}: timed out after {:.1} s waiting for the lock file {}; another \
         process holds it (a stopped or hung process keeps it until it resumes or exits)",
        .waited.as_secs_f64(),
        .lock_file.display()
    )]
    LockTimeout {
        /// The operation.
        operation: &'static str,
        /// The key it concerned.
        path: String,
        /// The lock file on the local file system.
        lock_file: std::path::PathBuf,
        /// How long the operation waited.
        waited: Duration,
    },
    /// Any other failure of the backend, with its source.
    #[error("storage error during {operation} on {path}: {source}")]
    Backend {
        /// The operation.
        operation: &'static str,
        /// The key it concerned.
        path: String,
        /// The backend's error.
        #[source]
        source: BoxError,
    },
}

impl StorageError {
    /// True when the object was not found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, StorageError::NotFound { .. })
    }

    /// True when a conditional write lost: the object already existed or had changed.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            StorageError::AlreadyExists { .. } | StorageError::PreconditionFailed { .. }
        )
    }
}

/// Who holds a lock, as a waiter that gave up saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// The holder's owner id (unique per acquisition).
    pub owner: String,
    /// The holder's fencing token.
    pub token: u64,
    /// When the holder's lease lapses unless renewed, when the provider knows it.
    pub expires_at: Option<DateTime<Utc>>,
}

impl fmt::Display for LockHolder {
    /// `writer <owner> (token <n>) until <RFC 3339 time>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "writer {} (token {})", self.owner, self.token)?;
        if let Some(at) = self.expires_at {
            write!(
                f,
                " until {}",
                at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            )?;
        }
        Ok(())
    }
}

/// `held by <holder>` or, when the provider could not tell, `holder unknown`.
fn describe_holder(holder: Option<&LockHolder>) -> String {
    match holder {
        Some(h) => format!("held by {h}"),
        None => "holder unknown".to_string(),
    }
}

/// Everything a [`crate::LockProvider`] operation can fail with. Every variant names the lock.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock could not be acquired before the timeout.
    #[error(
        "timed out after {:.1} s waiting for lock {lock:?}, {}",
        .waited.as_secs_f64(),
        describe_holder(.holder.as_ref())
    )]
    Timeout {
        /// The lock's name.
        lock: String,
        /// How long the caller waited.
        waited: Duration,
        /// The current holder, when known.
        holder: Option<LockHolder>,
    },
    /// The caller does not hold the lock (it expired and was taken over, was released, or never
    /// belonged to the caller).
    #[error("lock {lock:?} is not held by {owner:?} with token {token}")]
    NotHolder {
        /// The lock's name.
        lock: String,
        /// The owner the caller claimed to be.
        owner: String,
        /// The fencing token the caller presented.
        token: u64,
    },
    /// A lock name is not acceptable.
    #[error("invalid lock name {lock:?}: {reason}")]
    InvalidName {
        /// The rejected name.
        lock: String,
        /// Why.
        reason: String,
    },
    /// A lock provider was named (by URL or configuration) that does not exist or is not
    /// configured completely.
    #[error("lock provider {given:?}: {reason}")]
    InvalidProvider {
        /// The URL or setting given.
        given: String,
        /// What is wrong, naming the accepted forms.
        reason: String,
    },
    /// The stored state of the lock could not be read.
    #[error("corrupt state for lock {lock:?}: {reason}")]
    Corrupt {
        /// The lock's name.
        lock: String,
        /// What is wrong.
        reason: String,
    },
    /// The storage under an object-store or file lock failed.
    #[error("storage failure on lock {lock:?}: {source}")]
    Storage {
        /// The lock's name.
        lock: String,
        /// The storage error.
        #[source]
        source: StorageError,
    },
    /// The lock service (e.g. PostgreSQL) or the OS failed.
    #[error("lock service failure on lock {lock:?}: {source}")]
    Backend {
        /// The lock's name.
        lock: String,
        /// The underlying error.
        #[source]
        source: BoxError,
    },
}
