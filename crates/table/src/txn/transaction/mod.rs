//! [`Transaction`]: one locked step of a state change, and the only code that takes the table
//! lock. Every operation runs its locked steps through [`Transaction::run`], which enters them
//! the same way (module doc of [`crate::txn`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use arbor_mdt::FilesDelta;
use arbor_storage::Storage;
use arbor_timeline::avro::WriteOperationType;
use arbor_timeline::avro::{encode_instant_for, HoodieRequestedReplaceMetadata, InstantContent};
use arbor_timeline::commit_point::{self, CommitGate};
use arbor_timeline::{
    Action, ActiveTimeline, Instant, InstantTime, InstantTimeGenerator, MetaRoot, TableConfig,
    TableLayout,
};
use bytes::Bytes;

use super::context::{refuse_during_restore, Table};
use crate::error::{Result, TableError};
use crate::write::commit::{self, Heartbeat};
use crate::write::options::WriteOptions;
use crate::write::{mdt_sync, rollback};

/// How a locked step is entered: what the transaction checks and repairs after taking the lock
/// and before the step's own work.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Entry<'i> {
    /// A new state change: main-moved check ([`TableError::MainMoved`]), then the rollback of
    /// failed writes (pending writes whose heartbeat lapsed) and of unfinished rollbacks.
    ///
    Begin,
    /// A table service that leaves pending writes alone (compaction): main-moved check only.
    Service,
    /// The commit of `instant`, started by an earlier [`Entry::Begin`] step: main-moved check;
    /// when main moved, `instant` can never complete there and is rolled back.
    Resume(&'i Instant),
    /// Removing this writer's own instant after a failure: the lock only.
    Abort,
}

/// A state change of one table in progress, holding the table lock (renewed while it runs).
///
/// A transaction exists only inside [`crate::Table::transact`] (or the crate's own
/// operations): when its work starts, the lock is held, main has been checked not to have moved
/// (for a handle opened as main), and failed writes of the handle's metadata root have been
/// rolled back. Its methods are the building blocks an operation (clean, restore, savepoint,
/// tag, branch, and the crate's own write, delete_partitions, compact, init_metadata_table,
/// create_index) uses for the changes it makes under the lock. It is `Copy`: it borrows the
/// handle.
#[derive(Debug, Clone, Copy)]
pub struct Transaction<'a> {
    table: &'a Table,
}

impl<'a> Transaction<'a> {
    /// Runs `work` as a locked step of `table`, entered as `entry` says; releases the lock
    /// afterwards. `work` must be safe to cancel at any await point: it is dropped if the lease
    /// cannot be renewed. The step's state lives on the heap (one allocation per step), so
    /// nesting steps in callers' futures does not grow their stack frames.
    pub(crate) fn run<'i, T, F, Fut>(
        table: &'a Table,
        entry: Entry<'i>,
        work: F,
    ) -> Pin<Box<impl Future<Output = Result<T>> + 'a>>
    where
        'i: 'a,
        T: 'a,
        F: FnOnce(Transaction<'a>) -> Fut + 'a,
        Fut: Future<Output = Result<T>> + 'a,
    {
        Box::pin(async move {
            let ctx = &table.ctx;
            let lock = ctx.lock_provider();
            commit::with_lock(lock, ctx.options.lock_timeout, async {
                // The step's commit points are conditional on the commit record it reads now
                // (`arbor_timeline::commit_point`); an unfinished commit is rolled forward first.
                let gate =
                    CommitGate::enter(ctx.root_storage.clone(), commit::held_token()).await?;
                gate.register(&ctx.storage, ctx.root.clone());
                commit_point::scope(gate, Self::enter_and_work(table, entry, work)).await
            })
            .await
        })
    }

    /// The checks and repairs of `entry`, then `work`, under the lock and the step's gate.
    async fn enter_and_work<'i, T, F, Fut>(table: &'a Table, entry: Entry<'i>, work: F) -> Result<T>
    where
        F: FnOnce(Transaction<'a>) -> Fut + 'a,
        Fut: Future<Output = Result<T>> + 'a,
    {
        let ctx = &table.ctx;
        {
            {
                let txn = Transaction { table };
                match entry {
                    Entry::Begin => {
                        ctx.ensure_still_main().await?;
                        txn.rollback_failed().await?;
                    }
                    Entry::Service => ctx.ensure_still_main().await?,
                    Entry::Resume(instant) => {
                        if let Err(e) = ctx.ensure_still_main().await {
                            // The write can never complete on main: remove it from the
                            // metadata it started in.
                            if txn.rollback_instant(instant).await.is_ok() {
                                let _ =
                                    commit::stop_heartbeat(&ctx.storage, &instant.requested_time)
                                        .await;
                            }
                            return Err(e);
                        }
                    }
                    Entry::Abort => {}
                }
                work(txn).await
            }
        }
    }

    /// This transaction's lock applied to `other`, another handle of the same table (from
    /// [`Table::reopen_at`], typically at another metadata root), so one locked step can change
    /// several roots. Nothing is checked or rolled back on `other`'s root (call
    /// [`Transaction::rollback_failed`] on the result when the step needs it). Errors:
    /// `Unsupported` when `other` does not share this handle's table storage.
    pub fn on<'b>(&self, other: &'b Table) -> Result<Transaction<'b>> {
        if !Arc::ptr_eq(&self.table.ctx.root_storage, &other.ctx.root_storage) {
            return Err(TableError::Unsupported {
                reason: format!(
                    "a transaction on {} cannot change a handle of another table (open it with \
                     Table::reopen_at)",
                    self.table.ctx.root
                ),
            });
        }
        if let Some(gate) = commit_point::current() {
            gate.register(&other.ctx.storage, other.ctx.root.clone());
        }
        Ok(Transaction { table: other })
    }

    /// The handle this transaction changes.
    pub fn table(&self) -> &'a Table {
        self.table
    }

    /// The table as the handle's metadata root sees it (the root's `.hoodie` over the table's
    /// data files): where this transaction's instants, MDT and data files go.
    pub fn view_storage(&self) -> &'a Arc<dyn Storage> {
        &self.table.ctx.storage
    }

    /// The table's own storage at its base path, shared by every metadata root (for work
    /// across branches).
    pub fn table_storage(&self) -> &'a Arc<dyn Storage> {
        &self.table.ctx.root_storage
    }

    /// The metadata root this transaction changes.
    pub fn root(&self) -> &'a MetaRoot {
        &self.table.ctx.root
    }

    /// The table config the handle was opened with.
    pub fn config(&self) -> &'a TableConfig {
        &self.table.ctx.config
    }

    /// The layout of the root's timeline.
    pub fn layout(&self) -> &'a TableLayout {
        &self.table.ctx.layout
    }

    /// The instant time generator (following the table's shared clock).
    pub fn generator(&self) -> &'a InstantTimeGenerator {
        &self.table.ctx.generator
    }

    /// The handle's write options (heartbeat timeout, lock timeout, ...).
    pub fn options(&self) -> &'a WriteOptions {
        &self.table.ctx.options
    }

    /// The root's timeline, freshly loaded.
    pub async fn timeline(&self) -> Result<ActiveTimeline> {
        self.table.ctx.timeline().await
    }

    /// Rolls back the root's failed writes (pending, heartbeat expired or missing; every
    /// pending write with a zero heartbeat timeout) and finishes unfinished rollbacks, as
    /// entering the transaction did. Returns the instants rolled back.
    pub async fn rollback_failed(&self) -> Result<Vec<InstantTime>> {
        let ctx = &self.table.ctx;
        commit::rollback_failed(
            &ctx.storage,
            &ctx.layout,
            &ctx.generator,
            ctx.options.heartbeat_timeout,
        )
        .await
    }

    /// Rolls back the pending (requested or inflight) instant `instant` of the root: deletes
    /// its data files and MDT instant, completes a `rollback` instant and deletes the instant's
    /// timeline files; resumes an unfinished rollback of it. Returns the rollback's time.
    /// Errors: `Timeline(InstantNotFound)` when `instant` is not on the timeline,
    /// `Timeline(InvalidTransition)` when it is completed.
    pub async fn rollback_instant(&self, instant: &Instant) -> Result<InstantTime> {
        let ctx = &self.table.ctx;
        rollback::rollback_instant(&ctx.storage, &ctx.layout, instant, &ctx.generator).await
    }

    /// Records a table service's file change `delta` (e.g. the files a clean deleted) as MDT
    /// deltacommit `time`, before the caller completes data instant `time`; indexes are left
    /// unchanged. An MDT instant `time` left by an earlier attempt is replaced. Does nothing
    /// when the table has no metadata table.
    pub async fn record_files_delta(&self, time: &InstantTime, delta: &FilesDelta) -> Result<()> {
        let ctx = &self.table.ctx;
        mdt_sync::record_files_delta(&ctx.storage, time, delta, &ctx.generator).await
    }

    /// After a change of main's `hoodie.properties`: mirrors them into the root files when main
    /// is a publication, so branch-unaware readers see them.
    pub async fn mirror_properties(&self) -> Result<()> {
        self.table.ctx.mirror_properties().await
    }

    /// Starts a write instant: refuses while a restore is pending, takes the next instant
    /// time, writes the writer's heartbeat (then renewed in the background until the returned
    /// [`Heartbeat`] is stopped or dropped) and creates `<t>.<action>.requested` (for a
    /// `replacecommit`, with the requested-replace plan naming `operation`). Returns the
    /// timeline it was created on and the requested instant.
    pub(crate) async fn start_instant(
        &self,
        action: Action,
        operation: WriteOperationType,
    ) -> Result<(ActiveTimeline, Instant, Heartbeat)> {
        let ctx = &self.table.ctx;
        // One listing for the restore check, the instant time and the requested file's create.
        let mut tl =
            ActiveTimeline::load_for_next_step(ctx.storage.clone(), ctx.layout.clone()).await?;
        refuse_during_restore(&tl)?;
        let time = tl.next_instant_time(&ctx.generator).await?;
        let requested = Instant::requested(time.clone(), action);
        let content = if action == Action::ReplaceCommit {
            let plan = HoodieRequestedReplaceMetadata {
                operation_type: Some(operation.name().to_string()),
                version: Some(1),
                ..HoodieRequestedReplaceMetadata::default()
            };
            Bytes::from(encode_instant_for(
                &requested,
                &InstantContent::RequestedReplace(Box::new(plan)),
            )?)
        } else {
            Bytes::new()
        };
        commit::beat(&ctx.storage, &time).await?;
        let heartbeat = Heartbeat::start(
            ctx.storage.clone(),
            time.clone(),
            ctx.options.heartbeat_timeout,
        );
        let requested = tl.create_requested(time, action, content).await?;
        Ok((tl, requested, heartbeat))
    }

    /// MDT table services after a data instant completed (cleans the MDT's own superseded
    /// slices and compacts FILES when due); failures are logged, never returned.
    pub(crate) async fn maintain_mdt(&self) {
        let ctx = &self.table.ctx;
        let services = mdt_sync::MdtServices {
            storage: &ctx.storage,
            table_storage: &ctx.root_storage,
            root: &ctx.root,
            clean: ctx.options.mdt_clean,
        };
        mdt_sync::maintain(services, &ctx.layout, &ctx.generator).await;
    }
}

#[cfg(test)]
mod tests;
