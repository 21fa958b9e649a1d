//! Splitting a log file into blocks, with corruption detection and resynchronisation.
//!
//! A block is accepted only if (as in Java's `HoodieLogFileReader` and hudi-rs): it starts with
//! the magic, its length stays inside the file, its reverse pointer equals `L + 6`, it is
//! followed by another magic or the end of the file, and its inner structure (version, type,
//! maps, content length) exactly fills the length. Anything else is a corrupt region that
//! extends to the next magic (or the end of the file); reading continues there.

use bytes::Bytes;

use super::block::{BlockMetadata, BlockType, HeaderKey, LogBlock, LOG_FORMAT_VERSION, MAGIC};
use crate::{FormatError, Result};

/// How [`read_log_file_with`] treats corrupt regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadMode {
    /// Report corrupt regions in [`LogFileContents::corrupt`] and continue at the next magic,
    /// as Java and hudi-rs do (a crashed writer leaves a truncated last block behind).
    #[default]
    Lenient,
    /// Fail with [`FormatError::CorruptBlock`] at the first corrupt region.
    Strict,
}

/// A byte range of a log file that is not a valid block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptRegion {
    /// Offset of the first byte of the region.
    pub offset: u64,
    /// Length in bytes (up to the next magic or the end of the file).
    pub len: u64,
    /// Why the bytes at `offset` are not a valid block.
    pub reason: String,
}

/// Everything read from one log file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFileContents {
    /// The valid blocks, in file order.
    pub blocks: Vec<LogBlock>,
    /// The corrupt regions skipped (empty in strict mode), in file order.
    pub corrupt: Vec<CorruptRegion>,
}

/// Reads a log file leniently ([`ReadMode::Lenient`]): never fails, corrupt regions are
/// reported and skipped. `path` names the file in reports.
pub fn read_log_file(bytes: &[u8], path: &str) -> Result<LogFileContents> {
    read_log_bytes(&Bytes::copy_from_slice(bytes), path, ReadMode::Lenient)
}

/// Reads a log file in the given mode. In strict mode the first corrupt region fails with
/// [`FormatError::CorruptBlock`] naming `path` and the region's offset.
pub fn read_log_file_with(bytes: &[u8], path: &str, mode: ReadMode) -> Result<LogFileContents> {
    read_log_bytes(&Bytes::copy_from_slice(bytes), path, mode)
}

/// [`read_log_file_with`] without copying: block contents are slices of `bytes`.
pub fn read_log_bytes(bytes: &Bytes, path: &str, mode: ReadMode) -> Result<LogFileContents> {
    let mut out = LogFileContents::default();
    let len = bytes.len();
    let mut pos = 0usize;
    while pos < len {
        let parsed = if starts_with_magic(bytes, pos) {
            parse_block(bytes, pos)
        } else {
            Err("no block magic at this offset".to_string())
        };
        match parsed {
            Ok(block) => {
                pos = pos.saturating_add(usize::try_from(block.size).unwrap_or(usize::MAX));
                out.blocks.push(block);
            }
            Err(reason) => {
                if mode == ReadMode::Strict {
                    return Err(FormatError::CorruptBlock {
                        path: path.to_string(),
                        offset: pos as u64,
                        reason,
                    });
                }
                let next = find_magic(bytes, pos.saturating_add(1)).unwrap_or(len);
                tracing::warn!(path, offset = pos, len = next - pos, %reason, "skipping corrupt log block");
                out.corrupt.push(CorruptRegion {
                    offset: pos as u64,
                    len: (next - pos) as u64,
                    reason,
                });
                pos = next;
            }
        }
    }
    Ok(out)
}

fn starts_with_magic(bytes: &[u8], pos: usize) -> bool {
    pos.checked_add(MAGIC.len())
        .and_then(|end| bytes.get(pos..end))
        .is_some_and(|s| s == MAGIC)
}

/// Offset of the first magic at or after `from`.
fn find_magic(bytes: &[u8], from: usize) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(MAGIC.len())
        .position(|w| w == MAGIC)
        .map(|i| from + i)
}

/// Bounded big-endian reader over one block.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let e = self.pos.checked_add(n)?;
        if e > self.end {
            return None;
        }
        let s = self.buf.get(self.pos..e)?;
        self.pos = e;
        Some(s)
    }

    fn i32(&mut self) -> Option<i32> {
        let s: [u8; 4] = self.take(4)?.try_into().ok()?;
        Some(i32::from_be_bytes(s))
    }

    fn i64(&mut self) -> Option<i64> {
        let s: [u8; 8] = self.take(8)?.try_into().ok()?;
        Some(i64::from_be_bytes(s))
    }

    fn remaining(&self) -> usize {
        self.end.saturating_sub(self.pos)
    }
}

/// Smallest possible `L`: version, type, empty header, content length, empty footer, pointer.
const MIN_BLOCK_LENGTH: i64 = 4 + 4 + 4 + 8 + 4 + 8;

/// Parses the block whose magic is at `pos`; on failure returns why it is corrupt.
fn parse_block(bytes: &Bytes, pos: usize) -> std::result::Result<LogBlock, String> {
    let file_len = bytes.len();
    let mut c = Cursor {
        buf: bytes,
        pos: pos + MAGIC.len(),
        end: file_len,
    };
    let block_len = c.i64().ok_or_else(|| {
        "truncated block: the block length is cut off by the end of file".to_string()
    })?;
    if block_len < MIN_BLOCK_LENGTH {
        return Err(format!(
            "block length {block_len} is below the minimum {MIN_BLOCK_LENGTH}"
        ));
    }
    let end = usize::try_from(block_len)
        .ok()
        .and_then(|l| c.pos.checked_add(l))
        .filter(|e| *e <= file_len)
        .ok_or_else(|| {
            format!(
                "truncated block: block length {block_len} extends past the end of file ({} bytes after the length field)",
                file_len - c.pos
            )
        })?;
    let pointer_at = end - 8;
    let mut tail = Cursor {
        buf: bytes,
        pos: pointer_at,
        end,
    };
    let reverse = tail
        .i64()
        .ok_or_else(|| "reverse pointer unreadable".to_string())?;
    if Some(reverse) != block_len.checked_add(MAGIC.len() as i64) {
        return Err(format!(
            "reverse pointer {reverse} does not match block length {block_len} (expected {})",
            block_len.saturating_add(MAGIC.len() as i64)
        ));
    }
    // Like Java's `readMagic`, fewer than 6 bytes after the block count as end of file (they
    // are reported as a corrupt region of their own).
    if file_len - end >= MAGIC.len() && !starts_with_magic(bytes, end) {
        return Err(format!(
            "block ending at offset {end} is followed neither by a magic nor by the end of file"
        ));
    }

    c.end = pointer_at;
    let version = c.i32().ok_or("truncated block: no format version")?;
    if version != LOG_FORMAT_VERSION {
        return Err(format!("unsupported log format version {version}"));
    }
    let type_id = c.i32().ok_or("truncated block: no block type")?;
    let block_type =
        BlockType::from_id(type_id).ok_or_else(|| format!("unknown block type {type_id}"))?;
    let header = read_map(&mut c, "header")?;
    let content_len = c.i64().ok_or("truncated block: no content length")?;
    let content_len = usize::try_from(content_len)
        .ok()
        .filter(|n| *n <= c.remaining())
        .ok_or_else(|| {
            format!(
                "content length {content_len} does not fit in the block ({} bytes left)",
                c.remaining()
            )
        })?;
    let content_start = c.pos;
    c.take(content_len)
        .ok_or("truncated block: content cut off")?;
    let content = bytes.slice(content_start..content_start + content_len);
    let footer = read_map(&mut c, "footer")?;
    if c.pos != pointer_at {
        return Err(format!(
            "block structure ends at offset {} but the reverse pointer is at offset {pointer_at}",
            c.pos
        ));
    }
    Ok(LogBlock {
        offset: pos as u64,
        size: (end - pos) as u64,
        block_type,
        header,
        footer,
        content,
    })
}

fn read_map(c: &mut Cursor<'_>, what: &str) -> std::result::Result<BlockMetadata, String> {
    let count = c
        .i32()
        .ok_or_else(|| format!("truncated block: no {what} entry count"))?;
    let count = usize::try_from(count)
        .ok()
        .filter(|n| n.saturating_mul(8) <= c.remaining())
        .ok_or_else(|| format!("{what} entry count {count} does not fit in the block"))?;
    let mut map = BlockMetadata::new();
    for _ in 0..count {
        let key = c
            .i32()
            .ok_or_else(|| format!("truncated block: {what} key cut off"))?;
        let len = c
            .i32()
            .ok_or_else(|| format!("truncated block: {what} value length cut off"))?;
        let value = usize::try_from(len)
            .ok()
            .and_then(|n| c.take(n))
            .ok_or_else(|| {
                format!("{what} value length {len} of key {key} does not fit in the block")
            })?;
        let value = std::str::from_utf8(value)
            .map_err(|e| format!("{what} value of key {key} is not UTF-8: {e}"))?;
        map.insert(HeaderKey::from_id(key), value.to_string());
    }
    Ok(map)
}
