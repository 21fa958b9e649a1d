//! The recovery suite of [`ObjectStoreLockProvider`] on one storage: corrupt, empty and deleted
//! lock state is repaired, and fencing tokens never decrease across any of it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::error::LockError;
use crate::lock::{object::ObjectStoreLockProvider, Lease, LockProvider};
use crate::storage::{Storage, StorageExt};

/// A lease no check outlives.
const LONG_LEASE: Duration = Duration::from_secs(30);
/// The lease a repairing waiter asks for: a corrupt state counts as held this long after it was
/// written.
const SHORT_LEASE: Duration = Duration::from_millis(300);
/// A wait that only a broken provider exceeds (S3 reports modification times to the second).
const PATIENCE: Duration = Duration::from_secs(15);

/// Runs every recovery check of [`ObjectStoreLockProvider`] against `storage` and panics with a
/// message naming `backend` and the broken property at the first failure. Lock names are unique
/// per run, under the prefix `conf-recovery`.
///
/// Checks, for state objects overwritten with `""`, `"not json"`, `{"owner":` and `[]`:
/// 1. a corrupt state is not taken over at once (it may hide a live holder): a zero-timeout
///    `acquire` with a long lease times out;
/// 2. it is repaired within one (short) lease: a waiter acquires the lock, and the token it gets
///    is larger than every token handed out before;
/// 3. deleting the state object by hand does not reset the tokens either, and the lock is
///    taken again within one lease of the waiter's (the state may have been deleted under a
///    live holder);
/// 4. after each repair the lock works as before (release, acquire again, larger token).
pub async fn run_object_lock_recovery_suite(backend: &str, storage: Arc<dyn Storage>) {
    let provider = ObjectStoreLockProvider::new(storage.clone(), "conf-recovery");
    let name = format!("recovery-{}", uuid::Uuid::new_v4().simple());
    let key = provider.state_key(&name);
    let mut last = acquire_release(backend, &provider, &name, 0).await;
    for corrupt in [&b""[..], b"not json", b"{\"owner\":", b"[]"] {
        let shown = String::from_utf8_lossy(corrupt).into_owned();
        storage
            .put(&key, Bytes::copy_from_slice(corrupt))
            .await
            .unwrap_or_else(|e| panic!("[{backend}] overwriting {key}: {e}"));
        let early = provider.acquire(&name, LONG_LEASE, Duration::ZERO).await;
        assert!(
            matches!(&early, Err(LockError::Timeout { .. })),
            "[{backend}] state {shown:?}: a corrupt state was taken over at once, or failed \
             otherwise: {early:?}"
        );
        let repaired = provider
            .acquire(&name, SHORT_LEASE, PATIENCE)
            .await
            .unwrap_or_else(|e| panic!("[{backend}] state {shown:?} not repaired: {e}"));
        assert!(
            repaired.token > last,
            "[{backend}] state {shown:?}: repaired token {} is not larger than {last}",
            repaired.token
        );
        release(backend, &provider, &repaired).await;
        last = acquire_release(backend, &provider, &name, repaired.token).await;
        storage
            .delete(&key)
            .await
            .unwrap_or_else(|e| panic!("[{backend}] deleting {key}: {e}"));
        // A deleted state of a lock used before may hide a live holder: it is taken within one
        // lease of the waiter's (a short one here), with a larger token.
        let retaken = provider
            .acquire(&name, SHORT_LEASE, PATIENCE)
            .await
            .unwrap_or_else(|e| panic!("[{backend}] deleted state not retaken: {e}"));
        assert!(
            retaken.token > last,
            "[{backend}] deleted state: token {} is not larger than {last}",
            retaken.token
        );
        release(backend, &provider, &retaken).await;
        last = acquire_release(backend, &provider, &name, retaken.token).await;
    }
}

/// Acquires and releases `name`, checking that the token is larger than `after`; returns it.
async fn acquire_release(
    backend: &str,
    provider: &ObjectStoreLockProvider,
    name: &str,
    after: u64,
) -> u64 {
    let held = provider
        .acquire(name, LONG_LEASE, PATIENCE)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] acquire of {name}: {e}"));
    assert!(
        held.token > after,
        "[{backend}] fencing token decreased or repeated: {} after {after}",
        held.token
    );
    release(backend, provider, &held).await;
    held.token
}

async fn release(backend: &str, provider: &ObjectStoreLockProvider, held: &Lease) {
    provider
        .release(held)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] release of {}: {e}", held.lock));
}
