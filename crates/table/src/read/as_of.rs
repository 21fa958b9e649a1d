//! Checks of a time-travel instant ("as of T"): a time after the current time would silently
//! read the latest state (and a later write would change the answer), so it is refused.
//!
//! "Now" is this machine's clock read on the table's instant-time clock
//! (`hoodie.table.timeline.timezone`: UTC, or this machine's local time for `LOCAL`), at
//! millisecond precision, the precision of instant times. A table whose clock runs ahead of
//! this machine has completed writes after "now": an as-of time at or before the latest of
//! them names a state the table had, and is not refused.

use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::config::TimelineTimezone;
use arbor_timeline::InstantTime;
use chrono::{DateTime, Utc};

use crate::error::{Result, TableError};

/// The current time of this machine as an instant time on the clock `zone`.
pub(crate) fn now_on(zone: TimelineTimezone) -> InstantTime {
    let wall = match zone {
        TimelineTimezone::Utc => Utc::now(),
        TimelineTimezone::Local => chrono::Local::now().naive_local().and_utc(),
    };
    InstantTime::from_datetime(wall)
}

/// Refuses a read as of `instant` when it is after the current time (on the table's clock
/// `zone`) and after the table's latest completed write (see the module doc).
pub(crate) fn check_not_future(
    history: &TimelineHistory,
    zone: TimelineTimezone,
    instant: &InstantTime,
) -> Result<()> {
    let latest = history
        .completed_writes()
        .into_iter()
        .map(|i| i.requested_time)
        .max_by_key(|t| t.to_datetime());
    refuse_after(instant, &now_on(zone), latest.as_ref(), zone)
}

/// A note when the table's clock runs ahead of this machine and `instant` is before the
/// table's latest completed write: its latest write (requested or completed) is more than a
/// second after "now", so writes made before the wall-clock time `instant` may carry later
/// times and be left out of a read as of it. `None` otherwise.
pub(crate) fn clock_ahead_note(
    history: &TimelineHistory,
    zone: TimelineTimezone,
    instant: &InstantTime,
) -> Option<String> {
    let latest = history
        .completed_writes()
        .into_iter()
        .flat_map(|i| [Some(i.requested_time), i.completion_time])
        .flatten()
        .filter_map(|t| t.to_datetime().map(|d| (d, t)))
        .max_by_key(|(d, _)| *d)?;
    ahead_note(instant, &now_on(zone), &latest.1)
}

/// [`clock_ahead_note`] with `now` and the table's latest time `latest` given.
pub(crate) fn ahead_note(
    instant: &InstantTime,
    now: &InstantTime,
    latest: &InstantTime,
) -> Option<String> {
    let (asked, current, last) = (
        instant.to_datetime()?,
        now.to_datetime()?,
        latest.to_datetime()?,
    );
    let ahead_s = (last - current).num_seconds();
    if ahead_s < 1 || asked >= last {
        return None;
    }
    Some(format!(
        "the table's clock runs {ahead_s} s ahead of this machine: its latest commit time \
         {latest} is after now ({now}), so writes made before {instant} may carry later times \
         and be missing from a read as of it; read as of an instant listed by `arbor timeline`, \
         and run `arbor doctor <table>` to see the clocks"
    ))
}

/// [`check_not_future`] with the current time `now` and the latest completed write `latest`
/// given: [`TableError::InvalidInput`] naming the time asked, `now` and `latest` when
/// `instant` is after both. Reserved all-zero times are never in the future.
pub(crate) fn refuse_after(
    instant: &InstantTime,
    now: &InstantTime,
    latest: Option<&InstantTime>,
    zone: TimelineTimezone,
) -> Result<()> {
    let at = |t: &InstantTime| -> Option<DateTime<Utc>> { t.to_datetime() };
    let (Some(asked), Some(current)) = (at(instant), at(now)) else {
        return Ok(());
    };
    let latest_at = latest.and_then(at);
    if asked <= current || latest_at.is_some_and(|l| asked <= l) {
        return Ok(());
    }
    let latest_text = match latest {
        Some(l) => format!(
            "the table's latest commit is {l} (as of it, or without a time, reads the latest \
             state)"
        ),
        None => "the table has no commit yet".to_string(),
    };
    Err(TableError::InvalidInput {
        column: None,
        row: None,
        reason: format!(
            "as of {instant} is in the future: it is now {now} on the table's clock ({}); \
             {latest_text}",
            zone.name()
        ),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn t(s: &str) -> InstantTime {
        InstantTime::parse(s).unwrap()
    }

    const UTC: TimelineTimezone = TimelineTimezone::Utc;

    #[test]
    fn test_refuse_after_now_names_asked_now_and_latest() {
        let now = t("20260101120000000");
        let latest = t("20260101110000000");
        let err = refuse_after(&t("20260101120000001"), &now, Some(&latest), UTC)
            .unwrap_err()
            .to_string();
        for part in [
            "20260101120000001",
            "20260101120000000",
            "20260101110000000",
            "UTC",
        ] {
            assert!(err.contains(part), "{part}: {err}");
        }
        assert!(err.contains("future"), "{err}");
        // Legacy 14-digit times compare as times, not as text.
        assert!(refuse_after(&t("20260101120001"), &now, Some(&latest), UTC).is_err());
        let err = refuse_after(&t("20990101000000000"), &now, None, UTC)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no commit"), "{err}");
    }

    #[test]
    fn test_refuse_after_allows_now_latest_and_the_past() {
        let now = t("20260101120000000");
        let latest = t("20260101110000000");
        for ok in [
            "20260101120000000",
            "20260101120000",
            "20260101110000000",
            "20260101115959999",
            "20200101000000000",
            "00000000000000000",
        ] {
            assert!(
                refuse_after(&t(ok), &now, Some(&latest), UTC).is_ok(),
                "{ok}"
            );
        }
    }

    #[test]
    fn test_refuse_after_table_clock_ahead_allows_up_to_latest_commit() {
        let now = t("20260101120000000");
        let ahead = t("20260101130000000");
        assert!(refuse_after(&t("20260101124500000"), &now, Some(&ahead), UTC).is_ok());
        assert!(refuse_after(&ahead, &now, Some(&ahead), UTC).is_ok());
        assert!(refuse_after(&t("20260101130000001"), &now, Some(&ahead), UTC).is_err());
    }

    #[test]
    fn test_ahead_note_only_when_the_table_clock_runs_ahead_and_the_time_is_before_it() {
        let now = t("20260101120000000");
        let ahead = t("20260101130000000");
        let note = ahead_note(&t("20260101115000000"), &now, &ahead).unwrap();
        for part in ["3600 s ahead", "20260101130000000", "arbor doctor"] {
            assert!(note.contains(part), "{part}: {note}");
        }
        // At or after the latest time, or with a table clock not ahead: nothing to say.
        assert!(ahead_note(&ahead, &now, &ahead).is_none());
        assert!(ahead_note(&t("20260101110000000"), &now, &t("20260101115959000")).is_none());
        assert!(ahead_note(&t("20260101110000000"), &now, &t("20260101120000500")).is_none());
    }

    #[test]
    fn test_now_on_is_a_valid_current_instant() {
        let now = now_on(UTC);
        let drift = Utc::now() - now.to_datetime().unwrap();
        assert!(drift.num_seconds().abs() < 60, "{now}");
        assert!(now_on(TimelineTimezone::Local).to_datetime().is_some());
    }
}
