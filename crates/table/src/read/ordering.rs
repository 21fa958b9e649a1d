//! Ordering values of records and deletes, compared the way hudi-rs 0.5.0 (and Java) do.
//!
//! Values are only compared when they are of the same class (Java's `isSameClass`); a null
//! ordering value of a data record is the "default" (Java's `Integer(0)`), and a delete whose
//! ordering value is null or default is a commit-time-ordering delete that wins unconditionally.
//!
//! Between data records (and a data record and the stored one on write), a null ordering value
//! is lower than every non-null value: hudi-rs 0.5.0 sorts records by (key, ordering value,
//! commit sequence number) descending with nulls lowest (`merge/record_merger.rs`), and Java
//! Hudi 1.x replaces a null by `Integer(0)` (`OrderingValues.handleNullValue`), which loses to
//! any positive value of an int column and, against a long column, fails with a
//! `ClassCastException` in `BufferedRecordMergerFactory#shouldKeepNewerRecord`; Java's
//! payload path (`DefaultHoodieRecordPayload#needUpdatingPersistedRecord`) updates a record
//! whose stored value is null. Two nulls tie, and ties go to the newer record
//! ([`newer_wins`]).

use std::cmp::Ordering;

use arbor_format::log::OrderingValue;
use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal128Type, Float32Type, Float64Type, Int16Type,
    Int32Type, Int64Type, Int8Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt8Type,
};

/// A comparable ordering value, in the classes hudi-rs 0.5.0 compares: every integer-backed
/// value (ints, longs, booleans, dates, timestamps) is a `Long`, every float a `Double`.
#[derive(Debug, Clone, PartialEq)]
pub enum OrderKey {
    /// Null or absent, or Java's `Integer(0)` default: natural order.
    Default,
    /// Integer-backed values.
    Long(i64),
    /// Floating-point values.
    Double(f64),
    /// Strings.
    String(String),
    /// Bytes.
    Bytes(Vec<u8>),
    /// Decimals: unscaled value and scale (compared by value).
    Decimal(i128, i8),
    /// Composite (multi-field) values.
    Composite(Vec<OrderKey>),
    /// A type arbor does not compare; never the same class as anything.
    Other,
}

impl OrderKey {
    /// True for the default ordering value.
    pub fn is_default(&self) -> bool {
        matches!(self, OrderKey::Default)
    }

    /// Compares two keys of the same class; `None` for different classes.
    pub fn compare(&self, other: &OrderKey) -> Option<Ordering> {
        use OrderKey::*;
        match (self, other) {
            (Long(a), Long(b)) => Some(a.cmp(b)),
            (Double(a), Double(b)) => Some(a.total_cmp(b)),
            (String(a), String(b)) => Some(a.cmp(b)),
            (Bytes(a), Bytes(b)) => Some(a.cmp(b)),
            (Decimal(a, sa), Decimal(b, sb)) => Some(compare_decimal(*a, *sa, *b, *sb)),
            (Composite(a), Composite(b)) if a.len() == b.len() => {
                for (x, y) in a.iter().zip(b) {
                    match x.compare(y)? {
                        Ordering::Equal => continue,
                        o => return Some(o),
                    }
                }
                Some(Ordering::Equal)
            }
            (Default, Default) => Some(Ordering::Equal),
            _ => None,
        }
    }

    /// Compares two ordering values of data records under event-time ordering: a
    /// [`OrderKey::Default`] (null) value is lower than every other value and equal to
    /// another default; otherwise as [`OrderKey::compare`] (`None` for different classes).
    pub fn compare_event_time(&self, other: &OrderKey) -> Option<Ordering> {
        match (self, other) {
            (OrderKey::Default, OrderKey::Default) => Some(Ordering::Equal),
            (OrderKey::Default, _) => Some(Ordering::Less),
            (_, OrderKey::Default) => Some(Ordering::Greater),
            _ => self.compare(other),
        }
    }

    /// The ordering value of a delete record.
    pub fn from_delete(value: Option<&OrderingValue>) -> OrderKey {
        match value {
            None => OrderKey::Default,
            Some(v) if v.is_java_default() => OrderKey::Default,
            Some(v) => Self::from_delete_value(v),
        }
    }

    fn from_delete_value(v: &OrderingValue) -> OrderKey {
        match v {
            OrderingValue::Boolean(b) => OrderKey::Long(i64::from(*b)),
            OrderingValue::Int(i) | OrderingValue::Date(i) | OrderingValue::LocalDate(i) => {
                OrderKey::Long(i64::from(*i))
            }
            OrderingValue::Long(l)
            | OrderingValue::TimeMicros(l)
            | OrderingValue::TimestampMicros(l) => OrderKey::Long(*l),
            OrderingValue::Float(f) => OrderKey::Double(f64::from(*f)),
            OrderingValue::Double(d) => OrderKey::Double(*d),
            OrderingValue::Bytes(b) => OrderKey::Bytes(b.clone()),
            OrderingValue::String(s) => OrderKey::String(s.clone()),
            OrderingValue::Decimal(d) => OrderKey::Decimal(*d, OrderingValue::DECIMAL_SCALE),
            OrderingValue::Array(None) => OrderKey::Default,
            OrderingValue::Array(Some(items)) => {
                let mut parts = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Some(v) => parts.push(Self::from_delete_value(v)),
                        None => return OrderKey::Default,
                    }
                }
                OrderKey::Composite(parts)
            }
        }
    }

    /// The ordering value of row `row` of an ordering column (null: the default).
    pub fn from_column(column: &ArrayRef, row: usize) -> OrderKey {
        if row >= column.len() || column.is_null(row) {
            return OrderKey::Default;
        }
        match column.data_type() {
            DataType::Int8 => {
                OrderKey::Long(i64::from(column.as_primitive::<Int8Type>().value(row)))
            }
            DataType::Int16 => {
                OrderKey::Long(i64::from(column.as_primitive::<Int16Type>().value(row)))
            }
            DataType::Int32 => {
                OrderKey::Long(i64::from(column.as_primitive::<Int32Type>().value(row)))
            }
            DataType::Int64 => OrderKey::Long(column.as_primitive::<Int64Type>().value(row)),
            DataType::Boolean => OrderKey::Long(i64::from(column.as_boolean().value(row))),
            DataType::Date32 => {
                OrderKey::Long(i64::from(column.as_primitive::<Date32Type>().value(row)))
            }
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                OrderKey::Long(column.as_primitive::<TimestampMillisecondType>().value(row))
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                OrderKey::Long(column.as_primitive::<TimestampMicrosecondType>().value(row))
            }
            // One column has one unit, so raw values compare (as hudi-rs compares rows).
            DataType::Timestamp(TimeUnit::Second, _) => {
                OrderKey::Long(column.as_primitive::<TimestampSecondType>().value(row))
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                OrderKey::Long(column.as_primitive::<TimestampNanosecondType>().value(row))
            }
            DataType::Date64 => OrderKey::Long(column.as_primitive::<Date64Type>().value(row)),
            DataType::UInt8 => {
                OrderKey::Long(i64::from(column.as_primitive::<UInt8Type>().value(row)))
            }
            DataType::UInt16 => {
                OrderKey::Long(i64::from(column.as_primitive::<UInt16Type>().value(row)))
            }
            DataType::UInt32 => {
                OrderKey::Long(i64::from(column.as_primitive::<UInt32Type>().value(row)))
            }
            DataType::LargeBinary => OrderKey::Bytes(column.as_binary::<i64>().value(row).to_vec()),
            DataType::Float32 => {
                OrderKey::Double(f64::from(column.as_primitive::<Float32Type>().value(row)))
            }
            DataType::Float64 => OrderKey::Double(column.as_primitive::<Float64Type>().value(row)),
            DataType::Utf8 => OrderKey::String(column.as_string::<i32>().value(row).to_string()),
            DataType::LargeUtf8 => {
                OrderKey::String(column.as_string::<i64>().value(row).to_string())
            }
            DataType::Binary => OrderKey::Bytes(column.as_binary::<i32>().value(row).to_vec()),
            DataType::Decimal128(_, scale) => {
                OrderKey::Decimal(column.as_primitive::<Decimal128Type>().value(row), *scale)
            }
            _ => OrderKey::Other,
        }
    }
}

/// True if a data record with ordering value `new` replaces one with `old` under event-time
/// ordering: unless `new` is lower ([`OrderKey::compare_event_time`]); ties and values of
/// different classes go to the newer record (Java's `shouldKeepNewerRecord`: `>= 0`).
pub fn newer_wins(old: &OrderKey, new: &OrderKey) -> bool {
    new.compare_event_time(old) != Some(Ordering::Less)
}

/// Compares two decimals by value, whatever their scales.
fn compare_decimal(a: i128, sa: i8, b: i128, sb: i8) -> Ordering {
    // Bring both to the larger scale; a value whose rescaling overflows i128 is larger in
    // magnitude than anything representable, so its sign decides.
    let rescale = |v: i128, from: i8, to: i8| -> Option<i128> {
        10i128
            .checked_pow(u32::from(to.abs_diff(from)))
            .and_then(|f| v.checked_mul(f))
    };
    let overflow = |v: i128| {
        if v > 0 {
            Ordering::Greater
        } else {
            Ordering::Less
        }
    };
    if sa == sb {
        a.cmp(&b)
    } else if sa < sb {
        match rescale(a, sa, sb) {
            Some(a) => a.cmp(&b),
            None => overflow(a),
        }
    } else {
        match rescale(b, sb, sa) {
            Some(b) => a.cmp(&b),
            None => overflow(b).reverse(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_newer_wins_null_is_lowest() {
        let long = OrderKey::Long;
        assert!(
            !newer_wins(&long(10), &OrderKey::Default),
            "null loses to 10"
        );
        assert!(newer_wins(&OrderKey::Default, &long(10)), "10 beats null");
        assert!(
            !newer_wins(&long(-5), &OrderKey::Default),
            "null loses to negative values too (hudi-rs sorts nulls lowest)"
        );
        assert!(
            newer_wins(&OrderKey::Default, &OrderKey::Default),
            "tie: newer"
        );
        assert!(newer_wins(&long(5), &long(5)), "tie: newer");
        assert!(!newer_wins(&long(6), &long(5)));
        assert!(
            newer_wins(&long(6), &OrderKey::Double(1.0)),
            "classes differ: newer"
        );
    }

    #[test]
    fn test_from_column_nanos_seconds_and_unsigned_compare_by_value() {
        use arrow::array::{TimestampNanosecondArray, TimestampSecondArray, UInt32Array};
        use std::sync::Arc;
        let ns: ArrayRef = Arc::new(TimestampNanosecondArray::from(vec![Some(5), Some(7), None]));
        assert_eq!(OrderKey::from_column(&ns, 1), OrderKey::Long(7));
        assert!(OrderKey::from_column(&ns, 2).is_default());
        assert!(newer_wins(
            &OrderKey::from_column(&ns, 0),
            &OrderKey::from_column(&ns, 1)
        ));
        assert!(!newer_wins(
            &OrderKey::from_column(&ns, 1),
            &OrderKey::from_column(&ns, 0)
        ));
        let s: ArrayRef = Arc::new(TimestampSecondArray::from(vec![3]));
        assert_eq!(OrderKey::from_column(&s, 0), OrderKey::Long(3));
        let u: ArrayRef = Arc::new(UInt32Array::from(vec![u32::MAX]));
        assert_eq!(
            OrderKey::from_column(&u, 0),
            OrderKey::Long(i64::from(u32::MAX))
        );
    }

    #[test]
    fn test_compare_same_class_only() {
        assert_eq!(
            OrderKey::Long(1).compare(&OrderKey::Long(2)),
            Some(Ordering::Less)
        );
        assert_eq!(OrderKey::Long(1).compare(&OrderKey::Double(1.0)), None);
        assert!(OrderKey::from_delete(None).is_default());
        assert!(OrderKey::from_delete(Some(&OrderingValue::Int(0))).is_default());
        assert_eq!(
            OrderKey::from_delete(Some(&OrderingValue::Long(0))),
            OrderKey::Long(0)
        );
        assert_eq!(
            compare_decimal(10, 1, 100, 2),
            Ordering::Equal,
            "1.0 == 1.00"
        );
    }
}
