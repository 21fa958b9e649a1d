//! Writing `secondary_index_<name>` partitions: their initialisation from the table's (value,
//! record key) pairs, the per-instant changes recorded as log files of the same MDT
//! deltacommit that records the instant's FILES change ([`crate::MdtWriter::commit`]), and the
//! index definition in `.hoodie/.index_defs/index.json`.
//!
//! Layout (as Java writes it, spec §6.2): `secondary_index_<name>/` holds `n` file groups
//! `secondary-index-<name with _ as ->-0000-0` ... ; an entry `<escaped value>$<escaped key>`
//! lives in group [`secondary_index_file_group`] (index version V1, which arbor writes for
//! table version 8: the hash of the whole MDT key; V2, which it writes for table version 9 as
//! Hudi 1.1 does: the hash of the escaped value and its `$`). Initialisation writes one base HFile
//! per group under an MDT deltacommit whose time has the 14-zero prefix of initialisation
//! instants (the next one free: FILES uses `00000000000000000`, the record index
//! `00000000000000001`). A data instant `T` writes, for each group it touches,
//! `.secondary-index-<name>-000i-0_T.log.1_0-0-1` holding one HFILE_DATA block: added entries
//! with `isDeleted: false`, removed ones with `isDeleted: true`.

use std::collections::{BTreeMap, BTreeSet};

use arbor_format::hfile::mdt::METADATA_RECORD_SCHEMA_JSON;
use arbor_format::hfile::mdt_index::{
    encode_secondary_index_value, secondary_index_file_group, secondary_index_key,
};
use arbor_format::hfile::{HFileWriter, HFileWriterOptions};
use arbor_format::log::block::BlockMetadata;
use arbor_format::log::writer::encode_block;
use arbor_format::log::{BlockType, HeaderKey};
use arbor_timeline::avro::HoodieWriteStat;
use arbor_timeline::config::TableVersion;
use arbor_timeline::InstantTime;
use bytes::Bytes;

use arbor_storage::Storage;

use crate::error::{MdtError, Result};
use crate::secondary_index::{
    secondary_index_partition, IndexDefinition, IndexDefinitions, INDEX_DEFS_PATH,
    INDEX_TYPE_SECONDARY, SECONDARY_INDEX_PREFIX,
};

/// Java's default number of secondary-index file groups.
pub const DEFAULT_SECONDARY_INDEX_GROUPS: usize = 10;

/// The index version arbor writes for the secondary indexes of table version 8.
pub const SECONDARY_INDEX_VERSION: &str = "V1";

/// The index version arbor writes for the secondary indexes of table version 9 (Java 1.1's
/// `HoodieIndexVersion` for secondary indexes of that version).
pub const SECONDARY_INDEX_VERSION_V9: &str = "V2";

/// The secondary-index version arbor writes for a table of version `version`: V1 up to
/// version 8, V2 from version 9.
pub fn secondary_index_version_for(version: TableVersion) -> &'static str {
    if version >= TableVersion::Nine {
        SECONDARY_INDEX_VERSION_V9
    } else {
        SECONDARY_INDEX_VERSION
    }
}

/// The write token of MDT files written by arbor.
const TOKEN: &str = "0-0-1";

/// A (value, record key) entry of a secondary index; a `None` value is a null.
pub type SecondaryEntry = (Option<String>, String);

/// One data instant's change to one secondary index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecondaryIndexDelta {
    /// Entries that now exist.
    pub added: BTreeSet<SecondaryEntry>,
    /// Entries that no longer exist. An entry in both sets is added (its removal is dropped).
    pub removed: BTreeSet<SecondaryEntry>,
}

impl SecondaryIndexDelta {
    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }

    /// Drops entries both added and removed (a record whose value did not change).
    pub fn normalize(&mut self) {
        let both: Vec<SecondaryEntry> = self.added.intersection(&self.removed).cloned().collect();
        for e in both {
            self.added.remove(&e);
            self.removed.remove(&e);
        }
    }
}

/// The changes of one instant to every secondary index the table has: MDT partition
/// (`secondary_index_<name>`) -> change. A write lists every index it computed a change for
/// (with an empty change when nothing changed).
pub type SecondaryIndexDeltas = BTreeMap<String, SecondaryIndexDelta>;

/// The file-id prefix of the groups of MDT partition `partition` (`secondary_index_rider_idx`
/// -> `secondary-index-rider-idx`).
pub fn secondary_index_file_prefix(partition: &str) -> String {
    secondary_index_partition(partition).replace('_', "-")
}

/// The id of file group `i` of MDT partition `partition` (`secondary-index-rider-idx-0003-0`).
pub fn secondary_index_file_id(partition: &str, i: usize) -> String {
    format!("{}-{i:04}-0", secondary_index_file_prefix(partition))
}

/// The `index.json` definition of a new secondary index `name` (with or without the prefix) on
/// `column` of a table of version `table_version` (Java `HoodieIndexDefinition`: function
/// `identity`, no options, version [`secondary_index_version_for`] the table's version).
pub fn secondary_index_definition(
    name: &str,
    column: &str,
    table_version: TableVersion,
) -> IndexDefinition {
    IndexDefinition {
        index_name: secondary_index_partition(name),
        index_type: INDEX_TYPE_SECONDARY.to_string(),
        index_function: "identity".to_string(),
        source_fields: vec![column.to_string()],
        index_options: BTreeMap::new(),
        version: Some(secondary_index_version_for(table_version).to_string()),
    }
}

/// Adds (or replaces) `def` in [`INDEX_DEFS_PATH`] (created when absent), keeping every
/// other definition. Written as pretty JSON in the shape of Java's file (spec §1.3).
pub async fn save_index_definition(storage: &dyn Storage, def: &IndexDefinition) -> Result<()> {
    let mut defs = IndexDefinitions::load(storage).await?.unwrap_or_default();
    defs.definitions.insert(def.index_name.clone(), def.clone());
    let text = serde_json::to_string_pretty(&defs).map_err(|e| MdtError::Invalid {
        path: INDEX_DEFS_PATH.to_string(),
        reason: format!("index definitions cannot be encoded: {e}"),
    })?;
    storage.put(INDEX_DEFS_PATH, Bytes::from(text)).await?;
    Ok(())
}

/// True when `partition` is a secondary-index partition.
pub fn is_secondary_index_partition(partition: &str) -> bool {
    partition.starts_with(SECONDARY_INDEX_PREFIX)
}

fn fmt_err(path: &str) -> impl Fn(arbor_format::FormatError) -> MdtError + '_ {
    move |source| MdtError::Format {
        path: path.to_string(),
        source,
    }
}

/// An HFile of secondary-index entries: MDT key -> isDeleted (sorted by key).
fn encode_entries(entries: &BTreeMap<String, bool>, path: &str) -> Result<Bytes> {
    let mut w = HFileWriter::new(HFileWriterOptions::default());
    w.set_file_info("schema", METADATA_RECORD_SCHEMA_JSON.as_bytes().to_vec());
    for (key, deleted) in entries {
        let value = encode_secondary_index_value(*deleted).map_err(fmt_err(path))?;
        w.append(key.as_bytes(), &value).map_err(fmt_err(path))?;
    }
    w.finish().map_err(fmt_err(path))
}

/// Splits `entries` (MDT key -> isDeleted) over `groups` groups.
fn split(
    entries: impl IntoIterator<Item = (String, bool)>,
    groups: usize,
    hash_value_only: bool,
) -> Vec<BTreeMap<String, bool>> {
    let mut out = vec![BTreeMap::new(); groups];
    for (key, deleted) in entries {
        let g = secondary_index_file_group(&key, groups, hash_value_only);
        if let Some(m) = out.get_mut(g) {
            m.insert(key, deleted);
        }
    }
    out
}

/// The base files of a new secondary index in MDT partition `partition` over `entries` with
/// `groups` file groups, initialised at MDT instant `init`: (relative path
/// `<partition>/<name>`, bytes, entry count), one per group (empty groups included).
pub fn initial_files(
    partition: &str,
    entries: &BTreeSet<SecondaryEntry>,
    groups: usize,
    hash_value_only: bool,
    init: &InstantTime,
) -> Result<Vec<(String, Bytes, usize)>> {
    let groups = groups.max(1);
    let keyed = entries
        .iter()
        .map(|(v, k)| (secondary_index_key(v.as_deref(), k), false));
    let mut out = Vec::with_capacity(groups);
    for (i, part) in split(keyed, groups, hash_value_only).iter().enumerate() {
        let rel = format!(
            "{partition}/{}_{TOKEN}_{init}.hfile",
            secondary_index_file_id(partition, i)
        );
        let bytes = encode_entries(part, &rel)?;
        out.push((rel, bytes, part.len()));
    }
    Ok(out)
}

/// The log files of one instant's change to the secondary index in MDT partition `partition`
/// over `groups` file groups: (relative path, bytes, write stat) per touched group.
/// `base_instant` is the instant of the groups' base files (the stat's `prevCommit`).
pub fn delta_files(
    partition: &str,
    time: &InstantTime,
    delta: &SecondaryIndexDelta,
    groups: usize,
    hash_value_only: bool,
    base_instant: &str,
) -> Result<Vec<(String, Bytes, HoodieWriteStat)>> {
    let groups = groups.max(1);
    let removed = delta
        .removed
        .iter()
        .filter(|e| !delta.added.contains(*e))
        .map(|(v, k)| (secondary_index_key(v.as_deref(), k), true));
    let added = delta
        .added
        .iter()
        .map(|(v, k)| (secondary_index_key(v.as_deref(), k), false));
    let mut out = Vec::new();
    for (i, part) in split(removed.chain(added), groups, hash_value_only)
        .iter()
        .enumerate()
    {
        if part.is_empty() {
            continue;
        }
        let file_id = secondary_index_file_id(partition, i);
        let name = format!(".{file_id}_{time}.log.1_{TOKEN}");
        let rel = format!("{partition}/{name}");
        let hfile = encode_entries(part, &rel)?;
        let mut header = BlockMetadata::new();
        header.insert(HeaderKey::InstantTime, time.to_string());
        header.insert(HeaderKey::Schema, METADATA_RECORD_SCHEMA_JSON.to_string());
        let block = encode_block(BlockType::HfileData, &header, &hfile, &BlockMetadata::new())
            .map_err(fmt_err(&rel))?;
        let size = i64::try_from(block.len()).unwrap_or(i64::MAX);
        let deletes = part.values().filter(|d| **d).count();
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let stat = HoodieWriteStat {
            file_id: Some(file_id),
            path: Some(rel.clone()),
            prev_commit: Some(base_instant.to_string()),
            num_writes: Some(count(part.len())),
            num_update_writes: Some(count(part.len() - deletes)),
            num_deletes: Some(count(deletes)),
            total_write_bytes: Some(size),
            file_size_in_bytes: Some(size),
            partition_path: Some(partition.to_string()),
            log_version: Some(1),
            log_offset: Some(0),
            base_file: Some(String::new()),
            log_files: Some(vec![name]),
            total_log_blocks: Some(1),
            ..HoodieWriteStat::default()
        };
        out.push((rel, block, stat));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn e(v: Option<&str>, k: &str) -> SecondaryEntry {
        (v.map(str::to_string), k.to_string())
    }

    #[test]
    fn test_secondary_index_file_id_replaces_underscores() {
        assert_eq!(
            secondary_index_file_id("rider_idx", 3),
            "secondary-index-rider-idx-0003-0"
        );
        assert_eq!(
            secondary_index_file_id("secondary_index_rider_idx", 0),
            "secondary-index-rider-idx-0000-0"
        );
    }

    #[test]
    fn test_initial_files_one_per_group_every_entry_once() {
        let entries: BTreeSet<_> = (0..40).map(|i| e(Some("v"), &format!("k{i}"))).collect();
        let init = InstantTime::parse("00000000000000002").unwrap();
        let files = initial_files("secondary_index_a", &entries, 4, false, &init).unwrap();
        assert_eq!(files.len(), 4);
        assert_eq!(files.iter().map(|f| f.2).sum::<usize>(), 40);
        assert_eq!(
            files[1].0,
            "secondary_index_a/secondary-index-a-0001-0_0-0-1_00000000000000002.hfile"
        );
        assert!(
            files.iter().filter(|f| f.2 > 0).count() > 1,
            "V1 spreads one value's entries"
        );
    }

    #[test]
    fn test_delta_normalize_drops_unchanged_entries() {
        let mut d = SecondaryIndexDelta::default();
        d.added.insert(e(Some("a"), "k1"));
        d.removed.insert(e(Some("a"), "k1"));
        d.removed.insert(e(None, "k2"));
        d.normalize();
        assert!(d.added.is_empty());
        assert_eq!(d.removed.len(), 1);
    }

    #[test]
    fn test_delta_files_counts_removed_as_deletes() {
        let mut d = SecondaryIndexDelta::default();
        d.added.insert(e(Some("a"), "k1"));
        d.removed.insert(e(Some("b"), "k1"));
        let t = InstantTime::parse("20260101000000000").unwrap();
        let files =
            delta_files("secondary_index_x", &t, &d, 1, false, "00000000000000002").unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].2.num_deletes, Some(1));
        assert_eq!(files[0].2.num_writes, Some(2));
        assert!(files[0]
            .0
            .starts_with("secondary_index_x/.secondary-index-x-0000-0_20260101000000000.log.1_"));
    }
}
