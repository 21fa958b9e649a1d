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
    create_savepoint_locked, delete_savepoint_locked, savepoint_holders,
};
use arbor_storage::{Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::Table;
use arbor_timeline::layout::paths::{self, TAGS_DIR};
use arbor_timeline::metaroot::{
    nfc_name, normalize_branch_name, same_name, validate_branch_name, MAIN,
};
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
    if validate_branch_name(name).is_err() && normalize_branch_name(name).is_err() {
        return Err(not_found("not a valid tag name"));
    }
    let Some(tag) = find_tag(&view, name).await? else {
        return Err(not_found("no such tag"));
    };
    if tag.is_expired(Utc::now()) {
        return Err(not_found("the tag has expired"));
    }
    Ok((root, tag))
}

/// The tag of the root `view` shows that `name` names, whatever its Unicode spelling (every
/// spelling with the same NFC form names one tag; [`TagInfo::name`] is the name its definition
/// is stored under), expired or not:
///
/// 1. the definition stored under exactly `name` (so two tags an older arbor created under two
///    spellings of one name each stay reachable by their own spelling);
/// 2. else the one stored under the NFC form of `name` (every tag created since names are
///    normalised);
/// 3. else the one tag whose stored name is not NFC but normalises to the same name (created by
///    an older arbor); several is [`BranchingError::TagNotFound`] naming their spellings.
///
/// `None` when no tag matches; an invalid name is the timeline's `InvalidBranchName` error.
/// Costs one or two reads; step 3 a listing of the root's tags.
pub async fn find_tag(view: &Arc<dyn Storage>, name: &str) -> Result<Option<TagInfo>> {
    let nfc = nfc_name(name).into_owned();
    let exact_valid = validate_branch_name(name).is_ok();
    let nfc_valid = nfc != name && validate_branch_name(&nfc).is_ok();
    if !exact_valid && !nfc_valid {
        normalize_branch_name(name)?;
    }
    let spellings = [
        exact_valid.then_some(name),
        nfc_valid.then_some(nfc.as_str()),
    ];
    for stored in spellings.into_iter().flatten() {
        let key = tag_key(stored);
        if let Some((bytes, _)) = view.get_opt(&key).await? {
            return Ok(Some(TagInfo::parse(&bytes, &key, stored)?));
        }
    }
    let tags = list_tags_at(view, TagFilter::All).await?;
    let found: Vec<&TagInfo> = tags
        .iter()
        .filter(|t| t.name != nfc && same_name(&t.name, &nfc))
        .collect();
    if found.len() > 1 {
        return Err(ambiguous_tag(name, &found));
    }
    Ok(found.first().map(|t| (*t).clone()))
}

/// The tag of `tags` (one root's definitions) that `name` names, by the rules of [`find_tag`].
pub fn pick_tag<'a>(tags: &'a [TagInfo], name: &str) -> Result<Option<&'a TagInfo>> {
    if let Some(t) = tags.iter().find(|t| t.name == name) {
        return Ok(Some(t));
    }
    let nfc = nfc_name(name);
    if let Some(t) = tags.iter().find(|t| t.name == nfc) {
        return Ok(Some(t));
    }
    let found: Vec<&TagInfo> = tags.iter().filter(|t| same_name(&t.name, &nfc)).collect();
    if found.len() > 1 {
        return Err(ambiguous_tag(name, &found));
    }
    Ok(found.first().copied())
}

/// Several legacy tags are spelled like `name`.
fn ambiguous_tag(name: &str, found: &[&TagInfo]) -> BranchingError {
    let spellings: Vec<String> = found.iter().map(|t| format!("{:?}", t.name)).collect();
    BranchingError::TagNotFound {
        name: name.to_string(),
        branch: "this branch".to_string(),
        reason: format!(
            "it names several tags created by an older arbor under different Unicode \
             spellings ({}); give the exact spelling of one",
            spellings.join(", ")
        ),
    }
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
/// under the table lock, expiring at `expires_at` (never when `None`). The tag is stored under
/// the NFC form of `name` ([`normalize_branch_name`]). Expired tags of the root are processed
/// first. Refused for a taken name (any tag whose name is the same in NFC), an instant that is
/// not a completed write, or pending instants that could change its snapshot. Another tag on
/// the same instant is fine: the savepoints it created are reused.
pub async fn create_tag(
    table: &Table,
    name: &str,
    instant: Option<&InstantTime>,
    expires_at: Option<DateTime<Utc>>,
) -> Result<TagInfo> {
    let nfc = normalize_branch_name(name)?;
    let name = nfc.as_str();
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
            if let Some(t) = tags.iter().find(|t| same_name(&t.name, name)) {
                return Err(BranchingError::refused(
                    op,
                    if t.name == name {
                        "a tag of this name exists".to_string()
                    } else {
                        format!(
                            "a tag of this name exists, stored as {:?} (the same name in \
                             Unicode NFC)",
                            t.name
                        )
                    },
                ));
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

/// Drops tag `name` (any Unicode spelling, [`find_tag`]) of `table`'s root under the table
/// lock: the definition first, then its savepoints on both timelines unless
/// `retain_savepoint`, another tag definition of the root (expired ones included) or a clone
/// pin on the root still names the instant. Returns false when the tag was absent and
/// `if_exists` (a no-op); absent without `if_exists` is
/// [`BranchingError::TagNotFound`]. A crash between the two steps leaves the savepoints as plain
/// savepoints (never a tag without protection); `arbor_cleaner::delete_savepoint` removes them.
pub async fn drop_tag(
    table: &Table,
    name: &str,
    retain_savepoint: bool,
    if_exists: bool,
) -> Result<bool> {
    if validate_branch_name(name).is_err() {
        normalize_branch_name(name)?;
    }
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
    let Some(tag) = find_tag(view, name).await? else {
        if if_exists {
            return Ok(false);
        }
        return Err(BranchingError::TagNotFound {
            name: name.to_string(),
            branch: branch_label(table.root()),
            reason: "no such tag".to_string(),
        });
    };
    view.delete(&tag_key(&tag.name)).await?;
    if !retain_savepoint {
        let t = InstantTime::parse(&tag.instant)?;
        // The savepoints are shared by every tag, clone pin and branch base on the instant:
        // the last one releases them.
        if !savepoint_holders(table, &t).await?.is_empty() {
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
