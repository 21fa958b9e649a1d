//! [`RootedStorage`]: the table as one metadata root (a publication or a working branch) sees
//! it: its metadata where main's root metadata would be, everything else shared.
//!
//! Every arbor component reads and writes a table's metadata at `.hoodie/` and the metadata
//! table's at `.hoodie/metadata/.hoodie/`. A working branch keeps its metadata in
//! `.hoodie/branches/<b>/` and `.hoodie/metadata/.hoodie/branches/<b>/` (RFC-116 section 2); a
//! publication in `.hoodie/branches/publications/p<N>/` on both sides. Wrapping the table's
//! storage in a `RootedStorage` for that root redirects exactly those two meta directories, so
//! the same writer, reader, cleaner and metadata-table code serves every branch unchanged, while
//! data files, metadata-table base and log files, and the table lock stay shared.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use arbor_storage::{validate_key, ListPage, ObjectMeta, Storage, StorageError, Version};
use async_trait::async_trait;
use bytes::Bytes;

use super::location::{FileLocations, Located, OwnLocation};
use super::metaroot::MetaRoot;
use super::paths::{self, DEFAULT_META_DIR, HEARTBEAT_DIR, LOCK_DIR, MDT_ROOT_META_DIR};

type SResult<T> = std::result::Result<T, StorageError>;

/// The data-side meta directory as every component addresses it.
const META: &str = DEFAULT_META_DIR;
/// The metadata table's base directory (its data files are shared by every root).
const MDT_BASE: &str = paths::MDT_BASE;
/// The lock directory: one table lock for every root.
const LOCKS: &str = LOCK_DIR;
/// Writers' heartbeats, one object per pending instant named by its time: shared by every root
/// (instant times are unique table-wide), so a writer that opened the root metadata (a
/// branch-unaware writer following the root `hoodie.timeline.path` into a publication) and
/// arbor's handle of that publication see each other's heartbeats and never roll back each
/// other's live writes.
const HEARTBEATS: &str = HEARTBEAT_DIR;
/// The pins of the table's clones: one record per clone, whichever root it was cloned from.
const PINS: &str = super::clone_records::PINS_DIR;

/// The table's commit record (`crate::commit_point`): one for every root.
const COMMIT: &str = paths::COMMIT_DIR;

/// The table key of `key` as `root`'s view shows it (what [`RootedStorage`] of `root` reads and
/// writes for `key`).
pub fn table_key_of(root: &MetaRoot, key: &str) -> String {
    KeyMap::of(root).map(key)
}

/// True for keys below a directory every root shares.
fn is_shared_meta(key: &str) -> bool {
    [MDT_BASE, LOCKS, HEARTBEATS, PINS, COMMIT]
        .iter()
        .any(|d| strip_dir(key, d).is_some())
}

/// Where a caller's key lives.
enum Place {
    /// Shared by every root: the key is used unchanged.
    Shared,
    /// In the root's data-side meta directory; the part after `.hoodie/`.
    DataMeta(String),
    /// In the root's MDT-side meta directory; the part after `.hoodie/metadata/.hoodie/`.
    MdtMeta(String),
}

/// A [`Storage`] showing the table as one metadata root sees it.
///
/// Guarantees, for a root other than [`MetaRoot::Root`] (whose view is the table itself):
/// - a key below `.hoodie/metadata/.hoodie/` is stored below the root's
///   [`mdt_meta_dir`](MetaRoot::mdt_meta_dir); any other key below `.hoodie/` except
///   `.hoodie/metadata/`, `.hoodie/.locks/`, `.hoodie/.heartbeat/` and `.hoodie/.clones/` is stored below the root's
///   [`data_meta_dir`](MetaRoot::data_meta_dir); every other key (data files, metadata-table
///   partitions, the table lock, writers' heartbeats) is the table's own key;
/// - listings show exactly the keys of this view: other roots' metadata (main's root metadata,
///   other branches, publications) never appears, and pages are in ascending key order of this
///   view with cursors valid for the next call;
/// - every single-object call is one call of the inner storage with the mapped key, so
///   `put_if_absent` and `put_if_match` keep the inner storage's atomicity;
/// - `NotFound`, `AlreadyExists` and `PreconditionFailed` name the caller's key; other errors
///   are the inner storage's, naming the real key.
#[derive(Debug, Clone)]
pub struct RootedStorage {
    inner: Arc<dyn Storage>,
    root: MetaRoot,
    keys: KeyMap,
    locations: Arc<dyn FileLocations>,
}

/// The key mapping of one root.
#[derive(Debug, Clone)]
struct KeyMap {
    data_meta: String,
    mdt_meta: String,
}

impl RootedStorage {
    /// The view of `inner` (the table's storage) as `root` sees it.
    pub fn new(inner: Arc<dyn Storage>, root: MetaRoot) -> Self {
        let locations = Arc::new(OwnLocation::new(inner.clone()));
        Self::with_locations(inner, root, locations)
    }

    /// The view of `inner` as `root` sees it, reading the shared files (data files,
    /// metadata-table files) where `locations` resolves them; metadata and every write stay in
    /// `inner`.
    pub fn with_locations(
        inner: Arc<dyn Storage>,
        root: MetaRoot,
        locations: Arc<dyn FileLocations>,
    ) -> Self {
        RootedStorage {
            keys: KeyMap::of(&root),
            inner,
            root,
            locations,
        }
    }

    /// Resolves a caller's key for reading: a root's metadata in the table's storage, a shared
    /// file where the locations say.
    fn read_at(&self, key: &str) -> SResult<Located> {
        validate_key(key, false)?;
        Ok(match KeyMap::place(key) {
            Place::Shared => self.locations.resolve(key),
            _ => Located {
                storage: self.inner.clone(),
                key: self.map(key),
            },
        })
    }

    /// The root this view shows.
    pub fn root(&self) -> &MetaRoot {
        &self.root
    }

    /// The table's storage.
    pub fn inner(&self) -> &Arc<dyn Storage> {
        &self.inner
    }

    fn map(&self, key: &str) -> String {
        self.keys.map(key)
    }

    fn unmap(&self, key: &str) -> Option<String> {
        self.keys.unmap(key)
    }

    /// True for listing prefixes whose keys come from more than one place (and so need a merged
    /// listing): the root, `.hoodie` and `.hoodie/metadata`.
    fn is_cover(prefix: &str) -> bool {
        prefix.is_empty() || prefix == META || prefix == MDT_BASE
    }

    fn err_out(&self, e: StorageError) -> StorageError {
        let caller = |path: String| self.unmap(&path).unwrap_or(path);
        match e {
            StorageError::NotFound { path } => StorageError::NotFound { path: caller(path) },
            StorageError::AlreadyExists { path } => {
                StorageError::AlreadyExists { path: caller(path) }
            }
            StorageError::PreconditionFailed { path } => {
                StorageError::PreconditionFailed { path: caller(path) }
            }
            other => other,
        }
    }

    fn meta_out(&self, mut meta: ObjectMeta) -> Option<ObjectMeta> {
        meta.key = self.unmap(&meta.key)?;
        Some(meta)
    }

    fn key_in(&self, key: &str) -> SResult<String> {
        validate_key(key, false)?;
        Ok(self.map(key))
    }

    /// Every object of this view below `prefix`, sorted (for the merged listings).
    async fn list_cover(&self, prefix: &str) -> SResult<Vec<ObjectMeta>> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self
                .inner
                .list_page(prefix, after.as_deref(), 1000)
                .await
                .map_err(|e| self.err_out(e))?;
            out.extend(page.objects.into_iter().filter_map(|m| self.meta_out(m)));
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        out.retain(|m| prefix.is_empty() || strip_dir(&m.key, prefix).is_some());
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

impl KeyMap {
    fn of(root: &MetaRoot) -> Self {
        KeyMap {
            data_meta: root.data_meta_dir(),
            mdt_meta: root.mdt_meta_dir(),
        }
    }

    fn place(key: &str) -> Place {
        if let Some(rest) = strip_dir(key, MDT_ROOT_META_DIR) {
            return Place::MdtMeta(rest.to_string());
        }
        if is_shared_meta(key) {
            return Place::Shared;
        }
        match strip_dir(key, META) {
            Some(rest) => Place::DataMeta(rest.to_string()),
            None => Place::Shared,
        }
    }

    /// The inner key of a caller's key (or listing prefix).
    fn map(&self, key: &str) -> String {
        match Self::place(key) {
            Place::Shared => key.to_string(),
            Place::DataMeta(rest) => join(&self.data_meta, &rest),
            Place::MdtMeta(rest) => join(&self.mdt_meta, &rest),
        }
    }

    /// The caller's key of an inner key, or `None` when the key belongs to no part of this view
    /// (another root's metadata).
    fn unmap(&self, key: &str) -> Option<String> {
        if let Some(rest) = strip_dir(key, &self.mdt_meta) {
            return (!rest.is_empty()).then(|| join(MDT_ROOT_META_DIR, rest));
        }
        if strip_dir(key, MDT_ROOT_META_DIR).is_some() {
            return None;
        }
        if is_shared_meta(key) {
            return Some(key.to_string());
        }
        if let Some(rest) = strip_dir(key, &self.data_meta) {
            let virt = join(META, rest);
            // Only keys that map back to this place belong to the view.
            return matches!(Self::place(&virt), Place::DataMeta(_)).then_some(virt);
        }
        if strip_dir(key, META).is_some() {
            return None;
        }
        Some(key.to_string())
    }
}

/// `key` below directory `dir` (the part after `dir/`), `Some("")` for `dir` itself.
fn strip_dir<'a>(key: &'a str, dir: &str) -> Option<&'a str> {
    if key == dir {
        return Some("");
    }
    key.strip_prefix(dir)?.strip_prefix('/')
}

fn join(dir: &str, rest: &str) -> String {
    if rest.is_empty() {
        dir.to_string()
    } else {
        format!("{dir}/{rest}")
    }
}

impl fmt::Display for RootedStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.inner, self.root)
    }
}

#[async_trait]
impl Storage for RootedStorage {
    async fn get(&self, key: &str) -> SResult<(Bytes, ObjectMeta)> {
        let at = self.read_at(key)?;
        let (data, mut meta) = at.storage.get(&at.key).await.map_err(|e| self.err_out(e))?;
        meta.key = key.to_string();
        Ok((data, meta))
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> SResult<Bytes> {
        let at = self.read_at(key)?;
        at.storage
            .get_range(&at.key, range)
            .await
            .map_err(|e| self.err_out(e))
    }

    async fn head(&self, key: &str) -> SResult<ObjectMeta> {
        let at = self.read_at(key)?;
        let mut meta = at
            .storage
            .head(&at.key)
            .await
            .map_err(|e| self.err_out(e))?;
        meta.key = key.to_string();
        Ok(meta)
    }

    async fn put(&self, key: &str, data: Bytes) -> SResult<Version> {
        let k = self.key_in(key)?;
        self.inner.put(&k, data).await.map_err(|e| self.err_out(e))
    }

    async fn put_if_absent(&self, key: &str, data: Bytes) -> SResult<Version> {
        let k = self.key_in(key)?;
        self.inner
            .put_if_absent(&k, data)
            .await
            .map_err(|e| self.err_out(e))
    }

    async fn put_if_match(&self, key: &str, data: Bytes, expected: &Version) -> SResult<Version> {
        let k = self.key_in(key)?;
        self.inner
            .put_if_match(&k, data, expected)
            .await
            .map_err(|e| self.err_out(e))
    }

    async fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> SResult<ListPage> {
        validate_key(prefix, true)?;
        if let Some(a) = start_after {
            validate_key(a, false)?;
        }
        if Self::is_cover(prefix) {
            let all = self.list_cover(prefix).await?;
            let objects: Vec<ObjectMeta> = all
                .into_iter()
                .filter(|m| start_after.is_none_or(|a| m.key.as_str() > a))
                .take(max_keys.saturating_add(1))
                .collect();
            return Ok(ListPage::of_sorted(objects, max_keys));
        }
        let real = self.map(prefix);
        let after = start_after.map(|a| self.map(a));
        let page = self
            .inner
            .list_page(&real, after.as_deref(), max_keys)
            .await
            .map_err(|e| self.err_out(e))?;
        Ok(ListPage {
            objects: page
                .objects
                .into_iter()
                .filter_map(|m| self.meta_out(m))
                .collect(),
            next: page.next.and_then(|n| self.unmap(&n)),
        })
    }

    async fn list_dir(&self, prefix: &str) -> SResult<(Vec<ObjectMeta>, Vec<String>)> {
        validate_key(prefix, true)?;
        if prefix.is_empty() || prefix == MDT_BASE {
            // The children of the table root and of the MDT base are the table's own: `.hoodie`,
            // partitions; the MDT partitions and `.hoodie`.
            let (objects, dirs) = self
                .inner
                .list_dir(prefix)
                .await
                .map_err(|e| self.err_out(e))?;
            return Ok((objects, dirs));
        }
        if prefix == META {
            let (objects, dirs) = self
                .inner
                .list_dir(&self.keys.data_meta)
                .await
                .map_err(|e| self.err_out(e))?;
            let mut objects: Vec<ObjectMeta> = objects
                .into_iter()
                .filter_map(|m| self.meta_out(m))
                .collect();
            let mut dirs: Vec<String> = dirs.iter().filter_map(|d| self.unmap(d)).collect();
            let (_, shared) = self
                .inner
                .list_dir(META)
                .await
                .map_err(|e| self.err_out(e))?;
            dirs.extend(
                shared
                    .into_iter()
                    .filter(|d| [MDT_BASE, LOCKS, HEARTBEATS, PINS].contains(&d.as_str())),
            );
            dirs.sort();
            dirs.dedup();
            objects.sort_by(|a, b| a.key.cmp(&b.key));
            return Ok((objects, dirs));
        }
        let real = self.map(prefix);
        let (objects, dirs) = self
            .inner
            .list_dir(&real)
            .await
            .map_err(|e| self.err_out(e))?;
        Ok((
            objects
                .into_iter()
                .filter_map(|m| self.meta_out(m))
                .collect(),
            dirs.iter().filter_map(|d| self.unmap(d)).collect(),
        ))
    }

    async fn list_dir_keys(&self, prefix: &str) -> SResult<(Vec<String>, Vec<String>)> {
        validate_key(prefix, true)?;
        if prefix.is_empty() || prefix == MDT_BASE || prefix == META {
            // Merged listings: as `list_dir` makes them.
            let (objects, dirs) = self.list_dir(prefix).await?;
            return Ok((objects.into_iter().map(|m| m.key).collect(), dirs));
        }
        let (objects, dirs) = self
            .inner
            .list_dir_keys(&self.map(prefix))
            .await
            .map_err(|e| self.err_out(e))?;
        Ok((
            objects.iter().filter_map(|k| self.unmap(k)).collect(),
            dirs.iter().filter_map(|d| self.unmap(d)).collect(),
        ))
    }

    async fn delete_batch(&self, keys: &[String]) -> SResult<Vec<SResult<()>>> {
        let real = keys
            .iter()
            .map(|k| self.key_in(k))
            .collect::<SResult<Vec<_>>>()?;
        let results = self
            .inner
            .delete_batch(&real)
            .await
            .map_err(|e| self.err_out(e))?;
        Ok(results
            .into_iter()
            .map(|r| r.map_err(|e| self.err_out(e)))
            .collect())
    }

    async fn copy(&self, from: &str, to: &str) -> SResult<()> {
        let f = self.key_in(from)?;
        let t = self.key_in(to)?;
        self.inner.copy(&f, &t).await.map_err(|e| self.err_out(e))
    }
}

impl MetaRoot {
    /// The table's own key of `key` as this root sees it (the key [`MetaRoot::view`] stores
    /// `key` at): for copying metadata between roots through the table's storage.
    pub fn real_key(&self, key: &str) -> String {
        match self {
            MetaRoot::Root => key.to_string(),
            other => KeyMap::of(other).map(key),
        }
    }

    /// The table as this root sees it: `table` itself for [`MetaRoot::Root`], else a
    /// [`RootedStorage`].
    pub fn view(&self, table: Arc<dyn Storage>) -> Arc<dyn Storage> {
        match self {
            MetaRoot::Root => table,
            other => Arc::new(RootedStorage::new(table, other.clone())),
        }
    }

    /// The table as this root sees it, reading its shared files where `locations` resolves
    /// them (a table whose files live in more than one location): always a [`RootedStorage`],
    /// whose view of [`MetaRoot::Root`] shows exactly the keys `table` holds.
    pub fn view_with_locations(
        &self,
        table: Arc<dyn Storage>,
        locations: Arc<dyn FileLocations>,
    ) -> Arc<dyn Storage> {
        Arc::new(RootedStorage::with_locations(
            table,
            self.clone(),
            locations,
        ))
    }
}

#[cfg(test)]
mod tests {
    use arbor_storage::{ObjectStoreStorage, StorageExt};

    use super::*;

    fn table() -> Arc<dyn Storage> {
        Arc::new(ObjectStoreStorage::memory())
    }

    async fn put(s: &dyn Storage, k: &str) {
        s.put(k, Bytes::from(k.to_string())).await.unwrap();
    }

    /// Shared files below `p=old/` live in another table's location (as a shallow clone's
    /// inherited files will).
    #[derive(Debug)]
    struct Elsewhere {
        own: Arc<dyn Storage>,
        source: Arc<dyn Storage>,
    }

    impl FileLocations for Elsewhere {
        fn resolve(&self, key: &str) -> Located {
            let storage = if key.starts_with("p=old/") {
                self.source.clone()
            } else {
                self.own.clone()
            };
            Located {
                storage,
                key: key.to_string(),
            }
        }
    }

    #[tokio::test]
    async fn test_shared_files_are_read_where_the_locations_resolve_them() {
        let own = table();
        let source = table();
        put(source.as_ref(), "p=old/f1.parquet").await;
        let locations = Arc::new(Elsewhere {
            own: own.clone(),
            source: source.clone(),
        });
        let root = MetaRoot::branch("audit").unwrap();
        let view = RootedStorage::with_locations(own.clone(), root, locations.clone());
        // Reads of a file the table did not write go to the source, under the caller's key.
        let (data, meta) = view.get("p=old/f1.parquet").await.unwrap();
        assert_eq!(data, Bytes::from("p=old/f1.parquet"));
        assert_eq!(meta.key, "p=old/f1.parquet");
        assert_eq!(view.head("p=old/f1.parquet").await.unwrap().size, 16);
        assert_eq!(
            view.get_range("p=old/f1.parquet", 0..5).await.unwrap(),
            Bytes::from("p=old")
        );
        // Metadata and new files stay in the table's own location.
        view.put(".hoodie/timeline/1.commit", Bytes::from("c"))
            .await
            .unwrap();
        view.put("p=new/f2.parquet", Bytes::from("n"))
            .await
            .unwrap();
        assert!(own
            .exists(".hoodie/branches/audit/timeline/1.commit")
            .await
            .unwrap());
        assert!(own.exists("p=new/f2.parquet").await.unwrap());
        assert!(!source.exists("p=new/f2.parquet").await.unwrap());
        assert!(!own.exists("p=old/f1.parquet").await.unwrap());
        assert_eq!(
            view.get("p=new/f2.parquet").await.unwrap().0,
            Bytes::from("n")
        );
        // A missing file names the caller's key.
        let err = view.get("p=old/missing.parquet").await.unwrap_err();
        assert!(err.is_not_found(), "{err}");
        // Main's root with other locations: the same resolution, every key of the table shown.
        let main = MetaRoot::Root.view_with_locations(own.clone(), locations);
        assert_eq!(main.get("p=old/f1.parquet").await.unwrap().0.len(), 16);
        let listed: Vec<String> = main
            .list_all("")
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect();
        let direct: Vec<String> = own
            .list_all("")
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(listed, direct);
    }

    #[tokio::test]
    async fn test_branch_view_redirects_meta_dirs_and_shares_the_rest() {
        let t = table();
        let b = MetaRoot::branch("audit").unwrap().view(t.clone());
        for k in [
            ".hoodie/hoodie.properties",
            ".hoodie/timeline/1.commit",
            ".hoodie/metadata/.hoodie/hoodie.properties",
            ".hoodie/metadata/files/f.log",
            ".hoodie/.locks/table_lock.json",
            ".hoodie/.heartbeat/20250101000000000",
            "p=1/f.parquet",
        ] {
            put(b.as_ref(), k).await;
        }
        let real: Vec<String> = t
            .list_all("")
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(
            real,
            vec![
                ".hoodie/.heartbeat/20250101000000000",
                ".hoodie/.locks/table_lock.json",
                ".hoodie/branches/audit/hoodie.properties",
                ".hoodie/branches/audit/timeline/1.commit",
                ".hoodie/metadata/.hoodie/branches/audit/hoodie.properties",
                ".hoodie/metadata/files/f.log",
                "p=1/f.parquet",
            ]
        );
        // Main's root metadata and other branches are invisible in the view.
        put(t.as_ref(), ".hoodie/hoodie.properties").await;
        put(t.as_ref(), ".hoodie/timeline/0.commit").await;
        put(t.as_ref(), ".hoodie/branches/other/timeline/2.commit").await;
        put(
            t.as_ref(),
            ".hoodie/metadata/.hoodie/timeline/0.deltacommit",
        )
        .await;
        let seen: Vec<String> = b
            .list_all("")
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(
            seen,
            vec![
                ".hoodie/.heartbeat/20250101000000000",
                ".hoodie/.locks/table_lock.json",
                ".hoodie/hoodie.properties",
                ".hoodie/metadata/.hoodie/hoodie.properties",
                ".hoodie/metadata/files/f.log",
                ".hoodie/timeline/1.commit",
                "p=1/f.parquet",
            ]
        );
        let tl: Vec<String> = b
            .list_all(".hoodie/timeline")
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(tl, vec![".hoodie/timeline/1.commit"]);
        let (objs, dirs) = b.list_dir(".hoodie").await.unwrap();
        assert_eq!(
            objs.iter().map(|m| m.key.as_str()).collect::<Vec<_>>(),
            vec![".hoodie/hoodie.properties"]
        );
        assert_eq!(
            dirs,
            vec![
                ".hoodie/.heartbeat",
                ".hoodie/.locks",
                ".hoodie/metadata",
                ".hoodie/timeline"
            ]
        );
        let got = b.get(".hoodie/hoodie.properties").await.unwrap();
        assert_eq!(got.1.key, ".hoodie/hoodie.properties");
        assert_eq!(
            &got.0[..],
            b".hoodie/hoodie.properties" // written through the view: the caller's key
        );
        match b.get(".hoodie/timeline/0.commit").await {
            Err(StorageError::NotFound { path }) => assert_eq!(path, ".hoodie/timeline/0.commit"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn test_cover_listing_pages_are_ordered_and_resumable() {
        let t = table();
        let p = MetaRoot::Publication(2).view(t.clone());
        for i in 0..7 {
            put(p.as_ref(), &format!(".hoodie/timeline/{i}.commit")).await;
            put(p.as_ref(), &format!(".hoodie/metadata/files/{i}.log")).await;
        }
        let mut keys = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = p.list_page(".hoodie", after.as_deref(), 3).await.unwrap();
            keys.extend(page.objects.into_iter().map(|m| m.key));
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert_eq!(keys.len(), 14);
        assert!(t
            .exists(".hoodie/branches/publications/p2/timeline/3.commit")
            .await
            .unwrap());
    }

    #[tokio::test]
    async fn test_root_view_is_the_table_itself() {
        let t = table();
        let v = MetaRoot::Root.view(t.clone());
        assert!(Arc::ptr_eq(&t, &v));
    }
}
