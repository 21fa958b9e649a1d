//! Writing log files: one new log file per file group per deltacommit, holding an Avro data
//! block (updates and packed inserts, meta fields filled) and/or a delete block.

use std::sync::Arc;

use arbor_format::log::{
    encode_avro_data_block_from_batch, encode_delete_block, DeleteRecord, OrderingValue,
};
use arbor_fsview::slice::join;
use arbor_storage::Storage;
use arbor_timeline::avro::HoodieWriteStat;
use arrow::array::{ArrayRef, RecordBatch, StringArray, UInt32Array};
use arrow::compute::take_record_batch;
use bytes::{Bytes, BytesMut};

use super::cow::{full_schema, write_token, FileWriteContext, WrittenGroup};
use super::planner::{GroupPlan, Input};
use crate::error::{Result, TableError};

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The ordering value of every delete record: Java's default `IntWrapper(0)`, a commit-time
/// delete that removes the record whatever its ordering value (as Spark's SQL `DELETE` writes;
/// hudi-rs 0.5.0 and arbor's reader both delete on it, see `arbor_format::log::delete`).
pub fn delete_ordering_value() -> OrderingValue {
    OrderingValue::Int(0)
}

/// A log file encoded in memory with its write stat's facts, not yet stored; made by
/// [`encode_log_file`], stored by [`store_log_file`].
#[derive(Debug)]
pub struct EncodedLog {
    key: String,
    name: String,
    bytes: Bytes,
    blocks: i64,
    partition: String,
    file_id: String,
    instant: String,
    base_file: String,
    inserted: u64,
    updated: u64,
    deleted: u64,
}

impl EncodedLog {
    /// The storage key the log file will be stored at.
    pub fn key(&self) -> &str {
        &self.key
    }
}

/// Encodes `.<fileId>_<instant>.log.1_<token>` for an existing `group` as task `task` in
/// memory: an Avro data block of the updated and inserted rows (meta fields: the instant,
/// `<instant>_<task>_<i>`, key, partition path, the file id), then a delete block of the
/// deleted keys. CPU only, no I/O: safe on any thread, and the same inputs give the same bytes.
pub fn encode_log_file(
    ctx: &FileWriteContext,
    input: &Input,
    group: &GroupPlan,
    task: u64,
) -> Result<EncodedLog> {
    let token = write_token(ctx.stage, task);
    let name = format!(".{}_{}.log.1_{token}", group.file_id, ctx.instant);
    let key = join(&group.partition, &name);
    let mut bytes = BytesMut::new();
    let mut blocks = 0i64;

    let rows: Vec<usize> = group
        .updates
        .iter()
        .chain(group.inserts.iter())
        .copied()
        .collect();
    if !rows.is_empty() {
        let idx: Vec<u32> = rows
            .iter()
            .map(|&r| u32::try_from(r).unwrap_or(u32::MAX))
            .collect();
        let data = take_record_batch(&input.batch, &UInt32Array::from(idx)).map_err(|e| {
            TableError::Unsupported {
                reason: format!("{key}: {e}"),
            }
        })?;
        let n = rows.len();
        let keys: Vec<String> = rows
            .iter()
            .map(|&r| {
                input
                    .keys
                    .get(r)
                    .map(|k| k.record_key.clone())
                    .unwrap_or_default()
            })
            .collect();
        let meta_cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![ctx.instant.as_str(); n])),
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("{}_{task}_{i}", ctx.instant)),
            )),
            Arc::new(StringArray::from(keys)),
            Arc::new(StringArray::from(vec![group.partition.as_str(); n])),
            Arc::new(StringArray::from(vec![group.file_id.as_str(); n])),
        ];
        let mut columns = meta_cols;
        columns.extend(data.columns().iter().cloned());
        let batch = RecordBatch::try_new(full_schema(&ctx.schema.arrow), columns).map_err(|e| {
            TableError::Unsupported {
                reason: format!("{key}: {e}"),
            }
        })?;
        bytes.extend_from_slice(&encode_avro_data_block_from_batch(
            &ctx.instant,
            &ctx.avro_with_meta,
            &batch,
        )?);
        blocks += 1;
    }
    if !group.deletes.is_empty() {
        let records: Vec<DeleteRecord> = group
            .deletes
            .iter()
            .filter_map(|&r| input.keys.get(r))
            .map(|k| DeleteRecord {
                record_key: Some(k.record_key.clone()),
                partition_path: Some(k.partition_path.to_string()),
                ordering_value: Some(delete_ordering_value()),
            })
            .collect();
        bytes.extend_from_slice(&encode_delete_block(
            &ctx.instant,
            Some(&ctx.avro_with_meta),
            &records,
        )?);
        blocks += 1;
    }
    let base_file = group
        .existing
        .as_ref()
        .and_then(|s| s.base_file.as_ref())
        .map(|b| b.file_name())
        .unwrap_or_default();
    Ok(EncodedLog {
        key,
        name,
        bytes: bytes.freeze(),
        blocks,
        partition: group.partition.clone(),
        file_id: group.file_id.clone(),
        instant: ctx.instant.clone(),
        base_file,
        inserted: group.inserts.len() as u64,
        updated: group.updates.len() as u64,
        deleted: group.deletes.len() as u64,
    })
}

/// Stores an encoded log file with create-if-absent and returns its write stat.
pub async fn store_log_file(storage: &dyn Storage, log: EncodedLog) -> Result<WrittenGroup> {
    let size = to_i64(log.bytes.len() as u64);
    storage.put_if_absent(&log.key, log.bytes).await?;
    let (inserted, updated, deleted) = (log.inserted, log.updated, log.deleted);
    let stat = HoodieWriteStat {
        file_id: Some(log.file_id),
        path: Some(log.key),
        prev_commit: Some(log.instant),
        num_writes: Some(to_i64(inserted + updated)),
        num_deletes: Some(to_i64(deleted)),
        num_update_writes: Some(to_i64(updated)),
        num_inserts: Some(to_i64(inserted)),
        total_write_bytes: Some(size),
        total_write_errors: Some(0),
        partition_path: Some(log.partition.clone()),
        total_log_records: Some(to_i64(inserted + updated + deleted)),
        total_log_blocks: Some(log.blocks),
        file_size_in_bytes: Some(size),
        log_version: Some(1),
        log_offset: Some(0),
        base_file: Some(log.base_file),
        log_files: Some(vec![log.name]),
        ..HoodieWriteStat::default()
    };
    Ok(WrittenGroup {
        partition: log.partition,
        stat,
        inserted,
        updated,
        deleted,
        kept: 0,
    })
}
