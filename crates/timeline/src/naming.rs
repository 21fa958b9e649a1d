//! Instant file names, both ways, for timeline layout 2 (table versions 8 and 9) and layout 1
//! (table version 6, read only).
//!
//! Layout 2: `T.<action>.requested`, `T.<action>.inflight` (but `T.inflight` for `commit`), and
//! `T_C.<action>` for a completed instant with completion time `C`.
//! Layout 1: the same pending names, and `T.<action>` for completed instants.

use crate::error::{Result, TimelineError};
use crate::instant::{Action, Instant, InstantTime, State};

/// The timeline layout version (`hoodie.timeline.layout.version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LayoutVersion {
    /// Layout 1: instant files directly in `.hoodie/`, no completion time (table version 6).
    V1,
    /// Layout 2: instant files in `.hoodie/timeline/`, completion time in the completed file name
    /// (table versions 8 and 9).
    V2,
}

/// The file name of an instant in the given layout.
///
/// Fails for a completed instant without completion time in layout 2 (such a "legacy" file is
/// ignored by hudi-rs, so arbor never writes one), and for a `clustering` instant in layout 1.
pub fn instant_file_name(instant: &Instant, layout: LayoutVersion) -> Result<String> {
    let t = &instant.requested_time;
    let a = instant.action.name();
    let name = match instant.state {
        State::Requested => format!("{t}.{a}.requested"),
        State::Inflight if instant.action == Action::Commit => format!("{t}.inflight"),
        State::Inflight => format!("{t}.{a}.inflight"),
        State::Completed => match (layout, &instant.completion_time) {
            (LayoutVersion::V2, Some(c)) => format!("{t}_{c}.{a}"),
            (LayoutVersion::V2, None) => {
                return Err(TimelineError::InvalidInstantName {
                    name: format!("{t}.{a}"),
                    reason: "a completed instant in layout 2 needs a completion time".into(),
                })
            }
            (LayoutVersion::V1, _) => format!("{t}.{a}"),
        },
    };
    Ok(name)
}

/// Parses an instant file name.
///
/// In layout 2 a completed name without completion time (`T.<action>`, "legacy") parses as a
/// completed instant with `completion_time == None`; callers decide whether to accept it.
pub fn parse_instant_file_name(name: &str, layout: LayoutVersion) -> Result<Instant> {
    let bad = |reason: &str| TimelineError::InvalidInstantName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    let mut parts = name.split('.');
    let times = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    let (requested, completion) = match times.split_once('_') {
        Some((r, c)) => {
            if layout == LayoutVersion::V1 {
                return Err(bad("layout 1 names carry no completion time"));
            }
            (r, Some(c))
        }
        None => (times, None),
    };
    let requested_time = InstantTime::parse(requested).map_err(|e| bad(&e.to_string()))?;
    let completion_time = completion
        .map(InstantTime::parse)
        .transpose()
        .map_err(|e| bad(&e.to_string()))?;
    let action_of = |s: &str| Action::from_name(s).ok_or_else(|| bad("unknown action"));
    let (action, state) = match rest.as_slice() {
        ["inflight"] => (Action::Commit, State::Inflight),
        [action] => (action_of(action)?, State::Completed),
        [action, "requested"] => (action_of(action)?, State::Requested),
        [action, "inflight"] => (action_of(action)?, State::Inflight),
        _ => return Err(bad("expected <time>[_<completion>].<action>[.<state>]")),
    };
    if completion_time.is_some() && state != State::Completed {
        return Err(bad("only completed instants carry a completion time"));
    }
    if state == State::Completed
        && matches!(
            action,
            Action::Clustering | Action::Compaction | Action::LogCompaction
        )
    {
        return Err(bad(
            "clustering and compaction complete as replacecommit/commit",
        ));
    }
    if layout == LayoutVersion::V1 && action == Action::Clustering {
        return Err(bad("layout 1 has no clustering action"));
    }
    Ok(Instant {
        requested_time,
        completion_time,
        action,
        state,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(name: &str, layout: LayoutVersion) {
        let i = parse_instant_file_name(name, layout).unwrap();
        assert_eq!(instant_file_name(&i, layout).unwrap(), name);
    }

    #[test]
    fn test_parse_v8_names_round_trip() {
        for n in [
            "20251220210108078.deltacommit.inflight",
            "20251220210108078.deltacommit.requested",
            "20251220210108078_20251220210109593.deltacommit",
            "20251220210117766.indexing.requested",
            "20251220210129235.compaction.requested",
            "20251220210129235_20251220210129883.commit",
            "20250713010535797.inflight",
            "20250713010535797.commit.requested",
            "20260403184259077_20260403184300219.rollback",
            "20260403184259077.savepoint.inflight",
        ] {
            round_trip(n, LayoutVersion::V2);
        }
    }

    #[test]
    fn test_parse_v6_names_round_trip() {
        for n in [
            "20240418173550988.commit",
            "20240418173550988.commit.requested",
            "20240418173550988.inflight",
            "20250117083125837.deltacommit",
            "20250117083125837.clean.requested",
        ] {
            round_trip(n, LayoutVersion::V1);
        }
    }

    #[test]
    fn test_parse_completed_v8_has_completion_time() {
        let i = parse_instant_file_name(
            "20251220210129235_20251220210129883.commit",
            LayoutVersion::V2,
        )
        .unwrap();
        assert_eq!(i.state, State::Completed);
        assert_eq!(i.action, Action::Commit);
        assert_eq!(i.completion_time.unwrap().as_str(), "20251220210129883");
    }

    #[test]
    fn test_parse_rejects_garbage_names() {
        for n in [
            "hoodie.properties",
            "history",
            "2025.commit",
            "20250713010535797.bogus",
            "20250713010535797.commit.done",
            "20250713010535797_20250713010535798.commit.requested",
            "20250713010535797_20250713010535798.compaction",
            "20250713010535797.commit.requested.crc",
            "",
        ] {
            assert!(
                parse_instant_file_name(n, LayoutVersion::V2).is_err(),
                "{n} accepted"
            );
        }
        assert!(parse_instant_file_name(
            "20250713010535797_20250713010535798.commit",
            LayoutVersion::V1
        )
        .is_err());
    }

    #[test]
    fn test_render_completed_v2_without_completion_fails() {
        let i = Instant {
            requested_time: InstantTime::parse("20250713010535797").unwrap(),
            completion_time: None,
            action: Action::Commit,
            state: State::Completed,
        };
        assert!(instant_file_name(&i, LayoutVersion::V2).is_err());
        assert_eq!(
            instant_file_name(&i, LayoutVersion::V1).unwrap(),
            "20250713010535797.commit"
        );
    }
}
