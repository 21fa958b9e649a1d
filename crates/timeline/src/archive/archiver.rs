//! The archiver: moves the oldest completed instants from the active timeline into the LSM
//! timeline, following Java's `TimelineArchiverV2` and `LSMTimelineWriter`.
//!
//! One [`Archiver::run`]:
//! 1. loads the active timeline, then the archived one (its manifest, and only the data
//!    files that may hold an active instant: [`ArchivedTimeline::load_covering`]);
//! 2. **recovery**: deletes the leftover active files of instants already archived (an earlier
//!    run stopped between publishing the archive and deleting the active files);
//! 3. picks the instants to archive (see [`Archiver::run`] for the rules);
//! 4. writes one level-0 data file, commits a new manifest (create-if-absent) and rewrites
//!    `_version_`: from then on the instants are archived;
//! 5. deletes their active files: every `.requested` first, then every `.inflight`, then the
//!    completed files one by one in ascending requested time, so that no archived instant ever
//!    looks pending (the next writer would roll it back);
//! 6. compacts the LSM tree: while a level holds at least `lsm_batch_size` files, the oldest
//!    `lsm_batch_size` are merged into one file of the next level (new manifest), and
//! 7. cleans: manifests older than the retained snapshots, and data files no retained snapshot
//!    lists, are deleted (only after the snapshot that replaced them is current).
//!
//! A crash at any storage operation leaves a state that [`TimelineHistory`] reads with every
//! instant exactly once, and the next `run` completes the work. Runs must not overlap: call
//! `run` under the table lock (a concurrent run is detected at the manifest write and fails).
//!
//! [`TimelineHistory`]: super::TimelineHistory

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arbor_storage::{Storage, StorageExt, MAX_DELETE_BATCH};
use bytes::Bytes;

use super::lsm_file::{write_lsm_file, LsmFileName, LsmInstantRow, LSM_INSTANT_VERSION, MAX_LEVEL};
use super::manifest::{manifest_key, Manifest, ManifestEntry, Snapshot};
use super::reader::{read_data_file, ArchivedTimeline};
use crate::active::{ActiveTimeline, InstantFiles, InstantKey};
use crate::error::{Result, TimelineError};
use crate::instant::{Action, Instant, InstantTime};
use crate::layout::TableLayout;

/// `hoodie.keep.min.commits`.
pub const KEEP_MIN_COMMITS_KEY: &str = "hoodie.keep.min.commits";
/// `hoodie.keep.max.commits`.
pub const KEEP_MAX_COMMITS_KEY: &str = "hoodie.keep.max.commits";
/// `hoodie.archive.beyond.savepoint`.
pub const ARCHIVE_BEYOND_SAVEPOINT_KEY: &str = "hoodie.archive.beyond.savepoint";
/// `hoodie.timeline.compaction.batch.size`.
pub const LSM_BATCH_SIZE_KEY: &str = "hoodie.timeline.compaction.batch.size";

/// Number of most recent manifest snapshots kept for concurrent readers (Java keeps 3; the
/// snapshots created by this run's compactions are kept in addition).
pub const MANIFEST_RETAINED_VERSIONS: usize = 3;

/// How much of the timeline stays active and how the LSM tree is compacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivalPolicy {
    /// Completed commit-action instants left active after archiving (`hoodie.keep.min.commits`,
    /// default 20).
    pub min_commits: usize,
    /// Archival starts when more completed commit-action instants than this are active
    /// (`hoodie.keep.max.commits`, default 30).
    pub max_commits: usize,
    /// Archive commits after the first savepoint, keeping only the savepointed commits active
    /// (`hoodie.archive.beyond.savepoint`, default false).
    pub archive_beyond_savepoint: bool,
    /// Number of files of one LSM level merged into one file of the next level
    /// (`hoodie.timeline.compaction.batch.size`, default 10).
    pub lsm_batch_size: usize,
}

impl Default for ArchivalPolicy {
    fn default() -> Self {
        ArchivalPolicy {
            min_commits: 20,
            max_commits: 30,
            archive_beyond_savepoint: false,
            lsm_batch_size: 10,
        }
    }
}

impl ArchivalPolicy {
    /// Checks the settings: `min_commits >= 1`, `max_commits > min_commits`,
    /// `lsm_batch_size >= 2`; else [`TimelineError::ArchiveConfig`].
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(TimelineError::ArchiveConfig { reason });
        if self.min_commits < 1 {
            return bad(format!("{KEEP_MIN_COMMITS_KEY} must be at least 1"));
        }
        if self.max_commits <= self.min_commits {
            return bad(format!(
                "{KEEP_MAX_COMMITS_KEY} ({}) must be greater than {KEEP_MIN_COMMITS_KEY} ({})",
                self.max_commits, self.min_commits
            ));
        }
        if self.lsm_batch_size < 2 {
            return bad(format!(
                "{LSM_BATCH_SIZE_KEY} ({}) must be at least 2",
                self.lsm_batch_size
            ));
        }
        Ok(())
    }

    /// The policy from Hudi config keys (absent keys take the defaults), validated.
    pub fn from_options(options: &HashMap<String, String>) -> Result<Self> {
        let mut p = ArchivalPolicy::default();
        let number = |key: &str, default: usize| -> Result<usize> {
            match options.get(key) {
                None => Ok(default),
                Some(v) => v.trim().parse().map_err(|_| TimelineError::ArchiveConfig {
                    reason: format!("{key}={v:?} is not a non-negative integer"),
                }),
            }
        };
        p.min_commits = number(KEEP_MIN_COMMITS_KEY, p.min_commits)?;
        p.max_commits = number(KEEP_MAX_COMMITS_KEY, p.max_commits)?;
        p.lsm_batch_size = number(LSM_BATCH_SIZE_KEY, p.lsm_batch_size)?;
        if let Some(v) = options.get(ARCHIVE_BEYOND_SAVEPOINT_KEY) {
            p.archive_beyond_savepoint = match v.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(TimelineError::ArchiveConfig {
                        reason: format!("{ARCHIVE_BEYOND_SAVEPOINT_KEY}={v:?} is not a boolean"),
                    })
                }
            };
        }
        p.validate()?;
        Ok(p)
    }
}

/// What one [`Archiver::run`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArchiveOutcome {
    /// The instants archived by this run, ordered by requested time.
    pub archived: Vec<Instant>,
    /// Instants an earlier, interrupted run had archived whose active files this run deleted.
    pub recovered: Vec<Instant>,
    /// The level-0 data file written, if any.
    pub data_file: Option<String>,
    /// The files written by LSM compaction.
    pub compacted_files: Vec<String>,
    /// The current manifest snapshot after the run (`None` if nothing was ever archived).
    pub manifest_version: Option<u32>,
    /// Keys deleted by cleaning (old manifests and data files no retained snapshot lists).
    pub cleaned: Vec<String>,
}

/// Archives the oldest completed instants of one timeline. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Archiver {
    storage: Arc<dyn Storage>,
    layout: TableLayout,
    policy: ArchivalPolicy,
    metadata_table: Option<TableLayout>,
    upper_bound: Option<InstantTime>,
}

/// The meta directory of the metadata table paired with a data table's meta directory:
/// `.hoodie` -> `.hoodie/metadata/.hoodie`, `.hoodie/branches/b` ->
/// `.hoodie/metadata/.hoodie/branches/b`. `None` for a meta directory that is itself inside a
/// metadata table, or that has no `.hoodie` segment.
pub fn metadata_table_meta_dir(meta_dir: &str) -> Option<String> {
    let segments: Vec<&str> = meta_dir.split('/').collect();
    if segments.windows(2).any(|w| w == ["metadata", ".hoodie"]) {
        return None;
    }
    let pos = segments.iter().position(|s| *s == ".hoodie")?;
    let mut out = Vec::with_capacity(segments.len() + 2);
    for (i, s) in segments.iter().enumerate() {
        out.push(*s);
        if i == pos {
            out.push("metadata");
            out.push(".hoodie");
        }
    }
    Some(out.join("/"))
}

impl Archiver {
    /// An archiver for the timeline at `layout`. Fails with [`TimelineError::ArchiveConfig`] for
    /// an invalid policy or a layout without history directory (table version 6).
    ///
    /// When `<mdt meta>/hoodie.properties` exists (the metadata table meta directory derived by
    /// [`metadata_table_meta_dir`]), instants after the metadata table's latest compaction are
    /// never archived; override with [`Archiver::with_metadata_table`].
    pub fn new(
        storage: Arc<dyn Storage>,
        layout: TableLayout,
        policy: ArchivalPolicy,
    ) -> Result<Self> {
        policy.validate()?;
        if layout.history_dir.is_none() {
            return Err(TimelineError::ArchiveConfig {
                reason: format!(
                    "the timeline at {} has no LSM history directory (table version 6); arbor archives only table version 8 and later",
                    layout.timeline_dir
                ),
            });
        }
        let metadata_table = metadata_table_meta_dir(&layout.meta_dir).map(|d| TableLayout::v2(&d));
        Ok(Archiver {
            storage,
            layout,
            policy,
            metadata_table,
            upper_bound: None,
        })
    }

    /// Never archives an instant whose requested time is at or after `bound` (the metadata
    /// table's archival uses it to stay behind its latest compaction and the data table's
    /// active timeline).
    pub fn with_upper_bound(mut self, bound: Option<InstantTime>) -> Self {
        self.upper_bound = bound;
        self
    }

    /// Uses `layout` as the metadata table's timeline (or none: no metadata table constraint).
    pub fn with_metadata_table(mut self, layout: Option<TableLayout>) -> Self {
        self.metadata_table = layout;
        self
    }

    /// The policy.
    pub fn policy(&self) -> &ArchivalPolicy {
        &self.policy
    }

    fn history_dir(&self) -> Result<&str> {
        self.layout
            .history_dir
            .as_deref()
            .ok_or_else(|| TimelineError::ArchiveConfig {
                reason: format!("{} has no history directory", self.layout.timeline_dir),
            })
    }

    /// Runs one archival.
    ///
    /// Archiving starts when more than `max_commits` completed `commit`/`deltacommit`/
    /// `replacecommit` instants are active, and archives the oldest of them down to
    /// `min_commits`, never reaching:
    /// - the earliest pending instant of any action, nor the last completed commit before it
    ///   (Java keeps that one too);
    /// - the first completed savepoint's time (with `archive_beyond_savepoint`, only the
    ///   savepointed commits stay active and archiving continues past them); savepoints
    ///   themselves are never archived;
    /// - a `replacecommit` whose replaced file groups still have files in their partition;
    /// - with a metadata table: the first commit that completed after the metadata table's
    ///   latest compaction; a metadata table without compaction blocks archiving entirely.
    ///
    /// Completed `clean` and `rollback` instants older than the last archived commit go along.
    /// Completed `rollback` instants are also archived on their own (those of writers that
    /// lost a race pile up faster than commits): when more than `max_commits` are active, the
    /// oldest down to `min_commits`, within the same bounds (pending instants, savepoints, the
    /// metadata table's compaction, the upper bound).
    /// Every run also finishes the work of an interrupted one (deleting leftover active files,
    /// compacting, cleaning).
    pub async fn run(&self) -> Result<ArchiveOutcome> {
        let history_dir = self.history_dir()?.to_string();
        let storage = self.storage.as_ref();
        let mut outcome = ArchiveOutcome::default();

        let mut active = ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
        // Only the archive files that may hold an active instant: recovery looks for active
        // instants already archived, and reading the whole archive would make every run's
        // cost grow with the table's age.
        let times: BTreeSet<InstantTime> =
            active.instant_files().map(|(k, _)| k.0.clone()).collect();
        let archived = ArchivedTimeline::load_covering(storage, &self.layout, &times).await?;
        let mut snapshot = archived.snapshot().clone();

        // Recovery: active leftovers of archived instants.
        let leftovers: Vec<(InstantKey, InstantFiles)> = active
            .instant_files()
            .filter(|(k, _)| archived.contains(k))
            .map(|(k, f)| (k.clone(), f.clone()))
            .collect();
        if !leftovers.is_empty() {
            tracing::info!(
                count = leftovers.len(),
                "deleting active files of already archived instants"
            );
            self.delete_active_files(&leftovers).await?;
            outcome.recovered = leftovers
                .iter()
                .filter_map(|(_, f)| f.latest().cloned())
                .collect();
            active.reload().await?;
        }

        let to_archive = self.select(&active).await?;
        if !to_archive.is_empty() {
            let rows = self.rows_of(&active, &to_archive).await?;
            let (first, last) = match (to_archive.first(), to_archive.last()) {
                (Some((f, _)), Some((l, _))) => (f.0.to_string(), l.0.to_string()),
                _ => return Ok(outcome),
            };
            let name = LsmFileName {
                min_instant: first,
                max_instant: last,
                level: 0,
            }
            .to_string();
            if snapshot.manifest.contains(&name) {
                return Err(TimelineError::Archive {
                    path: format!("{history_dir}/{name}"),
                    reason:
                        "the current manifest already lists this file but its instants are active"
                            .into(),
                });
            }
            let bytes = write_lsm_file(&rows)?;
            let len = bytes.len() as u64;
            self.storage
                .put(&format!("{history_dir}/{name}"), bytes)
                .await?;
            let mut manifest = snapshot.manifest.clone();
            manifest.files.push(ManifestEntry {
                file_name: name.clone(),
                file_len: len,
            });
            snapshot.commit(storage, manifest).await?;
            outcome.data_file = Some(name);
            self.delete_active_files(&to_archive).await?;
            outcome.archived = to_archive
                .iter()
                .filter_map(|(_, f)| f.completed.clone())
                .collect();
        }

        let compactions = self.compact(&mut snapshot, &mut outcome).await?;
        outcome.cleaned = self.clean(&history_dir, compactions).await?;
        outcome.manifest_version = snapshot.version;
        Ok(outcome)
    }

    /// Picks the instants to archive from a (recovered) active timeline, in requested-time
    /// order, with their files.
    async fn select(&self, active: &ActiveTimeline) -> Result<Vec<(InstantKey, InstantFiles)>> {
        let commits = active.completed_writes();
        let rollbacks: Vec<Instant> = active
            .completed()
            .into_iter()
            .filter(|i| i.action == Action::Rollback)
            .collect();
        if commits.len() <= self.policy.max_commits && rollbacks.len() <= self.policy.max_commits {
            return Ok(Vec::new());
        }
        // Exclusive upper bounds (requested times) from every rule; the smallest wins.
        let mut bounds: Vec<InstantTime> = Vec::new();

        if let Some(pending) = active.pending().first() {
            let before = commits
                .iter()
                .rev()
                .find(|c| c.requested_time < pending.requested_time);
            bounds.push(
                before
                    .map(|c| c.requested_time.clone())
                    .unwrap_or_else(|| pending.requested_time.clone()),
            );
        }

        if let Some(mdt) = &self.metadata_table {
            if self.storage.exists(&mdt.properties_key()).await? {
                let mdt_timeline = ActiveTimeline::load(self.storage.clone(), mdt.clone()).await?;
                let latest_compaction = mdt_timeline
                    .completed()
                    .into_iter()
                    .filter(|i| matches!(i.action, Action::Commit | Action::ReplaceCommit))
                    .map(|i| i.requested_time)
                    .max();
                let Some(compaction) = latest_compaction else {
                    tracing::info!(mdt = %mdt.meta_dir, "not archiving: the metadata table has no compaction yet");
                    return Ok(Vec::new());
                };
                if let Some(first_after) = commits.iter().find(|c| {
                    c.requested_time != compaction
                        && c.completion_time.as_ref().is_none_or(|ct| *ct > compaction)
                }) {
                    bounds.push(first_after.requested_time.clone());
                }
            }
        }

        if let Some(b) = &self.upper_bound {
            bounds.push(b.clone());
        }

        let savepoints: BTreeSet<InstantTime> = active
            .completed()
            .into_iter()
            .filter(|i| i.action == Action::Savepoint)
            .map(|i| i.requested_time)
            .collect();
        if !self.policy.archive_beyond_savepoint {
            if let Some(first) = savepoints.first() {
                bounds.push(first.clone());
            }
        }
        let bound = bounds.into_iter().min();

        let limit = if commits.len() > self.policy.max_commits {
            commits.len().saturating_sub(self.policy.min_commits)
        } else {
            0
        };
        let mut chosen: Vec<Instant> = commits
            .into_iter()
            .filter(|c| !savepoints.contains(&c.requested_time))
            .filter(|c| bound.as_ref().is_none_or(|b| c.requested_time < *b))
            .take(limit)
            .collect();
        // Rollbacks on their own (as Java's per-action rule for clean and rollback instants):
        // more than `max_commits` completed ones archive the oldest down to `min_commits`,
        // within the same bounds. Writers losing races leave one per lost attempt, which would
        // otherwise stay active until as many commits were archived.
        let rollback_limit = rollbacks.len().saturating_sub(self.policy.min_commits);
        let lone_rollbacks: Vec<InstantKey> = if rollbacks.len() > self.policy.max_commits {
            rollbacks
                .iter()
                .filter(|r| bound.as_ref().is_none_or(|b| r.requested_time < *b))
                .take(rollback_limit)
                .map(|r| (r.requested_time.clone(), r.action))
                .collect()
        } else {
            Vec::new()
        };

        // A replacecommit whose replaced file groups still have files stops archiving there.
        if let Some(stop) = self.first_uncleaned_replace(active, &chosen).await? {
            chosen.truncate(stop);
        }
        let mut keys: BTreeSet<InstantKey> = chosen
            .iter()
            .map(|c| (c.requested_time.clone(), c.action))
            .collect();
        if let Some(latest) = chosen.last().map(|c| c.requested_time.clone()) {
            for i in active.completed() {
                if matches!(i.action, Action::Clean | Action::Rollback) && i.requested_time < latest
                {
                    keys.insert((i.requested_time.clone(), i.action));
                }
            }
        }
        keys.extend(lone_rollbacks);
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        Ok(active
            .instant_files()
            .filter(|(k, f)| keys.contains(*k) && f.completed.is_some())
            .map(|(k, f)| (k.clone(), f.clone()))
            .collect())
    }

    /// Index in `chosen` of the first replacecommit whose replaced file groups still have files.
    async fn first_uncleaned_replace(
        &self,
        active: &ActiveTimeline,
        chosen: &[Instant],
    ) -> Result<Option<usize>> {
        let mut listings: HashMap<String, Vec<String>> = HashMap::new();
        for (idx, c) in chosen.iter().enumerate() {
            if c.action != Action::ReplaceCommit {
                continue;
            }
            let key = active.key_of(c)?;
            let content = active.read(c).await?;
            let replaced = replaced_file_ids(c, &key, &content)?;
            for (partition, file_ids) in replaced {
                if file_ids.is_empty() {
                    continue;
                }
                if !listings.contains_key(&partition) {
                    let (objects, _) = self.storage.list_dir(&partition).await?;
                    let names = objects
                        .into_iter()
                        .map(|o| o.key.rsplit('/').next().unwrap_or(&o.key).to_string())
                        .collect();
                    listings.insert(partition.clone(), names);
                }
                let names = listings
                    .get(&partition)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let present = file_ids.iter().any(|fid| {
                    let base = format!("{fid}_");
                    let log = format!(".{fid}_");
                    names
                        .iter()
                        .any(|n| n.starts_with(&base) || n.starts_with(&log))
                });
                if present {
                    tracing::info!(instant = %c, partition = %partition, "not archiving past a replacecommit whose replaced files are not cleaned yet");
                    return Ok(Some(idx));
                }
            }
        }
        Ok(None)
    }

    /// The archived rows of the instants (Java's `createLSMTimelineInstant`).
    async fn rows_of(
        &self,
        active: &ActiveTimeline,
        instants: &[(InstantKey, InstantFiles)],
    ) -> Result<Vec<LsmInstantRow>> {
        let mut rows = Vec::with_capacity(instants.len());
        for ((time, action), files) in instants {
            let Some(completed) = &files.completed else {
                continue;
            };
            let metadata = active.read(completed).await?;
            let read_nonempty = |i: &Option<Instant>| {
                let i = i.clone();
                async move {
                    match i {
                        Some(i) => {
                            active
                                .read(&i)
                                .await
                                .map(|b| if b.is_empty() { None } else { Some(b) })
                        }
                        None => Ok(None),
                    }
                }
            };
            let plan = match files.pending_action {
                Action::Clean | Action::Compaction | Action::LogCompaction => {
                    read_nonempty(&files.requested).await?
                }
                Action::ReplaceCommit | Action::Clustering => {
                    match read_nonempty(&files.inflight).await? {
                        Some(inflight) => Some(inflight),
                        None => read_nonempty(&files.requested).await?,
                    }
                }
                _ => None,
            };
            rows.push(LsmInstantRow {
                instant_time: Some(time.to_string()),
                completion_time: completed.completion_time.as_ref().map(|c| c.to_string()),
                action: Some(action.name().to_string()),
                metadata: Some(metadata),
                plan,
                version: LSM_INSTANT_VERSION,
            });
        }
        Ok(rows)
    }

    /// Deletes the active files of the given instants: all requested files, then all inflight
    /// files, then the completed files one by one in ascending requested time.
    async fn delete_active_files(&self, instants: &[(InstantKey, InstantFiles)]) -> Result<()> {
        let mut sorted: Vec<&(InstantKey, InstantFiles)> = instants.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let requested: Vec<String> = sorted
            .iter()
            .filter_map(|(_, f)| f.requested.as_ref())
            .map(|i| self.layout.instant_key(i))
            .collect::<Result<_>>()?;
        let inflight: Vec<String> = sorted
            .iter()
            .filter_map(|(_, f)| f.inflight.as_ref())
            .map(|i| self.layout.instant_key(i))
            .collect::<Result<_>>()?;
        self.delete_keys(&requested).await?;
        self.delete_keys(&inflight).await?;
        for (_, f) in sorted {
            if let Some(c) = &f.completed {
                self.delete_keys(&[self.layout.instant_key(c)?]).await?;
            }
        }
        Ok(())
    }

    async fn delete_keys(&self, keys: &[String]) -> Result<()> {
        for chunk in keys.chunks(MAX_DELETE_BATCH) {
            for r in self.storage.delete_batch(chunk).await? {
                r?;
            }
        }
        Ok(())
    }

    /// Compacts the LSM tree level by level; returns the number of compactions done.
    async fn compact(
        &self,
        snapshot: &mut Snapshot,
        outcome: &mut ArchiveOutcome,
    ) -> Result<usize> {
        let history_dir = snapshot.history_dir.clone();
        let mut done = 0;
        let mut level = 0;
        while level < MAX_LEVEL {
            let mut files: Vec<(LsmFileName, &ManifestEntry)> = snapshot
                .manifest
                .files
                .iter()
                .filter_map(|e| LsmFileName::parse(&e.file_name).map(|n| (n, e)))
                .filter(|(n, _)| n.level == level)
                .collect();
            if files.len() < self.policy.lsm_batch_size {
                level += 1;
                continue;
            }
            files.sort_by(|a, b| a.0.cmp(&b.0));
            let inputs: Vec<LsmFileName> = files
                .into_iter()
                .take(self.policy.lsm_batch_size)
                .map(|(n, _)| n)
                .collect();
            let (Some(min), Some(max)) = (
                inputs.iter().map(|n| n.min_instant.clone()).min(),
                inputs.iter().map(|n| n.max_instant.clone()).max(),
            ) else {
                break;
            };
            let output = LsmFileName {
                min_instant: min,
                max_instant: max,
                level: level + 1,
            }
            .to_string();
            let mut rows = Vec::new();
            for n in &inputs {
                rows.extend(
                    read_data_file(self.storage.as_ref(), &history_dir, &n.to_string()).await?,
                );
            }
            let bytes = write_lsm_file(&rows)?;
            let len = bytes.len() as u64;
            self.storage
                .put(&format!("{history_dir}/{output}"), bytes)
                .await?;
            let input_names: BTreeSet<String> = inputs.iter().map(|n| n.to_string()).collect();
            let mut manifest = Manifest {
                files: snapshot
                    .manifest
                    .files
                    .iter()
                    .filter(|e| !input_names.contains(&e.file_name))
                    .cloned()
                    .collect(),
            };
            manifest.files.push(ManifestEntry {
                file_name: output.clone(),
                file_len: len,
            });
            snapshot.commit(self.storage.as_ref(), manifest).await?;
            outcome.compacted_files.push(output);
            done += 1;
            // Stay on this level: it may still hold a full batch.
        }
        Ok(done)
    }

    /// Deletes manifests outside the retained snapshots (the current one and the
    /// `MANIFEST_RETAINED_VERSIONS - 1 + compactions` before it; manifests newer than the current
    /// one are orphans of interrupted runs), then data files no retained manifest lists.
    async fn clean(&self, history_dir: &str, compactions: usize) -> Result<Vec<String>> {
        let snapshot = Snapshot::load(self.storage.as_ref(), history_dir).await?;
        let Some(current) = snapshot.version else {
            return Ok(Vec::new());
        };
        let keep = MANIFEST_RETAINED_VERSIONS + compactions;
        let retained: Vec<u32> = snapshot
            .manifest_versions
            .iter()
            .rev()
            .filter(|v| **v <= current)
            .take(keep)
            .copied()
            .collect();
        let mut live: BTreeSet<String> = snapshot.manifest.file_names().map(String::from).collect();
        for v in retained.iter().filter(|v| **v != current) {
            let key = manifest_key(history_dir, *v);
            // An unreadable old manifest only protects nothing; the current one is intact.
            if let Some((bytes, _)) = self.storage.get_opt(&key).await? {
                if let Ok(m) = Manifest::from_json(&key, &bytes) {
                    live.extend(m.file_names().map(String::from));
                }
            }
        }
        let old_manifests: Vec<String> = snapshot
            .manifest_versions
            .iter()
            .filter(|v| !retained.contains(v))
            .map(|v| manifest_key(history_dir, *v))
            .collect();
        let dead_files: Vec<String> = snapshot
            .other_files
            .iter()
            .filter(|n| LsmFileName::parse(n).is_some() && !live.contains(*n))
            .map(|n| format!("{history_dir}/{n}"))
            .collect();
        self.delete_keys(&old_manifests).await?;
        self.delete_keys(&dead_files).await?;
        Ok(old_manifests.into_iter().chain(dead_files).collect())
    }
}

/// `partitionToReplaceFileIds` of a completed replacecommit: partition path -> file ids. An
/// empty file, or commit metadata without replace information, replaces nothing; undecodable
/// content is an error (archiving must not guess).
fn replaced_file_ids(
    instant: &Instant,
    path: &str,
    content: &Bytes,
) -> Result<BTreeMap<String, Vec<String>>> {
    let decoded = crate::avro::decode_instant(instant, content, path, false)?;
    Ok(decoded
        .as_replace_commit()
        .and_then(|r| r.partition_to_replace_file_ids.clone())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_policy_validate_rejects_bad_bounds() {
        assert!(ArchivalPolicy::default().validate().is_ok());
        let p = |min, max, batch| ArchivalPolicy {
            min_commits: min,
            max_commits: max,
            archive_beyond_savepoint: false,
            lsm_batch_size: batch,
        };
        for bad in [p(0, 5, 10), p(5, 5, 10), p(6, 5, 10), p(2, 5, 1)] {
            assert!(
                matches!(bad.validate(), Err(TimelineError::ArchiveConfig { .. })),
                "{bad:?}"
            );
        }
        assert!(p(1, 2, 2).validate().is_ok());
    }

    #[test]
    fn test_policy_from_options_reads_hudi_keys() {
        let opts: HashMap<String, String> = [
            (KEEP_MIN_COMMITS_KEY, "3"),
            (KEEP_MAX_COMMITS_KEY, "5"),
            (ARCHIVE_BEYOND_SAVEPOINT_KEY, "TRUE"),
            (LSM_BATCH_SIZE_KEY, "4"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let p = ArchivalPolicy::from_options(&opts).unwrap();
        assert_eq!(
            p,
            ArchivalPolicy {
                min_commits: 3,
                max_commits: 5,
                archive_beyond_savepoint: true,
                lsm_batch_size: 4
            }
        );
        let bad: HashMap<String, String> = [(KEEP_MAX_COMMITS_KEY.to_string(), "x".to_string())]
            .into_iter()
            .collect();
        assert!(ArchivalPolicy::from_options(&bad).is_err());
        assert_eq!(
            ArchivalPolicy::from_options(&HashMap::new()).unwrap(),
            ArchivalPolicy::default()
        );
    }

    #[test]
    fn test_metadata_table_meta_dir_pairs_branches() {
        assert_eq!(
            metadata_table_meta_dir(".hoodie").as_deref(),
            Some(".hoodie/metadata/.hoodie")
        );
        assert_eq!(
            metadata_table_meta_dir(".hoodie/branches/b").as_deref(),
            Some(".hoodie/metadata/.hoodie/branches/b")
        );
        assert_eq!(metadata_table_meta_dir(".hoodie/metadata/.hoodie"), None);
        assert_eq!(metadata_table_meta_dir("elsewhere"), None);
    }
}
