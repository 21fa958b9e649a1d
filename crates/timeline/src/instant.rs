//! Instants: the requested time, completion time, action and state of one timeline entry.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};

use crate::error::{Result, TimelineError};

/// The `yyyyMMddHHmmssSSS` format of 17-digit instant times.
pub const INSTANT_FORMAT_MS: &str = "%Y%m%d%H%M%S%3f";

/// A validated instant time: 17 digits `yyyyMMddHHmmssSSS` (or legacy 14 digits
/// `yyyyMMddHHmmss`), or one of Hudi's reserved all-zero-prefixed times (`00000000000000`,
/// `00000000000000001`, ...). Orders like Hudi: by the string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstantTime(String);

impl InstantTime {
    /// Parses and validates an instant time.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = |reason: &str| TimelineError::InvalidInstantTime {
            value: s.to_string(),
            reason: reason.to_string(),
        };
        if !(s.len() == 17 || s.len() == 14) {
            return Err(bad("expected 17 digits (yyyyMMddHHmmssSSS) or 14 digits"));
        }
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("only digits are allowed"));
        }
        // Reserved special instants (INIT, bootstrap, MDT initialisation) start with zeros.
        if s.starts_with("00000000000000") {
            return Ok(InstantTime(s.to_string()));
        }
        let (secs, ms) = s.split_at(14);
        NaiveDateTime::parse_from_str(secs, "%Y%m%d%H%M%S")
            .map_err(|e| bad(&format!("not a timestamp: {e}")))?;
        if !ms.is_empty() && ms.len() != 3 {
            return Err(bad("milliseconds must be 3 digits"));
        }
        Ok(InstantTime(s.to_string()))
    }

    /// The instant time of a UTC timestamp, at millisecond precision.
    pub fn from_datetime(t: DateTime<Utc>) -> Self {
        InstantTime(t.format(INSTANT_FORMAT_MS).to_string())
    }

    /// The timestamp this instant time denotes, read as UTC; `None` for reserved times.
    pub fn to_datetime(&self) -> Option<DateTime<Utc>> {
        if self.0.starts_with("00000000000000") {
            return None;
        }
        let (secs, ms) = self.0.split_at(14);
        let base = NaiveDateTime::parse_from_str(secs, "%Y%m%d%H%M%S").ok()?;
        let ms: i64 = if ms.is_empty() { 0 } else { ms.parse().ok()? };
        Some(Utc.from_utc_datetime(&base) + chrono::Duration::milliseconds(ms))
    }

    /// The text of the instant time.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InstantTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for InstantTime {
    type Err = TimelineError;
    fn from_str(s: &str) -> Result<Self> {
        InstantTime::parse(s)
    }
}

/// A timeline action. Clustering and compaction are distinct actions while pending and complete
/// as `replacecommit` and `commit` respectively (log compaction as `deltacommit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// A copy-on-write write (`commit`).
    Commit,
    /// A merge-on-read write (`deltacommit`).
    DeltaCommit,
    /// Insert overwrite, delete partition, TTL, and completed clustering (`replacecommit`).
    ReplaceCommit,
    /// Pending clustering (`clustering`).
    Clustering,
    /// Pending compaction (`compaction`).
    Compaction,
    /// Pending log compaction (`logcompaction`).
    LogCompaction,
    /// Cleaning (`clean`).
    Clean,
    /// Rollback of a failed or unwanted instant (`rollback`).
    Rollback,
    /// Restore to a savepoint (`restore`).
    Restore,
    /// Savepoint (`savepoint`).
    Savepoint,
    /// Asynchronous index build (`indexing`).
    Indexing,
    /// Schema change (`schemacommit`).
    SchemaCommit,
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 12] = [
        Action::Commit,
        Action::DeltaCommit,
        Action::ReplaceCommit,
        Action::Clustering,
        Action::Compaction,
        Action::LogCompaction,
        Action::Clean,
        Action::Rollback,
        Action::Restore,
        Action::Savepoint,
        Action::Indexing,
        Action::SchemaCommit,
    ];

    /// The action's name as it appears in file names.
    pub fn name(self) -> &'static str {
        match self {
            Action::Commit => "commit",
            Action::DeltaCommit => "deltacommit",
            Action::ReplaceCommit => "replacecommit",
            Action::Clustering => "clustering",
            Action::Compaction => "compaction",
            Action::LogCompaction => "logcompaction",
            Action::Clean => "clean",
            Action::Rollback => "rollback",
            Action::Restore => "restore",
            Action::Savepoint => "savepoint",
            Action::Indexing => "indexing",
            Action::SchemaCommit => "schemacommit",
        }
    }

    /// The action from its file-name form.
    pub fn from_name(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The action a completed instant of this action carries: clustering completes as
    /// `replacecommit`, compaction as `commit`, log compaction as `deltacommit`.
    pub fn completed_action(self) -> Action {
        match self {
            Action::Clustering => Action::ReplaceCommit,
            Action::Compaction => Action::Commit,
            Action::LogCompaction => Action::DeltaCommit,
            other => other,
        }
    }

    /// True for the actions whose completed instants add data files readers see
    /// (`commit`, `deltacommit`, `replacecommit`).
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Action::Commit | Action::DeltaCommit | Action::ReplaceCommit
        )
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The state of an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    /// Planned: the `.requested` file exists.
    Requested,
    /// Running: the `.inflight` file exists.
    Inflight,
    /// Done: the completed file exists.
    Completed,
}

impl State {
    /// The state's name (`REQUESTED`, `INFLIGHT`, `COMPLETED`), as Hudi prints it.
    pub fn name(self) -> &'static str {
        match self {
            State::Requested => "REQUESTED",
            State::Inflight => "INFLIGHT",
            State::Completed => "COMPLETED",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One instant file's identity: requested time, action, state, and for completed instants of
/// layout 2 the completion time.
///
/// For completed instants `action` is the action in the completed file name (so a completed
/// clustering is a `ReplaceCommit`, a completed compaction a `Commit`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Instant {
    /// The requested (instant) time.
    pub requested_time: InstantTime,
    /// The completion time: `Some` for completed instants of table version 8 and later.
    pub completion_time: Option<InstantTime>,
    /// The action.
    pub action: Action,
    /// The state.
    pub state: State,
}

impl Instant {
    /// A requested instant.
    pub fn requested(time: InstantTime, action: Action) -> Self {
        Instant {
            requested_time: time,
            completion_time: None,
            action,
            state: State::Requested,
        }
    }

    /// The same instant in another state (completion time cleared unless `Completed`).
    pub fn with_state(&self, state: State) -> Self {
        let mut i = self.clone();
        i.state = state;
        if state != State::Completed {
            i.completion_time = None;
        }
        i
    }

    /// True if completed.
    pub fn is_completed(&self) -> bool {
        self.state == State::Completed
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.completion_time {
            Some(c) => write!(
                f,
                "{}_{}.{}.{}",
                self.requested_time, c, self.action, self.state
            ),
            None => write!(f, "{}.{}.{}", self.requested_time, self.action, self.state),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_instant_time_parse_accepts_17_and_14_digits() {
        assert!(InstantTime::parse("20250713010535797").is_ok());
        assert!(InstantTime::parse("20250713010535").is_ok());
        assert!(InstantTime::parse("00000000000000").is_ok());
        assert!(InstantTime::parse("00000000000000001").is_ok());
    }

    #[test]
    fn test_instant_time_parse_rejects_garbage() {
        for bad in [
            "",
            "2025",
            "2025071301053579x",
            "20251313010535797",
            "../../etc",
        ] {
            assert!(InstantTime::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn test_instant_time_datetime_round_trip() {
        let t = InstantTime::parse("20250713010535797").unwrap();
        let dt = t.to_datetime().unwrap();
        assert_eq!(InstantTime::from_datetime(dt), t);
    }

    #[test]
    fn test_action_completed_action_maps_table_services() {
        assert_eq!(Action::Clustering.completed_action(), Action::ReplaceCommit);
        assert_eq!(Action::Compaction.completed_action(), Action::Commit);
        assert_eq!(
            Action::LogCompaction.completed_action(),
            Action::DeltaCommit
        );
        assert_eq!(Action::Clean.completed_action(), Action::Clean);
        for a in Action::ALL {
            assert_eq!(Action::from_name(a.name()), Some(a));
        }
    }
}
