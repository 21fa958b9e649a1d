//! [`Table`] and its [`TableContext`]: everything a handle knows about its table (storage,
//! metadata root, config, layout, lock provider, instant time generator, write options, data
//! schema), and the checks every transaction runs against it (main moved, restore pending,
//! branch).

use std::sync::Arc;

use arbor_storage::{LockProvider, ObjectStoreLockProvider, Storage};
use arbor_timeline::avro::{decode_instant, InstantContent};
use arbor_timeline::config::{RecordMergeMode, TableType};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{
    resolve_main, Action, ActiveTimeline, InstantTimeGenerator, MetaRoot, State, TableConfig,
    TableLayout,
};

use super::writable;
use crate::error::{Result, TableError};
use crate::read::{MergeMode, TableReader};
use crate::write::mdt_sync;
use crate::write::options::WriteOptions;
use crate::write::schema::DataSchema;

/// The state of one table handle. Cloning copies it (the generator and lock provider are
/// shared).
#[derive(Debug, Clone)]
pub(crate) struct TableContext {
    /// The table as [`TableContext::root`] sees it ([`MetaRoot::view`]): the metadata root's
    /// `.hoodie` over the table's data files.
    pub(crate) storage: Arc<dyn Storage>,
    /// The table's own storage at its base path, shared by every metadata root.
    pub(crate) root_storage: Arc<dyn Storage>,
    /// The metadata root this handle reads and writes.
    pub(crate) root: MetaRoot,
    /// Opened as main: every state change first checks (under the lock) that main still
    /// resolves to `root`, so no write lands in metadata a publication has replaced.
    pub(crate) follows_main: bool,
    pub(crate) config: TableConfig,
    /// `None`: the object-store lock under `.hoodie/.locks` of the root's view.
    pub(crate) lock: Option<Arc<dyn LockProvider>>,
    pub(crate) options: WriteOptions,
    pub(crate) generator: Arc<InstantTimeGenerator>,
    pub(crate) schema: DataSchema,
    pub(crate) layout: TableLayout,
}

/// A Hudi table opened for writing: main (resolved as RFC-116 says) or one metadata root, such
/// as a working branch ([`Table::open_at`]).
///
/// Cloning is cheap; clones share the instant time generator. Several handles (in one process
/// or many, on any branch) may write concurrently: the table lock, the table-wide instant clock
/// and the conflict check keep commits consistent (protocol: [`crate::txn`]).
#[derive(Debug, Clone)]
pub struct Table {
    pub(crate) ctx: TableContext,
}

/// An `InvalidInput` error without a row.
pub(crate) fn invalid(column: Option<&str>, reason: impl Into<String>) -> TableError {
    TableError::InvalidInput {
        column: column.map(str::to_string),
        row: None,
        reason: reason.into(),
    }
}

/// Writes and table services wait for an interrupted restore to be finished: the restore rolls
/// back a planned list of instants, and a write landing in between could be lost or half
/// rolled back.
pub(crate) fn refuse_during_restore(tl: &ActiveTimeline) -> Result<()> {
    match tl
        .filter(&[Action::Restore], &[State::Requested, State::Inflight])
        .first()
    {
        Some(r) => Err(TableError::Unsupported {
            reason: format!(
                "restore {} is pending; finish it (arbor restore) before writing",
                r.requested_time
            ),
        }),
        None => Ok(()),
    }
}

/// The merge mode and ordering field a table's config says writers and readers use.
pub(crate) fn merge_of(config: &TableConfig) -> Result<(MergeMode, Option<String>)> {
    let ordering = config.ordering_fields().into_iter().next();
    let mode = match config.record_merge_mode()? {
        Some(RecordMergeMode::EventTimeOrdering) => MergeMode::EventTime,
        Some(RecordMergeMode::CommitTimeOrdering) => MergeMode::CommitTime,
        Some(RecordMergeMode::Custom) => {
            return Err(TableError::Unsupported {
                reason: "writing tables with merge mode CUSTOM".into(),
            })
        }
        None if ordering.is_some() => MergeMode::EventTime,
        None => MergeMode::CommitTime,
    };
    Ok((mode, ordering))
}

impl TableContext {
    /// The context of metadata root `root` of the table at `root_storage` (table versions 8
    /// and 9; a version 6 table, and merge settings arbor does not apply, are refused as
    /// [`super::writable`] says; not following
    /// main).
    pub(crate) async fn open_at(root_storage: Arc<dyn Storage>, root: MetaRoot) -> Result<Self> {
        let storage = root.view(root_storage.clone());
        let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
        writable::refuse_unwritable_version(&config)?;
        writable::refuse_unsupported_merge_config(&config)?;
        // Writers keep every metadata partition in step with each commit; refuse tables with
        // partitions arbor does not maintain.
        mdt_sync::check_supported(&config)?;
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
        let schema = load_schema(&storage, &config, &layout).await?;
        let generator = Arc::new(InstantTimeGenerator::new());
        generator.share_clock(storage.clone());
        // A handle opened inside a locked step of the same table (another root the step
        // changes) commits through the step's gate too.
        if let Some(gate) = arbor_timeline::commit_point::current() {
            if gate.is_table(&root_storage) {
                gate.register(&storage, root.clone());
            }
        }
        Ok(TableContext {
            storage,
            root_storage,
            root,
            follows_main: false,
            config,
            lock: None,
            options: WriteOptions::default(),
            generator,
            schema,
            layout,
        })
    }

    /// The lock provider of the table lock.
    pub(crate) fn lock_provider(&self) -> Arc<dyn LockProvider> {
        match &self.lock {
            Some(l) => l.clone(),
            None => Arc::new(ObjectStoreLockProvider::for_table(self.storage.clone())),
        }
    }

    pub(crate) fn table_type(&self) -> TableType {
        self.config.table_type()
    }

    /// The timeline of this root, freshly loaded.
    pub(crate) async fn timeline(&self) -> Result<ActiveTimeline> {
        Ok(ActiveTimeline::load(self.storage.clone(), self.layout.clone()).await?)
    }

    /// For a context opened as main: fails with [`TableError::MainMoved`] when main now
    /// resolves to other metadata (a publication completed since the handle was opened).
    pub(crate) async fn ensure_still_main(&self) -> Result<()> {
        if !self.follows_main {
            return Ok(());
        }
        let now = resolve_main(self.root_storage.as_ref()).await?;
        if now != self.root {
            return Err(TableError::MainMoved {
                opened: self.root.to_string(),
                now: now.to_string(),
            });
        }
        self.sync_legacy_root(&now).await;
        Ok(())
    }

    /// When `main` (resolved under the table lock) is a publication, makes the root
    /// `hoodie.properties` files lead branch-unaware readers to it
    /// ([`arbor_timeline::legacy::sync_legacy_root`]: finishes a publication interrupted after
    /// `_SUCCESS`, mirrors main's property changes). A failure is logged, not returned: main's
    /// own state is unaffected and the next state change retries.
    async fn sync_legacy_root(&self, main: &MetaRoot) {
        if !matches!(main, MetaRoot::Publication(_)) {
            return;
        }
        if let Err(e) =
            arbor_timeline::legacy::sync_legacy_root(self.root_storage.as_ref(), main).await
        {
            tracing::warn!(error = %e, "root hoodie.properties not yet pointing at {main}");
        }
    }

    /// After a change of main's properties: mirrors them into the root files when main is a
    /// publication (see [`TableContext::sync_legacy_root`]).
    pub(crate) async fn mirror_properties(&self) -> Result<()> {
        let main = resolve_main(self.root_storage.as_ref()).await?;
        if main == self.root {
            self.sync_legacy_root(&main).await;
        }
        Ok(())
    }

    /// Table definitions (metadata table, indexes) are fixed across branches (RFC-116): they
    /// change only on main.
    pub(crate) fn refuse_on_branch(&self, what: &str) -> Result<()> {
        if let MetaRoot::Branch(b) = &self.root {
            return Err(TableError::Unsupported {
                reason: format!(
                    "{what} on working branch {b}: table definitions change only on main"
                ),
            });
        }
        Ok(())
    }
}

/// The data schema of a table: the latest completed write's `extraMetadata.schema`, else
/// `hoodie.table.create.schema`, else what readers resolve.
async fn load_schema(
    storage: &Arc<dyn Storage>,
    config: &TableConfig,
    layout: &TableLayout,
) -> Result<DataSchema> {
    let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    if let Some(schema) = latest_written_schema(&tl).await? {
        return Ok(schema);
    }
    if let Some(json) = config.get("hoodie.table.create.schema") {
        return DataSchema::from_avro_json(&json.replace("\\:", ":"));
    }
    let reader = TableReader::open_view(storage.clone()).await?;
    DataSchema::from_read_schema(config.name(), reader.schema())
}

/// The schema the latest completed write on `tl` recorded, if any does.
pub(crate) async fn latest_written_schema(tl: &ActiveTimeline) -> Result<Option<DataSchema>> {
    for instant in tl.completed_writes().iter().rev() {
        let bytes = tl.read(instant).await?;
        let key = tl.key_of(instant)?;
        let json = match decode_instant(instant, &bytes, &key, false)? {
            InstantContent::Commit(m) => m.schema().map(str::to_string),
            InstantContent::ReplaceCommit(m) => m.schema().map(str::to_string),
            _ => None,
        };
        if let Some(json) = json.filter(|s| !s.trim().is_empty()) {
            return DataSchema::from_avro_json(&json).map(Some);
        }
    }
    Ok(None)
}
