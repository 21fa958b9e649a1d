//! [`FileSystemView`]: the file groups and slices of a table as of any instant.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_storage::Storage;
use arbor_timeline::archive::{InstantLocation, TimelineHistory};
use arbor_timeline::avro::{decode_instant, InstantContent};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::naming::LayoutVersion;
use arbor_timeline::{Action, Instant, InstantTime, TableConfig, TableLayout};
use dashmap::DashMap;
use futures::stream::{self, StreamExt, TryStreamExt};

use crate::error::Result;

mod retained;
pub(crate) mod writes;
use crate::listing::{validate_partition, ListedFile, PartitionListing, StorageListing};
use crate::naming::{file_id_hint, parse_data_file_name, BaseFile, DataFile, LogFile};
use crate::slice::{build_file_groups, FileGroup, FileSlice, LogAttachRule};
use crate::visibility::{Horizon, PendingCompactionOperation, Replacement, TimelineIndex};

/// How many partitions are listed concurrently.
const LISTING_CONCURRENCY: usize = 8;

/// What an incremental query over `(start, end]` (completion times) reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncrementalSlices {
    /// The completed `commit`/`deltacommit`/`replacecommit` instants whose completion time is in
    /// the range, ordered by completion time: a reader keeps the records whose commit time is
    /// one of their requested times.
    pub instants: Vec<Instant>,
    /// The latest slice, as of `end` by completion time, of every file group those instants
    /// wrote, excluding groups replaced by a replacecommit completed by `end`.
    pub file_slices: Vec<FileSlice>,
}

/// Which cached partitions a [`FileSystemView::refresh`] dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalidated {
    /// Nothing changed on the timeline.
    Nothing,
    /// These partitions will be listed again; every other cached listing is kept.
    Partitions(BTreeSet<String>),
    /// Every cached listing (and the partition list) was dropped.
    All,
}

/// The outcome of [`FileSystemView::refresh`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshOutcome {
    /// Instants (any action) completed since the previous load, by requested time.
    pub newly_completed: Vec<Instant>,
    /// What was invalidated.
    pub invalidated: Invalidated,
}

/// File groups and slices of a table, built from a [`PartitionListing`] and the timeline
/// (active and archived).
///
/// Guarantees of every query:
/// - only committed files are returned ([`crate::visibility`] states the rule);
/// - file groups replaced by a completed `replacecommit` inside the query's horizon are left
///   out of "latest slice" answers;
/// - log files attach to slices as [`crate::slice`] describes (by completion time for v8+, by
///   the name's base instant for v6);
/// - a slice of a pending compaction is merged with its predecessor in "latest slice" answers.
///
/// Caching: the partition list and each partition's file list are cached after the first
/// query (in a concurrent map, so queries may run in parallel); slices are computed from them
/// and the timeline snapshot on every query, except the latest slices of every partition, kept
/// after the first such query. [`FileSystemView::refresh`] reloads the timeline
/// and drops only the listings of partitions touched by instants completed since the previous
/// load.
#[derive(Debug)]
pub struct FileSystemView {
    storage: Arc<dyn Storage>,
    layout: TableLayout,
    listing: Arc<dyn PartitionListing>,
    history: TimelineHistory,
    index: TimelineIndex,
    completed: BTreeSet<(InstantTime, Action)>,
    partitions: tokio::sync::Mutex<Option<Arc<Vec<String>>>>,
    files: DashMap<String, Arc<Vec<ListedFile>>>,
    /// The latest slices of every partition (`Horizon::Latest`), computed once per timeline
    /// snapshot: the view answers from immutable listings, so the answer cannot change until
    /// [`FileSystemView::refresh`], which drops it.
    latest: tokio::sync::OnceCell<Arc<Vec<FileSlice>>>,
}

impl FileSystemView {
    /// Opens the view of main: reads `.hoodie/hoodie.properties`, loads the timeline, and lists
    /// directories through `storage` (rooted at the table base).
    pub async fn open(storage: Arc<dyn Storage>) -> Result<Self> {
        let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
        let listing = Arc::new(StorageListing::new(storage.clone()));
        Self::load(storage, layout, listing).await
    }

    /// Loads the timeline of `layout` (active, then archived) and prepares a view over
    /// `listing`. Nothing is listed yet.
    pub async fn load(
        storage: Arc<dyn Storage>,
        layout: TableLayout,
        listing: Arc<dyn PartitionListing>,
    ) -> Result<Self> {
        let history = TimelineHistory::load(storage.clone(), layout.clone()).await?;
        Self::from_history(storage, layout, history, listing).await
    }

    /// A view over `listing` answering from an already loaded timeline `history`. Use it when
    /// `listing` was itself derived from that timeline (the metadata table's FILES partition is
    /// read with the block-validity rule of one data timeline): view and listing then agree on
    /// which instants are complete, so a write completing in between can neither be missed by
    /// the listing yet counted as seen by the view, nor the other way round.
    pub async fn from_history(
        storage: Arc<dyn Storage>,
        layout: TableLayout,
        history: TimelineHistory,
        listing: Arc<dyn PartitionListing>,
    ) -> Result<Self> {
        let index = TimelineIndex::load(&history).await?;
        let completed = TimelineIndex::completed_keys(&history);
        Ok(FileSystemView {
            storage,
            layout,
            listing,
            history,
            index,
            completed,
            partitions: tokio::sync::Mutex::new(None),
            files: DashMap::new(),
            latest: tokio::sync::OnceCell::new(),
        })
    }

    /// A new view of the same table with this view's timeline snapshot, listing and a copy of
    /// the partition list and file lists cached so far, answering exactly as `self` does;
    /// unlike a shared `self`, the fork can be [`refresh`](Self::refresh)ed. A listing being
    /// filled while forking is not copied (the fork lists it again when asked).
    pub fn fork(&self) -> FileSystemView {
        let partitions = self
            .partitions
            .try_lock()
            .ok()
            .and_then(|guard| guard.clone());
        FileSystemView {
            storage: self.storage.clone(),
            layout: self.layout.clone(),
            listing: self.listing.clone(),
            history: self.history.clone(),
            index: self.index.clone(),
            completed: self.completed.clone(),
            partitions: tokio::sync::Mutex::new(partitions),
            files: self
                .files
                .iter()
                .map(|e| (e.key().clone(), e.value().clone()))
                .collect(),
            latest: tokio::sync::OnceCell::new(),
        }
    }

    /// The timeline snapshot the view answers from.
    pub fn history(&self) -> &TimelineHistory {
        &self.history
    }

    /// The timeline facts (committed rule, replacements, pending plans).
    pub fn index(&self) -> &TimelineIndex {
        &self.index
    }

    /// The layout of the timeline.
    pub fn layout(&self) -> &TableLayout {
        &self.layout
    }

    /// True if files of instant `t` are committed.
    pub fn is_committed(&self, t: &InstantTime) -> bool {
        self.index.is_committed(t)
    }

    /// Operations of pending compactions (each names a file group and its plan).
    pub fn pending_compaction_operations(&self) -> &[PendingCompactionOperation] {
        self.index.pending_compactions()
    }

    /// File groups in pending clustering plans: `(partition, file_id)` -> clustering instant.
    /// Writers must not route records to them.
    pub fn pending_clustering_file_groups(&self) -> &BTreeMap<(String, String), InstantTime> {
        self.index.pending_clustering()
    }

    /// Every file group replaced by a completed replacecommit.
    pub fn replaced_file_groups(&self) -> &[Replacement] {
        self.index.replacements()
    }

    /// Every partition path (cached after the first call).
    pub async fn partitions(&self) -> Result<Arc<Vec<String>>> {
        let mut guard = self.partitions.lock().await;
        if let Some(p) = guard.as_ref() {
            return Ok(p.clone());
        }
        let mut list = self.listing.list_partitions().await?;
        list.sort();
        list.dedup();
        let list = Arc::new(list);
        *guard = Some(list.clone());
        Ok(list)
    }

    /// The files of one partition as listed (cached after the first call).
    pub async fn partition_files(&self, partition: &str) -> Result<Arc<Vec<ListedFile>>> {
        validate_partition(partition)?;
        if let Some(files) = self.files.get(partition) {
            return Ok(files.clone());
        }
        let files = Arc::new(self.listing.list_files(partition).await?);
        self.files.insert(partition.to_string(), files.clone());
        Ok(files)
    }

    /// Every file group of `partition` with the committed files inside `horizon`, all slices,
    /// including groups replaced by a replacecommit and slices of pending compactions (without
    /// base file). Writers and table services use this; readers use
    /// [`FileSystemView::latest_file_slices`].
    pub async fn file_groups(&self, partition: &str, horizon: &Horizon) -> Result<Vec<FileGroup>> {
        self.file_groups_among(partition, horizon, None).await
    }

    /// [`FileSystemView::file_groups`] limited to the file ids in `only` (`None`: all): the
    /// names of other file groups are passed over without being parsed.
    async fn file_groups_among(
        &self,
        partition: &str,
        horizon: &Horizon,
        only: Option<&BTreeSet<String>>,
    ) -> Result<Vec<FileGroup>> {
        let listed = self.partition_files(partition).await?;
        let mut bases: Vec<BaseFile> = Vec::new();
        let mut logs: Vec<LogFile> = Vec::new();
        for f in listed.iter() {
            if let (Some(only), Some(id)) = (only, file_id_hint(&f.name)) {
                if !only.contains(id) {
                    continue;
                }
            }
            match parse_data_file_name(&f.name, f.size) {
                Ok(Some(DataFile::Base(b))) => {
                    if self.index.is_visible(&b.instant_time, horizon) {
                        bases.push(b);
                    }
                }
                // Change-data-capture files (`.cdc`) belong to no file slice: Java's view
                // filters them out too; they are read by CDC queries only.
                Ok(Some(DataFile::Log(l))) => {
                    if !l.cdc && self.log_visible(&l, horizon) {
                        logs.push(l);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(partition, file = %f.name, error = %e, "skipping a file that is not a data file");
                }
            }
        }
        let pending = self.pending_starts(partition, horizon);
        let rule = self.attach_rule();
        Ok(build_file_groups(
            partition,
            bases,
            logs,
            &pending,
            rule,
            |d| self.index.effective_completion(d).clone(),
        ))
    }

    /// Per file group, the latest slice of the committed files inside the horizon: everything
    /// when `as_of` is `None`, else the files of instants **requested** at or before `as_of`
    /// (hudi-rs 0.5.0's time travel), excluding groups replaced by a replacecommit inside the
    /// same horizon. `partition` limits the answer to one partition. Ordered by partition, then
    /// file id.
    ///
    /// Unlike hudi-rs 0.5.0, which lists log files of later deltacommits in an as-of slice and
    /// drops their blocks while reading, the view leaves out v8+ log files whose deltacommit
    /// was requested after `as_of`. Version 6 log files carry only their base instant, so their
    /// blocks must still be filtered by instant time when read.
    pub async fn latest_file_slices(
        &self,
        partition: Option<&str>,
        as_of: Option<&InstantTime>,
    ) -> Result<Vec<FileSlice>> {
        let horizon = as_of.map_or(Horizon::Latest, |t| Horizon::AsOf(t.clone()));
        self.latest_file_slices_within(partition, &horizon).await
    }

    /// [`FileSystemView::latest_file_slices`] for any [`Horizon`].
    pub async fn latest_file_slices_within(
        &self,
        partition: Option<&str>,
        horizon: &Horizon,
    ) -> Result<Vec<FileSlice>> {
        let partitions: Vec<String> = match partition {
            Some(p) => vec![p.to_string()],
            None if *horizon == Horizon::Latest => {
                let all = self
                    .latest
                    .get_or_try_init(|| async {
                        let partitions = self.partitions().await?.as_ref().clone();
                        Ok::<_, crate::FsViewError>(Arc::new(
                            self.latest_in(partitions, horizon, None).await?,
                        ))
                    })
                    .await?;
                return Ok(all.as_ref().clone());
            }
            None => self.partitions().await?.as_ref().clone(),
        };
        self.latest_in(partitions, horizon, None).await
    }

    /// The latest slices (as [`FileSystemView::latest_file_slices`] gives them) of just the
    /// file groups `groups` names (partition path -> file ids) as of `as_of` (`None`: the
    /// latest state); groups absent or replaced in that state are left out. Ordered by
    /// partition, then file id. Only the named groups' files are parsed and merged into
    /// slices, so the cost beyond the partitions' listings follows `groups`, not the table.
    pub async fn latest_file_slices_of(
        &self,
        groups: &BTreeMap<String, BTreeSet<String>>,
        as_of: Option<&InstantTime>,
    ) -> Result<Vec<FileSlice>> {
        let horizon = as_of.map_or(Horizon::Latest, |t| Horizon::AsOf(t.clone()));
        let replaced = self.index.replaced_within(&horizon);
        let mut out = Vec::new();
        // Each partition is listed on its own (a partition that does not exist lists
        // nothing), never the table's list of partitions: a listing that reads one partition
        // at a time then reads only these, in one pass when it can.
        let unlisted: Vec<&str> = groups
            .keys()
            .map(String::as_str)
            .filter(|p| validate_partition(p).is_ok() && self.files.get(*p).is_none())
            .collect();
        if unlisted.len() > 1 {
            if let Err(e) = self.listing.prefetch(&unlisted).await {
                tracing::debug!(error = %e, "reading listings ahead failed; listing one by one");
            }
        }
        for (p, ids) in groups {
            let pending = self.pending_starts(p, &horizon);
            for fg in self.file_groups_among(p, &horizon, Some(ids)).await? {
                if !ids.contains(&fg.file_id)
                    || replaced.contains(&(fg.partition.clone(), fg.file_id.clone()))
                {
                    continue;
                }
                let empty = BTreeSet::new();
                let pending_of = pending.get(&fg.file_id).unwrap_or(&empty);
                if let Some(slice) = fg.latest_merged_slice(pending_of) {
                    out.push(slice);
                }
            }
        }
        Ok(out)
    }

    async fn latest_in(
        &self,
        partitions: Vec<String>,
        horizon: &Horizon,
        only: Option<&BTreeSet<(String, String)>>,
    ) -> Result<Vec<FileSlice>> {
        let replaced = self.index.replaced_within(horizon);
        let per_partition: Vec<Vec<FileSlice>> = stream::iter(partitions)
            .map(|p| {
                let replaced = &replaced;
                async move {
                    let pending = self.pending_starts(&p, horizon);
                    let groups = self.file_groups(&p, horizon).await?;
                    let mut out = Vec::new();
                    for fg in groups {
                        let key = (fg.partition.clone(), fg.file_id.clone());
                        if replaced.contains(&key) || only.is_some_and(|o| !o.contains(&key)) {
                            continue;
                        }
                        let empty = BTreeSet::new();
                        let pending_of = pending.get(&fg.file_id).unwrap_or(&empty);
                        if let Some(slice) = fg.latest_merged_slice(pending_of) {
                            out.push(slice);
                        }
                    }
                    Ok::<_, crate::FsViewError>(out)
                }
            })
            .buffered(LISTING_CONCURRENCY)
            .try_collect()
            .await?;
        let mut out: Vec<FileSlice> = per_partition.into_iter().flatten().collect();
        out.sort_by(|a, b| (&a.partition, &a.file_id).cmp(&(&b.partition, &b.file_id)));
        Ok(out)
    }

    /// The completion-time bound a user's `t` may stand for: `t` itself when it is the
    /// completion time of a completed write (or of none), else the completion time of the
    /// completed write requested at `t` (table version 8 and later; version 6 has requested
    /// times only, so `t` is returned as it is). [`Self::completed_between`] does not apply
    /// it (bounds are completion times, as in Java Hudi); `arbor read --incremental` does, and
    /// says so.
    pub fn completion_bound<'a>(&'a self, t: &'a InstantTime) -> &'a InstantTime {
        let is_completion = self
            .index
            .completed_writes()
            .any(|i| self.index.effective_completion(&i.requested_time) == t);
        if is_completion {
            t
        } else {
            self.index.effective_completion(t)
        }
    }

    /// What an incremental query over completion times `(start, end]` reads (`None` bounds are
    /// open): the completed writes in the range and the latest slices (by completion time, as of
    /// `end`) of the file groups they wrote, found from their write stats. Write stats whose
    /// partition path fails [`validate_partition`] are ignored with a warning naming the instant.
    pub async fn completed_between(
        &self,
        start: Option<&InstantTime>,
        end: Option<&InstantTime>,
    ) -> Result<IncrementalSlices> {
        let mut instants: Vec<Instant> = self
            .index
            .completed_writes()
            .filter(|i| {
                let c = self.index.effective_completion(&i.requested_time);
                start.is_none_or(|s| c > s) && end.is_none_or(|e| c <= e)
            })
            .cloned()
            .collect();
        instants.sort_by(|a, b| {
            self.index
                .effective_completion(&a.requested_time)
                .cmp(self.index.effective_completion(&b.requested_time))
                .then_with(|| a.requested_time.cmp(&b.requested_time))
        });
        let mut touched: BTreeSet<(String, String)> = BTreeSet::new();
        for i in &instants {
            let Some(content) = self.read_completed(i).await? else {
                continue;
            };
            let stats: Vec<(String, Option<String>, Option<String>)> = match &content {
                InstantContent::Commit(m) => m
                    .write_stats()
                    .map(|(p, s)| (p.to_string(), s.file_id.clone(), s.path.clone()))
                    .collect(),
                InstantContent::ReplaceCommit(m) => m
                    .write_stats()
                    .map(|(p, s)| (p.to_string(), s.file_id.clone(), s.path.clone()))
                    .collect(),
                _ => Vec::new(),
            };
            for (partition, file_id, path) in stats {
                if let Err(e) = validate_partition(&partition) {
                    tracing::warn!(instant = %i, error = %e, "ignoring a write stat with an invalid partition path");
                    continue;
                }
                let file_id = file_id.filter(|f| !f.is_empty()).or_else(|| {
                    let name = path.as_deref()?.rsplit('/').next()?;
                    parse_data_file_name(name, 0)
                        .ok()
                        .flatten()
                        .map(|d| d.file_id().to_string())
                });
                if let Some(file_id) = file_id {
                    touched.insert((partition, file_id));
                }
            }
        }
        let partitions: Vec<String> = touched
            .iter()
            .map(|(p, _)| p.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let horizon = end.map_or(Horizon::Latest, |e| Horizon::CompletedBy(e.clone()));
        let file_slices = self.latest_in(partitions, &horizon, Some(&touched)).await?;
        Ok(IncrementalSlices {
            instants,
            file_slices,
        })
    }

    /// Reloads the timeline and invalidates the cached listings of exactly the partitions that
    /// instants completed since the previous load touched:
    /// - `commit`/`deltacommit`/`replacecommit`: the partitions of their write stats and, for
    ///   replacecommits, of `partitionToReplaceFileIds` (new partitions join the partition list);
    /// - `clean` and `rollback`: the partitions of their partition metadata (files deleted);
    /// - `savepoint`, `indexing`, `schemacommit`: none (they change no data file).
    ///
    /// Everything is invalidated when a completed instant disappeared from the history (a
    /// restore or a rollback of a completed instant), when a `restore` completed, when a new
    /// `clean` removed a partition (`isPartitionDeleted`), or when a new
    /// completed instant's content cannot attribute its changes to partitions (empty or
    /// unexpected content). Files of pending instants need no re-listing: they become visible
    /// only when their instant completes, and that completion names their partitions. A
    /// partition path that fails [`validate_partition`] is ignored with a warning naming the
    /// instant, so it never enters the cached partition list.
    pub async fn refresh(&mut self) -> Result<RefreshOutcome> {
        let history = TimelineHistory::load(self.storage.clone(), self.layout.clone()).await?;
        let index = TimelineIndex::load(&history).await?;
        let completed = TimelineIndex::completed_keys(&history);
        let vanished = self.completed.difference(&completed).next().is_some();
        let new_keys: Vec<(InstantTime, Action)> =
            completed.difference(&self.completed).cloned().collect();
        self.history = history;
        self.index = index;
        self.completed = completed;

        let mut newly_completed = Vec::new();
        let mut all = vanished;
        let mut touched: BTreeSet<String> = BTreeSet::new();
        for (t, action) in &new_keys {
            let Some(h) = self.history.get(t, *action) else {
                continue;
            };
            let instant = h.instant.clone();
            newly_completed.push(instant.clone());
            if all {
                continue;
            }
            let mut named: Vec<String> = Vec::new();
            match instant.action {
                Action::Savepoint | Action::Indexing | Action::SchemaCommit => {}
                Action::Restore => all = true,
                _ => match self.read_completed(&instant).await? {
                    Some(InstantContent::Commit(m)) => {
                        named.extend(m.partitions().map(str::to_string));
                    }
                    Some(InstantContent::ReplaceCommit(m)) => {
                        named.extend(m.partitions().map(str::to_string));
                        named.extend(m.replaced_file_ids().map(|(p, _)| p.to_string()));
                    }
                    // A clean that removed a deleted partition shrinks the partition list:
                    // everything is re-listed (rare: only such cleans).
                    Some(InstantContent::Clean(m))
                        if m.partition_metadata
                            .values()
                            .any(|p| p.is_partition_deleted == Some(true)) =>
                    {
                        all = true
                    }
                    Some(InstantContent::Clean(m)) => {
                        named.extend(m.partition_metadata.keys().cloned());
                    }
                    Some(InstantContent::Rollback(m)) => {
                        named.extend(m.partition_metadata.keys().cloned());
                    }
                    _ => all = true,
                },
            }
            // A foreign instant naming an invalid partition must not poison the cached
            // partition list (every later query would fail on it).
            for p in named {
                match validate_partition(&p) {
                    Ok(()) => {
                        touched.insert(p);
                    }
                    Err(e) => {
                        tracing::warn!(instant = %instant, error = %e, "ignoring an invalid partition path named by a completed instant");
                    }
                }
            }
        }

        self.latest = tokio::sync::OnceCell::new();
        let invalidated = if all {
            self.files.clear();
            *self.partitions.get_mut() = None;
            Invalidated::All
        } else if touched.is_empty() {
            Invalidated::Nothing
        } else {
            for p in &touched {
                self.files.remove(p);
            }
            if let Some(list) = self.partitions.get_mut().as_mut() {
                if touched.iter().any(|p| list.binary_search(p).is_err()) {
                    let mut merged: Vec<String> = list.iter().cloned().collect();
                    merged.extend(touched.iter().cloned());
                    merged.sort();
                    merged.dedup();
                    *list = Arc::new(merged);
                }
            }
            Invalidated::Partitions(touched)
        };
        Ok(RefreshOutcome {
            newly_completed,
            invalidated,
        })
    }

    /// Decodes a completed instant's content (active file or archived row); `None` for a
    /// 0-byte file.
    async fn read_completed(&self, instant: &Instant) -> Result<Option<InstantContent>> {
        let bytes = self
            .history
            .read_completed_content(&instant.requested_time, instant.action)
            .await?;
        let key = match self
            .history
            .location(&instant.requested_time, instant.action)
        {
            Some(InstantLocation::Archived) => format!(
                "{}#{}",
                self.layout.history_dir.as_deref().unwrap_or_default(),
                instant
            ),
            _ => self.layout.instant_key(instant)?,
        };
        let legacy = self.layout.layout == LayoutVersion::V1 || instant.completion_time.is_none();
        let content = decode_instant(instant, &bytes, &key, legacy)?;
        Ok((!content.is_empty()).then_some(content))
    }

    fn attach_rule(&self) -> LogAttachRule {
        match self.index.layout() {
            LayoutVersion::V1 => LogAttachRule::BaseInstantInName,
            LayoutVersion::V2 => LogAttachRule::CompletionTime,
        }
    }

    /// A v6 log file named with a pending compaction's instant holds committed deltacommit
    /// blocks (appended after the compaction was scheduled), so it is visible although its
    /// name's instant is not completed.
    fn log_visible(&self, log: &LogFile, horizon: &Horizon) -> bool {
        let t = &log.delta_commit_time;
        if self.index.is_visible(t, horizon) {
            return true;
        }
        self.index.layout() == LayoutVersion::V1
            && self.index.is_pending_compaction(t)
            && pending_within(t, horizon)
    }

    fn pending_starts(
        &self,
        partition: &str,
        horizon: &Horizon,
    ) -> BTreeMap<String, BTreeSet<InstantTime>> {
        let mut starts = self.index.pending_compaction_instants(partition);
        for set in starts.values_mut() {
            set.retain(|t| pending_within(t, horizon));
        }
        starts.retain(|_, s| !s.is_empty());
        starts
    }
}

/// A pending instant has no completion time: it is inside a horizon when its requested time is.
fn pending_within(t: &InstantTime, horizon: &Horizon) -> bool {
    match horizon {
        Horizon::Latest => true,
        Horizon::AsOf(x) | Horizon::CompletedBy(x) => t <= x,
    }
}
