//! `HoodieSavepointMetadata`: the content of the completed `T_C.savepoint`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{AvroRecord, InstantSchema};

/// `HoodieSavepointPartitionMetadata`: the files a savepoint protects in one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieSavepointPartitionMetadata {
    /// The relative partition path.
    pub partition_path: String,
    /// File names of the latest file slices as of the savepointed instant.
    pub savepoint_data_file: Vec<String>,
}

/// `HoodieSavepointMetadata`: who savepointed when, and the files protected per partition.
/// The cleaner never deletes a file named in a completed savepoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoodieSavepointMetadata {
    /// The user who created the savepoint.
    pub savepointed_by: String,
    /// When the savepoint was taken, as Java's `System.currentTimeMillis()` (epoch ms).
    pub savepointed_at: i64,
    /// Free-form comment.
    pub comments: String,
    /// Per partition, the protected files.
    pub partition_metadata: BTreeMap<String, HoodieSavepointPartitionMetadata>,
    /// Schema version (default 1).
    pub version: Option<i32>,
}

impl HoodieSavepointMetadata {
    /// Every protected file with its partition path, partitions in key order.
    pub fn files(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.partition_metadata.iter().flat_map(|(p, m)| {
            m.savepoint_data_file
                .iter()
                .map(move |f| (p.as_str(), f.as_str()))
        })
    }
}

impl AvroRecord for HoodieSavepointMetadata {
    const SCHEMA: InstantSchema = InstantSchema::SavepointMetadata;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::avro::{decode, encode};

    pub(crate) fn full_savepoint() -> HoodieSavepointMetadata {
        HoodieSavepointMetadata {
            savepointed_by: "arbor".into(),
            savepointed_at: 1_735_689_600_000,
            comments: "tag v1".into(),
            partition_metadata: BTreeMap::from([(
                "p".to_string(),
                HoodieSavepointPartitionMetadata {
                    partition_path: "p".into(),
                    savepoint_data_file: vec!["a.parquet".into(), "b.parquet".into()],
                },
            )]),
            version: Some(1),
        }
    }

    #[test]
    fn test_encode_savepoint_round_trips() {
        let m = full_savepoint();
        let back: HoodieSavepointMetadata = decode(&encode(&m).unwrap(), "k").unwrap();
        assert_eq!(back, m);
        assert_eq!(back.files().count(), 2);
    }
}
