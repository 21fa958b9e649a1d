//! [`FaultInjectingStorage`]: a [`Storage`] wrapper that fails, or "crashes", at the N-th
//! operation, for crash sweeps.
//!
//! A crash sweep runs a multi-step operation (a commit, a clean ...) once per N with
//! `FaultMode::CrashAt(N)`, then checks on the *inner* storage (what a restarted process would
//! see) that the table is consistent and recoverable:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use arbor_storage::{FaultInjectingStorage, FaultMode, ObjectStoreStorage, Storage};
//! # async fn commit(_s: Arc<dyn Storage>) -> arbor_storage::Result<()> { Ok(()) }
//! # async fn sweep() {
//! for n in 0.. {
//!     let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
//!     let faulty = Arc::new(FaultInjectingStorage::new(inner.clone()));
//!     faulty.set_count_only_writes(true);
//!     faulty.set_mode(FaultMode::CrashAt(n));
//!     let done = commit(faulty.clone()).await.is_ok();
//!     // ... check `inner` ...
//!     if done && faulty.op_count() <= n {
//!         break; // the operation finished before reaching write n: every point was covered
//!     }
//! }
//! # }
//! ```

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::BoxFuture;

use crate::error::{Result, StorageError};
use crate::storage::{ListPage, ObjectMeta, Storage, Version, MAX_DELETE_BATCH};

/// When [`FaultInjectingStorage`] injects faults. Operations are numbered from zero in the order
/// they are called (only the mutating ones with
/// [`set_count_only_writes`](FaultInjectingStorage::set_count_only_writes)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FaultMode {
    /// No faults.
    #[default]
    None,
    /// Operation `n` fails with [`StorageError::Injected`] without reaching the inner storage;
    /// the operations before and after it work.
    FailAt(usize),
    /// Operation `n` reaches the inner storage (its effect happens) but then reports
    /// [`StorageError::Injected`], like a request whose reply was lost; later operations work.
    FailAfter(usize),
    /// Operation `n` and every later one (counted or not) fail with [`StorageError::Injected`]
    /// without reaching the inner storage: the process "died" just before operation `n`. With
    /// [`set_partial_batches`](FaultInjectingStorage::set_partial_batches), a `delete_batch` at
    /// `n` first deletes a prefix of its keys: the process died during the batch.
    CrashAt(usize),
}

/// The kind of a [`Storage`] operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// [`Storage::get`].
    Get,
    /// [`Storage::get_range`].
    GetRange,
    /// [`Storage::head`].
    Head,
    /// [`Storage::put`].
    Put,
    /// [`Storage::put_if_absent`].
    PutIfAbsent,
    /// [`Storage::put_if_match`].
    PutIfMatch,
    /// [`Storage::list_page`].
    List,
    /// [`Storage::list_dir`].
    ListDir,
    /// [`Storage::delete_batch`].
    Delete,
    /// [`Storage::copy`].
    Copy,
}

impl OpKind {
    /// True for operations that change the storage.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            OpKind::Put | OpKind::PutIfAbsent | OpKind::PutIfMatch | OpKind::Delete | OpKind::Copy
        )
    }

    /// The operation's name as used in errors (`put_if_absent` ...).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Get => "get",
            OpKind::GetRange => "get_range",
            OpKind::Head => "head",
            OpKind::Put => "put",
            OpKind::PutIfAbsent => "put_if_absent",
            OpKind::PutIfMatch => "put_if_match",
            OpKind::List => "list",
            OpKind::ListDir => "list_dir",
            OpKind::Delete => "delete",
            OpKind::Copy => "copy",
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One counted operation in the log of a [`FaultInjectingStorage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpRecord {
    /// Its number (zero-based, among the counted operations).
    pub index: usize,
    /// What it was.
    pub kind: OpKind,
    /// The key it concerned: the prefix for listings, `from -> to` for a copy, the keys joined
    /// with `, ` for a delete batch.
    pub key: String,
}

/// What a stall runs while the operation it stalls waits: e.g. another writer's whole commit,
/// after the stalled writer's lease was made to lapse.
pub type StallHook = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

#[derive(Default)]
struct State {
    mode: FaultMode,
    /// Operation number that waits for the hook before it runs (once).
    stall: Option<(usize, StallHook)>,
    count_only_writes: bool,
    partial_batches: bool,
    next: usize,
    crashed: bool,
    log: Vec<OpRecord>,
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State")
            .field("mode", &self.mode)
            .field("stall_at", &self.stall.as_ref().map(|(n, _)| *n))
            .field("next", &self.next)
            .field("crashed", &self.crashed)
            .finish_non_exhaustive()
    }
}

/// What to do with one call.
enum Verdict {
    /// Run it.
    Pass,
    /// Run it, then report this error.
    RunThenFail(StorageError),
    /// Run a `delete_batch` on only its first `applied` keys, then report this error.
    PrefixThenFail {
        /// How many keys (from the start) are deleted.
        applied: usize,
        /// The error reported.
        error: StorageError,
    },
}

/// A [`Storage`] that forwards to an inner one and injects faults per [`FaultMode`].
///
/// Every call of a trait method is one operation (a `delete_batch` is one, whatever its size;
/// see [`set_partial_batches`](Self::set_partial_batches) for a crash in the middle of one).
/// With [`set_count_only_writes`](Self::set_count_only_writes), only mutating operations (`put*`,
/// `delete_batch`, `copy`) are counted and logged; reads then pass through (unless the storage
/// has crashed: a dead process reads nothing either).
#[derive(Debug)]
pub struct FaultInjectingStorage {
    inner: Arc<dyn Storage>,
    state: Mutex<State>,
}

impl FaultInjectingStorage {
    /// Wraps `inner`, with no faults.
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        Self {
            inner,
            state: Mutex::new(State::default()),
        }
    }

    /// The wrapped storage (what survives a "crash").
    pub fn inner(&self) -> &Arc<dyn Storage> {
        &self.inner
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the state inconsistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets when faults are injected (operation numbers continue from the current count).
    pub fn set_mode(&self, mode: FaultMode) {
        self.state().mode = mode;
    }

    /// The current mode.
    pub fn mode(&self) -> FaultMode {
        self.state().mode
    }

    /// Counts (and logs) only mutating operations when `true`.
    pub fn set_count_only_writes(&self, only_writes: bool) {
        self.state().count_only_writes = only_writes;
    }

    /// When `true`, a [`FaultMode::CrashAt`] crash that hits a `delete_batch` of `k` keys (at most
    /// [`MAX_DELETE_BATCH`]) first deletes its first `k / 2` keys from the inner storage, then
    /// crashes, as a process that died while a batch delete was partly applied (S3 deletes the
    /// keys of one `DeleteObjects` request independently). A batch of one key deletes nothing.
    /// The other modes are unaffected. Off by default; kept by [`reset`](Self::reset).
    pub fn set_partial_batches(&self, partial: bool) {
        self.state().partial_batches = partial;
    }

    /// Makes counted operation `n` (numbered as the fault modes number them) wait, before it
    /// reaches the inner storage, until `hook`'s future has finished: a stall of the process at
    /// that point (a GC pause, `SIGSTOP`) during which the hook runs what other processes do.
    /// Fires once; the fault mode applies as usual after it.
    pub fn set_stall(&self, n: usize, hook: StallHook) {
        self.state().stall = Some((n, hook));
    }

    /// True once the stall set by [`set_stall`](Self::set_stall) has fired.
    pub fn has_stalled(&self) -> bool {
        self.state().stall.is_none()
    }

    /// The log of the counted operations attempted so far, including those that failed.
    pub fn ops(&self) -> Vec<OpRecord> {
        self.state().log.clone()
    }

    /// How many operations were counted so far.
    pub fn op_count(&self) -> usize {
        self.state().next
    }

    /// True once a [`FaultMode::CrashAt`] fault fired.
    pub fn has_crashed(&self) -> bool {
        self.state().crashed
    }

    /// Clears the log, the count and the crashed state; the mode and the counting setting stay.
    pub fn reset(&self) {
        let mut s = self.state();
        s.next = 0;
        s.crashed = false;
        s.log.clear();
    }

    /// Counts and logs one call, runs a stall due at it, and decides its fate.
    async fn begin(&self, kind: OpKind, key: &str) -> Result<Verdict> {
        self.begin_batch(kind, key, 0).await
    }

    /// [`begin`](Self::begin) for a call on `batch_len` keys (0 if not a batch).
    async fn begin_batch(&self, kind: OpKind, key: &str, batch_len: usize) -> Result<Verdict> {
        let counted_before = self.op_count();
        let hook = {
            let mut s = self.state();
            let counted = !s.count_only_writes || kind.is_write();
            match &s.stall {
                Some((n, _)) if counted && *n == counted_before => s.stall.take().map(|(_, h)| h),
                _ => None,
            }
        };
        if let Some(hook) = hook {
            hook().await;
        }
        self.decide(kind, key, batch_len)
    }

    /// Counts and logs one call and decides its fate.
    fn decide(&self, kind: OpKind, key: &str, batch_len: usize) -> Result<Verdict> {
        let mut s = self.state();
        let injected = |index: usize| StorageError::Injected {
            index,
            operation: kind.name(),
            path: key.to_string(),
        };
        if s.count_only_writes && !kind.is_write() {
            return if s.crashed {
                Err(injected(s.next))
            } else {
                Ok(Verdict::Pass)
            };
        }
        let index = s.next;
        s.next += 1;
        s.log.push(OpRecord {
            index,
            kind,
            key: key.to_string(),
        });
        if s.crashed {
            return Err(injected(index));
        }
        match s.mode {
            FaultMode::FailAt(n) if n == index => Err(injected(index)),
            FaultMode::FailAfter(n) if n == index => Ok(Verdict::RunThenFail(injected(index))),
            FaultMode::CrashAt(n) if index >= n => {
                s.crashed = true;
                let applied = if s.partial_batches && batch_len <= MAX_DELETE_BATCH {
                    batch_len / 2
                } else {
                    0
                };
                if applied > 0 {
                    Ok(Verdict::PrefixThenFail {
                        applied,
                        error: injected(index),
                    })
                } else {
                    Err(injected(index))
                }
            }
            _ => Ok(Verdict::Pass),
        }
    }
}

/// Applies a verdict to the result of the inner call.
fn finish<T>(verdict: Verdict, result: Result<T>) -> Result<T> {
    match verdict {
        Verdict::Pass => result,
        Verdict::RunThenFail(e) | Verdict::PrefixThenFail { error: e, .. } => Err(e),
    }
}

impl fmt::Display for FaultInjectingStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fault({})", self.inner)
    }
}

#[async_trait]
impl Storage for FaultInjectingStorage {
    async fn get(&self, key: &str) -> Result<(Bytes, ObjectMeta)> {
        let v = self.begin(OpKind::Get, key).await?;
        finish(v, self.inner.get(key).await)
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        let v = self.begin(OpKind::GetRange, key).await?;
        finish(v, self.inner.get_range(key, range).await)
    }

    async fn head(&self, key: &str) -> Result<ObjectMeta> {
        let v = self.begin(OpKind::Head, key).await?;
        finish(v, self.inner.head(key).await)
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<Version> {
        let v = self.begin(OpKind::Put, key).await?;
        finish(v, self.inner.put(key, data).await)
    }

    async fn put_if_absent(&self, key: &str, data: Bytes) -> Result<Version> {
        let v = self.begin(OpKind::PutIfAbsent, key).await?;
        finish(v, self.inner.put_if_absent(key, data).await)
    }

    async fn put_if_match(&self, key: &str, data: Bytes, expected: &Version) -> Result<Version> {
        let v = self.begin(OpKind::PutIfMatch, key).await?;
        finish(v, self.inner.put_if_match(key, data, expected).await)
    }

    async fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> Result<ListPage> {
        let v = self.begin(OpKind::List, prefix).await?;
        finish(v, self.inner.list_page(prefix, start_after, max_keys).await)
    }

    async fn list_dir(&self, prefix: &str) -> Result<(Vec<ObjectMeta>, Vec<String>)> {
        let v = self.begin(OpKind::ListDir, prefix).await?;
        finish(v, self.inner.list_dir(prefix).await)
    }

    async fn list_dir_keys(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>)> {
        let v = self.begin(OpKind::ListDir, prefix).await?;
        finish(v, self.inner.list_dir_keys(prefix).await)
    }

    async fn delete_batch(&self, keys: &[String]) -> Result<Vec<Result<()>>> {
        let v = self
            .begin_batch(OpKind::Delete, &keys.join(", "), keys.len())
            .await?;
        if let Verdict::PrefixThenFail { applied, error } = v {
            // The process dies during the batch: whatever the prefix's outcome, the caller only
            // sees the crash.
            let prefix = keys.get(..applied).unwrap_or(keys);
            let _ = self.inner.delete_batch(prefix).await;
            return Err(error);
        }
        finish(v, self.inner.delete_batch(keys).await)
    }

    async fn copy(&self, from: &str, to: &str) -> Result<()> {
        let v = self.begin(OpKind::Copy, &format!("{from} -> {to}")).await?;
        finish(v, self.inner.copy(from, to).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectStoreStorage;
    use crate::storage::StorageExt;

    fn setup() -> (Arc<dyn Storage>, FaultInjectingStorage) {
        let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        let f = FaultInjectingStorage::new(inner.clone());
        (inner, f)
    }

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[tokio::test]
    async fn test_fail_at_fails_one_operation_only() {
        let (inner, f) = setup();
        f.set_mode(FaultMode::FailAt(1));
        f.put("a", b("1")).await.unwrap();
        let err = f.put("b", b("2")).await.unwrap_err();
        assert!(
            matches!(err, StorageError::Injected { index: 1, operation: "put", ref path } if path == "b"),
            "{err}"
        );
        assert!(
            !inner.exists("b").await.unwrap(),
            "a failed op must do nothing"
        );
        f.put("c", b("3")).await.unwrap();
        assert_eq!(f.op_count(), 3);
        let kinds: Vec<_> = f
            .ops()
            .iter()
            .map(|o| (o.index, o.kind, o.key.clone()))
            .collect();
        assert_eq!(
            kinds,
            [
                (0, OpKind::Put, "a".to_string()),
                (1, OpKind::Put, "b".to_string()),
                (2, OpKind::Put, "c".to_string())
            ]
        );
    }

    #[tokio::test]
    async fn test_fail_after_performs_the_operation() {
        let (inner, f) = setup();
        f.set_mode(FaultMode::FailAfter(0));
        assert!(f.put_if_absent("a", b("1")).await.is_err());
        assert!(inner.exists("a").await.unwrap());
        // The retry sees its own write.
        assert!(f
            .put_if_absent("a", b("1"))
            .await
            .unwrap_err()
            .is_conflict());
    }

    #[tokio::test]
    async fn test_crash_at_fails_everything_after() {
        let (inner, f) = setup();
        f.set_mode(FaultMode::CrashAt(2));
        f.put("a", b("1")).await.unwrap();
        f.get("a").await.unwrap();
        assert!(f.put("b", b("2")).await.is_err());
        assert!(f.has_crashed());
        assert!(f.get("a").await.is_err());
        assert!(f.list_page("", None, 10).await.is_err());
        assert!(f.delete("a").await.is_err());
        assert!(!inner.exists("b").await.unwrap());
        assert!(inner.exists("a").await.unwrap());
        f.reset();
        assert_eq!(f.op_count(), 0);
        assert!(f.ops().is_empty());
        assert!(!f.has_crashed());
    }

    #[tokio::test]
    async fn test_count_only_writes() {
        let (_inner, f) = setup();
        f.set_count_only_writes(true);
        f.set_mode(FaultMode::CrashAt(1));
        f.put("a", b("1")).await.unwrap();
        for _ in 0..5 {
            f.get("a").await.unwrap();
            f.list_dir("").await.unwrap();
        }
        assert_eq!(f.op_count(), 1);
        assert!(f.copy("a", "b").await.is_err());
        // After the crash, reads fail too.
        assert!(f.get("a").await.is_err());
        assert_eq!(
            f.ops().iter().map(|o| o.kind).collect::<Vec<_>>(),
            [OpKind::Put, OpKind::Copy]
        );
        assert_eq!(f.ops()[1].key, "a -> b");
    }

    #[tokio::test]
    async fn test_every_method_is_one_operation() {
        let (_inner, f) = setup();
        let v = f.put("k", b("1")).await.unwrap();
        f.get("k").await.unwrap();
        f.get_range("k", 0..1).await.unwrap();
        f.head("k").await.unwrap();
        f.put_if_absent("k2", b("1")).await.unwrap();
        f.put_if_match("k", b("2"), &v).await.unwrap();
        f.list_page("", None, 1).await.unwrap();
        f.list_dir("").await.unwrap();
        f.delete_batch(&["k".to_string(), "k2".to_string()])
            .await
            .unwrap();
        f.copy("missing", "x").await.unwrap_err();
        let kinds: Vec<_> = f.ops().iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                OpKind::Put,
                OpKind::Get,
                OpKind::GetRange,
                OpKind::Head,
                OpKind::PutIfAbsent,
                OpKind::PutIfMatch,
                OpKind::List,
                OpKind::ListDir,
                OpKind::Delete,
                OpKind::Copy
            ]
        );
        assert_eq!(f.ops()[8].key, "k, k2");
        assert_eq!(f.to_string(), "fault(memory://)");
    }

    async fn put_keys(inner: &Arc<dyn Storage>, keys: &[String]) {
        for k in keys {
            inner.put(k, b("x")).await.unwrap();
        }
    }

    async fn existing(inner: &Arc<dyn Storage>, keys: &[String]) -> Vec<bool> {
        let mut out = Vec::new();
        for k in keys {
            out.push(inner.exists(k).await.unwrap());
        }
        out
    }

    #[tokio::test]
    async fn test_crash_at_partial_batch_deletes_first_half_then_crashes() {
        let (inner, f) = setup();
        let keys: Vec<String> = (0..5).map(|i| format!("k{i}")).collect();
        put_keys(&inner, &keys).await;
        f.set_partial_batches(true);
        f.set_mode(FaultMode::CrashAt(0));
        let err = f.delete_batch(&keys).await.unwrap_err();
        assert!(
            matches!(
                err,
                StorageError::Injected {
                    index: 0,
                    operation: "delete",
                    ..
                }
            ),
            "{err}"
        );
        assert!(f.has_crashed());
        assert_eq!(
            existing(&inner, &keys).await,
            [false, false, true, true, true]
        );
        // Dead: nothing more happens.
        assert!(f.delete_batch(&keys).await.is_err());
        assert_eq!(
            existing(&inner, &keys).await,
            [false, false, true, true, true]
        );
        assert_eq!(f.op_count(), 2);
    }

    #[tokio::test]
    async fn test_crash_at_partial_batches_off_deletes_nothing() {
        let (inner, f) = setup();
        let keys: Vec<String> = (0..4).map(|i| format!("k{i}")).collect();
        put_keys(&inner, &keys).await;
        f.set_mode(FaultMode::CrashAt(0));
        assert!(f.delete_batch(&keys).await.is_err());
        assert_eq!(existing(&inner, &keys).await, [true; 4]);
    }

    #[tokio::test]
    async fn test_partial_batches_single_key_and_other_modes_unaffected() {
        let (inner, f) = setup();
        let keys: Vec<String> = (0..4).map(|i| format!("k{i}")).collect();
        put_keys(&inner, &keys).await;
        f.set_partial_batches(true);
        // FailAt does not apply a prefix.
        f.set_mode(FaultMode::FailAt(0));
        assert!(f.delete_batch(&keys).await.is_err());
        assert_eq!(existing(&inner, &keys).await, [true; 4]);
        // A crash on a one-key batch deletes nothing.
        f.set_mode(FaultMode::CrashAt(1));
        assert!(f.delete_batch(&keys[..1]).await.is_err());
        assert_eq!(existing(&inner, &keys).await, [true; 4]);
        // The setting survives a reset; a crash on a later write (not a batch) is unchanged.
        f.reset();
        f.set_mode(FaultMode::CrashAt(1));
        f.put("other", b("1")).await.unwrap();
        assert!(f.put("late", b("1")).await.is_err());
        assert!(!inner.exists("late").await.unwrap());
        f.reset();
        f.set_mode(FaultMode::CrashAt(0));
        assert!(f.delete_batch(&keys).await.is_err());
        assert_eq!(existing(&inner, &keys).await, [false, false, true, true]);
    }
}
