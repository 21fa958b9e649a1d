//! The process-wide cache of opened tables: loaded timelines, FILES listings (or directory
//! listings), file-system views and read schemas, shared by every [`TableReader`](crate::read::TableReader) (and so every
//! writer, cleaner and branch operation) of one process.
//!
//! Key: the table location and metadata root as the storage names them (the `Display` of the
//! storage the reader opens, e.g. `file:///t` or `s3://b/t (branch b)`), plus the
//! [`ListingSource`]. Only storages that name a real location (`<scheme>://...`, any scheme
//! but `memory`) are cached: in-memory stores all call themselves `memory://`, and wrappers
//! (fault injection, counting) call themselves `name(...)`, so both always load cold. A caller
//! that builds storages with labels that do not identify their location must open with
//! [`CacheMode::Bypass`](super::CacheMode::Bypass).
//!
//! Freshness (a stale view is impossible, not merely unlikely): every open lists the active
//! timeline directory (and, when the reader lists through the metadata table, the MDT meta and
//! timeline directories) and reloads `hoodie.properties`. The cached state is used only when
//! that listing (names, sizes, modification times, versions) and the config equal what they
//! were just before the cached state was loaded. Any instant file written since (requested,
//! inflight or completed, by any action: commit, rollback, restore, clean, archival, replace),
//! any MDT deltacommit or compaction, or any config change therefore makes the open reload
//! and replace the entry, so the state a handle sees is never older than the latest instant
//! present when it opened. When main moves (a publication completes), [`TableReader::open`](crate::read::TableReader::open)
//! resolves main to the new metadata root, whose storage names another root: a key that was
//! never filled, so the new main is loaded; the entry of the old root stays valid for readers
//! that open that root explicitly.
//!
//! Refresh: when the fingerprint changed, a reader listing directories
//! ([`ListingSource::Storage`], or `Auto` on a table without FILES) whose config is unchanged
//! starts from a fork of the cached view and [`refresh`](arbor_fsview::FileSystemView::refresh)es
//! it: the timeline is reloaded and only the partitions that the instants completed since
//! name are listed again (everything when an instant disappeared or a restore completed, as
//! the refresh documents). A reader listing through the metadata table, or a changed config,
//! reloads everything.
//!
//! What the fingerprint cannot see is what the timeline does not record either: files written
//! or deleted by an instant that is still pending. Those files are not visible to readers
//! (the view filters them by the timeline), exactly as without the cache.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use arbor_mdt::MDT_META_DIR;
use arbor_storage::{ObjectMeta, Storage, StorageExt};
use arbor_timeline::{TableConfig, TableLayout};

use super::source::ListingSource;
use super::stream::SliceReader;
use crate::error::{Result, TableError};

/// How many tables (location, root, listing source) the cache holds at most; the least
/// recently used entries are evicted first.
pub const CACHE_CAPACITY: u64 = 64;

/// Turns the process-wide cache on or off for every later open (on by default). Entries
/// already cached are dropped when turning it off.
pub fn set_enabled(enabled: bool) {
    ENABLED.store(enabled, Ordering::SeqCst);
    if !enabled {
        CACHE.invalidate_all();
    }
}

/// Whether the process-wide cache is on ([`set_enabled`]).
pub fn is_enabled() -> bool {
    ENABLED.load(Ordering::SeqCst)
}

/// Drops every cached table (the next open of each loads from storage).
pub fn clear() {
    CACHE.invalidate_all();
}

static ENABLED: AtomicBool = AtomicBool::new(true);

static CACHE: LazyLock<moka::future::Cache<CacheKey, Arc<Entry>>> =
    LazyLock::new(|| moka::future::Cache::new(CACHE_CAPACITY));

/// Which opened table an entry holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey {
    location: String,
    source: ListingSource,
}

/// What the timeline looked like when an entry was filled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    config: TableConfig,
    timeline: Vec<ObjectMeta>,
    /// With a metadata-table listing: the MDT meta directory and the MDT timeline directory.
    mdt: Option<(Vec<ObjectMeta>, Vec<ObjectMeta>)>,
}

/// What an opened reader holds: its config and everything slices are read with.
#[derive(Debug, Clone)]
pub(crate) struct ReaderState {
    pub(crate) config: TableConfig,
    pub(crate) slices: SliceReader,
}

impl ReaderState {
    /// The same state reading through `storage` (same location, another handle).
    fn rebind(&self, storage: Arc<dyn Storage>) -> ReaderState {
        let mut out = self.clone();
        out.slices.storage = storage;
        out
    }
}

/// One cached table: the reader state and the fingerprint it was loaded after.
#[derive(Debug)]
struct Entry {
    fingerprint: Fingerprint,
    /// The MDT's active timeline directory at fill time (`None`: no MDT or not listed by it).
    mdt_timeline_dir: Option<String>,
    state: ReaderState,
}

/// The key of `storage` for `source`, or `None` when the storage's name does not identify a
/// location (see the module doc).
pub(crate) fn key(storage: &Arc<dyn Storage>, source: ListingSource) -> Option<CacheKey> {
    let location = storage.to_string();
    let (scheme, rest) = location.split_once("://")?;
    let plain = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !plain || scheme.eq_ignore_ascii_case("memory") || rest.is_empty() {
        return None;
    }
    Some(CacheKey { location, source })
}

/// The active timeline directory of the MDT of `storage`'s table, or `None` when there is no
/// MDT. Errors (an unreadable MDT config) are returned so the caller opens cold and reports
/// the error exactly as the uncached open does.
pub(crate) async fn mdt_timeline_dir(storage: &Arc<dyn Storage>) -> Result<Option<String>> {
    if !storage
        .exists(&format!("{MDT_META_DIR}/hoodie.properties"))
        .await?
    {
        return Ok(None);
    }
    let config = TableConfig::load(storage.as_ref(), MDT_META_DIR).await?;
    let layout = TableLayout::from_config(MDT_META_DIR, &config)?;
    Ok(Some(layout.timeline_dir))
}

/// Lists what decides whether a cached state is current.
pub(crate) async fn fingerprint(
    storage: &Arc<dyn Storage>,
    config: &TableConfig,
    layout: &TableLayout,
    use_mdt: bool,
    mdt_timeline_dir: Option<&str>,
) -> Result<Fingerprint> {
    let timeline = list_objects(storage, &layout.timeline_dir).await?;
    let mdt = if use_mdt {
        let meta = list_objects(storage, MDT_META_DIR).await?;
        let timeline = match mdt_timeline_dir {
            Some(dir) if dir != MDT_META_DIR => list_objects(storage, dir).await?,
            _ => Vec::new(),
        };
        Some((meta, timeline))
    } else {
        None
    };
    Ok(Fingerprint {
        config: config.clone(),
        timeline,
        mdt,
    })
}

async fn list_objects(storage: &Arc<dyn Storage>, dir: &str) -> Result<Vec<ObjectMeta>> {
    let (mut objects, _dirs) = storage.list_dir(dir).await.map_err(TableError::from)?;
    objects.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(objects)
}

/// What the cache holds for one open.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// Nothing cached.
    Miss,
    /// The cached state, current (the fingerprint still holds), re-pointed at the caller's
    /// storage.
    Hit(ReaderState),
    /// A cached state the timeline moved past: `now` is the fingerprint just taken (before
    /// anything is reloaded), to cache the refreshed state under.
    Stale {
        state: ReaderState,
        now: Fingerprint,
    },
}

/// Looks `key` up and checks the cached state against the timeline of `storage` as listed now.
pub(crate) async fn lookup(
    key: &CacheKey,
    storage: &Arc<dyn Storage>,
    config: &TableConfig,
    layout: &TableLayout,
    use_mdt: bool,
) -> Result<Lookup> {
    let Some(entry) = CACHE.get(key).await else {
        return Ok(Lookup::Miss);
    };
    let now = fingerprint(
        storage,
        config,
        layout,
        use_mdt,
        entry.mdt_timeline_dir.as_deref(),
    )
    .await?;
    if now == entry.fingerprint {
        return Ok(Lookup::Hit(entry.state.rebind(storage.clone())));
    }
    tracing::debug!(location = %key.location, "the timeline changed since the table was cached");
    CACHE.invalidate(key).await;
    Ok(Lookup::Stale {
        state: entry.state.rebind(storage.clone()),
        now,
    })
}

/// Caches `state`, loaded after `fingerprint` was taken.
pub(crate) async fn insert(
    key: CacheKey,
    fingerprint: Fingerprint,
    mdt_timeline_dir: Option<String>,
    state: ReaderState,
) {
    let entry = Entry {
        fingerprint,
        mdt_timeline_dir,
        state,
    };
    CACHE.insert(key, Arc::new(entry)).await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use arbor_storage::ObjectStoreStorage;

    #[test]
    fn test_key_only_for_storages_that_name_a_location() {
        let memory: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        assert!(key(&memory, ListingSource::Auto).is_none());
        let dir = tempfile::tempdir().unwrap();
        let local: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
        let k = key(&local, ListingSource::Auto).unwrap();
        assert!(k.location.starts_with("file://"), "{}", k.location);
        assert_ne!(Some(k), key(&local, ListingSource::Storage));
    }
}
