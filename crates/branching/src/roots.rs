//! Finding and opening metadata roots: main (resolved), working branches (identity checked),
//! and the list of live roots other operations must respect.

use std::sync::Arc;

use arbor_storage::{Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::Table;
use arbor_timeline::layout::branches;
use arbor_timeline::metaroot::MAIN;
use arbor_timeline::{resolve_main, MetaRoot};
use bytes::Bytes;

use crate::error::{BranchingError, Result};
use crate::identity::BranchInfo;

pub use arbor_timeline::layout::paths::{data_identity_key, mdt_identity_key, BRANCH_JSON};

/// The identity of the working branch `name` names, whatever its Unicode spelling (every
/// spelling with the same NFC form names one branch; [`BranchInfo::name`] is the name it is
/// stored under: `arbor_timeline::layout::branches::find_branch`). `None` when no such branch
/// exists (or its creation or drop was interrupted). An error when the name is invalid, or the
/// data side exists but the MDT side is missing, unreadable or carries another `branchId` (the
/// branch is then not usable).
pub async fn read_identity(storage: &Arc<dyn Storage>, name: &str) -> Result<Option<BranchInfo>> {
    Ok(branches::find_branch(storage, name).await?)
}

/// The identity of working branch `name` (any spelling, [`read_identity`]), or
/// [`BranchingError::BranchNotFound`].
/// names an interrupted rebase when one left its rebased state).
pub async fn branch_identity(storage: &Arc<dyn Storage>, name: &str) -> Result<BranchInfo> {
    if let Some(info) = read_identity(storage, name).await? {
        return Ok(info);
    }
    Err(BranchingError::BranchNotFound {
        name: name.to_string(),
        interrupted_rebase: interrupted_rebase(storage, name).await,
    })
}

/// The branch an interrupted rebase of `name` left its rebased state on, if any (errors
/// reading it count as none: this only improves a message).
async fn interrupted_rebase(storage: &Arc<dyn Storage>, name: &str) -> Option<String> {
    let staging = crate::rebase::names::staging_name(name).ok()?;
    let info = read_identity(storage, &staging).await.ok()??;
    info.rebase_of
        .is_some_and(|r| arbor_timeline::metaroot::same_name(&r.branch, name))
        .then_some(info.name)
}

/// True when `branch` names main (`None` or `"main"`).
pub fn is_main(branch: Option<&str>) -> bool {
    branch.is_none_or(|b| b == MAIN)
}

/// The root `branch` selects: main (resolved) for `None`/`"main"`, else the working branch
/// (any Unicode spelling of its name, [`read_identity`]), whose identity must check out. The
/// root carries the name the branch is stored under.
pub async fn select_root(storage: &Arc<dyn Storage>, branch: Option<&str>) -> Result<MetaRoot> {
    match branch {
        Some(b) if b != MAIN => {
            let info = branch_identity(storage, b).await?;
            Ok(MetaRoot::Branch(info.name))
        }
        _ => Ok(resolve_main(storage.as_ref()).await?),
    }
}

/// Opens working branch `name` (any Unicode spelling, [`read_identity`]) for writing
/// (identity checked). Its writes and table services land only in the branch's timelines.
pub async fn open_branch(storage: Arc<dyn Storage>, name: &str) -> Result<Table> {
    let info = branch_identity(&storage, name).await?;
    Ok(Table::open_at(storage, MetaRoot::Branch(info.name)).await?)
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

/// The names of the working branches whose identity checks out (ascending), as stored (NFC,
/// except branches an older arbor created under a name that is not). Directories without a
/// data-side `branch.json` (interrupted creations or drops) are skipped; a branch whose
/// identity files disagree is an error.
pub async fn branch_names(storage: &Arc<dyn Storage>) -> Result<Vec<String>> {
    Ok(branches::branch_names(storage).await?)
}

/// Every live root: main (resolved) first, then each working branch (the discovery every
/// clean and restore runs, `arbor_timeline::layout::branches::live_roots`).
pub async fn live_roots(storage: &Arc<dyn Storage>) -> Result<Vec<MetaRoot>> {
    Ok(branches::live_roots(storage).await?)
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
