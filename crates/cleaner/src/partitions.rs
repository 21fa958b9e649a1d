//! Which deleted partitions a clean removes from the table.
//!
//! A partition is **deleted** when a completed `replacecommit` with operation
//! `DELETE_PARTITION` (what `Table::delete_partitions` and TTL runs write) names it and no file
//! group of it is left in the latest snapshot (every group replaced). A clean **removes** a
//! deleted partition (its `.hoodie_partition_metadata`, hence on the local filesystem its empty
//! directory; the metadata table's `__all_partitions__` marks it deleted; the clean plan's
//! `partitionsToBeDeleted` and the clean metadata's `isPartitionDeleted` name it) only when,
//! after the clean's own deletions:
//! 1. no protection source (savepoints and tags, pending table services, retention, every other
//!    live root, later holders) names a file of it;
//! 2. no write is pending on any live root (a pending write may be about to put files into it,
//!    having seen its partition marker: removal waits for a clean after the write ends);
//! 3. a LIST of that one partition directory (never a table-wide listing) finds nothing but its
//!    partition marker (and checksum files of the marker or of files the clean deletes) and the
//!    files this clean deletes, and no sub-directory: no data file of this or any other root,
//!    committed or not, and nothing else a user put there, is ever deleted or orphaned.
//!
//! The check runs when a clean is planned (the plan records the partitions) and again when it
//! is executed, before the metadata table's record is written (a finished crashed clean
//! re-checks, so a partition written to since keeps its directory). A pending clean another
//! writer planned (Java lists fully replaced partitions whatever replaced them) is finished
//! with the execution-time checks 1–3 and "no file slice left in the latest snapshot".

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_fsview::naming::PARTITION_METADATA_PREFIX;
use arbor_fsview::FileSystemView;
use arbor_storage::Storage;
use arbor_timeline::avro::{decode_instant, InstantContent, WriteOperationType};
use arbor_timeline::layout::branches::live_roots;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::naming::LayoutVersion;
use arbor_timeline::{Action, ActiveTimeline, InstantTime, TableConfig, TableLayout};

use crate::error::{CleanerError, Result};

/// Actions whose pending instants may be writing data files into any partition.
const WRITING_ACTIONS: [Action; 4] = [
    Action::Commit,
    Action::DeltaCommit,
    Action::ReplaceCommit,
    Action::Clustering,
];

/// The parent partition of a file key (`partition/name`; `""` for a key without `/`).
pub(crate) fn partition_of(key: &str) -> &str {
    key.rsplit_once('/').map_or("", |(p, _)| p)
}

/// True when completed replacecommit `t` of `view` has operation `DELETE_PARTITION`.
async fn is_delete_partition(view: &FileSystemView, t: &InstantTime) -> Result<bool> {
    let Some(instant) = view.index().completed_write(t) else {
        return Ok(false);
    };
    let bytes = view
        .history()
        .read_completed_content(t, Action::ReplaceCommit)
        .await?;
    if bytes.is_empty() {
        return Ok(false);
    }
    let key = view
        .history()
        .active()
        .key_of(instant)
        .unwrap_or_else(|_| instant.to_string());
    let legacy = view.index().layout() == LayoutVersion::V1 || instant.completion_time.is_none();
    Ok(match decode_instant(instant, &bytes, &key, legacy)? {
        InstantContent::ReplaceCommit(m) => {
            m.operation_type() == Some(WriteOperationType::DeletePartition)
        }
        _ => false,
    })
}

/// The deleted partitions of `view` (module doc) among the partitions it lists: a partition
/// already removed is no longer listed, so it is not removed twice. The non-partitioned
/// table's `""` is never one. Read only; no storage listing beyond the view's own.
pub async fn deleted_partitions(view: &FileSystemView) -> Result<BTreeSet<String>> {
    let mut by_instant: BTreeMap<InstantTime, BTreeSet<String>> = BTreeMap::new();
    for r in view.replaced_file_groups() {
        if !r.partition.is_empty() {
            by_instant
                .entry(r.instant.clone())
                .or_default()
                .insert(r.partition.clone());
        }
    }
    if by_instant.is_empty() {
        return Ok(BTreeSet::new());
    }
    let listed: BTreeSet<String> = view.partitions().await?.iter().cloned().collect();
    let mut out = BTreeSet::new();
    let mut emptiness: BTreeMap<String, bool> = BTreeMap::new();
    for (t, partitions) in by_instant {
        let mut open = Vec::new();
        for p in partitions {
            if !listed.contains(&p) || out.contains(&p) {
                continue;
            }
            let empty = match emptiness.get(&p) {
                Some(e) => *e,
                None => {
                    let e = is_empty_in_latest(view, &p).await?;
                    emptiness.insert(p.clone(), e);
                    e
                }
            };
            if empty {
                open.push(p);
            }
        }
        // Only then the instant's content (one read per replacecommit that emptied a
        // partition still listed).
        if !open.is_empty() && is_delete_partition(view, &t).await? {
            out.extend(open);
        }
    }
    Ok(out)
}

/// True when `partition` has no file slice in `view`'s latest snapshot.
async fn is_empty_in_latest(view: &FileSystemView, partition: &str) -> Result<bool> {
    Ok(view
        .latest_file_slices(Some(partition), None)
        .await?
        .is_empty())
}

/// The first pending write (commit, deltacommit, replacecommit, clustering) on any live root of
/// the table whose own storage is `table_storage`, as `"<instant> on <root>"`.
pub async fn pending_write(table_storage: &Arc<dyn Storage>) -> Result<Option<String>> {
    for root in live_roots(table_storage).await? {
        let view = root.view(table_storage.clone());
        let config = TableConfig::load(view.as_ref(), DEFAULT_META_DIR).await?;
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
        let tl = ActiveTimeline::load(view, layout).await?;
        if let Some(i) = tl
            .pending()
            .into_iter()
            .find(|i| WRITING_ACTIONS.contains(&i.action))
        {
            return Ok(Some(format!("{i} on {root}")));
        }
    }
    Ok(None)
}

/// What a LIST of one partition directory found, for its removal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionDir {
    /// True when the directory holds only the marker and files the clean deletes.
    pub removable: bool,
    /// The marker objects (and their checksum files) to delete (keys).
    pub marker_keys: Vec<String>,
    /// Checksum files of deleted data files (keys), deleted with the marker.
    pub companion_keys: Vec<String>,
    /// What keeps it (when not removable): the first foreign object or sub-directory.
    pub kept_by: Option<String>,
}

/// LISTs directory `partition` through `storage` and decides whether it holds only its
/// partition marker and `deleting` (file names the clean deletes from it). A missing directory
/// is removable with nothing to delete.
pub async fn inspect_partition_dir(
    storage: &Arc<dyn Storage>,
    partition: &str,
    deleting: &BTreeSet<String>,
) -> Result<PartitionDir> {
    let (objects, dirs) = match storage.list_dir(partition).await {
        Ok(v) => v,
        Err(e) if e.is_not_found() => (Vec::new(), Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = PartitionDir {
        removable: true,
        ..PartitionDir::default()
    };
    if let Some(d) = dirs.first() {
        out.removable = false;
        out.kept_by = Some(format!("sub-directory {d}"));
        return Ok(out);
    }
    let marker_crc = format!(".{PARTITION_METADATA_PREFIX}");
    for o in objects {
        let name = o.key.rsplit('/').next().unwrap_or(&o.key);
        if name.starts_with(PARTITION_METADATA_PREFIX)
            || (name.starts_with(&marker_crc) && name.ends_with(".crc"))
        {
            out.marker_keys.push(o.key.clone());
        } else if deleting.contains(name) {
            continue;
        } else if let Some(of) = name
            .strip_suffix(".crc")
            .and_then(|n| n.strip_prefix('.'))
            .filter(|n| deleting.contains(*n))
        {
            tracing::debug!(file = %of, "checksum file deleted with its data file");
            out.companion_keys.push(o.key.clone());
        } else {
            out.removable = false;
            out.kept_by = Some(o.key.clone());
            out.marker_keys.clear();
            out.companion_keys.clear();
            return Ok(out);
        }
    }
    Ok(out)
}

/// The partitions of `candidates` a clean may remove (module doc), with the keys to delete for
/// each (markers and checksum files): `deleting` are the files the clean deletes (partition ->
/// names), `protected` every key a protection source names, `latest` whether a candidate still
/// has no file slice in the latest snapshot. One LIST per candidate partition.
pub async fn removable_partitions(
    storage: &Arc<dyn Storage>,
    table_storage: &Arc<dyn Storage>,
    view: &FileSystemView,
    candidates: &BTreeSet<String>,
    deleting: &BTreeMap<String, BTreeSet<String>>,
    protected: &BTreeSet<String>,
) -> Result<BTreeMap<String, Vec<String>>> {
    let mut out = BTreeMap::new();
    if candidates.is_empty() {
        return Ok(out);
    }
    if let Some(w) = pending_write(table_storage).await? {
        tracing::info!(pending = %w, partitions = ?candidates,
            "deleted partitions are kept until no write is pending");
        return Ok(out);
    }
    let held: BTreeSet<&str> = protected.iter().map(|k| partition_of(k)).collect();
    let empty = BTreeSet::new();
    for p in candidates {
        if p.is_empty() {
            continue;
        }
        arbor_fsview::listing::validate_partition(p).map_err(|e| CleanerError::Corrupt {
            path: p.clone(),
            reason: format!("partition to delete: {e}"),
        })?;
        if held.contains(p.as_str()) {
            tracing::debug!(partition = %p, "deleted partition kept: a protection source names a file of it");
            continue;
        }
        if !is_empty_in_latest(view, p).await? {
            tracing::info!(partition = %p, "deleted partition kept: it has files again");
            continue;
        }
        let dir = inspect_partition_dir(storage, p, deleting.get(p).unwrap_or(&empty)).await?;
        if !dir.removable {
            tracing::info!(partition = %p, kept_by = ?dir.kept_by, "deleted partition kept: its directory holds other files");
            continue;
        }
        let mut keys = dir.companion_keys;
        keys.extend(dir.marker_keys);
        out.insert(p.clone(), keys);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use arbor_storage::ObjectStoreStorage;
    use bytes::Bytes;

    fn names(n: &[&str]) -> BTreeSet<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn test_partition_of_takes_the_parent_directory() {
        assert_eq!(partition_of("a=1/b=2/f.parquet"), "a=1/b=2");
        assert_eq!(partition_of("f.parquet"), "");
    }

    #[tokio::test]
    async fn test_inspect_partition_dir_only_marker_and_deleted_files_is_removable() {
        let s: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        for k in [
            "p=1/.hoodie_partition_metadata",
            "p=1/f1.parquet",
            "p=1/.f1.parquet.crc",
            "p=2/.hoodie_partition_metadata",
            "p=2/other.parquet",
            "p=3/q=1/.hoodie_partition_metadata",
        ] {
            s.put(k, Bytes::from_static(b"x")).await.unwrap();
        }
        let d = inspect_partition_dir(&s, "p=1", &names(&["f1.parquet"]))
            .await
            .unwrap();
        assert!(d.removable, "{d:?}");
        assert_eq!(d.marker_keys, vec!["p=1/.hoodie_partition_metadata"]);
        assert_eq!(d.companion_keys, vec!["p=1/.f1.parquet.crc"]);

        let d = inspect_partition_dir(&s, "p=2", &names(&["f1.parquet"]))
            .await
            .unwrap();
        assert!(!d.removable);
        assert_eq!(d.kept_by.as_deref(), Some("p=2/other.parquet"));
        assert!(d.marker_keys.is_empty());

        let d = inspect_partition_dir(&s, "p=3", &BTreeSet::new())
            .await
            .unwrap();
        assert!(!d.removable, "a sub-directory keeps it");

        let d = inspect_partition_dir(&s, "p=9", &BTreeSet::new())
            .await
            .unwrap();
        assert!(d.removable && d.marker_keys.is_empty(), "{d:?}");
    }
}
