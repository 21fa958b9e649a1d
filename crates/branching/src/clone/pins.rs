//! A source's pins: list, forget, prune. (Being built.)

use arbor_timeline::layout::{LocationOpener, PinRecord};

use super::types::PruneOutcome;
use crate::error::{BranchingError, Result};

/// Every pin of the table at `source`.
pub async fn list_pins(_opener: &dyn LocationOpener, source: &str) -> Result<Vec<PinRecord>> {
    Err(BranchingError::refused(
        format!("list clones of {source}"),
        "not built yet",
    ))
}

/// Removes the pin of clone `clone` (an id or a location) from `source`.
pub async fn forget_pin(
    _opener: &dyn LocationOpener,
    source: &str,
    clone: &str,
    _force: bool,
) -> Result<PinRecord> {
    Err(BranchingError::refused(
        format!("forget clone {clone} of {source}"),
        "not built yet",
    ))
}

/// Removes every pin of `source` whose clone is gone.
pub async fn prune_pins(_opener: &dyn LocationOpener, source: &str) -> Result<PruneOutcome> {
    Err(BranchingError::refused(
        format!("prune clones of {source}"),
        "not built yet",
    ))
}
