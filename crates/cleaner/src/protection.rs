//! Who still needs which file: the [`ProtectionSource`] trait and the sources the cleaner always
//! consults (savepoints, pending instants, the retention window of the clean policy).
//!
//! The cleaner deletes a committed data file only if **no** source protects it: a new kind of
//! holder (branches, tags, clones) is a new source, and the cleaner does not change.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::Arc;

use arbor_fsview::{parse_data_file_name, FileSlice, FileSystemView, Horizon};
use arbor_storage::Storage;
use arbor_timeline::avro::{decode, HoodieSavepointMetadata};
use arbor_timeline::{Action, Instant, InstantTime, State};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::policy::CleanPolicy;

/// The table state a source judges: the data table's file-system view (timeline and file
/// listing, through the metadata table when the table has one) at one moment, under the
/// table lock.
#[derive(Debug, Clone, Copy)]
pub struct ProtectionContext<'a> {
    /// The storage rooted at the table base.
    pub storage: &'a Arc<dyn Storage>,
    /// The data table's view.
    pub view: &'a FileSystemView,
    /// The time the policy's clock reads (hours-based retention).
    pub now: DateTime<Utc>,
}

/// A holder of files: everything it returns is kept by the cleaner.
///
/// Contract: `protected` returns the keys (relative to the table base, `partition/name`, or
/// `name` for a non-partitioned table) of every data file the holder may still read. Returning
/// too much only keeps files longer; returning too little loses data, so a source that cannot
/// decide fails instead (the clean is then not run).
#[async_trait]
pub trait ProtectionSource: Debug + Send + Sync {
    /// A short name for plans and errors (`savepoints`, `pending instants`, ...).
    fn name(&self) -> String;

    /// The keys of the files this source needs.
    async fn protected(&self, ctx: &ProtectionContext<'_>) -> Result<BTreeSet<String>>;
}

/// Every committed data file of the view's table (key `partition/name`), from the view's
/// listing (the metadata table when the table has one).
pub async fn committed_files(view: &FileSystemView) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for partition in view.partitions().await?.iter() {
        for f in view.partition_files(partition).await?.iter() {
            if let Ok(Some(d)) = parse_data_file_name(&f.name, f.size) {
                if view.is_committed(d.instant_time()) {
                    out.insert(
                        arbor_fsview::slice::join(partition, &f.name),
                        partition.clone(),
                    );
                }
            }
        }
    }
    Ok(out)
}

/// The keys of a slice's files (base file, then log files).
pub fn slice_keys(slice: &FileSlice) -> impl Iterator<Item = String> + '_ {
    slice
        .base_file_path()
        .into_iter()
        .chain(slice.log_file_paths())
}

/// The keys of every file of the latest slices as of `horizon` (every partition).
pub async fn snapshot_keys(view: &FileSystemView, horizon: &Horizon) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for slice in view.latest_file_slices_within(None, horizon).await? {
        out.extend(slice_keys(&slice));
    }
    Ok(out)
}

/// Completed savepoints protect every file of the snapshot they were taken at: the files their
/// metadata names, and (to be safe with savepoints written by other tools, whose metadata may
/// leave out log files) every file of the latest slices as of the savepointed instant.
#[derive(Debug, Clone, Copy, Default)]
pub struct SavepointProtection;

#[async_trait]
impl ProtectionSource for SavepointProtection {
    fn name(&self) -> String {
        "savepoints".to_string()
    }

    async fn protected(&self, ctx: &ProtectionContext<'_>) -> Result<BTreeSet<String>> {
        let mut out = BTreeSet::new();
        for sp in completed_savepoints(ctx) {
            out.extend(savepoint_keys(ctx, &sp).await?);
        }
        Ok(out)
    }
}

/// The completed savepoints of the context's timeline (so the tags of its root), ascending.
pub fn completed_savepoints(ctx: &ProtectionContext<'_>) -> Vec<Instant> {
    ctx.view
        .history()
        .active()
        .filter(&[Action::Savepoint], &[State::Completed])
}

/// What one completed savepoint `sp` protects ([`SavepointProtection`]): the files its metadata
/// names and every file of the latest slices as of the savepointed instant.
pub async fn savepoint_keys(ctx: &ProtectionContext<'_>, sp: &Instant) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let active = ctx.view.history().active();
    let key = active.key_of(sp)?;
    let meta: HoodieSavepointMetadata = decode(&active.read(sp).await?, &key)?;
    for (partition, file) in meta.files() {
        let name = file.rsplit('/').next().unwrap_or(file);
        out.insert(arbor_fsview::slice::join(partition, name));
    }
    out.extend(snapshot_keys(ctx.view, &Horizon::AsOf(sp.requested_time.clone())).await?);
    Ok(out)
}

/// Pending table services protect their inputs: every file of a pending compaction's planned
/// slices and every file of the latest slices of file groups under pending clustering. (Files
/// written by pending writes are not committed, so the cleaner never considers them.)
#[derive(Debug, Clone, Copy, Default)]
pub struct PendingProtection;

#[async_trait]
impl ProtectionSource for PendingProtection {
    fn name(&self) -> String {
        "pending instants".to_string()
    }

    async fn protected(&self, ctx: &ProtectionContext<'_>) -> Result<BTreeSet<String>> {
        let mut out = BTreeSet::new();
        for op in ctx.view.pending_compaction_operations() {
            let o = &op.operation;
            for name in o
                .data_file_path
                .iter()
                .chain(o.delta_file_paths.iter().flatten())
            {
                let name = name.rsplit('/').next().unwrap_or(name);
                out.insert(arbor_fsview::slice::join(&op.partition, name));
            }
        }
        let clustering = ctx.view.pending_clustering_file_groups();
        if !clustering.is_empty() {
            for slice in ctx.view.latest_file_slices(None, None).await? {
                if clustering.contains_key(&(slice.partition.clone(), slice.file_id.clone())) {
                    out.extend(slice_keys(&slice));
                }
            }
        }
        Ok(out)
    }
}

/// The retention window of a clean policy: every file a query within the window reads.
/// - `KeepLatestCommits(n)`: the snapshots as of each of the `n` latest completed writes;
/// - `KeepLatestByHours(h)`: the snapshots as of every completed write that completed within
///   the last `h` hours;
/// - `KeepLatestFileVersions(n)`: the latest `n` slices of every file group that is not
///   replaced.
///
/// The latest snapshot is always kept.
#[derive(Debug, Clone, Copy)]
pub struct RetentionProtection {
    /// The policy.
    pub policy: CleanPolicy,
}

impl RetentionProtection {
    /// The completed writes whose snapshots the window keeps (requested times, ascending).
    pub fn retained_instants(&self, ctx: &ProtectionContext<'_>) -> Vec<InstantTime> {
        let mut writes: Vec<(InstantTime, InstantTime)> = ctx
            .view
            .index()
            .completed_writes()
            .map(|i| {
                let done = i
                    .completion_time
                    .clone()
                    .unwrap_or_else(|| i.requested_time.clone());
                (done, i.requested_time.clone())
            })
            .collect();
        writes.sort();
        let chosen: Vec<InstantTime> = match self.policy {
            CleanPolicy::KeepLatestCommits(n) => writes
                .iter()
                .rev()
                .take(n.max(1))
                .map(|(_, t)| t.clone())
                .collect(),
            CleanPolicy::KeepLatestByHours(h) => {
                // Out-of-range windows keep everything (no limit).
                let limit = i64::try_from(h)
                    .ok()
                    .and_then(chrono::Duration::try_hours)
                    .and_then(|d| ctx.now.checked_sub_signed(d));
                writes
                    .iter()
                    .filter(|(done, _)| match (limit, done.to_datetime()) {
                        (Some(limit), Some(d)) => d >= limit,
                        _ => true,
                    })
                    .map(|(_, t)| t.clone())
                    .collect()
            }
            CleanPolicy::KeepLatestFileVersions(_) => Vec::new(),
        };
        let mut chosen = chosen;
        chosen.sort();
        chosen
    }
}

#[async_trait]
impl ProtectionSource for RetentionProtection {
    fn name(&self) -> String {
        format!("retention ({})", self.policy)
    }

    async fn protected(&self, ctx: &ProtectionContext<'_>) -> Result<BTreeSet<String>> {
        match self.policy {
            CleanPolicy::KeepLatestFileVersions(n) => {
                let mut out = snapshot_keys(ctx.view, &Horizon::Latest).await?;
                let replaced = ctx.view.index().replaced_within(&Horizon::Latest);
                for partition in ctx.view.partitions().await?.iter() {
                    for group in ctx.view.file_groups(partition, &Horizon::Latest).await? {
                        if replaced.contains(&(group.partition.clone(), group.file_id.clone())) {
                            continue;
                        }
                        for slice in group.slices.values().rev().take(n.max(1)) {
                            out.extend(slice_keys(slice));
                        }
                    }
                }
                Ok(out)
            }
            // The latest snapshot and each retained one, in one pass over the listing.
            _ => {
                let retained = self.retained_instants(ctx);
                let mut out = BTreeSet::new();
                for slice in ctx.view.latest_file_slices_union(&retained).await? {
                    out.extend(slice_keys(&slice));
                }
                Ok(out)
            }
        }
    }
}
