//! One filter resolved against a table: the field's position and kind, typed values, and
//! whether the table's partition paths hold the field's values at all.

use std::cmp::Ordering;

use arbor_timeline::config::keys;
use arbor_timeline::TableConfig;
use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::datatypes::{
    DataType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use chrono::NaiveDate;

use super::spec::FilterOp;
use crate::error::{Result, TableError};
use crate::read::datetime::parse_datetime;

/// A typed value of a partition field.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    Int(i128),
    Float(f64),
    /// Days since 1970-01-01.
    Date(i64),
    /// Nanoseconds since the epoch (UTC for zoned columns, wall clock for naive ones).
    Timestamp(i128),
    Str(String),
}

impl Value {
    fn compare(&self, other: &Value) -> Option<Ordering> {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
            (Value::Float(a), Value::Float(b)) => a.partial_cmp(b),
            (Value::Date(a), Value::Date(b)) => Some(a.cmp(b)),
            (Value::Timestamp(a), Value::Timestamp(b)) => Some(a.cmp(b)),
            (Value::Str(a), Value::Str(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }
}

/// How a field's values are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Int,
    Float,
    Date,
    Timestamp,
    Str,
}

impl Kind {
    pub(super) fn of(data_type: &DataType) -> Kind {
        match data_type {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64 => Kind::Int,
            DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal128(_, _)
            | DataType::Decimal256(_, _) => Kind::Float,
            DataType::Date32 | DataType::Date64 => Kind::Date,
            DataType::Timestamp(_, _) => Kind::Timestamp,
            _ => Kind::Str,
        }
    }

    pub(super) fn describe(self) -> &'static str {
        match self {
            Kind::Int => "integer",
            Kind::Float => "number",
            Kind::Date => "date (yyyy-MM-dd)",
            Kind::Timestamp => "timestamp (ISO 8601, e.g. 2024-01-15T10:30:00Z)",
            Kind::Str => "string",
        }
    }

    pub(super) fn parse(self, s: &str) -> Option<Value> {
        let s = s.trim();
        match self {
            Kind::Int => s.parse::<i128>().ok().map(Value::Int),
            Kind::Float => s.parse::<f64>().ok().map(Value::Float),
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

/// One filter, resolved against the table.
#[derive(Debug, Clone)]
pub(super) struct Compiled {
    /// Index of the field among the partition fields; `None` for `_hoodie_partition_path`.
    pub(super) field: Option<usize>,
    pub(super) name: String,
    pub(super) kind: Kind,
    pub(super) op: FilterOp,
    pub(super) values: Vec<Value>,
    /// The field's column in the read schema, when it has one: the filter is applied to rows.
    pub(super) column: Option<String>,
    /// Whether partition paths hold the field's values as its column renders them.
    pub(super) prunes: bool,
}

impl Compiled {
    pub(super) fn matches(&self, value: &str) -> bool {
        self.kind.parse(value).is_some_and(|v| self.holds(&v))
    }

    fn holds(&self, v: &Value) -> bool {
        let cmp = |x: &Value| v.compare(x);
        match self.op {
            FilterOp::In => self.values.iter().any(|x| cmp(x) == Some(Ordering::Equal)),
            op => self.values.first().and_then(cmp).is_some_and(|o| match op {
                FilterOp::Eq => o == Ordering::Equal,
                FilterOp::Ne => o != Ordering::Equal,
                FilterOp::Lt => o == Ordering::Less,
                FilterOp::Le => o != Ordering::Greater,
                FilterOp::Gt => o == Ordering::Greater,
                FilterOp::Ge => o != Ordering::Less,
                FilterOp::In => false,
            }),
        }
    }

    /// Whether each row of `column` satisfies the filter (nulls do not).
    pub(super) fn row_mask(&self, column: &ArrayRef) -> Result<BooleanArray> {
        let err = |e: arrow::error::ArrowError| TableError::InvalidInput {
            column: Some(self.name.clone()),
            row: None,
            reason: format!("cannot compare the column's values with the filter: {e}"),
        };
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
            (Kind::Float, _) => {
                let f = arrow::compute::cast(column, &DataType::Float64).map_err(err)?;
                f.as_primitive::<arrow::datatypes::Float64Type>()
                    .iter()
                    .map(|v| keep(v.map(Value::Float)))
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
