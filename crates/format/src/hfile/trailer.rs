//! The fixed-size (4096 bytes) HFile v3 trailer: magic, length-delimited
//! `FileTrailerProto`, zero padding, and the version word.

use prost::Message;

use super::proto::FileTrailerProto;
use super::{hfile_err, Compression};
use crate::Result;

/// Bytes of the trailer at the end of every HFile v3.
pub(crate) const TRAILER_SIZE: usize = 4096;
/// Trailer magic.
const TRAILER_MAGIC: &[u8; 8] = b"TRABLK\"$";
/// The comparator Hudi writes.
pub(crate) const COMPARATOR: &str = "org.apache.hudi.io.storage.HoodieHBaseKVComparator";

/// The decoded trailer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Trailer {
    pub file_info_offset: u64,
    pub load_on_open_offset: u64,
    pub uncompressed_data_index_size: u64,
    pub total_uncompressed_bytes: u64,
    pub data_index_count: u32,
    pub meta_index_count: u32,
    pub entry_count: u64,
    pub num_data_index_levels: u32,
    pub first_data_block_offset: u64,
    pub last_data_block_offset: u64,
    pub comparator: String,
    pub compression: Compression,
}

impl Trailer {
    /// Reads the trailer from the last 4096 bytes of `file`; checks magic, version 3 and codec.
    pub(crate) fn read(file: &[u8], path: &str) -> Result<Self> {
        let start = file.len().checked_sub(TRAILER_SIZE).ok_or_else(|| {
            hfile_err(
                path,
                format!(
                    "{} bytes is too short for the {TRAILER_SIZE}-byte trailer",
                    file.len()
                ),
            )
        })?;
        Self::parse(file.get(start..).unwrap_or_default(), start, path)
    }

    /// Decodes the trailer from `t`, the last 4096 bytes of a file, which start at byte `start`
    /// of it (for errors); checks magic, version 3 and codec.
    pub(crate) fn parse(t: &[u8], start: usize, path: &str) -> Result<Self> {
        if t.len() != TRAILER_SIZE {
            return Err(hfile_err(
                path,
                format!(
                    "trailer at offset {start}: {} bytes read, expected {TRAILER_SIZE}",
                    t.len()
                ),
            ));
        }
        let err = |reason: String| hfile_err(path, format!("trailer at offset {start}: {reason}"));
        if t.get(..8) != Some(TRAILER_MAGIC.as_slice()) {
            return Err(err("bad trailer magic".into()));
        }
        let version = t.get(TRAILER_SIZE - 4..).unwrap_or_default();
        let (minor, major) = match version {
            [minor, a, b, c] => (*minor, u32::from_be_bytes([0, *a, *b, *c])),
            _ => return Err(err("truncated version".into())),
        };
        if major != 3 {
            return Err(err(format!(
                "unsupported HFile version {major}.{minor} (only 3 is read)"
            )));
        }
        let mut body = t.get(8..TRAILER_SIZE - 4).unwrap_or_default();
        let proto = FileTrailerProto::decode_length_delimited(&mut body)
            .map_err(|e| err(format!("trailer protobuf cannot be decoded: {e}")))?;
        let compression = match proto.compression_codec.unwrap_or(2) {
            1 => Compression::Gz,
            2 => Compression::None,
            other => return Err(err(format!("unsupported compression codec id {other}"))),
        };
        Ok(Self {
            file_info_offset: proto.file_info_offset.unwrap_or(0),
            load_on_open_offset: proto.load_on_open_data_offset.unwrap_or(0),
            uncompressed_data_index_size: proto.uncompressed_data_index_size.unwrap_or(0),
            total_uncompressed_bytes: proto.total_uncompressed_bytes.unwrap_or(0),
            data_index_count: proto.data_index_count.unwrap_or(0),
            meta_index_count: proto.meta_index_count.unwrap_or(0),
            entry_count: proto.entry_count.unwrap_or(0),
            num_data_index_levels: proto.num_data_index_levels.unwrap_or(1),
            first_data_block_offset: proto.first_data_block_offset.unwrap_or(0),
            last_data_block_offset: proto.last_data_block_offset.unwrap_or(0),
            comparator: proto.comparator_class_name.unwrap_or_default(),
            compression,
        })
    }

    /// Encodes the trailer as exactly 4096 bytes.
    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        let proto = FileTrailerProto {
            file_info_offset: Some(self.file_info_offset),
            load_on_open_data_offset: Some(self.load_on_open_offset),
            uncompressed_data_index_size: Some(self.uncompressed_data_index_size),
            total_uncompressed_bytes: Some(self.total_uncompressed_bytes),
            data_index_count: Some(self.data_index_count),
            meta_index_count: Some(self.meta_index_count),
            entry_count: Some(self.entry_count),
            num_data_index_levels: Some(self.num_data_index_levels),
            first_data_block_offset: Some(self.first_data_block_offset),
            last_data_block_offset: Some(self.last_data_block_offset),
            comparator_class_name: Some(self.comparator.clone()),
            compression_codec: Some(match self.compression {
                Compression::Gz => 1,
                Compression::None => 2,
            }),
            encryption_key: None,
        };
        let mut out = Vec::with_capacity(TRAILER_SIZE);
        out.extend_from_slice(TRAILER_MAGIC);
        out.extend_from_slice(&proto.encode_length_delimited_to_vec());
        if out.len() > TRAILER_SIZE - 4 {
            return Err(hfile_err(
                "HFile writer",
                format!("trailer of {} bytes does not fit", out.len()),
            ));
        }
        out.resize(TRAILER_SIZE - 4, 0);
        out.extend_from_slice(&[0, 0, 0, 3]);
        Ok(out)
    }
}
