//! Which files a shallow clone still reads from its sources: what detach (and a deep clone)
//! copies into the clone's own location.
//!
//! - the committed data files the metadata table's FILES partition of **every live root** of
//!   the clone lists (main, its working branches), and every file a snapshot one of them keeps reads
//!   (its retention, its savepoints and tags, the inputs of its pending services:
//!   `arbor_cleaner::roots::needed_by`), whose home by the clone rule is not the clone itself;
//! - the metadata table's partition files of the merged listing (the clone's own and each
//!   source's by the rule) that live in a source;
//! - the partition markers (`.hoodie_partition_metadata*`) of every data partition a live root
//!   lists, where only a source holds them.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_cleaner::protection::committed_files;
use arbor_cleaner::roots::needed_by;
use arbor_fsview::naming::PARTITION_METADATA_PREFIX;
use arbor_storage::{Storage, StorageError, StorageExt};
use arbor_table::read::TableReader;
use arbor_timeline::layout::clone_rule::is_mdt_file;
use arbor_timeline::layout::paths::MDT_BASE;
use arbor_timeline::layout::{live_roots, ClonedStorage, Home};

use crate::error::Result;

/// The files of a clone that may live in its sources (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReferencedFiles {
    /// Data files (keys relative to the table base) listed by a live root or read by a
    /// snapshot one keeps, that live in a source by the rule.
    pub data: BTreeSet<String>,
    /// The data files a snapshot the clone keeps reads (a listed file missing from its source
    /// and not here was released by the source's clean, and no snapshot needs it).
    pub kept: BTreeSet<String>,
    /// The metadata table's partition files of the merged listing that do not live in the
    /// clone itself (sourced by the rule, or searched: initialisation files, markers).
    pub mdt: BTreeSet<String>,
    /// Every data partition a live root lists.
    pub partitions: BTreeSet<String>,
}

/// The files `cloned` (an active clone) may still read from its sources.
pub(crate) async fn referenced_files(cloned: &ClonedStorage) -> Result<ReferencedFiles> {
    let view: Arc<dyn Storage> = Arc::new(cloned.clone());
    let mut out = ReferencedFiles::default();
    let now = chrono::Utc::now();
    let mut listed = BTreeSet::new();
    for root in live_roots(&view).await? {
        let reader = TableReader::open_view(root.view(view.clone())).await?;
        for (key, partition) in committed_files(reader.view()).await? {
            out.partitions.insert(partition);
            listed.insert(key);
        }
        out.kept.extend(needed_by(&view, &root, now).await?);
    }
    out.data = listed
        .iter()
        .chain(out.kept.iter())
        .filter(|k| cloned.home(k) != Home::Own)
        .cloned()
        .collect();
    out.mdt = view
        .list_all(MDT_BASE)
        .await?
        .into_iter()
        .map(|m| m.key)
        .filter(|k| is_mdt_file(k) && cloned.home(k) != Home::Own)
        .collect();
    Ok(out)
}

/// The partition marker keys of `partition` in `storage` (none when it holds none).
pub(crate) async fn markers(storage: &dyn Storage, partition: &str) -> Result<Vec<String>> {
    let (objects, _) = match storage.list_dir(partition).await {
        Ok(x) => x,
        Err(StorageError::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    Ok(objects
        .into_iter()
        .map(|m| m.key)
        .filter(|k| {
            k.rsplit('/')
                .next()
                .is_some_and(|n| n.starts_with(PARTITION_METADATA_PREFIX))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use arbor_storage::ObjectStoreStorage;
    use bytes::Bytes;

    use super::*;

    #[tokio::test]
    async fn test_markers_are_the_partition_metadata_files_of_one_directory() {
        let s = ObjectStoreStorage::memory();
        for k in [
            "p=1/.hoodie_partition_metadata",
            "p=1/f_0-1-0_20261202000000100.parquet",
            "p=1/q=2/.hoodie_partition_metadata",
            "p=2/.hoodie_partition_metadata.parquet",
        ] {
            s.put(k, Bytes::from_static(b"x")).await.unwrap();
        }
        assert_eq!(
            markers(&s, "p=1").await.unwrap(),
            vec!["p=1/.hoodie_partition_metadata".to_string()]
        );
        assert_eq!(
            markers(&s, "p=2").await.unwrap(),
            vec!["p=2/.hoodie_partition_metadata.parquet".to_string()]
        );
        assert!(markers(&s, "p=3").await.unwrap().is_empty());
    }
}
