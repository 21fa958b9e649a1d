//! Where a command may create a table: the storage at a location, whether a table exists there,
//! the local directory the command made (removed again when creation fails), and the creation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_storage::{open_storage, Storage, StorageExt, StorageOptions};
use arbor_table::{CreateOptions, Table};
use arbor_timeline::layout::{open_cloned, RegistryOpener, DEFAULT_META_DIR};

use super::lock::with_chosen_lock;
use crate::error::{CliError, CliResult};

/// Where a table would be created, and whether it already exists.
pub struct Target {
    /// The storage rooted at the table's base path.
    pub storage: Arc<dyn Storage>,
    /// True if `.hoodie/hoodie.properties` exists.
    pub exists: bool,
    /// The local directory this command made (removed again if creation fails).
    pub made_dir: Option<PathBuf>,
}

fn local_path(location: &str) -> Option<&str> {
    if let Some(rest) = location.strip_prefix("file://") {
        Some(rest)
    } else if location.contains("://") {
        None
    } else {
        Some(location)
    }
}

/// Opens the storage at `location` for a command that may create a table there. A missing
/// local directory is created only if `may_create`; otherwise a missing directory means "no
/// table" without touching anything.
pub async fn open_target(
    location: &str,
    options: &StorageOptions,
    may_create: bool,
) -> CliResult<Option<Target>> {
    let mut made_dir = None;
    if let Some(path) = local_path(location) {
        let p = Path::new(path);
        if !p.is_dir() {
            if !may_create {
                return Ok(None);
            }
            if p.exists() {
                return Err(CliError::at(
                    location,
                    CliError::Usage("exists and is not a directory".into()),
                ));
            }
            made_dir = Some(first_missing_ancestor(p));
        }
    }
    let storage = open_storage(location, options).map_err(|e| CliError::at(location, e))?;
    let exists = storage
        .exists(&format!("{DEFAULT_META_DIR}/hoodie.properties"))
        .await
        .map_err(|e| CliError::at(location, e))?;
    // An existing shallow clone is written through its sources' files.
    let storage = if exists {
        let opener = RegistryOpener::new(options.clone());
        open_cloned(storage, location, &opener)
            .await
            .map_err(|e| CliError::at(location, e))?
    } else {
        storage
    };
    Ok(Some(Target {
        storage,
        exists,
        made_dir,
    }))
}

/// The outermost directory of `p` that does not exist yet (what `create_dir_all` will make).
fn first_missing_ancestor(p: &Path) -> PathBuf {
    let mut out = p.to_path_buf();
    let mut cur = p;
    while let Some(parent) = cur.parent() {
        if parent.as_os_str().is_empty() || parent.exists() {
            break;
        }
        out = parent.to_path_buf();
        cur = parent;
    }
    out
}

/// Removes a directory this command created (best effort: the error being reported matters more).
pub fn remove_made_dir(target: &Target) {
    if let Some(dir) = &target.made_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Creates the table; on failure removes the directory this command made.
pub async fn create_table(
    location: &str,
    target: &Target,
    options: CreateOptions,
) -> CliResult<Table> {
    match Table::create(target.storage.clone(), options).await {
        Ok(t) => match with_chosen_lock(location, t).await {
            Ok(t) => Ok(t),
            Err(e) => {
                remove_made_dir(target);
                Err(e)
            }
        },
        Err(e) => {
            remove_made_dir(target);
            Err(CliError::at(location, e))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_first_missing_ancestor_is_outermost_new_dir() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/c");
        assert_eq!(first_missing_ancestor(&p), dir.path().join("a"));
    }
}
