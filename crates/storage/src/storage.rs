//! The [`Storage`] trait and the plain types it speaks.

use std::fmt::{Debug, Display};
use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};

use crate::error::Result;

/// The most keys one [`Storage::delete_batch`] call accepts (the S3 `DeleteObjects` limit).
pub const MAX_DELETE_BATCH: usize = 1000;

/// The version of an object as returned by a read or write, used by [`Storage::put_if_match`].
///
/// What a compare-and-swap guarantees is exactly this: it succeeds only if the object's *current*
/// version equals the expected one. Whether two different writes can have equal versions depends
/// on the backend:
/// - local: never (every write gets a fresh modification time, see
///   [`crate::ObjectStoreStorage`]); memory: never (a counter), so equal versions there mean the
///   same write;
/// - S3 (and stores like it): the ETag of a simple put is the MD5 of the content, so two writes
///   of identical bytes have equal versions, and a compare-and-swap cannot tell whether the
///   object was rewritten with the same bytes in between (an ABA). That is harmless when the
///   content changes with every write, as for state documents that carry a token, counter or
///   owner id: equal versions then mean equal content, and the swap decides on the same state.
///
/// Documents that may be rewritten with identical bytes by different writers should therefore
/// include something unique per write if a compare-and-swap on them must detect every change.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Version {
    /// The entity tag (S3 ETag, or the local backend's inode/mtime/size tag).
    pub e_tag: Option<String>,
    /// A backend version id, where the backend has one.
    pub version: Option<String>,
}

/// What a listing or `head` returns about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// Key relative to the storage root, `/`-separated, never starting with `/`.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification time as reported by the backend.
    pub last_modified: DateTime<Utc>,
    /// Version for compare-and-swap.
    pub version: Version,
}

/// One page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListPage {
    /// Objects of this page in ascending key order.
    pub objects: Vec<ObjectMeta>,
    /// Pass as `start_after` to get the next page; `None` when this was the last page.
    pub next: Option<String>,
}

impl ListPage {
    /// Cuts a listing already in ascending key order to one page of at most `max_keys`, with
    /// `next` set (to the last key kept) only when objects were cut off.
    pub fn of_sorted(mut objects: Vec<ObjectMeta>, max_keys: usize) -> Self {
        if objects.len() > max_keys {
            objects.truncate(max_keys);
            let next = objects.last().map(|o| o.key.clone());
            Self { objects, next }
        } else {
            Self {
                objects,
                next: None,
            }
        }
    }
}

/// Byte storage under one root (a directory, a bucket prefix, a memory store).
///
/// Keys are relative to the root, `/`-separated, with no empty, `.` or `..` segment
/// ([`crate::validate_key`]); an implementation rejects any other key with
/// [`crate::StorageError::InvalidKey`] before touching the backend.
///
/// Contract every implementation guarantees (checked by `conformance::run_storage_suite`):
/// - a completed `put*` is visible in full to every later `get`, `head` and listing; readers never
///   observe a partial object;
/// - [`put_if_absent`](Storage::put_if_absent) is atomic: of any number of concurrent calls on one
///   key, exactly one succeeds and the others fail with `AlreadyExists`;
/// - [`put_if_match`](Storage::put_if_match) is an atomic compare-and-swap: it succeeds only if the
///   object's current version equals `expected`, else fails with `PreconditionFailed`;
/// - listings are in ascending key order and consistent with completed writes;
/// - a missing key yields `NotFound` from `get`, `get_range`, `head` and `copy`.
#[async_trait]
pub trait Storage: Debug + Display + Send + Sync + 'static {
    /// Reads a whole object.
    async fn get(&self, key: &str) -> Result<(Bytes, ObjectMeta)>;

    /// Reads `range` (byte offsets, end exclusive) of an object. A range past the end is
    /// truncated to the object's size; a start past the end is an `InvalidArgument`.
    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes>;

    /// Reads an object's metadata.
    async fn head(&self, key: &str) -> Result<ObjectMeta>;

    /// Writes an object unconditionally (atomically replacing any previous one).
    async fn put(&self, key: &str, data: Bytes) -> Result<Version>;

    /// Creates an object only if no object exists at `key`; else `AlreadyExists`.
    async fn put_if_absent(&self, key: &str, data: Bytes) -> Result<Version>;

    /// Replaces an object only if its current version is `expected`; else `PreconditionFailed`
    /// (also when the object no longer exists).
    async fn put_if_match(&self, key: &str, data: Bytes, expected: &Version) -> Result<Version>;

    /// Lists at most `max_keys` objects whose key starts with `prefix`, in ascending key order,
    /// beginning after `start_after` (exclusive) when given. `prefix` is a directory prefix: `a/b`
    /// lists `a/b/...`, not `a/bc`. The empty prefix lists everything.
    async fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> Result<ListPage>;

    /// Lists the direct children of directory `prefix`: the objects in it and the names of the
    /// sub-directories (as keys, without trailing `/`), both ascending.
    async fn list_dir(&self, prefix: &str) -> Result<(Vec<ObjectMeta>, Vec<String>)>;

    /// The keys of [`list_dir`](Storage::list_dir) without the objects' metadata: the objects in
    /// directory `prefix` and its sub-directories, both ascending, exactly the keys `list_dir`
    /// returns. For callers that only need names (a timeline lists instant files by name);
    /// backends where metadata costs a call per object (the local file system) answer it
    /// without that call. The default asks `list_dir`.
    async fn list_dir_keys(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>)> {
        let (objects, dirs) = self.list_dir(prefix).await?;
        Ok((objects.into_iter().map(|m| m.key).collect(), dirs))
    }

    /// Deletes up to [`MAX_DELETE_BATCH`] objects. Deleting a missing key is not an error. Returns
    /// one result per key, in order; the call itself fails only for a bad argument.
    async fn delete_batch(&self, keys: &[String]) -> Result<Vec<Result<()>>>;

    /// Copies an object to another key, replacing any object there.
    async fn copy(&self, from: &str, to: &str) -> Result<()>;
}

/// Conveniences built only from the required methods of [`Storage`].
#[async_trait]
pub trait StorageExt: Storage {
    /// Lists every object under `prefix` by following pages.
    async fn list_all(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.list_page(prefix, after.as_deref(), 1000).await?;
            out.extend(page.objects);
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(out),
            }
        }
    }

    /// Reads an object, mapping "not found" to `None`.
    async fn get_opt(&self, key: &str) -> Result<Option<(Bytes, ObjectMeta)>> {
        match self.get(key).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// True if an object exists at `key`.
    async fn exists(&self, key: &str) -> Result<bool> {
        match self.head(key).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Deletes one object; a missing object is not an error.
    async fn delete(&self, key: &str) -> Result<()> {
        let mut results = self.delete_batch(&[key.to_string()]).await?;
        results.pop().unwrap_or(Ok(()))
    }

    /// Deletes every key of `keys` in batches of at most [`MAX_DELETE_BATCH`]; missing objects
    /// are not an error. Stops at the first failure (the error names its key); keys of earlier
    /// batches stay deleted.
    async fn delete_all(&self, keys: &[String]) -> Result<()> {
        for chunk in keys.chunks(MAX_DELETE_BATCH) {
            for r in self.delete_batch(chunk).await? {
                match r {
                    Ok(()) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

impl<T: Storage + ?Sized> StorageExt for T {}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::ObjectStoreStorage;

    #[test]
    fn test_of_sorted_sets_next_only_when_more() {
        let meta = |k: &str| ObjectMeta {
            key: k.to_string(),
            size: 0,
            last_modified: chrono::DateTime::<chrono::Utc>::default(),
            version: Version::default(),
        };
        let p = ListPage::of_sorted(vec![meta("a"), meta("b")], 2);
        assert_eq!(p.next, None);
        let p = ListPage::of_sorted(vec![meta("a"), meta("b"), meta("c")], 2);
        assert_eq!(p.next.as_deref(), Some("b"));
        assert_eq!(p.objects.len(), 2);
    }

    #[tokio::test]
    async fn test_delete_all_more_than_one_batch_with_missing_keys_deletes_every_key() {
        let s = ObjectStoreStorage::memory();
        let keys: Vec<String> = (0..MAX_DELETE_BATCH + 3)
            .map(|i| format!("d/{i:05}"))
            .collect();
        for k in keys.iter().skip(1) {
            s.put(k, Bytes::from_static(b"x")).await.unwrap();
        }
        s.put("keep", Bytes::from_static(b"x")).await.unwrap();
        s.delete_all(&keys).await.unwrap();
        assert!(s.list_all("d").await.unwrap().is_empty());
        assert!(s.exists("keep").await.unwrap());
    }
}
