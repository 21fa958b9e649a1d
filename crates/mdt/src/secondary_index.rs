//! The MDT `secondary_index_<name>` partitions and the table's index definitions
//! (`.hoodie/.index_defs/index.json`, spec §1.3, §6.2, §6.3).
//!
//! A secondary index maps a column value to the record keys holding it. Each entry is one MDT
//! record keyed `<escaped value>$<escaped record key>`
//! ([`arbor_format::hfile::mdt_index::secondary_index_key`]; a null value is U+0000) whose
//! payload is only `isDeleted`. Entries merge per file group like the record index's
//! ([`crate::record_index`]): a later record replaces an earlier one, `isDeleted: true` (or a
//! delete block naming the key) removes it.
//!
//! File-group placement (Java 1.1 `MetadataPartitionType.SECONDARY_INDEX`): for index version
//! V2 and later the hash is over the escaped value *and its `$`* (all entries of a value share
//! a file group, so a value lookup reads one group); for V1 over the whole key.

use std::collections::{BTreeMap, BTreeSet};

use arbor_format::hfile::mdt_index::{
    decode_secondary_index_value, escape_secondary_key_part, parse_secondary_index_key,
    secondary_index_file_group, SECONDARY_KEY_SEPARATOR,
};
use arbor_storage::{Storage, StorageExt};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::TableConfig;
use serde::{Deserialize, Serialize};

use crate::error::{MdtError, Result};
use crate::files::{MetadataTable, MDT_BASE};
use crate::record_index::{merge_slice, partition_slices, RawValue};

/// Where Hudi keeps the index definitions, relative to the table base (the default of
/// `hoodie.table.index.defs.path`; a path of the table layout).
pub use arbor_timeline::layout::paths::INDEX_DEFS_PATH;
/// The MDT partition-name prefix (and index-name prefix) of secondary indexes.
pub const SECONDARY_INDEX_PREFIX: &str = "secondary_index_";
/// `indexType` of a secondary index.
pub const INDEX_TYPE_SECONDARY: &str = "secondary_index";
/// `indexType` of the record index.
pub const INDEX_TYPE_RECORD: &str = "record_index";

/// One entry of `index.json` (Java `HoodieIndexDefinition`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexDefinition {
    /// `indexName`: for secondary indexes also the MDT partition
    /// (`secondary_index_merchant_idx`).
    pub index_name: String,
    /// `indexType`: `record_index`, `column_stats`, `secondary_index`, `expression_index`, ...
    pub index_type: String,
    /// `indexFunction` (`identity` for plain secondary indexes; empty for the record index).
    #[serde(default)]
    pub index_function: String,
    /// `sourceFields`: the indexed columns.
    #[serde(default)]
    pub source_fields: Vec<String>,
    /// `indexOptions` (e.g. `isPartitioned` of the record index).
    #[serde(default)]
    pub index_options: BTreeMap<String, String>,
    /// `version` (`V1`, `V2`, ...); `None` when absent.
    #[serde(default)]
    pub version: Option<String>,
}

impl IndexDefinition {
    /// True for `indexType` [`INDEX_TYPE_SECONDARY`].
    pub fn is_secondary(&self) -> bool {
        self.index_type == INDEX_TYPE_SECONDARY
    }

    /// The numeric part of `version` (`V2` -> 2); `None` when absent or malformed.
    pub fn version_number(&self) -> Option<u32> {
        self.version.as_deref()?.strip_prefix('V')?.parse().ok()
    }

    /// The index version in force: `version` when present, else the version Java 1.1 assumes
    /// for the table version (`HoodieIndexVersion.getCurrentVersion`): secondary indexes are V1
    /// on tables of version 8 and below and V2 from version 9 (the v8 fixture's definitions
    /// carry no version and its entries are placed by the V1 hash); other index types are V1.
    pub fn effective_version(&self, table_version: u32) -> u32 {
        self.version_number()
            .unwrap_or(if self.is_secondary() && table_version >= 9 {
                2
            } else {
                1
            })
    }

    /// Whether secondary-index entries are placed by the hash of the escaped value and its
    /// `$` (version V2 and later) rather than of the whole key (V1); see
    /// [`IndexDefinition::effective_version`].
    pub fn hashes_value_only(&self, table_version: u32) -> bool {
        self.effective_version(table_version) >= 2
    }
}

/// The parsed `index.json`: index name -> definition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexDefinitions {
    /// `indexDefinitions`, by index name.
    #[serde(rename = "indexDefinitions", default)]
    pub definitions: BTreeMap<String, IndexDefinition>,
}

impl IndexDefinitions {
    /// Parses `index.json` text; `path` names the file in errors.
    pub fn parse(text: &str, path: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| MdtError::Invalid {
            path: path.to_string(),
            reason: format!("index definitions cannot be parsed: {e}"),
        })
    }

    /// Reads [`INDEX_DEFS_PATH`] from `storage` (rooted at the data table base); `None` when
    /// the file does not exist.
    pub async fn load(storage: &dyn Storage) -> Result<Option<Self>> {
        if !storage.exists(INDEX_DEFS_PATH).await? {
            return Ok(None);
        }
        let (bytes, _) = storage.get(INDEX_DEFS_PATH).await?;
        let text = std::str::from_utf8(&bytes).map_err(|_| MdtError::Invalid {
            path: INDEX_DEFS_PATH.to_string(),
            reason: "index definitions are not UTF-8".to_string(),
        })?;
        Self::parse(text, INDEX_DEFS_PATH).map(Some)
    }

    /// The secondary-index definitions, by index name.
    pub fn secondary_indexes(&self) -> impl Iterator<Item = &IndexDefinition> {
        self.definitions.values().filter(|d| d.is_secondary())
    }

    /// The definition of `name`, given as the full name (`secondary_index_merchant_idx`) or,
    /// for secondary indexes, without the prefix (`merchant_idx`).
    pub fn get(&self, name: &str) -> Option<&IndexDefinition> {
        self.definitions
            .get(name)
            .or_else(|| self.definitions.get(&secondary_index_partition(name)))
    }
}

/// The MDT partition of secondary index `name` (with or without the `secondary_index_`
/// prefix).
pub fn secondary_index_partition(name: &str) -> String {
    if name.starts_with(SECONDARY_INDEX_PREFIX) {
        name.to_string()
    } else {
        format!("{SECONDARY_INDEX_PREFIX}{name}")
    }
}

/// A secondary index's content: value (`None` = null) -> record keys.
pub type SecondaryIndex = BTreeMap<Option<String>, BTreeSet<String>>;

/// Decodes merged values into `out`, skipping deleted entries.
fn collect_live(
    merged: BTreeMap<String, RawValue>,
    path: &str,
    out: &mut SecondaryIndex,
) -> Result<()> {
    for (key, raw) in merged {
        let deleted =
            decode_secondary_index_value(&raw.bytes, &raw.schema, path).map_err(|source| {
                MdtError::Format {
                    path: path.to_string(),
                    source,
                }
            })?;
        if deleted {
            continue;
        }
        let (value, record_key) =
            parse_secondary_index_key(&key).map_err(|source| MdtError::Format {
                path: path.to_string(),
                source,
            })?;
        out.entry(value).or_default().insert(record_key);
    }
    Ok(())
}

/// Every live entry of secondary index `index_name` (with or without the `secondary_index_`
/// prefix), merged across the partition's file groups: value -> record keys. Empty when the
/// MDT has no such partition. `storage` is rooted at the data table base.
pub async fn read_secondary_index(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    index_name: &str,
) -> Result<SecondaryIndex> {
    let partition = secondary_index_partition(index_name);
    let mut out = SecondaryIndex::new();
    for slice in partition_slices(mdt, &partition).await? {
        let merged = merge_slice(storage, mdt, &slice, &|_| true).await?;
        let path = format!("{MDT_BASE}/{partition}/{}", slice.file_id);
        collect_live(merged, &path, &mut out)?;
    }
    Ok(out)
}

/// Like [`read_secondary_index`], but per MDT file group: file id -> the (value, record key)
/// pairs read from it. For checking file-group placement.
pub async fn read_secondary_index_by_file_group(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    index_name: &str,
) -> Result<BTreeMap<String, SecondaryIndex>> {
    let partition = secondary_index_partition(index_name);
    let mut out = BTreeMap::new();
    for slice in partition_slices(mdt, &partition).await? {
        let merged = merge_slice(storage, mdt, &slice, &|_| true).await?;
        let path = format!("{MDT_BASE}/{partition}/{}", slice.file_id);
        let mut group = SecondaryIndex::new();
        collect_live(merged, &path, &mut group)?;
        out.insert(slice.file_id.clone(), group);
    }
    Ok(out)
}

/// The record keys whose indexed column equals `value` (`None` = null) in secondary index
/// `index_name`, sorted. When `index.json` defines the index and its version
/// ([`IndexDefinition::effective_version`]) is V2 or later, only the file group the value
/// hashes to is read; otherwise (V1 spreads a value's entries over all groups, or no
/// definition) every group is read.
pub async fn secondary_lookup(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    index_name: &str,
    value: Option<&str>,
) -> Result<Vec<String>> {
    let partition = secondary_index_partition(index_name);
    let value_only = match IndexDefinitions::load(storage).await? {
        Some(defs) => match defs.get(&partition) {
            Some(def) => {
                let config = TableConfig::load(storage, DEFAULT_META_DIR).await?;
                def.hashes_value_only(config.version().code())
            }
            None => false,
        },
        None => false,
    };
    let mut prefix = escape_secondary_key_part(value);
    prefix.push(SECONDARY_KEY_SEPARATOR);
    let slices = partition_slices(mdt, &partition).await?;
    let chosen: Vec<_> = if value_only {
        let group = secondary_index_file_group(&prefix, slices.len(), true);
        slices.get(group).into_iter().collect()
    } else {
        slices.iter().collect()
    };
    let mut out = SecondaryIndex::new();
    for slice in chosen {
        let keep = |k: &str| k.starts_with(prefix.as_str());
        let merged = merge_slice(storage, mdt, slice, &keep).await?;
        let path = format!("{MDT_BASE}/{partition}/{}", slice.file_id);
        collect_live(merged, &path, &mut out)?;
    }
    Ok(out
        .remove(&value.map(str::to_string))
        .map(|keys| keys.into_iter().collect())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const FIXTURE_JSON: &str = r#"{
      "indexDefinitions" : {
        "record_index" : {
          "indexName" : "record_index", "indexType" : "record_index", "indexFunction" : "",
          "sourceFields" : [ ], "indexOptions" : { "isPartitioned" : "false" }, "version" : "V1"
        },
        "secondary_index_merchant_idx" : {
          "indexName" : "secondary_index_merchant_idx", "indexType" : "secondary_index",
          "indexFunction" : "identity", "sourceFields" : [ "merchant_name" ],
          "indexOptions" : { }, "version" : "V2"
        }
      }
    }"#;

    #[test]
    fn test_index_definitions_parse_fixture_shape() {
        let defs = IndexDefinitions::parse(FIXTURE_JSON, "index.json").unwrap();
        assert_eq!(defs.definitions.len(), 2);
        let si: Vec<_> = defs.secondary_indexes().collect();
        assert_eq!(si.len(), 1);
        assert_eq!(si[0].source_fields, vec!["merchant_name".to_string()]);
        assert!(
            si[0].hashes_value_only(8),
            "an explicit V2 wins over the table version"
        );
        assert_eq!(
            defs.get("merchant_idx"),
            defs.get("secondary_index_merchant_idx")
        );
        let ri = defs.get("record_index").unwrap();
        assert!(!ri.is_secondary());
        assert_eq!(ri.index_options.get("isPartitioned").unwrap(), "false");
        assert_eq!(ri.effective_version(9), 1);
    }

    #[test]
    fn test_effective_version_without_version_follows_table_version() {
        let mut def = IndexDefinitions::parse(FIXTURE_JSON, "index.json")
            .unwrap()
            .get("merchant_idx")
            .unwrap()
            .clone();
        def.version = None;
        assert_eq!(def.effective_version(8), 1);
        assert!(!def.hashes_value_only(8));
        assert_eq!(def.effective_version(9), 2);
        assert!(def.hashes_value_only(9));
    }

    #[test]
    fn test_index_definitions_parse_garbage_names_file() {
        let err = IndexDefinitions::parse("{", "x/index.json").unwrap_err();
        assert!(err.to_string().contains("x/index.json"), "{err}");
    }

    #[test]
    fn test_secondary_index_partition_adds_prefix_once() {
        assert_eq!(secondary_index_partition("a"), "secondary_index_a");
        assert_eq!(
            secondary_index_partition("secondary_index_a"),
            "secondary_index_a"
        );
    }
}
