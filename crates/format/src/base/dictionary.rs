//! Which data columns of a base file are written without a dictionary: those a sample of rows
//! (spread by a fixed hash) shows to be (nearly) unique and whose dictionary would outgrow
//! the dictionary page limit in every row group. Parquet would intern such a column's values until the dictionary fills,
//! then abandon it and write the rest of the row group plain: the interning is spent for
//! nothing and the file ends up larger (a 1 MiB dictionary page beside the plain pages).
//! Writing these columns plain from the first row gives the same values, readable by every
//! reader (plain is the fallback encoding every parquet reader knows); other columns keep
//! the writer's default (dictionary, with its own fallback).

use std::collections::HashSet;

use arrow::array::ArrayData;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;

/// Rows sampled per column (evenly spaced over the file's rows).
pub(crate) const SAMPLE_ROWS: usize = 4096;

/// Fewest non-null sampled values a column needs before it is judged.
const MIN_SAMPLED: usize = 256;

/// Share of distinct values among the non-null sampled ones (per mille) from which a column
/// counts as nearly unique. At 99%, a sample of 4096 rows implies some 200,000 distinct
/// values or more in the column: a dictionary of at least 1.6 MB for 8-byte values.
const DISTINCT_PER_MILLE: usize = 990;

/// Bytes a byte-array value takes in a dictionary page besides its data (its length).
const LENGTH_PREFIX: usize = 4;

/// Names of the top-level columns of `batches` (one schema) that should be written without a
/// dictionary, given `row_group_rows` rows per row group at most and a dictionary page limit
/// of `dictionary_limit` bytes (module doc). Nested, boolean and dictionary-typed columns are
/// never listed. Reads at most [`SAMPLE_ROWS`] values per column.
pub(crate) fn plain_columns(
    batches: &[RecordBatch],
    row_group_rows: usize,
    dictionary_limit: usize,
) -> Vec<String> {
    let Some(first) = batches.first() else {
        return Vec::new();
    };
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if rows < MIN_SAMPLED {
        return Vec::new();
    }
    let positions = sample_positions(rows);
    let rows_per_group = rows.min(row_group_rows.max(1));
    let mut out = Vec::new();
    for (index, field) in first.schema().fields().iter().enumerate() {
        let columns: Vec<&ArrayRef> = batches
            .iter()
            .filter_map(|b| b.columns().get(index))
            .collect();
        let Some(sample) = sample_column(&columns, field.data_type(), &positions) else {
            continue;
        };
        if sample.non_null < MIN_SAMPLED
            || sample.distinct * 1000 < sample.non_null * DISTINCT_PER_MILLE
        {
            continue;
        }
        let non_null_rows = rows_per_group * sample.non_null / sample.sampled.max(1);
        let width = sample.value_bytes / sample.non_null.max(1);
        if non_null_rows.saturating_mul(width) > dictionary_limit {
            out.push(field.name().clone());
        }
    }
    out
}

/// What a sample of one column showed.
struct Sample {
    /// Rows sampled (nulls included).
    sampled: usize,
    /// Non-null values sampled.
    non_null: usize,
    /// Distinct non-null values sampled.
    distinct: usize,
    /// Bytes the sampled non-null values would take in a dictionary page.
    value_bytes: usize,
}

/// Up to [`SAMPLE_ROWS`] distinct rows of `0..rows`, ascending, spread by a fixed hash (the
/// same rows for the same count, so the same input always gives the same file). Not evenly
/// spaced: a stride would miss the repeats of periodic values (`i % 50_000` sampled every 74
/// rows shows no repeat at all).
fn sample_positions(rows: usize) -> Vec<usize> {
    if rows <= SAMPLE_ROWS {
        return (0..rows).collect();
    }
    let mut positions: Vec<usize> = (0..SAMPLE_ROWS as u64)
        .map(|k| (mix(k) % rows as u64) as usize)
        .collect();
    positions.sort_unstable();
    positions.dedup();
    positions
}

/// splitmix64: a well-spread deterministic hash.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Samples rows `positions` (ascending, counted across `parts` in order) of the column made
/// of `parts`; `None` for a type that is not judged.
fn sample_column(parts: &[&ArrayRef], data_type: &DataType, positions: &[usize]) -> Option<Sample> {
    let fixed = match data_type {
        DataType::Boolean | DataType::Dictionary(_, _) => return None,
        DataType::Utf8 | DataType::Binary | DataType::LargeUtf8 | DataType::LargeBinary => None,
        t => Some(t.primitive_width()?),
    };
    let data: Vec<ArrayData> = parts.iter().map(|p| p.to_data()).collect();
    let mut seen: HashSet<&[u8]> = HashSet::with_capacity(SAMPLE_ROWS);
    let mut sample = Sample {
        sampled: 0,
        non_null: 0,
        distinct: 0,
        value_bytes: 0,
    };
    let mut wanted = positions.iter().copied().peekable();
    // The global row of the current part's first row.
    let mut first = 0usize;
    for (part, data) in parts.iter().zip(&data) {
        let len = part.len();
        while let Some(row) = wanted.next_if(|&r| r < first + len) {
            sample.sampled += 1;
            if let Some(value) = value_bytes(part.as_ref(), data, row - first, fixed) {
                sample.non_null += 1;
                sample.value_bytes += value.len() + if fixed.is_some() { 0 } else { LENGTH_PREFIX };
                if seen.insert(value) {
                    sample.distinct += 1;
                }
            }
        }
        first += len;
    }
    Some(sample)
}

/// The bytes of row `row` (below its length) of `array`, whose data is `data` (`None` when
/// null): `width` bytes of its value buffer for a fixed-width type, else its byte-array value.
fn value_bytes<'a>(
    array: &'a dyn Array,
    data: &'a ArrayData,
    row: usize,
    width: Option<usize>,
) -> Option<&'a [u8]> {
    if array.is_null(row) {
        return None;
    }
    match width {
        Some(w) => {
            let start = (data.offset() + row).checked_mul(w)?;
            data.buffers()
                .first()?
                .as_slice()
                .get(start..start.checked_add(w)?)
        }
        None => {
            if let Some(a) = array.as_string_opt::<i32>() {
                Some(a.value(row).as_bytes())
            } else if let Some(a) = array.as_string_opt::<i64>() {
                Some(a.value(row).as_bytes())
            } else if let Some(a) = array.as_binary_opt::<i32>() {
                Some(a.value(row))
            } else {
                array.as_binary_opt::<i64>().map(|a| a.value(row))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, Int64Array, LargeStringArray, StringArray};
    use arrow_schema::{Field, Schema};

    use super::*;

    const LIMIT: usize = 1024 * 1024;

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

    #[test]
    fn test_unique_columns_large_enough_are_plain_repeated_ones_keep_the_dictionary() {
        let n = 300_000i64;
        let b = batch(vec![
            (
                "unique_long",
                Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
            ),
            (
                "repeated_long",
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 50_000))),
            ),
            (
                "unique_string",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("key-{i:010}")),
                )),
            ),
            (
                "large_unique_string",
                Arc::new(LargeStringArray::from_iter_values(
                    (0..n).map(|i| format!("v{i:08}")),
                )),
            ),
            (
                "few",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("r{}", i % 10)),
                )),
            ),
        ]);
        let plain = plain_columns(&[b], 1024 * 1024, LIMIT);
        assert_eq!(
            plain,
            vec!["unique_long", "unique_string", "large_unique_string"]
        );
    }

    #[test]
    fn test_small_files_and_small_row_groups_keep_the_dictionary() {
        // 100,000 unique ints are 400 KB: the dictionary fits its page.
        let b = batch(vec![(
            "i",
            Arc::new(Int32Array::from_iter_values(0..100_000)) as ArrayRef,
        )]);
        assert!(plain_columns(std::slice::from_ref(&b), 1024 * 1024, LIMIT).is_empty());
        // Unique longs, but row groups of 10,000 rows: 80 KB dictionaries.
        let b = batch(vec![(
            "l",
            Arc::new(Int64Array::from_iter_values(0..400_000)) as ArrayRef,
        )]);
        assert!(plain_columns(std::slice::from_ref(&b), 10_000, LIMIT).is_empty());
        assert_eq!(plain_columns(&[b], 1024 * 1024, LIMIT), vec!["l"]);
        assert!(plain_columns(&[], 1024 * 1024, LIMIT).is_empty());
    }

    #[test]
    fn test_nulls_sliced_arrays_and_several_batches_are_sampled_correctly() {
        // Mostly null: the non-null values cannot fill a dictionary page.
        let sparse: Int64Array = (0..300_000i64)
            .map(|i| (i % 100 == 0).then_some(i))
            .collect();
        // A slice whose offset is not zero, repeated values behind it.
        let full =
            Int64Array::from_iter_values(
                (0..600_000i64).map(|i| if i < 300_000 { i % 7 } else { i }),
            );
        let sliced = full.slice(300_000, 300_000);
        let b = batch(vec![
            ("sparse", Arc::new(sparse) as ArrayRef),
            ("sliced", Arc::new(sliced) as ArrayRef),
        ]);
        let (x, y) = (b.slice(0, 100_000), b.slice(100_000, 200_000));
        assert_eq!(plain_columns(&[x, y], 1024 * 1024, LIMIT), vec!["sliced"]);
    }
}
