//! `HoodieCommitMetadata`, `HoodieWriteStat` and `HoodieReplaceCommitMetadata`: the contents of
//! completed (and inflight) `commit`, `deltacommit` and `replacecommit` instants.
//!
//! Field names follow Hudi's Avro schema (camelCase), which is also the key set of the Jackson
//! JSON that table version 6 stored, so one type reads both.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{AvroRecord, InstantSchema};

/// The `extraMetadata` key holding the Avro schema JSON of the table's data columns.
pub const SCHEMA_KEY: &str = "schema";

/// Hudi's `WriteOperationType`: what kind of write produced a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WriteOperationType {
    /// `INSERT`.
    Insert,
    /// `INSERT_PREPPED`.
    InsertPrepped,
    /// `UPSERT`.
    Upsert,
    /// `UPSERT_PREPPED`.
    UpsertPrepped,
    /// `BULK_INSERT`.
    BulkInsert,
    /// `BULK_INSERT_PREPPED`.
    BulkInsertPrepped,
    /// `DELETE`.
    Delete,
    /// `DELETE_PREPPED`.
    DeletePrepped,
    /// `BOOTSTRAP`.
    Bootstrap,
    /// `INSERT_OVERWRITE`.
    InsertOverwrite,
    /// `INSERT_OVERWRITE_TABLE`.
    InsertOverwriteTable,
    /// `CLUSTER`.
    Cluster,
    /// `DELETE_PARTITION`.
    DeletePartition,
    /// `COMPACT`.
    Compact,
    /// `LOG_COMPACT`.
    LogCompact,
    /// `INDEX`.
    Index,
    /// `ALTER_SCHEMA`.
    AlterSchema,
    /// `UNKNOWN`, and any name arbor does not know.
    Unknown,
}

impl WriteOperationType {
    /// Every operation type.
    pub const ALL: [WriteOperationType; 18] = [
        WriteOperationType::Insert,
        WriteOperationType::InsertPrepped,
        WriteOperationType::Upsert,
        WriteOperationType::UpsertPrepped,
        WriteOperationType::BulkInsert,
        WriteOperationType::BulkInsertPrepped,
        WriteOperationType::Delete,
        WriteOperationType::DeletePrepped,
        WriteOperationType::Bootstrap,
        WriteOperationType::InsertOverwrite,
        WriteOperationType::InsertOverwriteTable,
        WriteOperationType::Cluster,
        WriteOperationType::DeletePartition,
        WriteOperationType::Compact,
        WriteOperationType::LogCompact,
        WriteOperationType::Index,
        WriteOperationType::AlterSchema,
        WriteOperationType::Unknown,
    ];

    /// The Java enum name, as stored in `operationType`.
    pub fn name(self) -> &'static str {
        match self {
            WriteOperationType::Insert => "INSERT",
            WriteOperationType::InsertPrepped => "INSERT_PREPPED",
            WriteOperationType::Upsert => "UPSERT",
            WriteOperationType::UpsertPrepped => "UPSERT_PREPPED",
            WriteOperationType::BulkInsert => "BULK_INSERT",
            WriteOperationType::BulkInsertPrepped => "BULK_INSERT_PREPPED",
            WriteOperationType::Delete => "DELETE",
            WriteOperationType::DeletePrepped => "DELETE_PREPPED",
            WriteOperationType::Bootstrap => "BOOTSTRAP",
            WriteOperationType::InsertOverwrite => "INSERT_OVERWRITE",
            WriteOperationType::InsertOverwriteTable => "INSERT_OVERWRITE_TABLE",
            WriteOperationType::Cluster => "CLUSTER",
            WriteOperationType::DeletePartition => "DELETE_PARTITION",
            WriteOperationType::Compact => "COMPACT",
            WriteOperationType::LogCompact => "LOG_COMPACT",
            WriteOperationType::Index => "INDEX",
            WriteOperationType::AlterSchema => "ALTER_SCHEMA",
            WriteOperationType::Unknown => "UNKNOWN",
        }
    }

    /// The operation type of a Java enum name; names arbor does not know map to `Unknown`.
    pub fn from_name(name: &str) -> WriteOperationType {
        WriteOperationType::ALL
            .into_iter()
            .find(|o| o.name() == name)
            .unwrap_or(WriteOperationType::Unknown)
    }

    /// True for the operations that logically replace file groups and so complete as
    /// `replacecommit` (`INSERT_OVERWRITE`, `INSERT_OVERWRITE_TABLE`, `DELETE_PARTITION`,
    /// `CLUSTER`).
    pub fn is_replace(self) -> bool {
        matches!(
            self,
            WriteOperationType::InsertOverwrite
                | WriteOperationType::InsertOverwriteTable
                | WriteOperationType::DeletePartition
                | WriteOperationType::Cluster
        )
    }
}

impl fmt::Display for WriteOperationType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `HoodieRuntimeStats`: timings of one file write, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieRuntimeStats {
    /// Time spent scanning (merging) existing records.
    pub total_scan_time: Option<i64>,
    /// Time spent creating new files.
    pub total_create_time: Option<i64>,
    /// Time spent upserting into existing files.
    pub total_upsert_time: Option<i64>,
}

/// `HoodieWriteStat`: what one write did to one file (a new base file, a rewritten base file,
/// or a log file appended to). Every field is optional in the schema.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieWriteStat {
    /// The file group id.
    pub file_id: Option<String>,
    /// The written file, relative to the table base path (`<partition>/<file name>`).
    pub path: Option<String>,
    /// The instant of the previous base file, or the literal `"null"` for a new file group.
    pub prev_commit: Option<String>,
    /// Records written.
    pub num_writes: Option<i64>,
    /// Records deleted.
    pub num_deletes: Option<i64>,
    /// Records updated.
    pub num_update_writes: Option<i64>,
    /// Bytes written.
    pub total_write_bytes: Option<i64>,
    /// Records that failed.
    pub total_write_errors: Option<i64>,
    /// The relative partition path (`""` for non-partitioned tables).
    pub partition_path: Option<String>,
    /// Log records read (compaction).
    pub total_log_records: Option<i64>,
    /// Log files read (compaction).
    pub total_log_files: Option<i64>,
    /// Records updated by compaction.
    pub total_updated_records_compacted: Option<i64>,
    /// Records inserted.
    pub num_inserts: Option<i64>,
    /// Log blocks read.
    pub total_log_blocks: Option<i64>,
    /// Corrupt log blocks seen.
    pub total_corrupt_log_block: Option<i64>,
    /// Rollback blocks seen.
    pub total_rollback_blocks: Option<i64>,
    /// Size of the written file in bytes.
    pub file_size_in_bytes: Option<i64>,
    /// Log file version (MOR appends).
    pub log_version: Option<i32>,
    /// Offset of the appended block in the log file.
    pub log_offset: Option<i64>,
    /// The base file of the slice a log append belongs to (`""` if none).
    pub base_file: Option<String>,
    /// The log files written (names only).
    pub log_files: Option<Vec<String>>,
    /// CDC log files and their sizes.
    pub cdc_stats: Option<BTreeMap<String, i64>>,
    /// The base file this write replaced (compaction, clustering).
    pub prev_base_file: Option<String>,
    /// Smallest event time seen.
    pub min_event_time: Option<i64>,
    /// Largest event time seen.
    pub max_event_time: Option<i64>,
    /// Timings.
    pub runtime_stats: Option<HoodieRuntimeStats>,
    /// Log files compacted.
    pub total_log_files_compacted: Option<i64>,
    /// Time spent reading logs.
    pub total_log_read_time_ms: Option<i64>,
    /// Bytes of logs compacted.
    pub total_log_size_compacted: Option<i64>,
    /// Temporary path used while writing.
    pub temp_path: Option<String>,
    /// Records updated (newer counter).
    pub num_updates: Option<i64>,
}

impl HoodieWriteStat {
    /// The file name of the written file: the last segment of `path`, if set.
    pub fn file_name(&self) -> Option<&str> {
        self.path
            .as_deref()
            .map(|p| p.rsplit('/').next().unwrap_or(p))
    }
}

/// `HoodieCommitMetadata`: the content of a completed `commit`/`deltacommit` (and of inflight
/// ones, as a workload profile).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieCommitMetadata {
    /// Write stats per relative partition path.
    pub partition_to_write_stats: Option<BTreeMap<String, Vec<HoodieWriteStat>>>,
    /// True for compaction results.
    pub compacted: Option<bool>,
    /// Free-form metadata; [`SCHEMA_KEY`] holds the table schema.
    pub extra_metadata: Option<BTreeMap<String, String>>,
    /// Schema version (defaults to 1; Spark 1.x wrote null).
    pub version: Option<i32>,
    /// The `WriteOperationType` name.
    pub operation_type: Option<String>,
}

/// `HoodieReplaceCommitMetadata`: [`HoodieCommitMetadata`]'s fields plus the file groups the
/// instant replaced. Content of a completed `replacecommit` (insert overwrite, delete
/// partition, clustering).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieReplaceCommitMetadata {
    /// Write stats per relative partition path (may be empty, e.g. delete partition).
    pub partition_to_write_stats: Option<BTreeMap<String, Vec<HoodieWriteStat>>>,
    /// True for compaction results.
    pub compacted: Option<bool>,
    /// Free-form metadata; [`SCHEMA_KEY`] holds the table schema.
    pub extra_metadata: Option<BTreeMap<String, String>>,
    /// Schema version.
    pub version: Option<i32>,
    /// The `WriteOperationType` name.
    pub operation_type: Option<String>,
    /// Per partition, the file ids whose every slice this instant logically removes.
    pub partition_to_replace_file_ids: Option<BTreeMap<String, Vec<String>>>,
}

macro_rules! write_metadata_accessors {
    ($ty:ty) => {
        impl $ty {
            /// The parsed `operationType` (`None` if absent; unknown names give `Unknown`).
            pub fn operation_type(&self) -> Option<WriteOperationType> {
                self.operation_type
                    .as_deref()
                    .map(WriteOperationType::from_name)
            }

            /// Sets `operationType`.
            pub fn set_operation_type(&mut self, op: WriteOperationType) {
                self.operation_type = Some(op.name().to_string());
            }

            /// The table schema JSON from `extraMetadata["schema"]`, if present and non-empty.
            pub fn schema(&self) -> Option<&str> {
                self.extra(SCHEMA_KEY).filter(|s| !s.is_empty())
            }

            /// One `extraMetadata` value.
            pub fn extra(&self, key: &str) -> Option<&str> {
                self.extra_metadata
                    .as_ref()
                    .and_then(|m| m.get(key))
                    .map(String::as_str)
            }

            /// Sets one `extraMetadata` entry.
            pub fn insert_extra(&mut self, key: impl Into<String>, value: impl Into<String>) {
                self.extra_metadata
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key.into(), value.into());
            }

            /// Every write stat with its partition path, partitions in key order.
            pub fn write_stats(&self) -> impl Iterator<Item = (&str, &HoodieWriteStat)> + '_ {
                self.partition_to_write_stats
                    .iter()
                    .flat_map(|m| m.iter())
                    .flat_map(|(p, stats)| stats.iter().map(move |s| (p.as_str(), s)))
            }

            /// The partitions that have write stats.
            pub fn partitions(&self) -> impl Iterator<Item = &str> + '_ {
                self.partition_to_write_stats
                    .iter()
                    .flat_map(|m| m.keys())
                    .map(String::as_str)
            }

            /// Appends a write stat under `partition`.
            pub fn add_write_stat(&mut self, partition: impl Into<String>, stat: HoodieWriteStat) {
                self.partition_to_write_stats
                    .get_or_insert_with(BTreeMap::new)
                    .entry(partition.into())
                    .or_default()
                    .push(stat);
            }

            /// True if `compacted` is set and true.
            pub fn is_compacted(&self) -> bool {
                self.compacted == Some(true)
            }
        }
    };
}

write_metadata_accessors!(HoodieCommitMetadata);
write_metadata_accessors!(HoodieReplaceCommitMetadata);

impl HoodieReplaceCommitMetadata {
    /// Every replaced file id with its partition path, partitions in key order.
    pub fn replaced_file_ids(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.partition_to_replace_file_ids
            .iter()
            .flat_map(|m| m.iter())
            .flat_map(|(p, ids)| ids.iter().map(move |id| (p.as_str(), id.as_str())))
    }

    /// The commit-metadata part (everything but `partitionToReplaceFileIds`).
    pub fn to_commit_metadata(&self) -> HoodieCommitMetadata {
        HoodieCommitMetadata {
            partition_to_write_stats: self.partition_to_write_stats.clone(),
            compacted: self.compacted,
            extra_metadata: self.extra_metadata.clone(),
            version: self.version,
            operation_type: self.operation_type.clone(),
        }
    }

    /// Builds replace metadata from commit metadata and the replaced file ids.
    pub fn from_commit_metadata(
        commit: HoodieCommitMetadata,
        partition_to_replace_file_ids: BTreeMap<String, Vec<String>>,
    ) -> Self {
        HoodieReplaceCommitMetadata {
            partition_to_write_stats: commit.partition_to_write_stats,
            compacted: commit.compacted,
            extra_metadata: commit.extra_metadata,
            version: commit.version,
            operation_type: commit.operation_type,
            partition_to_replace_file_ids: Some(partition_to_replace_file_ids),
        }
    }
}

impl AvroRecord for HoodieCommitMetadata {
    const SCHEMA: InstantSchema = InstantSchema::CommitMetadata;
}

impl AvroRecord for HoodieReplaceCommitMetadata {
    const SCHEMA: InstantSchema = InstantSchema::ReplaceCommitMetadata;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::avro::{decode, encode};

    /// A write stat with every field set.
    pub(crate) fn full_write_stat() -> HoodieWriteStat {
        HoodieWriteStat {
            file_id: Some("fid-0".into()),
            path: Some("p=1/fid-0_0-1-2_20250101000000000.parquet".into()),
            prev_commit: Some("null".into()),
            num_writes: Some(1),
            num_deletes: Some(2),
            num_update_writes: Some(3),
            total_write_bytes: Some(4),
            total_write_errors: Some(5),
            partition_path: Some("p=1".into()),
            total_log_records: Some(6),
            total_log_files: Some(7),
            total_updated_records_compacted: Some(8),
            num_inserts: Some(9),
            total_log_blocks: Some(10),
            total_corrupt_log_block: Some(11),
            total_rollback_blocks: Some(12),
            file_size_in_bytes: Some(13),
            log_version: Some(14),
            log_offset: Some(15),
            base_file: Some("".into()),
            log_files: Some(vec![".fid-0_2025.log.1_0-1-2".into()]),
            cdc_stats: Some(BTreeMap::from([("cdc".to_string(), 16)])),
            prev_base_file: Some("old.parquet".into()),
            min_event_time: Some(-17),
            max_event_time: Some(18),
            runtime_stats: Some(HoodieRuntimeStats {
                total_scan_time: Some(19),
                total_create_time: Some(20),
                total_upsert_time: None,
            }),
            total_log_files_compacted: Some(21),
            total_log_read_time_ms: Some(22),
            total_log_size_compacted: Some(23),
            temp_path: Some("tmp".into()),
            num_updates: Some(24),
        }
    }

    pub(crate) fn full_commit_metadata() -> HoodieCommitMetadata {
        let mut m = HoodieCommitMetadata {
            compacted: Some(false),
            version: Some(1),
            ..Default::default()
        };
        m.set_operation_type(WriteOperationType::Upsert);
        m.insert_extra(SCHEMA_KEY, "{\"type\":\"record\"}");
        m.add_write_stat("p=1", full_write_stat());
        m.add_write_stat("p=1", HoodieWriteStat::default());
        m.add_write_stat("", HoodieWriteStat::default());
        m
    }

    #[test]
    fn test_encode_commit_metadata_round_trips() {
        let m = full_commit_metadata();
        let bytes = encode(&m).unwrap();
        let back: HoodieCommitMetadata = decode(&bytes, "t.commit").unwrap();
        assert_eq!(back, m);
        assert_eq!(encode(&back).unwrap(), bytes, "encoding is deterministic");
        let empty = HoodieCommitMetadata::default();
        let back: HoodieCommitMetadata = decode(&encode(&empty).unwrap(), "k").unwrap();
        assert_eq!(back, empty);
    }

    #[test]
    fn test_encode_replace_commit_metadata_round_trips() {
        let m = HoodieReplaceCommitMetadata::from_commit_metadata(
            full_commit_metadata(),
            BTreeMap::from([("p=1".to_string(), vec!["a".into(), "b".into()])]),
        );
        let back: HoodieReplaceCommitMetadata = decode(&encode(&m).unwrap(), "k").unwrap();
        assert_eq!(back, m);
        assert_eq!(back.to_commit_metadata(), full_commit_metadata());
        assert_eq!(
            back.replaced_file_ids().collect::<Vec<_>>(),
            vec![("p=1", "a"), ("p=1", "b")]
        );
    }

    #[test]
    fn test_commit_metadata_accessors_report_fields() {
        let m = full_commit_metadata();
        assert_eq!(m.operation_type(), Some(WriteOperationType::Upsert));
        assert_eq!(m.schema(), Some("{\"type\":\"record\"}"));
        assert_eq!(m.write_stats().count(), 3);
        assert_eq!(m.partitions().collect::<Vec<_>>(), vec!["", "p=1"]);
        assert!(!m.is_compacted());
        assert_eq!(
            full_write_stat().file_name(),
            Some("fid-0_0-1-2_20250101000000000.parquet")
        );
        let none = HoodieCommitMetadata::default();
        assert_eq!(none.operation_type(), None);
        assert_eq!(none.schema(), None);
        assert_eq!(none.write_stats().count(), 0);
    }

    #[test]
    fn test_write_operation_type_from_name_round_trips_and_maps_unknown() {
        for op in WriteOperationType::ALL {
            assert_eq!(WriteOperationType::from_name(op.name()), op);
        }
        assert_eq!(
            WriteOperationType::from_name("SOMETHING_NEW"),
            WriteOperationType::Unknown
        );
        assert!(WriteOperationType::DeletePartition.is_replace());
        assert!(!WriteOperationType::Upsert.is_replace());
    }

    #[test]
    fn test_commit_metadata_reads_v6_jackson_json() {
        let json = r#"{
          "partitionToWriteStats" : { "" : [ {
              "fileId" : "f", "path" : "f_1.parquet", "cdcStats" : null, "prevCommit" : "null",
              "numWrites" : 4, "runtimeStats" : { "totalScanTime" : 0, "totalUpsertTime" : 105,
              "totalCreateTime" : 0 }, "recordsStats" : { "val" : null } } ] },
          "compacted" : false,
          "extraMetadata" : { "schema" : "{}" },
          "operationType" : "UPSERT"
        }"#;
        let m: HoodieCommitMetadata = serde_json::from_str(json).unwrap();
        assert_eq!(m.operation_type(), Some(WriteOperationType::Upsert));
        let (p, s) = m.write_stats().next().unwrap();
        assert_eq!(p, "");
        assert_eq!(s.num_writes, Some(4));
        assert_eq!(
            s.runtime_stats.as_ref().unwrap().total_upsert_time,
            Some(105)
        );
        assert_eq!(m.version, None);
    }
}
