//! Record keys and partition paths from Arrow batches (spec 4.4), matching Java Hudi's built-in
//! key generators (`SimpleAvroKeyGenerator`, `ComplexAvroKeyGenerator`,
//! `NonpartitionedAvroKeyGenerator` and their Spark counterparts).
//!
//! Values become strings as Java renders them: integers in decimal, booleans `true`/`false`,
//! strings as they are, dates `yyyy-MM-dd` (`LocalDate.toString`), decimals as
//! `BigDecimal.toString` (plain unless the exponent is below -6), floats and doubles as
//! `Float.toString`/`Double.toString` (`1.0`, `1.0E10`), timestamps as chosen by
//! [`TimestampKeyFormat`]. Binary, list, map and other nested values are refused (Java renders
//! them as object dumps that are no use as keys).
//!
//! Key shapes:
//! - SIMPLE: one record key field; the key is its value; null or empty is an error.
//! - COMPLEX: `f1:v1,f2:v2` over all record key fields, also for a single field (Java's default
//!   encoding); a null part is `__null__`, an empty one `__empty__`; all parts null or empty is
//!   an error.
//! - NON_PARTITION: like SIMPLE with one record key field, like COMPLEX with several; the
//!   partition path is always `""`.
//!
//! Partition paths: values joined by `/` in partition field order; hive style writes
//! `field=value`; a null or empty value becomes [`DEFAULT_PARTITION_PATH`]; with URL encoding
//! on, values are escaped as Hive escapes path names ([`escape_partition_value`]).

use arbor_timeline::config::keys;
use arbor_timeline::TableConfig;
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
use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};

use crate::error::{Result, TableError};

/// The partition value written for a null or empty partition field.
pub const DEFAULT_PARTITION_PATH: &str = "__HIVE_DEFAULT_PARTITION__";
/// The part written for a null field of a complex key.
pub const NULL_RECORD_KEY_PLACEHOLDER: &str = "__null__";
/// The part written for an empty field of a complex key.
pub const EMPTY_RECORD_KEY_PLACEHOLDER: &str = "__empty__";

/// The built-in key generators arbor reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyGeneratorType {
    /// One record key field, at most one partition field.
    Simple,
    /// Any number of record key and partition fields; keys as `f1:v1,f2:v2`.
    Complex,
    /// No partitions.
    NonPartition,
}

impl KeyGeneratorType {
    /// The `hoodie.table.keygenerator.type` spelling.
    pub fn name(self) -> &'static str {
        match self {
            KeyGeneratorType::Simple => "SIMPLE",
            KeyGeneratorType::Complex => "COMPLEX",
            KeyGeneratorType::NonPartition => "NON_PARTITION",
        }
    }

    /// Parses a `hoodie.table.keygenerator.type` value (the `_AVRO` variants included); `None`
    /// for types arbor does not reproduce (TIMESTAMP, CUSTOM, ...).
    pub fn parse(s: &str) -> Option<KeyGeneratorType> {
        match s.trim().to_ascii_uppercase().as_str() {
            "SIMPLE" | "SIMPLE_AVRO" => Some(KeyGeneratorType::Simple),
            "COMPLEX" | "COMPLEX_AVRO" => Some(KeyGeneratorType::Complex),
            "NON_PARTITION" | "NON_PARTITION_AVRO" => Some(KeyGeneratorType::NonPartition),
            _ => None,
        }
    }

    /// Maps a (pre-1.0) `hoodie.table.keygenerator.class` to its type; `None` for classes arbor
    /// does not reproduce.
    pub fn from_class_name(class: &str) -> Option<KeyGeneratorType> {
        let simple = class.trim().rsplit('.').next().unwrap_or_default();
        match simple {
            "SimpleKeyGenerator" | "SimpleAvroKeyGenerator" => Some(KeyGeneratorType::Simple),
            "ComplexKeyGenerator" | "ComplexAvroKeyGenerator" => Some(KeyGeneratorType::Complex),
            "NonpartitionedKeyGenerator" | "NonpartitionedAvroKeyGenerator" => {
                Some(KeyGeneratorType::NonPartition)
            }
            _ => None,
        }
    }
}

/// How timestamp values become key strings; Java's two code paths differ here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampKeyFormat {
    /// Microseconds since the epoch in decimal — the value as a base file stores it, and what
    /// Java's Avro key generators write (`HoodieAvroUtils` without consistent logical
    /// timestamps). The default.
    #[default]
    EpochMicros,
    /// `java.sql.Timestamp.toString()` in UTC at millisecond precision
    /// (`2023-04-01 12:01:00.0`) — what Spark's row-based key generators write when the JVM
    /// time zone is UTC.
    SqlTimestampUtc,
}

/// Everything key generation needs from a table's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyGenConfig {
    /// Which generator.
    pub kind: KeyGeneratorType,
    /// Record key fields, in order (dotted paths reach into struct columns).
    pub record_key_fields: Vec<String>,
    /// Partition fields, in order (ignored by NON_PARTITION).
    pub partition_fields: Vec<String>,
    /// `field=value` partition segments.
    pub hive_style: bool,
    /// Hive-style escaping of partition values.
    pub url_encode: bool,
    /// Rendering of timestamp values.
    pub timestamp_format: TimestampKeyFormat,
}

impl KeyGenConfig {
    /// Reads the key generator settings of a table: `hoodie.table.keygenerator.type`, else the
    /// legacy `hoodie.table.keygenerator.class`, else inferred as Java infers it (no partition
    /// fields: NON_PARTITION; one partition field and at most one key field: SIMPLE; otherwise
    /// COMPLEX). TIMESTAMP, CUSTOM and other generators are [`TableError::Unsupported`].
    pub fn from_table_config(config: &TableConfig) -> Result<KeyGenConfig> {
        let record_key_fields = config.record_key_fields();
        let partition_fields = config.partition_fields();
        let kind = if let Some(t) = config.get(keys::KEY_GENERATOR_TYPE) {
            KeyGeneratorType::parse(t).ok_or_else(|| TableError::Unsupported {
                reason: format!("key generator type {t:?} is not supported by arbor"),
            })?
        } else if let Some(c) = config.get(keys::KEY_GENERATOR_CLASS) {
            KeyGeneratorType::from_class_name(c).ok_or_else(|| TableError::Unsupported {
                reason: format!("key generator class {c:?} is not supported by arbor"),
            })?
        } else if partition_fields.is_empty() {
            KeyGeneratorType::NonPartition
        } else if partition_fields.iter().any(|f| f.contains(':')) {
            return Err(TableError::Unsupported {
                reason: format!(
                    "partition fields {partition_fields:?} need the CUSTOM key generator"
                ),
            });
        } else if partition_fields.len() == 1 && record_key_fields.len() <= 1 {
            KeyGeneratorType::Simple
        } else {
            KeyGeneratorType::Complex
        };
        Ok(KeyGenConfig {
            kind,
            record_key_fields,
            partition_fields,
            hive_style: config.hive_style_partitioning(),
            url_encode: config.url_encode_partitioning(),
            timestamp_format: TimestampKeyFormat::default(),
        })
    }
}

/// The key of one record: its record key and its partition path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HoodieKey {
    /// The record key (`_hoodie_record_key`).
    pub record_key: String,
    /// The relative partition path (`_hoodie_partition_path`, `""` when non-partitioned).
    pub partition_path: String,
}

/// Computes record keys and partition paths of Arrow rows.
///
/// Guarantees: a validated config (at least one record key field; SIMPLE has exactly one and at
/// most one partition field); every returned record key is non-empty; one key per input row, in
/// order. Errors are [`TableError::InvalidInput`] naming the column and, for bad values, the row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyGenerator {
    config: KeyGenConfig,
}

impl KeyGenerator {
    /// Validates `config`.
    pub fn new(config: KeyGenConfig) -> Result<KeyGenerator> {
        if config.record_key_fields.is_empty() {
            return Err(TableError::Unsupported {
                reason: "tables without record key fields (auto-generated keys) are not supported"
                    .into(),
            });
        }
        if config.kind == KeyGeneratorType::Simple {
            if config.record_key_fields.len() != 1 {
                return Err(TableError::Unsupported {
                    reason: format!(
                        "the SIMPLE key generator takes one record key field, not {:?}",
                        config.record_key_fields
                    ),
                });
            }
            if config.partition_fields.len() > 1 {
                return Err(TableError::Unsupported {
                    reason: format!(
                        "the SIMPLE key generator takes at most one partition field, not {:?}",
                        config.partition_fields
                    ),
                });
            }
        }
        Ok(KeyGenerator { config })
    }

    /// Shortcut for [`KeyGenConfig::from_table_config`] then [`KeyGenerator::new`].
    pub fn from_table_config(config: &TableConfig) -> Result<KeyGenerator> {
        KeyGenerator::new(KeyGenConfig::from_table_config(config)?)
    }

    /// The configuration.
    pub fn config(&self) -> &KeyGenConfig {
        &self.config
    }

    /// Whether partition paths come from data (false for NON_PARTITION or no partition fields).
    pub fn is_partitioned(&self) -> bool {
        self.config.kind != KeyGeneratorType::NonPartition
            && !self.config.partition_fields.is_empty()
    }

    /// Keys of every row of `batch`; rows in errors are counted from 0.
    pub fn keys(&self, batch: &RecordBatch) -> Result<Vec<HoodieKey>> {
        self.keys_at(batch, 0)
    }

    /// Keys of every row of `batch`, whose first row is row `first_row` of the input (used in
    /// errors).
    pub fn keys_at(&self, batch: &RecordBatch, first_row: usize) -> Result<Vec<HoodieKey>> {
        let record_keys = self.record_keys_at(batch, first_row)?;
        let partition_paths = self.partition_paths_at(batch, first_row)?;
        Ok(record_keys
            .into_iter()
            .zip(partition_paths)
            .map(|(record_key, partition_path)| HoodieKey {
                record_key,
                partition_path,
            })
            .collect())
    }

    /// Record keys of every row of `batch` (first row numbered `first_row` in errors).
    pub fn record_keys_at(&self, batch: &RecordBatch, first_row: usize) -> Result<Vec<String>> {
        let fields = &self.config.record_key_fields;
        let columns = fields
            .iter()
            .map(|f| resolve_column(batch, f))
            .collect::<Result<Vec<_>>>()?;
        let plain = match self.config.kind {
            KeyGeneratorType::Simple => true,
            KeyGeneratorType::NonPartition => fields.len() == 1,
            KeyGeneratorType::Complex => false,
        };
        let mut out = Vec::with_capacity(batch.num_rows());
        for row in 0..batch.num_rows() {
            let input_row = first_row + row;
            if plain {
                let (field, column) = match (fields.first(), columns.first()) {
                    (Some(f), Some(c)) => (f, c),
                    _ => return Err(invalid(None, None, "no record key field")),
                };
                match self.value(field, column, row, input_row)? {
                    Some(v) if !v.is_empty() => out.push(v),
                    Some(_) => {
                        return Err(invalid(
                            Some(field),
                            Some(input_row),
                            "record key is an empty string",
                        ))
                    }
                    None => {
                        return Err(invalid(Some(field), Some(input_row), "record key is null"))
                    }
                }
                continue;
            }
            let mut key = String::new();
            let mut any_value = false;
            for (i, (field, column)) in fields.iter().zip(&columns).enumerate() {
                if i > 0 {
                    key.push(',');
                }
                key.push_str(field);
                key.push(':');
                match self.value(field, column, row, input_row)? {
                    None => key.push_str(NULL_RECORD_KEY_PLACEHOLDER),
                    Some(v) if v.is_empty() => key.push_str(EMPTY_RECORD_KEY_PLACEHOLDER),
                    Some(v) => {
                        any_value = true;
                        key.push_str(&v);
                    }
                }
            }
            if !any_value {
                return Err(invalid(
                    fields.first().map(String::as_str),
                    Some(input_row),
                    &format!("all record key fields {fields:?} are null or empty"),
                ));
            }
            out.push(key);
        }
        Ok(out)
    }

    /// Partition paths of every row of `batch` (first row numbered `first_row` in errors).
    pub fn partition_paths_at(&self, batch: &RecordBatch, first_row: usize) -> Result<Vec<String>> {
        if !self.is_partitioned() {
            return Ok(vec![String::new(); batch.num_rows()]);
        }
        let fields = &self.config.partition_fields;
        let columns = fields
            .iter()
            .map(|f| resolve_column(batch, f))
            .collect::<Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(batch.num_rows());
        for row in 0..batch.num_rows() {
            let mut path = String::new();
            for (i, (field, column)) in fields.iter().zip(&columns).enumerate() {
                if i > 0 {
                    path.push('/');
                }
                if self.config.hive_style {
                    path.push_str(field);
                    path.push('=');
                }
                match self.value(field, column, row, first_row + row)? {
                    Some(v) if !v.is_empty() => {
                        if self.config.url_encode {
                            path.push_str(&escape_partition_value(&v));
                        } else {
                            path.push_str(&v);
                        }
                    }
                    _ => path.push_str(DEFAULT_PARTITION_PATH),
                }
            }
            out.push(path);
        }
        Ok(out)
    }

    fn value(
        &self,
        field: &str,
        column: &ArrayRef,
        row: usize,
        input_row: usize,
    ) -> Result<Option<String>> {
        value_string(column.as_ref(), row, self.config.timestamp_format)
            .map_err(|reason| invalid(Some(field), Some(input_row), &reason))
    }
}

fn invalid(column: Option<&str>, row: Option<usize>, reason: &str) -> TableError {
    TableError::InvalidInput {
        column: column.map(str::to_string),
        row,
        reason: reason.to_string(),
    }
}

/// Finds a column by name, or by a dotted path into struct columns. Null struct parents make
/// the leaf null.
fn resolve_column(batch: &RecordBatch, field: &str) -> Result<ArrayRef> {
    if let Some(column) = batch.column_by_name(field) {
        return Ok(std::sync::Arc::clone(column));
    }
    let missing = || invalid(Some(field), None, "no such column in the input");
    let mut parts = field.split('.');
    let first = parts.next().ok_or_else(missing)?;
    let mut current = std::sync::Arc::clone(batch.column_by_name(first).ok_or_else(missing)?);
    for part in parts {
        let parent: &StructArray = current.as_struct_opt().ok_or_else(missing)?;
        let child = parent.column_by_name(part).ok_or_else(missing)?;
        current = match parent.nulls() {
            None => std::sync::Arc::clone(child),
            Some(nulls) => {
                let merged = arrow::buffer::NullBuffer::union(Some(nulls), child.nulls());
                let data = child
                    .to_data()
                    .into_builder()
                    .nulls(merged)
                    .build()
                    .map_err(|e| invalid(Some(field), None, &e.to_string()))?;
                arrow_array::make_array(data)
            }
        };
    }
    Ok(current)
}

/// Escapes a partition value as Hive (and Hudi's `PartitionPathEncodeUtils.escapePathName`)
/// does: control characters, DEL and `"#%'*/:=?\{[]^` become `%XX` (upper-case hex); other
/// characters, non-ASCII included, stay. An empty value becomes [`DEFAULT_PARTITION_PATH`].
pub fn escape_partition_value(value: &str) -> String {
    if value.is_empty() {
        return DEFAULT_PARTITION_PATH.to_string();
    }
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        let escape = (c as u32) < 0x20
            || c == '\u{7F}'
            || matches!(
                c,
                '"' | '#' | '%' | '\'' | '*' | '/' | ':' | '=' | '?' | '\\' | '{' | '[' | ']' | '^'
            );
        if escape {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The Java string of one value; `Ok(None)` for null, `Err(reason)` for a type that cannot be a
/// key.
fn value_string(
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
fn sql_timestamp(millis: i64) -> String {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array, Int32Array,
        Int64Array, StringArray, TimestampMicrosecondArray,
    };
    use arrow_schema::{Field, Fields, Schema};

    use super::*;

    fn config(kind: KeyGeneratorType, keys: &[&str], parts: &[&str]) -> KeyGenConfig {
        KeyGenConfig {
            kind,
            record_key_fields: keys.iter().map(|s| s.to_string()).collect(),
            partition_fields: parts.iter().map(|s| s.to_string()).collect(),
            hive_style: false,
            url_encode: false,
            timestamp_format: TimestampKeyFormat::EpochMicros,
        }
    }

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap()
    }

    fn one(array: ArrayRef) -> Option<String> {
        value_string(array.as_ref(), 0, TimestampKeyFormat::EpochMicros).unwrap()
    }

    #[test]
    fn test_simple_keys_plain_value_and_partition() {
        let b = batch(vec![
            ("id", Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef),
            (
                "region",
                Arc::new(StringArray::from(vec![Some("us"), None])),
            ),
        ]);
        let g = KeyGenerator::new(config(KeyGeneratorType::Simple, &["id"], &["region"])).unwrap();
        let keys = g.keys(&b).unwrap();
        assert_eq!(keys[0].record_key, "1");
        assert_eq!(keys[0].partition_path, "us");
        assert_eq!(keys[1].partition_path, DEFAULT_PARTITION_PATH);
        let mut hive = config(KeyGeneratorType::Simple, &["id"], &["region"]);
        hive.hive_style = true;
        let keys = KeyGenerator::new(hive).unwrap().keys(&b).unwrap();
        assert_eq!(keys[0].partition_path, "region=us");
        assert_eq!(keys[1].partition_path, "region=__HIVE_DEFAULT_PARTITION__");
    }

    #[test]
    fn test_complex_keys_format_placeholders_and_all_null_error() {
        let b = batch(vec![
            (
                "id",
                Arc::new(Int32Array::from(vec![Some(2), None, None])) as ArrayRef,
            ),
            (
                "name",
                Arc::new(StringArray::from(vec![Some("Bob"), Some(""), None])),
            ),
            ("a", Arc::new(Int32Array::from(vec![10, 20, 30]))),
            ("b", Arc::new(StringArray::from(vec!["x/y", "", "z"]))),
        ]);
        let mut c = config(KeyGeneratorType::Complex, &["id", "name", "a"], &["a", "b"]);
        c.hive_style = true;
        c.url_encode = true;
        let g = KeyGenerator::new(c).unwrap();
        let rk = g.record_keys_at(&b, 0).unwrap();
        assert_eq!(
            rk,
            [
                "id:2,name:Bob,a:10",
                "id:__null__,name:__empty__,a:20",
                "id:__null__,name:__null__,a:30"
            ]
        );
        let pp = g.partition_paths_at(&b, 0).unwrap();
        assert_eq!(pp[0], "a=10/b=x%2Fy");
        assert_eq!(pp[1], "a=20/b=__HIVE_DEFAULT_PARTITION__");
        let two =
            KeyGenerator::new(config(KeyGeneratorType::Complex, &["id", "name"], &[])).unwrap();
        assert_eq!(
            two.record_keys_at(&b.slice(0, 1), 0).unwrap(),
            ["id:2,name:Bob"]
        );
        match two.record_keys_at(&b.slice(1, 2), 100) {
            Err(TableError::InvalidInput { column, row, .. }) => {
                assert_eq!(column.as_deref(), Some("id"));
                assert_eq!(row, Some(100));
            }
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn test_complex_single_field_is_encoded_with_field_name() {
        let b = batch(vec![(
            "id",
            Arc::new(Int32Array::from(vec![7])) as ArrayRef,
        )]);
        let g = KeyGenerator::new(config(KeyGeneratorType::Complex, &["id"], &[])).unwrap();
        assert_eq!(g.record_keys_at(&b, 0).unwrap(), ["id:7"]);
        assert!(!g.is_partitioned());
        assert_eq!(g.partition_paths_at(&b, 0).unwrap(), [""]);
    }

    #[test]
    fn test_non_partition_single_plain_multi_complex_path_empty() {
        let b = batch(vec![
            ("id", Arc::new(Int32Array::from(vec![7])) as ArrayRef),
            ("k", Arc::new(StringArray::from(vec!["v"]))),
        ]);
        let single =
            KeyGenerator::new(config(KeyGeneratorType::NonPartition, &["id"], &["k"])).unwrap();
        assert_eq!(
            single.keys(&b).unwrap(),
            [HoodieKey {
                record_key: "7".into(),
                partition_path: String::new()
            }]
        );
        let multi =
            KeyGenerator::new(config(KeyGeneratorType::NonPartition, &["id", "k"], &[])).unwrap();
        assert_eq!(multi.record_keys_at(&b, 0).unwrap(), ["id:7,k:v"]);
    }

    #[test]
    fn test_simple_null_or_empty_key_invalid_input_names_column_and_row() {
        let b = batch(vec![(
            "id",
            Arc::new(StringArray::from(vec![Some("a"), Some(""), None])) as ArrayRef,
        )]);
        let g = KeyGenerator::new(config(KeyGeneratorType::Simple, &["id"], &[])).unwrap();
        for (offset, expected_row) in [(1usize, 1usize), (2, 2)] {
            match g.record_keys_at(&b.slice(offset, 1), offset) {
                Err(TableError::InvalidInput { column, row, .. }) => {
                    assert_eq!(column.as_deref(), Some("id"));
                    assert_eq!(row, Some(expected_row));
                }
                other => panic!("expected InvalidInput, got {other:?}"),
            }
        }
    }

    #[test]
    fn test_missing_column_invalid_input_names_column() {
        let b = batch(vec![(
            "id",
            Arc::new(Int32Array::from(vec![1])) as ArrayRef,
        )]);
        let g = KeyGenerator::new(config(KeyGeneratorType::Simple, &["id"], &["nope"])).unwrap();
        match g.keys(&b) {
            Err(TableError::InvalidInput { column, row, .. }) => {
                assert_eq!(column.as_deref(), Some("nope"));
                assert_eq!(row, None);
            }
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn test_new_invalid_configs_unsupported() {
        assert!(KeyGenerator::new(config(KeyGeneratorType::Simple, &[], &[])).is_err());
        assert!(KeyGenerator::new(config(KeyGeneratorType::Simple, &["a", "b"], &[])).is_err());
        assert!(KeyGenerator::new(config(KeyGeneratorType::Simple, &["a"], &["x", "y"])).is_err());
    }

    #[test]
    fn test_nested_field_path_and_null_parent() {
        let inner = StructArray::from(vec![(
            Arc::new(Field::new("id", DataType::Int64, true)),
            Arc::new(Int64Array::from(vec![5, 6])) as ArrayRef,
        )]);
        let outer = StructArray::new(
            Fields::from(vec![Field::new("id", DataType::Int64, true)]),
            inner.columns().to_vec(),
            Some(vec![true, false].into()),
        );
        let b = batch(vec![("s", Arc::new(outer) as ArrayRef)]);
        let g = KeyGenerator::new(config(KeyGeneratorType::Complex, &["s.id"], &[])).unwrap();
        assert_eq!(g.record_keys_at(&b.slice(0, 1), 0).unwrap(), ["s.id:5"]);
        assert!(g.record_keys_at(&b, 0).is_err()); // row 1: the only part is null
    }

    #[test]
    fn test_value_string_java_renderings() {
        assert_eq!(
            one(Arc::new(BooleanArray::from(vec![true]))).unwrap(),
            "true"
        );
        assert_eq!(
            one(Arc::new(Date32Array::from(vec![19_448]))).unwrap(),
            "2023-04-01"
        );
        assert_eq!(
            one(Arc::new(Date32Array::from(vec![-1]))).unwrap(),
            "1969-12-31"
        );
        let dec = |v: i128, p: u8, s: i8| -> String {
            one(Arc::new(
                Decimal128Array::from(vec![v])
                    .with_precision_and_scale(p, s)
                    .unwrap(),
            ))
            .unwrap()
        };
        assert_eq!(dec(1_234_567_890, 10, 5), "12345.67890");
        assert_eq!(dec(-5, 10, 2), "-0.05");
        assert_eq!(dec(1, 10, 7), "1E-7");
        assert_eq!(dec(0, 10, 7), "0E-7");
        assert_eq!(dec(0, 10, 2), "0.00");
        assert_eq!(dec(42, 10, 0), "42");
        let f64s = |v: f64| one(Arc::new(Float64Array::from(vec![v]))).unwrap();
        assert_eq!(f64s(1.0), "1.0");
        assert_eq!(f64s(4.25159), "4.25159");
        assert_eq!(f64s(-0.5), "-0.5");
        assert_eq!(f64s(0.001), "0.001");
        assert_eq!(f64s(0.0001), "1.0E-4");
        assert_eq!(f64s(1e7), "1.0E7");
        assert_eq!(f64s(9_999_999.0), "9999999.0");
        assert_eq!(f64s(1.5e10), "1.5E10");
        assert_eq!(f64s(123.456), "123.456");
        assert_eq!(f64s(0.0), "0.0");
        assert_eq!(f64s(-0.0), "-0.0");
        assert_eq!(f64s(f64::NAN), "NaN");
        assert_eq!(f64s(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(
            one(Arc::new(Float32Array::from(vec![0.1f32]))).unwrap(),
            "0.1"
        );
        assert_eq!(
            one(Arc::new(Float32Array::from(vec![2.0f32]))).unwrap(),
            "2.0"
        );
        // 2023-04-01 12:01:00 UTC in micros.
        let ts = Arc::new(TimestampMicrosecondArray::from(vec![1_680_350_460_123_000]));
        assert_eq!(one(ts.clone()).unwrap(), "1680350460123000");
        assert_eq!(
            value_string(ts.as_ref(), 0, TimestampKeyFormat::SqlTimestampUtc).unwrap(),
            Some("2023-04-01 12:01:00.123".to_string())
        );
        assert_eq!(sql_timestamp(1_680_350_460_000), "2023-04-01 12:01:00.0");
        assert_eq!(one(Arc::new(Int32Array::from(vec![None::<i32>]))), None);
        let bin: ArrayRef = Arc::new(arrow_array::BinaryArray::from(vec![&b"x"[..]]));
        assert!(value_string(bin.as_ref(), 0, TimestampKeyFormat::EpochMicros).is_err());
    }

    #[test]
    fn test_escape_partition_value_hive_set() {
        assert_eq!(escape_partition_value("a/b:c=d%e"), "a%2Fb%3Ac%3Dd%25e");
        assert_eq!(escape_partition_value("x\ny\u{7F}"), "x%0Ay%7F");
        assert_eq!(escape_partition_value("héllo wörld"), "héllo wörld");
        assert_eq!(
            escape_partition_value("[a]{b}^'\"#*?\\"),
            "%5Ba%5D%7Bb}%5E%27%22%23%2A%3F%5C"
        );
        assert_eq!(escape_partition_value(""), DEFAULT_PARTITION_PATH);
    }

    #[test]
    fn test_key_generator_type_parse_and_class_names() {
        assert_eq!(
            KeyGeneratorType::parse("simple"),
            Some(KeyGeneratorType::Simple)
        );
        assert_eq!(
            KeyGeneratorType::parse("COMPLEX_AVRO"),
            Some(KeyGeneratorType::Complex)
        );
        assert_eq!(KeyGeneratorType::parse("TIMESTAMP"), None);
        assert_eq!(
            KeyGeneratorType::from_class_name("org.apache.hudi.keygen.NonpartitionedKeyGenerator"),
            Some(KeyGeneratorType::NonPartition)
        );
        assert_eq!(
            KeyGeneratorType::from_class_name("org.apache.hudi.keygen.TimestampBasedKeyGenerator"),
            None
        );
    }
}
