//! The root `hoodie.properties` files of a published table, which lead readers and writers that
//! know nothing of branches (hudi-rs, Java Hudi) to main.
//!
//! Such a reader opens `.hoodie/hoodie.properties` and, for the metadata table,
//! `.hoodie/metadata/.hoodie/hoodie.properties`, and finds each timeline in the directory named
//! by `hoodie.timeline.path` (relative to that meta directory; the archived timeline in
//! `hoodie.timeline.history.path` below it). Once main is publication `p<N>`, the root files
//! therefore hold **main's properties with the timeline path redirected** into `p<N>`:
//! `hoodie.timeline.path=branches/publications/p<N>/timeline` on both sides, and an index
//! definitions path (`hoodie.table.index.defs.path`) below `.hoodie/` mapped to `p<N>`'s copy.
//! Every later write to main lands in `p<N>`'s timelines, where legacy readers look. The
//! table checksum depends only on the database and table name, so it is unchanged.
//!
//! [`sync_legacy_root`] brings the root files to that state, each by the atomic replacement of
//! [`TableConfig::update`] (backup, compare-and-swap, read back, backup removed), **MDT side
//! first, data side last**. A legacy reader reading at any point (or after a crash) gets:
//! - both files old: main as it was before the publication;
//! - MDT side new, data side old: the old data timeline with the new MDT timeline; the MDT's
//!   FILES partition then also lists files of the new main's writes, but their instants are not
//!   completed on the old data timeline, so readers treat them as uncommitted (hudi-rs filters
//!   uncommitted files of layout-2 timelines; Java additionally ignores MDT log blocks whose
//!   data instant is not completed): the old main. (The one exception is a replacecommit table
//!   service that main ran after the branch's base and that the branch does not have: the old
//!   data timeline replaces file groups whose replacements the new FILES partition does not
//!   list; see docs/branches.md.)
//! - both new: main as published.
//!
//! The reverse order would be wrong more often: the new data timeline with the old FILES
//! partition commits every branch write without listing its files.

use std::collections::BTreeMap;

use arbor_storage::{Storage, StorageExt};

use crate::config::{keys, TableConfig};
use crate::error::{Result, TimelineError};
use crate::layout::DEFAULT_META_DIR;
use crate::metaroot::{MetaRoot, MDT_ROOT_META_DIR};

/// The property holding the index definitions file, relative to the table base.
pub const INDEX_DEFS_PATH_KEY: &str = "hoodie.table.index.defs.path";

/// Which side of the table a `hoodie.properties` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The data table (`.hoodie/`).
    Data,
    /// The metadata table (`.hoodie/metadata/.hoodie/`).
    Mdt,
}

impl Side {
    /// The root meta directory of this side.
    pub fn root_meta_dir(self) -> &'static str {
        match self {
            Side::Data => DEFAULT_META_DIR,
            Side::Mdt => MDT_ROOT_META_DIR,
        }
    }

    /// `root`'s meta directory on this side, relative to the root meta directory (`""` for
    /// [`MetaRoot::Root`]).
    fn relative_dir(self, root: &MetaRoot) -> String {
        let dir = match self {
            Side::Data => root.data_meta_dir(),
            Side::Mdt => root.mdt_meta_dir(),
        };
        dir.strip_prefix(self.root_meta_dir())
            .map(|r| r.trim_start_matches('/').to_string())
            .unwrap_or_default()
    }
}

/// The root `hoodie.properties` of one side that leads legacy readers to `main`: `main_config`
/// (main's own config of that side) with `hoodie.timeline.path` prefixed by main's meta
/// directory relative to the root one, and (data side) a `hoodie.table.index.defs.path` below
/// `.hoodie/` mapped into main's metadata. For [`MetaRoot::Root`] the config is returned as it
/// is. Pure: no I/O.
pub fn legacy_root_config(
    main_config: &TableConfig,
    main: &MetaRoot,
    side: Side,
) -> Result<TableConfig> {
    let rel = side.relative_dir(main);
    if rel.is_empty() {
        return Ok(main_config.clone());
    }
    let mut out = main_config.clone();
    out.set(
        keys::TIMELINE_PATH,
        format!("{rel}/{}", main_config.timeline_path()),
    )?;
    if side == Side::Data {
        if let Some(defs) = main_config.get(INDEX_DEFS_PATH_KEY) {
            let defs = defs.trim();
            if defs.starts_with(&format!("{DEFAULT_META_DIR}/")) {
                out.set(INDEX_DEFS_PATH_KEY, main.real_key(defs))?;
            }
        }
    }
    Ok(out)
}

/// What [`sync_legacy_root`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LegacyRootSync {
    /// The root MDT `hoodie.properties` was replaced (or created).
    pub mdt: bool,
    /// The root data `hoodie.properties` was replaced.
    pub data: bool,
}

/// The key/value pairs of a config, order-insensitive, for comparison.
fn pairs(config: &TableConfig) -> BTreeMap<String, String> {
    config
        .properties()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Makes the root `hoodie.properties` files (MDT side first, data side last) lead legacy
/// readers to `main`, the root [`resolve_main`](crate::resolve_main) returned (the caller holds
/// the table lock, so main cannot move meanwhile). Idempotent: a file already as wanted is not
/// written, so a call after an interrupted one finishes its work. When the root data file is
/// already as wanted the call costs two reads and checks nothing else (the data side is
/// written last; arbor never changes main's MDT properties after creation). Nothing is done for
/// [`MetaRoot::Root`] (main's metadata is the root's own) or a working branch (never main).
///
/// Guarantees: each file is replaced atomically ([`TableConfig::update`], compare-and-swap on
/// the version read); the data side is written only once the MDT side is as wanted; a failure
/// leaves each file old or new (see the module doc for what legacy readers then read).
/// Errors: main's metadata unreadable, a root file that is neither a valid config nor
/// recoverable from its backup, storage failures, a concurrent change (`PreconditionFailed`).
pub async fn sync_legacy_root(storage: &dyn Storage, main: &MetaRoot) -> Result<LegacyRootSync> {
    let mut done = LegacyRootSync::default();
    if !matches!(main, MetaRoot::Publication(_)) {
        return Ok(done);
    }
    adopt_dropped_metadata_partitions(storage, main).await?;
    let data_wanted = legacy_root_config(
        &TableConfig::load(storage, &main.data_meta_dir()).await?,
        main,
        Side::Data,
    )?;
    // Fast path (two reads): the data side is written last, so when it is as wanted an
    // earlier call finished both sides.
    if matches!(
        TableConfig::load(storage, DEFAULT_META_DIR).await,
        Ok(current) if pairs(&current) == pairs(&data_wanted)
    ) {
        return Ok(done);
    }
    let main_mdt = main.mdt_meta_dir();
    if storage
        .exists(&format!("{main_mdt}/{}", crate::config::PROPERTIES_FILE))
        .await?
    {
        let wanted = legacy_root_config(
            &TableConfig::load(storage, &main_mdt).await?,
            main,
            Side::Mdt,
        )?;
        done.mdt = replace_root(storage, Side::Mdt, &wanted).await?;
    }
    done.data = replace_root(storage, Side::Data, &data_wanted).await?;
    Ok(done)
}

/// Java writes the root `hoodie.properties` of a published table as its own: a restore drops
/// metadata partitions there (Hudi 1.x `deleteMetadataTablePartition`: the name leaves
/// `hoodie.table.metadata.partitions`, the partition's directory is moved away), which main's
/// own config (`p<N>`'s) does not know. Mirroring main's list back would list a partition that
/// no longer exists (Spark then fails: "Number of file slices for partition partition_stats
/// should be > 0") and leave arbor writing half of an index.
///
/// So when the root already leads to `main` (its timeline path is main's) and no longer lists
/// a metadata partition main lists (completed or inflight) whose directory
/// (`.hoodie/metadata/<partition>`) is gone, main's config drops it too. A partition whose
/// directory is there stays: it is one arbor has just built and listed in main, not yet
/// mirrored to the root. A partition the root lists and main does not is never adopted (it
/// may be one arbor dropped, about to be mirrored).
///
/// Also run when main is opened ([`adopt_java_dropped_metadata_partitions`]), so that reads and
/// writes after Java's restore never use a partition Java dropped.
async fn adopt_dropped_metadata_partitions(storage: &dyn Storage, main: &MetaRoot) -> Result<()> {
    let main_dir = main.data_meta_dir();
    let main_config = TableConfig::load(storage, &main_dir).await?;
    let Ok(root) = TableConfig::load(storage, DEFAULT_META_DIR).await else {
        return Ok(());
    };
    let wanted = legacy_root_config(&main_config, main, Side::Data)?;
    if root.timeline_path() != wanted.timeline_path() {
        return Ok(());
    }
    let mut gone = Vec::new();
    let root_lists: Vec<String> = root
        .metadata_partitions()
        .into_iter()
        .chain(root.metadata_partitions_inflight())
        .collect();
    for p in main_config
        .metadata_partitions()
        .into_iter()
        .chain(main_config.metadata_partitions_inflight())
    {
        if root_lists.contains(&p) || p.contains('/') || p.is_empty() {
            continue;
        }
        let (objects, dirs) = storage
            .list_dir(&format!("{DEFAULT_META_DIR}/metadata/{p}"))
            .await?;
        if objects.is_empty() && dirs.is_empty() {
            gone.push(p);
        }
    }
    if gone.is_empty() {
        return Ok(());
    }
    TableConfig::update(storage, &main_dir, |c| {
        let keep = |list: Vec<String>| {
            list.into_iter()
                .filter(|p| !gone.contains(p))
                .collect::<Vec<_>>()
                .join(",")
        };
        let completed = keep(c.metadata_partitions());
        let inflight = keep(c.metadata_partitions_inflight());
        c.set(keys::METADATA_PARTITIONS, completed)?;
        c.set(keys::METADATA_PARTITIONS_INFLIGHT, inflight)?;
        Ok(())
    })
    .await?;
    Ok(())
}

/// When `main` is a publication, drops from its config the metadata partitions Java dropped
/// at the root (a restore's `deleteMetadataTablePartition`; the rule of
/// [`sync_legacy_root`]), so that a reader or writer opening main after Java's restore does
/// not use them. Costs one read of the root config when nothing was dropped; a no-op for any
/// other root. The change is a compare-and-swap of main's config, the same one the next state
/// change would make, so it is safe without the table lock.
pub async fn adopt_java_dropped_metadata_partitions(
    storage: &dyn Storage,
    main: &MetaRoot,
) -> Result<()> {
    if !matches!(main, MetaRoot::Publication(_)) {
        return Ok(());
    }
    adopt_dropped_metadata_partitions(storage, main).await
}

/// Replaces (or creates) the root config of `side` with `wanted` unless it already holds the
/// same properties. Returns whether it wrote.
async fn replace_root(storage: &dyn Storage, side: Side, wanted: &TableConfig) -> Result<bool> {
    let dir = side.root_meta_dir();
    match TableConfig::load(storage, dir).await {
        Ok(current) if pairs(&current) == pairs(wanted) => return Ok(false),
        Ok(_) => {}
        Err(TimelineError::NotATable { .. }) => {
            TableConfig::create(storage, dir, wanted).await?;
            return Ok(true);
        }
        Err(e) => return Err(e),
    }
    TableConfig::update(storage, dir, |c| {
        *c = wanted.clone();
        Ok(())
    })
    .await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use arbor_storage::{FaultInjectingStorage, FaultMode, ObjectStoreStorage};

    use super::*;
    use crate::config::TableType;
    use crate::layout::TableLayout;

    fn config(name: &str) -> TableConfig {
        TableConfig::new_v8(name, TableType::CopyOnWrite).unwrap()
    }

    #[test]
    fn test_legacy_root_config_redirects_timeline_and_index_defs() {
        let mut main = config("t");
        main.set(INDEX_DEFS_PATH_KEY, ".hoodie/.index_defs/index.json")
            .unwrap();
        main.set(keys::METADATA_PARTITIONS, "files,record_index")
            .unwrap();
        let p = MetaRoot::Publication(3);
        let data = legacy_root_config(&main, &p, Side::Data).unwrap();
        assert_eq!(data.timeline_path(), "branches/publications/p3/timeline");
        assert_eq!(data.history_path(), "history");
        assert_eq!(
            data.get(INDEX_DEFS_PATH_KEY),
            Some(".hoodie/branches/publications/p3/.index_defs/index.json")
        );
        assert_eq!(data.metadata_partitions(), main.metadata_partitions());
        assert_eq!(data.checksum(), main.checksum());
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &data).unwrap();
        assert_eq!(
            layout.timeline_dir,
            MetaRoot::Publication(3).real_key(".hoodie/timeline")
        );
        let mdt = legacy_root_config(&config("t_metadata"), &p, Side::Mdt).unwrap();
        let layout = TableLayout::from_config(MDT_ROOT_META_DIR, &mdt).unwrap();
        assert_eq!(
            layout.timeline_dir,
            ".hoodie/metadata/.hoodie/branches/publications/p3/timeline"
        );
        // Main's root: unchanged.
        assert_eq!(
            legacy_root_config(&main, &MetaRoot::Root, Side::Data).unwrap(),
            main
        );
    }

    async fn setup(s: &dyn Storage) {
        for dir in [
            ".hoodie",
            ".hoodie/branches/publications/p1",
            ".hoodie/metadata/.hoodie",
            ".hoodie/metadata/.hoodie/branches/publications/p1",
        ] {
            let name = if dir.contains("metadata") {
                "t_metadata"
            } else {
                "t"
            };
            TableConfig::create(s, dir, &config(name)).await.unwrap();
        }
    }

    #[tokio::test]
    async fn test_sync_legacy_root_points_both_sides_and_is_idempotent() {
        let s: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        setup(s.as_ref()).await;
        let p1 = MetaRoot::Publication(1);
        assert_eq!(
            sync_legacy_root(s.as_ref(), &MetaRoot::Root).await.unwrap(),
            LegacyRootSync::default()
        );
        let done = sync_legacy_root(s.as_ref(), &p1).await.unwrap();
        assert_eq!(
            done,
            LegacyRootSync {
                mdt: true,
                data: true
            }
        );
        for dir in [".hoodie", ".hoodie/metadata/.hoodie"] {
            let c = TableConfig::load(s.as_ref(), dir).await.unwrap();
            assert_eq!(c.timeline_path(), "branches/publications/p1/timeline");
            assert!(!s
                .exists(&format!("{dir}/hoodie.properties.backup"))
                .await
                .unwrap());
        }
        assert_eq!(
            sync_legacy_root(s.as_ref(), &p1).await.unwrap(),
            LegacyRootSync::default()
        );
        // A property change of main is mirrored (a partition arbor lists is built first).
        s.put(
            ".hoodie/metadata/files/files-0000-0_0-0-0_00000000000000000.hfile",
            bytes::Bytes::from_static(b"x"),
        )
        .await
        .unwrap();
        TableConfig::update(s.as_ref(), ".hoodie/branches/publications/p1", |c| {
            c.set(keys::METADATA_PARTITIONS, "files")
        })
        .await
        .unwrap();
        assert_eq!(
            sync_legacy_root(s.as_ref(), &p1).await.unwrap(),
            LegacyRootSync {
                mdt: false,
                data: true
            }
        );
        let c = TableConfig::load(s.as_ref(), ".hoodie").await.unwrap();
        assert_eq!(c.metadata_partitions(), vec!["files".to_string()]);
    }

    /// A metadata partition Java dropped from the root (a restore drops partition_stats) is
    /// dropped from main too, not listed again; one the root adds is not adopted.
    #[tokio::test]
    async fn test_sync_legacy_root_adopts_a_partition_java_dropped_at_the_root() {
        let s: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        setup(s.as_ref()).await;
        let p1 = MetaRoot::Publication(1);
        let main_dir = ".hoodie/branches/publications/p1";
        TableConfig::update(s.as_ref(), main_dir, |c| {
            c.set(
                keys::METADATA_PARTITIONS,
                "files,column_stats,partition_stats",
            )
        })
        .await
        .unwrap();
        for p in ["files", "column_stats", "partition_stats"] {
            s.put(
                &format!(".hoodie/metadata/{p}/{p}-0000-0_0-0-0_00000000000000000.hfile"),
                bytes::Bytes::from_static(b"x"),
            )
            .await
            .unwrap();
        }
        sync_legacy_root(s.as_ref(), &p1).await.unwrap();
        // Java's restore at the root: the partition unlisted, its directory moved away.
        TableConfig::update(s.as_ref(), ".hoodie", |c| {
            c.set(keys::METADATA_PARTITIONS, "files,column_stats")
        })
        .await
        .unwrap();
        // Not adopted while the directory is there (arbor's own partition, not yet mirrored).
        sync_legacy_root(s.as_ref(), &p1).await.unwrap();
        let c = TableConfig::load(s.as_ref(), main_dir).await.unwrap();
        assert_eq!(c.metadata_partitions().len(), 3);
        TableConfig::update(s.as_ref(), ".hoodie", |c| {
            c.set(keys::METADATA_PARTITIONS, "files,column_stats")
        })
        .await
        .unwrap();
        s.delete(
            ".hoodie/metadata/partition_stats/partition_stats-0000-0_0-0-0_00000000000000000.hfile",
        )
        .await
        .unwrap();
        sync_legacy_root(s.as_ref(), &p1).await.unwrap();
        for dir in [".hoodie", main_dir] {
            let c = TableConfig::load(s.as_ref(), dir).await.unwrap();
            assert_eq!(
                c.metadata_partitions(),
                vec!["files", "column_stats"],
                "{dir}"
            );
        }
        // A partition only the root lists (arbor's drop not yet mirrored): main's list wins.
        TableConfig::update(s.as_ref(), ".hoodie", |c| {
            c.set(keys::METADATA_PARTITIONS, "files,column_stats,record_index")
        })
        .await
        .unwrap();
        sync_legacy_root(s.as_ref(), &p1).await.unwrap();
        for dir in [".hoodie", main_dir] {
            let c = TableConfig::load(s.as_ref(), dir).await.unwrap();
            assert_eq!(
                c.metadata_partitions(),
                vec!["files", "column_stats"],
                "{dir}"
            );
        }
    }

    /// A crash at any storage operation leaves the data side old unless the MDT side is new,
    /// and the next call finishes.
    #[tokio::test]
    async fn test_sync_legacy_root_crash_sweep_mdt_before_data_and_retry_finishes() {
        let p1 = MetaRoot::Publication(1);
        let mut n = 0;
        let mut seen_mdt_only = false;
        loop {
            let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
            setup(inner.as_ref()).await;
            let faulty = FaultInjectingStorage::new(inner.clone());
            faulty.set_mode(FaultMode::CrashAt(n));
            let result = sync_legacy_root(&faulty, &p1).await;
            let path = |dir: &'static str| {
                let inner = inner.clone();
                async move {
                    TableConfig::load(inner.as_ref(), dir)
                        .await
                        .unwrap()
                        .timeline_path()
                        .to_string()
                }
            };
            let (data, mdt) = (
                path(".hoodie").await,
                path(".hoodie/metadata/.hoodie").await,
            );
            let new = "branches/publications/p1/timeline";
            assert!(
                data == "timeline" || mdt == new,
                "crash at {n}: {data} {mdt}"
            );
            seen_mdt_only |= data == "timeline" && mdt == new;
            sync_legacy_root(inner.as_ref(), &p1).await.unwrap();
            assert_eq!(path(".hoodie").await, new);
            assert_eq!(path(".hoodie/metadata/.hoodie").await, new);
            if result.is_ok() {
                break;
            }
            n += 1;
            assert!(n < 200);
        }
        assert!(seen_mdt_only && n > 4, "{n}");
    }
}
