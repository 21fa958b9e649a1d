//! The local backend's versions: object_store's ETag of a file, and the modification-time stamps
//! that make it unique.
//!
//! A local version (ETag) is object_store's `<inode>-<mtime µs>-<size>`. Inodes are reused quickly
//! on ext4 and automatic mtimes are only as fine as the kernel's clock tick, so two writes of a key
//! could otherwise get the same version and a stale compare-and-swap would succeed. Every write
//! therefore sets the new file's mtime explicitly ([`stamp`]), under the key's lock, to a value
//! above the clock and above the mtime of the version it replaces: while a key exists its
//! versions' mtimes strictly increase, so none repeats. The last stamp thus lives in the object
//! itself. A delete keeps the key's lock until the clock has passed the deleted version's mtime
//! ([`wait_until_past`]), so a later re-creation, stamped from the clock, lies above every earlier
//! version too.

use std::fs::{self, File};
use std::io;
use std::path::Path as FsPath;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far ahead of the clock the mtime of the replaced version may be before it is distrusted
/// (see [`stamp`]).
pub(super) const MAX_STAMP_AHEAD: Duration = Duration::from_secs(24 * 3600);

/// The longest a delete waits for the clock to pass the deleted version's mtime (see
/// [`wait_until_past`]).
const MAX_DELETE_WAIT: Duration = Duration::from_secs(2);

/// Modification time in microseconds since the epoch (0 if unknown).
pub(super) fn micros(meta: &fs::Metadata) -> u128 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .unwrap_or_default()
        .as_micros()
}

/// object_store's local ETag: `<inode>-<mtime in µs>-<size>` in hex.
pub(super) fn e_tag(meta: &fs::Metadata) -> String {
    let inode = file_id(meta).1;
    let size = meta.len();
    let mtime = micros(meta);
    format!("{inode:x}-{mtime:x}-{size:x}")
}

/// The identity of a file: its device and inode numbers (`(0, 0)` outside Unix).
#[cfg(unix)]
pub(super) fn file_id(meta: &fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
pub(super) fn file_id(_meta: &fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// The clock in microseconds since the epoch.
fn now_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros()
}

/// Sets the mtime of `file` (the new version of the object at `target`) to the clock, or, if
/// that is not above `previous` (the replaced version's mtime in µs, 0 if none), to just above
/// `previous`; steps up in coarser units if the file system rounds modification times. Returns
/// the stamp as the ETag will see it.
///
/// A `previous` more than [`MAX_STAMP_AHEAD`] ahead of the clock cannot come from a stamp (the
/// file's time was set by hand, or is damaged): it is ignored with a warning, so that it cannot
/// push every later mtime out of range; the new version then differs from it by its mtime.
pub(super) fn stamp(file: &File, previous: u128, target: &FsPath) -> io::Result<u128> {
    let now = now_micros();
    let last = if previous > now.saturating_add(MAX_STAMP_AHEAD.as_micros()) {
        tracing::warn!(
            path = %target.display(),
            mtime_micros = previous,
            now_micros = now,
            "ignoring a modification time far in the future when versioning a local object"
        );
        0
    } else {
        previous
    };
    let mut candidate = now.max(last.saturating_add(1));
    let mut step: u128 = 1;
    for _ in 0..10 {
        let micros_u64 = u64::try_from(candidate).unwrap_or(u64::MAX);
        let mtime = UNIX_EPOCH
            .checked_add(Duration::from_micros(micros_u64))
            .ok_or_else(|| io::Error::other("modification time out of range"))?;
        file.set_modified(mtime)?;
        let actual = micros(&file.metadata()?);
        if actual > last && actual != previous {
            return Ok(actual);
        }
        step = step.saturating_mul(10);
        candidate = last.saturating_add(step);
    }
    Err(io::Error::other(
        "the file system does not keep modification times precisely enough to version files",
    ))
}

/// Waits until the clock is past `mtime` (µs since the epoch), at most [`MAX_DELETE_WAIT`]: a
/// delete calls it, holding the key's lock, with the deleted version's mtime. Normally that lies
/// in the past (stamps come from the clock) and this returns at once; it lies ahead only after
/// many writes within one tick of a file system with coarse times, or after the clock was set
/// back. A time further ahead than the bound (set by hand) is left with a warning.
pub(super) fn wait_until_past(mtime: u128, target: &FsPath) {
    let start = std::time::Instant::now();
    loop {
        let now = now_micros();
        if now > mtime {
            return;
        }
        let ahead = Duration::from_micros(u64::try_from(mtime - now).unwrap_or(u64::MAX));
        if start.elapsed() + ahead > MAX_DELETE_WAIT {
            tracing::warn!(
                path = %target.display(),
                ahead_ms = ahead.as_millis(),
                "a deleted local object's modification time is ahead of the clock; a re-created \
                 object could repeat its version if its inode and size are reused"
            );
            return;
        }
        std::thread::sleep(ahead + Duration::from_micros(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_stamp_above_clock_and_previous() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = File::create(&path).unwrap();
        let before = now_micros();
        let s = stamp(&f, 0, &path).unwrap();
        assert!(s >= before, "{s} < {before}");
        assert_eq!(micros(&f.metadata().unwrap()), s);
        // A previous version ahead of the clock (many writes in one tick): just above it.
        let ahead = now_micros() + 5_000_000;
        let s2 = stamp(&f, ahead, &path).unwrap();
        assert_eq!(s2, ahead + 1);
    }

    #[test]
    fn test_stamp_far_future_previous_ignored_stamps_near_now() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = File::create(&path).unwrap();
        for planted in [
            u128::MAX,
            now_micros() + 2 * MAX_STAMP_AHEAD.as_micros(),
            u128::from(u64::MAX),
        ] {
            let before = now_micros();
            let s = stamp(&f, planted, &path).unwrap();
            assert!(
                s >= before && s < before + 3_600_000_000,
                "planted {planted}: stamped {s}, now {before}"
            );
        }
        // Just inside the limit it is trusted.
        let near = now_micros() + MAX_STAMP_AHEAD.as_micros() - 1_000_000;
        assert_eq!(stamp(&f, near, &path).unwrap(), near + 1);
    }

    #[test]
    fn test_wait_until_past_waits_for_near_future_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let start = std::time::Instant::now();
        wait_until_past(now_micros().saturating_sub(1_000_000), &path);
        assert!(start.elapsed() < Duration::from_millis(100));
        let target = now_micros() + 200_000;
        wait_until_past(target, &path);
        assert!(now_micros() > target);
        // Beyond the bound: returns at once.
        let start = std::time::Instant::now();
        wait_until_past(now_micros() + 3_600_000_000, &path);
        assert!(start.elapsed() < Duration::from_millis(100));
    }
}
