//! [`PrefixedStorage`]: the subtree of a [`Storage`] under a key prefix, seen as a [`Storage`] of
//! its own (like object_store's `PrefixStore`).
//!
//! The Hudi metadata table is a Hudi table stored under `<table>/.hoodie/metadata`; wrapping the
//! table's storage in a `PrefixedStorage` with prefix `.hoodie/metadata` lets the same code open
//! it as any other table:
//!
//! ```
//! # use std::sync::Arc;
//! # use arbor_storage::{ObjectStoreStorage, PrefixedStorage, Storage};
//! # async fn demo() -> arbor_storage::Result<()> {
//! let table: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
//! let mdt = PrefixedStorage::new(table.clone(), ".hoodie/metadata")?;
//! mdt.put(".hoodie/hoodie.properties", "x".into()).await?;
//! assert!(table.head(".hoodie/metadata/.hoodie/hoodie.properties").await.is_ok());
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{Result, StorageError};
use crate::path::validate_key;
use crate::storage::{ListPage, ObjectMeta, Storage, Version};

/// A [`Storage`] whose keys are the keys of an inner storage below `prefix/`, with the prefix
/// removed.
///
/// Guarantees:
/// - every key a caller passes is validated with [`validate_key`] *before* the prefix is added,
///   so no key (`..`, an absolute or empty key ...) can reach outside the prefix; invalid keys
///   fail with [`StorageError::InvalidKey`] naming the caller's key, without touching the inner
///   storage;
/// - key `k` is stored at `prefix/k` in the inner storage; every key handed back (in
///   [`ObjectMeta::key`], [`ListPage::next`] and the directory names of
///   [`list_dir`](Storage::list_dir)) has `prefix/` removed, and listings only ever show keys
///   below `prefix/` (a sibling `prefixfoo/x` is never listed). A [`ListPage::next`] cursor is
///   valid as `start_after` of the next call on this storage;
/// - listing `""` lists everything below the prefix (the prefix is the root of this storage);
/// - consistency and atomicity are exactly those of the inner storage: every call is one call of
///   the inner storage, and [`put_if_absent`](Storage::put_if_absent) and
///   [`put_if_match`](Storage::put_if_match) are passed through unchanged (the same data and
///   expected [`Version`]), so they are exactly as atomic as the inner storage's;
/// - versions are the inner storage's: a [`Version`] read through this storage is valid for a
///   compare-and-swap on the inner storage at `prefix/key`, and the other way round;
/// - [`StorageError::NotFound`], [`StorageError::AlreadyExists`] and
///   [`StorageError::PreconditionFailed`] name the caller's key (with `prefix/` removed), as the
///   [`Storage`] contract asks; every other error of the inner storage is returned unchanged and
///   names the full inner key, which tells where the failure happened.
///
/// An empty prefix makes the wrapper an identity.
#[derive(Debug, Clone)]
pub struct PrefixedStorage {
    inner: Arc<dyn Storage>,
    /// Normalised: no leading or trailing `/`, valid per [`validate_key`], possibly empty.
    prefix: String,
}

impl PrefixedStorage {
    /// Wraps `inner`, exposing the keys below `prefix`.
    ///
    /// Leading and trailing `/` of `prefix` are removed; what remains must be empty (the
    /// identity) or a valid key per [`validate_key`] (no empty, `.` or `..` segment, no control
    /// character), else [`StorageError::InvalidKey`] naming the given prefix. Nothing is read or
    /// written: the prefix need not exist yet.
    pub fn new(inner: Arc<dyn Storage>, prefix: impl Into<String>) -> Result<Self> {
        let given: String = prefix.into();
        let prefix = given.trim_matches('/').to_string();
        if let Err(e) = validate_key(&prefix, true) {
            let reason = match e {
                StorageError::InvalidKey { reason, .. } => reason,
                other => other.to_string(),
            };
            return Err(StorageError::InvalidKey {
                path: given,
                reason: format!("invalid storage prefix: {reason}"),
            });
        }
        Ok(Self { inner, prefix })
    }

    /// The normalised prefix (no leading or trailing `/`; empty for the identity).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &Arc<dyn Storage> {
        &self.inner
    }

    /// The inner key of a caller's non-empty key, validated first.
    fn full_key(&self, key: &str) -> Result<String> {
        validate_key(key, false)?;
        Ok(self.join(key))
    }

    /// The inner listing prefix of a caller's listing prefix (`""` is the prefix root).
    fn full_prefix(&self, prefix: &str) -> Result<String> {
        validate_key(prefix, true)?;
        Ok(self.join(prefix))
    }

    /// `prefix/key`, or just one of them when the other is empty.
    fn join(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else if key.is_empty() {
            self.prefix.clone()
        } else {
            format!("{}/{key}", self.prefix)
        }
    }

    /// The caller's key of an inner key, or `None` when it is not below the prefix.
    fn strip<'a>(&self, key: &'a str) -> Option<&'a str> {
        if self.prefix.is_empty() {
            return Some(key);
        }
        key.strip_prefix(self.prefix.as_str())?
            .strip_prefix('/')
            .filter(|k| !k.is_empty())
    }

    /// [`strip`](Self::strip) for a key the inner storage returned from `operation`: a key
    /// outside the prefix breaks the inner storage's contract and is reported as a backend error.
    fn strip_returned(&self, operation: &'static str, key: String) -> Result<String> {
        match self.strip(&key) {
            Some(k) => Ok(k.to_string()),
            None => Err(StorageError::Backend {
                operation,
                path: key.clone(),
                source: format!(
                    "{} returned key {key:?}, which is not below prefix {:?}",
                    self.inner, self.prefix
                )
                .into(),
            }),
        }
    }

    /// Maps an [`ObjectMeta`] returned by the inner storage to the caller's key.
    fn meta_out(&self, operation: &'static str, mut meta: ObjectMeta) -> Result<ObjectMeta> {
        meta.key = self.strip_returned(operation, meta.key)?;
        Ok(meta)
    }

    /// Rewrites the key of the errors the [`Storage`] contract ties to the caller's key; keeps
    /// every other error as it is.
    fn err_out(&self, e: StorageError) -> StorageError {
        let caller = |path: String| match self.strip(&path) {
            Some(k) => k.to_string(),
            None => path,
        };
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
}

impl fmt::Display for PrefixedStorage {
    /// `<inner>/<prefix>`, or just `<inner>` for the empty prefix.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "{}", self.inner)
        } else {
            write!(f, "{}/{}", self.inner, self.prefix)
        }
    }
}

#[async_trait]
impl Storage for PrefixedStorage {
    async fn get(&self, key: &str) -> Result<(Bytes, ObjectMeta)> {
        let full = self.full_key(key)?;
        let (data, meta) = self.inner.get(&full).await.map_err(|e| self.err_out(e))?;
        Ok((data, self.meta_out("get", meta)?))
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        let full = self.full_key(key)?;
        self.inner
            .get_range(&full, range)
            .await
            .map_err(|e| self.err_out(e))
    }

    async fn head(&self, key: &str) -> Result<ObjectMeta> {
        let full = self.full_key(key)?;
        let meta = self.inner.head(&full).await.map_err(|e| self.err_out(e))?;
        self.meta_out("head", meta)
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<Version> {
        let full = self.full_key(key)?;
        self.inner
            .put(&full, data)
            .await
            .map_err(|e| self.err_out(e))
    }

    async fn put_if_absent(&self, key: &str, data: Bytes) -> Result<Version> {
        let full = self.full_key(key)?;
        self.inner
            .put_if_absent(&full, data)
            .await
            .map_err(|e| self.err_out(e))
    }

    async fn put_if_match(&self, key: &str, data: Bytes, expected: &Version) -> Result<Version> {
        let full = self.full_key(key)?;
        self.inner
            .put_if_match(&full, data, expected)
            .await
            .map_err(|e| self.err_out(e))
    }

    async fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> Result<ListPage> {
        let full_prefix = self.full_prefix(prefix)?;
        let full_after = start_after.map(|a| self.full_key(a)).transpose()?;
        let page = self
            .inner
            .list_page(&full_prefix, full_after.as_deref(), max_keys)
            .await
            .map_err(|e| self.err_out(e))?;
        let objects = page
            .objects
            .into_iter()
            .map(|m| self.meta_out("list", m))
            .collect::<Result<Vec<_>>>()?;
        let next = page
            .next
            .map(|n| self.strip_returned("list", n))
            .transpose()?;
        Ok(ListPage { objects, next })
    }

    async fn list_dir(&self, prefix: &str) -> Result<(Vec<ObjectMeta>, Vec<String>)> {
        let full_prefix = self.full_prefix(prefix)?;
        let (objects, dirs) = self
            .inner
            .list_dir(&full_prefix)
            .await
            .map_err(|e| self.err_out(e))?;
        let objects = objects
            .into_iter()
            .map(|m| self.meta_out("list_dir", m))
            .collect::<Result<Vec<_>>>()?;
        let dirs = dirs
            .into_iter()
            .map(|d| self.strip_returned("list_dir", d))
            .collect::<Result<Vec<_>>>()?;
        Ok((objects, dirs))
    }

    async fn list_dir_keys(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>)> {
        let full_prefix = self.full_prefix(prefix)?;
        let (objects, dirs) = self
            .inner
            .list_dir_keys(&full_prefix)
            .await
            .map_err(|e| self.err_out(e))?;
        let strip = |keys: Vec<String>| {
            keys.into_iter()
                .map(|k| self.strip_returned("list_dir", k))
                .collect::<Result<Vec<_>>>()
        };
        Ok((strip(objects)?, strip(dirs)?))
    }

    async fn delete_batch(&self, keys: &[String]) -> Result<Vec<Result<()>>> {
        // Every key is checked before anything is deleted, as the contract asks.
        let full = keys
            .iter()
            .map(|k| self.full_key(k))
            .collect::<Result<Vec<_>>>()?;
        let results = self
            .inner
            .delete_batch(&full)
            .await
            .map_err(|e| self.err_out(e))?;
        Ok(results
            .into_iter()
            .map(|r| r.map_err(|e| self.err_out(e)))
            .collect())
    }

    async fn copy(&self, from: &str, to: &str) -> Result<()> {
        let full_from = self.full_key(from)?;
        let full_to = self.full_key(to)?;
        self.inner
            .copy(&full_from, &full_to)
            .await
            .map_err(|e| self.err_out(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectStoreStorage;

    fn prefixed(prefix: &str) -> PrefixedStorage {
        let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        PrefixedStorage::new(inner, prefix).unwrap()
    }

    #[test]
    fn test_new_normalises_slashes() {
        assert_eq!(prefixed("/a/b/").prefix(), "a/b");
        assert_eq!(prefixed("a").prefix(), "a");
        assert_eq!(prefixed("").prefix(), "");
        assert_eq!(prefixed("/").prefix(), "");
    }

    #[test]
    fn test_join_and_strip_are_inverse_and_respect_segments() {
        let s = prefixed(".hoodie/metadata");
        assert_eq!(s.join("x/y"), ".hoodie/metadata/x/y");
        assert_eq!(s.join(""), ".hoodie/metadata");
        assert_eq!(s.strip(".hoodie/metadata/x/y"), Some("x/y"));
        assert_eq!(s.strip(".hoodie/metadatax/y"), None);
        assert_eq!(s.strip(".hoodie/metadata"), None);
        assert_eq!(s.strip(".hoodie/metadata/"), None);
        assert_eq!(s.strip("other"), None);
        let id = prefixed("");
        assert_eq!(id.join("x"), "x");
        assert_eq!(id.strip("x"), Some("x"));
    }

    #[test]
    fn test_err_out_rewrites_contract_errors_only() {
        let s = prefixed("p");
        let e = s.err_out(StorageError::NotFound {
            path: "p/k".to_string(),
        });
        assert!(
            matches!(e, StorageError::NotFound { ref path } if path == "k"),
            "{e}"
        );
        let e = s.err_out(StorageError::Backend {
            operation: "get",
            path: "p/k".to_string(),
            source: "boom".into(),
        });
        assert!(
            matches!(e, StorageError::Backend { ref path, .. } if path == "p/k"),
            "{e}"
        );
    }

    #[test]
    fn test_display_shows_inner_and_prefix() {
        assert_eq!(prefixed("a/b").to_string(), "memory:///a/b");
        assert_eq!(prefixed("").to_string(), "memory://");
    }
}
