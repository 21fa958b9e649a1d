//! Pending instants that block a branch or tag operation: what `create_branch`, `publish` and
//! tag creation refuse to run over. Its own file so that `branch.rs` and `tag.rs` both use it
//! without importing each other.

use arbor_timeline::{Action, ActiveTimeline, InstantTime};

/// Pending instants of `tl` that could change the state as of `upto`: pending writes requested
/// at or before it, and any pending clean, rollback or restore.
pub(crate) fn blocking_pending(tl: &ActiveTimeline, upto: Option<&InstantTime>) -> Vec<String> {
    tl.pending()
        .into_iter()
        .filter(|i| match i.action.completed_action() {
            Action::Commit | Action::DeltaCommit | Action::ReplaceCommit => {
                i.action.is_write() && upto.is_none_or(|u| i.requested_time <= *u)
            }
            Action::Clean | Action::Rollback | Action::Restore => true,
            _ => false,
        })
        .map(|i| i.to_string())
        .collect()
}
