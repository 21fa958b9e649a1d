//! Working branches: create (from main's latest completed commit or a tag on main), list, drop.
//!
//! Creation holds the table lock throughout: the source state is selected, its metadata copied
//! into `.hoodie/branches/<b>/` and `.hoodie/metadata/.hoodie/branches/<b>/`, then the MDT-side
//! `branch.json` is written and the data-side one last; only the data-side file makes the branch
//! exist. A crash at any step leaves either no branch (leftover metadata is removed by the next
//! creation of that name, or by `drop`) or the complete branch.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_storage::{Storage, StorageExt};
use arbor_table::{Table, Transaction};
use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::layout::{PinRecord, RebaseRecord, DEFAULT_META_DIR};
use arbor_timeline::metaroot::{normalize_branch_name, same_name, validate_branch_name, MAIN};
use arbor_timeline::{
    resolve_main, Action, ActiveTimeline, InstantTime, MetaRoot, State, TableConfig, TableLayout,
};
use bytes::Bytes;

use arbor_cleaner::savepoint::{
    create_savepoint_locked, delete_savepoint_locked, incomplete_savepoints, list_savepoints,
    savepoint_holders,
};
use arbor_cleaner::{clean_locked, CleanOptions, CleanPolicy};

use crate::copy::{copy_root, CopySpec};
use crate::error::{BranchingError, Result};
use crate::identity::BranchInfo;
use crate::roots::{
    branch_identity, branch_names, data_identity_key, mdt_identity_key, put_once, read_identity,
    remove_root_metadata,
};
use crate::tag::{list_tags_at, pick_tag, TagFilter};

/// Kept here for the modules that import it from `branch` (it lives in [`crate::pending`]).
pub(crate) use crate::pending::blocking_pending;

/// A working branch and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchStatus {
    /// Its identity (`branch.json`).
    pub info: BranchInfo,
    /// Its latest completed write (requested time), if any.
    pub head: Option<InstantTime>,
    /// The completion time of [`Self::head`] (`None` for table version 6, which records none).
    pub head_completed: Option<InstantTime>,
    /// The completion time of the base instant (`info.base_instant`, a requested time), when
    /// the branch's timeline still has it and records one: the bound an incremental read of
    /// the branch's own writes starts after.
    pub base_completed: Option<InstantTime>,
    /// Its pending instants.
    pub pending: usize,
}

/// Where a new branch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchSource<'a> {
    /// Main's latest completed state.
    MainHead,
    /// The historical state of an unexpired tag on main.
    Tag(&'a str),
}

/// The table's metadata partitions must include FILES: branches rely on the metadata table to
/// know which shared files belong to them (RFC-116: directory listing alone does not establish
/// membership).
pub(crate) fn require_mdt(config: &TableConfig, op: &str) -> Result<()> {
    if config
        .metadata_partitions()
        .iter()
        .any(|p| p == arbor_mdt::FILES_PARTITION)
    {
        Ok(())
    } else {
        Err(BranchingError::refused(
            op,
            "branches need the metadata table (its FILES partition tells each branch which \
             shared files are its own); run `arbor mdt init` on main first",
        ))
    }
}

/// Creates working branch `name` from main under the table lock (`table` is any handle of the
/// table; its lock provider is used). The branch is stored under the NFC form of `name`
/// ([`normalize_branch_name`]; every spelling with that form names it afterwards). Returns the
/// new branch's identity.
///
/// Refused (nothing kept) when the name is invalid or taken (by a branch whose name is the same
/// in NFC, however it is stored), main has no metadata table, the tag (any spelling) is missing
/// or expired, or a pending instant could change the selected state.
pub async fn create_branch(
    table: &Table,
    name: &str,
    source: BranchSource<'_>,
) -> Result<BranchInfo> {
    let name = normalize_branch_name(name)?;
    table
        .transact(|txn| create_locked(txn, &name, source, None))
        .await
}

/// [`create_branch`] of the NFC name `name` under the caller's lock; `rebase_of` is recorded in
/// the identity (the branch a rebase builds its result in).
pub(crate) async fn create_locked(
    txn: Transaction<'_>,
    name: &str,
    source: BranchSource<'_>,
    rebase_of: Option<RebaseRecord>,
) -> Result<BranchInfo> {
    let table = txn.table();
    let storage = table.table_storage().clone();
    let op = format!("create branch {name}");
    if let Some(found) = read_identity(&storage, name).await? {
        return Err(BranchingError::refused(
            op,
            if found.name == name {
                "the branch exists".to_string()
            } else {
                format!(
                    "the branch exists, stored as {:?} (the same name in Unicode NFC)",
                    found.name
                )
            },
        ));
    }
    let target = MetaRoot::Branch(name.to_string());
    // Leftovers of an interrupted creation or drop of this name.
    let removed = remove_root_metadata(&storage, &target).await?;
    if removed > 0 {
        tracing::info!(
            branch = name,
            objects = removed,
            "removed leftover branch metadata"
        );
    }
    let main = resolve_main(storage.as_ref()).await?;
    let view = main.view(storage.clone());
    let config = TableConfig::load(view.as_ref(), DEFAULT_META_DIR).await?;
    require_mdt(&config, &op)?;
    let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
    let history = TimelineHistory::load(view.clone(), layout).await?;
    let now = chrono::Utc::now();
    let tags = list_tags_at(&view, TagFilter::All).await?;
    let (base, spec_tags, savepoints, from_tag) = match source {
        BranchSource::MainHead => {
            let base = history
                .completed_writes()
                .into_iter()
                .map(|i| i.requested_time)
                .max();
            // Every savepoint except those of expired tags and those only clone pins hold (the
            // pins stay main's); every unexpired tag.
            let tagged: BTreeSet<String> = tags.iter().map(|t| t.instant.clone()).collect();
            let mut not_inherited: BTreeSet<InstantTime> = tags
                .iter()
                .filter(|t| t.is_expired(now))
                .filter_map(|t| InstantTime::parse(&t.instant).ok())
                .collect();
            let pinned: BTreeSet<String> = PinRecord::list(storage.as_ref())
                .await?
                .into_iter()
                .filter(|p| p.root == MAIN)
                .map(|p| p.instant)
                .collect();
            not_inherited.extend(
                pinned
                    .iter()
                    .filter(|i| !tagged.contains(*i))
                    .filter_map(|i| InstantTime::parse(i).ok()),
            );
            // Savepoints that pin branch bases (this branch's own, left by an interrupted
            // creation, included) stay main's, unless a tag shares them.
            not_inherited.extend(
                list_savepoints(&view, history.active().layout())
                    .await?
                    .into_iter()
                    .filter(|s| is_base_pin_comment(&s.comment))
                    .filter(|s| !tagged.contains(s.instant.as_str()))
                    .map(|s| s.instant),
            );
            let savepoints: BTreeSet<InstantTime> = history
                .active()
                .filter(&[Action::Savepoint], &[State::Completed])
                .into_iter()
                .map(|i| i.requested_time)
                .filter(|t| !not_inherited.contains(t))
                .collect();
            let live: BTreeSet<String> = tags
                .iter()
                .filter(|t| !t.is_expired(now))
                .map(|t| t.name.clone())
                .collect();
            (base, live, savepoints, None)
        }
        BranchSource::Tag(tag_name) => {
            let tag = pick_tag(&tags, tag_name)?.ok_or_else(|| BranchingError::TagNotFound {
                name: tag_name.to_string(),
                branch: "main".to_string(),
                reason: "no such tag".to_string(),
            })?;
            let tag_name = tag.name.as_str();
            if tag.is_expired(now) {
                return Err(BranchingError::TagNotFound {
                    name: tag_name.to_string(),
                    branch: "main".to_string(),
                    reason: "the tag has expired".to_string(),
                });
            }
            let t = InstantTime::parse(&tag.instant)?;
            if history
                .active()
                .get(&t, Action::Savepoint)
                .is_none_or(|f| f.completed.is_none())
            {
                return Err(BranchingError::refused(
                    op,
                    format!("tag {tag_name} has no completed savepoint at {t}"),
                ));
            }
            (
                Some(t.clone()),
                BTreeSet::from([tag_name.to_string()]),
                BTreeSet::from([t]),
                Some(tag_name.to_string()),
            )
        }
    };
    let blocking = blocking_pending(history.active(), base.as_ref());
    if !blocking.is_empty() {
        return Err(BranchingError::refused(
            op,
            format!(
                "main has pending instants that could change the selected state: {}",
                blocking.join(", ")
            ),
        ));
    }
    let spec = CopySpec {
        from: main,
        to: target,
        cut: if from_tag.is_some() {
            base.clone()
        } else {
            None
        },
        savepoints: Some(savepoints),
        tags: Some(spec_tags),
        skip_data_properties: false,
    };
    let stats = copy_root(&storage, &spec).await?;
    if from_tag.is_some() {
        start_at_tag(txn, &spec.to).await?;
    }
    if let Some(b) = &base {
        pin_base(table, &spec.from, b, name).await?;
    }
    let mut info = BranchInfo::new(name, base.map(|b| b.to_string()), from_tag)?;
    info.rebase_of = rebase_of;
    let json = Bytes::from(info.to_json()?);
    put_once(&storage, &mdt_identity_key(name), json.clone()).await?;
    put_once(&storage, &data_identity_key(name), json).await?;
    tracing::info!(
        branch = name,
        objects = stats.objects,
        instants = stats.instants,
        "branch created"
    );
    Ok(info)
}

/// Pins the branch's base on main with a savepoint pair at `base` (created unless one is
/// there: a tag's, a clone pin's or another branch's is shared), before the branch is
/// activated. Engines that know nothing of branches (Java's cleaner, `CALL run_clean`) keep
/// every savepointed file, so the files the branch inherited from main stay however far main's
/// retention moves. A crash after this and before activation leaves a plain savepoint, which
/// the retry reuses.
async fn pin_base(table: &Table, main: &MetaRoot, base: &InstantTime, name: &str) -> Result<()> {
    let main = table.reopen_at(main.clone()).await?;
    let tl = ActiveTimeline::load(main.view_storage().clone(), main.layout().clone()).await?;
    let saved = tl
        .get(base, Action::Savepoint)
        .is_some_and(|f| f.completed.is_some());
    if !saved {
        create_savepoint_locked(&main, Some(base), &base_pin_comment(name))
            .await
            .map_err(|e| {
                BranchingError::refused(
                    format!("create branch {name}"),
                    format!("its base {base} cannot be pinned on main: {e}"),
                )
            })?;
    }
    Ok(())
}

/// The comment of the savepoint that pins branch `name`'s base on main.
fn base_pin_comment(name: &str) -> String {
    format!("branch {name} base")
}

fn is_base_pin_comment(comment: &str) -> bool {
    comment.starts_with("branch ") && comment.ends_with(" base")
}

/// Releases the savepoint pairs on main that pinned dropped branch `name`'s base (`base`, and
/// any savepoint whose comment says it pinned this branch: the one a drop interrupted after
/// the identity went leaves behind), each unless another holder (a tag, a clone pin, another
/// branch based there) names its instant. Runs after the branch's identity is gone; a crash
/// before it leaves a plain savepoint (protection kept, never lost), which the retried drop
/// releases.
async fn release_base(table: &Table, name: &str, base: Option<&str>) -> Result<()> {
    let storage = table.table_storage().clone();
    let main = table
        .reopen_at(resolve_main(storage.as_ref()).await?)
        .await?;
    let mut instants: BTreeSet<InstantTime> = base
        .and_then(|b| InstantTime::parse(b).ok())
        .into_iter()
        .collect();
    let comment = base_pin_comment(name);
    instants.extend(
        list_savepoints(main.view_storage(), main.layout())
            .await?
            .into_iter()
            .filter(|s| s.comment == comment)
            .map(|s| s.instant),
    );
    // A release interrupted half-way (data side gone, metadata side left).
    instants.extend(incomplete_savepoints(&main).await?);
    for t in instants {
        if !savepoint_holders(&main, &t).await?.is_empty() {
            continue;
        }
        // Whatever savepoint files exist at the instant, on either timeline; "no such
        // savepoint" (already released) is fine.
        match delete_savepoint_locked(&main, &t).await {
            Ok(()) | Err(arbor_cleaner::CleanerError::Refused { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// A branch from a tag starts at the tag: its history before the tag is not retained (main's
/// cleans after the tag, which the branch does not inherit, may have deleted files only older
/// snapshots read, and its metadata table still lists them). A clean of the new branch keeping
/// its latest commit (the tag's snapshot, also kept by its savepoint) records that in the
/// branch's own timeline and MDT, and deletes only files no other branch keeps (the cleaner
/// adds `arbor_cleaner::BranchProtection` itself). Runs before the branch is activated, under
/// the caller's lock.
async fn start_at_tag(txn: Transaction<'_>, root: &MetaRoot) -> Result<()> {
    let table = txn.table();
    let branch = table.reopen_at(root.clone()).await?;
    let policy = CleanPolicy::KeepLatestCommits(1);
    let options = CleanOptions {
        policy,
        dry_run: false,
        archive: false,
        extra_sources: Vec::new(),
    };
    let out = clean_locked(txn.on(&branch)?, &options).await?;
    tracing::debug!(files = out.planned(), "branch from a tag starts at the tag");
    Ok(())
}

/// Every working branch with its head and pending instants, by name.
pub async fn list_branches(storage: &Arc<dyn Storage>) -> Result<Vec<BranchStatus>> {
    let mut out = Vec::new();
    for name in branch_names(storage).await? {
        let info = branch_identity(storage, &name).await?;
        let view = MetaRoot::Branch(name.clone()).view(storage.clone());
        let config = TableConfig::load(view.as_ref(), DEFAULT_META_DIR).await?;
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
        let history = TimelineHistory::load(view, layout).await?;
        let writes = history.completed_writes();
        let head = writes.iter().max_by_key(|i| &i.requested_time);
        let head_completed = head.and_then(|i| i.completion_time.clone());
        let head = head.map(|i| i.requested_time.clone());
        let base_completed = info.base_instant.as_deref().and_then(|b| {
            writes
                .iter()
                .find(|i| i.requested_time.as_str() == b)
                .and_then(|i| i.completion_time.clone())
        });
        out.push(BranchStatus {
            info,
            head,
            head_completed,
            base_completed,
            pending: history.active().pending().len(),
        });
    }
    Ok(out)
}

/// Drops working branch `name` (any Unicode spelling of its name,
/// [`crate::roots::read_identity`]) under the table lock: the data-side `branch.json` goes first
/// (the branch stops existing), then both sides' metadata. Shared files stay until a clean
/// finds that nothing needs them; the files the branch listed are recorded first
/// (`arbor_cleaner::reclaim`), so the next clean of any root deletes those nothing else
/// references. Refused while the branch has pending instants (failed writes
/// whose heartbeat expired are rolled back first), and while a clone pin names the branch
/// ([`BranchingError::PinHeld`]: a clone reads its files). Dropping a name whose drop was interrupted
/// finishes it; dropping a name that never existed is [`BranchingError::BranchNotFound`].
pub async fn drop_branch(table: &Table, name: &str) -> Result<()> {
    if validate_branch_name(name).is_err() {
        normalize_branch_name(name)?;
    }
    table.with_table_lock(drop_locked(table, name)).await
}

/// Refuses when branch `name` (as stored) cannot be dropped now: a clone pin names it
/// ([`BranchingError::PinHeld`]: a clone reads its files), or (when it `exists`) it has
/// pending instants once failed writes whose heartbeat expired are rolled back. Under the
/// caller's lock.
pub(crate) async fn ensure_droppable(table: &Table, name: &str, exists: bool) -> Result<()> {
    let storage = table.table_storage().clone();
    let pins: Vec<PinRecord> = PinRecord::list(storage.as_ref())
        .await?
        .into_iter()
        .filter(|p| same_name(&p.root, name))
        .collect();
    if let Some(first) = pins.first() {
        return Err(BranchingError::PinHeld {
            operation: format!("drop branch {name}"),
            instant: first.instant.clone(),
            root: name.to_string(),
            clones: pins
                .iter()
                .map(|p| format!("{} at {}", p.clone_id, p.location))
                .collect(),
        });
    }
    if !exists {
        return Ok(());
    }
    let branch = table.reopen_at(MetaRoot::Branch(name.to_string())).await?;
    branch.rollback_failed_locked().await?;
    let tl = ActiveTimeline::load(branch.view_storage().clone(), branch.layout().clone()).await?;
    let pending: Vec<String> = tl.pending().iter().map(ToString::to_string).collect();
    if !pending.is_empty() {
        return Err(BranchingError::refused(
            format!("drop branch {name}"),
            format!(
                "the branch has pending instants {}; finish or roll them back first",
                pending.join(", ")
            ),
        ));
    }
    Ok(())
}

/// [`drop_branch`] for a caller that already holds the table lock (`table` is any handle of the
/// table; publication drops the branch it published this way, under its own lock).
pub(crate) async fn drop_locked(table: &Table, given: &str) -> Result<()> {
    let storage = table.table_storage().clone();
    let found_info = read_identity(&storage, given).await?;
    let exists = found_info.is_some();
    // The stored name; for a branch that is gone, the name its leftovers would be under.
    let name = match &found_info {
        Some(info) => info.name.clone(),
        None => normalize_branch_name(given)?,
    };
    let name = name.as_str();
    let root = MetaRoot::Branch(name.to_string());
    ensure_droppable(table, name, found_info.is_some()).await?;
    if let Some(info) = found_info {
        let branch = table.reopen_at(root.clone()).await?;
        let view = branch.view_storage().clone();
        // What the branch listed, for the next clean to reclaim once nothing references it;
        // recorded before the branch stops existing (a retried drop records it again).
        let files =
            arbor_cleaner::reclaim::record_dropped(&storage, view.clone(), name, &info.branch_id)
                .await?;
        tracing::debug!(branch = name, files, "recorded the dropped branch's files");
        storage.delete(&data_identity_key(name)).await?;
        release_base(table, name, info.base_instant.as_deref()).await?;
    } else {
        // A drop interrupted after the identity went may have left the base pin.
        release_base(table, name, None).await?;
    }
    let mut removed = remove_root_metadata(&storage, &root).await?;
    if !exists && given != name && validate_branch_name(given).is_ok() {
        // Leftovers of an interrupted drop of a branch an older arbor stored as spelled.
        removed += remove_root_metadata(&storage, &MetaRoot::Branch(given.to_string())).await?;
    }
    if !exists && removed == 0 {
        return Err(BranchingError::BranchNotFound {
            name: name.to_string(),
            interrupted_rebase: None,
        });
    }
    Ok(())
}
