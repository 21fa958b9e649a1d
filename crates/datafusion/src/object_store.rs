//! [`StorageObjectStore`]: an arbor [`Storage`] seen as a read-only `object_store::ObjectStore`,
//! so DataFusion's own parquet source reads base files through whatever storage the table was
//! opened with (a branch's rooted view, a shallow clone's sources, any backend of the registry).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use arbor_storage::Storage;
use async_trait::async_trait;
use bytes::Bytes;
use dashmap::DashMap;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    Attributes, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

const STORE: &str = "arbor";

/// A read-only [`ObjectStore`] over an arbor [`Storage`]: `get` (whole, ranged, head-only),
/// `head`, `list` and `list_with_delimiter` map to the storage; every write is
/// `NotImplemented`. Object sizes are cached after the first `head` (Hudi's data files are
/// immutable), so a ranged read costs one storage call after the first.
#[derive(Debug)]
pub struct StorageObjectStore {
    storage: Arc<dyn Storage>,
    heads: DashMap<String, ObjectMeta>,
}

impl StorageObjectStore {
    /// The store over `storage`; paths are keys relative to the storage's root.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        StorageObjectStore {
            storage,
            heads: DashMap::new(),
        }
    }

    async fn meta(&self, location: &Path) -> object_store::Result<ObjectMeta> {
        if let Some(m) = self.heads.get(location.as_ref()) {
            return Ok(m.clone());
        }
        let m = self
            .storage
            .head(location.as_ref())
            .await
            .map_err(|e| to_store_error(location, e))?;
        let meta = object_meta(location.clone(), &m);
        self.heads.insert(location.to_string(), meta.clone());
        Ok(meta)
    }
}

impl fmt::Display for StorageObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StorageObjectStore({})", self.storage)
    }
}

fn object_meta(location: Path, m: &arbor_storage::ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        location,
        last_modified: m.last_modified,
        size: m.size,
        e_tag: m.version.e_tag.clone(),
        version: m.version.version.clone(),
    }
}

fn to_store_error(location: &Path, e: arbor_storage::StorageError) -> object_store::Error {
    if e.is_not_found() {
        object_store::Error::NotFound {
            path: location.to_string(),
            source: Box::new(e),
        }
    } else {
        object_store::Error::Generic {
            store: STORE,
            source: Box::new(e),
        }
    }
}

fn read_only(operation: &str) -> object_store::Error {
    object_store::Error::NotImplemented {
        operation: format!("{operation} (arbor's object store view is read-only)"),
        implementer: "StorageObjectStore".to_string(),
    }
}

#[async_trait]
impl ObjectStore for StorageObjectStore {
    async fn put_opts(
        &self,
        _location: &Path,
        _payload: PutPayload,
        _opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        Err(read_only("put"))
    }

    async fn put_multipart_opts(
        &self,
        _location: &Path,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(read_only("put_multipart"))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let meta = self.meta(location).await?;
        options.check_preconditions(&meta)?;
        let range: Range<u64> = match &options.range {
            Some(r) => r
                .as_range(meta.size)
                .map_err(|e| object_store::Error::Generic {
                    store: STORE,
                    source: Box::new(e),
                })?,
            None => 0..meta.size,
        };
        let bytes = if options.head || range.is_empty() {
            Bytes::new()
        } else {
            self.storage
                .get_range(location.as_ref(), range.clone())
                .await
                .map_err(|e| to_store_error(location, e))?
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(stream::once(async move { Ok(bytes) }).boxed()),
            meta,
            range,
            attributes: Attributes::default(),
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        locations.map(|_| Err(read_only("delete"))).boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let storage = self.storage.clone();
        let prefix = prefix.map(|p| p.to_string()).unwrap_or_default();
        stream::once(async move {
            let listed = arbor_storage::StorageExt::list_all(storage.as_ref(), &prefix)
                .await
                .map_err(|e| to_store_error(&Path::from(prefix.as_str()), e))?;
            Ok::<_, object_store::Error>(stream::iter(
                listed
                    .into_iter()
                    .map(|m| Ok(object_meta(Path::from(m.key.as_str()), &m))),
            ))
        })
        .flat_map(|r| match r {
            Ok(s) => s.boxed(),
            Err(e) => stream::once(async move { Err(e) }).boxed(),
        })
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let prefix = prefix.map(|p| p.to_string()).unwrap_or_default();
        let (objects, dirs) = self
            .storage
            .list_dir(&prefix)
            .await
            .map_err(|e| to_store_error(&Path::from(prefix.as_str()), e))?;
        Ok(ListResult {
            common_prefixes: dirs.iter().map(|d| Path::from(d.as_str())).collect(),
            objects: objects
                .iter()
                .map(|m| object_meta(Path::from(m.key.as_str()), m))
                .collect(),
        })
    }

    async fn copy_opts(
        &self,
        _from: &Path,
        _to: &Path,
        _options: CopyOptions,
    ) -> object_store::Result<()> {
        Err(read_only("copy"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use arbor_storage::ObjectStoreStorage;
    use object_store::{GetRange, ObjectStoreExt};

    #[tokio::test]
    async fn test_ranged_gets_head_and_list_read_through_the_storage() {
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        storage
            .put("p/a.parquet", Bytes::from_static(b"0123456789"))
            .await
            .unwrap();
        let store = StorageObjectStore::new(storage);
        let path = Path::from("p/a.parquet");
        assert_eq!(store.head(&path).await.unwrap().size, 10);
        assert_eq!(&store.get_range(&path, 2..5).await.unwrap()[..], b"234");
        let suffix = store
            .get_opts(
                &path,
                GetOptions {
                    range: Some(GetRange::Suffix(3)),
                    ..GetOptions::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(suffix.range, 7..10);
        assert_eq!(&suffix.bytes().await.unwrap()[..], b"789");
        assert_eq!(
            &store.get(&path).await.unwrap().bytes().await.unwrap()[..],
            b"0123456789"
        );
        let listed: Vec<ObjectMeta> = store
            .list(Some(&Path::from("p")))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(listed.len(), 1);
        let missing = store.head(&Path::from("p/none")).await.unwrap_err();
        assert!(
            matches!(missing, object_store::Error::NotFound { .. }),
            "{missing}"
        );
        let put = store
            .put(&path, PutPayload::from_static(b"x"))
            .await
            .unwrap_err();
        assert!(put.to_string().contains("read-only"), "{put}");
    }
}
