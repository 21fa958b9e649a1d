//! ISO 8601 dates and times as users type them (`--as-of`, partition filters on date and
//! timestamp columns): `2026-12-01`, `2026-12-01T10:00`, `2026-12-01 10:00:00.123`, each
//! optionally followed by `Z` or an offset (`+02:00`, `-0500`).

use arbor_timeline::config::TimelineTimezone;
use arbor_timeline::InstantTime;
use chrono::{FixedOffset, NaiveDate, NaiveDateTime, NaiveTime};

use crate::error::{Result, TableError};

/// A parsed date or date-time: the wall-clock time as written and its offset, if one was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedDateTime {
    /// The date and time as written (a date alone is its midnight).
    pub local: NaiveDateTime,
    /// The offset written after the time (`Z` is zero); `None` when the text names no zone.
    pub offset: Option<FixedOffset>,
    /// True when only a date was given.
    pub date_only: bool,
}

impl ParsedDateTime {
    /// The UTC time this denotes, taking a zone-less time as UTC.
    pub fn to_utc_naive(&self) -> NaiveDateTime {
        match self.offset {
            Some(o) => self.local - o,
            None => self.local,
        }
    }
}

/// Parses `text` (see the module doc); `None` when it is not one of those forms. Fractions of
/// a second take up to 9 digits.
pub fn parse_datetime(text: &str) -> Option<ParsedDateTime> {
    let text = text.trim();
    if let Ok(d) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        if text.len() == 10 {
            return Some(ParsedDateTime {
                local: d.and_time(NaiveTime::MIN),
                offset: None,
                date_only: true,
            });
        }
    }
    let (body, offset) = split_offset(text)?;
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(local) = NaiveDateTime::parse_from_str(body, format) {
            return Some(ParsedDateTime {
                local,
                offset,
                date_only: false,
            });
        }
    }
    None
}

/// Parses a point in time as users give it for time travel: an instant time (digits,
/// `yyyyMMddHHmmss[SSS]`), or an ISO date/time ([`parse_datetime`]) turned into the instant time
/// of the same moment on the timeline's clock `zone`: a zone-less time is taken as written
/// (Hudi instant times are wall-clock times in that zone), a time with `Z` or an offset is
/// converted to the zone; milliseconds are kept, finer digits dropped (instant times have
/// millisecond precision, and "as of" includes every instant at or before). Anything else is
/// [`TableError::InvalidInput`] quoting the text and naming the accepted forms.
pub fn parse_time(text: &str, zone: TimelineTimezone) -> Result<InstantTime> {
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(InstantTime::parse(text)?);
    }
    let parsed = parse_datetime(text).ok_or_else(|| TableError::InvalidInput {
        column: None,
        row: None,
        reason: format!(
            "{text:?} is neither an instant time (yyyyMMddHHmmss[SSS]) nor an ISO date/time \
             (2026-12-01, 2026-12-01T10:00:00[.123][Z|+02:00])"
        ),
    })?;
    let wall = match (parsed.offset, zone) {
        (None, _) => parsed.local,
        (Some(_), TimelineTimezone::Utc) => parsed.to_utc_naive(),
        (Some(_), TimelineTimezone::Local) => {
            use chrono::TimeZone;
            chrono::Local
                .from_utc_datetime(&parsed.to_utc_naive())
                .naive_local()
        }
    };
    Ok(InstantTime::parse(
        &wall.format("%Y%m%d%H%M%S%3f").to_string(),
    )?)
}

/// Splits a trailing `Z` or `±HH:MM` / `±HHMM` / `±HH` offset off a date-time text (only after
/// the date, so the date's dashes are not taken for one). `None` for a malformed offset.
fn split_offset(text: &str) -> Option<(&str, Option<FixedOffset>)> {
    if let Some(body) = text.strip_suffix('Z').or_else(|| text.strip_suffix('z')) {
        return Some((body, FixedOffset::east_opt(0)));
    }
    let time_start = text.get(10..)?;
    let Some(at) = time_start.rfind(['+', '-']) else {
        return Some((text, None));
    };
    let (body, zone) = text.split_at(10 + at);
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let digits: String = zone.chars().skip(1).filter(|c| *c != ':').collect();
    if !digits.bytes().all(|b| b.is_ascii_digit()) || !matches!(digits.len(), 2 | 4) {
        return None;
    }
    let hours: i32 = digits.get(0..2)?.parse().ok()?;
    let minutes: i32 = digits
        .get(2..)
        .filter(|m| !m.is_empty())
        .map_or(Some(0), |m| m.parse().ok())?;
    if hours > 23 || minutes > 59 {
        return None;
    }
    Some((
        body.trim_end(),
        FixedOffset::east_opt(sign * (hours * 3600 + minutes * 60)),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn utc(text: &str) -> String {
        parse_datetime(text)
            .unwrap()
            .to_utc_naive()
            .format("%Y-%m-%d %H:%M:%S%.3f")
            .to_string()
    }

    #[test]
    fn test_parse_datetime_forms() {
        assert_eq!(utc("2026-12-01"), "2026-12-01 00:00:00.000");
        assert!(parse_datetime("2026-12-01").unwrap().date_only);
        assert_eq!(utc("2026-12-01T10:00:00"), "2026-12-01 10:00:00.000");
        assert_eq!(utc("2026-12-01 10:00:00.123"), "2026-12-01 10:00:00.123");
        assert_eq!(utc("2026-12-01T10:00"), "2026-12-01 10:00:00.000");
        assert_eq!(utc("2026-12-01T10:00:00Z"), "2026-12-01 10:00:00.000");
        assert_eq!(utc("2026-12-01T10:00:00+02:00"), "2026-12-01 08:00:00.000");
        assert_eq!(utc("2026-12-01 10:00:00.5-0500"), "2026-12-01 15:00:00.500");
        assert!(parse_datetime("2026-12-01").unwrap().offset.is_none());
        for bad in [
            "yesterday",
            "2026-13-01",
            "2026-12-01T25:00",
            "2026-12-01T10:00+99:00",
            "",
        ] {
            assert!(parse_datetime(bad).is_none(), "{bad}");
        }
    }
}
