//! Exact parsing of text values into a table column's type.
//!
//! Text inputs (CSV fields, JSON-lines numbers taken as their original text, SQL number
//! literals and strings) carry values, not types. [`cast_text_exact`] parses each text into the
//! column's type with one parser per type, and refuses, naming the column, the row and the
//! text, any value the type cannot hold exactly, the same rule [`super::cast_exact`] applies
//! to typed (Arrow, parquet) input:
//!
//! - integers: a whole number in the type's range (`7`, `-7`, `7.0`, `7e2`); `9.7`, `300` into
//!   an `Int8`, `9223372036854775808` into an `Int64` are refused;
//! - decimals: at most the column's fraction digits once trailing zeros are dropped (`1.500`
//!   fits `decimal(10,2)`, `1.005` does not) and at most its precision in digits;
//! - floats: a number is the nearest value of the float type (text is decimal, so `0.1` means
//!   the double nearest 0.1); a number beyond the type's range (`1e400`) is refused, while the
//!   names of the non-finite values (`NaN`, `inf`, `-inf`, `Infinity`, `-Infinity`) are those
//!   values, as a parquet input may hold them;
//! - dates: a date alone (`2024-02-29`; a time would be dropped);
//! - timestamps and times: any digits finer than the column's unit must be zeros
//!   (`...00.123456789Z` into a microsecond column is refused, `...00.123456000Z` is fine).
//!
//! Other target types (strings, booleans, binaries, nested) are not parsed here.

use std::str::FromStr;
use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, Date64Array, Decimal128Array, Float32Array,
    Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, Time32MillisecondArray,
    Time32SecondArray, Time64MicrosecondArray, Time64NanosecondArray, TimestampMicrosecondArray,
    TimestampMillisecondArray, TimestampNanosecondArray, TimestampSecondArray, UInt16Array,
    UInt32Array, UInt64Array, UInt8Array,
};
use arrow::compute::kernels::cast_utils::{string_to_datetime, string_to_time_nanoseconds};
use arrow::datatypes::{DataType, TimeUnit};
use chrono::{DateTime, NaiveDate, TimeZone, Utc};

use crate::error::{Result, TableError};

/// Whether [`cast_text_exact`] parses text into `to`.
pub fn parses_text_into(to: &DataType) -> bool {
    use DataType::*;
    matches!(
        to,
        Int8 | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Float32
            | Float64
            | Decimal32(_, _)
            | Decimal64(_, _)
            | Decimal128(_, _)
            | Decimal256(_, _)
            | Date32
            | Date64
            | Time32(_)
            | Time64(_)
            | Timestamp(_, _)
    )
}

/// Whether `text` is a number in the grammar [`cast_text_exact`] reads (an optional sign,
/// digits with an optional fraction, an optional exponent), not a name such as `NaN`.
pub fn is_number_text(text: &str) -> bool {
    Number::parse(text).is_some()
}

/// Parses the text values of `array` (a `Utf8`, `LargeUtf8` or `Utf8View` column, input
/// column `column` whose first element is input row `first_row`) into `to`, exactly.
///
/// Guarantees: the result has type `to`, the length and nulls of `array`; every non-null
/// value is exactly the value the text denotes (for floats, the nearest value of the type).
/// Fails with [`TableError::InvalidInput`] naming the column, the first row at fault and its
/// text when a value is not of the type's syntax or does not fit the type exactly (see the
/// module doc), or when `to` is not one of the types [`parses_text_into`] accepts.
pub fn cast_text_exact(
    array: &ArrayRef,
    to: &DataType,
    column: &str,
    first_row: usize,
) -> Result<ArrayRef> {
    let texts: Vec<Option<&str>> = match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().iter().collect(),
        DataType::LargeUtf8 => array.as_string::<i64>().iter().collect(),
        DataType::Utf8View => array.as_string_view().iter().collect(),
        other => return Err(invalid(column, None, format!("type {other} is not text"))),
    };
    let at = |i: usize, text: &str, reason: String| {
        invalid(
            column,
            Some(first_row + i),
            format!("value {text:?} {reason}"),
        )
    };
    macro_rules! each {
        ($parse:expr) => {{
            let mut out = Vec::with_capacity(texts.len());
            for (i, t) in texts.iter().enumerate() {
                out.push(match t {
                    Some(t) => Some($parse(t).map_err(|r: String| at(i, t, r))?),
                    None => None,
                });
            }
            out
        }};
    }
    let ty = describe(to);
    let out: ArrayRef = match to {
        DataType::Int8 => Arc::new(Int8Array::from(each!(|t| int::<i8>(t, &ty)))),
        DataType::Int16 => Arc::new(Int16Array::from(each!(|t| int::<i16>(t, &ty)))),
        DataType::Int32 => Arc::new(Int32Array::from(each!(|t| int::<i32>(t, &ty)))),
        DataType::Int64 => Arc::new(Int64Array::from(each!(|t| int::<i64>(t, &ty)))),
        DataType::UInt8 => Arc::new(UInt8Array::from(each!(|t| int::<u8>(t, &ty)))),
        DataType::UInt16 => Arc::new(UInt16Array::from(each!(|t| int::<u16>(t, &ty)))),
        DataType::UInt32 => Arc::new(UInt32Array::from(each!(|t| int::<u32>(t, &ty)))),
        DataType::UInt64 => Arc::new(UInt64Array::from(each!(|t| int::<u64>(t, &ty)))),
        DataType::Float32 => Arc::new(Float32Array::from(each!(|t| parse_f32(t, &ty)))),
        DataType::Float64 => Arc::new(Float64Array::from(each!(|t| parse_f64(t, &ty)))),
        DataType::Decimal128(p, s) => {
            let values = each!(|t| decimal(t, *p, *s, &ty));
            Arc::new(
                Decimal128Array::from(values)
                    .with_precision_and_scale(*p, *s)
                    .map_err(|e| invalid(column, None, e.to_string()))?,
            )
        }
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal256(p, s) => {
            // Parsed at the column's scale into a 128-bit decimal (at most 38 digits), then
            // converted exactly.
            let p128 = (*p).min(38);
            let values = each!(|t| decimal(t, p128, *s, &ty));
            let wide: ArrayRef = Arc::new(
                Decimal128Array::from(values)
                    .with_precision_and_scale(p128, *s)
                    .map_err(|e| invalid(column, None, e.to_string()))?,
            );
            super::convert::cast_exact(&wide, to, column, first_row)?
        }
        DataType::Date32 => Arc::new(Date32Array::from(each!(|t| date32(t, &ty)))),
        DataType::Date64 => Arc::new(Date64Array::from(each!(
            |t| date32(t, &ty).map(|d| i64::from(d) * 86_400_000)
        ))),
        DataType::Timestamp(unit, zone) => {
            let tz = match zone {
                Some(z) => Some(Tz::from_str(z).map_err(|e| {
                    invalid(column, None, format!("the table's time zone {z:?}: {e}"))
                })?),
                None => None,
            };
            let parse = |t: &str| -> std::result::Result<i64, String> {
                let (secs, nanos) = match &tz {
                    Some(tz) => instant(string_to_datetime(tz, t), &ty)?,
                    None => instant(string_to_datetime(&Utc, t), &ty)?,
                };
                in_unit(secs, nanos, *unit, &ty)
            };
            let values = each!(parse);
            let zone = zone.clone();
            match unit {
                TimeUnit::Second => {
                    Arc::new(TimestampSecondArray::from(values).with_timezone_opt(zone))
                }
                TimeUnit::Millisecond => {
                    Arc::new(TimestampMillisecondArray::from(values).with_timezone_opt(zone))
                }
                TimeUnit::Microsecond => {
                    Arc::new(TimestampMicrosecondArray::from(values).with_timezone_opt(zone))
                }
                TimeUnit::Nanosecond => {
                    Arc::new(TimestampNanosecondArray::from(values).with_timezone_opt(zone))
                }
            }
        }
        DataType::Time32(unit) | DataType::Time64(unit) => {
            let parse = |t: &str| -> std::result::Result<i64, String> {
                let nanos = string_to_time_nanoseconds(t)
                    .map_err(|_| format!("is not a time of day (the table's {ty})"))?;
                let per = unit_nanos(*unit);
                if nanos % per != 0 {
                    return Err(format!(
                        "has digits finer than the table's {ty} keeps (they would be dropped)"
                    ));
                }
                Ok(nanos / per)
            };
            let values = each!(parse);
            match (to, unit) {
                (DataType::Time32(_), TimeUnit::Second) => Arc::new(Time32SecondArray::from(
                    narrow_time(values, column, first_row)?,
                )),
                (DataType::Time32(_), _) => Arc::new(Time32MillisecondArray::from(narrow_time(
                    values, column, first_row,
                )?)),
                (_, TimeUnit::Microsecond) => Arc::new(Time64MicrosecondArray::from(values)),
                _ => Arc::new(Time64NanosecondArray::from(values)),
            }
        }
        other => {
            return Err(invalid(
                column,
                None,
                format!("text is not parsed into {}", describe(other)),
            ))
        }
    };
    Ok(out)
}

fn invalid(column: &str, row: Option<usize>, reason: impl Into<String>) -> TableError {
    TableError::InvalidInput {
        column: Some(column.to_string()),
        row,
        reason: reason.into(),
    }
}

fn describe(dt: &DataType) -> String {
    match dt {
        DataType::Timestamp(unit, None) => format!("Timestamp({unit:?}) without time zone"),
        DataType::Timestamp(unit, Some(tz)) => format!("Timestamp({unit:?}, {tz})"),
        other => other.to_string(),
    }
}

fn narrow_time(
    values: Vec<Option<i64>>,
    column: &str,
    first_row: usize,
) -> Result<Vec<Option<i32>>> {
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            v.map(|v| {
                i32::try_from(v)
                    .map_err(|_| invalid(column, Some(first_row + i), "the time is out of range"))
            })
            .transpose()
        })
        .collect()
}

/// A decimal number as written: `negative`, its significant `digits` (no leading zeros; empty
/// for zero) and `exponent`: the value is `digits * 10^exponent`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Number {
    negative: bool,
    digits: Vec<u8>,
    exponent: i64,
}

impl Number {
    /// `[+-]digits[.digits][(e|E)[+-]digits]` (at least one digit before the exponent), or
    /// `None`.
    fn parse(text: &str) -> Option<Number> {
        let bytes = text.as_bytes();
        let mut i = 0;
        let negative = match bytes.first() {
            Some(b'-') => {
                i = 1;
                true
            }
            Some(b'+') => {
                i = 1;
                false
            }
            _ => false,
        };
        let mut digits: Vec<u8> = Vec::new();
        let mut seen_digit = false;
        let mut fraction_digits: i64 = 0;
        let mut in_fraction = false;
        while let Some(&b) = bytes.get(i) {
            match b {
                b'0'..=b'9' => {
                    seen_digit = true;
                    if !(digits.is_empty() && b == b'0') {
                        digits.push(b - b'0');
                    }
                    if in_fraction {
                        fraction_digits = fraction_digits.saturating_add(1);
                    }
                }
                b'.' if !in_fraction => in_fraction = true,
                _ => break,
            }
            i += 1;
        }
        if !seen_digit {
            return None;
        }
        let mut exponent: i64 = 0;
        if let Some(b'e' | b'E') = bytes.get(i) {
            i += 1;
            let exp_negative = match bytes.get(i) {
                Some(b'-') => {
                    i += 1;
                    true
                }
                Some(b'+') => {
                    i += 1;
                    false
                }
                _ => false,
            };
            let start = i;
            while let Some(&b) = bytes.get(i) {
                if !b.is_ascii_digit() {
                    break;
                }
                // Saturates far beyond any type's range, which then refuses the value.
                exponent = exponent
                    .saturating_mul(10)
                    .saturating_add(i64::from(b - b'0'))
                    .min(i64::MAX / 4);
                i += 1;
            }
            if i == start {
                return None;
            }
            if exp_negative {
                exponent = -exponent;
            }
        }
        if i != bytes.len() {
            return None;
        }
        // Digits counted after the leading zeros were dropped: a fraction digit dropped as a
        // leading zero still counted in `fraction_digits`, which is right (0.05 = 5e-2).
        let mut exponent = exponent.saturating_sub(fraction_digits);
        while digits.last() == Some(&0) {
            digits.pop();
            exponent = exponent.saturating_add(1);
        }
        if digits.is_empty() {
            exponent = 0;
        }
        Some(Number {
            negative,
            digits,
            exponent,
        })
    }

    /// The value times `10^scale` as an integer of at most `max_digits` digits, or why not.
    fn scaled(&self, scale: i64, max_digits: usize) -> std::result::Result<i128, Scaled> {
        if self.digits.is_empty() {
            return Ok(0);
        }
        let e = self.exponent.saturating_add(scale);
        if e < 0 {
            return Err(Scaled::Fraction);
        }
        let total = i64::try_from(self.digits.len())
            .unwrap_or(i64::MAX)
            .saturating_add(e);
        if total > i64::try_from(max_digits).unwrap_or(i64::MAX) || total > 38 {
            return Err(Scaled::TooManyDigits);
        }
        let mut v: i128 = 0;
        for d in &self.digits {
            v = v * 10 + i128::from(*d);
        }
        for _ in 0..e {
            v *= 10;
        }
        Ok(if self.negative { -v } else { v })
    }
}

enum Scaled {
    Fraction,
    TooManyDigits,
}

fn int<T: TryFrom<i128>>(text: &str, ty: &str) -> std::result::Result<T, String> {
    let n =
        Number::parse(text).ok_or_else(|| format!("is not a whole number (the table's {ty})"))?;
    let out_of_range = || format!("is out of the range of the table's {ty}");
    match n.scaled(0, 38) {
        Ok(v) => T::try_from(v).map_err(|_| out_of_range()),
        Err(Scaled::Fraction) => Err(format!(
            "is not a whole number (the table's {ty}): its fraction would be dropped"
        )),
        Err(Scaled::TooManyDigits) => Err(out_of_range()),
    }
}

fn decimal(text: &str, precision: u8, scale: i8, ty: &str) -> std::result::Result<i128, String> {
    let n = Number::parse(text).ok_or_else(|| format!("is not a number (the table's {ty})"))?;
    match n.scaled(i64::from(scale), usize::from(precision)) {
        Ok(v) => Ok(v),
        Err(Scaled::Fraction) => Err(format!(
            "has more fraction digits than the table's {ty} keeps (it would be rounded)"
        )),
        Err(Scaled::TooManyDigits) => Err(format!(
            "has more digits than the table's {ty} holds (out of range)"
        )),
    }
}

/// The names of the non-finite float values (case-insensitive): `NaN`, `inf`, `-inf`,
/// `Infinity`, `-Infinity` (and `+` signs).
fn non_finite(text: &str) -> Option<f64> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, text.get(1..)?),
        Some(b'+') => (false, text.get(1..)?),
        _ => (false, text),
    };
    let lower = rest.to_ascii_lowercase();
    let v = match lower.as_str() {
        "nan" => f64::NAN,
        "inf" | "infinity" => f64::INFINITY,
        _ => return None,
    };
    Some(if negative { -v } else { v })
}

/// A float type text converts to: how a non-finite value, zero and finiteness look in it.
trait TextFloat: std::str::FromStr + Copy {
    fn from_non_finite(v: f64) -> Self;
    fn is_zero(self) -> bool;
    fn is_finite_value(self) -> bool;
}

impl TextFloat for f64 {
    fn from_non_finite(v: f64) -> Self {
        v
    }
    fn is_zero(self) -> bool {
        self == 0.0
    }
    fn is_finite_value(self) -> bool {
        self.is_finite()
    }
}

impl TextFloat for f32 {
    fn from_non_finite(v: f64) -> Self {
        // Non-finite values are the same in every float type.
        v as f32
    }
    fn is_zero(self) -> bool {
        self == 0.0
    }
    fn is_finite_value(self) -> bool {
        self.is_finite()
    }
}

/// The nearest `T` of `text`; a literal that would round to 0 or to infinity is an error.
fn parse_float<T: TextFloat>(text: &str, ty: &str) -> std::result::Result<T, String> {
    if let Some(v) = non_finite(text) {
        return Ok(T::from_non_finite(v));
    }
    if !is_number_text(text) {
        return Err(format!("is not a number (the table's {ty})"));
    }
    let v: T = text
        .parse()
        .map_err(|_| format!("is not a number (the table's {ty})"))?;
    let nonzero = Number::parse(text).is_some_and(|n| !n.digits.is_empty());
    if v.is_zero() && nonzero {
        return Err(format!(
            "is too small for the table's {ty} (it would become 0)"
        ));
    }
    if v.is_finite_value() {
        Ok(v)
    } else {
        Err(format!("is beyond the range of the table's {ty}"))
    }
}

fn parse_f64(text: &str, ty: &str) -> std::result::Result<f64, String> {
    parse_float(text, ty)
}

fn parse_f32(text: &str, ty: &str) -> std::result::Result<f32, String> {
    parse_float(text, ty)
}

fn date32(text: &str, ty: &str) -> std::result::Result<i32, String> {
    let not_a_date =
        || format!("is not a date (yyyy-MM-dd; the table's {ty}, a time of day would be dropped)");
    let d = NaiveDate::from_str(text).map_err(|_| not_a_date())?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).ok_or_else(not_a_date)?;
    i32::try_from(d.signed_duration_since(epoch).num_days()).map_err(|_| not_a_date())
}

fn instant<T: TimeZone>(
    parsed: std::result::Result<DateTime<T>, arrow::error::ArrowError>,
    ty: &str,
) -> std::result::Result<(i64, u32), String> {
    let dt = parsed.map_err(|_| format!("is not a timestamp (the table's {ty})"))?;
    Ok((dt.timestamp(), dt.timestamp_subsec_nanos()))
}

fn unit_nanos(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

fn in_unit(secs: i64, nanos: u32, unit: TimeUnit, ty: &str) -> std::result::Result<i64, String> {
    let per = unit_nanos(unit);
    let nanos = i64::from(nanos);
    if nanos % per != 0 {
        return Err(format!(
            "has digits finer than the table's {ty} keeps (they would be dropped)"
        ));
    }
    let per_second = 1_000_000_000 / per;
    secs.checked_mul(per_second)
        .and_then(|v| v.checked_add(nanos / per))
        .ok_or_else(|| format!("is out of the range of the table's {ty}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use arrow::array::StringArray;
    use arrow::datatypes::{Decimal128Type, Float32Type, Float64Type, Int64Type, Int8Type};
    use proptest::prelude::*;

    fn one(text: &str, to: &DataType) -> Result<ArrayRef> {
        let a: ArrayRef = Arc::new(StringArray::from(vec![Some("0"), None, Some(text)]));
        let a = if matches!(to, DataType::Date32 | DataType::Timestamp(_, _)) {
            Arc::new(StringArray::from(vec![None, None, Some(text)])) as ArrayRef
        } else {
            a
        };
        cast_text_exact(&a, to, "c", 10)
    }

    fn refused(text: &str, to: &DataType) -> String {
        match one(text, to) {
            Err(TableError::InvalidInput {
                column,
                row,
                reason,
            }) => {
                assert_eq!(column.as_deref(), Some("c"));
                assert_eq!(row, Some(12));
                assert!(reason.contains(&format!("{text:?}")), "{reason}");
                reason
            }
            other => panic!("{text} into {to}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn test_decimals_exact_trailing_zeros_fine() {
        let to = DataType::Decimal128(10, 2);
        let out = one("1.500", &to).unwrap();
        assert_eq!(out.as_primitive::<Decimal128Type>().value(2), 150);
        let out = one("-0.05", &to).unwrap();
        assert_eq!(out.as_primitive::<Decimal128Type>().value(2), -5);
        let out = one("1.2e3", &to).unwrap();
        assert_eq!(out.as_primitive::<Decimal128Type>().value(2), 120_000);
        assert!(refused("1.005", &to).contains("fraction digits"));
        assert!(refused("123456789.5", &to).contains("more digits"));
        refused("1e400", &to);
        refused("abc", &to);
    }

    #[test]
    fn test_integers_in_range_only() {
        let out = one("127", &DataType::Int8).unwrap();
        assert_eq!(out.as_primitive::<Int8Type>().value(2), 127);
        refused("300", &DataType::Int8);
        refused("9223372036854775808", &DataType::Int64);
        let out = one("-9223372036854775808", &DataType::Int64).unwrap();
        assert_eq!(out.as_primitive::<Int64Type>().value(2), i64::MIN);
        assert_eq!(
            one("7.0", &DataType::Int64)
                .unwrap()
                .as_primitive::<Int64Type>()
                .value(2),
            7
        );
        refused("9.7", &DataType::Int64);
        refused("1e30", &DataType::Int64);
        refused("", &DataType::Int64);
        refused(" 7", &DataType::Int64);
    }

    #[test]
    fn test_floats_nearest_or_refused_beyond_range() {
        let out = one("0.1", &DataType::Float64).unwrap();
        assert_eq!(out.as_primitive::<Float64Type>().value(2), 0.1);
        let out = one("0.1", &DataType::Float32).unwrap();
        assert_eq!(out.as_primitive::<Float32Type>().value(2), 0.1f32);
        assert!(refused("1e400", &DataType::Float64).contains("beyond the range"));
        refused("1e39", &DataType::Float32);
        refused("1e-50", &DataType::Float32);
        refused("1e-400", &DataType::Float64);
        let out = one("NaN", &DataType::Float64).unwrap();
        assert!(out.as_primitive::<Float64Type>().value(2).is_nan());
        let out = one("-inf", &DataType::Float64).unwrap();
        assert_eq!(
            out.as_primitive::<Float64Type>().value(2),
            f64::NEG_INFINITY
        );
        refused("0x10", &DataType::Float64);
    }

    #[test]
    fn test_timestamps_dates_sub_unit_digits() {
        let us = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        one("2024-01-01T00:00:00.123456Z", &us).unwrap();
        one("2024-01-01T00:00:00.123456000Z", &us).unwrap();
        one("3000-01-01 00:00:00", &us).unwrap();
        assert!(refused("2024-01-01T00:00:00.123456789Z", &us).contains("finer"));
        let naive = DataType::Timestamp(TimeUnit::Microsecond, None);
        one("2024-01-01T00:00:00.5", &naive).unwrap();
        refused("2024-01-01T00:00:00.0000001", &naive);
        one("2024-02-29", &DataType::Date32).unwrap();
        refused("2023-02-29", &DataType::Date32);
        refused("2024-01-01T10:00:00", &DataType::Date32);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// An i64 as text: into each integer type exactly when it is in range.
        #[test]
        fn prop_integer_text_in_range_iff_fits(v in prop_oneof![
            any::<i64>(),
            -70_000i64..70_000,
            Just(i64::MAX),
            Just(i64::MIN),
        ]) {
            let text = v.to_string();
            let r8 = one(&text, &DataType::Int8);
            prop_assert_eq!(r8.is_ok(), i8::try_from(v).is_ok());
            let r16 = one(&text, &DataType::Int16);
            prop_assert_eq!(r16.is_ok(), i16::try_from(v).is_ok());
            let r32 = one(&text, &DataType::Int32);
            prop_assert_eq!(r32.is_ok(), i32::try_from(v).is_ok());
            let r64 = one(&text, &DataType::Int64).unwrap();
            prop_assert_eq!(r64.as_primitive::<Int64Type>().value(2), v);
            let beyond = format!("{}0", text);
            prop_assert_eq!(one(&beyond, &DataType::Int64).is_ok(), v.checked_mul(10).is_some());
        }

        /// A decimal written with any scale and trailing zeros: accepted into decimal(p, s)
        /// exactly when no nonzero digit lies beyond `s` and the digits fit `p`.
        #[test]
        fn prop_decimal_text_exact(
            m in prop_oneof![any::<i64>().prop_map(i128::from), Just(i128::from(i64::MAX) * 1000)],
            in_scale in 0u32..20,
            zeros in 0usize..4,
            p in 1u8..=38,
            s in 0i8..=12,
        ) {
            let s = s.min(p as i8);
            let negative = m < 0;
            let abs = m.unsigned_abs().to_string();
            let width = in_scale as usize + 1;
            let padded = format!("{abs:0>width$}");
            let (int_part, frac_part) = padded.split_at(padded.len() - in_scale as usize);
            let mut text = format!("{}{}", if negative { "-" } else { "" }, int_part);
            if in_scale > 0 || zeros > 0 {
                text.push('.');
                text.push_str(frac_part);
                text.push_str(&"0".repeat(zeros));
            }
            // Expected: m / 10^in_scale at scale s.
            let expected = if (s as u32) >= in_scale {
                m.checked_mul(10i128.pow(s as u32 - in_scale))
            } else {
                let d = 10i128.pow(in_scale - s as u32);
                if m % d == 0 { Some(m / d) } else { None }
            }
            .filter(|v| v.unsigned_abs() < 10u128.pow(u32::from(p)));
            let to = DataType::Decimal128(p, s);
            match (one(&text, &to), expected) {
                (Ok(a), Some(v)) => prop_assert_eq!(a.as_primitive::<Decimal128Type>().value(2), v),
                (Err(_), None) => {}
                (got, want) => prop_assert!(false, "{} into {}: got {:?}, want {:?}", text, to, got.is_ok(), want),
            }
        }

        /// The shortest text of any finite double reads back as that double; of a float, as
        /// that float.
        #[test]
        fn prop_float_text_round_trips(bits in any::<u64>(), bits32 in any::<u32>()) {
            let v = f64::from_bits(bits);
            let text = format!("{v:?}");
            let out = one(&text, &DataType::Float64).unwrap();
            let got = out.as_primitive::<Float64Type>().value(2);
            prop_assert!(got.to_bits() == v.to_bits() || (v.is_nan() && got.is_nan()), "{}", text);
            let f = f32::from_bits(bits32);
            let text = format!("{f:?}");
            let out = one(&text, &DataType::Float32).unwrap();
            let got = out.as_primitive::<Float32Type>().value(2);
            prop_assert!(got.to_bits() == f.to_bits() || (f.is_nan() && got.is_nan()), "{}", text);
        }
    }
}
