//! The `file://` (and plain path) and `memory://` factories.

use std::sync::Arc;

use url::Url;

use crate::error::Result;
use crate::factory::StorageFactory;
use crate::location::invalid;
use crate::object::ObjectStoreStorage;
use crate::options::StorageOptions;
use crate::storage::Storage;

/// `file:///absolute/path` (a plain path arrives here as such a URL): the local file system,
/// the directory created if missing. Takes no options.
pub(crate) struct LocalFactory;

impl StorageFactory for LocalFactory {
    fn open(&self, url: &Url, _options: &StorageOptions) -> Result<Arc<dyn Storage>> {
        let path = url.to_file_path().map_err(|()| {
            invalid(
                url.as_str(),
                "not a local absolute file URL (use file:///absolute/path or a plain path)",
            )
        })?;
        Ok(Arc::new(ObjectStoreStorage::local(&path)?))
    }
}

/// `memory://`: a fresh, empty in-memory store per call. Takes no options, bucket or path.
pub(crate) struct MemoryFactory;

impl StorageFactory for MemoryFactory {
    fn open(&self, url: &Url, _options: &StorageOptions) -> Result<Arc<dyn Storage>> {
        let empty = url.host_str().unwrap_or_default().is_empty()
            && url.path().trim_matches('/').is_empty()
            && url.query().is_none()
            && url.fragment().is_none();
        if !empty {
            return Err(invalid(url.as_str(), "memory:// takes no bucket or path"));
        }
        Ok(Arc::new(ObjectStoreStorage::memory()))
    }
}
