//! What a key generator is configured with: its kind, the key and partition fields, the
//! timestamp format, and the placeholders Java writes for null and empty values.

use arbor_timeline::config::keys;
use arbor_timeline::TableConfig;

use super::timestamp::TimestampConfig;
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
    /// One record key field (as SIMPLE) and one partition field read as a point in time and
    /// printed with a date format (`hoodie.keygen.timebased.*`, see [`TimestampConfig`]).
    Timestamp,
}

impl KeyGeneratorType {
    /// The `hoodie.table.keygenerator.type` spelling.
    pub fn name(self) -> &'static str {
        match self {
            KeyGeneratorType::Simple => "SIMPLE",
            KeyGeneratorType::Complex => "COMPLEX",
            KeyGeneratorType::NonPartition => "NON_PARTITION",
            KeyGeneratorType::Timestamp => "TIMESTAMP",
        }
    }

    /// Parses a `hoodie.table.keygenerator.type` value (the `_AVRO` variants included); `None`
    /// for types arbor does not reproduce (CUSTOM, ...).
    pub fn parse(s: &str) -> Option<KeyGeneratorType> {
        match s.trim().to_ascii_uppercase().as_str() {
            "SIMPLE" | "SIMPLE_AVRO" => Some(KeyGeneratorType::Simple),
            "COMPLEX" | "COMPLEX_AVRO" => Some(KeyGeneratorType::Complex),
            "NON_PARTITION" | "NON_PARTITION_AVRO" => Some(KeyGeneratorType::NonPartition),
            "TIMESTAMP" | "TIMESTAMP_AVRO" => Some(KeyGeneratorType::Timestamp),
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
            "TimestampBasedKeyGenerator" | "TimestampBasedAvroKeyGenerator" => {
                Some(KeyGeneratorType::Timestamp)
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
    /// The timestamp-based generator's settings (`Some` exactly for
    /// [`KeyGeneratorType::Timestamp`]).
    pub timestamp: Option<TimestampConfig>,
}

impl KeyGenConfig {
    /// Reads the key generator settings of a table: `hoodie.table.keygenerator.type`, else the
    /// legacy `hoodie.table.keygenerator.class`, else inferred as Java infers it (no partition
    /// fields: NON_PARTITION; one partition field and at most one key field: SIMPLE; otherwise
    /// COMPLEX). TIMESTAMP reads its `hoodie.keygen.timebased.*` settings ([`TimestampConfig`]);
    /// CUSTOM and any other generator are [`TableError::Unsupported`] naming it.
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
        let timestamp = match kind {
            KeyGeneratorType::Timestamp => Some(
                TimestampConfig::from_table_config(config).map_err(|reason| {
                    TableError::Unsupported {
                        reason: format!("the timestamp-based key generator: {reason}"),
                    }
                })?,
            ),
            _ => None,
        };
        Ok(KeyGenConfig {
            kind,
            timestamp,
            record_key_fields,
            partition_fields,
            hive_style: config.hive_style_partitioning(),
            url_encode: config.url_encode_partitioning(),
            timestamp_format: TimestampKeyFormat::default(),
        })
    }
}
