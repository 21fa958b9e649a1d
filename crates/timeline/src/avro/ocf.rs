//! The Avro Object Container File framing of instant files: magic `Obj\x01`, a metadata map
//! holding `avro.schema` (and optionally `avro.codec`), a 16-byte sync marker, then data blocks
//! of `count, size, bytes, sync`.
//!
//! Hudi writes exactly one record in one block with codec `null`, and a header holding only
//! `avro.schema`; [`write_single`] produces that shape and [`read_single`] accepts only it (one
//! record in total; codec absent or `null`). Neither function panics on any input.

use std::collections::BTreeMap;

use crate::error::{Result, TimelineError};

/// The four magic bytes that open every Avro Object Container File.
pub const MAGIC: [u8; 4] = *b"Obj\x01";

/// Length of the sync marker that ends the header and every block.
pub const SYNC_LEN: usize = 16;

/// A parsed single-record container: the writer schema's JSON text and the bytes of the one
/// record's block (the Avro binary datum, exactly as written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SingleRecord<'a> {
    /// The writer schema JSON from the `avro.schema` header entry.
    pub schema_json: &'a str,
    /// The block holding the one record; the datum must fill it exactly.
    pub datum: &'a [u8],
    /// The file's sync marker.
    pub sync: [u8; SYNC_LEN],
}

/// True if `bytes` start with the container magic `Obj\x01`.
pub fn has_magic(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// Parses a container holding exactly one record. `path` names the file in errors.
///
/// Fails with [`TimelineError::Decode`] on: fewer than 4 bytes or wrong magic (e.g. JSON),
/// a truncated header or block, a codec other than `null`, a schema that is not UTF-8, a
/// block whose sync marker differs from the header's, trailing bytes, or a record count other
/// than one.
pub fn read_single<'a>(bytes: &'a [u8], path: &str) -> Result<SingleRecord<'a>> {
    let err = |reason: String| TimelineError::decode(path, reason);
    if bytes.is_empty() {
        return Err(err("empty file (0 bytes) is not an Avro container".into()));
    }
    if !has_magic(bytes) {
        let hint = if bytes.first() == Some(&b'{') {
            " (looks like JSON)"
        } else {
            ""
        };
        return Err(err(format!(
            "not an Avro object container file: wrong magic{hint}"
        )));
    }
    let mut cur = Cursor {
        buf: bytes,
        pos: MAGIC.len(),
        path,
    };
    let meta = cur.read_metadata()?;
    let sync = cur.read_sync("header")?;

    let codec = meta.get("avro.codec").copied().unwrap_or(b"null");
    if codec != b"null" {
        return Err(err(format!(
            "unsupported codec {:?} (Hudi writes codec null)",
            String::from_utf8_lossy(codec)
        )));
    }
    let schema_bytes = meta
        .get("avro.schema")
        .copied()
        .ok_or_else(|| err("header has no avro.schema entry".into()))?;
    let schema_json = std::str::from_utf8(schema_bytes)
        .map_err(|e| err(format!("avro.schema is not UTF-8: {e}")))?;

    let mut record: Option<&'a [u8]> = None;
    let mut total: i64 = 0;
    let mut block_index = 0usize;
    while cur.pos < bytes.len() {
        let count = cur.read_long("block record count")?;
        let size = cur.read_len("block size")?;
        let data = cur.read_bytes(size, "block data")?;
        let block_sync = cur.read_sync("block")?;
        if block_sync != sync {
            return Err(err(format!(
                "sync marker of block {block_index} does not match the header's"
            )));
        }
        if count < 0 {
            return Err(err(format!(
                "negative record count {count} in block {block_index}"
            )));
        }
        total = total
            .checked_add(count)
            .ok_or_else(|| err("record count overflows".into()))?;
        if count > 0 && record.is_none() {
            record = Some(data);
        }
        block_index += 1;
    }
    match (total, record) {
        (1, Some(datum)) => Ok(SingleRecord {
            schema_json,
            datum,
            sync,
        }),
        (n, _) => Err(err(format!(
            "expected exactly one record, found {n} in {block_index} block(s)"
        ))),
    }
}

/// Writes a container holding one record: header with only `avro.schema` (as Hudi writes it),
/// the given sync marker, and one block with `datum` (an Avro binary datum).
pub fn write_single(schema_json: &str, datum: &[u8], sync: [u8; SYNC_LEN]) -> Vec<u8> {
    let mut out = Vec::with_capacity(schema_json.len() + datum.len() + 64);
    out.extend_from_slice(&MAGIC);
    // Metadata map: one block of one entry, then the terminating zero count.
    write_long(&mut out, 1);
    write_bytes(&mut out, b"avro.schema");
    write_bytes(&mut out, schema_json.as_bytes());
    write_long(&mut out, 0);
    out.extend_from_slice(&sync);
    // One data block with one record.
    write_long(&mut out, 1);
    write_long(&mut out, len_as_i64(datum.len()));
    out.extend_from_slice(datum);
    out.extend_from_slice(&sync);
    out
}

/// A deterministic sync marker derived from the schema and the datum, so that encoding the same
/// value twice gives the same bytes. (Java draws a random one; readers only compare it.)
pub fn sync_marker_for(schema_json: &str, datum: &[u8]) -> [u8; SYNC_LEN] {
    let mut sync = [0u8; SYNC_LEN];
    for (seed, chunk) in (0u8..).zip(sync.chunks_mut(4)) {
        let mut h = crc32fast::Hasher::new();
        h.update(&[seed, 0xa5, seed.wrapping_mul(31)]);
        h.update(schema_json.as_bytes());
        h.update(datum);
        for (dst, src) in chunk.iter_mut().zip(h.finalize().to_be_bytes()) {
            *dst = src;
        }
    }
    sync
}

/// Appends a zigzag varint `long`.
pub(crate) fn write_long(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Appends length-prefixed bytes (Avro `bytes` / `string`).
pub(crate) fn write_bytes(out: &mut Vec<u8>, b: &[u8]) {
    write_long(out, len_as_i64(b.len()));
    out.extend_from_slice(b);
}

fn len_as_i64(len: usize) -> i64 {
    i64::try_from(len).unwrap_or(i64::MAX)
}

struct Cursor<'a, 'p> {
    buf: &'a [u8],
    pos: usize,
    path: &'p str,
}

impl<'a> Cursor<'a, '_> {
    fn err(&self, reason: String) -> TimelineError {
        TimelineError::decode(self.path, reason)
    }

    fn read_byte(&mut self, what: &str) -> Result<u8> {
        let b = self.buf.get(self.pos).copied().ok_or_else(|| {
            self.err(format!("truncated: {what} ends at byte {}", self.buf.len()))
        })?;
        self.pos += 1;
        Ok(b)
    }

    fn read_long(&mut self, what: &str) -> Result<i64> {
        let mut z: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.read_byte(what)?;
            z |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
            }
        }
        Err(self.err(format!(
            "{what}: varint longer than 10 bytes at {}",
            self.pos
        )))
    }

    fn read_len(&mut self, what: &str) -> Result<usize> {
        let n = self.read_long(what)?;
        usize::try_from(n).map_err(|_| self.err(format!("{what}: negative length {n}")))
    }

    fn read_bytes(&mut self, len: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(len);
        let slice = end
            .and_then(|end| self.buf.get(self.pos..end))
            .ok_or_else(|| {
                self.err(format!(
                    "truncated: {what} needs {len} bytes at offset {}, file has {}",
                    self.pos,
                    self.buf.len()
                ))
            })?;
        self.pos += len;
        Ok(slice)
    }

    fn read_sync(&mut self, what: &str) -> Result<[u8; SYNC_LEN]> {
        let b = self.read_bytes(SYNC_LEN, &format!("{what} sync marker"))?;
        <[u8; SYNC_LEN]>::try_from(b)
            .map_err(|_| self.err(format!("{what} sync marker is not {SYNC_LEN} bytes")))
    }

    fn read_metadata(&mut self) -> Result<BTreeMap<&'a str, &'a [u8]>> {
        let mut meta = BTreeMap::new();
        loop {
            let count = self.read_long("header metadata count")?;
            if count == 0 {
                return Ok(meta);
            }
            let count = if count < 0 {
                // A negative count is followed by the block's size in bytes.
                self.read_long("header metadata block size")?;
                count
                    .checked_neg()
                    .ok_or_else(|| self.err("header metadata count overflows".into()))?
            } else {
                count
            };
            for _ in 0..count {
                let klen = self.read_len("header metadata key length")?;
                let key = self.read_bytes(klen, "header metadata key")?;
                let key = std::str::from_utf8(key)
                    .map_err(|e| self.err(format!("header metadata key is not UTF-8: {e}")))?;
                let vlen = self.read_len("header metadata value length")?;
                let value = self.read_bytes(vlen, "header metadata value")?;
                meta.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_write_single_read_single_round_trip() {
        let sync = sync_marker_for("\"long\"", &[2]);
        let bytes = write_single("\"long\"", &[2], sync);
        let rec = read_single(&bytes, "k").unwrap();
        assert_eq!(rec.schema_json, "\"long\"");
        assert_eq!(rec.datum, &[2]);
        assert_eq!(rec.sync, sync);
    }

    #[test]
    fn test_write_long_zigzag_matches_avro_spec() {
        for (n, want) in [
            (0i64, vec![0u8]),
            (-1, vec![1]),
            (1, vec![2]),
            (-64, vec![0x7f]),
            (64, vec![0x80, 0x01]),
        ] {
            let mut out = Vec::new();
            write_long(&mut out, n);
            assert_eq!(out, want, "{n}");
            let mut cur = Cursor {
                buf: &out,
                pos: 0,
                path: "k",
            };
            assert_eq!(cur.read_long("x").unwrap(), n);
        }
        let mut out = Vec::new();
        write_long(&mut out, i64::MIN);
        let mut cur = Cursor {
            buf: &out,
            pos: 0,
            path: "k",
        };
        assert_eq!(cur.read_long("x").unwrap(), i64::MIN);
    }

    #[test]
    fn test_read_single_truncated_at_every_offset_errors() {
        let bytes = write_single("\"string\"", &[6, b'a', b'b', b'c'], [7; SYNC_LEN]);
        for cut in 0..bytes.len() {
            let e = read_single(&bytes[..cut], "t/x.commit").unwrap_err();
            assert!(
                matches!(&e, TimelineError::Decode { path, .. } if path == "t/x.commit"),
                "{cut}: {e}"
            );
        }
    }

    #[test]
    fn test_read_single_rejects_bad_sync_codec_and_counts() {
        let mut bytes = write_single("\"string\"", &[2, b'a'], [7; SYNC_LEN]);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let e = read_single(&bytes, "k").unwrap_err().to_string();
        assert!(e.contains("sync marker"), "{e}");

        // Two records.
        let mut two = Vec::new();
        two.extend_from_slice(&MAGIC);
        write_long(&mut two, 1);
        write_bytes(&mut two, b"avro.schema");
        write_bytes(&mut two, b"\"int\"");
        write_long(&mut two, 0);
        two.extend_from_slice(&[1; SYNC_LEN]);
        write_long(&mut two, 2);
        write_long(&mut two, 2);
        two.extend_from_slice(&[2, 4]);
        two.extend_from_slice(&[1; SYNC_LEN]);
        let e = read_single(&two, "k").unwrap_err().to_string();
        assert!(e.contains("exactly one record, found 2"), "{e}");

        // Deflate codec.
        let mut deflate = Vec::new();
        deflate.extend_from_slice(&MAGIC);
        write_long(&mut deflate, 2);
        write_bytes(&mut deflate, b"avro.schema");
        write_bytes(&mut deflate, b"\"int\"");
        write_bytes(&mut deflate, b"avro.codec");
        write_bytes(&mut deflate, b"deflate");
        write_long(&mut deflate, 0);
        deflate.extend_from_slice(&[1; SYNC_LEN]);
        let e = read_single(&deflate, "k").unwrap_err().to_string();
        assert!(e.contains("unsupported codec"), "{e}");

        // No record at all.
        let mut none = Vec::new();
        none.extend_from_slice(&MAGIC);
        write_long(&mut none, 1);
        write_bytes(&mut none, b"avro.schema");
        write_bytes(&mut none, b"\"int\"");
        write_long(&mut none, 0);
        none.extend_from_slice(&[1; SYNC_LEN]);
        let e = read_single(&none, "k").unwrap_err().to_string();
        assert!(e.contains("found 0"), "{e}");
    }

    #[test]
    fn test_read_single_json_says_wrong_magic() {
        let e = read_single(b"{\"a\":1}", "k").unwrap_err().to_string();
        assert!(e.contains("wrong magic") && e.contains("JSON"), "{e}");
        let e = read_single(b"", "k").unwrap_err().to_string();
        assert!(e.contains("0 bytes"), "{e}");
    }

    #[test]
    fn test_sync_marker_for_is_deterministic_and_content_dependent() {
        assert_eq!(sync_marker_for("s", b"a"), sync_marker_for("s", b"a"));
        assert_ne!(sync_marker_for("s", b"a"), sync_marker_for("s", b"b"));
    }
}
