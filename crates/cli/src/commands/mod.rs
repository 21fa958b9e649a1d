//! One module per subcommand; each parses its arguments, calls the library and prints.

pub mod archive;
pub mod branch;
pub mod clean;
pub mod compact;
pub mod create;
pub mod delete_partition;
pub mod demo;
pub mod files;
pub mod index;
pub mod lock;
pub mod mdt;
pub mod read;
pub mod restore;
pub mod savepoint;
pub mod tag;
pub mod timeline;
pub mod validate;
pub mod write;

use std::path::Path;
use std::sync::Arc;

use arbor_storage::{open_storage, Storage, StorageOptions};

use crate::error::{CliError, CliResult};

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

/// Opens the storage rooted at an existing table's base path (local path, `file://`,
/// `memory://` or `s3://bucket/prefix`). A local directory that does not exist is an error:
/// read commands never create anything.
pub fn open_table_storage(location: &str, options: &StorageOptions) -> CliResult<Arc<dyn Storage>> {
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
    Ok(open_storage(location, options)?)
}
