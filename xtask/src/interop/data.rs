//! Deterministic synthetic rows: the data schema of every scenario table, one row per
//! `(key number, version)`, and their conversion to Arrow.
//!
//! Columns cover the types a Hudi writer must get right: a string record key, a long ordering
//! field, a string partition column, int, double, decimal, date, timestamp (UTC), bool and
//! string, with nulls in every nullable column for some rows.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array,
    StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;

/// The record key column.
pub const KEY: &str = "id";
/// The ordering (precombine) column.
pub const ORDERING: &str = "ts";
/// The partition column (a plain column in non-partitioned tables).
pub const PARTITION: &str = "region";

/// Decimal precision and scale of `amount`.
const AMOUNT_PRECISION: u8 = 12;
const AMOUNT_SCALE: i8 = 2;

/// One row of the data schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: String,
    pub ts: i64,
    pub region: &'static str,
    pub qty: Option<i32>,
    pub price: Option<f64>,
    /// Unscaled decimal (scale 2).
    pub amount: Option<i128>,
    /// Days since the epoch.
    pub day: Option<i32>,
    /// Microseconds since the epoch, UTC.
    pub event_time: Option<i64>,
    pub active: Option<bool>,
    pub note: Option<String>,
}

/// The data schema (without meta columns).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(KEY, DataType::Utf8, false),
        Field::new(ORDERING, DataType::Int64, false),
        Field::new(PARTITION, DataType::Utf8, false),
        Field::new("qty", DataType::Int32, true),
        Field::new("price", DataType::Float64, true),
        Field::new(
            "amount",
            DataType::Decimal128(AMOUNT_PRECISION, AMOUNT_SCALE),
            true,
        ),
        Field::new("day", DataType::Date32, true),
        Field::new(
            "event_time",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("active", DataType::Boolean, true),
        Field::new("note", DataType::Utf8, true),
    ]))
}

/// splitmix64: a well-mixed deterministic hash.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A deterministic hash of a key number and a salt.
pub fn hash(n: u64, salt: u64) -> u64 {
    mix(n.wrapping_mul(1_000_003).wrapping_add(salt))
}

/// The record key of key number `n`.
pub fn key(n: u64) -> String {
    format!("key-{n:05}")
}

/// The region (partition value) of key number `n`; a key never changes region.
pub fn region(n: u64) -> &'static str {
    match n % 3 {
        0 => "americas",
        1 => "asia",
        _ => "europe",
    }
}

/// Row `n` as written by version `version` (0: first insert; higher versions are updates and
/// carry a larger ordering value, so they win under event-time ordering).
pub fn row(n: u64, version: u64) -> Row {
    let h = hash(n, version);
    // Every nullable column is null for some rows, each on its own pattern.
    let null = |bit: u32| (h >> bit) % 9 == 0;
    let small = (h % 10_000) as i64;
    Row {
        id: key(n),
        ts: (version as i64) * 1_000_000 + small,
        region: region(n),
        qty: (!null(3)).then(|| ((h >> 8) % 1_000) as i32 - 100),
        price: (!null(13)).then(|| ((h >> 16) % 100_000) as f64 / 8.0 + 0.1),
        amount: (!null(23)).then(|| ((h >> 24) % 10_000_000) as i128 - 2_000_000),
        day: (!null(33)).then(|| 18_000 + ((h >> 34) % 2_000) as i32),
        event_time: (!null(43))
            .then(|| 1_600_000_000_000_000 + ((h >> 20) as i64 % 1_000_000_000_000)),
        active: (!null(53)).then_some((h >> 60) % 2 == 0),
        note: (!null(57)).then(|| format!("note {n} v{version} {}", h % 97)),
    }
}

/// `rows` as one batch of the data schema.
pub fn to_batch(rows: &[Row]) -> Result<RecordBatch, String> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.id.as_str()),
        )),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.ts))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.region))),
        Arc::new(rows.iter().map(|r| r.qty).collect::<Int32Array>()),
        Arc::new(rows.iter().map(|r| r.price).collect::<Float64Array>()),
        Arc::new(
            rows.iter()
                .map(|r| r.amount)
                .collect::<Decimal128Array>()
                .with_precision_and_scale(AMOUNT_PRECISION, AMOUNT_SCALE)
                .map_err(|e| format!("decimal column: {e}"))?,
        ),
        Arc::new(rows.iter().map(|r| r.day).collect::<Date32Array>()),
        Arc::new(
            rows.iter()
                .map(|r| r.event_time)
                .collect::<TimestampMicrosecondArray>()
                .with_timezone("UTC"),
        ),
        Arc::new(rows.iter().map(|r| r.active).collect::<BooleanArray>()),
        Arc::new(
            rows.iter()
                .map(|r| r.note.as_deref())
                .collect::<StringArray>(),
        ),
    ];
    RecordBatch::try_new(schema(), columns).map_err(|e| format!("building a batch: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_row_same_inputs_same_row() {
        assert_eq!(row(7, 1), row(7, 1));
        assert_ne!(row(7, 1), row(7, 2));
    }

    #[test]
    fn test_row_later_version_larger_ordering_value() {
        for n in 0..500 {
            assert!(row(n, 1).ts > row(n, 0).ts, "key {n}");
        }
    }

    #[test]
    fn test_row_some_nulls_in_every_nullable_column() {
        let rows: Vec<Row> = (0..200).map(|n| row(n, 0)).collect();
        assert!(rows.iter().any(|r| r.qty.is_none()));
        assert!(rows.iter().any(|r| r.price.is_none()));
        assert!(rows.iter().any(|r| r.amount.is_none()));
        assert!(rows.iter().any(|r| r.day.is_none()));
        assert!(rows.iter().any(|r| r.event_time.is_none()));
        assert!(rows.iter().any(|r| r.active.is_none()));
        assert!(rows.iter().any(|r| r.note.is_none()));
        for region in ["americas", "asia", "europe"] {
            assert!(rows.iter().any(|r| r.region == region), "{region}");
        }
    }

    #[test]
    fn test_to_batch_rows_in_schema() {
        let rows: Vec<Row> = (0..10).map(|n| row(n, 0)).collect();
        let batch = to_batch(&rows).map_err(|e| e.to_string());
        assert_eq!(
            batch.map(|b| (b.num_rows(), b.schema())),
            Ok((10, schema()))
        );
    }
}
