//! The subset of Joda-Time date patterns (`DateTimeFormat.forPattern`) that Hudi's
//! timestamp-based key generator is configured with: parsing input values and printing
//! partition paths.
//!
//! Letters: `y`/`Y` year (`yy` two digits), `M` month (`MMM` short and `MMMM` full English
//! names), `d` day of month, `D` day of year (printing only), `H` hour 0-23, `h` clock hour
//! 1-12 with `a` AM/PM, `m` minute, `s` second, `S` fraction of second, `Z` offset (`Z`:
//! `+0800`, `ZZ`: `+08:00`; parsing also accepts `Z` for zero), `E` day-of-week name. Text
//! between single quotes and every non-letter character is literal (`''` is a quote). Any
//! other letter is refused by name, never guessed.

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveDateTime, Timelike};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(String),
    Field(char, usize),
}

/// A parsed Joda pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JodaPattern {
    source: String,
    tokens: Vec<Token>,
}

/// What parsing a value found: the local date-time and the offset, if the pattern has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    /// The date-time as written.
    pub local: NaiveDateTime,
    /// The offset written in the value (`Z` fields).
    pub offset: Option<FixedOffset>,
}

impl JodaPattern {
    /// Compiles `pattern`; an unsupported letter or an unclosed quote is an error naming it.
    pub fn new(pattern: &str) -> Result<JodaPattern, String> {
        let mut tokens = Vec::new();
        let chars: Vec<char> = pattern.chars().collect();
        let mut i = 0;
        let mut literal = String::new();
        while let Some(&c) = chars.get(i) {
            if c == '\'' {
                if chars.get(i + 1) == Some(&'\'') {
                    literal.push('\'');
                    i += 2;
                    continue;
                }
                let mut j = i + 1;
                loop {
                    match chars.get(j) {
                        None => return Err(format!("unclosed quote in date pattern {pattern:?}")),
                        Some('\'') if chars.get(j + 1) == Some(&'\'') => {
                            literal.push('\'');
                            j += 2;
                        }
                        Some('\'') => break,
                        Some(&q) => {
                            literal.push(q);
                            j += 1;
                        }
                    }
                }
                i = j + 1;
                continue;
            }
            if c.is_ascii_alphabetic() {
                if !"yYMdDHhamsSZE".contains(c) {
                    return Err(format!(
                        "date pattern {pattern:?}: letter '{c}' is not supported by arbor"
                    ));
                }
                if !literal.is_empty() {
                    tokens.push(Token::Literal(std::mem::take(&mut literal)));
                }
                let mut n = 1;
                while chars.get(i + n) == Some(&c) {
                    n += 1;
                }
                tokens.push(Token::Field(if c == 'Y' { 'y' } else { c }, n));
                i += n;
                continue;
            }
            literal.push(c);
            i += 1;
        }
        if !literal.is_empty() {
            tokens.push(Token::Literal(literal));
        }
        Ok(JodaPattern {
            source: pattern.to_string(),
            tokens,
        })
    }

    /// The pattern as configured.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Prints `t` as Joda does with this pattern.
    pub fn format(&self, t: &DateTime<FixedOffset>) -> String {
        let mut out = String::new();
        for token in &self.tokens {
            match token {
                Token::Literal(s) => out.push_str(s),
                Token::Field(c, n) => {
                    let n = *n;
                    let num = |out: &mut String, v: i64| {
                        let digits = v.unsigned_abs().to_string();
                        if v < 0 {
                            out.push('-');
                        }
                        for _ in digits.len()..n {
                            out.push('0');
                        }
                        out.push_str(&digits);
                    };
                    match c {
                        'y' if n == 2 => {
                            out.push_str(&format!("{:02}", t.year().rem_euclid(100)));
                        }
                        'y' => num(&mut out, i64::from(t.year())),
                        'M' if n >= 4 => out.push_str(month_name(t.month0())),
                        'M' if n == 3 => out.push_str(short(month_name(t.month0()))),
                        'M' => num(&mut out, i64::from(t.month())),
                        'd' => num(&mut out, i64::from(t.day())),
                        'D' => num(&mut out, i64::from(t.ordinal())),
                        'H' => num(&mut out, i64::from(t.hour())),
                        'h' => num(&mut out, i64::from(t.hour12().1)),
                        'a' => out.push_str(if t.hour12().0 { "PM" } else { "AM" }),
                        'm' => num(&mut out, i64::from(t.minute())),
                        's' => num(&mut out, i64::from(t.second())),
                        'S' => {
                            // Joda keeps milliseconds: the first n digits of the millis,
                            // zero-padded beyond three.
                            let millis = format!("{:03}", t.timestamp_subsec_millis().min(999));
                            let mut digits: String = millis.chars().take(n).collect();
                            while digits.len() < n {
                                digits.push('0');
                            }
                            out.push_str(&digits);
                        }
                        'Z' => {
                            let secs = t.offset().local_minus_utc();
                            let sign = if secs < 0 { '-' } else { '+' };
                            let (h, m) = (secs.abs() / 3600, secs.abs() % 3600 / 60);
                            if n == 1 {
                                out.push_str(&format!("{sign}{h:02}{m:02}"));
                            } else {
                                out.push_str(&format!("{sign}{h:02}:{m:02}"));
                            }
                        }
                        'E' => {
                            let name = day_name(t.weekday().num_days_from_monday());
                            out.push_str(if n >= 4 { name } else { short(name) });
                        }
                        _ => {}
                    }
                }
            }
        }
        out
    }

    /// Parses the whole of `value`; the first unmatched character or an invalid date is an
    /// error.
    pub fn parse(&self, value: &str) -> Result<Parsed, String> {
        let bad = |why: &str| format!("{value:?} does not match {:?}: {why}", self.source);
        let bytes: Vec<char> = value.chars().collect();
        let mut pos = 0usize;
        let (mut year, mut month, mut day) = (1970i64, 1i64, 1i64);
        let (mut hour, mut minute, mut second, mut nanos) = (0i64, 0i64, 0i64, 0i64);
        let mut pm: Option<bool> = None;
        let mut offset: Option<FixedOffset> = None;
        for (ti, token) in self.tokens.iter().enumerate() {
            let next_numeric = matches!(
                self.tokens.get(ti + 1),
                Some(Token::Field(c, n)) if is_numeric(*c, *n)
            );
            match token {
                Token::Literal(s) => {
                    for want in s.chars() {
                        match bytes.get(pos) {
                            Some(got) if got.eq_ignore_ascii_case(&want) => pos += 1,
                            _ => return Err(bad(&format!("expected {s:?} at {pos}"))),
                        }
                    }
                }
                Token::Field(c, n) => {
                    let (c, n) = (*c, *n);
                    if is_numeric(c, n) {
                        let max = if next_numeric {
                            n
                        } else {
                            match c {
                                'y' | 'S' => 9,
                                'D' => 3,
                                _ => 2.max(n),
                            }
                        };
                        let negative = c == 'y' && bytes.get(pos) == Some(&'-');
                        if negative {
                            pos += 1;
                        }
                        let start = pos;
                        while pos - start < max && bytes.get(pos).is_some_and(char::is_ascii_digit)
                        {
                            pos += 1;
                        }
                        if pos == start {
                            return Err(bad(&format!("expected digits at {start}")));
                        }
                        let digits: String =
                            bytes.get(start..pos).unwrap_or_default().iter().collect();
                        let v: i64 = digits.parse().map_err(|_| bad("number too large"))?;
                        let v = if negative { -v } else { v };
                        match c {
                            'y' if n == 2 && digits.len() == 2 => year = 2000 + v,
                            'y' => year = v,
                            'M' => month = v,
                            'd' => day = v,
                            'D' => return Err(bad("day-of-year fields are not parsed by arbor")),
                            'H' => hour = v,
                            'h' => hour = v % 12,
                            'm' => minute = v,
                            's' => second = v,
                            'S' => {
                                let mut scaled = v;
                                for _ in digits.len()..9 {
                                    scaled *= 10;
                                }
                                nanos = scaled;
                            }
                            _ => {}
                        }
                        continue;
                    }
                    let rest: String = bytes.get(pos..).unwrap_or_default().iter().collect();
                    match c {
                        'M' => {
                            let (m, len) = match_name(&rest, &MONTHS, n)
                                .ok_or_else(|| bad("expected a month name"))?;
                            month = m as i64 + 1;
                            pos += len;
                        }
                        'E' => {
                            let (_, len) = match_name(&rest, &DAYS, n)
                                .ok_or_else(|| bad("expected a day name"))?;
                            pos += len;
                        }
                        'a' => {
                            let upper = rest.to_ascii_uppercase();
                            if upper.starts_with("AM") {
                                pm = Some(false);
                            } else if upper.starts_with("PM") {
                                pm = Some(true);
                            } else {
                                return Err(bad("expected AM or PM"));
                            }
                            pos += 2;
                        }
                        'Z' => {
                            let (o, len) =
                                parse_offset(&rest).ok_or_else(|| bad("expected an offset"))?;
                            offset = Some(o);
                            pos += len;
                        }
                        _ => return Err(bad("unsupported field")),
                    }
                }
            }
        }
        if pos != bytes.len() {
            return Err(bad(&format!("unexpected text at {pos}")));
        }
        if pm == Some(true) {
            hour += 12;
        }
        let date = i32::try_from(year)
            .ok()
            .and_then(|y| NaiveDate::from_ymd_opt(y, month as u32, day as u32))
            .ok_or_else(|| bad("no such date"))?;
        let time = u32::try_from(nanos)
            .ok()
            .and_then(|ns| {
                chrono::NaiveTime::from_hms_nano_opt(hour as u32, minute as u32, second as u32, ns)
            })
            .ok_or_else(|| bad("no such time"))?;
        Ok(Parsed {
            local: date.and_time(time),
            offset,
        })
    }
}

fn is_numeric(c: char, n: usize) -> bool {
    match c {
        'M' => n <= 2,
        'a' | 'Z' | 'E' => false,
        _ => true,
    }
}

fn month_name(i: u32) -> &'static str {
    MONTHS.get(i as usize).copied().unwrap_or_default()
}

fn day_name(i: u32) -> &'static str {
    DAYS.get(i as usize).copied().unwrap_or_default()
}

fn short(name: &str) -> &str {
    name.get(..3).unwrap_or(name)
}

/// The index and matched length of the full or short name `text` starts with.
fn match_name(text: &str, names: &[&str], n: usize) -> Option<(usize, usize)> {
    let lower = text.to_ascii_lowercase();
    for (i, name) in names.iter().enumerate() {
        let full = name.to_ascii_lowercase();
        if n >= 4 && lower.starts_with(&full) {
            return Some((i, full.len()));
        }
        if lower.starts_with(short(&full)) {
            return Some((i, 3));
        }
    }
    None
}

/// `Z`, `+HH`, `+HHMM` or `+HH:MM` at the start of `text`.
fn parse_offset(text: &str) -> Option<(FixedOffset, usize)> {
    let chars: Vec<char> = text.chars().collect();
    match chars.first()? {
        'Z' | 'z' => return Some((FixedOffset::east_opt(0)?, 1)),
        '+' | '-' => {}
        _ => return None,
    }
    let sign = if chars.first() == Some(&'-') { -1 } else { 1 };
    let digit = |i: usize| chars.get(i).and_then(|c| c.to_digit(10));
    let h = digit(1)? * 10 + digit(2)?;
    let (m, len) = match (chars.get(3), digit(3), digit(4)) {
        (Some(':'), _, _) => (digit(4)? * 10 + digit(5)?, 6),
        (_, Some(a), Some(b)) => (a * 10 + b, 5),
        _ => (0, 3),
    };
    let secs = i32::try_from(h * 3600 + m * 60).ok()?;
    Some((FixedOffset::east_opt(sign * secs)?, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn test_parse_and_format_the_fixture_patterns() {
        let input = JodaPattern::new("yyyy-MM-dd'T'HH:mm:ss.SSSZ").unwrap();
        let p = input.parse("2024-01-15T10:30:00.000Z").unwrap();
        assert_eq!(p.offset, FixedOffset::east_opt(0));
        assert_eq!(p.local.to_string(), "2024-01-15 10:30:00");
        let p = input.parse("2024-01-15T10:30:00.123+0530").unwrap();
        assert_eq!(p.offset, FixedOffset::east_opt(5 * 3600 + 1800));
        let out = JodaPattern::new("yyyy/MM/dd/HH").unwrap();
        let t = FixedOffset::east_opt(0)
            .unwrap()
            .with_ymd_and_hms(2024, 1, 5, 7, 0, 0)
            .unwrap();
        assert_eq!(out.format(&t), "2024/01/05/07");
        assert_eq!(
            JodaPattern::new("yyyyMMdd'T'HH Z ZZ MMM EEEE")
                .unwrap()
                .format(&t),
            "20240105T07 +0000 +00:00 Jan Friday"
        );
    }

    #[test]
    fn test_bad_patterns_and_values_are_errors() {
        assert!(JodaPattern::new("yyyy-ww").unwrap_err().contains("'w'"));
        assert!(JodaPattern::new("yyyy'T").is_err());
        let p = JodaPattern::new("yyyy-MM-dd").unwrap();
        assert!(p.parse("2024-13-01").is_err());
        assert!(p.parse("2024-01-01x").is_err());
        assert!(p.parse("").is_err());
        assert_eq!(
            p.parse("2024-1-5").unwrap().local.to_string(),
            "2024-01-05 00:00:00"
        );
    }
}
