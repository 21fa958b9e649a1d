//! The locked steps that replace a branch by its rebased state: keep the branch's earlier
//! history when a tag would be lost, drop the branch, install the rebased state under its name.
//!
//! Order (every prefix opens and reads correctly, and a rerun of the rebase finishes it):
//! 1. the kept branch `<b>-pre-rebase` (copy of `b`'s metadata, then its identity naming `b`'s
//!    id in `beforeRebaseOf`), only when `b` has a tag the rebased state lacks;
//! 2. `b` dropped ([`drop_locked`]: its identity first, then its metadata);
//! 3. the staging branch's metadata copied to `b`, then `b`'s identity (a new id): from here
//!    `b` reads the rebased state;
//! 4. the staging branch dropped.
//!
//! Between 2 and 3 the branch does not exist: its reads fail naming the interrupted rebase,
//! and the rerun continues at 3.

use arbor_storage::Storage;
use arbor_table::Table;
use arbor_timeline::layout::RebaseRecord;
use arbor_timeline::metaroot::validate_branch_name;
use arbor_timeline::{InstantTime, MetaRoot};
use bytes::Bytes;
use std::collections::BTreeSet;
use std::sync::Arc;

use super::names::kept_names;
use crate::branch::{drop_locked, ensure_droppable};
use crate::copy::{copy_root, CopySpec};
use crate::diff::RootTimeline;
use crate::error::{BranchingError, Result};
use crate::identity::BranchInfo;
use crate::roots::{
    branch_names, data_identity_key, mdt_identity_key, put_once, read_identity,
    remove_root_metadata,
};
use crate::tag::{list_tags_at, TagFilter};

/// What [`swap`] did.
pub(crate) enum Swap {
    /// The branch is the rebased state; the earlier history is kept on the named branch, if
    /// any.
    Done(Option<String>),
    /// The branch got a write after the rebase read it: nothing was changed; carry the new
    /// changes and try again.
    Moved,
}

/// Replaces `branch` by the rebased state built in `staging` (see the module doc), unless
/// `branch` has a completed write after `carried` (the head the rebase carried). Under the
/// caller's table lock.
pub(crate) async fn swap(
    table: &Table,
    branch: &BranchInfo,
    staging: &BranchInfo,
    carried: Option<&InstantTime>,
) -> Result<Swap> {
    let storage = table.table_storage().clone();
    let op = format!("rebase {}", branch.name);
    match read_identity(&storage, &branch.name).await? {
        Some(now) if now.branch_id == branch.branch_id => {}
        _ => {
            return Err(BranchingError::refused(
                op,
                format!(
                    "the branch was dropped or created anew during the rebase; drop {} \
                     (arbor branch drop) and rebase again",
                    staging.name
                ),
            ))
        }
    }
    let root = MetaRoot::Branch(branch.name.clone());
    let head = RootTimeline::open(&storage, &root)
        .await?
        .write_at_or_before(None);
    if head.as_ref() != carried {
        return Ok(Swap::Moved);
    }
    ensure_droppable(table, &branch.name, true).await?;
    staging_settled(table, staging).await?;
    let kept = if lost_tags(&storage, &root, &MetaRoot::Branch(staging.name.clone()))
        .await?
        .is_empty()
    {
        None
    } else {
        Some(keep(&storage, branch).await?)
    };
    drop_locked(table, &branch.name).await?;
    install(table, staging).await?;
    Ok(Swap::Done(kept))
}

/// The unexpired tags of `from` that `to` does not have (same name and instant).
async fn lost_tags(
    storage: &Arc<dyn Storage>,
    from: &MetaRoot,
    to: &MetaRoot,
) -> Result<Vec<String>> {
    let theirs: BTreeSet<(String, String)> =
        list_tags_at(&to.view(storage.clone()), TagFilter::Unexpired)
            .await?
            .into_iter()
            .map(|t| (t.name, t.instant))
            .collect();
    Ok(
        list_tags_at(&from.view(storage.clone()), TagFilter::Unexpired)
            .await?
            .into_iter()
            .filter(|t| !theirs.contains(&(t.name.clone(), t.instant.clone())))
            .map(|t| t.name)
            .collect(),
    )
}

/// Copies `branch` (metadata only: files are shared) to a new branch `<b>-pre-rebase[-N]`
/// whose identity records `branch`'s id (`beforeRebaseOf`); an earlier interrupted rebase's
/// kept branch is reused. Returns its name.
async fn keep(storage: &Arc<dyn Storage>, branch: &BranchInfo) -> Result<String> {
    for name in branch_names(storage).await? {
        if let Some(info) = read_identity(storage, &name).await? {
            if info
                .before_rebase_of
                .as_ref()
                .is_some_and(|r| r.branch_id == branch.branch_id)
            {
                return Ok(info.name);
            }
        }
    }
    let mut chosen = None;
    for name in kept_names(&branch.name) {
        if validate_branch_name(&name).is_err() {
            break;
        }
        if read_identity(storage, &name).await?.is_none() {
            chosen = Some(name);
            break;
        }
    }
    let name = chosen.ok_or_else(|| {
        BranchingError::refused(
            format!("rebase {}", branch.name),
            format!(
                "no free name to keep the branch's earlier history (and its tags) under: \
                 drop some {}-pre-rebase* branches",
                branch.name
            ),
        )
    })?;
    let to = MetaRoot::Branch(name.clone());
    remove_root_metadata(storage, &to).await?;
    copy_root(
        storage,
        &CopySpec {
            from: MetaRoot::Branch(branch.name.clone()),
            to,
            cut: None,
            savepoints: None,
            tags: None,
            skip_data_properties: false,
        },
    )
    .await?;
    let mut info = BranchInfo::new(&name, branch.base_instant.clone(), branch.from_tag.clone())?;
    info.before_rebase_of = Some(RebaseRecord {
        branch: branch.name.clone(),
        branch_id: branch.branch_id.clone(),
    });
    write_identity(storage, &info).await?;
    tracing::info!(branch = %branch.name, kept = %name, "kept the branch's earlier history");
    Ok(name)
}

/// Installs the rebased state built in `staging` under the name of the branch it rebases
/// (which must not exist: dropped by [`swap`], or by the interrupted rebase being finished),
/// with a new identity based where `staging` is, then drops `staging`. Under the caller's
/// table lock.
pub(crate) async fn install(table: &Table, staging: &BranchInfo) -> Result<()> {
    let storage = table.table_storage().clone();
    let Some(rebase) = &staging.rebase_of else {
        return Err(BranchingError::refused(
            format!("rebase into {}", staging.name),
            "the branch is not a rebase's",
        ));
    };
    staging_settled(table, staging).await?;
    let to = MetaRoot::Branch(rebase.branch.clone());
    remove_root_metadata(&storage, &to).await?;
    copy_root(
        &storage,
        &CopySpec {
            from: MetaRoot::Branch(staging.name.clone()),
            to,
            cut: None,
            savepoints: None,
            tags: None,
            skip_data_properties: false,
        },
    )
    .await?;
    let info = BranchInfo::new(&rebase.branch, staging.base_instant.clone(), None)?;
    write_identity(&storage, &info).await?;
    drop_locked(table, &staging.name).await
}

/// Refuses, before anything of the swap is done, while `staging` has a pending write: a
/// crashed rebase's whose heartbeat has not lapsed yet, or a rebase of the same branch still
/// running (failed writes whose heartbeat lapsed are rolled back first).
async fn staging_settled(table: &Table, staging: &BranchInfo) -> Result<()> {
    let of = staging
        .rebase_of
        .as_ref()
        .map_or(staging.name.as_str(), |r| r.branch.as_str());
    ensure_droppable(table, &staging.name, true)
        .await
        .map_err(|e| {
            BranchingError::refused(
                format!("rebase {of}"),
                format!(
                    "{e}; another rebase of {of} may still be running, or one was killed less \
                     than a heartbeat timeout ago: rerun once its write on {} has finished or \
                     its heartbeat has lapsed",
                    staging.name
                ),
            )
        })
}

/// Writes both identity files of `info`, the MDT side first (only the data side makes the
/// branch exist).
async fn write_identity(storage: &Arc<dyn Storage>, info: &BranchInfo) -> Result<()> {
    let json = Bytes::from(info.to_json()?);
    put_once(storage, &mdt_identity_key(&info.name), json.clone()).await?;
    put_once(storage, &data_identity_key(&info.name), json).await
}
