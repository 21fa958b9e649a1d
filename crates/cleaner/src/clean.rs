//! Cleaning: deleting the committed data files nobody needs any more.
//!
//! # Protocol (under the table lock)
//! 1. Pending cleans a crash left are finished first (their plan re-checked against the
//!    protection sources: a file protected since is not deleted).
//! 2. **Plan**: the candidates are the committed data files of the table (listed through the
//!    metadata table's FILES partition when the table has one: no directory listing); a candidate
//!    is deleted only if no [`ProtectionSource`] names it (savepoints, pending instants, the
//!    policy's retention window, plus the caller's sources). The deleted partitions (every file
//!    group replaced by a `DELETE_PARTITION` replacecommit) that nobody keeps anything of are
//!    removed too ([`crate::partitions`]: one LIST of each such partition's directory). An
//!    empty plan writes nothing.
//! 3. `C.clean.requested` holding the `HoodieCleanerPlan` (files per partition and
//!    `partitionsToBeDeleted`), then `C.clean.inflight` (empty).
//! 4. The partitions to remove are checked again (protections, pending writes, their
//!    directory's LIST); the deletions are recorded in the metadata table as MDT deltacommit `C`
//!    (the files deleted; each removed partition marked deleted in `__all_partitions__`),
//!    invisible to readers until `C` completes.
//! 5. The files are deleted in batches (a file already gone is not an error), then the removed
//!    partitions' markers (the local filesystem then drops the empty directories, as object
//!    stores have none).
//! 6. `C_<completion>.clean` with the `HoodieCleanMetadata` (`isPartitionDeleted` for each
//!    removed partition): the commit point.
//! 7. Optionally the timeline is archived (within the archiver's rules).
//!
//! Before planning (step 2), the files of dropped branches that nothing references any more
//! are deleted ([`crate::reclaim`]: no timeline record, as no root ever listed them).
//!
//! A crash at any step leaves either no clean instant (nothing deleted) or a pending clean that
//! the next clean finishes; the deleted files were needed by no query the policy keeps, and a
//! removed partition had no file left in any snapshot anybody keeps, so a pending clean's
//! missing marker changes no read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant as StdInstant;

use crate::partitions::{deleted_partitions, removable_partitions};
use arbor_fsview::{parse_data_file_name, FileSystemView};
use arbor_mdt::FilesDelta;
use arbor_storage::{Storage, MAX_DELETE_BATCH};
use arbor_table::read::TableReader;
use arbor_table::{Table, Transaction};
use arbor_timeline::archive::{ArchivalPolicy, Archiver};
use arbor_timeline::avro::{
    decode, encode_instant_for, HoodieActionInstant, HoodieCleanFileInfo, HoodieCleanMetadata,
    HoodieCleanPartitionMetadata, HoodieCleanerPlan, InstantContent,
};
use arbor_timeline::{Action, ActiveTimeline, Instant, InstantTime, State};
use bytes::Bytes;
use chrono::Utc;

use crate::error::{CleanerError, Result};
use crate::policy::CleanPolicy;
use crate::protection::{
    PendingProtection, ProtectionContext, ProtectionSource, RetentionProtection,
    SavepointProtection,
};
use crate::reclaim::{reclaim_dropped, ReclaimOutcome};
use crate::roots::discovered_sources;

/// The clean plan's version (Java 1.x writes 2).
const CLEANER_PLAN_VERSION: i32 = 2;

/// What a clean is asked to do.
#[derive(Debug, Clone, Default)]
pub struct CleanOptions {
    /// The retention policy.
    pub policy: CleanPolicy,
    /// Plan only: print what would be deleted, change nothing.
    pub dry_run: bool,
    /// Archive the timeline after cleaning (default policy of the archiver).
    pub archive: bool,
    /// More holders of files: their files are kept too (the table's own holders, other
    /// branches and their tags included, are always discovered and need not be added).
    pub extra_sources: Vec<Arc<dyn ProtectionSource>>,
}

/// Files to delete, per partition (file names).
pub type CleanPlan = BTreeMap<String, BTreeSet<String>>;

/// What [`clean`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanOutcome {
    /// The clean instant (`None` for a dry run or an empty plan).
    pub instant: Option<InstantTime>,
    /// The plan (what was, or for a dry run would be, deleted).
    pub plan: CleanPlan,
    /// The earliest instant whose snapshot the policy keeps (`None` for the versions policy).
    pub earliest_retained: Option<InstantTime>,
    /// Files deleted (0 for a dry run).
    pub deleted: usize,
    /// Pending cleans finished first.
    pub finished_pending: Vec<InstantTime>,
    /// Instants archived afterwards.
    pub archived: usize,
    /// Deleted partitions the clean removed (marker, directory, metadata-table listing; for a
    /// dry run: would remove), those of pending cleans it finished included.
    pub partitions_deleted: BTreeSet<String>,
    /// The files of dropped branches nothing references any more, deleted first (for a dry
    /// run: would delete; [`crate::reclaim`]).
    pub reclaimed: ReclaimOutcome,
}

impl CleanOutcome {
    /// Files in the plan.
    pub fn planned(&self) -> usize {
        self.plan.values().map(BTreeSet::len).sum()
    }
}

fn join(partition: &str, name: &str) -> String {
    arbor_fsview::slice::join(partition, name)
}

pub use crate::protection::committed_files;

/// The union of every source's protected keys.
pub async fn protected_files(
    ctx: &ProtectionContext<'_>,
    policy: CleanPolicy,
    extra: &[Arc<dyn ProtectionSource>],
) -> Result<BTreeSet<String>> {
    let mut sources: Vec<Arc<dyn ProtectionSource>> = vec![
        Arc::new(SavepointProtection),
        Arc::new(PendingProtection),
        Arc::new(RetentionProtection { policy }),
    ];
    sources.extend(extra.iter().cloned());
    let mut out = BTreeSet::new();
    for s in &sources {
        let files = s.protected(ctx).await?;
        tracing::debug!(source = %s.name(), files = files.len(), "protected files");
        out.extend(files);
    }
    Ok(out)
}

/// Plans a clean of the state `view` shows: committed files no source protects. Read only.
pub async fn plan_clean(
    storage: &Arc<dyn Storage>,
    view: &FileSystemView,
    policy: CleanPolicy,
    extra: &[Arc<dyn ProtectionSource>],
) -> Result<(CleanPlan, Option<InstantTime>)> {
    let (plan, earliest, _) = plan_with_protected(storage, view, policy, extra).await?;
    Ok((plan, earliest))
}

/// [`plan_clean`], also returning every protected key.
async fn plan_with_protected(
    storage: &Arc<dyn Storage>,
    view: &FileSystemView,
    policy: CleanPolicy,
    extra: &[Arc<dyn ProtectionSource>],
) -> Result<(CleanPlan, Option<InstantTime>, BTreeSet<String>)> {
    let ctx = ProtectionContext {
        storage,
        view,
        now: Utc::now(),
    };
    let protected = protected_files(&ctx, policy, extra).await?;
    let mut plan = CleanPlan::new();
    for (key, partition) in committed_files(view).await? {
        if !protected.contains(&key) {
            let name = key.rsplit('/').next().unwrap_or(&key).to_string();
            plan.entry(partition).or_default().insert(name);
        }
    }
    let earliest = RetentionProtection { policy }
        .retained_instants(&ctx)
        .into_iter()
        .next();
    Ok((plan, earliest, protected))
}

fn plan_record(
    plan: &CleanPlan,
    partitions: &BTreeSet<String>,
    policy: CleanPolicy,
    earliest: Option<&InstantTime>,
) -> HoodieCleanerPlan {
    let mut files: BTreeMap<String, Vec<HoodieCleanFileInfo>> = plan
        .iter()
        .map(|(p, names)| {
            (
                p.clone(),
                names
                    .iter()
                    .map(|n| HoodieCleanFileInfo {
                        file_path: Some(join(p, n)),
                        is_bootstrap_base_file: Some(false),
                    })
                    .collect(),
            )
        })
        .collect();
    // Java lists every partition it cleans, a removed one with no file left too.
    for p in partitions {
        files.entry(p.clone()).or_default();
    }
    HoodieCleanerPlan {
        earliest_instant_to_retain: earliest.map(|t| HoodieActionInstant {
            timestamp: t.to_string(),
            action: Action::Commit.name().to_string(),
            state: "COMPLETED".to_string(),
        }),
        policy: policy.hudi_name().to_string(),
        files_to_be_deleted_per_partition: Some(BTreeMap::new()),
        version: Some(CLEANER_PLAN_VERSION),
        file_paths_to_be_deleted_per_partition: Some(files),
        partitions_to_be_deleted: Some(partitions.iter().cloned().collect()),
    }
}

/// The partitions a stored cleaner plan removes (`partitionsToBeDeleted`), each a valid
/// partition path (the non-partitioned `""` is dropped: the table's root is never removed).
fn partitions_of(record: &HoodieCleanerPlan, path: &str) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for p in record.partitions_to_be_deleted.iter().flatten() {
        if p.is_empty() {
            continue;
        }
        arbor_fsview::listing::validate_partition(p).map_err(|e| CleanerError::Corrupt {
            path: path.to_string(),
            reason: format!("partition to delete {p:?}: {e}"),
        })?;
        out.insert(p.clone());
    }
    Ok(out)
}

/// The plan a stored cleaner plan names, keeping only valid data-file names in valid
/// partitions (a plan from another writer never makes arbor delete anything else).
fn plan_of(record: &HoodieCleanerPlan, path: &str) -> Result<CleanPlan> {
    let mut plan = CleanPlan::new();
    for (partition, files) in record
        .file_paths_to_be_deleted_per_partition
        .iter()
        .flatten()
    {
        arbor_fsview::listing::validate_partition(partition).map_err(|e| {
            CleanerError::Corrupt {
                path: path.to_string(),
                reason: format!("partition {partition:?}: {e}"),
            }
        })?;
        for f in files {
            let Some(p) = &f.file_path else { continue };
            let name = p.rsplit('/').next().unwrap_or(p);
            if matches!(parse_data_file_name(name, 0), Ok(Some(_))) {
                plan.entry(partition.clone())
                    .or_default()
                    .insert(name.to_string());
            } else {
                return Err(CleanerError::Corrupt {
                    path: path.to_string(),
                    reason: format!("{p:?} is not a data file"),
                });
            }
        }
    }
    Ok(plan)
}

/// A planned clean as [`execute`] carries it out.
struct Planned<'a> {
    /// Files to delete.
    plan: &'a CleanPlan,
    /// Deleted partitions to remove (checked again before anything is recorded).
    partitions: &'a BTreeSet<String>,
    /// Files that must survive whatever the plan says.
    protected: &'a BTreeSet<String>,
    /// The policy's Hudi name.
    policy_name: &'a str,
    /// The earliest instant the policy retains.
    earliest: Option<&'a InstantTime>,
}

/// Executes a planned clean `requested` (steps 3–6 of the module doc) of the state `view`
/// shows. Returns the number of files deleted and the partitions removed.
async fn execute(
    txn: Transaction<'_>,
    tl: &mut ActiveTimeline,
    requested: &Instant,
    view: &FileSystemView,
    planned: Planned<'_>,
) -> Result<(usize, BTreeSet<String>)> {
    let Planned {
        plan,
        partitions: candidates,
        protected,
        policy_name,
        earliest,
    } = planned;
    let storage = txn.view_storage();
    let started = StdInstant::now();
    let inflight = match tl.get(&requested.requested_time, Action::Clean) {
        Some(f) if f.inflight.is_some() => requested.with_state(State::Inflight),
        _ => tl.transition_to_inflight(requested, Bytes::new()).await?,
    };
    let mut delta = FilesDelta::default();
    let mut keys = Vec::new();
    let mut deleting = CleanPlan::new();
    let mut partitions: BTreeMap<String, HoodieCleanPartitionMetadata> = BTreeMap::new();
    let new_meta = |partition: &String| HoodieCleanPartitionMetadata {
        partition_path: partition.clone(),
        policy: policy_name.to_string(),
        delete_path_patterns: Vec::new(),
        success_delete_files: Vec::new(),
        failed_delete_files: Vec::new(),
        is_partition_deleted: Some(false),
    };
    for (partition, names) in plan {
        let meta = partitions
            .entry(partition.clone())
            .or_insert_with(|| new_meta(partition));
        for name in names {
            let key = join(partition, name);
            if protected.contains(&key) {
                tracing::warn!(file = %key, "not deleting a file protected since the clean was planned");
                meta.failed_delete_files.push(name.clone());
                continue;
            }
            delta.delete(partition, name);
            meta.delete_path_patterns.push(name.clone());
            meta.success_delete_files.push(name.clone());
            deleting
                .entry(partition.clone())
                .or_default()
                .insert(name.clone());
            keys.push(key);
        }
    }
    let table = txn.table();
    let removed = removable_partitions(
        storage,
        table.table_storage(),
        view,
        candidates,
        &deleting,
        protected,
    )
    .await?;
    let mut marker_keys = Vec::new();
    for (partition, markers) in &removed {
        delta.delete_partition(partition);
        partitions
            .entry(partition.clone())
            .or_insert_with(|| new_meta(partition))
            .is_partition_deleted = Some(true);
        marker_keys.extend(markers.iter().cloned());
    }
    txn.record_files_delta(&requested.requested_time, &delta)
        .await?;
    // Data files first, the partition markers last: a marker goes only once its partition
    // holds nothing else.
    for batch in [&keys, &marker_keys] {
        for chunk in batch.chunks(MAX_DELETE_BATCH) {
            for r in storage.delete_batch(chunk).await? {
                match r {
                    Ok(()) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    let last_completed = tl
        .completed_writes()
        .into_iter()
        .map(|i| i.requested_time)
        .max()
        .map(|t| t.to_string())
        .unwrap_or_default();
    let metadata = HoodieCleanMetadata {
        policy: policy_name.to_string(),
        start_clean_time: requested.requested_time.to_string(),
        time_taken_in_millis: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        total_files_deleted: i32::try_from(keys.len()).unwrap_or(i32::MAX),
        earliest_commit_to_retain: earliest.map(|t| t.to_string()).unwrap_or_default(),
        last_completed_commit_timestamp: last_completed,
        partition_metadata: partitions,
        version: Some(2),
        bootstrap_partition_metadata: Some(BTreeMap::new()),
    };
    let completion = tl.next_instant_time(txn.generator()).await?;
    let mut completed = inflight.with_state(State::Completed);
    completed.completion_time = Some(completion.clone());
    let bytes = encode_instant_for(&completed, &InstantContent::Clean(Box::new(metadata)))?;
    match tl.complete(&inflight, completion, Bytes::from(bytes)).await {
        Ok(_) | Err(arbor_timeline::TimelineError::AlreadyCompleted { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    Ok((keys.len(), removed.into_keys().collect()))
}

/// Opens the reader the cleaner plans with (the metadata table's listing when there is one).
async fn open_view(table: &Table) -> Result<TableReader> {
    Ok(TableReader::open_view(table.view_storage().clone()).await?)
}

/// Cleans the table (module doc) under the table lock. With `dry_run` nothing is written and
/// the outcome holds the plan.
pub async fn clean(table: &Table, options: &CleanOptions) -> Result<CleanOutcome> {
    table.transact(|txn| clean_locked(txn, options)).await
}

/// [`clean`] as a step of transaction `txn` (which holds the table lock) on its handle.
///
/// Besides `options.extra_sources`, every protection of the table is discovered from storage
/// ([`discovered_sources`]: every other live root, its tags and what its own policy retains),
/// so no caller can skip one.
pub async fn clean_locked(txn: Transaction<'_>, options: &CleanOptions) -> Result<CleanOutcome> {
    let table = txn.table();
    let storage = table.view_storage();
    let mut extra = discovered_sources(table.table_storage(), table.root());
    extra.extend(options.extra_sources.iter().cloned());
    let mut outcome = CleanOutcome::default();
    let mut tl = ActiveTimeline::load(storage.clone(), table.layout().clone()).await?;
    if !options.dry_run {
        for pending in tl.filter(&[Action::Clean], &[State::Requested, State::Inflight]) {
            let requested = pending.with_state(State::Requested);
            let key = tl.key_of(&requested)?;
            let record: HoodieCleanerPlan = decode(&tl.read(&requested).await?, &key)?;
            let plan = plan_of(&record, &key)?;
            let removing = partitions_of(&record, &key)?;
            let reader = open_view(table).await?;
            let ctx = ProtectionContext {
                storage,
                view: reader.view(),
                now: Utc::now(),
            };
            let protected = protected_files(&ctx, options.policy, &extra).await?;
            let earliest = record
                .earliest_instant_to_retain
                .as_ref()
                .and_then(|e| InstantTime::parse(&e.timestamp).ok());
            let (_, removed) = Box::pin(execute(
                txn,
                &mut tl,
                &requested,
                reader.view(),
                Planned {
                    plan: &plan,
                    partitions: &removing,
                    protected: &protected,
                    policy_name: &record.policy,
                    earliest: earliest.as_ref(),
                },
            ))
            .await?;
            outcome.partitions_deleted.extend(removed);
            outcome
                .finished_pending
                .push(pending.requested_time.clone());
        }
    }
    // Dropped branches' files first, so that partitions they alone kept can be removed below.
    outcome.reclaimed = reclaim_dropped(table.table_storage(), options.dry_run).await?;
    let reader = open_view(table).await?;
    let (plan, earliest, protected) =
        plan_with_protected(storage, reader.view(), options.policy, &extra).await?;
    let candidates = deleted_partitions(reader.view()).await?;
    let removing: BTreeSet<String> = removable_partitions(
        storage,
        table.table_storage(),
        reader.view(),
        &candidates,
        &plan,
        &protected,
    )
    .await?
    .into_keys()
    .collect();
    outcome.plan = plan;
    outcome.earliest_retained = earliest.clone();
    if options.dry_run {
        outcome.partitions_deleted.extend(removing.iter().cloned());
    }
    if options.dry_run || (outcome.plan.is_empty() && removing.is_empty()) {
        if !options.dry_run && options.archive {
            outcome.archived = archive(table).await?.data;
        }
        return Ok(outcome);
    }
    let time = tl.next_instant_time(table.generator()).await?;
    let requested_instant = Instant::requested(time.clone(), Action::Clean);
    let record = plan_record(&outcome.plan, &removing, options.policy, earliest.as_ref());
    let bytes = encode_instant_for(
        &requested_instant,
        &InstantContent::CleanerPlan(Box::new(record)),
    )?;
    let requested = tl
        .create_requested(time.clone(), Action::Clean, Bytes::from(bytes))
        .await?;
    // Nothing changed since the plan (the lock is held): the plan's files are unprotected.
    let (deleted, removed) = Box::pin(execute(
        txn,
        &mut tl,
        &requested,
        reader.view(),
        Planned {
            plan: &outcome.plan,
            partitions: &removing,
            protected: &protected,
            policy_name: options.policy.hudi_name(),
            earliest: earliest.as_ref(),
        },
    ))
    .await?;
    outcome.deleted = deleted;
    outcome.partitions_deleted.extend(removed);
    outcome.instant = Some(time);
    if options.archive {
        outcome.archived = archive(table).await?.data;
    }
    Ok(outcome)
}

/// Archives the data timeline with the default policy (the archiver's rules: pending
/// instants, savepoints (so tags), uncleaned replacecommits, the metadata table's latest
/// compaction), then the metadata table's timeline down to what the data timeline still
/// needs ([`Table::archive_metadata_timeline`]). The caller holds the table lock. Returns the
/// number of instants archived from each.
///
/// Archival moves only instant files of this root's own timeline (every root has its own copy
/// of the instants it inherited) and deletes no data file, so no other root's protection is
/// affected; the protections of this root are the archiver's rules above.
pub async fn archive(table: &Table) -> Result<Archived> {
    let outcome = Archiver::new(
        table.view_storage().clone(),
        table.layout().clone(),
        ArchivalPolicy::default(),
    )?
    .run()
    .await?;
    let metadata = table.archive_metadata_timeline().await?;
    Ok(Archived {
        data: outcome.archived.len(),
        metadata,
    })
}

/// What [`archive`] moved to the archived timelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Archived {
    /// Instants of the data timeline.
    pub data: usize,
    /// Instants of the metadata table's timeline.
    pub metadata: usize,
}
