//! One filter resolved against a table: where the field lives (partition path, partition
//! field, other column), its kind, typed values, and whether the table's partition paths hold
//! the field's values at all.

use std::cmp::Ordering;

use arbor_timeline::config::keys;
use arbor_timeline::TableConfig;
use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::datatypes::{
    DataType, Decimal128Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use chrono::NaiveDate;

use super::spec::FilterOp;
use crate::error::{Result, TableError};
use crate::keygen::DEFAULT_PARTITION_PATH;
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

/// Where a filter's field lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// `_hoodie_partition_path`: the raw partition path.
    PartitionPath,
    /// Partition field `i` (of `hoodie.table.partition.fields`).
    PartitionField(usize),
    /// Any other column of the read schema: rows only.
    Column,
}

/// One filter, resolved against the table.
#[derive(Debug, Clone)]
pub(crate) struct Compiled {
    pub(crate) source: Source,
    pub(crate) name: String,
    pub(crate) kind: Kind,
    pub(crate) op: FilterOp,
    pub(crate) values: Vec<Value>,
    /// The field's column in the read schema, when it has one: the filter is applied to rows.
    pub(crate) column: Option<String>,
    /// Whether partition paths hold the field's values as its column renders them.
    pub(crate) prunes: bool,
}

impl Compiled {
    /// Whether a partition path value may hold rows the filter holds for.
    pub(crate) fn matches(&self, value: &str) -> bool {
        match self.op {
            // Hudi writes null (and empty) partition values as the default partition.
            FilterOp::IsNull => value == DEFAULT_PARTITION_PATH,
            FilterOp::IsNotNull => true,
            // The default partition also holds the rows whose string value is empty.
            _ if value == DEFAULT_PARTITION_PATH && self.kind == Kind::Str => {
                self.holds(&Value::Str(String::new())) || self.holds(&Value::Str(value.to_string()))
            }
            _ => self.kind.parse(value).is_some_and(|v| self.holds(&v)),
        }
    }

    /// Whether the filter holds for the non-null value `v`.
    pub(crate) fn holds(&self, v: &Value) -> bool {
        let cmp = |x: &Value| v.compare(x);
        match self.op {
            FilterOp::IsNull => false,
            FilterOp::IsNotNull => true,
            FilterOp::In => self.values.iter().any(|x| cmp(x) == Some(Ordering::Equal)),
            op => self.values.first().and_then(cmp).is_some_and(|o| match op {
                FilterOp::Eq => o == Ordering::Equal,
                FilterOp::Ne => o != Ordering::Equal,
                FilterOp::Lt => o == Ordering::Less,
                FilterOp::Le => o != Ordering::Greater,
                FilterOp::Gt => o == Ordering::Greater,
                FilterOp::Ge => o != Ordering::Less,
                FilterOp::In | FilterOp::IsNull | FilterOp::IsNotNull => false,
            }),
        }
    }

    /// Whether each row of `column` satisfies the filter (SQL: a comparison with null is not
    /// true; `IS NULL` holds for nulls only).
    pub(crate) fn row_mask(&self, column: &ArrayRef) -> Result<BooleanArray> {
        let err = |e: arrow::error::ArrowError| TableError::InvalidInput {
            column: Some(self.name.clone()),
            row: None,
            reason: format!("cannot compare the column's values with the filter: {e}"),
        };
        match self.op {
            FilterOp::IsNull => return arrow::compute::is_null(column).map_err(err),
            FilterOp::IsNotNull => return arrow::compute::is_not_null(column).map_err(err),
            _ => {}
        }
        let keep = |v: Option<Value>| Some(v.is_some_and(|v| self.holds(&v)));
        Ok(match (self.kind, column.data_type()) {
            (Kind::Timestamp, DataType::Timestamp(unit, _)) => {
                let per = match unit {
                    TimeUnit::Second => 1_000_000_000i128,
                    TimeUnit::Millisecond => 1_000_000,
                    TimeUnit::Microsecond => 1_000,
                    TimeUnit::Nanosecond => 1,
                };
                let raw: Vec<Option<i64>> = match unit {
                    TimeUnit::Second => column
                        .as_primitive::<TimestampSecondType>()
                        .iter()
                        .collect(),
                    TimeUnit::Millisecond => column
                        .as_primitive::<TimestampMillisecondType>()
                        .iter()
                        .collect(),
                    TimeUnit::Microsecond => column
                        .as_primitive::<TimestampMicrosecondType>()
                        .iter()
                        .collect(),
                    TimeUnit::Nanosecond => column
                        .as_primitive::<TimestampNanosecondType>()
                        .iter()
                        .collect(),
                };
                raw.into_iter()
                    .map(|v| keep(v.map(|v| Value::Timestamp(i128::from(v) * per))))
                    .collect()
            }
            (Kind::Date, _) => {
                let days = arrow::compute::cast(column, &DataType::Date32).map_err(err)?;
                days.as_primitive::<arrow::datatypes::Date32Type>()
                    .iter()
                    .map(|v| keep(v.map(|d| Value::Date(i64::from(d)))))
                    .collect()
            }
            (Kind::Decimal(_), DataType::Decimal128(_, _)) => column
                .as_primitive::<Decimal128Type>()
                .iter()
                .map(|v| keep(v.map(Value::Decimal)))
                .collect(),
            (Kind::Int, _) if column.data_type() != &DataType::UInt64 => {
                let i = arrow::compute::cast(column, &DataType::Int64).map_err(err)?;
                i.as_primitive::<arrow::datatypes::Int64Type>()
                    .iter()
                    .map(|v| keep(v.map(|v| Value::Int(i128::from(v)))))
                    .collect()
            }
            (Kind::Int, _) => column
                .as_primitive::<arrow::datatypes::UInt64Type>()
                .iter()
                .map(|v| keep(v.map(|v| Value::Int(i128::from(v)))))
                .collect(),
            (Kind::Float, _) => {
                let f = arrow::compute::cast(column, &DataType::Float64).map_err(err)?;
                f.as_primitive::<arrow::datatypes::Float64Type>()
                    .iter()
                    .map(|v| keep(v.map(Value::Float)))
                    .collect()
            }
            (Kind::Bool, _) => {
                let b = arrow::compute::cast(column, &DataType::Boolean).map_err(err)?;
                b.as_boolean()
                    .iter()
                    .map(|v| keep(v.map(Value::Bool)))
                    .collect()
            }
            _ => {
                let text = arrow::compute::cast(column, &DataType::Utf8).map_err(err)?;
                text.as_string::<i32>()
                    .iter()
                    .map(|v| keep(v.and_then(|v| self.kind.parse(v))))
                    .collect()
            }
        })
    }
}

/// Whether the partition paths of a table hold the values of partition field `spec` (a name of
/// `hoodie.table.partition.fields`, `name:TYPE` for the custom key generator) as its column
/// renders them: not for the timestamp-based key generator, which formats them.
pub(super) fn paths_hold_values(config: &TableConfig, spec: &str) -> bool {
    let timestamp_keygen = config
        .get(keys::KEY_GENERATOR_TYPE)
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("TIMESTAMP"))
        || config
            .get(keys::KEY_GENERATOR_CLASS)
            .is_some_and(|c| c.contains("TimestampBased"));
    let timestamp_part = spec
        .split_once(':')
        .is_some_and(|(_, t)| t.trim().eq_ignore_ascii_case("TIMESTAMP"));
    !timestamp_keygen && !timestamp_part
}
