//! What one write instant changed, as the optimistic-concurrency check compares it: the file
//! groups it wrote or replaced and, for a `DELETE_PARTITION` replacecommit, the partitions it
//! deletes.
//!
//! Two instants conflict (`commit::find_conflict`) when they share a file group (as in Java
//! Hudi's `SimpleConcurrentFileWritesConflictResolutionStrategy`) **or** when one deletes a
//! partition (`DELETE_PARTITION`, e.g. a TTL run or `delete-partition`) that the other wrote
//! to or replaced file groups in, new file groups included. Java compares file ids only, so
//! an insert's new file groups in a partition a concurrent delete removes survive the delete;
//! here one of the two fails instead, whichever commits first.
//!
//! Compactions (and log compactions) are not candidates: they write new slices of existing
//! file groups only, which a delete of their partition replaces whole (every slice of a
//! replaced file group is hidden), so nothing of theirs survives a delete and no delete loses
//! what they wrote. Clustering creates new file groups and so counts as a write.

use std::collections::{BTreeMap, BTreeSet};

use arbor_timeline::avro::{InstantContent, WriteOperationType};

/// The changes of one write instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The file groups written (new ones included) or replaced, as `(partition, fileId)`.
    pub file_groups: BTreeSet<(String, String)>,
    /// The partitions a `DELETE_PARTITION` deletes (every partition its
    /// `partitionToReplaceFileIds` names, with or without file ids); empty for any other
    /// operation.
    pub deleted_partitions: BTreeSet<String>,
}

impl Changes {
    /// The changes of a write about to commit: `touched` are its written and replaced file
    /// groups; a `DELETE_PARTITION` (`operation`) deletes the partitions `replaced` names.
    pub fn of_prepared(
        operation: WriteOperationType,
        touched: &BTreeSet<(String, String)>,
        replaced: Option<&BTreeMap<String, Vec<String>>>,
    ) -> Changes {
        let mut deleted_partitions: BTreeSet<String> = BTreeSet::new();
        if operation == WriteOperationType::DeletePartition {
            deleted_partitions.extend(replaced.into_iter().flat_map(|r| r.keys().cloned()));
            deleted_partitions.extend(touched.iter().map(|(p, _)| p.clone()));
        }
        Changes {
            file_groups: touched.clone(),
            deleted_partitions,
        }
    }

    /// The changes a completed instant's content records: the file ids of its write stats and
    /// replaced file ids; for a replacecommit whose `operationType` is `DELETE_PARTITION`, the
    /// partitions of its `partitionToReplaceFileIds`. `None` for a compaction (`compacted`
    /// set) and for content that is not a commit or replacecommit.
    pub fn of_completed(content: &InstantContent) -> Option<Changes> {
        let mut c = Changes::default();
        match content {
            InstantContent::Commit(m) => {
                if m.is_compacted() {
                    return None;
                }
                for (p, s) in m.write_stats() {
                    if let Some(f) = &s.file_id {
                        c.file_groups.insert((p.to_string(), f.clone()));
                    }
                }
            }
            InstantContent::ReplaceCommit(m) => {
                for (p, s) in m.write_stats() {
                    if let Some(f) = &s.file_id {
                        c.file_groups.insert((p.to_string(), f.clone()));
                    }
                }
                for (p, f) in m.replaced_file_ids() {
                    c.file_groups.insert((p.to_string(), f.to_string()));
                }
                if m.operation_type() == Some(WriteOperationType::DeletePartition) {
                    c.deleted_partitions.extend(
                        m.partition_to_replace_file_ids
                            .iter()
                            .flat_map(|r| r.keys().cloned()),
                    );
                }
            }
            _ => return None,
        }
        Some(c)
    }

    /// The partitions this instant wrote a file group in or replaced one in.
    fn written_partitions(&self) -> BTreeSet<&str> {
        self.file_groups.iter().map(|(p, _)| p.as_str()).collect()
    }

    /// The file groups both changed, as `(partition, fileId)`, sorted.
    pub fn shared_file_groups(&self, other: &Changes) -> Vec<(String, String)> {
        self.file_groups
            .intersection(&other.file_groups)
            .cloned()
            .collect()
    }

    /// The partitions one of the two deletes and the other wrote to or replaced file groups
    /// in, sorted. Empty when neither deletes partitions, so ordinary writes never conflict
    /// here.
    pub fn shared_deleted_partitions(&self, other: &Changes) -> Vec<String> {
        let ours = self.written_partitions();
        let theirs = other.written_partitions();
        let mut shared: BTreeSet<String> = self
            .deleted_partitions
            .iter()
            .filter(|p| theirs.contains(p.as_str()))
            .cloned()
            .collect();
        shared.extend(
            other
                .deleted_partitions
                .iter()
                .filter(|p| ours.contains(p.as_str()))
                .cloned(),
        );
        shared.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use arbor_timeline::avro::{
        HoodieCommitMetadata, HoodieReplaceCommitMetadata, HoodieWriteStat,
    };

    use super::*;

    fn groups(pairs: &[(&str, &str)]) -> BTreeSet<(String, String)> {
        pairs
            .iter()
            .map(|(p, f)| (p.to_string(), f.to_string()))
            .collect()
    }

    fn insert_into(p: &str, f: &str) -> Changes {
        Changes::of_prepared(WriteOperationType::Insert, &groups(&[(p, f)]), None)
    }

    fn delete_of(replaced: &[(&str, &[&str])]) -> Changes {
        let map: BTreeMap<String, Vec<String>> = replaced
            .iter()
            .map(|(p, ids)| (p.to_string(), ids.iter().map(|s| s.to_string()).collect()))
            .collect();
        let touched: BTreeSet<(String, String)> = map
            .iter()
            .flat_map(|(p, ids)| ids.iter().map(move |f| (p.clone(), f.clone())))
            .collect();
        Changes::of_prepared(WriteOperationType::DeletePartition, &touched, Some(&map))
    }

    #[test]
    fn test_new_file_group_in_deleted_partition_conflicts_both_ways() {
        let write = insert_into("p", "new");
        let delete = delete_of(&[("p", &["old"])]);
        assert!(write.shared_file_groups(&delete).is_empty());
        assert_eq!(write.shared_deleted_partitions(&delete), vec!["p"]);
        assert_eq!(delete.shared_deleted_partitions(&write), vec!["p"]);
    }

    #[test]
    fn test_other_partition_and_ordinary_writes_do_not_conflict() {
        let delete = delete_of(&[("p", &["old"])]);
        assert!(insert_into("q", "new")
            .shared_deleted_partitions(&delete)
            .is_empty());
        assert!(insert_into("p", "a")
            .shared_deleted_partitions(&insert_into("p", "b"))
            .is_empty());
        let upsert = Changes::of_prepared(
            WriteOperationType::Upsert,
            &groups(&[("p", "old")]),
            Some(&BTreeMap::new()),
        );
        assert!(upsert.deleted_partitions.is_empty());
    }

    #[test]
    fn test_completed_delete_partition_names_partitions_without_file_ids() {
        let mut m = HoodieReplaceCommitMetadata {
            partition_to_replace_file_ids: Some(BTreeMap::from([
                ("p".to_string(), vec!["f1".to_string()]),
                ("empty".to_string(), vec![]),
            ])),
            ..HoodieReplaceCommitMetadata::default()
        };
        m.set_operation_type(WriteOperationType::DeletePartition);
        let c = Changes::of_completed(&InstantContent::ReplaceCommit(Box::new(m.clone()))).unwrap();
        assert_eq!(
            c.deleted_partitions,
            BTreeSet::from(["p".to_string(), "empty".to_string()])
        );
        assert_eq!(
            insert_into("empty", "new").shared_deleted_partitions(&c),
            vec!["empty"]
        );
        // The same metadata as an insert overwrite deletes no partition.
        m.set_operation_type(WriteOperationType::InsertOverwrite);
        let c = Changes::of_completed(&InstantContent::ReplaceCommit(Box::new(m))).unwrap();
        assert!(c.deleted_partitions.is_empty());
        assert_eq!(c.file_groups, groups(&[("p", "f1")]));
    }

    #[test]
    fn test_compaction_is_not_a_candidate() {
        let mut m = HoodieCommitMetadata {
            compacted: Some(true),
            ..HoodieCommitMetadata::default()
        };
        m.add_write_stat(
            "p",
            HoodieWriteStat {
                file_id: Some("f".into()),
                ..HoodieWriteStat::default()
            },
        );
        assert!(Changes::of_completed(&InstantContent::Commit(Box::new(m.clone()))).is_none());
        m.compacted = Some(false);
        let c = Changes::of_completed(&InstantContent::Commit(Box::new(m))).unwrap();
        assert_eq!(c.file_groups, groups(&[("p", "f")]));
    }
}
