//! [`StorageFactory`]: what a storage backend implements to be opened by URL scheme through the
//! registry ([`crate::register_storage_factory`], [`crate::open_storage`]).

use std::sync::Arc;

use url::Url;

use crate::error::Result;
use crate::options::{OptionSpec, StorageOptions};
use crate::storage::Storage;

/// Opens the storage of one or more URL schemes. Registered per scheme with
/// [`crate::register_storage_factory`]; [`crate::open_storage`] calls [`StorageFactory::open`]
/// with the parsed URL (a plain path arrives as a `file://` URL).
///
/// A factory that takes options declares their namespace (the part before the first `.`, e.g.
/// `s3` for `s3.endpoint`) and the accepted names: [`StorageOptions::from_pairs`] then rejects
/// any other key of that namespace, naming it and listing the accepted ones.
pub trait StorageFactory: Send + Sync {
    /// The namespace of this backend's options, or `None` if it takes none.
    fn option_namespace(&self) -> Option<&str> {
        None
    }

    /// The options this backend accepts inside its namespace.
    fn options(&self) -> &[OptionSpec] {
        &[]
    }

    /// Opens the storage at `url` with `options` (the whole map: a backend reads only its own
    /// namespace). Errors are [`crate::StorageError::InvalidLocation`] for a URL or option the
    /// backend cannot use.
    fn open(&self, url: &Url, options: &StorageOptions) -> Result<Arc<dyn Storage>>;
}
