//! [`ObjectStoreLockProvider`]: locks kept as objects, changed only by conditional writes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::Utc;
use tokio::time::Instant;

use super::state::{not_holder, Grant};
use super::{backoff, validate_lock_name, Deadline, Lease, LockProvider, LockState};
use crate::error::{LockError, LockResult, StorageError};
use crate::storage::{Storage, StorageExt, Version};

/// How often `renew` and `release` re-read and retry after losing a compare-and-swap before they
/// give up (each loss means the state changed under them, which is rare for a live holder).
const MAX_CAS_ATTEMPTS: u32 = 16;

/// Locks kept as JSON [`LockState`] objects at `<prefix>/<name>.json` in any [`Storage`]: local
/// files, memory, S3 or anything else with atomic conditional writes.
///
/// The object is created with [`Storage::put_if_absent`] on the first acquisition and afterwards
/// changed only with [`Storage::put_if_match`] on the version just read, so of two processes
/// racing for a free lock exactly one wins; the other re-reads and sees it held. Every process
/// and machine using the same storage and prefix shares the locks.
///
/// **Clocks.** Whether a lease has lapsed is decided with the local clock of the process looking
/// at it ([`Utc::now`] against the `expires_at` written by the holder's clock). The clocks of all
/// machines sharing a lock must therefore agree to well within the margin a holder keeps between
/// renewing and its lease's expiry; a machine whose clock runs ahead can take over a lease that
/// its holder still considers live. Writes guarded by the lock should carry the fencing token.
///
/// A write whose outcome is unknown (e.g. a timeout after the request was sent) is resolved by
/// reading the object back, never assumed to have failed.
pub struct ObjectStoreLockProvider {
    storage: Arc<dyn Storage>,
    prefix: String,
}

impl fmt::Debug for ObjectStoreLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStoreLockProvider")
            .field("storage", &self.storage.to_string())
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl ObjectStoreLockProvider {
    /// Creates a provider keeping lock `name` at `<prefix>/<name>.json` in `storage`. Leading and
    /// trailing `/` of `prefix` are ignored; an empty prefix puts the locks at the storage root.
    /// A prefix that is not a valid key fails each operation with [`LockError::Storage`].
    pub fn new(storage: Arc<dyn Storage>, prefix: &str) -> Self {
        ObjectStoreLockProvider {
            storage,
            prefix: prefix.trim_matches('/').to_string(),
        }
    }

    /// The key of the object holding the state of `lock`.
    pub fn state_key(&self, lock: &str) -> String {
        if self.prefix.is_empty() {
            format!("{lock}.json")
        } else {
            format!("{}/{lock}.json", self.prefix)
        }
    }

    fn storage_err(lock: &str, source: StorageError) -> LockError {
        LockError::Storage {
            lock: lock.to_string(),
            source,
        }
    }

    /// Reads the state of `lock` and the version to compare against; `None` if never taken.
    async fn read(&self, lock: &str) -> LockResult<Option<(LockState, Version)>> {
        let key = self.state_key(lock);
        let Some((bytes, meta)) = self
            .storage
            .get_opt(&key)
            .await
            .map_err(|e| Self::storage_err(lock, e))?
        else {
            return Ok(None);
        };
        let state =
            serde_json::from_slice::<LockState>(&bytes).map_err(|e| LockError::Corrupt {
                lock: lock.to_string(),
                reason: format!("{key}: {e}"),
            })?;
        Ok(Some((state, meta.version)))
    }

    /// Writes `state` conditionally: create-if-absent when `expected` is `None`, else
    /// compare-and-swap. Returns `Ok(false)` when another writer got there first. When the write
    /// failed otherwise, reads back: if the object holds exactly `state`, the write happened.
    async fn write(
        &self,
        lock: &str,
        state: &LockState,
        expected: Option<&Version>,
    ) -> LockResult<bool> {
        let key = self.state_key(lock);
        let data = Bytes::from(serde_json::to_vec(state).map_err(|e| LockError::Corrupt {
            lock: lock.to_string(),
            reason: format!("cannot encode state: {e}"),
        })?);
        let result = match expected {
            None => self.storage.put_if_absent(&key, data).await,
            Some(version) => self.storage.put_if_match(&key, data, version).await,
        };
        match result {
            Ok(_) => Ok(true),
            Err(e) if e.is_conflict() => Ok(false),
            Err(e) => match self.read(lock).await {
                // Owner ids are unique per acquisition, so an equal state is our own write.
                Ok(Some((now_stored, _))) if now_stored == *state => Ok(true),
                _ => Err(Self::storage_err(lock, e)),
            },
        }
    }

    /// Applies `change` to the current state of a lock held by `held` and writes it back,
    /// re-reading and retrying when a concurrent write intervenes.
    async fn change_held<T>(
        &self,
        held: &Lease,
        change: impl Fn(&mut LockState) -> LockResult<T> + Send + Sync,
    ) -> LockResult<T>
    where
        T: Send,
    {
        validate_lock_name(&held.lock)?;
        for _ in 0..MAX_CAS_ATTEMPTS {
            let Some((mut state, version)) = self.read(&held.lock).await? else {
                return Err(not_holder(held));
            };
            let out = change(&mut state)?;
            if self.write(&held.lock, &state, Some(&version)).await? {
                return Ok(out);
            }
        }
        Err(LockError::Backend {
            lock: held.lock.clone(),
            source: format!(
                "state changed concurrently {MAX_CAS_ATTEMPTS} times in a row; giving up"
            )
            .into(),
        })
    }
}

#[async_trait]
impl LockProvider for ObjectStoreLockProvider {
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease> {
        validate_lock_name(lock)?;
        let deadline = Deadline::after(timeout);
        let mut attempt = 0u32;
        loop {
            let current = self.read(lock).await?;
            let (mut state, version) = match current {
                Some((state, version)) => (state, Some(version)),
                None => (LockState::free(), None),
            };
            let holder = match state.try_grant(lock, Utc::now(), lease)? {
                Grant::Granted(held) => {
                    if self.write(lock, &state, version.as_ref()).await? {
                        return Ok(held);
                    }
                    // Lost a race: somebody else changed the state since we read it.
                    None
                }
                Grant::Held { holder } => holder,
            };
            let Some(left) = deadline.remaining(Instant::now()) else {
                // After a lost race, report the winner if we can see it.
                let holder = match holder {
                    Some(h) => Some(h),
                    None => self.read(lock).await?.and_then(|(s, _)| s.owner),
                };
                return Err(deadline.timeout_error(lock, holder));
            };
            tokio::time::sleep(backoff(attempt).min(left)).await;
            attempt = attempt.saturating_add(1);
        }
    }

    async fn renew(&self, held: &Lease, lease: Duration) -> LockResult<Lease> {
        self.change_held(held, |state| state.renew(held, Utc::now(), lease))
            .await
    }

    async fn release(&self, held: &Lease) -> LockResult<()> {
        self.change_held(held, |state| state.release(held)).await
    }
}
