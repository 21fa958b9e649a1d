//! What the timeline says about data files: which instants are committed, when they completed,
//! which file groups were replaced, and which are under pending compaction or clustering.
//!
//! # The committed rule (hudi-rs 0.5.0, hudi-format §2.4)
//! A data file whose name carries instant `t` is *committed* iff
//! 1. `t` is a completed `commit`, `deltacommit` or `replacecommit` (compactions complete as
//!    `commit`, clustering as `replacecommit`), or
//! 2. `t` sorts below the *archival boundary*: the earliest requested time among the `commit`,
//!    `deltacommit` and `replacecommit` instants of **any** state in the active timeline.
//!
//! hudi-rs applies (1) to the active timeline only; arbor also reads the archived (LSM) timeline,
//! so a completed write found only there is committed too. Both agree for every table whose
//! archive holds only instants below the boundary (the archiver never archives past the earliest
//! pending write). Files of pending instants, of rolled-back instants, and of instants newer than
//! the boundary with no timeline file are not committed. When the active timeline has no
//! instant of those three actions there is no boundary and only (1) applies.

use std::collections::{BTreeMap, BTreeSet};

use arbor_timeline::archive::{InstantLocation, TimelineHistory};
use arbor_timeline::avro::{decode_instant, HoodieCompactionOperation, InstantContent};
use arbor_timeline::naming::LayoutVersion;
use arbor_timeline::{Action, Instant, InstantTime, State};

use crate::error::{FsViewError, Result};

/// Which files a query sees, on top of the committed rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Horizon {
    /// Every committed file (a snapshot of the latest state).
    Latest,
    /// Time travel: files of instants whose **requested** time is `<=` the given time, as
    /// hudi-rs 0.5.0 answers "as of X" (a commit requested before X but completed after X is
    /// included).
    AsOf(InstantTime),
    /// Files of instants whose **completion** time is `<=` the given time, as incremental
    /// queries of v8+ tables bound their range (an instant without a known completion time, i.e.
    /// of table version 6 or older than the archive, counts as completed at its requested time).
    CompletedBy(InstantTime),
}

/// One operation of a pending compaction plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCompactionOperation {
    /// The compaction instant (the base instant of the slice the compaction will write).
    pub instant: InstantTime,
    /// The partition of the file group.
    pub partition: String,
    /// The file group.
    pub file_id: String,
    /// The plan's operation (base file, log files, metrics).
    pub operation: HoodieCompactionOperation,
}

/// A file group logically removed by a completed `replacecommit`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Replacement {
    /// The partition of the replaced group.
    pub partition: String,
    /// The replaced file group.
    pub file_id: String,
    /// The completed replacecommit (requested time, completion time).
    pub instant: InstantTime,
    /// Its completion time (`None` for table version 6).
    pub completion_time: Option<InstantTime>,
}

/// The timeline facts the view needs, extracted once per timeline load.
#[derive(Debug, Clone)]
pub struct TimelineIndex {
    layout: LayoutVersion,
    completed_writes: BTreeMap<InstantTime, Instant>,
    boundary: Option<InstantTime>,
    replacements: Vec<Replacement>,
    pending_compactions: Vec<PendingCompactionOperation>,
    pending_clustering: BTreeMap<(String, String), InstantTime>,
}

/// The actions whose instants delimit the archival boundary and whose completed files readers see.
const WRITE_ACTIONS: [Action; 3] = [Action::Commit, Action::DeltaCommit, Action::ReplaceCommit];

impl TimelineIndex {
    /// Extracts the index from a loaded history: reads every completed `replacecommit` (active or
    /// archived) and the plan of every pending compaction and clustering. A corrupt instant file
    /// fails the load with an error naming it.
    pub async fn load(history: &TimelineHistory) -> Result<Self> {
        let active = history.active();
        let layout_info = active.layout().clone();
        let layout = layout_info.layout;
        let mut completed_writes = BTreeMap::new();
        for i in history.completed_writes() {
            completed_writes
                .entry(i.requested_time.clone())
                .or_insert(i);
        }
        let boundary = active
            .instants()
            .into_iter()
            .filter(|i| WRITE_ACTIONS.contains(&i.action))
            .map(|i| i.requested_time)
            .min();

        let mut replacements = Vec::new();
        for i in completed_writes.values() {
            if i.action != Action::ReplaceCommit {
                continue;
            }
            let bytes = history
                .read_completed_content(&i.requested_time, i.action)
                .await?;
            let key = match history.location(&i.requested_time, i.action) {
                Some(InstantLocation::Archived) => format!(
                    "{}#{}",
                    layout_info.history_dir.as_deref().unwrap_or_default(),
                    i
                ),
                _ => layout_info.instant_key(i)?,
            };
            let legacy = layout == LayoutVersion::V1 || i.completion_time.is_none();
            match decode_instant(i, &bytes, &key, legacy)? {
                InstantContent::ReplaceCommit(m) => {
                    for (partition, file_id) in m.replaced_file_ids() {
                        replacements.push(Replacement {
                            partition: partition.to_string(),
                            file_id: file_id.to_string(),
                            instant: i.requested_time.clone(),
                            completion_time: i.completion_time.clone(),
                        });
                    }
                }
                other => {
                    tracing::debug!(file = %key, empty = other.is_empty(), "replacecommit without replaced file ids");
                }
            }
        }
        replacements.sort();

        let mut pending_compactions = Vec::new();
        let mut pending_clustering = BTreeMap::new();
        for (_key, files) in active.instant_files() {
            if files.completed.is_some() {
                continue;
            }
            let is_compaction = files.pending_action == Action::Compaction;
            let is_replace = matches!(
                files.pending_action,
                Action::Clustering | Action::ReplaceCommit
            );
            if !is_compaction && !is_replace {
                continue;
            }
            // The plan lives in the requested file (Java also copies it into the inflight file).
            let Some(plan_file) = files.requested.as_ref().or(files.inflight.as_ref()) else {
                continue;
            };
            let key = active.key_of(plan_file)?;
            let bytes = active.read(plan_file).await?;
            let content = decode_instant(plan_file, &bytes, &key, layout == LayoutVersion::V1)?;
            match content {
                InstantContent::Compaction(plan) if is_compaction => {
                    for op in plan.operations.iter().flatten() {
                        let (Some(partition), Some(file_id)) = (&op.partition_path, &op.file_id)
                        else {
                            return Err(FsViewError::InvalidInstantContent {
                                instant: plan_file.to_string(),
                                reason: "compaction operation without partitionPath or fileId"
                                    .into(),
                            });
                        };
                        pending_compactions.push(PendingCompactionOperation {
                            instant: plan_file.requested_time.clone(),
                            partition: partition.clone(),
                            file_id: file_id.clone(),
                            operation: op.clone(),
                        });
                    }
                }
                InstantContent::RequestedReplace(m) if is_replace => {
                    for slice in m.clustering_plan.iter().flat_map(|p| p.slices()) {
                        if let (Some(partition), Some(file_id)) =
                            (&slice.partition_path, &slice.file_id)
                        {
                            pending_clustering
                                .entry((partition.clone(), file_id.clone()))
                                .or_insert_with(|| plan_file.requested_time.clone());
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(TimelineIndex {
            layout,
            completed_writes,
            boundary,
            replacements,
            pending_compactions,
            pending_clustering,
        })
    }

    /// The timeline layout (layout 1 = table version 6: log files are named with their base
    /// instant; layout 2 = versions 8 and 9: with the deltacommit that wrote them).
    pub fn layout(&self) -> LayoutVersion {
        self.layout
    }

    /// The archival boundary: the earliest requested time of a `commit`, `deltacommit` or
    /// `replacecommit` instant (any state) in the active timeline.
    pub fn boundary(&self) -> Option<&InstantTime> {
        self.boundary.as_ref()
    }

    /// Completed `commit`/`deltacommit`/`replacecommit` instants (active and archived), by
    /// requested time.
    pub fn completed_writes(&self) -> impl Iterator<Item = &Instant> {
        self.completed_writes.values()
    }

    /// The completed write with this requested time.
    pub fn completed_write(&self, t: &InstantTime) -> Option<&Instant> {
        self.completed_writes.get(t)
    }

    /// True if files of instant `t` are committed (module doc).
    pub fn is_committed(&self, t: &InstantTime) -> bool {
        self.completed_writes.contains_key(t) || self.boundary.as_ref().is_some_and(|b| t < b)
    }

    /// The completion time of `t`, or `t` itself when unknown (table version 6, instants below
    /// the boundary that are in no timeline).
    pub fn effective_completion<'a>(&'a self, t: &'a InstantTime) -> &'a InstantTime {
        self.completed_writes
            .get(t)
            .and_then(|i| i.completion_time.as_ref())
            .unwrap_or(t)
    }

    /// True if a file of instant `t` is committed and inside `horizon`.
    pub fn is_visible(&self, t: &InstantTime, horizon: &Horizon) -> bool {
        self.is_committed(t) && within(t, self.effective_completion(t), horizon)
    }

    /// Every file group replaced by a completed replacecommit, ordered by partition and id.
    pub fn replacements(&self) -> &[Replacement] {
        &self.replacements
    }

    /// The `(partition, file_id)` pairs replaced by replacecommits inside `horizon`.
    pub fn replaced_within(&self, horizon: &Horizon) -> BTreeSet<(String, String)> {
        self.replacements
            .iter()
            .filter(|r| {
                within(
                    &r.instant,
                    r.completion_time.as_ref().unwrap_or(&r.instant),
                    horizon,
                )
            })
            .map(|r| (r.partition.clone(), r.file_id.clone()))
            .collect()
    }

    /// Operations of pending (requested or inflight) compactions, by instant.
    pub fn pending_compactions(&self) -> &[PendingCompactionOperation] {
        &self.pending_compactions
    }

    /// File groups in pending clustering plans, `(partition, file_id)` -> clustering instant.
    pub fn pending_clustering(&self) -> &BTreeMap<(String, String), InstantTime> {
        &self.pending_clustering
    }

    /// The pending compaction instants of each file group of `partition` (file id -> instants).
    pub fn pending_compaction_instants(
        &self,
        partition: &str,
    ) -> BTreeMap<String, BTreeSet<InstantTime>> {
        let mut out: BTreeMap<String, BTreeSet<InstantTime>> = BTreeMap::new();
        for op in self
            .pending_compactions
            .iter()
            .filter(|op| op.partition == partition)
        {
            out.entry(op.file_id.clone())
                .or_default()
                .insert(op.instant.clone());
        }
        out
    }

    /// True if `t` is the instant of a pending compaction.
    pub fn is_pending_compaction(&self, t: &InstantTime) -> bool {
        self.pending_compactions.iter().any(|op| &op.instant == t)
    }

    /// A state-independent summary used by refresh to find what changed: the completed instants
    /// (any action) of the history.
    pub(crate) fn completed_keys(history: &TimelineHistory) -> BTreeSet<(InstantTime, Action)> {
        history
            .instants()
            .filter(|h| h.instant.state == State::Completed)
            .map(|h| (h.instant.requested_time.clone(), h.instant.action))
            .collect()
    }
}

fn within(requested: &InstantTime, completion: &InstantTime, horizon: &Horizon) -> bool {
    match horizon {
        Horizon::Latest => true,
        Horizon::AsOf(x) => requested <= x,
        Horizon::CompletedBy(c) => completion <= c,
    }
}
