//! `HoodieCleanerPlan` (content of `T.clean.requested`) and `HoodieCleanMetadata` (content of
//! the completed `T_C.clean`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{AvroRecord, InstantSchema};

/// `HoodieActionInstant`: an instant named by time, action and state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieActionInstant {
    /// The instant time.
    pub timestamp: String,
    /// The action name (`commit`, `deltacommit`, ...).
    pub action: String,
    /// The state name (`COMPLETED`, ...).
    pub state: String,
}

/// `HoodieCleanFileInfo`: one file the clean will delete.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieCleanFileInfo {
    /// The file's path.
    pub file_path: Option<String>,
    /// True if it is a bootstrap base file.
    pub is_bootstrap_base_file: Option<bool>,
}

/// `HoodieCleanerPlan`: what a clean will delete.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieCleanerPlan {
    /// The earliest instant whose files the clean keeps.
    pub earliest_instant_to_retain: Option<HoodieActionInstant>,
    /// `KEEP_LATEST_COMMITS`, `KEEP_LATEST_FILE_VERSIONS` or `KEEP_LATEST_BY_HOURS`.
    pub policy: String,
    /// Deprecated: file names per partition.
    pub files_to_be_deleted_per_partition: Option<BTreeMap<String, Vec<String>>>,
    /// Plan version (schema default 1; current Java writers use 2).
    pub version: Option<i32>,
    /// Files to delete per partition (replaces `filesToBeDeletedPerPartition`).
    pub file_paths_to_be_deleted_per_partition: Option<BTreeMap<String, Vec<HoodieCleanFileInfo>>>,
    /// Partitions whose directory the clean removes (after a delete partition).
    pub partitions_to_be_deleted: Option<Vec<String>>,
}

/// `HoodieCleanPartitionMetadata`: what a clean did in one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieCleanPartitionMetadata {
    /// The relative partition path.
    pub partition_path: String,
    /// The policy applied.
    pub policy: String,
    /// Paths the clean tried to delete.
    pub delete_path_patterns: Vec<String>,
    /// Paths deleted.
    pub success_delete_files: Vec<String>,
    /// Paths that failed to delete.
    pub failed_delete_files: Vec<String>,
    /// True if the whole partition was removed.
    pub is_partition_deleted: Option<bool>,
}

/// `HoodieCleanMetadata`: the result of a completed clean.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieCleanMetadata {
    /// The policy applied (schema default `""`).
    pub policy: String,
    /// The clean's instant time.
    pub start_clean_time: String,
    /// Duration in milliseconds.
    pub time_taken_in_millis: i64,
    /// Number of files deleted.
    pub total_files_deleted: i32,
    /// The earliest commit whose files were retained.
    pub earliest_commit_to_retain: String,
    /// The last completed commit when the clean ran (schema default `""`).
    pub last_completed_commit_timestamp: String,
    /// Per-partition results.
    pub partition_metadata: BTreeMap<String, HoodieCleanPartitionMetadata>,
    /// Schema version (default 1).
    pub version: Option<i32>,
    /// Per-partition results for bootstrap base files.
    pub bootstrap_partition_metadata: Option<BTreeMap<String, HoodieCleanPartitionMetadata>>,
}

impl AvroRecord for HoodieCleanerPlan {
    const SCHEMA: InstantSchema = InstantSchema::CleanerPlan;
}

impl AvroRecord for HoodieCleanMetadata {
    const SCHEMA: InstantSchema = InstantSchema::CleanMetadata;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::avro::{decode, encode};

    pub(crate) fn full_cleaner_plan() -> HoodieCleanerPlan {
        HoodieCleanerPlan {
            earliest_instant_to_retain: Some(HoodieActionInstant {
                timestamp: "20250101000000000".into(),
                action: "commit".into(),
                state: "COMPLETED".into(),
            }),
            policy: "KEEP_LATEST_COMMITS".into(),
            files_to_be_deleted_per_partition: Some(BTreeMap::from([(
                "p".to_string(),
                vec!["a.parquet".to_string()],
            )])),
            version: Some(2),
            file_paths_to_be_deleted_per_partition: Some(BTreeMap::from([(
                "p".to_string(),
                vec![HoodieCleanFileInfo {
                    file_path: Some("file:/t/p/a.parquet".into()),
                    is_bootstrap_base_file: Some(false),
                }],
            )])),
            partitions_to_be_deleted: Some(vec!["q".into()]),
        }
    }

    fn partition(p: &str) -> HoodieCleanPartitionMetadata {
        HoodieCleanPartitionMetadata {
            partition_path: p.into(),
            policy: "KEEP_LATEST_COMMITS".into(),
            delete_path_patterns: vec!["a.parquet".into()],
            success_delete_files: vec!["a.parquet".into()],
            failed_delete_files: vec![],
            is_partition_deleted: Some(false),
        }
    }

    pub(crate) fn full_clean_metadata() -> HoodieCleanMetadata {
        HoodieCleanMetadata {
            policy: "KEEP_LATEST_COMMITS".into(),
            start_clean_time: "20250102000000000".into(),
            time_taken_in_millis: 12,
            total_files_deleted: 1,
            earliest_commit_to_retain: "20250101000000000".into(),
            last_completed_commit_timestamp: "20250101000000001".into(),
            partition_metadata: BTreeMap::from([("p".to_string(), partition("p"))]),
            version: Some(2),
            bootstrap_partition_metadata: Some(BTreeMap::from([("b".to_string(), partition("b"))])),
        }
    }

    #[test]
    fn test_encode_cleaner_plan_round_trips() {
        let m = full_cleaner_plan();
        let back: HoodieCleanerPlan = decode(&encode(&m).unwrap(), "k").unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn test_encode_clean_metadata_round_trips() {
        let m = full_clean_metadata();
        let back: HoodieCleanMetadata = decode(&encode(&m).unwrap(), "k").unwrap();
        assert_eq!(back, m);
        let minimal = HoodieCleanMetadata::default();
        let back: HoodieCleanMetadata = decode(&encode(&minimal).unwrap(), "k").unwrap();
        assert_eq!(back, minimal);
    }
}
