//! [`RebaseOutcome`]: what a rebase did.

use arbor_timeline::InstantTime;

use crate::merge::MergeOutcome;

/// What [`crate::rebase()`] did (or, in a dry run, would do).
#[derive(Debug, Clone)]
pub struct RebaseOutcome {
    /// The rebased branch.
    pub branch: String,
    /// The branch's base before the rebase (`None` when unknown: a rebase resumed after the
    /// branch had already been replaced).
    pub previous_base: Option<InstantTime>,
    /// Main's completed write the branch is based on afterwards (in a dry run: would be).
    pub onto: Option<InstantTime>,
    /// What the branch's changes did on top of main's head, as a merge of the branch into
    /// main would (`None`: the branch was already based on main's head, or a resumed rebase
    /// had already carried them).
    pub changes: Option<MergeOutcome>,
    /// The branch that keeps the earlier history and the tags the rebased branch no longer
    /// has (`None`: no tag would have been lost, so the earlier history was not kept).
    pub kept: Option<String>,
    /// The branch was already based on main's head: nothing was done.
    pub up_to_date: bool,
    /// A dry run: nothing was written.
    pub dry_run: bool,
    /// An interrupted rebase of the branch was finished.
    pub resumed: bool,
}
