//! Typed values of a filtered field ([`Value`]) and how a column's type compares them
//! ([`Kind`]): filter texts parsed exactly as the column holds them.

use std::cmp::Ordering;

use arrow::datatypes::DataType;
use chrono::NaiveDate;

use crate::read::datetime::parse_datetime;

/// A typed value of a filtered field.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Int(i128),
    Float(f64),
    /// The unscaled value at the column's scale.
    Decimal(i128),
    Bool(bool),
    /// Days since 1970-01-01.
    Date(i64),
    /// Nanoseconds since the epoch (UTC for zoned columns, wall clock for naive ones).
    Timestamp(i128),
    Str(String),
}

impl Value {
    /// The order of two values of the same variant (`None` across variants, and for NaN).
    pub(crate) fn compare(&self, other: &Value) -> Option<Ordering> {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
            (Value::Float(a), Value::Float(b)) => a.partial_cmp(b),
            (Value::Decimal(a), Value::Decimal(b)) => Some(a.cmp(b)),
            (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
            (Value::Date(a), Value::Date(b)) => Some(a.cmp(b)),
            (Value::Timestamp(a), Value::Timestamp(b)) => Some(a.cmp(b)),
            (Value::Str(a), Value::Str(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }

    /// Whether this value orders the same in Rust's and Java's order, so that bounds Hudi's
    /// Java writers computed can be compared with it: not for a string holding a character at
    /// or above `U+D800` (UTF-16 orders supplementary characters before `U+E000..U+FFFF`,
    /// code points after), nor for NaN.
    pub(crate) fn orders_like_java(&self) -> bool {
        match self {
            Value::Str(s) => s.chars().all(|c| u32::from(c) < 0xD800),
            Value::Float(f) => !f.is_nan(),
            _ => true,
        }
    }
}

/// How a field's values are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Int,
    Float,
    /// A decimal of this scale (compared exactly, unscaled).
    Decimal(i8),
    Bool,
    Date,
    Timestamp,
    Str,
}

impl Kind {
    /// The kind of a column of `data_type`; `None` for types filters cannot compare (binary,
    /// nested, 256-bit decimals, ...).
    pub(crate) fn of(data_type: &DataType) -> Option<Kind> {
        Some(match data_type {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64 => Kind::Int,
            DataType::Float16 | DataType::Float32 | DataType::Float64 => Kind::Float,
            DataType::Decimal128(_, scale) => Kind::Decimal(*scale),
            DataType::Boolean => Kind::Bool,
            DataType::Date32 | DataType::Date64 => Kind::Date,
            DataType::Timestamp(_, _) => Kind::Timestamp,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Kind::Str,
            DataType::Dictionary(_, value) => return Kind::of(value),
            _ => return None,
        })
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Kind::Int => "integer",
            Kind::Float => "number",
            Kind::Decimal(_) => "decimal number within the column's scale",
            Kind::Bool => "boolean (true or false)",
            Kind::Date => "date (yyyy-MM-dd)",
            Kind::Timestamp => "timestamp (ISO 8601, e.g. 2024-01-15T10:30:00Z)",
            Kind::Str => "string",
        }
    }

    /// `s` as a value of this kind. Numbers, booleans, dates and timestamps are read with
    /// surrounding blanks ignored; a string is taken exactly as given (filter texts are trimmed
    /// when parsed, row and partition values never are).
    pub(crate) fn parse(self, raw: &str) -> Option<Value> {
        if self == Kind::Str {
            return Some(Value::Str(raw.to_string()));
        }
        let s = raw.trim();
        match self {
            Kind::Int => s.parse::<i128>().ok().map(Value::Int),
            Kind::Float => s
                .parse::<f64>()
                .ok()
                .filter(|f| !f.is_nan())
                .map(Value::Float),
            Kind::Decimal(scale) => parse_decimal(s, scale).map(Value::Decimal),
            Kind::Bool => match s.to_ascii_lowercase().as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            Kind::Date => {
                let d = NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
                let epoch = chrono::DateTime::UNIX_EPOCH.date_naive();
                Some(Value::Date(d.signed_duration_since(epoch).num_days()))
            }
            Kind::Timestamp => {
                let t = parse_datetime(s)?.to_utc_naive().and_utc();
                let nanos = i128::from(t.timestamp()) * 1_000_000_000
                    + i128::from(t.timestamp_subsec_nanos());
                Some(Value::Timestamp(nanos))
            }
            Kind::Str => Some(Value::Str(s.to_string())),
        }
    }
}

/// `s` (`-12.5`, `3`, `1e2` is not accepted) as an unscaled decimal of `scale`; `None` when it
/// is not a decimal number or has more (non-zero) fractional digits than `scale` holds.
fn parse_decimal(s: &str, scale: i8) -> Option<i128> {
    let (negative, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && frac.is_empty() {
        return None;
    }
    if !whole
        .bytes()
        .chain(frac.bytes())
        .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let scale = usize::try_from(scale).ok()?;
    let frac = frac.trim_end_matches('0');
    if frac.len() > scale {
        return None;
    }
    let mut text = String::with_capacity(whole.len() + scale);
    text.push_str(whole);
    text.push_str(frac);
    text.extend(std::iter::repeat_n('0', scale - frac.len()));
    let unscaled = if text.is_empty() {
        0
    } else {
        text.parse::<i128>().ok()?
    };
    Some(if negative { -unscaled } else { unscaled })
}
