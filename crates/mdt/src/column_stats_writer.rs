//! Writing the COLUMN_STATS and PARTITION_STATS partitions: their initialisation from computed
//! records, and each data instant's change, recorded as log files of the MDT deltacommit that
//! records the instant's FILES change ([`crate::MdtWriter::commit`]).
//!
//! Layout (as Java writes it): `column_stats/` holds [`DEFAULT_COLUMN_STATS_GROUPS`] file
//! groups `col-stats-0000-0` ..., `partition_stats/` [`DEFAULT_PARTITION_STATS_GROUPS`]
//! `partition-stats-0000-0`; a record lives in group [`file_group_index`]`(key, n)` of the
//! groups sorted by id (checked against the fixtures). A data instant `T` writes, per touched
//! group, `.col-stats-000i-0_T.log.1_0-0-1` with one HFILE_DATA block: for every file `T`
//! added, its column records ([`crate::column_stats_compute::file_ranges`]); for every file `T`
//! deleted (clean, rollback, restore, replaced), tombstones; and for every data partition whose
//! latest file slices `T` changes (files added or touched; a clean, which deletes only files
//! outside them, changes none), tight-bound partition records recomputed over the partition's
//! file slices after `T` (tombstones when the partition has no file left). A file group
//! replaced by `T` itself still counts, as in Java (the replacement is not complete when the
//! MDT is written); one replaced earlier does not.
//!
//! Records are encoded with the writer schema of the data table's version (Java 1.0's for
//! version 8, [`crate::MdtWriter`]'s 1.1 schema otherwise), which the blocks' `SCHEMA` header
//! and the base HFiles' `schema` file info carry.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use apache_avro::Schema;
use arbor_format::hfile::mdt_column_stats::{
    encode_column_stats_value_with, metadata_record_schema_json_for, partition_stats_key,
    ColumnStatsRecord, ColumnStatsValue, RECORD_TYPE_COLUMN_STATS, RECORD_TYPE_PARTITION_STATS,
};
use arbor_format::hfile::mdt_index::file_group_index;
use arbor_format::hfile::{HFileWriter, HFileWriterOptions};
use arbor_format::log::block::BlockMetadata;
use arbor_format::log::writer::encode_block;
use arbor_format::log::{BlockType, HeaderKey};
use arbor_fsview::{parse_data_file_name, DataFile, FileSystemView};
use arbor_storage::Storage;
use arbor_timeline::avro::HoodieWriteStat;
use arbor_timeline::config::keys;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{InstantTime, TableConfig};
use bytes::Bytes;

use crate::column_stats::{
    read_column_stats, StatsIndex, COLUMN_STATS_FILE_ID_PREFIX, COLUMN_STATS_PARTITION,
    PARTITION_STATS_FILE_ID_PREFIX, PARTITION_STATS_PARTITION,
};
use crate::column_stats_compute::{
    columns_to_index, file_ranges, file_records, file_tombstones, partition_ranges,
    partition_records, ColumnRange, StatsVersion, COLUMN_LIST_PROPERTY, DEFAULT_MAX_COLUMNS,
    MAX_COLUMNS_PROPERTY,
};
use crate::error::{MdtError, Result};
use crate::files::{MetadataTable, MDT_BASE};
use crate::secondary_index::IndexDefinitions;
use crate::writer::FilesDelta;

/// Java's default number of `column_stats` file groups.
pub const DEFAULT_COLUMN_STATS_GROUPS: usize = 2;
/// Java's default number of `partition_stats` file groups.
pub const DEFAULT_PARTITION_STATS_GROUPS: usize = 1;
/// `indexType` (and index name) of the column stats index in `index.json`.
pub const INDEX_TYPE_COLUMN_STATS: &str = "column_stats";

/// The `index.json` definition Java writes for a column stats index over `columns`
/// (`indexFunction` `column_stats`, no options; version `V2` on tables of version 9 and
/// later, none before, as the fixtures show).
pub fn column_stats_definition(
    columns: &[String],
    table_version: u32,
) -> crate::secondary_index::IndexDefinition {
    crate::secondary_index::IndexDefinition {
        index_name: INDEX_TYPE_COLUMN_STATS.to_string(),
        index_type: INDEX_TYPE_COLUMN_STATS.to_string(),
        index_function: INDEX_TYPE_COLUMN_STATS.to_string(),
        source_fields: columns.to_vec(),
        index_options: BTreeMap::new(),
        version: (table_version >= 9).then(|| "V2".to_string()),
    }
}

/// The write token of MDT files written by arbor.
const TOKEN: &str = "0-0-1";

/// The file-id prefix of MDT stats partition `partition`.
pub fn stats_file_prefix(partition: &str) -> &'static str {
    if partition == PARTITION_STATS_PARTITION {
        PARTITION_STATS_FILE_ID_PREFIX
    } else {
        COLUMN_STATS_FILE_ID_PREFIX
    }
}

/// The record type of MDT stats partition `partition`.
pub fn stats_record_type(partition: &str) -> i32 {
    if partition == PARTITION_STATS_PARTITION {
        RECORD_TYPE_PARTITION_STATS
    } else {
        RECORD_TYPE_COLUMN_STATS
    }
}

/// The id of file group `i` of stats partition `partition` (`col-stats-0001-0`).
pub fn stats_file_id(partition: &str, i: usize) -> String {
    format!("{}{i:04}-0", stats_file_prefix(partition))
}

/// What the stats of a table are computed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsConfig {
    /// The indexed columns.
    pub columns: Vec<String>,
    /// The record layout (from the data table's version).
    pub version: StatsVersion,
    /// The writer schema JSON of the records.
    pub schema_json: &'static str,
}

impl StatsConfig {
    /// The config of the data table at `storage` (rooted at its base): the columns of
    /// `index.json`'s `column_stats` definition when it has one, else Java's rule over
    /// `hoodie.table.create.schema` with [`COLUMN_LIST_PROPERTY`] / [`MAX_COLUMNS_PROPERTY`]
    /// ([`columns_to_index`]). Fails when neither a definition nor a schema is there.
    pub async fn load(storage: &dyn Storage) -> Result<Self> {
        let config = TableConfig::load(storage, DEFAULT_META_DIR).await?;
        let table_version = config.version().code();
        let version = StatsVersion::for_table_version(table_version);
        let schema_json = metadata_record_schema_json_for(table_version);
        let defs = IndexDefinitions::load(storage).await?;
        if let Some(def) = defs
            .as_ref()
            .and_then(|d| d.definitions.get(INDEX_TYPE_COLUMN_STATS))
            .filter(|d| !d.source_fields.is_empty())
        {
            return Ok(StatsConfig {
                columns: def.source_fields.clone(),
                version,
                schema_json,
            });
        }
        Ok(StatsConfig {
            columns: default_columns(&config)?,
            version,
            schema_json,
        })
    }
}

/// The columns Java's rule picks for the data table configured by `config` (module doc of
/// [`crate::column_stats_compute`]).
pub fn default_columns(config: &TableConfig) -> Result<Vec<String>> {
    let path = arbor_timeline::layout::paths::properties_key(DEFAULT_META_DIR);
    let schema = config
        .get(keys::CREATE_SCHEMA)
        .ok_or_else(|| MdtError::Invalid {
            path: path.clone(),
            reason: format!(
                "column stats need the table schema ({}), which the table does not record",
                keys::CREATE_SCHEMA
            ),
        })?;
    let max = match config.get(MAX_COLUMNS_PROPERTY) {
        Some(v) => v.trim().parse().map_err(|_| MdtError::Invalid {
            path: path.clone(),
            reason: format!("{MAX_COLUMNS_PROPERTY}={v} is not a number"),
        })?,
        None => DEFAULT_MAX_COLUMNS,
    };
    columns_to_index(
        schema,
        config.populate_meta_fields(),
        config.get(COLUMN_LIST_PROPERTY),
        max,
        StatsVersion::for_table_version(config.version().code()),
        &path,
    )
}

fn fmt_err(path: &str) -> impl Fn(arbor_format::FormatError) -> MdtError + '_ {
    move |source| MdtError::Format {
        path: path.to_string(),
        source,
    }
}

fn parse_schema(json: &str, path: &str) -> Result<Schema> {
    Schema::parse_str(json).map_err(|e| MdtError::Invalid {
        path: path.to_string(),
        reason: format!("metadata record schema cannot be parsed: {e}"),
    })
}

/// An HFile of `records` (sorted by key) of `record_type`, with `schema_json` in its file info.
fn encode_records(
    records: &BTreeMap<&str, &ColumnStatsRecord>,
    record_type: i32,
    schema_json: &str,
    path: &str,
) -> Result<Bytes> {
    let schema = parse_schema(schema_json, path)?;
    let mut w = HFileWriter::new(HFileWriterOptions::default());
    w.set_file_info("schema", schema_json.as_bytes().to_vec());
    for (key, rec) in records {
        let value = ColumnStatsValue {
            record_type,
            stats: (*rec).clone(),
        };
        let bytes = encode_column_stats_value_with(&value, &schema).map_err(fmt_err(path))?;
        w.append(key.as_bytes(), &bytes).map_err(fmt_err(path))?;
    }
    w.finish().map_err(fmt_err(path))
}

/// Splits `records` over `groups` file groups by [`file_group_index`].
fn split(
    records: &BTreeMap<String, ColumnStatsRecord>,
    groups: usize,
) -> Vec<BTreeMap<&str, &ColumnStatsRecord>> {
    let mut out: Vec<BTreeMap<&str, &ColumnStatsRecord>> = vec![BTreeMap::new(); groups];
    for (k, r) in records {
        if let Some(g) = out.get_mut(file_group_index(k, groups)) {
            g.insert(k.as_str(), r);
        }
    }
    out
}

/// The base files of new stats partition `partition` over `records` with `groups` file groups,
/// written by initialisation instant `time`: (relative path, bytes, record count) per group,
/// empty groups included.
pub fn initial_files(
    partition: &str,
    records: &BTreeMap<String, ColumnStatsRecord>,
    groups: usize,
    time: &InstantTime,
    schema_json: &str,
) -> Result<Vec<(String, Bytes, usize)>> {
    let groups = groups.max(1);
    let mut out = Vec::with_capacity(groups);
    for (i, part) in split(records, groups).iter().enumerate() {
        let rel = format!(
            "{partition}/{}_{TOKEN}_{time}.hfile",
            stats_file_id(partition, i)
        );
        let bytes = encode_records(part, stats_record_type(partition), schema_json, &rel)?;
        out.push((rel, bytes, part.len()));
    }
    Ok(out)
}

/// The log files of one instant's change `records` to stats partition `partition` over
/// `groups` file groups whose base files were written at `base_instant`: (relative path,
/// bytes, write stat) per touched group.
pub fn delta_files(
    partition: &str,
    time: &InstantTime,
    records: &BTreeMap<String, ColumnStatsRecord>,
    groups: usize,
    base_instant: &str,
    schema_json: &str,
) -> Result<Vec<(String, Bytes, HoodieWriteStat)>> {
    let groups = groups.max(1);
    let mut out = Vec::new();
    for (i, part) in split(records, groups).iter().enumerate() {
        if part.is_empty() {
            continue;
        }
        let file_id = stats_file_id(partition, i);
        let name = format!(".{file_id}_{time}.log.1_{TOKEN}");
        let rel = format!("{partition}/{name}");
        let hfile = encode_records(part, stats_record_type(partition), schema_json, &rel)?;
        let mut header = BlockMetadata::new();
        header.insert(HeaderKey::InstantTime, time.to_string());
        header.insert(HeaderKey::Schema, schema_json.to_string());
        let block = encode_block(BlockType::HfileData, &header, &hfile, &BlockMetadata::new())
            .map_err(fmt_err(&rel))?;
        let size = i64::try_from(block.len()).unwrap_or(i64::MAX);
        let n = i64::try_from(part.len()).unwrap_or(i64::MAX);
        let stat = HoodieWriteStat {
            file_id: Some(file_id),
            path: Some(rel.clone()),
            prev_commit: Some(base_instant.to_string()),
            num_writes: Some(n),
            num_update_writes: Some(n),
            total_write_bytes: Some(size),
            file_size_in_bytes: Some(size),
            partition_path: Some(partition.to_string()),
            log_version: Some(1),
            log_offset: Some(0),
            base_file: Some(String::new()),
            log_files: Some(vec![name]),
            total_log_blocks: Some(1),
            ..HoodieWriteStat::default()
        };
        out.push((rel, block, stat));
    }
    Ok(out)
}

/// The table-relative key of `name` in data partition `partition`.
fn data_key(partition: &str, name: &str) -> String {
    if partition.is_empty() {
        name.to_string()
    } else {
        format!("{partition}/{name}")
    }
}

/// One instant's change to the stats partitions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatsDelta {
    /// `column_stats` records by MDT key.
    pub column_stats: BTreeMap<String, ColumnStatsRecord>,
    /// `partition_stats` records by MDT key.
    pub partition_stats: BTreeMap<String, ColumnStatsRecord>,
}

/// The stats change of FILES change `delta` (module doc) of the data table at `storage`: column
/// records of every added file, tombstones of every deleted one, and (with `partitions`)
/// partition records of every partition `delta` names, over the committed file slices before
/// the instant with the instant's files applied. Each file of a slice takes its stats from
/// `delta`, else from the MDT's `column_stats` (`mdt`), else from the file itself. Fails, naming
/// the file, when a file cannot be read.
pub async fn compute_delta(
    storage: &Arc<dyn Storage>,
    mdt: Option<&MetadataTable>,
    cfg: &StatsConfig,
    delta: &FilesDelta,
    partitions: bool,
) -> Result<StatsDelta> {
    let mut out = StatsDelta::default();
    let mut added: BTreeMap<(String, String), Vec<ColumnRange>> = BTreeMap::new();
    for (partition, files) in &delta.added {
        for name in files.keys() {
            let key = data_key(partition, name);
            let ranges = file_ranges(storage, &key, &cfg.columns, cfg.version).await?;
            out.column_stats
                .extend(file_records(partition, name, &ranges));
            added.insert((partition.clone(), name.clone()), ranges);
        }
    }
    let any_deleted = delta.deleted.values().any(|f| !f.is_empty());
    let stored = match mdt {
        Some(m) if partitions || any_deleted => read_column_stats(storage.as_ref(), m).await?,
        _ => StatsIndex::default(),
    };
    // A removed file's records go, those of columns indexed now and any other it has (a
    // column renamed since keeps its old name in Java's records).
    let recorded = stored.columns_of_files(
        delta
            .deleted
            .iter()
            .flat_map(|(p, files)| files.iter().map(move |f| (p.as_str(), f.as_str()))),
    );
    for (partition, files) in &delta.deleted {
        for name in files {
            let mut columns = cfg.columns.clone();
            if let Some(more) = recorded.get(&(partition.clone(), name.clone())) {
                for c in more {
                    if !columns.contains(c) {
                        columns.push(c.clone());
                    }
                }
            }
            out.column_stats
                .extend(file_tombstones(partition, name, &columns));
        }
    }
    if !partitions {
        return Ok(out);
    }
    let view = FileSystemView::open(storage.clone()).await?;
    for partition in delta.partitions() {
        let (before, files) = slice_files_after(&view, &partition, delta).await?;
        let added_here = delta.added.get(&partition).is_some_and(|a| !a.is_empty());
        if before == files && !added_here && !delta.touched.contains(&partition) {
            // Only files outside the latest slices went (a clean): the partition's stats stay.
            continue;
        }
        let mut ranges = Vec::new();
        for name in &files {
            if let Some(r) = added.get(&(partition.clone(), name.clone())) {
                ranges.push(r.clone());
                continue;
            }
            let have = stored.file(&partition, name);
            if cfg.columns.iter().all(|c| have.contains_key(c)) {
                ranges.push(
                    cfg.columns
                        .iter()
                        .filter_map(|c| have.get(c))
                        .map(|r| ColumnRange::from_record(r))
                        .collect(),
                );
            } else {
                let key = data_key(&partition, name);
                ranges.push(file_ranges(storage, &key, &cfg.columns, cfg.version).await?);
            }
        }
        if files.is_empty() {
            for c in &cfg.columns {
                let mut rec = ColumnRange::empty(c, None).to_record(&partition, false);
                rec.value_count = None;
                rec.null_count = None;
                rec.total_size = None;
                rec.total_uncompressed_size = None;
                rec.is_deleted = true;
                out.partition_stats
                    .insert(partition_stats_key(c, &partition), rec);
            }
        } else {
            let merged = partition_ranges(&cfg.columns, ranges.iter().map(Vec::as_slice));
            out.partition_stats
                .extend(partition_records(&partition, &merged));
        }
    }
    Ok(out)
}

/// The file names of `partition`'s latest file slices before and once `delta` applies: the
/// committed slices of `view`, then with each added base file starting a new slice of its file
/// group, each added log file joining its group's slice, and deleted files removed.
async fn slice_files_after(
    view: &FileSystemView,
    partition: &str,
    delta: &FilesDelta,
) -> Result<(BTreeSet<String>, BTreeSet<String>)> {
    // File group -> (base instant, files of the slice).
    let mut groups: BTreeMap<String, (Option<InstantTime>, BTreeSet<String>)> = BTreeMap::new();
    for slice in view.latest_file_slices(Some(partition), None).await? {
        let g = groups.entry(slice.file_id.clone()).or_default();
        if let Some(b) = &slice.base_file {
            g.0 = Some(b.instant_time.clone());
            g.1.insert(b.file_name());
        }
        for l in &slice.log_files {
            g.1.insert(l.file_name());
        }
    }
    let before: BTreeSet<String> = groups
        .values()
        .flat_map(|(_, f)| f.iter().cloned())
        .collect();
    if let Some(added) = delta.added.get(partition) {
        for name in added.keys() {
            match parse_data_file_name(name, 0)? {
                Some(DataFile::Base(b)) => {
                    let g = groups.entry(b.file_id.clone()).or_default();
                    if g.0.as_ref().is_none_or(|t| *t <= b.instant_time) {
                        *g = (Some(b.instant_time.clone()), BTreeSet::from([name.clone()]));
                    }
                }
                Some(DataFile::Log(l)) if l.cdc => {}
                Some(DataFile::Log(l)) => {
                    groups
                        .entry(l.file_id.clone())
                        .or_default()
                        .1
                        .insert(name.clone());
                }
                None => {}
            }
        }
    }
    let deleted = delta.deleted.get(partition);
    let after = groups
        .into_values()
        .flat_map(|(_, files)| files)
        .filter(|f| !deleted.is_some_and(|d| d.contains(f)))
        .collect();
    Ok((before, after))
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The stats partitions in the order they are written.
pub const STATS_PARTITIONS: [&str; 2] = [COLUMN_STATS_PARTITION, PARTITION_STATS_PARTITION];

/// Whether stats partition `partition` of the MDT at `storage` has a file group. Java Hudi
/// 1.2 lists `column_stats` and `partition_stats` in `hoodie.table.metadata.partitions` of a
/// table with Lance base files but builds neither (their directories stay empty): such a
/// partition is not built, so writers add nothing to it and `arbor validate` does not check
/// it (readers find no stats and prune nothing).
pub async fn stats_partition_built(storage: &dyn Storage, partition: &str) -> Result<bool> {
    let prefix = stats_file_prefix(partition);
    let (objects, _) = storage.list_dir(&format!("{MDT_BASE}/{partition}")).await?;
    Ok(objects
        .iter()
        .filter_map(|o| o.key.rsplit('/').next())
        .any(|name| name.trim_start_matches('.').starts_with(prefix)))
}

impl crate::MdtWriter {
    /// The number of file groups of stats partition `partition` (0 when absent) and the latest
    /// instant of their base files (`"null"` when none), from the directory's names.
    pub async fn stats_groups(&self, partition: &str) -> Result<(usize, String)> {
        let prefix = stats_file_prefix(partition);
        let (objects, _) = self
            .storage()
            .list_dir(&format!("{MDT_BASE}/{partition}"))
            .await?;
        let mut ids = BTreeSet::new();
        let mut base = None;
        for name in objects.iter().filter_map(|o| o.key.rsplit('/').next()) {
            let plain = name.trim_start_matches('.');
            if !plain.starts_with(prefix) {
                continue;
            }
            if let Some(id) = plain.split('_').next() {
                ids.insert(id.to_string());
            }
            if let Some(stem) = name.strip_suffix(".hfile") {
                base = base.max(stem.rsplit('_').next().map(str::to_string));
            }
        }
        Ok((ids.len(), base.unwrap_or_else(|| "null".to_string())))
    }

    /// Writes the stats log files of data instant `time`'s FILES change `delta` (module doc)
    /// to every stats partition the data table lists in `hoodie.table.metadata.partitions`,
    /// returning their write stats. Nothing when it lists neither.
    pub(crate) async fn write_stats_logs(
        &self,
        time: &InstantTime,
        delta: &FilesDelta,
    ) -> Result<Vec<(&'static str, HoodieWriteStat)>> {
        let listed = TableConfig::load(self.storage().as_ref(), DEFAULT_META_DIR)
            .await?
            .metadata_partitions();
        let mut groups = BTreeMap::new();
        for p in STATS_PARTITIONS
            .into_iter()
            .filter(|p| listed.iter().any(|l| l == p))
        {
            let (n, base) = self.stats_groups(p).await?;
            if n > 0 {
                groups.insert(p, (n, base));
            }
        }
        if groups.is_empty() || delta.is_empty() {
            return Ok(Vec::new());
        }
        let storage = self.storage().clone();
        let cfg = StatsConfig::load(storage.as_ref()).await?;
        // The MDT's active timeline only: a commit's cost must not grow with the MDT's
        // history (`MetadataTable::open_active_with`).
        let mdt = MetadataTable::open_active(storage.clone()).await?;
        let change = compute_delta(
            &storage,
            mdt.as_ref(),
            &cfg,
            delta,
            groups.contains_key(PARTITION_STATS_PARTITION),
        )
        .await?;
        let mut stats = Vec::new();
        for (partition, (n, base)) in &groups {
            let records = if *partition == PARTITION_STATS_PARTITION {
                &change.partition_stats
            } else {
                &change.column_stats
            };
            for (rel, bytes, stat) in
                delta_files(partition, time, records, *n, base, cfg.schema_json)?
            {
                storage.put(&format!("{MDT_BASE}/{rel}"), bytes).await?;
                stats.push((*partition, stat));
            }
        }
        Ok(stats)
    }

    /// Creates stats partition `partition` holding `records` with `groups` file groups, as an
    /// MDT deltacommit with the next free initialisation time (as
    /// [`crate::MdtWriter::init_secondary_index`] does; anything under the partition and any
    /// pending initialisation instant is removed first). The caller then lists `partition` in
    /// the data table's `hoodie.table.metadata.partitions`. Returns the instant used.
    pub async fn init_stats_partition(
        &self,
        partition: &str,
        records: &BTreeMap<String, ColumnStatsRecord>,
        groups: usize,
        schema_json: &str,
        generator: &arbor_timeline::InstantTimeGenerator,
    ) -> Result<InstantTime> {
        let (time, mut tl, requested) = self.begin_init(partition).await?;
        let mut stats = Vec::new();
        for (rel, bytes, count) in initial_files(partition, records, groups, &time, schema_json)? {
            let size = to_i64(bytes.len());
            let name = rel.rsplit('/').next().unwrap_or(&rel).to_string();
            let file_id = name.split('_').next().unwrap_or_default().to_string();
            self.storage()
                .put(&format!("{MDT_BASE}/{rel}"), bytes)
                .await?;
            stats.push((
                partition,
                HoodieWriteStat {
                    file_id: Some(file_id),
                    path: Some(rel),
                    prev_commit: Some("null".to_string()),
                    num_writes: Some(to_i64(count)),
                    num_inserts: Some(to_i64(count)),
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
}

/// Every `column_stats` and `partition_stats` record of the data table at `storage` as Java's
/// initialisation computes them: column records of every file of every partition's latest file
/// slices, and tight-bound partition records over them. `partitions` is the data partitions
/// (`""` when non-partitioned).
pub async fn compute_all(
    storage: &Arc<dyn Storage>,
    cfg: &StatsConfig,
    partitions: &[String],
) -> Result<StatsDelta> {
    let view = FileSystemView::open(storage.clone()).await?;
    let mut out = StatsDelta::default();
    for partition in partitions {
        let mut ranges = Vec::new();
        for slice in view.latest_file_slices(Some(partition), None).await? {
            for key in slice
                .base_file_path()
                .into_iter()
                .chain(slice.log_file_paths())
            {
                let name = key.rsplit('/').next().unwrap_or(&key).to_string();
                let r = file_ranges(storage, &key, &cfg.columns, cfg.version).await?;
                out.column_stats.extend(file_records(partition, &name, &r));
                ranges.push(r);
            }
        }
        if !ranges.is_empty() {
            let merged = partition_ranges(&cfg.columns, ranges.iter().map(Vec::as_slice));
            out.partition_stats
                .extend(partition_records(partition, &merged));
        }
    }
    Ok(out)
}
