//! The block model: types, header keys and one parsed block.

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;

/// The 6 bytes that start every block.
pub const MAGIC: &[u8; 6] = b"#HUDI#";

/// The log format version every block written since Hudi 0.x carries (and the only one read).
pub const LOG_FORMAT_VERSION: i32 = 1;

/// The content version of Avro data and delete blocks (the only one read; hudi-rs refuses others).
pub const BLOCK_CONTENT_VERSION: i32 = 3;

/// What a block holds (spec §5.2). The id is the `i32` after the format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BlockType {
    /// A command, e.g. a rollback of an earlier instant's blocks (id 0).
    Command,
    /// Record keys to delete (id 1).
    Delete,
    /// Marker Java's reader uses for unreadable regions; never written to disk (id 2).
    Corrupted,
    /// Records as Avro binary datums (id 3).
    AvroData,
    /// An HFile of records (metadata table; id 4).
    HfileData,
    /// A parquet file of records (id 5).
    ParquetData,
    /// Change-data-capture records (id 6).
    CdcData,
}

impl BlockType {
    /// The on-disk id.
    pub fn id(self) -> i32 {
        match self {
            BlockType::Command => 0,
            BlockType::Delete => 1,
            BlockType::Corrupted => 2,
            BlockType::AvroData => 3,
            BlockType::HfileData => 4,
            BlockType::ParquetData => 5,
            BlockType::CdcData => 6,
        }
    }

    /// The type with this on-disk id, if it is one.
    pub fn from_id(id: i32) -> Option<Self> {
        Some(match id {
            0 => BlockType::Command,
            1 => BlockType::Delete,
            2 => BlockType::Corrupted,
            3 => BlockType::AvroData,
            4 => BlockType::HfileData,
            5 => BlockType::ParquetData,
            6 => BlockType::CdcData,
            _ => return None,
        })
    }

    /// True for the block types that carry records (Avro, HFile, parquet, CDC).
    pub fn is_data(self) -> bool {
        matches!(
            self,
            BlockType::AvroData
                | BlockType::HfileData
                | BlockType::ParquetData
                | BlockType::CdcData
        )
    }
}

impl fmt::Display for BlockType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            BlockType::Command => "COMMAND_BLOCK",
            BlockType::Delete => "DELETE_BLOCK",
            BlockType::Corrupted => "CORRUPT_BLOCK",
            BlockType::AvroData => "AVRO_DATA_BLOCK",
            BlockType::HfileData => "HFILE_DATA_BLOCK",
            BlockType::ParquetData => "PARQUET_DATA_BLOCK",
            BlockType::CdcData => "CDC_DATA_BLOCK",
        };
        f.write_str(name)
    }
}

/// Keys of the header and footer maps (spec §5.2). Ids arbor does not know are kept as
/// [`HeaderKey::Unknown`] so nothing read is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HeaderKey {
    /// The instant that wrote the block (id 0); mandatory.
    InstantTime,
    /// The instant a command block targets (id 1).
    TargetInstantTime,
    /// The writer's Avro schema as JSON (id 2).
    Schema,
    /// The command of a command block, `"0"` = rollback (id 3).
    CommandBlockType,
    /// Instants whose blocks a log compaction merged (id 4).
    CompactedBlockTimes,
    /// Record positions in the base file (id 5).
    RecordPositions,
    /// Identifies a block across retried writes (id 6).
    BlockIdentifier,
    /// Partial-update marker (id 7).
    IsPartial,
    /// Base file instant the record positions refer to (id 8).
    BaseFileInstantTimeOfRecordPositions,
    /// An id this version does not know.
    Unknown(i32),
}

impl HeaderKey {
    /// The on-disk id.
    pub fn id(self) -> i32 {
        match self {
            HeaderKey::InstantTime => 0,
            HeaderKey::TargetInstantTime => 1,
            HeaderKey::Schema => 2,
            HeaderKey::CommandBlockType => 3,
            HeaderKey::CompactedBlockTimes => 4,
            HeaderKey::RecordPositions => 5,
            HeaderKey::BlockIdentifier => 6,
            HeaderKey::IsPartial => 7,
            HeaderKey::BaseFileInstantTimeOfRecordPositions => 8,
            HeaderKey::Unknown(id) => id,
        }
    }

    /// The key with this on-disk id (unknown ids map to [`HeaderKey::Unknown`]).
    pub fn from_id(id: i32) -> Self {
        match id {
            0 => HeaderKey::InstantTime,
            1 => HeaderKey::TargetInstantTime,
            2 => HeaderKey::Schema,
            3 => HeaderKey::CommandBlockType,
            4 => HeaderKey::CompactedBlockTimes,
            5 => HeaderKey::RecordPositions,
            6 => HeaderKey::BlockIdentifier,
            7 => HeaderKey::IsPartial,
            8 => HeaderKey::BaseFileInstantTimeOfRecordPositions,
            other => HeaderKey::Unknown(other),
        }
    }
}

/// The command of a command block (header `COMMAND_BLOCK_TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommandBlockType {
    /// Invalidate every block written by the target instant (`"0"`).
    Rollback,
}

impl CommandBlockType {
    /// The header value.
    pub fn as_header_value(self) -> &'static str {
        match self {
            CommandBlockType::Rollback => "0",
        }
    }
}

/// Header or footer metadata of a block, ordered by key id (the order Java writes).
pub type BlockMetadata = BTreeMap<HeaderKey, String>;

/// One structurally valid block of a log file. The content is not decoded; see
/// [`super::data`] and [`super::delete`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBlock {
    /// Byte offset of the block's magic in the file.
    pub offset: u64,
    /// Total bytes of the block, magic to reverse pointer inclusive.
    pub size: u64,
    /// What the block holds.
    pub block_type: BlockType,
    /// The header map.
    pub header: BlockMetadata,
    /// The footer map (Spark writes it empty).
    pub footer: BlockMetadata,
    /// The content bytes, exactly as stored.
    pub content: Bytes,
}

impl LogBlock {
    /// Header `INSTANT_TIME`: the instant that wrote the block.
    pub fn instant_time(&self) -> Option<&str> {
        self.header_value(HeaderKey::InstantTime)
    }

    /// Header `TARGET_INSTANT_TIME`: the instant a command targets.
    pub fn target_instant_time(&self) -> Option<&str> {
        self.header_value(HeaderKey::TargetInstantTime)
    }

    /// Header `SCHEMA`: the writer's Avro schema as JSON.
    pub fn schema_json(&self) -> Option<&str> {
        self.header_value(HeaderKey::Schema)
    }

    /// Header `COMMAND_BLOCK_TYPE`, when present and known.
    pub fn command_type(&self) -> Option<CommandBlockType> {
        match self.header_value(HeaderKey::CommandBlockType)?.trim() {
            "0" => Some(CommandBlockType::Rollback),
            _ => None,
        }
    }

    /// For a rollback command block: the instant whose blocks it invalidates.
    pub fn rollback_target(&self) -> Option<&str> {
        if self.block_type == BlockType::Command
            && self.command_type() == Some(CommandBlockType::Rollback)
        {
            self.target_instant_time()
        } else {
            None
        }
    }

    /// A header value by key.
    pub fn header_value(&self, key: HeaderKey) -> Option<&str> {
        self.header.get(&key).map(String::as_str)
    }
}
