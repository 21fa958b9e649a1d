//! The MDT `column_stats` and `partition_stats` records (spec §6.2, §6.3): `HoodieMetadataRecord`
//! type 3 (one column of one data file) and type 6 (one column of one data partition), both
//! with the payload `HoodieMetadataColumnStats`, and their record keys.
//!
//! Keys (Java `HoodieMetadataPayload.getColumnStatsIndexKey` / `getPartitionStatsIndexKey`):
//! base64(XXH64(column)) + base64(XXH64(partition)) [+ base64(MD5(file name))], where XXH64 uses
//! seed `0xFFFFFFFFDABADABA` and is written as 8 big-endian bytes, Base64 is the standard
//! alphabet with padding, and the partition of a non-partitioned table is `.`.
//!
//! Values decode with the writer schema of the file or block they came from (Java 1.0 / table
//! version 8 writes no `isTightBound` and `valueType`; they decode as `false` / `None`) and
//! encode with [`super::mdt::metadata_record_schema`] (Java 1.1 / version 9) or, for version 8
//! tables, a writer schema without those fields ([`encode_column_stats_value_with`]).

use std::cmp::Ordering;

use apache_avro::types::Value;
use apache_avro::Schema;
use base64::Engine;
use md5::Digest;

use super::mdt::metadata_record_schema;
use crate::{FormatError, Result};

/// Record type of a `column_stats` record.
pub const RECORD_TYPE_COLUMN_STATS: i32 = 3;
/// Record type of a `partition_stats` record.
pub const RECORD_TYPE_PARTITION_STATS: i32 = 6;
/// The seed of the XXH64 hashes in column-stats keys (Java's int seed `0xdabadaba`
/// sign-extended to a long).
pub const KEY_HASH_SEED: u64 = 0xFFFF_FFFF_DABA_DABA;
/// The partition identifier hashed for a non-partitioned table (Java `NON_PARTITIONED_NAME`).
pub const NON_PARTITIONED_ID: &str = ".";

/// The `HoodieMetadataRecord` writer schema of Java 1.0 (table version 8), as the v8 fixtures
/// store it: `HoodieMetadataColumnStats` has `isTightBound` but no `valueType`, and the
/// min/max union has no `ArrayWrapper`.
pub const METADATA_RECORD_SCHEMA_V8_JSON: &str = include_str!("HoodieMetadataRecord_v8.avsc");

/// The parsed [`METADATA_RECORD_SCHEMA_V8_JSON`] (parsed once).
pub fn metadata_record_schema_v8() -> Result<&'static Schema> {
    static SCHEMA: std::sync::OnceLock<std::result::Result<Schema, String>> =
        std::sync::OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            Schema::parse_str(METADATA_RECORD_SCHEMA_V8_JSON).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| FormatError::Schema {
            field: None,
            reason: format!("HoodieMetadataRecord v8 schema: {e}"),
        })
}

/// The writer schema JSON of MDT records for `table_version` (8: Java 1.0's, else 1.1's).
pub fn metadata_record_schema_json_for(table_version: u32) -> &'static str {
    if table_version <= 8 {
        METADATA_RECORD_SCHEMA_V8_JSON
    } else {
        super::mdt::METADATA_RECORD_SCHEMA_JSON
    }
}

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
    fn branch(&self) -> u32 {
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

    fn to_avro(&self) -> Value {
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

/// `HoodieMetadataColumnStats`: the payload of one `column_stats` (type 3) or
/// `partition_stats` (type 6) record. Fields mirror the Avro fields one to one; nullable
/// fields are `Option`s, so decoding then encoding keeps every value.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnStatsRecord {
    /// `fileName`: the data file name (column stats) or the data partition path (partition
    /// stats).
    pub file_name: Option<String>,
    /// `columnName`.
    pub column_name: Option<String>,
    /// `minValue`.
    pub min_value: Option<StatValue>,
    /// `maxValue`.
    pub max_value: Option<StatValue>,
    /// `valueCount`: values in the column, nulls included.
    pub value_count: Option<i64>,
    /// `nullCount`.
    pub null_count: Option<i64>,
    /// `totalSize`: compressed bytes of the column's chunks.
    pub total_size: Option<i64>,
    /// `totalUncompressedSize`.
    pub total_uncompressed_size: Option<i64>,
    /// `isDeleted`: a tombstone for the entry.
    pub is_deleted: bool,
    /// `isTightBound`: the range is exact (`false` for file stats and schemas without the
    /// field).
    pub is_tight_bound: bool,
    /// `valueType` (`None` when null or absent from the writer schema).
    pub value_type: Option<ValueTypeInfo>,
}

impl ColumnStatsRecord {
    /// Java's `HoodieTableMetadataUtil.mergeColumnStatsRecords(prev = self, new = newer)`:
    /// a tombstone on either side, or a tight-bound `newer`, yields `newer`; otherwise the
    /// minimum of the mins and maximum of the maxes (nulls ignored; values Java could not
    /// compare keep `newer`'s), summed counts and sizes (a null on either side gives the
    /// other's), `newer`'s names, flags and value type.
    pub fn merge(&self, newer: &ColumnStatsRecord) -> ColumnStatsRecord {
        if newer.is_deleted || self.is_deleted || newer.is_tight_bound {
            return newer.clone();
        }
        let vt = newer.value_type.as_ref().or(self.value_type.as_ref());
        let pick = |a: &Option<StatValue>, b: &Option<StatValue>, want: Ordering| match (a, b) {
            (Some(x), Some(y)) => match x.java_cmp_typed(y, vt) {
                Some(o) if o == want => Some(x.clone()),
                _ => Some(y.clone()),
            },
            (Some(x), None) => Some(x.clone()),
            (None, y) => y.clone(),
        };
        let sum = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.wrapping_add(y)),
            (x, y) => x.or(y),
        };
        ColumnStatsRecord {
            file_name: newer.file_name.clone(),
            column_name: newer.column_name.clone(),
            min_value: pick(&self.min_value, &newer.min_value, Ordering::Less),
            max_value: pick(&self.max_value, &newer.max_value, Ordering::Greater),
            value_count: sum(self.value_count, newer.value_count),
            null_count: sum(self.null_count, newer.null_count),
            total_size: sum(self.total_size, newer.total_size),
            total_uncompressed_size: sum(
                self.total_uncompressed_size,
                newer.total_uncompressed_size,
            ),
            is_deleted: newer.is_deleted,
            is_tight_bound: newer.is_tight_bound,
            value_type: newer.value_type.clone(),
        }
    }
}

/// A decoded column-stats value: the record type (3 or 6) and its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnStatsValue {
    /// [`RECORD_TYPE_COLUMN_STATS`] or [`RECORD_TYPE_PARTITION_STATS`].
    pub record_type: i32,
    /// `ColumnStatsMetadata`.
    pub stats: ColumnStatsRecord,
}

fn hash_b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Base64 of the big-endian XXH64 (seed [`KEY_HASH_SEED`]) of `s`'s UTF-8 bytes (Java
/// `ColumnIndexID` / `PartitionIndexID`).
pub fn xxh64_id(s: &str) -> String {
    let h = twox_hash::XxHash64::oneshot(KEY_HASH_SEED, s.as_bytes());
    hash_b64(&h.to_be_bytes())
}

/// Base64 of the MD5 of `s`'s UTF-8 bytes (Java `FileIndexID`).
pub fn md5_id(s: &str) -> String {
    hash_b64(&md5::Md5::digest(s.as_bytes()))
}

/// The partition identifier hashed into keys: the partition path, or [`NON_PARTITIONED_ID`]
/// for `""` (Java `getColumnStatsIndexPartitionIdentifier`).
pub fn partition_identifier(partition: &str) -> &str {
    if partition.is_empty() {
        NON_PARTITIONED_ID
    } else {
        partition
    }
}

/// The MDT key of the `column_stats` record of `column` in data file `file_name` of data
/// partition `partition` (`""` when non-partitioned).
pub fn column_stats_key(column: &str, partition: &str, file_name: &str) -> String {
    let mut k = partition_stats_key(column, partition);
    k.push_str(&md5_id(file_name));
    k
}

/// The MDT key of the `partition_stats` record of `column` in data partition `partition`
/// (`""` when non-partitioned).
pub fn partition_stats_key(column: &str, partition: &str) -> String {
    let mut k = xxh64_id(column);
    k.push_str(&xxh64_id(partition_identifier(partition)));
    k
}

/// The key prefix shared by every `column_stats` record of `column` in `partition` (and the
/// whole `partition_stats` key): for prefix lookups.
pub fn column_partition_key_prefix(column: &str, partition: &str) -> String {
    partition_stats_key(column, partition)
}

fn avro_err(path: &str, reason: impl Into<String>) -> FormatError {
    FormatError::Avro {
        path: path.to_string(),
        reason: reason.into(),
    }
}

fn unwrap_union(v: &Value) -> &Value {
    match v {
        Value::Union(_, inner) => inner,
        other => other,
    }
}

/// The scale of the `DecimalWrapper` in `schema` (15 when it cannot be found).
fn decimal_scale(schema: &Schema) -> u32 {
    find_decimal_scale(schema).unwrap_or(15)
}

fn find_decimal_scale(schema: &Schema) -> Option<u32> {
    match schema {
        Schema::Record(r) => r.fields.iter().find_map(|f| find_decimal_scale(&f.schema)),
        Schema::Union(u) => u.variants().iter().find_map(find_decimal_scale),
        Schema::Array(a) => find_decimal_scale(&a.items),
        Schema::Decimal(d) => u32::try_from(d.scale).ok(),
        _ => None,
    }
}

fn decode_stat_value(v: &Value, scale: u32, field: &str, path: &str) -> Result<Option<StatValue>> {
    let (branch, inner) = match v {
        Value::Union(b, inner) => (*b, inner.as_ref()),
        other => (u32::MAX, other),
    };
    if matches!(inner, Value::Null) {
        return Ok(None);
    }
    let Value::Record(fields) = inner else {
        return Err(avro_err(path, format!("{field} is not a wrapper record")));
    };
    if let Some((_, wrapped)) = fields.iter().find(|(n, _)| n == "wrappedValues") {
        let items = match unwrap_union(wrapped) {
            Value::Null => None,
            Value::Array(items) => Some(
                items
                    .iter()
                    .map(|i| decode_stat_value(i, scale, field, path))
                    .collect::<Result<Vec<_>>>()?,
            ),
            _ => {
                return Err(avro_err(
                    path,
                    format!("{field}.wrappedValues is not an array"),
                ))
            }
        };
        return Ok(Some(StatValue::Array(items)));
    }
    let value = fields
        .iter()
        .find(|(n, _)| n == "value")
        .map(|(_, v)| v)
        .ok_or_else(|| avro_err(path, format!("{field} wrapper has no value")))?;
    let bad = || {
        avro_err(
            path,
            format!("{field} wrapper (branch {branch}) holds {value:?}"),
        )
    };
    Ok(Some(match (branch, value) {
        (1, Value::Boolean(b)) => StatValue::Boolean(*b),
        (2, Value::Int(i)) => StatValue::Int(*i),
        (3, Value::Long(l)) => StatValue::Long(*l),
        (4, Value::Float(f)) => StatValue::Float(*f),
        (5, Value::Double(d)) => StatValue::Double(*d),
        (6, Value::Bytes(b)) => StatValue::Bytes(b.clone()),
        (7, Value::String(s)) => StatValue::String(s.clone()),
        (8, Value::Int(i) | Value::Date(i)) => StatValue::Date(*i),
        (9, Value::Decimal(d)) => StatValue::Decimal {
            unscaled: <Vec<u8>>::try_from(d).map_err(|e| avro_err(path, e.to_string()))?,
            scale,
        },
        (9, Value::Bytes(b)) => StatValue::Decimal {
            unscaled: b.clone(),
            scale,
        },
        (10, Value::Long(l) | Value::TimeMicros(l)) => StatValue::TimeMicros(*l),
        (11, Value::Long(l) | Value::TimestampMicros(l)) => StatValue::TimestampMicros(*l),
        (12, Value::Int(i) | Value::Date(i)) => StatValue::LocalDate(*i),
        _ => return Err(bad()),
    }))
}

fn opt_long(v: &Value) -> Option<i64> {
    match unwrap_union(v) {
        Value::Long(l) => Some(*l),
        _ => None,
    }
}

fn opt_string(v: &Value) -> Option<String> {
    match unwrap_union(v) {
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// Decodes one value of the `column_stats` or `partition_stats` partition written with
/// `writer_schema` (HFile file-info `schema` or log block `SCHEMA` header). Fails, naming
/// `path`, unless the record has type [`RECORD_TYPE_COLUMN_STATS`] or
/// [`RECORD_TYPE_PARTITION_STATS`] and a non-null `ColumnStatsMetadata`, or when a wrapper
/// holds a value of another type than its own.
pub fn decode_column_stats_value(
    value: &[u8],
    writer_schema: &Schema,
    path: &str,
) -> Result<ColumnStatsValue> {
    let mut reader = value;
    let datum_reader = apache_avro::reader::datum::GenericDatumReader::builder(writer_schema)
        .build()
        .map_err(|e| avro_err(path, format!("HoodieMetadataRecord schema unusable: {e}")))?;
    let decoded = datum_reader
        .read_value(&mut reader)
        .map_err(|e| avro_err(path, format!("HoodieMetadataRecord cannot be decoded: {e}")))?;
    if !reader.is_empty() {
        return Err(avro_err(
            path,
            format!("{} trailing bytes after HoodieMetadataRecord", reader.len()),
        ));
    }
    let Value::Record(fields) = decoded else {
        return Err(avro_err(path, "HoodieMetadataRecord is not a record"));
    };
    let mut record_type = None;
    let mut payload = None;
    for (name, v) in &fields {
        match (name.as_str(), unwrap_union(v)) {
            ("type", Value::Int(t)) => record_type = Some(*t),
            ("ColumnStatsMetadata", Value::Record(r)) => payload = Some(r),
            _ => {}
        }
    }
    let record_type = match record_type {
        Some(t @ (RECORD_TYPE_COLUMN_STATS | RECORD_TYPE_PARTITION_STATS)) => t,
        Some(t) => {
            return Err(avro_err(
                path,
                format!("HoodieMetadataRecord has type {t}, expected 3 or 6"),
            ))
        }
        None => return Err(avro_err(path, "HoodieMetadataRecord has no int `type`")),
    };
    let payload = payload
        .ok_or_else(|| avro_err(path, "column stats record has null ColumnStatsMetadata"))?;
    let scale = decimal_scale(writer_schema);
    let mut stats = ColumnStatsRecord {
        file_name: None,
        column_name: None,
        min_value: None,
        max_value: None,
        value_count: None,
        null_count: None,
        total_size: None,
        total_uncompressed_size: None,
        is_deleted: false,
        is_tight_bound: false,
        value_type: None,
    };
    for (name, v) in payload {
        match name.as_str() {
            "fileName" => stats.file_name = opt_string(v),
            "columnName" => stats.column_name = opt_string(v),
            "minValue" => stats.min_value = decode_stat_value(v, scale, "minValue", path)?,
            "maxValue" => stats.max_value = decode_stat_value(v, scale, "maxValue", path)?,
            "valueCount" => stats.value_count = opt_long(v),
            "nullCount" => stats.null_count = opt_long(v),
            "totalSize" => stats.total_size = opt_long(v),
            "totalUncompressedSize" => stats.total_uncompressed_size = opt_long(v),
            "isDeleted" => stats.is_deleted = matches!(unwrap_union(v), Value::Boolean(true)),
            "isTightBound" => {
                stats.is_tight_bound = matches!(unwrap_union(v), Value::Boolean(true))
            }
            "valueType" => {
                if let Value::Record(info) = unwrap_union(v) {
                    let mut vt = ValueTypeInfo {
                        type_ordinal: 0,
                        additional_info: None,
                    };
                    for (n, x) in info {
                        match (n.as_str(), unwrap_union(x)) {
                            ("typeOrdinal", Value::Int(o)) => vt.type_ordinal = *o,
                            ("additionalInfo", Value::String(s)) => {
                                vt.additional_info = Some(s.clone())
                            }
                            _ => {}
                        }
                    }
                    stats.value_type = Some(vt);
                }
            }
            _ => {}
        }
    }
    Ok(ColumnStatsValue { record_type, stats })
}

fn null() -> Value {
    Value::Union(0, Box::new(Value::Null))
}

fn some(v: Value) -> Value {
    Value::Union(1, Box::new(v))
}

fn opt<T>(v: &Option<T>, f: impl Fn(&T) -> Value) -> Value {
    v.as_ref().map_or_else(null, |x| some(f(x)))
}

fn wrapped(v: &Option<StatValue>) -> Value {
    match v {
        None => null(),
        Some(v) => Value::Union(v.branch(), Box::new(v.to_avro())),
    }
}

/// Encodes a column-stats value with [`metadata_record_schema`] (the v9 writer schema, with
/// `isTightBound` and `valueType`); [`decode_column_stats_value`] returns it unchanged. Fails
/// if `record_type` is neither 3 nor 6.
pub fn encode_column_stats_value(value: &ColumnStatsValue) -> Result<Vec<u8>> {
    encode_column_stats_value_with(value, metadata_record_schema()?)
}

/// Like [`encode_column_stats_value`] with another `HoodieMetadataRecord` writer schema
/// (e.g. Java 1.0's for version 8 tables): payload fields the schema lacks are left out. Fails
/// if a non-default value would be dropped that way (a lossy encoding), if `record_type` is
/// neither 3 nor 6, or if the schema cannot hold the value.
pub fn encode_column_stats_value_with(
    value: &ColumnStatsValue,
    schema: &Schema,
) -> Result<Vec<u8>> {
    let path = "HoodieMetadataRecord";
    if !matches!(
        value.record_type,
        RECORD_TYPE_COLUMN_STATS | RECORD_TYPE_PARTITION_STATS
    ) {
        return Err(avro_err(
            path,
            format!(
                "record type {} is not a column stats type",
                value.record_type
            ),
        ));
    }
    let payload_fields = column_stats_field_names(schema)
        .ok_or_else(|| avro_err(path, "writer schema has no HoodieMetadataColumnStats"))?;
    let s = &value.stats;
    let mut payload = Vec::new();
    for name in &payload_fields {
        let v = match name.as_str() {
            "fileName" => opt(&s.file_name, |x| Value::String(x.clone())),
            "columnName" => opt(&s.column_name, |x| Value::String(x.clone())),
            "minValue" => wrapped(&s.min_value),
            "maxValue" => wrapped(&s.max_value),
            "valueCount" => opt(&s.value_count, |x| Value::Long(*x)),
            "nullCount" => opt(&s.null_count, |x| Value::Long(*x)),
            "totalSize" => opt(&s.total_size, |x| Value::Long(*x)),
            "totalUncompressedSize" => opt(&s.total_uncompressed_size, |x| Value::Long(*x)),
            "isDeleted" => Value::Boolean(s.is_deleted),
            "isTightBound" => Value::Boolean(s.is_tight_bound),
            "valueType" => opt(&s.value_type, |vt| {
                Value::Record(vec![
                    ("typeOrdinal".into(), Value::Int(vt.type_ordinal)),
                    (
                        "additionalInfo".into(),
                        opt(&vt.additional_info, |x| Value::String(x.clone())),
                    ),
                ])
            }),
            other => {
                return Err(avro_err(
                    path,
                    format!("writer schema has unknown column stats field {other}"),
                ))
            }
        };
        payload.push((name.clone(), v));
    }
    let has = |n: &str| payload_fields.iter().any(|f| f == n);
    if (s.is_tight_bound && !has("isTightBound")) || (s.value_type.is_some() && !has("valueType")) {
        return Err(avro_err(
            path,
            "the writer schema cannot hold isTightBound/valueType; encoding would lose them",
        ));
    }
    let top = top_level_field_names(schema)
        .ok_or_else(|| avro_err(path, "writer schema is not a record"))?;
    let mut fields = Vec::new();
    let mut payload = Some(payload);
    for name in top {
        let v = match name.as_str() {
            "key" => Value::String(String::new()),
            "type" => Value::Int(value.record_type),
            "ColumnStatsMetadata" => some(Value::Record(payload.take().unwrap_or_default())),
            _ => null(),
        };
        fields.push((name, v));
    }
    let err = |e: apache_avro::Error| avro_err(path, format!("cannot be encoded: {e}"));
    let writer = apache_avro::writer::datum::GenericDatumWriter::builder(schema)
        .build()
        .map_err(err)?;
    let mut out = Vec::new();
    writer
        .write_value_ref(&mut out, &Value::Record(fields))
        .map_err(err)?;
    Ok(out)
}

fn top_level_field_names(schema: &Schema) -> Option<Vec<String>> {
    match schema {
        Schema::Record(r) => Some(r.fields.iter().map(|f| f.name.clone()).collect()),
        _ => None,
    }
}

fn column_stats_field_names(schema: &Schema) -> Option<Vec<String>> {
    let Schema::Record(r) = schema else {
        return None;
    };
    let field = r.fields.iter().find(|f| f.name == "ColumnStatsMetadata")?;
    let Schema::Union(u) = &field.schema else {
        return None;
    };
    u.variants().iter().find_map(|v| match v {
        Schema::Record(r) => Some(r.fields.iter().map(|f| f.name.clone()).collect()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn sample(min: StatValue, max: StatValue) -> ColumnStatsValue {
        ColumnStatsValue {
            record_type: RECORD_TYPE_COLUMN_STATS,
            stats: ColumnStatsRecord {
                file_name: Some("f1.parquet".into()),
                column_name: Some("c".into()),
                min_value: Some(min),
                max_value: Some(max),
                value_count: Some(10),
                null_count: Some(2),
                total_size: Some(100),
                total_uncompressed_size: Some(120),
                is_deleted: false,
                is_tight_bound: false,
                value_type: Some(ValueTypeInfo {
                    type_ordinal: value_type::STRING,
                    additional_info: None,
                }),
            },
        }
    }

    #[test]
    fn test_keys_match_spec_examples() {
        assert_eq!(xxh64_id("currency"), "/m6lxu4Dh5w=");
        assert_eq!(xxh64_id("region=us"), "431THTTwO5Q=");
        let k = column_stats_key("currency", "region=us", "a.parquet");
        assert_eq!(k.len(), 12 + 12 + 24);
        assert!(k.starts_with("/m6lxu4Dh5w=431THTTwO5Q="));
        assert_eq!(
            partition_stats_key("currency", ""),
            format!("/m6lxu4Dh5w={}", xxh64_id("."))
        );
        assert_eq!(md5_id(""), "1B2M2Y8AsgTpgAmY7PhCfg==");
    }

    #[test]
    fn test_round_trip_every_wrapper() {
        let values = [
            StatValue::Boolean(true),
            StatValue::Int(-3),
            StatValue::Long(i64::MIN),
            StatValue::Float(1.5),
            StatValue::Double(-2.25),
            StatValue::Bytes(vec![0, 255, 7]),
            StatValue::String("ünï".into()),
            StatValue::Date(19_000),
            StatValue::Decimal {
                unscaled: vec![0xFF, 0x85],
                scale: 15,
            },
            StatValue::TimeMicros(3_600_000_000),
            StatValue::TimestampMicros(1_700_000_000_000_000),
            StatValue::LocalDate(-1),
            StatValue::Array(Some(vec![Some(StatValue::Int(1)), None])),
            StatValue::Array(None),
        ];
        for v in values {
            let rec = sample(v.clone(), v.clone());
            let bytes = encode_column_stats_value(&rec).unwrap();
            let back =
                decode_column_stats_value(&bytes, metadata_record_schema().unwrap(), "t").unwrap();
            assert_eq!(back, rec, "{}", v.wrapper_name());
        }
        let mut rec = sample(StatValue::Int(1), StatValue::Int(2));
        rec.record_type = RECORD_TYPE_PARTITION_STATS;
        rec.stats.min_value = None;
        rec.stats.value_count = None;
        rec.stats.is_tight_bound = true;
        rec.stats.is_deleted = true;
        rec.stats.value_type = None;
        let bytes = encode_column_stats_value(&rec).unwrap();
        let back =
            decode_column_stats_value(&bytes, metadata_record_schema().unwrap(), "t").unwrap();
        assert_eq!(back, rec);
    }

    #[test]
    fn test_encode_rejects_other_types_and_decode_names_path() {
        let mut rec = sample(StatValue::Int(1), StatValue::Int(2));
        rec.record_type = 5;
        assert!(encode_column_stats_value(&rec).is_err());
        let other = crate::hfile::mdt_index::encode_secondary_index_value(false).unwrap();
        let err = decode_column_stats_value(&other, metadata_record_schema().unwrap(), "p/q")
            .unwrap_err();
        assert!(err.to_string().contains("p/q"), "{err}");
    }

    #[test]
    fn test_merge_follows_java() {
        let a = sample(StatValue::String("b".into()), StatValue::String("m".into())).stats;
        let b = sample(StatValue::String("a".into()), StatValue::String("k".into())).stats;
        let m = a.merge(&b);
        assert_eq!(m.min_value, Some(StatValue::String("a".into())));
        assert_eq!(m.max_value, Some(StatValue::String("m".into())));
        assert_eq!(m.value_count, Some(20));
        assert_eq!(m.null_count, Some(4));
        assert_eq!(m.total_size, Some(200));
        let mut tomb = b.clone();
        tomb.is_deleted = true;
        assert_eq!(a.merge(&tomb), tomb);
        assert_eq!(tomb.merge(&a), a);
        let mut tight = b.clone();
        tight.is_tight_bound = true;
        assert_eq!(a.merge(&tight), tight);
    }

    #[test]
    fn test_v8_schema_round_trip_and_refuses_lossy() {
        let v8 = metadata_record_schema_v8().unwrap();
        let mut rec = sample(StatValue::Long(1), StatValue::Long(2));
        assert!(
            encode_column_stats_value_with(&rec, v8).is_err(),
            "valueType cannot be written in the v8 schema"
        );
        rec.stats.value_type = None;
        let bytes = encode_column_stats_value_with(&rec, v8).unwrap();
        assert_eq!(decode_column_stats_value(&bytes, v8, "t").unwrap(), rec);
        assert!(metadata_record_schema_json_for(8).contains("HoodieMetadataRecord"));
    }

    #[test]
    fn test_java_order() {
        // U+FFFD (one UTF-16 unit) sorts above U+1F600 (a surrogate pair) in Java.
        assert_eq!(java_string_cmp("\u{FFFD}", "\u{1F600}"), Ordering::Greater);
        assert_eq!(
            StatValue::Bytes(vec![0x80]).java_cmp(&StatValue::Bytes(vec![0x01])),
            Some(Ordering::Less)
        );
        assert_eq!(
            StatValue::Double(f64::NAN).java_cmp(&StatValue::Double(1.0)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            StatValue::Double(-0.0).java_cmp(&StatValue::Double(0.0)),
            Some(Ordering::Less)
        );
        let d = |b: &[u8]| StatValue::Decimal {
            unscaled: b.to_vec(),
            scale: 2,
        };
        assert_eq!(d(&[0xFF]).java_cmp(&d(&[0x00, 0x01])), Some(Ordering::Less));
        assert_eq!(
            d(&[0x01, 0x00]).java_cmp(&d(&[0x7F])),
            Some(Ordering::Greater)
        );
        assert_eq!(StatValue::Int(1).java_cmp(&StatValue::Long(1)), None);
    }
}
