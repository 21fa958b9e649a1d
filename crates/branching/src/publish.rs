//! Publication of a working branch to main by strict fast-forward (RFC-116 section 4).
//!
//! Under the table lock: expired tags are processed on main and the branch; the conditions are
//! checked (every logical write main made after the branch's base, active or archived, is in
//! the branch; completed compaction, clustering and log compaction never block; main's
//! unexpired tags and savepoints are on the branch or name completed writes of its history,
//! and are then carried over from main; no pending instant could change the
//! captured state; the fixed table definitions agree); then publication `p<N>` is reserved by
//! creating its data-side `hoodie.properties` without overwrite, the branch's metadata is
//! copied into it on both sides, and the data-side `_SUCCESS` is written last. Main changes
//! only with that last write; a failure before it leaves main as it was and the half-made
//! `p<N>` only reserves its number (the next publication takes `N + 1`). After `_SUCCESS` the
//! root `hoodie.properties` files are pointed at `p<N>` (MDT side, then data side;
//! `arbor_timeline::legacy`), so readers that know nothing of branches read the new main too.

use std::collections::BTreeSet;

use arbor_cleaner::savepoint::{branches_based_at, pins_naming};
use arbor_table::Table;
use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::avro::{decode_instant, InstantContent, WriteOperationType};
use arbor_timeline::layout::paths::properties_key;
use arbor_timeline::layout::{PinRecord, DEFAULT_META_DIR};
use arbor_timeline::legacy::sync_legacy_root;
use arbor_timeline::metaroot::{next_publication_id, MAIN, SUCCESS_FILE};
use arbor_timeline::{
    resolve_main, Action, Instant, InstantTime, MetaRoot, State, TableConfig, TableLayout,
};
use bytes::Bytes;
use chrono::Utc;

use crate::branch::{blocking_pending, drop_locked, require_mdt};
use crate::copy::{copy_key, copy_root, copy_savepoint, CopySpec};
use crate::error::{BranchingError, Result};
use crate::roots::{branch_identity, remove_root_metadata};
use crate::tag::{expire_locked, list_tags_at, tag_key, TagFilter};

/// What [`publish`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishOutcome {
    /// The publication number (main is now `p<N>`).
    pub publication: u64,
    /// The branch's latest completed write that main now ends at.
    pub head: Option<InstantTime>,
    /// Instants copied (data and MDT side).
    pub instants: usize,
    /// Objects copied.
    pub objects: usize,
    /// The root `hoodie.properties` files (data and MDT side) now lead branch-unaware readers
    /// and writers to the new main (`arbor_timeline::legacy`). False when that last step failed
    /// after `_SUCCESS`: main has moved, legacy readers still read the previous main until the
    /// next state change of main (or publication) finishes the step.
    pub legacy_root: bool,
}

/// Keys `(requested time)` of the logical writes in `history` after `base`: completed
/// commits, deltacommits and replacecommits that are not compaction, log compaction or
/// clustering (recognised by their pending action, or by the operation type in their metadata).
async fn logical_writes_after(
    history: &TimelineHistory,
    base: Option<&InstantTime>,
) -> Result<BTreeSet<InstantTime>> {
    let mut out = BTreeSet::new();
    for i in history.completed_writes() {
        if base.is_some_and(|b| i.requested_time <= *b) {
            continue;
        }
        if !is_table_service(history, &i).await {
            out.insert(i.requested_time);
        }
    }
    Ok(out)
}

async fn is_table_service(history: &TimelineHistory, i: &Instant) -> bool {
    if let Some(files) = history.active().get(&i.requested_time, i.action) {
        if files.pending_action != files.pending_action.completed_action() {
            return true;
        }
    }
    let Ok(bytes) = history
        .read_completed_content(&i.requested_time, i.action)
        .await
    else {
        return false;
    };
    let op = match decode_instant(i, &bytes, "", false) {
        Ok(InstantContent::Commit(m)) => m.operation_type(),
        Ok(InstantContent::ReplaceCommit(m)) => m.operation_type(),
        _ => None,
    };
    matches!(
        op,
        Some(
            WriteOperationType::Compact
                | WriteOperationType::LogCompact
                | WriteOperationType::Cluster
        )
    )
}

/// Publishes working branch `branch` (a handle opened on it) to main. See the module doc.
/// Errors: [`BranchingError::Divergent`] naming main's writes the branch lacks;
/// [`BranchingError::Refused`] for the other conditions; nothing is changed on refusal.
pub async fn publish(branch: &Table) -> Result<PublishOutcome> {
    let MetaRoot::Branch(name) = branch.root().clone() else {
        return Err(BranchingError::refused(
            "publish",
            format!("{} is not a working branch", branch.root()),
        ));
    };
    branch.with_table_lock(publish_locked(branch, &name)).await
}

/// [`publish`], then drops the branch ([`crate::drop_branch`]) under the same table lock, so no
/// write can land on the branch between the publication and the drop. When the publication is
/// refused nothing changes and the branch stays. When the drop fails after a successful
/// publication, the error ([`BranchingError::Refused`]) names the publication: main has moved,
/// and `arbor branch drop` finishes the drop.
pub async fn publish_and_drop(branch: &Table) -> Result<PublishOutcome> {
    let MetaRoot::Branch(name) = branch.root().clone() else {
        return Err(BranchingError::refused(
            "publish",
            format!("{} is not a working branch", branch.root()),
        ));
    };
    branch
        .with_table_lock(async {
            // A pinned branch cannot be dropped: refuse before publishing anything.
            let pins: Vec<PinRecord> = PinRecord::list(branch.table_storage().as_ref())
                .await?
                .into_iter()
                .filter(|p| p.root == name)
                .collect();
            if let Some(first) = pins.first() {
                return Err(BranchingError::PinHeld {
                    operation: format!("publish and drop {name}"),
                    instant: first.instant.clone(),
                    root: name.clone(),
                    clones: pins
                        .iter()
                        .map(|p| format!("{} at {}", p.clone_id, p.location))
                        .collect(),
                });
            }
            let outcome = publish_locked(branch, &name).await?;
            drop_locked(branch, &name).await.map_err(|e| {
                BranchingError::refused(
                    format!(
                        "drop branch {name} after publishing it as p{}",
                        outcome.publication
                    ),
                    format!("{e}; main has moved, `arbor branch drop` finishes the drop"),
                )
            })?;
            Ok(outcome)
        })
        .await
}

async fn publish_locked(branch: &Table, name: &str) -> Result<PublishOutcome> {
    let storage = branch.table_storage().clone();
    let op = format!("publish {name}");
    let info = branch_identity(&storage, name).await?;
    let main_root = resolve_main(storage.as_ref()).await?;
    let main = branch.reopen_at(main_root.clone()).await?;
    main.rollback_failed_locked().await?;
    expire_locked(&main).await?;
    expire_locked(branch).await?;

    let main_view = main.view_storage().clone();
    let main_config = TableConfig::load(main_view.as_ref(), DEFAULT_META_DIR).await?;
    let main_layout = TableLayout::from_config(DEFAULT_META_DIR, &main_config)?;
    let main_history = TimelineHistory::load(main_view.clone(), main_layout).await?;
    let branch_view = branch.view_storage().clone();
    let branch_config = TableConfig::load(branch_view.as_ref(), DEFAULT_META_DIR).await?;
    require_mdt(&branch_config, &op)?;
    let branch_history =
        TimelineHistory::load(branch_view.clone(), branch.layout().clone()).await?;

    // Fixed definitions agree.
    if main_config.metadata_partitions() != branch_config.metadata_partitions() {
        return Err(BranchingError::refused(
            op,
            format!(
                "main's metadata partitions {:?} differ from the branch's {:?}",
                main_config.metadata_partitions(),
                branch_config.metadata_partitions()
            ),
        ));
    }
    // Pending instants: main's live writes would be lost, the branch's could change the state.
    let main_pending: Vec<String> = main_history
        .active()
        .pending()
        .iter()
        .filter(|i| i.action.is_write() || matches!(i.action, Action::Clean | Action::Restore))
        .filter(|i| !is_service_plan(i.action))
        .map(ToString::to_string)
        .collect();
    if !main_pending.is_empty() {
        return Err(BranchingError::refused(
            op,
            format!(
                "main has pending instants {}; wait for them to finish",
                main_pending.join(", ")
            ),
        ));
    }
    // A plan main has scheduled (Spark's `run_clustering(op => 'schedule')`, a compaction
    // schedule) names main's file groups: publication would drop it from main's timeline
    // unexecuted, its inflight files left behind, and no engine would run it again.
    let main_plans: Vec<String> = main_history
        .active()
        .pending()
        .iter()
        .filter(|i| is_service_plan(i.action))
        .map(ToString::to_string)
        .collect();
    if !main_plans.is_empty() {
        return Err(BranchingError::refused(
            op,
            format!(
                "main has pending table service plans {} (clustering or compaction); run them \
                 (Spark: CALL run_clustering / run_compaction with op => 'execute', or `arbor \
                 compact`) or roll them back, then publish",
                main_plans.join(", ")
            ),
        ));
    }
    let head = branch_history
        .completed_writes()
        .into_iter()
        .map(|i| i.requested_time)
        .max();
    let mut blocking = blocking_pending(branch_history.active(), head.as_ref());
    blocking.extend(
        branch_history
            .active()
            .filter(
                &[
                    Action::Compaction,
                    Action::Clustering,
                    Action::LogCompaction,
                ],
                &[State::Requested, State::Inflight],
            )
            .iter()
            .map(ToString::to_string),
    );
    if !blocking.is_empty() {
        return Err(BranchingError::refused(
            op,
            format!(
                "the branch has pending instants that could change the published state: {}",
                blocking.join(", ")
            ),
        ));
    }

    // Condition 1: every logical write of main after the base is on the branch.
    let base = info
        .base_instant
        .as_deref()
        .map(InstantTime::parse)
        .transpose()?;
    let branch_writes: BTreeSet<InstantTime> = branch_history
        .completed_writes()
        .into_iter()
        .map(|i| i.requested_time)
        .collect();
    if let Some(b) = &base {
        if !branch_writes.contains(b) {
            return Err(BranchingError::refused(
                op,
                format!("the branch no longer has its base instant {b} (restored away)"),
            ));
        }
    }
    let main_after = logical_writes_after(&main_history, base.as_ref()).await?;
    let missing: Vec<String> = main_after
        .iter()
        .filter(|t| !branch_writes.contains(t))
        .map(ToString::to_string)
        .collect();
    if !missing.is_empty() {
        let main_writes: BTreeSet<InstantTime> = main_history
            .completed_writes()
            .into_iter()
            .map(|i| i.requested_time)
            .collect();
        let branch_only = logical_writes_after(&branch_history, base.as_ref())
            .await?
            .into_iter()
            .filter(|t| !main_writes.contains(t))
            .map(|t| t.to_string())
            .collect();
        return Err(BranchingError::Divergent {
            branch: name.to_string(),
            base: base.map_or_else(|| "none".to_string(), |b| b.to_string()),
            missing_on_branch: missing,
            branch_only,
        });
    }

    // Condition 3: main's unexpired tags and savepoints survive. Those already on the branch
    // (same name and instant) are published with it; those whose instant is a completed write
    // of the branch's history (active or archived) are carried over from main; any other
    // blocks.
    let branch_savepoints: BTreeSet<InstantTime> = branch_history
        .active()
        .filter(&[Action::Savepoint], &[State::Completed])
        .into_iter()
        .map(|i| i.requested_time)
        .collect();
    let branch_tags = list_tags_at(&branch_view, TagFilter::All).await?;
    let outside = |what: String, instant: &str| {
        BranchingError::refused(
            op.clone(),
            format!(
                "{what} names instant {instant}, which is not in branch {name}'s history (not \
                 one of its completed writes); publication would drop it. Drop it on main, or \
                 publish a branch that has the instant"
            ),
        )
    };
    let mut carried_tags = Vec::new();
    for tag in list_tags_at(&main_view, TagFilter::Unexpired).await? {
        match branch_tags.iter().find(|t| t.name == tag.name) {
            Some(t) if t.instant == tag.instant => continue,
            Some(t) => {
                return Err(BranchingError::refused(
                    op,
                    format!(
                        "main's tag {} (instant {}) and the branch's tag {} (instant {}) differ; \
                         publication would replace main's",
                        tag.name, tag.instant, t.name, t.instant
                    ),
                ))
            }
            None => {}
        }
        let instant = InstantTime::parse(&tag.instant)?;
        if !branch_writes.contains(&instant) {
            return Err(outside(format!("main's tag {}", tag.name), &tag.instant));
        }
        carried_tags.push(tag);
    }
    let mut carried_savepoints = BTreeSet::new();
    for sp in main_history
        .active()
        .filter(&[Action::Savepoint], &[State::Completed])
    {
        let t = sp.requested_time;
        if branch_savepoints.contains(&t) {
            continue;
        }
        if !branch_writes.contains(&t) {
            let pins = pins_naming(&main_view, MAIN, &t).await?;
            if !pins.is_empty() {
                return Err(BranchingError::PinHeld {
                    operation: op,
                    instant: t.to_string(),
                    root: MAIN.to_string(),
                    clones: pins
                        .iter()
                        .map(|p| format!("{} at {}", p.clone_id, p.location))
                        .collect(),
                });
            }
            let based = branches_based_at(&storage, &t).await?;
            if !based.is_empty() {
                return Err(BranchingError::refused(
                    op,
                    format!(
                        "main's savepoint {t} pins the base of branch {} (which reads main as of \
                         {t}), and {t} is not in branch {name}'s history: publication would \
                         leave that branch's files unprotected from Hudi's cleaners. Publish or \
                         drop branch {} first, or publish a branch that has {t}",
                        based.join(", "),
                        based.join(", ")
                    ),
                ));
            }
            return Err(outside(format!("main's savepoint {t}"), t.as_str()));
        }
        carried_savepoints.insert(t);
    }

    // Main's own table services after the base (compaction, clustering) that the branch does
    // not have: their output files stay on storage, and no live root references them once
    // main is the branch.
    let main_only_services = main_history.completed_writes().iter().any(|i| {
        !branch_writes.contains(&i.requested_time)
            && base.as_ref().is_none_or(|b| &i.requested_time > b)
    });

    // Reserve p<N>, copy, then _SUCCESS.
    let n = next_publication_id(storage.as_ref()).await?;
    let target = MetaRoot::Publication(n);
    let props_key = properties_key(&target.data_meta_dir());
    let (props, _) = branch_view.get(&properties_key(DEFAULT_META_DIR)).await?;
    storage.put_if_absent(&props_key, props).await?;
    let tags: BTreeSet<String> = branch_tags.iter().map(|t| t.name.clone()).collect();
    let spec = CopySpec {
        from: MetaRoot::Branch(name.to_string()),
        to: target.clone(),
        cut: None,
        savepoints: None,
        tags: Some(tags),
        skip_data_properties: true,
    };
    let mut stats = copy_root(&storage, &spec).await?;
    // Main's tags and savepoints at instants of the branch's history, carried over from main.
    for t in &carried_savepoints {
        stats.objects += copy_savepoint(&storage, &main_root, &target, t).await?;
    }
    for tag in &carried_tags {
        copy_key(&storage, &main_root, &target, &tag_key(&tag.name)).await?;
        stats.objects += 1;
    }
    // A tag that expired while copying would be published as if it still held: abort.
    let now = Utc::now();
    if let Some(t) = branch_tags
        .iter()
        .chain(&carried_tags)
        .find(|t| t.is_expired(now))
    {
        remove_root_metadata(&storage, &target).await?;
        return Err(BranchingError::refused(
            op,
            format!("tag {} expired during publication; retry", t.name),
        ));
    }
    // The commit point: conditional on no other commit since this step began (a publisher
    // that stalled past its lease and lost the lock changes nothing).
    arbor_timeline::commit_point::create_gated(
        &storage,
        &format!("{}/{SUCCESS_FILE}", target.data_meta_dir()),
        Some(&props_key),
        Bytes::new(),
    )
    .await?;
    tracing::info!(branch = name, publication = n, "published");
    if main_only_services {
        // Deleted now, as a dropped branch's files are (`arbor_cleaner::reclaim`): Java's
        // file-system view takes an unknown instant older than its active commits for an
        // archived, committed one, and its time travel then read such an output file in place
        // of the slices main kept. Best effort: what is left is reclaimed by
        // `arbor clean --orphans`.
        let old_main = main_root.view(storage.clone());
        let ledger = format!("main-before-p{n}");
        let reclaimed = async {
            arbor_cleaner::reclaim::record_dropped(&storage, old_main, "main", &ledger).await?;
            arbor_cleaner::reclaim::reclaim_dropped(&storage, false).await
        }
        .await;
        match reclaimed {
            Ok(r) => tracing::info!(
                files = r.files.len(),
                publication = n,
                "deleted the outputs of main's services the branch does not have"
            ),
            Err(e) => {
                tracing::warn!(error = %e, publication = n, "the outputs of main's services the branch does not have are left on storage")
            }
        }
    }
    // Lead branch-unaware readers to the new main (MDT side first, data side last). Main has
    // moved already; a failure here is finished by the next state change of main.
    let legacy_root = match sync_legacy_root(storage.as_ref(), &target).await {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e, publication = n, "root hoodie.properties not repointed yet");
            false
        }
    };
    Ok(PublishOutcome {
        publication: n,
        head,
        instants: stats.instants,
        objects: stats.objects + 2,
        legacy_root,
    })
}

/// Clustering, compaction and log compaction: plans a table service runs later.
fn is_service_plan(action: Action) -> bool {
    matches!(
        action,
        Action::Clustering | Action::Compaction | Action::LogCompaction
    )
}
