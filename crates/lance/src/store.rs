//! One file of arbor's [`Storage`] seen through object_store 0.14 (the version Lance reads
//! with): ranged reads only, every other operation `NotSupported`.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use arbor_storage::Storage;
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store_014 as os;
use os::path::Path;
use os::{
    CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// The read-only object store serving the single file `key` of `storage` (of `size` bytes),
/// whatever path Lance asks for.
#[derive(Debug)]
pub(crate) struct OneFile {
    storage: Arc<dyn Storage>,
    key: String,
    size: u64,
}

impl OneFile {
    pub(crate) fn new(storage: Arc<dyn Storage>, key: &str, size: u64) -> Self {
        OneFile {
            storage,
            key: key.to_string(),
            size,
        }
    }

    fn meta(&self, location: &Path) -> ObjectMeta {
        ObjectMeta {
            location: location.clone(),
            last_modified: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
            size: self.size,
            e_tag: None,
            version: None,
        }
    }

    fn not_supported(&self, op: &str) -> os::Error {
        os::Error::NotSupported {
            source: format!("{op} on the lance file {} (arbor reads it only)", self.key).into(),
        }
    }

    /// The bytes `range` resolves to in a file of [`size`](Self::size) bytes.
    fn resolve(&self, range: Option<&GetRange>) -> os::Result<Range<u64>> {
        let size = self.size;
        let r = match range {
            None => 0..size,
            Some(GetRange::Bounded(r)) => r.start..r.end.min(size),
            Some(GetRange::Offset(o)) => *o..size,
            Some(GetRange::Suffix(n)) => size.saturating_sub(*n)..size,
        };
        if r.start > r.end || (r.start >= size && size > 0) {
            return Err(os::Error::Generic {
                store: "arbor",
                source: format!(
                    "range {}..{} outside the {size} bytes of {}",
                    r.start, r.end, self.key
                )
                .into(),
            });
        }
        Ok(r)
    }
}

impl fmt::Display for OneFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "arbor({}/{})", self.storage, self.key)
    }
}

fn storage_error(err: arbor_storage::StorageError) -> os::Error {
    match err {
        arbor_storage::StorageError::NotFound { path } => os::Error::NotFound {
            path: path.clone(),
            source: format!("not found: {path}").into(),
        },
        other => os::Error::Generic {
            store: "arbor",
            source: Box::new(other),
        },
    }
}

#[async_trait]
impl os::ObjectStore for OneFile {
    async fn put_opts(&self, _: &Path, _: PutPayload, _: PutOptions) -> os::Result<PutResult> {
        Err(self.not_supported("put"))
    }

    async fn put_multipart_opts(
        &self,
        _: &Path,
        _: PutMultipartOptions,
    ) -> os::Result<Box<dyn MultipartUpload>> {
        Err(self.not_supported("put_multipart"))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> os::Result<GetResult> {
        let range = self.resolve(options.range.as_ref())?;
        let payload: Bytes = if options.head || range.is_empty() {
            Bytes::new()
        } else {
            self.storage
                .get_range(&self.key, range.clone())
                .await
                .map_err(storage_error)?
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(stream::once(async move { Ok(payload) }).boxed()),
            meta: self.meta(location),
            range,
            attributes: Default::default(),
            extensions: Default::default(),
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, os::Result<Path>>,
    ) -> BoxStream<'static, os::Result<Path>> {
        let err = self.not_supported("delete");
        let message = err.to_string();
        locations
            .map(move |_| {
                Err(os::Error::NotSupported {
                    source: message.clone().into(),
                })
            })
            .boxed()
    }

    fn list(&self, _: Option<&Path>) -> BoxStream<'static, os::Result<ObjectMeta>> {
        let err = self.not_supported("list");
        stream::once(async move { Err(err) }).boxed()
    }

    async fn list_with_delimiter(&self, _: Option<&Path>) -> os::Result<ListResult> {
        Err(self.not_supported("list"))
    }

    async fn copy_opts(&self, _: &Path, _: &Path, _: CopyOptions) -> os::Result<()> {
        Err(self.not_supported("copy"))
    }
}
