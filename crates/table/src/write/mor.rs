//! Writing log files: one new log file per file group per deltacommit, holding an Avro data
//! block (updates and packed inserts, meta fields filled) and/or a delete block.

use std::sync::Arc;

use arbor_format::log::{
    encode_avro_data_block_from_batch, encode_delete_block, DeleteRecord, OrderingValue,
};
use arbor_fsview::slice::join;
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

/// Writes `.<fileId>_<instant>.log.1_<token>` for an existing `group` as task `task`: an Avro
/// data block of the updated and inserted rows (meta fields: the instant, `<instant>_<task>_<i>`,
/// key, partition path, the file id), then a delete block of the deleted keys. Created with
/// create-if-absent.
pub async fn write_log_file(
    ctx: &FileWriteContext,
    input: &Input,
    group: &GroupPlan,
    task: u64,
) -> Result<WrittenGroup> {
    let token = write_token(task);
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
    let bytes: Bytes = bytes.freeze();
    let size = to_i64(bytes.len() as u64);
    ctx.storage.put_if_absent(&key, bytes).await?;
    let base_file = group
        .existing
        .as_ref()
        .and_then(|s| s.base_file.as_ref())
        .map(|b| b.file_name())
        .unwrap_or_default();
    let inserted = group.inserts.len() as u64;
    let updated = group.updates.len() as u64;
    let deleted = group.deletes.len() as u64;
    let stat = HoodieWriteStat {
        file_id: Some(group.file_id.clone()),
        path: Some(key),
        prev_commit: Some(ctx.instant.clone()),
        num_writes: Some(to_i64(inserted + updated)),
        num_deletes: Some(to_i64(deleted)),
        num_update_writes: Some(to_i64(updated)),
        num_inserts: Some(to_i64(inserted)),
        total_write_bytes: Some(size),
        total_write_errors: Some(0),
        partition_path: Some(group.partition.clone()),
        total_log_records: Some(to_i64(inserted + updated + deleted)),
        total_log_blocks: Some(blocks),
        file_size_in_bytes: Some(size),
        log_version: Some(1),
        log_offset: Some(0),
        base_file: Some(base_file),
        log_files: Some(vec![name]),
        ..HoodieWriteStat::default()
    };
    Ok(WrittenGroup {
        partition: group.partition.clone(),
        stat,
        inserted,
        updated,
        deleted,
        kept: 0,
    })
}
