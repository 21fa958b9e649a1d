//! The [`LockProvider`] trait: a named, leased lock with fencing tokens.

use std::fmt::Debug;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::error::{LockError, LockHolder, LockResult};

pub mod file;
pub mod from_config;
pub mod held;
pub mod memory;
pub mod object;
#[cfg(feature = "postgres")]
pub mod postgres;
mod state;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

pub use state::LockState;

/// Where the default table lock keeps its state and fencing mark, relative to the table
/// (Hudi's `FileSystemBasedLockProvider` uses the same directory).
pub const TABLE_LOCK_DIR: &str = ".hoodie/.locks";

/// Where the default table lock keeps the durable copy of its fencing mark, relative to the
/// table: beside the table's commit record, outside the lock directory, so that deleting the
/// lock directory never lowers the tokens
/// ([`ObjectStoreLockProvider::with_durable_fence`](object::ObjectStoreLockProvider::with_durable_fence)).
pub const TABLE_DURABLE_FENCE_DIR: &str = ".hoodie/.commit";

/// Proof that the caller held lock `lock` from the moment of acquisition (or last renewal) until
/// `expires_at`, unless released earlier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The lock's name.
    pub lock: String,
    /// A unique id of this holder (one per acquisition).
    pub owner: String,
    /// Fencing token: strictly greater than the token of every earlier acquisition of this lock.
    /// Storage writes guarded by the lock can carry it so that a holder whose lease expired is
    /// recognised as stale.
    pub token: u64,
    /// When the lease lapses unless renewed.
    pub expires_at: DateTime<Utc>,
}

/// A named lock shared by many processes (and, for the distributed providers, many machines).
///
/// Contract (checked by `conformance::run_lock_suite`):
/// - **mutual exclusion**: while a lease is live (not released, not expired), no other
///   `acquire` of the same lock succeeds;
/// - **expiry**: a holder that neither renews nor releases loses the lock once `expires_at` has
///   passed; a later `acquire` then succeeds (a takeover);
/// - **fencing**: every successful `acquire` of a lock returns a token strictly greater than all
///   tokens returned before for that lock, across takeovers and restarts;
/// - `renew` and `release` succeed only for the current holder (same `owner` and `token`); for
///   anybody else they fail with [`LockError::NotHolder`] and change nothing.
///
/// Lock names are 1 to 128 characters of `[A-Za-z0-9._-]` ([`validate_lock_name`]).
#[async_trait]
pub trait LockProvider: Debug + Send + Sync + 'static {
    /// Acquires `lock` for `lease`, waiting at most `timeout`; fails with
    /// [`LockError::Timeout`] when it is still held by someone else at the deadline.
    ///
    /// Any durations are accepted: a lease longer than the provider's maximum (about 100 years
    /// for the providers of this crate) is clamped to it, and a timeout too far off to represent
    /// (such as `Duration::MAX`) means waiting until the lock is acquired.
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease>;

    /// Extends a live lease by `lease` from now. Fails with `NotHolder` if the lease has lapsed
    /// and someone else took the lock, or it was released.
    async fn renew(&self, held: &Lease, lease: Duration) -> LockResult<Lease>;

    /// Releases a live lease. Fails with `NotHolder` for a lease that is not the current one.
    async fn release(&self, held: &Lease) -> LockResult<()>;
}

/// Checks a lock name: 1 to 128 characters of `[A-Za-z0-9._-]`, not `.` or `..`.
pub fn validate_lock_name(lock: &str) -> LockResult<()> {
    let ok = !lock.is_empty()
        && lock.len() <= 128
        && lock != "."
        && lock != ".."
        && lock
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(LockError::InvalidName {
            lock: lock.to_string(),
            reason: "use 1 to 128 characters of [A-Za-z0-9._-]".to_string(),
        })
    }
}

/// Sleep between attempts of a contended acquire: grows from 2 ms to 50 ms.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(u64::from((2u32 << attempt.min(5)).min(50)))
}

/// When a waiting `acquire` gives up: `timeout` after it started. A timeout too large for
/// [`Instant`] (such as `Duration::MAX`) means waiting for ever rather than overflowing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    started: Instant,
    /// `None`: beyond what an `Instant` can represent, i.e. never.
    at: Option<Instant>,
}

impl Deadline {
    /// A deadline `timeout` from now.
    pub(crate) fn after(timeout: Duration) -> Self {
        let started = Instant::now();
        Deadline {
            started,
            at: started.checked_add(timeout),
        }
    }

    /// The time left at `now`, or `None` once the deadline has passed (a zero timeout has no
    /// time left from the start). An unrepresentable deadline always has `Duration::MAX` left.
    pub(crate) fn remaining(&self, now: Instant) -> Option<Duration> {
        match self.at {
            None => Some(Duration::MAX),
            Some(at) if now >= at => None,
            Some(at) => Some(at - now),
        }
    }

    /// The error for an `acquire` of `lock` that gave up at this deadline while `holder` held it.
    pub(crate) fn timeout_error(&self, lock: &str, holder: Option<LockHolder>) -> LockError {
        LockError::Timeout {
            lock: lock.to_string(),
            waited: self.started.elapsed(),
            holder,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_deadline_huge_timeout_never_passes() {
        let d = Deadline::after(Duration::MAX);
        let later = Instant::now() + Duration::from_secs(10 * 365 * 24 * 3600);
        assert_eq!(d.remaining(later), Some(Duration::MAX));
    }

    #[test]
    fn test_deadline_zero_timeout_has_no_time_left() {
        let d = Deadline::after(Duration::ZERO);
        assert_eq!(d.remaining(Instant::now()), None);
    }

    #[test]
    fn test_deadline_remaining_counts_down() {
        let d = Deadline::after(Duration::from_secs(60));
        let left = d.remaining(Instant::now()).unwrap();
        assert!(left <= Duration::from_secs(60) && left > Duration::from_secs(50));
        let past = Instant::now() + Duration::from_secs(61);
        assert_eq!(d.remaining(past), None);
    }
}
