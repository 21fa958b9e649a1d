//! A process-wide registry of held leases, so that a process about to exit (on SIGINT or
//! SIGTERM) can release every lock it holds instead of leaving it held until the lease lapses.
//!
//! Providers wrapped by [`TrackedLockProvider`] register each lease they grant, keep it up to
//! date on renewal and drop it on release; [`release_held_leases`] releases whatever is still
//! registered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;

use super::{Lease, LockProvider};
use crate::error::{LockError, LockResult};

/// One registered lease and the provider that granted it.
struct Entry {
    provider: Arc<dyn LockProvider>,
    lease: Lease,
}

/// The registry: owner id (unique per acquisition) -> entry.
fn registry() -> &'static Mutex<HashMap<String, Entry>> {
    static HELD: OnceLock<Mutex<HashMap<String, Entry>>> = OnceLock::new();
    HELD.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Runs `f` on the registry. A poisoned registry (a panic while it was locked; its maps are
/// always left consistent) is used as it is.
fn with_registry<T>(f: impl FnOnce(&mut HashMap<String, Entry>) -> T) -> T {
    let mut map = match registry().lock() {
        Ok(m) => m,
        Err(poisoned) => poisoned.into_inner(),
    };
    f(&mut map)
}

/// The leases currently registered by [`TrackedLockProvider`]s of this process.
pub fn held_leases() -> Vec<Lease> {
    with_registry(|m| m.values().map(|e| e.lease.clone()).collect())
}

/// Releases every lease registered in this process, giving each release at most `timeout`, and
/// returns how many were released. A lease whose release fails or times out is dropped from the
/// registry all the same (its lease lapses by itself) and logged.
pub async fn release_held_leases(timeout: Duration) -> usize {
    let entries: Vec<Entry> = with_registry(|m| m.drain().map(|(_, e)| e).collect());
    let mut released = 0;
    for entry in entries {
        match tokio::time::timeout(timeout, entry.provider.release(&entry.lease)).await {
            Ok(Ok(())) => released += 1,
            Ok(Err(e)) => {
                tracing::warn!(lock = %entry.lease.lock, error = %e, "releasing a held lease failed")
            }
            Err(_) => tracing::warn!(
                lock = %entry.lease.lock,
                "releasing a held lease timed out after {timeout:?}"
            ),
        }
    }
    released
}

/// A [`LockProvider`] that registers every lease it grants in the process-wide registry (see
/// [`release_held_leases`]) and otherwise behaves exactly like the provider it wraps.
#[derive(Debug, Clone)]
pub struct TrackedLockProvider {
    inner: Arc<dyn LockProvider>,
}

impl TrackedLockProvider {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn LockProvider>) -> Self {
        TrackedLockProvider { inner }
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &Arc<dyn LockProvider> {
        &self.inner
    }
}

#[async_trait]
impl LockProvider for TrackedLockProvider {
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease> {
        let held = self.inner.acquire(lock, lease, timeout).await?;
        let entry = Entry {
            provider: self.inner.clone(),
            lease: held.clone(),
        };
        with_registry(|m| m.insert(held.owner.clone(), entry));
        Ok(held)
    }

    async fn renew(&self, held: &Lease, lease: Duration) -> LockResult<Lease> {
        match self.inner.renew(held, lease).await {
            Ok(renewed) => {
                with_registry(|m| {
                    if let Some(e) = m.get_mut(&renewed.owner) {
                        e.lease = renewed.clone();
                    }
                });
                Ok(renewed)
            }
            Err(e @ LockError::NotHolder { .. }) => {
                with_registry(|m| m.remove(&held.owner));
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    async fn release(&self, held: &Lease) -> LockResult<()> {
        let result = self.inner.release(held).await;
        if matches!(result, Ok(()) | Err(LockError::NotHolder { .. })) {
            with_registry(|m| m.remove(&held.owner));
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::memory::InProcessLockProvider;

    const LONG: Duration = Duration::from_secs(30);

    fn registered(owner: &str) -> bool {
        held_leases().iter().any(|l| l.owner == owner)
    }

    #[tokio::test]
    async fn test_tracked_registers_and_release_held_leases_frees_the_lock() {
        let p = TrackedLockProvider::new(Arc::new(InProcessLockProvider::new()));
        let held = p.acquire("held-a", LONG, LONG).await.unwrap();
        assert!(registered(&held.owner));
        let renewed = p.renew(&held, LONG).await.unwrap();
        let listed = held_leases();
        let mine = listed.iter().find(|l| l.owner == held.owner).unwrap();
        assert_eq!(mine.expires_at, renewed.expires_at);
        p.release(&renewed).await.unwrap();
        assert!(!registered(&held.owner));

        // One test only: `release_held_leases` releases every lease of the process.
        let shared = InProcessLockProvider::new();
        let p = TrackedLockProvider::new(Arc::new(shared.clone()));
        let held = p.acquire("held-b", LONG, LONG).await.unwrap();
        assert!(release_held_leases(LONG).await >= 1);
        assert!(!registered(&held.owner));
        // Free now: a zero-timeout acquire by another handle succeeds.
        let next = shared
            .acquire("held-b", LONG, Duration::ZERO)
            .await
            .unwrap();
        assert!(next.token > held.token);
    }
}
