//! Listings of the local backend in key order, without the files that are not objects
//! (temporary files and lock files).

use std::cmp::Ordering;
use std::fs;
use std::io::{self, ErrorKind};
use std::path::{Path as FsPath, PathBuf};

use chrono::{DateTime, Utc};

use crate::storage::{ObjectMeta, Version};

use super::key_lock::is_lock_file_name;
use super::version::{e_tag, file_id};

/// Deepest directory nesting a listing follows (guards against symlink loops).
const MAX_DEPTH: usize = 256;

/// The first `limit` objects below directory `dir` (whose key prefix is `dir_key`, empty for the
/// root) after `start_after`, in ascending key order. Walks the tree depth-first with the entries
/// of each directory sorted by `name` (files) or `name/` (directories), which is exactly the
/// byte order of the full keys; subtrees that lie entirely before `start_after` are skipped and
/// the walk stops after `limit` objects, so it costs about `limit` plus the depth of the tree.
pub(super) fn list_sorted(
    dir: &FsPath,
    dir_key: &str,
    start_after: Option<&str>,
    limit: usize,
) -> io::Result<Vec<ObjectMeta>> {
    let mut walk = Walk {
        start_after,
        limit,
        out: Vec::new(),
        ancestors: Vec::new(),
    };
    walk.dir(dir, dir_key, 0)?;
    Ok(walk.out)
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
            let Some((entry, name)) = key_entry(entry)? else {
                continue;
            };
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

/// The objects directly in directory `dir` (whose key prefix is `dir_key`, empty for the root)
/// and the keys of its sub-directories, each in ascending order; nothing when `dir` is missing
/// or not a directory. One `read_dir`, and one `stat` per file relative to the open directory
/// (symlinks are followed, like object_store's listing, at the cost of a path lookup): a
/// timeline directory of a few hundred instants lists in a fraction of what object_store's
/// walk takes (two path lookups per entry).
pub(super) fn list_one_level(
    dir: &FsPath,
    dir_key: &str,
) -> io::Result<(Vec<ObjectMeta>, Vec<String>)> {
    let (objects, dirs) = one_level(dir, dir_key, true)?;
    let mut objects: Vec<ObjectMeta> = objects
        .into_iter()
        .filter_map(|(key, meta)| meta.map(|m| object_meta(key, &m)))
        .collect();
    objects.sort_by(|a, b| a.key.cmp(&b.key));
    Ok((objects, dirs))
}

/// The keys [`list_one_level`] lists, without the `stat` of each regular file: the directory
/// entry's type says what it is (only symlinks are followed with a `stat`).
pub(super) fn list_one_level_keys(
    dir: &FsPath,
    dir_key: &str,
) -> io::Result<(Vec<String>, Vec<String>)> {
    let (objects, dirs) = one_level(dir, dir_key, false)?;
    let mut keys: Vec<String> = objects.into_iter().map(|(key, _)| key).collect();
    keys.sort();
    Ok((keys, dirs))
}

/// The files directly in `dir` with their key (and their metadata when `with_meta`, else only
/// for symlinks) and the sorted keys of its sub-directories.
#[allow(clippy::type_complexity)]
fn one_level(
    dir: &FsPath,
    dir_key: &str,
    with_meta: bool,
) -> io::Result<(Vec<(String, Option<fs::Metadata>)>, Vec<String>)> {
    let read = match fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok((Vec::new(), Vec::new()))
        }
        Err(e) => return Err(e),
    };
    let dir_key = dir_key.trim_end_matches('/');
    let key_of = |name: &str| {
        if dir_key.is_empty() {
            name.to_string()
        } else {
            format!("{dir_key}/{name}")
        }
    };
    let (mut objects, mut dirs) = (Vec::new(), Vec::new());
    for entry in read {
        let Some((entry, name)) = key_entry(entry)? else {
            continue;
        };
        let file_type = match entry.file_type() {
            Ok(t) => t,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if file_type.is_dir() {
            dirs.push(key_of(&name));
            continue;
        }
        if file_type.is_file() && !with_meta {
            objects.push((key_of(&name), None));
            continue;
        }
        let meta = if file_type.is_symlink() {
            fs::metadata(entry.path())
        } else {
            entry.metadata()
        };
        let meta = match meta {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => continue, // deleted meanwhile
            Err(e) => return Err(e),
        };
        if meta.is_dir() {
            dirs.push(key_of(&name));
        } else if meta.is_file() {
            objects.push((key_of(&name), Some(meta)));
        }
    }
    dirs.sort();
    Ok((objects, dirs))
}

/// A directory entry that can be an object or a directory of objects, with its name: `None` for
/// an entry deleted meanwhile, a name that is not UTF-8 (not a key) and hidden files.
fn key_entry(entry: io::Result<fs::DirEntry>) -> io::Result<Option<(fs::DirEntry, String)>> {
    let entry = match entry {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let Ok(name) = entry.file_name().into_string() else {
        return Ok(None);
    };
    if is_hidden_name(&name) || name.is_empty() || name == "." || name == ".." {
        return Ok(None);
    }
    Ok(Some((entry, name)))
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

/// True for the names of files that are not objects and are hidden from listings: temporary
/// files and lock files.
pub(super) fn is_hidden_name(name: &str) -> bool {
    is_staging_name(name) || is_lock_file_name(name)
}

/// True for object_store's temporary file names: `<anything>#<digits>`.
pub(super) fn is_staging_name(name: &str) -> bool {
    match name.rsplit_once('#') {
        Some((_, digits)) => !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_one_level_lists_files_and_directories_sorted_without_hidden_files() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t");
        fs::create_dir_all(t.join("history/deep")).unwrap();
        fs::create_dir_all(t.join("a")).unwrap();
        for name in [
            "2.commit",
            "1.commit",
            "x.commit#123",
            ".arbor-lock-0123456789abcdef",
        ] {
            fs::write(t.join(name), b"abc").unwrap();
        }
        fs::write(t.join("history/deep/h"), b"").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(t.join("1.commit"), t.join("3.link")).unwrap();
            std::os::unix::fs::symlink(t.join("a"), t.join("b.link")).unwrap();
            std::os::unix::fs::symlink(t.join("gone"), t.join("dangling")).unwrap();
        }
        for key in ["p/t", "p/t/"] {
            let (objects, dirs) = list_one_level(&t, key).unwrap();
            let keys: Vec<&str> = objects.iter().map(|o| o.key.as_str()).collect();
            let mut want_keys = vec!["p/t/1.commit", "p/t/2.commit"];
            let mut want_dirs = vec!["p/t/a", "p/t/history"];
            if cfg!(unix) {
                want_keys.push("p/t/3.link");
                want_dirs.insert(1, "p/t/b.link");
            }
            assert_eq!(keys, want_keys);
            assert_eq!(dirs, want_dirs);
            assert!(objects
                .iter()
                .all(|o| o.size == 3 && o.version.e_tag.is_some()));
            // The same ETag as a sorted listing (and so object_store's head) reports.
            let sorted = list_sorted(&t, key.trim_end_matches('/'), None, 10).unwrap();
            let first = sorted.iter().find(|o| o.key == "p/t/1.commit").unwrap();
            assert_eq!(objects.first().unwrap().version, first.version);
            // The keys alone are the same, without a stat per regular file.
            assert_eq!(
                list_one_level_keys(&t, key).unwrap(),
                (want_keys_owned(&want_keys), dirs)
            );
        }
        assert_eq!(
            list_one_level_keys(&t.join("missing"), "m").unwrap(),
            (vec![], vec![])
        );
        let (objects, dirs) = list_one_level(&t.join("missing"), "m").unwrap();
        assert!(objects.is_empty() && dirs.is_empty());
        let (objects, dirs) = list_one_level(&t.join("1.commit"), "f").unwrap();
        assert!(objects.is_empty() && dirs.is_empty());
        let (objects, _) = list_one_level(&t.join("a"), "").unwrap();
        assert!(objects.is_empty());
    }

    fn want_keys_owned(keys: &[&str]) -> Vec<String> {
        keys.iter().map(|k| k.to_string()).collect()
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
    fn test_hidden_names_staging_and_lock_files() {
        assert!(is_hidden_name("a#1"));
        assert!(is_hidden_name(".arbor-lock-0123456789abcdef"));
        assert!(!is_hidden_name(".arbor-lock-x"));
        assert!(!is_hidden_name(".hoodie_partition_metadata"));
        assert!(!is_hidden_name(".f1_20240101000000000.log.1_0-1-0"));
    }
}
