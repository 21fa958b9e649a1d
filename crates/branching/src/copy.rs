//! Copying one root's metadata into another root (branch creation and publication), in one
//! table's storage or from one table's storage into another's (shallow clones).
//!
//! What is copied (RFC-116 section 2, "maintained per branch"), on the data side:
//! `hoodie.properties`, the active timeline's **completed** instants (all their state files),
//! the archived timeline (LSM files and manifests) as it is, `.index_defs/`, `.schema/` and
//! `tags/`; on the MDT side: `hoodie.properties`, completed instants and the archived timeline.
//! Never copied: pending instants (no inherited runnable work), `.aux`, `.temp`, `.heartbeat`,
//! locks, `branch.json` and `_SUCCESS`. Data files and metadata-table base/log files are shared,
//! never copied, so the cost follows the number of metadata files, not of data files.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_mdt::MDT_META_DIR;
use arbor_storage::{Storage, StorageExt};
use arbor_timeline::layout::paths::{
    properties_key, tag_name_of, INDEX_DEFS_DIR, SCHEMA_DIR, TAGS_DIR,
};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{Action, ActiveTimeline, InstantTime, MetaRoot, TableConfig, TableLayout};

use crate::error::Result;

/// Directories copied whole (as the root sees them).
const WHOLE_DIRS: [&str; 2] = [INDEX_DEFS_DIR, SCHEMA_DIR];

/// What one copy takes.
#[derive(Debug, Clone)]
pub(crate) struct CopySpec {
    /// The source root.
    pub from: MetaRoot,
    /// The target root (a working branch or a publication, never main's root).
    pub to: MetaRoot,
    /// Keep only instants requested at or before this time (a branch from a tag).
    pub cut: Option<InstantTime>,
    /// Keep only savepoints at these times (`None`: every completed savepoint).
    pub savepoints: Option<BTreeSet<InstantTime>>,
    /// Keep only these tag names (`None`: every tag definition).
    pub tags: Option<BTreeSet<String>>,
    /// Leave the data-side `hoodie.properties` alone (a publication writes it first, to
    /// reserve its number).
    pub skip_data_properties: bool,
}

/// What a copy did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyStats {
    /// Objects copied.
    pub objects: usize,
    /// Instants copied (both sides).
    pub instants: usize,
}

/// Where a copy reads and writes: one table's storage (`copy`, server-side on object stores),
/// or two tables' storages (get from the source's, put into the target's).
#[derive(Clone)]
pub(crate) struct Endpoints {
    from: Arc<dyn Storage>,
    to: Arc<dyn Storage>,
    same: bool,
}

impl Endpoints {
    /// Both roots in `storage`.
    pub(crate) fn within(storage: &Arc<dyn Storage>) -> Self {
        Endpoints {
            from: storage.clone(),
            to: storage.clone(),
            same: true,
        }
    }

    /// The source root in `from` (a table's own storage, or a clone's `ClonedStorage`), the
    /// target root in `to` (another table's own storage).
    pub(crate) fn between(from: &Arc<dyn Storage>, to: &Arc<dyn Storage>) -> Self {
        Endpoints {
            from: from.clone(),
            to: to.clone(),
            same: false,
        }
    }

    /// Copies the object at real key `from` to real key `to`.
    async fn copy(&self, from: &str, to: &str) -> Result<()> {
        if self.same {
            self.from.copy(from, to).await?;
        } else {
            let (data, _) = self.from.get(from).await?;
            self.to.put(to, data).await?;
        }
        Ok(())
    }
}

/// Copies `spec.from`'s metadata into `spec.to` within one table's storage (see the module
/// doc). Objects are copied with the storage's `copy` (server-side on object stores).
pub(crate) async fn copy_root(storage: &Arc<dyn Storage>, spec: &CopySpec) -> Result<CopyStats> {
    copy_root_between(&Endpoints::within(storage), spec).await
}

/// Copies `spec.from`'s metadata (as `storage`'s source side shows it) into `spec.to` (in its
/// target side), as [`copy_root`] does. Every object is written with a plain `put`: a
/// repeated copy rewrites the same objects.
pub(crate) async fn copy_root_between(storage: &Endpoints, spec: &CopySpec) -> Result<CopyStats> {
    let view = spec.from.view(storage.from.clone());
    let mut stats = CopyStats::default();
    let config = TableConfig::load(view.as_ref(), DEFAULT_META_DIR).await?;
    let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
    if !spec.skip_data_properties {
        copy_one(storage, spec, &properties_key(DEFAULT_META_DIR)).await?;
        stats.objects += 1;
    }
    copy_timeline(storage, &view, spec, &layout, &mut stats).await?;
    for dir in WHOLE_DIRS {
        for o in view.list_all(dir).await? {
            if spec.cut.as_ref().is_some_and(|c| named_after(&o.key, c)) {
                continue;
            }
            copy_one(storage, spec, &o.key).await?;
            stats.objects += 1;
        }
    }
    for o in view.list_all(TAGS_DIR).await? {
        let stem = tag_name_of(&o.key);
        let keep = match (&spec.tags, stem) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(set), Some(s)) => set.contains(s),
        };
        if keep {
            copy_one(storage, spec, &o.key).await?;
            stats.objects += 1;
        }
    }
    let mdt_props = properties_key(MDT_META_DIR);
    if view.exists(&mdt_props).await? {
        let mdt_config = TableConfig::load(view.as_ref(), MDT_META_DIR).await?;
        let mdt_layout = TableLayout::from_config(MDT_META_DIR, &mdt_config)?;
        copy_one(storage, spec, &mdt_props).await?;
        stats.objects += 1;
        copy_timeline(storage, &view, spec, &mdt_layout, &mut stats).await?;
    }
    Ok(stats)
}

async fn copy_timeline(
    storage: &Endpoints,
    view: &Arc<dyn Storage>,
    spec: &CopySpec,
    layout: &TableLayout,
    stats: &mut CopyStats,
) -> Result<()> {
    let tl = ActiveTimeline::load(view.clone(), layout.clone()).await?;
    for ((time, action), files) in tl.instant_files() {
        if files.completed.is_none() {
            continue;
        }
        if spec.cut.as_ref().is_some_and(|c| time > c) {
            continue;
        }
        if *action == Action::Savepoint
            && spec.savepoints.as_ref().is_some_and(|s| !s.contains(time))
        {
            continue;
        }
        for inst in [&files.requested, &files.inflight, &files.completed]
            .into_iter()
            .flatten()
        {
            copy_one(storage, spec, &layout.instant_key(inst)?).await?;
            stats.objects += 1;
        }
        stats.instants += 1;
    }
    if let Some(history) = &layout.history_dir {
        for o in view.list_all(history).await? {
            copy_one(storage, spec, &o.key).await?;
            stats.objects += 1;
        }
    }
    Ok(())
}

/// True when the file name of `key` starts with an instant time later than `cut` (schema
/// history files are named by the instant that wrote them).
fn named_after(key: &str, cut: &InstantTime) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    name.get(..17)
        .and_then(|t| InstantTime::parse(t).ok())
        .is_some_and(|t| t > *cut)
}

/// Copies `from`'s savepoint at `time` (its instant files on the data timeline and, when
/// present, the MDT timeline) into `to`. Returns the number of objects copied.
pub(crate) async fn copy_savepoint(
    storage: &Arc<dyn Storage>,
    from: &MetaRoot,
    to: &MetaRoot,
    time: &InstantTime,
) -> Result<usize> {
    let view = from.view(storage.clone());
    let mut copied = 0;
    for dir in [DEFAULT_META_DIR, MDT_META_DIR] {
        if dir == MDT_META_DIR && !view.exists(&properties_key(dir)).await? {
            continue;
        }
        let config = TableConfig::load(view.as_ref(), dir).await?;
        let layout = TableLayout::from_config(dir, &config)?;
        let tl = ActiveTimeline::load(view.clone(), layout.clone()).await?;
        let Some(files) = tl.get(time, Action::Savepoint) else {
            continue;
        };
        for inst in [&files.requested, &files.inflight, &files.completed]
            .into_iter()
            .flatten()
        {
            copy_key(storage, from, to, &layout.instant_key(inst)?).await?;
            copied += 1;
        }
    }
    Ok(copied)
}

/// Copies the object `from` sees at `key` to where `to` sees `key`.
pub(crate) async fn copy_key(
    storage: &Arc<dyn Storage>,
    from: &MetaRoot,
    to: &MetaRoot,
    key: &str,
) -> Result<()> {
    storage.copy(&from.real_key(key), &to.real_key(key)).await?;
    Ok(())
}

/// Copies the object the source root sees at `key` to where the target root sees `key`.
async fn copy_one(storage: &Endpoints, spec: &CopySpec, key: &str) -> Result<()> {
    storage
        .copy(&spec.from.real_key(key), &spec.to.real_key(key))
        .await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn test_named_after_compares_the_leading_instant() {
        let cut = InstantTime::parse("20240101000000000").unwrap();
        assert!(named_after(
            ".hoodie/.schema/20240101000000001.schemacommit",
            &cut
        ));
        assert!(!named_after(
            ".hoodie/.schema/20240101000000000.schemacommit",
            &cut
        ));
        assert!(!named_after(".hoodie/.schema/20231231000000000", &cut));
        assert!(!named_after(".hoodie/.index_defs/index.json", &cut));
    }
}
