//! [`FileLockProvider`]: locks shared by the processes of one machine through a directory.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use fs4::fs_std::FileExt;
use tokio::time::Instant;

use super::state::{lease_end, not_holder, Grant};
use super::{backoff, validate_lock_name, Deadline, Lease, LockProvider, LockState};
use crate::durable::sync_dir;
use crate::error::{LockError, LockResult};

/// How many tokens one write of the fencing high-water mark reserves (as the object-store
/// provider does): the mark is written on the first acquisition, after the state file was lost,
/// and then once every this many acquisitions, so an uncontended acquire stays one state write.
const FENCE_BLOCK: u64 = 1000;

/// Locks kept as files in one directory: mutual exclusion between the processes (and tasks) of
/// one machine.
///
/// Lock `name` has three files in the directory:
/// - `<name>.lock`, an empty file on which every read-modify-write of the lock takes an exclusive
///   OS file lock (`flock` on Unix, `LockFileEx` on Windows) for the few microseconds it lasts;
/// - `<name>.lock.json`, the [`LockState`] (owner, last fencing token, lease expiry) as JSON,
///   replaced atomically (written to a temporary file, synced, renamed over it, directory
///   synced), so that a power failure cannot revert it to an older state and token;
/// - `<name>.lock.fence`, the fencing high-water mark: the largest token ever reserved, as
///   decimal text, replaced atomically in the same way and only ever raised.
///
/// The OS lock is never held while the lock is "held": a holder that dies simply stops renewing,
/// and once its lease lapses another process takes over with a larger token. The state file
/// survives restarts, so tokens keep increasing. Expiry follows the wall clock of the machine.
/// The directory must be on a local file system (OS file locks on network file systems are not
/// reliable); it is created on first use.
///
/// **Fencing high-water mark.** As in the object-store provider, tokens are reserved, a block of
/// 1000 at a time, in the fence file before any of them is handed out (the state records its
/// reservation in [`LockState::reserved`]). When the state file is gone or unreadable, the next
/// token is one more than the mark, so deleting or corrupting the state file never lowers the
/// tokens (they may jump ahead by up to a block); deleting both files does reset them.
///
/// **Recovery.** A state file that cannot be read (empty, truncated, edited by hand) counts as
/// held by an unknown writer for one lease (the lease the waiter asks for) after it was last
/// modified; then the next `acquire` replaces it with a fresh grant. `renew` and `release` of a
/// corrupt state fail with [`LockError::Corrupt`].
#[derive(Debug, Clone)]
pub struct FileLockProvider {
    dir: PathBuf,
}

impl FileLockProvider {
    /// Creates a provider keeping its locks in `dir` (created when first needed). Providers on
    /// the same directory, in any process, share their locks.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        FileLockProvider { dir: dir.into() }
    }

    /// The directory holding the lock files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs `f` on the files of `lock` while holding the OS lock of its lock file, in a blocking
    /// thread.
    async fn with_files<R, F>(&self, lock: &str, f: F) -> LockResult<R>
    where
        F: FnOnce(&LockFiles) -> LockResult<R> + Send + 'static,
        R: Send + 'static,
    {
        validate_lock_name(lock)?;
        let dir = self.dir.clone();
        let name = lock.to_string();
        tokio::task::spawn_blocking(move || with_lock_file(&dir, &name, f))
            .await
            .map_err(|e| LockError::Backend {
                lock: lock.to_string(),
                source: Box::new(e),
            })?
    }

    /// Applies `change` to the state of a lock held by `held` and writes it back if it changed.
    async fn change_held<T, F>(&self, held: &Lease, change: F) -> LockResult<T>
    where
        F: FnOnce(&mut LockState) -> LockResult<T> + Send + 'static,
        T: Send + 'static,
    {
        let h = held.clone();
        self.with_files(&held.lock, move |files| {
            let before = match files.read_stored()? {
                Stored::Absent => return Err(not_holder(&h)),
                Stored::Valid(state) => state,
                Stored::Corrupt { reason, .. } => {
                    return Err(LockError::Corrupt {
                        lock: files.lock.clone(),
                        reason,
                    })
                }
            };
            let mut state = before.clone();
            let out = change(&mut state)?;
            if state != before {
                files.write_state(&state)?;
            }
            Ok(out)
        })
        .await
    }
}

/// What the state file of a lock holds.
enum Stored {
    /// Nothing: the lock was never taken (or its state file was deleted).
    Absent,
    /// A readable state.
    Valid(LockState),
    /// Bytes that are not a [`LockState`] (empty, truncated, edited by hand).
    Corrupt {
        /// When the corrupt file was last modified.
        last_modified: DateTime<Utc>,
        /// What is wrong with it.
        reason: String,
    },
}

/// The files of one lock, used only while its OS file lock is held.
struct LockFiles {
    dir: PathBuf,
    lock: String,
    state_path: PathBuf,
    fence_path: PathBuf,
}

impl LockFiles {
    fn io_err(&self, path: &Path, e: io::Error) -> LockError {
        io_error(&self.lock, path, e)
    }

    /// Reads the state file as it is: absent, valid or corrupt.
    fn read_stored(&self) -> LockResult<Stored> {
        let path = &self.state_path;
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Stored::Absent),
            Err(e) => return Err(self.io_err(path, e)),
        };
        Ok(match serde_json::from_slice::<LockState>(&bytes) {
            Ok(state) => Stored::Valid(state),
            Err(e) => Stored::Corrupt {
                // Unknown modification time: count it as written just now (the safe side).
                last_modified: fs::metadata(path)
                    .and_then(|m| m.modified())
                    .map(DateTime::<Utc>::from)
                    .unwrap_or_else(|_| Utc::now()),
                reason: format!("{}: {e}", path.display()),
            },
        })
    }

    /// Replaces the state file by `state`.
    fn write_state(&self, state: &LockState) -> LockResult<()> {
        let bytes = serde_json::to_vec(state).map_err(|e| LockError::Corrupt {
            lock: self.lock.clone(),
            reason: format!("cannot encode state: {e}"),
        })?;
        write_atomically(&self.dir, &self.lock, "json", &self.state_path, &bytes)
            .map_err(|e| self.io_err(&self.state_path, e))
    }

    /// The fencing high-water mark (0 when absent). An unreadable mark counts as 0 (the state's
    /// own token still bounds the next token from below) and is overwritten when next raised.
    fn read_fence(&self) -> LockResult<u64> {
        let path = &self.fence_path;
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(self.io_err(path, e)),
        };
        Ok(
            match std::str::from_utf8(&bytes)
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
            {
                Some(mark) => mark,
                None => {
                    tracing::warn!(path = %path.display(), "unreadable fencing high-water mark; rewriting it");
                    0
                }
            },
        )
    }

    /// Raises the fencing high-water mark to at least `token` (never lowers it).
    fn raise_fence(&self, token: u64) -> LockResult<()> {
        if self.read_fence()? >= token {
            return Ok(());
        }
        let bytes = token.to_string().into_bytes();
        write_atomically(&self.dir, &self.lock, "fence", &self.fence_path, &bytes)
            .map_err(|e| self.io_err(&self.fence_path, e))
    }

    /// One attempt to take the lock for a new owner with a lease of `lease`.
    fn try_grant(&self, lease: Duration) -> LockResult<Grant> {
        let now = Utc::now();
        // `lost`: the state file is gone or unreadable, so its token says nothing about the
        // tokens handed out before; the high-water mark does.
        let (mut state, lost) = match self.read_stored()? {
            Stored::Absent => (LockState::free(), true),
            Stored::Valid(state) => (state, false),
            // A corrupt state may hide a live holder: it counts as held by an unknown writer for
            // one lease after it was last modified, then it is repaired by a fresh grant.
            Stored::Corrupt {
                last_modified,
                reason,
            } => {
                if lease_end(last_modified, lease) > now {
                    return Ok(Grant::Held { holder: None });
                }
                tracing::warn!(lock = %self.lock, %reason, "repairing corrupt lock state");
                (LockState::free(), true)
            }
        };
        if state.is_held_at(now) {
            return Ok(Grant::Held {
                holder: state.holder(),
            });
        }
        if lost {
            state.token = state.token.max(self.read_fence()?);
        }
        // Never hand out a token above the persisted high-water mark: reserve a block of tokens
        // in the mark first when the state's reservation is used up.
        let next = state.token.saturating_add(1);
        if state.reserved < next {
            let target = next.saturating_add(FENCE_BLOCK - 1);
            self.raise_fence(target)?;
            state.reserved = target;
        }
        let grant = state.try_grant(&self.lock, Utc::now(), lease)?;
        if let Grant::Granted(_) = &grant {
            self.write_state(&state)?;
        }
        Ok(grant)
    }
}

/// A backend error naming `path`.
fn io_error(lock: &str, path: &Path, e: io::Error) -> LockError {
    LockError::Backend {
        lock: lock.to_string(),
        source: Box::new(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

/// Runs `f` on the files of `lock` in `dir` (created if missing) under the exclusive OS lock of
/// its lock file.
fn with_lock_file<R>(
    dir: &Path,
    lock: &str,
    f: impl FnOnce(&LockFiles) -> LockResult<R>,
) -> LockResult<R> {
    if !dir.is_dir() {
        fs::create_dir_all(dir).map_err(|e| io_error(lock, dir, e))?;
        // Make the new directory's own name durable too, or a power failure could lose the
        // whole directory (and the tokens it will hold) even after its files were synced.
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent).map_err(|e| io_error(lock, parent, e))?;
        }
    }
    let lock_path = dir.join(format!("{lock}.lock"));
    let guard = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| io_error(lock, &lock_path, e))?;
    // Released when `guard` is closed at the end of this function (also on an early return).
    FileExt::lock_exclusive(&guard).map_err(|e| io_error(lock, &lock_path, e))?;
    let files = LockFiles {
        dir: dir.to_path_buf(),
        lock: lock.to_string(),
        state_path: dir.join(format!("{lock}.lock.json")),
        fence_path: dir.join(format!("{lock}.lock.fence")),
    };
    let out = f(&files);
    drop(guard);
    out
}

/// Replaces `path` by `bytes`: writes a temporary file beside it, syncs it, renames it over
/// `path` and syncs the directory, so that a reader (or a crash) sees the old or the new
/// content, never a mix, and once this returns a power failure cannot bring the old content
/// (and an old fencing token) back.
fn write_atomically(
    dir: &Path,
    lock: &str,
    kind: &str,
    path: &Path,
    bytes: &[u8],
) -> io::Result<()> {
    let tmp = dir.join(format!(
        ".{lock}.lock.{kind}.{}.tmp",
        uuid::Uuid::new_v4().simple()
    ));
    let result = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_data()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        // Best effort: a leftover temporary file is harmless.
        let _ = fs::remove_file(&tmp);
    }
    result?;
    sync_dir(dir)
}

#[async_trait]
impl LockProvider for FileLockProvider {
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease> {
        let deadline = Deadline::after(timeout);
        let mut attempt = 0u32;
        loop {
            let grant = self
                .with_files(lock, move |files| files.try_grant(lease))
                .await?;
            let holder = match grant {
                Grant::Granted(held) => return Ok(held),
                Grant::Held { holder } => holder,
            };
            let Some(left) = deadline.remaining(Instant::now()) else {
                return Err(deadline.timeout_error(lock, holder));
            };
            tokio::time::sleep(backoff(attempt).min(left)).await;
            attempt = attempt.saturating_add(1);
        }
    }

    async fn renew(&self, held: &Lease, lease: Duration) -> LockResult<Lease> {
        let h = held.clone();
        self.change_held(held, move |state| state.renew(&h, Utc::now(), lease))
            .await
    }

    async fn release(&self, held: &Lease) -> LockResult<()> {
        let h = held.clone();
        self.change_held(held, move |state| state.release(&h)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn test_acquire_new_provider_same_dir_token_continues() {
        let dir = tempfile::tempdir().unwrap();
        let first = FileLockProvider::new(dir.path());
        let a = first.acquire("t", LONG, LONG).await.unwrap();
        first.release(&a).await.unwrap();
        drop(first);
        // A "restarted" process: a new provider on the same directory.
        let second = FileLockProvider::new(dir.path());
        let b = second.acquire("t", LONG, LONG).await.unwrap();
        assert_eq!(b.token, a.token + 1);
        let on_disk: LockState =
            serde_json::from_slice(&fs::read(dir.path().join("t.lock.json")).unwrap()).unwrap();
        assert_eq!(on_disk.owner.as_deref(), Some(b.owner.as_str()));
        assert_eq!(on_disk.token, b.token);
    }

    #[tokio::test]
    async fn test_acquire_held_by_other_handle_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let a = FileLockProvider::new(dir.path());
        let b = FileLockProvider::new(dir.path());
        let held = a.acquire("t", LONG, LONG).await.unwrap();
        let err = b
            .acquire("t", LONG, Duration::from_millis(30))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, LockError::Timeout { holder: Some(h), .. } if h.owner == held.owner),
            "{err:?}"
        );
    }

    /// Sets the modification time of `path` an hour back, so a corrupt state there has outlived
    /// any lease the tests ask for.
    fn age(path: &Path) {
        let file = OpenOptions::new().write(true).open(path).unwrap();
        let past = std::time::SystemTime::now() - Duration::from_secs(3600);
        file.set_modified(past).unwrap();
    }

    #[tokio::test]
    async fn test_acquire_state_file_deleted_token_still_greater() {
        let dir = tempfile::tempdir().unwrap();
        let p = FileLockProvider::new(dir.path());
        let mut last = 0;
        for _ in 0..3 {
            let held = p.acquire("t", LONG, LONG).await.unwrap();
            assert!(held.token > last, "{} after {last}", held.token);
            last = held.token;
            p.release(&held).await.unwrap();
            // Deleted by hand between acquisitions: only the fence remembers the tokens.
            fs::remove_file(dir.path().join("t.lock.json")).unwrap();
        }
        assert!(dir.path().join("t.lock.fence").is_file());
        // A new provider (a restarted process) on the same directory: still greater.
        let b = FileLockProvider::new(dir.path())
            .acquire("t", LONG, LONG)
            .await
            .unwrap();
        assert!(b.token > last, "{} after {last}", b.token);
    }

    #[tokio::test]
    async fn test_acquire_reserves_blocks_fence_written_once_per_block() {
        let dir = tempfile::tempdir().unwrap();
        let p = FileLockProvider::new(dir.path());
        let fence = dir.path().join("t.lock.fence");
        let a = p.acquire("t", LONG, LONG).await.unwrap();
        assert_eq!(a.token, 1);
        assert_eq!(fs::read_to_string(&fence).unwrap(), FENCE_BLOCK.to_string());
        p.release(&a).await.unwrap();
        let b = p.acquire("t", LONG, LONG).await.unwrap();
        assert_eq!(b.token, 2, "tokens are consecutive within a block");
        assert_eq!(fs::read_to_string(&fence).unwrap(), FENCE_BLOCK.to_string());
    }

    #[tokio::test]
    async fn test_acquire_corrupt_state_file_repaired_token_greater() {
        let dir = tempfile::tempdir().unwrap();
        let p = FileLockProvider::new(dir.path());
        let first = p.acquire("t", LONG, LONG).await.unwrap();
        p.release(&first).await.unwrap();
        for bad in [&b"{not json"[..], &b""[..]] {
            let state = dir.path().join("t.lock.json");
            fs::write(&state, bad).unwrap();
            age(&state);
            let held = p.acquire("t", LONG, LONG).await.unwrap();
            assert!(
                held.token > first.token,
                "{} after {}",
                held.token,
                first.token
            );
            // Repaired: a valid state of the new holder.
            let on_disk: LockState = serde_json::from_slice(&fs::read(&state).unwrap()).unwrap();
            assert_eq!(on_disk.owner.as_deref(), Some(held.owner.as_str()));
            assert_eq!(on_disk.token, held.token);
            p.release(&held).await.unwrap();
        }
    }

    #[tokio::test]
    async fn test_acquire_fresh_corrupt_state_held_by_unknown_writer() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("t.lock.json"), b"{not json").unwrap();
        let p = FileLockProvider::new(dir.path());
        let err = p
            .acquire("t", LONG, Duration::from_millis(30))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, LockError::Timeout { holder: None, .. }),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn test_renew_and_release_corrupt_state_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let p = FileLockProvider::new(dir.path());
        let held = p.acquire("t", LONG, LONG).await.unwrap();
        fs::write(dir.path().join("t.lock.json"), b"{not json").unwrap();
        let err = p.renew(&held, LONG).await.unwrap_err();
        assert!(
            matches!(&err, LockError::Corrupt { lock, .. } if lock == "t"),
            "{err:?}"
        );
        let err = p.release(&held).await.unwrap_err();
        assert!(
            matches!(&err, LockError::Corrupt { lock, .. } if lock == "t"),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn test_acquire_corrupt_fence_rewritten_state_token_continues() {
        let dir = tempfile::tempdir().unwrap();
        let p = FileLockProvider::new(dir.path());
        let a = p.acquire("t", LONG, LONG).await.unwrap();
        p.release(&a).await.unwrap();
        let fence = dir.path().join("t.lock.fence");
        fs::write(&fence, b"garbage").unwrap();
        // Fake a used-up reservation so that the next grant has to raise the mark.
        let state = dir.path().join("t.lock.json");
        let mut s: LockState = serde_json::from_slice(&fs::read(&state).unwrap()).unwrap();
        s.reserved = s.token;
        fs::write(&state, serde_json::to_vec(&s).unwrap()).unwrap();
        let b = p.acquire("t", LONG, LONG).await.unwrap();
        assert_eq!(b.token, a.token + 1);
        let mark: u64 = fs::read_to_string(&fence).unwrap().parse().unwrap();
        assert!(mark >= b.token);
    }

    #[tokio::test]
    async fn test_acquire_missing_dir_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a").join("b");
        let p = FileLockProvider::new(&nested);
        let held = p.acquire("t", LONG, LONG).await.unwrap();
        assert_eq!(held.token, 1);
        assert!(nested.join("t.lock.json").is_file());
        assert_eq!(p.dir(), nested.as_path());
    }

    #[tokio::test]
    async fn test_acquire_dir_is_a_file_backend_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        fs::write(&file, b"x").unwrap();
        let p = FileLockProvider::new(&file);
        let err = p.acquire("t", LONG, LONG).await.unwrap_err();
        assert!(
            matches!(&err, LockError::Backend { lock, .. } if lock == "t"),
            "{err:?}"
        );
    }
}
