//! Avro decimals as big-endian two's complement bytes <-> i128.

use super::schema::schema_err;
use crate::Result;

/// Big-endian two's complement (any length up to 16 bytes, or longer if sign-extended) to i128.
pub(crate) fn i128_from_be(bytes: &[u8], path: &str) -> Result<i128> {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let fill = if negative { 0xFF } else { 0x00 };
    let mut out = [fill; 16];
    if bytes.len() > 16 {
        let (extra, rest) = bytes.split_at(bytes.len() - 16);
        if extra.iter().any(|b| *b != fill)
            || rest.first().is_some_and(|b| (b & 0x80 != 0) != negative)
        {
            return Err(schema_err(path, "decimal value does not fit in 128 bits"));
        }
        out.copy_from_slice(rest);
    } else {
        let start = 16 - bytes.len();
        if let Some(dst) = out.get_mut(start..) {
            dst.copy_from_slice(bytes);
        }
    }
    Ok(i128::from_be_bytes(out))
}

/// i128 to big-endian two's complement of exactly `size` bytes (a `fixed` decimal), or of the
/// fewest bytes that hold it (`size` = None, a `bytes` decimal).
pub(crate) fn i128_to_be(value: i128, size: Option<usize>, path: &str) -> Result<Vec<u8>> {
    let full = value.to_be_bytes();
    let fill = if value < 0 { 0xFF } else { 0x00 };
    let minimal = {
        let mut start = 0;
        while start < 15 {
            let (Some(b), Some(next)) = (full.get(start), full.get(start + 1)) else {
                break;
            };
            if *b == fill && (next & 0x80 != 0) == (value < 0) {
                start += 1;
            } else {
                break;
            }
        }
        full.get(start..).map(<[u8]>::to_vec).unwrap_or_default()
    };
    match size {
        None => Ok(minimal),
        Some(size) if size >= minimal.len() => {
            let mut out = vec![fill; size - minimal.len()];
            out.extend_from_slice(&minimal);
            Ok(out)
        }
        Some(size) => Err(schema_err(
            path,
            format!("decimal value {value} does not fit in fixed({size})"),
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )]

    use super::*;

    #[test]
    fn test_i128_be_roundtrip_various_sizes_equal() {
        for v in [
            0i128,
            1,
            -1,
            127,
            128,
            -128,
            -129,
            123_456_789,
            -987_654_321_012,
        ] {
            let b = i128_to_be(v, None, "x").unwrap();
            assert_eq!(i128_from_be(&b, "x").unwrap(), v, "minimal {v}");
            let b = i128_to_be(v, Some(9), "x").unwrap();
            assert_eq!(b.len(), 9);
            assert_eq!(i128_from_be(&b, "x").unwrap(), v, "fixed {v}");
        }
    }

    #[test]
    fn test_i128_to_be_too_small_fixed_errors() {
        assert!(i128_to_be(1 << 20, Some(2), "x").is_err());
    }
}
