//! [`FileLockProvider`]: locks shared by the processes of one machine through a directory.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use fs4::fs_std::FileExt;
use tokio::time::Instant;

use super::state::Grant;
use super::{backoff, validate_lock_name, Deadline, Lease, LockProvider, LockState};
use crate::durable::sync_dir;
use crate::error::{LockError, LockResult};

/// Locks kept as files in one directory: mutual exclusion between the processes (and tasks) of
/// one machine.
///
/// Lock `name` has two files in the directory:
/// - `<name>.lock`, an empty file on which every read-modify-write of the lock takes an exclusive
///   OS file lock (`flock` on Unix, `LockFileEx` on Windows) for the few microseconds it lasts;
/// - `<name>.lock.json`, the [`LockState`] (owner, last fencing token, lease expiry) as JSON,
///   replaced atomically (written to a temporary file, synced, renamed over it, directory
///   synced), so that a power failure cannot revert it to an older state and token.
///
/// The OS lock is never held while the lock is "held": a holder that dies simply stops renewing,
/// and once its lease lapses another process takes over with a larger token. The state file
/// survives restarts, so tokens keep increasing. Expiry follows the wall clock of the machine.
/// The directory must be on a local file system (OS file locks on network file systems are not
/// reliable); it is created on first use.
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

    /// Runs `f` on the state of `lock` while holding the OS lock of its lock file, in a blocking
    /// thread, and writes the state back if `f` changed it.
    async fn with_state<R, F>(&self, lock: &str, f: F) -> LockResult<R>
    where
        F: FnOnce(&mut LockState) -> LockResult<R> + Send + 'static,
        R: Send + 'static,
    {
        validate_lock_name(lock)?;
        let dir = self.dir.clone();
        let name = lock.to_string();
        tokio::task::spawn_blocking(move || update_state(&dir, &name, f))
            .await
            .map_err(|e| LockError::Backend {
                lock: lock.to_string(),
                source: Box::new(e),
            })?
    }
}

/// The blocking read-modify-write of one lock's state file under its OS file lock.
fn update_state<R>(
    dir: &Path,
    lock: &str,
    f: impl FnOnce(&mut LockState) -> LockResult<R>,
) -> LockResult<R> {
    let io_err = |path: &Path, e: io::Error| LockError::Backend {
        lock: lock.to_string(),
        source: Box::new(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    };
    if !dir.is_dir() {
        fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        // Make the new directory's own name durable too, or a power failure could lose the
        // whole directory (and the tokens it will hold) even after its files were synced.
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent).map_err(|e| io_err(parent, e))?;
        }
    }
    let lock_path = dir.join(format!("{lock}.lock"));
    let guard = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| io_err(&lock_path, e))?;
    // Released when `guard` is closed at the end of this function (also on an early return).
    FileExt::lock_exclusive(&guard).map_err(|e| io_err(&lock_path, e))?;

    let state_path = dir.join(format!("{lock}.lock.json"));
    let before = match fs::read(&state_path) {
        Ok(bytes) => {
            serde_json::from_slice::<LockState>(&bytes).map_err(|e| LockError::Corrupt {
                lock: lock.to_string(),
                reason: format!("{}: {e}", state_path.display()),
            })?
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => LockState::free(),
        Err(e) => return Err(io_err(&state_path, e)),
    };
    let mut state = before.clone();
    let out = f(&mut state)?;
    if state != before {
        write_atomically(dir, lock, &state_path, &state).map_err(|e| io_err(&state_path, e))?;
    }
    drop(guard);
    Ok(out)
}

/// Replaces `path` by the JSON of `state`: writes a temporary file beside it, syncs it, renames
/// it over `path` and syncs the directory, so that a reader (or a crash) sees the old or the new
/// state, never a mix, and once this returns a power failure cannot bring the old state (and an
/// old fencing token) back.
fn write_atomically(dir: &Path, lock: &str, path: &Path, state: &LockState) -> io::Result<()> {
    let bytes = serde_json::to_vec(state).map_err(io::Error::other)?;
    let tmp = dir.join(format!(
        ".{lock}.lock.json.{}.tmp",
        uuid::Uuid::new_v4().simple()
    ));
    let result = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(&bytes)?;
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
            let name = lock.to_string();
            let grant = self
                .with_state(lock, move |state| state.try_grant(&name, Utc::now(), lease))
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
        self.with_state(&held.lock, move |state| state.renew(&h, Utc::now(), lease))
            .await
    }

    async fn release(&self, held: &Lease) -> LockResult<()> {
        let h = held.clone();
        self.with_state(&held.lock, move |state| state.release(&h))
            .await
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

    #[tokio::test]
    async fn test_acquire_corrupt_state_file_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("t.lock.json"), b"{not json").unwrap();
        let p = FileLockProvider::new(dir.path());
        let err = p.acquire("t", LONG, LONG).await.unwrap_err();
        assert!(
            matches!(&err, LockError::Corrupt { lock, .. } if lock == "t"),
            "{err:?}"
        );
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
