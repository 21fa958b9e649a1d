//! `HoodieIndexPlan` (content of `T.indexing.requested`) and `HoodieIndexCommitMetadata`
//! (content of the completed `T_C.indexing`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{AvroRecord, InstantSchema};

/// `HoodieIndexPartitionInfo`: one metadata-table partition an index build fills.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieIndexPartitionInfo {
    /// Schema version (default 1).
    pub version: Option<i32>,
    /// The MDT partition, e.g. `secondary_index_merchant_idx`.
    pub metadata_partition_path: Option<String>,
    /// The data-table instant the index is built up to.
    pub index_upto_instant: Option<String>,
    /// Free-form metadata.
    pub extra_metadata: Option<BTreeMap<String, String>>,
}

/// `HoodieIndexPlan`: the partitions an async index build will fill.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieIndexPlan {
    /// Schema version (default 1).
    pub version: Option<i32>,
    /// The partitions to build.
    pub index_partition_infos: Option<Vec<HoodieIndexPartitionInfo>>,
}

/// `HoodieIndexCommitMetadata`: the partitions an index build filled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieIndexCommitMetadata {
    /// Schema version (default 1).
    pub version: Option<i32>,
    /// The `WriteOperationType` name (null in the fixtures).
    pub operation_type: Option<String>,
    /// The partitions built.
    pub index_partition_infos: Option<Vec<HoodieIndexPartitionInfo>>,
}

impl AvroRecord for HoodieIndexPlan {
    const SCHEMA: InstantSchema = InstantSchema::IndexPlan;
}

impl AvroRecord for HoodieIndexCommitMetadata {
    const SCHEMA: InstantSchema = InstantSchema::IndexCommitMetadata;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::avro::{decode, encode};

    fn info() -> HoodieIndexPartitionInfo {
        HoodieIndexPartitionInfo {
            version: Some(1),
            metadata_partition_path: Some("secondary_index_idx".into()),
            index_upto_instant: Some("20250101000000000".into()),
            extra_metadata: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
        }
    }

    pub(crate) fn full_index_plan() -> HoodieIndexPlan {
        HoodieIndexPlan {
            version: Some(1),
            index_partition_infos: Some(vec![info(), HoodieIndexPartitionInfo::default()]),
        }
    }

    pub(crate) fn full_index_commit() -> HoodieIndexCommitMetadata {
        HoodieIndexCommitMetadata {
            version: Some(1),
            operation_type: Some("INDEX".into()),
            index_partition_infos: Some(vec![info()]),
        }
    }

    #[test]
    fn test_encode_index_plan_round_trips() {
        let m = full_index_plan();
        let back: HoodieIndexPlan = decode(&encode(&m).unwrap(), "k").unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn test_encode_index_commit_round_trips() {
        let m = full_index_commit();
        let back: HoodieIndexCommitMetadata = decode(&encode(&m).unwrap(), "k").unwrap();
        assert_eq!(back, m);
    }
}
