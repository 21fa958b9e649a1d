//! HFile block framing: the 33-byte v3 block header, checksum padding, codecs, and the
//! Hadoop variable-length integers used inside blocks.

use std::io::{Read, Write};

use bytes::Bytes;

use super::{hfile_err, Compression};
use crate::Result;

/// Bytes of a v3 block header (magic, sizes, previous offset, checksum info).
pub(crate) const HEADER_SIZE: usize = 33;
/// Bytes covered by one checksum; Java writes 16384.
pub(crate) const BYTES_PER_CHECKSUM: usize = 16384;
/// Bytes of one checksum value.
const CHECKSUM_SIZE: usize = 4;

/// Data block magic.
pub(crate) const DATA_MAGIC: &[u8; 8] = b"DATABLK*";
/// Root index block magic (data and meta index).
pub(crate) const ROOT_INDEX_MAGIC: &[u8; 8] = b"IDXROOT2";
/// File info block magic.
pub(crate) const FILE_INFO_MAGIC: &[u8; 8] = b"FILEINF2";

/// A block read from a file: its total on-disk size and its uncompressed payload.
#[derive(Debug, Clone)]
pub(crate) struct RawBlock {
    /// Header + stored payload + checksums.
    pub on_disk_size: usize,
    /// The payload after decompression.
    pub payload: Bytes,
}

fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(i32::from_be_bytes([
        s.first().copied()?,
        *s.get(1)?,
        *s.get(2)?,
        *s.get(3)?,
    ]))
}

/// Reads the block starting at byte `offset` of a file from `buf`, the file's bytes from its
/// byte `buf_start` on (the whole file when 0; a ranged read otherwise), checking its magic is
/// `magic` and decompressing its payload with `codec`. A block outside `buf` is an error.
pub(crate) fn read_block_in(
    buf: &Bytes,
    buf_start: usize,
    offset: usize,
    magic: &[u8; 8],
    codec: Compression,
    path: &str,
) -> Result<RawBlock> {
    let err = |reason: String| hfile_err(path, format!("block at offset {offset}: {reason}"));
    let rel = offset.checked_sub(buf_start).ok_or_else(|| {
        err(format!(
            "lies before the bytes read (from offset {buf_start})"
        ))
    })?;
    let file = buf;
    let header = rel
        .checked_add(HEADER_SIZE)
        .and_then(|end| file.get(rel..end))
        .ok_or_else(|| err("truncated block header".into()))?;
    let found = header.get(..8).unwrap_or_default();
    if found != magic {
        return Err(err(format!(
            "expected magic {:?}, found {:?}",
            String::from_utf8_lossy(magic),
            String::from_utf8_lossy(found)
        )));
    }
    let field = |at: usize, name: &str| -> Result<usize> {
        let v = be_i32(header, at).ok_or_else(|| err(format!("truncated {name}")))?;
        usize::try_from(v).map_err(|_| err(format!("negative {name} {v}")))
    };
    let on_disk_without_header = field(8, "onDiskSizeWithoutHeader")?;
    let uncompressed = field(12, "uncompressedSizeWithoutHeader")?;
    let data_with_header = field(29, "onDiskDataSizeWithHeader")?;
    let on_disk_size = HEADER_SIZE
        .checked_add(on_disk_without_header)
        .ok_or_else(|| err("block size overflows".into()))?;
    if data_with_header < HEADER_SIZE || data_with_header > on_disk_size {
        return Err(err(format!(
            "onDiskDataSizeWithHeader {data_with_header} outside [{HEADER_SIZE}, {on_disk_size}]"
        )));
    }
    let block_end = rel
        .checked_add(on_disk_size)
        .filter(|end| *end <= file.len())
        .ok_or_else(|| {
            if buf_start == 0 {
                err(format!(
                    "block of {on_disk_size} bytes runs past the end of the file ({} bytes)",
                    file.len()
                ))
            } else {
                err(format!(
                    "block of {on_disk_size} bytes runs past the end of the bytes read \
                     ({buf_start}..{})",
                    buf_start + file.len()
                ))
            }
        })?;
    let stored = file.slice(rel + HEADER_SIZE..rel + data_with_header);
    debug_assert!(rel + data_with_header <= block_end);
    let payload = match codec {
        Compression::None => {
            if stored.len() != uncompressed {
                return Err(err(format!(
                    "uncompressed block stores {} payload bytes but its header says {uncompressed}",
                    stored.len()
                )));
            }
            stored
        }
        Compression::Gz => {
            let mut out = Vec::with_capacity(uncompressed.min(1 << 24));
            let limit = u64::try_from(uncompressed)
                .unwrap_or(u64::MAX)
                .saturating_add(1);
            flate2::read::MultiGzDecoder::new(stored.as_ref())
                .take(limit)
                .read_to_end(&mut out)
                .map_err(|e| err(format!("gzip payload cannot be decompressed: {e}")))?;
            if out.len() != uncompressed {
                return Err(err(format!(
                    "gzip payload decompresses to {} bytes but the header says {uncompressed}",
                    out.len()
                )));
            }
            Bytes::from(out)
        }
    };
    Ok(RawBlock {
        on_disk_size,
        payload,
    })
}

/// Encodes one block: header, payload compressed with `codec`, and zero checksums (type 0)
/// sized so that `k = ceil((33 + onDiskSizeWithoutHeader) / 16384)` holds (the hudi-rs rule).
pub(crate) fn encode_block(magic: &[u8; 8], payload: &[u8], codec: Compression) -> Result<Vec<u8>> {
    let err = |reason: String| hfile_err("HFile writer", reason);
    let stored: Vec<u8> = match codec {
        Compression::None => payload.to_vec(),
        Compression::Gz => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(payload)
                .and_then(|()| enc.finish())
                .map_err(|e| err(format!("gzip compression failed: {e}")))?
        }
    };
    let mut chunks = 1usize;
    loop {
        let total = HEADER_SIZE + stored.len() + CHECKSUM_SIZE * chunks;
        if total.div_ceil(BYTES_PER_CHECKSUM) <= chunks {
            break;
        }
        chunks += 1;
    }
    let checksum_len = CHECKSUM_SIZE * chunks;
    let to_i32 = |v: usize, what: &str| {
        i32::try_from(v).map_err(|_| err(format!("{what} {v} does not fit a block header")))
    };
    let mut out = Vec::with_capacity(HEADER_SIZE + stored.len() + checksum_len);
    out.extend_from_slice(magic);
    out.extend_from_slice(&to_i32(stored.len() + checksum_len, "block size")?.to_be_bytes());
    out.extend_from_slice(&to_i32(payload.len(), "uncompressed block size")?.to_be_bytes());
    out.extend_from_slice(&(-1i64).to_be_bytes());
    out.push(0);
    out.extend_from_slice(&to_i32(BYTES_PER_CHECKSUM, "bytes per checksum")?.to_be_bytes());
    out.extend_from_slice(&to_i32(HEADER_SIZE + stored.len(), "data size")?.to_be_bytes());
    out.extend_from_slice(&stored);
    out.resize(out.len() + checksum_len, 0);
    Ok(out)
}

/// Decodes a Hadoop `WritableUtils` vlong at `at`; returns the value and its encoded length,
/// or `None` when the bytes are truncated.
pub(crate) fn read_hadoop_vlong(b: &[u8], at: usize) -> Option<(i64, usize)> {
    let first = *b.get(at)? as i8;
    if first >= -112 {
        return Some((i64::from(first), 1));
    }
    let negative = first < -120;
    let extra = if negative {
        -120 - i32::from(first)
    } else {
        -112 - i32::from(first)
    };
    let extra = usize::try_from(extra).ok()?;
    let mut v: i64 = 0;
    for i in 0..extra {
        v = (v << 8) | i64::from(*b.get(at + 1 + i)?);
    }
    Some((if negative { !v } else { v }, extra + 1))
}

/// Appends the Hadoop `WritableUtils` vlong encoding of `v`.
pub(crate) fn write_hadoop_vlong(out: &mut Vec<u8>, v: i64) {
    if (-112..=127).contains(&v) {
        out.extend_from_slice(&(v as i8).to_be_bytes());
        return;
    }
    let (mut len, mut v) = if v < 0 { (-120i32, !v) } else { (-112i32, v) };
    let mut tmp = v;
    while tmp != 0 {
        tmp >>= 8;
        len -= 1;
    }
    out.extend_from_slice(&(len as i8).to_be_bytes());
    let n = if len < -120 {
        -(len + 120)
    } else {
        -(len + 112)
    };
    let mut bytes = Vec::new();
    for _ in 0..n {
        bytes.push((v & 0xff) as u8);
        v >>= 8;
    }
    out.extend(bytes.iter().rev());
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn test_hadoop_vlong_roundtrip_matches() {
        for v in [
            0i64,
            1,
            127,
            128,
            -112,
            -113,
            255,
            256,
            70000,
            -70000,
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = Vec::new();
            write_hadoop_vlong(&mut out, v);
            assert_eq!(read_hadoop_vlong(&out, 0), Some((v, out.len())), "{v}");
        }
        assert_eq!(read_hadoop_vlong(&[0x8f], 0), None);
    }

    #[test]
    fn test_encode_block_checksum_rule_holds() {
        for len in [0usize, 10, 16_300, 16_351, 16_400, 40_000] {
            let block = encode_block(DATA_MAGIC, &vec![7u8; len], Compression::None).unwrap();
            let without = i32::from_be_bytes(block[8..12].try_into().unwrap()) as usize;
            let data = i32::from_be_bytes(block[29..33].try_into().unwrap()) as usize;
            let k = (HEADER_SIZE + without).div_ceil(BYTES_PER_CHECKSUM);
            assert_eq!(block.len(), data + 4 * k, "{len}");
            assert_eq!(block.len(), HEADER_SIZE + without);
        }
    }
}
