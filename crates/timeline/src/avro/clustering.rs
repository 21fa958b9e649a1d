//! `HoodieRequestedReplaceMetadata` and the clustering plan: the content of
//! `T.replacecommit.requested` and `T.clustering.requested`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{AvroRecord, InstantSchema};

/// `HoodieSliceInfo`: one file slice a clustering group rewrites.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieSliceInfo {
    /// The base file (Spark wrote a full URI).
    pub data_file_path: Option<String>,
    /// The log files of the slice.
    pub delta_file_paths: Option<Vec<String>>,
    /// The file group id.
    pub file_id: Option<String>,
    /// The relative partition path.
    pub partition_path: Option<String>,
    /// The bootstrap source file, if any.
    pub bootstrap_file_path: Option<String>,
    /// Schema version (default 1).
    pub version: Option<i32>,
}

/// `HoodieClusteringGroup`: slices rewritten together into `numOutputFileGroups` new groups.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieClusteringGroup {
    /// The input slices.
    pub slices: Option<Vec<HoodieSliceInfo>>,
    /// Planner metrics.
    pub metrics: Option<BTreeMap<String, f64>>,
    /// How many file groups to write (default 1).
    pub num_output_file_groups: Option<i32>,
    /// Free-form metadata.
    pub extra_metadata: Option<BTreeMap<String, String>>,
    /// Schema version (default 1).
    pub version: Option<i32>,
}

/// `HoodieClusteringStrategy`: the execution strategy and its parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieClusteringStrategy {
    /// Java class of the execution strategy.
    pub strategy_class_name: Option<String>,
    /// Strategy parameters.
    pub strategy_params: Option<BTreeMap<String, String>>,
    /// Schema version (default 1).
    pub version: Option<i32>,
}

/// `HoodieClusteringPlan`: the groups to rewrite and how.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieClusteringPlan {
    /// The clustering groups.
    pub input_groups: Option<Vec<HoodieClusteringGroup>>,
    /// The execution strategy.
    pub strategy: Option<HoodieClusteringStrategy>,
    /// Free-form metadata.
    pub extra_metadata: Option<BTreeMap<String, String>>,
    /// Schema version (default 1).
    pub version: Option<i32>,
    /// Whether to keep the `_hoodie_*` meta columns of the input records.
    pub preserve_hoodie_metadata: Option<bool>,
    /// Partitions the planner skipped.
    pub missing_schedule_partitions: Option<Vec<String>>,
}

impl HoodieClusteringPlan {
    /// Every input slice, groups in order.
    pub fn slices(&self) -> impl Iterator<Item = &HoodieSliceInfo> + '_ {
        self.input_groups
            .iter()
            .flatten()
            .flat_map(|g| g.slices.iter().flatten())
    }
}

/// `HoodieRequestedReplaceMetadata`: the requested state of a replace-family instant. For
/// insert overwrite Spark writes all four fields null; for clustering `operationType` is
/// `CLUSTER` and `clusteringPlan` is set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieRequestedReplaceMetadata {
    /// The `WriteOperationType` name.
    pub operation_type: Option<String>,
    /// The clustering plan (clustering only).
    pub clustering_plan: Option<HoodieClusteringPlan>,
    /// Free-form metadata.
    pub extra_metadata: Option<BTreeMap<String, String>>,
    /// Schema version (default 1).
    pub version: Option<i32>,
}

impl AvroRecord for HoodieRequestedReplaceMetadata {
    const SCHEMA: InstantSchema = InstantSchema::RequestedReplaceMetadata;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::avro::{decode, encode};

    pub(crate) fn full_requested_replace() -> HoodieRequestedReplaceMetadata {
        HoodieRequestedReplaceMetadata {
            operation_type: Some("CLUSTER".into()),
            clustering_plan: Some(HoodieClusteringPlan {
                input_groups: Some(vec![HoodieClusteringGroup {
                    slices: Some(vec![HoodieSliceInfo {
                        data_file_path: Some("file:/t/p/a.parquet".into()),
                        delta_file_paths: Some(vec![".a.log.1".into()]),
                        file_id: Some("a".into()),
                        partition_path: Some("p".into()),
                        bootstrap_file_path: Some("".into()),
                        version: Some(1),
                    }]),
                    metrics: Some(BTreeMap::from([("TOTAL_IO_MB".to_string(), 1.5)])),
                    num_output_file_groups: Some(2),
                    extra_metadata: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
                    version: Some(1),
                }]),
                strategy: Some(HoodieClusteringStrategy {
                    strategy_class_name: Some("org.example.S".into()),
                    strategy_params: Some(BTreeMap::new()),
                    version: Some(1),
                }),
                extra_metadata: None,
                version: Some(2),
                preserve_hoodie_metadata: Some(true),
                missing_schedule_partitions: Some(vec!["q".into()]),
            }),
            extra_metadata: Some(BTreeMap::new()),
            version: Some(1),
        }
    }

    #[test]
    fn test_encode_requested_replace_round_trips() {
        let m = full_requested_replace();
        let back: HoodieRequestedReplaceMetadata = decode(&encode(&m).unwrap(), "k").unwrap();
        assert_eq!(back, m);
        assert_eq!(back.clustering_plan.as_ref().unwrap().slices().count(), 1);
        let all_null = HoodieRequestedReplaceMetadata::default();
        let back: HoodieRequestedReplaceMetadata =
            decode(&encode(&all_null).unwrap(), "k").unwrap();
        assert_eq!(back, all_null);
    }
}
