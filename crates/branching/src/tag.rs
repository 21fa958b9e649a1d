//! Tags: a named completed instant of one branch, protected by paired data/MDT savepoints.
//!
//! A tag is `tags/<name>.json` in the owning branch's data metadata. Creation (under the table
//! lock) checks the name and instant, creates (or reuses) the savepoints on both timelines and
//! writes the JSON last; a crash before that leaves at most a plain savepoint, which the retry
//! reuses. Several tags may name one instant: they share its one savepoint pair. Dropping
//! removes the JSON first, then the savepoints (unless retained, or another tag definition,
//! expired ones included, or a clone pin still names the instant: the last tag or pin on an
//! instant releases them). Expired tags
//! serve no reads and are not listed by default; their name and instant stay reserved until
//! [`expire_tags`] (or a drop) removes them.

use std::sync::Arc;

use arbor_cleaner::savepoint::{
    create_savepoint_locked, delete_savepoint_locked, pins_naming, root_label, tags_naming,
};
use arbor_storage::{Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::Table;
use arbor_timeline::layout::paths::{self, TAGS_DIR};
use arbor_timeline::metaroot::{validate_branch_name, MAIN};
use arbor_timeline::{Action, ActiveTimeline, InstantTime, MetaRoot};
use bytes::Bytes;
use chrono::{DateTime, Utc};

use crate::error::{BranchingError, Result};
use crate::identity::TagInfo;
use crate::pending::blocking_pending;
use crate::roots::{put_once, select_root};

/// Which tag definitions to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagFilter {
    /// Every definition, expired ones included.
    All,
    /// Only tags that have not expired.
    Unexpired,
}

/// The key of tag `name`'s definition, as its root's view shows it.
pub(crate) fn tag_key(name: &str) -> String {
    paths::tag_key(name)
}

fn branch_label(root: &MetaRoot) -> String {
    match root {
        MetaRoot::Branch(b) => b.clone(),
        _ => MAIN.to_string(),
    }
}

/// The tag definitions of the root `view` shows, by name.
pub async fn list_tags_at(view: &Arc<dyn Storage>, filter: TagFilter) -> Result<Vec<TagInfo>> {
    let now = Utc::now();
    let mut out = Vec::new();
    for o in view.list_all(TAGS_DIR).await? {
        let Some(stem) = paths::tag_name_of(&o.key) else {
            continue;
        };
        let (bytes, _) = view.get(&o.key).await?;
        let tag = TagInfo::parse(&bytes, &o.key, stem)?;
        if filter == TagFilter::All || !tag.is_expired(now) {
            out.push(tag);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The tags of `branch` (main for `None`/`"main"`).
pub async fn list_tags(
    storage: &Arc<dyn Storage>,
    branch: Option<&str>,
    filter: TagFilter,
) -> Result<Vec<TagInfo>> {
    let root = select_root(storage, branch).await?;
    list_tags_at(&root.view(storage.clone()), filter).await
}

/// Tag `name` of `branch` for reading: refused when absent or expired.
pub async fn resolve_tag(
    storage: &Arc<dyn Storage>,
    branch: Option<&str>,
    name: &str,
) -> Result<(MetaRoot, TagInfo)> {
    let root = select_root(storage, branch).await?;
    let view = root.view(storage.clone());
    let not_found = |reason: &str| BranchingError::TagNotFound {
        name: name.to_string(),
        branch: branch_label(&root),
        reason: reason.to_string(),
    };
    validate_branch_name(name).map_err(|_| not_found("not a valid tag name"))?;
    let key = tag_key(name);
    let Some((bytes, _)) = view.get_opt(&key).await? else {
        return Err(not_found("no such tag"));
    };
    let tag = TagInfo::parse(&bytes, &key, name)?;
    if tag.is_expired(Utc::now()) {
        return Err(not_found("the tag has expired"));
    }
    Ok((root, tag))
}

/// A reader of `branch` and the instant of its tag `name`: read it as of that instant (time
/// travel; the tag's savepoints keep its files however far the cleaner's retention has moved).
pub async fn tag_reader(
    storage: Arc<dyn Storage>,
    branch: Option<&str>,
    name: &str,
) -> Result<(TableReader, InstantTime)> {
    let (root, tag) = resolve_tag(&storage, branch, name).await?;
    let reader = TableReader::open_view(root.view(storage)).await?;
    Ok((reader, InstantTime::parse(&tag.instant)?))
}

/// Creates tag `name` on `table`'s root at completed write `instant` (default: the latest)
/// under the table lock, expiring at `expires_at` (never when `None`). Expired tags of the root
/// are processed first. Refused for a taken name, an instant that is not a completed write, or
/// pending instants that could change its snapshot. Another tag on the same instant is fine:
/// the savepoints it created are reused.
pub async fn create_tag(
    table: &Table,
    name: &str,
    instant: Option<&InstantTime>,
    expires_at: Option<DateTime<Utc>>,
) -> Result<TagInfo> {
    validate_branch_name(name)?;
    table
        .with_table_lock(async {
            let op = format!("create tag {name}");
            if let Some(e) = expires_at.filter(|e| *e <= Utc::now()) {
                return Err(BranchingError::refused(
                    op,
                    format!("the expiry {e} is not in the future"),
                ));
            }
            expire_locked(table).await?;
            let view = table.view_storage();
            let tags = list_tags_at(view, TagFilter::All).await?;
            if tags.iter().any(|t| t.name == name) {
                return Err(BranchingError::refused(op, "a tag of this name exists"));
            }
            let tl = ActiveTimeline::load(view.clone(), table.layout().clone()).await?;
            let writes = tl.completed_writes();
            let time = match instant {
                Some(t) => t.clone(),
                None => writes
                    .iter()
                    .map(|i| i.requested_time.clone())
                    .max()
                    .ok_or_else(|| {
                        BranchingError::refused(op.clone(), "the branch has no completed write")
                    })?,
            };
            if !writes.iter().any(|i| i.requested_time == time) {
                return Err(BranchingError::refused(
                    op,
                    format!("{time} is not a completed write of the active timeline"),
                ));
            }
            let blocking = blocking_pending(&tl, Some(&time));
            if !blocking.is_empty() {
                return Err(BranchingError::refused(
                    op,
                    format!(
                        "pending instants could change the snapshot: {}",
                        blocking.join(", ")
                    ),
                ));
            }
            let has_savepoint = tl
                .get(&time, Action::Savepoint)
                .is_some_and(|f| f.completed.is_some());
            if !has_savepoint {
                create_savepoint_locked(table, Some(&time), &format!("tag {name}")).await?;
            }
            let tag = TagInfo {
                name: name.to_string(),
                instant: time.to_string(),
                created_at: Utc::now(),
                expires_at,
            };
            let json = serde_json::to_string_pretty(&tag).map_err(|e| BranchingError::Invalid {
                path: tag_key(name),
                reason: e.to_string(),
            })?;
            put_once(view, &tag_key(name), Bytes::from(json)).await?;
            Ok(tag)
        })
        .await
}

/// Drops tag `name` of `table`'s root under the table lock: the definition first, then its
/// savepoints on both timelines unless `retain_savepoint`, another tag definition of the root
/// (expired ones included) or a clone pin on the root still names the instant. Returns false when the tag was
/// absent and `if_exists` (a no-op); absent without `if_exists` is
/// [`BranchingError::TagNotFound`]. A crash between the two steps leaves the savepoints as plain
/// savepoints (never a tag without protection); `arbor_cleaner::delete_savepoint` removes them.
pub async fn drop_tag(
    table: &Table,
    name: &str,
    retain_savepoint: bool,
    if_exists: bool,
) -> Result<bool> {
    validate_branch_name(name)?;
    table
        .with_table_lock(drop_locked(table, name, retain_savepoint, if_exists))
        .await
}

async fn drop_locked(
    table: &Table,
    name: &str,
    retain_savepoint: bool,
    if_exists: bool,
) -> Result<bool> {
    let view = table.view_storage();
    let key = tag_key(name);
    let Some((bytes, _)) = view.get_opt(&key).await? else {
        if if_exists {
            return Ok(false);
        }
        return Err(BranchingError::TagNotFound {
            name: name.to_string(),
            branch: branch_label(table.root()),
            reason: "no such tag".to_string(),
        });
    };
    let tag = TagInfo::parse(&bytes, &key, name)?;
    view.delete(&key).await?;
    if !retain_savepoint {
        let t = InstantTime::parse(&tag.instant)?;
        // The savepoints are shared by every tag and clone pin on the instant: the last one
        // releases them.
        if !tags_naming(view, &t).await?.is_empty()
            || !pins_naming(view, root_label(table.root()), &t)
                .await?
                .is_empty()
        {
            return Ok(true);
        }
        let tl = ActiveTimeline::load(view.clone(), table.layout().clone()).await?;
        if tl.get(&t, Action::Savepoint).is_some() {
            delete_savepoint_locked(table, &t).await?;
        }
    }
    Ok(true)
}

/// Removes every expired tag of `table`'s root (with its savepoints) under the table lock.
/// Returns the names removed.
pub async fn expire_tags(table: &Table) -> Result<Vec<String>> {
    table.with_table_lock(expire_locked(table)).await
}

/// [`expire_tags`] for a caller holding the lock.
pub(crate) async fn expire_locked(table: &Table) -> Result<Vec<String>> {
    let now = Utc::now();
    let mut out = Vec::new();
    for tag in list_tags_at(table.view_storage(), TagFilter::All).await? {
        if tag.is_expired(now) {
            drop_locked(table, &tag.name, false, true).await?;
            out.push(tag.name);
        }
    }
    Ok(out)
}
