//! `HoodieCompactionPlan`: the content of `T.compaction.requested` and
//! `T.logcompaction.requested`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{AvroRecord, InstantSchema};

/// `HoodieCompactionOperation`: one file slice to compact.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieCompactionOperation {
    /// The instant of the slice's base file.
    pub base_instant_time: Option<String>,
    /// The slice's log file names.
    pub delta_file_paths: Option<Vec<String>>,
    /// The base file name (absent for log-only slices).
    pub data_file_path: Option<String>,
    /// The file group id.
    pub file_id: Option<String>,
    /// The relative partition path.
    pub partition_path: Option<String>,
    /// Planner metrics (`TOTAL_LOG_FILES`, `TOTAL_IO_MB`, ...).
    pub metrics: Option<BTreeMap<String, f64>>,
    /// The bootstrap source file, if any.
    pub bootstrap_file_path: Option<String>,
}

/// `HoodieCompactionStrategy`: the compactor and its parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieCompactionStrategy {
    /// Java class of the execution strategy.
    pub compactor_class_name: Option<String>,
    /// Strategy parameters.
    pub strategy_params: Option<BTreeMap<String, String>>,
    /// Schema version (default 1).
    pub version: Option<i32>,
}

/// `HoodieCompactionPlan`: the slices a compaction (or log compaction) rewrites. The output
/// base files are named with the compaction's instant time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieCompactionPlan {
    /// The slices to compact.
    pub operations: Option<Vec<HoodieCompactionOperation>>,
    /// Free-form metadata.
    pub extra_metadata: Option<BTreeMap<String, String>>,
    /// Schema version (default 1).
    pub version: Option<i32>,
    /// The execution strategy.
    pub strategy: Option<HoodieCompactionStrategy>,
    /// Whether to keep the `_hoodie_*` meta columns (default false).
    pub preserve_hoodie_metadata: Option<bool>,
    /// Partitions the planner skipped.
    pub missing_schedule_partitions: Option<Vec<String>>,
}

impl AvroRecord for HoodieCompactionPlan {
    const SCHEMA: InstantSchema = InstantSchema::CompactionPlan;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::avro::{decode, encode};

    pub(crate) fn full_compaction_plan() -> HoodieCompactionPlan {
        HoodieCompactionPlan {
            operations: Some(vec![
                HoodieCompactionOperation {
                    base_instant_time: Some("20250101000000000".into()),
                    delta_file_paths: Some(vec![".f.log.1_0-1-1".into()]),
                    data_file_path: Some("f_0-1-1_20250101000000000.parquet".into()),
                    file_id: Some("f".into()),
                    partition_path: Some("p".into()),
                    metrics: Some(BTreeMap::from([
                        ("TOTAL_IO_MB".to_string(), 0.25),
                        ("TOTAL_LOG_FILES".to_string(), 1.0),
                    ])),
                    bootstrap_file_path: None,
                },
                HoodieCompactionOperation::default(),
            ]),
            extra_metadata: Some(BTreeMap::from([("a".to_string(), "b".to_string())])),
            version: Some(2),
            strategy: Some(HoodieCompactionStrategy {
                compactor_class_name: Some("C".into()),
                strategy_params: Some(BTreeMap::from([("x".to_string(), "y".to_string())])),
                version: Some(1),
            }),
            preserve_hoodie_metadata: Some(false),
            missing_schedule_partitions: Some(vec![]),
        }
    }

    #[test]
    fn test_encode_compaction_plan_round_trips() {
        let m = full_compaction_plan();
        let back: HoodieCompactionPlan = decode(&encode(&m).unwrap(), "k").unwrap();
        assert_eq!(back, m);
    }
}
