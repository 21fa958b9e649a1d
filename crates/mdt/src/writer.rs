//! [`MdtWriter`]: creating the metadata table and recording each data instant's file changes in
//! its FILES partition as an MDT deltacommit with the same instant time (spec §6.5).
//!
//! # Protocol (the caller holds the data table's lock)
//! - [`MdtWriter::create`] writes, in order: the MDT `hoodie.properties`, the partition marker of
//!   `files`, `00000000000000000.deltacommit.requested`, the base HFile
//!   `files/files-0000-0_0-0-0_00000000000000000.hfile` holding the given listing, the inflight
//!   file, the completed deltacommit. Only then does the caller list `files` in the data table's
//!   `hoodie.table.metadata.partitions`; until that last step readers and writers ignore the MDT,
//!   and a new `create` first deletes whatever an interrupted one left.
//! - [`MdtWriter::commit_files`] for data instant `T` (inflight, not yet completed) writes
//!   `T.deltacommit.requested`, the log file `files/.files-0000-0_T.log.1_0-0-1` with one
//!   `HFILE_DATA` block (the touched partitions under `__all_partitions__`, one record per touched
//!   partition with its added and deleted files; partitions a clean removed marked deleted under
//!   `__all_partitions__`), `T.deltacommit.inflight`, and the completed
//!   deltacommit. The blocks stay invisible to readers while data `T` is pending
//!   ([`crate::validity`]); completing data `T` afterwards is the commit point of both.
//! - [`MdtWriter::rollback`] removes MDT instant `T` (its log files, then its completed,
//!   inflight and requested files). The caller runs it while data `T` is still pending (before
//!   the data rollback completes), so no reader ever uses the removed blocks.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_format::hfile::mdt::{encode_files_record, FilesRecord};
use arbor_format::hfile::mdt_column_stats::metadata_record_schema_json_for;
use arbor_format::hfile::{HFileRangedReader, HFileWriter, HFileWriterOptions};
use arbor_format::log::block::BlockMetadata;
use arbor_format::log::writer::encode_block;
use arbor_format::log::{BlockType, HeaderKey};
use arbor_storage::{Storage, StorageExt};
use arbor_timeline::avro::{
    encode_instant_for, HoodieCommitMetadata, HoodieWriteStat, InstantContent, WriteOperationType,
    SCHEMA_KEY,
};
use arbor_timeline::config::{keys, BaseFileFormat, RecordMergeMode, TableType, TableVersion};
use arbor_timeline::{
    Action, ActiveTimeline, Instant, InstantTime, InstantTimeGenerator, State, TableConfig,
    TableLayout,
};
use bytes::Bytes;

use crate::error::{MdtError, Result};
use crate::files::{FilesListing, FILES_PARTITION, MDT_BASE, MDT_META_DIR};
pub use crate::files_delta::FilesDelta;
use crate::files_delta::{delta_records, listing_records, to_i64};
use crate::index_writer::{
    delta_files, initial_files, RecordIndexDelta, RECORD_INDEX, RECORD_INDEX_INIT_INSTANT,
};
use crate::secondary_index::IndexDefinitions;
use crate::secondary_index_writer::{self as si_writer, SecondaryEntry, SecondaryIndexDeltas};
use crate::validity::{is_init_instant, FILES_INIT_INSTANT};
use arbor_format::hfile::mdt_index::RecordLocation;

/// The file id of the single FILES file group.
pub const FILES_FILE_ID: &str = "files-0000-0";

/// The write token arbor puts in MDT file names (one writer per instant, under the table lock).
const WRITE_TOKEN: &str = "0-0-1";

/// The key generator type of a metadata table.
const MDT_KEY_GENERATOR: &str = "HOODIE_TABLE_METADATA";

/// The payload class of a metadata table.
const MDT_PAYLOAD_CLASS: &str = "org.apache.hudi.metadata.HoodieMetadataPayload";

/// The merge strategy id of a metadata table.
const MDT_MERGE_STRATEGY: &str = "00000000-0000-0000-0000-000000000000";

/// Encodes records (sorted by key) as an HFile with the metadata record schema in its file info.
fn encode_hfile(
    records: &BTreeMap<String, FilesRecord>,
    path: &str,
    schema_json: &str,
) -> Result<Bytes> {
    let fmt = |source| MdtError::Format {
        path: path.to_string(),
        source,
    };
    let mut w = HFileWriter::new(HFileWriterOptions::default());
    w.set_file_info("schema", schema_json.as_bytes().to_vec());
    for (key, record) in records {
        let value = encode_files_record(record).map_err(fmt)?;
        w.append(key.as_bytes(), &value).map_err(fmt)?;
    }
    w.finish().map_err(fmt)
}

/// The config of the MDT of a data table named `data_name` of table version `version` (spec
/// §6.1). The MDT always carries its data table's version; at version 9 it has no
/// `hoodie.table.format` (as Spark 1.1 writes it) and keeps the payload class and the
/// all-zero merge strategy id of its `CUSTOM` merge mode.
pub fn metadata_table_config(data_name: &str, version: TableVersion) -> Result<TableConfig> {
    Ok(
        TableConfig::builder(format!("{data_name}_metadata"), TableType::MergeOnRead)
            .table_version(version)
            .database_name(None)
            .record_key_fields(["key"])
            .key_generator_type(MDT_KEY_GENERATOR)
            .merge_mode(RecordMergeMode::Custom)
            .base_file_format(BaseFileFormat::HFile)
            .populate_meta_fields(false)
            .property(keys::PAYLOAD_CLASS, MDT_PAYLOAD_CLASS)
            .property(keys::RECORD_MERGE_STRATEGY_ID, MDT_MERGE_STRATEGY)
            .property(keys::ARCHIVELOG_FOLDER, "history")
            .without(keys::TABLE_FORMAT)
            .without(keys::METADATA_PARTITIONS)
            .without(keys::METADATA_PARTITIONS_INFLIGHT)
            .build()?,
    )
}

/// Writes the metadata table of one data table. See the module doc for the protocol.
#[derive(Debug, Clone)]
pub struct MdtWriter {
    storage: Arc<dyn Storage>,
    layout: TableLayout,
    /// The MDT's table version (its `hoodie.properties`), which picks the record schema the
    /// FILES partition declares: Java 1.0's for 8, Java 1.1's for 9. The record bytes are the
    /// same under both; hudi-rs refuses a file slice whose blocks declare different schemas.
    version: u32,
}

impl MdtWriter {
    /// Opens the writer of an existing MDT (`None` when it has no `hoodie.properties`).
    pub async fn open(storage: Arc<dyn Storage>) -> Result<Option<MdtWriter>> {
        if !storage
            .exists(&arbor_timeline::layout::paths::properties_key(MDT_META_DIR))
            .await?
        {
            return Ok(None);
        }
        let config = TableConfig::load(storage.as_ref(), MDT_META_DIR).await?;
        let layout = TableLayout::from_config(MDT_META_DIR, &config)?;
        let version = config.version().code();
        Ok(Some(MdtWriter {
            storage,
            layout,
            version,
        }))
    }

    /// The `HoodieMetadataRecord` writer schema (JSON) of this MDT's table version, as its
    /// FILES blocks and base files declare it.
    pub fn record_schema_json(&self) -> &'static str {
        metadata_record_schema_json_for(self.version)
    }

    /// The MDT's timeline layout.
    pub fn layout(&self) -> &TableLayout {
        &self.layout
    }

    /// The storage rooted at the data table base.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Deletes everything under `.hoodie/metadata` (what an interrupted [`MdtWriter::create`]
    /// left, or an MDT the data table no longer lists). Returns the number of objects deleted.
    pub async fn remove_all(storage: &Arc<dyn Storage>) -> Result<usize> {
        let keys: Vec<String> = storage
            .list_all(MDT_BASE)
            .await?
            .into_iter()
            .map(|o| o.key)
            .filter(|k| k.starts_with(&format!("{MDT_BASE}/")))
            .collect();
        delete_keys(storage, &keys).await?;
        Ok(keys.len())
    }

    /// Creates the MDT of the data table configured by `data_config` with `listing` (the data
    /// table's committed files) as the initial FILES content, as the module doc describes.
    /// Anything already under `.hoodie/metadata` is deleted first: the caller must have checked
    /// that the data table does not list `files` in `hoodie.table.metadata.partitions`.
    pub async fn create(
        storage: Arc<dyn Storage>,
        data_config: &TableConfig,
        listing: &FilesListing,
        generator: &InstantTimeGenerator,
    ) -> Result<MdtWriter> {
        Self::remove_all(&storage).await?;
        let config = metadata_table_config(data_config.name(), data_config.version())?;
        TableConfig::create(storage.as_ref(), MDT_META_DIR, &config).await?;
        let layout = TableLayout::from_config(MDT_META_DIR, &config)?;
        let init = InstantTime::parse(FILES_INIT_INSTANT)?;
        let marker = format!(
            "#partition metadata\n#written by arbor\ncommitTime={init}\npartitionDepth=1\n"
        );
        storage
            .put(
                &format!("{MDT_BASE}/{FILES_PARTITION}/.hoodie_partition_metadata"),
                Bytes::from(marker),
            )
            .await?;
        let mut tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
        let requested = tl
            .create_requested(init.clone(), Action::DeltaCommit, Bytes::new())
            .await?;
        let name = format!("{FILES_FILE_ID}_{WRITE_TOKEN}_{init}.hfile");
        let rel = format!("{FILES_PARTITION}/{name}");
        let key = format!("{MDT_BASE}/{rel}");
        let bytes = encode_hfile(
            &listing_records(listing),
            &key,
            metadata_record_schema_json_for(config.version().code()),
        )?;
        let size = bytes.len() as u64;
        storage.put(&key, bytes).await?;
        let stat = HoodieWriteStat {
            file_id: Some(FILES_FILE_ID.to_string()),
            path: Some(rel),
            prev_commit: Some("null".to_string()),
            num_writes: Some(to_i64(listing.len() as u64 + 1)),
            num_inserts: Some(to_i64(listing.len() as u64 + 1)),
            total_write_bytes: Some(to_i64(size)),
            file_size_in_bytes: Some(to_i64(size)),
            partition_path: Some(FILES_PARTITION.to_string()),
            base_file: Some(name),
            ..HoodieWriteStat::default()
        };
        let writer = MdtWriter {
            storage,
            layout,
            version: config.version().code(),
        };
        writer
            .finish(
                &mut tl,
                &requested,
                vec![(FILES_PARTITION, stat)],
                generator,
            )
            .await?;
        Ok(writer)
    }

    /// Moves `requested` to inflight and completes it with commit metadata holding `stats`
    /// (MDT partition, stat).
    pub(crate) async fn finish(
        &self,
        tl: &mut ActiveTimeline,
        requested: &Instant,
        stats: Vec<(&str, HoodieWriteStat)>,
        generator: &InstantTimeGenerator,
    ) -> Result<Instant> {
        let inflight = tl.transition_to_inflight(requested, Bytes::new()).await?;
        let mut meta = HoodieCommitMetadata {
            partition_to_write_stats: Some(BTreeMap::new()),
            compacted: Some(false),
            version: Some(1),
            ..HoodieCommitMetadata::default()
        };
        for (partition, stat) in stats {
            meta.add_write_stat(partition.to_string(), stat);
        }
        meta.insert_extra(SCHEMA_KEY, self.record_schema_json());
        meta.set_operation_type(WriteOperationType::UpsertPrepped);
        let completion = tl.next_instant_time(generator).await?;
        let mut completed = inflight.with_state(State::Completed);
        completed.completion_time = Some(completion.clone());
        let bytes = encode_instant_for(&completed, &InstantContent::Commit(Box::new(meta)))?;
        Ok(tl
            .complete(&inflight, completion, Bytes::from(bytes))
            .await?)
    }

    /// The state of MDT instant `time` (`None` when the MDT timeline has no file for it).
    pub async fn instant_state(&self, time: &InstantTime) -> Result<Option<State>> {
        let tl = ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
        Ok(tl
            .get(time, Action::DeltaCommit)
            .and_then(|f| f.latest())
            .map(|i| i.state))
    }

    /// Records `delta` as MDT deltacommit `time` (the time of the data instant, which must be
    /// inflight and stay pending until this returns). Fails with `Timeline(DuplicateInstant)`
    /// when the MDT already has an instant `time`: [`MdtWriter::rollback`] it first.
    pub async fn commit_files(
        &self,
        time: &InstantTime,
        delta: &FilesDelta,
        generator: &InstantTimeGenerator,
    ) -> Result<Instant> {
        self.commit(time, delta, None, &SecondaryIndexDeltas::new(), generator)
            .await
    }

    /// The number of record-index file groups (0 when the MDT has no record index), from the
    /// names in the `record_index` directory.
    pub async fn record_index_groups(&self) -> Result<usize> {
        let (objects, _) = self
            .storage
            .list_dir(&format!("{MDT_BASE}/{RECORD_INDEX}"))
            .await?;
        let ids: BTreeSet<String> = objects
            .iter()
            .filter_map(|o| o.key.rsplit('/').next())
            .map(|n| n.trim_start_matches('.'))
            .filter(|n| n.starts_with("record-index-"))
            .filter_map(|n| n.split('_').next())
            .map(str::to_string)
            .collect();
        Ok(ids.len())
    }

    /// Creates the record index (see [`crate::index_writer`]) holding `entries`, with `groups`
    /// file groups, as MDT deltacommit `00000000000000001`. The caller then lists
    /// `record_index` in the data table's `hoodie.table.metadata.partitions`. Anything a
    /// previous interrupted initialisation left is removed first.
    pub async fn init_record_index(
        &self,
        entries: &BTreeMap<String, RecordLocation>,
        groups: usize,
        generator: &InstantTimeGenerator,
    ) -> Result<()> {
        let time = InstantTime::parse(RECORD_INDEX_INIT_INSTANT)?;
        if self.instant_state(&time).await?.is_some() {
            self.rollback_init(&time).await?;
        }
        let stale: Vec<String> = self
            .storage
            .list_all(&format!("{MDT_BASE}/{RECORD_INDEX}"))
            .await?
            .into_iter()
            .map(|o| o.key)
            .collect();
        delete_keys(&self.storage, &stale).await?;
        let mut tl = ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
        let requested = tl
            .create_requested(time.clone(), Action::DeltaCommit, Bytes::new())
            .await?;
        let marker = format!(
            "#partition metadata\n#written by arbor\ncommitTime={time}\npartitionDepth=1\n"
        );
        self.storage
            .put(
                &format!("{MDT_BASE}/{RECORD_INDEX}/.hoodie_partition_metadata"),
                Bytes::from(marker),
            )
            .await?;
        let mut stats = Vec::new();
        for (rel, bytes, count) in initial_files(entries, groups)? {
            let size = to_i64(bytes.len() as u64);
            let name = rel.rsplit('/').next().unwrap_or(&rel).to_string();
            let file_id = name.split('_').next().unwrap_or_default().to_string();
            self.storage
                .put(&format!("{MDT_BASE}/{rel}"), bytes)
                .await?;
            stats.push((
                RECORD_INDEX,
                HoodieWriteStat {
                    file_id: Some(file_id),
                    path: Some(rel),
                    prev_commit: Some("null".to_string()),
                    num_writes: Some(to_i64(count as u64)),
                    num_inserts: Some(to_i64(count as u64)),
                    total_write_bytes: Some(size),
                    file_size_in_bytes: Some(size),
                    partition_path: Some(RECORD_INDEX.to_string()),
                    base_file: Some(name),
                    ..HoodieWriteStat::default()
                },
            ));
        }
        self.finish(&mut tl, &requested, stats, generator).await?;
        Ok(())
    }

    /// The number of file groups of secondary-index partition `partition` (0 when absent) and
    /// the latest instant of their base files (`"null"` when none), from the directory's names.
    pub async fn index_groups(&self, partition: &str) -> Result<(usize, String)> {
        let prefix = si_writer::secondary_index_file_prefix(partition);
        let (objects, _) = self
            .storage
            .list_dir(&format!("{MDT_BASE}/{partition}"))
            .await?;
        let mut ids = BTreeSet::new();
        let mut base = None;
        for name in objects.iter().filter_map(|o| o.key.rsplit('/').next()) {
            let plain = name.trim_start_matches('.');
            if !plain.starts_with(&prefix) {
                continue;
            }
            if let Some(id) = plain.split('_').next() {
                ids.insert(id.to_string());
            }
            if let Some(stem) = name.strip_suffix(".hfile") {
                let instant = stem.rsplit('_').next().map(str::to_string);
                base = base.max(instant);
            }
        }
        Ok((ids.len(), base.unwrap_or_else(|| "null".to_string())))
    }

    /// Whether the entries of `partition` are placed by the hash of their value only (index
    /// version V2+), from `index.json` and the data table's version.
    async fn hashes_value_only(&self, partition: &str) -> Result<bool> {
        let Some(defs) = IndexDefinitions::load(self.storage.as_ref()).await? else {
            return Ok(false);
        };
        let Some(def) = defs.get(partition) else {
            return Ok(false);
        };
        let config = TableConfig::load(
            self.storage.as_ref(),
            arbor_timeline::layout::DEFAULT_META_DIR,
        )
        .await?;
        Ok(def.hashes_value_only(config.version().code()))
    }

    /// Creates secondary-index partition `partition` holding `entries` with `groups` file
    /// groups placed by the hash mode `hash_value_only`, as an MDT deltacommit with the next
    /// free initialisation time (`000000000000000NN`, after every initialisation instant the
    /// MDT timeline has, and at least `00000000000000002`: `…0` is FILES' and `…1` stays the
    /// record index's). Anything under the partition and any pending initialisation instant
    /// (an interrupted initialisation) is removed first. The caller then lists `partition` in
    /// the data table's `hoodie.table.metadata.partitions`. Returns the instant used.
    pub async fn init_secondary_index(
        &self,
        partition: &str,
        entries: &BTreeSet<SecondaryEntry>,
        groups: usize,
        hash_value_only: bool,
        generator: &InstantTimeGenerator,
    ) -> Result<InstantTime> {
        let (time, mut tl, requested) = self.begin_init(partition).await?;
        let mut stats = Vec::new();
        for (rel, bytes, count) in
            si_writer::initial_files(partition, entries, groups, hash_value_only, &time)?
        {
            let size = to_i64(bytes.len() as u64);
            let name = rel.rsplit('/').next().unwrap_or(&rel).to_string();
            let file_id = name.split('_').next().unwrap_or_default().to_string();
            self.storage
                .put(&format!("{MDT_BASE}/{rel}"), bytes)
                .await?;
            stats.push((
                partition,
                HoodieWriteStat {
                    file_id: Some(file_id),
                    path: Some(rel),
                    prev_commit: Some("null".to_string()),
                    num_writes: Some(to_i64(count as u64)),
                    num_inserts: Some(to_i64(count as u64)),
                    total_write_bytes: Some(size),
                    file_size_in_bytes: Some(size),
                    partition_path: Some(partition.to_string()),
                    base_file: Some(name),
                    ..HoodieWriteStat::default()
                },
            ));
        }
        self.finish(&mut tl, &requested, stats, generator).await?;
        Ok(time)
    }

    /// Starts the initialisation of MDT partition `partition` (secondary index or stats): rolls
    /// back pending initialisation instants, picks the next free initialisation time
    /// (`000000000000000NN`, at least `…2`), removes anything under the partition, creates the
    /// requested instant and the partition marker. Returns the time, the timeline and the
    /// requested instant.
    pub(crate) async fn begin_init(
        &self,
        partition: &str,
    ) -> Result<(InstantTime, ActiveTimeline, Instant)> {
        let tl = ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
        for i in tl.pending() {
            if is_init_instant(&i.requested_time) {
                self.rollback_init(&i.requested_time).await?;
            }
        }
        let tl = ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
        let next = tl
            .instants()
            .into_iter()
            .map(|i| i.requested_time)
            .filter(is_init_instant)
            .filter_map(|t| t.as_str().parse::<u64>().ok())
            .max()
            // 0 is FILES', 1 the record index's (even when it does not exist yet).
            .map_or(2, |n| (n + 1).max(2));
        let time = InstantTime::parse(&format!("{next:017}"))?;
        let stale: Vec<String> = self
            .storage
            .list_all(&format!("{MDT_BASE}/{partition}"))
            .await?
            .into_iter()
            .map(|o| o.key)
            .filter(|k| k.starts_with(&format!("{MDT_BASE}/{partition}/")))
            .collect();
        delete_keys(&self.storage, &stale).await?;
        let mut tl = ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
        let requested = tl
            .create_requested(time.clone(), Action::DeltaCommit, Bytes::new())
            .await?;
        let marker = format!(
            "#partition metadata\n#written by arbor\ncommitTime={time}\npartitionDepth=1\n"
        );
        self.storage
            .put(
                &format!("{MDT_BASE}/{partition}/.hoodie_partition_metadata"),
                Bytes::from(marker),
            )
            .await?;
        Ok((time, tl, requested))
    }

    /// Removes an initialisation instant of a partition and its timeline files (only for an
    /// initialisation that is being redone).
    async fn rollback_init(&self, time: &InstantTime) -> Result<()> {
        let tl = ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
        if let Some(files) = tl.get(time, Action::DeltaCommit) {
            for i in [&files.completed, &files.inflight, &files.requested]
                .into_iter()
                .flatten()
            {
                delete_keys(&self.storage, &[self.layout.instant_key(i)?]).await?;
            }
        }
        Ok(())
    }

    /// Records data instant `time`'s change: `files` in FILES, when given (and the MDT has a
    /// record index) `record_index` in RECORD_INDEX, and each change of `secondary` in its
    /// `secondary_index_<name>` partition (skipped when the MDT has no such partition), as one
    /// MDT deltacommit `time` (module doc). Fails with `Timeline(DuplicateInstant)` when the
    /// MDT already has an instant `time`.
    pub async fn commit(
        &self,
        time: &InstantTime,
        delta: &FilesDelta,
        record_index: Option<&RecordIndexDelta>,
        secondary: &SecondaryIndexDeltas,
        generator: &InstantTimeGenerator,
    ) -> Result<Instant> {
        let mut tl =
            ActiveTimeline::load_for_next_step(self.storage.clone(), self.layout.clone()).await?;
        let requested = tl
            .create_requested(time.clone(), Action::DeltaCommit, Bytes::new())
            .await?;
        let name = format!(".{FILES_FILE_ID}_{time}.log.1_{WRITE_TOKEN}");
        let rel = format!("{FILES_PARTITION}/{name}");
        let key = format!("{MDT_BASE}/{rel}");
        let records = delta_records(delta);
        let schema_json = self.files_schema_json(&tl).await;
        let hfile = encode_hfile(&records, &key, schema_json)?;
        let mut header = BlockMetadata::new();
        header.insert(HeaderKey::InstantTime, time.to_string());
        header.insert(HeaderKey::Schema, schema_json.to_string());
        let block = encode_block(BlockType::HfileData, &header, &hfile, &BlockMetadata::new())
            .map_err(|source| MdtError::Format {
                path: key.clone(),
                source,
            })?;
        let size = block.len() as u64;
        self.storage.put(&key, block).await?;
        let mut stats = Vec::new();
        if let Some(rli) = record_index.filter(|d| !d.is_empty()) {
            let groups = self.record_index_groups().await?;
            if groups > 0 {
                for (rel, bytes, stat) in delta_files(time, rli, groups)? {
                    self.storage
                        .put(&format!("{MDT_BASE}/{rel}"), bytes)
                        .await?;
                    stats.push((RECORD_INDEX, stat));
                }
            }
        }
        for (partition, si) in secondary.iter().filter(|(_, d)| !d.is_empty()) {
            let (groups, base) = self.index_groups(partition).await?;
            if groups == 0 {
                continue;
            }
            let value_only = self.hashes_value_only(partition).await?;
            for (rel, bytes, stat) in
                si_writer::delta_files(partition, time, si, groups, value_only, &base)?
            {
                self.storage
                    .put(&format!("{MDT_BASE}/{rel}"), bytes)
                    .await?;
                stats.push((partition.as_str(), stat));
            }
        }
        stats.extend(self.write_stats_logs(time, delta).await?);
        let base_instant = self.files_base_instant(&tl).await;
        let stat = HoodieWriteStat {
            file_id: Some(FILES_FILE_ID.to_string()),
            path: Some(rel),
            prev_commit: Some(base_instant),
            num_writes: Some(to_i64(records.len() as u64)),
            num_update_writes: Some(to_i64(records.len() as u64)),
            total_write_bytes: Some(to_i64(size)),
            file_size_in_bytes: Some(to_i64(size)),
            partition_path: Some(FILES_PARTITION.to_string()),
            log_version: Some(1),
            log_offset: Some(0),
            base_file: Some(String::new()),
            log_files: Some(vec![name]),
            total_log_blocks: Some(1),
            ..HoodieWriteStat::default()
        };
        stats.insert(0, (FILES_PARTITION, stat));
        self.finish(&mut tl, &requested, stats, generator).await
    }

    /// The record schema a new FILES log block declares: the one the file group's current base
    /// file declares (Java 1.1's when it has the column-stats `valueType` field, else Java
    /// 1.0's), because hudi-rs refuses a file slice whose blocks declare different schemas
    /// (tables arbor wrote at version 8 before it followed the version have 1.1 base files);
    /// the MDT version's schema when the base file cannot be found or read.
    async fn files_schema_json(&self, tl: &ActiveTimeline) -> &'static str {
        let fallback = self.record_schema_json();
        let instant = self.files_base_instant(tl).await;
        let dir = format!("{MDT_BASE}/{FILES_PARTITION}");
        let Ok((objects, _)) = self.storage.list_dir(&dir).await else {
            return fallback;
        };
        let head = format!("{dir}/{FILES_FILE_ID}_");
        let tail = format!("_{instant}.hfile");
        let Some(base) = objects
            .iter()
            .find(|o| o.key.starts_with(&head) && o.key.ends_with(&tail))
        else {
            return fallback;
        };
        let Ok(reader) = HFileRangedReader::open(self.storage.as_ref(), &base.key, base.size).await
        else {
            return fallback;
        };
        match reader.file_info_str("schema") {
            Some(schema) if schema.contains("\"valueType\"") => metadata_record_schema_json_for(9),
            Some(_) => metadata_record_schema_json_for(8),
            None => fallback,
        }
    }

    /// The latest completed MDT instant that wrote a FILES base file (`"null"` if none).
    async fn files_base_instant(&self, tl: &ActiveTimeline) -> String {
        tl.completed()
            .into_iter()
            .filter(|i| {
                i.action == Action::Commit || i.requested_time.as_str() == FILES_INIT_INSTANT
            })
            .map(|i| i.requested_time.to_string())
            .max()
            .unwrap_or_else(|| "null".to_string())
    }

    /// Removes MDT deltacommit `time`: every MDT file whose name carries `time` as its instant
    /// (log files `.<fileId>_<time>.log.*`), then its completed, inflight and requested timeline
    /// files. Returns false when the MDT had nothing of `time`. Idempotent: a crash part-way is
    /// finished by calling it again. The caller guarantees data instant `time` is pending (or
    /// absent) while this runs; the sentinel initialisation instant is refused.
    pub async fn rollback(&self, time: &InstantTime) -> Result<bool> {
        if is_init_instant(time) {
            return Err(MdtError::Invalid {
                path: MDT_META_DIR.to_string(),
                reason: format!("the initialisation instant {time} is never rolled back"),
            });
        }
        let mut keys: Vec<String> = Vec::new();
        let (_objects, dirs) = self.storage.list_dir(MDT_BASE).await?;
        for dir in dirs {
            let name = dir.rsplit('/').next().unwrap_or(&dir);
            if name.starts_with('.') {
                continue;
            }
            let (objects, _) = self.storage.list_dir(&dir).await?;
            let needle = format!("_{time}.log.");
            keys.extend(
                objects
                    .into_iter()
                    .map(|o| o.key)
                    .filter(|k| k.rsplit('/').next().is_some_and(|n| n.contains(&needle))),
            );
        }
        let tl = ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
        let mut timeline_keys = Vec::new();
        if let Some(files) = tl.get(time, Action::DeltaCommit) {
            for i in [&files.completed, &files.inflight, &files.requested]
                .into_iter()
                .flatten()
            {
                timeline_keys.push(self.layout.instant_key(i)?);
            }
        }
        if keys.is_empty() && timeline_keys.is_empty() {
            return Ok(false);
        }
        delete_keys(&self.storage, &keys).await?;
        // One at a time, completed first: the instant never looks completed without its files'
        // deletion having been attempted, and requested goes last so a rerun still finds it.
        for k in timeline_keys {
            delete_keys(&self.storage, &[k]).await?;
        }
        Ok(true)
    }

    /// The MDT deltacommits (other than the initialisation instant) that are pending, oldest
    /// first.
    pub async fn pending_deltacommits(&self) -> Result<Vec<InstantTime>> {
        let tl = ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?;
        Ok(tl
            .pending()
            .into_iter()
            .filter(|i| i.action == Action::DeltaCommit)
            .map(|i| i.requested_time)
            .filter(|t| !is_init_instant(t))
            .collect())
    }
}

async fn delete_keys(storage: &Arc<dyn Storage>, keys: &[String]) -> Result<()> {
    Ok(storage.delete_all(keys).await?)
}
