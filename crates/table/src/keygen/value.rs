//! One column value as the string Java puts in a key or a partition path, and Hive's escaping
//! of partition values.

use arrow::datatypes::{
    DataType, Int16Type, Int32Type, Int64Type, Int8Type, TimeUnit, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Decimal128Type, Decimal256Type, Float32Type, Float64Type,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use arrow_array::Array;

use super::config::TimestampKeyFormat;
use super::config::DEFAULT_PARTITION_PATH;

/// Escapes a partition value as Hive (and Hudi's `PartitionPathEncodeUtils.escapePathName`)
/// does: control characters, DEL and `"#%'*/:=?\{[]^` become `%XX` (upper-case hex); other
/// characters, non-ASCII included, stay. An empty value becomes [`DEFAULT_PARTITION_PATH`].
pub fn escape_partition_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    push_escaped_partition_value(&mut out, value);
    out
}

/// Appends `value` to `out` escaped as [`escape_partition_value`] does, without allocating
/// when nothing needs escaping.
pub(super) fn push_escaped_partition_value(out: &mut String, value: &str) {
    if value.is_empty() {
        out.push_str(DEFAULT_PARTITION_PATH);
        return;
    }
    let escaped = |c: char| {
        (c as u32) < 0x20
            || c == '\u{7F}'
            || matches!(
                c,
                '"' | '#' | '%' | '\'' | '*' | '/' | ':' | '=' | '?' | '\\' | '{' | '[' | ']' | '^'
            )
    };
    if !value.chars().any(escaped) {
        out.push_str(value);
        return;
    }
    for c in value.chars() {
        if escaped(c) {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
}

/// The value of a string column at `row`, borrowed: `Some(None)` for null, `Some(Some(v))`
/// for a value; `None` when the column is not a string column (or `row` is out of range), and
/// [`value_string`] must format it. Lets keys and partition paths skip a copy per row.
pub(super) fn borrowed_str(array: &dyn Array, row: usize) -> Option<Option<&str>> {
    if row >= array.len() {
        return None;
    }
    let value = match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().value(row),
        DataType::LargeUtf8 => array.as_string::<i64>().value(row),
        DataType::Utf8View => array.as_string_view().value(row),
        _ => return None,
    };
    Some(array.is_valid(row).then_some(value))
}

/// The Java string of one value; `Ok(None)` for null, `Err(reason)` for a type that cannot be a
/// key.
pub(super) fn value_string(
    array: &dyn Array,
    row: usize,
    timestamps: TimestampKeyFormat,
) -> std::result::Result<Option<String>, String> {
    if row >= array.len() {
        return Err(format!(
            "row {row} beyond the column's {} rows",
            array.len()
        ));
    }
    if array.is_null(row) {
        return Ok(None);
    }
    let s = match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().value(row).to_string(),
        DataType::LargeUtf8 => array.as_string::<i64>().value(row).to_string(),
        DataType::Utf8View => array.as_string_view().value(row).to_string(),
        DataType::Boolean => array.as_boolean().value(row).to_string(),
        DataType::Int8 => array.as_primitive::<Int8Type>().value(row).to_string(),
        DataType::Int16 => array.as_primitive::<Int16Type>().value(row).to_string(),
        DataType::Int32 => array.as_primitive::<Int32Type>().value(row).to_string(),
        DataType::Int64 => array.as_primitive::<Int64Type>().value(row).to_string(),
        DataType::UInt8 => array.as_primitive::<UInt8Type>().value(row).to_string(),
        DataType::UInt16 => array.as_primitive::<UInt16Type>().value(row).to_string(),
        DataType::UInt32 => array.as_primitive::<UInt32Type>().value(row).to_string(),
        DataType::UInt64 => array.as_primitive::<UInt64Type>().value(row).to_string(),
        DataType::Float32 => {
            let v = array.as_primitive::<Float32Type>().value(row);
            java_float_string(
                v.is_nan(),
                v.is_infinite(),
                v.is_sign_negative(),
                &format!("{v:e}"),
            )
        }
        DataType::Float64 => {
            let v = array.as_primitive::<Float64Type>().value(row);
            java_float_string(
                v.is_nan(),
                v.is_infinite(),
                v.is_sign_negative(),
                &format!("{v:e}"),
            )
        }
        DataType::Date32 => iso_date(i64::from(array.as_primitive::<Date32Type>().value(row))),
        DataType::Date64 => {
            let ms = array.as_primitive::<Date64Type>().value(row);
            iso_date(ms.div_euclid(86_400_000))
        }
        DataType::Timestamp(unit, _) => {
            let micros = match unit {
                TimeUnit::Second => array
                    .as_primitive::<TimestampSecondType>()
                    .value(row)
                    .checked_mul(1_000_000),
                TimeUnit::Millisecond => array
                    .as_primitive::<TimestampMillisecondType>()
                    .value(row)
                    .checked_mul(1_000),
                TimeUnit::Microsecond => {
                    Some(array.as_primitive::<TimestampMicrosecondType>().value(row))
                }
                TimeUnit::Nanosecond => Some(
                    array
                        .as_primitive::<TimestampNanosecondType>()
                        .value(row)
                        .div_euclid(1_000),
                ),
            }
            .ok_or_else(|| "timestamp out of range".to_string())?;
            match timestamps {
                TimestampKeyFormat::EpochMicros => micros.to_string(),
                // Spark: new java.sql.Timestamp(micros / 1000) (Java division truncates).
                TimestampKeyFormat::SqlTimestampUtc => sql_timestamp(micros / 1000),
            }
        }
        DataType::Decimal128(_, scale) => {
            let v = array.as_primitive::<Decimal128Type>().value(row);
            java_big_decimal(&v.to_string(), i64::from(*scale))
        }
        DataType::Decimal256(_, scale) => {
            let v = array.as_primitive::<Decimal256Type>().value(row);
            java_big_decimal(&v.to_string(), i64::from(*scale))
        }
        other => return Err(format!("a {other} value cannot be used in a key")),
    };
    Ok(Some(s))
}

/// Java's `Double.toString`/`Float.toString` (JDK 19+, shortest round-trip digits) from Rust's
/// shortest `{:e}` form (`1.2345e3`).
fn java_float_string(nan: bool, infinite: bool, negative: bool, sci: &str) -> String {
    if nan {
        return "NaN".into();
    }
    if infinite {
        return if negative { "-Infinity" } else { "Infinity" }.into();
    }
    let body = sci.strip_prefix('-').unwrap_or(sci);
    let sign = if negative { "-" } else { "" };
    let (mantissa, exp) = body.split_once('e').unwrap_or((body, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    if digits == "0" {
        return format!("{sign}0.0");
    }
    // value = 0.d1d2d3... * 10^(exp+1)
    if (-3..7).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        if point <= 0 {
            let zeros = "0".repeat(usize::try_from(-point).unwrap_or(0));
            format!("{sign}0.{zeros}{digits}")
        } else {
            let point = usize::try_from(point).unwrap_or(0);
            let int_part: String = digits.chars().take(point).collect();
            let frac: String = digits.chars().skip(point).collect();
            let int_part = format!("{int_part:0<point$}");
            let frac = if frac.is_empty() {
                "0".to_string()
            } else {
                frac
            };
            format!("{sign}{int_part}.{frac}")
        }
    } else {
        let first: String = digits.chars().take(1).collect();
        let rest: String = digits.chars().skip(1).collect();
        let rest = if rest.is_empty() {
            "0".to_string()
        } else {
            rest
        };
        format!("{sign}{first}.{rest}E{exp}")
    }
}

/// Java's `BigDecimal.toString` of `unscaled × 10^-scale`.
fn java_big_decimal(unscaled: &str, scale: i64) -> String {
    let (sign, coeff) = match unscaled.strip_prefix('-') {
        Some(c) => ("-", c),
        None => ("", unscaled),
    };
    let len = i64::try_from(coeff.len()).unwrap_or(i64::MAX);
    let adjusted = -scale + (len - 1);
    if scale == 0 {
        return format!("{sign}{coeff}");
    }
    if scale > 0 && adjusted >= -6 {
        let scale_u = usize::try_from(scale).unwrap_or(0);
        if coeff.len() > scale_u {
            let (int_part, frac) = coeff.split_at(coeff.len() - scale_u);
            format!("{sign}{int_part}.{frac}")
        } else {
            let zeros = "0".repeat(scale_u - coeff.len());
            format!("{sign}0.{zeros}{coeff}")
        }
    } else {
        let mut chars = coeff.chars();
        let first: String = chars.by_ref().take(1).collect();
        let rest: String = chars.collect();
        let mantissa = if rest.is_empty() {
            first
        } else {
            format!("{first}.{rest}")
        };
        let exp_sign = if adjusted >= 0 { "+" } else { "" };
        format!("{sign}{mantissa}E{exp_sign}{adjusted}")
    }
}

/// Civil date of a day count since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (y, m as u32, d as u32)
}

/// Java's `LocalDate.toString`: `yyyy-MM-dd`, years beyond 9999 with `+`, negative with `-`.
fn iso_date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    let year = if y > 9999 {
        format!("+{y}")
    } else if y < 0 {
        format!("-{:04}", -y)
    } else {
        format!("{y:04}")
    };
    format!("{year}-{m:02}-{d:02}")
}

/// Java's `java.sql.Timestamp.toString()` in UTC for milliseconds since the epoch.
pub(super) fn sql_timestamp(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let ms_of_day = millis.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, ms) = (
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000,
    );
    let frac = if ms == 0 {
        "0".to_string()
    } else {
        format!("{:09}", ms * 1_000_000)
            .trim_end_matches('0')
            .to_string()
    };
    format!("{y:04}-{m:02}-{d:02} {h:02}:{min:02}:{s:02}.{frac}")
}
