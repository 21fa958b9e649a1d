//! [`HFileRangedReader`]: point lookups in an HFile on [`Storage`] that read only the trailer,
//! the load-on-open section and the data blocks the keys fall in (ranged GETs), so a lookup
//! costs in proportion to the keys asked for, not to the file's size.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use arbor_storage::Storage;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use super::reader::{
    block_for_key, entry_at, parse_load_on_open, read_data_block, section_offsets, IndexEntry,
    LoadOnOpen,
};
use super::trailer::{Trailer, TRAILER_SIZE};
use super::{hfile_err, Compression, HFileReader};
use crate::Result;

/// How many ranged GETs of data blocks one [`HFileRangedReader::get_many`] keeps in flight.
const MAX_CONCURRENT_READS: usize = 8;

/// How the reader finds data blocks.
#[derive(Debug)]
enum Layout {
    /// A single-level root index (what arbor and Hudi write for MDT files): blocks are fetched
    /// by ranged reads.
    Ranged(LoadOnOpen),
    /// A multi-level index: the whole file was downloaded and is read with [`HFileReader`]
    /// (which rejects such files today, so opening one fails with its error).
    Whole(HFileReader),
}

/// A run of data blocks `first..=last`, contiguous on disk, fetched with one ranged GET.
#[derive(Debug, Clone)]
struct Run {
    first: usize,
    last: usize,
    bytes: Range<u64>,
}

/// An HFile v3 on storage, opened for point lookups with ranged reads.
///
/// [`HFileRangedReader::open`] reads the 4096-byte trailer and then the whole load-on-open
/// section (root data index, meta index, file info) with one more ranged GET, validating them
/// as [`HFileReader::open`] does. [`HFileRangedReader::get_many`] then fetches each data block
/// that may hold one of the keys exactly once (adjacent blocks in one GET) and answers exactly
/// what [`HFileReader::get`] answers for every key. Files with a multi-level data index fall
/// back to one whole-file GET and [`HFileReader`]. Every error names the storage key.
#[derive(Debug)]
pub struct HFileRangedReader<'a> {
    storage: &'a dyn Storage,
    key: String,
    file_len: u64,
    trailer: Trailer,
    layout: Layout,
}

impl<'a> HFileRangedReader<'a> {
    /// Opens the HFile at `key` of `storage`, whose size is `file_len` bytes (from a listing or
    /// a `head`): two ranged GETs (trailer, load-on-open section), or one whole-file GET for a
    /// multi-level index. A wrong `file_len` is reported as a corrupt trailer.
    pub async fn open(storage: &'a dyn Storage, key: &str, file_len: u64) -> Result<Self> {
        let len = usize::try_from(file_len)
            .map_err(|_| hfile_err(key, format!("file size {file_len} does not fit in memory")))?;
        let trailer_start = len.checked_sub(TRAILER_SIZE).ok_or_else(|| {
            hfile_err(
                key,
                format!("{len} bytes is too short for the {TRAILER_SIZE}-byte trailer"),
            )
        })?;
        let tail = storage
            .get_range(key, to_u64(trailer_start)..file_len)
            .await?;
        let trailer = Trailer::parse(&tail, trailer_start, key)?;
        if trailer.num_data_index_levels > 1 {
            let (bytes, _) = storage.get(key).await?;
            let reader = HFileReader::open(bytes, key)?;
            return Ok(Self {
                storage,
                key: key.to_string(),
                file_len,
                trailer,
                layout: Layout::Whole(reader),
            });
        }
        let (load_on_open, file_info_offset) = section_offsets(&trailer, len, key)?;
        let range = to_u64(load_on_open)..to_u64(trailer_start);
        let section = storage.get_range(key, range.clone()).await?;
        check_len(&section, &range, key)?;
        let parsed = parse_load_on_open(
            &section,
            load_on_open,
            &trailer,
            load_on_open,
            file_info_offset,
            key,
        )?;
        Ok(Self {
            storage,
            key: key.to_string(),
            file_len,
            trailer,
            layout: Layout::Ranged(parsed),
        })
    }

    /// The storage key given to [`HFileRangedReader::open`] (it names the file in errors).
    pub fn path(&self) -> &str {
        &self.key
    }

    /// The file size given to [`HFileRangedReader::open`].
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// The number of key-value entries the trailer declares.
    pub fn entry_count(&self) -> u64 {
        self.trailer.entry_count
    }

    /// The block codec of the file.
    pub fn compression(&self) -> Compression {
        self.trailer.compression
    }

    /// The number of data blocks.
    pub fn data_block_count(&self) -> usize {
        match &self.layout {
            Layout::Ranged(l) => l.index.len(),
            Layout::Whole(r) => r.data_block_count(),
        }
    }

    /// The file-info map (`schema`, `hfile.LASTKEY`, ...), keys sorted.
    pub fn file_info(&self) -> &BTreeMap<Bytes, Bytes> {
        match &self.layout {
            Layout::Ranged(l) => &l.file_info,
            Layout::Whole(r) => r.file_info(),
        }
    }

    /// The file-info value of `key` as UTF-8 text (e.g. `schema`), if present and valid.
    pub fn file_info_str(&self, key: &str) -> Option<&str> {
        self.file_info()
            .get(key.as_bytes())
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The `(row key, value)` of every key of `keys` the file holds (absent keys are left out;
    /// duplicates are answered once). Each data block that may hold a key (by binary search of
    /// the root index) is fetched and decoded once; runs of adjacent needed blocks are fetched
    /// with one ranged GET, at most 8 GETs in flight.
    pub async fn get_many(&self, keys: &[&[u8]]) -> Result<BTreeMap<Bytes, Bytes>> {
        let mut out = BTreeMap::new();
        let index = match &self.layout {
            Layout::Ranged(l) => &l.index,
            Layout::Whole(reader) => {
                for k in keys {
                    if let Some(v) = reader.get(k)? {
                        out.insert(Bytes::copy_from_slice(k), v);
                    }
                }
                return Ok(out);
            }
        };
        let mut wanted: BTreeMap<usize, BTreeSet<&[u8]>> = BTreeMap::new();
        for k in keys {
            if let Some(i) = block_for_key(index, k) {
                wanted.entry(i).or_default().insert(k);
            }
        }
        let runs = runs_of(index, wanted.keys().copied());
        let fetched: Vec<(Run, Bytes)> = futures::stream::iter(runs.into_iter().map(|run| {
            let storage = self.storage;
            let key = self.key.as_str();
            async move {
                let bytes = storage.get_range(key, run.bytes.clone()).await?;
                check_len(&bytes, &run.bytes, key)?;
                Ok::<_, crate::FormatError>((run, bytes))
            }
        }))
        .buffered(MAX_CONCURRENT_READS)
        .try_collect()
        .await?;
        for (run, buf) in fetched {
            let buf_start = usize::try_from(run.bytes.start)
                .map_err(|_| hfile_err(&self.key, "block offset does not fit in memory"))?;
            for i in run.first..=run.last {
                let (Some(entry), Some(keys)) = (index.get(i), wanted.get(&i)) else {
                    continue;
                };
                let payload =
                    read_data_block(&buf, buf_start, entry, self.trailer.compression, &self.key)?;
                scan_block(&self.key, i, &payload, keys, &mut out)?;
            }
        }
        Ok(out)
    }
}

fn to_u64(v: usize) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Checks that a ranged read returned the whole range (a shorter object was truncated).
fn check_len(bytes: &Bytes, range: &Range<u64>, path: &str) -> Result<()> {
    let expected = range.end.saturating_sub(range.start);
    if to_u64(bytes.len()) != expected {
        return Err(hfile_err(
            path,
            format!(
                "ranged read of bytes {}..{} returned {} bytes (file shorter than its index says?)",
                range.start,
                range.end,
                bytes.len()
            ),
        ));
    }
    Ok(())
}

/// Groups the ascending block numbers `blocks` into runs of index-consecutive blocks that are
/// contiguous on disk.
fn runs_of(index: &[IndexEntry], blocks: impl Iterator<Item = usize>) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for i in blocks {
        let Some(e) = index.get(i) else { continue };
        let start = to_u64(e.offset);
        let end = to_u64(e.offset.saturating_add(e.size));
        if let Some(run) = runs.last_mut() {
            if run.last + 1 == i && run.bytes.end == start {
                run.last = i;
                run.bytes.end = end;
                continue;
            }
        }
        runs.push(Run {
            first: i,
            last: i,
            bytes: start..end,
        });
    }
    runs
}

/// Inserts into `out` the entries of data block `i`'s `payload` whose row is in `keys`, in one
/// ordered pass that stops after the last key.
fn scan_block(
    path: &str,
    i: usize,
    payload: &Bytes,
    keys: &BTreeSet<&[u8]>,
    out: &mut BTreeMap<Bytes, Bytes>,
) -> Result<()> {
    let mut wanted = keys.iter().peekable();
    let mut pos = 0;
    while pos < payload.len() {
        let (row, value, next) = entry_at(path, i, payload, pos)?;
        while wanted.next_if(|k| **k < row.as_ref()).is_some() {}
        let Some(k) = wanted.peek() else {
            break;
        };
        if **k == row.as_ref() {
            out.insert(row, value);
            wanted.next();
        }
        pos = next;
    }
    Ok(())
}
