//! Partition statistics for TTL: per partition with live file groups, the newest base instant
//! of its latest file slices, their total size and count, the creation instant from its
//! partition marker (read only when a creation-time policy applies), and whether a pending
//! compaction or clustering touches it.
//!
//! Everything comes from the file-system view, which reads the metadata table's FILES
//! partition when the table has one (no directory LIST of data partitions) and lists
//! directories otherwise. The partition markers are read by key (a GET each, at most 16 at a
//! time), never listed.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_fsview::FileSystemView;
use arbor_storage::Storage;
use arbor_timeline::config::Properties;
use arbor_timeline::layout::paths::PARTITION_MARKER;
use arbor_timeline::InstantTime;
use futures::stream::{self, StreamExt};

use crate::error::{Result, TableError};

/// What TTL knows of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionStat {
    /// The partition path.
    pub partition: String,
    /// Newest base instant among the partition's latest file slices (Java KEEP_BY_TIME's "last modified"); None: no file slice.
    pub last_modified: Option<arbor_timeline::InstantTime>,
    /// commitTime of `.hoodie_partition_metadata` (read only when a creation-time policy applies; None when not read or absent).
    pub created: Option<arbor_timeline::InstantTime>,
    /// Total bytes of the latest file slices (base + log files).
    pub size_bytes: u64,
    /// File groups in the latest slices.
    pub file_groups: usize,
    /// A pending compaction or clustering touches the partition (such a partition is skipped and named).
    pub pending_service: Option<String>,
}

/// How many partition markers are read at once.
const MARKER_READS: usize = 16;

/// The statistics of every partition of `view` with at least one file group in its latest
/// slices (partitions whose file groups were all replaced, e.g. by an earlier
/// delete-partition, are left out), ordered by partition path. With `read_created`, each
/// partition's `.hoodie_partition_metadata` is read from `storage` for its `commitTime` (a
/// missing marker or one without a valid `commitTime` leaves `created` as `None`, logged).
pub async fn partition_stats(
    view: &FileSystemView,
    storage: &Arc<dyn Storage>,
    read_created: bool,
) -> Result<Vec<PartitionStat>> {
    let slices = view
        .latest_file_slices(None, None)
        .await
        .map_err(TableError::from_fsview)?;
    let mut by_partition: BTreeMap<String, PartitionStat> = BTreeMap::new();
    for s in slices {
        let stat = by_partition
            .entry(s.partition.clone())
            .or_insert_with(|| PartitionStat {
                partition: s.partition.clone(),
                last_modified: None,
                created: None,
                size_bytes: 0,
                file_groups: 0,
                pending_service: None,
            });
        stat.file_groups += 1;
        let bytes = s.base_file.as_ref().map_or(0, |b| b.size)
            + s.log_files.iter().map(|l| l.size).sum::<u64>();
        stat.size_bytes = stat.size_bytes.saturating_add(bytes);
        if stat
            .last_modified
            .as_ref()
            .is_none_or(|t| *t < s.base_instant)
        {
            stat.last_modified = Some(s.base_instant.clone());
        }
    }
    for op in view.pending_compaction_operations() {
        if let Some(stat) = by_partition.get_mut(&op.partition) {
            stat.pending_service
                .get_or_insert_with(|| format!("pending compaction {}", op.instant));
        }
    }
    for ((partition, _), t) in view.pending_clustering_file_groups() {
        if let Some(stat) = by_partition.get_mut(partition) {
            stat.pending_service
                .get_or_insert_with(|| format!("pending clustering {t}"));
        }
    }
    if read_created {
        let created: Vec<(String, Option<InstantTime>)> =
            stream::iter(by_partition.keys().cloned())
                .map(|p| async move {
                    let t = created_time(storage, &p).await?;
                    Ok::<_, TableError>((p, t))
                })
                .buffer_unordered(MARKER_READS)
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<Result<_>>()?;
        for (p, t) in created {
            if let Some(stat) = by_partition.get_mut(&p) {
                stat.created = t;
            }
        }
    }
    Ok(by_partition.into_values().collect())
}

/// The `commitTime` of `partition`'s marker; `None` when it is absent or has none (logged).
async fn created_time(storage: &Arc<dyn Storage>, partition: &str) -> Result<Option<InstantTime>> {
    let key = if partition.is_empty() {
        PARTITION_MARKER.to_string()
    } else {
        format!("{partition}/{PARTITION_MARKER}")
    };
    let bytes = match storage.get(&key).await {
        Ok((b, _)) => b,
        Err(e) if e.is_not_found() => {
            tracing::warn!(
                partition,
                "no partition marker: its creation time is unknown"
            );
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    let text = String::from_utf8_lossy(&bytes);
    let time = Properties::parse(&text)
        .ok()
        .and_then(|p| p.get("commitTime").map(str::to_string))
        .and_then(|t| InstantTime::parse(t.trim()).ok());
    if time.is_none() {
        tracing::warn!(partition, "partition marker without a valid commitTime");
    }
    Ok(time)
}
