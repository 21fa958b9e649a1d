//! The wrapped min/max values of MDT column statistics (`HoodieMetadataColumnStats.minValue` /
//! `maxValue`, spec §6.3), Java 1.1's value-type ordinals, and Java's order between values.

use std::cmp::Ordering;

use apache_avro::types::Value;

/// Java 1.1's `org.apache.hudi.stats.ValueType` ordinals (`valueType.typeOrdinal`).
pub mod value_type {
    /// `V1`: values written before value types existed (Java 1.0 semantics).
    pub const V1: i32 = 0;
    /// `NULL`.
    pub const NULL: i32 = 1;
    /// `BOOLEAN`.
    pub const BOOLEAN: i32 = 2;
    /// `INT`.
    pub const INT: i32 = 3;
    /// `LONG`.
    pub const LONG: i32 = 4;
    /// `FLOAT`.
    pub const FLOAT: i32 = 5;
    /// `DOUBLE`.
    pub const DOUBLE: i32 = 6;
    /// `STRING`.
    pub const STRING: i32 = 7;
    /// `BYTES`.
    pub const BYTES: i32 = 8;
    /// `FIXED`.
    pub const FIXED: i32 = 9;
    /// `DECIMAL` (`additionalInfo` holds precision and scale).
    pub const DECIMAL: i32 = 10;
    /// `UUID`.
    pub const UUID: i32 = 11;
    /// `DATE`.
    pub const DATE: i32 = 12;
    /// `TIME_MILLIS`.
    pub const TIME_MILLIS: i32 = 13;
    /// `TIME_MICROS`.
    pub const TIME_MICROS: i32 = 14;
    /// `TIMESTAMP_MILLIS`.
    pub const TIMESTAMP_MILLIS: i32 = 15;
    /// `TIMESTAMP_MICROS`.
    pub const TIMESTAMP_MICROS: i32 = 16;
    /// `TIMESTAMP_NANOS`.
    pub const TIMESTAMP_NANOS: i32 = 17;
    /// `LOCAL_TIMESTAMP_MILLIS`.
    pub const LOCAL_TIMESTAMP_MILLIS: i32 = 18;
    /// `LOCAL_TIMESTAMP_MICROS`.
    pub const LOCAL_TIMESTAMP_MICROS: i32 = 19;
    /// `LOCAL_TIMESTAMP_NANOS`.
    pub const LOCAL_TIMESTAMP_NANOS: i32 = 20;
}

/// A wrapped min/max value: one branch of the `minValue`/`maxValue` union, in the wrapper it
/// was (or is to be) stored in. Decoding and encoding are lossless: every branch keeps its
/// exact representation.
#[derive(Debug, Clone, PartialEq)]
pub enum StatValue {
    /// `BooleanWrapper`.
    Boolean(bool),
    /// `IntWrapper`.
    Int(i32),
    /// `LongWrapper`.
    Long(i64),
    /// `FloatWrapper`.
    Float(f32),
    /// `DoubleWrapper`.
    Double(f64),
    /// `BytesWrapper`.
    Bytes(Vec<u8>),
    /// `StringWrapper`.
    String(String),
    /// `DateWrapper`: days since the epoch.
    Date(i32),
    /// `DecimalWrapper`: the big-endian two's-complement unscaled value as stored, with the
    /// scale of the writer schema (15 in Hudi's schemas).
    Decimal {
        /// The unscaled value's bytes exactly as stored.
        unscaled: Vec<u8>,
        /// The decimal scale of the wrapper's schema.
        scale: u32,
    },
    /// `TimeMicrosWrapper`: microseconds since midnight.
    TimeMicros(i64),
    /// `TimestampMicrosWrapper`: microseconds since the epoch.
    TimestampMicros(i64),
    /// `LocalDateWrapper`: days since the epoch.
    LocalDate(i32),
    /// `ArrayWrapper`: `None` when `wrappedValues` is null; elements may be null.
    Array(Option<Vec<Option<StatValue>>>),
}

/// Compares two strings as Java's `String.compareTo` does (by UTF-16 code units).
pub fn java_string_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

impl StatValue {
    /// The union branch index in `HoodieMetadataColumnStats.minValue` (0 is null).
    pub(crate) fn branch(&self) -> u32 {
        match self {
            StatValue::Boolean(_) => 1,
            StatValue::Int(_) => 2,
            StatValue::Long(_) => 3,
            StatValue::Float(_) => 4,
            StatValue::Double(_) => 5,
            StatValue::Bytes(_) => 6,
            StatValue::String(_) => 7,
            StatValue::Date(_) => 8,
            StatValue::Decimal { .. } => 9,
            StatValue::TimeMicros(_) => 10,
            StatValue::TimestampMicros(_) => 11,
            StatValue::LocalDate(_) => 12,
            StatValue::Array(_) => 13,
        }
    }

    /// The wrapper record's name.
    pub fn wrapper_name(&self) -> &'static str {
        match self {
            StatValue::Boolean(_) => "BooleanWrapper",
            StatValue::Int(_) => "IntWrapper",
            StatValue::Long(_) => "LongWrapper",
            StatValue::Float(_) => "FloatWrapper",
            StatValue::Double(_) => "DoubleWrapper",
            StatValue::Bytes(_) => "BytesWrapper",
            StatValue::String(_) => "StringWrapper",
            StatValue::Date(_) => "DateWrapper",
            StatValue::Decimal { .. } => "DecimalWrapper",
            StatValue::TimeMicros(_) => "TimeMicrosWrapper",
            StatValue::TimestampMicros(_) => "TimestampMicrosWrapper",
            StatValue::LocalDate(_) => "LocalDateWrapper",
            StatValue::Array(_) => "ArrayWrapper",
        }
    }

    /// Java's natural order between two values of the same wrapper (`Comparable.compareTo` of
    /// the unwrapped values): numbers numerically (floats by `Float.compare`, so NaN is the
    /// largest), strings by UTF-16 code units, bytes as signed bytes (`ByteBuffer.compareTo`),
    /// decimals of equal scale by value. `None` for different wrappers, different decimal
    /// scales, and arrays (Java cannot compare them either).
    pub fn java_cmp(&self, other: &StatValue) -> Option<Ordering> {
        use StatValue as V;
        Some(match (self, other) {
            (V::Boolean(a), V::Boolean(b)) => a.cmp(b),
            (V::Int(a), V::Int(b))
            | (V::Date(a), V::Date(b))
            | (V::LocalDate(a), V::LocalDate(b)) => a.cmp(b),
            (V::Long(a), V::Long(b))
            | (V::TimeMicros(a), V::TimeMicros(b))
            | (V::TimestampMicros(a), V::TimestampMicros(b)) => a.cmp(b),
            (V::Float(a), V::Float(b)) => java_float_cmp(f64::from(*a), f64::from(*b)),
            (V::Double(a), V::Double(b)) => java_float_cmp(*a, *b),
            (V::String(a), V::String(b)) => java_string_cmp(a, b),
            (V::Bytes(a), V::Bytes(b)) => {
                let sa = a.iter().map(|x| *x as i8);
                sa.cmp(b.iter().map(|x| *x as i8))
            }
            (
                V::Decimal {
                    unscaled: a,
                    scale: sa,
                },
                V::Decimal {
                    unscaled: b,
                    scale: sb,
                },
            ) if sa == sb => signed_be_cmp(a, b),
            _ => return None,
        })
    }

    /// [`StatValue::java_cmp`] for values of a column whose value type is `value_type`: with
    /// Java 1.1's `DECIMAL` the `BytesWrapper`s hold unscaled big-endian integers and compare
    /// numerically (Java unwraps them to `BigDecimal`s of the column's scale).
    pub fn java_cmp_typed(
        &self,
        other: &StatValue,
        value_type: Option<&ValueTypeInfo>,
    ) -> Option<Ordering> {
        match (self, other, value_type) {
            (StatValue::Bytes(a), StatValue::Bytes(b), Some(vt))
                if vt.type_ordinal == value_type::DECIMAL =>
            {
                Some(signed_be_cmp(a, b))
            }
            _ => self.java_cmp(other),
        }
    }

    pub(crate) fn to_avro(&self) -> Value {
        let inner = match self {
            StatValue::Boolean(b) => Value::Boolean(*b),
            StatValue::Int(i) | StatValue::Date(i) | StatValue::LocalDate(i) => Value::Int(*i),
            StatValue::Long(l) | StatValue::TimestampMicros(l) => Value::Long(*l),
            StatValue::TimeMicros(l) => Value::TimeMicros(*l),
            StatValue::Float(f) => Value::Float(*f),
            StatValue::Double(d) => Value::Double(*d),
            StatValue::Bytes(b) => Value::Bytes(b.clone()),
            StatValue::String(s) => Value::String(s.clone()),
            StatValue::Decimal { unscaled, .. } => {
                Value::Decimal(apache_avro::Decimal::from(unscaled.as_slice()))
            }
            StatValue::Array(items) => {
                let wrapped = match items {
                    None => Value::Union(0, Box::new(Value::Null)),
                    Some(items) => Value::Union(
                        1,
                        Box::new(Value::Array(
                            items
                                .iter()
                                .map(|i| match i {
                                    None => Value::Union(0, Box::new(Value::Null)),
                                    Some(v) => Value::Union(v.branch(), Box::new(v.to_avro())),
                                })
                                .collect(),
                        )),
                    ),
                };
                return Value::Record(vec![("wrappedValues".into(), wrapped)]);
            }
        };
        Value::Record(vec![("value".into(), inner)])
    }
}

/// `Double.compare`: NaN above everything, -0.0 below 0.0.
fn java_float_cmp(a: f64, b: f64) -> Ordering {
    match a.partial_cmp(&b) {
        Some(Ordering::Equal) => {
            // -0.0 < 0.0 in Java's total order.
            a.is_sign_negative().cmp(&b.is_sign_negative()).reverse()
        }
        Some(o) => o,
        None => a.is_nan().cmp(&b.is_nan()),
    }
}

/// Compares two big-endian two's-complement integers of any lengths (empty is zero).
pub fn signed_be_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let neg = |x: &[u8]| x.first().is_some_and(|b| b & 0x80 != 0);
    let (na, nb) = (neg(a), neg(b));
    if na != nb {
        return if na {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    let len = a.len().max(b.len());
    let extend = |x: &[u8], n: bool| {
        let pad = if n { 0xFF } else { 0 };
        let mut v = vec![pad; len - x.len()];
        v.extend_from_slice(x);
        v
    };
    extend(a, na).cmp(&extend(b, nb))
}

/// `HoodieValueTypeInfo`: the logical type of the min/max values (Java 1.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueTypeInfo {
    /// `typeOrdinal`: one of [`value_type`].
    pub type_ordinal: i32,
    /// `additionalInfo` (e.g. decimal precision and scale), `None` when null.
    pub additional_info: Option<String>,
}
