//! [`InProcessLockProvider`]: locks shared by the tasks and threads of one process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::state::Grant;
use super::{backoff, validate_lock_name, Deadline, Lease, LockProvider, LockState};
use crate::error::LockResult;

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
        let deadline = Deadline::after(timeout);
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
            let Some(left) = deadline.remaining(Instant::now()) else {
                return Err(deadline.timeout_error(lock, holder));
            };
            // Wake at the release notification, when the holder's lease lapses, or at the
            // deadline, whichever comes first; the backoff bounds the wait in case the clock
            // jumps.
            let until_expiry = holder_expiry
                .and_then(|exp| (exp - Utc::now()).to_std().ok())
                .unwrap_or_default();
            let nap = until_expiry.max(backoff(attempt)).min(left);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::LockError;

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
                assert_eq!(holder.map(|h| h.owner), Some(a.owner));
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

    #[tokio::test]
    async fn test_acquire_free_lock_max_timeout_succeeds() {
        let p = InProcessLockProvider::new();
        let held = p.acquire("t", LONG, Duration::MAX).await.unwrap();
        assert_eq!(held.token, 1);
        // A huge lease is clamped, not an overflow either.
        p.release(&held).await.unwrap();
        let again = p.acquire("t", Duration::MAX, Duration::MAX).await.unwrap();
        assert_eq!(again.token, 2);
    }

    #[tokio::test]
    async fn test_acquire_held_lock_max_timeout_waits_for_release() {
        let p = InProcessLockProvider::new();
        let a = p.acquire("t", LONG, LONG).await.unwrap();
        let p2 = p.clone();
        let waiter = tokio::spawn(async move { p2.acquire("t", LONG, Duration::MAX).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "waiter got a held lock");
        p.release(&a).await.unwrap();
        let b = tokio::time::timeout(LONG, waiter)
            .await
            .expect("the waiter was not woken by the release")
            .unwrap()
            .unwrap();
        assert_eq!(b.token, a.token + 1);
    }
}
