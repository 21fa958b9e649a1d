//! The typed values of `hoodie.properties`: table type and version, timeline time zone, base
//! file format, record merge mode, and the table checksum.

use std::fmt;

use crate::naming::LayoutVersion;

/// The table type (`hoodie.table.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TableType {
    /// `COPY_ON_WRITE`: updates rewrite base files.
    CopyOnWrite,
    /// `MERGE_ON_READ`: updates go to log files, merged on read and by compaction.
    MergeOnRead,
}

impl TableType {
    /// Hudi's name (`COPY_ON_WRITE` / `MERGE_ON_READ`), as written to `hoodie.properties`.
    pub fn name(self) -> &'static str {
        match self {
            TableType::CopyOnWrite => "COPY_ON_WRITE",
            TableType::MergeOnRead => "MERGE_ON_READ",
        }
    }

    /// Parses Hudi's spellings, case-insensitively: `COPY_ON_WRITE`/`COW`,
    /// `MERGE_ON_READ`/`MOR`.
    pub fn parse(s: &str) -> Option<TableType> {
        match s.trim().to_ascii_uppercase().as_str() {
            "COPY_ON_WRITE" | "COW" => Some(TableType::CopyOnWrite),
            "MERGE_ON_READ" | "MOR" => Some(TableType::MergeOnRead),
            _ => None,
        }
    }
}

impl fmt::Display for TableType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A table version arbor can read (`hoodie.table.version`). arbor writes versions 8 and 9
/// ([`TableVersion::is_writable`]) and creates version 9 by default ([`TableVersion::default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum TableVersion {
    /// Version 6 (Hudi 0.14/0.15), timeline layout 1; read only.
    Six,
    /// Version 8 (Hudi 1.0), timeline layout 2; read and written.
    Eight,
    /// Version 9 (Hudi 1.1), timeline layout 2; read and written, the version new tables get
    /// by default.
    #[default]
    Nine,
}

impl TableVersion {
    /// The numeric version code.
    pub fn code(self) -> u32 {
        match self {
            TableVersion::Six => 6,
            TableVersion::Eight => 8,
            TableVersion::Nine => 9,
        }
    }

    /// The version of a numeric code, if arbor reads it.
    pub fn from_code(code: u32) -> Option<TableVersion> {
        match code {
            6 => Some(TableVersion::Six),
            8 => Some(TableVersion::Eight),
            9 => Some(TableVersion::Nine),
            _ => None,
        }
    }

    /// The version of a numeric code if arbor writes it (8 or 9); `None` for every other code,
    /// including the readable but read-only 6.
    pub fn writable_from_code(code: u32) -> Option<TableVersion> {
        TableVersion::from_code(code).filter(|v| v.is_writable())
    }

    /// True for the versions arbor writes (8 and 9): every operation on such a table keeps it
    /// at its version. Version 6 tables are read only.
    pub fn is_writable(self) -> bool {
        matches!(self, TableVersion::Eight | TableVersion::Nine)
    }

    /// The Hudi release line that writes this version (`0.x`, `1.0`, `1.1`).
    pub fn hudi_release(self) -> &'static str {
        match self {
            TableVersion::Six => "0.x",
            TableVersion::Eight => "1.0",
            TableVersion::Nine => "1.1",
        }
    }

    /// True when this version spells the table's properties as Hudi 1.1 does (version 9 and
    /// later): `hoodie.table.ordering.fields` instead of `hoodie.table.precombine.field`,
    /// `hoodie.table.format=native`, and neither a payload class nor a merge strategy id for
    /// the built-in commit-time and event-time merge modes.
    pub fn uses_v9_properties(self) -> bool {
        self >= TableVersion::Nine
    }

    /// The timeline layout this version uses: 1 for version 6, 2 for 8 and 9.
    pub fn layout(self) -> LayoutVersion {
        match self {
            TableVersion::Six => LayoutVersion::V1,
            TableVersion::Eight | TableVersion::Nine => LayoutVersion::V2,
        }
    }
}

impl fmt::Display for TableVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code())
    }
}

/// The time zone instant times are written in (`hoodie.table.timeline.timezone`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimelineTimezone {
    /// The writer's local time zone (Java's default when the key is absent).
    Local,
    /// UTC (what arbor writes).
    Utc,
}

impl TimelineTimezone {
    /// Hudi's name (`LOCAL` / `UTC`).
    pub fn name(self) -> &'static str {
        match self {
            TimelineTimezone::Local => "LOCAL",
            TimelineTimezone::Utc => "UTC",
        }
    }

    /// Parses `LOCAL` or `UTC`, case-insensitively.
    pub fn parse(s: &str) -> Option<TimelineTimezone> {
        match s.trim().to_ascii_uppercase().as_str() {
            "LOCAL" => Some(TimelineTimezone::Local),
            "UTC" => Some(TimelineTimezone::Utc),
            _ => None,
        }
    }
}

/// The base file format (`hoodie.table.base.file.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BaseFileFormat {
    /// Parquet (the default).
    Parquet,
    /// HFile (the metadata table).
    HFile,
    /// ORC (readable by Java only).
    Orc,
    /// Lance.
    Lance,
}

impl BaseFileFormat {
    /// Hudi's name (`PARQUET`, `HFILE`, `ORC`, `LANCE`).
    pub fn name(self) -> &'static str {
        match self {
            BaseFileFormat::Parquet => "PARQUET",
            BaseFileFormat::HFile => "HFILE",
            BaseFileFormat::Orc => "ORC",
            BaseFileFormat::Lance => "LANCE",
        }
    }

    /// Parses a format name, case-insensitively.
    pub fn parse(s: &str) -> Option<BaseFileFormat> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PARQUET" => Some(BaseFileFormat::Parquet),
            "HFILE" => Some(BaseFileFormat::HFile),
            "ORC" => Some(BaseFileFormat::Orc),
            "LANCE" => Some(BaseFileFormat::Lance),
            _ => None,
        }
    }
}

/// The record merge mode (`hoodie.record.merge.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordMergeMode {
    /// The record of the later commit wins.
    CommitTimeOrdering,
    /// The record with the larger ordering value wins.
    EventTimeOrdering,
    /// A custom merger or payload decides.
    Custom,
}

impl RecordMergeMode {
    /// Hudi's name.
    pub fn name(self) -> &'static str {
        match self {
            RecordMergeMode::CommitTimeOrdering => "COMMIT_TIME_ORDERING",
            RecordMergeMode::EventTimeOrdering => "EVENT_TIME_ORDERING",
            RecordMergeMode::Custom => "CUSTOM",
        }
    }

    /// Parses Hudi's name, case-insensitively.
    pub fn parse(s: &str) -> Option<RecordMergeMode> {
        match s.trim().to_ascii_uppercase().as_str() {
            "COMMIT_TIME_ORDERING" => Some(RecordMergeMode::CommitTimeOrdering),
            "EVENT_TIME_ORDERING" => Some(RecordMergeMode::EventTimeOrdering),
            "CUSTOM" => Some(RecordMergeMode::Custom),
            _ => None,
        }
    }

    /// The merge strategy id Hudi 1.0 (table version 8) writes with this mode. Version 9 tables
    /// written by Hudi 1.1 carry no strategy id for the built-in commit-time and event-time
    /// modes.
    pub fn strategy_id(self) -> &'static str {
        match self {
            RecordMergeMode::CommitTimeOrdering => "ce9acb64-bde0-424c-9b91-f6ebba25356d",
            RecordMergeMode::EventTimeOrdering => "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
            RecordMergeMode::Custom => "00000000-0000-0000-0000-000000000000",
        }
    }

    /// The payload class Hudi 1.0 (table version 8) writes for this mode (none for `CUSTOM`).
    /// Version 9 tables carry none for the built-in modes.
    pub fn payload_class(self) -> Option<&'static str> {
        match self {
            RecordMergeMode::CommitTimeOrdering => {
                Some("org.apache.hudi.common.model.OverwriteWithLatestAvroPayload")
            }
            RecordMergeMode::EventTimeOrdering => {
                Some("org.apache.hudi.common.model.DefaultHoodieRecordPayload")
            }
            RecordMergeMode::Custom => None,
        }
    }
}

/// Hudi's table checksum: CRC32 of the UTF-8 bytes of `"<database>.<table>"` (an absent
/// database name counts as empty), as `hoodie.table.checksum` stores it in unsigned decimal.
pub fn table_checksum(database: Option<&str>, table: &str) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(database.unwrap_or_default().as_bytes());
    hasher.update(b".");
    hasher.update(table.as_bytes());
    hasher.finalize()
}
