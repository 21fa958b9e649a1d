//! Creating a shallow or deep clone. (Being built.)

use arbor_timeline::layout::LocationOpener;

use super::types::{CloneOutcome, CloneRequest};
use crate::error::{BranchingError, Result};

/// Makes the clone `req` describes (see `docs/clones.md`).
pub async fn clone_table(_opener: &dyn LocationOpener, req: &CloneRequest) -> Result<CloneOutcome> {
    Err(BranchingError::refused(
        format!("clone {} to {}", req.source, req.target),
        "not built yet",
    ))
}
