//! Copying files from a source table's location into a clone's own location (detach, deep
//! clone), server-side where the two share a backend root.
//!
//! Two locations share a root when both are local directories (the root is their common
//! ancestor directory) or both are URLs of one scheme and one bucket or container (the root is
//! `scheme://bucket`). The copy then opens a storage at that root through the
//! [`LocationOpener`] and calls [`Storage::copy`] with the full keys below it, so an object
//! store copies without the bytes passing through this process. Otherwise (different
//! backends, or a root the opener cannot open) each file is read whole and written whole
//! (`get` + `put`), one file at a time: memory is bounded by the largest file.
//!
//! Every copy is one atomic write of the target key (a reader never sees a partial file), so a
//! crash mid-copy leaves either no file or the whole file; a rerun skips files already present
//! with the source's size.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use arbor_storage::{Storage, StorageError};
use arbor_timeline::layout::LocationOpener;

use crate::error::Result;

/// The root two locations share and each one's key prefix below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedRoot {
    /// The root's location (a directory or `scheme://bucket`).
    pub root: String,
    /// The first location's prefix below the root (`""` when it is the root).
    pub first: String,
    /// The second location's prefix below the root.
    pub second: String,
}

/// The root normalized locations `a` and `b` share, if any (see the module doc).
pub(crate) fn shared_root(a: &str, b: &str) -> Option<SharedRoot> {
    match (a.split_once("://"), b.split_once("://")) {
        (None, None) => shared_dir(Path::new(a), Path::new(b)),
        (Some((sa, ra)), Some((sb, rb))) if sa.eq_ignore_ascii_case(sb) => {
            let (ha, pa) = ra.split_once('/').unwrap_or((ra, ""));
            let (hb, pb) = rb.split_once('/').unwrap_or((rb, ""));
            (!ha.is_empty() && ha == hb).then(|| SharedRoot {
                root: format!("{sa}://{ha}"),
                first: pa.trim_matches('/').to_string(),
                second: pb.trim_matches('/').to_string(),
            })
        }
        _ => None,
    }
}

fn shared_dir(a: &Path, b: &Path) -> Option<SharedRoot> {
    if !a.is_absolute() || !b.is_absolute() {
        return None;
    }
    let (ca, cb): (Vec<Component>, Vec<Component>) =
        (a.components().collect(), b.components().collect());
    let common = ca.iter().zip(&cb).take_while(|(x, y)| x == y).count();
    let root: PathBuf = ca.iter().take(common).collect();
    let rest = |c: &[Component]| -> Option<String> {
        let parts: Vec<String> = c
            .iter()
            .skip(common)
            .map(|p| match p {
                Component::Normal(s) => s.to_str().map(str::to_string),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        Some(parts.join("/"))
    };
    Some(SharedRoot {
        root: root.to_str()?.to_string(),
        first: rest(&ca)?,
        second: rest(&cb)?,
    })
}

/// `key` below `prefix` (`key` itself for the empty prefix).
fn under(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}/{key}")
    }
}

/// How files of one source reach the clone.
#[derive(Debug)]
enum Route {
    /// `Storage::copy` on the shared root, from `from/key` to `to/key`.
    Server {
        root: Arc<dyn Storage>,
        from: String,
        to: String,
    },
    /// `get` from the source, `put` into the clone.
    Stream,
}

/// Copies files from one source location into a clone's own location.
///
/// Guarantees: [`FileCopier::copy`] makes the clone's own location hold `key` with the
/// source's bytes, written atomically, or fails (`NotFound` when the source does not hold it)
/// leaving the clone's key as it was.
#[derive(Debug)]
pub(crate) struct FileCopier {
    source: Arc<dyn Storage>,
    own: Arc<dyn Storage>,
    route: Route,
}

impl FileCopier {
    /// A copier from the source at `source_location` (its raw storage `source`) into the clone
    /// at `own_location` (its raw storage `own`). Server-side when the two share a root the
    /// opener can open.
    pub(crate) fn new(
        opener: &dyn LocationOpener,
        source_location: &str,
        source: Arc<dyn Storage>,
        own_location: &str,
        own: Arc<dyn Storage>,
    ) -> Self {
        let route = match shared_root(source_location, own_location) {
            Some(shared) => match opener.open(&shared.root) {
                Ok(root) => Route::Server {
                    root,
                    from: shared.first,
                    to: shared.second,
                },
                Err(e) => {
                    tracing::debug!(
                        "cannot open {} for a server-side copy ({e}): copying through this \
                         process",
                        shared.root
                    );
                    Route::Stream
                }
            },
            None => Route::Stream,
        };
        FileCopier { source, own, route }
    }

    /// True when this copier copies server-side.
    pub(crate) fn server_side(&self) -> bool {
        matches!(self.route, Route::Server { .. })
    }

    /// The source's own (raw) storage.
    pub(crate) fn source_storage(&self) -> &dyn Storage {
        self.source.as_ref()
    }

    /// The source's size of `key`, `None` when the source does not hold it.
    pub(crate) async fn source_size(&self, key: &str) -> Result<Option<u64>> {
        head_size(self.source.as_ref(), key).await
    }

    /// Copies `key` from the source into the clone (replacing any object there). Returns the
    /// bytes copied, as the source reported them.
    pub(crate) async fn copy(&self, key: &str, size: u64) -> Result<u64> {
        match &self.route {
            Route::Server { root, from, to } => {
                root.copy(&under(from, key), &under(to, key))
                    .await
                    .map_err(|e| match e {
                        StorageError::NotFound { .. } => StorageError::NotFound {
                            path: key.to_string(),
                        },
                        other => other,
                    })?;
                Ok(size)
            }
            Route::Stream => {
                let (data, meta) = self.source.get(key).await?;
                self.own.put(key, data).await?;
                Ok(meta.size)
            }
        }
    }
}

/// The size of `key` in `storage`, `None` when absent.
pub(crate) async fn head_size(storage: &dyn Storage, key: &str) -> Result<Option<u64>> {
    match storage.head(key).await {
        Ok(m) => Ok(Some(m.size)),
        Err(StorageError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use arbor_storage::{ObjectStoreStorage, StorageExt};
    use bytes::Bytes;

    use super::*;

    #[test]
    fn test_shared_root_of_directories_buckets_and_mixed_backends() {
        assert_eq!(
            shared_root("/data/a/src", "/data/b/clone"),
            Some(SharedRoot {
                root: "/data".into(),
                first: "a/src".into(),
                second: "b/clone".into()
            })
        );
        assert_eq!(
            shared_root("/src", "/clone").map(|s| s.root),
            Some("/".to_string())
        );
        assert_eq!(
            shared_root("s3://bkt/t/src", "s3://bkt/c"),
            Some(SharedRoot {
                root: "s3://bkt".into(),
                first: "t/src".into(),
                second: "c".into()
            })
        );
        assert_eq!(
            shared_root("s3://bkt", "s3://bkt/c").map(|s| s.first),
            Some(String::new())
        );
        assert_eq!(shared_root("s3://one/t", "s3://two/t"), None);
        assert_eq!(shared_root("s3://bkt/t", "az://bkt/t"), None);
        assert_eq!(shared_root("/data/t", "s3://bkt/t"), None);
    }

    #[derive(Debug)]
    struct Map(Vec<(String, Arc<dyn Storage>)>);

    impl LocationOpener for Map {
        fn open(&self, location: &str) -> arbor_storage::Result<Arc<dyn Storage>> {
            self.0
                .iter()
                .find(|(l, _)| l == location)
                .map(|(_, s)| s.clone())
                .ok_or_else(|| StorageError::NotFound {
                    path: location.to_string(),
                })
        }
    }

    #[tokio::test]
    async fn test_copy_streams_without_a_shared_root_and_copies_server_side_with_one() {
        let (src, own): (Arc<dyn Storage>, Arc<dyn Storage>) = (
            Arc::new(ObjectStoreStorage::memory()),
            Arc::new(ObjectStoreStorage::memory()),
        );
        src.put("p=1/f.parquet", Bytes::from_static(b"12345"))
            .await
            .unwrap();
        let opener = Map(vec![]);
        let c = FileCopier::new(&opener, "/t/src", src.clone(), "/t/own", own.clone());
        assert!(!c.server_side(), "the opener cannot open /t");
        assert_eq!(c.source_size("p=1/f.parquet").await.unwrap(), Some(5));
        assert_eq!(c.copy("p=1/f.parquet", 5).await.unwrap(), 5);
        assert_eq!(own.get("p=1/f.parquet").await.unwrap().0, "12345");
        assert!(matches!(
            c.copy("p=1/missing.parquet", 1).await,
            Err(crate::BranchingError::Storage(
                StorageError::NotFound { .. }
            ))
        ));

        // Both under one local directory: the copy goes through the shared root.
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (s, o) = (base.join("a/src"), base.join("b/own"));
        std::fs::create_dir_all(&s).unwrap();
        std::fs::create_dir_all(&o).unwrap();
        let src: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&s).unwrap());
        let own: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&o).unwrap());
        let root: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
        src.put("p=1/f.parquet", Bytes::from_static(b"abc"))
            .await
            .unwrap();
        let opener = Map(vec![(base.to_str().unwrap().to_string(), root)]);
        let c = FileCopier::new(
            &opener,
            s.to_str().unwrap(),
            src.clone(),
            o.to_str().unwrap(),
            own.clone(),
        );
        assert!(c.server_side());
        assert_eq!(c.copy("p=1/f.parquet", 3).await.unwrap(), 3);
        assert_eq!(own.get("p=1/f.parquet").await.unwrap().0, "abc");
        assert!(src.exists("p=1/f.parquet").await.unwrap());
        assert!(matches!(
            c.copy("p=1/missing.parquet", 1).await,
            Err(crate::BranchingError::Storage(StorageError::NotFound { ref path })) if path == "p=1/missing.parquet"
        ));
    }
}
