//! Binary columns in text inputs: hexadecimal digits, two per byte, as `arbor read --format
//! csv|jsonl` prints binary values, so an export can be written back unchanged.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryBuilder};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Field};
use arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::error::{CliError, CliResult};

/// Whether `dt` is a binary type whose text form is hex.
pub fn is_binary(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_)
    )
}

/// Decodes the text column `column` (hex digits) into `field`'s binary type. A value with an
/// odd number of digits or a non-hex character, or (for a fixed-size type) of the wrong
/// length, is an error naming the file, the column and the row (`offset` + index).
pub fn decode_hex_column(
    path: &Path,
    field: &Field,
    column: &ArrayRef,
    offset: usize,
) -> CliResult<ArrayRef> {
    let bad = |row: usize, why: &str| CliError::Input {
        path: path.display().to_string(),
        reason: format!(
            "column {:?} at row {}: {why} (binary values are written as hex digits, as `arbor \
             read` prints them)",
            field.name(),
            offset + row
        ),
    };
    let whole = |why: String| CliError::Input {
        path: path.display().to_string(),
        reason: format!(
            "column {:?} cannot be read as {} (the table's type): {why}",
            field.name(),
            field.data_type()
        ),
    };
    let text = ArrayFormatter::try_new(column.as_ref(), &FormatOptions::default())
        .map_err(|e| whole(e.to_string()))?;
    let mut out = BinaryBuilder::with_capacity(column.len(), column.len() * 8);
    let mut bytes = Vec::new();
    for row in 0..column.len() {
        if column.is_null(row) {
            out.append_null();
            continue;
        }
        let value = text.value(row).to_string();
        bytes.clear();
        decode_hex(&value, &mut bytes).map_err(|why| bad(row, &why))?;
        out.append_value(&bytes);
    }
    let binary: ArrayRef = Arc::new(out.finish());
    if field.data_type() == &DataType::Binary {
        return Ok(binary);
    }
    let strict = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    cast_with_options(&binary, field.data_type(), &strict).map_err(|e| whole(e.to_string()))
}

/// Appends the bytes of the hex string `text` to `out`.
fn decode_hex(text: &str, out: &mut Vec<u8>) -> Result<(), String> {
    let digits = text.as_bytes();
    if digits.len() % 2 != 0 {
        return Err(format!("{text:?} has an odd number of hex digits"));
    }
    for pair in digits.chunks_exact(2) {
        let (Some(high), Some(low)) = (
            pair.first().and_then(|d| hex_digit(*d)),
            pair.get(1).and_then(|d| hex_digit(*d)),
        ) else {
            return Err(format!("{text:?} is not hex"));
        };
        out.push(high << 4 | low);
    }
    Ok(())
}

fn hex_digit(d: u8) -> Option<u8> {
    match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        b'A'..=b'F' => Some(d - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BinaryArray, StringArray};

    #[test]
    fn test_hex_decodes_and_rejects_bad_digits_by_row() {
        let path = Path::new("in.csv");
        let field = Field::new("b", DataType::Binary, true);
        let ok: ArrayRef = Arc::new(StringArray::from(vec![Some("62696e"), None, Some("")]));
        let got = decode_hex_column(path, &field, &ok, 0).unwrap();
        let got = got.as_any().downcast_ref::<BinaryArray>().unwrap();
        assert_eq!(got.value(0), b"bin");
        assert!(got.is_null(1));
        assert_eq!(got.value(2), b"");
        for bad in ["6", "zz", "binary data"] {
            let col: ArrayRef = Arc::new(StringArray::from(vec!["00", bad]));
            let err = decode_hex_column(path, &field, &col, 10)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("row 11") && err.contains("\"b\""),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn test_hex_into_fixed_size_checks_length() {
        let path = Path::new("in.jsonl");
        let field = Field::new("f", DataType::FixedSizeBinary(2), true);
        let col: ArrayRef = Arc::new(StringArray::from(vec!["0102"]));
        assert_eq!(decode_hex_column(path, &field, &col, 0).unwrap().len(), 1);
        let col: ArrayRef = Arc::new(StringArray::from(vec!["010203"]));
        assert!(decode_hex_column(path, &field, &col, 0).is_err());
    }
}
