//! Creating a shallow clone (`docs/clones.md`, the lead's design "Shallow clone creation").
//!
//! Order (every prefix leaves every table openable and correct):
//! 1. the source is opened ([`open_location`]: it may itself be an active clone) and the
//!    snapshot resolved (tag, instant, branch or main head);
//! 2. the target is reserved: its descriptor is written `Creating` (create-if-absent), or an
//!    unfinished creation of the same clone (same source, root and reference) is resumed;
//! 3. every table the clone will read files of (its direct source and each farther one) is
//!    pinned under its own lock: a pin record, then a savepoint pair at the referenced instant;
//! 4. the source root's metadata cut at the clone point is copied into the target under the
//!    source's lock, and its root `hoodie.properties` guarded against Hudi readers unaware of
//!    clones (`arbor_timeline::layout::clone_guard`: they fail instead of reading 0 rows); the
//!    target's instant clock is raised past the clone point, and a first clean of the clone
//!    (through its `ClonedStorage`: source files are released, never deleted) records that
//!    history before the clone point is not retained;
//! 5. the descriptor is replaced `Creating` -> `Active` (compare-and-swap): the clone opens.
//!
//! A crash anywhere leaves the source reading as before (with a pin at most, which `prune`
//! removes once the target no longer holds the clone) and the target refusing to open
//! (`CloneIncomplete`) until a retry of the same clone finishes. A pin that cannot be made (the
//! snapshot's files are gone) refuses the clone and undoes the reservation: nothing is ever
//! half-protected.

use std::sync::Arc;

use arbor_storage::{Storage, StorageError, StorageExt};
use arbor_timeline::layout::{
    guard_location, normalize_location, open_location, pin_key, CloneDescriptor, CloneSource,
    CloneState, LocationOpener, PinRecord, CLONE_FILE, DEFAULT_META_DIR,
};
use arbor_timeline::TimelineError;

use super::copy_meta::{
    clear_own_metadata, copy_snapshot_metadata, raise_clock, snapshot_data_files,
    start_at_clone_point,
};
use super::deep::{deep_copy, resume_deep};
use super::pin_ops::{pin_source, unpin_source};
use super::source::{
    check_cloneable, cloned_storage, names_of, open_root, open_source, resolve_at, root_named,
    stored_names,
};
use super::types::{CloneAt, CloneOutcome, CloneRequest};
use crate::error::{BranchingError, Result};

/// Makes the clone `req` describes (module doc): a new table at `req.target` whose metadata is
/// the source's at the referenced snapshot and whose data and metadata-table files are read
/// from the source (no data file is copied), pinned on every table it reads files of.
///
/// With `req.deep`, the activated clone is then detached at once (`super::deep`): its snapshot's
/// files are copied and no pin remains; a deep clone interrupted after activation is finished
/// by the same call again.
///
/// Refused (nothing changed): a source of table version 6 or without the metadata table; a missing or expired tag, a missing
/// branch, an instant that is not a completed write (or is before the source's own clone
/// point); a target that is the source or holds any metadata other than an unfinished creation
/// of this same clone ([`BranchingError::CloneTargetNotEmpty`]); a snapshot that can no longer
/// be pinned whole. Any other error leaves a resumable creation: run the same clone again.
pub async fn clone_table(opener: &dyn LocationOpener, req: &CloneRequest) -> Result<CloneOutcome> {
    let op = format!("clone {} to {}", req.source, req.target);
    if req.tag_branch.is_some() && matches!(req.at, CloneAt::Main | CloneAt::Branch(_)) {
        return Err(BranchingError::refused(
            op,
            "a branch for the tag or instant is given, but the clone names neither",
        ));
    }
    // Step 1: the source.
    let src = open_source(opener, &req.source).await?;
    let (at, tag_branch) = stored_names(&src, &req.at, req.tag_branch.as_deref()).await?;
    let (root_name, reference) = names_of(&at, tag_branch.as_deref());
    let root = root_named(&src.storage, &root_name).await?;
    check_cloneable(&src, &root, &op).await?;
    let (target, own) = open_target(opener, &req.target).await?;
    if target == src.location
        || src
            .descriptor
            .as_ref()
            .is_some_and(|d| d.sources.iter().any(|s| s.location == target))
    {
        return Err(BranchingError::CloneTargetNotEmpty {
            location: target,
            reason: "it is the source, or a table the source reads files of".to_string(),
        });
    }
    // Step 2: reserve the target (or resume).
    let (descriptor, version, resumed) = match CloneDescriptor::load(own.as_ref()).await? {
        Some((d, v)) => {
            let same_source = d.deep == req.deep
                && d.sources.first().is_some_and(|s| {
                    s.location == src.location && s.root == root_name && s.reference == reference
                });
            if same_source && d.deep && d.state != CloneState::Creating {
                // A deep clone interrupted after activation: finish its copy.
                return resume_deep(opener, &target, &own, &d).await;
            }
            let same = same_source && d.state == CloneState::Creating;
            if !same {
                let what = d.sources.first().map_or_else(String::new, |s| {
                    format!(" of {} ({} {})", s.location, s.root, s.reference)
                });
                return Err(BranchingError::CloneTargetNotEmpty {
                    location: target,
                    reason: format!(
                        "it holds clone {} ({:?}){what}; choose another location",
                        d.id, d.state
                    ),
                });
            }
            tracing::info!(clone = %d.id, location = %target, "resuming an unfinished clone");
            (d, v, true)
        }
        None => {
            let page = own.list_page(DEFAULT_META_DIR, None, 1).await?;
            if !page.objects.is_empty() {
                return Err(BranchingError::CloneTargetNotEmpty {
                    location: target,
                    reason: "it holds table metadata (objects under .hoodie/); choose an empty \
                             location"
                        .to_string(),
                });
            }
            let resolved = resolve_at(&src, &at, tag_branch.as_deref(), &op).await?;
            let mut sources = vec![CloneSource {
                location: src.location.clone(),
                instant: resolved.instant.to_string(),
                root: resolved.root_name.clone(),
                reference: resolved.reference.clone(),
            }];
            if let Some(d) = &src.descriptor {
                sources.extend(d.sources.iter().cloned());
            }
            let d = CloneDescriptor {
                id: new_clone_id(),
                state: CloneState::Creating,
                deep: req.deep,
                created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                sources,
            };
            let v = match d.create(own.as_ref()).await {
                Ok(v) => v,
                Err(TimelineError::Storage(StorageError::AlreadyExists { .. })) => {
                    return Err(BranchingError::CloneTargetNotEmpty {
                        location: target,
                        reason: "another clone is being created there".to_string(),
                    })
                }
                Err(e) => return Err(e.into()),
            };
            (d, v, false)
        }
    };
    let first = descriptor
        .sources
        .first()
        .cloned()
        .ok_or_else(|| BranchingError::Invalid {
            path: format!("{target}/{CLONE_FILE}"),
            reason: "the clone lists no source".to_string(),
        })?;
    let instant = first.instant_time()?;

    // Step 3: pins on every source, nearest first.
    let pins: Vec<PinRecord> = descriptor
        .sources
        .iter()
        .map(|s| pin_for(&descriptor, &target, s))
        .collect();
    for (s, pin) in descriptor.sources.iter().zip(&pins) {
        if let Err(e) = pin_source(opener, &s.location, pin).await {
            if is_refusal(&e) {
                abandon(opener, &own, &descriptor, &target).await;
            }
            return Err(e);
        }
    }

    // Step 4: the clone's metadata, under the direct source's lock.
    let source_table = open_root(&src.storage, &first.root).await?;
    let own_for_copy = own.clone();
    let at = instant.clone();
    let stats = source_table
        .transact(|txn| async move {
            let table = txn.table();
            clear_own_metadata(&own_for_copy).await?;
            let stats =
                copy_snapshot_metadata(table.table_storage(), table.root(), &own_for_copy, &at)
                    .await?;
            // Hudi readers unaware of clones refuse the clone from its first config on.
            guard_location(own_for_copy.as_ref()).await?;
            Ok::<_, BranchingError>(stats)
        })
        .await?;
    // Through the clone's view: its own root config is guarded on storage.
    let cloned = cloned_storage(opener, &own, &descriptor)?;
    raise_clock(&src.storage, &cloned, &instant).await?;
    start_at_clone_point(cloned.clone()).await?;
    let data_files = snapshot_data_files(cloned).await?;

    // Step 5: activate.
    let mut active = descriptor.clone();
    active.state = CloneState::Active;
    active.replace(own.as_ref(), &version).await?;
    tracing::info!(clone = %descriptor.id, location = %target, source = %src.location,
        instant = %instant, "clone created");
    // A deep clone: its snapshot's files copied, then detached (no pin remains).
    let (copied, pins) = if req.deep {
        (Some(deep_copy(opener, &target).await?), Vec::new())
    } else {
        (None, pins)
    };
    Ok(CloneOutcome {
        id: descriptor.id.clone(),
        location: target,
        source: src.location,
        root: first.root,
        reference: first.reference,
        instant,
        deep: req.deep,
        resumed,
        // The copied metadata, the descriptor (created, activated) and the instant clock.
        metadata_objects: stats.objects + 3,
        data_files,
        files_copied: copied.as_ref().map_or(0, |c| c.files_copied),
        bytes_copied: copied.as_ref().map_or(0, |c| c.bytes_copied),
        server_side_copy: copied.as_ref().is_some_and(|c| c.server_side_copy),
        pins,
    })
}

/// Normalizes `target` and opens its own storage (a local directory is created by opening it,
/// so the location is normalized again: canonical from then on).
async fn open_target(
    opener: &dyn LocationOpener,
    target: &str,
) -> Result<(String, Arc<dyn Storage>)> {
    let first = normalize_location(target)?;
    let own = opener.open(&first)?;
    let again = normalize_location(&first)?;
    if again == first {
        return Ok((first, own));
    }
    let own = opener.open(&again)?;
    Ok((again, own))
}

/// A new clone id (unique across every table: a random UUID).
fn new_clone_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The pin clone `d` at `location` holds on source `s`.
pub(crate) fn pin_for(d: &CloneDescriptor, location: &str, s: &CloneSource) -> PinRecord {
    PinRecord {
        clone_id: d.id.clone(),
        location: location.to_string(),
        instant: s.instant.clone(),
        root: s.root.clone(),
        reference: s.reference.clone(),
        created: d.created.clone(),
    }
}

/// True for errors that refuse the clone for good (the retry would be refused too).
fn is_refusal(e: &BranchingError) -> bool {
    matches!(
        e,
        BranchingError::Refused { .. }
            | BranchingError::Cleaner(arbor_cleaner::CleanerError::Refused { .. })
    )
}

/// Undoes a refused creation: the target's own metadata is cleared, the pins already made are
/// removed (their savepoints released unless still needed; a source without this clone's pin
/// record is left alone), then the descriptor is deleted.
/// Best effort: a failure is logged and leaves a `Creating` clone that `prune` (after the target
/// is removed) or a retry deals with.
async fn abandon(
    opener: &dyn LocationOpener,
    own: &Arc<dyn Storage>,
    d: &CloneDescriptor,
    location: &str,
) {
    let undo = async {
        clear_own_metadata(own).await?;
        for s in &d.sources {
            let storage = open_location(&s.location, opener).await?;
            if storage.exists(&pin_key(&d.id)).await? {
                unpin_source(opener, &s.location, &pin_for(d, location, s)).await?;
            }
        }
        own.delete(CLONE_FILE).await?;
        Ok::<(), BranchingError>(())
    };
    if let Err(e) = undo.await {
        tracing::warn!(clone = %d.id, location, error = %e,
            "could not undo a refused clone; remove the target and run `arbor clone prune`");
    }
}
