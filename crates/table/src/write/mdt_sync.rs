//! Keeping the metadata table in step with the data table (spec §6.5): which tables have one,
//! the FILES change of each data instant, the MDT deltacommit written before the data instant
//! completes, repair of what a crash left, and initialisation from a directory listing.
//!
//! Every function here runs under the data table's lock.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_fsview::{parse_data_file_name, PartitionListing};
use arbor_mdt::clean::{clean_if_due, MdtCleanScope, DEFAULT_MDT_COMMITS_RETAINED};
use arbor_mdt::column_stats::{COLUMN_STATS_PARTITION, PARTITION_STATS_PARTITION};
use arbor_mdt::compaction::{compact_if_due, rollback_pending_compactions, DEFAULT_COMPACT_EVERY};
use arbor_mdt::index_writer::{
    RecordIndexDelta, DEFAULT_RECORD_INDEX_GROUPS, RECORD_INDEX, RECORD_INDEX_INIT_INSTANT,
};
use arbor_mdt::secondary_index_writer::{is_secondary_index_partition, SecondaryIndexDeltas};
use arbor_mdt::{
    FilesDelta, FilesListing, MdtWriter, MetadataTable, FILES_PARTITION, MDT_META_DIR,
};
use arbor_storage::Storage;
use arbor_timeline::archive::{ArchivalPolicy, Archiver};
use arbor_timeline::avro::HoodieCommitMetadata;
use arbor_timeline::config::keys;
use arbor_timeline::layout::{MetaRoot, DEFAULT_META_DIR};
use arbor_timeline::{
    Action, ActiveTimeline, InstantTime, InstantTimeGenerator, State, TableConfig, TableLayout,
};

use crate::error::{Result, TableError};
use crate::read::{ListingSource, TableReader};

/// The metadata partitions arbor keeps in step with every commit (and every
/// `secondary_index_*` partition, see [`is_maintained`]).
pub const MAINTAINED_PARTITIONS: [&str; 4] = [
    FILES_PARTITION,
    RECORD_INDEX,
    COLUMN_STATS_PARTITION,
    PARTITION_STATS_PARTITION,
];

/// True for the metadata partitions arbor keeps in step with every commit:
/// [`MAINTAINED_PARTITIONS`] and secondary indexes.
pub fn is_maintained(partition: &str) -> bool {
    MAINTAINED_PARTITIONS.contains(&partition) || is_secondary_index_partition(partition)
}

/// Refuses writes to a table whose metadata table has partitions arbor does not maintain
/// (e.g. `column_stats`): a commit that did not update them would leave them stale.
pub fn check_supported(config: &TableConfig) -> Result<()> {
    let unsupported: Vec<String> = config
        .metadata_partitions()
        .into_iter()
        .chain(config.metadata_partitions_inflight())
        .filter(|p| !is_maintained(p))
        .collect();
    if unsupported.is_empty() {
        Ok(())
    } else {
        Err(TableError::Unsupported {
            reason: format!(
                "this table's metadata table has partitions arbor does not maintain ({}); \
                 arbor writes only tables whose metadata table has {} and secondary indexes",
                unsupported.join(","),
                MAINTAINED_PARTITIONS.join(",")
            ),
        })
    }
}

/// The MDT writer when the data table's config (read again from storage, so that an MDT
/// created by another writer since this handle opened is seen) lists `files`; `None` when the
/// table has no MDT. Fails when the config lists `files` but the MDT has no config, or lists
/// partitions arbor does not maintain.
pub async fn writer_if_enabled(storage: &Arc<dyn Storage>) -> Result<Option<MdtWriter>> {
    let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
    check_supported(&config)?;
    if !config
        .metadata_partitions()
        .iter()
        .any(|p| p == FILES_PARTITION)
    {
        return Ok(None);
    }
    match MdtWriter::open(storage.clone()).await? {
        Some(w) => Ok(Some(w)),
        None => Err(TableError::Corrupt {
            path: arbor_timeline::layout::paths::properties_key(MDT_META_DIR),
            reason: "the table lists metadata partition files but its metadata table is missing; \
                     run `arbor mdt init` after removing files from hoodie.table.metadata.partitions"
                .to_string(),
        }),
    }
}

/// The FILES change of a data instant: every file its write stats name (base and log files,
/// with their sizes), plus `touched` partitions (e.g. those a delete_partition replaced).
pub fn files_delta(metadata: &HoodieCommitMetadata, touched: &BTreeSet<String>) -> FilesDelta {
    let mut delta = FilesDelta::default();
    for (partition, stat) in metadata.write_stats() {
        let name = stat
            .path
            .as_deref()
            .and_then(|p| p.rsplit('/').next())
            .filter(|n| !n.is_empty());
        if let Some(name) = name {
            let size = stat
                .file_size_in_bytes
                .or(stat.total_write_bytes)
                .and_then(|s| u64::try_from(s).ok())
                .unwrap_or(0);
            delta.add(partition, name, size);
        } else {
            delta.touched.insert(partition.to_string());
        }
    }
    delta.touched.extend(touched.iter().cloned());
    delta
}

/// Records data instant `time`'s file changes (and, with a record index, `record_index`; with
/// secondary indexes, `secondary`) in the MDT (when the table has one), before the caller
/// completes `time`. An MDT instant `time` left by an earlier attempt (a crash, or a compaction
/// being re-run) is removed first. Fails with `CommitConflict` when the table has a record
/// index but the write computed no change for it, or a secondary index `secondary` does not
/// name (the index was created after the write was planned).
pub async fn record_instant(
    storage: &Arc<dyn Storage>,
    time: &InstantTime,
    metadata: &HoodieCommitMetadata,
    touched: &BTreeSet<String>,
    record_index: Option<&RecordIndexDelta>,
    secondary: Option<&SecondaryIndexDeltas>,
    generator: &InstantTimeGenerator,
) -> Result<()> {
    let Some(mdt) = writer_if_enabled(storage).await? else {
        return Ok(());
    };
    // One listing of the MDT timeline for both checks below (a pending compaction's rollback
    // does not touch instant `time`'s files).
    let listed = ActiveTimeline::load(mdt.storage().clone(), mdt.layout().clone()).await?;
    if !listed
        .filter(&[Action::Compaction], &[State::Requested, State::Inflight])
        .is_empty()
    {
        rollback_pending_compactions(&mdt).await?;
    }
    let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
    let indexed = config
        .metadata_partitions()
        .iter()
        .any(|p| p == RECORD_INDEX);
    if indexed && record_index.is_none() {
        return Err(TableError::CommitConflict {
            instant: time.to_string(),
            other: RECORD_INDEX_INIT_INSTANT.to_string(),
            file_groups: "the record index was created after this write was planned".to_string(),
            partitions: String::new(),
        });
    }
    let record_index = record_index.filter(|_| indexed);
    let empty = SecondaryIndexDeltas::new();
    let secondary = secondary.unwrap_or(&empty);
    if let Some(missing) = config
        .metadata_partitions()
        .into_iter()
        .filter(|p| is_secondary_index_partition(p))
        .find(|p| !secondary.contains_key(p))
    {
        return Err(TableError::CommitConflict {
            instant: time.to_string(),
            other: missing,
            file_groups: "the secondary index was created after this write was planned".to_string(),
            partitions: String::new(),
        });
    }
    if listed.get(time, Action::DeltaCommit).is_some() {
        mdt.rollback(time).await?;
    }
    mdt.commit(
        time,
        &files_delta(metadata, touched),
        record_index,
        secondary,
        generator,
    )
    .await?;
    Ok(())
}

/// Records a table service's file change `delta` (e.g. the files a clean deleted) as MDT
/// deltacommit `time`, before the caller completes data instant `time`; no index changes. An
/// MDT instant `time` left by an earlier attempt is removed first. Nothing happens without an
/// MDT.
pub async fn record_files_delta(
    storage: &Arc<dyn Storage>,
    time: &InstantTime,
    delta: &FilesDelta,
    generator: &InstantTimeGenerator,
) -> Result<()> {
    let Some(mdt) = writer_if_enabled(storage).await? else {
        return Ok(());
    };
    rollback_pending_compactions(&mdt).await?;
    if mdt.instant_state(time).await?.is_some() {
        mdt.rollback(time).await?;
    }
    let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
    let secondary: SecondaryIndexDeltas = config
        .metadata_partitions()
        .into_iter()
        .filter(|p| is_secondary_index_partition(p))
        .map(|p| (p, Default::default()))
        .collect();
    let no_keys = RecordIndexDelta::default();
    mdt.commit(time, delta, Some(&no_keys), &secondary, generator)
        .await?;
    Ok(())
}

/// Where [`maintain`] runs: the root's view, the table's own storage and the root (the MDT
/// clean keeps what every other root of the table needs), and whether the MDT cleans itself.
#[derive(Debug, Clone, Copy)]
pub struct MdtServices<'a> {
    /// The table as the writing root sees it.
    pub storage: &'a Arc<dyn Storage>,
    /// The table's own storage, shared by every root.
    pub table_storage: &'a Arc<dyn Storage>,
    /// The writing root.
    pub root: &'a MetaRoot,
    /// Run the MDT's own clean ([`arbor_mdt::clean`]); `WriteOptions::mdt_clean`.
    pub clean: bool,
}

/// Table services of the MDT after a data instant completed (the caller still holds the lock):
/// with `services.clean`, finishes pending MDT cleans and cleans the MDT's superseded file
/// slices when due ([`arbor_mdt::clean::clean_if_due`]: Java's cadence and retention); compacts
/// FILES when [`DEFAULT_COMPACT_EVERY`] log files accumulated; archives the MDT timeline. A
/// failure is logged and left for the next commit: the data instant is committed whatever
/// happens here.
pub async fn maintain(
    services: MdtServices<'_>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
) {
    let storage = services.storage;
    let result = async {
        let Some(writer) = writer_if_enabled(storage).await? else {
            return Ok::<_, TableError>(());
        };
        if services.clean {
            let scope = MdtCleanScope {
                view: storage,
                table: services.table_storage,
                root: services.root,
                retained: DEFAULT_MDT_COMMITS_RETAINED,
            };
            clean_if_due(scope, generator).await?;
        }
        let data = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
        // The MDT's active timeline only: the compaction decision needs the latest FILES
        // slice, whose instants are all active (`MetadataTable::open_active_with`).
        let Some(mdt) = MetadataTable::open_active_with(storage.clone(), &data).await? else {
            return Ok(());
        };
        // A working branch's MDT is not compacted: its base files would land in the MDT
        // directories main shares, where Java's file-system view of main's MDT (which knows
        // nothing of branches) attaches main's later log files to that uncommitted base and
        // drops them (Spark then lists stale files). The branch's MDT keeps its log files
        // until it is published (main then compacts) or dropped.
        let on_branch = matches!(services.root, MetaRoot::Branch(_));
        let mut compacted = false;
        if !on_branch {
            if let Some(c) = compact_if_due(&writer, &mdt, DEFAULT_COMPACT_EVERY, generator).await? {
                tracing::info!(instant = %c.instant, log_files = c.log_files, "compacted the metadata table");
                compacted = true;
            }
        }
        // Without a compaction, the MDT timeline is the one `mdt` was just opened with.
        let listed = (!compacted).then(|| mdt.view().history().active());
        archive_mdt(storage, &writer, &data, listed).await?;
        Ok(())
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "metadata-table maintenance failed; the commit stands");
    }
}

/// Archives the MDT timeline (default policy: more than 30 completed instants, down to 20)
/// within the data table's rules: never the latest MDT compaction or anything after it (those
/// deltacommits' blocks are still read), and never an instant at or after the data table's
/// earliest active write instant. `listed` is the MDT timeline when the caller has just listed it
/// (under the lock, nothing written since); else it is listed here.
async fn archive_mdt(
    storage: &Arc<dyn Storage>,
    writer: &MdtWriter,
    data: &ActiveTimeline,
    listed: Option<&ActiveTimeline>,
) -> Result<usize> {
    let mdt = match listed {
        Some(tl) => tl.clone(),
        None => ActiveTimeline::load(storage.clone(), writer.layout().clone()).await?,
    };
    if mdt.completed_writes().len() <= ArchivalPolicy::default().max_commits {
        return Ok(0);
    }
    let latest_compaction = mdt
        .completed()
        .into_iter()
        .filter(|i| i.action == arbor_timeline::Action::Commit)
        .map(|i| i.requested_time)
        .max();
    let Some(latest_compaction) = latest_compaction else {
        return Ok(0);
    };
    let data_earliest = data.instants().into_iter().map(|i| i.requested_time).min();
    let bound = match data_earliest {
        Some(d) if d < latest_compaction => d,
        _ => latest_compaction,
    };
    let outcome = Archiver::new(
        storage.clone(),
        writer.layout().clone(),
        ArchivalPolicy::default(),
    )?
    .with_metadata_table(None)
    .with_upper_bound(Some(bound))
    .run()
    .await?;
    if !outcome.archived.is_empty() {
        tracing::info!(
            count = outcome.archived.len(),
            "archived metadata-table instants"
        );
    }
    Ok(outcome.archived.len())
}

/// Archives the metadata table's timeline against the data timeline as it is now, within
/// [`archive_mdt`]'s rules; the caller holds the table lock. Run right after the data
/// timeline is archived, so the MDT's active timeline follows the data's down instead of
/// waiting for the next commit. Returns the MDT instants archived (0 without an MDT).
pub async fn archive_metadata_timeline(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
) -> Result<usize> {
    let Some(writer) = writer_if_enabled(storage).await? else {
        return Ok(0);
    };
    let data = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    archive_mdt(storage, &writer, &data, None).await
}

/// Removes the MDT deltacommit of data instant `time` (called by the data rollback of `time`
/// before that rollback completes). Nothing happens when the table has no MDT.
pub async fn rollback_instant(storage: &Arc<dyn Storage>, time: &InstantTime) -> Result<()> {
    if let Some(mdt) = MdtWriter::open(storage.clone()).await? {
        mdt.rollback(time).await?;
    }
    Ok(())
}

/// Removes pending MDT deltacommits whose data instant is not pending (what a crash between
/// the MDT write and a data rollback can leave; pending MDT instants are never read). Returns
/// the instants removed.
pub async fn repair(storage: &Arc<dyn Storage>, layout: &TableLayout) -> Result<Vec<InstantTime>> {
    let Some(mdt) = MdtWriter::open(storage.clone()).await? else {
        return Ok(Vec::new());
    };
    let pending = mdt.pending_deltacommits().await?;
    if pending.is_empty() {
        return Ok(Vec::new());
    }
    let data = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let data_pending: BTreeSet<InstantTime> = data
        .pending()
        .into_iter()
        .map(|i| i.requested_time)
        .collect();
    let mut removed = Vec::new();
    for t in pending {
        if !data_pending.contains(&t) {
            mdt.rollback(&t).await?;
            removed.push(t);
        }
    }
    Ok(removed)
}

/// The committed data files of the table, from a directory listing (the content a new MDT
/// starts from).
pub async fn committed_files(storage: &Arc<dyn Storage>) -> Result<FilesListing> {
    let reader = TableReader::open_view_with(storage.clone(), ListingSource::Storage).await?;
    let view = reader.view();
    let listing = arbor_fsview::StorageListing::new(storage.clone());
    let mut out = FilesListing::new();
    for p in listing
        .list_partitions()
        .await
        .map_err(TableError::from_fsview)?
    {
        let files = listing
            .list_files(&p)
            .await
            .map_err(TableError::from_fsview)?;
        let kept: std::collections::BTreeMap<String, u64> = files
            .into_iter()
            .filter(|f| {
                matches!(parse_data_file_name(&f.name, f.size), Ok(Some(d)) if view.is_committed(d.instant_time()))
            })
            .map(|f| (f.name, f.size))
            .collect();
        if !kept.is_empty() {
            out.insert(p, kept);
        }
    }
    Ok(out)
}

/// Creates the MDT of a table that has none, from a directory listing of its committed files,
/// and then lists `files` in the data table's `hoodie.table.metadata.partitions` (the step that
/// turns it on). Refuses (`Unsupported`) when pending writes or table services exist: their
/// files would be missing. Returns the number of files recorded.
pub async fn init(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
) -> Result<usize> {
    let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
    if config
        .metadata_partitions()
        .iter()
        .any(|p| p == FILES_PARTITION)
    {
        return Err(TableError::Unsupported {
            reason: "the table already has a metadata table with partition files".to_string(),
        });
    }
    check_supported(&config)?;
    let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let pending = tl.pending();
    if let Some(p) = pending.first() {
        return Err(TableError::Unsupported {
            reason: format!(
                "the table has {} pending instant(s) (first: {p}); finish or roll them back before \
                 creating the metadata table",
                pending.len()
            ),
        });
    }
    let files = committed_files(storage).await?;
    let count = files.values().map(|f| f.len()).sum();
    MdtWriter::create(storage.clone(), &config, &files, generator).await?;
    TableConfig::update(storage.as_ref(), DEFAULT_META_DIR, |c| {
        c.set(keys::METADATA_PARTITIONS, FILES_PARTITION)?;
        c.set(keys::METADATA_PARTITIONS_INFLIGHT, "")
    })
    .await?;
    Ok(count)
}

/// Creates the record index of a table that has a metadata table but no record index: every
/// key of every latest file slice, mapped to its partition and file group, in
/// [`DEFAULT_RECORD_INDEX_GROUPS`] MDT file groups; then lists `record_index` in
/// `hoodie.table.metadata.partitions` (the step that turns it on). Refuses (`Unsupported`) a
/// table without metadata table, with a record index, or with pending instants. Returns the
/// number of keys indexed.
pub async fn init_record_index(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
) -> Result<usize> {
    let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
    let partitions = config.metadata_partitions();
    if partitions.iter().any(|p| p == RECORD_INDEX) {
        return Err(TableError::Unsupported {
            reason: "the table already has a record index".to_string(),
        });
    }
    let Some(writer) = writer_if_enabled(storage).await? else {
        return Err(TableError::Unsupported {
            reason:
                "the record index lives in the metadata table; create it first (arbor mdt init)"
                    .to_string(),
        });
    };
    let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    if let Some(p) = tl.pending().first() {
        return Err(TableError::Unsupported {
            reason: format!(
                "the table has pending instants (first: {p}); finish or roll them back before \
                 creating the record index"
            ),
        });
    }
    let reader = TableReader::open_view(storage.clone()).await?;
    let mut entries = std::collections::BTreeMap::new();
    for p in reader
        .view()
        .partitions()
        .await
        .map_err(TableError::from_fsview)?
        .iter()
    {
        for slice in reader
            .view()
            .latest_file_slices(Some(p), None)
            .await
            .map_err(TableError::from_fsview)?
        {
            let millis = arbor_mdt::index_writer::instant_millis(&slice.base_instant);
            for key in super::index::SimpleIndex::slice_keys(storage, &reader, &slice).await? {
                entries.insert(
                    key,
                    arbor_format::hfile::mdt_index::RecordLocation {
                        partition: slice.partition.clone(),
                        file_id: slice.file_id.clone(),
                        instant_time_millis: millis,
                    },
                );
            }
        }
    }
    writer
        .init_record_index(&entries, DEFAULT_RECORD_INDEX_GROUPS, generator)
        .await?;
    // Version 9 (Hudi 1.1) also defines the record index in index.json; the definition is
    // written before the partition is listed, so no prefix lists an undefined index.
    let defined = config.version() >= arbor_timeline::config::TableVersion::Nine;
    if defined {
        arbor_mdt::secondary_index_writer::save_index_definition(
            storage.as_ref(),
            &arbor_mdt::index_writer::record_index_definition(),
        )
        .await?;
    }
    let mut listed = partitions;
    listed.push(RECORD_INDEX.to_string());
    TableConfig::update(storage.as_ref(), DEFAULT_META_DIR, |c| {
        if defined {
            c.set(
                keys::INDEX_DEFS_PATH,
                arbor_mdt::secondary_index::INDEX_DEFS_PATH,
            )?;
        }
        c.set(keys::METADATA_PARTITIONS, listed.join(","))
    })
    .await?;
    Ok(entries.len())
}
