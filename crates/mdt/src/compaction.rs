//! Compaction of the MDT, due when its FILES partition's latest slice holds enough log files:
//! the merged content of the latest file slice (base HFile plus the valid log blocks) of FILES
//! and of every other partition's file groups with log files (record index, secondary indexes,
//! column and partition stats) becomes a new base HFile named with one fresh MDT `compaction`
//! instant, so readers stop replaying one log file per data commit.
//!
//! # Protocol (the caller holds the data table's lock)
//! 1. `Tc.compaction.requested` with a `HoodieCompactionPlan` naming the slice;
//! 2. `Tc.compaction.inflight` (empty);
//! 3. the base file `files/files-0000-0_0-0-1_<Tc>.hfile`: every live entry of the merged
//!    records (tombstones dropped), `_hoodie_file_name` set to the HFile's name, as Java does;
//! 4. `Tc_<c>.commit` with commit metadata (`compacted=true`, operation `COMPACT`).
//!
//! Until step 4 the new base file is not committed and readers use the previous slice (every
//! log file of which completed before `Tc` was requested). A compaction a crash left pending is
//! removed by [`rollback_pending_compactions`] (its base files, then inflight, then requested),
//! which every MDT write runs first, so no MDT log file is ever written against a pending base.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_format::hfile::mdt::{encode_files_record, FilesRecord, METADATA_RECORD_SCHEMA_JSON};
use arbor_format::hfile::mdt::{RECORD_TYPE_ALL_PARTITIONS, RECORD_TYPE_FILES};
use arbor_format::hfile::{HFileWriter, HFileWriterOptions};
use arbor_fsview::naming::LogFile;
use arbor_storage::{Storage, StorageExt};
use arbor_timeline::avro::{
    encode_instant_for, HoodieCommitMetadata, HoodieCompactionOperation, HoodieCompactionPlan,
    HoodieWriteStat, InstantContent, WriteOperationType, SCHEMA_KEY,
};
use arbor_timeline::{Action, ActiveTimeline, InstantTime, InstantTimeGenerator, State};
use bytes::Bytes;

use arbor_format::hfile::mdt_index::{
    decode_record_index_value, decode_secondary_index_value, encode_record_index_value,
    encode_secondary_index_value,
};

use arbor_format::hfile::mdt_column_stats::{encode_column_stats_value_with, ColumnStatsValue};

use crate::column_stats::{merge_stats_slice, COLUMN_STATS_PARTITION, PARTITION_STATS_PARTITION};
use crate::column_stats_writer::stats_record_type;
use crate::error::{MdtError, Result};
use crate::files::{MetadataTable, ALL_PARTITIONS_KEY, FILES_PARTITION, MDT_BASE};
use crate::index_writer::RECORD_INDEX;
use crate::record_index::{merge_slice, partition_slices};
use crate::secondary_index::SECONDARY_INDEX_PREFIX;
use crate::writer::{MdtWriter, FILES_FILE_ID};

/// Java's default `hoodie.metadata.compact.max.delta.commits`: compact once the latest FILES
/// slice holds this many log files.
pub const DEFAULT_COMPACT_EVERY: usize = 10;

/// The write token of compacted MDT base files.
const COMPACTION_TOKEN: &str = "0-0-1";

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MdtCompaction {
    /// The MDT compaction instant.
    pub instant: InstantTime,
    /// Log files folded into the new base file.
    pub log_files: usize,
    /// Records in the new base file.
    pub records: usize,
}

/// Removes every pending MDT compaction (see the module doc). Returns their instants.
pub async fn rollback_pending_compactions(writer: &MdtWriter) -> Result<Vec<InstantTime>> {
    let storage = writer.storage();
    let tl = ActiveTimeline::load(storage.clone(), writer.layout().clone()).await?;
    let mut out = Vec::new();
    for pending in tl.filter(&[Action::Compaction], &[State::Requested, State::Inflight]) {
        let t = pending.requested_time.clone();
        let suffix = format!("_{t}.hfile");
        let mut stale: Vec<String> = Vec::new();
        let (_objects, dirs) = storage.list_dir(MDT_BASE).await?;
        for dir in dirs {
            if dir.rsplit('/').next().is_some_and(|n| n.starts_with('.')) {
                continue;
            }
            let (objects, _) = storage.list_dir(&dir).await?;
            stale.extend(
                objects
                    .into_iter()
                    .map(|o| o.key)
                    .filter(|k| k.ends_with(&suffix)),
            );
        }
        for k in &stale {
            storage.delete(k).await?;
        }
        if let Some(files) = tl.get(&t, Action::Compaction) {
            for i in [&files.inflight, &files.requested].into_iter().flatten() {
                storage.delete(&writer.layout().instant_key(i)?).await?;
            }
        }
        tracing::info!(instant = %t, "rolled back a pending metadata-table compaction");
        out.push(t);
    }
    Ok(out)
}

/// Compacts the FILES partition if its latest slice holds at least `every` log files, every
/// one of them from a valid instant (a data instant still pending blocks compaction), and the
/// MDT has no pending instant. `mdt` must be opened just before, under the lock, with the data
/// timeline as it is now: its MDT timeline is the one checked for pending instants. Returns
/// `None` when nothing was due.
pub async fn compact_if_due(
    writer: &MdtWriter,
    mdt: &MetadataTable,
    every: usize,
    generator: &InstantTimeGenerator,
) -> Result<Option<MdtCompaction>> {
    let storage = writer.storage();
    // The MDT timeline `mdt` was opened with (just now, as this function asks): every step that
    // writes to it below lists it again.
    let mut tl = mdt.view().history().active().clone();
    if !tl.pending().is_empty() {
        return Ok(None);
    }
    let slices = mdt.files_slices().await?;
    let Some(slice) = slices.into_iter().find(|s| s.file_id == FILES_FILE_ID) else {
        return Ok(None);
    };
    if slice.log_files.len() < every.max(1) {
        return Ok(None);
    }
    // The other partitions' file groups with log files (record index, secondary indexes,
    // column and partition stats) are compacted with FILES, as Java compacts every MDT
    // partition at one instant: archiving the MDT timeline behind this compaction then never
    // drops a block still needed (a block of an archived instant is no longer valid), and
    // every partition's file count stays bounded by the clean's retention.
    let mut index_slices = Vec::new();
    let (_objects, dirs) = storage.list_dir(MDT_BASE).await?;
    for dir in dirs {
        let name = dir.rsplit('/').next().unwrap_or(&dir).to_string();
        if name == RECORD_INDEX
            || name.starts_with(SECONDARY_INDEX_PREFIX)
            || is_stats_partition(&name)
        {
            for s in partition_slices(mdt, &name).await? {
                if !s.log_files.is_empty() {
                    index_slices.push((name.clone(), s));
                }
            }
        }
    }
    let all_logs_valid = slice
        .log_files
        .iter()
        .chain(index_slices.iter().flat_map(|(_, s)| s.log_files.iter()))
        .all(|l| mdt.valid_instants().contains(&l.delta_commit_time));
    if !all_logs_valid {
        tracing::debug!("metadata-table compaction deferred: a data instant is pending");
        return Ok(None);
    }
    let merged = mdt.merged_files_records().await?;

    let time = tl.next_instant_time(generator).await?;
    let operation = HoodieCompactionOperation {
        base_instant_time: Some(slice.base_instant.to_string()),
        delta_file_paths: Some(slice.log_files.iter().map(LogFile::file_name).collect()),
        data_file_path: slice.base_file.as_ref().map(|b| b.file_name()),
        file_id: Some(FILES_FILE_ID.to_string()),
        partition_path: Some(FILES_PARTITION.to_string()),
        metrics: Some(BTreeMap::new()),
        bootstrap_file_path: None,
    };
    let mut operations = vec![operation];
    for (partition, s) in &index_slices {
        operations.push(HoodieCompactionOperation {
            base_instant_time: Some(s.base_instant.to_string()),
            delta_file_paths: Some(s.log_files.iter().map(LogFile::file_name).collect()),
            data_file_path: s.base_file.as_ref().map(|b| b.file_name()),
            file_id: Some(s.file_id.clone()),
            partition_path: Some(partition.clone()),
            metrics: Some(BTreeMap::new()),
            bootstrap_file_path: None,
        });
    }
    let plan = HoodieCompactionPlan {
        operations: Some(operations),
        extra_metadata: None,
        version: Some(1),
        strategy: None,
        preserve_hoodie_metadata: Some(false),
        missing_schedule_partitions: Some(Vec::new()),
    };
    let requested = arbor_timeline::Instant::requested(time.clone(), Action::Compaction);
    let plan_bytes = encode_instant_for(&requested, &InstantContent::Compaction(Box::new(plan)))?;
    let requested = tl
        .create_requested(time.clone(), Action::Compaction, Bytes::from(plan_bytes))
        .await?;
    let inflight = tl.transition_to_inflight(&requested, Bytes::new()).await?;

    let name = format!("{FILES_FILE_ID}_{COMPACTION_TOKEN}_{time}.hfile");
    let rel = format!("{FILES_PARTITION}/{name}");
    let key = format!("{MDT_BASE}/{rel}");
    let fmt = |source| MdtError::Format {
        path: key.clone(),
        source,
    };
    let mut w = HFileWriter::new(HFileWriterOptions::default());
    w.set_file_info("schema", writer.record_schema_json().as_bytes().to_vec());
    let mut records = 0usize;
    for (record_key, entries) in &merged {
        let record = FilesRecord {
            record_type: if record_key == ALL_PARTITIONS_KEY {
                RECORD_TYPE_ALL_PARTITIONS
            } else {
                RECORD_TYPE_FILES
            },
            file_name: Some(name.clone()),
            files: entries
                .iter()
                .filter(|(_, e)| !e.is_deleted)
                .map(|(n, e)| (n.clone(), *e))
                .collect(),
        };
        let value = encode_files_record(&record).map_err(fmt)?;
        w.append(record_key.as_bytes(), &value).map_err(fmt)?;
        records += 1;
    }
    let bytes = w.finish().map_err(fmt)?;
    let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
    storage.put(&key, bytes).await?;

    let mut meta = HoodieCommitMetadata {
        partition_to_write_stats: Some(BTreeMap::new()),
        compacted: Some(true),
        version: Some(1),
        ..HoodieCommitMetadata::default()
    };
    meta.add_write_stat(
        FILES_PARTITION.to_string(),
        HoodieWriteStat {
            file_id: Some(FILES_FILE_ID.to_string()),
            path: Some(rel),
            prev_commit: Some(slice.base_instant.to_string()),
            num_writes: Some(i64::try_from(records).unwrap_or(i64::MAX)),
            total_write_bytes: Some(size),
            file_size_in_bytes: Some(size),
            partition_path: Some(FILES_PARTITION.to_string()),
            total_log_files_compacted: Some(i64::try_from(slice.log_files.len()).unwrap_or(0)),
            ..HoodieWriteStat::default()
        },
    );
    for (partition, s) in &index_slices {
        let stat = compact_index_slice(
            storage.as_ref(),
            mdt,
            partition,
            s,
            &time,
            writer.record_schema_json(),
        )
        .await?;
        meta.add_write_stat(partition.clone(), stat);
    }
    meta.insert_extra(SCHEMA_KEY, writer.record_schema_json());
    meta.set_operation_type(WriteOperationType::Compact);
    let completion = tl.next_instant_time(generator).await?;
    let mut completed = inflight.with_state(State::Completed);
    completed.action = Action::Commit;
    completed.completion_time = Some(completion.clone());
    let content = encode_instant_for(&completed, &InstantContent::Commit(Box::new(meta)))?;
    tl.complete(&inflight, completion, Bytes::from(content))
        .await?;
    Ok(Some(MdtCompaction {
        instant: time,
        log_files: slice.log_files.len(),
        records,
    }))
}

/// Whether MDT partition `name` holds column or partition stats.
fn is_stats_partition(name: &str) -> bool {
    name == COLUMN_STATS_PARTITION || name == PARTITION_STATS_PARTITION
}

/// The new base HFile of one stats file group: its merged live records
/// ([`crate::column_stats`]'s merge, tombstones dropped), encoded with `schema_json` (the MDT
/// writer schema of the data table's version, also recorded in the file info).
async fn stats_base_file(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    partition: &str,
    slice: &arbor_fsview::FileSlice,
    key: &str,
    schema_json: &str,
) -> Result<(Bytes, usize)> {
    let record_type = stats_record_type(partition);
    let merged = merge_stats_slice(storage, mdt, partition, slice, record_type, &|_| true).await?;
    let fmt = |source| MdtError::Format {
        path: key.to_string(),
        source,
    };
    let schema = apache_avro::Schema::parse_str(schema_json).map_err(|e| MdtError::Invalid {
        path: key.to_string(),
        reason: format!("metadata record schema cannot be parsed: {e}"),
    })?;
    let mut w = HFileWriter::new(HFileWriterOptions::default());
    w.set_file_info("schema", schema_json.as_bytes().to_vec());
    for (record_key, stats) in &merged {
        let value = ColumnStatsValue {
            record_type,
            stats: stats.clone(),
        };
        let bytes = encode_column_stats_value_with(&value, &schema).map_err(fmt)?;
        w.append(record_key.as_bytes(), &bytes).map_err(fmt)?;
    }
    Ok((w.finish().map_err(fmt)?, merged.len()))
}

/// Writes the new base file of one record-index, secondary-index or stats file group: its
/// merged live values, each decoded and re-encoded (secondary-index and stats tombstones
/// dropped); stats records with `stats_schema_json`.
async fn compact_index_slice(
    storage: &dyn Storage,
    mdt: &MetadataTable,
    partition: &str,
    slice: &arbor_fsview::FileSlice,
    time: &InstantTime,
    stats_schema_json: &str,
) -> Result<HoodieWriteStat> {
    let name = format!("{}_{COMPACTION_TOKEN}_{time}.hfile", slice.file_id);
    let rel = format!("{partition}/{name}");
    let key = format!("{MDT_BASE}/{rel}");
    if is_stats_partition(partition) {
        let (bytes, records) =
            stats_base_file(storage, mdt, partition, slice, &key, stats_schema_json).await?;
        let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        storage.put(&key, bytes).await?;
        return Ok(compaction_stat(slice, partition, rel, records, size));
    }
    let merged = merge_slice(storage, mdt, slice, &|_| true).await?;
    let fmt = |source| MdtError::Format {
        path: key.clone(),
        source,
    };
    let mut w = HFileWriter::new(HFileWriterOptions::default());
    w.set_file_info("schema", METADATA_RECORD_SCHEMA_JSON.as_bytes().to_vec());
    let mut records = 0usize;
    for (record_key, raw) in &merged {
        let value = if partition == RECORD_INDEX {
            let info = decode_record_index_value(&raw.bytes, &raw.schema, &key).map_err(fmt)?;
            encode_record_index_value(&info).map_err(fmt)?
        } else {
            if decode_secondary_index_value(&raw.bytes, &raw.schema, &key).map_err(fmt)? {
                continue;
            }
            encode_secondary_index_value(false).map_err(fmt)?
        };
        w.append(record_key.as_bytes(), &value).map_err(fmt)?;
        records += 1;
    }
    let bytes = w.finish().map_err(fmt)?;
    let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
    storage.put(&key, bytes).await?;
    Ok(compaction_stat(slice, partition, rel, records, size))
}

/// The write stat of compacting `slice` of `partition` into base file `rel`.
fn compaction_stat(
    slice: &arbor_fsview::FileSlice,
    partition: &str,
    rel: String,
    records: usize,
    size: i64,
) -> HoodieWriteStat {
    HoodieWriteStat {
        file_id: Some(slice.file_id.clone()),
        path: Some(rel),
        prev_commit: Some(slice.base_instant.to_string()),
        num_writes: Some(i64::try_from(records).unwrap_or(i64::MAX)),
        total_write_bytes: Some(size),
        file_size_in_bytes: Some(size),
        partition_path: Some(partition.to_string()),
        total_log_files_compacted: Some(i64::try_from(slice.log_files.len()).unwrap_or(0)),
        ..HoodieWriteStat::default()
    }
}

/// Convenience for callers holding only a storage: opens the MDT writer and reader (with the
/// data timeline `data`) and runs [`compact_if_due`]. `None` when the table has no MDT.
pub async fn compact_table_if_due(
    storage: &Arc<dyn Storage>,
    data: &ActiveTimeline,
    every: usize,
    generator: &InstantTimeGenerator,
) -> Result<Option<MdtCompaction>> {
    let Some(writer) = MdtWriter::open(storage.clone()).await? else {
        return Ok(None);
    };
    let Some(mdt) = MetadataTable::open_with(storage.clone(), data).await? else {
        return Ok(None);
    };
    compact_if_due(&writer, &mdt, every, generator).await
}
