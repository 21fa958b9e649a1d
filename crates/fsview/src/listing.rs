//! Where file lists come from: the [`PartitionListing`] trait and its directory-listing
//! implementation [`StorageListing`]. The metadata table's FILES partition implements the same
//! trait elsewhere (`arbor-mdt`).

use std::fmt::Debug;
use std::sync::Arc;

use arbor_storage::Storage;
use async_trait::async_trait;

use crate::error::{FsViewError, Result};
use crate::naming::{parse_data_file_name, PARTITION_METADATA_PREFIX};

/// One file of a partition as a listing reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListedFile {
    /// The file name (no directory part).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
}

/// A source of partition paths and their file lists.
///
/// Contract:
/// - [`list_partitions`](PartitionListing::list_partitions) returns every partition path of the
///   table, relative to the table base, `/`-separated, without leading or trailing `/`; `""` is
///   the partition of a non-partitioned table. Order does not matter; no duplicates.
/// - [`list_files`](PartitionListing::list_files) returns the files directly inside one
///   partition (names only, no sub-directories), including files that are not data files (the
///   view skips those by name) and files of uncommitted instants (the view filters them against
///   the timeline). A partition that does not exist has no files: `Ok(vec![])`, not an error.
/// - Both reflect every write that completed before the call began.
///
/// Errors: storage failures as [`FsViewError::Storage`]; an implementation's own failures as
/// [`FsViewError::Listing`] naming the partition.
#[async_trait]
pub trait PartitionListing: Debug + Send + Sync {
    /// Every partition path of the table.
    async fn list_partitions(&self) -> Result<Vec<String>>;

    /// The files directly inside `partition`.
    async fn list_files(&self, partition: &str) -> Result<Vec<ListedFile>>;

    /// Tells the listing that each of `partitions` is about to be listed, so that one that
    /// reads per partition can read them all in one pass. Answers of later calls are as
    /// without it (the default reads nothing). A failure here is not final: the caller lists
    /// each partition anyway, and that call reports what is wrong.
    async fn prefetch(&self, _partitions: &[&str]) -> Result<()> {
        Ok(())
    }
}

/// Top-level directories that never hold partitions (hudi-rs skips the same three; names
/// starting with `.` are skipped too).
pub const NON_PARTITION_TOP_DIRS: [&str; 3] = [".hoodie", "_delta_log", "metadata"];

/// A [`PartitionListing`] that lists directories through a [`Storage`] rooted at the table base.
///
/// Partitions are the leaf directories below the base, walking every top-level directory except
/// [`NON_PARTITION_TOP_DIRS`] and names starting with `.` (as hudi-rs does). The base itself is
/// the partition `""` when it directly holds a partition marker (`.hoodie_partition_metadata*`)
/// or a data file, or when no leaf partition exists (a non-partitioned or empty table).
#[derive(Debug, Clone)]
pub struct StorageListing {
    storage: Arc<dyn Storage>,
}

impl StorageListing {
    /// A listing over `storage`, whose root is the table base.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        StorageListing { storage }
    }

    /// The storage this listing reads.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    async fn collect_leaves(&self, top: String, out: &mut Vec<String>) -> Result<()> {
        let mut stack = vec![top];
        while let Some(dir) = stack.pop() {
            let (_objects, dirs) = self.storage.list_dir(&dir).await?;
            if dirs.is_empty() {
                out.push(dir);
            } else {
                stack.extend(dirs);
            }
        }
        Ok(())
    }
}

fn last_segment(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

#[async_trait]
impl PartitionListing for StorageListing {
    async fn list_partitions(&self) -> Result<Vec<String>> {
        let (objects, dirs) = self.storage.list_dir("").await?;
        let mut out = Vec::new();
        for dir in dirs {
            let name = last_segment(&dir);
            if name.starts_with('.') || NON_PARTITION_TOP_DIRS.contains(&name) {
                continue;
            }
            self.collect_leaves(dir, &mut out).await?;
        }
        let root_holds_data = objects.iter().any(|o| {
            let name = last_segment(&o.key);
            name.starts_with(PARTITION_METADATA_PREFIX)
                || matches!(parse_data_file_name(name, o.size), Ok(Some(_)))
        });
        if root_holds_data || out.is_empty() {
            out.push(String::new());
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    async fn list_files(&self, partition: &str) -> Result<Vec<ListedFile>> {
        validate_partition(partition)?;
        let (objects, _dirs) = self.storage.list_dir(partition).await?;
        Ok(objects
            .into_iter()
            .map(|o| ListedFile {
                name: last_segment(&o.key).to_string(),
                size: o.size,
            })
            .collect())
    }
}

/// Checks a partition path: `""` or `/`-separated segments, none empty, `.` or `..`, no leading
/// `/`. Fails with [`FsViewError::InvalidPartition`].
pub fn validate_partition(partition: &str) -> Result<()> {
    if partition.is_empty() {
        return Ok(());
    }
    let bad = |reason: &str| {
        Err(FsViewError::InvalidPartition {
            partition: partition.to_string(),
            reason: reason.to_string(),
        })
    };
    if partition.chars().any(char::is_control) {
        return bad("control characters are not allowed");
    }
    for seg in partition.split('/') {
        match seg {
            "" => return bad("empty path segment (leading, trailing or double '/')"),
            "." | ".." => return bad("'.' and '..' segments are not allowed"),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn test_validate_partition_rejects_traversal_and_empty_segments() {
        for ok in ["", "a", "a=1/b=2", "2024/01/17/14"] {
            assert!(validate_partition(ok).is_ok(), "{ok}");
        }
        for bad in ["/a", "a/", "a//b", "../x", "a/./b"] {
            assert!(validate_partition(bad).is_err(), "{bad}");
        }
    }
}
