//! [`HFileReader`]: opens an in-memory HFile v3 and looks keys up through its root index.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use bytes::Bytes;
use prost::Message;

use super::block::{
    read_block_in, read_hadoop_vlong, DATA_MAGIC, FILE_INFO_MAGIC, ROOT_INDEX_MAGIC,
};
use super::proto::InfoProto;
use super::trailer::{Trailer, TRAILER_SIZE};
use super::{hfile_err, Compression};
use crate::Result;

/// One entry of the root data index: where a data block is and its first row key.
#[derive(Debug, Clone)]
pub(super) struct IndexEntry {
    pub(super) offset: usize,
    pub(super) size: usize,
    pub(super) first_key: Bytes,
}

/// The load-on-open section of an HFile, parsed: root data index, meta block names and
/// file-info map.
#[derive(Debug)]
pub(super) struct LoadOnOpen {
    pub(super) index: Vec<IndexEntry>,
    pub(super) meta_names: Vec<Bytes>,
    pub(super) file_info: BTreeMap<Bytes, Bytes>,
}

/// A validated HFile v3 held in memory.
///
/// [`HFileReader::open`] checks the trailer (magic, major version 3, codec NONE or GZ, a
/// single-level index), the root data and meta index blocks and the file-info block; data
/// blocks are decoded lazily (and cached) by [`HFileReader::get`] and the iterators. Every
/// malformed input yields [`crate::FormatError::HFile`] naming the path, never a panic.
#[derive(Debug)]
pub struct HFileReader {
    path: String,
    bytes: Bytes,
    trailer: Trailer,
    index: Vec<IndexEntry>,
    meta_names: Vec<Bytes>,
    file_info: BTreeMap<Bytes, Bytes>,
    blocks: Vec<OnceLock<Bytes>>,
}

fn be_u16(b: &[u8], at: usize) -> Option<usize> {
    match b.get(at..at.checked_add(2)?)? {
        [x, y] => Some(usize::from(u16::from_be_bytes([*x, *y]))),
        _ => None,
    }
}

fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    match b.get(at..at.checked_add(4)?)? {
        [a, c, d, e] => Some(i32::from_be_bytes([*a, *c, *d, *e])),
        _ => None,
    }
}

fn be_i64(b: &[u8], at: usize) -> Option<i64> {
    let s = b.get(at..at.checked_add(8)?)?;
    let arr: [u8; 8] = s.try_into().ok()?;
    Some(i64::from_be_bytes(arr))
}

/// Parses `count` root index entries (`int64 offset, int32 size, vint keyLen, key`).
fn parse_root_index(
    payload: &Bytes,
    count: u32,
    path: &str,
    what: &str,
) -> Result<Vec<(i64, i32, Bytes)>> {
    let err = |reason: String| hfile_err(path, format!("{what} index: {reason}"));
    let mut pos = 0usize;
    let mut out = Vec::new();
    for i in 0..count {
        let offset = be_i64(payload, pos).ok_or_else(|| err(format!("entry {i} truncated")))?;
        let size = be_i32(payload, pos + 8).ok_or_else(|| err(format!("entry {i} truncated")))?;
        pos += 12;
        let (key_len, n) =
            read_hadoop_vlong(payload, pos).ok_or_else(|| err(format!("entry {i} truncated")))?;
        pos += n;
        let key_len = usize::try_from(key_len)
            .map_err(|_| err(format!("entry {i} has negative key length {key_len}")))?;
        let end = pos
            .checked_add(key_len)
            .filter(|e| *e <= payload.len())
            .ok_or_else(|| err(format!("entry {i} key runs past the block")))?;
        out.push((offset, size, payload.slice(pos..end)));
        pos = end;
    }
    Ok(out)
}

/// The row of an HBase key (`uint16 rowLen`, row, ...), as a slice of `key`.
fn row_of(key: &Bytes) -> Option<Bytes> {
    let len = be_u16(key, 0)?;
    let end = 2usize.checked_add(len)?;
    (end <= key.len()).then(|| key.slice(2..end))
}

/// The offsets of the load-on-open section and of the file-info block of a file of
/// `file_len` bytes with `trailer`, both checked to lie before the trailer.
pub(super) fn section_offsets(
    trailer: &Trailer,
    file_len: usize,
    path: &str,
) -> Result<(usize, usize)> {
    let trailer_start = file_len.checked_sub(TRAILER_SIZE).ok_or_else(|| {
        hfile_err(
            path,
            format!("{file_len} bytes is too short for the {TRAILER_SIZE}-byte trailer"),
        )
    })?;
    let to_usize = |v: u64, what: &str| {
        usize::try_from(v)
            .ok()
            .filter(|v| *v <= trailer_start)
            .ok_or_else(|| {
                hfile_err(
                    path,
                    format!("{what} {v} lies beyond the trailer at {trailer_start}"),
                )
            })
    };
    Ok((
        to_usize(trailer.load_on_open_offset, "load-on-open offset")?,
        to_usize(trailer.file_info_offset, "file-info offset")?,
    ))
}

/// Parses the load-on-open section (root data index, root meta index, file info) from `buf`,
/// the bytes of the file from its byte `buf_start` on, which must cover the section.
pub(super) fn parse_load_on_open(
    buf: &Bytes,
    buf_start: usize,
    trailer: &Trailer,
    load_on_open: usize,
    file_info_offset: usize,
    path: &str,
) -> Result<LoadOnOpen> {
    let err = |reason: String| hfile_err(path, reason);
    let codec = trailer.compression;

    // Root data index, then root meta index, contiguous.
    let root = read_block_in(buf, buf_start, load_on_open, ROOT_INDEX_MAGIC, codec, path)?;
    let raw_index = parse_root_index(&root.payload, trailer.data_index_count, path, "data")?;
    let meta_offset = load_on_open + root.on_disk_size;
    let meta_names = if trailer.meta_index_count > 0 || meta_offset < file_info_offset {
        let meta = read_block_in(buf, buf_start, meta_offset, ROOT_INDEX_MAGIC, codec, path)?;
        parse_root_index(&meta.payload, trailer.meta_index_count, path, "meta")?
            .into_iter()
            .map(|(_, _, name)| name)
            .collect()
    } else {
        Vec::new()
    };

    let mut index = Vec::with_capacity(raw_index.len());
    let mut prev_end = 0usize;
    for (i, (offset, size, key)) in raw_index.into_iter().enumerate() {
        let offset = usize::try_from(offset)
            .ok()
            .filter(|o| *o >= prev_end)
            .ok_or_else(|| err(format!("data index entry {i}: bad block offset {offset}")))?;
        let size = usize::try_from(size)
            .ok()
            .filter(|s| offset.checked_add(*s).is_some_and(|e| e <= load_on_open))
            .ok_or_else(|| err(format!("data index entry {i}: bad block size {size}")))?;
        let first_key =
            row_of(&key).ok_or_else(|| err(format!("data index entry {i}: malformed key")))?;
        if let Some(prev) = index.last().map(|e: &IndexEntry| &e.first_key) {
            if *prev > first_key {
                return Err(err(format!("data index entry {i}: keys out of order")));
            }
        }
        prev_end = offset + size;
        index.push(IndexEntry {
            offset,
            size,
            first_key,
        });
    }

    let info = read_block_in(
        buf,
        buf_start,
        file_info_offset,
        FILE_INFO_MAGIC,
        codec,
        path,
    )?;
    let mut body = info
        .payload
        .strip_prefix(b"PBUF")
        .ok_or_else(|| err("file-info block lacks the PBUF prefix".into()))?;
    let info = InfoProto::decode_length_delimited(&mut body)
        .map_err(|e| err(format!("file-info protobuf cannot be decoded: {e}")))?;
    let file_info = info
        .map_entry
        .into_iter()
        .map(|p| (Bytes::from(p.first), Bytes::from(p.second)))
        .collect();
    Ok(LoadOnOpen {
        index,
        meta_names,
        file_info,
    })
}

/// The index of the one data block that may hold row `key` (the last whose first key is
/// `<= key`), or `None` when `key` sorts before every block.
pub(super) fn block_for_key(index: &[IndexEntry], key: &[u8]) -> Option<usize> {
    index
        .partition_point(|e| e.first_key.as_ref() <= key)
        .checked_sub(1)
}

/// Decodes the data block described by `entry` from `buf`, the bytes of the file from its
/// byte `buf_start` on, checking its on-disk size against the index; returns its payload.
pub(super) fn read_data_block(
    buf: &Bytes,
    buf_start: usize,
    entry: &IndexEntry,
    codec: Compression,
    path: &str,
) -> Result<Bytes> {
    let block = read_block_in(buf, buf_start, entry.offset, DATA_MAGIC, codec, path)?;
    if block.on_disk_size != entry.size {
        return Err(hfile_err(
            path,
            format!(
                "data block at {} is {} bytes on disk but the index says {}",
                entry.offset, block.on_disk_size, entry.size
            ),
        ));
    }
    Ok(block.payload)
}

/// Decodes the key-value at `pos` of data block `i`'s payload: `(row, value, next pos)`.
pub(super) fn entry_at(
    path: &str,
    i: usize,
    payload: &Bytes,
    pos: usize,
) -> Result<(Bytes, Bytes, usize)> {
    let err = |reason: &str| {
        hfile_err(
            path,
            format!("data block {i} entry at payload offset {pos}: {reason}"),
        )
    };
    let key_len = be_i32(payload, pos).ok_or_else(|| err("truncated key length"))?;
    let value_len = be_i32(payload, pos + 4).ok_or_else(|| err("truncated value length"))?;
    let key_len = usize::try_from(key_len).map_err(|_| err("negative key length"))?;
    let value_len = usize::try_from(value_len).map_err(|_| err("negative value length"))?;
    let key_start = pos + 8;
    let key_end = key_start
        .checked_add(key_len)
        .filter(|e| *e <= payload.len())
        .ok_or_else(|| err("key runs past the block"))?;
    let value_end = key_end
        .checked_add(value_len)
        .filter(|e| *e <= payload.len())
        .ok_or_else(|| err("value runs past the block"))?;
    let key = payload.slice(key_start..key_end);
    let row = row_of(&key).ok_or_else(|| err("malformed key"))?;
    let (_, ts_len) =
        read_hadoop_vlong(payload, value_end).ok_or_else(|| err("truncated memstore timestamp"))?;
    Ok((row, payload.slice(key_end..value_end), value_end + ts_len))
}

/// The value of row `key` in data block `i`'s payload, scanning it in order and stopping at
/// the first greater row.
pub(super) fn find_in_block(
    path: &str,
    i: usize,
    payload: &Bytes,
    key: &[u8],
) -> Result<Option<Bytes>> {
    let mut pos = 0;
    while pos < payload.len() {
        let (row, value, next) = entry_at(path, i, payload, pos)?;
        match row.as_ref().cmp(key) {
            std::cmp::Ordering::Equal => return Ok(Some(value)),
            std::cmp::Ordering::Greater => return Ok(None),
            std::cmp::Ordering::Less => pos = next,
        }
    }
    Ok(None)
}

impl HFileReader {
    /// Opens and validates the HFile `bytes`; `path` names it in errors.
    pub fn open(bytes: Bytes, path: &str) -> Result<Self> {
        let trailer = Trailer::read(&bytes, path)?;
        if trailer.num_data_index_levels > 1 {
            return Err(hfile_err(
                path,
                format!(
                    "multi-level data index ({} levels) is not supported",
                    trailer.num_data_index_levels
                ),
            ));
        }
        let (load_on_open, file_info_offset) = section_offsets(&trailer, bytes.len(), path)?;
        let LoadOnOpen {
            index,
            meta_names,
            file_info,
        } = parse_load_on_open(&bytes, 0, &trailer, load_on_open, file_info_offset, path)?;
        let blocks = index.iter().map(|_| OnceLock::new()).collect();
        Ok(Self {
            path: path.to_string(),
            bytes,
            trailer,
            index,
            meta_names,
            file_info,
            blocks,
        })
    }

    /// The path given to [`HFileReader::open`].
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The number of key-value entries the trailer declares (checked by full iteration).
    pub fn entry_count(&self) -> u64 {
        self.trailer.entry_count
    }

    /// The number of data blocks (root index entries).
    pub fn data_block_count(&self) -> usize {
        self.index.len()
    }

    /// The block codec of the file.
    pub fn compression(&self) -> Compression {
        self.trailer.compression
    }

    /// The comparator class name recorded in the trailer.
    pub fn comparator(&self) -> &str {
        &self.trailer.comparator
    }

    /// The names of the meta blocks (Java writes `bloomFilter` in compacted base files).
    pub fn meta_block_names(&self) -> &[Bytes] {
        &self.meta_names
    }

    /// The file-info map (`schema`, `hfile.LASTKEY`, `minRecordKey`, ...), keys sorted.
    pub fn file_info(&self) -> &BTreeMap<Bytes, Bytes> {
        &self.file_info
    }

    /// The file-info value of `key` as UTF-8 text (e.g. `schema`), if present and valid.
    pub fn file_info_str(&self, key: &str) -> Option<&str> {
        self.file_info
            .get(key.as_bytes())
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The decompressed payload of data block `i` (cached).
    fn data_block(&self, i: usize) -> Result<Bytes> {
        let cell = self
            .blocks
            .get(i)
            .ok_or_else(|| hfile_err(&self.path, format!("no data block {i}")))?;
        if let Some(b) = cell.get() {
            return Ok(b.clone());
        }
        let entry = self
            .index
            .get(i)
            .ok_or_else(|| hfile_err(&self.path, format!("no data block {i}")))?;
        let payload = read_data_block(&self.bytes, 0, entry, self.trailer.compression, &self.path)?;
        let _ = cell.set(payload.clone());
        Ok(payload)
    }

    /// Decodes the key-value at `pos` of data block `i`'s payload: `(row, value, next pos)`.
    fn entry_at(&self, i: usize, payload: &Bytes, pos: usize) -> Result<(Bytes, Bytes, usize)> {
        entry_at(&self.path, i, payload, pos)
    }

    /// The value stored under row key `key`, if any: binary search of the root index for the
    /// one block that may hold it, then a scan of that block.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let Some(i) = block_for_key(&self.index, key) else {
            return Ok(None);
        };
        let payload = self.data_block(i)?;
        find_in_block(&self.path, i, &payload, key)
    }

    /// Iterates every `(row key, value)` in file order. Yields an error (and then stops) on a
    /// corrupt block, or when the entry count differs from the trailer's.
    pub fn iter(&self) -> HFileIter<'_> {
        HFileIter {
            reader: self,
            block: 0,
            payload: None,
            pos: 0,
            seen: 0,
            done: false,
        }
    }

    /// Every `(row key, value)` in file order, checking that keys strictly increase and that
    /// the count matches the trailer.
    pub fn entries(&self) -> Result<Vec<(Bytes, Bytes)>> {
        let mut out: Vec<(Bytes, Bytes)> = Vec::new();
        for entry in self.iter() {
            let (k, v) = entry?;
            if let Some((prev, _)) = out.last() {
                if *prev >= k {
                    return Err(hfile_err(
                        &self.path,
                        format!(
                            "keys out of order: {:?} after {:?}",
                            String::from_utf8_lossy(&k),
                            String::from_utf8_lossy(prev)
                        ),
                    ));
                }
            }
            out.push((k, v));
        }
        Ok(out)
    }
}

/// Iterator over the entries of an [`HFileReader`], in file order (see [`HFileReader::iter`]).
#[derive(Debug)]
pub struct HFileIter<'a> {
    reader: &'a HFileReader,
    block: usize,
    payload: Option<Bytes>,
    pos: usize,
    seen: u64,
    done: bool,
}

impl Iterator for HFileIter<'_> {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            let payload = match &self.payload {
                Some(p) if self.pos < p.len() => p.clone(),
                _ => {
                    if self.payload.is_some() {
                        self.block += 1;
                    }
                    if self.block >= self.reader.index.len() {
                        self.done = true;
                        if self.seen != self.reader.trailer.entry_count {
                            return Some(Err(hfile_err(
                                &self.reader.path,
                                format!(
                                    "found {} entries but the trailer declares {}",
                                    self.seen, self.reader.trailer.entry_count
                                ),
                            )));
                        }
                        return None;
                    }
                    match self.reader.data_block(self.block) {
                        Ok(p) => {
                            self.payload = Some(p);
                            self.pos = 0;
                            continue;
                        }
                        Err(e) => {
                            self.done = true;
                            return Some(Err(e));
                        }
                    }
                }
            };
            return match self.reader.entry_at(self.block, &payload, self.pos) {
                Ok((k, v, next)) => {
                    self.pos = next;
                    self.seen += 1;
                    Some(Ok((k, v)))
                }
                Err(e) => {
                    self.done = true;
                    Some(Err(e))
                }
            };
        }
    }
}
