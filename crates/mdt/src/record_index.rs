//! The MDT `record_index` partition: record key -> data partition, file group and instant
//! (spec §6.2, §6.3).
//!
//! Each of the partition's file groups (`record-index-0000-0` ...) holds the keys that
//! [`file_group_index`] maps to its position among the partition's file groups sorted by file
//! id. A file group's entries are merged as Hudi merges them: the base HFile, then the log
//! blocks of valid instants ([`MetadataTable::valid_instants`]) in log-file and block order;
//! an `HFILE_DATA` record replaces the key's entry, a `DELETE` block's key removes it (Java
//! writes a record-index delete as an `EmptyHoodieRecordPayload`, which lands in a delete
//! block).
//!
//! Only the global (non-partitioned) record index is read: Java 1.1's partitioned record
//! index (`isPartitioned=true` in `.hoodie/.index_defs/index.json`) is not supported.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use apache_avro::Schema;
use arbor_format::hfile::mdt::metadata_record_schema;
use arbor_format::hfile::mdt_index::{decode_record_index_value, file_group_index};
pub use arbor_format::hfile::mdt_index::{RecordIndexInfo, RecordLocation};
use arbor_format::hfile::{HFileRangedReader, HFileReader};
use arbor_format::log::delete::decode_delete_block;
use arbor_format::log::reader::ReadMode;
use arbor_format::log::{read_log_bytes, BlockType};
use arbor_fsview::FileSlice;
use arbor_storage::Storage;
use arbor_timeline::InstantTime;
use bytes::Bytes;

use crate::error::{MdtError, Result};
use crate::files::{MetadataTable, MDT_BASE};

/// The MDT partition of the record index.
pub const RECORD_INDEX_PARTITION: &str = "record_index";

/// One record-index entry: where the record lives and which MDT file group holds the entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordIndexEntry {
    /// The record's data partition, file group and writing instant (epoch millis).
    pub location: RecordLocation,
    /// The id of the MDT file group the entry was read from (`record-index-0003-0`).
    pub mdt_file_id: String,
}

/// One undecoded MDT value and the writer schema of the file or block it came from.
#[derive(Debug, Clone)]
pub(crate) struct RawValue {
    pub(crate) bytes: Bytes,
    pub(crate) schema: Arc<Schema>,
}

fn format_err(path: &str) -> impl FnOnce(arbor_format::FormatError) -> MdtError + '_ {
    move |source| MdtError::Format {
        path: path.to_string(),
        source,
    }
}

/// The latest committed file slices of MDT partition `partition`, sorted by file id (the
/// order Java indexes with [`file_group_index`]).
pub(crate) async fn partition_slices(
    mdt: &MetadataTable,
    partition: &str,
) -> Result<Vec<FileSlice>> {
    let mut slices = mdt.view().latest_file_slices(Some(partition), None).await?;
    slices.sort_by(|a, b| a.file_id.cmp(&b.file_id));
    Ok(slices)
}

/// The writer schema named by `json`, or the built-in one when absent.
fn writer_schema(json: Option<&str>, path: &str) -> Result<Arc<Schema>> {
    match json {
        Some(j) => Schema::parse_str(j)
            .map(Arc::new)
            .map_err(|e| MdtError::Invalid {
                path: path.to_string(),
                reason: format!("writer schema cannot be parsed: {e}"),
            }),
        None => Ok(Arc::new(
            metadata_record_schema().map_err(format_err(path))?.clone(),
        )),
    }
}

fn utf8_key(key: &[u8], path: &str) -> Result<String> {
    String::from_utf8(key.to_vec()).map_err(|_| MdtError::Invalid {
        path: path.to_string(),
        reason: "record key is not UTF-8".to_string(),
    })
}

/// One change a base HFile or log block applies to a file slice's entries, in order.
pub(crate) enum SliceOp {
    /// An `HFILE_DATA` record (or base HFile entry) for the key.
    Put(String, RawValue),
    /// A `DELETE` block naming the key.
    Delete(String),
}

/// A visitor of [`SliceOp`]s.
pub(crate) type SliceVisitor<'a> = dyn FnMut(SliceOp) -> Result<()> + Send + 'a;

/// Visits every entry of an HFile (a base file or an `HFILE_DATA` block's content) whose key
/// passes `keep`, as [`SliceOp::Put`], in key order.
fn visit_hfile(
    bytes: Bytes,
    schema_json: Option<&str>,
    path: &str,
    keep: &(dyn Fn(&str) -> bool + Sync),
    visit: &mut SliceVisitor<'_>,
) -> Result<()> {
    let reader = HFileReader::open(bytes, path).map_err(format_err(path))?;
    let json = schema_json.or_else(|| reader.file_info_str("schema"));
    let schema = writer_schema(json, path)?;
    for (key, value) in reader.entries().map_err(format_err(path))? {
        let key = std::str::from_utf8(&key).map_err(|_| MdtError::Invalid {
            path: path.to_string(),
            reason: "record key is not UTF-8".to_string(),
        })?;
        if keep(key) {
            visit(SliceOp::Put(
                key.to_string(),
                RawValue {
                    bytes: value,
                    schema: schema.clone(),
                },
            ))?;
        }
    }
    Ok(())
}

/// Upserts every entry of an HFile whose key passes `keep` into `merged`.
fn merge_hfile(
    bytes: Bytes,
    schema_json: Option<&str>,
    path: &str,
    keep: &(dyn Fn(&str) -> bool + Sync),
    merged: &mut BTreeMap<String, RawValue>,
) -> Result<()> {
    visit_hfile(bytes, schema_json, path, keep, &mut |op| {
        apply_op(merged, op);
        Ok(())
    })
}

/// Applies `op` with replace semantics (a later value replaces an earlier one).
fn apply_op(merged: &mut BTreeMap<String, RawValue>, op: SliceOp) {
    match op {
        SliceOp::Put(k, v) => {
            merged.insert(k, v);
        }
        SliceOp::Delete(k) => {
            merged.remove(&k);
        }
    }
}

/// Visits the entries of the base HFile of `slice` (if any) whose key passes `keep`.
pub(crate) async fn visit_base(
    storage: &dyn Storage,
    slice: &FileSlice,
    keep: &(dyn Fn(&str) -> bool + Sync),
    visit: &mut SliceVisitor<'_>,
) -> Result<()> {
    if let Some(base) = slice.base_file_path() {
        let key = format!("{MDT_BASE}/{base}");
        let (bytes, _) = storage.get(&key).await?;
        visit_hfile(bytes, None, &key, keep, visit)?;
    }
    Ok(())
}

/// The merged live values of one MDT file slice (module doc), restricted to keys passing
/// `keep`. Log blocks whose instant is not valid are skipped; corrupt regions are skipped with
/// a warning, like Hudi's reader.
pub(crate) async fn merge_slice(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    slice: &FileSlice,
    keep: &(dyn Fn(&str) -> bool + Sync),
) -> Result<BTreeMap<String, RawValue>> {
    let mut merged = BTreeMap::new();
    if let Some(base) = slice.base_file_path() {
        let key = format!("{MDT_BASE}/{base}");
        let (bytes, _) = storage.get(&key).await?;
        merge_hfile(bytes, None, &key, keep, &mut merged)?;
    }
    merge_logs(storage, mdt, slice, keep, &mut merged).await?;
    Ok(merged)
}

/// [`merge_slice`] restricted to the keys `wanted`, reading the base HFile with ranged reads
/// of only the blocks those keys fall in ([`HFileRangedReader`]); the log files are read whole
/// and merged as [`merge_slice`] does.
async fn merge_slice_keys(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    slice: &FileSlice,
    wanted: &BTreeSet<&str>,
) -> Result<BTreeMap<String, RawValue>> {
    let mut merged = BTreeMap::new();
    if let (Some(base), Some(base_file)) = (slice.base_file_path(), slice.base_file.as_ref()) {
        let key = format!("{MDT_BASE}/{base}");
        let size = match base_file.size {
            0 => storage.head(&key).await?.size,
            n => n,
        };
        let reader = HFileRangedReader::open(storage, &key, size)
            .await
            .map_err(format_err(&key))?;
        let schema = writer_schema(reader.file_info_str("schema"), &key)?;
        let keys: Vec<&[u8]> = wanted.iter().map(|k| k.as_bytes()).collect();
        for (k, value) in reader.get_many(&keys).await.map_err(format_err(&key))? {
            merged.insert(
                utf8_key(&k, &key)?,
                RawValue {
                    bytes: value,
                    schema: schema.clone(),
                },
            );
        }
    }
    merge_logs(storage, mdt, slice, &|k| wanted.contains(k), &mut merged).await?;
    Ok(merged)
}

/// Applies the valid log blocks of `slice` to `merged` in log-file and block order: an
/// `HFILE_DATA` block upserts its entries whose key passes `keep`, a `DELETE` block removes its
/// keys. Corrupt regions are skipped with a warning, like Hudi's reader.
async fn merge_logs(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    slice: &FileSlice,
    keep: &(dyn Fn(&str) -> bool + Sync),
    merged: &mut BTreeMap<String, RawValue>,
) -> Result<()> {
    visit_logs(storage, mdt, slice, keep, &mut |op| {
        apply_op(merged, op);
        Ok(())
    })
    .await
}

/// Visits the valid log blocks of `slice` in log-file and block order: each `HFILE_DATA`
/// entry whose key passes `keep` as [`SliceOp::Put`], each key of a `DELETE` block as
/// [`SliceOp::Delete`]. Blocks of instants that are not valid are skipped; corrupt regions are
/// skipped with a warning, like Hudi's reader.
pub(crate) async fn visit_logs(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    slice: &FileSlice,
    keep: &(dyn Fn(&str) -> bool + Sync),
    visit: &mut SliceVisitor<'_>,
) -> Result<()> {
    for log in slice.log_file_paths() {
        let key = format!("{MDT_BASE}/{log}");
        let (bytes, _) = storage.get(&key).await?;
        let contents = read_log_bytes(&bytes, &key, ReadMode::Lenient).map_err(format_err(&key))?;
        for region in &contents.corrupt {
            tracing::warn!(path = %key, offset = region.offset, reason = %region.reason,
                "skipping corrupt region of an MDT log file");
        }
        for block in &contents.blocks {
            if !matches!(block.block_type, BlockType::HfileData | BlockType::Delete) {
                continue;
            }
            let Some(instant) = block.instant_time() else {
                return Err(MdtError::Invalid {
                    path: key.clone(),
                    reason: format!("log block at offset {} has no INSTANT_TIME", block.offset),
                });
            };
            let instant = InstantTime::parse(instant)?;
            if !mdt.valid_instants().contains(&instant) {
                tracing::debug!(path = %key, %instant, "skipping block of an invalid MDT instant");
                continue;
            }
            if block.block_type == BlockType::HfileData {
                visit_hfile(
                    block.content.clone(),
                    block.schema_json(),
                    &key,
                    keep,
                    visit,
                )?;
            } else {
                for record in decode_delete_block(block, &key).map_err(format_err(&key))? {
                    if let Some(k) = record.record_key {
                        visit(SliceOp::Delete(k))?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Decodes merged `record_index` values of MDT file group `mdt_file_id` into `out`.
fn decode_entries(
    merged: BTreeMap<String, RawValue>,
    mdt_file_id: &str,
    path: &str,
    out: &mut BTreeMap<String, RecordIndexEntry>,
) -> Result<()> {
    for (key, raw) in merged {
        let info =
            decode_record_index_value(&raw.bytes, &raw.schema, path).map_err(format_err(path))?;
        out.insert(
            key,
            RecordIndexEntry {
                location: info.location(),
                mdt_file_id: mdt_file_id.to_string(),
            },
        );
    }
    Ok(())
}

/// Every live entry of the record index: data record key -> entry, merged across all of the
/// partition's file groups (module doc). Empty when the MDT has no `record_index` partition.
/// `storage` is rooted at the data table base (the storage `mdt` was opened with).
pub async fn read_record_index(
    storage: &dyn Storage,
    mdt: &MetadataTable,
) -> Result<BTreeMap<String, RecordIndexEntry>> {
    let mut out = BTreeMap::new();
    for slice in partition_slices(mdt, RECORD_INDEX_PARTITION).await? {
        let merged = merge_slice(storage, mdt, &slice, &|_| true).await?;
        let path = format!("{MDT_BASE}/{RECORD_INDEX_PARTITION}/{}", slice.file_id);
        decode_entries(merged, &slice.file_id, &path, &mut out)?;
    }
    Ok(out)
}

/// The entries of `keys` that the record index holds (absent keys are left out), reading only
/// the file groups the keys hash to ([`file_group_index`] over the partition's file groups
/// sorted by id) and, of each group's base HFile, only the trailer, the index and the data
/// blocks the keys fall in (ranged reads), so the cost follows the number of keys, not the
/// index size; log files are read whole. Empty when the MDT has no `record_index` partition.
pub async fn lookup_record_index(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    keys: &[&str],
) -> Result<BTreeMap<String, RecordIndexEntry>> {
    let slices = partition_slices(mdt, RECORD_INDEX_PARTITION).await?;
    let mut by_group: BTreeMap<usize, BTreeSet<&str>> = BTreeMap::new();
    for key in keys {
        by_group
            .entry(file_group_index(key, slices.len()))
            .or_default()
            .insert(key);
    }
    let mut out = BTreeMap::new();
    for (group, wanted) in by_group {
        let Some(slice) = slices.get(group) else {
            continue;
        };
        let merged = merge_slice_keys(storage, mdt, slice, &wanted).await?;
        let path = format!("{MDT_BASE}/{RECORD_INDEX_PARTITION}/{}", slice.file_id);
        decode_entries(merged, &slice.file_id, &path, &mut out)?;
    }
    Ok(out)
}
