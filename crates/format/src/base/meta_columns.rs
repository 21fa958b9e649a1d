//! The `_hoodie_*` meta column values of a base file, built without per-row formatting:
//! constant columns as a one-value dictionary (the parquet column is the same `BYTE_ARRAY`
//! `STRING` column either way, dictionary-encoded by the writer), sequence numbers in one
//! pre-sized buffer, and the record key range in Java order with a byte-order fast path.

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Int32Array, StringArray};
use arrow_schema::DataType;

/// The Arrow type of a constant meta column as the writer feeds it to parquet.
pub(crate) fn constant_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// `n` rows holding `value`: a dictionary of one value whose keys are all 0 (4 bytes a row,
/// whatever the length of `value`).
pub(crate) fn constant(value: &str, n: usize) -> ArrayRef {
    let values: ArrayRef = Arc::new(StringArray::from_iter_values([value]));
    let keys = Int32Array::from(vec![0i32; n]);
    Arc::new(DictionaryArray::<Int32Type>::new(keys, values))
}

/// `n` null rows of a constant meta column ([`constant_type`]).
pub(crate) fn constant_nulls(n: usize) -> ArrayRef {
    let values: ArrayRef = Arc::new(StringArray::from_iter_values([""]));
    Arc::new(DictionaryArray::<Int32Type>::new(
        Int32Array::new_null(n),
        values,
    ))
}

/// The sequence numbers `<instant>_<task>_<row>` of rows `first..first + n`, written into one
/// buffer sized up front (no string allocated per row).
pub(crate) fn seqnos(instant: &str, task: u64, first: usize, n: usize) -> StringArray {
    let prefix = format!("{instant}_{task}_");
    let last = first.saturating_add(n);
    let digits = last.checked_ilog10().map_or(1, |d| d as usize + 1);
    let mut builder = StringBuilder::with_capacity(n, n * (prefix.len() + digits));
    let mut number = [0u8; 20];
    for row in first..last {
        let text = decimal(row, &mut number);
        // Writing to a string builder cannot fail; the row is finished by `append_value`.
        let _ = builder.write_str(&prefix);
        let _ = builder.write_str(text);
        builder.append_value("");
    }
    builder.finish()
}

/// `value` in decimal, written into the end of `buf`.
fn decimal(mut value: usize, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    loop {
        at -= 1;
        if let Some(slot) = buf.get_mut(at) {
            *slot = b'0' + (value % 10) as u8;
        }
        value /= 10;
        if value == 0 || at == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(buf.get(at..).unwrap_or_default()).unwrap_or_default()
}

/// Java `String.compareTo` order (UTF-16 code units).
pub(crate) fn java_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The smallest and largest non-null key in Java order (`None` without keys). UTF-8 byte
/// order is code point order, which is UTF-16 order unless a string holds a character at or
/// above U+E000 (whose UTF-8 lead byte is 0xEE or above): without one, the byte-order
/// kernels answer; with one, every key is compared in UTF-16.
pub(crate) fn key_range(keys: &StringArray) -> (Option<String>, Option<String>) {
    if keys.value_data().iter().all(|&b| b < 0xEE) {
        let min = arrow::compute::min_string(keys).map(str::to_string);
        let max = arrow::compute::max_string(keys).map(str::to_string);
        return (min, max);
    }
    let mut min: Option<&str> = None;
    let mut max: Option<&str> = None;
    for k in keys.iter().flatten() {
        if min.is_none_or(|m| java_cmp(k, m) == Ordering::Less) {
            min = Some(k);
        }
        if max.is_none_or(|m| java_cmp(k, m) == Ordering::Greater) {
            max = Some(k);
        }
    }
    (min.map(str::to_string), max.map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::Array;

    #[test]
    fn test_seqnos_match_format_per_row() {
        let got = seqnos("20260101000000000", 7, 998, 5);
        let want: Vec<String> = (998..1003)
            .map(|i| format!("20260101000000000_7_{i}"))
            .collect();
        let got: Vec<&str> = got.iter().flatten().collect();
        assert_eq!(got, want);
        assert_eq!(seqnos("1", 0, 0, 1).value(0), "1_0_0");
        assert_eq!(seqnos("1", 0, 0, 0).len(), 0);
    }

    #[test]
    fn test_decimal_extremes_match_to_string() {
        let mut buf = [0u8; 20];
        for v in [0usize, 9, 10, 99, 100, 12345, usize::MAX] {
            assert_eq!(decimal(v, &mut buf), v.to_string());
        }
    }

    #[test]
    fn test_constant_reads_back_value_in_every_row() {
        let c = constant("file.parquet", 3);
        assert_eq!(c.data_type(), &constant_type());
        let plain = arrow::compute::cast(&c, &DataType::Utf8).unwrap();
        let plain = plain.as_string::<i32>();
        assert!(plain.iter().all(|v| v == Some("file.parquet")));
        assert_eq!(plain.len(), 3);
        assert_eq!(constant_nulls(2).null_count(), 2);
    }

    #[test]
    fn test_key_range_java_order_surrogates_before_private_use() {
        // U+1F600 (surrogate pair D83D DE00) sorts before U+E000 in UTF-16, after it in UTF-8.
        let keys = StringArray::from(vec!["\u{E000}", "\u{1F600}", "a"]);
        let (min, max) = key_range(&keys);
        assert_eq!(min.as_deref(), Some("a"));
        assert_eq!(max.as_deref(), Some("\u{E000}"));
        let keys = StringArray::from(vec!["\u{E000}", "\u{1F600}"]);
        assert_eq!(key_range(&keys).0.as_deref(), Some("\u{1F600}"));
    }

    #[test]
    fn test_key_range_ascii_fast_path_and_empty() {
        let keys = StringArray::from(vec!["key-2", "key-10", "key-1"]);
        assert_eq!(
            key_range(&keys),
            (Some("key-1".to_string()), Some("key-2".to_string()))
        );
        let none = StringArray::from(Vec::<&str>::new());
        assert_eq!(key_range(&none), (None, None));
    }
}
