//! Savepoints: a named, protected snapshot of a completed instant (spec 3.7, 7.2).
//!
//! A savepoint of completed write `T` is the `savepoint` action at the same instant time:
//! `T.savepoint.inflight`, then `T_<c>.savepoint` holding a `HoodieSavepointMetadata` that lists,
//! per partition, every file (base and log files) of the latest slices as of `T`. When the table
//! has a metadata table, the pair's MDT side (the same action at `T` on the MDT timeline, listing
//! the MDT's files) is written **first** and the data side last: the data-side savepoint is what
//! protects files, so a crash in between leaves an MDT savepoint that a retry completes. Deletion
//! goes the other way (data side first).

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_fsview::{FileSystemView, Horizon};
use arbor_mdt::{MetadataTable, MDT_META_DIR};
use arbor_storage::{Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::Table;
use arbor_timeline::avro::{
    decode, decode_instant, encode_instant_for, HoodieCleanMetadata, HoodieSavepointMetadata,
    HoodieSavepointPartitionMetadata, InstantContent,
};
use arbor_timeline::layout::branches::{branch_names, read_identity};
use arbor_timeline::layout::{paths, PinRecord};
use arbor_timeline::metaroot::MAIN;
use arbor_timeline::{
    Action, ActiveTimeline, Instant, InstantTime, InstantTimeGenerator, MetaRoot, State,
    TableConfig, TableLayout,
};
use bytes::Bytes;

use crate::error::{CleanerError, Result};
use crate::protection::{committed_files, slice_keys};

/// The `version` arbor writes in savepoint metadata (as Spark 1.x).
const SAVEPOINT_VERSION: i32 = 1;

/// One completed savepoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavepointInfo {
    /// The savepointed instant.
    pub instant: InstantTime,
    /// When it was taken (epoch seconds, as Java writes it).
    pub savepointed_at: i64,
    /// Who took it.
    pub savepointed_by: String,
    /// The comment.
    pub comment: String,
    /// Files it protects (data table).
    pub files: usize,
}

fn metadata(files: &BTreeMap<String, Vec<String>>, comment: &str) -> HoodieSavepointMetadata {
    HoodieSavepointMetadata {
        savepointed_by: "arbor".to_string(),
        savepointed_at: chrono::Utc::now().timestamp(),
        comments: comment.to_string(),
        partition_metadata: files
            .iter()
            .map(|(p, names)| {
                (
                    p.clone(),
                    HoodieSavepointPartitionMetadata {
                        partition_path: p.clone(),
                        savepoint_data_file: names.clone(),
                    },
                )
            })
            .collect(),
        version: Some(SAVEPOINT_VERSION),
    }
}

/// partition -> file names of the latest slices of `view` within `horizon`.
async fn snapshot_files(
    view: &FileSystemView,
    horizon: &Horizon,
) -> Result<BTreeMap<String, Vec<String>>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for slice in view.latest_file_slices_within(None, horizon).await? {
        let names = slice_keys(&slice)
            .map(|k| k.rsplit('/').next().unwrap_or(&k).to_string())
            .collect::<Vec<_>>();
        out.entry(slice.partition.clone())
            .or_default()
            .extend(names);
    }
    for names in out.values_mut() {
        names.sort();
        names.dedup();
    }
    Ok(out)
}

/// Writes savepoint `time` on the timeline at `layout` (inflight, then completed with
/// `meta`) unless it is completed already. Returns false when it already was.
async fn write_savepoint(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    time: &InstantTime,
    meta: HoodieSavepointMetadata,
    generator: &InstantTimeGenerator,
) -> Result<bool> {
    let mut tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let existing = tl.get(time, Action::Savepoint).cloned();
    if existing.as_ref().is_some_and(|f| f.completed.is_some()) {
        return Ok(false);
    }
    let requested = Instant::requested(time.clone(), Action::Savepoint);
    let inflight = match existing.and_then(|f| f.inflight) {
        Some(i) => i,
        None => tl.transition_to_inflight(&requested, Bytes::new()).await?,
    };
    let completion = tl.next_instant_time(generator).await?;
    let mut completed = inflight.with_state(State::Completed);
    completed.completion_time = Some(completion.clone());
    let bytes = encode_instant_for(&completed, &InstantContent::Savepoint(Box::new(meta)))?;
    tl.complete(&inflight, completion, Bytes::from(bytes))
        .await?;
    Ok(true)
}

/// Creates a savepoint of completed write `instant` (default: the latest completed write) under
/// the table lock. Refused (nothing written) when the instant is not a completed write of the
/// active timeline, is savepointed already, a clean is pending (finish it first), or a file of
/// its snapshot has been cleaned.
pub async fn create_savepoint(
    table: &Table,
    instant: Option<&InstantTime>,
    comment: &str,
) -> Result<SavepointInfo> {
    table
        .with_table_lock(create_savepoint_locked(table, instant, comment))
        .await
}

/// [`create_savepoint`] for a caller that already holds the table lock (tags create their
/// savepoints this way, inside their own locked operation).
pub async fn create_savepoint_locked(
    table: &Table,
    instant: Option<&InstantTime>,
    comment: &str,
) -> Result<SavepointInfo> {
    let storage = table.view_storage();
    let tl = ActiveTimeline::load(storage.clone(), table.layout().clone()).await?;
    let op = |t: &dyn std::fmt::Display| format!("savepoint {t}");
    if let Some(c) = tl
        .filter(&[Action::Clean], &[State::Requested, State::Inflight])
        .first()
    {
        return Err(CleanerError::refused(
            op(&instant.map_or("latest".to_string(), ToString::to_string)),
            format!(
                "clean {} is pending; run `arbor clean` to finish it first",
                c.requested_time
            ),
        ));
    }
    let writes = tl.completed_writes();
    let time = match instant {
        Some(t) => t.clone(),
        None => writes
            .iter()
            .max_by_key(|i| i.completion_time.clone())
            .map(|i| i.requested_time.clone())
            .ok_or_else(|| {
                CleanerError::refused(op(&"latest"), "the table has no completed write")
            })?,
    };
    if !writes.iter().any(|i| i.requested_time == time) {
        return Err(CleanerError::refused(
            op(&time),
            "not a completed commit, deltacommit or replacecommit of the active timeline",
        ));
    }
    if tl
        .get(&time, Action::Savepoint)
        .is_some_and(|f| f.completed.is_some())
    {
        return Err(CleanerError::refused(
            op(&time),
            "the instant is savepointed already",
        ));
    }
    let reader = TableReader::open_view(storage.clone()).await?;
    let view = reader.view();
    let files = snapshot_files(view, &Horizon::AsOf(time.clone())).await?;
    let present = committed_files(view).await?;
    for (p, names) in &files {
        for n in names {
            let key = arbor_fsview::slice::join(p, n);
            if !present.contains_key(&key) {
                return Err(CleanerError::refused(
                    op(&time),
                    format!("{key} of its snapshot has been cleaned"),
                ));
            }
        }
    }
    // A snapshot computed from today's files silently falls back to older slices where a clean
    // removed newer ones: refuse instants before the last clean's retained window, and
    // instants whose own files are gone.
    for c in tl.filter(&[Action::Clean], &[State::Completed]) {
        let key = tl.key_of(&c)?;
        let meta: HoodieCleanMetadata = decode(&tl.read(&c).await?, &key)?;
        if let Ok(earliest) = InstantTime::parse(&meta.earliest_commit_to_retain) {
            if time < earliest {
                return Err(CleanerError::refused(
                    op(&time),
                    format!(
                        "clean {} kept only snapshots from {earliest} on: the snapshot has been \
                         cleaned",
                        c.requested_time
                    ),
                ));
            }
        }
    }
    if let Some(written) = writes.iter().find(|i| i.requested_time == time) {
        let key = tl.key_of(written)?;
        let bytes = tl.read(written).await?;
        let stats: Vec<(String, String)> = match decode_instant(written, &bytes, &key, false)? {
            InstantContent::Commit(m) => m
                .write_stats()
                .filter_map(|(p, s)| s.path.clone().map(|f| (p.to_string(), f)))
                .collect(),
            InstantContent::ReplaceCommit(m) => m
                .write_stats()
                .filter_map(|(p, s)| s.path.clone().map(|f| (p.to_string(), f)))
                .collect(),
            _ => Vec::new(),
        };
        for (p, path) in stats {
            let name = path.rsplit('/').next().unwrap_or(&path);
            let key = arbor_fsview::slice::join(&p, name);
            if !present.contains_key(&key) {
                return Err(CleanerError::refused(
                    op(&time),
                    format!("{key}, written by it, has been cleaned"),
                ));
            }
        }
    }
    let count = files.values().map(Vec::len).sum();
    let meta = metadata(&files, comment);
    if let Some(mdt_layout) = mdt_layout(storage).await? {
        if let Some(mdt) =
            MetadataTable::open_with(storage.clone(), view.history().active()).await?
        {
            let mdt_files = snapshot_files(mdt.view(), &Horizon::Latest).await?;
            write_savepoint(
                storage,
                &mdt_layout,
                &time,
                metadata(&mdt_files, comment),
                table.generator(),
            )
            .await?;
        }
    }
    write_savepoint(
        storage,
        table.layout(),
        &time,
        meta.clone(),
        table.generator(),
    )
    .await?;
    Ok(SavepointInfo {
        instant: time,
        savepointed_at: meta.savepointed_at,
        savepointed_by: meta.savepointed_by,
        comment: meta.comments,
        files: count,
    })
}

async fn mdt_layout(storage: &Arc<dyn Storage>) -> Result<Option<TableLayout>> {
    if !storage.exists(&paths::properties_key(MDT_META_DIR)).await? {
        return Ok(None);
    }
    let config = TableConfig::load(storage.as_ref(), MDT_META_DIR).await?;
    Ok(Some(TableLayout::from_config(MDT_META_DIR, &config)?))
}

/// The completed savepoints of the table at `layout` (the data table), oldest first.
pub async fn list_savepoints(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
) -> Result<Vec<SavepointInfo>> {
    let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    let mut out = Vec::new();
    for sp in tl.filter(&[Action::Savepoint], &[State::Completed]) {
        let key = tl.key_of(&sp)?;
        let meta: HoodieSavepointMetadata = decode(&tl.read(&sp).await?, &key)?;
        out.push(SavepointInfo {
            instant: sp.requested_time.clone(),
            savepointed_at: meta.savepointed_at,
            savepointed_by: meta.savepointed_by.clone(),
            comment: meta.comments.clone(),
            files: meta.files().count(),
        });
    }
    Ok(out)
}

/// Deletes savepoint `instant` (data side first, then the metadata table's) under the table
/// lock; its files become cleanable. Refused when there is no such savepoint, while a tag
/// definition of this branch (`.hoodie/tags/*.json`, expired ones included) names the instant,
/// or while a clone pin ([`pins_naming`]) names it on this root.
pub async fn delete_savepoint(table: &Table, instant: &InstantTime) -> Result<()> {
    table
        .with_table_lock(delete_savepoint_locked(table, instant))
        .await
}

/// The tag names whose definitions in `tags/` of the table's metadata name `instant` (the
/// definitions are read as plain JSON; unreadable ones count as naming it, so a damaged tag
/// never loses its protection).
pub async fn tags_naming(storage: &Arc<dyn Storage>, instant: &InstantTime) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for o in storage.list_all(paths::TAGS_DIR).await? {
        let Some(stem) = paths::tag_name_of(&o.key) else {
            continue;
        };
        let (bytes, _) = storage.get(&o.key).await?;
        let names_it = match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) => v.get("instant").and_then(|i| i.as_str()) == Some(instant.as_str()),
            Err(_) => true,
        };
        if names_it {
            out.push(stem.to_string());
        }
    }
    Ok(out)
}

/// The name clone pins use for metadata root `root`: `main` for main's root and its
/// publications, the branch's name for a working branch.
pub fn root_label(root: &MetaRoot) -> &str {
    match root {
        MetaRoot::Branch(b) => b,
        _ => MAIN,
    }
}

/// The clone pins of the table (its `.hoodie/.clones/`, shared by every root; `storage` is the
/// table's storage or any root's view) that hold `instant` on root `root` (a [`root_label`]).
/// A pin holds the savepoint pair at its instant: while one names it, the savepoint stays.
pub async fn pins_naming(
    storage: &Arc<dyn Storage>,
    root: &str,
    instant: &InstantTime,
) -> Result<Vec<PinRecord>> {
    Ok(PinRecord::list(storage.as_ref())
        .await?
        .into_iter()
        .filter(|p| p.root == root && p.instant == instant.as_str())
        .collect())
}

/// The working branches created from main at `instant` (their recorded base instant), read
/// from the table's branch identities (`storage` is the table's own storage, not a root's
/// view). Each holds the savepoint pair at its base on main: Java's cleaner knows nothing of
/// branches but keeps every savepointed file, so the files a branch inherited stay.
pub async fn branches_based_at(
    storage: &Arc<dyn Storage>,
    instant: &InstantTime,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for name in branch_names(storage).await? {
        if let Some(info) = read_identity(storage, &name).await? {
            if info.base_instant.as_deref() == Some(instant.as_str()) {
                out.push(info.name);
            }
        }
    }
    Ok(out)
}

/// Who still holds the savepoint pair at `instant` on `table`'s root, each described for a
/// message: the tags of the root naming it, the clone pins naming it on the root and, on main,
/// the working branches based at it. Empty when the last holder is gone.
pub async fn savepoint_holders(table: &Table, instant: &InstantTime) -> Result<Vec<String>> {
    let view = table.view_storage();
    let mut out: Vec<String> = tags_naming(view, instant)
        .await?
        .into_iter()
        .map(|t| format!("tag {t}"))
        .collect();
    out.extend(
        pins_naming(view, root_label(table.root()), instant)
            .await?
            .into_iter()
            .map(|p| format!("clone {} at {}", p.clone_id, p.location)),
    );
    if root_label(table.root()) == MAIN {
        out.extend(
            branches_based_at(table.table_storage(), instant)
                .await?
                .into_iter()
                .map(|b| format!("branch {b} (its base)")),
        );
    }
    Ok(out)
}

/// The instants at which `table`'s root has savepoint files on its data or metadata timeline
/// but no completed data-side savepoint: what a creation or deletion interrupted by a crash
/// leaves. Such a pair protects nothing for Hudi's cleaners (they honour completed data-side
/// savepoints) and [`delete_savepoint_locked`] removes whatever of it exists.
pub async fn incomplete_savepoints(table: &Table) -> Result<Vec<InstantTime>> {
    let storage = table.view_storage();
    let data = ActiveTimeline::load(storage.clone(), table.layout().clone()).await?;
    let completed: std::collections::BTreeSet<InstantTime> = data
        .filter(&[Action::Savepoint], &[State::Completed])
        .into_iter()
        .map(|i| i.requested_time)
        .collect();
    let mut out: std::collections::BTreeSet<InstantTime> = data
        .filter(&[Action::Savepoint], &[State::Requested, State::Inflight])
        .into_iter()
        .map(|i| i.requested_time)
        .collect();
    if let Some(l) = mdt_layout(storage).await? {
        let mdt = ActiveTimeline::load(storage.clone(), l).await?;
        out.extend(
            mdt.filter(
                &[Action::Savepoint],
                &[State::Requested, State::Inflight, State::Completed],
            )
            .into_iter()
            .map(|i| i.requested_time),
        );
    }
    Ok(out.into_iter().filter(|t| !completed.contains(t)).collect())
}

/// [`delete_savepoint`] for a caller that already holds the table lock.
pub async fn delete_savepoint_locked(table: &Table, instant: &InstantTime) -> Result<()> {
    let storage = table.view_storage();
    if root_label(table.root()) == MAIN {
        let branches = branches_based_at(table.table_storage(), instant).await?;
        if !branches.is_empty() {
            return Err(CleanerError::refused(
                format!("delete savepoint {instant}"),
                format!(
                    "branch {} was created from main at this instant and reads its files (the \
                     savepoint keeps them from Java's cleaner); drop or publish the branch first",
                    branches.join(", ")
                ),
            ));
        }
    }
    let tags = tags_naming(storage, instant).await?;
    if !tags.is_empty() {
        return Err(CleanerError::refused(
            format!("delete savepoint {instant}"),
            format!(
                "tag {} names this instant; drop the tag instead",
                tags.join(", ")
            ),
        ));
    }
    let pins = pins_naming(storage, root_label(table.root()), instant).await?;
    if !pins.is_empty() {
        let clones: Vec<String> = pins
            .iter()
            .map(|p| format!("{} at {}", p.clone_id, p.location))
            .collect();
        return Err(CleanerError::refused(
            format!("delete savepoint {instant}"),
            format!(
                "clone(s) {} read this snapshot (see `arbor clone list`); detach or forget \
                 them first",
                clones.join(", ")
            ),
        ));
    }
    let mut layouts = vec![table.layout().clone()];
    if let Some(l) = mdt_layout(storage).await? {
        layouts.push(l);
    }
    let mut any = false;
    for layout in &layouts {
        let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
        let Some(files) = tl.get(instant, Action::Savepoint).cloned() else {
            continue;
        };
        any = true;
        for inst in [files.completed, files.inflight].into_iter().flatten() {
            storage.delete(&layout.instant_key(&inst)?).await?;
        }
    }
    if any {
        Ok(())
    } else {
        Err(CleanerError::refused(
            format!("delete savepoint {instant}"),
            "no such savepoint",
        ))
    }
}
