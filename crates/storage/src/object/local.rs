//! The local-file-system specifics of `ObjectStoreStorage`: atomic (conditional) writes
//! under a cross-process lock, versions that never repeat, and listings in key order.
//!
//! All functions here block; the caller runs them on tokio's blocking pool.

use std::cmp::Ordering;
use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use object_store::local::LocalFileSystem;
use object_store::path::Path;

use crate::durable::sync_dir;
use crate::error::{Result, StorageError};
use crate::storage::{ListPage, ObjectMeta, Version};

mod stripe_lock;

use self::stripe_lock::{micros, StripeLock};

/// Deepest directory nesting a listing follows (guards against symlink loops).
const MAX_DEPTH: usize = 256;

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
#[derive(Debug)]
pub(super) struct LocalFiles {
    root: PathBuf,
    fs: Arc<LocalFileSystem>,
}

impl LocalFiles {
    pub(super) fn new(root: PathBuf, fs: Arc<LocalFileSystem>) -> Self {
        Self { root, fs }
    }

    pub(super) fn root(&self) -> &FsPath {
        &self.root
    }

    /// Rejects keys the local backend cannot store: a file name ending in `#<digits>` is
    /// reserved for temporary files (object_store's convention) and hidden from listings.
    pub(super) fn check_key(&self, key: &str) -> Result<()> {
        let name = key.rsplit('/').next().unwrap_or(key);
        if is_staging_name(name) {
            return Err(StorageError::InvalidKey {
                path: key.to_string(),
                reason: "the local backend reserves file names ending in '#<digits>' for \
                         temporary files"
                    .to_string(),
            });
        }
        Ok(())
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

    /// True if `prefix` names an existing directory.
    pub(super) fn is_dir(&self, prefix: &str) -> bool {
        self.dir_path(prefix).map(|p| p.is_dir()).unwrap_or(false)
    }

    /// Writes `key` from `source` if `mode` allows: the data goes to a temporary file next to the
    /// target, then, under the directory's stripe lock, the version is checked, the file gets a
    /// fresh mtime and is renamed (or, for `Create`, hard-linked) into place.
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
        // the stripe lock, which thus stays short.
        staged.file.sync_data().map_err(io_err)?;

        let mut lock = StripeLock::acquire(parent).map_err(io_err)?;
        if let LocalWriteMode::Update(expected) = &mode {
            let current = match fs::metadata(target) {
                Ok(m) if m.is_file() => Some(e_tag(&m)),
                Ok(_) => None,
                Err(e) if e.kind() == ErrorKind::NotFound => None,
                Err(e) => return Err(io_err(e)),
            };
            if current.is_none() || current != expected.e_tag {
                return Err(StorageError::PreconditionFailed {
                    path: key.to_string(),
                });
            }
        }
        lock.stamp(&staged.file).map_err(io_err)?;
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
        // Make the new name durable. Outside the stripe lock: readers never take it, so syncing
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

    /// Deletes `key`; a missing key (or a directory) is not an error.
    pub(super) fn delete(&self, key: &str) -> Result<()> {
        let io_err = |e: io::Error| backend("delete", key, e);
        let target = self.file_path(key)?;
        let Some(parent) = target.parent() else {
            return Ok(());
        };
        let _lock = match StripeLock::acquire(parent) {
            Ok(lock) => lock,
            // The directory does not exist (or a parent is a file): nothing to delete.
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                return Ok(())
            }
            Err(e) => return Err(io_err(e)),
        };
        match fs::symlink_metadata(&target) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                return Ok(())
            }
            Err(e) => return Err(io_err(e)),
        }
        match fs::remove_file(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err(e)),
        }
        drop(_lock);
        self.prune_empty_dirs(parent);
        Ok(())
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
        let mut walk = Walk {
            start_after,
            limit: max_keys.saturating_add(1),
            out: Vec::new(),
            ancestors: Vec::new(),
        };
        walk.dir(&dir, prefix, 0)
            .map_err(|e| backend("list", prefix, e))?;
        Ok(ListPage::of_sorted(walk.out, max_keys))
    }
}

/// State of a sorted listing walk.
struct Walk<'a> {
    start_after: Option<&'a str>,
    limit: usize,
    out: Vec<ObjectMeta>,
    /// Identities of the directories on the current path (symlink loop guard).
    ancestors: Vec<(u64, u64)>,
}

/// One entry of a directory during a walk.
struct Entry {
    name: String,
    /// `name`, plus `/` for a directory: the order of these is the order of the full keys.
    sort_key: String,
    path: PathBuf,
    meta: fs::Metadata,
}

impl Walk<'_> {
    fn done(&self) -> bool {
        self.out.len() >= self.limit
    }

    fn dir(&mut self, dir: &FsPath, dir_key: &str, depth: usize) -> io::Result<()> {
        if depth > MAX_DEPTH {
            return Ok(());
        }
        let read = match fs::read_dir(dir) {
            Ok(r) => r,
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                return Ok(())
            }
            Err(e) => return Err(e),
        };
        let dir_meta = match fs::metadata(dir) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let id = file_id(&dir_meta);
        if id != (0, 0) && self.ancestors.contains(&id) {
            return Ok(()); // a symlink loop
        }
        let mut entries = Vec::new();
        for entry in read {
            let entry = match entry {
                Ok(e) => e,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let Ok(name) = entry.file_name().into_string() else {
                continue; // not UTF-8: not a key
            };
            if is_staging_name(&name) || name.is_empty() || name == "." || name == ".." {
                continue;
            }
            let path = entry.path();
            // Follow symlinks, like object_store's listing.
            let meta = match fs::metadata(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == ErrorKind::NotFound => continue, // deleted meanwhile
                Err(e) => return Err(e),
            };
            if !meta.is_dir() && !meta.is_file() {
                continue;
            }
            let sort_key = if meta.is_dir() {
                format!("{name}/")
            } else {
                name.clone()
            };
            entries.push(Entry {
                name,
                sort_key,
                path,
                meta,
            });
        }
        entries.sort_by(|a, b| a.sort_key.cmp(&b.sort_key));

        self.ancestors.push(id);
        for e in entries {
            if self.done() {
                break;
            }
            let key = if dir_key.is_empty() {
                e.name.clone()
            } else {
                format!("{dir_key}/{}", e.name)
            };
            if e.meta.is_dir() {
                let sub_prefix = format!("{key}/");
                let skip = match self.start_after {
                    // Every key below starts with `sub_prefix`: all of them are <= start_after
                    // iff start_after is greater and does not itself lie below.
                    Some(after) => {
                        after.cmp(sub_prefix.as_str()) == Ordering::Greater
                            && !after.starts_with(&sub_prefix)
                    }
                    None => false,
                };
                if !skip {
                    self.dir(&e.path, &key, depth + 1)?;
                }
            } else if self.start_after.is_none_or(|after| key.as_str() > after) {
                self.out.push(object_meta(key, &e.meta));
            }
        }
        self.ancestors.pop();
        Ok(())
    }
}

/// The metadata of a file as the listing reports it (same ETag as object_store's `head`).
fn object_meta(key: String, meta: &fs::Metadata) -> ObjectMeta {
    ObjectMeta {
        key,
        size: meta.len(),
        last_modified: meta
            .modified()
            .map(DateTime::<Utc>::from)
            .unwrap_or_default(),
        version: Version {
            e_tag: Some(e_tag(meta)),
            version: None,
        },
    }
}

/// object_store's local ETag: `<inode>-<mtime in µs>-<size>` in hex.
pub(super) fn e_tag(meta: &fs::Metadata) -> String {
    let inode = file_id(meta).1;
    let size = meta.len();
    let mtime = micros(meta);
    format!("{inode:x}-{mtime:x}-{size:x}")
}

#[cfg(unix)]
fn file_id(meta: &fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn file_id(_meta: &fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// True for object_store's temporary file names: `<anything>#<digits>`.
fn is_staging_name(name: &str) -> bool {
    match name.rsplit_once('#') {
        Some((_, digits)) => !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()),
        None => false,
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
    use super::stripe_lock::MAX_STAMP_AHEAD;
    use super::*;
    use object_store::ObjectStoreExt;
    use std::time::{SystemTime, UNIX_EPOCH};

    fn files(dir: &FsPath) -> LocalFiles {
        let root = fs::canonicalize(dir).unwrap();
        let fs = Arc::new(LocalFileSystem::new_with_prefix(&root).unwrap());
        LocalFiles::new(root, fs)
    }

    #[test]
    fn test_staging_names() {
        assert!(is_staging_name("a#1"));
        assert!(is_staging_name("a.commit#123456789"));
        assert!(!is_staging_name("a#"));
        assert!(!is_staging_name("a#1x"));
        assert!(!is_staging_name("a"));
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

    #[tokio::test]
    async fn test_write_planted_stripe_value_succeeds() {
        // Plant an absurd stamp in the real stripe file of a directory (under its lock), then
        // write there: before the fix, `last + 1` overflowed.
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let mut lock = StripeLock::acquire(&f.root).unwrap();
        lock.write_last(u128::MAX);
        drop(lock);
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros();
        f.write(
            "k",
            LocalSource::Bytes(Bytes::from_static(b"x")),
            LocalWriteMode::Create,
        )
        .unwrap();
        let stamped = micros(&fs::metadata(f.root.join("k")).unwrap());
        assert!(stamped < before + MAX_STAMP_AHEAD.as_micros(), "{stamped}");
    }
}
