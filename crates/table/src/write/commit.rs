//! The instant lifecycle around a write: the table lock, writer heartbeats, rollback of failed
//! writes, partition markers, commit metadata, and the optimistic-concurrency conflict check.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use arbor_fsview::slice::join;
use arbor_storage::{Lease, LockProvider, Storage, StorageError, StorageExt};
use arbor_timeline::avro::{
    decode_instant, HoodieCommitMetadata, HoodieWriteStat, InstantContent, WriteOperationType,
    SCHEMA_KEY,
};
use arbor_timeline::{
    Action, ActiveTimeline, Instant, InstantTime, InstantTimeGenerator, TableLayout,
};
use bytes::Bytes;

use super::cow::WrittenGroup;
use super::planner::WritePlan;
use super::rollback;
use crate::error::Result;

/// The name of the table lock (kept by the default provider at `.hoodie/.locks/table_lock.json`).
pub const LOCK_NAME: &str = "table_lock";

/// Where the default lock provider keeps its locks (Hudi's `FileSystemBasedLockProvider` uses
/// the same directory).
pub const LOCK_DIR: &str = ".hoodie/.locks";

/// Where writers keep their heartbeats: one object per pending instant, named by its time,
/// holding the epoch milliseconds of the last beat.
pub const HEARTBEAT_DIR: &str = ".hoodie/.heartbeat";

/// The file name of the partition marker (spec 1.4).
pub const PARTITION_MARKER: &str = ".hoodie_partition_metadata";

/// How long a lease of the table lock lasts; every step under the lock is short.
const LEASE: Duration = Duration::from_secs(120);

/// Takes the table lock, waiting at most `timeout`.
pub async fn acquire(lock: &dyn LockProvider, timeout: Duration) -> Result<Lease> {
    Ok(lock.acquire(LOCK_NAME, LEASE, timeout).await?)
}

/// Releases the table lock; a failure is logged (the lease expires by itself) unless `result`
/// is already an error, which is then returned unchanged.
pub async fn release<T>(lock: &dyn LockProvider, lease: &Lease, result: Result<T>) -> Result<T> {
    match lock.release(lease).await {
        Ok(()) => result,
        Err(e) => match result {
            Ok(v) => {
                tracing::warn!(lock = %lease.lock, error = %e, "releasing the table lock failed");
                Ok(v)
            }
            Err(orig) => Err(orig),
        },
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn heartbeat_key(instant: &InstantTime) -> String {
    format!("{HEARTBEAT_DIR}/{instant}")
}

/// Records that the writer of `instant` is alive now.
pub async fn beat(storage: &Arc<dyn Storage>, instant: &InstantTime) -> Result<()> {
    storage
        .put(&heartbeat_key(instant), Bytes::from(now_ms().to_string()))
        .await?;
    Ok(())
}

/// Removes the heartbeat of `instant` (after it completed or was rolled back).
pub async fn stop_heartbeat(storage: &Arc<dyn Storage>, instant: &InstantTime) -> Result<()> {
    storage.delete(&heartbeat_key(instant)).await?;
    Ok(())
}

/// True if the writer of `instant` beat within `timeout`.
pub async fn is_alive(
    storage: &Arc<dyn Storage>,
    instant: &InstantTime,
    timeout: Duration,
) -> Result<bool> {
    let Some((bytes, _)) = storage.get_opt(&heartbeat_key(instant)).await? else {
        return Ok(false);
    };
    let last: i64 = String::from_utf8_lossy(&bytes).trim().parse().unwrap_or(0);
    let limit = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
    Ok(now_ms().saturating_sub(last) <= limit)
}

/// Rolls back the pending writes (`commit`, `deltacommit`, `replacecommit`; table services are
/// left alone) whose writer's heartbeat is missing or older than `heartbeat_timeout` (with a
/// zero timeout: every pending write), and finishes rollbacks a crash left unfinished, through
/// `rollback::rollback_failed_writes_where`. The caller holds the table lock. Returns the
/// rolled-back instants.
pub async fn rollback_failed(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
    heartbeat_timeout: Duration,
) -> Result<Vec<InstantTime>> {
    let mut alive: BTreeSet<InstantTime> = BTreeSet::new();
    if !heartbeat_timeout.is_zero() {
        let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
        for instant in tl.pending() {
            if matches!(
                instant.action,
                Action::Commit | Action::DeltaCommit | Action::ReplaceCommit
            ) && is_alive(storage, &instant.requested_time, heartbeat_timeout).await?
            {
                alive.insert(instant.requested_time);
            }
        }
    }
    let done = rollback::rollback_failed_writes_where(storage, layout, generator, |i| {
        !alive.contains(&i.requested_time)
    })
    .await?;
    for t in &done {
        stop_heartbeat(storage, t).await?;
    }
    Ok(done)
}

/// Creates the partition marker of `partition` if absent (spec 1.4).
pub async fn ensure_partition_marker(
    storage: &Arc<dyn Storage>,
    partition: &str,
    instant: &str,
) -> Result<()> {
    let key = join(partition, PARTITION_MARKER);
    if storage.exists(&key).await? {
        return Ok(());
    }
    let depth = if partition.is_empty() {
        0
    } else {
        partition.split('/').count()
    };
    let text = format!(
        "#partition metadata\n#written by arbor at {instant}\ncommitTime={instant}\npartitionDepth={depth}\n"
    );
    match storage.put_if_absent(&key, Bytes::from(text)).await {
        Ok(_) | Err(StorageError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The commit metadata of a write: the stats per partition (an empty map when nothing was
/// written), `extraMetadata.schema` (always), the operation, `compacted=false`, version 1.
pub fn commit_metadata(
    operation: WriteOperationType,
    schema_json: &str,
    written: &[WrittenGroup],
) -> HoodieCommitMetadata {
    let mut m = HoodieCommitMetadata {
        partition_to_write_stats: Some(BTreeMap::new()),
        compacted: Some(false),
        version: Some(1),
        ..HoodieCommitMetadata::default()
    };
    for w in written {
        m.add_write_stat(w.partition.clone(), w.stat.clone());
    }
    m.insert_extra(SCHEMA_KEY, schema_json);
    m.set_operation_type(operation);
    m
}

/// The inflight workload profile (spec 3.3): one stat per partition with `fileId=""`,
/// `prevCommit="null"` and the planned insert/update/delete counts.
pub fn workload_profile(
    operation: WriteOperationType,
    schema_json: &str,
    plan: &WritePlan,
) -> HoodieCommitMetadata {
    let mut per: BTreeMap<String, (i64, i64, i64)> = BTreeMap::new();
    for g in &plan.groups {
        let e = per.entry(g.partition.clone()).or_default();
        e.0 += g.inserts.len() as i64;
        e.1 += g.updates.len() as i64;
        e.2 += g.deletes.len() as i64;
    }
    let mut m = HoodieCommitMetadata {
        partition_to_write_stats: Some(BTreeMap::new()),
        compacted: Some(false),
        version: Some(1),
        ..HoodieCommitMetadata::default()
    };
    for (p, (ins, upd, del)) in per {
        m.add_write_stat(
            p.clone(),
            HoodieWriteStat {
                file_id: Some(String::new()),
                prev_commit: Some("null".to_string()),
                num_inserts: Some(ins),
                num_update_writes: Some(upd),
                num_deletes: Some(del),
                partition_path: Some(p),
                ..HoodieWriteStat::default()
            },
        );
    }
    m.insert_extra(SCHEMA_KEY, schema_json);
    m.set_operation_type(operation);
    m
}

/// A completed write that touched file groups this instant also touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other instant.
    pub other: Instant,
    /// The shared file groups, as `partition/fileId`.
    pub file_groups: Vec<String>,
}

/// The OCC check, run under the table lock on a freshly loaded timeline: every completed
/// `commit`/`deltacommit`/`replacecommit` that is neither `ours` nor in `planned_against` (the
/// completed instants of the state the write was planned on) and is not a compaction, whose
/// write stats or replaced file ids name a `(partition, fileId)` of `touched`, is a conflict.
/// Returns the earliest such instant.
pub async fn find_conflict(
    timeline: &ActiveTimeline,
    ours: &InstantTime,
    planned_against: &BTreeSet<InstantTime>,
    touched: &BTreeSet<(String, String)>,
) -> Result<Option<Conflict>> {
    if touched.is_empty() {
        return Ok(None);
    }
    for instant in timeline.completed_writes() {
        if &instant.requested_time == ours || planned_against.contains(&instant.requested_time) {
            continue;
        }
        let bytes = timeline.read(&instant).await?;
        let key = timeline.key_of(&instant)?;
        let mut groups: Vec<(String, String)> = Vec::new();
        match decode_instant(&instant, &bytes, &key, false)? {
            InstantContent::Commit(m) => {
                if m.is_compacted() {
                    continue;
                }
                for (p, s) in m.write_stats() {
                    if let Some(f) = &s.file_id {
                        groups.push((p.to_string(), f.clone()));
                    }
                }
            }
            InstantContent::ReplaceCommit(m) => {
                for (p, s) in m.write_stats() {
                    if let Some(f) = &s.file_id {
                        groups.push((p.to_string(), f.clone()));
                    }
                }
                for (p, f) in m.replaced_file_ids() {
                    groups.push((p.to_string(), f.to_string()));
                }
            }
            _ => {}
        }
        let mut shared: Vec<String> = groups
            .into_iter()
            .filter(|g| touched.contains(g))
            .map(|(p, f)| join(&p, &f))
            .collect();
        shared.sort();
        shared.dedup();
        if !shared.is_empty() {
            return Ok(Some(Conflict {
                other: instant,
                file_groups: shared,
            }));
        }
    }
    Ok(None)
}
