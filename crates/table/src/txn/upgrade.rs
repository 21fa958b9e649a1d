//! `arbor upgrade`: a table of version 6 (Hudi 0.x, timeline layout 1) or 8 brought to version
//! 8 or 9 as Java Hudi's upgrade path does (`SevenToEightUpgradeHandler`,
//! `EightToNineUpgradeHandler`), under the table lock, crash-safe.
//!
//! # 6 -> 8 or 9: the order of storage operations
//!
//! 1. (read only) the current `hoodie.properties`; the 0.x archived timeline (a non-empty one
//!    is refused, nothing written); pending compactions (refused: version 6 appends log files
//!    named with a pending compaction's instant, which layout 2 would not attach); the layout-1 instant files converted in memory
//!    ([`arbor_timeline::upgrade::plan_layout2_timeline`]: completion time = the file's
//!    modification time, as Java; JSON commit metadata re-encoded as Avro);
//! 2. the layout-2 files written below `.hoodie/timeline/` (overwriting, strays of an earlier
//!    attempt deleted). Version-6 readers (arbor, hudi-rs, Java 0.x) list only the files
//!    directly in `.hoodie/`, so the table still reads as version 6;
//! 3. **the switch**: `hoodie.properties` replaced atomically
//!    ([`TableConfig::update`]: backup, compare-and-swap, read back) by the upgraded one. A
//!    table with a metadata table also loses `hoodie.table.metadata.partitions` here, so no
//!    reader uses the (version-6) metadata table any more. From here the table reads as
//!    upgraded: layout-2 readers list only `.hoodie/timeline/`;
//! 4. the old metadata table deleted (`.hoodie/metadata/`), then the layout-1 instant files
//!    directly in `.hoodie/` deleted. Neither is read by anyone once step 3 is done.
//!
//! A crash before step 3 leaves version 6 (plus unread files below `.hoodie/timeline/`); a
//! crash after it leaves the upgraded table (plus unread leftovers). Running the upgrade again
//! finishes either: before the switch it redoes steps 1-4 (step 2 rewrites the same bytes:
//! the modification times it reads are those of the untouched layout-1 files); after it, the
//! table is at the target and only step 4's leftovers are removed.
//!
//! # The metadata table
//!
//! A version-6 metadata table is **dropped**, not converted: its timeline and records are in
//! 0.x formats arbor does not write. `hoodie.table.metadata.partitions` is cleared at the
//! switch and the directory removed after it; `arbor mdt init` rebuilds it from storage.
//!
//! # 8 -> 9
//!
//! Index definitions without a version get `V1` (Java's `populateIndexVersionIfMissing`; a
//! version-9 reader takes a secondary index without one for V2, which hashes differently),
//! the metadata table's `hoodie.properties` (when present) is set to version 9 (Java's
//! `updateMetadataTableVersion`), then the data table's is replaced by the upgraded one (one
//! atomic replacement each; version-8 readers ignore the index version). A crash in between leaves a version-8 table whose metadata table
//! says 9; the retry finishes. Java's 8 -> 9 also rolls back failed writes and compacts
//! merge-on-read tables first; arbor does neither (the next write rolls back failed writes).

use std::sync::Arc;

use arbor_storage::{LockProvider, Storage, StorageExt};
use arbor_timeline::config::keys;
use arbor_timeline::layout::{paths, DEFAULT_META_DIR};
use arbor_timeline::upgrade::{
    layout1_instant_keys, legacy_archive_keys, plan_layout2_timeline, remove_layout1_instants,
    upgraded_config, write_layout2_timeline,
};
use arbor_timeline::{
    Action, InstantTimeGenerator, MetaRoot, State, TableConfig, TableLayout, TimelineError,
};

use super::context::{Table, TableContext};
use super::transaction::{Entry, Transaction};
use crate::error::{Result, TableError};
use crate::write::options::WriteOptions;
use crate::write::schema::DataSchema;

/// The versions `arbor upgrade` can bring a table to.
pub const UPGRADE_TARGETS: [u32; 2] = [8, 9];

/// What an upgrade did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeReport {
    /// The table version before (as read under the lock).
    pub from: u32,
    /// The table version after.
    pub to: u32,
    /// False when the table was already at the target: nothing but leftovers of an
    /// interrupted upgrade (and the properties of [`TableUpgrade::with_properties`] it lacked)
    /// was changed.
    pub upgraded: bool,
    /// Properties of [`TableUpgrade::with_properties`] the table did not have and now has.
    pub properties_added: usize,
    /// Instant files rewritten in layout 2.
    pub instants_converted: usize,
    /// Layout-1 instant files removed (this run's, or an interrupted run's leftovers).
    pub old_files_removed: usize,
    /// The metadata table partitions dropped (a version-6 metadata table; `arbor mdt init`
    /// rebuilds it); empty when there was none.
    pub mdt_partitions_dropped: Vec<String>,
    /// A leftover version-6 metadata table directory was removed.
    pub mdt_removed: bool,
    /// The metadata table's `hoodie.properties` was set to the target version (8 -> 9).
    pub mdt_version_updated: bool,
    /// Index definitions given `"version": "V1"` (8 -> 9, Java's
    /// `populateIndexVersionIfMissing`: version 9 readers assume V2 for a secondary index
    /// without one).
    pub index_versions_set: usize,
}

/// A handle for upgrading the table at `storage` (any version arbor reads; no other state
/// change runs on it). Opens main's root metadata; tables with branches or publications
/// are refused (`Unsupported`), since their metadata roots would stay at the old version.
#[derive(Debug, Clone)]
pub struct TableUpgrade {
    table: Table,
    /// Key-generator properties to add (see [`TableUpgrade::with_properties`]).
    added: Vec<(String, String)>,
}

/// The prefix of the properties [`TableUpgrade::with_properties`] may add: the key-generator
/// settings Hudi 0.x used at write time but did not persist in `hoodie.properties`.
pub const ADDABLE_PROPERTY_PREFIX: &str = "hoodie.keygen.";

impl TableUpgrade {
    /// Opens the table for [`TableUpgrade::run`]. Errors: not a table, an unreadable
    /// `hoodie.properties`, a table with branches or publications.
    pub async fn open(storage: Arc<dyn Storage>) -> Result<TableUpgrade> {
        let (objects, dirs) = storage.list_dir(paths::BRANCHES_DIR).await?;
        if !objects.is_empty() || !dirs.is_empty() {
            return Err(TableError::Unsupported {
                reason: format!(
                    "the table has branches or publications ({}); arbor upgrades only tables \
                     without them",
                    paths::BRANCHES_DIR
                ),
            });
        }
        let root = MetaRoot::Root;
        let view = root.view(storage.clone());
        let config = TableConfig::load(view.as_ref(), DEFAULT_META_DIR).await?;
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
        let generator = Arc::new(InstantTimeGenerator::new());
        let ctx = TableContext {
            storage: view,
            root_storage: storage,
            root,
            follows_main: false,
            config,
            lock: None,
            options: WriteOptions::default(),
            generator,
            // Never used: an upgrade writes no data.
            schema: DataSchema {
                arrow: Arc::new(arrow::datatypes::Schema::empty()),
                avro_json: String::new(),
            },
            layout,
        };
        Ok(TableUpgrade {
            table: Table { ctx },
            added: Vec::new(),
        })
    }

    /// Adds `properties` to `hoodie.properties` with the upgrade (in the same atomic switch), or,
    /// on a table already at the target version, on their own. Only `hoodie.keygen.*` keys
    /// (the key-generator settings Hudi 0.x used but did not persist, e.g.
    /// `hoodie.keygen.timebased.timestamp.type`) are accepted, and never to change a value the
    /// table already has: [`TableUpgrade::run`] fails with `InvalidInput`, before writing
    /// anything, on another key or a conflicting value.
    pub fn with_properties(mut self, properties: Vec<(String, String)>) -> Self {
        self.added = properties;
        self
    }

    /// Uses `lock` as the table lock (default: the object-store lock under `.hoodie/.locks`).
    pub fn with_lock_provider(mut self, lock: Arc<dyn LockProvider>) -> Self {
        self.table.ctx.lock = Some(lock);
        self
    }

    /// Waits at most `timeout` for the table lock (default 120 s).
    pub fn with_lock_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.table.ctx.options.lock_timeout = timeout;
        self
    }

    /// The table config as opened.
    pub fn config(&self) -> &TableConfig {
        &self.table.ctx.config
    }

    /// The table's storage at its base path.
    pub fn table_storage(&self) -> &Arc<dyn Storage> {
        &self.table.ctx.root_storage
    }

    /// Upgrades the table to version `to` (8 or 9) under the table lock (module doc for the
    /// order of storage operations and what a crash leaves). A table already at `to` is left
    /// as it is, except for the leftovers of an interrupted upgrade, which are removed
    /// (`upgraded == false`).
    ///
    /// Errors before anything is written: `InvalidInput` for a target other than 8 or 9;
    /// `Timeline(Upgrade)` for a downgrade (the table's version is above `to`), for a
    /// version-6 table whose 0.x archived timeline is not empty (not converted yet: upgrade
    /// such a table with Hudi 1.x) and for one with a pending compaction; `Timeline(Decode)`
    /// for an instant file it cannot convert. Lock and storage failures may come at any step;
    /// the table then reads as before or after and a new run completes the upgrade.
    pub async fn run(&self, to: u32) -> Result<UpgradeReport> {
        if !UPGRADE_TARGETS.contains(&to) {
            return Err(TableError::InvalidInput {
                column: None,
                row: None,
                reason: format!("arbor upgrades tables to version 8 or 9, not {to}"),
            });
        }
        check_added(&self.table.ctx.config, &self.added)?;
        let added = self.added.clone();
        Transaction::run(&self.table, Entry::Service, move |txn| {
            upgrade_locked(txn, to, added)
        })
        .await
    }
}

/// The locked step of [`TableUpgrade::run`].
async fn upgrade_locked(
    txn: Transaction<'_>,
    to: u32,
    added: Vec<(String, String)>,
) -> Result<UpgradeReport> {
    let storage = txn.view_storage().clone();
    let s = storage.as_ref();
    // The config as it is now (under the lock), after repairing an interrupted replacement.
    TableConfig::recover(s, DEFAULT_META_DIR).await?;
    let config = TableConfig::load(s, DEFAULT_META_DIR).await?;
    let from = config.version().code();
    let mut report = UpgradeReport {
        from,
        to,
        upgraded: false,
        properties_added: 0,
        instants_converted: 0,
        old_files_removed: 0,
        mdt_partitions_dropped: Vec::new(),
        mdt_removed: false,
        mdt_version_updated: false,
        index_versions_set: 0,
    };
    if from > to {
        return Err(TimelineError::Upgrade {
            path: paths::properties_key(DEFAULT_META_DIR),
            reason: format!(
                "the table is version {from}; arbor does not downgrade tables (asked for {to})"
            ),
        }
        .into());
    }
    check_added(&config, &added)?;
    if from == to {
        finish_leftovers(s, &config, &mut report).await?;
        let missing: Vec<&(String, String)> = added
            .iter()
            .filter(|(k, _)| config.get(k).is_none())
            .collect();
        if !missing.is_empty() {
            TableConfig::update(s, DEFAULT_META_DIR, |c| {
                for (k, v) in &missing {
                    c.set(k, v.clone())?;
                }
                Ok(())
            })
            .await?;
            report.properties_added = missing.len();
        }
        return Ok(report);
    }
    report.properties_added = added
        .iter()
        .filter(|(k, _)| config.get(k).is_none())
        .count();
    match from {
        6 => upgrade_from_six(&storage, &config, to, &added, &mut report).await?,
        8 => upgrade_eight_to_nine(s, &config, &added, &mut report).await?,
        v => {
            return Err(TimelineError::Upgrade {
                path: paths::properties_key(DEFAULT_META_DIR),
                reason: format!("arbor upgrades table versions 6 and 8, not {v}"),
            }
            .into())
        }
    }
    report.upgraded = true;
    Ok(report)
}

/// 6 -> 8 or 9, steps 1-4 of the module doc.
async fn upgrade_from_six(
    storage: &Arc<dyn Storage>,
    config: &TableConfig,
    to: u32,
    added: &[(String, String)],
    report: &mut UpgradeReport,
) -> Result<()> {
    let s = storage.as_ref();
    let folder = config.get(keys::ARCHIVELOG_FOLDER).unwrap_or("archived");
    let archived = legacy_archive_keys(s, DEFAULT_META_DIR, folder).await?;
    if let Some(first) = archived.first() {
        return Err(TimelineError::Upgrade {
            path: first.clone(),
            reason: format!(
                "the 0.x archived timeline holds {} file(s); arbor does not convert archived \
                 timelines yet (nothing was changed)",
                archived.len()
            ),
        }
        .into());
    }
    refuse_pending_compactions(storage).await?;
    // 1-2: the layout-2 timeline beside the layout-1 one.
    let plan = plan_layout2_timeline(s, DEFAULT_META_DIR, config.timeline_timezone()).await?;
    write_layout2_timeline(s, DEFAULT_META_DIR, &plan).await?;
    report.instants_converted = plan.len();
    // 3: the switch.
    let mut next = upgraded_config(config, 6, to)?;
    for (k, v) in added {
        next.set(k, v.clone())?;
    }
    let mdt_partitions = config.metadata_partitions();
    let mdt_present = s
        .exists(&paths::properties_key(paths::MDT_META_DIR))
        .await?;
    if !mdt_partitions.is_empty() || !config.metadata_partitions_inflight().is_empty() {
        next.remove(keys::METADATA_PARTITIONS)?;
        next.remove(keys::METADATA_PARTITIONS_INFLIGHT)?;
    }
    TableConfig::update(s, DEFAULT_META_DIR, |c| {
        *c = next.clone();
        Ok(())
    })
    .await?;
    report.mdt_partitions_dropped = mdt_partitions;
    // 4: what nobody reads any more.
    if mdt_present {
        remove_mdt(s).await?;
        report.mdt_removed = true;
    }
    report.old_files_removed = remove_layout1_instants(s, DEFAULT_META_DIR).await?;
    Ok(())
}

/// Refuses properties [`TableUpgrade::with_properties`] may not add: a key outside
/// [`ADDABLE_PROPERTY_PREFIX`], or one the table already has with another value.
fn check_added(config: &TableConfig, added: &[(String, String)]) -> Result<()> {
    for (k, v) in added {
        let reason = if !k.starts_with(ADDABLE_PROPERTY_PREFIX) {
            format!(
                "--set {k}: arbor upgrade adds only key-generator settings \
                 ({ADDABLE_PROPERTY_PREFIX}*) that Hudi 0.x did not persist"
            )
        } else if v.trim().is_empty() {
            format!("--set {k}: the value is empty")
        } else {
            match config.get(k) {
                Some(old) if old != v => format!(
                    "--set {k}={v}: the table already has {k}={old}; arbor upgrade never \
                     changes a stored setting"
                ),
                _ => continue,
            }
        };
        return Err(TableError::InvalidInput {
            column: None,
            row: None,
            reason,
        });
    }
    Ok(())
}

/// Refuses a version-6 table with a pending compaction or log compaction. Version 6 appends
/// committed deltacommits to log files named with a pending compaction's instant; layout 2
/// attaches log files by the completion time of the instant in their name, which such a
/// compaction does not have, so their records would be lost to readers.
async fn refuse_pending_compactions(storage: &Arc<dyn Storage>) -> Result<()> {
    let tl =
        arbor_timeline::ActiveTimeline::load(storage.clone(), TableLayout::v1(DEFAULT_META_DIR))
            .await?;
    let pending: Vec<String> = tl
        .filter(
            &[Action::Compaction, Action::LogCompaction],
            &[State::Requested, State::Inflight],
        )
        .iter()
        .map(|i| i.to_string())
        .collect();
    if let Some(first) = pending.first() {
        return Err(TimelineError::Upgrade {
            path: format!("{DEFAULT_META_DIR}/{first}"),
            reason: format!(
                "the table has pending compaction(s) ({}); complete them with Hudi 0.x first \
                 (their log files would be invisible in timeline layout 2); nothing was changed",
                pending.join(", ")
            ),
        }
        .into());
    }
    Ok(())
}

/// 8 -> 9: the metadata table's version first, then the data table's properties.
async fn upgrade_eight_to_nine(
    s: &dyn Storage,
    config: &TableConfig,
    added: &[(String, String)],
    report: &mut UpgradeReport,
) -> Result<()> {
    let mut next = upgraded_config(config, 8, 9)?;
    for (k, v) in added {
        next.set(k, v.clone())?;
    }
    report.index_versions_set = populate_index_versions(s, config).await?;
    if s.exists(&paths::properties_key(paths::MDT_META_DIR))
        .await?
    {
        let mdt = TableConfig::load(s, paths::MDT_META_DIR).await?;
        if mdt.version().code() != 9 {
            TableConfig::update(s, paths::MDT_META_DIR, |c| c.set(keys::VERSION, "9")).await?;
            report.mdt_version_updated = true;
        }
    }
    TableConfig::update(s, DEFAULT_META_DIR, |c| {
        *c = next.clone();
        Ok(())
    })
    .await?;
    Ok(())
}

/// Gives every index definition without a version `"version": "V1"` in the index definitions
/// file (`hoodie.table.index.defs.path`, when the table has one), as Java's 8 -> 9 upgrade
/// does before it changes the table properties. Returns how many definitions changed; the
/// file is rewritten only when one did. Errors: the file is not the JSON object Hudi writes.
async fn populate_index_versions(s: &dyn Storage, config: &TableConfig) -> Result<usize> {
    let Some(key) = config
        .get(arbor_timeline::legacy::INDEX_DEFS_PATH_KEY)
        .map(|k| k.trim().trim_start_matches('/').to_string())
        .filter(|k| !k.is_empty())
    else {
        return Ok(0);
    };
    let Some((bytes, _)) = s.get_opt(&key).await? else {
        return Ok(0);
    };
    let bad = |reason: String| TimelineError::Upgrade {
        path: key.clone(),
        reason,
    };
    let mut doc: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
    let defs = doc
        .get_mut("indexDefinitions")
        .and_then(|d| d.as_object_mut())
        .ok_or_else(|| bad("no \"indexDefinitions\" object".to_string()))?;
    let mut changed = 0;
    for (name, def) in defs.iter_mut() {
        let def = def
            .as_object_mut()
            .ok_or_else(|| bad(format!("index definition {name:?} is not an object")))?;
        if def.get("version").is_none_or(|v| v.is_null()) {
            def.insert("version".to_string(), serde_json::Value::from("V1"));
            changed += 1;
        }
    }
    if changed > 0 {
        let text =
            serde_json::to_vec_pretty(&doc).map_err(|e| bad(format!("cannot render: {e}")))?;
        s.put(&key, bytes::Bytes::from(text)).await?;
    }
    Ok(changed)
}

/// A table at the target version: removes what an interrupted upgrade from version 6 left
/// (layout-1 instant files directly in `.hoodie/`, a version-6 metadata table no longer listed
/// in `hoodie.table.metadata.partitions`), and sets a metadata table still at 8 to 9.
async fn finish_leftovers(
    s: &dyn Storage,
    config: &TableConfig,
    report: &mut UpgradeReport,
) -> Result<()> {
    let from_six = config.get(keys::INITIAL_VERSION).map(str::trim) == Some("6");
    if from_six && config.metadata_partitions().is_empty() {
        if let Ok(mdt) = TableConfig::load(s, paths::MDT_META_DIR).await {
            if mdt.version().code() == 6 {
                remove_mdt(s).await?;
                report.mdt_removed = true;
            }
        }
    }
    if config.version().code() >= 8 && !layout1_instant_keys(s, DEFAULT_META_DIR).await?.is_empty()
    {
        report.old_files_removed = remove_layout1_instants(s, DEFAULT_META_DIR).await?;
    }
    if config.version().code() == 9 {
        if let Ok(mdt) = TableConfig::load(s, paths::MDT_META_DIR).await {
            if mdt.version().code() == 8 {
                TableConfig::update(s, paths::MDT_META_DIR, |c| c.set(keys::VERSION, "9")).await?;
                report.mdt_version_updated = true;
            }
        }
    }
    Ok(())
}

/// Deletes every file of the metadata table (`.hoodie/metadata/`), its `hoodie.properties`
/// last, so an interrupted removal still shows a metadata table to remove.
async fn remove_mdt(s: &dyn Storage) -> Result<()> {
    let props = paths::properties_key(paths::MDT_META_DIR);
    let keys: Vec<String> = s
        .list_all(paths::MDT_BASE)
        .await?
        .into_iter()
        .map(|o| o.key)
        .filter(|k| *k != props)
        .collect();
    if !keys.is_empty() {
        s.delete_all(&keys).await?;
    }
    if s.exists(&props).await? {
        s.delete(&props).await?;
    }
    Ok(())
}
