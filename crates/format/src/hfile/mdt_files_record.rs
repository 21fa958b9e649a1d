//! The decoded `files`-partition record ([`FilesRecord`]) and its entries ([`FilesEntry`]),
//! shared by the generic and the direct decoders (re-exported by [`super::mdt`]).

use std::collections::BTreeMap;

/// One entry of `filesystemMetadata`: a file (type 2) or partition (type 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilesEntry {
    /// File size in bytes (0 for partitions).
    pub size: i64,
    /// Whether the record deletes the entry.
    pub is_deleted: bool,
}

/// A `files`-partition record: its type and `filesystemMetadata` map.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FilesRecord {
    /// `type`: [`RECORD_TYPE_ALL_PARTITIONS`](super::mdt::RECORD_TYPE_ALL_PARTITIONS) or [`RECORD_TYPE_FILES`](super::mdt::RECORD_TYPE_FILES) (other types decode
    /// with an empty map when `filesystemMetadata` is null).
    pub record_type: i32,
    /// `_hoodie_file_name` (set by Java in compacted base HFiles to the HFile's own name).
    pub file_name: Option<String>,
    /// `filesystemMetadata`, sorted by name; empty when null.
    pub files: BTreeMap<String, FilesEntry>,
}
