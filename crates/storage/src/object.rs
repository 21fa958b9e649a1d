//! [`ObjectStoreStorage`]: the [`Storage`] implementation over `object_store` (local file system,
//! memory, or any other [`ObjectStore`]; the S3, Azure and GCS constructors live with their
//! factories in `backends/`).

mod local;

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    UpdateVersion,
};

use crate::error::{Result, StorageError};
use crate::path::validate_key;
use crate::storage::{ListPage, ObjectMeta, Storage, Version, MAX_DELETE_BATCH};

use self::local::{LocalFiles, LocalSource, LocalWriteMode};

/// How often `put_if_absent` retries when the backend reported a conflict but no object exists
/// (real S3 answers concurrent conditional writes with `409 ConditionalRequestConflict`, which
/// object_store reports as "already exists" although the competing write may have failed too).
const CREATE_CONFLICT_RETRIES: usize = 5;

/// [`Storage`] over an `object_store` [`ObjectStore`] rooted at a prefix.
///
/// Backends:
/// - **local** ([`ObjectStoreStorage::local`]): reads go through object_store's
///   [`LocalFileSystem`]; writes, deletes and listings are implemented here because
///   `LocalFileSystem` has no compare-and-swap (`PutMode::Update`), does not list in key order and
///   can repeat an ETag (see below).
///
///   **Locking.** Every mutation of a key (`put`, `put_if_absent`, `put_if_match`, `copy` to it,
///   `delete`) takes an exclusive OS file lock (`flock` on Unix) on the key's own lock file, a
///   hidden file next to the object: `<dir>/.arbor-lock-<h>`, `<h>` being 16 hex digits of a
///   stable hash (FNV-1a) of the object's file name. Under that lock the write compares the
///   current version (for [`Storage::put_if_match`]), stamps the fully written temporary file
///   and renames it into place, so conditional writes are atomic across threads and processes,
///   whatever their user, `TMPDIR`, working directory or storage root (a file reached through
///   storages rooted at different directories has one lock): the only shared state is the
///   object's directory. Users that share a table need a umask that lets them open each
///   other's files (a lock file needs only read access). Not across machines sharing a network
///   file system, where OS locks are not reliable.
///
///   The lock is taken without blocking and retried with a back-off of 1 ms doubling to 50 ms,
///   for at most the storage's lock timeout ([`ObjectStoreStorage::DEFAULT_LOCAL_LOCK_TIMEOUT`],
///   30 s, or [`ObjectStoreStorage::with_local_lock_timeout`]); then the operation fails with
///   [`StorageError::LockTimeout`], naming the lock file, having changed nothing. A holder that is
///   killed releases the lock at once; one that is stopped (`SIGSTOP`, a debugger) or hung inside
///   its critical section (a few microseconds: the data is written and synced before the lock is
///   taken) keeps it until it resumes or dies, delaying the writers of that one key and nobody
///   else: not other keys of the directory, other directories or other storage roots.
///
///   **Per key, not per directory**, because then unrelated writes (the many base files of one
///   partition, the instants of one timeline) never wait for each other or for a stopped holder
///   of another object, and because a lock file can then exist only while its key is being
///   mutated: the holder removes it before releasing the lock (a waiter that locked the removed
///   file notices, as the path no longer names it, and locks the new one), so at rest no
///   directory holds a lock file, lock files never keep a directory alive, and the tree holds
///   exactly the objects. A killed holder leaves its lock file, which the next mutation of the key
///   reuses and removes. (Outside Unix, where the check needs inode numbers, lock files are never
///   removed.) Lock files are hidden from [`Storage::list_page`] and [`Storage::list_dir`], and
///   keys named like them are rejected (`InvalidKey`).
///
///   **Safe for Hudi readers**: the name starts with `.` (a hidden file for Spark's and Hive's
///   listings), has no base-file extension (its only `.` is the first character, so Java Hudi
///   takes the whole name as its extension), contains neither `_` nor `.log` (so it does not
///   match Hudi's log file pattern
///   `.<fileId>_<instant>.log.<n>_<token>`) and does not start with an instant time (so it is no
///   timeline file); Java Hudi and hudi-rs therefore skip it in partition and timeline
///   listings (hudi-rs logs a warning for an unparsable file in a partition, which it can only
///   meet while a write of that partition is in progress or after a killed writer).
///
///   Temporary files live next to their target, named `<name>#<digits>` (object_store's own
///   staging convention, hidden from listings); a crash can leave one behind. Keys whose file
///   name ends in `#<digits>` are therefore rejected.
///
///   **Versions.** The local ETag is object_store's `<inode>-<mtime µs>-<size>`. Inodes are
///   reused quickly on ext4 and mtimes are only as fine as the kernel clock tick, so two writes of
///   the same size could get the same ETag and a stale compare-and-swap would succeed. To rule
///   that out, every write sets the new file's mtime explicitly, under the key's lock, to the
///   clock or, if that is not later, to just after the mtime of the version it replaces: while a
///   key exists the mtimes of its versions strictly increase. That last stamp lives in the object
///   itself, inside the storage root, so no other state is needed. A delete holds the key's lock
///   until the clock has passed the deleted version's mtime (normally at once), so a re-created
///   object, stamped from the clock, lies above every earlier version too: versions of a key never
///   repeat, also across delete and re-create (unless the system clock is set back between the
///   two by more than the time between them, and the inode and size are reused).
///
///   Like an object store, the local backend has no empty directories: deleting the last object
///   of a directory (or failing a write that created it) removes the directory and its empty
///   parents up to the root. Unlike an object store, a file system cannot hold both `a/b` and
///   `a/b/c`: writing below an object fails with a `Backend` error (reading there is `NotFound`).
///
///   Durability: the temporary file's data is synced (`fdatasync`) before it is renamed or linked
///   into place, and the directory is synced after (with any directories the write created), so
///   a completed write survives a power failure and a published file is never empty or
///   truncated. The stamped mtime is not synced on its own (on ext4 the directory sync in
///   practice commits it too); where it is lost, a power failure changes the version of the
///   object, which only makes a pending compare-and-swap fail. Deletes and lock files are not
///   synced: a power failure can undo a delete, or bring back a lock file, which the next
///   mutation of its key removes.
/// - **memory** ([`ObjectStoreStorage::memory`]): object_store's [`InMemory`].
/// - **S3** (`ObjectStoreStorage::s3`, feature `s3`): object_store's `AmazonS3` with conditional
///   put (`If-None-Match: *` / `If-Match: <etag>`). The S3 ETag of a simple put is the MD5 of the
///   content, so two writes of identical bytes have equal versions there.
/// - **Azure Blob** (`ObjectStoreStorage::azure`, feature `azure`) and **GCS**
///   (`ObjectStoreStorage::gcs`, feature `gcs`): object_store's clients, whose conditional puts
///   use `If-None-Match: *` / `If-Match: <etag>` (Azure) and generation preconditions (GCS).
///
/// Listing order: S3, Azure, GCS and memory list in key order and pages are streamed. The local backend walks
/// directories in key order and stops after one page. For a store given to
/// [`ObjectStoreStorage::new`] the order is unknown, so each page lists everything under the prefix
/// and sorts it (correct but `O(n)` per page) unless [`ObjectStoreStorage::with_sorted_listing`]
/// says the store lists in order.
#[derive(Debug, Clone)]
pub struct ObjectStoreStorage {
    /// The store, already rooted at the prefix.
    store: Arc<dyn ObjectStore>,
    /// What `Display` shows.
    url: String,
    /// The local-file-system specifics, for the local backend.
    local: Option<Arc<LocalFiles>>,
    /// True if `store.list*` yields keys in ascending order.
    sorted_listing: bool,
    /// True if listings report ETags without the quotes that `head`/`get`/`put` report (Azure
    /// Blob): listed ETags are then quoted so that both agree.
    quote_listed_etags: bool,
}

impl ObjectStoreStorage {
    /// How long a mutation of the local backend waits for the lock of its key unless
    /// [`with_local_lock_timeout`](Self::with_local_lock_timeout) says otherwise.
    pub const DEFAULT_LOCAL_LOCK_TIMEOUT: Duration = Duration::from_secs(30);

    /// A storage rooted at directory `root` of the local file system (created if missing), whose
    /// mutations wait at most [`DEFAULT_LOCAL_LOCK_TIMEOUT`](Self::DEFAULT_LOCAL_LOCK_TIMEOUT)
    /// for the lock of their key.
    pub fn local(root: &std::path::Path) -> Result<Self> {
        let invalid = |reason: String| StorageError::InvalidLocation {
            url: root.display().to_string(),
            reason,
        };
        std::fs::create_dir_all(root)
            .map_err(|e| invalid(format!("cannot create the directory: {e}")))?;
        let canonical = std::fs::canonicalize(root)
            .map_err(|e| invalid(format!("cannot resolve the directory: {e}")))?;
        let url = url::Url::from_file_path(&canonical)
            .map_err(|()| invalid("not an absolute path".to_string()))?;
        let fs = LocalFileSystem::new_with_prefix(&canonical)
            .map_err(|e| invalid(format!("object_store refused the directory: {e}")))?;
        let fs = Arc::new(fs);
        Ok(Self {
            store: fs.clone(),
            url: url.to_string(),
            local: Some(Arc::new(LocalFiles::new(
                canonical,
                fs,
                Self::DEFAULT_LOCAL_LOCK_TIMEOUT,
            ))),
            sorted_listing: true,
            quote_listed_etags: false,
        })
    }

    /// A fresh, empty in-memory storage (`memory://`).
    pub fn memory() -> Self {
        Self {
            store: Arc::new(InMemory::new()),
            url: "memory://".to_string(),
            local: None,
            sorted_listing: true,
            quote_listed_etags: false,
        }
    }

    /// A storage over any `store`, rooted at `prefix` (a key, or empty for the store's root).
    /// `name` is what `Display` shows, normally the URL. Listings sort each page themselves unless
    /// [`with_sorted_listing`](Self::with_sorted_listing) is set.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str, name: impl Into<String>) -> Result<Self> {
        validate_key(prefix, true)?;
        let store: Arc<dyn ObjectStore> = if prefix.is_empty() {
            store
        } else {
            let prefix = parse_path(prefix)?;
            Arc::new(PrefixStore::new(store, prefix))
        };
        Ok(Self {
            store,
            url: name.into(),
            local: None,
            sorted_listing: false,
            quote_listed_etags: false,
        })
    }

    /// Sets how long each mutation of the local backend waits for the lock of its key (held by a
    /// concurrent mutation of the same key, normally for microseconds) before it fails with
    /// [`StorageError::LockTimeout`], having changed nothing. `Duration::ZERO` tries once. No
    /// effect on other backends.
    pub fn with_local_lock_timeout(mut self, timeout: Duration) -> Self {
        if let Some(local) = &self.local {
            self.local = Some(Arc::new(local.with_lock_timeout(timeout)));
        }
        self
    }

    /// Declares whether the store lists keys in ascending order (S3 and object_store's memory
    /// store do), which lets [`Storage::list_page`] stream instead of sorting everything.
    pub fn with_sorted_listing(mut self, sorted: bool) -> Self {
        self.sorted_listing = sorted;
        self
    }

    /// Declares that the store's listings report ETags without the surrounding quotes that its
    /// `head`, `get` and `put` report (Azure Blob Storage does): listed ETags are then quoted, so
    /// that a listed [`Version`] equals the one `head` returns and can be used for
    /// [`Storage::put_if_match`].
    pub fn with_quoted_listed_etags(mut self, quote: bool) -> Self {
        self.quote_listed_etags = quote;
        self
    }

    /// The underlying store, rooted at this storage's prefix (keys are the same). For handing to
    /// readers that speak object_store directly (parquet, DataFusion).
    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    /// The URL this storage was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The root directory, for the local backend.
    pub fn local_root(&self) -> Option<&std::path::Path> {
        self.local.as_deref().map(LocalFiles::root)
    }

    /// Validates `key` and converts it to an object_store path.
    fn key_path(&self, key: &str) -> Result<Path> {
        validate_key(key, false)?;
        if let Some(local) = &self.local {
            local.check_key(key)?;
        }
        parse_path(key)
    }

    /// Validates a listing prefix (may be empty) and converts it; `None` for the root.
    fn prefix_path(&self, prefix: &str) -> Result<Option<Path>> {
        validate_key(prefix, true)?;
        if prefix.is_empty() {
            Ok(None)
        } else {
            parse_path(prefix).map(Some)
        }
    }

    /// Maps an object_store error to a [`StorageError`] naming `key`.
    fn map_err(&self, operation: &'static str, key: &str, e: object_store::Error) -> StorageError {
        use object_store::Error as E;
        let path = key.to_string();
        match e {
            E::NotFound { .. } => StorageError::NotFound { path },
            E::AlreadyExists { .. } => StorageError::AlreadyExists { path },
            E::Precondition { .. } => StorageError::PreconditionFailed { path },
            E::NotImplemented { .. } | E::NotSupported { .. } => StorageError::NotSupported {
                operation,
                backend: self.url.clone(),
            },
            E::InvalidPath { .. } => StorageError::InvalidKey {
                path,
                reason: e.to_string(),
            },
            // Local: a path component is a file, so the object cannot exist (on an object store
            // this is simply a missing key).
            other if has_io_kind(&other, std::io::ErrorKind::NotADirectory) => {
                StorageError::NotFound { path }
            }
            other => StorageError::Backend {
                operation,
                path,
                source: Box::new(other),
            },
        }
    }

    /// Runs a blocking local-file-system operation off the async threads.
    async fn blocking<T, F>(&self, operation: &'static str, key: &str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T> + Send + 'static,
    {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| StorageError::Backend {
                operation,
                path: key.to_string(),
                source: Box::new(e),
            })?
    }

    /// A put with `mode` through object_store (non-local backends).
    async fn store_put(
        &self,
        operation: &'static str,
        key: &str,
        path: &Path,
        data: Bytes,
        mode: PutMode,
    ) -> Result<Version> {
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        let res = self
            .store
            .put_opts(path, PutPayload::from_bytes(data), opts)
            .await
            .map_err(|e| self.map_err(operation, key, e))?;
        Ok(Version {
            e_tag: res.e_tag,
            version: res.version,
        })
    }

    /// One page of a listing for stores that list in an unknown order: everything under the
    /// prefix is collected and sorted.
    async fn list_page_sorting(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> Result<ListPage> {
        let prefix_path = self.prefix_path(prefix)?;
        let mut all: Vec<ObjectMeta> = self
            .list_stream(prefix_path.as_ref(), start_after)?
            .try_collect()
            .await
            .map_err(|e| self.map_err("list", prefix, e))?;
        all.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(ListPage::of_sorted(all, max_keys))
    }

    /// The object_store listing stream after `start_after`, mapped to our [`ObjectMeta`].
    fn list_stream(
        &self,
        prefix: Option<&Path>,
        start_after: Option<&str>,
    ) -> Result<futures::stream::BoxStream<'static, object_store::Result<ObjectMeta>>> {
        let s = match start_after {
            Some(after) => {
                validate_key(after, false)?;
                self.store.list_with_offset(prefix, &parse_path(after)?)
            }
            None => self.store.list(prefix),
        };
        let quote = self.quote_listed_etags;
        Ok(s.map_ok(move |m| listed_meta(m, quote)).boxed())
    }
}

impl fmt::Display for ObjectStoreStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

/// Converts an already validated key to an object_store path (kept verbatim, not re-encoded).
fn parse_path(key: &str) -> Result<Path> {
    Path::parse(key).map_err(|e| StorageError::InvalidKey {
        path: key.to_string(),
        reason: e.to_string(),
    })
}

/// True if an `io::Error` of `kind` is somewhere in the source chain of `e`.
fn has_io_kind(e: &(dyn std::error::Error + 'static), kind: std::io::ErrorKind) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if io.kind() == kind {
                return true;
            }
        }
        cur = err.source();
    }
    false
}

/// Converts object_store metadata.
fn convert_meta(m: object_store::ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        key: m.location.to_string(),
        size: m.size,
        last_modified: m.last_modified,
        version: Version {
            e_tag: m.e_tag,
            version: m.version,
        },
    }
}

/// Converts listed metadata, quoting a bare ETag when `quote` (see
/// [`ObjectStoreStorage::with_quoted_listed_etags`]).
fn listed_meta(m: object_store::ObjectMeta, quote: bool) -> ObjectMeta {
    let mut meta = convert_meta(m);
    if quote {
        if let Some(tag) = &meta.version.e_tag {
            if !tag.starts_with('"') && !tag.starts_with("W/") {
                meta.version.e_tag = Some(format!("\"{tag}\""));
            }
        }
    }
    meta
}

/// Rejects `max_keys == 0`.
fn check_max_keys(max_keys: usize) -> Result<()> {
    if max_keys == 0 {
        return Err(StorageError::InvalidArgument {
            operation: "list_page",
            reason: "max_keys must be at least 1".to_string(),
        });
    }
    Ok(())
}

#[async_trait]
impl Storage for ObjectStoreStorage {
    async fn get(&self, key: &str) -> Result<(Bytes, ObjectMeta)> {
        let path = self.key_path(key)?;
        let res = self
            .store
            .get_opts(&path, GetOptions::default())
            .await
            .map_err(|e| self.map_err("get", key, e))?;
        // The key as given (a prefixed store reports the full location here).
        let meta = ObjectMeta {
            key: key.to_string(),
            ..convert_meta(res.meta.clone())
        };
        let bytes = res.bytes().await.map_err(|e| self.map_err("get", key, e))?;
        Ok((bytes, meta))
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        let path = self.key_path(key)?;
        let bad_range = |size: Option<u64>| StorageError::InvalidArgument {
            operation: "get_range",
            reason: match size {
                Some(size) => format!(
                    "range {}..{} of {key} starts past its end ({size} bytes)",
                    range.start, range.end
                ),
                None => format!("range {}..{} of {key} is reversed", range.start, range.end),
            },
        };
        if range.start > range.end {
            return Err(bad_range(None));
        }
        if range.start == range.end {
            let meta = self.head(key).await?;
            if range.start > meta.size {
                return Err(bad_range(Some(meta.size)));
            }
            return Ok(Bytes::new());
        }
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            ..Default::default()
        };
        let res = match self.store.get_opts(&path, opts).await {
            Ok(res) => res,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(StorageError::NotFound {
                    path: key.to_string(),
                })
            }
            Err(e) => {
                // A start at or past the end is reported differently by each backend (invalid
                // range, HTTP 416, ...): decide with the object's size.
                return match self.head(key).await {
                    Ok(meta) if range.start == meta.size => Ok(Bytes::new()),
                    Ok(meta) if range.start > meta.size => Err(bad_range(Some(meta.size))),
                    Err(nf) if nf.is_not_found() => Err(nf),
                    _ => Err(self.map_err("get_range", key, e)),
                };
            }
        };
        res.bytes()
            .await
            .map_err(|e| self.map_err("get_range", key, e))
    }

    async fn head(&self, key: &str) -> Result<ObjectMeta> {
        let path = self.key_path(key)?;
        let meta = self
            .store
            .head(&path)
            .await
            .map_err(|e| self.map_err("head", key, e))?;
        Ok(ObjectMeta {
            key: key.to_string(),
            ..convert_meta(meta)
        })
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<Version> {
        let path = self.key_path(key)?;
        if let Some(local) = self.local.clone() {
            let k = key.to_string();
            return self
                .blocking("put", key, move || {
                    local.write(&k, LocalSource::Bytes(data), LocalWriteMode::Overwrite)
                })
                .await;
        }
        self.store_put("put", key, &path, data, PutMode::Overwrite)
            .await
    }

    async fn put_if_absent(&self, key: &str, data: Bytes) -> Result<Version> {
        let path = self.key_path(key)?;
        if let Some(local) = self.local.clone() {
            let k = key.to_string();
            return self
                .blocking("put_if_absent", key, move || {
                    local.write(&k, LocalSource::Bytes(data), LocalWriteMode::Create)
                })
                .await;
        }
        let mut attempt = 0;
        loop {
            match self
                .store_put("put_if_absent", key, &path, data.clone(), PutMode::Create)
                .await
            {
                Err(StorageError::AlreadyExists { path: p }) => {
                    // Make sure an object really is there (see CREATE_CONFLICT_RETRIES).
                    attempt += 1;
                    match self.store.head(&path).await {
                        Err(object_store::Error::NotFound { .. })
                            if attempt <= CREATE_CONFLICT_RETRIES =>
                        {
                            tokio::time::sleep(std::time::Duration::from_millis(
                                10 * attempt as u64,
                            ))
                            .await;
                            continue;
                        }
                        _ => return Err(StorageError::AlreadyExists { path: p }),
                    }
                }
                other => return other,
            }
        }
    }

    async fn put_if_match(&self, key: &str, data: Bytes, expected: &Version) -> Result<Version> {
        let path = self.key_path(key)?;
        if expected.e_tag.is_none() && expected.version.is_none() {
            // An empty version matches no object.
            return Err(StorageError::PreconditionFailed {
                path: key.to_string(),
            });
        }
        if let Some(local) = self.local.clone() {
            let k = key.to_string();
            let expected = expected.clone();
            return self
                .blocking("put_if_match", key, move || {
                    local.write(
                        &k,
                        LocalSource::Bytes(data),
                        LocalWriteMode::Update(expected),
                    )
                })
                .await;
        }
        let mode = PutMode::Update(UpdateVersion {
            e_tag: expected.e_tag.clone(),
            version: expected.version.clone(),
        });
        match self.store_put("put_if_match", key, &path, data, mode).await {
            // The object does not exist: the contract says PreconditionFailed.
            Err(StorageError::NotFound { path }) => Err(StorageError::PreconditionFailed { path }),
            other => other,
        }
    }

    async fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> Result<ListPage> {
        check_max_keys(max_keys)?;
        self.prefix_path(prefix)?;
        if let Some(after) = start_after {
            validate_key(after, false)?;
        }
        if let Some(local) = self.local.clone() {
            let (p, a) = (prefix.to_string(), start_after.map(str::to_string));
            return self
                .blocking("list", prefix, move || {
                    local.list_page(&p, a.as_deref(), max_keys)
                })
                .await;
        }
        if !self.sorted_listing {
            return self.list_page_sorting(prefix, start_after, max_keys).await;
        }
        let prefix_path = self.prefix_path(prefix)?;
        let objects: Vec<ObjectMeta> = self
            .list_stream(prefix_path.as_ref(), start_after)?
            .take(max_keys.saturating_add(1))
            .try_collect()
            .await
            .map_err(|e| self.map_err("list", prefix, e))?;
        if objects
            .windows(2)
            .any(|w| matches!(w, [a, b] if a.key >= b.key))
        {
            // The store claimed to list in order but did not: fall back to sorting.
            return self.list_page_sorting(prefix, start_after, max_keys).await;
        }
        Ok(ListPage::of_sorted(objects, max_keys))
    }

    async fn list_dir(&self, prefix: &str) -> Result<(Vec<ObjectMeta>, Vec<String>)> {
        let prefix_path = self.prefix_path(prefix)?;
        if let Some(local) = self.local.clone() {
            // Missing, or an object rather than a directory: no children.
            let p = prefix.to_string();
            return self
                .blocking("list_dir", prefix, move || local.list_dir(&p))
                .await;
        }
        let res = match self.store.list_with_delimiter(prefix_path.as_ref()).await {
            Ok(res) => res,
            Err(object_store::Error::NotFound { .. }) => return Ok((Vec::new(), Vec::new())),
            Err(e) => return Err(self.map_err("list_dir", prefix, e)),
        };
        let quote = self.quote_listed_etags;
        let mut objects: Vec<ObjectMeta> = res
            .objects
            .into_iter()
            .map(|m| listed_meta(m, quote))
            .collect();
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        let mut dirs: Vec<String> = res
            .common_prefixes
            .into_iter()
            .map(|p| p.to_string())
            .collect();
        dirs.sort();
        dirs.dedup();
        Ok((objects, dirs))
    }

    async fn list_dir_keys(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>)> {
        if let Some(local) = self.local.clone() {
            self.prefix_path(prefix)?;
            let p = prefix.to_string();
            return self
                .blocking("list_dir", prefix, move || local.list_dir_keys(&p))
                .await;
        }
        let (objects, dirs) = self.list_dir(prefix).await?;
        Ok((objects.into_iter().map(|m| m.key).collect(), dirs))
    }

    async fn delete_batch(&self, keys: &[String]) -> Result<Vec<Result<()>>> {
        if keys.len() > MAX_DELETE_BATCH {
            return Err(StorageError::InvalidArgument {
                operation: "delete_batch",
                reason: format!(
                    "{} keys given, at most {MAX_DELETE_BATCH} allowed",
                    keys.len()
                ),
            });
        }
        let mut paths = Vec::with_capacity(keys.len());
        for k in keys {
            paths.push(self.key_path(k)?);
        }
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(local) = self.local.clone() {
            let keys = keys.to_vec();
            return self
                .blocking("delete_batch", "", move || {
                    Ok(keys.iter().map(|k| local.delete(k)).collect())
                })
                .await;
        }
        let results: Vec<object_store::Result<Path>> = self
            .store
            .delete_stream(stream::iter(paths.into_iter().map(Ok)).boxed())
            .collect()
            .await;
        if results.len() == keys.len() {
            Ok(results
                .into_iter()
                .zip(keys)
                .map(|(r, k)| match r {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(self.map_err("delete", k, e)),
                })
                .collect())
        } else {
            // The bulk request failed as a whole: report its error for every key.
            let message = results
                .into_iter()
                .find_map(|r| r.err())
                .map(|e| e.to_string())
                .unwrap_or_else(|| "the backend returned too few results".to_string());
            Ok(keys
                .iter()
                .map(|k| {
                    Err(StorageError::Backend {
                        operation: "delete",
                        path: k.clone(),
                        source: message.clone().into(),
                    })
                })
                .collect())
        }
    }

    async fn copy(&self, from: &str, to: &str) -> Result<()> {
        let from_path = self.key_path(from)?;
        let to_path = self.key_path(to)?;
        if let Some(local) = self.local.clone() {
            let (f, t) = (from.to_string(), to.to_string());
            return self
                .blocking("copy", from, move || {
                    local
                        .write(&t, LocalSource::CopyOf(f), LocalWriteMode::Overwrite)
                        .map(|_| ())
                })
                .await;
        }
        match self.store.copy(&from_path, &to_path).await {
            Ok(()) => Ok(()),
            Err(object_store::Error::NotFound { .. }) => Err(StorageError::NotFound {
                path: from.to_string(),
            }),
            Err(e) => Err(self.map_err("copy", from, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_listed_meta_quotes_bare_etags_only_when_asked() {
        let m = |tag: &str| object_store::ObjectMeta {
            location: Path::from("a"),
            last_modified: chrono::DateTime::<chrono::Utc>::default(),
            size: 1,
            e_tag: Some(tag.to_string()),
            version: None,
        };
        let tag = |m: ObjectMeta| m.version.e_tag.unwrap();
        assert_eq!(tag(listed_meta(m("0x1"), true)), "\"0x1\"");
        assert_eq!(tag(listed_meta(m("\"0x1\""), true)), "\"0x1\"");
        assert_eq!(tag(listed_meta(m("W/\"x\""), true)), "W/\"x\"");
        assert_eq!(tag(listed_meta(m("0x1"), false)), "0x1");
    }

    #[test]
    fn test_display_shows_url() {
        assert_eq!(ObjectStoreStorage::memory().to_string(), "memory://");
        let dir = tempfile::tempdir().unwrap();
        let s = ObjectStoreStorage::local(dir.path()).unwrap();
        assert!(s.to_string().starts_with("file:///"), "{s}");
        assert!(!s.to_string().ends_with('/'), "{s}");
    }

    #[tokio::test]
    async fn test_new_with_prefix_roots_keys() {
        let mem: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let s = ObjectStoreStorage::new(mem.clone(), "t/x", "memory://t/x")
            .unwrap()
            .with_sorted_listing(true);
        s.put("a/b", Bytes::from_static(b"1")).await.unwrap();
        assert!(mem.head(&Path::from("t/x/a/b")).await.is_ok());
        let page = s.list_page("", None, 10).await.unwrap();
        assert_eq!(page.objects.len(), 1);
        assert_eq!(page.objects[0].key, "a/b");
        // Unsorted mode gives the same answer.
        let u = ObjectStoreStorage::new(mem, "t/x", "memory://t/x").unwrap();
        assert_eq!(u.list_page("", None, 10).await.unwrap(), page);
    }
}
