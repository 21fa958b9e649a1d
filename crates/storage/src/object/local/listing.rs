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
            let entry = match entry {
                Ok(e) => e,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let Ok(name) = entry.file_name().into_string() else {
                continue; // not UTF-8: not a key
            };
            if is_hidden_name(&name) || name.is_empty() || name == "." || name == ".." {
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
