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
    fn test_now_on_is_a_valid_current_instant() {
        let now = now_on(UTC);
        let drift = Utc::now() - now.to_datetime().unwrap();
        assert!(drift.num_seconds().abs() < 60, "{now}");
        assert!(now_on(TimelineTimezone::Local).to_datetime().is_some());
    }
}
