//! The other live roots of a table (main, every working branch) as holders of files, discovered
//! from storage by every clean and restore: data files are shared, so a clean of one root
//! deletes a file only when no other live root needs it, and a restore never rolls back an
//! instant another root also has.
//!
//! What another root `R` needs ([`retained_by`] plus its savepoints, hence its tags, and the
//! inputs of its pending table services) is judged by `R`'s own timeline and `R`'s own clean
//! policy ([`own_retention`]), computed now, so that a clean of one root never shortens another
//! root's retention, and a root that never cleaned does not pin its whole inherited history.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_fsview::Horizon;
use arbor_storage::Storage;
use arbor_table::read::TableReader;
use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::avro::{decode, HoodieCleanMetadata};
use arbor_timeline::layout::branches::find_branch;
pub use arbor_timeline::layout::branches::live_roots;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{Action, InstantTime, MetaRoot, State, TableConfig, TableLayout};
use async_trait::async_trait;

use crate::error::{CleanerError, Result};
use crate::merge_bases::{merge_bases, MergeBaseProtection};
use crate::policy::CleanPolicy;
use crate::protection::{
    committed_files, snapshot_keys, PendingProtection, ProtectionContext, ProtectionSource,
    RetentionProtection, SavepointProtection,
};

/// Protects what every *other* live root of the table needs, each judged by its own history:
/// its savepoints (so its tags), the inputs of its pending table services, and what its own
/// clean policy retains on its own timeline ([`retained_by`]). Every clean adds it itself
/// ([`crate::clean()`]); the roots are discovered from storage at each call.
#[derive(Debug, Clone)]
pub struct BranchProtection {
    storage: Arc<dyn Storage>,
    cleaning: MetaRoot,
}

impl BranchProtection {
    /// A source for a clean of root `cleaning` of the table whose own storage (shared by every
    /// root) is `storage`.
    pub fn new(storage: Arc<dyn Storage>, cleaning: MetaRoot) -> Self {
        BranchProtection { storage, cleaning }
    }
}

/// What a root retains on its own, by its own clean policy ([`own_retention`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnRetention {
    /// The retention window of this policy, computed on the root's timeline now.
    Policy(CleanPolicy),
    /// The latest snapshot and the snapshots as of every completed write from this instant on
    /// (the window of the root's last hours-based clean).
    Since(InstantTime),
    /// Every committed file the root lists (its policy's count cannot be recovered).
    Everything,
}

/// The clean policy a root applies on its own, as its timeline records it: the policy of its
/// last completed clean, with the count that clean used where the metadata records it
/// (`KEEP_LATEST_COMMITS`: the completed writes from its `earliestCommitToRetain` to its
/// `lastCompletedCommitTimestamp`); Hudi's default (`KEEP_LATEST_COMMITS 10`) for a root that
/// never cleaned. A `KEEP_LATEST_BY_HOURS` clean keeps its window ([`OwnRetention::Since`]);
/// a `KEEP_LATEST_FILE_VERSIONS` clean, or one without an earliest retained instant, records
/// no count: the root then keeps [`OwnRetention::Everything`].
pub async fn own_retention(ctx: &ProtectionContext<'_>) -> Result<OwnRetention> {
    let active = ctx.view.history().active();
    let Some(last) = active
        .filter(&[Action::Clean], &[State::Completed])
        .into_iter()
        .max_by_key(|c| c.requested_time.clone())
    else {
        return Ok(OwnRetention::Policy(CleanPolicy::default()));
    };
    let key = active.key_of(&last)?;
    let meta: HoodieCleanMetadata = decode(&active.read(&last).await?, &key)?;
    let Ok(earliest) = InstantTime::parse(&meta.earliest_commit_to_retain) else {
        return Ok(OwnRetention::Everything);
    };
    Ok(match meta.policy.as_str() {
        "KEEP_LATEST_COMMITS" => {
            let last_done = InstantTime::parse(&meta.last_completed_commit_timestamp).ok();
            let n = ctx
                .view
                .index()
                .completed_writes()
                .filter(|w| w.requested_time >= earliest)
                .filter(|w| last_done.as_ref().is_none_or(|l| w.requested_time <= *l))
                .count();
            OwnRetention::Policy(CleanPolicy::KeepLatestCommits(n.max(1)))
        }
        "KEEP_LATEST_FILE_VERSIONS" => OwnRetention::Everything,
        _ => OwnRetention::Since(earliest),
    })
}

/// The files root `ctx` retains by its own history and its own policy ([`own_retention`]),
/// computed on its timeline now: the retention window of that policy (always including the
/// latest snapshot); every committed file of its view when the policy cannot be recovered; the
/// snapshots as of every completed write from the last clean's `earliestCommitToRetain` on
/// for an hours-based policy. The same rule decides what other roots' cleans keep for this
/// root and what branch validation requires of it, so the two never disagree.
pub async fn retained_by(ctx: &ProtectionContext<'_>) -> Result<BTreeSet<String>> {
    match own_retention(ctx).await? {
        OwnRetention::Everything => Ok(committed_files(ctx.view).await?.into_keys().collect()),
        OwnRetention::Policy(policy) => RetentionProtection { policy }.protected(ctx).await,
        OwnRetention::Since(earliest) => {
            let mut out = snapshot_keys(ctx.view, &Horizon::Latest).await?;
            for w in ctx.view.index().completed_writes() {
                if w.requested_time >= earliest {
                    out.extend(
                        snapshot_keys(ctx.view, &Horizon::AsOf(w.requested_time.clone())).await?,
                    );
                }
            }
            Ok(out)
        }
    }
}

/// Everything root `root` of the table at `storage` needs: [`retained_by`], its savepoints (its
/// tags), the inputs of its pending table services and the states its next merges compare
/// from ([`crate::merge_bases`]).
pub async fn needed_by(
    storage: &Arc<dyn Storage>,
    root: &MetaRoot,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<BTreeSet<String>> {
    let view = root.view(storage.clone());
    let reader = TableReader::open_view(view.clone()).await?;
    let ctx = ProtectionContext {
        storage: &view,
        view: reader.view(),
        now,
    };
    let mut out = retained_by(&ctx).await?;
    let sources: [&dyn ProtectionSource; 2] = [&SavepointProtection, &PendingProtection];
    for s in sources {
        out.extend(s.protected(&ctx).await?);
    }
    out.extend(merge_bases(storage, &ctx).await?);
    Ok(out)
}

#[async_trait]
impl ProtectionSource for BranchProtection {
    fn name(&self) -> String {
        "other branches and their tags".to_string()
    }

    async fn protected(&self, ctx: &ProtectionContext<'_>) -> Result<BTreeSet<String>> {
        let mut out = BTreeSet::new();
        for root in live_roots(&self.storage).await? {
            if root != self.cleaning {
                out.extend(needed_by(&self.storage, &root, ctx.now).await?);
            }
        }
        Ok(out)
    }
}

/// Where the clone issue's "clone pins" plug in: the sources every clean of root `cleaning`
/// consults beyond the root's own (savepoints, pending instants, retention), discovered from
/// the table's storage. Today: the other live roots ([`BranchProtection`]) and the root's own
/// merge bases ([`MergeBaseProtection`]).
pub fn discovered_sources(
    storage: &Arc<dyn Storage>,
    cleaning: &MetaRoot,
) -> Vec<Arc<dyn ProtectionSource>> {
    vec![
        Arc::new(BranchProtection::new(storage.clone(), cleaning.clone())),
        Arc::new(MergeBaseProtection::new(storage.clone())),
    ]
}

/// Refuses (nothing changed) a restore of root `restoring` to `to` when an instant it would roll
/// back (`rolled`: the root's data-changing instants after `to`, the restore plan's) is also
/// completed on another live root: rolling it back would delete files that root reads. For a
/// branch, every write up to its base is shared with main: main cannot be restored to before a
/// branch's base while the branch lives, nor a branch to before its own base. Instants a root
/// merely inherited that a restore keeps (cleans, rollbacks, savepoints after `to`) never
/// conflict, since `rolled` holds none.
pub async fn check_no_shared_instants(
    storage: &Arc<dyn Storage>,
    restoring: &MetaRoot,
    to: &InstantTime,
    rolled: &BTreeSet<InstantTime>,
) -> Result<()> {
    for root in live_roots(storage).await? {
        if root == *restoring {
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
            return Err(CleanerError::refused(
                format!("restore {restoring} to {to} refused"),
                shared_reason(storage, restoring, &root, to, &shared).await?,
            ));
        }
    }
    Ok(())
}

/// The base instant of working branch `root` (`None` for main, a branch without a recorded
/// base, or one whose identity is gone).
async fn branch_base(storage: &Arc<dyn Storage>, root: &MetaRoot) -> Result<Option<String>> {
    let MetaRoot::Branch(name) = root else {
        return Ok(None);
    };
    Ok(find_branch(storage, name)
        .await?
        .and_then(|info| info.base_instant))
}

/// Why a restore of `restoring` to `to` conflicts with `other`, which also has the `shared`
/// instants the restore would roll back: names the branch base at stake and the ways out.
async fn shared_reason(
    storage: &Arc<dyn Storage>,
    restoring: &MetaRoot,
    other: &MetaRoot,
    to: &InstantTime,
    shared: &[String],
) -> Result<String> {
    let list = shared.join(", ");
    if let (Some(base), MetaRoot::Branch(name)) = (branch_base(storage, other).await?, other) {
        return Ok(format!(
            "branch {name} was created from main at base instant {base}, after {to}: it reads \
             the files of instants {list}, which the restore would roll back; restore to {base} \
             or later, or drop (or publish) branch {name} first"
        ));
    }
    if let (Some(base), MetaRoot::Branch(name)) =
        (branch_base(storage, restoring).await?, restoring)
    {
        return Ok(format!(
            "instants {list} are main's, inherited by branch {name} at its base instant \
             {base}: {other} reads their files; a branch restores only to its base or later"
        ));
    }
    Ok(format!(
        "{other} also has instants {list}; rolling them back would delete files it reads"
    ))
}
