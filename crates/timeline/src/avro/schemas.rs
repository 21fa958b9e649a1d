//! The Avro record schemas of instant contents, embedded from `crates/timeline/avro/*.json`.
//!
//! The JSON texts are the compact form Hudi (Java) embeds in the header of its instant files, so
//! a file arbor writes carries the same schema text as one Spark wrote.

use std::fmt;
use std::sync::OnceLock;

use apache_avro::Schema;

use crate::error::{Result, TimelineError};

/// One of the Avro record schemas (namespace `org.apache.hudi.avro.model`) stored in instant
/// files. Each names the JSON text arbor writes and the reader schema decoding resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InstantSchema {
    /// `HoodieCommitMetadata`: completed and inflight commit/deltacommit, inflight replacecommit.
    CommitMetadata,
    /// `HoodieReplaceCommitMetadata`: completed replacecommit (incl. clustering results).
    ReplaceCommitMetadata,
    /// `HoodieRequestedReplaceMetadata`: requested replacecommit and clustering.
    RequestedReplaceMetadata,
    /// `HoodieCompactionPlan`: requested compaction and log compaction.
    CompactionPlan,
    /// `HoodieCleanerPlan`: requested (and inflight) clean.
    CleanerPlan,
    /// `HoodieCleanMetadata`: completed clean.
    CleanMetadata,
    /// `HoodieRollbackPlan`: requested rollback.
    RollbackPlan,
    /// `HoodieRollbackMetadata`: completed rollback.
    RollbackMetadata,
    /// `HoodieRestorePlan`: requested restore.
    RestorePlan,
    /// `HoodieRestoreMetadata`: completed restore.
    RestoreMetadata,
    /// `HoodieSavepointMetadata`: completed savepoint.
    SavepointMetadata,
    /// `HoodieIndexPlan`: requested indexing.
    IndexPlan,
    /// `HoodieIndexCommitMetadata`: completed indexing.
    IndexCommitMetadata,
}

const SCHEMA_COUNT: usize = 13;

impl InstantSchema {
    /// Every schema, in declaration order.
    pub const ALL: [InstantSchema; SCHEMA_COUNT] = [
        InstantSchema::CommitMetadata,
        InstantSchema::ReplaceCommitMetadata,
        InstantSchema::RequestedReplaceMetadata,
        InstantSchema::CompactionPlan,
        InstantSchema::CleanerPlan,
        InstantSchema::CleanMetadata,
        InstantSchema::RollbackPlan,
        InstantSchema::RollbackMetadata,
        InstantSchema::RestorePlan,
        InstantSchema::RestoreMetadata,
        InstantSchema::SavepointMetadata,
        InstantSchema::IndexPlan,
        InstantSchema::IndexCommitMetadata,
    ];

    /// The record's simple name, e.g. `HoodieCommitMetadata` (the namespace is always
    /// `org.apache.hudi.avro.model`).
    pub fn record_name(self) -> &'static str {
        match self {
            InstantSchema::CommitMetadata => "HoodieCommitMetadata",
            InstantSchema::ReplaceCommitMetadata => "HoodieReplaceCommitMetadata",
            InstantSchema::RequestedReplaceMetadata => "HoodieRequestedReplaceMetadata",
            InstantSchema::CompactionPlan => "HoodieCompactionPlan",
            InstantSchema::CleanerPlan => "HoodieCleanerPlan",
            InstantSchema::CleanMetadata => "HoodieCleanMetadata",
            InstantSchema::RollbackPlan => "HoodieRollbackPlan",
            InstantSchema::RollbackMetadata => "HoodieRollbackMetadata",
            InstantSchema::RestorePlan => "HoodieRestorePlan",
            InstantSchema::RestoreMetadata => "HoodieRestoreMetadata",
            InstantSchema::SavepointMetadata => "HoodieSavepointMetadata",
            InstantSchema::IndexPlan => "HoodieIndexPlan",
            InstantSchema::IndexCommitMetadata => "HoodieIndexCommitMetadata",
        }
    }

    /// The schema whose record has this simple name, if any.
    pub fn from_record_name(name: &str) -> Option<InstantSchema> {
        InstantSchema::ALL
            .into_iter()
            .find(|s| s.record_name() == name)
    }

    /// The compact schema JSON arbor embeds in the files it writes (no trailing newline).
    pub fn json(self) -> &'static str {
        let text = match self {
            InstantSchema::CommitMetadata => {
                include_str!("../../avro/HoodieCommitMetadata.json")
            }
            InstantSchema::ReplaceCommitMetadata => {
                include_str!("../../avro/HoodieReplaceCommitMetadata.json")
            }
            InstantSchema::RequestedReplaceMetadata => {
                include_str!("../../avro/HoodieRequestedReplaceMetadata.json")
            }
            InstantSchema::CompactionPlan => include_str!("../../avro/HoodieCompactionPlan.json"),
            InstantSchema::CleanerPlan => include_str!("../../avro/HoodieCleanerPlan.json"),
            InstantSchema::CleanMetadata => include_str!("../../avro/HoodieCleanMetadata.json"),
            InstantSchema::RollbackPlan => include_str!("../../avro/HoodieRollbackPlan.json"),
            InstantSchema::RollbackMetadata => {
                include_str!("../../avro/HoodieRollbackMetadata.json")
            }
            InstantSchema::RestorePlan => include_str!("../../avro/HoodieRestorePlan.json"),
            InstantSchema::RestoreMetadata => {
                include_str!("../../avro/HoodieRestoreMetadata.json")
            }
            InstantSchema::SavepointMetadata => {
                include_str!("../../avro/HoodieSavepointMetadata.json")
            }
            InstantSchema::IndexPlan => include_str!("../../avro/HoodieIndexPlan.json"),
            InstantSchema::IndexCommitMetadata => {
                include_str!("../../avro/HoodieIndexCommitMetadata.json")
            }
        };
        text.trim_end()
    }

    /// The parsed schema (parsed once per process). Fails only if the embedded JSON is broken,
    /// which the unit tests rule out.
    pub fn schema(self) -> Result<&'static Schema> {
        static PARSED: [OnceLock<std::result::Result<Schema, String>>; SCHEMA_COUNT] =
            [const { OnceLock::new() }; SCHEMA_COUNT];
        let index = self as usize;
        let cell = PARSED.get(index).ok_or_else(|| TimelineError::Encode {
            what: self.record_name().to_string(),
            reason: "schema index out of range".to_string(),
        })?;
        cell.get_or_init(|| Schema::parse_str(self.json()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|reason| TimelineError::Encode {
                what: self.record_name().to_string(),
                reason: format!("embedded schema does not parse: {reason}"),
            })
    }
}

impl fmt::Display for InstantSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.record_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_schema_every_embedded_schema_parses_with_its_name() {
        for s in InstantSchema::ALL {
            let schema = s.schema().unwrap();
            let name = schema.name().unwrap();
            assert_eq!(name.name(), s.record_name());
            assert_eq!(name.namespace(), Some("org.apache.hudi.avro.model"), "{s}");
            assert_eq!(InstantSchema::from_record_name(s.record_name()), Some(s));
            assert!(!s.json().ends_with('\n'));
        }
        assert_eq!(InstantSchema::from_record_name("HoodieNothing"), None);
    }
}
