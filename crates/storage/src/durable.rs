//! Making renames and hard links on the local file system survive a power failure.

use std::io;
use std::path::Path;

/// Flushes the entries of directory `dir` (a file renamed or linked into it) to stable storage,
/// so that the new name cannot disappear, or revert to an older file, after a power failure.
///
/// Best effort where the platform cannot do it: on Unix the directory is opened and `fsync`ed,
/// and the errors of file systems that do not support syncing a directory (`EINVAL`,
/// "unsupported") or of a directory we may not open for reading are ignored; any other error
/// (such as `EIO`) is returned. Elsewhere this does nothing (Windows cannot open a directory as
/// a file; NTFS journals its metadata).
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        let handle = match std::fs::File::open(dir) {
            Ok(h) => h,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Ok(()),
            Err(e) => return Err(e),
        };
        match handle.sync_all() {
            Ok(()) => Ok(()),
            Err(e) if ignorable(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// True for the errors of a file system that cannot sync directories.
#[cfg(unix)]
fn ignorable(e: &io::Error) -> bool {
    /// `EINVAL` on Linux, the BSDs and macOS.
    const EINVAL: i32 = 22;
    matches!(
        e.kind(),
        io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported
    ) || e.raw_os_error() == Some(EINVAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_sync_dir_existing_dir_ok() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        sync_dir(dir.path()).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn test_sync_dir_missing_dir_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = sync_dir(&dir.path().join("missing")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[cfg(unix)]
    #[test]
    fn test_ignorable_einval_and_unsupported() {
        assert!(ignorable(&io::Error::from_raw_os_error(22)));
        assert!(ignorable(&io::Error::from(io::ErrorKind::Unsupported)));
        assert!(!ignorable(&io::Error::from_raw_os_error(5))); // EIO
    }
}
