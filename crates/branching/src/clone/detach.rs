//! Detaching a clone. (Being built.)

use arbor_timeline::layout::LocationOpener;

use super::types::DetachOutcome;
use crate::error::{BranchingError, Result};

/// Makes the clone at `clone` self-contained and removes its pins.
pub async fn detach_clone(_opener: &dyn LocationOpener, clone: &str) -> Result<DetachOutcome> {
    Err(BranchingError::refused(
        format!("detach {clone}"),
        "not built yet",
    ))
}
