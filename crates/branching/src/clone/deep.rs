//! Finishing a deep clone: once creation has activated it, the clone is detached at once (its
//! snapshot's files copied into its own location, then the descriptor `Detached`, then its
//! pins removed; `super::detach`), so no pin remains and every reader, hudi-rs included, reads
//! it from its own location.

use std::sync::Arc;

use arbor_storage::Storage;
use arbor_timeline::layout::{normalize_location, CloneDescriptor, CloneState, LocationOpener};

use super::copy_meta::snapshot_data_files;
use super::detach::detach_at;
use super::source::cloned_storage;
use super::types::{CloneOutcome, DetachOutcome};
use crate::error::{BranchingError, Result};

/// The deep-clone step of `clone_table` (`deep: true`), run after activation: detaches the
/// clone at `location` (normalized or not) whose descriptor says `deep`.
///
/// Guarantees those of `detach_clone`: on success the descriptor is `Detached` (with `deep`
/// kept), every referenced file is in the clone's own location and no source holds a pin of
/// it. A crash leaves an active clone marked deep; calling this again (as a rerun of the same
/// `clone_table` does, or `detach_clone`) completes it. A clone already detached only has
/// leftover pins removed.
///
/// Errors: the location holds no clone, or one not marked `deep` (`Refused`: a shallow clone is
/// made self-contained by `detach_clone`), or one still `Creating` (`Refused`); those of
/// `detach_clone`.
pub(crate) async fn deep_copy(
    opener: &dyn LocationOpener,
    location: &str,
) -> Result<DetachOutcome> {
    let location = normalize_location(location)?;
    let own = opener.open(&location)?;
    match CloneDescriptor::load(own.as_ref()).await? {
        Some((d, _)) if d.deep && d.state != CloneState::Creating => {}
        Some((d, _)) if d.deep => {
            return Err(BranchingError::refused(
                format!("deep copy into {location}"),
                format!("clone {} is not activated yet", d.id),
            ))
        }
        _ => {
            return Err(BranchingError::refused(
                format!("deep copy into {location}"),
                "the location holds no deep clone",
            ))
        }
    }
    detach_at(opener, &location, own).await
}

/// `clone_table` of a deep clone found activated (or detached) at `target`: an earlier run was
/// interrupted during its copy or its pin removal. Finishes it ([`deep_copy`]) and reports it as
/// resumed (no metadata written by this run).
pub(crate) async fn resume_deep(
    opener: &dyn LocationOpener,
    target: &str,
    own: &Arc<dyn Storage>,
    d: &CloneDescriptor,
) -> Result<CloneOutcome> {
    let first = d
        .sources
        .first()
        .cloned()
        .ok_or_else(|| BranchingError::Invalid {
            path: format!("{target}/{}", arbor_timeline::layout::CLONE_FILE),
            reason: "the clone lists no source".to_string(),
        })?;
    let instant = first.instant_time()?;
    let view = if d.state == CloneState::Active {
        cloned_storage(opener, own, d)?
    } else {
        own.clone()
    };
    let data_files = snapshot_data_files(view).await?;
    let copied = deep_copy(opener, target).await?;
    Ok(CloneOutcome {
        id: d.id.clone(),
        location: target.to_string(),
        source: first.location,
        root: first.root,
        reference: first.reference,
        instant,
        deep: true,
        resumed: true,
        metadata_objects: 0,
        data_files,
        files_copied: copied.files_copied,
        bytes_copied: copied.bytes_copied,
        server_side_copy: copied.server_side_copy,
        pins: Vec::new(),
    })
}
