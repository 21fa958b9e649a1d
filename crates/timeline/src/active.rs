//! The active timeline: the instant files in the timeline directory.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_storage::{Storage, StorageError};
use bytes::Bytes;

use crate::error::{Result, TimelineError};
use crate::generator::InstantTimeGenerator;
use crate::instant::{Action, Instant, InstantTime, State};
use crate::layout::TableLayout;
use crate::naming::{parse_instant_file_name, LayoutVersion};

/// The key that identifies one logical instant: its requested time and the action it completes
/// as (so `T.compaction.requested` and `T_C.commit` are one instant, and a savepoint at the same
/// time as the commit it protects is another).
pub type InstantKey = (InstantTime, Action);

/// One logical instant with every state file present for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstantFiles {
    /// The action while pending (e.g. `Compaction`); equals `completed_action` for plain writes.
    pub pending_action: Action,
    /// The `.requested` file, if present.
    pub requested: Option<Instant>,
    /// The `.inflight` file, if present.
    pub inflight: Option<Instant>,
    /// The completed file, if present.
    pub completed: Option<Instant>,
}

impl InstantFiles {
    /// The instant in its most advanced state present.
    pub fn latest(&self) -> Option<&Instant> {
        self.completed
            .as_ref()
            .or(self.inflight.as_ref())
            .or(self.requested.as_ref())
    }
}

/// A loaded active timeline.
///
/// Loading lists the timeline directory once; the value is a snapshot. Names that are not
/// instant files (`*.crc`, sub-directories such as `history/`, stray files) are skipped and
/// reported by [`ActiveTimeline::skipped`]. Mutating methods write through the storage and update
/// the snapshot; they never delete anything.
///
/// The steps that must see the directory as it is now ([`next_instant_time`],
/// [`create_requested`] and the check before [`complete`]) list it again, except that the step
/// right after a listing made for it uses that listing: the listing of `next_instant_time` (for
/// the `create_requested` or `complete` that follows) and that of [`load_for_next_step`] (for
/// the first step; when that is `next_instant_time`, its own follower uses the listing too).
/// Such a listing was taken for this very step sequence (inside the same lock, when the caller
/// holds one), and a concurrent writer could as well land right after a second listing
/// (create-if-absent and the commit point decide).
///
/// [`load_for_next_step`]: ActiveTimeline::load_for_next_step
/// [`create_requested`]: ActiveTimeline::create_requested
/// [`next_instant_time`]: ActiveTimeline::next_instant_time
/// [`complete`]: ActiveTimeline::complete
#[derive(Debug, Clone)]
pub struct ActiveTimeline {
    storage: Arc<dyn Storage>,
    layout: TableLayout,
    instants: BTreeMap<InstantKey, InstantFiles>,
    skipped: Vec<String>,
    /// True from a listing made for the next step (`next_instant_time`'s,
    /// `load_for_next_step`'s) until that step, which uses it.
    fresh: bool,
}

/// Non-instant files that may sit in a layout-1 meta directory.
const V1_NON_INSTANT: &[&str] = &["hoodie.properties", "hoodie.properties.backup"];

impl ActiveTimeline {
    /// Lists the timeline directory and parses every instant file name.
    pub async fn load(storage: Arc<dyn Storage>, layout: TableLayout) -> Result<Self> {
        let (keys, _dirs) = storage.list_dir_keys(&layout.timeline_dir).await?;
        let mut tl = ActiveTimeline {
            storage,
            layout,
            instants: BTreeMap::new(),
            skipped: Vec::new(),
            fresh: false,
        };
        for key in keys {
            let name = key.rsplit('/').next().unwrap_or(&key).to_string();
            if name.ends_with(".crc") || V1_NON_INSTANT.contains(&name.as_str()) {
                continue;
            }
            match parse_instant_file_name(&name, tl.layout.layout) {
                Ok(instant) => tl.insert(instant),
                Err(e) => {
                    tracing::debug!(file = %key, error = %e, "skipping non-instant file");
                    tl.skipped.push(name);
                }
            }
        }
        Ok(tl)
    }

    /// [`load`](Self::load) for a step that follows at once, in the same critical section: the
    /// first of `next_instant_time`, `create_requested` or the check before `complete` uses this
    /// listing instead of its own (see the type's documentation). Not for a timeline kept across
    /// other work: use `load` there.
    pub async fn load_for_next_step(
        storage: Arc<dyn Storage>,
        layout: TableLayout,
    ) -> Result<Self> {
        let mut tl = Self::load(storage, layout).await?;
        tl.fresh = true;
        Ok(tl)
    }

    fn insert(&mut self, instant: Instant) {
        let key = (
            instant.requested_time.clone(),
            instant.action.completed_action(),
        );
        let entry = self.instants.entry(key).or_insert_with(|| InstantFiles {
            pending_action: instant.action,
            requested: None,
            inflight: None,
            completed: None,
        });
        match instant.state {
            State::Requested => {
                entry.pending_action = instant.action;
                entry.requested = Some(instant);
            }
            State::Inflight => {
                entry.pending_action = instant.action;
                entry.inflight = Some(instant);
            }
            State::Completed => {
                // Two completed files for one instant can only come from a lost completion race
                // (see `complete`); the smallest completion time wins, as `complete` decides.
                let keep_existing = entry
                    .completed
                    .as_ref()
                    .is_some_and(|c| c.completion_time <= instant.completion_time);
                if !keep_existing {
                    entry.completed = Some(instant);
                }
            }
        }
    }

    /// The storage this timeline reads and writes.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The layout (directories) of this timeline.
    pub fn layout(&self) -> &TableLayout {
        &self.layout
    }

    /// File names in the timeline directory that are not instant files.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }

    /// Every logical instant with its state files, ordered by requested time.
    pub fn instant_files(&self) -> impl Iterator<Item = (&InstantKey, &InstantFiles)> {
        self.instants.iter()
    }

    /// Every logical instant in its most advanced state, ordered by requested time.
    pub fn instants(&self) -> Vec<Instant> {
        self.instants
            .values()
            .filter_map(|f| f.latest().cloned())
            .collect()
    }

    /// Completed instants ordered by requested time.
    pub fn completed(&self) -> Vec<Instant> {
        self.instants
            .values()
            .filter_map(|f| f.completed.clone())
            .collect()
    }

    /// Completed instants ordered by completion time (requested time where a layout-1 instant has
    /// none; ties broken by requested time).
    pub fn completed_by_completion_time(&self) -> Vec<Instant> {
        let mut v = self.completed();
        v.sort_by(|a, b| {
            let ka = a.completion_time.as_ref().unwrap_or(&a.requested_time);
            let kb = b.completion_time.as_ref().unwrap_or(&b.requested_time);
            ka.cmp(kb)
                .then_with(|| a.requested_time.cmp(&b.requested_time))
        });
        v
    }

    /// Pending (requested or inflight, not completed) instants ordered by requested time.
    pub fn pending(&self) -> Vec<Instant> {
        self.instants
            .values()
            .filter(|f| f.completed.is_none())
            .filter_map(|f| f.latest().cloned())
            .collect()
    }

    /// Instants (in their latest state) whose action is in `actions` and state in `states`.
    pub fn filter(&self, actions: &[Action], states: &[State]) -> Vec<Instant> {
        self.instants()
            .into_iter()
            .filter(|i| actions.contains(&i.action) && states.contains(&i.state))
            .collect()
    }

    /// Completed `commit`, `deltacommit` and `replacecommit` instants, by requested time: the
    /// instants whose files readers see.
    pub fn completed_writes(&self) -> Vec<Instant> {
        self.completed()
            .into_iter()
            .filter(|i| i.action.is_write())
            .collect()
    }

    /// True if any instant file with this requested time exists.
    pub fn contains_time(&self, time: &InstantTime) -> bool {
        self.instants.keys().any(|(t, _)| t == time)
    }

    /// The greatest requested or completion time on this timeline.
    pub fn max_time(&self) -> Option<InstantTime> {
        self.instants
            .values()
            .flat_map(|f| [&f.requested, &f.inflight, &f.completed])
            .flatten()
            .flat_map(|i| [Some(&i.requested_time), i.completion_time.as_ref()])
            .flatten()
            .max()
            .cloned()
    }

    /// The state files of one logical instant.
    pub fn get(&self, time: &InstantTime, completed_action: Action) -> Option<&InstantFiles> {
        self.instants
            .get(&(time.clone(), completed_action.completed_action()))
    }

    /// Reads the content of one instant file.
    pub async fn read(&self, instant: &Instant) -> Result<Bytes> {
        let key = self.layout.instant_key(instant)?;
        Ok(self.storage.get(&key).await?.0)
    }

    /// Key of an instant file.
    pub fn key_of(&self, instant: &Instant) -> Result<String> {
        self.layout.instant_key(instant)
    }

    fn ensure_writable(&self) -> Result<()> {
        if self.layout.layout != LayoutVersion::V2 {
            return Err(TimelineError::InvalidTransition {
                instant: self.layout.timeline_dir.clone(),
                reason: "arbor writes only timeline layout 2 (table versions 8 and 9)".into(),
            });
        }
        Ok(())
    }

    /// Starts a new instant: creates `<time>.<action>.requested` with `content` (may be empty)
    /// using create-if-absent.
    ///
    /// The timeline directory is listed again first, and the call fails with
    /// `DuplicateInstant` if any instant file with this time exists (an instant time is never
    /// reused, whatever the action) or if the create loses a race. A create whose outcome is
    /// unknown (it may have landed) is reported as a failure: the instant is then never used,
    /// and a leftover requested file is harmless (the next writer rolls it back).
    pub async fn create_requested(
        &mut self,
        time: InstantTime,
        action: Action,
        content: Bytes,
    ) -> Result<Instant> {
        self.ensure_writable()?;
        self.list_unless_fresh().await?;
        if self.contains_time(&time) {
            return Err(TimelineError::DuplicateInstant {
                instant: time.to_string(),
            });
        }
        let instant = Instant::requested(time, action);
        let key = self.layout.instant_key(&instant)?;
        match self.storage.put_if_absent(&key, content).await {
            Ok(_) => {}
            Err(StorageError::AlreadyExists { .. }) => {
                return Err(TimelineError::DuplicateInstant {
                    instant: instant.requested_time.to_string(),
                })
            }
            Err(e) => return Err(e.into()),
        }
        self.insert(instant.clone());
        Ok(instant)
    }

    /// A fresh instant time for a new instant on this timeline: lists the timeline directory and
    /// asks `generator` for a time after every requested and completion time on it (and after
    /// everything the generator issued before). Pass it to [`ActiveTimeline::create_requested`].
    pub async fn next_instant_time(
        &mut self,
        generator: &InstantTimeGenerator,
    ) -> Result<InstantTime> {
        self.list_unless_fresh().await?;
        self.fresh = true;
        if let Some(max) = self.max_time() {
            generator.observe(&max);
        }
        generator.next_shared().await
    }

    /// Moves a requested instant to inflight by creating its `.inflight` file (create-if-absent).
    /// A savepoint, which has no requested state, may start here directly from a `Requested`
    /// value that was never written.
    pub async fn transition_to_inflight(
        &mut self,
        requested: &Instant,
        content: Bytes,
    ) -> Result<Instant> {
        self.ensure_writable()?;
        self.fresh = false;
        let files = self.get(&requested.requested_time, requested.action);
        let ok = match files {
            Some(f) => f.requested.is_some() && f.inflight.is_none() && f.completed.is_none(),
            None => requested.action == Action::Savepoint,
        };
        if !ok || requested.state != State::Requested {
            return Err(TimelineError::InvalidTransition {
                instant: requested.to_string(),
                reason: "only a requested instant (not yet inflight) can become inflight".into(),
            });
        }
        let inflight = requested.with_state(State::Inflight);
        let key = self.layout.instant_key(&inflight)?;
        match self.storage.put_if_absent(&key, content).await {
            Ok(_) => {}
            Err(StorageError::AlreadyExists { path }) => {
                return Err(TimelineError::InvalidTransition {
                    instant: requested.to_string(),
                    reason: format!("{path} already exists"),
                })
            }
            Err(e) => return Err(e.into()),
        }
        self.insert(inflight.clone());
        Ok(inflight)
    }

    /// Completes an inflight instant: creates `<time>_<completion>.<completed action>` with
    /// create-if-absent. That creation is the commit point. Fails with `AlreadyCompleted` when a
    /// completed file for the instant exists (found by listing or by the create losing), and with
    /// `InvalidTransition` when the instant is not inflight or `completion_time` is not after its
    /// requested time.
    pub async fn complete(
        &mut self,
        inflight: &Instant,
        completion_time: InstantTime,
        content: Bytes,
    ) -> Result<Instant> {
        self.ensure_writable()?;
        let mut completed = inflight.with_state(State::Completed);
        completed.action = inflight.action.completed_action();
        completed.completion_time = Some(completion_time.clone());
        // Refresh this instant's files from storage so that a completion by another handle is
        // seen (the listing is of the timeline directory, which stays small).
        self.list_unless_fresh().await?;
        if let Some(done) = self
            .get(&inflight.requested_time, inflight.action)
            .and_then(|f| f.completed.clone())
        {
            return Err(TimelineError::AlreadyCompleted {
                instant: inflight.requested_time.to_string(),
                path: self.layout.instant_key(&done)?,
            });
        }
        let is_inflight = self
            .get(&inflight.requested_time, inflight.action)
            .is_some_and(|f| f.inflight.is_some());
        if inflight.state != State::Inflight || !is_inflight {
            return Err(TimelineError::InvalidTransition {
                instant: inflight.to_string(),
                reason: "only an inflight instant can be completed".into(),
            });
        }
        if completion_time <= inflight.requested_time {
            return Err(TimelineError::InvalidTransition {
                instant: inflight.to_string(),
                reason: format!("completion time {completion_time} is not after the instant time"),
            });
        }
        let key = self.layout.instant_key(&completed)?;
        // The commit point of a locked step's own timeline is conditional (`commit_point`): it
        // fails, leaving nothing visible, when another writer committed since the step began.
        let pending = self.layout.instant_key(inflight)?;
        let gated =
            crate::commit_point::pass_for(&self.storage, &key, Some(&pending), &content).await?;
        match self.storage.put_if_absent(&key, content.clone()).await {
            Ok(_) => {}
            Err(e) => {
                // The outcome may be ambiguous: a retried PUT whose first attempt landed reports
                // AlreadyExists, a timeout may hide a success. Read back before deciding: a
                // completion that is visible must never be reported as failed (the caller would
                // roll back committed data).
                let landed = match self.storage.get(&key).await {
                    Ok((bytes, _)) => bytes == content,
                    Err(_) => false,
                };
                if !landed {
                    return Err(match e {
                        StorageError::AlreadyExists { path } => TimelineError::AlreadyCompleted {
                            instant: inflight.requested_time.to_string(),
                            path,
                        },
                        other => other.into(),
                    });
                }
                tracing::debug!(file = %key, "completion confirmed by reading back");
            }
        }
        if gated {
            crate::commit_point::created().await;
        }
        // Two completers with different completion times create different files; both creates
        // succeed. Resolve deterministically: the smallest completion time wins, the loser
        // removes its own file and reports AlreadyCompleted.
        // Past the commit point, a failure to re-list must not turn a visible commit into a
        // reported failure (a caller would retry and duplicate the write): the race check is
        // skipped, and readers still resolve duplicates by the smallest completion time.
        let after = match ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await {
            Ok(after) => after,
            Err(e) => {
                tracing::warn!(file = %key, error = %e, "completed; could not re-list to check for a completion race");
                self.insert(completed.clone());
                return Ok(completed);
            }
        };
        if let Some(winner) = after
            .get(&inflight.requested_time, inflight.action)
            .and_then(|f| f.completed.clone())
        {
            if winner.completion_time != completed.completion_time {
                let winner_key = self.layout.instant_key(&winner)?;
                self.storage
                    .delete_batch(std::slice::from_ref(&key))
                    .await?
                    .pop()
                    .unwrap_or(Ok(()))?;
                *self = after;
                return Err(TimelineError::AlreadyCompleted {
                    instant: inflight.requested_time.to_string(),
                    path: winner_key,
                });
            }
        }
        self.insert(completed.clone());
        Ok(completed)
    }

    /// Re-lists the timeline directory.
    pub async fn reload(&mut self) -> Result<()> {
        *self = ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
        Ok(())
    }

    /// Re-lists the timeline directory unless the latest listing was made for this step (see the
    /// type's documentation); either way the step after lists again (`next_instant_time` then
    /// marks its listing for its follower).
    async fn list_unless_fresh(&mut self) -> Result<()> {
        if !self.fresh {
            self.reload().await?;
        }
        self.fresh = false;
        Ok(())
    }
}
