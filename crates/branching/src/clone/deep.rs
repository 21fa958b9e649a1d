//! Finishing a deep clone: once creation has activated it, the clone is detached at once (its
//! snapshot's files copied into its own location, then the descriptor `Detached`, then its
//! pins removed; `super::detach`), so no pin remains and every reader, hudi-rs included, reads
//! it from its own location.

use arbor_timeline::layout::{normalize_location, CloneDescriptor, CloneState, LocationOpener};

use super::detach::detach_at;
use super::types::DetachOutcome;
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
#[allow(dead_code)] // Until `clone_table` calls it (wip-create).
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
