//! [`InProcessLockProvider`]: locks shared by the tasks and threads of one process.
//!
//! This file also holds the [`LockState`] transitions (grant, renew, release) that the in-process,
//! file and object-store providers share: each of them reads a `LockState`, applies one transition
//! under its own mutual exclusion (a mutex, an OS file lock, a compare-and-swap) and stores it back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{backoff, validate_lock_name, Lease, LockProvider, LockState};
use crate::error::{LockError, LockResult};

/// The longest lease granted; longer requests are clamped to it (about 100 years).
pub(super) const MAX_LEASE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A lock space kept in memory: mutual exclusion between the tasks and threads of one process.
///
/// Clones share the same lock space (the state lives behind an `Arc`), so handing a clone to each
/// task behaves like handing them one provider. Expiry follows the wall clock ([`Utc::now`]); a
/// waiter is woken as soon as the lock is released and otherwise re-checks when the holder's lease
/// lapses. Nothing survives the process, so fencing tokens restart at 1 in a new process.
#[derive(Debug, Clone, Default)]
pub struct InProcessLockProvider {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    locks: Mutex<HashMap<String, LockState>>,
    released: Notify,
}

impl InProcessLockProvider {
    /// Creates an empty lock space.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `f` on the state of `lock` (a free state if the lock was never taken) under the mutex.
    fn with_state<R>(&self, lock: &str, f: impl FnOnce(&mut LockState) -> R) -> R {
        // A panic while the mutex was held cannot leave a `LockState` half-changed (transitions
        // assign whole fields), so a poisoned mutex is still usable.
        let mut locks = self
            .shared
            .locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let state = locks
            .entry(lock.to_string())
            .or_insert_with(LockState::free);
        f(state)
    }
}

#[async_trait]
impl LockProvider for InProcessLockProvider {
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease> {
        validate_lock_name(lock)?;
        let started = Instant::now();
        let deadline = started + timeout;
        let mut attempt = 0u32;
        loop {
            // Register for the release notification before looking, so that a release between
            // the look and the wait is not missed.
            let released = self.shared.released.notified();
            let (grant, holder_expiry) = self.with_state(lock, |state| {
                let expiry = state.expires_at;
                (state.try_grant(lock, Utc::now(), lease), expiry)
            });
            let holder = match grant? {
                Grant::Granted(held) => return Ok(held),
                Grant::Held { holder } => holder,
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(timeout_error(lock, started.elapsed(), holder));
            }
            // Wake at the release notification, when the holder's lease lapses, or at the
            // deadline, whichever comes first; the backoff bounds the wait in case the clock
            // jumps.
            let until_expiry = holder_expiry
                .and_then(|exp| (exp - Utc::now()).to_std().ok())
                .unwrap_or_default();
            let nap = until_expiry
                .max(backoff(attempt))
                .min(deadline.saturating_duration_since(now));
            attempt = attempt.saturating_add(1);
            tokio::select! {
                () = released => {}
                () = tokio::time::sleep(nap) => {}
            }
        }
    }

    async fn renew(&self, held: &Lease, lease: Duration) -> LockResult<Lease> {
        validate_lock_name(&held.lock)?;
        self.with_state(&held.lock, |state| state.renew(held, Utc::now(), lease))
    }

    async fn release(&self, held: &Lease) -> LockResult<()> {
        validate_lock_name(&held.lock)?;
        self.with_state(&held.lock, |state| state.release(held))?;
        self.shared.released.notify_waiters();
        Ok(())
    }
}

/// The outcome of [`LockState::try_grant`].
#[derive(Debug)]
pub(super) enum Grant {
    /// The lock was free (or its lease had lapsed) and now belongs to the caller.
    Granted(Lease),
    /// Somebody holds a live lease.
    Held {
        /// The current owner.
        holder: Option<String>,
    },
}

/// The moment a lease of length `lease` starting at `now` lapses (clamped to [`MAX_LEASE`]).
pub(super) fn lease_end(now: DateTime<Utc>, lease: Duration) -> DateTime<Utc> {
    let lease = TimeDelta::from_std(lease.min(MAX_LEASE)).unwrap_or(TimeDelta::MAX);
    now.checked_add_signed(lease)
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// A new, unique owner id for one acquisition.
pub(super) fn new_owner() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The error for a `renew` or `release` by somebody who does not hold `held.lock`.
pub(super) fn not_holder(held: &Lease) -> LockError {
    LockError::NotHolder {
        lock: held.lock.clone(),
        owner: held.owner.clone(),
        token: held.token,
    }
}

/// The error for an `acquire` that gave up at its deadline.
pub(super) fn timeout_error(lock: &str, waited: Duration, holder: Option<String>) -> LockError {
    LockError::Timeout {
        lock: lock.to_string(),
        waited,
        holder,
    }
}

impl LockState {
    /// The state of a lock that was never taken: no owner, last token 0.
    pub(super) fn free() -> Self {
        LockState {
            owner: None,
            token: 0,
            expires_at: None,
        }
    }

    /// Takes the lock for a new owner if nobody holds a live lease at `now`: the token becomes
    /// the last one plus one and the lease runs until `now + lease`.
    pub(super) fn try_grant(
        &mut self,
        lock: &str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> LockResult<Grant> {
        if self.is_held_at(now) {
            return Ok(Grant::Held {
                holder: self.owner.clone(),
            });
        }
        let token = self
            .token
            .checked_add(1)
            .ok_or_else(|| LockError::Corrupt {
                lock: lock.to_string(),
                reason: "fencing token space exhausted".to_string(),
            })?;
        let held = Lease {
            lock: lock.to_string(),
            owner: new_owner(),
            token,
            expires_at: lease_end(now, lease),
        };
        *self = LockState {
            owner: Some(held.owner.clone()),
            token,
            expires_at: Some(held.expires_at),
        };
        Ok(Grant::Granted(held))
    }

    /// True if `held` is the current holder (same owner and token). A lapsed lease that nobody
    /// took over still counts: its holder may renew or release it.
    pub(super) fn is_holder(&self, held: &Lease) -> bool {
        self.owner.as_deref() == Some(held.owner.as_str()) && self.token == held.token
    }

    /// Extends the lease of the current holder to `now + lease`.
    pub(super) fn renew(
        &mut self,
        held: &Lease,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> LockResult<Lease> {
        if !self.is_holder(held) {
            return Err(not_holder(held));
        }
        let expires_at = lease_end(now, lease);
        self.expires_at = Some(expires_at);
        Ok(Lease {
            expires_at,
            ..held.clone()
        })
    }

    /// Frees the lock if `held` is the current holder; the token is kept so that it keeps
    /// increasing.
    pub(super) fn release(&mut self, held: &Lease) -> LockResult<()> {
        if !self.is_holder(held) {
            return Err(not_holder(held));
        }
        self.owner = None;
        self.expires_at = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn test_acquire_after_release_token_increases() {
        let p = InProcessLockProvider::new();
        let a = p.acquire("t", LONG, LONG).await.unwrap();
        p.release(&a).await.unwrap();
        let b = p.acquire("t", LONG, Duration::ZERO).await.unwrap();
        assert!(b.token > a.token, "{} !> {}", b.token, a.token);
        assert_ne!(a.owner, b.owner);
    }

    #[tokio::test]
    async fn test_acquire_held_zero_timeout_times_out() {
        let p = InProcessLockProvider::new();
        let a = p.acquire("t", LONG, LONG).await.unwrap();
        let err = p.acquire("t", LONG, Duration::ZERO).await.unwrap_err();
        match err {
            LockError::Timeout { lock, holder, .. } => {
                assert_eq!(lock, "t");
                assert_eq!(holder, Some(a.owner));
            }
            other => panic!("expected Timeout, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn test_acquire_waiter_woken_by_release_succeeds() {
        let p = InProcessLockProvider::new();
        let a = p.acquire("t", LONG, LONG).await.unwrap();
        let p2 = p.clone();
        let waiter = tokio::spawn(async move { p2.acquire("t", LONG, LONG).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !waiter.is_finished(),
            "waiter got the lock while it was held"
        );
        p.release(&a).await.unwrap();
        let b = waiter.await.unwrap().unwrap();
        assert_eq!(b.token, a.token + 1);
    }

    #[tokio::test]
    async fn test_locks_with_different_names_are_independent() {
        let p = InProcessLockProvider::new();
        let a = p.acquire("a", LONG, LONG).await.unwrap();
        let b = p.acquire("b", LONG, Duration::ZERO).await.unwrap();
        assert_eq!((a.token, b.token), (1, 1));
    }

    #[test]
    fn test_lease_end_huge_lease_is_clamped() {
        let now = Utc::now();
        let end = lease_end(now, Duration::MAX);
        assert!(end > now + TimeDelta::days(365 * 99));
        assert!(end < now + TimeDelta::days(365 * 101));
    }

    #[test]
    fn test_state_renew_and_release_other_owner_not_holder() {
        let now = Utc::now();
        let mut state = LockState::free();
        let Grant::Granted(held) = state.try_grant("t", now, LONG).unwrap() else {
            panic!("free lock not granted")
        };
        let other = Lease {
            owner: "someone-else".to_string(),
            ..held.clone()
        };
        assert!(matches!(
            state.renew(&other, now, LONG),
            Err(LockError::NotHolder { .. })
        ));
        assert!(matches!(
            state.release(&other),
            Err(LockError::NotHolder { .. })
        ));
        assert!(state.is_holder(&held));
        state.release(&held).unwrap();
        assert_eq!(state.owner, None);
        assert_eq!(state.token, held.token);
    }

    #[test]
    fn test_state_try_grant_lapsed_lease_takes_over() {
        let now = Utc::now();
        let mut state = LockState::free();
        let Grant::Granted(first) = state
            .try_grant("t", now, Duration::from_millis(10))
            .unwrap()
        else {
            panic!("free lock not granted")
        };
        let later = now + TimeDelta::milliseconds(11);
        let Grant::Granted(second) = state.try_grant("t", later, LONG).unwrap() else {
            panic!("lapsed lock not granted")
        };
        assert_eq!(second.token, first.token + 1);
        assert!(!state.is_holder(&first));
    }

    #[test]
    fn test_state_try_grant_exhausted_token_corrupt() {
        let mut state = LockState {
            owner: None,
            token: u64::MAX,
            expires_at: None,
        };
        assert!(matches!(
            state.try_grant("t", Utc::now(), LONG),
            Err(LockError::Corrupt { .. })
        ));
    }
}
