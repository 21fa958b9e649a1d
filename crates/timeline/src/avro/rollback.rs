//! `HoodieRollbackPlan` (content of `T.rollback.requested`) and `HoodieRollbackMetadata`
//! (content of the completed `T_C.rollback`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{AvroRecord, InstantSchema};

/// `HoodieInstantInfo`: an instant named by time and action.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieInstantInfo {
    /// The instant (requested) time.
    pub commit_time: String,
    /// The action name.
    pub action: String,
}

/// `HoodieRollbackRequest`: the files of one file group (or partition) to delete.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieRollbackRequest {
    /// The relative partition path.
    pub partition_path: String,
    /// The file group id, if the request is for one group.
    pub file_id: Option<String>,
    /// The instant of the group's latest base file.
    pub latest_base_instant: Option<String>,
    /// Files to delete (Spark listed absolute paths).
    pub files_to_be_deleted: Vec<String>,
    /// Log files whose blocks to roll back, with sizes (table version 6 and earlier).
    pub log_blocks_to_be_deleted: Option<BTreeMap<String, i64>>,
}

/// `HoodieRollbackPlan`: which instant to roll back and which files to delete.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieRollbackPlan {
    /// The instant to roll back.
    pub instant_to_rollback: Option<HoodieInstantInfo>,
    /// The deletions (Avro field `RollbackRequests`).
    #[serde(rename = "RollbackRequests")]
    pub rollback_requests: Option<Vec<HoodieRollbackRequest>>,
    /// Schema version (default 1).
    pub version: Option<i32>,
}

/// `HoodieRollbackPartitionMetadata`: what a rollback did in one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieRollbackPartitionMetadata {
    /// The relative partition path.
    pub partition_path: String,
    /// Files deleted.
    pub success_delete_files: Vec<String>,
    /// Files that failed to delete.
    pub failed_delete_files: Vec<String>,
    /// Log files that received rollback blocks, with sizes.
    pub rollback_log_files: Option<BTreeMap<String, i64>>,
    /// Log files written by the failed commit, with sizes.
    pub log_files_from_failed_commit: Option<BTreeMap<String, i64>>,
}

/// `HoodieRollbackMetadata`: the result of a completed rollback.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieRollbackMetadata {
    /// The rollback's instant time.
    pub start_rollback_time: String,
    /// Duration in milliseconds.
    pub time_taken_in_millis: i64,
    /// Number of files deleted.
    pub total_files_deleted: i32,
    /// Instant times rolled back (hudi-rs reads these for the MDT valid-instant set).
    pub commits_rollback: Vec<String>,
    /// Per-partition results.
    pub partition_metadata: BTreeMap<String, HoodieRollbackPartitionMetadata>,
    /// Schema version (default 1).
    pub version: Option<i32>,
    /// Instants rolled back, with their actions (default empty).
    pub instants_rollback: Vec<HoodieInstantInfo>,
}

impl AvroRecord for HoodieRollbackPlan {
    const SCHEMA: InstantSchema = InstantSchema::RollbackPlan;
}

impl AvroRecord for HoodieRollbackMetadata {
    const SCHEMA: InstantSchema = InstantSchema::RollbackMetadata;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::avro::{decode, encode};

    pub(crate) fn full_rollback_plan() -> HoodieRollbackPlan {
        HoodieRollbackPlan {
            instant_to_rollback: Some(HoodieInstantInfo {
                commit_time: "20250101000000000".into(),
                action: "deltacommit".into(),
            }),
            rollback_requests: Some(vec![HoodieRollbackRequest {
                partition_path: "p".into(),
                file_id: Some("f".into()),
                latest_base_instant: Some("20241231000000000".into()),
                files_to_be_deleted: vec!["file:/t/p/.f.log.1".into()],
                log_blocks_to_be_deleted: Some(BTreeMap::from([("l".to_string(), 9)])),
            }]),
            version: Some(1),
        }
    }

    pub(crate) fn full_rollback_metadata() -> HoodieRollbackMetadata {
        HoodieRollbackMetadata {
            start_rollback_time: "20250101000000005".into(),
            time_taken_in_millis: 3,
            total_files_deleted: 1,
            commits_rollback: vec!["20250101000000000".into()],
            partition_metadata: BTreeMap::from([(
                "p".to_string(),
                HoodieRollbackPartitionMetadata {
                    partition_path: "p".into(),
                    success_delete_files: vec!["file:/t/p/.f.log.1".into()],
                    failed_delete_files: vec![],
                    rollback_log_files: Some(BTreeMap::new()),
                    log_files_from_failed_commit: Some(BTreeMap::from([("x".to_string(), 1)])),
                },
            )]),
            version: Some(1),
            instants_rollback: vec![HoodieInstantInfo {
                commit_time: "20250101000000000".into(),
                action: "deltacommit".into(),
            }],
        }
    }

    #[test]
    fn test_encode_rollback_plan_round_trips() {
        let m = full_rollback_plan();
        let bytes = encode(&m).unwrap();
        let back: HoodieRollbackPlan = decode(&bytes, "k").unwrap();
        assert_eq!(back, m);
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains("\"RollbackRequests\""),
            "Avro field name kept"
        );
    }

    #[test]
    fn test_encode_rollback_metadata_round_trips() {
        let m = full_rollback_metadata();
        let back: HoodieRollbackMetadata = decode(&encode(&m).unwrap(), "k").unwrap();
        assert_eq!(back, m);
    }
}
