//! [`MergeConflict`]: a key or partition both sides of a merge changed differently, and its
//! text.

use std::fmt;

/// A key (or a partition) changed differently on both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeConflict {
    /// The partition path.
    pub partition: String,
    /// The record key (`None`: the partition as a whole).
    pub key: Option<String>,
    /// The source's side: the differing columns of its record, or what it did to the
    /// partition (`None`: deleted).
    pub source: Option<String>,
    /// The target's side, likewise.
    pub target: Option<String>,
}

impl fmt::Display for MergeConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |v: &Option<String>| v.clone().unwrap_or_else(|| "deleted".to_string());
        let place = if self.partition.is_empty() {
            String::new()
        } else {
            format!(" in {}", self.partition)
        };
        match &self.key {
            Some(k) => write!(
                f,
                "key {k}{place}: source {}; target {}",
                side(&self.source),
                side(&self.target)
            ),
            None => write!(
                f,
                "partition {:?}: source {}; target {}",
                self.partition,
                side(&self.source),
                side(&self.target)
            ),
        }
    }
}

/// The conflicts of an error message, on one line (` | ` between two), then how many more.
fn render_conflicts(conflicts: &[MergeConflict], count: usize) -> String {
    let mut parts: Vec<String> = conflicts.iter().map(ToString::to_string).collect();
    if count > conflicts.len() {
        parts.push(format!("... and {} more", count - conflicts.len()));
    }
    parts.join(" | ")
}

/// Why a merge or cherry-pick with strategy `fail` was refused
/// ([`crate::BranchingError::MergeConflicts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeRefusal {
    /// What was asked (`merge dev into main`, `cherry-pick <instant> from dev into main`).
    pub operation: String,
    /// The source ref.
    pub source_ref: String,
    /// The target branch.
    pub target: String,
    /// Where the compared changes start (the merge base, or the last merge).
    pub since: String,
    /// How many conflicts in all.
    pub count: usize,
    /// The first conflicts (at most [`crate::merge::CONFLICTS_SHOWN`]).
    pub conflicts: Vec<MergeConflict>,
}

impl fmt::Display for MergeRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} refused: {} conflict(s) (changed differently on both sides since {}; pick a \
             side with --strategy source|target|ordering, or see them all with --dry-run): {}",
            self.operation,
            self.count,
            self.since,
            render_conflicts(&self.conflicts, self.count)
        )
    }
}
