//! The local-file-system specifics of `ObjectStoreStorage`: atomic (conditional) writes
//! under a per-key cross-process lock (`key_lock`), versions that never repeat (`version`), and
//! listings in key order (`listing`).
//!
//! All functions here block; the caller runs them on tokio's blocking pool.

use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::local::LocalFileSystem;
use object_store::path::Path;

use crate::durable::sync_dir;
use crate::error::{Result, StorageError};
use crate::storage::{ListPage, ObjectMeta, Version};

mod key_lock;
mod listing;
mod version;

use self::key_lock::{is_lock_file_name, AcquireError, KeyLock};
use self::listing::{is_staging_name, list_sorted};
use self::version::{e_tag, micros, stamp, wait_until_past};

/// Where the data of a local write comes from.
pub(super) enum LocalSource {
    /// These bytes.
    Bytes(Bytes),
    /// A copy of the object at this key.
    CopyOf(String),
}

/// The condition of a local write.
pub(super) enum LocalWriteMode {
    /// Unconditional.
    Overwrite,
    /// Only if no object exists.
    Create,
    /// Only if the current version is this one.
    Update(Version),
}

impl LocalWriteMode {
    fn operation(&self, source: &LocalSource) -> &'static str {
        match (self, source) {
            (_, LocalSource::CopyOf(_)) => "copy",
            (LocalWriteMode::Overwrite, _) => "put",
            (LocalWriteMode::Create, _) => "put_if_absent",
            (LocalWriteMode::Update(_), _) => "put_if_match",
        }
    }
}

/// A local root directory and object_store's view of it (used for the key -> file mapping, so
/// that files written here are exactly those object_store readers open).
#[derive(Debug, Clone)]
pub(super) struct LocalFiles {
    root: PathBuf,
    fs: Arc<LocalFileSystem>,
    /// How long a mutation waits for the lock of its key.
    lock_timeout: Duration,
}

impl LocalFiles {
    pub(super) fn new(root: PathBuf, fs: Arc<LocalFileSystem>, lock_timeout: Duration) -> Self {
        Self {
            root,
            fs,
            lock_timeout,
        }
    }

    pub(super) fn root(&self) -> &FsPath {
        &self.root
    }

    /// The same files with another lock timeout.
    pub(super) fn with_lock_timeout(&self, lock_timeout: Duration) -> Self {
        Self {
            lock_timeout,
            ..self.clone()
        }
    }

    /// Rejects keys the local backend cannot store: a file name ending in `#<digits>` is
    /// reserved for temporary files (object_store's convention) and one of the form
    /// `.arbor-lock-<16 hex digits>` for lock files; both are hidden from listings.
    pub(super) fn check_key(&self, key: &str) -> Result<()> {
        let name = key.rsplit('/').next().unwrap_or(key);
        let reason = if is_staging_name(name) {
            "the local backend reserves file names ending in '#<digits>' for temporary files"
        } else if is_lock_file_name(name) {
            "the local backend reserves file names '.arbor-lock-<16 hex digits>' for lock files"
        } else {
            return Ok(());
        };
        Err(StorageError::InvalidKey {
            path: key.to_string(),
            reason: reason.to_string(),
        })
    }

    /// Locks the object at `target` for `operation` on `key` (see `key_lock`).
    fn lock(&self, operation: &'static str, key: &str, target: &FsPath) -> Result<KeyLock> {
        KeyLock::acquire(target, self.lock_timeout).map_err(|e| lock_error(operation, key, e))
    }

    /// The file of `key` (already validated).
    fn file_path(&self, key: &str) -> Result<PathBuf> {
        let path = Path::parse(key).map_err(|e| StorageError::InvalidKey {
            path: key.to_string(),
            reason: e.to_string(),
        })?;
        self.fs
            .path_to_filesystem(&path)
            .map_err(|e| StorageError::InvalidKey {
                path: key.to_string(),
                reason: e.to_string(),
            })
    }

    /// The directory of a listing prefix (already validated; empty for the root).
    fn dir_path(&self, prefix: &str) -> Result<PathBuf> {
        if prefix.is_empty() {
            Ok(self.root.clone())
        } else {
            self.file_path(prefix)
        }
    }

    /// Writes `key` from `source` if `mode` allows: the data goes to a temporary file next to the
    /// target, then, under the key's lock, the version is checked, the file gets a fresh mtime
    /// and is renamed (or, for `Create`, hard-linked) into place.
    ///
    /// A write that fails removes the directories it created (if still empty), so that a failed
    /// conditional write leaves no trace in listings.
    pub(super) fn write(
        &self,
        key: &str,
        source: LocalSource,
        mode: LocalWriteMode,
    ) -> Result<Version> {
        let target = self.file_path(key)?;
        let result = self.write_to(key, &target, source, mode);
        if result.is_err() {
            if let Some(parent) = target.parent() {
                self.prune_empty_dirs(parent);
            }
        }
        result
    }

    fn write_to(
        &self,
        key: &str,
        target: &FsPath,
        source: LocalSource,
        mode: LocalWriteMode,
    ) -> Result<Version> {
        let operation = mode.operation(&source);
        let io_err = |e: io::Error| backend(operation, key, e);
        let parent = target
            .parent()
            .ok_or_else(|| io_err(io::Error::other("the key has no parent directory")))?;
        let mut staged = Staged::create(target).map_err(io_err)?;
        match &source {
            LocalSource::Bytes(data) => staged.file.write_all(data).map_err(io_err)?,
            LocalSource::CopyOf(from) => {
                let from_path = self.file_path(from)?;
                let not_found = || StorageError::NotFound { path: from.clone() };
                match fs::metadata(&from_path) {
                    Ok(m) if m.is_file() => {}
                    Ok(_) => return Err(not_found()),
                    Err(e)
                        if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) =>
                    {
                        return Err(not_found())
                    }
                    Err(e) => return Err(backend(operation, from, e)),
                }
                match fs::copy(&from_path, &staged.path) {
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::NotFound => return Err(not_found()),
                    Err(e) => return Err(backend(operation, from, e)),
                }
            }
        }
        // The data must be on disk before a name points to it: otherwise a power failure could
        // leave a published (e.g. completed-instant) file empty or truncated. Done before taking
        // the key's lock, which thus stays short.
        staged.file.sync_data().map_err(io_err)?;

        let lock = self.lock(operation, key, target)?;
        let current = match fs::metadata(target) {
            Ok(m) if m.is_file() => Some(m),
            Ok(_) => None,
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(io_err(e)),
        };
        if let LocalWriteMode::Update(expected) = &mode {
            let current_tag = current.as_ref().map(e_tag);
            if current_tag.is_none() || current_tag != expected.e_tag {
                return Err(StorageError::PreconditionFailed {
                    path: key.to_string(),
                });
            }
        }
        let previous = current.as_ref().map_or(0, micros);
        stamp(&staged.file, previous, target).map_err(io_err)?;
        let meta = staged.file.metadata().map_err(io_err)?;
        let version = Version {
            e_tag: Some(e_tag(&meta)),
            version: None,
        };
        match mode {
            LocalWriteMode::Overwrite | LocalWriteMode::Update(_) => staged.rename_to(target),
            LocalWriteMode::Create => match fs::hard_link(&staged.path, target) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    return Err(StorageError::AlreadyExists {
                        path: key.to_string(),
                    })
                }
                Err(e) => Err(e),
            },
        }
        .map_err(io_err)?;
        drop(lock);
        // Make the new name durable. Outside the key's lock: readers never take it, so syncing
        // under it would protect nobody and only lengthen the critical section.
        self.sync_dirs(parent, staged.created_dirs)
            .map_err(io_err)?;
        Ok(version)
    }

    /// Syncs directory `dir` after a file was published in it, and, if the write created
    /// directories, every ancestor up to the root as well (so that the new directories' own
    /// names are durable). A directory that is gone is skipped: a concurrent delete removed the
    /// new file and pruned it, so there is nothing left there to make durable.
    fn sync_dirs(&self, dir: &FsPath, created_dirs: bool) -> io::Result<()> {
        let sync = |d: &FsPath| match sync_dir(d) {
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => Ok(()),
            other => other,
        };
        sync(dir)?;
        if created_dirs {
            let mut current = dir;
            while current != self.root && current.starts_with(&self.root) {
                let Some(up) = current.parent() else { break };
                sync(up)?;
                current = up;
            }
        }
        Ok(())
    }

    /// Deletes `key`; a missing key (or a directory) is not an error. Under the key's lock, which
    /// is kept until the clock has passed the deleted version's mtime (see `version`).
    pub(super) fn delete(&self, key: &str) -> Result<()> {
        let target = self.file_path(key)?;
        let Some(parent) = target.parent() else {
            return Ok(());
        };
        let lock = match KeyLock::acquire(&target, self.lock_timeout) {
            Ok(lock) => lock,
            // The directory does not exist (or a parent is a file): nothing to delete.
            Err(AcquireError::Io(e))
                if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) =>
            {
                return Ok(())
            }
            Err(e) => return Err(lock_error("delete", key, e)),
        };
        let result = delete_locked(key, &target);
        drop(lock);
        // Also when nothing was deleted: while it existed, this delete's lock file may have kept
        // a concurrent delete from removing the directory.
        self.prune_empty_dirs(parent);
        result
    }

    /// Removes `dir` and its ancestors below the root while they are empty, so that the
    /// directories of deleted objects disappear from listings as they do on object stores. A
    /// writer that loses its fresh directory to this retries (see [`Staged::create`]).
    fn prune_empty_dirs(&self, dir: &FsPath) {
        let mut dir = dir;
        while dir != self.root && dir.starts_with(&self.root) {
            if fs::remove_dir(dir).is_err() {
                break; // not empty (or gone, or not ours to remove)
            }
            match dir.parent() {
                Some(p) => dir = p,
                None => break,
            }
        }
    }

    /// One page of the objects under directory `prefix`, in ascending key order, after
    /// `start_after`. Walks the tree depth-first with the entries of each directory sorted by
    /// `name` (files) or `name/` (directories), which is exactly the byte order of the full keys;
    /// subtrees that lie entirely before `start_after` are skipped and the walk stops after
    /// `max_keys + 1` objects, so a page costs about its own size plus the depth of the tree.
    pub(super) fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> Result<ListPage> {
        let dir = self.dir_path(prefix)?;
        let objects = list_sorted(&dir, prefix, start_after, max_keys.saturating_add(1))
            .map_err(|e| backend("list", prefix, e))?;
        Ok(ListPage::of_sorted(objects, max_keys))
    }

    /// The objects directly under directory `prefix` and the keys of its sub-directories, each
    /// in ascending order ([`listing::list_one_level`]).
    pub(super) fn list_dir(&self, prefix: &str) -> Result<(Vec<ObjectMeta>, Vec<String>)> {
        let dir = self.dir_path(prefix)?;
        listing::list_one_level(&dir, prefix).map_err(|e| backend("list_dir", prefix, e))
    }

    /// The keys [`LocalFiles::list_dir`] lists, without a `stat` per regular file.
    pub(super) fn list_dir_keys(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>)> {
        let dir = self.dir_path(prefix)?;
        listing::list_one_level_keys(&dir, prefix).map_err(|e| backend("list_dir", prefix, e))
    }
}

/// Removes the file of `key` at `target` (the caller holds the key's lock), then waits until
/// the clock has passed its mtime, so that a re-created object gets a later one.
fn delete_locked(key: &str, target: &FsPath) -> Result<()> {
    let io_err = |e: io::Error| backend("delete", key, e);
    let meta = match fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(m) => m,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(())
        }
        Err(e) => return Err(io_err(e)),
    };
    match fs::remove_file(target) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(e)),
    }
    wait_until_past(micros(&meta), target);
    Ok(())
}

/// The error of a failed [`KeyLock::acquire`] for `operation` on `key`.
fn lock_error(operation: &'static str, key: &str, e: AcquireError) -> StorageError {
    match e {
        AcquireError::Io(e) => backend(operation, key, e),
        AcquireError::Timeout { lock_file, waited } => StorageError::LockTimeout {
            operation,
            path: key.to_string(),
            lock_file,
            waited,
        },
    }
}

fn backend(operation: &'static str, key: &str, e: io::Error) -> StorageError {
    StorageError::Backend {
        operation,
        path: key.to_string(),
        source: Box::new(e),
    }
}

/// A temporary file next to its target, removed on drop unless it was renamed into place.
struct Staged {
    path: PathBuf,
    file: File,
    renamed: bool,
    /// True if creating it needed to create (some of) its directories.
    created_dirs: bool,
}

impl Staged {
    /// Creates a fresh temporary file for `target`, creating the directories as needed. Once it
    /// exists its directory is not empty, so a concurrent pruning cannot remove the directory
    /// before the file is renamed into place; if pruning removed the directory between its
    /// creation and the file's, this retries.
    fn create(target: &FsPath) -> io::Result<Self> {
        let parent = target
            .parent()
            .ok_or_else(|| io::Error::other("no parent directory"))?;
        let mut missing_dir = 0;
        loop {
            let mut name = target.as_os_str().to_owned();
            name.push(format!("#{}", uuid::Uuid::new_v4().as_u64_pair().0));
            let path = PathBuf::from(name);
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => {
                    return Ok(Self {
                        path,
                        file,
                        renamed: false,
                        created_dirs: missing_dir > 0,
                    })
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) if e.kind() == ErrorKind::NotFound && missing_dir < 100 => {
                    missing_dir += 1;
                    fs::create_dir_all(parent)?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn rename_to(&mut self, target: &FsPath) -> io::Result<()> {
        fs::rename(&self.path, target)?;
        self.renamed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::key_lock::lock_file_name;
    use super::version::MAX_STAMP_AHEAD;
    use super::*;
    use object_store::ObjectStoreExt;
    use std::ffi::OsStr;
    use std::time::{SystemTime, UNIX_EPOCH};

    fn files(dir: &FsPath) -> LocalFiles {
        let root = fs::canonicalize(dir).unwrap();
        let fs = Arc::new(LocalFileSystem::new_with_prefix(&root).unwrap());
        LocalFiles::new(root, fs, Duration::from_secs(10))
    }

    fn now_micros() -> u128 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros()
    }

    fn bytes(s: &'static str) -> LocalSource {
        LocalSource::Bytes(Bytes::from_static(s.as_bytes()))
    }

    /// Sets the mtime of `path` to `micros` µs since the epoch.
    fn set_mtime(path: &FsPath, micros: u128) {
        let t = UNIX_EPOCH + Duration::from_micros(u64::try_from(micros).unwrap());
        File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    #[test]
    fn test_keys_map_to_files_verbatim() {
        // The sorted listing derives keys from file names: the mapping must be the identity.
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        for key in [
            "a/b.txt",
            "p=a b/x%20y#z+ü.txt",
            "dt=2024-01-01/part-0000_1-2.parquet",
            "%41/%2F/~!$&'()*,;=:@",
        ] {
            assert_eq!(f.file_path(key).unwrap(), f.root.join(key), "{key}");
        }
    }

    #[tokio::test]
    async fn test_etag_matches_object_store_head() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let v = f
            .write(
                "x/y",
                LocalSource::Bytes(Bytes::from_static(b"hello")),
                LocalWriteMode::Overwrite,
            )
            .unwrap();
        let head = f.fs.head(&Path::from("x/y")).await.unwrap();
        assert_eq!(head.e_tag, v.e_tag);
        let page = f.list_page("", None, 10).unwrap();
        assert_eq!(page.objects[0].version, v);
    }

    #[test]
    fn test_versions_never_repeat_for_same_size_writes() {
        // Rapid same-size writes (and delete + re-create) reuse inodes and share the clock tick;
        // the stamped mtime must still make every version distinct.
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let mut seen = std::collections::HashSet::new();
        let mut current = f
            .write(
                "k",
                LocalSource::Bytes(Bytes::from_static(b"v-000")),
                LocalWriteMode::Create,
            )
            .unwrap();
        seen.insert(current.clone());
        for i in 1..200 {
            let data = Bytes::from(format!("v-{i:03}"));
            current = match i % 3 {
                0 => f
                    .write("k", LocalSource::Bytes(data), LocalWriteMode::Overwrite)
                    .unwrap(),
                1 => f
                    .write(
                        "k",
                        LocalSource::Bytes(data),
                        LocalWriteMode::Update(current),
                    )
                    .unwrap(),
                _ => {
                    f.delete("k").unwrap();
                    f.write("k", LocalSource::Bytes(data), LocalWriteMode::Create)
                        .unwrap()
                }
            };
            assert!(
                seen.insert(current.clone()),
                "version repeated: {current:?}"
            );
        }
        // A stale version never matches again.
        let first = seen.iter().next().unwrap().clone();
        if first != current {
            let err = f
                .write(
                    "k",
                    LocalSource::Bytes(Bytes::from_static(b"stale")),
                    LocalWriteMode::Update(first),
                )
                .unwrap_err();
            assert!(
                matches!(err, StorageError::PreconditionFailed { .. }),
                "{err}"
            );
        }
    }

    #[test]
    fn test_no_extra_files_in_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let v = f
            .write(
                "a/b",
                LocalSource::Bytes(Bytes::from_static(b"1")),
                LocalWriteMode::Create,
            )
            .unwrap();
        f.write(
            "a/b",
            LocalSource::Bytes(Bytes::from_static(b"2")),
            LocalWriteMode::Update(v),
        )
        .unwrap();
        let _ = f.write(
            "a/b",
            LocalSource::Bytes(Bytes::from_static(b"3")),
            LocalWriteMode::Create,
        );
        let _ = f.write(
            "a/b",
            LocalSource::Bytes(Bytes::from_static(b"3")),
            LocalWriteMode::Update(Version::default()),
        );
        f.write(
            "a/c",
            LocalSource::CopyOf("a/b".into()),
            LocalWriteMode::Overwrite,
        )
        .unwrap();
        let mut names: Vec<String> = fs::read_dir(f.root.join("a"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["b", "c"]);
        assert_eq!(fs::read_dir(&f.root).unwrap().count(), 1);
    }

    #[test]
    fn test_write_over_far_future_mtime_stamps_near_now() {
        // A version whose mtime was set far ahead by hand must not push every later mtime out of
        // range (before the guard, `last + 1` overflowed).
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let v0 = f.write("k", bytes("x"), LocalWriteMode::Create).unwrap();
        set_mtime(&f.root.join("k"), u128::from(u64::MAX / 2));
        let before = now_micros();
        let v1 = f.write("k", bytes("y"), LocalWriteMode::Overwrite).unwrap();
        let stamped = micros(&fs::metadata(f.root.join("k")).unwrap());
        assert!(
            stamped >= before && stamped < before + MAX_STAMP_AHEAD.as_micros(),
            "{stamped}"
        );
        assert_ne!(v0, v1);
    }

    #[test]
    fn test_delete_then_create_gets_a_later_mtime_than_the_deleted_version() {
        // The deleted version's mtime lies ahead of the clock (many writes within one tick of a
        // coarse file system): the delete holds the key until the clock has passed it, so the
        // re-created object, stamped from the clock, cannot repeat it.
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        f.write("d/k", bytes("v1"), LocalWriteMode::Create).unwrap();
        let ahead = now_micros() + 300_000;
        set_mtime(&f.root.join("d/k"), ahead);
        f.delete("d/k").unwrap();
        assert!(!f.root.join("d").exists(), "the emptied directory stays");
        f.write("d/k", bytes("v2"), LocalWriteMode::Create).unwrap();
        let stamped = micros(&fs::metadata(f.root.join("d/k")).unwrap());
        assert!(stamped > ahead, "{stamped} <= {ahead}");
    }

    #[test]
    fn test_overwrite_stamps_above_the_replaced_version() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let v0 = f.write("k", bytes("v1"), LocalWriteMode::Create).unwrap();
        let ahead = now_micros() + 60_000_000;
        set_mtime(&f.root.join("k"), ahead);
        let stale = Version {
            e_tag: Some(e_tag(&fs::metadata(f.root.join("k")).unwrap())),
            version: None,
        };
        assert_ne!(stale, v0);
        f.write("k", bytes("v2"), LocalWriteMode::Update(stale))
            .unwrap();
        assert_eq!(micros(&fs::metadata(f.root.join("k")).unwrap()), ahead + 1);
    }

    #[test]
    fn test_lock_files_hidden_from_listing_and_refused_as_keys() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        f.write("a/b", bytes("1"), LocalWriteMode::Create).unwrap();
        // A lock file left by a holder that was killed.
        let leftover = lock_file_name(OsStr::new("b"));
        fs::write(f.root.join("a").join(&leftover), b"").unwrap();
        let page = f.list_page("", None, 10).unwrap();
        let keys: Vec<_> = page.objects.iter().map(|m| m.key.as_str()).collect();
        assert_eq!(keys, ["a/b"]);
        let err = f.check_key(&format!("a/{leftover}")).unwrap_err();
        assert!(matches!(err, StorageError::InvalidKey { .. }), "{err}");
        f.check_key("a/.arbor-lock-x").unwrap();
        // The next mutation of the key reuses the leftover and removes it.
        f.delete("a/b").unwrap();
        assert_eq!(fs::read_dir(&f.root).unwrap().count(), 0);
    }

    #[test]
    fn test_held_key_lock_times_out_writes_of_that_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path()).with_lock_timeout(Duration::from_millis(100));
        let v = f.write("d/k", bytes("1"), LocalWriteMode::Create).unwrap();
        let held = KeyLock::acquire(&f.root.join("d/k"), Duration::ZERO).unwrap();
        for (op, result) in [
            (
                "put_if_match",
                f.write("d/k", bytes("2"), LocalWriteMode::Update(v.clone())),
            ),
            ("put", f.write("d/k", bytes("2"), LocalWriteMode::Overwrite)),
            ("delete", f.delete("d/k").map(|()| v.clone())),
        ] {
            match result {
                Err(StorageError::LockTimeout {
                    operation,
                    path,
                    lock_file,
                    waited,
                }) => {
                    assert_eq!((operation, path.as_str()), (op, "d/k"));
                    assert_eq!(lock_file, held.path());
                    assert!(waited >= Duration::from_millis(100), "{waited:?}");
                }
                other => panic!("{op}: expected a lock timeout, got {other:?}"),
            }
        }
        // Another key of the directory is not blocked, and nothing else changed.
        f.write("d/other", bytes("3"), LocalWriteMode::Create)
            .unwrap();
        assert_eq!(fs::read(f.root.join("d/k")).unwrap(), b"1");
        drop(held);
        f.write("d/k", bytes("2"), LocalWriteMode::Update(v))
            .unwrap();
        let mut names: Vec<_> = fs::read_dir(f.root.join("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["k", "other"]);
    }

    #[test]
    fn test_concurrent_deletes_leave_no_directory() {
        // Deletes of present and of missing keys race in shared directories: whichever finishes
        // last must remove the directory, whatever lock files the others held meanwhile.
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let f = Arc::new(files(dir.path()));
            for i in 0..4 {
                f.write(&format!("p/d/k{i}"), bytes("x"), LocalWriteMode::Create)
                    .unwrap();
            }
            let threads: Vec<_> = (0..8)
                .map(|i| {
                    let f = f.clone();
                    std::thread::spawn(move || f.delete(&format!("p/d/k{i}")).unwrap())
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            let left: Vec<_> = fs::read_dir(&f.root).unwrap().collect();
            assert!(left.is_empty(), "round {round}: left {left:?}");
        }
    }
}
