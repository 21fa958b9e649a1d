//! Instant times and ISO dates/times given on the command line (`--as-of`, `--to`, `--instant`).

use arbor_timeline::config::TimelineTimezone;
use arbor_timeline::InstantTime;

use crate::error::{CliError, CliResult};

/// Parses an instant time given to `flag`; the error names the flag.
pub fn parse_instant(flag: &str, s: &str) -> CliResult<InstantTime> {
    InstantTime::parse(s).map_err(|e| CliError::Usage(format!("{flag}: {e}")))
}

/// Parses a time given to `flag`: an instant time or an ISO date/time on the timeline's clock
/// `zone` ([`arbor_table::read::parse_time`]). An unparsable text is a usage error naming the
/// flag and the forms.
pub fn parse_time(flag: &str, s: &str, zone: TimelineTimezone) -> CliResult<InstantTime> {
    arbor_table::read::parse_time(s, zone).map_err(|e| CliError::Usage(format!("{flag}: {e}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_parse_time_iso_forms_on_a_utc_timeline() {
        let utc = TimelineTimezone::Utc;
        let t = |s: &str| parse_time("--as-of", s, utc).unwrap().to_string();
        assert_eq!(t("2026-12-01"), "20261201000000000");
        assert_eq!(t("2026-12-01T10:00:00"), "20261201100000000");
        assert_eq!(t("2026-12-01 10:00:00.123"), "20261201100000123");
        assert_eq!(t("2026-12-01 10:00:00.123999"), "20261201100000123");
        assert_eq!(t("2026-12-01T10:00:00Z"), "20261201100000000");
        assert_eq!(t("2026-12-01T10:00:00+02:00"), "20261201080000000");
        assert_eq!(t("20261201100000"), "20261201100000");
        let err = parse_time("--as-of", "next tuesday", utc)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--as-of") && err.contains("ISO"), "{err}");
    }
}
