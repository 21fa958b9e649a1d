//! Reading the archived (LSM) timeline: every row of the data files in the current manifest.

use std::collections::{BTreeMap, BTreeSet};

use arbor_storage::{Storage, StorageError};
use bytes::Bytes;

use super::lsm_file::{read_lsm_file, LsmInstantRow};
use super::manifest::Snapshot;
use crate::active::InstantKey;
use crate::error::{Result, TimelineError};
use crate::instant::{Action, Instant, InstantTime, State};
use crate::layout::TableLayout;

/// One archived instant: completed, with its completion time, and the raw bytes Java keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedInstant {
    /// The instant (state `Completed`, completion time set, completed action).
    pub instant: Instant,
    /// The raw bytes of its completed file, when recorded.
    pub metadata: Option<Bytes>,
    /// The raw bytes of its plan (clean, compaction, replace), when recorded.
    pub plan: Option<Bytes>,
}

impl ArchivedInstant {
    /// Converts one data-file row; `path` names the file in errors. Rows without instant time,
    /// completion time or a known action are rejected ([`TimelineError::Archive`]).
    pub fn from_row(path: &str, row: LsmInstantRow) -> Result<Self> {
        let bad = |reason: String| TimelineError::Archive {
            path: path.to_string(),
            reason,
        };
        let time = row
            .instant_time
            .ok_or_else(|| bad("row without instantTime".into()))?;
        let requested_time =
            InstantTime::parse(&time).map_err(|e| bad(format!("row {time}: {e}")))?;
        let completion = row
            .completion_time
            .ok_or_else(|| bad(format!("row {time} without completionTime")))?;
        let completion_time =
            InstantTime::parse(&completion).map_err(|e| bad(format!("row {time}: {e}")))?;
        let action_name = row
            .action
            .ok_or_else(|| bad(format!("row {time} without action")))?;
        let action = Action::from_name(&action_name)
            .ok_or_else(|| bad(format!("row {time}: unknown action {action_name:?}")))?
            .completed_action();
        Ok(ArchivedInstant {
            instant: Instant {
                requested_time,
                completion_time: Some(completion_time),
                action,
                state: State::Completed,
            },
            metadata: row.metadata,
            plan: row.plan,
        })
    }

    /// The row this archived instant is stored as.
    pub fn to_row(&self) -> LsmInstantRow {
        LsmInstantRow {
            instant_time: Some(self.instant.requested_time.to_string()),
            completion_time: self.instant.completion_time.as_ref().map(|c| c.to_string()),
            action: Some(self.instant.action.name().to_string()),
            metadata: self.metadata.clone(),
            plan: self.plan.clone(),
            version: super::lsm_file::LSM_INSTANT_VERSION,
        }
    }
}

/// The archived timeline as of its current snapshot: the instants of every data file the
/// current manifest lists, ordered by requested time (then action).
///
/// Tables of layout 1 (no history directory) and tables never archived have an empty archived
/// timeline. A data file that is missing or unreadable fails the load with
/// [`TimelineError::Archive`] naming it. An instant stored twice (in two files) is kept once.
#[derive(Debug, Clone, Default)]
pub struct ArchivedTimeline {
    snapshot: Snapshot,
    instants: BTreeMap<InstantKey, ArchivedInstant>,
}

impl ArchivedTimeline {
    /// Loads the current snapshot of the table's archived timeline.
    pub async fn load(storage: &dyn Storage, layout: &TableLayout) -> Result<Self> {
        let Some(history_dir) = layout.history_dir.as_deref() else {
            return Ok(ArchivedTimeline::default());
        };
        let snapshot = Snapshot::load(storage, history_dir).await?;
        let mut tl = ArchivedTimeline {
            snapshot,
            instants: BTreeMap::new(),
        };
        let names: Vec<String> = tl
            .snapshot
            .manifest
            .file_names()
            .map(String::from)
            .collect();
        for name in names {
            for row in read_data_file(storage, history_dir, &name).await? {
                let path = format!("{history_dir}/{name}");
                let archived = ArchivedInstant::from_row(&path, row)?;
                let key = (
                    archived.instant.requested_time.clone(),
                    archived.instant.action,
                );
                tl.instants.entry(key).or_insert(archived);
            }
        }
        Ok(tl)
    }

    /// The current snapshot, reading only the data files that may hold one of the instants
    /// requested at `times` (a file's name carries its smallest and greatest instant time,
    /// [`super::LsmFileName`]; a file whose range holds none of `times` is not read, a name that
    /// does not parse is read). With the times of the active timeline this answers
    /// [`ArchivedTimeline::contains`] for every active instant as a full load does, at a cost
    /// that does not grow with the archive (the archiver's recovery needs no more).
    pub async fn load_covering(
        storage: &dyn Storage,
        layout: &TableLayout,
        times: &BTreeSet<InstantTime>,
    ) -> Result<Self> {
        let Some(history_dir) = layout.history_dir.as_deref() else {
            return Ok(ArchivedTimeline::default());
        };
        let snapshot = Snapshot::load(storage, history_dir).await?;
        let mut tl = ArchivedTimeline {
            snapshot,
            instants: BTreeMap::new(),
        };
        let names: Vec<String> = tl
            .snapshot
            .manifest
            .file_names()
            .filter(|name| covers(name, times))
            .map(String::from)
            .collect();
        for name in names {
            let path = format!("{history_dir}/{name}");
            for row in read_data_file(storage, history_dir, &name).await? {
                let archived = ArchivedInstant::from_row(&path, row)?;
                let key = (
                    archived.instant.requested_time.clone(),
                    archived.instant.action,
                );
                tl.instants.entry(key).or_insert(archived);
            }
        }
        Ok(tl)
    }

    /// The snapshot (manifest) this timeline was read from.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The archived instants ordered by requested time (then action).
    pub fn instants(&self) -> impl Iterator<Item = &ArchivedInstant> {
        self.instants.values()
    }

    /// The archived instant with this requested time and (completed) action.
    pub fn get(&self, time: &InstantTime, action: Action) -> Option<&ArchivedInstant> {
        self.instants
            .get(&(time.clone(), action.completed_action()))
    }

    /// True if the instant is archived.
    pub fn contains(&self, key: &InstantKey) -> bool {
        self.instants.contains_key(key)
    }

    /// Number of archived instants.
    pub fn len(&self) -> usize {
        self.instants.len()
    }

    /// True if nothing is archived.
    pub fn is_empty(&self) -> bool {
        self.instants.is_empty()
    }
}

/// True when the LSM data file `name` may hold an instant requested at one of `times`: its
/// name's range `[min, max]` holds one of them, or the name does not parse.
fn covers(name: &str, times: &BTreeSet<InstantTime>) -> bool {
    let Some(n) = super::LsmFileName::parse(name) else {
        return true;
    };
    match (
        InstantTime::parse(&n.min_instant),
        InstantTime::parse(&n.max_instant),
    ) {
        (Ok(min), Ok(max)) if min <= max => times.range(min..=max).next().is_some(),
        _ => true,
    }
}

/// Reads and decodes one data file of the history directory.
pub(crate) async fn read_data_file(
    storage: &dyn Storage,
    history_dir: &str,
    name: &str,
) -> Result<Vec<LsmInstantRow>> {
    let key = format!("{history_dir}/{name}");
    let bytes = match storage.get(&key).await {
        Ok((bytes, _)) => bytes,
        Err(StorageError::NotFound { .. }) => {
            return Err(TimelineError::Archive {
                path: key,
                reason: "listed in the current manifest but missing".into(),
            })
        }
        Err(e) => return Err(e.into()),
    };
    read_lsm_file(&key, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_covers_reads_only_files_whose_range_holds_a_time() {
        let t = |s: &str| InstantTime::parse(s).unwrap();
        let times: BTreeSet<InstantTime> = [t("20250101000005000"), t("20250101000009000")].into();
        assert!(covers(
            "20250101000001000_20250101000005000_0.parquet",
            &times
        ));
        assert!(covers(
            "20250101000006000_20250101000010000_1.parquet",
            &times
        ));
        assert!(!covers(
            "20250101000001000_20250101000004999_0.parquet",
            &times
        ));
        assert!(!covers(
            "20250101000006000_20250101000008000_0.parquet",
            &times
        ));
        assert!(covers("not-an-lsm-file", &times));
        assert!(!covers(
            "20250101000001000_20250101000002000_0.parquet",
            &BTreeSet::new()
        ));
    }

    #[test]
    fn test_from_row_maps_pending_action_names_to_completed() {
        let row = LsmInstantRow {
            instant_time: Some("20250101000000000".into()),
            completion_time: Some("20250101000001000".into()),
            action: Some("commit".into()),
            metadata: Some(Bytes::from_static(b"m")),
            plan: None,
            version: 1,
        };
        let a = ArchivedInstant::from_row("f", row.clone()).unwrap();
        assert_eq!(a.instant.action, Action::Commit);
        assert_eq!(a.instant.state, State::Completed);
        assert_eq!(a.to_row(), row);
    }

    #[test]
    fn test_from_row_without_completion_time_fails() {
        let row = LsmInstantRow {
            instant_time: Some("20250101000000000".into()),
            completion_time: None,
            action: Some("commit".into()),
            metadata: None,
            plan: None,
            version: 1,
        };
        let err = ArchivedInstant::from_row("h/f.parquet", row).unwrap_err();
        assert!(matches!(err, TimelineError::Archive { ref path, .. } if path == "h/f.parquet"));
    }
}
