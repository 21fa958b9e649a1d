//! The benchmark's synthetic table: ten columns of the types a Hudi table holds, generated
//! column by column (deterministic, no randomness), in batches the way a caller would feed
//! them.
//!
//! Columns: `id` (string record key), `ts` (long ordering field), `region` (string partition
//! column, [`REGIONS`] values), `qty` (int), `price` (double), `note` (string), `day` (date),
//! `event_time` (timestamp, UTC), `amount` (decimal(12,2)), `active` (bool). Rows are spread
//! over the regions by a hash, so every input batch touches every partition.

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
/// The partition column.
pub const PARTITION: &str = "region";
/// How many distinct partition values the rows use.
pub const REGIONS: u64 = 10;
/// Rows per input batch.
pub const BATCH_ROWS: u64 = 65_536;
/// Added to `ts` by an update: every updated row has `ts >= UPDATE_TS`, no inserted row has.
pub const UPDATE_TS: i64 = 1_000_000_000_000;

const AMOUNT_PRECISION: u8 = 12;
const AMOUNT_SCALE: i8 = 2;

/// The data schema (without meta columns).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(KEY, DataType::Utf8, false),
        Field::new(ORDERING, DataType::Int64, false),
        Field::new(PARTITION, DataType::Utf8, false),
        Field::new("qty", DataType::Int32, true),
        Field::new("price", DataType::Float64, true),
        Field::new("note", DataType::Utf8, true),
        Field::new("day", DataType::Date32, true),
        Field::new(
            "event_time",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new(
            "amount",
            DataType::Decimal128(AMOUNT_PRECISION, AMOUNT_SCALE),
            true,
        ),
        Field::new("active", DataType::Boolean, true),
    ]))
}

/// splitmix64: a well-mixed deterministic hash.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The record key of key number `n`.
pub fn key(n: u64) -> String {
    format!("key-{n:010}")
}

/// The partition value of key number `n` (a key never changes partition).
pub fn region(n: u64) -> String {
    region_in(n, REGIONS)
}

/// The partition value of key number `n` in a table of `regions` partitions.
pub fn region_in(n: u64, regions: u64) -> String {
    format!("region-{}", mix(n) % regions.max(1))
}

/// One batch of the rows with key numbers `keys`, as version `version` writes them (version 0:
/// the insert; a later version is an update whose `ts` is at least [`UPDATE_TS`] and whose
/// values differ).
pub fn batch(keys: &[u64], version: u64) -> Result<RecordBatch, String> {
    batch_in(keys, version, REGIONS)
}

/// [`batch`] for a table of `regions` partitions.
pub fn batch_in(keys: &[u64], version: u64, regions: u64) -> Result<RecordBatch, String> {
    let h = |n: u64| mix(n.wrapping_mul(1_000_003).wrapping_add(version));
    // Nullable columns are null for about one row in eleven, each on its own pattern.
    let null = |n: u64, bit: u32| (h(n) >> bit) % 11 == 0;
    let bump = if version == 0 { 0 } else { UPDATE_TS };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(keys.iter().map(|&n| key(n)))),
        Arc::new(Int64Array::from_iter_values(
            keys.iter()
                .map(|&n| bump + (n as i64) * 10 + version as i64),
        )),
        Arc::new(StringArray::from_iter_values(
            keys.iter().map(|&n| region_in(n, regions)),
        )),
        Arc::new(
            keys.iter()
                .map(|&n| (!null(n, 3)).then(|| ((h(n) >> 8) % 10_000) as i32 - 500))
                .collect::<Int32Array>(),
        ),
        Arc::new(
            keys.iter()
                .map(|&n| (!null(n, 13)).then(|| ((h(n) >> 16) % 1_000_000) as f64 / 8.0))
                .collect::<Float64Array>(),
        ),
        Arc::new(
            keys.iter()
                .map(|&n| {
                    (!null(n, 23)).then(|| format!("note {} v{version} {}", h(n) % 9973, n % 97))
                })
                .collect::<StringArray>(),
        ),
        Arc::new(
            keys.iter()
                .map(|&n| (!null(n, 33)).then(|| 18_000 + ((h(n) >> 34) % 3_000) as i32))
                .collect::<Date32Array>(),
        ),
        Arc::new(
            keys.iter()
                .map(|&n| {
                    (!null(n, 43))
                        .then(|| 1_600_000_000_000_000 + ((h(n) >> 20) % 100_000_000_000) as i64)
                })
                .collect::<TimestampMicrosecondArray>()
                .with_timezone("UTC"),
        ),
        Arc::new(
            keys.iter()
                .map(|&n| (!null(n, 53)).then(|| ((h(n) >> 24) % 100_000_000) as i128 - 5_000_000))
                .collect::<Decimal128Array>()
                .with_precision_and_scale(AMOUNT_PRECISION, AMOUNT_SCALE)
                .map_err(|e| format!("decimal column: {e}"))?,
        ),
        Arc::new(
            keys.iter()
                .map(|&n| (!null(n, 57)).then_some((h(n) >> 61) % 2 == 0))
                .collect::<BooleanArray>(),
        ),
    ];
    RecordBatch::try_new(schema(), columns).map_err(|e| format!("building a batch: {e}"))
}

/// Rows `0..rows` at version 0, in batches of [`BATCH_ROWS`].
pub fn inserts(rows: u64) -> Result<Vec<RecordBatch>, String> {
    inserts_in(rows, REGIONS)
}

/// [`inserts`] into a table of `regions` partitions.
pub fn inserts_in(rows: u64, regions: u64) -> Result<Vec<RecordBatch>, String> {
    let keys: Vec<u64> = (0..rows).collect();
    keys.chunks(BATCH_ROWS as usize)
        .map(|c| batch_in(c, 0, regions))
        .collect()
}

/// Updates (version 1) of every tenth key of `0..rows`, in batches of [`BATCH_ROWS`].
pub fn updates(rows: u64) -> Result<Vec<RecordBatch>, String> {
    updates_in(rows, REGIONS)
}

/// [`updates`] of a table of `regions` partitions.
pub fn updates_in(rows: u64, regions: u64) -> Result<Vec<RecordBatch>, String> {
    let keys: Vec<u64> = (0..rows).filter(|n| n % 10 == 3).collect();
    keys.chunks(BATCH_ROWS as usize)
        .map(|c| batch_in(c, 1, regions))
        .collect()
}

/// How many rows [`updates`] holds for a table of `rows` rows.
pub fn update_count(rows: u64) -> u64 {
    (0..rows).filter(|n| n % 10 == 3).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(batches: &[RecordBatch]) -> usize {
        batches.iter().map(RecordBatch::num_rows).sum()
    }

    #[test]
    fn test_inserts_row_count_and_schema_match() {
        let b = inserts(150_000).unwrap();
        assert_eq!(rows(&b), 150_000);
        assert_eq!(b.len(), 3);
        assert!(b.iter().all(|b| b.schema() == schema()));
        assert_eq!(schema().fields().len(), 10);
    }

    #[test]
    fn test_updates_tenth_of_keys_with_larger_ordering() {
        let u = updates(1_000).unwrap();
        assert_eq!(rows(&u), 100);
        assert_eq!(update_count(1_000), 100);
        let ts = u[0]
            .column_by_name(ORDERING)
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert!(ts.values().iter().all(|&t| t >= UPDATE_TS));
        let i = inserts(1_000).unwrap();
        let ts = i[0]
            .column_by_name(ORDERING)
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert!(ts.values().iter().all(|&t| t < UPDATE_TS));
    }

    #[test]
    fn test_region_spreads_over_all_partitions() {
        let seen: std::collections::BTreeSet<String> = (0..1_000).map(region).collect();
        assert_eq!(seen.len(), REGIONS as usize);
    }

    #[test]
    fn test_batch_same_keys_same_batch_other_version_differs() {
        assert_eq!(batch(&[1, 2, 3], 0), batch(&[1, 2, 3], 0));
        assert_ne!(batch(&[1, 2, 3], 0), batch(&[1, 2, 3], 1));
    }
}
