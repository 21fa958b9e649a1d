//! [`ObjectStoreLockProvider`]: locks kept as objects, changed only by conditional writes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::state::{lease_end, not_holder, Grant};
use super::{
    backoff, validate_lock_name, Deadline, Lease, LockProvider, LockState, TABLE_DURABLE_FENCE_DIR,
    TABLE_LOCK_DIR,
};
use crate::error::{LockError, LockResult, StorageError};
use crate::storage::{Storage, StorageExt, Version};

/// How often `renew` and `release` re-read and retry after losing a compare-and-swap before they
/// give up (each loss means the state changed under them, which is rare for a live holder).
const MAX_CAS_ATTEMPTS: u32 = 16;

/// How many tokens one write of the fencing high-water mark reserves: the mark is written on the
/// first acquisition, after the state object was lost, and then once every this many
/// acquisitions, so an uncontended acquire stays one read and one compare-and-swap.
const FENCE_BLOCK: u64 = 1000;

/// What the state object of a lock holds.
enum Stored {
    /// Nothing: the lock was never taken (or its state was deleted).
    Absent,
    /// A readable state and the version to compare against.
    Valid(LockState, Version),
    /// Bytes that are not a [`LockState`] (empty, truncated, edited by hand).
    Corrupt {
        /// The version to compare against when repairing.
        version: Version,
        /// When the corrupt object was last written.
        last_modified: DateTime<Utc>,
        /// What is wrong with it.
        reason: String,
    },
}

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
///
/// **Recovery.** A state object that cannot be read (empty, truncated, edited by hand) counts as
/// held by an unknown writer for one lease (the lease the waiter asks for) after it was last
/// written; then the next `acquire` replaces it by compare-and-swap on the corrupt version.
/// **Fencing high-water mark.** Tokens are reserved, a block of 1000 at a time, in a second
/// object, `<prefix>/<name>.fence`, that only ever grows, before any of them is handed out (the
/// state records its reservation in [`LockState::reserved`]). When the state object is gone or
/// unreadable, the next token is one more than that mark, so deleting or corrupting the state
/// object never lowers the tokens (they may jump ahead by up to a block). With a durable copy
/// of the mark ([`ObjectStoreLockProvider::with_durable_fence`], as the table lock
/// [`ObjectStoreLockProvider::for_table`] has), deleting the state, the mark or the whole lock
/// directory never lowers them either; without one, deleting both objects resets them.
///
/// **A state deleted while held.** A missing state whose mark exists means the lock was used
/// before: an `acquire` waits one lease (the lease it asks for) from the moment it first saw the
/// state missing before it takes the lock, so a holder whose state was deleted under it meets
/// `NotHolder` at its next renewal (every third of a lease) before anybody else holds the
/// lock.
pub struct ObjectStoreLockProvider {
    storage: Arc<dyn Storage>,
    prefix: String,
    /// A second copy of the fencing high-water mark, kept where losing the lock directory does
    /// not lose it: (storage, prefix).
    durable: Option<(Arc<dyn Storage>, String)>,
}

impl fmt::Debug for ObjectStoreLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStoreLockProvider")
            .field("storage", &self.storage.to_string())
            .field("prefix", &self.prefix)
            .field("durable_fence", &self.durable.as_ref().map(|(_, p)| p))
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
            durable: None,
        }
    }

    /// The table lock of a table stored in `table`: state and fencing mark in
    /// [`TABLE_LOCK_DIR`], and a durable copy of the mark in
    /// [`TABLE_DURABLE_FENCE_DIR`] (so that tokens never go back when the lock directory is
    /// lost).
    pub fn for_table(table: Arc<dyn Storage>) -> Self {
        ObjectStoreLockProvider::new(table.clone(), TABLE_LOCK_DIR)
            .with_durable_fence(table, TABLE_DURABLE_FENCE_DIR)
    }

    /// Also keeps the fencing high-water mark at `<prefix>/<name>.fence` of `storage`, a place
    /// whose loss would lose more than the lock (e.g. beside the table's commit record). Tokens
    /// then stay above every token handed out even when the lock's own state and mark are
    /// deleted together, and a lock whose state is missing while a mark exists is waited on for
    /// one lease before it is taken (its holder may still be working; it finds its state gone
    /// at its next renewal).
    pub fn with_durable_fence(mut self, storage: Arc<dyn Storage>, prefix: &str) -> Self {
        self.durable = Some((storage, prefix.trim_matches('/').to_string()));
        self
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

    /// Reads the stored state of `lock` as it is: absent, valid, or corrupt (empty, truncated,
    /// not JSON of a [`LockState`]).
    async fn read_stored(&self, lock: &str) -> LockResult<Stored> {
        let key = self.state_key(lock);
        let Some((bytes, meta)) = self
            .storage
            .get_opt(&key)
            .await
            .map_err(|e| Self::storage_err(lock, e))?
        else {
            return Ok(Stored::Absent);
        };
        Ok(match serde_json::from_slice::<LockState>(&bytes) {
            Ok(state) => Stored::Valid(state, meta.version),
            Err(e) => Stored::Corrupt {
                version: meta.version,
                last_modified: meta.last_modified,
                reason: format!("{key}: {e}"),
            },
        })
    }

    /// Reads the state of `lock` and the version to compare against; `None` if never taken.
    /// A corrupt state fails with [`LockError::Corrupt`].
    async fn read(&self, lock: &str) -> LockResult<Option<(LockState, Version)>> {
        match self.read_stored(lock).await? {
            Stored::Absent => Ok(None),
            Stored::Valid(state, version) => Ok(Some((state, version))),
            Stored::Corrupt { reason, .. } => Err(LockError::Corrupt {
                lock: lock.to_string(),
                reason,
            }),
        }
    }

    /// The key of the fencing high-water mark of `lock`: `<prefix>/<name>.fence`, the largest
    /// token ever handed out (or reserved), as decimal text.
    pub fn fence_key(&self, lock: &str) -> String {
        if self.prefix.is_empty() {
            format!("{lock}.fence")
        } else {
            format!("{}/{lock}.fence", self.prefix)
        }
    }

    /// The fencing marks of `lock`: the lock's own (`<prefix>/<name>.fence`) and the durable
    /// copy, when configured: (storage, key) of each.
    fn fence_places(&self, lock: &str) -> Vec<(Arc<dyn Storage>, String)> {
        let mut places = vec![(self.storage.clone(), self.fence_key(lock))];
        if let Some((storage, prefix)) = &self.durable {
            let key = if prefix.is_empty() {
                format!("{lock}.fence")
            } else {
                format!("{prefix}/{lock}.fence")
            };
            places.push((storage.clone(), key));
        }
        places
    }

    /// Reads one fencing mark (0 when absent) and its version. An unreadable mark counts as 0
    /// (the other marks and the state's own token still bound the next token from below) and
    /// is overwritten by the next reservation.
    async fn read_mark_at(
        lock: &str,
        storage: &Arc<dyn Storage>,
        key: &str,
    ) -> LockResult<(u64, Option<Version>)> {
        let Some((bytes, meta)) = storage
            .get_opt(key)
            .await
            .map_err(|e| Self::storage_err(lock, e))?
        else {
            return Ok((0, None));
        };
        let mark = match std::str::from_utf8(&bytes)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
        {
            Some(mark) => mark,
            None => {
                tracing::warn!(%key, "unreadable fencing high-water mark; rewriting it");
                0
            }
        };
        Ok((mark, Some(meta.version)))
    }

    /// The greatest fencing mark of `lock` (0 when there is none).
    async fn read_fence(&self, lock: &str) -> LockResult<u64> {
        let mut mark = 0;
        for (storage, key) in self.fence_places(lock) {
            mark = mark.max(Self::read_mark_at(lock, &storage, &key).await?.0);
        }
        Ok(mark)
    }

    /// Raises every fencing mark of `lock` to at least `token` (never lowers one), the durable
    /// copy first.
    async fn raise_fence(&self, lock: &str, token: u64) -> LockResult<()> {
        for (storage, key) in self.fence_places(lock).into_iter().rev() {
            Self::raise_mark_at(lock, &storage, &key, token).await?;
        }
        Ok(())
    }

    /// Raises the mark at `key` of `storage` to at least `token`.
    async fn raise_mark_at(
        lock: &str,
        storage: &Arc<dyn Storage>,
        key: &str,
        token: u64,
    ) -> LockResult<()> {
        for _ in 0..MAX_CAS_ATTEMPTS {
            let (mark, version) = Self::read_mark_at(lock, storage, key).await?;
            if mark >= token {
                return Ok(());
            }
            let data = Bytes::from(token.to_string());
            let result = match &version {
                None => storage.put_if_absent(key, data).await,
                Some(v) => storage.put_if_match(key, data, v).await,
            };
            match result {
                Ok(_) => return Ok(()),
                Err(e) if e.is_conflict() => continue,
                Err(e) => {
                    // Outcome unknown: the next read tells.
                    if Self::read_mark_at(lock, storage, key).await?.0 >= token {
                        return Ok(());
                    }
                    return Err(Self::storage_err(lock, e));
                }
            }
        }
        Err(LockError::Backend {
            lock: lock.to_string(),
            source: format!(
                "fencing mark {key} changed concurrently {MAX_CAS_ATTEMPTS} times in a row; \
                 giving up"
            )
            .into(),
        })
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
        // When this call first found the state missing although the lock was used before.
        let mut missing_since: Option<Instant> = None;
        loop {
            let now = Utc::now();
            // `lost`: the state object is gone or unreadable, so its token says nothing about the
            // tokens handed out before; the high-water mark does.
            let (mut state, version, lost) = match self.read_stored(lock).await? {
                Stored::Absent => {
                    // A missing state with a fencing mark was deleted, perhaps while held: its
                    // holder may still be working, and finds out at its next renewal. Wait one
                    // lease from the first sight of the loss before taking the lock.
                    let mark = self.read_fence(lock).await?;
                    let waited = missing_since.map(|t| t.elapsed());
                    if mark > 0 && waited.is_none_or(|w| w < lease) {
                        if missing_since.is_none() {
                            tracing::warn!(
                                lock,
                                mark,
                                "the lock's state is missing although tokens up to {mark} were \
                                 reserved: waiting one lease ({} s) in case a holder is still \
                                 working, then taking it with a greater token",
                                lease.as_secs_f64()
                            );
                            missing_since = Some(Instant::now());
                        }
                        let Some(left) = deadline.remaining(Instant::now()) else {
                            return Err(deadline.timeout_error(lock, None));
                        };
                        tokio::time::sleep(backoff(attempt).min(left)).await;
                        attempt = attempt.saturating_add(1);
                        continue;
                    }
                    (LockState::free(), None, true)
                }
                Stored::Valid(state, version) => (state, Some(version), false),
                // A corrupt state may hide a live holder: it counts as held by an unknown writer
                // for one lease after it was last written, then it is repaired by replacing it
                // (compare-and-swap on the corrupt version) with a fresh grant.
                Stored::Corrupt {
                    version,
                    last_modified,
                    reason,
                } if lease_end(last_modified, lease) <= now => {
                    tracing::warn!(lock, %reason, "repairing corrupt lock state");
                    (LockState::free(), Some(version), true)
                }
                Stored::Corrupt { .. } => {
                    let Some(left) = deadline.remaining(Instant::now()) else {
                        return Err(deadline.timeout_error(lock, None));
                    };
                    tokio::time::sleep(backoff(attempt).min(left)).await;
                    attempt = attempt.saturating_add(1);
                    continue;
                }
            };
            let holder = if state.is_held_at(now) {
                state.holder()
            } else {
                if lost {
                    let mark = self.read_fence(lock).await?;
                    state.token = state.token.max(mark);
                }
                // Never hand out a token above the persisted high-water mark: reserve a block of
                // tokens in the mark first when the state's reservation is used up.
                let next = state.token.saturating_add(1);
                if state.reserved < next {
                    let target = next.saturating_add(FENCE_BLOCK - 1);
                    self.raise_fence(lock, target).await?;
                    state.reserved = target;
                }
                // The lease runs from the state write on, not from before the reads above.
                match state.try_grant(lock, Utc::now(), lease)? {
                    Grant::Granted(held) => {
                        if self.write(lock, &state, version.as_ref()).await? {
                            return Ok(held);
                        }
                        // Lost a race: somebody else changed the state since we read it.
                        None
                    }
                    Grant::Held { holder } => holder,
                }
            };
            let Some(left) = deadline.remaining(Instant::now()) else {
                // After a lost race, report the winner if we can see it.
                let holder = match holder {
                    Some(h) => Some(h),
                    None => match self.read_stored(lock).await? {
                        Stored::Valid(s, _) => s.holder(),
                        _ => None,
                    },
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
