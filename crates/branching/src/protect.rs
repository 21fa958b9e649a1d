//! Cleaning and restoring with every branch in mind: data files are shared, so a clean of one
//! root deletes a file only when no other live root (main, every working branch) needs it, and
//! a restore never rolls back an instant another root also has.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_cleaner::clean::committed_files;
use arbor_cleaner::protection::{
    snapshot_keys, PendingProtection, ProtectionContext, ProtectionSource, SavepointProtection,
};
use arbor_cleaner::{CleanOptions, CleanOutcome, RestoreOutcome};
use arbor_fsview::Horizon;
use arbor_storage::Storage;
use arbor_table::read::TableReader;
use arbor_table::Table;
use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::avro::{decode, HoodieCleanMetadata};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{Action, State};
use arbor_timeline::{InstantTime, MetaRoot, TableConfig, TableLayout};
use async_trait::async_trait;

use crate::error::{BranchingError, Result};
use crate::roots::live_roots;

/// Protects what every *other* live root needs, judged by that root's own history so that a
/// clean of one branch never shortens another branch's retention: its savepoints (so its tags),
/// the inputs of its pending table services, and its retained snapshots: every committed file
/// of its view when it never cleaned or last cleaned by file versions; else the snapshots as of
/// every completed write from its last clean's `earliestCommitToRetain` on, plus the latest
/// (see `retained_by`).
#[derive(Debug, Clone)]
pub struct BranchProtection {
    storage: Arc<dyn Storage>,
    cleaning: MetaRoot,
}

impl BranchProtection {
    /// A source for a clean of root `cleaning` of the table at `storage`.
    pub fn new(storage: Arc<dyn Storage>, cleaning: MetaRoot) -> Self {
        BranchProtection { storage, cleaning }
    }
}

/// The files root `ctx` retains by its own history: every committed file of its view when it
/// never cleaned, or when its last clean recorded no earliest retained instant (the
/// file-versions policy, whose version count the clean metadata does not record); else the
/// latest snapshot and the snapshots as of every completed write from its last clean's
/// `earliestCommitToRetain` on. The same rule decides what other branches' cleans keep for
/// this root and what `validate` requires of it, so the two never disagree.
pub(crate) async fn retained_by(
    ctx: &ProtectionContext<'_>,
) -> arbor_cleaner::Result<BTreeSet<String>> {
    let active = ctx.view.history().active();
    let all = || async { Ok(committed_files(ctx.view).await?.into_keys().collect()) };
    let Some(last) = active
        .filter(&[Action::Clean], &[State::Completed])
        .into_iter()
        .max_by_key(|c| c.requested_time.clone())
    else {
        return all().await;
    };
    let key = active.key_of(&last)?;
    let meta: HoodieCleanMetadata = decode(&active.read(&last).await?, &key)?;
    let Ok(earliest) = InstantTime::parse(&meta.earliest_commit_to_retain) else {
        return all().await;
    };
    let mut out = snapshot_keys(ctx.view, &Horizon::Latest).await?;
    for w in ctx.view.index().completed_writes() {
        if w.requested_time >= earliest {
            out.extend(snapshot_keys(ctx.view, &Horizon::AsOf(w.requested_time.clone())).await?);
        }
    }
    Ok(out)
}

/// Error conversion for the cleaner's source trait.
fn to_cleaner(e: BranchingError) -> arbor_cleaner::CleanerError {
    match e {
        BranchingError::Cleaner(c) => c,
        BranchingError::Table(t) => t.into(),
        other => arbor_cleaner::CleanerError::refused("protect branches", other.to_string()),
    }
}

#[async_trait]
impl ProtectionSource for BranchProtection {
    fn name(&self) -> String {
        "other branches and their tags".to_string()
    }

    async fn protected(
        &self,
        ctx: &ProtectionContext<'_>,
    ) -> arbor_cleaner::Result<BTreeSet<String>> {
        let roots = live_roots(&self.storage).await.map_err(to_cleaner)?;
        let mut out = BTreeSet::new();
        for root in roots.into_iter().filter(|r| *r != self.cleaning) {
            let view = root.view(self.storage.clone());
            let reader = TableReader::open_view(view.clone()).await?;
            let rctx = ProtectionContext {
                storage: &view,
                view: reader.view(),
                now: ctx.now,
            };
            let sources: [&dyn ProtectionSource; 2] = [&SavepointProtection, &PendingProtection];
            for s in sources {
                out.extend(s.protected(&rctx).await?);
            }
            out.extend(retained_by(&rctx).await?);
        }
        Ok(out)
    }
}

/// Cleans `table`'s root (main or a working branch) with `options`, keeping every file another
/// live root needs ([`BranchProtection`] is added to `options.extra_sources`).
pub async fn clean(table: &Table, mut options: CleanOptions) -> Result<CleanOutcome> {
    options.extra_sources.push(Arc::new(BranchProtection::new(
        table.table_storage().clone(),
        table.root().clone(),
    )));
    Ok(arbor_cleaner::clean(table, &options).await?)
}

/// Restores `table`'s root to its savepoint `to`, refusing (nothing changed) when an instant it
/// would roll back is also completed on another live root: rolling it back would delete files
/// that root reads (for a branch, every instant up to its base is shared with main).
pub async fn restore(table: &Table, to: &InstantTime) -> Result<RestoreOutcome> {
    table
        .transact(|txn| async move {
            let storage = table.table_storage().clone();
            let own =
                TimelineHistory::load(table.view_storage().clone(), table.layout().clone()).await?;
            let rolled: BTreeSet<InstantTime> = own
                .active()
                .instants()
                .into_iter()
                .map(|i| i.requested_time)
                .filter(|t| t > to)
                .collect();
            for root in live_roots(&storage).await? {
                if root == *table.root() {
                    continue;
                }
                let view = root.view(storage.clone());
                let config = TableConfig::load(view.as_ref(), DEFAULT_META_DIR).await?;
                let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
                let other = TimelineHistory::load(view, layout).await?;
                let shared: Vec<String> = other
                    .completed()
                    .into_iter()
                    .map(|i| i.requested_time)
                    .filter(|t| rolled.contains(t))
                    .map(|t| t.to_string())
                    .collect();
                if !shared.is_empty() {
                    return Err(BranchingError::refused(
                        format!("restore {} to {to}", table.root()),
                        format!(
                            "{root} also has instants {}; rolling them back would delete files \
                             it reads",
                            shared.join(", ")
                        ),
                    ));
                }
            }
            Ok(arbor_cleaner::restore_locked(txn, to).await?)
        })
        .await
}
