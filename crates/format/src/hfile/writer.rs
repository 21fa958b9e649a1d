//! [`HFileWriter`]: builds an HFile v3 in memory in the layout of spec §6.4.

use std::collections::BTreeMap;

use bytes::Bytes;
use prost::Message;

use super::block::{
    encode_block, write_hadoop_vlong, DATA_MAGIC, FILE_INFO_MAGIC, HEADER_SIZE, ROOT_INDEX_MAGIC,
};
use super::proto::{BytesBytesPair, InfoProto};
use super::trailer::{Trailer, COMPARATOR};
use super::{hfile_err, Compression};
use crate::Result;

/// What [`HFileWriter::finish`] names itself as in errors.
const WRITER_PATH: &str = "HFile writer";

/// How an [`HFileWriter`] lays out blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HFileWriterOptions {
    /// A data block is closed once its uncompressed payload reaches this many bytes
    /// (at least one entry per block). Java's default is 64 KiB.
    pub block_size: usize,
    /// The codec applied to every block (data, index and file info).
    pub compression: Compression,
}

impl Default for HFileWriterOptions {
    fn default() -> Self {
        Self {
            block_size: 64 * 1024,
            compression: Compression::None,
        }
    }
}

/// Writes an HFile v3: append entries in strictly increasing key order, then
/// [`HFileWriter::finish`]. The output has one data block per `block_size` bytes of entries, a
/// single-level root data index, an empty meta index, a file-info block (Java's standard keys
/// plus any [`HFileWriter::set_file_info`] entries) and the 4096-byte trailer.
#[derive(Debug)]
pub struct HFileWriter {
    options: HFileWriterOptions,
    out: Vec<u8>,
    block: Vec<u8>,
    block_first_key: Option<Vec<u8>>,
    index: Vec<(u64, usize, Vec<u8>)>,
    last_key: Option<Vec<u8>>,
    first_key: Option<Vec<u8>>,
    entry_count: u64,
    key_bytes: u64,
    value_bytes: u64,
    total_uncompressed: u64,
    file_info: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl HFileWriter {
    /// A writer with the given options and no entries.
    pub fn new(options: HFileWriterOptions) -> Self {
        Self {
            options,
            out: Vec::new(),
            block: Vec::new(),
            block_first_key: None,
            index: Vec::new(),
            last_key: None,
            first_key: None,
            entry_count: 0,
            key_bytes: 0,
            value_bytes: 0,
            total_uncompressed: 0,
            file_info: BTreeMap::new(),
        }
    }

    /// Sets a file-info entry (e.g. `schema` = the Avro writer schema JSON, which hudi-rs
    /// requires). Overrides the writer's own entries of the same name.
    pub fn set_file_info(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.file_info.insert(key.into(), value.into());
    }

    /// Appends one entry. Fails if `key` is not strictly greater (bytewise) than the previous
    /// key, or is longer than 32767 bytes.
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if let Some(prev) = &self.last_key {
            if prev.as_slice() >= key {
                return Err(hfile_err(
                    WRITER_PATH,
                    format!(
                        "key {:?} is not greater than the previous key {:?}",
                        String::from_utf8_lossy(key),
                        String::from_utf8_lossy(prev)
                    ),
                ));
            }
        }
        let row_len = u16::try_from(key.len())
            .ok()
            .filter(|l| *l <= i16::MAX as u16)
            .ok_or_else(|| {
                hfile_err(
                    WRITER_PATH,
                    format!("key of {} bytes is too long", key.len()),
                )
            })?;
        let value_len = i32::try_from(value.len()).map_err(|_| {
            hfile_err(
                WRITER_PATH,
                format!("value of {} bytes is too long", value.len()),
            )
        })?;
        // HBase key: rowLen, row, familyLen 0, timestamp MAX, type Put.
        let key_len = i32::from(row_len) + 12;
        self.block.extend_from_slice(&key_len.to_be_bytes());
        self.block.extend_from_slice(&value_len.to_be_bytes());
        self.block.extend_from_slice(&row_len.to_be_bytes());
        self.block.extend_from_slice(key);
        self.block.push(0);
        self.block.extend_from_slice(&i64::MAX.to_be_bytes());
        self.block.push(4);
        self.block.extend_from_slice(value);
        self.block.push(0); // memstore timestamp vlong 0
        if self.block_first_key.is_none() {
            self.block_first_key = Some(key.to_vec());
        }
        if self.first_key.is_none() {
            self.first_key = Some(key.to_vec());
        }
        self.last_key = Some(key.to_vec());
        self.entry_count += 1;
        self.key_bytes += u64::from(row_len) + 12;
        self.value_bytes += value.len() as u64;
        if self.block.len() >= self.options.block_size {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> Result<()> {
        let Some(first) = self.block_first_key.take() else {
            return Ok(());
        };
        let encoded = encode_block(DATA_MAGIC, &self.block, self.options.compression)?;
        self.total_uncompressed += (HEADER_SIZE + self.block.len()) as u64;
        self.index
            .push((self.out.len() as u64, encoded.len(), first));
        self.out.extend_from_slice(&encoded);
        self.block.clear();
        Ok(())
    }

    fn push_block(&mut self, magic: &[u8; 8], payload: &[u8]) -> Result<()> {
        let encoded = encode_block(magic, payload, self.options.compression)?;
        self.total_uncompressed += (HEADER_SIZE + payload.len()) as u64;
        self.out.extend_from_slice(&encoded);
        Ok(())
    }

    /// Writes the index, file-info and trailer and returns the whole file.
    pub fn finish(mut self) -> Result<Bytes> {
        self.flush_block()?;
        let to_err = |what: &str| hfile_err(WRITER_PATH, format!("{what} does not fit"));
        let load_on_open = self.out.len() as u64;

        let mut root = Vec::new();
        for (offset, size, key) in &self.index {
            root.extend_from_slice(
                &i64::try_from(*offset)
                    .map_err(|_| to_err("offset"))?
                    .to_be_bytes(),
            );
            root.extend_from_slice(
                &i32::try_from(*size)
                    .map_err(|_| to_err("block size"))?
                    .to_be_bytes(),
            );
            let row_len = u16::try_from(key.len()).map_err(|_| to_err("index key"))?;
            write_hadoop_vlong(&mut root, i64::from(row_len) + 2);
            root.extend_from_slice(&row_len.to_be_bytes());
            root.extend_from_slice(key);
        }
        let root_len = root.len() as u64;
        self.push_block(ROOT_INDEX_MAGIC, &root)?;
        self.push_block(ROOT_INDEX_MAGIC, &[])?; // empty meta index
        let file_info_offset = self.out.len() as u64;

        let mut info: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        info.insert(b"KEY_VALUE_VERSION".to_vec(), 1i32.to_be_bytes().to_vec());
        info.insert(b"MAX_MEMSTORE_TS_KEY".to_vec(), 0i64.to_be_bytes().to_vec());
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        info.insert(
            b"hfile.CREATE_TIME_TS".to_vec(),
            now_ms.to_be_bytes().to_vec(),
        );
        if self.entry_count > 0 {
            let n = self.entry_count;
            let avg = |total: u64| i32::try_from(total / n).unwrap_or(i32::MAX);
            info.insert(
                b"hfile.AVG_KEY_LEN".to_vec(),
                avg(self.key_bytes).to_be_bytes().to_vec(),
            );
            info.insert(
                b"hfile.AVG_VALUE_LEN".to_vec(),
                avg(self.value_bytes).to_be_bytes().to_vec(),
            );
        }
        if let (Some(first), Some(last)) = (&self.first_key, &self.last_key) {
            let len = u16::try_from(last.len()).map_err(|_| to_err("last key"))?;
            let mut lastkey = len.to_be_bytes().to_vec();
            lastkey.extend_from_slice(last);
            info.insert(b"hfile.LASTKEY".to_vec(), lastkey);
            info.insert(b"minRecordKey".to_vec(), first.clone());
            info.insert(b"maxRecordKey".to_vec(), last.clone());
        }
        info.extend(std::mem::take(&mut self.file_info));
        let proto = InfoProto {
            map_entry: info
                .into_iter()
                .map(|(first, second)| BytesBytesPair { first, second })
                .collect(),
        };
        let mut payload = b"PBUF".to_vec();
        payload.extend_from_slice(&proto.encode_length_delimited_to_vec());
        self.push_block(FILE_INFO_MAGIC, &payload)?;

        let trailer = Trailer {
            file_info_offset,
            load_on_open_offset: load_on_open,
            uncompressed_data_index_size: root_len,
            total_uncompressed_bytes: self.total_uncompressed,
            data_index_count: u32::try_from(self.index.len()).map_err(|_| to_err("index"))?,
            meta_index_count: 0,
            entry_count: self.entry_count,
            num_data_index_levels: 1,
            first_data_block_offset: 0,
            last_data_block_offset: self.index.last().map_or(0, |(o, _, _)| *o),
            comparator: COMPARATOR.to_string(),
            compression: self.options.compression,
        };
        self.out.extend_from_slice(&trailer.encode()?);
        Ok(Bytes::from(self.out))
    }
}
