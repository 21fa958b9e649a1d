//! Partition filters: predicates on partition fields, evaluated on partition paths before
//! any file of a partition is listed or read (partition pruning), and on the rows read.
//!
//! Pruning: a partition path is split into one value per partition field. Hive-style paths
//! (`a=1/b=x`) are split at the segments that start with the next field's `name=`, so a value
//! holding `/` (written without `hoodie.datasource.write.partitionpath.urlencode`) stays whole;
//! other paths are split on `/` (a table with one partition field takes the whole path as the
//! value, e.g. `2024/01/31`). With the table's URL-encoding flag each value is percent-decoded.
//! A path that cannot be split unambiguously (plain segments, several fields, more segments
//! than fields) is not pruned. Paths are not values when a key generator formats them
//! (`TimestampBasedKeyGenerator`, `field:TIMESTAMP` of the custom key generator) and for
//! timestamp columns; filters on such fields prune nothing.
//!
//! Rows: every filter on a field that is a column of the read schema is also applied to the
//! rows read (as Spark does when it cannot prune), so the answer is the same whether or not a
//! partition could be pruned; a filter on a field that is not a column (partition columns
//! dropped from the data files: `hoodie.datasource.write.drop.partition.columns`) relies on
//! pruning alone, and a path it cannot split is
//! [`TableError::InvalidInput`] naming the path. The pseudo field `_hoodie_partition_path`
//! is the raw partition path.
//!
//! Values compare as strings, or typed when the field's column in the read schema is an
//! integer, floating-point, decimal, date or timestamp column (filter values of dates and
//! timestamps in ISO 8601, see [`parse_datetime`]; a zone-less time is UTC for a column with
//! a time zone and the wall-clock value for one without). A value that does not parse as the
//! field's type (e.g. `__HIVE_DEFAULT_PARTITION__` for an integer field), and a null, match no
//! filter (SQL's comparison with null).

use std::cmp::Ordering;

use arbor_format::meta;
use arbor_timeline::config::keys;
use arbor_timeline::TableConfig;
use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::SchemaRef;
use arrow::datatypes::{
    DataType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use chrono::NaiveDate;

use super::datetime::parse_datetime;
use crate::error::{Result, TableError};

/// A comparison of a [`PartitionFilter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterOp {
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `IN (v1, v2, ...)`
    In,
}

impl FilterOp {
    /// The operator's symbol (`=`, `!=`, `<`, `<=`, `>`, `>=`, `IN`).
    pub fn symbol(self) -> &'static str {
        match self {
            FilterOp::Eq => "=",
            FilterOp::Ne => "!=",
            FilterOp::Lt => "<",
            FilterOp::Le => "<=",
            FilterOp::Gt => ">",
            FilterOp::Ge => ">=",
            FilterOp::In => "IN",
        }
    }
}

/// A predicate on one partition field: `field op value`, or `field IN (values)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionFilter {
    /// The partition field (a name of `hoodie.table.partition.fields`, or
    /// `_hoodie_partition_path`).
    pub field: String,
    /// The comparison.
    pub op: FilterOp,
    /// The value compared with (one for every operator but `IN`, which takes any number).
    pub values: Vec<String>,
}

impl PartitionFilter {
    /// `field op value`.
    pub fn new(field: impl Into<String>, op: FilterOp, value: impl Into<String>) -> Self {
        PartitionFilter {
            field: field.into(),
            op,
            values: vec![value.into()],
        }
    }

    /// `field = value`.
    pub fn eq(field: impl Into<String>, value: impl Into<String>) -> Self {
        Self::new(field, FilterOp::Eq, value)
    }

    /// `field IN (values)`.
    pub fn is_in<I, S>(field: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PartitionFilter {
            field: field.into(),
            op: FilterOp::In,
            values: values.into_iter().map(Into::into).collect(),
        }
    }

    /// Parses `FIELD<op>VALUE` with op one of `!=`, `<=`, `>=`, `=`, `<`, `>`, or
    /// `FIELD IN V1,V2,...`. A text without an operator, field or value is
    /// [`TableError::InvalidInput`] quoting it.
    pub fn parse(text: &str) -> Result<Self> {
        let invalid = || TableError::InvalidInput {
            column: None,
            row: None,
            reason: format!(
                "partition filter {text:?} is not FIELD=VALUE (or !=, <, <=, >, >=, FIELD IN A,B)"
            ),
        };
        if let Some((field, values)) = split_in(text) {
            let values: Vec<String> = values
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            if field.is_empty() || values.is_empty() {
                return Err(invalid());
            }
            return Ok(Self::is_in(field, values));
        }
        for (symbol, op) in [
            ("!=", FilterOp::Ne),
            ("<=", FilterOp::Le),
            (">=", FilterOp::Ge),
            ("=", FilterOp::Eq),
            ("<", FilterOp::Lt),
            (">", FilterOp::Gt),
        ] {
            if let Some((field, value)) = text.split_once(symbol) {
                let field = field.trim();
                if field.is_empty() {
                    return Err(invalid());
                }
                return Ok(Self::new(field, op, value.trim()));
            }
        }
        Err(invalid())
    }
}

/// `FIELD IN VALUES` (case-insensitive `IN`, surrounded by spaces; parentheses optional).
fn split_in(text: &str) -> Option<(&str, &str)> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find(" in ")?;
    let field = text.get(..at)?.trim();
    let rest = text.get(at + 4..)?.trim();
    let rest = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or(rest);
    Some((field, rest))
}

/// A typed value of a partition field.
#[derive(Debug, Clone, PartialEq)]
enum Value {
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
enum Kind {
    Int,
    Float,
    Date,
    Timestamp,
    Str,
}

impl Kind {
    fn of(data_type: &DataType) -> Kind {
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

    fn describe(self) -> &'static str {
        match self {
            Kind::Int => "integer",
            Kind::Float => "number",
            Kind::Date => "date (yyyy-MM-dd)",
            Kind::Timestamp => "timestamp (ISO 8601, e.g. 2024-01-15T10:30:00Z)",
            Kind::Str => "string",
        }
    }

    fn parse(self, s: &str) -> Option<Value> {
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
struct Compiled {
    /// Index of the field among the partition fields; `None` for `_hoodie_partition_path`.
    field: Option<usize>,
    name: String,
    kind: Kind,
    op: FilterOp,
    values: Vec<Value>,
    /// The field's column in the read schema, when it has one: the filter is applied to rows.
    column: Option<String>,
    /// Whether partition paths hold the field's values as its column renders them.
    prunes: bool,
}

impl Compiled {
    fn matches(&self, value: &str) -> bool {
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
    fn row_mask(&self, column: &ArrayRef) -> Result<BooleanArray> {
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
fn paths_hold_values(config: &TableConfig, spec: &str) -> bool {
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

/// Partition filters compiled against a table's partition fields and read schema; answers
/// whether a partition path may hold matching rows ([`PartitionPruner::matches`]) and which
/// rows match ([`PartitionPruner::filter_rows`]).
#[derive(Debug, Clone)]
pub struct PartitionPruner {
    fields: Vec<String>,
    hive_style: bool,
    url_encoded: bool,
    filters: Vec<Compiled>,
}

impl PartitionPruner {
    /// Compiles `filters` for the table of `config` with read schema `schema`. A filter on a
    /// field that is not a partition field, a filter without value (or with several values for
    /// an operator other than `IN`), and a value that does not parse as the field's type are
    /// [`TableError::InvalidInput`] naming the field.
    pub fn new(
        config: &TableConfig,
        schema: &SchemaRef,
        filters: &[PartitionFilter],
    ) -> Result<Self> {
        let specs = config.partition_fields();
        let dropped_columns = config
            .get(keys::DROP_PARTITION_COLUMNS)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let fields: Vec<String> = specs
            .iter()
            .map(|f| f.split(':').next().unwrap_or_default().trim().to_string())
            .collect();
        let mut compiled = Vec::with_capacity(filters.len());
        for f in filters {
            let invalid = |reason: String| TableError::InvalidInput {
                column: Some(f.field.clone()),
                row: None,
                reason,
            };
            let (field, kind, column, prunes) = if f.field == meta::PARTITION_PATH {
                (None, Kind::Str, None, true)
            } else {
                let index = fields.iter().position(|x| x == &f.field).ok_or_else(|| {
                    invalid(format!(
                        "{:?} is not a partition field (partition fields: [{}])",
                        f.field,
                        fields.join(", ")
                    ))
                })?;
                let field_type = schema.field_with_name(&f.field).ok();
                let kind = field_type.map_or(Kind::Str, |x| Kind::of(x.data_type()));
                // With the partition columns dropped from the data files, the rows hold no
                // values to filter (the read fills nulls): paths alone decide.
                let column = field_type.filter(|_| !dropped_columns);
                let prunes = kind != Kind::Timestamp
                    && specs
                        .get(index)
                        .is_some_and(|spec| paths_hold_values(config, spec));
                if column.is_none() && !prunes {
                    return Err(invalid(format!(
                        "the partition paths do not hold the field's values (a key generator \
                         formats them) and the data files have no {:?} column",
                        f.field
                    )));
                }
                (Some(index), kind, column.map(|c| c.name().clone()), prunes)
            };
            let arity_ok = match f.op {
                FilterOp::In => !f.values.is_empty(),
                _ => f.values.len() == 1,
            };
            if !arity_ok {
                return Err(invalid(format!(
                    "operator {} takes {} value(s), got {}",
                    f.op.symbol(),
                    if f.op == FilterOp::In {
                        "one or more"
                    } else {
                        "one"
                    },
                    f.values.len()
                )));
            }
            let values = f
                .values
                .iter()
                .map(|v| {
                    kind.parse(v).ok_or_else(|| {
                        invalid(format!(
                            "filter value {v:?} is not a {} like the field",
                            kind.describe()
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            compiled.push(Compiled {
                field,
                name: f.field.clone(),
                kind,
                op: f.op,
                values,
                column,
                prunes,
            });
        }
        Ok(PartitionPruner {
            fields,
            hive_style: config.hive_style_partitioning(),
            url_encoded: config.url_encode_partitioning(),
            filters: compiled,
        })
    }

    /// True when there is no filter.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// The values of the partition fields encoded in `partition`, in field order. A path whose
    /// segments do not fit the fields is [`TableError::InvalidInput`] naming it.
    pub fn partition_values(&self, partition: &str) -> Result<Vec<String>> {
        self.split(partition)
            .ok_or_else(|| TableError::InvalidInput {
                column: None,
                row: None,
                reason: format!(
                    "partition path {partition:?} has {} segment(s), the table has {} partition \
                 field(s) [{}], and the path does not say which segments belong to which field",
                    partition.split('/').count(),
                    self.fields.len(),
                    self.fields.join(", ")
                ),
            })
    }

    /// The values of `partition`, or `None` when the path cannot be split unambiguously.
    fn split(&self, partition: &str) -> Option<Vec<String>> {
        let segments: Vec<&str> = partition.split('/').collect();
        let raw: Vec<String> = if self.hive_style && self.fields.len() > 1 {
            self.split_hive(&segments)?
        } else if segments.len() == self.fields.len() {
            self.fields
                .iter()
                .zip(segments)
                .map(|(f, s)| {
                    let prefix = format!("{f}=");
                    match self.hive_style {
                        true => s.strip_prefix(&prefix).unwrap_or(s).to_string(),
                        false => s.to_string(),
                    }
                })
                .collect()
        } else if let [field] = self.fields.as_slice() {
            let prefix = format!("{field}=");
            match self.hive_style {
                true => vec![partition
                    .strip_prefix(&prefix)
                    .unwrap_or(partition)
                    .to_string()],
                false => vec![partition.to_string()],
            }
        } else {
            return None;
        };
        Some(
            raw.into_iter()
                .map(|v| {
                    if self.url_encoded {
                        percent_decode(&v)
                    } else {
                        v
                    }
                })
                .collect(),
        )
    }

    /// Hive-style segments grouped by field: field `i`'s value runs from the segment starting
    /// `name_i=` up to the one starting with the next field's `name=`.
    fn split_hive(&self, segments: &[&str]) -> Option<Vec<String>> {
        let mut values = Vec::with_capacity(self.fields.len());
        let mut rest = segments;
        for (i, field) in self.fields.iter().enumerate() {
            let (first, tail) = rest.split_first()?;
            let value = first.strip_prefix(&format!("{field}="))?;
            let next = self.fields.get(i + 1).map(|n| format!("{n}="));
            let take = match &next {
                Some(n) => tail.iter().position(|s| s.starts_with(n.as_str()))?,
                None => tail.len(),
            };
            let (more, after) = tail.split_at(take);
            let mut v = value.to_string();
            for m in more {
                v.push('/');
                v.push_str(m);
            }
            values.push(v);
            rest = after;
        }
        rest.is_empty().then_some(values)
    }

    /// True when `partition` may hold rows every filter holds for: every filter that prunes
    /// holds for the path's values. A path that cannot be split may match when every filter
    /// on a field is also applied to rows, else it is [`TableError::InvalidInput`].
    pub fn matches(&self, partition: &str) -> Result<bool> {
        if self.filters.is_empty() {
            return Ok(true);
        }
        let needs_values = self.filters.iter().any(|f| f.field.is_some() && f.prunes);
        let values = if needs_values {
            match self.split(partition) {
                Some(v) => Some(v),
                None if self
                    .filters
                    .iter()
                    .all(|f| f.field.is_none() || f.column.is_some()) =>
                {
                    None
                }
                // Not splittable and a filter has no column to fall back on: the error.
                None => Some(self.partition_values(partition)?),
            }
        } else {
            None
        };
        for f in &self.filters {
            let value = match (f.field, &values) {
                (None, _) => Some(partition),
                (Some(_), _) if !f.prunes => continue,
                (Some(i), Some(values)) => values.get(i).map(String::as_str),
                (Some(_), None) => continue,
            };
            let Some(value) = value else {
                return Err(TableError::InvalidInput {
                    column: Some(f.name.clone()),
                    row: None,
                    reason: format!("partition path {partition:?} has no value for the field"),
                });
            };
            if !f.matches(value) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The columns [`PartitionPruner::filter_rows`] reads.
    pub fn row_columns(&self) -> Vec<&str> {
        self.filters
            .iter()
            .filter_map(|f| f.column.as_deref())
            .collect()
    }

    /// The rows of `batch` every filter on a column holds for (a filter whose column `batch`
    /// lacks is not applied: `batch` must hold [`PartitionPruner::row_columns`]).
    pub fn filter_rows(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let mut mask: Option<BooleanArray> = None;
        for f in &self.filters {
            let Some(column) = f.column.as_deref().and_then(|c| batch.column_by_name(c)) else {
                continue;
            };
            let m = f.row_mask(column)?;
            mask = Some(match mask {
                None => m,
                Some(prev) => {
                    arrow::compute::and(&prev, &m).map_err(|e| TableError::Unsupported {
                        reason: format!("combining partition filters: {e}"),
                    })?
                }
            });
        }
        match mask {
            None => Ok(batch),
            Some(m) => arrow::compute::filter_record_batch(&batch, &m).map_err(|e| {
                TableError::Unsupported {
                    reason: format!("applying partition filters to rows: {e}"),
                }
            }),
        }
    }
}

/// Decodes `%XX` escapes (invalid escapes stay as they are; invalid UTF-8 is replaced).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use arbor_timeline::config::TableType;
    use arrow::datatypes::{Field, Schema, TimeUnit};

    use super::*;

    fn config(fields: &[&str], hive: bool, urlencode: bool) -> TableConfig {
        TableConfig::builder_v8("t", TableType::CopyOnWrite)
            .record_key_fields(["id"])
            .partition_fields(fields.iter().copied())
            .hive_style_partitioning(hive)
            .url_encode_partitioning(urlencode)
            .build()
            .unwrap()
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("year", DataType::Int32, true),
            Field::new("city", DataType::Utf8, true),
            Field::new("day", DataType::Date32, true),
        ]))
    }

    #[test]
    fn test_parse_operators_and_in() {
        assert_eq!(
            PartitionFilter::parse("year>=2024").unwrap(),
            PartitionFilter::new("year", FilterOp::Ge, "2024")
        );
        assert_eq!(
            PartitionFilter::parse("city!=a b").unwrap(),
            PartitionFilter::new("city", FilterOp::Ne, "a b")
        );
        assert_eq!(
            PartitionFilter::parse("city IN (a, b)").unwrap(),
            PartitionFilter::is_in("city", ["a", "b"])
        );
        assert!(PartitionFilter::parse("nothing").is_err());
        assert!(PartitionFilter::parse("=x").is_err());
    }

    #[test]
    fn test_matches_hive_typed_numeric_compares_numbers() {
        let c = config(&["year", "city"], true, false);
        let p = PartitionPruner::new(
            &c,
            &schema(),
            &[PartitionFilter::new("year", FilterOp::Lt, "10")],
        )
        .unwrap();
        // As strings "9" > "10"; typed, 9 < 10.
        assert!(p.matches("year=9/city=x").unwrap());
        assert!(!p.matches("year=10/city=x").unwrap());
        assert!(!p.matches("year=__HIVE_DEFAULT_PARTITION__/city=x").unwrap());
    }

    #[test]
    fn test_matches_plain_segments_and_in() {
        let c = config(&["year", "city"], false, false);
        let p = PartitionPruner::new(
            &c,
            &schema(),
            &[PartitionFilter::is_in("city", ["sf", "nyc"])],
        )
        .unwrap();
        assert!(p.matches("2024/sf").unwrap());
        assert!(!p.matches("2024/la").unwrap());
        // Ambiguous (a value holds '/' and nothing says where): not pruned, rows decide.
        assert!(p.matches("a/b/c").unwrap());
        assert!(p.partition_values("a/b/c").is_err());
    }

    #[test]
    fn test_dropped_partition_columns_prune_by_path_only() {
        let c = TableConfig::builder_v8("t", TableType::CopyOnWrite)
            .record_key_fields(["id"])
            .partition_fields(["city"])
            .property(keys::DROP_PARTITION_COLUMNS, "true")
            .build()
            .unwrap();
        let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "sf")]).unwrap();
        assert!(p.row_columns().is_empty());
        assert!(p.matches("sf").unwrap());
        assert!(!p.matches("la").unwrap());
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("city", DataType::Utf8, true)])),
            vec![Arc::new(arrow::array::StringArray::from(vec![
                None::<&str>,
            ]))],
        )
        .unwrap();
        assert_eq!(
            p.filter_rows(batch).unwrap().num_rows(),
            1,
            "null-filled rows stay"
        );
        let c = TableConfig::builder_v8("t", TableType::CopyOnWrite)
            .record_key_fields(["id"])
            .partition_fields(["city"])
            .key_generator_type("TIMESTAMP")
            .property(keys::DROP_PARTITION_COLUMNS, "true")
            .build()
            .unwrap();
        let err = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "sf")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("do not hold the field's values"), "{err}");
    }

    #[test]
    fn test_matches_hive_value_with_slash_not_url_encoded() {
        let c = config(&["year", "city"], true, false);
        let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "a/b")]).unwrap();
        assert_eq!(
            p.partition_values("year=1/city=a/b").unwrap(),
            vec!["1".to_string(), "a/b".to_string()]
        );
        assert!(p.matches("year=1/city=a/b").unwrap());
        assert!(!p.matches("year=1/city=a").unwrap());
        let p =
            PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("year", "2024")]).unwrap();
        assert!(p.matches("year=2024/city=x/y/z").unwrap());
        assert!(!p.matches("year=2023/city=x/y/z").unwrap());
        let c = config(&["city", "year"], true, false);
        let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("year", "7")]).unwrap();
        assert_eq!(
            p.partition_values("city=x/y/year=7").unwrap(),
            vec!["x/y".to_string(), "7".to_string()]
        );
        assert!(p.matches("city=x/y/year=7").unwrap());
        assert!(!p.matches("city=x/y/year=8").unwrap());
    }

    #[test]
    fn test_timestamp_keygen_and_timestamp_columns_filter_rows_not_paths() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("ms", DataType::Int64, true),
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
        ]));
        let c = TableConfig::builder_v8("t", TableType::CopyOnWrite)
            .record_key_fields(["id"])
            .partition_fields(["ms"])
            .key_generator_type("TIMESTAMP")
            .build()
            .unwrap();
        let p = PartitionPruner::new(&c, &schema, &[PartitionFilter::eq("ms", "1700000000000")])
            .unwrap();
        assert!(
            p.matches("2024/01/15/10").unwrap(),
            "formatted paths are not pruned"
        );
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(arrow::array::StringArray::from(vec!["a", "b", "c"])),
                Arc::new(arrow::array::Int64Array::from(vec![
                    Some(1_700_000_000_000),
                    Some(1),
                    None,
                ])),
                Arc::new(
                    arrow::array::TimestampMicrosecondArray::from(vec![
                        Some(1_705_314_600_000_000),
                        Some(0),
                        None,
                    ])
                    .with_timezone("UTC"),
                ),
            ],
        )
        .unwrap();
        assert_eq!(p.filter_rows(batch.clone()).unwrap().num_rows(), 1);

        let c = config(&["at"], false, false);
        let p = PartitionPruner::new(
            &c,
            &schema,
            &[PartitionFilter::new(
                "at",
                FilterOp::Ge,
                "2024-01-15T10:30:00Z",
            )],
        )
        .unwrap();
        assert!(p.matches("1705314600000000").unwrap());
        let kept = p.filter_rows(batch.clone()).unwrap();
        assert_eq!(
            kept.num_rows(),
            1,
            "2024-01-15T10:30:00Z >= itself; 1970 and null are not"
        );
        let p = PartitionPruner::new(
            &c,
            &schema,
            &[PartitionFilter::new(
                "at",
                FilterOp::Lt,
                "2024-01-15 10:30:00+01:00",
            )],
        )
        .unwrap();
        assert_eq!(p.filter_rows(batch).unwrap().num_rows(), 1, "only 1970");
        let err = PartitionPruner::new(&c, &schema, &[PartitionFilter::eq("at", "soon")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("timestamp") && err.contains("at"), "{err}");
    }

    #[test]
    fn test_matches_url_encoded_value_is_decoded() {
        let c = config(&["city"], true, true);
        let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "a/b")]).unwrap();
        assert!(p.matches("city=a%2Fb").unwrap());
        assert!(!p.matches("city=a").unwrap());
    }

    #[test]
    fn test_matches_date_and_single_field_multi_segment_path() {
        let c = config(&["day"], false, false);
        let p = PartitionPruner::new(
            &c,
            &schema(),
            &[PartitionFilter::new("day", FilterOp::Gt, "2024-01-05")],
        )
        .unwrap();
        assert!(p.matches("2024-01-10").unwrap());
        assert!(!p.matches("2024-01-05").unwrap());
        let c = config(&["city"], false, false);
        let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "2024/01/31")])
            .unwrap();
        assert!(p.matches("2024/01/31").unwrap());
    }

    #[test]
    fn test_new_unknown_field_or_bad_value_names_field() {
        let c = config(&["year"], true, false);
        let err = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "x")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("city"), "{err}");
        let err = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("year", "abc")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("year"), "{err}");
        let p = PartitionPruner::new(
            &c,
            &schema(),
            &[PartitionFilter::eq("_hoodie_partition_path", "year=1")],
        )
        .unwrap();
        assert!(p.matches("year=1").unwrap());
        assert!(!p.matches("year=2").unwrap());
    }
}
