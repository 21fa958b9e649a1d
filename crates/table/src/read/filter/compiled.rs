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

use super::spec::FilterOp;
use super::value::{Kind, Value};
use super::value_set::ValueSet;
use crate::error::{Result, TableError};
use crate::keygen::DEFAULT_PARTITION_PATH;

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
    /// The values as given (see [`Compiled::values`]).
    values: Vec<Value>,
    /// `IN`: the values hashed and sorted, built once ([`Compiled::in_set`]).
    set: Option<ValueSet>,
    /// The field's column in the read schema, when it has one: the filter is applied to rows.
    pub(crate) column: Option<String>,
    /// Whether partition paths hold the field's values as its column renders them.
    pub(crate) prunes: bool,
    /// The struct fields from `column` down to the filtered field (empty: the column itself).
    path: Vec<String>,
    /// Whether statistics of `column` describe the filtered values (not for a field inside a
    /// struct, nor for a column of a type filters do not compare).
    stats: bool,
}

impl Compiled {
    /// A filter on field `name` of `kind` comparing with `values` by `op`; an `IN` list is
    /// hashed and sorted here, once.
    pub(crate) fn new(
        source: Source,
        name: String,
        kind: Kind,
        op: FilterOp,
        values: Vec<Value>,
        column: Option<String>,
        prunes: bool,
    ) -> Compiled {
        let set = matches!(op, FilterOp::In | FilterOp::NotIn).then(|| ValueSet::new(&values));
        Compiled {
            source,
            name,
            kind,
            op,
            values,
            set,
            column,
            prunes,
            path: Vec::new(),
            stats: true,
        }
    }

    /// This filter on the field at `path` (struct field names) below its column, with the
    /// column's statistics usable (`stats`) or not. A non-empty path never uses statistics.
    pub(crate) fn at(mut self, path: Vec<String>, stats: bool) -> Compiled {
        self.stats = stats && path.is_empty();
        self.path = path;
        self
    }

    /// The column whose statistics (column stats, partition stats) describe the filtered
    /// values; `None` when none do (no column, a field inside a struct, a struct or list
    /// column): such a filter prunes no file by statistics.
    pub(crate) fn stats_column(&self) -> Option<&str> {
        self.column.as_deref().filter(|_| self.stats)
    }

    /// The values compared with, as given (one for a comparison, the list for `IN`, none for
    /// `IS [NOT] NULL`).
    pub(crate) fn values(&self) -> &[Value] {
        &self.values
    }

    /// The `IN` list as a [`ValueSet`]; `None` for other operators.
    pub(crate) fn in_set(&self) -> Option<&ValueSet> {
        self.set.as_ref()
    }

    /// Whether a partition path value may hold rows the filter holds for.
    pub(crate) fn matches(&self, value: &str) -> bool {
        match self.op {
            // Hudi writes null (and empty) partition values as the default partition.
            FilterOp::IsNull => value == DEFAULT_PARTITION_PATH,
            FilterOp::IsNotNull => true,
            // The default partition also holds the rows whose string value is empty.
            _ if value == DEFAULT_PARTITION_PATH && self.kind == Kind::Str => {
                self.holds_str("") || self.holds_str(value)
            }
            _ => self.kind.parse(value).is_some_and(|v| self.holds(&v)),
        }
    }

    /// Whether the filter holds for the non-null value `v`.
    pub(crate) fn holds(&self, v: &Value) -> bool {
        match (self.op, &self.set) {
            (FilterOp::IsNull, _) => false,
            (FilterOp::IsNotNull, _) => true,
            (FilterOp::In, Some(set)) => set.contains(v),
            (FilterOp::In, None) => self
                .values
                .iter()
                .any(|x| v.compare(x) == Some(Ordering::Equal)),
            (FilterOp::NotIn, Some(set)) => !set.contains(v),
            (FilterOp::NotIn, None) => !self
                .values
                .iter()
                .any(|x| v.compare(x) == Some(Ordering::Equal)),
            (op, _) => self
                .values
                .first()
                .and_then(|x| v.compare(x))
                .is_some_and(|o| order_holds(op, o)),
        }
    }

    /// [`Compiled::holds`] for the string value `s`, without copying it.
    fn holds_str(&self, s: &str) -> bool {
        match (self.op, &self.set) {
            (FilterOp::IsNull, _) => false,
            (FilterOp::IsNotNull, _) => true,
            (FilterOp::In, Some(set)) => set.contains_str(s),
            (FilterOp::In, None) => self
                .values
                .iter()
                .any(|x| matches!(x, Value::Str(t) if t == s)),
            (FilterOp::NotIn, Some(set)) => !set.contains_str(s),
            (FilterOp::NotIn, None) => !self
                .values
                .iter()
                .any(|x| matches!(x, Value::Str(t) if t == s)),
            (op, _) => match self.values.first() {
                Some(Value::Str(x)) => order_holds(op, s.cmp(x.as_str())),
                _ => false,
            },
        }
    }

    /// Whether each row of `column` (the filter's column) satisfies the filter (SQL: a
    /// comparison with null is not true; `IS NULL` holds for nulls only). For a field inside
    /// structs, a row whose struct (at any level) is null has a null field.
    pub(crate) fn row_mask(&self, column: &ArrayRef) -> Result<BooleanArray> {
        if self.path.is_empty() {
            return self.leaf_mask(column);
        }
        let err = |e: arrow::error::ArrowError| TableError::InvalidInput {
            column: Some(self.name.clone()),
            row: None,
            reason: format!("cannot filter the field's values: {e}"),
        };
        let mut present: Option<BooleanArray> = None;
        let mut current = column.clone();
        for name in &self.path {
            let valid = arrow::compute::is_not_null(&current).map_err(err)?;
            present = Some(match present {
                None => valid,
                Some(p) => arrow::compute::and(&p, &valid).map_err(err)?,
            });
            let child = current
                .as_struct_opt()
                .and_then(|s| s.column_by_name(name))
                .cloned();
            let Some(child) = child else {
                return Err(TableError::InvalidInput {
                    column: Some(self.name.clone()),
                    row: None,
                    reason: format!(
                        "the rows read have no struct field {name:?} on the way to the field \
                         (type {})",
                        current.data_type()
                    ),
                });
            };
            current = child;
        }
        let leaf = self.leaf_mask(&current)?;
        match present {
            None => Ok(leaf),
            Some(p) if self.op == FilterOp::IsNull => {
                let absent = arrow::compute::not(&p).map_err(err)?;
                arrow::compute::or(&leaf, &absent).map_err(err)
            }
            Some(p) => arrow::compute::and(&leaf, &p).map_err(err),
        }
    }

    /// [`Compiled::row_mask`] of the filtered values themselves.
    fn leaf_mask(&self, column: &ArrayRef) -> Result<BooleanArray> {
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
            (Kind::Str, _) => {
                let text = arrow::compute::cast(column, &DataType::Utf8).map_err(err)?;
                text.as_string::<i32>()
                    .iter()
                    .map(|v| Some(v.is_some_and(|v| self.holds_str(v))))
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

/// Whether a value ordered `o` against the filter's value satisfies comparison `op`.
fn order_holds(op: FilterOp, o: Ordering) -> bool {
    match op {
        FilterOp::Eq => o == Ordering::Equal,
        FilterOp::Ne => o != Ordering::Equal,
        FilterOp::Lt => o == Ordering::Less,
        FilterOp::Le => o != Ordering::Greater,
        FilterOp::Gt => o == Ordering::Greater,
        FilterOp::Ge => o != Ordering::Less,
        FilterOp::In | FilterOp::NotIn | FilterOp::IsNull | FilterOp::IsNotNull => false,
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
