//! [`TableReader::open_for_write`]: the reader a write plans with, whose cost does not grow
//! with the table's history or its number of files.
//!
//! A write needs the latest file slices of the partitions it touches, the pending compaction
//! and clustering plans, the replaced file groups and the completed writes it plans against
//! (conflict detection compares them with the writes completed at commit time, which are
//! active). So the reader loads:
//! - the **active** timeline only, never the archived one. What the archive holds cannot
//!   change a write's answers: a file of an archived instant sorts below the active
//!   timeline's archival boundary and is committed by the boundary rule
//!   ([`arbor_fsview::visibility`]), as hudi-rs reads every table; the archiver never
//!   archives a `replacecommit` whose replaced file groups still have files, nor past a
//!   pending instant or a savepoint, so no replacement, pending plan or savepoint is only in
//!   the archive. The checks that would need older history (whether an archived insert may
//!   have stored a key twice: `write/repeated_keys.rs`, the record-index delete in
//!   `txn/write.rs`) assume the worst when anything is archived
//!   ([`crate::read::skipping::unique_keys`]). An active timeline without any write instant
//!   (no boundary; the archiver never leaves one) is read with its archive.
//! - with a metadata table, its **active** timeline only
//!   ([`MetadataTable::open_active_with`]), and the FILES records of only the partitions the
//!   write lists ([`MdtScopedListing`]: ranged HFile reads of those keys); the whole listing
//!   is read only if something asks for every partition (`INSERT_OVERWRITE_TABLE`).
//!
//! The process-wide cache is not used: every commit changes the timeline, so a cached state
//! would be reloaded anyway, and a state loaded with the whole history must not be served to
//! readers from a write-scoped load (or the other way round).

use std::sync::Arc;

use arbor_fsview::{FileSystemView, PartitionListing, StorageListing};
use arbor_mdt::{MdtScopedListing, MetadataTable, FILES_PARTITION};
use arbor_storage::{Storage, StorageExt};
use arbor_timeline::archive::manifest::version_key;
use arbor_timeline::archive::{ArchivedTimeline, TimelineHistory};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{Action, ActiveTimeline, TableConfig, TableLayout};

use super::TableReader;
use crate::error::{Result, TableError};

/// The actions whose instants delimit the archival boundary.
const WRITE_ACTIONS: [Action; 3] = [Action::Commit, Action::DeltaCommit, Action::ReplaceCommit];

impl TableReader {
    /// Opens the metadata at `.hoodie/` of `storage` (a view of one metadata root, as
    /// [`TableReader::open_view`]) for planning a write: the active timelines and only the
    /// FILES entries of the partitions asked about (module doc). Its latest file slices,
    /// pending plans and replaced groups equal those of [`TableReader::open_view`]; its
    /// timeline ([`FileSystemView::history`]) has no archived side.
    ///
    /// The FILES records of `partitions` (the partitions the write's input names) are read
    /// ahead in one pass ([`MdtScopedListing::prefetch`]); any other partition is read when
    /// first listed.
    pub(crate) async fn open_for_write(
        storage: Arc<dyn Storage>,
        partitions: &[&str],
    ) -> Result<Self> {
        let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
        let use_mdt = config.version().code() >= 8
            && config
                .metadata_partitions()
                .iter()
                .any(|p| p == FILES_PARTITION);
        let active = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
        let mut listing: Arc<dyn PartitionListing> = Arc::new(StorageListing::new(storage.clone()));
        if use_mdt {
            match MetadataTable::open_active_with(storage.clone(), &active).await? {
                Some(mdt) => {
                    let scoped = MdtScopedListing::new(Arc::new(mdt));
                    scoped.prefetch(partitions).await?;
                    listing = Arc::new(scoped);
                }
                None => tracing::warn!(
                    "the table lists metadata partition files but has no metadata table; \
                     listing directories instead"
                ),
            }
        }
        // Without a write instant on the active timeline there is no archival boundary, and
        // files of archived writes would look uncommitted: such a timeline (never made by
        // the archiver, which keeps its latest commits active) is read whole.
        let has_write = active
            .instants()
            .iter()
            .any(|i| WRITE_ACTIONS.contains(&i.action));
        let history = match (&layout.history_dir, has_write) {
            (Some(dir), false) if storage.exists(&version_key(dir)).await? => {
                let archived = ArchivedTimeline::load(storage.as_ref(), &layout).await?;
                TimelineHistory::from_parts(active, archived)
            }
            _ => TimelineHistory::from_parts(active, ArchivedTimeline::default()),
        };
        let view = FileSystemView::from_history(storage.clone(), layout, history, listing)
            .await
            .map_err(TableError::from_fsview)?;
        TableReader::from_loaded_view(storage, config, view).await
    }
}
