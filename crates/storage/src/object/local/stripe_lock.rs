//! The stripe locks of the local backend: one `flock`ed file per stripe in a per-user directory
//! under the system temp dir, serialising the mutations of a directory across threads and
//! processes, and recording the last mtime stamp handed out so that versions never repeat.

use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path as FsPath, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fs4::fs_std::FileExt;

/// Number of lock stripes shared by every local storage of the machine. A directory always maps
/// to the same stripe; unrelated directories sharing a stripe only serialise their (short)
/// critical sections.
const LOCK_STRIPES: u64 = 256;

/// The directory (under the system temp dir) holding the stripe lock files (on Unix followed by
/// `-<uid>`). Versioned so that a change of the scheme never mixes with an older one.
const LOCK_DIR_NAME: &str = "arbor-storage-locks-v2";

/// How far ahead of the clock a recorded stamp may be before it is distrusted (see
/// [`StripeLock::read_last`]).
pub(super) const MAX_STAMP_AHEAD: Duration = Duration::from_secs(24 * 3600);

/// Modification time in microseconds since the epoch (0 if unknown).
pub(super) fn micros(meta: &fs::Metadata) -> u128 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .unwrap_or_default()
        .as_micros()
}

/// An exclusive `flock` on the stripe file of one directory; released on drop (close).
///
/// The OS releases a `flock` when its holder exits or is killed, so a crashed writer never
/// blocks anybody. A writer that is *stopped* (`SIGSTOP`, a debugger, a hung NFS read) inside its
/// critical section, however, keeps the lock, and every writer on the same stripe (the same
/// directory, or any directory hashing to the same stripe) then waits until it resumes or dies.
pub(super) struct StripeLock {
    file: File,
    /// The stripe file's path (for messages).
    path: PathBuf,
}

impl StripeLock {
    /// Locks the stripe of directory `dir` (which must exist), blocking until it is free.
    pub(super) fn acquire(dir: &FsPath) -> io::Result<Self> {
        let canonical = fs::canonicalize(dir)?;
        let stripe = fnv1a64(canonical.as_os_str().as_encoded_bytes()) % LOCK_STRIPES;
        let name = format!("stripe-{stripe:03}.lock");
        let path = lock_dir(false)?.join(&name);
        let (file, path) = match open_lock_file(&path) {
            // The directory was removed (a temp cleaner): create it again.
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let path = lock_dir(true)?.join(&name);
                (open_lock_file(&path)?, path)
            }
            other => (other?, path),
        };
        FileExt::lock_exclusive(&file)?;
        Ok(Self { file, path })
    }

    /// Sets the mtime of `target` to a value (in µs, as the ETag sees it) strictly greater than
    /// every mtime set before under this stripe, and records it. Steps up in coarser units if the
    /// file system rounds modification times.
    pub(super) fn stamp(&mut self, target: &File) -> io::Result<()> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros();
        let last = self.read_last(now);
        let mut candidate = now.max(last.saturating_add(1));
        let mut step: u128 = 1;
        for _ in 0..10 {
            let micros_u64 = u64::try_from(candidate).unwrap_or(u64::MAX);
            let mtime = UNIX_EPOCH
                .checked_add(Duration::from_micros(micros_u64))
                .ok_or_else(|| io::Error::other("modification time out of range"))?;
            target.set_modified(mtime)?;
            let actual = micros(&target.metadata()?);
            if actual > last {
                self.write_last(actual);
                return Ok(());
            }
            step = step.saturating_mul(10);
            candidate = last.saturating_add(step);
        }
        Err(io::Error::other(
            "the file system does not keep modification times precisely enough to version files",
        ))
    }

    /// The last stamp recorded in the stripe file, given the current time `now` (both in µs since
    /// the epoch). 0 if there is none or it cannot be read. A value more than
    /// [`MAX_STAMP_AHEAD`] ahead of `now` cannot come from a sane clock (it was planted, or the
    /// file is damaged): it is ignored with a warning, so that it cannot push every later mtime
    /// out of range and make every write fail; the next stamp overwrites it.
    fn read_last(&mut self, now: u128) -> u128 {
        let mut s = String::new();
        if self.file.seek(SeekFrom::Start(0)).is_err() || self.file.read_to_string(&mut s).is_err()
        {
            return 0;
        }
        let last: u128 = s.trim().parse().unwrap_or(0);
        if last > now.saturating_add(MAX_STAMP_AHEAD.as_micros()) {
            tracing::warn!(
                stripe = %self.path.display(),
                stored = last,
                now,
                "ignoring a last-modification stamp far in the future in a local-storage \
                 stripe lock file"
            );
            return 0;
        }
        last
    }

    /// Best effort: a stripe file we may not write (another user's) only loses the memory of the
    /// last stamp, and mtimes then come from the clock alone.
    pub(super) fn write_last(&mut self, value: u128) {
        let text = format!("{value:039}\n");
        if self.file.seek(SeekFrom::Start(0)).is_ok() {
            let _ = self.file.write_all(text.as_bytes());
        }
    }
}

/// Opens (creating if needed, owner-only) a stripe lock file, read-write when permitted. A file
/// that already exists keeps its permissions; one we may not write is opened read-only (`flock`
/// needs no write access).
fn open_lock_file(path: &FsPath) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    match opts.open(path) {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            OpenOptions::new().read(true).open(path)
        }
        Err(e) => Err(e),
    }
}

/// The directory of the stripe files, created (owner-only) on first use or when `recreate`.
///
/// On Unix it is `$TMPDIR/arbor-storage-locks-v2-<uid>`: one per user, mode `0700` when we create
/// it, so that other users can neither plant stamps in its files nor hold its locks. A directory
/// that already exists is used whatever its permissions, but only if it belongs to us: one owned
/// by somebody else (planted in the shared temp directory) is refused with `PermissionDenied`.
/// Processes of *different* users writing to the same directory therefore do not serialise their
/// writes; only those of one user do.
fn lock_dir(recreate: bool) -> io::Result<PathBuf> {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    if let (Some(d), false) = (DIR.get(), recreate) {
        return Ok(d.clone());
    }
    let dir = lock_dir_path()?;
    create_lock_dir(&dir)?;
    Ok(DIR.get_or_init(|| dir).clone())
}

/// Creates `dir` with mode `0700`, or checks that an existing one is ours.
fn create_lock_dir(dir: &FsPath) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    match builder.create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => check_lock_dir_owner(dir),
        Err(e) => Err(e),
    }
}

/// Where the stripe files live (see [`lock_dir`]).
#[cfg(unix)]
fn lock_dir_path() -> io::Result<PathBuf> {
    Ok(std::env::temp_dir().join(format!("{LOCK_DIR_NAME}-{}", current_uid()?)))
}

#[cfg(not(unix))]
fn lock_dir_path() -> io::Result<PathBuf> {
    Ok(std::env::temp_dir().join(LOCK_DIR_NAME))
}

/// The effective user id of this process, learnt (without `unsafe` code) as the owner of a file
/// it creates, once.
#[cfg(unix)]
fn current_uid() -> io::Result<u32> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    static UID: OnceLock<u32> = OnceLock::new();
    if let Some(uid) = UID.get() {
        return Ok(*uid);
    }
    let probe = std::env::temp_dir().join(format!(
        ".arbor-storage-uid-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&probe)?;
    let meta = file.metadata();
    drop(file);
    let _ = fs::remove_file(&probe);
    let uid = meta?.uid();
    Ok(*UID.get_or_init(|| uid))
}

/// Refuses an existing stripe directory that is not a directory of ours (see [`lock_dir`]).
#[cfg(unix)]
fn check_lock_dir_owner(dir: &FsPath) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    // Not following a symlink: a link planted by another user is theirs.
    let meta = fs::symlink_metadata(dir)?;
    let uid = current_uid()?;
    if meta.uid() != uid || !(meta.is_dir() || meta.file_type().is_symlink()) {
        return Err(io::Error::new(
            ErrorKind::PermissionDenied,
            format!(
                "{} is not a directory owned by this user (uid {uid}); remove it so that the \
                 local storage can keep its lock files there",
                dir.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_lock_dir_owner(_dir: &FsPath) -> io::Result<()> {
    Ok(())
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

    #[test]
    fn test_fnv_is_stable() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    /// A stripe lock on a private file, not one of the machine's shared stripes.
    fn private_stripe(dir: &FsPath) -> StripeLock {
        let path = dir.join("stripe.lock");
        StripeLock {
            file: open_lock_file(&path).unwrap(),
            path,
        }
    }

    fn now_micros() -> u128 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros()
    }

    #[test]
    fn test_read_last_far_future_value_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut lock = private_stripe(dir.path());
        let now = now_micros();
        assert_eq!(lock.read_last(now), 0, "empty file");
        let soon = now + 3_600_000_000; // an hour ahead: a plausible clock difference
        lock.write_last(soon);
        assert_eq!(lock.read_last(now), soon);
        lock.write_last(now + 2 * MAX_STAMP_AHEAD.as_micros());
        assert_eq!(lock.read_last(now), 0);
        lock.write_last(u128::MAX);
        assert_eq!(lock.read_last(now), 0);
        fs::write(&lock.path, b"garbage").unwrap();
        assert_eq!(lock.read_last(now), 0);
    }

    #[test]
    fn test_stamp_planted_max_value_still_stamps_near_now() {
        let dir = tempfile::tempdir().unwrap();
        let mut lock = private_stripe(dir.path());
        lock.write_last(u128::MAX);
        let target = File::create(dir.path().join("target")).unwrap();
        let before = now_micros();
        lock.stamp(&target).unwrap();
        let stamped = micros(&target.metadata().unwrap());
        assert!(
            stamped >= before && stamped < before + 3_600_000_000,
            "stamped {stamped}, now {before}"
        );
        // The planted value was replaced by the real stamp.
        assert_eq!(lock.read_last(now_micros()), stamped);
        // A stamp close to the limit still works and increases.
        let near = now_micros() + MAX_STAMP_AHEAD.as_micros() - 1_000_000;
        lock.write_last(near);
        lock.stamp(&target).unwrap();
        assert!(micros(&target.metadata().unwrap()) > near);
    }

    #[cfg(unix)]
    #[test]
    fn test_create_lock_dir_owner_only_and_existing_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("fresh");
        create_lock_dir(&fresh).unwrap();
        let mode = fs::metadata(&fresh).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "{mode:o}");
        // An existing directory of ours with other permissions is used as it is.
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        create_lock_dir(&open).unwrap();
        let mode = fs::metadata(&open).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o1777, "{mode:o}");
        let file = open.join("stripe-000.lock");
        drop(open_lock_file(&file).unwrap());
        let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
        // A plain file in its place is refused.
        let plain = dir.path().join("plain");
        fs::write(&plain, b"").unwrap();
        let err = create_lock_dir(&plain).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn test_lock_dir_is_per_user() {
        use std::os::unix::fs::MetadataExt;
        let dir = lock_dir(false).unwrap();
        let uid = current_uid().unwrap();
        assert!(
            dir.to_string_lossy().ends_with(&format!("-{uid}")),
            "{}",
            dir.display()
        );
        assert_eq!(fs::symlink_metadata(&dir).unwrap().uid(), uid);
    }
}
