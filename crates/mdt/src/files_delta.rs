//! [`FilesDelta`]: one data instant's change to the FILES partition, and the FILES records
//! (`__all_partitions__` and one record per data partition) of a full listing or of a delta,
//! laid out as Java's `HoodieMetadataPayload.createPartitionFilesRecord` /
//! `createPartitionListRecord` lay them out.

use std::collections::{BTreeMap, BTreeSet};

use arbor_format::hfile::mdt::{
    FilesEntry, FilesRecord, RECORD_TYPE_ALL_PARTITIONS, RECORD_TYPE_FILES,
};

use crate::files::{FilesListing, ALL_PARTITIONS_KEY, NON_PARTITIONED_KEY};

/// One data instant's change to the FILES partition: files added (with their sizes) and files
/// deleted, per data partition (`""` for a non-partitioned table), and the partitions removed
/// from the table altogether (a clean that removed a deleted partition's directory).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilesDelta {
    /// Data partition -> file name -> size in bytes.
    pub added: BTreeMap<String, BTreeMap<String, u64>>,
    /// Data partition -> deleted file names.
    pub deleted: BTreeMap<String, BTreeSet<String>>,
    /// Partitions to record in `__all_partitions__` even if no file changed in them.
    pub touched: BTreeSet<String>,
    /// Partitions removed from the table: `__all_partitions__` marks them deleted (Java's
    /// `createPartitionListRecord(partitions, true)`), so no reader lists them any more. A
    /// partition named here is never also recorded as live in the same delta.
    pub deleted_partitions: BTreeSet<String>,
}

impl FilesDelta {
    /// Records that `name` (a file name, no directory) of size `size` was added to `partition`.
    pub fn add(&mut self, partition: &str, name: &str, size: u64) {
        self.added
            .entry(partition.to_string())
            .or_default()
            .insert(name.to_string(), size);
    }

    /// Records that `name` was deleted from `partition`.
    pub fn delete(&mut self, partition: &str, name: &str) {
        self.deleted
            .entry(partition.to_string())
            .or_default()
            .insert(name.to_string());
    }

    /// Records that `partition` was removed from the table (see
    /// [`FilesDelta::deleted_partitions`]).
    pub fn delete_partition(&mut self, partition: &str) {
        self.deleted_partitions.insert(partition.to_string());
    }

    /// Every partition whose files the delta changes or that it records as live (partitions
    /// only removed are in [`FilesDelta::deleted_partitions`]).
    pub fn partitions(&self) -> BTreeSet<String> {
        self.added
            .keys()
            .chain(self.deleted.keys())
            .chain(self.touched.iter())
            .cloned()
            .collect()
    }

    /// True when no partition is named.
    pub fn is_empty(&self) -> bool {
        self.partitions().is_empty() && self.deleted_partitions.is_empty()
    }
}

/// The FILES record key of a data partition.
pub(crate) fn record_key(partition: &str) -> &str {
    if partition.is_empty() {
        NON_PARTITIONED_KEY
    } else {
        partition
    }
}

/// `n` as an `i64`, saturating (sizes and counts never reach `i64::MAX`).
pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The FILES records of a full listing (base HFile at initialisation): `__all_partitions__`
/// and one record per partition, keyed by record key.
pub(crate) fn listing_records(listing: &FilesListing) -> BTreeMap<String, FilesRecord> {
    let mut out = BTreeMap::new();
    let mut all = FilesRecord {
        record_type: RECORD_TYPE_ALL_PARTITIONS,
        ..FilesRecord::default()
    };
    for (partition, files) in listing {
        let key = record_key(partition).to_string();
        all.files.insert(
            key.clone(),
            FilesEntry {
                size: 0,
                is_deleted: false,
            },
        );
        let record = FilesRecord {
            record_type: RECORD_TYPE_FILES,
            file_name: None,
            files: files
                .iter()
                .map(|(n, s)| {
                    (
                        n.clone(),
                        FilesEntry {
                            size: to_i64(*s),
                            is_deleted: false,
                        },
                    )
                })
                .collect(),
        };
        out.insert(key, record);
    }
    out.insert(ALL_PARTITIONS_KEY.to_string(), all);
    out
}

/// The FILES records of one delta (an MDT log block): one record per partition whose files
/// change (added files live, deleted ones as tombstones), and `__all_partitions__` naming each
/// of them live and each removed partition deleted (Java's clean: the partition's files record
/// with its deleted files, then the partition list record with the partition deleted).
pub(crate) fn delta_records(delta: &FilesDelta) -> BTreeMap<String, FilesRecord> {
    let mut out = BTreeMap::new();
    let mut all = FilesRecord {
        record_type: RECORD_TYPE_ALL_PARTITIONS,
        ..FilesRecord::default()
    };
    for partition in delta.partitions() {
        let key = record_key(&partition).to_string();
        all.files.insert(
            key.clone(),
            FilesEntry {
                size: 0,
                is_deleted: false,
            },
        );
        let mut files: BTreeMap<String, FilesEntry> = BTreeMap::new();
        if let Some(added) = delta.added.get(&partition) {
            for (n, s) in added {
                files.insert(
                    n.clone(),
                    FilesEntry {
                        size: to_i64(*s),
                        is_deleted: false,
                    },
                );
            }
        }
        if let Some(deleted) = delta.deleted.get(&partition) {
            for n in deleted {
                files.insert(
                    n.clone(),
                    FilesEntry {
                        size: 0,
                        is_deleted: true,
                    },
                );
            }
        }
        out.insert(
            key,
            FilesRecord {
                record_type: RECORD_TYPE_FILES,
                file_name: None,
                files,
            },
        );
    }
    for partition in &delta.deleted_partitions {
        all.files.insert(
            record_key(partition).to_string(),
            FilesEntry {
                size: 0,
                is_deleted: true,
            },
        );
    }
    out.insert(ALL_PARTITIONS_KEY.to_string(), all);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_delta_records_non_partitioned_uses_dot_key() {
        let mut d = FilesDelta::default();
        d.add("", "a.parquet", 10);
        d.delete("", "b.parquet");
        let r = delta_records(&d);
        assert_eq!(
            r.keys().cloned().collect::<Vec<_>>(),
            vec![".".to_string(), ALL_PARTITIONS_KEY.to_string()]
        );
        let files = &r["."].files;
        assert_eq!(files["a.parquet"].size, 10);
        assert!(files["b.parquet"].is_deleted);
        assert!(r[ALL_PARTITIONS_KEY].files.contains_key("."));
    }

    #[test]
    fn test_listing_records_lists_every_partition_in_all_partitions() {
        let mut l = FilesListing::new();
        l.entry("p=1".into()).or_default().insert("f1".into(), 3);
        l.entry("p=2".into()).or_default();
        let r = listing_records(&l);
        let all: Vec<_> = r[ALL_PARTITIONS_KEY].files.keys().cloned().collect();
        assert_eq!(all, vec!["p=1".to_string(), "p=2".to_string()]);
        assert_eq!(r["p=1"].files["f1"].size, 3);
    }

    #[test]
    fn test_delta_records_deleted_partition_is_a_tombstone_in_all_partitions_with_its_files() {
        let mut d = FilesDelta::default();
        d.delete("a/b=1", "f1.parquet");
        d.delete_partition("a/b=1");
        d.add("a/b=2", "f2.parquet", 7);
        assert!(!d.is_empty());
        let r = delta_records(&d);
        let all = &r[ALL_PARTITIONS_KEY].files;
        assert!(all["a/b=1"].is_deleted, "{all:?}");
        assert!(!all["a/b=2"].is_deleted, "{all:?}");
        assert!(r["a/b=1"].files["f1.parquet"].is_deleted);
        assert_eq!(r["a/b=2"].files["f2.parquet"].size, 7);

        let mut only = FilesDelta::default();
        only.delete_partition("p=9");
        assert!(!only.is_empty());
        let r = delta_records(&only);
        assert_eq!(
            r.keys().cloned().collect::<Vec<_>>(),
            vec![ALL_PARTITIONS_KEY.to_string()]
        );
        assert!(r[ALL_PARTITIONS_KEY].files["p=9"].is_deleted);
    }
}
