//! Avro schemas and values <-> Arrow schemas and arrays.
//!
//! Hudi log blocks carry records as Avro (Spark writes them with the table's Avro schema, meta
//! fields first), base files carry them as parquet. Readers merge both into one Arrow batch, so
//! the Arrow types produced here are the ones parquet-rs yields when it reads a Spark-written
//! base file of the same table:
//!
//! | Avro | Arrow |
//! |---|---|
//! | `["null", T]`, `[T, "null"]` | `T`, nullable |
//! | `boolean`, `int`, `long`, `float`, `double` | `Boolean`, `Int32`, `Int64`, `Float32`, `Float64` |
//! | `string`, `enum`, `uuid` (string) | `Utf8` |
//! | `bytes` | `Binary` |
//! | `fixed(n)`, `uuid` (fixed) | `FixedSizeBinary(n)` |
//! | `decimal(p, s)` (bytes or fixed) | `Decimal128(p, s)` |
//! | `date` | `Date32` |
//! | `time-millis`, `time-micros` | `Time32(ms)`, `Time64(us)` |
//! | `timestamp-millis/micros/nanos` | `Timestamp(unit, "UTC")` (parquet-rs's zone for `isAdjustedToUTC`) |
//! | `local-timestamp-*` | `Timestamp(unit, None)` |
//! | `record` | `Struct` |
//! | `array<T>` | `List` with item field `element` |
//! | `map<T>` | `Map` with entries `key_value { key: Utf8 (non-null), value }` |
//!
//! Other unions, `duration` and big decimals are refused with [`FormatError::Schema`] naming
//! the field. Spark narrows some types that Avro cannot express (a Spark `BYTE` or `SHORT`
//! column is an Avro `int` but a parquet `INT(8)`/`INT(16)`), so [`avro_records_to_batch`]
//! takes the Arrow schema to produce and casts where the natural type differs.

mod avro_schema;
mod decimal;
mod direct;
mod schema;
mod to_arrow;
mod to_avro;

pub use avro_schema::{arrow_schema_to_avro, arrow_schema_to_avro_json};
pub(crate) use decimal::{i128_from_be, i128_to_be};
pub(crate) use direct::DirectDecoder;
pub use schema::{avro_schema_to_arrow, parse_avro_schema};
pub use to_arrow::avro_records_to_batch;
pub(crate) use to_arrow::check_not_recursive;
pub use to_avro::batch_to_avro_records;

/// The time zone parquet-rs gives `TIMESTAMP(isAdjustedToUTC=true)` columns, and so the zone of
/// every Avro `timestamp-*` column here.
pub const UTC: &str = "UTC";

/// Name of the item field of every Arrow `List` produced here (parquet's 3-level list).
pub const LIST_ITEM_NAME: &str = "element";

/// Name of the entries field of every Arrow `Map` produced here (parquet's `key_value`).
pub const MAP_ENTRIES_NAME: &str = "key_value";

/// Largest precision a `Decimal128` holds.
const MAX_DECIMAL128_PRECISION: usize = 38;
