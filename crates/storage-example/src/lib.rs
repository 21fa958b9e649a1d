//! `arbor-storage-example`: a storage plugin registered from outside `arbor-storage`.
//!
//! [`register`] adds the scheme [`SCHEME`] (`example-mem://<store>/<prefix>`) to arbor-storage's
//! process-wide registry. Each `<store>` names one object_store `InMemory` store shared by every
//! open of that name in the process; `<prefix>` roots the opened storage inside it. The option
//! `example.fresh=true` replaces the named store by an empty one before opening. Everything here
//! uses only arbor-storage's public API.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arbor_storage::{
    bucket_and_prefix, register_storage_factory, ObjectStoreStorage, OptionSpec, Result, Storage,
    StorageFactory, StorageOptions,
};
use object_store::memory::InMemory;
use object_store::ObjectStore;
use url::Url;

/// The URL scheme this crate registers.
pub const SCHEME: &str = "example-mem";

/// The options of this backend, in namespace `example`.
const OPTIONS: [OptionSpec; 1] = [OptionSpec::plain("fresh")];

/// The factory of `example-mem://` locations: named in-memory stores.
#[derive(Default)]
pub struct ExampleMemFactory {
    stores: Mutex<HashMap<String, Arc<InMemory>>>,
}

impl ExampleMemFactory {
    /// The store named `name`, created (empty) when missing or when `fresh`.
    fn store(&self, name: &str, fresh: bool) -> Arc<InMemory> {
        let mut stores = match self.stores.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        if fresh {
            stores.remove(name);
        }
        stores
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(InMemory::new()))
            .clone()
    }
}

impl StorageFactory for ExampleMemFactory {
    fn option_namespace(&self) -> Option<&str> {
        Some("example")
    }

    fn options(&self) -> &[OptionSpec] {
        &OPTIONS
    }

    fn open(&self, url: &Url, options: &StorageOptions) -> Result<Arc<dyn Storage>> {
        options.check_namespace("example", &OPTIONS)?;
        let (name, prefix) = bucket_and_prefix(url)?;
        let fresh = options.get_bool("example.fresh")?.unwrap_or(false);
        let store: Arc<dyn ObjectStore> = self.store(&name, fresh);
        let shown = if prefix.is_empty() {
            format!("{SCHEME}://{name}")
        } else {
            format!("{SCHEME}://{name}/{prefix}")
        };
        let storage = ObjectStoreStorage::new(store, &prefix, shown)?.with_sorted_listing(true);
        Ok(Arc::new(storage))
    }
}

/// Registers [`ExampleMemFactory`] for [`SCHEME`] in the process (idempotent in effect: a second
/// call replaces the factory, and with it the named stores, by a new empty one).
pub fn register() -> Result<()> {
    register_storage_factory(SCHEME, Arc::new(ExampleMemFactory::default()))?;
    Ok(())
}
