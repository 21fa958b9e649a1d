//! Finding and opening metadata roots: main (resolved), working branches (identity checked),
//! and the list of live roots other operations must respect.

use std::sync::Arc;

use arbor_mdt::MDT_META_DIR;
use arbor_storage::{Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::Table;
use arbor_timeline::metaroot::{validate_branch_name, BRANCHES_DIR, MAIN, PUBLICATIONS};
use arbor_timeline::{resolve_main, MetaRoot};
use bytes::Bytes;

use crate::error::{BranchingError, Result};
use crate::identity::BranchInfo;

/// The identity file of a working branch (both sides).
pub const BRANCH_JSON: &str = "branch.json";

/// The table's key of a branch's data-side `branch.json`.
pub fn data_identity_key(name: &str) -> String {
    format!("{BRANCHES_DIR}/{name}/{BRANCH_JSON}")
}

/// The table's key of a branch's MDT-side `branch.json`.
pub fn mdt_identity_key(name: &str) -> String {
    format!("{MDT_META_DIR}/branches/{name}/{BRANCH_JSON}")
}

/// The identity of working branch `name`: `None` when its data-side `branch.json` is absent
/// (the branch does not exist, or its creation or drop was interrupted). An error when the
/// data side exists but the MDT side is missing, unreadable or carries another `branchId`
/// (the branch is then not usable).
pub async fn read_identity(storage: &Arc<dyn Storage>, name: &str) -> Result<Option<BranchInfo>> {
    validate_branch_name(name)?;
    let data_key = data_identity_key(name);
    let Some((bytes, _)) = storage.get_opt(&data_key).await? else {
        return Ok(None);
    };
    let data = BranchInfo::parse(&bytes, &data_key)?;
    let mdt_key = mdt_identity_key(name);
    let Some((bytes, _)) = storage.get_opt(&mdt_key).await? else {
        return Err(BranchingError::Invalid {
            path: mdt_key,
            reason: format!("branch {name} has no MDT-side identity"),
        });
    };
    let mdt = BranchInfo::parse(&bytes, &mdt_key)?;
    if mdt.branch_id != data.branch_id || mdt.name != data.name || data.name != name {
        return Err(BranchingError::Invalid {
            path: data_key,
            reason: format!(
                "branch {name}: data-side branchId {} does not match MDT-side {}",
                data.branch_id, mdt.branch_id
            ),
        });
    }
    Ok(Some(data))
}

/// The identity of working branch `name`, or [`BranchingError::BranchNotFound`].
pub async fn branch_identity(storage: &Arc<dyn Storage>, name: &str) -> Result<BranchInfo> {
    read_identity(storage, name)
        .await?
        .ok_or_else(|| BranchingError::BranchNotFound {
            name: name.to_string(),
        })
}

/// True when `branch` names main (`None` or `"main"`).
pub fn is_main(branch: Option<&str>) -> bool {
    branch.is_none_or(|b| b == MAIN)
}

/// The root `branch` selects: main (resolved) for `None`/`"main"`, else the working branch,
/// whose identity must check out.
pub async fn select_root(storage: &Arc<dyn Storage>, branch: Option<&str>) -> Result<MetaRoot> {
    match branch {
        Some(b) if b != MAIN => {
            branch_identity(storage, b).await?;
            Ok(MetaRoot::Branch(b.to_string()))
        }
        _ => Ok(resolve_main(storage.as_ref()).await?),
    }
}

/// Opens working branch `name` for writing (identity checked). Its writes and table services
/// land only in the branch's timelines.
pub async fn open_branch(storage: Arc<dyn Storage>, name: &str) -> Result<Table> {
    branch_identity(&storage, name).await?;
    Ok(Table::open_at(storage, MetaRoot::Branch(name.to_string())).await?)
}

/// Opens `branch` (main for `None`/`"main"`, following publications) for writing.
pub async fn open_table(storage: Arc<dyn Storage>, branch: Option<&str>) -> Result<Table> {
    if is_main(branch) {
        Ok(Table::open(storage).await?)
    } else {
        open_branch(storage, branch.unwrap_or(MAIN)).await
    }
}

/// Opens `branch` (main for `None`/`"main"`) for reading.
pub async fn open_reader(storage: Arc<dyn Storage>, branch: Option<&str>) -> Result<TableReader> {
    let root = select_root(&storage, branch).await?;
    Ok(TableReader::open_view(root.view(storage)).await?)
}

/// The names of the working branches whose identity checks out (ascending). Directories
/// without a data-side `branch.json` (interrupted creations or drops) are skipped; a branch
/// whose identity files disagree is an error.
pub async fn branch_names(storage: &Arc<dyn Storage>) -> Result<Vec<String>> {
    let (_, dirs) = storage.list_dir(BRANCHES_DIR).await?;
    let mut out = Vec::new();
    for d in dirs {
        let Some(name) = d.rsplit('/').next() else {
            continue;
        };
        if name == PUBLICATIONS || validate_branch_name(name).is_err() {
            continue;
        }
        if read_identity(storage, name).await?.is_some() {
            out.push(name.to_string());
        }
    }
    Ok(out)
}

/// Every live root: main (resolved) first, then each working branch.
pub async fn live_roots(storage: &Arc<dyn Storage>) -> Result<Vec<MetaRoot>> {
    let mut out = vec![resolve_main(storage.as_ref()).await?];
    out.extend(
        branch_names(storage)
            .await?
            .into_iter()
            .map(MetaRoot::Branch),
    );
    Ok(out)
}

/// Deletes every object of a working branch's or publication's metadata (both sides). Never
/// used on main's root. Returns how many objects were deleted.
pub(crate) async fn remove_root_metadata(
    storage: &Arc<dyn Storage>,
    root: &MetaRoot,
) -> Result<usize> {
    if *root == MetaRoot::Root {
        return Err(BranchingError::refused(
            "remove metadata",
            "main's root metadata is never removed",
        ));
    }
    let mut keys: Vec<String> = Vec::new();
    for dir in [root.data_meta_dir(), root.mdt_meta_dir()] {
        keys.extend(storage.list_all(&dir).await?.into_iter().map(|m| m.key));
    }
    storage.delete_all(&keys).await?;
    Ok(keys.len())
}

/// Writes `bytes` at `key` only if absent; an existing object with identical content counts as
/// written (a retry after an interrupted call).
pub(crate) async fn put_once(storage: &Arc<dyn Storage>, key: &str, bytes: Bytes) -> Result<()> {
    match storage.put_if_absent(key, bytes.clone()).await {
        Ok(_) => Ok(()),
        Err(arbor_storage::StorageError::AlreadyExists { .. }) => {
            let (existing, _) = storage.get(key).await?;
            if existing == bytes {
                Ok(())
            } else {
                Err(BranchingError::Invalid {
                    path: key.to_string(),
                    reason: "exists with other content".to_string(),
                })
            }
        }
        Err(e) => Err(e.into()),
    }
}
