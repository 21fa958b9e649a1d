//! Column statistics of data files as Hudi computes them for the MDT `column_stats` and
//! `partition_stats` partitions (Java `HoodieColumnRangeMetadata`).
//!
//! - [`footer`]: a parquet base file's statistics from its footer (Java
//!   `ParquetUtils.readColumnStatsFromMetadata`): per column the row groups' min/max, null
//!   counts, value counts and compressed / uncompressed chunk sizes, merged.
//! - [`batch`]: a log file's statistics from its records (Java `collectColumnRangeMetadata`):
//!   min/max, null and value counts over the records; sizes are 0.
//!
//! Values are stored in the wrapper and with the value type of the index version
//! ([`StatsVersion`]): V2 (table version 9, Java 1.1 `ValueType`) or V1 (table version 8,
//! Java 1.0, no value type).

pub mod batch;
pub mod footer;

use std::cmp::Ordering;

use arrow_schema::{DataType, TimeUnit};

use crate::hfile::mdt_column_stats::{value_type, ColumnStatsRecord, StatValue, ValueTypeInfo};
use crate::{FormatError, Result};

/// Which layout column statistics are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsVersion {
    /// Java 1.0 (table version 8): Java's wrapper per value class (decimals in
    /// `DecimalWrapper` at scale 15, dates in `DateWrapper`), no `valueType`.
    V1,
    /// Java 1.1 (table version 9, index version V2): the wrapper of the `ValueType`'s primitive
    /// (decimals as minimal big-endian unscaled bytes, dates as ints, timestamps as longs) and
    /// `valueType` set.
    V2,
}

impl StatsVersion {
    /// The version Java writes for `table_version` (9 and later: V2).
    pub fn for_table_version(table_version: u32) -> Self {
        if table_version >= 9 {
            StatsVersion::V2
        } else {
            StatsVersion::V1
        }
    }
}

/// One column's statistics over one file or partition (Java `HoodieColumnRangeMetadata`).
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnRange {
    /// The column name.
    pub column: String,
    /// The smallest non-null value, `None` when every value is null.
    pub min: Option<StatValue>,
    /// The largest non-null value.
    pub max: Option<StatValue>,
    /// Null values.
    pub null_count: i64,
    /// Values, nulls included.
    pub value_count: i64,
    /// Compressed bytes of the column's chunks (0 for log files).
    pub total_size: i64,
    /// Uncompressed bytes of the column's chunks (0 for log files).
    pub total_uncompressed_size: i64,
    /// The value type (V2 only).
    pub value_type: Option<ValueTypeInfo>,
}

impl ColumnRange {
    /// An empty range of `column` (no values) with `value_type`.
    pub fn empty(column: &str, value_type: Option<ValueTypeInfo>) -> Self {
        ColumnRange {
            column: column.to_string(),
            min: None,
            max: None,
            null_count: 0,
            value_count: 0,
            total_size: 0,
            total_uncompressed_size: 0,
            value_type,
        }
    }

    /// Java `HoodieColumnRangeMetadata.merge`: min of the mins and max of the maxes (nulls
    /// ignored), counts and sizes added. The value type is `self`'s unless `self` has none or
    /// is `NULL`.
    ///
    /// Ranges of one column whose files were written before and after a numeric widening
    /// (`int` to `bigint`, `float` to `double`: Spark's schema evolution) have different value
    /// types; both are first promoted to the wider type, as Java reads old files through the
    /// table's current schema. Only exact promotions apply (a long beyond 2^53 never becomes a
    /// double): a bound is never rounded.
    pub fn merge(&self, other: &ColumnRange) -> ColumnRange {
        if let Some((a, b)) = promoted_pair(self, other) {
            return a.merge(&b);
        }
        let value_type = match &self.value_type {
            Some(v) if v.type_ordinal != value_type::NULL => Some(v.clone()),
            _ => other.value_type.clone().or_else(|| self.value_type.clone()),
        };
        ColumnRange {
            column: self.column.clone(),
            min: pick(&self.min, &other.min, Ordering::Less, value_type.as_ref()),
            max: pick(
                &self.max,
                &other.max,
                Ordering::Greater,
                value_type.as_ref(),
            ),
            null_count: self.null_count + other.null_count,
            value_count: self.value_count + other.value_count,
            total_size: self.total_size + other.total_size,
            total_uncompressed_size: self.total_uncompressed_size + other.total_uncompressed_size,
            value_type,
        }
    }

    /// The MDT payload of this range for `file_name` (a data file name, or the partition path
    /// for partition stats).
    pub fn to_record(&self, file_name: &str, is_tight_bound: bool) -> ColumnStatsRecord {
        ColumnStatsRecord {
            file_name: Some(file_name.to_string()),
            column_name: Some(self.column.clone()),
            min_value: self.min.clone(),
            max_value: self.max.clone(),
            value_count: Some(self.value_count),
            null_count: Some(self.null_count),
            total_size: Some(self.total_size),
            total_uncompressed_size: Some(self.total_uncompressed_size),
            is_deleted: false,
            is_tight_bound,
            value_type: self.value_type.clone(),
        }
    }

    /// The range a stored record describes (for aggregating stored file stats into partition
    /// stats).
    pub fn from_record(record: &ColumnStatsRecord) -> Self {
        ColumnRange {
            column: record.column_name.clone().unwrap_or_default(),
            min: record.min_value.clone(),
            max: record.max_value.clone(),
            null_count: record.null_count.unwrap_or(0),
            value_count: record.value_count.unwrap_or(0),
            total_size: record.total_size.unwrap_or(0),
            total_uncompressed_size: record.total_uncompressed_size.unwrap_or(0),
            value_type: record.value_type.clone(),
        }
    }
}

/// The value Java keeps when merging `a` and `b` for the `want`ed side.
/// `a` and `b` promoted to their wider numeric value type (INT < LONG < FLOAT < DOUBLE) when
/// their value types are two different numeric ones and every bound converts exactly; `None`
/// otherwise.
fn promoted_pair(a: &ColumnRange, b: &ColumnRange) -> Option<(ColumnRange, ColumnRange)> {
    let numeric = |r: &ColumnRange| {
        r.value_type.as_ref().map(|v| v.type_ordinal).filter(|o| {
            matches!(
                *o,
                value_type::INT | value_type::LONG | value_type::FLOAT | value_type::DOUBLE
            )
        })
    };
    let (ta, tb) = (numeric(a)?, numeric(b)?);
    if ta == tb {
        return None;
    }
    let wide = ta.max(tb);
    Some((promote(a, wide)?, promote(b, wide)?))
}

/// `r` with its bounds and value type as numeric type `to`; `None` when a bound would not
/// convert exactly.
fn promote(r: &ColumnRange, to: i32) -> Option<ColumnRange> {
    const EXACT_IN_F64: i64 = 1 << 53;
    const EXACT_IN_F32: i64 = 1 << 24;
    let convert = |v: &Option<StatValue>| -> Option<Option<StatValue>> {
        let Some(v) = v else {
            return Some(None);
        };
        let out = match (v, to) {
            (StatValue::Int(x), value_type::INT) => StatValue::Int(*x),
            (StatValue::Int(x), value_type::LONG) => StatValue::Long(i64::from(*x)),
            (StatValue::Int(x), value_type::FLOAT)
                if i64::from(x.unsigned_abs()) <= EXACT_IN_F32 =>
            {
                StatValue::Float(*x as f32)
            }
            (StatValue::Int(x), value_type::DOUBLE) => StatValue::Double(f64::from(*x)),
            (StatValue::Long(x), value_type::LONG) => StatValue::Long(*x),
            (StatValue::Long(x), value_type::FLOAT) if x.unsigned_abs() <= EXACT_IN_F32 as u64 => {
                StatValue::Float(*x as f32)
            }
            (StatValue::Long(x), value_type::DOUBLE) if x.unsigned_abs() <= EXACT_IN_F64 as u64 => {
                StatValue::Double(*x as f64)
            }
            (StatValue::Float(x), value_type::FLOAT) => StatValue::Float(*x),
            (StatValue::Float(x), value_type::DOUBLE) => StatValue::Double(f64::from(*x)),
            (StatValue::Double(x), value_type::DOUBLE) => StatValue::Double(*x),
            _ => return None,
        };
        Some(Some(out))
    };
    let mut out = r.clone();
    out.min = convert(&r.min)?;
    out.max = convert(&r.max)?;
    if let Some(v) = out.value_type.as_mut() {
        v.type_ordinal = to;
    }
    Some(out)
}

fn pick(
    a: &Option<StatValue>,
    b: &Option<StatValue>,
    want: Ordering,
    value_type: Option<&ValueTypeInfo>,
) -> Option<StatValue> {
    match (a, b) {
        (Some(x), Some(y)) => match x.java_cmp_typed(y, value_type) {
            Some(o) if o == want => Some(x.clone()),
            Some(Ordering::Equal) => Some(x.clone()),
            _ => Some(y.clone()),
        },
        (Some(x), None) => Some(x.clone()),
        (None, y) => y.clone(),
    }
}

/// How a column's values are stored: the Java `ValueType` ordinal and its extra info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ColumnKind {
    pub(crate) ordinal: i32,
    pub(crate) additional_info: Option<String>,
    /// The decimal scale, for decimals.
    pub(crate) scale: Option<i8>,
}

impl ColumnKind {
    fn of(ordinal: i32) -> Self {
        ColumnKind {
            ordinal,
            additional_info: None,
            scale: None,
        }
    }

    /// The value type written with `version`.
    pub(crate) fn value_type(&self, version: StatsVersion) -> Option<ValueTypeInfo> {
        match version {
            StatsVersion::V1 => None,
            StatsVersion::V2 => Some(ValueTypeInfo {
                type_ordinal: self.ordinal,
                additional_info: self.additional_info.clone(),
            }),
        }
    }
}

/// The Java 1.1 `ValueType` of an Arrow column type (Java `ValueType.fromSchema` /
/// `fromParquetPrimitiveType`). `None` for types column stats do not cover (nested types,
/// unsigned integers, ...).
pub(crate) fn column_kind(data_type: &DataType) -> Option<ColumnKind> {
    use value_type as v;
    Some(match data_type {
        DataType::Null => ColumnKind::of(v::NULL),
        DataType::Boolean => ColumnKind::of(v::BOOLEAN),
        DataType::Int8 | DataType::Int16 | DataType::Int32 => ColumnKind::of(v::INT),
        DataType::Int64 => ColumnKind::of(v::LONG),
        DataType::Float32 => ColumnKind::of(v::FLOAT),
        DataType::Float64 => ColumnKind::of(v::DOUBLE),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnKind::of(v::STRING),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => ColumnKind::of(v::BYTES),
        DataType::FixedSizeBinary(_) => ColumnKind::of(v::FIXED),
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s) => {
            ColumnKind {
                ordinal: v::DECIMAL,
                additional_info: Some(format!("{p},{s}")),
                scale: Some(*s),
            }
        }
        DataType::Date32 => ColumnKind::of(v::DATE),
        DataType::Time32(TimeUnit::Millisecond) => ColumnKind::of(v::TIME_MILLIS),
        DataType::Time64(TimeUnit::Microsecond) => ColumnKind::of(v::TIME_MICROS),
        DataType::Timestamp(unit, tz) => {
            let utc = tz.is_some();
            ColumnKind::of(match (unit, utc) {
                (TimeUnit::Millisecond, true) => v::TIMESTAMP_MILLIS,
                (TimeUnit::Microsecond, true) => v::TIMESTAMP_MICROS,
                (TimeUnit::Nanosecond, true) => v::TIMESTAMP_NANOS,
                (TimeUnit::Millisecond, false) => v::LOCAL_TIMESTAMP_MILLIS,
                (TimeUnit::Microsecond, false) => v::LOCAL_TIMESTAMP_MICROS,
                (TimeUnit::Nanosecond, false) => v::LOCAL_TIMESTAMP_NANOS,
                (TimeUnit::Second, _) => return None,
            })
        }
        _ => return None,
    })
}

/// The minimal big-endian two's-complement bytes of `v` (Java `BigInteger.toByteArray`).
pub(crate) fn minimal_be_bytes(v: i128) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    // Drop leading bytes that only repeat the sign of the next one.
    let start = bytes
        .windows(2)
        .take_while(|w| {
            matches!(w, [0x00, n] if n & 0x80 == 0) || matches!(w, [0xFF, n] if n & 0x80 != 0)
        })
        .count();
    bytes.get(start..).unwrap_or(&bytes).to_vec()
}

/// The V1 `DecimalWrapper` scale (Hudi's schema: decimal(30, 15)).
pub const V1_DECIMAL_SCALE: u32 = 15;

/// A typed value of a column, before wrapping.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Raw {
    Bool(bool),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    Str(String),
    Bytes(Vec<u8>),
    /// An unscaled decimal.
    Decimal(i128),
}

/// Wraps `raw` of a column of `kind` as `version` stores it; `column` and `path` name the
/// value in errors (a V1 decimal that cannot be rescaled to scale 15 without loss, or a value
/// whose type does not fit the column).
pub(crate) fn wrap(
    raw: Raw,
    kind: &ColumnKind,
    version: StatsVersion,
    column: &str,
    path: &str,
) -> Result<StatValue> {
    use value_type as v;
    let bad = || FormatError::Schema {
        field: Some(column.to_string()),
        reason: format!("{path}: a statistics value does not fit the column type"),
    };
    Ok(match (raw, version) {
        (Raw::Bool(b), _) => StatValue::Boolean(b),
        (Raw::Int(i), StatsVersion::V1) if kind.ordinal == v::DATE => StatValue::Date(i),
        (Raw::Int(i), _) => StatValue::Int(i),
        (Raw::Long(l), _) => StatValue::Long(l),
        (Raw::Float(f), _) => StatValue::Float(f),
        (Raw::Double(d), _) => StatValue::Double(d),
        (Raw::Str(s), _) => StatValue::String(s),
        (Raw::Bytes(b), _) => StatValue::Bytes(b),
        (Raw::Decimal(u), StatsVersion::V2) => StatValue::Bytes(minimal_be_bytes(u)),
        (Raw::Decimal(u), StatsVersion::V1) => {
            let scale = u32::try_from(kind.scale.ok_or_else(bad)?).map_err(|_| bad())?;
            let up = V1_DECIMAL_SCALE
                .checked_sub(scale)
                .ok_or_else(|| FormatError::Schema {
                    field: Some(column.to_string()),
                    reason: format!("{path}: decimal scale {scale} is above 15"),
                })?;
            let factor = 10i128.checked_pow(up).ok_or_else(bad)?;
            let scaled = u.checked_mul(factor).ok_or_else(|| FormatError::Schema {
                field: Some(column.to_string()),
                reason: format!("{path}: decimal value overflows at scale 15"),
            })?;
            StatValue::Decimal {
                unscaled: minimal_be_bytes(scaled),
                scale: V1_DECIMAL_SCALE,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn test_minimal_be_bytes_like_big_integer() {
        assert_eq!(minimal_be_bytes(0), vec![0]);
        assert_eq!(minimal_be_bytes(7500), vec![29, 76]);
        assert_eq!(minimal_be_bytes(500_000), vec![7, 161, 32]);
        assert_eq!(minimal_be_bytes(128), vec![0, 128]);
        assert_eq!(minimal_be_bytes(-1), vec![0xFF]);
        assert_eq!(minimal_be_bytes(-129), vec![0xFF, 0x7F]);
    }

    #[test]
    fn test_merge_widens_and_adds() {
        let a = ColumnRange {
            column: "c".into(),
            min: Some(StatValue::Long(5)),
            max: Some(StatValue::Long(9)),
            null_count: 1,
            value_count: 3,
            total_size: 10,
            total_uncompressed_size: 20,
            value_type: None,
        };
        let mut b = a.clone();
        b.min = Some(StatValue::Long(1));
        b.max = None;
        let m = a.merge(&b);
        assert_eq!(m.min, Some(StatValue::Long(1)));
        assert_eq!(m.max, Some(StatValue::Long(9)));
        assert_eq!((m.null_count, m.value_count, m.total_size), (2, 6, 20));
    }

    fn typed(min: StatValue, max: StatValue, ordinal: i32) -> ColumnRange {
        ColumnRange {
            column: "v".into(),
            min: Some(min),
            max: Some(max),
            null_count: 0,
            value_count: 2,
            total_size: 1,
            total_uncompressed_size: 1,
            value_type: Some(ValueTypeInfo {
                type_ordinal: ordinal,
                additional_info: None,
            }),
        }
    }

    #[test]
    fn test_merge_after_int_to_bigint_widening_promotes_both_ways() {
        let old = typed(StatValue::Int(1), StatValue::Int(7), value_type::INT);
        let new = typed(
            StatValue::Long(5_000_000_000),
            StatValue::Long(5_000_000_000),
            value_type::LONG,
        );
        for m in [old.merge(&new), new.merge(&old)] {
            assert_eq!(m.min, Some(StatValue::Long(1)));
            assert_eq!(m.max, Some(StatValue::Long(5_000_000_000)));
            assert_eq!(m.value_type.unwrap().type_ordinal, value_type::LONG);
            assert_eq!(m.value_count, 4);
        }
        let f = typed(
            StatValue::Float(0.5),
            StatValue::Float(2.5),
            value_type::FLOAT,
        );
        let d = typed(
            StatValue::Double(-1.0),
            StatValue::Double(1.0),
            value_type::DOUBLE,
        );
        let m = f.merge(&d);
        assert_eq!(m.min, Some(StatValue::Double(-1.0)));
        assert_eq!(m.max, Some(StatValue::Double(2.5)));
        // A long no double holds exactly is never rounded into a bound.
        let big = typed(
            StatValue::Long(1),
            StatValue::Long((1 << 53) + 1),
            value_type::LONG,
        );
        let m = big.merge(&d);
        assert_ne!(m.value_type.unwrap().type_ordinal, value_type::DOUBLE);
    }

    #[test]
    fn test_v1_decimal_rescales_to_15_or_fails() {
        let kind = column_kind(&DataType::Decimal128(10, 2)).unwrap();
        let v = wrap(Raw::Decimal(123), &kind, StatsVersion::V1, "c", "f").unwrap();
        assert_eq!(
            v,
            StatValue::Decimal {
                unscaled: minimal_be_bytes(123 * 10i128.pow(13)),
                scale: 15
            }
        );
        let kind = column_kind(&DataType::Decimal128(20, 16)).unwrap();
        assert!(wrap(Raw::Decimal(1), &kind, StatsVersion::V1, "c", "f").is_err());
        let v2 = wrap(Raw::Decimal(-1), &kind, StatsVersion::V2, "c", "f").unwrap();
        assert_eq!(v2, StatValue::Bytes(vec![0xFF]));
    }
}
