//! [`ClonedStorage`]: a shallow clone's location as one table: its own objects, and the files it
//! references in its sources' locations where [`CloneRule`] puts them. Writes always go to the
//! clone's own location. [`open_location`] opens any table location, a clone or not.

use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use arbor_storage::{
    open_storage, validate_key, ListPage, ObjectMeta, Storage, StorageError, StorageExt,
    StorageOptions, Version,
};
use async_trait::async_trait;
use bytes::Bytes;

use super::clone_guard::{guard, is_guarded_key, is_properties_key, unguard, unguard_location};
use super::clone_records::{CloneDescriptor, CloneSource, CloneState};
use super::clone_rule::{is_mdt_file, CloneRule, Home};
use super::paths::{DEFAULT_META_DIR, MDT_BASE, MDT_META_DIR};
use crate::error::{Result, TimelineError};

type SResult<T> = std::result::Result<T, StorageError>;

/// Opens the storage of a table location (an absolute path or a URL), as a clone names its
/// sources and a source names its clones.
pub trait LocationOpener: fmt::Debug + Send + Sync {
    /// The storage rooted at `location`.
    fn open(&self, location: &str) -> SResult<Arc<dyn Storage>>;
}

/// Opens locations through arbor-storage's registry (local paths, `file://`, `s3://`, `az://`,
/// `gs://`, registered schemes) with one set of options.
#[derive(Debug, Clone, Default)]
pub struct RegistryOpener {
    options: StorageOptions,
}

impl RegistryOpener {
    /// An opener using `options` for every location.
    pub fn new(options: StorageOptions) -> Self {
        RegistryOpener { options }
    }
}

impl LocationOpener for RegistryOpener {
    fn open(&self, location: &str) -> SResult<Arc<dyn Storage>> {
        open_storage(location, &self.options)
    }
}

/// The form of `location` a clone records: a local path made absolute (relative to the current
/// directory, `file://` removed); any URL unchanged without a trailing `/`.
pub fn normalize_location(location: &str) -> Result<String> {
    let trimmed = location.trim_end_matches('/');
    if trimmed.contains("://") && !trimmed.starts_with("file://") {
        return Ok(trimmed.to_string());
    }
    let path = trimmed.strip_prefix("file://").unwrap_or(trimmed);
    let path = if path.is_empty() { "/" } else { path };
    let abs = if Path::new(path).is_absolute() {
        Path::new(path).to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| StorageError::InvalidLocation {
                url: location.to_string(),
                reason: format!("cannot resolve a relative path: {e}"),
            })?
            .join(path)
    };
    // Made canonical when it exists (a clone's source does), so two spellings of one
    // directory are one location.
    let abs = abs.canonicalize().unwrap_or(abs);
    Ok(abs.to_string_lossy().into_owned())
}

/// The storage of the table at `own`: `own` itself for a table that is not a clone (or a
/// detached clone, whose root config is freed of a leftover legacy-reader guard first,
/// [`super::clone_guard`]), a [`ClonedStorage`] over its sources for an active shallow clone.
///
/// Errors: a clone still being created ([`TimelineError::CloneIncomplete`]), an unreadable
/// descriptor, a source that cannot be opened ([`TimelineError::CloneSource`]).
pub async fn open_cloned(
    own: Arc<dyn Storage>,
    location: &str,
    opener: &dyn LocationOpener,
) -> Result<Arc<dyn Storage>> {
    let Some((descriptor, _)) = CloneDescriptor::load(own.as_ref()).await? else {
        return Ok(own);
    };
    match descriptor.state {
        CloneState::Detached => {
            // Detach removes the guard before the switch; a writer that still held the clone's
            // `ClonedStorage` may have stored it again since. arbor reads a detached clone
            // raw, so the guard must not be there.
            unguard_location(own.as_ref()).await?;
            Ok(own)
        }
        CloneState::Creating => Err(TimelineError::CloneIncomplete {
            location: location.to_string(),
            id: descriptor.id,
        }),
        CloneState::Active => {
            let mut sources = Vec::with_capacity(descriptor.sources.len());
            for s in &descriptor.sources {
                let storage = opener
                    .open(&s.location)
                    .map_err(|e| TimelineError::CloneSource {
                        location: s.location.clone(),
                        reason: e.to_string(),
                    })?;
                sources.push((s.clone(), storage));
            }
            Ok(Arc::new(ClonedStorage::new(own, sources)?))
        }
    }
}

/// Opens the table at `location` through `opener`, as [`open_cloned`] does.
pub async fn open_location(
    location: &str,
    opener: &dyn LocationOpener,
) -> Result<Arc<dyn Storage>> {
    let own = opener.open(location)?;
    open_cloned(own, location, opener).await
}

/// A shallow clone's location as one table.
///
/// Guarantees:
/// - a read (`get`, `get_range`, `head`) of a key goes to the location [`CloneRule`] names; a
///   searched key (no instant in its name, or an initialisation instant) is read from the first
///   location holding it, the clone's own first; `NotFound` only when none holds it;
/// - every write (`put`, `put_if_absent`, `put_if_match`, the target of `copy`) goes to the
///   clone's own location, with its atomicity;
/// - `delete_batch` deletes only in the clone's own location: a file that lives in a source is
///   never deleted through a clone (its result is `Ok`: the clone no longer references it, and
///   the source's pin keeps it until the clone detaches or is forgotten);
/// - listings below the metadata table's partitions (`.hoodie/metadata/<partition>/`, and the
///   prefixes above them) show the clone's own keys and each source's keys that live there by
///   the rule, once each, in ascending order; every other listing (data partitions, metadata)
///   shows the clone's own keys only (data files are found through the metadata table);
/// - the legacy-reader guard ([`super::clone_guard`]) is invisible: every `hoodie.properties`
///   (or backup) read has it removed (the content, and the size `get` and `head` report, are
///   the unguarded config's; the version is the stored object's, so compare-and-swap works),
///   and every write of the root config (`.hoodie/hoodie.properties` or its backup, including
///   as the target of `copy`) stores it guarded.
#[derive(Clone)]
pub struct ClonedStorage {
    own: Arc<dyn Storage>,
    sources: Vec<(CloneSource, Arc<dyn Storage>)>,
    rule: CloneRule,
}

impl fmt::Debug for ClonedStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClonedStorage")
            .field("own", &self.own.to_string())
            .field(
                "sources",
                &self
                    .sources
                    .iter()
                    .map(|(s, _)| format!("{}@{}", s.location, s.instant))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl fmt::Display for ClonedStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.sources.first() {
            Some((s, _)) => write!(f, "{} (clone of {} at {})", self.own, s.location, s.instant),
            None => write!(f, "{}", self.own),
        }
    }
}

impl ClonedStorage {
    /// The clone whose own location is `own`, reading from `sources` (nearest first, with the
    /// storage of each source's own location).
    pub fn new(
        own: Arc<dyn Storage>,
        sources: Vec<(CloneSource, Arc<dyn Storage>)>,
    ) -> Result<Self> {
        let points = sources
            .iter()
            .map(|(s, _)| s.instant_time())
            .collect::<Result<Vec<_>>>()?;
        Ok(ClonedStorage {
            own,
            rule: CloneRule::new(&points),
            sources,
        })
    }

    /// The clone's own location.
    pub fn own(&self) -> &Arc<dyn Storage> {
        &self.own
    }

    /// The sources, nearest first, with their storages.
    pub fn sources(&self) -> &[(CloneSource, Arc<dyn Storage>)] {
        &self.sources
    }

    /// Where `key` lives by the rule ([`Home::Search`] keys are looked up on reads).
    pub fn home(&self, key: &str) -> Home {
        self.rule.home(key)
    }

    fn storage_of(&self, home: Home) -> &Arc<dyn Storage> {
        match home {
            Home::Source(i) => self.sources.get(i).map(|(_, s)| s).unwrap_or(&self.own),
            _ => &self.own,
        }
    }

    /// The locations to try for a read of a key living at `home`, in order.
    fn read_order(&self, home: Home) -> Vec<&Arc<dyn Storage>> {
        match home {
            Home::Search => std::iter::once(&self.own)
                .chain(self.sources.iter().map(|(_, s)| s))
                .collect(),
            other => vec![self.storage_of(other)],
        }
    }

    /// Runs a read at each location of `key`'s read order until one holds it.
    async fn read<T, F, Fut>(&self, key: &str, f: F) -> SResult<T>
    where
        F: Fn(Arc<dyn Storage>) -> Fut,
        Fut: std::future::Future<Output = SResult<T>>,
    {
        validate_key(key, false)?;
        let mut last = StorageError::NotFound {
            path: key.to_string(),
        };
        for storage in self.read_order(self.rule.home(key)) {
            match f(storage.clone()).await {
                Err(StorageError::NotFound { .. }) => {
                    last = StorageError::NotFound {
                        path: key.to_string(),
                    }
                }
                other => return other,
            }
        }
        Err(last)
    }

    /// True when a listing below `prefix` may include sources' metadata-table files.
    fn merges(prefix: &str) -> bool {
        if prefix.is_empty() || prefix == DEFAULT_META_DIR || prefix == MDT_BASE {
            return true;
        }
        is_mdt_file(prefix)
    }

    /// True when `key`, listed in source `i`, is a key of this clone's view.
    fn source_lists(&self, i: usize, key: &str) -> bool {
        if !is_mdt_file(key) {
            return false;
        }
        match self.rule.home(key) {
            Home::Source(j) => j == i,
            Home::Search => true,
            Home::Own => false,
        }
    }

    /// Every key of the merged listing below `prefix`, sorted, each once (the nearest location
    /// holding a searched key wins).
    async fn merged(&self, prefix: &str) -> SResult<Vec<ObjectMeta>> {
        let mut all: std::collections::BTreeMap<String, ObjectMeta> = self
            .own
            .list_all(prefix)
            .await?
            .into_iter()
            .map(|m| (m.key.clone(), m))
            .collect();
        let mdt_prefix = if is_mdt_file(prefix) {
            prefix.to_string()
        } else {
            MDT_BASE.to_string()
        };
        if prefix.is_empty()
            || mdt_prefix.starts_with(&format!("{prefix}/"))
            || mdt_prefix == prefix
        {
            for (i, (_, storage)) in self.sources.iter().enumerate() {
                for m in storage.list_all(&mdt_prefix).await? {
                    if self.source_lists(i, &m.key) && !all.contains_key(&m.key) {
                        all.insert(m.key.clone(), m);
                    }
                }
            }
        }
        Ok(all.into_values().collect())
    }
}

#[async_trait]
impl Storage for ClonedStorage {
    async fn get(&self, key: &str) -> SResult<(Bytes, ObjectMeta)> {
        let k = key.to_string();
        let (bytes, mut meta) = self
            .read(key, |s| {
                let k = k.clone();
                async move { s.get(&k).await }
            })
            .await?;
        if is_properties_key(key) {
            if let Some(plain) = unguard(&bytes) {
                meta.size = plain.len() as u64;
                return Ok((plain, meta));
            }
        }
        Ok((bytes, meta))
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> SResult<Bytes> {
        if is_properties_key(key) {
            let (bytes, _) = self.get(key).await?;
            let len = bytes.len() as u64;
            let (start, end) = (range.start.min(len), range.end.min(len));
            return Ok(bytes.slice(start as usize..end.max(start) as usize));
        }
        let k = key.to_string();
        self.read(key, |s| {
            let (k, r) = (k.clone(), range.clone());
            async move { s.get_range(&k, r).await }
        })
        .await
    }

    async fn head(&self, key: &str) -> SResult<ObjectMeta> {
        if is_properties_key(key) {
            return self.get(key).await.map(|(_, meta)| meta);
        }
        let k = key.to_string();
        self.read(key, |s| {
            let k = k.clone();
            async move { s.head(&k).await }
        })
        .await
    }

    async fn put(&self, key: &str, data: Bytes) -> SResult<Version> {
        self.own.put(key, guarded(key, data)).await
    }

    async fn put_if_absent(&self, key: &str, data: Bytes) -> SResult<Version> {
        self.own.put_if_absent(key, guarded(key, data)).await
    }

    async fn put_if_match(&self, key: &str, data: Bytes, expected: &Version) -> SResult<Version> {
        self.own
            .put_if_match(key, guarded(key, data), expected)
            .await
    }

    async fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> SResult<ListPage> {
        if !Self::merges(prefix) || self.sources.is_empty() {
            return self.own.list_page(prefix, start_after, max_keys).await;
        }
        validate_key(prefix, true)?;
        let objects: Vec<ObjectMeta> = self
            .merged(prefix)
            .await?
            .into_iter()
            .filter(|m| start_after.is_none_or(|a| m.key.as_str() > a))
            .take(max_keys.saturating_add(1))
            .collect();
        Ok(ListPage::of_sorted(objects, max_keys))
    }

    async fn list_dir_keys(&self, prefix: &str) -> SResult<(Vec<String>, Vec<String>)> {
        if prefix != MDT_BASE && !is_mdt_file(prefix) {
            return self.own.list_dir_keys(prefix).await;
        }
        let (objects, dirs) = self.list_dir(prefix).await?;
        Ok((objects.into_iter().map(|m| m.key).collect(), dirs))
    }

    async fn list_dir(&self, prefix: &str) -> SResult<(Vec<ObjectMeta>, Vec<String>)> {
        let (mut objects, mut dirs) = self.own.list_dir(prefix).await?;
        if prefix != MDT_BASE && !is_mdt_file(prefix) {
            return Ok((objects, dirs));
        }
        for (i, (_, storage)) in self.sources.iter().enumerate() {
            let (o, d) = match storage.list_dir(prefix).await {
                Ok(x) => x,
                Err(StorageError::NotFound { .. }) => continue,
                Err(e) => return Err(e),
            };
            for m in o {
                if self.source_lists(i, &m.key) && !objects.iter().any(|x| x.key == m.key) {
                    objects.push(m);
                }
            }
            dirs.extend(d.into_iter().filter(|d| d.as_str() != MDT_META_DIR));
        }
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        dirs.sort();
        dirs.dedup();
        Ok((objects, dirs))
    }

    async fn delete_batch(&self, keys: &[String]) -> SResult<Vec<SResult<()>>> {
        let mut out: Vec<Option<SResult<()>>> = keys.iter().map(|_| None).collect();
        let mut own_keys = Vec::new();
        let mut own_at = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            validate_key(k, false)?;
            match self.rule.home(k) {
                // Not this table's to delete: released from its view only.
                Home::Source(_) => {
                    if let Some(slot) = out.get_mut(i) {
                        *slot = Some(Ok(()));
                    }
                }
                Home::Own | Home::Search => {
                    own_keys.push(k.clone());
                    own_at.push(i);
                }
            }
        }
        if !own_keys.is_empty() {
            let results = self.own.delete_batch(&own_keys).await?;
            for (i, r) in own_at.into_iter().zip(results) {
                if let Some(slot) = out.get_mut(i) {
                    *slot = Some(r);
                }
            }
        }
        Ok(out.into_iter().map(|r| r.unwrap_or(Ok(()))).collect())
    }

    async fn copy(&self, from: &str, to: &str) -> SResult<()> {
        validate_key(to, false)?;
        if self.rule.home(from) == Home::Own && !is_properties_key(from) && !is_guarded_key(to) {
            return self.own.copy(from, to).await;
        }
        let (data, _) = self.get(from).await?;
        self.put(to, data).await.map(|_| ())
    }
}

/// `data` as the clone stores it at `key`: guarded when `key` is the root config or its backup.
fn guarded(key: &str, data: Bytes) -> Bytes {
    if is_guarded_key(key) {
        guard(&data).unwrap_or(data)
    } else {
        data
    }
}

#[cfg(test)]
mod tests {
    use arbor_storage::ObjectStoreStorage;

    use super::*;

    const FID: &str = "0d9b1c4e-1f2a-4b3c-8d4e-5f6a7b8c9d0e-0";

    fn mem() -> Arc<dyn Storage> {
        Arc::new(ObjectStoreStorage::memory())
    }

    fn src(location: &str, instant: &str) -> CloneSource {
        CloneSource {
            location: location.to_string(),
            instant: instant.to_string(),
            root: "main".to_string(),
            reference: "main".to_string(),
        }
    }

    async fn put(s: &dyn Storage, k: &str) {
        s.put(k, Bytes::from(k.to_string())).await.unwrap();
    }

    fn base(p: &str, i: &str) -> String {
        format!("{p}/{FID}_0-1-0_{i}.parquet")
    }

    /// own <- c1 at 300 <- s at 100.
    async fn chain() -> (
        ClonedStorage,
        Arc<dyn Storage>,
        Arc<dyn Storage>,
        Arc<dyn Storage>,
    ) {
        let (own, c1, s) = (mem(), mem(), mem());
        let cloned = ClonedStorage::new(
            own.clone(),
            vec![
                (src("/c1", "20261202000000300"), c1.clone()),
                (src("/s", "20261202000000100"), s.clone()),
            ],
        )
        .unwrap();
        (cloned, own, c1, s)
    }

    #[tokio::test]
    async fn test_reads_go_where_the_rule_says_and_writes_stay_own() {
        let (cloned, own, c1, s) = chain().await;
        put(s.as_ref(), &base("p=1", "20261202000000100")).await;
        put(c1.as_ref(), &base("p=1", "20261202000000200")).await;
        // The source's later file with the same name as a clone file never shadows the clone's.
        put(s.as_ref(), &base("p=1", "20261202000000400")).await;
        cloned
            .put(&base("p=1", "20261202000000400"), Bytes::from("own"))
            .await
            .unwrap();
        let (d, m) = cloned.get(&base("p=1", "20261202000000100")).await.unwrap();
        assert_eq!(d, Bytes::from(base("p=1", "20261202000000100")));
        assert_eq!(m.key, base("p=1", "20261202000000100"));
        assert!(cloned.head(&base("p=1", "20261202000000200")).await.is_ok());
        let (d, _) = cloned.get(&base("p=1", "20261202000000400")).await.unwrap();
        assert_eq!(d, Bytes::from("own"));
        assert!(own.exists(&base("p=1", "20261202000000400")).await.unwrap());
        // A file with a source instant that its source does not hold is missing, named by key.
        let err = cloned
            .get(&base("p=1", "20261202000000250"))
            .await
            .unwrap_err();
        assert!(matches!(err, StorageError::NotFound { ref path } if path.contains("p=1/")));
        // Searched keys: own first, then sources.
        put(s.as_ref(), "p=1/.hoodie_partition_metadata").await;
        assert!(cloned
            .exists("p=1/.hoodie_partition_metadata")
            .await
            .unwrap());
        cloned
            .put("p=1/.hoodie_partition_metadata", Bytes::from("own marker"))
            .await
            .unwrap();
        let (d, _) = cloned.get("p=1/.hoodie_partition_metadata").await.unwrap();
        assert_eq!(d, Bytes::from("own marker"));
    }

    #[tokio::test]
    async fn test_deletes_never_reach_a_source() {
        let (cloned, own, _c1, s) = chain().await;
        let inherited = base("p=1", "20261202000000100");
        let written = base("p=1", "20261202000000500");
        put(s.as_ref(), &inherited).await;
        put(own.as_ref(), &written).await;
        let results = cloned
            .delete_batch(&[inherited.clone(), written.clone()])
            .await
            .unwrap();
        assert!(results.iter().all(|r| r.is_ok()));
        assert!(s.exists(&inherited).await.unwrap(), "source file deleted");
        assert!(!own.exists(&written).await.unwrap());
    }

    #[tokio::test]
    async fn test_mdt_listings_merge_sources_by_the_rule_and_data_listings_do_not() {
        let (cloned, own, c1, s) = chain().await;
        let mdt = |i: &str| format!(".hoodie/metadata/files/.files-0000-0_{i}.log.1_0-1-0");
        put(s.as_ref(), &mdt("20261202000000100")).await;
        put(s.as_ref(), &mdt("20261202000000350")).await; // the source's, after the clone point
        put(c1.as_ref(), &mdt("20261202000000300")).await;
        put(c1.as_ref(), &mdt("20261202000000050")).await; // c1 cannot have written it: hidden
        put(own.as_ref(), &mdt("20261202000000600")).await;
        put(
            s.as_ref(),
            ".hoodie/metadata/files/files-0000-0_0-0-0_00000000000000000.hfile",
        )
        .await;
        put(s.as_ref(), ".hoodie/metadata/.hoodie/hoodie.properties").await;
        put(s.as_ref(), &base("p=1", "20261202000000100")).await;
        let keys: Vec<String> = cloned
            .list_all(".hoodie/metadata/files")
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(
            keys,
            vec![
                mdt("20261202000000100"),
                mdt("20261202000000300"),
                mdt("20261202000000600"),
                ".hoodie/metadata/files/files-0000-0_0-0-0_00000000000000000.hfile".to_string(),
            ]
        );
        // Paged the same way.
        let page = cloned.list_page(".hoodie/metadata", None, 2).await.unwrap();
        assert_eq!(page.objects.len(), 2);
        assert!(page.next.is_some());
        let (objects, dirs) = cloned.list_dir(".hoodie/metadata").await.unwrap();
        assert!(objects.is_empty());
        assert_eq!(dirs, vec![".hoodie/metadata/files".to_string()]);
        // Data partitions list the clone's own files only.
        assert!(cloned.list_all("p=1").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn test_open_location_by_state() {
        #[derive(Debug)]
        struct Map(Vec<(String, Arc<dyn Storage>)>);
        impl LocationOpener for Map {
            fn open(&self, location: &str) -> SResult<Arc<dyn Storage>> {
                self.0
                    .iter()
                    .find(|(l, _)| l == location)
                    .map(|(_, s)| s.clone())
                    .ok_or_else(|| StorageError::NotFound {
                        path: location.to_string(),
                    })
            }
        }
        let (own, s) = (mem(), mem());
        let opener = Map(vec![("/own".into(), own.clone()), ("/s".into(), s.clone())]);
        // Not a clone: the storage itself.
        let plain = open_location("/own", &opener).await.unwrap();
        assert!(Arc::ptr_eq(&plain, &own));
        let mut d = CloneDescriptor {
            id: "c".to_string(),
            state: CloneState::Creating,
            deep: false,
            created: "2026-12-02T00:00:00Z".to_string(),
            sources: vec![src("/s", "20261202000000100")],
        };
        let v = d.create(own.as_ref()).await.unwrap();
        let err = open_location("/own", &opener).await.unwrap_err();
        assert!(
            matches!(err, TimelineError::CloneIncomplete { .. }),
            "{err}"
        );
        d.state = CloneState::Active;
        let v = d.replace(own.as_ref(), &v).await.unwrap();
        put(s.as_ref(), &base("p=1", "20261202000000100")).await;
        let cloned = open_location("/own", &opener).await.unwrap();
        assert!(cloned
            .exists(&base("p=1", "20261202000000100"))
            .await
            .unwrap());
        d.state = CloneState::Detached;
        d.replace(own.as_ref(), &v).await.unwrap();
        let detached = open_location("/own", &opener).await.unwrap();
        assert!(Arc::ptr_eq(&detached, &own));
        // A source that cannot be opened is named.
        d.state = CloneState::Active;
        d.sources = vec![src("/gone", "20261202000000100")];
        let (_, v) = CloneDescriptor::load(own.as_ref()).await.unwrap().unwrap();
        d.replace(own.as_ref(), &v).await.unwrap();
        let err = open_location("/own", &opener).await.unwrap_err();
        assert!(err.to_string().contains("/gone"), "{err}");
    }

    #[test]
    fn test_normalize_location() {
        assert_eq!(normalize_location("s3://b/t/").unwrap(), "s3://b/t");
        assert!(normalize_location("rel/dir").unwrap().starts_with('/'));
        assert_eq!(normalize_location("file:///x/y").unwrap(), "/x/y");
    }

    #[tokio::test]
    async fn test_the_legacy_reader_guard_is_stored_but_never_seen() {
        use crate::config::{TableConfig, TableType};
        use crate::layout::clone_guard::is_guarded;

        let (cloned, own, _, _) = chain().await;
        let config = TableConfig::new_v8("t", TableType::MergeOnRead).unwrap();
        TableConfig::create(&cloned, DEFAULT_META_DIR, &config)
            .await
            .unwrap();
        let key = ".hoodie/hoodie.properties";
        let (raw, _) = own.get(key).await.unwrap();
        assert!(is_guarded(&raw), "stored guarded");
        let (seen, meta) = cloned.get(key).await.unwrap();
        assert!(!is_guarded(&seen));
        assert_eq!(meta.size, seen.len() as u64);
        assert_eq!(cloned.head(key).await.unwrap().size, seen.len() as u64);
        assert_eq!(
            cloned.get_range(key, 0..10).await.unwrap(),
            seen.slice(0..10)
        );
        let loaded = TableConfig::load(&cloned, DEFAULT_META_DIR).await.unwrap();
        assert_eq!(loaded.table_type(), TableType::MergeOnRead);
        // An update (backup, compare-and-swap, read-back) through the clone keeps it guarded.
        TableConfig::update(&cloned, DEFAULT_META_DIR, |c| c.set("x.y", "1"))
            .await
            .unwrap();
        let (raw, _) = own.get(key).await.unwrap();
        assert!(is_guarded(&raw));
        assert_eq!(
            TableConfig::load(&cloned, DEFAULT_META_DIR)
                .await
                .unwrap()
                .get("x.y"),
            Some("1")
        );
        // A copy to a branch's meta directory stores the plain config; a copy onto the root
        // config stores it guarded.
        let branch = ".hoodie/branches/b/hoodie.properties";
        cloned.copy(key, branch).await.unwrap();
        assert!(!is_guarded(&own.get(branch).await.unwrap().0));
        own.delete(key).await.unwrap();
        cloned.copy(branch, key).await.unwrap();
        assert!(is_guarded(&own.get(key).await.unwrap().0));
    }
}
