//! The whole history of a table: the active timeline and the archived timeline, loaded together.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_storage::{Storage, StorageError};
use bytes::Bytes;

use super::reader::{ArchivedInstant, ArchivedTimeline};
use crate::active::{ActiveTimeline, InstantKey};
use crate::error::{Result, TimelineError};
use crate::instant::{Action, Instant, InstantTime};
use crate::layout::TableLayout;

/// Where an instant of the history lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstantLocation {
    /// In the active timeline directory (it may also be archived already, when an archival was
    /// interrupted before deleting its active files).
    Active,
    /// Only in the archived (LSM) timeline.
    Archived,
}

/// One instant of the history, in its most advanced state, with where it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryInstant {
    /// The instant.
    pub instant: Instant,
    /// Where it lives.
    pub location: InstantLocation,
}

/// Active plus archived timeline, with every instant exactly once.
///
/// Loading reads the active timeline first and the archived timeline second: an archiver
/// publishes instants in the archive before deleting their active files, so an instant being
/// archived concurrently is seen on at least one side. An instant present on both sides (an
/// interrupted archival) is reported once, from the active side.
#[derive(Debug, Clone)]
pub struct TimelineHistory {
    active: ActiveTimeline,
    archived: ArchivedTimeline,
    merged: BTreeMap<InstantKey, HistoryInstant>,
}

impl TimelineHistory {
    /// Loads the active timeline, then the archived one.
    pub async fn load(storage: Arc<dyn Storage>, layout: TableLayout) -> Result<Self> {
        let active = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
        let archived = ArchivedTimeline::load(storage.as_ref(), &layout).await?;
        Ok(Self::from_parts(active, archived))
    }

    /// Merges an already loaded active and archived timeline (the active one should have been
    /// loaded first).
    pub fn from_parts(active: ActiveTimeline, archived: ArchivedTimeline) -> Self {
        let mut merged = BTreeMap::new();
        for a in archived.instants() {
            merged.insert(
                (a.instant.requested_time.clone(), a.instant.action),
                HistoryInstant {
                    instant: a.instant.clone(),
                    location: InstantLocation::Archived,
                },
            );
        }
        for (key, files) in active.instant_files() {
            if let Some(latest) = files.latest() {
                merged.insert(
                    key.clone(),
                    HistoryInstant {
                        instant: latest.clone(),
                        location: InstantLocation::Active,
                    },
                );
            }
        }
        TimelineHistory {
            active,
            archived,
            merged,
        }
    }

    /// The active side.
    pub fn active(&self) -> &ActiveTimeline {
        &self.active
    }

    /// The archived side.
    pub fn archived(&self) -> &ArchivedTimeline {
        &self.archived
    }

    /// Every instant, once, in its most advanced state, ordered by requested time (then action).
    pub fn instants(&self) -> impl Iterator<Item = &HistoryInstant> {
        self.merged.values()
    }

    /// The instant with this requested time and (completed) action.
    pub fn get(&self, time: &InstantTime, action: Action) -> Option<&HistoryInstant> {
        self.merged.get(&(time.clone(), action.completed_action()))
    }

    /// Every instant with this requested time (a savepoint shares its commit's time).
    pub fn at_time(&self, time: &InstantTime) -> Vec<&HistoryInstant> {
        self.merged
            .range((time.clone(), Action::Commit)..)
            .take_while(|((t, _), _)| t == time)
            .map(|(_, h)| h)
            .collect()
    }

    /// Completed instants of both sides, ordered by requested time (then action).
    pub fn completed(&self) -> Vec<Instant> {
        self.merged
            .values()
            .filter(|h| h.instant.is_completed())
            .map(|h| h.instant.clone())
            .collect()
    }

    /// Completed `commit`, `deltacommit` and `replacecommit` instants of both sides, ordered by
    /// requested time.
    pub fn completed_writes(&self) -> Vec<Instant> {
        self.completed()
            .into_iter()
            .filter(|i| i.action.is_write())
            .collect()
    }

    /// The content of a completed instant: its active completed file or, for an archived
    /// instant, the `metadata` bytes of its archived row (empty when the row has none).
    ///
    /// Fails with [`TimelineError::InstantNotFound`] if no completed instant has this time and
    /// action.
    pub async fn read_completed_content(
        &self,
        time: &InstantTime,
        action: Action,
    ) -> Result<Bytes> {
        let not_found = || TimelineError::InstantNotFound {
            instant: format!("{time}.{}", action.completed_action()),
        };
        let entry = self.get(time, action).ok_or_else(not_found)?;
        if !entry.instant.is_completed() {
            return Err(not_found());
        }
        let archived = self.archived.get(time, action);
        match entry.location {
            InstantLocation::Active => match self.active.read(&entry.instant).await {
                Ok(bytes) => Ok(bytes),
                // Archived and deleted since the active side was listed.
                Err(TimelineError::Storage(StorageError::NotFound { .. }))
                    if archived.is_some() =>
                {
                    Ok(archived_content(archived))
                }
                Err(e) => Err(e),
            },
            InstantLocation::Archived => Ok(archived_content(archived)),
        }
    }

    /// Where the instant with this time and action lives.
    pub fn location(&self, time: &InstantTime, action: Action) -> Option<InstantLocation> {
        self.get(time, action).map(|h| h.location)
    }
}

fn archived_content(archived: Option<&ArchivedInstant>) -> Bytes {
    archived
        .and_then(|a| a.metadata.clone())
        .unwrap_or_default()
}
