//! The MDT `column_stats` and `partition_stats` partitions (spec §6.2, §6.3): per data file
//! (type 3) and per data partition (type 6) statistics of the indexed columns.
//!
//! Each file group's records merge as Java merges them (`HoodieMetadataPayload` with
//! `HoodieTableMetadataUtil.mergeColumnStatsRecords`): first the valid log blocks in log-file
//! and block order, a later record of a key merged into the earlier one ([`ColumnStatsRecord::merge`]:
//! a tombstone or tight bound replaces, otherwise ranges widen and counts add up) and a
//! `DELETE` block's key dropping it; then the base HFile's record merged with the result.
//! Entries whose merged record is a tombstone (`isDeleted`) are left out.

use std::collections::BTreeMap;

use arbor_format::hfile::mdt_column_stats::{
    column_stats_key, decode_column_stats_value, md5_id, partition_identifier, partition_stats_key,
    xxh64_id, ColumnStatsRecord, RECORD_TYPE_COLUMN_STATS, RECORD_TYPE_PARTITION_STATS,
};
use arbor_storage::Storage;

use crate::error::{MdtError, Result};
use crate::files::{MetadataTable, MDT_BASE};
use crate::record_index::{partition_slices, visit_base, visit_logs, RawValue, SliceOp};

pub use arbor_format::hfile::mdt_column_stats::{StatValue, ValueTypeInfo};

/// The MDT partition of per-file column statistics.
pub const COLUMN_STATS_PARTITION: &str = "column_stats";
/// The MDT partition of per-partition column statistics.
pub const PARTITION_STATS_PARTITION: &str = "partition_stats";
/// The file-id prefix of `column_stats` file groups.
pub const COLUMN_STATS_FILE_ID_PREFIX: &str = "col-stats-";
/// The file-id prefix of `partition_stats` file groups.
pub const PARTITION_STATS_FILE_ID_PREFIX: &str = "partition-stats-";

/// Length of one Base64 XXH64 id in a key.
const ID_LEN: usize = 12;

/// The merged live records of a `column_stats` or `partition_stats` partition, by MDT key.
///
/// Guarantees: every record is live (not a tombstone) and stored under the key it was read
/// with; lookups compute keys exactly as Java does, so a record is found by the (partition,
/// file, column) or (partition, column) it was written for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatsIndex {
    /// MDT key -> merged record.
    records: BTreeMap<String, ColumnStatsRecord>,
}

impl StatsIndex {
    /// Builds an index from records already keyed (e.g. computed ones).
    pub fn from_records(records: BTreeMap<String, ColumnStatsRecord>) -> Self {
        StatsIndex { records }
    }

    /// Every record by MDT key.
    pub fn records(&self) -> &BTreeMap<String, ColumnStatsRecord> {
        &self.records
    }

    /// The number of live records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether there is no live record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The `column_stats` record of `column` in `file_name` of data partition `partition`
    /// (`""` when non-partitioned).
    pub fn file_column(
        &self,
        partition: &str,
        file_name: &str,
        column: &str,
    ) -> Option<&ColumnStatsRecord> {
        self.records
            .get(&column_stats_key(column, partition, file_name))
    }

    /// The columns with `column_stats` records for each of `files` ((partition, file name)
    /// pairs; `""` when non-partitioned), in one pass over the index: what a file's removal
    /// must tombstone besides the configured columns (columns renamed since it was written
    /// keep their old name in Java's records).
    pub fn columns_of_files<'a>(
        &self,
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> BTreeMap<(String, String), Vec<String>> {
        let wanted: BTreeMap<String, (String, String)> = files
            .into_iter()
            .map(|(p, f)| {
                (
                    format!("{}{}", xxh64_id(partition_identifier(p)), md5_id(f)),
                    (p.to_string(), f.to_string()),
                )
            })
            .collect();
        let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        if wanted.is_empty() {
            return out;
        }
        for (k, r) in &self.records {
            let Some(file_part) = k.get(ID_LEN..) else {
                continue;
            };
            if let (Some(at), Some(column)) = (wanted.get(file_part), r.column_name.as_ref()) {
                out.entry(at.clone()).or_default().push(column.clone());
            }
        }
        out
    }

    /// The `column_stats` records of every indexed column of `file_name` in `partition`, by
    /// column name.
    pub fn file(&self, partition: &str, file_name: &str) -> BTreeMap<String, &ColumnStatsRecord> {
        let pid = xxh64_id(partition_identifier(partition));
        let fid = md5_id(file_name);
        self.records
            .iter()
            .filter(|(k, _)| {
                k.get(ID_LEN..2 * ID_LEN) == Some(pid.as_str())
                    && k.get(2 * ID_LEN..) == Some(fid.as_str())
            })
            .map(|(_, r)| (r.column_name.clone().unwrap_or_default(), r))
            .collect()
    }

    /// The `partition_stats` record of `column` in data partition `partition`.
    pub fn partition_column(&self, partition: &str, column: &str) -> Option<&ColumnStatsRecord> {
        self.records.get(&partition_stats_key(column, partition))
    }

    /// The `partition_stats` records of every indexed column of `partition`, by column name.
    pub fn partition(&self, partition: &str) -> BTreeMap<String, &ColumnStatsRecord> {
        let pid = xxh64_id(partition_identifier(partition));
        self.records
            .iter()
            .filter(|(k, _)| k.len() == 2 * ID_LEN && k.get(ID_LEN..) == Some(pid.as_str()))
            .map(|(_, r)| (r.column_name.clone().unwrap_or_default(), r))
            .collect()
    }
}

fn decode(raw: &RawValue, expected_type: i32, path: &str) -> Result<ColumnStatsRecord> {
    let v = decode_column_stats_value(&raw.bytes, &raw.schema, path).map_err(|source| {
        MdtError::Format {
            path: path.to_string(),
            source,
        }
    })?;
    if v.record_type != expected_type {
        return Err(MdtError::Invalid {
            path: path.to_string(),
            reason: format!(
                "record of type {} in a partition of type {expected_type}",
                v.record_type
            ),
        });
    }
    Ok(v.stats)
}

/// Reads and merges MDT partition `partition` (records of `record_type`), only the keys
/// passing `keep`.
async fn read_stats(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    partition: &str,
    record_type: i32,
    keep: &(dyn Fn(&str) -> bool + Sync),
) -> Result<StatsIndex> {
    let mut out = BTreeMap::new();
    for group in read_groups(storage, mdt, partition, record_type, keep)
        .await?
        .into_values()
    {
        out.extend(group.records);
    }
    Ok(StatsIndex { records: out })
}

/// Like [`read_column_stats`] / [`read_partition_stats`] for MDT partition `partition`
/// (records of `record_type`), per MDT file group: file id -> its merged live records. For
/// checking file-group placement.
pub async fn read_stats_by_file_group(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    partition: &str,
    record_type: i32,
) -> Result<BTreeMap<String, StatsIndex>> {
    read_groups(storage, mdt, partition, record_type, &|_| true).await
}

/// [`read_stats_by_file_group`] of only the keys passing `keep`: records of other keys are
/// not decoded. Keys merge independently, so the records kept equal those of a full read.
async fn read_groups(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    partition: &str,
    record_type: i32,
    keep: &(dyn Fn(&str) -> bool + Sync),
) -> Result<BTreeMap<String, StatsIndex>> {
    let mut by_group = BTreeMap::new();
    for slice in partition_slices(mdt, partition).await? {
        let records = merge_stats_slice(storage, mdt, partition, &slice, record_type, keep).await?;
        by_group.insert(slice.file_id.clone(), StatsIndex { records });
    }
    Ok(by_group)
}

/// The merged live records (module doc) of one file slice of stats partition `partition`
/// (records of `record_type`), only the keys passing `keep`: what the slice reads as, and so
/// what a compaction of it writes. Fails, naming the file group, on a record that does not
/// decode or is of another type.
pub(crate) async fn merge_stats_slice(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    partition: &str,
    slice: &arbor_fsview::FileSlice,
    record_type: i32,
    keep: &(dyn Fn(&str) -> bool + Sync),
) -> Result<BTreeMap<String, ColumnStatsRecord>> {
    let path = format!("{MDT_BASE}/{partition}/{}", slice.file_id);
    let mut base: BTreeMap<String, ColumnStatsRecord> = BTreeMap::new();
    visit_base(storage, slice, keep, &mut |op| {
        match op {
            SliceOp::Put(k, raw) => {
                base.insert(k, decode(&raw, record_type, &path)?);
            }
            SliceOp::Delete(k) => {
                base.remove(&k);
            }
        }
        Ok(())
    })
    .await?;
    // Key -> its record after the log blocks; `None` when a delete block dropped it.
    let mut logs: BTreeMap<String, Option<ColumnStatsRecord>> = BTreeMap::new();
    visit_logs(storage, mdt, slice, keep, &mut |op| {
        match op {
            SliceOp::Put(k, raw) => {
                let new = decode(&raw, record_type, &path)?;
                let merged = match logs.remove(&k) {
                    Some(Some(old)) => old.merge(&new),
                    Some(None) | None => new,
                };
                logs.insert(k, Some(merged));
            }
            SliceOp::Delete(k) => {
                logs.insert(k, None);
            }
        }
        Ok(())
    })
    .await?;
    for (k, state) in logs {
        match state {
            None => {
                base.remove(&k);
            }
            Some(new) => {
                let merged = match base.remove(&k) {
                    Some(old) => old.merge(&new),
                    None => new,
                };
                base.insert(k, merged);
            }
        }
    }
    Ok(base.into_iter().filter(|(_, r)| !r.is_deleted).collect())
}

/// The merged live records of the `column_stats` partition (module doc), across all its file
/// groups. Empty when the MDT has no such partition. `storage` is rooted at the data table
/// base. Fails, naming the file group, on a record that does not decode or is not of type 3.
pub async fn read_column_stats(storage: &dyn Storage, mdt: &MetadataTable) -> Result<StatsIndex> {
    read_stats(
        storage,
        mdt,
        COLUMN_STATS_PARTITION,
        RECORD_TYPE_COLUMN_STATS,
        &|_| true,
    )
    .await
}

/// Whether MDT key `key` belongs to one of the columns whose key ids are `ids` (every
/// `column_stats` and `partition_stats` key starts with the column's [`xxh64_id`]).
fn of_columns(ids: &[String], key: &str) -> bool {
    key.get(..ID_LEN)
        .is_some_and(|p| ids.iter().any(|id| id == p))
}

/// [`read_column_stats`] restricted to the records of `columns`: exactly the records of those
/// columns a full read returns (same keys, same merged values), without decoding the others.
pub async fn read_column_stats_of(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    columns: &[&str],
) -> Result<StatsIndex> {
    let ids: Vec<String> = columns.iter().map(|c| xxh64_id(c)).collect();
    read_stats(
        storage,
        mdt,
        COLUMN_STATS_PARTITION,
        RECORD_TYPE_COLUMN_STATS,
        &|k| of_columns(&ids, k),
    )
    .await
}

/// [`read_partition_stats`] restricted to the records of `columns`, as
/// [`read_column_stats_of`] restricts [`read_column_stats`].
pub async fn read_partition_stats_of(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    columns: &[&str],
) -> Result<StatsIndex> {
    let ids: Vec<String> = columns.iter().map(|c| xxh64_id(c)).collect();
    read_stats(
        storage,
        mdt,
        PARTITION_STATS_PARTITION,
        RECORD_TYPE_PARTITION_STATS,
        &|k| of_columns(&ids, k),
    )
    .await
}

/// The merged live records of the `partition_stats` partition (module doc). Empty when the
/// MDT has no such partition. Fails, naming the file group, on a record that does not decode
/// or is not of type 6.
pub async fn read_partition_stats(
    storage: &dyn Storage,
    mdt: &MetadataTable,
) -> Result<StatsIndex> {
    read_stats(
        storage,
        mdt,
        PARTITION_STATS_PARTITION,
        RECORD_TYPE_PARTITION_STATS,
        &|_| true,
    )
    .await
}
