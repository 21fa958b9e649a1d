//! The metadata table cleaning its own file slices, as Java's metadata writer does after its
//! compaction (`HoodieBackedTableMetadataWriter#cleanIfNecessary`, `KEEP_LATEST_COMMITS` with
//! `hoodie.metadata.cleaner.commits.retained` = [`DEFAULT_MDT_COMMITS_RETAINED`]).
//!
//! # Cadence ([`is_due`])
//! Java runs the MDT clean after its compaction check on every MDT write, but not before
//! [`MIN_INSTANTS_AFTER_COMPACTION`] MDT instants completed after the latest compaction (a
//! reader that opened the previous slice's files keeps them). Its plan only changes when the
//! retention window moves past a compaction, so arbor cleans once per compaction: when that
//! buffer has passed and no clean was started since the compaction (a clean whose plan came out
//! empty writes nothing and is tried again on the next write).
//!
//! # What is deleted
//! Committed MDT files (base HFiles and log files of every MDT partition) of the cleaning root's
//! view that no live root needs ([`crate::clean_needs`]: each root's own retention and pending
//! instants, its savepoints, so its tags and the pins of clones made from it, and pending MDT
//! compactions). A clone never deletes files that live in its sources (they are the source's to
//! clean, and the source's pin keeps what the clone reads).
//!
//! # Protocol (the caller holds the data table's lock)
//! 1. Pending MDT cleans a crash left are finished first (their plan re-checked against what
//!    every root needs now: a file needed since is not deleted).
//! 2. `C.clean.requested` on the MDT timeline holding the `HoodieCleanerPlan` (the same Avro
//!    encoders as the data cleaner; paths relative to the MDT base, `<partition>/<file>`), then
//!    `C.clean.inflight` (empty).
//! 3. The files are deleted in batches (a file already gone is not an error).
//! 4. `C_<completion>.clean` with the `HoodieCleanMetadata`.
//!
//! No reader uses a deleted file at any step: every file deleted belongs to a slice no retained
//! snapshot reads, and pending cleans are not part of any view (readers, Java and hudi-rs use
//! only the MDT's commits and deltacommits), so every prefix leaves the MDT as readable as
//! before, and the next clean finishes a pending one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant as StdInstant;

use arbor_fsview::{parse_data_file_name, FileGroup};
use arbor_storage::{Storage, StorageExt, MAX_DELETE_BATCH};
use arbor_timeline::avro::{
    decode, encode_instant_for, HoodieActionInstant, HoodieCleanFileInfo, HoodieCleanMetadata,
    HoodieCleanPartitionMetadata, HoodieCleanerPlan, InstantContent,
};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::layout::{live_roots, CloneDescriptor, CloneRule, CloneState, Home, MetaRoot};
use arbor_timeline::{
    Action, ActiveTimeline, Instant, InstantTime, InstantTimeGenerator, State, TableConfig,
    TableLayout,
};
use bytes::Bytes;

pub use crate::clean_needs::DEFAULT_MDT_COMMITS_RETAINED;
use crate::clean_needs::{
    all_file_groups, earliest_retained, needed_by_root, needed_in, slice_keys,
};
use crate::error::{MdtError, Result};
use crate::files::{MetadataTable, MDT_BASE};
use crate::validity::is_init_instant;

/// Java's buffer: the MDT is not cleaned until this many MDT instants completed after its
/// latest compaction.
pub const MIN_INSTANTS_AFTER_COMPACTION: usize = 3;

/// The policy name written in MDT clean plans and metadata.
const POLICY: &str = "KEEP_LATEST_COMMITS";

/// The clean plan's version (Java 1.x writes 2).
const CLEANER_PLAN_VERSION: i32 = 2;

/// Where an MDT clean runs: one metadata root of a table.
#[derive(Debug, Clone, Copy)]
pub struct MdtCleanScope<'a> {
    /// The table as the cleaning root sees it (`MetaRoot::view`).
    pub view: &'a Arc<dyn Storage>,
    /// The table's own storage, shared by every root (where the other roots are discovered).
    pub table: &'a Arc<dyn Storage>,
    /// The cleaning root.
    pub root: &'a MetaRoot,
    /// Completed MDT writes whose snapshots stay readable.
    pub retained: usize,
}

/// What an MDT clean did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MdtClean {
    /// The MDT clean instant (`None` when only pending cleans were finished, or nothing was
    /// due or deletable).
    pub instant: Option<InstantTime>,
    /// Files deleted, pending cleans finished included.
    pub deleted: usize,
    /// The earliest MDT instant whose snapshot the clean kept.
    pub earliest_retained: Option<InstantTime>,
    /// Pending MDT cleans finished first.
    pub finished_pending: Vec<InstantTime>,
}

/// Files to delete, per MDT partition (file names).
pub type MdtCleanPlan = BTreeMap<String, BTreeSet<String>>;

/// True when a clean of the MDT whose timeline is `mdt` is due (module doc, cadence): a
/// compaction completed, at least [`MIN_INSTANTS_AFTER_COMPACTION`] MDT instants completed
/// after it, and no clean was started after it.
pub fn is_due(mdt: &ActiveTimeline) -> bool {
    let Some(compaction) = latest_compaction(mdt) else {
        return false;
    };
    let after = mdt
        .completed()
        .into_iter()
        .filter(|i| i.requested_time > compaction)
        .count();
    let cleaned = mdt
        .filter(
            &[Action::Clean],
            &[State::Requested, State::Inflight, State::Completed],
        )
        .iter()
        .any(|c| c.requested_time > compaction);
    after >= MIN_INSTANTS_AFTER_COMPACTION && !cleaned
}

/// The latest completed MDT compaction (a `commit` that is not an initialisation instant).
fn latest_compaction(mdt: &ActiveTimeline) -> Option<InstantTime> {
    mdt.completed()
        .into_iter()
        .filter(|i| i.action == Action::Commit && !is_init_instant(&i.requested_time))
        .map(|i| i.requested_time)
        .max()
}

/// The MDT timeline of the table `view` shows, or `None` without a metadata table.
async fn mdt_timeline(view: &Arc<dyn Storage>) -> Result<Option<ActiveTimeline>> {
    let key = arbor_timeline::layout::paths::properties_key(crate::files::MDT_META_DIR);
    if !view.exists(&key).await? {
        return Ok(None);
    }
    let config = TableConfig::load(view.as_ref(), crate::files::MDT_META_DIR).await?;
    let layout = TableLayout::from_config(crate::files::MDT_META_DIR, &config)?;
    Ok(Some(ActiveTimeline::load(view.clone(), layout).await?))
}

/// Finishes pending MDT cleans, then cleans the MDT when [`is_due`]. Returns `None` without a
/// metadata table. The caller holds the data table's lock.
pub async fn clean_if_due(
    scope: MdtCleanScope<'_>,
    generator: &InstantTimeGenerator,
) -> Result<Option<MdtClean>> {
    let Some(mut tl) = mdt_timeline(scope.view).await? else {
        return Ok(None);
    };
    let mut outcome = finish_pending(scope, &mut tl, generator).await?;
    if is_due(&tl) {
        let done = clean_now(scope, &mut tl, generator).await?;
        outcome.instant = done.instant;
        outcome.deleted += done.deleted;
        outcome.earliest_retained = done.earliest_retained;
    }
    Ok(Some(outcome))
}

/// Cleans the MDT now, whatever the cadence (pending cleans are finished first). Returns
/// `None` without a metadata table. The caller holds the data table's lock.
pub async fn clean(
    scope: MdtCleanScope<'_>,
    generator: &InstantTimeGenerator,
) -> Result<Option<MdtClean>> {
    let Some(mut tl) = mdt_timeline(scope.view).await? else {
        return Ok(None);
    };
    let mut outcome = finish_pending(scope, &mut tl, generator).await?;
    let done = clean_now(scope, &mut tl, generator).await?;
    outcome.instant = done.instant;
    outcome.deleted += done.deleted;
    outcome.earliest_retained = done.earliest_retained;
    Ok(Some(outcome))
}

/// What the cleaning root and every other live root need now (keys relative to the MDT
/// base), with the cleaning root's MDT, its file groups and earliest retained instant.
struct Judged {
    groups: Vec<FileGroup>,
    needed: BTreeSet<String>,
    earliest: Option<InstantTime>,
    own_only: Option<CloneRule>,
}

/// Judges the cleaning root's MDT (see [`Judged`]). `others` false skips the other roots (used
/// when the root's own retention already keeps everything).
async fn judge(scope: MdtCleanScope<'_>, others: bool) -> Result<Option<Judged>> {
    // One listing of the data timeline, for opening the MDT and for judging it.
    let config = TableConfig::load(scope.view.as_ref(), DEFAULT_META_DIR).await?;
    let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
    let data = ActiveTimeline::load(scope.view.clone(), layout).await?;
    let Some(mdt) = MetadataTable::open_active_with(scope.view.clone(), &data).await? else {
        return Ok(None);
    };
    let groups = all_file_groups(mdt.view()).await?;
    let mut needed = needed_in(&mdt, &data, &groups, scope.retained).await?;
    let pending = data
        .pending()
        .into_iter()
        .chain(mdt.view().history().active().pending())
        .filter(|i| i.action != Action::Clean)
        .map(|i| i.requested_time)
        .min();
    let earliest = earliest_retained(mdt.view(), scope.retained, pending.as_ref());
    if others {
        for root in live_roots(scope.table).await? {
            if root != *scope.root {
                let view = root.view(scope.table.clone());
                needed.extend(needed_by_root(&view, scope.retained).await?);
            }
        }
    }
    let own_only = match CloneDescriptor::load(scope.table.as_ref()).await? {
        Some((d, _)) if d.state != CloneState::Detached => {
            let points = d
                .sources
                .iter()
                .map(|s| s.instant_time())
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Some(CloneRule::new(&points))
        }
        _ => None,
    };
    Ok(Some(Judged {
        groups,
        needed,
        earliest,
        own_only,
    }))
}

impl Judged {
    /// True when `key` (relative to the MDT base) may be deleted: nobody needs it and it lives
    /// in this table's own location.
    fn deletable(&self, key: &str) -> bool {
        if self.needed.contains(key) {
            return false;
        }
        match &self.own_only {
            Some(rule) => rule.home(&format!("{MDT_BASE}/{key}")) == Home::Own,
            None => true,
        }
    }
}

/// Plans and runs one clean (steps 2–4 of the module doc).
async fn clean_now(
    scope: MdtCleanScope<'_>,
    tl: &mut ActiveTimeline,
    generator: &InstantTimeGenerator,
) -> Result<MdtClean> {
    // The root's own retention first: when it keeps everything, no other root is consulted.
    let Some(own) = judge(scope, false).await? else {
        return Ok(MdtClean::default());
    };
    let any = own
        .groups
        .iter()
        .flat_map(|g| g.slices.values())
        .flat_map(slice_keys)
        .any(|k| own.deletable(&k));
    if !any {
        return Ok(MdtClean {
            earliest_retained: own.earliest,
            ..MdtClean::default()
        });
    }
    let Some(judged) = judge(scope, true).await? else {
        return Ok(MdtClean::default());
    };
    let mut plan = MdtCleanPlan::new();
    for slice in judged.groups.iter().flat_map(|g| g.slices.values()) {
        for key in slice_keys(slice) {
            if judged.deletable(&key) {
                let name = key.rsplit('/').next().unwrap_or(&key).to_string();
                plan.entry(slice.partition.clone())
                    .or_default()
                    .insert(name);
            }
        }
    }
    if plan.is_empty() {
        return Ok(MdtClean {
            earliest_retained: judged.earliest,
            ..MdtClean::default()
        });
    }
    let time = tl.next_instant_time(generator).await?;
    let requested = Instant::requested(time.clone(), Action::Clean);
    let record = plan_record(&plan, judged.earliest.as_ref());
    let bytes = encode_instant_for(&requested, &InstantContent::CleanerPlan(Box::new(record)))?;
    let requested = tl
        .create_requested(time.clone(), Action::Clean, Bytes::from(bytes))
        .await?;
    let deleted = execute(
        scope,
        tl,
        &requested,
        &plan,
        &judged,
        judged.earliest.as_ref(),
        generator,
    )
    .await?;
    tracing::info!(instant = %time, deleted, "cleaned the metadata table");
    Ok(MdtClean {
        instant: Some(time),
        deleted,
        earliest_retained: judged.earliest,
        finished_pending: Vec::new(),
    })
}

/// Finishes every pending MDT clean (step 1 of the module doc).
async fn finish_pending(
    scope: MdtCleanScope<'_>,
    tl: &mut ActiveTimeline,
    generator: &InstantTimeGenerator,
) -> Result<MdtClean> {
    let mut outcome = MdtClean::default();
    let pending = tl.filter(&[Action::Clean], &[State::Requested, State::Inflight]);
    if pending.is_empty() {
        return Ok(outcome);
    }
    let Some(judged) = judge(scope, true).await? else {
        return Ok(outcome);
    };
    for p in pending {
        let requested = p.with_state(State::Requested);
        let key = tl.key_of(&requested)?;
        let record: HoodieCleanerPlan = decode(&tl.read(&requested).await?, &key)?;
        let plan = plan_of(&record, &key)?;
        let earliest = record
            .earliest_instant_to_retain
            .as_ref()
            .and_then(|e| InstantTime::parse(&e.timestamp).ok());
        outcome.deleted += execute(
            scope,
            tl,
            &requested,
            &plan,
            &judged,
            earliest.as_ref(),
            generator,
        )
        .await?;
        outcome.finished_pending.push(p.requested_time.clone());
    }
    Ok(outcome)
}

/// The stored plan of an MDT clean.
fn plan_record(plan: &MdtCleanPlan, earliest: Option<&InstantTime>) -> HoodieCleanerPlan {
    let files: BTreeMap<String, Vec<HoodieCleanFileInfo>> = plan
        .iter()
        .map(|(p, names)| {
            (
                p.clone(),
                names
                    .iter()
                    .map(|n| HoodieCleanFileInfo {
                        file_path: Some(arbor_fsview::slice::join(p, n)),
                        is_bootstrap_base_file: Some(false),
                    })
                    .collect(),
            )
        })
        .collect();
    HoodieCleanerPlan {
        earliest_instant_to_retain: earliest.map(|t| HoodieActionInstant {
            timestamp: t.to_string(),
            action: Action::DeltaCommit.name().to_string(),
            state: "COMPLETED".to_string(),
        }),
        policy: POLICY.to_string(),
        files_to_be_deleted_per_partition: Some(BTreeMap::new()),
        version: Some(CLEANER_PLAN_VERSION),
        file_paths_to_be_deleted_per_partition: Some(files),
        partitions_to_be_deleted: Some(Vec::new()),
    }
}

/// The plan a stored MDT cleaner plan names, keeping only MDT file names (base HFiles and
/// log files) in plain MDT partition names: a plan from another writer never makes arbor
/// delete anything else.
fn plan_of(record: &HoodieCleanerPlan, path: &str) -> Result<MdtCleanPlan> {
    let corrupt = |reason: String| MdtError::Invalid {
        path: path.to_string(),
        reason,
    };
    let mut plan = MdtCleanPlan::new();
    for (partition, files) in record
        .file_paths_to_be_deleted_per_partition
        .iter()
        .flatten()
    {
        if partition.is_empty()
            || partition.starts_with('.')
            || partition.contains('/')
            || partition.contains("..")
        {
            return Err(corrupt(format!(
                "{partition:?} is not a metadata-table partition"
            )));
        }
        for f in files {
            let Some(p) = &f.file_path else { continue };
            let name = p.rsplit('/').next().unwrap_or(p);
            if !matches!(parse_data_file_name(name, 0), Ok(Some(_))) {
                return Err(corrupt(format!("{p:?} is not a metadata-table file")));
            }
            plan.entry(partition.clone())
                .or_default()
                .insert(name.to_string());
        }
    }
    Ok(plan)
}

/// Runs a planned clean `requested` (steps 2–4): inflight, the deletions of the files still
/// deletable, the completed instant. Returns the number of files deleted.
async fn execute(
    scope: MdtCleanScope<'_>,
    tl: &mut ActiveTimeline,
    requested: &Instant,
    plan: &MdtCleanPlan,
    judged: &Judged,
    earliest: Option<&InstantTime>,
    generator: &InstantTimeGenerator,
) -> Result<usize> {
    let started = StdInstant::now();
    let inflight = match tl.get(&requested.requested_time, Action::Clean) {
        Some(f) if f.inflight.is_some() => requested.with_state(State::Inflight),
        _ => tl.transition_to_inflight(requested, Bytes::new()).await?,
    };
    let mut keys = Vec::new();
    let mut partitions: BTreeMap<String, HoodieCleanPartitionMetadata> = BTreeMap::new();
    for (partition, names) in plan {
        let meta =
            partitions
                .entry(partition.clone())
                .or_insert_with(|| HoodieCleanPartitionMetadata {
                    partition_path: partition.clone(),
                    policy: POLICY.to_string(),
                    delete_path_patterns: Vec::new(),
                    success_delete_files: Vec::new(),
                    failed_delete_files: Vec::new(),
                    is_partition_deleted: Some(false),
                });
        for name in names {
            let key = arbor_fsview::slice::join(partition, name);
            if judged.needed.contains(&key) {
                tracing::warn!(file = %key, "not deleting a metadata-table file needed since the clean was planned");
                meta.failed_delete_files.push(name.clone());
                continue;
            }
            meta.delete_path_patterns.push(name.clone());
            meta.success_delete_files.push(name.clone());
            keys.push(format!("{MDT_BASE}/{key}"));
        }
    }
    for chunk in keys.chunks(MAX_DELETE_BATCH) {
        for r in scope.view.delete_batch(chunk).await? {
            match r {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
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
        policy: POLICY.to_string(),
        start_clean_time: requested.requested_time.to_string(),
        time_taken_in_millis: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        total_files_deleted: i32::try_from(keys.len()).unwrap_or(i32::MAX),
        earliest_commit_to_retain: earliest.map(|t| t.to_string()).unwrap_or_default(),
        last_completed_commit_timestamp: last_completed,
        partition_metadata: partitions,
        version: Some(2),
        bootstrap_partition_metadata: Some(BTreeMap::new()),
    };
    let completion = tl.next_instant_time(generator).await?;
    let mut completed = inflight.with_state(State::Completed);
    completed.completion_time = Some(completion.clone());
    let bytes = encode_instant_for(&completed, &InstantContent::Clean(Box::new(metadata)))?;
    match tl.complete(&inflight, completion, Bytes::from(bytes)).await {
        Ok(_) | Err(arbor_timeline::TimelineError::AlreadyCompleted { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(keys.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_plan_round_trips_and_foreign_paths_are_refused() {
        let mut plan = MdtCleanPlan::new();
        plan.entry("files".to_string())
            .or_default()
            .insert(".files-0000-0_20260101000000000.log.1_0-0-0".to_string());
        plan.entry("files".to_string())
            .or_default()
            .insert("files-0000-0_0-0-1_20260101000000000.hfile".to_string());
        let record = plan_record(&plan, None);
        assert_eq!(plan_of(&record, "p").ok(), Some(plan));

        let mut bad = record.clone();
        bad.file_paths_to_be_deleted_per_partition =
            Some(BTreeMap::from([("../x".to_string(), Vec::new())]));
        assert!(plan_of(&bad, "p").is_err());
        let mut bad = record;
        bad.file_paths_to_be_deleted_per_partition = Some(BTreeMap::from([(
            "files".to_string(),
            vec![HoodieCleanFileInfo {
                file_path: Some("files/hoodie.properties".to_string()),
                is_bootstrap_base_file: Some(false),
            }],
        )]));
        assert!(plan_of(&bad, "p").is_err());
    }
}
