//! A source's pins: list, forget, prune (the lead's design, "Source-side rules (pins)").
//!
//! A pin names one clone that reads files of this table (`.hoodie/.clones/<id>.json`) and is
//! backed by a savepoint pair at its instant on its root. Removing one deletes the record, then
//! releases the savepoint unless another pin or a tag still names that instant on that root
//! ([`super::pin_ops`]).

use arbor_timeline::layout::{
    normalize_location, CloneDescriptor, CloneState, LocationOpener, PinRecord,
};

use super::pin_ops::unpin_in;
use super::source::open_source;
use super::types::PruneOutcome;
use crate::error::{BranchingError, Result};

/// Every pin of the table at `source` (its clones: id, location, instant, root, reference,
/// created), by clone id. Reads only.
pub async fn list_pins(opener: &dyn LocationOpener, source: &str) -> Result<Vec<PinRecord>> {
    let src = open_source(opener, source).await?;
    Ok(PinRecord::list(src.storage.as_ref()).await?)
}

/// What a pin's location holds, for deciding whether its clone is alive.
enum Holder {
    /// A descriptor with the pin's id, `Creating` or `Active`: the clone reads this table.
    Alive,
    /// No descriptor, another id, or the clone detached: nothing there reads this table.
    Gone,
}

async fn clone_at(opener: &dyn LocationOpener, pin: &PinRecord) -> Result<Holder, String> {
    // A local clone whose directory is gone holds nothing (and opening it would create it).
    if !pin.location.contains("://") && !std::path::Path::new(&pin.location).exists() {
        return Ok(Holder::Gone);
    }
    let own = opener.open(&pin.location).map_err(|e| e.to_string())?;
    match CloneDescriptor::load(own.as_ref()).await {
        Ok(Some((d, _))) if d.id == pin.clone_id && d.state != CloneState::Detached => {
            Ok(Holder::Alive)
        }
        Ok(_) => Ok(Holder::Gone),
        Err(e) => Err(e.to_string()),
    }
}

/// Removes the pin of clone `clone` (its id, or its location in any spelling) from the table at
/// `source`, under the source's lock: the record first, then its savepoint pair unless another
/// pin or a tag names that instant on that root. Returns the removed pin.
///
/// Refused, nothing changed: no pin names `clone` ([`BranchingError::PinNotFound`]); the
/// clone's location still holds it `Active` or `Creating` ([`BranchingError::CloneAlive`]), or
/// cannot be read, unless `force` (the clone may then lose files the source cleans).
pub async fn forget_pin(
    opener: &dyn LocationOpener,
    source: &str,
    clone: &str,
    force: bool,
) -> Result<PinRecord> {
    let src = open_source(opener, source).await?;
    let pins = PinRecord::list(src.storage.as_ref()).await?;
    let wanted = normalize_location(clone).ok();
    let pin = pins
        .into_iter()
        .find(|p| p.clone_id == clone || wanted.as_deref() == Some(p.location.as_str()))
        .ok_or_else(|| BranchingError::PinNotFound {
            source_location: src.location.clone(),
            clone: clone.to_string(),
        })?;
    if !force {
        match clone_at(opener, &pin).await {
            Ok(Holder::Gone) => {}
            Ok(Holder::Alive) => {
                return Err(BranchingError::CloneAlive {
                    id: pin.clone_id.clone(),
                    location: pin.location.clone(),
                })
            }
            Err(reason) => {
                return Err(BranchingError::refused(
                    format!("forget clone {} of {}", pin.clone_id, src.location),
                    format!(
                        "its location {} cannot be read ({reason}); use --force if the clone \
                         is gone",
                        pin.location
                    ),
                ))
            }
        }
    }
    unpin_in(&src.storage, &pin).await?;
    Ok(pin)
}

/// Removes every pin of the table at `source` whose location no longer holds its clone (no
/// descriptor, another clone's, or a detached one), each as [`forget_pin`] does; keeps the
/// pins of clones that are `Active` or `Creating`; reports (and keeps) those whose location
/// cannot be read.
pub async fn prune_pins(opener: &dyn LocationOpener, source: &str) -> Result<PruneOutcome> {
    prune(opener, source, false).await
}

/// What [`prune_pins`] would do, changing nothing: `removed` names the pins it would remove.
pub async fn abandoned_pins(opener: &dyn LocationOpener, source: &str) -> Result<PruneOutcome> {
    prune(opener, source, true).await
}

async fn prune(opener: &dyn LocationOpener, source: &str, dry_run: bool) -> Result<PruneOutcome> {
    let src = open_source(opener, source).await?;
    let mut out = PruneOutcome::default();
    for pin in PinRecord::list(src.storage.as_ref()).await? {
        match clone_at(opener, &pin).await {
            Ok(Holder::Alive) => out.kept.push(pin),
            Ok(Holder::Gone) => {
                if !dry_run {
                    unpin_in(&src.storage, &pin).await?;
                }
                out.removed.push(pin);
            }
            Err(reason) => out.unreachable.push((pin, reason)),
        }
    }
    Ok(out)
}
