//! Opening what a command works on: `--storage-option` pairs, the storage of an existing table,
//! and main or a working branch of it for writing or reading. Every command opens its table
//! through these functions (or [`super::target`] when it may create one).

use std::path::Path;
use std::sync::Arc;

use arbor_branching::open_branch;
use arbor_branching::roots::is_main;
use arbor_storage::{open_storage, Storage, StorageOptions};
use arbor_table::read::TableReader;
use arbor_table::Table;
use arbor_timeline::layout::{open_cloned, RegistryOpener};

use super::errors::branching_error;
use super::lock::with_chosen_lock;
use crate::error::{CliError, CliResult};

/// The name `--branch` takes by default: main.
pub const MAIN: &str = arbor_timeline::metaroot::MAIN;

/// Parses `--storage-option KEY=VALUE` pairs.
pub fn storage_options(pairs: &[String]) -> CliResult<StorageOptions> {
    let mut kv = Vec::new();
    for p in pairs {
        let (k, v) = p.split_once('=').ok_or_else(|| {
            CliError::Usage(format!("--storage-option expects KEY=VALUE, got {p:?}"))
        })?;
        kv.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(StorageOptions::from_pairs(kv)?)
}

/// Opens the storage rooted at an existing table's base path (local path, `file://`, or any
/// scheme of arbor-storage's registry: `memory://`, `s3://bucket/prefix`, `az://container/prefix`,
/// `gs://bucket/prefix`). A local directory that does not exist is an error:
/// read commands never create anything.
///
/// A shallow clone is opened over its sources (`arbor_timeline::layout::open_cloned`, the same
/// options for every location), so every command works on a clone as on any table.
pub async fn open_table_storage(
    location: &str,
    options: &StorageOptions,
) -> CliResult<Arc<dyn Storage>> {
    let local = if let Some(rest) = location.strip_prefix("file://") {
        Some(rest)
    } else if location.contains("://") {
        None
    } else {
        Some(location)
    };
    if let Some(path) = local {
        if !Path::new(path).is_dir() {
            return Err(CliError::at(
                location,
                CliError::Usage("no such directory".to_string()),
            ));
        }
    }
    let own = open_storage(location, options)?;
    let opener = RegistryOpener::new(options.clone());
    open_cloned(own, location, &opener)
        .await
        .map_err(|e| CliError::at(location, e))
}

/// `Some(name)` for a working branch, `None` for main (`--branch main`, the default).
pub fn selected(branch: &str) -> Option<&str> {
    if is_main(Some(branch)) {
        None
    } else {
        Some(branch)
    }
}

/// How text output names what a command worked on: the table location, followed by
/// ` (branch B)` for a working branch.
pub fn label(location: &str, branch: &str) -> String {
    match selected(branch) {
        None => location.to_string(),
        Some(b) => format!("{location} (branch {b})"),
    }
}

/// Opens `branch` of the table at `storage` for writing: main through `Table::open` (which
/// follows publications), a working branch through `arbor_branching::open_branch` (identity
/// checked; a missing branch is an error, never created).
pub async fn open_table_at(
    location: &str,
    storage: Arc<dyn Storage>,
    branch: &str,
) -> CliResult<Table> {
    let table = match selected(branch) {
        None => Table::open(storage)
            .await
            .map_err(|e| CliError::at(location, e))?,
        Some(b) => open_branch(storage, b)
            .await
            .map_err(|e| branching_error(location, e))?,
    };
    with_chosen_lock(location, table).await
}

/// Opens the storage at `location` and then `branch` of its table (see [`open_table_at`]).
pub async fn open_table_on(
    location: &str,
    options: &StorageOptions,
    branch: &str,
) -> CliResult<Table> {
    let storage = open_table_storage(location, options).await?;
    open_table_at(location, storage, branch).await
}

/// Opens working branch `name` (never main, even when `name` is `main`: that is the library's
/// refusal to report) of the table at `location`, for commands that act on a branch as such.
pub async fn open_working_branch(
    location: &str,
    options: &StorageOptions,
    name: &str,
) -> CliResult<Table> {
    let storage = open_table_storage(location, options).await?;
    let branch = open_branch(storage, name)
        .await
        .map_err(|e| branching_error(location, e))?;
    with_chosen_lock(location, branch).await
}

/// Opens a reader of `branch`: main through `TableReader::open` (which follows
/// publications), a working branch through `arbor_branching::open_reader`.
pub async fn open_reader_at(
    location: &str,
    storage: Arc<dyn Storage>,
    branch: &str,
) -> CliResult<TableReader> {
    match selected(branch) {
        None => TableReader::open(storage)
            .await
            .map_err(|e| CliError::at(location, e)),
        Some(b) => arbor_branching::open_reader(storage, Some(b))
            .await
            .map_err(|e| branching_error(location, e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_selected_main_is_none() {
        assert_eq!(selected("main"), None);
        assert_eq!(selected("audit"), Some("audit"));
        assert_eq!(label("t", "main"), "t");
        assert_eq!(label("t", "audit"), "t (branch audit)");
    }
}
