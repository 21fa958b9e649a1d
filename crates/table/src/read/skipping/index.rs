//! File-group pruning by the metadata table's record index and secondary indexes: the file
//! groups that may hold a row matching the filters, when an index can say.
//!
//! Sound by construction: the record index maps every live record key of the table to its one
//! file group, so a key-equality filter can only match rows of the groups its keys map to (a
//! key the index lacks matches nothing); a secondary index maps every live value of its column
//! to the record keys holding it, and the record index places those keys. The metadata table
//! is opened with the plan's own data timeline (see the parent module). Indexes are used
//! only when `hoodie.table.metadata.partitions` lists them as complete, never for a
//! partitioned record index (keys unique per partition only), and only when the timeline shows
//! the keys unique (see `unique_keys`).

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_format::meta;
use arbor_mdt::record_index::RECORD_INDEX_PARTITION;
use arbor_mdt::secondary_index::secondary_index_partition;
use arbor_mdt::{lookup_record_index, secondary_lookup, IndexDefinitions, MetadataTable};
use arbor_storage::Storage;
use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::TableConfig;
use arrow::datatypes::SchemaRef;

use super::keys::{equality_values, wanted_keys, MAX_LOOKUP_KEYS};
use super::unique_keys::duplicate_risk;
use crate::error::Result;
use crate::read::filter::compiled::Compiled;
use crate::read::filter::value::{Kind, Value};

/// Most values of one filter looked up in a secondary index: each lookup reads at least one
/// of the index's file groups, so a longer `IN` list would read the index over and over for
/// a scan it may not save; the index is not used for it.
const MAX_SECONDARY_LOOKUPS: usize = 8;

/// A data file group: (partition path, file id).
pub(crate) type GroupId = (String, String);

/// The file groups the indexes allow (`None`: that index did not apply), and why an index that
/// could have applied was not used.
#[derive(Debug, Default)]
pub(crate) struct IndexPruning {
    /// Groups holding the keys the filters pin (record index).
    pub(crate) by_record_index: Option<BTreeSet<GroupId>>,
    /// Groups holding the rows whose indexed column equals a filter's value.
    pub(crate) by_secondary_index: Option<BTreeSet<GroupId>>,
    pub(crate) notes: Vec<String>,
}

/// Looks the filters up in the record index and the secondary indexes of the table.
pub(crate) async fn prune_by_indexes(
    storage: &Arc<dyn Storage>,
    mdt: &MetadataTable,
    history: &TimelineHistory,
    config: &TableConfig,
    schema: &SchemaRef,
    filters: &[Compiled],
) -> Result<IndexPruning> {
    let mut out = IndexPruning::default();
    let keys = wanted_keys(config, schema, filters);
    let secondary: Vec<&Compiled> = filters
        .iter()
        .filter(|f| {
            f.kind == Kind::Str && f.name != meta::RECORD_KEY && equality_values(f).is_some()
        })
        .collect();
    if keys.is_none() && secondary.is_empty() {
        return Ok(out);
    }
    let partitions = config.metadata_partitions();
    let has_record_index = partitions.iter().any(|p| p == RECORD_INDEX_PARTITION);
    let defs = IndexDefinitions::load(storage.as_ref()).await?;
    let indexed: Vec<(&Compiled, String)> = secondary
        .into_iter()
        .filter_map(|f| {
            let def = defs.as_ref()?.secondary_indexes().find(|d| {
                d.source_fields.as_slice() == [f.name.clone()]
                    && (d.index_function.is_empty() || d.index_function == "identity")
                    && partitions.contains(&secondary_index_partition(&d.index_name))
            })?;
            Some((f, secondary_index_partition(&def.index_name)))
        })
        .collect();
    if keys.is_none() && indexed.is_empty() {
        return Ok(out);
    }
    if !has_record_index {
        out.notes.push(
            "the metadata table has no record_index partition: key and secondary-index \
             lookups cannot place records in files"
                .into(),
        );
        return Ok(out);
    }
    let partitioned = defs
        .as_ref()
        .and_then(|d| d.get(RECORD_INDEX_PARTITION))
        .and_then(|d| d.index_options.get("isPartitioned"))
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if partitioned {
        out.notes
            .push("the record index is partitioned (keys unique per partition): not used".into());
        return Ok(out);
    }
    if let Some(why) = duplicate_risk(history).await {
        out.notes.push(format!(
            "record and secondary indexes not used: keys may be duplicated ({why})"
        ));
        return Ok(out);
    }
    if let Some(keys) = keys {
        if keys.len() > MAX_LOOKUP_KEYS {
            out.notes.push(format!(
                "{} record keys to look up (more than {MAX_LOOKUP_KEYS}): record index not used",
                keys.len()
            ));
        } else {
            let wanted: Vec<&str> = keys.iter().map(String::as_str).collect();
            out.by_record_index = Some(locate(storage, mdt, &wanted).await?);
        }
    }
    for (f, partition) in indexed {
        let Some(values) = equality_values(f) else {
            continue;
        };
        if values.len() > MAX_SECONDARY_LOOKUPS {
            out.notes.push(format!(
                "{partition}: {} values to look up (more than {MAX_SECONDARY_LOOKUPS}): not used",
                values.len()
            ));
            continue;
        }
        let mut record_keys = BTreeSet::new();
        for v in values {
            if let Value::Str(s) = v {
                record_keys
                    .extend(secondary_lookup(storage.as_ref(), mdt, &partition, Some(s)).await?);
            }
        }
        if record_keys.len() > MAX_LOOKUP_KEYS {
            out.notes.push(format!(
                "{partition}: {} matching record keys (more than {MAX_LOOKUP_KEYS}): not used",
                record_keys.len()
            ));
            continue;
        }
        let wanted: Vec<&str> = record_keys.iter().map(String::as_str).collect();
        let groups = locate(storage, mdt, &wanted).await?;
        out.by_secondary_index = Some(match out.by_secondary_index.take() {
            None => groups,
            Some(prev) => prev.intersection(&groups).cloned().collect(),
        });
    }
    Ok(out)
}

/// The file groups the record index places `keys` in (absent keys place nothing).
async fn locate(
    storage: &Arc<dyn Storage>,
    mdt: &MetadataTable,
    keys: &[&str],
) -> Result<BTreeSet<GroupId>> {
    if keys.is_empty() {
        return Ok(BTreeSet::new());
    }
    let found = lookup_record_index(storage.as_ref(), mdt, keys).await?;
    Ok(found
        .into_values()
        .map(|e| (e.location.partition, e.location.file_id))
        .collect())
}
