//! `HoodieRestorePlan` (content of `T.restore.requested`) and `HoodieRestoreMetadata` (content
//! of the completed `T_C.restore`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::rollback::{HoodieInstantInfo, HoodieRollbackMetadata};
use super::{AvroRecord, InstantSchema};

/// `HoodieRestorePlan`: the instants a restore rolls back, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieRestorePlan {
    /// The instants to roll back (default empty).
    pub instants_to_rollback: Vec<HoodieInstantInfo>,
    /// Plan version (default 2).
    pub version: Option<i32>,
    /// The savepoint restored to.
    pub savepoint_to_restore_timestamp: Option<String>,
}

/// `HoodieRestoreMetadata`: the result of a completed restore.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieRestoreMetadata {
    /// The restore's instant time.
    pub start_restore_time: String,
    /// Duration in milliseconds.
    pub time_taken_in_millis: i64,
    /// Instant times rolled back.
    pub instants_to_rollback: Vec<String>,
    /// Per rolled-back instant time, the rollback results.
    pub hoodie_restore_metadata: BTreeMap<String, Vec<Option<HoodieRollbackMetadata>>>,
    /// Schema version (default 1).
    pub version: Option<i32>,
    /// Instants rolled back, with their actions (default empty).
    pub restore_instant_info: Vec<HoodieInstantInfo>,
    /// Free-form metadata.
    pub extra_metadata: Option<BTreeMap<String, String>>,
}

impl AvroRecord for HoodieRestorePlan {
    const SCHEMA: InstantSchema = InstantSchema::RestorePlan;
}

impl AvroRecord for HoodieRestoreMetadata {
    const SCHEMA: InstantSchema = InstantSchema::RestoreMetadata;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::avro::rollback::tests::full_rollback_metadata;
    use crate::avro::{decode, encode};

    fn info(t: &str) -> HoodieInstantInfo {
        HoodieInstantInfo {
            commit_time: t.into(),
            action: "commit".into(),
        }
    }

    pub(crate) fn full_restore_plan() -> HoodieRestorePlan {
        HoodieRestorePlan {
            instants_to_rollback: vec![info("20250103000000000"), info("20250102000000000")],
            version: Some(2),
            savepoint_to_restore_timestamp: Some("20250101000000000".into()),
        }
    }

    pub(crate) fn full_restore_metadata() -> HoodieRestoreMetadata {
        HoodieRestoreMetadata {
            start_restore_time: "20250104000000000".into(),
            time_taken_in_millis: 7,
            instants_to_rollback: vec!["20250103000000000".into()],
            hoodie_restore_metadata: BTreeMap::from([(
                "20250103000000000".to_string(),
                vec![Some(full_rollback_metadata()), None],
            )]),
            version: Some(1),
            restore_instant_info: vec![info("20250103000000000")],
            extra_metadata: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
        }
    }

    #[test]
    fn test_encode_restore_plan_round_trips() {
        let m = full_restore_plan();
        let back: HoodieRestorePlan = decode(&encode(&m).unwrap(), "k").unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn test_encode_restore_metadata_round_trips() {
        let m = full_restore_metadata();
        let back: HoodieRestoreMetadata = decode(&encode(&m).unwrap(), "k").unwrap();
        assert_eq!(back, m);
    }
}
