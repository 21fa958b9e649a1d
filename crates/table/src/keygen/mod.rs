//! Record keys and partition paths from Arrow batches (spec 4.4), matching Java Hudi's built-in
//! key generators (`SimpleAvroKeyGenerator`, `ComplexAvroKeyGenerator`,
//! `NonpartitionedAvroKeyGenerator`, `TimestampBasedAvroKeyGenerator` and their Spark
//! counterparts).
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
//! - TIMESTAMP (`TimestampBasedAvroKeyGenerator`): the key as SIMPLE; the one partition value
//!   read as a point in time and printed with `hoodie.keygen.timebased.output.dateformat`
//!   ([`TimestampConfig`]; URL encoding escapes the whole printed value, `/` included).
//!
//! Partition paths: values joined by `/` in partition field order; hive style writes
//! `field=value`; a null or empty value becomes [`DEFAULT_PARTITION_PATH`]; with URL encoding
//! on, values are escaped as Hive escapes path names ([`escape_partition_value`]).

mod config;
mod generator;
mod joda;
mod timestamp;
mod value;

pub use config::{
    KeyGenConfig, KeyGeneratorType, TimestampKeyFormat, DEFAULT_PARTITION_PATH,
    EMPTY_RECORD_KEY_PLACEHOLDER, NULL_RECORD_KEY_PLACEHOLDER,
};
pub use generator::{HoodieKey, KeyGenerator};
pub use joda::JodaPattern;
pub use timestamp::{TimestampConfig, TimestampType, Zone};
pub use value::escape_partition_value;

#[cfg(test)]
mod tests;
