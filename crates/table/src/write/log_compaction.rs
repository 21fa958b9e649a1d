//! Log compaction of merge-on-read file groups (Hudi's `logcompaction`): the log files of a
//! slice are merged into one new log file of the same file group, without rewriting the base
//! file.
//!
//! As Java writes it: `<t>.logcompaction.requested` holds a `HoodieCompactionPlan` (one
//! operation per slice with at least `hoodie.log.compaction.blocks.threshold` log files,
//! default 5; `preserveHoodieMetadata=true`), `<t>.logcompaction.inflight` is empty, and
//! `<t>_<c>.deltacommit` completes it with operation `LOG_COMPACT`. The new log file
//! `.<fileId>_<t>.log.1_<token>` holds a delete block of every delete record of the compacted
//! blocks (in log order) and then a data block of the merged records (their commit times and
//! sequence numbers kept), both with the header `COMPACTED_BLOCK_TIMES` naming the compacted
//! blocks' instants.
//!
//! Readers that read every block (Java's default scanner, hudi-rs, arbor) read the compacted
//! blocks after the originals: the deletes and the merged records repeat what the originals
//! said, so every key merges to the same record (event-time ordering compares the same
//! ordering values; commit-time ordering ends on the same latest state). Java's optimized
//! scanner reads the compacted blocks in place of the originals.
//!
//! The caller holds the table lock for the whole run ([`crate::Table::log_compact`]); a crash
//! leaves the instant pending, and the next run removes its partial output and runs it again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_format::log::{encode_avro_data_block_with, encode_delete_block_with, HeaderKey};
use arbor_fsview::slice::join;
use arbor_fsview::{FileSlice, LogFile};
use arbor_storage::Storage;
use arbor_timeline::avro::{
    decode, encode_instant_for, HoodieCommitMetadata, HoodieCompactionPlan,
    HoodieCompactionStrategy, HoodieWriteStat, InstantContent, WriteOperationType,
};
use arbor_timeline::{
    Action, ActiveTimeline, Instant, InstantTime, InstantTimeGenerator, State, TableLayout,
    TimelineError,
};
use bytes::{Bytes, BytesMut};

use super::compaction::{data_schema_json, COMPACTION_PLAN_VERSION};
use super::options::CommitResult;
use crate::error::{Result, TableError};
use crate::read::{CacheMode, ListingSource, OpenOptions, TableReader};

/// `hoodie.log.compaction.blocks.threshold`: log files a slice needs to be log-compacted.
pub const LOG_COMPACTION_THRESHOLD_KEY: &str = "hoodie.log.compaction.blocks.threshold";
/// Its default (Java's).
pub const DEFAULT_LOG_COMPACTION_THRESHOLD: usize = 5;
/// The executor Java names in a log compaction plan.
pub const LOG_COMPACTION_EXECUTOR: &str =
    "org.apache.hudi.table.action.compact.LogCompactionExecutionHelper";

/// Schedules a log compaction of every slice with at least `threshold` log files (groups under
/// a pending compaction, log compaction or clustering, and replaced groups, left out):
/// writes `<t>.logcompaction.requested`. `None` when no slice qualifies.
pub async fn schedule_log_compaction(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
    threshold: usize,
) -> Result<Option<InstantTime>> {
    let Some(plan) = plan_log_compaction(storage, layout, threshold).await? else {
        return Ok(None);
    };
    super::compaction::write_requested_plan(storage, layout, generator, Action::LogCompaction, plan)
        .await
        .map(Some)
}

/// The plan [`schedule_log_compaction`] would write, writing nothing; `None` when no slice
/// qualifies.
pub async fn plan_log_compaction(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    threshold: usize,
) -> Result<Option<HoodieCompactionPlan>> {
    let reader = TableReader::open_view_opts(
        storage.clone(),
        OpenOptions::new()
            .listing(ListingSource::Auto)
            .cache(CacheMode::Bypass),
    )
    .await?;
    let view = reader.view();
    let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let mut excluded = super::compaction::busy_file_groups(view);
    for pending in tl.filter(
        &[Action::LogCompaction],
        &[State::Requested, State::Inflight],
    ) {
        for op in plan_of(&tl, &pending.requested_time)
            .await?
            .operations
            .iter()
            .flatten()
        {
            excluded.insert((
                op.partition_path.clone().unwrap_or_default(),
                op.file_id.clone().unwrap_or_default(),
            ));
        }
    }
    // Completed log compactions: a slice's log files up to the last one it wrote count once.
    let compactions: BTreeSet<InstantTime> = tl
        .completed()
        .into_iter()
        .filter(|i| i.action == Action::DeltaCommit)
        .filter(|i| {
            tl.get(&i.requested_time, Action::LogCompaction)
                .is_some_and(|f| f.pending_action == Action::LogCompaction)
        })
        .map(|i| i.requested_time)
        .collect();
    let operations = super::compaction::operations_for(view, &excluded, |slice| {
        effective_log_files(slice, &compactions) >= threshold.max(2)
    })
    .await?;
    if operations.is_empty() {
        return Ok(None);
    }
    Ok(Some(HoodieCompactionPlan {
        operations: Some(operations),
        extra_metadata: None,
        version: Some(COMPACTION_PLAN_VERSION),
        strategy: Some(HoodieCompactionStrategy {
            compactor_class_name: Some(LOG_COMPACTION_EXECUTOR.to_string()),
            ..HoodieCompactionStrategy::default()
        }),
        preserve_hoodie_metadata: Some(true),
        missing_schedule_partitions: Some(Vec::new()),
    }))
}

/// The log files of `slice` a reader still merges one by one: those after the last file a
/// log compaction wrote, plus that file.
fn effective_log_files(slice: &FileSlice, compactions: &BTreeSet<InstantTime>) -> usize {
    match slice
        .log_files
        .iter()
        .rposition(|l| compactions.contains(&l.delta_commit_time))
    {
        Some(last) => slice.log_files.len() - last,
        None => slice.log_files.len(),
    }
}

async fn plan_of(tl: &ActiveTimeline, time: &InstantTime) -> Result<HoodieCompactionPlan> {
    let requested = Instant::requested(time.clone(), Action::LogCompaction);
    let key = tl.key_of(&requested)?;
    Ok(decode(&tl.read(&requested).await?, &key)?)
}

/// Runs every pending log compaction, oldest first.
pub async fn run_pending_log_compactions(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
) -> Result<Vec<CommitResult>> {
    let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let times: BTreeSet<InstantTime> = tl
        .filter(
            &[Action::LogCompaction],
            &[State::Requested, State::Inflight],
        )
        .into_iter()
        .map(|i| i.requested_time)
        .collect();
    let mut out = Vec::new();
    for t in times {
        out.push(run_log_compaction(storage, layout, &t, generator).await?);
    }
    Ok(out)
}

/// Executes log compaction `instant` (module doc): moves it to inflight (removing what an
/// earlier attempt wrote), writes one compacted log file per planned slice, records the MDT
/// deltacommit and completes `<t>_<c>.deltacommit` (`LOG_COMPACT`).
pub async fn run_log_compaction(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    instant: &InstantTime,
    generator: &InstantTimeGenerator,
) -> Result<CommitResult> {
    let mut tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let not_found = || TimelineError::InstantNotFound {
        instant: format!("{instant} (logcompaction)"),
    };
    let files = tl
        .get(instant, Action::LogCompaction)
        .cloned()
        .ok_or_else(not_found)?;
    if let Some(done) = &files.completed {
        return Err(TimelineError::AlreadyCompleted {
            instant: instant.to_string(),
            path: tl.key_of(done)?,
        }
        .into());
    }
    let requested = files.requested.clone().ok_or_else(not_found)?;
    let plan = plan_of(&tl, instant).await?;
    let operations = plan.operations.unwrap_or_default();
    let inflight = match files.inflight {
        Some(inflight) => {
            let partitions: BTreeSet<String> = operations
                .iter()
                .map(|o| o.partition_path.clone().unwrap_or_default())
                .collect();
            super::rollback::delete_files_written_by(storage, &partitions, instant).await?;
            inflight
        }
        None => tl.transition_to_inflight(&requested, Bytes::new()).await?,
    };
    let reader = TableReader::open_view(storage.clone()).await?;
    let schema_json = data_schema_json(&reader).await?;
    let avro = arbor_format::base::BaseFileWriter::avro_schema_with_meta_fields(&schema_json)?;
    let mut metadata = HoodieCommitMetadata {
        partition_to_write_stats: Some(BTreeMap::new()),
        compacted: Some(false),
        version: Some(1),
        ..HoodieCommitMetadata::default()
    };
    let mut files_written = 0usize;
    for (index, op) in operations.iter().enumerate() {
        let slice = slice_of(storage, instant, index, op).await?;
        if let Some(stat) = compact_logs(storage, &reader, instant, index, &slice, &avro).await? {
            metadata.add_write_stat(slice.partition.clone(), stat);
            files_written += 1;
        }
    }
    metadata.insert_extra(arbor_timeline::avro::SCHEMA_KEY, &schema_json);
    metadata.set_operation_type(WriteOperationType::LogCompact);
    let touched: BTreeSet<String> = metadata.write_stats().map(|(p, _)| p.to_string()).collect();
    super::mdt_sync::record_instant(
        storage,
        instant,
        &metadata,
        &touched,
        // The records stay in their file groups: no index changes.
        Some(&arbor_mdt::index_writer::RecordIndexDelta::default()),
        Some(&super::secondary_index::unchanged(storage.as_ref(), reader.config()).await?),
        generator,
    )
    .await?;
    let completion = tl.next_instant_time(generator).await?;
    let mut completed = inflight.with_state(State::Completed);
    completed.action = Action::DeltaCommit;
    completed.completion_time = Some(completion.clone());
    let bytes = encode_instant_for(&completed, &InstantContent::Commit(Box::new(metadata)))?;
    tl.complete(&inflight, completion.clone(), Bytes::from(bytes))
        .await?;
    Ok(CommitResult {
        instant: instant.clone(),
        completion_time: completion,
        action: Action::DeltaCommit,
        operation: WriteOperationType::LogCompact,
        inserted: 0,
        updated: 0,
        deleted: 0,
        files_written,
        file_groups_replaced: 0,
        skipped_stale: 0,
        schema_changes: Vec::new(),
        attempts: 1,
    })
}

fn bad_plan(instant: &InstantTime, index: usize, reason: impl std::fmt::Display) -> TableError {
    TableError::Unsupported {
        reason: format!("log compaction {instant}, operation {index}: {reason}"),
    }
}

/// The planned slice's log files (sizes from storage); the base file is not read.
async fn slice_of(
    storage: &Arc<dyn Storage>,
    instant: &InstantTime,
    index: usize,
    op: &arbor_timeline::avro::HoodieCompactionOperation,
) -> Result<FileSlice> {
    let partition = op.partition_path.clone().unwrap_or_default();
    let file_id = op
        .file_id
        .clone()
        .filter(|f| !f.is_empty())
        .ok_or_else(|| bad_plan(instant, index, "no file id"))?;
    let base = match op.base_instant_time.as_deref() {
        Some(t) if !t.is_empty() => InstantTime::parse(t)?,
        _ => return Err(bad_plan(instant, index, "no base instant time")),
    };
    let mut slice = FileSlice::new(&partition, &file_id, base);
    for path in op.delta_file_paths.iter().flatten() {
        let name = path.rsplit('/').next().unwrap_or(path);
        let size = storage.head(&join(&partition, name)).await?.size;
        slice
            .log_files
            .push(LogFile::parse(name, size).map_err(TableError::from_fsview)?);
    }
    slice.log_files.sort();
    Ok(slice)
}

/// Writes the compacted log file of one slice; `None` when its logs hold nothing committed.
async fn compact_logs(
    storage: &Arc<dyn Storage>,
    reader: &TableReader,
    instant: &InstantTime,
    index: usize,
    slice: &FileSlice,
    avro: &str,
) -> Result<Option<HoodieWriteStat>> {
    let (rows, deletes, mut instants) = reader.merge_log_only(slice).await?;
    if instants.is_empty() {
        return Ok(None);
    }
    instants.sort();
    instants.dedup();
    let header = vec![(HeaderKey::CompactedBlockTimes, instants.join(","))];
    let name = format!(".{}_{instant}.log.1_{index}-0-0", slice.file_id);
    let key = join(&slice.partition, &name);
    let mut bytes = BytesMut::new();
    let mut blocks = 0i64;
    if !deletes.is_empty() {
        bytes.extend_from_slice(&encode_delete_block_with(
            instant.as_str(),
            Some(avro),
            &deletes,
            &header,
        )?);
        blocks += 1;
    }
    let mut records = 0i64;
    if let Some(batch) = rows.filter(|b| b.num_rows() > 0) {
        records = i64::try_from(batch.num_rows()).unwrap_or(i64::MAX);
        let schema = arbor_format::avro_arrow::parse_avro_schema(avro)
            .map_err(|e| bad_plan(instant, index, e))?;
        let values = arbor_format::avro_arrow::batch_to_avro_records(&batch, &schema)
            .map_err(|e| bad_plan(instant, index, e))?;
        bytes.extend_from_slice(&encode_avro_data_block_with(
            instant.as_str(),
            avro,
            &values,
            &header,
        )?);
        blocks += 1;
    }
    let size = bytes.len() as u64;
    storage.put_if_absent(&key, bytes.freeze()).await?;
    let size = i64::try_from(size).unwrap_or(i64::MAX);
    Ok(Some(HoodieWriteStat {
        file_id: Some(slice.file_id.clone()),
        path: Some(key),
        prev_commit: Some(slice.base_instant.to_string()),
        num_writes: Some(records),
        num_deletes: Some(i64::try_from(deletes.len()).unwrap_or(i64::MAX)),
        num_update_writes: Some(records),
        num_inserts: Some(0),
        total_write_bytes: Some(size),
        total_write_errors: Some(0),
        partition_path: Some(slice.partition.clone()),
        total_log_blocks: Some(blocks),
        total_log_records: Some(records),
        file_size_in_bytes: Some(size),
        log_version: Some(1),
        log_offset: Some(0),
        base_file: slice.base_file.as_ref().map(|b| b.file_name()),
        ..HoodieWriteStat::default()
    }))
}
