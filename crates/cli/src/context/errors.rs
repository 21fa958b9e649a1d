//! Library errors as CLI errors: wrapped library errors keep their own kind; the `*_error`
//! forms add the table location.

use arbor_branching::BranchingError;
use arbor_cleaner::CleanerError;

use crate::error::CliError;

/// A branching failure as a CLI error: wrapped library errors keep their own kind, a divergent
/// publication becomes one line naming the instants on each side.
pub fn from_branching(e: BranchingError) -> CliError {
    match e {
        BranchingError::Cleaner(e) => from_cleaner(e),
        BranchingError::Table(e) => CliError::Table(e),
        BranchingError::Timeline(e) => CliError::Timeline(e),
        BranchingError::Storage(e) => CliError::Storage(e),
        BranchingError::Divergent {
            branch,
            base,
            missing_on_branch,
            branch_only,
        } => CliError::Usage(format!(
            "publish {branch} refused: main has writes after the branch's base {base} that the \
             branch does not have: {} (the branch's own writes since then: {}); branches \
             publish only by fast-forward: rebase it onto main's head first (`arbor branch \
             rebase <table> {branch}`), or merge it into main (`arbor branch merge <table> \
             {branch}`)",
            list_or_none(&missing_on_branch),
            list_or_none(&branch_only)
        )),
        other => CliError::Branching(other),
    }
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

/// A branching failure as one line naming the table.
pub fn branching_error(location: &str, e: BranchingError) -> CliError {
    CliError::at(location, from_branching(e))
}

/// A cleaner, savepoint or archival failure as a CLI error.
pub fn from_cleaner(e: CleanerError) -> CliError {
    match e {
        CleanerError::Table(e) => CliError::Table(e),
        CleanerError::Timeline(e) => CliError::Timeline(e),
        CleanerError::Storage(e) => CliError::Storage(e),
        other => CliError::Usage(other.to_string()),
    }
}

/// A cleaner, savepoint or archival failure as one line naming the table.
pub fn cleaner_error(location: &str, e: CleanerError) -> CliError {
    CliError::at(location, from_cleaner(e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_from_branching_divergent_names_instants() {
        let e = from_branching(BranchingError::Divergent {
            branch: "audit".into(),
            base: "20250101000000000".into(),
            missing_on_branch: vec!["20250102000000000".into()],
            branch_only: vec![],
        });
        let text = e.to_string();
        assert!(text.contains("20250102000000000"), "{text}");
        assert!(text.contains("own writes since then: none"), "{text}");
        assert!(text.contains("fast-forward"), "{text}");
    }
}
