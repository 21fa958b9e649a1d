//! Where a table's shared files live: [`FileLocations`] resolves the key of a data file or a
//! metadata-table file (as every component addresses it, relative to the table base) to the
//! storage and key that hold it.
//!
//! A table's metadata root resolves its shared files to the table's own location
//! ([`OwnLocation`]). A shallow clone's files that live in its sources are resolved one level
//! lower, by [`super::clone_storage::ClonedStorage`] (the table storage every root of the clone
//! is built on, so its branches need nothing here); writers and readers keep addressing
//! table-relative keys and never know.

use std::fmt::Debug;
use std::sync::Arc;

use arbor_storage::Storage;

/// A resolved file: the storage holding it and its key there.
#[derive(Debug, Clone)]
pub struct Located {
    /// The storage holding the file.
    pub storage: Arc<dyn Storage>,
    /// The file's key in that storage.
    pub key: String,
}

/// Resolves a table's shared files (data files, metadata-table files) to where they live.
///
/// Contract: `resolve` is a pure function of the key (no I/O); a key it resolves for reading
/// names the same immutable file every time it is called; new files are always written to the
/// table's own location (callers never resolve writes).
pub trait FileLocations: Debug + Send + Sync {
    /// Where file `key` (relative to the table base) is read from.
    fn resolve(&self, key: &str) -> Located;
}

/// Every file in the table's own location (every table today).
#[derive(Debug, Clone)]
pub struct OwnLocation {
    table: Arc<dyn Storage>,
}

impl OwnLocation {
    /// The locations of a table whose files are all in `table` (its storage).
    pub fn new(table: Arc<dyn Storage>) -> Self {
        OwnLocation { table }
    }
}

impl FileLocations for OwnLocation {
    fn resolve(&self, key: &str) -> Located {
        Located {
            storage: self.table.clone(),
            key: key.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use arbor_storage::ObjectStoreStorage;

    use super::*;

    #[test]
    fn test_own_location_resolves_every_key_to_the_table_unchanged() {
        let table: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        let own = OwnLocation::new(table.clone());
        for key in [
            "p=1/f1_0-1-0_20261026103000000.parquet",
            ".hoodie/metadata/files/x.hfile",
        ] {
            let at = own.resolve(key);
            assert_eq!(at.key, key);
            assert!(Arc::ptr_eq(&at.storage, &table));
        }
    }
}
