//! Retention values: durations (`30d`, `12h`, `90m`, `3600s`), counts and sizes
//! (`107374182400`, `100GiB`, `500MB`), parsed and printed with exact integer arithmetic.
//!
//! Every printed form parses back to the same value. Overflow, an unknown unit, a fraction,
//! a sign or an empty number is an error naming the text; zero is refused (a retention of
//! nothing is not a policy: unset the policy instead).

use std::time::Duration;

use crate::error::{Result, TableError};

/// Units of durations, largest first: (suffix, seconds).
const DURATION_UNITS: [(&str, u64); 4] = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)];

/// Units of sizes, (suffix, bytes); matched case-insensitively. Binary (`KiB` = 1024) and
/// decimal (`KB` = 1000) units, as in IEC 80000-13.
const SIZE_UNITS: [(&str, u64); 11] = [
    ("pib", 1 << 50),
    ("tib", 1 << 40),
    ("gib", 1 << 30),
    ("mib", 1 << 20),
    ("kib", 1 << 10),
    ("pb", 1_000_000_000_000_000),
    ("tb", 1_000_000_000_000),
    ("gb", 1_000_000_000),
    ("mb", 1_000_000),
    ("kb", 1_000),
    ("b", 1),
];

/// The binary units used when printing a size (largest exact one wins).
const SIZE_PRINT_UNITS: [(&str, u64); 5] = [
    ("PiB", 1 << 50),
    ("TiB", 1 << 40),
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
];

fn bad(what: &str, text: &str, why: &str) -> TableError {
    TableError::InvalidInput {
        column: None,
        row: None,
        reason: format!("{what} {text:?}: {why}"),
    }
}

/// Digits only (no sign, no fraction, no spaces inside), as a `u64`; overflow is an error.
fn parse_digits(what: &str, text: &str, digits: &str) -> Result<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(what, text, "expected a whole number of units"));
    }
    digits
        .parse::<u64>()
        .map_err(|_| bad(what, text, "the number does not fit in 64 bits"))
}

fn split_number(text: &str) -> (&str, &str) {
    let end = text
        .char_indices()
        .find(|(_, c)| !c.is_ascii_digit())
        .map_or(text.len(), |(i, _)| i);
    text.split_at(end)
}

/// Parses a duration: `<digits><unit>` with unit `d` (24 hours), `h`, `m`, `s`, `ms`, `ns`; a bare
/// number is days (the RFC's and Java's `policyValue` / `days.retain`). Whole units only.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let what = "retention duration";
    let t = text.trim();
    let (digits, unit) = split_number(t);
    let n = parse_digits(what, text, digits)?;
    let d = match unit {
        "" | "d" => n
            .checked_mul(86_400)
            .map(Duration::from_secs)
            .ok_or_else(|| bad(what, text, "too long"))?,
        "h" => n
            .checked_mul(3_600)
            .map(Duration::from_secs)
            .ok_or_else(|| bad(what, text, "too long"))?,
        "m" => n
            .checked_mul(60)
            .map(Duration::from_secs)
            .ok_or_else(|| bad(what, text, "too long"))?,
        "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "ns" => Duration::from_nanos(n),
        _ => {
            return Err(bad(
                what,
                text,
                "unknown unit (use d, h, m, s, ms or ns, e.g. 30d)",
            ))
        }
    };
    if d.is_zero() {
        return Err(bad(what, text, "must be greater than zero"));
    }
    Ok(d)
}

/// Prints a duration in the largest unit that divides it exactly (`30d`, `36h`, `90m`,
/// `3601s`, `1500ms`, `5ns`): every form parses back to the same duration.
pub fn format_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        let secs = d.as_secs();
        for (unit, size) in DURATION_UNITS {
            if secs != 0 && secs % size == 0 {
                return format!("{}{unit}", secs / size);
            }
        }
        return format!("{secs}s");
    }
    if d.subsec_nanos() % 1_000_000 == 0 {
        return format!("{}ms", d.as_millis());
    }
    format!("{}ns", d.as_nanos())
}

/// Parses a count: a whole number greater than zero.
pub fn parse_count(text: &str) -> Result<u64> {
    let what = "retention count";
    let n = parse_digits(what, text, text.trim())?;
    if n == 0 {
        return Err(bad(what, text, "must be greater than zero"));
    }
    Ok(n)
}

/// Parses a size in bytes: a bare number of bytes (`107374182400`) or `<digits><unit>` with a
/// binary (`KiB`, `MiB`, `GiB`, `TiB`, `PiB`) or decimal (`B`, `KB`, `MB`, `GB`, `TB`, `PB`)
/// unit, case-insensitive; overflow of 64 bits is an error.
pub fn parse_size(text: &str) -> Result<u64> {
    let what = "retention size";
    let t = text.trim();
    let (digits, unit) = split_number(t);
    let n = parse_digits(what, text, digits)?;
    let mult = if unit.is_empty() {
        1
    } else {
        let lower = unit.trim().to_ascii_lowercase();
        SIZE_UNITS
            .iter()
            .find(|(u, _)| *u == lower)
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                bad(
                    what,
                    text,
                    "unknown unit (use B, KB, MB, GB, TB, PB or KiB, MiB, GiB, TiB, PiB)",
                )
            })?
    };
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| bad(what, text, "more bytes than fit in 64 bits"))?;
    if bytes == 0 {
        return Err(bad(what, text, "must be greater than zero"));
    }
    Ok(bytes)
}

/// Prints a size in the largest binary unit that divides it exactly (`100GiB`), else in bytes.
pub fn format_size(bytes: u64) -> String {
    for (unit, size) in SIZE_PRINT_UNITS {
        if bytes != 0 && bytes % size == 0 {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_unit() {
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        assert_eq!(
            parse_duration("30").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        assert_eq!(
            parse_duration("12h").unwrap(),
            Duration::from_secs(12 * 3_600)
        );
        assert_eq!(parse_duration("90m").unwrap(), Duration::from_secs(90 * 60));
        assert_eq!(parse_duration("3600s").unwrap(), Duration::from_secs(3_600));
        assert_eq!(
            parse_duration("1500ms").unwrap(),
            Duration::from_millis(1_500)
        );
        assert_eq!(
            parse_duration(" 7d ").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
    }

    #[test]
    fn bad_durations_are_errors() {
        for t in [
            "", "d", "1.5d", "-1d", "+1d", "10w", "1 d", "0d", "0", "1dd",
        ] {
            assert!(parse_duration(t).is_err(), "{t:?} accepted");
        }
        let huge = format!("{}d", u64::MAX / 86_400 + 1);
        let e = parse_duration(&huge).unwrap_err().to_string();
        assert!(e.contains("too long"), "{e}");
        assert!(parse_duration("99999999999999999999s").is_err());
    }

    #[test]
    fn durations_print_in_the_largest_exact_unit_and_round_trip() {
        let cases = [
            (Duration::from_secs(30 * 86_400), "30d"),
            (Duration::from_secs(36 * 3_600), "36h"),
            (Duration::from_secs(90 * 60), "90m"),
            (Duration::from_secs(3_601), "3601s"),
            (Duration::from_millis(1_500), "1500ms"),
        ];
        for (d, text) in cases {
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text).unwrap(), d);
        }
        assert_eq!(format_duration(Duration::from_nanos(5)), "5ns");
        assert_eq!(parse_duration("5ns").unwrap(), Duration::from_nanos(5));
        let odd = Duration::new(7, 3);
        assert_eq!(parse_duration(&format_duration(odd)).unwrap(), odd);
    }

    #[test]
    fn counts_are_positive_whole_numbers() {
        assert_eq!(parse_count("10").unwrap(), 10);
        for t in ["0", "-1", "1.0", "ten", "", "18446744073709551616"] {
            assert!(parse_count(t).is_err(), "{t:?} accepted");
        }
    }

    #[test]
    fn sizes_parse_binary_and_decimal_units_exactly() {
        assert_eq!(parse_size("107374182400").unwrap(), 107_374_182_400);
        assert_eq!(parse_size("100GiB").unwrap(), 107_374_182_400);
        assert_eq!(parse_size("100gib").unwrap(), 107_374_182_400);
        assert_eq!(parse_size("500MB").unwrap(), 500_000_000);
        assert_eq!(parse_size("1KiB").unwrap(), 1_024);
        assert_eq!(parse_size("1kb").unwrap(), 1_000);
        assert_eq!(parse_size("7B").unwrap(), 7);
        assert_eq!(parse_size("16383PiB").unwrap(), 16_383 << 50);
    }

    #[test]
    fn bad_sizes_are_errors() {
        for t in ["", "GiB", "1.5GiB", "-1", "10XB", "0", "0GiB", "16384PiB"] {
            assert!(parse_size(t).is_err(), "{t:?} accepted");
        }
        let e = parse_size("16384PiB").unwrap_err().to_string();
        assert!(e.contains("64 bits"), "{e}");
    }

    #[test]
    fn sizes_print_exactly_and_round_trip() {
        for (b, text) in [
            (107_374_182_400u64, "100GiB"),
            (3_072, "3KiB"),
            (1_536, "1536"),
            (1_000, "1000"),
            (500_000_000, "500000000"),
            (1 << 50, "1PiB"),
        ] {
            assert_eq!(format_size(b), text);
            assert_eq!(parse_size(text).unwrap(), b);
        }
    }
}
