//! Java-style date patterns of event-time partition values (`yyyy-MM-dd`, `yyyyMMdd`,
//! `yyyy-MM-dd-HH`, `yyyy/MM/dd`, `yyyyMMddHH`, ...), compiled to a strict parser.
//!
//! Supported letters (as `java.time.format.DateTimeFormatter` reads them): `yyyy` / `uuuu`
//! (4-digit year), `MM` (month), `dd` (day of month), `HH` (hour 0-23), `mm` (minute), `ss`
//! (second); every other ASCII punctuation character (`-`, `/`, `_`, `.`, `:`, space, `T`
//! quoted as `'T'`) is a literal that must appear as written. Every field takes exactly its
//! number of digits. Fields absent from the pattern are the start of the period (month and
//! day 1, hour, minute and second 0). Values are UTC. A value that does not match, or names a
//! date that does not exist (`2024-02-30`), is an error naming the value and the pattern.

use chrono::{DateTime, NaiveDate, Utc};

use crate::error::{Result, TableError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

impl Field {
    fn width(self) -> usize {
        match self {
            Field::Year => 4,
            _ => 2,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Field(Field),
    Literal(char),
}

/// A compiled date pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatePattern {
    text: String,
    tokens: Vec<Token>,
}

fn bad_pattern(pattern: &str, why: &str) -> TableError {
    TableError::InvalidInput {
        column: None,
        row: None,
        reason: format!("date pattern {pattern:?}: {why}"),
    }
}

impl DatePattern {
    /// Compiles `pattern`. Errors: an unsupported letter or letter count (`yy`, `M`, `EEE`,
    /// ...), a field given twice, a pattern without a year, an unterminated quote.
    pub fn compile(pattern: &str) -> Result<DatePattern> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while let Some(&c) = chars.get(i) {
            if c == '\'' {
                let mut j = i + 1;
                loop {
                    match chars.get(j) {
                        None => return Err(bad_pattern(pattern, "unterminated quote")),
                        Some('\'') => break,
                        Some(&l) => tokens.push(Token::Literal(l)),
                    }
                    j += 1;
                }
                i = j + 1;
                continue;
            }
            if c.is_ascii_alphabetic() {
                let mut j = i;
                while chars.get(j) == Some(&c) {
                    j += 1;
                }
                let run = j - i;
                let field = match (c, run) {
                    ('y' | 'u', 4) => Field::Year,
                    ('M', 2) => Field::Month,
                    ('d', 2) => Field::Day,
                    ('H', 2) => Field::Hour,
                    ('m', 2) => Field::Minute,
                    ('s', 2) => Field::Second,
                    _ => {
                        let letters: String = std::iter::repeat_n(c, run).collect();
                        return Err(bad_pattern(
                            pattern,
                            &format!(
                                "{letters:?} is not supported (use yyyy, MM, dd, HH, mm, ss; \
                                 quote literal letters as 'T')"
                            ),
                        ));
                    }
                };
                if tokens.contains(&Token::Field(field)) {
                    return Err(bad_pattern(pattern, &format!("{field:?} appears twice")));
                }
                tokens.push(Token::Field(field));
                i = j;
                continue;
            }
            if c.is_ascii_digit() || c.is_control() {
                return Err(bad_pattern(
                    pattern,
                    &format!("{c:?} must be quoted to be a literal"),
                ));
            }
            tokens.push(Token::Literal(c));
            i += 1;
        }
        if !tokens.contains(&Token::Field(Field::Year)) {
            return Err(bad_pattern(pattern, "has no year (yyyy)"));
        }
        Ok(DatePattern {
            text: pattern.to_string(),
            tokens,
        })
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// How many path segments a value of this pattern spans (one more than its `/`s).
    pub fn segments(&self) -> usize {
        1 + self
            .tokens
            .iter()
            .filter(|t| **t == Token::Literal('/'))
            .count()
    }

    /// The UTC start of the period `value` names. Errors name the value and the pattern.
    pub fn parse(&self, value: &str) -> Result<DateTime<Utc>> {
        let bad = |why: &str| TableError::InvalidInput {
            column: None,
            row: None,
            reason: format!(
                "value {value:?} does not match date pattern {:?}: {why}",
                self.text
            ),
        };
        let mut rest = value;
        let (mut y, mut mo, mut d, mut h, mut mi, mut s) = (0i32, 1u32, 1u32, 0u32, 0u32, 0u32);
        for t in &self.tokens {
            match t {
                Token::Literal(l) => {
                    rest = rest
                        .strip_prefix(*l)
                        .ok_or_else(|| bad(&format!("expected {l:?}")))?;
                }
                Token::Field(f) => {
                    let w = f.width();
                    let digits = rest
                        .get(..w)
                        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()));
                    let Some(digits) = digits else {
                        return Err(bad(&format!("expected {w} digits for {f:?}")));
                    };
                    rest = rest.get(w..).unwrap_or_default();
                    let n: u32 = digits
                        .parse()
                        .map_err(|_| bad(&format!("{digits:?} is not a number")))?;
                    match f {
                        Field::Year => y = i32::try_from(n).map_err(|_| bad("year"))?,
                        Field::Month => mo = n,
                        Field::Day => d = n,
                        Field::Hour => h = n,
                        Field::Minute => mi = n,
                        Field::Second => s = n,
                    }
                }
            }
        }
        if !rest.is_empty() {
            return Err(bad(&format!("{rest:?} left over")));
        }
        let date = NaiveDate::from_ymd_opt(y, mo, d).ok_or_else(|| bad("no such date"))?;
        let time = date
            .and_hms_opt(h, mi, s)
            .ok_or_else(|| bad("no such time of day"))?;
        Ok(time.and_utc())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(y: i32, mo: u32, d: u32, h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, 0, 0).unwrap()
    }

    #[test]
    fn common_patterns_parse_to_the_start_of_the_period() {
        let cases = [
            ("yyyy-MM-dd", "2024-01-02", at(2024, 1, 2, 0)),
            ("yyyyMMdd", "20240102", at(2024, 1, 2, 0)),
            ("yyyy-MM-dd-HH", "2024-01-02-07", at(2024, 1, 2, 7)),
            ("yyyy/MM/dd", "2024/01/02", at(2024, 1, 2, 0)),
            ("yyyyMMddHH", "2024010223", at(2024, 1, 2, 23)),
            ("yyyy-MM", "2024-03", at(2024, 3, 1, 0)),
            ("yyyy", "2024", at(2024, 1, 1, 0)),
            ("yyyy-MM-dd'T'HH", "2024-01-02T05", at(2024, 1, 2, 5)),
            (
                "uuuu_MM_dd HH:mm:ss",
                "2024_01_02 05:00:00",
                at(2024, 1, 2, 5),
            ),
        ];
        for (p, v, t) in cases {
            let pat = DatePattern::compile(p).unwrap();
            assert_eq!(pat.parse(v).unwrap(), t, "{p} {v}");
        }
    }

    #[test]
    fn values_that_do_not_match_are_errors_naming_value_and_pattern() {
        let p = DatePattern::compile("yyyy-MM-dd").unwrap();
        for v in [
            "2024-1-02",
            "2024-01-02x",
            "2024/01/02",
            "2024-02-30",
            "abcd-01-01",
            "",
            "2024-13-01",
        ] {
            let e = p.parse(v).unwrap_err().to_string();
            assert!(e.contains(v) && e.contains("yyyy-MM-dd"), "{e}");
        }
        let h = DatePattern::compile("yyyyMMddHH").unwrap();
        assert!(h.parse("2024010224").is_err());
    }

    #[test]
    fn unsupported_patterns_are_errors() {
        for p in [
            "yy-MM-dd",
            "yyyy-M-d",
            "EEE yyyy",
            "MM-dd",
            "yyyy-'MM",
            "yyyy-yyyy",
            "yyyy1",
        ] {
            assert!(DatePattern::compile(p).is_err(), "{p} accepted");
        }
    }

    #[test]
    fn segments_count_slashes() {
        assert_eq!(DatePattern::compile("yyyy/MM/dd").unwrap().segments(), 3);
        assert_eq!(DatePattern::compile("yyyy-MM-dd").unwrap().segments(), 1);
    }
}
