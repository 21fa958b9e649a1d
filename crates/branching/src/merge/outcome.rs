//! [`MergeOutcome`]: what a merge or cherry-pick did.

use arbor_table::CommitResult;
use arbor_timeline::InstantTime;

use super::conflict::MergeConflict;
use crate::diff::TableRef;

/// Most conflicts a [`crate::BranchingError::MergeConflicts`] names.
pub const CONFLICTS_SHOWN: usize = 20;

/// What a merge did (or, in a dry run, would do).
#[derive(Debug, Clone)]
pub struct MergeOutcome {
    /// The merged ref.
    pub source: TableRef,
    /// The target branch, before the merge.
    pub target: TableRef,
    /// Where the source's compared changes start.
    pub source_since: Option<InstantTime>,
    /// Where the target's compared changes start.
    pub target_since: Option<InstantTime>,
    /// Keys the target receives that it did not hold.
    pub inserts: usize,
    /// Keys whose record the target receives anew.
    pub updates: usize,
    /// Keys deleted from the target.
    pub deletes: usize,
    /// Conflicts found (settled by the strategy; in a dry run with `fail`, those that would
    /// refuse the merge), at most [`CONFLICTS_SHOWN`] of them.
    pub conflicts: Vec<MergeConflict>,
    /// How many conflicts in all.
    pub conflict_count: usize,
    /// File groups read (each in two states).
    pub file_groups_read: usize,
    /// The merge commit (`None`: a dry run, or nothing to write).
    pub commit: Option<CommitResult>,
}

impl MergeOutcome {
    /// True when the source had nothing new for the target.
    pub fn is_up_to_date(&self) -> bool {
        self.inserts == 0 && self.updates == 0 && self.deletes == 0 && self.conflict_count == 0
    }
}
