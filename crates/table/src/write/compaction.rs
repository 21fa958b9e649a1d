//! Compaction of merge-on-read file groups (hudi-format §3.5, §4.5).
//!
//! # Scheduling
//! [`schedule_compaction`] plans one `HoodieCompactionOperation` per file group whose latest
//! slice has log files (groups under a pending compaction or clustering, and replaced groups,
//! are skipped), and writes `<t>.compaction.requested` holding the plan in the shape Spark 1.x
//! writes (plan version 2: file names, not paths; `preserveHoodieMetadata=false`; metrics
//! `TOTAL_LOG_FILES`, `TOTAL_LOG_FILES_SIZE` in bytes and the `TOTAL_IO_*` estimates in MB).
//!
//! From then on, v8 slicing (§4.5) makes `t` the base instant of a new slice in each planned
//! group: log files of deltacommits that complete after `t` join it, and readers merge it with
//! its predecessor until the compaction completes. This is only correct if every deltacommit
//! that completed before `t` is in the plan, so the caller holds the table lock while
//! scheduling, and writers pick completion times under the same lock. Writers must add to
//! existing file groups only through log files (never a new base file of an existing group).
//!
//! # Execution
//! [`run_compaction`] moves the instant to inflight (0 bytes, as Spark), merges each planned
//! slice with the reader's merge ([`TableReader::read_slice`]), writes
//! `<fileId>_<op>-0-0_<t>.parquet` keeping every record's `_hoodie_commit_time` and
//! `_hoodie_commit_seqno` (so incremental queries are unchanged), and completes `<t>_<c>.commit`
//! with `compacted=true`, operation `COMPACT` and one write stat per new base file
//! (`prevCommit` = the base instant, `prevBaseFile`).
//!
//! # Crashes
//! Until `<t>_<c>.commit` exists, `t` is a pending compaction: its output files are not
//! committed and readers see exactly the state before the compaction. The pending compaction is
//! completed by running it again ([`run_compaction`] or [`run_pending_compactions`]): a re-run of
//! an inflight compaction first deletes the base files a previous attempt wrote (the planned file
//! groups' files named with `t`), then writes them anew. [`super::rollback::rollback_instant`]
//! removes a pending compaction instead (its output files and its plan).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_format::avro_arrow::arrow_schema_to_avro_json;
use arbor_format::base::BaseFileWriter;
use arbor_format::meta;
use arbor_fsview::slice::join;
use arbor_fsview::{
    parse_data_file_name, BaseFile, DataFile, FileSlice, FileSystemView, Horizon, LogFile,
    StorageListing,
};
use arbor_storage::{Storage, MAX_DELETE_BATCH};
use arbor_timeline::avro::{
    decode, decode_instant, encode_instant_for, HoodieCommitMetadata, HoodieCompactionOperation,
    HoodieCompactionPlan, HoodieWriteStat, InstantContent, WriteOperationType,
};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::naming::LayoutVersion;
use arbor_timeline::{
    Action, ActiveTimeline, Instant, InstantTime, InstantTimeGenerator, State, TableConfig,
    TableLayout, TimelineError,
};
use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Schema};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;

use super::options::CommitResult;
use crate::error::{Result, TableError};
use crate::read::{CacheMode, ListingSource, OpenOptions, TableReader};

/// The compaction plan version arbor writes: 2, as Spark 1.x (operations name files, not
/// paths).
pub const COMPACTION_PLAN_VERSION: i32 = 2;

const MB: f64 = 1024.0 * 1024.0;

/// Schedules a compaction of every file group whose latest slice has log files: writes
/// `<t>.compaction.requested` with a `HoodieCompactionPlan`. `None` when nothing needs
/// compacting (nothing is written then). The caller holds the table lock (module doc).
///
/// Errors: `Unsupported` for a copy-on-write table; timeline, listing and storage failures.
pub async fn schedule_compaction(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
) -> Result<Option<InstantTime>> {
    let config = TableConfig::load(storage.as_ref(), &layout.meta_dir).await?;
    if config.table_type() != TableType::MergeOnRead {
        return Err(TableError::Unsupported {
            reason: format!(
                "compaction of table {:?}: only merge-on-read tables are compacted",
                config.name()
            ),
        });
    }
    let Some(plan) = plan_compaction(storage, layout).await? else {
        return Ok(None);
    };
    write_requested_plan(storage, layout, generator, Action::Compaction, plan)
        .await
        .map(Some)
}

/// Writes `plan` as a new `<t>.<action>.requested` (`action`: compaction or log compaction)
/// at the next instant time and returns that time.
pub(crate) async fn write_requested_plan(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
    action: Action,
    plan: HoodieCompactionPlan,
) -> Result<InstantTime> {
    let mut tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let time = tl.next_instant_time(generator).await?;
    let requested = Instant::requested(time.clone(), action);
    let bytes = encode_instant_for(&requested, &InstantContent::Compaction(Box::new(plan)))?;
    tl.create_requested(time.clone(), action, Bytes::from(bytes))
        .await?;
    Ok(time)
}

/// The plan [`schedule_compaction`] would write, without writing anything: one operation per
/// file group (ordered by partition, then file id) whose latest slice has log files, skipping
/// groups that are replaced or under a pending compaction or clustering. `None` when no group
/// qualifies.
///
/// The slices are those readers see: listed through the metadata table's FILES partition when
/// the table has one (else by directory listing). A directory listing shows only the files
/// stored at the table's own location, so on a shallow clone it would miss every inherited
/// base file (which lives in a source) and plan log-only slices whose compaction drops the
/// base file's rows.
pub async fn plan_compaction(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
) -> Result<Option<HoodieCompactionPlan>> {
    let reader;
    let loaded;
    let view: &FileSystemView = if layout.meta_dir == DEFAULT_META_DIR {
        reader = TableReader::open_view_opts(
            storage.clone(),
            OpenOptions::new()
                .listing(ListingSource::Auto)
                .cache(CacheMode::Bypass),
        )
        .await?;
        reader.view()
    } else {
        let listing = Arc::new(StorageListing::new(storage.clone()));
        loaded = FileSystemView::load(storage.clone(), layout.clone(), listing)
            .await
            .map_err(TableError::from_fsview)?;
        &loaded
    };
    let excluded = busy_file_groups(view);
    let operations = operations_for(view, &excluded, |slice| !slice.log_files.is_empty()).await?;
    if operations.is_empty() {
        return Ok(None);
    }
    Ok(Some(HoodieCompactionPlan {
        operations: Some(operations),
        extra_metadata: None,
        version: Some(COMPACTION_PLAN_VERSION),
        strategy: None,
        preserve_hoodie_metadata: Some(false),
        missing_schedule_partitions: Some(Vec::new()),
    }))
}

/// One operation per file group of `view` not in `excluded` whose latest slice `wanted`, in
/// partition order.
pub(crate) async fn operations_for(
    view: &FileSystemView,
    excluded: &BTreeSet<(String, String)>,
    wanted: impl Fn(&FileSlice) -> bool,
) -> Result<Vec<HoodieCompactionOperation>> {
    let mut operations = Vec::new();
    for partition in view
        .partitions()
        .await
        .map_err(TableError::from_fsview)?
        .iter()
    {
        let groups = view
            .file_groups(partition, &Horizon::Latest)
            .await
            .map_err(TableError::from_fsview)?;
        for group in groups {
            if excluded.contains(&(group.partition.clone(), group.file_id.clone())) {
                continue;
            }
            if let Some(slice) = group.latest_slice().filter(|s| wanted(s)) {
                operations.push(operation_of(slice));
            }
        }
    }
    Ok(operations)
}

/// File groups a new compaction plan leaves out: under a pending compaction or clustering, or
/// replaced.
pub(crate) fn busy_file_groups(view: &FileSystemView) -> BTreeSet<(String, String)> {
    let mut busy: BTreeSet<(String, String)> = view
        .pending_compaction_operations()
        .iter()
        .map(|op| (op.partition.clone(), op.file_id.clone()))
        .collect();
    busy.extend(view.pending_clustering_file_groups().keys().cloned());
    busy.extend(
        view.replaced_file_groups()
            .iter()
            .map(|r| (r.partition.clone(), r.file_id.clone())),
    );
    busy
}

pub(crate) fn operation_of(slice: &FileSlice) -> HoodieCompactionOperation {
    let log_bytes: u64 = slice.log_files.iter().map(|l| l.size).sum();
    let base_bytes = slice.base_file.as_ref().map_or(0, |b| b.size);
    // As Java's compaction strategy: read = base + logs, write = the base file's size.
    let read_mb = (base_bytes + log_bytes) as f64 / MB;
    let write_mb = base_bytes as f64 / MB;
    let metrics = BTreeMap::from([
        ("TOTAL_LOG_FILES".to_string(), slice.log_files.len() as f64),
        ("TOTAL_LOG_FILES_SIZE".to_string(), log_bytes as f64),
        ("TOTAL_IO_READ_MB".to_string(), read_mb),
        ("TOTAL_IO_WRITE_MB".to_string(), write_mb),
        ("TOTAL_IO_MB".to_string(), read_mb + write_mb),
    ]);
    HoodieCompactionOperation {
        base_instant_time: Some(slice.base_instant.to_string()),
        delta_file_paths: Some(slice.log_files.iter().map(LogFile::file_name).collect()),
        data_file_path: slice.base_file.as_ref().map(BaseFile::file_name),
        file_id: Some(slice.file_id.clone()),
        partition_path: Some(slice.partition.clone()),
        metrics: Some(metrics),
        bootstrap_file_path: None,
    }
}

/// Executes a scheduled compaction: merges each planned slice into a new base file named with
/// the compaction instant and completes `<t>_<c>.commit` (`compacted=true`, operation
/// `COMPACT`). A compaction left inflight by a crash is executed again from its plan (module
/// doc). Every record keeps its commit time and sequence number.
///
/// The caller excludes other runners of the same compaction (a re-run deletes the output of
/// earlier attempts): [`crate::Table::compact`] holds the table lock; the free function does not.
///
/// Errors: `Timeline(InstantNotFound)` when `instant` is not a compaction on the timeline;
/// `Timeline(AlreadyCompleted)` when it is completed; `Corrupt` (naming the plan file) when an
/// operation has an invalid partition path, file id, base instant or file name, checked before
/// anything is written or deleted; `Unsupported` when a slice cannot be merged
/// (custom merge mode, no meta columns); storage and format failures (the compaction then stays
/// pending and can be run again).
pub async fn run_compaction(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    instant: &InstantTime,
    generator: &InstantTimeGenerator,
) -> Result<CommitResult> {
    let mut tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let not_found = || TimelineError::InstantNotFound {
        instant: format!("{instant} (compaction)"),
    };
    let files = tl
        .get(instant, Action::Compaction)
        .cloned()
        .ok_or_else(not_found)?;
    if files.pending_action != Action::Compaction {
        return Err(not_found().into());
    }
    if let Some(done) = &files.completed {
        return Err(TimelineError::AlreadyCompleted {
            instant: instant.to_string(),
            path: tl.key_of(done)?,
        }
        .into());
    }
    let requested = files
        .requested
        .clone()
        .ok_or_else(|| TimelineError::InvalidTransition {
            instant: format!("{instant}.compaction"),
            reason: "the compaction has no requested plan".into(),
        })?;
    let plan_key = tl.key_of(&requested)?;
    let plan: HoodieCompactionPlan = decode(&tl.read(&requested).await?, &plan_key)?;
    let operations = plan.operations.unwrap_or_default();
    validate_operations(&plan_key, &operations)?;

    let inflight = match files.inflight {
        Some(inflight) => {
            remove_partial_output(storage, &operations, instant).await?;
            inflight
        }
        None => tl.transition_to_inflight(&requested, Bytes::new()).await?,
    };

    let reader = TableReader::open_view(storage.clone()).await?;
    let data_schema_json = data_schema_json(&reader).await?;
    let avro_schema = BaseFileWriter::avro_schema_with_meta_fields(&data_schema_json)?;
    let mut metadata = HoodieCommitMetadata::default();
    let mut files_written = 0usize;
    for (index, op) in operations.iter().enumerate() {
        let (partition, stat) =
            compact_one(storage, &reader, instant, index, op, &avro_schema).await?;
        metadata.add_write_stat(partition, stat);
        files_written += 1;
    }
    if metadata.partition_to_write_stats.is_none() {
        metadata.partition_to_write_stats = Some(BTreeMap::new());
    }
    metadata.compacted = Some(true);
    metadata.insert_extra(arbor_timeline::avro::SCHEMA_KEY, data_schema_json);
    metadata.set_operation_type(WriteOperationType::Compact);

    super::mdt_sync::record_instant(
        storage,
        instant,
        &metadata,
        &std::collections::BTreeSet::new(),
        // Compaction keeps every record in its file group: no record-index change.
        Some(&arbor_mdt::index_writer::RecordIndexDelta::default()),
        // ... and no secondary-index change either.
        Some(
            &super::secondary_index::unchanged(
                storage.as_ref(),
                &arbor_timeline::TableConfig::load(
                    storage.as_ref(),
                    arbor_timeline::layout::DEFAULT_META_DIR,
                )
                .await?,
            )
            .await?,
        ),
        generator,
    )
    .await?;
    let completion = tl.next_instant_time(generator).await?;
    let mut completed = inflight.with_state(State::Completed);
    completed.action = Action::Commit;
    completed.completion_time = Some(completion.clone());
    let bytes = encode_instant_for(&completed, &InstantContent::Commit(Box::new(metadata)))?;
    tl.complete(&inflight, completion.clone(), Bytes::from(bytes))
        .await?;
    Ok(CommitResult {
        instant: instant.clone(),
        completion_time: completion,
        action: Action::Commit,
        operation: WriteOperationType::Compact,
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

/// Runs every pending compaction (requested or inflight), oldest first. Returns what each did.
pub async fn run_pending_compactions(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
) -> Result<Vec<CommitResult>> {
    let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let mut out = Vec::new();
    for pending in tl.filter(&[Action::Compaction], &[State::Requested, State::Inflight]) {
        out.push(run_compaction(storage, layout, &pending.requested_time, generator).await?);
    }
    Ok(out)
}

/// Checks every operation of a compaction plan before its fields become storage keys: the
/// partition path is a valid relative partition (not under `.hoodie`), the file id is non-empty
/// without `/`, `_` or control characters, the base instant parses, and the base and log file
/// names parse as data files of that file group. Errors name the plan file.
fn validate_operations(plan_key: &str, operations: &[HoodieCompactionOperation]) -> Result<()> {
    for (index, op) in operations.iter().enumerate() {
        let corrupt = |reason: String| TableError::Corrupt {
            path: plan_key.to_string(),
            reason: format!("compaction operation {index}: {reason}"),
        };
        let partition = op.partition_path.as_deref().unwrap_or_default();
        arbor_fsview::listing::validate_partition(partition)
            .map_err(|e| corrupt(format!("partition path {partition:?}: {e}")))?;
        let first = partition.split('/').next().unwrap_or_default();
        if first.starts_with(".hoodie") {
            return Err(corrupt(format!(
                "partition path {partition:?} is inside the meta directory"
            )));
        }
        let file_id = op.file_id.as_deref().unwrap_or_default();
        if file_id.is_empty()
            || file_id == "."
            || file_id == ".."
            || file_id.contains(['/', '_'])
            || file_id.chars().any(char::is_control)
        {
            return Err(corrupt(format!("invalid file id {file_id:?}")));
        }
        match op.base_instant_time.as_deref() {
            Some(t) if !t.is_empty() => {
                InstantTime::parse(t)
                    .map_err(|e| corrupt(format!("base instant time {t:?}: {e}")))?;
            }
            _ => return Err(corrupt("no base instant time".into())),
        }
        if let Some(path) = op.data_file_path.as_deref().filter(|p| !p.is_empty()) {
            let name = file_name_of(path);
            match BaseFile::parse(name, 0) {
                Ok(b) if b.file_id == file_id => {}
                Ok(_) => {
                    return Err(corrupt(format!(
                        "base file {path:?} is not of file group {file_id}"
                    )))
                }
                Err(e) => return Err(corrupt(format!("base file {path:?}: {e}"))),
            }
        }
        for path in op.delta_file_paths.iter().flatten() {
            let name = file_name_of(path);
            match LogFile::parse(name, 0) {
                Ok(l) if l.file_id == file_id => {}
                Ok(_) => {
                    return Err(corrupt(format!(
                        "log file {path:?} is not of file group {file_id}"
                    )))
                }
                Err(e) => return Err(corrupt(format!("log file {path:?}: {e}"))),
            }
        }
    }
    Ok(())
}

fn file_name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Merges one planned slice and writes its new base file. Returns the partition and write stat.
async fn compact_one(
    storage: &Arc<dyn Storage>,
    reader: &TableReader,
    instant: &InstantTime,
    index: usize,
    op: &HoodieCompactionOperation,
    avro_schema: &str,
) -> Result<(String, HoodieWriteStat)> {
    let partition = op.partition_path.clone().unwrap_or_default();
    let bad_plan = |reason: String| TableError::Unsupported {
        reason: format!(
            "compaction {instant}, operation {index} (partition {partition:?}): {reason}"
        ),
    };
    let file_id = op
        .file_id
        .clone()
        .filter(|f| !f.is_empty())
        .ok_or_else(|| bad_plan("no file id".into()))?;
    let base_instant = match op.base_instant_time.as_deref() {
        Some(t) if !t.is_empty() => InstantTime::parse(t)?,
        _ => return Err(bad_plan("no base instant time".into())),
    };
    let mut slice = FileSlice::new(&partition, &file_id, base_instant.clone());
    let base_name = op
        .data_file_path
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(|p| file_name_of(p).to_string());
    if let Some(name) = &base_name {
        let size = storage.head(&join(&partition, name)).await?.size;
        slice.base_file = Some(BaseFile::parse(name, size).map_err(TableError::from_fsview)?);
    }
    for path in op.delta_file_paths.iter().flatten() {
        let name = file_name_of(path);
        let size = storage.head(&join(&partition, name)).await?.size;
        slice
            .log_files
            .push(LogFile::parse(name, size).map_err(TableError::from_fsview)?);
    }
    slice.log_files.sort();
    let merged = match reader.read_slice(&slice, None, false).await? {
        Some(b) => b,
        None => RecordBatch::new_empty(reader.schema().clone()),
    };
    let (data, keys, times, seqnos) = split_meta(&merged, &bad_plan)?;
    let extension = crate::write::base_format::of_table(reader.config())?.extension();
    let name = format!("{file_id}_{index}-0-0_{instant}.{extension}");
    let key = join(&partition, &name);
    let written = BaseFileWriter::new(instant.as_str(), name, partition.as_str(), avro_schema)
        .preserve_commit_metadata(times, seqnos)
        .write(storage.as_ref(), &key, &[data], &keys)
        .await?;
    let size = i64::try_from(written.size).unwrap_or(i64::MAX);
    let rows = i64::try_from(written.num_rows).unwrap_or(i64::MAX);
    let log_bytes: u64 = slice.log_files.iter().map(|l| l.size).sum();
    let stat = HoodieWriteStat {
        file_id: Some(file_id),
        path: Some(key),
        prev_commit: Some(base_instant.to_string()),
        num_writes: Some(rows),
        total_write_bytes: Some(size),
        total_write_errors: Some(0),
        partition_path: Some(partition.clone()),
        file_size_in_bytes: Some(size),
        prev_base_file: base_name,
        total_log_files_compacted: Some(i64::try_from(slice.log_files.len()).unwrap_or(i64::MAX)),
        total_log_size_compacted: Some(i64::try_from(log_bytes).unwrap_or(i64::MAX)),
        ..HoodieWriteStat::default()
    };
    Ok((partition, stat))
}

type SplitRows = (RecordBatch, Vec<String>, Vec<String>, Vec<String>);

/// Splits merged rows into data columns, record keys, commit times and sequence numbers.
fn split_meta(batch: &RecordBatch, bad: &dyn Fn(String) -> TableError) -> Result<SplitRows> {
    let strings = |name: &str| -> Result<Vec<String>> {
        let col = batch
            .column_by_name(name)
            .ok_or_else(|| bad(format!("merged rows have no {name} column")))?;
        let col = arrow::compute::cast(col, &DataType::Utf8)
            .map_err(|e| bad(format!("column {name}: {e}")))?;
        Ok(col
            .as_string::<i32>()
            .iter()
            .map(|v| v.unwrap_or_default().to_string())
            .collect())
    };
    let keys = strings(meta::RECORD_KEY)?;
    let times = strings(meta::COMMIT_TIME)?;
    let seqnos = strings(meta::COMMIT_SEQNO)?;
    if let Some(col) = batch.column_by_name(meta::RECORD_KEY) {
        if col.null_count() > 0 {
            return Err(bad("a merged record has a null record key".into()));
        }
    }
    let schema = batch.schema();
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if !meta::is_meta_column(field.name()) {
            fields.push(field.clone());
            columns.push(column.clone());
        }
    }
    let data = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| bad(format!("data columns: {e}")))?;
    Ok((data, keys, times, seqnos))
}

/// The Avro schema JSON of the table's data columns: `extraMetadata.schema` of the latest
/// completed write that has one, else `hoodie.table.create.schema`, else derived from the read
/// schema.
pub(crate) async fn data_schema_json(reader: &TableReader) -> Result<String> {
    let view = reader.view();
    let history = view.history();
    let layout = view.layout();
    for instant in history.completed_writes().iter().rev() {
        let bytes = history
            .read_completed_content(&instant.requested_time, instant.action)
            .await?;
        let key = layout.instant_key(instant)?;
        let legacy = layout.layout == LayoutVersion::V1 || instant.completion_time.is_none();
        let schema = match decode_instant(instant, &bytes, &key, legacy)? {
            InstantContent::Commit(m) => m.schema().map(str::to_string),
            InstantContent::ReplaceCommit(m) => m.schema().map(str::to_string),
            _ => None,
        };
        if let Some(s) = schema.filter(|s| !s.trim().is_empty()) {
            return Ok(s);
        }
    }
    let config = reader.config();
    if let Some(s) = config.get("hoodie.table.create.schema") {
        return Ok(s.to_string());
    }
    let fields: Vec<_> = reader
        .schema()
        .fields()
        .iter()
        .filter(|f| !meta::is_meta_column(f.name()))
        .cloned()
        .collect();
    let name = config.name();
    Ok(arrow_schema_to_avro_json(
        &Schema::new(fields),
        &format!("{name}_record"),
        &format!("hoodie.{name}"),
    )?)
}

/// Deletes the base files a crashed attempt of compaction `instant` wrote in the planned file
/// groups (they are uncommitted: the compaction is pending).
async fn remove_partial_output(
    storage: &Arc<dyn Storage>,
    operations: &[HoodieCompactionOperation],
    instant: &InstantTime,
) -> Result<()> {
    let mut groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for op in operations {
        if let Some(fid) = &op.file_id {
            groups
                .entry(op.partition_path.clone().unwrap_or_default())
                .or_default()
                .insert(fid.clone());
        }
    }
    let mut keys = Vec::new();
    for (partition, file_ids) in groups {
        let (objects, _) = storage.list_dir(&partition).await?;
        for o in objects {
            let name = file_name_of(&o.key);
            if let Ok(Some(DataFile::Base(b))) = parse_data_file_name(name, o.size) {
                if &b.instant_time == instant && file_ids.contains(&b.file_id) {
                    keys.push(o.key.clone());
                }
            }
        }
    }
    for chunk in keys.chunks(MAX_DELETE_BATCH) {
        for result in storage.delete_batch(chunk).await? {
            result?;
        }
    }
    Ok(())
}
