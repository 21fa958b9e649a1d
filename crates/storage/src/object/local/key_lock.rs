//! The per-key locks of the local backend: an exclusive OS file lock (`flock` on Unix) on a
//! hidden lock file next to the object, held for the few microseconds a mutation of the object
//! lasts and removed when it ends.
//!
//! Protocol, the same for every process whatever its user, `TMPDIR` or storage root:
//! 1. open (creating if missing) `<dir>/.arbor-lock-<16 hex digits>`, the hex digits being a
//!    stable hash of the object's file name ([`lock_file_name`]);
//! 2. take the exclusive lock without blocking, retrying with a back-off of 1 ms doubling to
//!    50 ms until the timeout;
//! 3. check that the path still names the locked file (same device and inode); if not, the
//!    previous holder removed it while this process waited: start again at 1;
//! 4. mutate the object, then remove the lock file *while still holding the lock*, then close it
//!    (which releases the lock).
//!
//! Only a holder removes a lock file, and only its own (step 4), so while a process holds the
//! lock the path names its file and whoever opens the path waits for it; a waiter that locked a
//! removed file notices at step 3. A holder that is killed releases the lock at once (the OS
//! closes its files) and leaves the lock file behind, which the next mutation of the key reuses
//! and removes. A holder that is stopped (`SIGSTOP`, a debugger) keeps the lock until it resumes
//! or dies; the writers of *that key* wait at most their timeout, nobody else waits at all.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind};
use std::path::{Path as FsPath, PathBuf};
use std::time::{Duration, Instant};

use fs4::fs_std::FileExt;

/// The start of every lock file name; the rest is [`LOCK_HASH_DIGITS`] lowercase hex digits.
const LOCK_PREFIX: &str = ".arbor-lock-";

/// Hex digits of the hash in a lock file name.
const LOCK_HASH_DIGITS: usize = 16;

/// First pause between two attempts to take a busy lock.
const FIRST_BACKOFF: Duration = Duration::from_millis(1);

/// Longest pause between two attempts to take a busy lock.
const MAX_BACKOFF: Duration = Duration::from_millis(50);

/// The name of the lock file of an object whose file is called `file_name`:
/// `.arbor-lock-<FNV-1a 64 of the name, 16 lowercase hex digits>`. Two names with the same hash
/// in one directory share a lock, which only serialises them.
pub(super) fn lock_file_name(file_name: &OsStr) -> String {
    format!(
        "{LOCK_PREFIX}{:0width$x}",
        fnv1a64(file_name.as_encoded_bytes()),
        width = LOCK_HASH_DIGITS
    )
}

/// True if `name` has the form of a lock file name (such files are hidden from listings and
/// such keys are refused).
pub(super) fn is_lock_file_name(name: &str) -> bool {
    name.strip_prefix(LOCK_PREFIX).is_some_and(|hash| {
        hash.len() == LOCK_HASH_DIGITS
            && hash
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Why [`KeyLock::acquire`] failed.
#[derive(Debug)]
pub(super) enum AcquireError {
    /// The lock file could not be opened or locked (`NotFound` or `NotADirectory` when the
    /// object's directory does not exist).
    Io(io::Error),
    /// Another holder kept the lock for the whole timeout.
    Timeout {
        /// The lock file.
        lock_file: PathBuf,
        /// How long this process tried.
        waited: Duration,
    },
}

/// An exclusive lock on the lock file of one object (see the module doc), released, and its
/// file removed, on drop.
#[derive(Debug)]
pub(super) struct KeyLock {
    file: File,
    path: PathBuf,
    /// How many times a lock file was removed under this waiter (step 3 of the protocol).
    #[cfg_attr(not(test), allow(dead_code))]
    reopened: u32,
}

impl KeyLock {
    /// Locks the object at `target` (a file path whose directory must exist), waiting at most
    /// `timeout` for another holder.
    pub(super) fn acquire(target: &FsPath, timeout: Duration) -> Result<Self, AcquireError> {
        let (dir, name) = match (target.parent(), target.file_name()) {
            (Some(dir), Some(name)) => (dir, name),
            _ => {
                return Err(AcquireError::Io(io::Error::new(
                    ErrorKind::InvalidInput,
                    format!("{} names no file in a directory", target.display()),
                )))
            }
        };
        let path = dir.join(lock_file_name(name));
        // I/O errors name the lock file and keep their kind (`NotFound` for a missing directory).
        let io_err = |e: io::Error| AcquireError::Io(io::Error::new(e.kind(), with_path(&path, e)));
        let start = Instant::now();
        let mut reopened = 0;
        loop {
            let file = open_lock_file(&path).map_err(io_err)?;
            let mut backoff = FIRST_BACKOFF;
            loop {
                if FileExt::try_lock_exclusive(&file).map_err(io_err)? {
                    break;
                }
                let waited = start.elapsed();
                let Some(left) = timeout.checked_sub(waited).filter(|d| !d.is_zero()) else {
                    return Err(AcquireError::Timeout {
                        lock_file: path,
                        waited,
                    });
                };
                std::thread::sleep(backoff.min(left));
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            if names_file(&path, &file).map_err(io_err)? {
                return Ok(Self {
                    file,
                    path,
                    reopened,
                });
            }
            // The holder we waited for removed the file: lock the one now at the path.
            reopened += 1;
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(AcquireError::Timeout {
                    lock_file: path,
                    waited,
                });
            }
        }
    }

    /// The lock file.
    #[cfg(test)]
    pub(super) fn path(&self) -> &FsPath {
        &self.path
    }

    /// How many times the lock file was removed while this lock waited for it.
    #[cfg(test)]
    pub(super) fn reopened(&self) -> u32 {
        self.reopened
    }
}

impl Drop for KeyLock {
    /// Removes the lock file while still holding the lock (so that nobody can lock the path in
    /// between), then releases the lock. A file that cannot be removed stays; the next holder
    /// reuses it.
    fn drop(&mut self) {
        if cfg!(unix) {
            if let Err(e) = fs::remove_file(&self.path) {
                if e.kind() != ErrorKind::NotFound {
                    tracing::debug!(
                        lock_file = %self.path.display(),
                        error = %e,
                        "could not remove a local-storage lock file"
                    );
                }
            }
        }
        // Closing the file (after this body) would release the lock too.
        let _ = FileExt::unlock(&self.file);
    }
}

/// `lock file <path>: <e>`.
fn with_path(path: &FsPath, e: io::Error) -> String {
    format!("lock file {}: {e}", path.display())
}

/// Opens (creating if missing) a lock file. The lock needs no write access, so a lock file of
/// another user that we may only read is opened read-only.
fn open_lock_file(path: &FsPath) -> io::Result<File> {
    match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
    {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            OpenOptions::new().read(true).open(path)
        }
        Err(e) => Err(e),
    }
}

/// True if `path` names the open `file` (same device and inode): false once it was removed or
/// replaced. Without inode numbers (outside Unix) lock files are never removed (see
/// [`KeyLock`]'s `Drop`), so the path always names the file.
#[cfg(unix)]
fn names_file(path: &FsPath, file: &File) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let held = file.metadata()?;
    match fs::metadata(path) {
        Ok(now) => Ok(now.dev() == held.dev() && now.ino() == held.ino()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn names_file(_path: &FsPath, _file: &File) -> io::Result<bool> {
    Ok(true)
}

/// 64-bit FNV-1a: a hash that is the same in every build and process (unlike `DefaultHasher`).
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    const LONG: Duration = Duration::from_secs(10);

    #[test]
    fn test_fnv_is_stable() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn test_lock_file_name_hidden_fixed_form() {
        let name = lock_file_name(OsStr::new("a"));
        assert_eq!(name, ".arbor-lock-af63dc4c8601ec8c");
        assert!(is_lock_file_name(&name));
        let log = lock_file_name(OsStr::new(".f1_20240101000000000.log.1_0-1-0"));
        assert!(is_lock_file_name(&log) && !log.contains(".log"), "{log}");
        for other in [
            ".arbor-lock-",
            ".arbor-lock-af63dc4c8601ec8",
            ".arbor-lock-af63dc4c8601ec8c0",
            ".arbor-lock-AF63DC4C8601EC8C",
            "arbor-lock-af63dc4c8601ec8c",
            ".arbor-lock-af63dc4c8601ec8g",
        ] {
            assert!(!is_lock_file_name(other), "{other}");
        }
    }

    #[test]
    fn test_acquire_release_removes_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("k");
        let lock = KeyLock::acquire(&target, LONG).unwrap();
        assert!(lock.path().exists());
        assert_eq!(lock.reopened(), 0);
        let path = lock.path().to_path_buf();
        drop(lock);
        assert!(!path.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn test_acquire_leftover_lock_file_reused_and_removed() {
        // A holder killed inside its critical section leaves its (unlocked) lock file.
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("k");
        let leftover = dir.path().join(lock_file_name(OsStr::new("k")));
        fs::write(&leftover, b"").unwrap();
        let lock = KeyLock::acquire(&target, Duration::from_millis(100)).unwrap();
        assert_eq!(lock.path(), leftover);
        drop(lock);
        assert!(!leftover.exists());
    }

    #[test]
    fn test_acquire_missing_directory_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = KeyLock::acquire(&dir.path().join("missing/k"), LONG).unwrap_err();
        assert!(
            matches!(&err, AcquireError::Io(e)
                if e.kind() == ErrorKind::NotFound && e.to_string().contains("/missing/.arbor-lock-")),
            "{err:?}"
        );
        assert!(!dir.path().join("missing").exists());
    }

    #[test]
    fn test_acquire_held_elsewhere_times_out_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("k");
        // Another open file description on the same file: `flock` excludes it as it would
        // another process.
        let holder = File::create(dir.path().join(lock_file_name(OsStr::new("k")))).unwrap();
        assert!(FileExt::try_lock_exclusive(&holder).unwrap());
        let timeout = Duration::from_millis(150);
        let start = Instant::now();
        let err = KeyLock::acquire(&target, timeout).unwrap_err();
        let elapsed = start.elapsed();
        match err {
            AcquireError::Timeout { lock_file, waited } => {
                assert_eq!(lock_file, dir.path().join(lock_file_name(OsStr::new("k"))));
                assert!(waited >= timeout, "{waited:?}");
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(elapsed < timeout + Duration::from_secs(1), "{elapsed:?}");
        // Other keys of the directory are not blocked.
        drop(KeyLock::acquire(&dir.path().join("other"), Duration::ZERO).unwrap());
    }

    #[test]
    fn test_acquire_lock_file_removed_while_waiting_locks_the_new_file() {
        // A waits on B's lock file; B removes it and releases (step 4) while C creates a new
        // one. A must not believe it holds the lock on the removed file: then A and C would both
        // hold "the" lock.
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("k");
        let first = KeyLock::acquire(&target, LONG).unwrap();
        let (tx, rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let waiter_target = target.clone();
        let waiter = std::thread::spawn(move || {
            let lock = KeyLock::acquire(&waiter_target, LONG).unwrap();
            tx.send(lock.reopened()).unwrap();
            release_rx.recv().unwrap();
            drop(lock);
        });
        // Let the waiter open the current file and start polling it.
        std::thread::sleep(Duration::from_millis(200));
        drop(first);
        let reopened = rx.recv_timeout(LONG).unwrap();
        assert_eq!(reopened, 1, "the waiter did not see its file removed");
        // The waiter holds the lock on the file now at the path: nobody else gets it.
        let err = KeyLock::acquire(&target, Duration::from_millis(100)).unwrap_err();
        assert!(matches!(err, AcquireError::Timeout { .. }), "{err:?}");
        release_tx.send(()).unwrap();
        waiter.join().unwrap();
        drop(KeyLock::acquire(&target, LONG).unwrap());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn test_acquire_many_threads_mutually_exclusive() {
        // Threads increment a counter file under the lock; each lock file removal makes the
        // waiters reopen. A lost update means two threads held the lock at once.
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("k");
        fs::write(&target, b"0").unwrap();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let target = target.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let lock = KeyLock::acquire(&target, LONG).unwrap();
                        let n: u64 = fs::read_to_string(&target).unwrap().parse().unwrap();
                        std::thread::yield_now();
                        fs::write(&target, (n + 1).to_string()).unwrap();
                        drop(lock);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(fs::read_to_string(&target).unwrap(), "800");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
