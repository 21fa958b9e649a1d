//! Creation step 4 (`docs/clones.md`): the clone's metadata. A source root's metadata cut at
//! the clone point is copied into the clone's own location (what a branch from a tag copies: no
//! pending instants, no tags, no savepoints), the clone's instant clock is raised past every
//! time it inherited, and a first clean of the clone records that its history before the clone
//! point is not retained.
//!
//! The clone is `Creating` throughout (it cannot be opened), so each of these writes may be
//! interrupted: a retry clears the own metadata an earlier attempt left ([`clear_own_metadata`])
//! and does it all again.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_cleaner::protection::snapshot_keys;
use arbor_cleaner::{clean_locked, CleanOptions, CleanPolicy};
use arbor_fsview::Horizon;
use arbor_mdt::MDT_META_DIR;
use arbor_storage::{Storage, StorageError, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::Table;
use arbor_timeline::generator::SHARED_CLOCK_KEY;
use arbor_timeline::layout::paths::properties_key;
use arbor_timeline::layout::{CLONE_FILE, DEFAULT_META_DIR};
use arbor_timeline::{ActiveTimeline, InstantTime, MetaRoot, TableConfig, TableLayout};
use bytes::Bytes;

use crate::copy::{copy_root_between, CopySpec, CopyStats, Endpoints};
use crate::error::{BranchingError, Result};

/// The own locks directory (the clone's table lock and instant clock): kept by
/// [`clear_own_metadata`].
const LOCKS_DIR: &str = ".hoodie/.locks";

/// Deletes every object below `.hoodie/` of the clone's own location except its descriptor and
/// its locks (the metadata an interrupted creation left). Returns how many were deleted.
pub(crate) async fn clear_own_metadata(own: &Arc<dyn Storage>) -> Result<usize> {
    let keys: Vec<String> = own
        .list_all(DEFAULT_META_DIR)
        .await?
        .into_iter()
        .map(|m| m.key)
        .filter(|k| k != CLONE_FILE && !k.starts_with(&format!("{LOCKS_DIR}/")))
        .collect();
    own.delete_all(&keys).await?;
    Ok(keys.len())
}

/// Copies root `from` of the source table (`source`: its storage, a `ClonedStorage` when the
/// source is a clone) cut at `at` into the clone's own root: completed instants requested at or
/// before `at`, the archived timeline, index definitions and schema history; no tag, no
/// savepoint. The caller holds the source's lock (so no archival or clean of the source moves
/// the files being copied).
pub(crate) async fn copy_snapshot_metadata(
    source: &Arc<dyn Storage>,
    from: &MetaRoot,
    own: &Arc<dyn Storage>,
    at: &InstantTime,
) -> Result<CopyStats> {
    let spec = CopySpec {
        from: from.clone(),
        to: MetaRoot::Root,
        cut: Some(at.clone()),
        savepoints: Some(BTreeSet::new()),
        tags: Some(BTreeSet::new()),
        skip_data_properties: false,
    };
    copy_root_between(&Endpoints::between(source, own), &spec).await
}

/// Every requested and completion time on the data and metadata-table timelines of the table
/// at `storage`'s root, and the shared clock's value: the greatest of them.
async fn latest_time(storage: &Arc<dyn Storage>) -> Result<Option<InstantTime>> {
    let mut best: Option<InstantTime> = None;
    let mut see = |t: InstantTime| {
        if best.as_ref().is_none_or(|b| t > *b) {
            best = Some(t);
        }
    };
    for dir in [DEFAULT_META_DIR, MDT_META_DIR] {
        if !storage.exists(&properties_key(dir)).await? {
            continue;
        }
        let config = TableConfig::load(storage.as_ref(), dir).await?;
        let layout = TableLayout::from_config(dir, &config)?;
        let tl = ActiveTimeline::load(storage.clone(), layout).await?;
        for i in tl.instants() {
            // Hudi 0.x's suffixed metadata-table times compare on their millisecond prefix.
            if let Some(t) = i.completion_time.clone() {
                see(t);
            }
            see(i.requested_time);
        }
    }
    if let Some((bytes, _)) = storage.get_opt(SHARED_CLOCK_KEY).await? {
        if let Ok(t) = InstantTime::parse(String::from_utf8_lossy(&bytes).trim()) {
            see(t);
        }
    }
    Ok(best)
}

/// Raises the clone's own instant clock (`.hoodie/.locks/instant_clock`) to at least the
/// greatest time of `source` (its timelines and its clock) and of the clone's copied metadata,
/// and at least `at`, by compare-and-swap: every instant the clone issues afterwards is later
/// than its clone point and than every instant it inherited. `own` is the clone's
/// `ClonedStorage` (its root config is stored guarded, which only that view reads).
pub(crate) async fn raise_clock(
    source: &Arc<dyn Storage>,
    own: &Arc<dyn Storage>,
    at: &InstantTime,
) -> Result<InstantTime> {
    let mut floor = at.clone();
    for t in [latest_time(source).await?, latest_time(own).await?]
        .into_iter()
        .flatten()
    {
        if t > floor {
            floor = t;
        }
    }
    for _ in 0..32 {
        let current = own.get_opt(SHARED_CLOCK_KEY).await?;
        let data = Bytes::from(floor.to_string());
        let swapped = match &current {
            Some((bytes, meta)) => {
                let text = String::from_utf8_lossy(bytes);
                if InstantTime::parse(text.trim()).is_ok_and(|t| t >= floor) {
                    return Ok(floor);
                }
                own.put_if_match(SHARED_CLOCK_KEY, data, &meta.version)
                    .await
            }
            None => own.put_if_absent(SHARED_CLOCK_KEY, data).await,
        };
        match swapped {
            Ok(_) => return Ok(floor),
            Err(StorageError::PreconditionFailed { .. } | StorageError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(BranchingError::refused(
        format!("set the instant clock of {own}"),
        "the clock kept changing under 32 attempts",
    ))
}

/// A clone starts at its clone point: a clean of the clone keeping its latest commit (the
/// snapshot the source's pin protects) records in the clone's own timeline and metadata table
/// that its history before the clone point is not retained (the source's cleans after the
/// clone point, which the clone does not inherit, may delete files only older snapshots read).
/// Runs on the clone's `ClonedStorage` (`cloned`), so files in a source are released from the
/// clone's view, never deleted. Returns the number of files the clean released or deleted.
pub(crate) async fn start_at_clone_point(cloned: Arc<dyn Storage>) -> Result<usize> {
    let table = Table::open(cloned).await?;
    let options = CleanOptions {
        policy: CleanPolicy::KeepLatestCommits(1),
        dry_run: false,
        archive: false,
        extra_sources: Vec::new(),
    };
    let out = table
        .transact(|txn| async move { clean_locked(txn, &options).await })
        .await?;
    Ok(out.deleted)
}

/// The number of data files (base and log files) of the latest snapshot of the table at
/// `storage`'s main root.
pub(crate) async fn snapshot_data_files(storage: Arc<dyn Storage>) -> Result<usize> {
    let reader = TableReader::open(storage).await?;
    Ok(snapshot_keys(reader.view(), &Horizon::Latest).await?.len())
}
