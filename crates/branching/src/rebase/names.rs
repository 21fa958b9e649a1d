//! The names a rebase of branch `b` uses besides `b`: the branch it builds the rebased state in
//! and the branch it keeps `b`'s earlier history in.

use arbor_timeline::metaroot::validate_branch_name;

use crate::error::{BranchingError, Result};

/// What the branch a rebase of `b` builds in is called after `b`.
const STAGING_SUFFIX: &str = "~rebase";
/// What the branch keeping `b`'s earlier history is called after `b`.
const KEPT_SUFFIX: &str = "-pre-rebase";

/// The branch a rebase of `branch` builds the rebased state in (`<branch>~rebase`); refused
/// when that would not be a valid branch name (too long).
pub(crate) fn staging_name(branch: &str) -> Result<String> {
    let name = format!("{branch}{STAGING_SUFFIX}");
    validate_branch_name(&name).map_err(|e| {
        BranchingError::refused(
            format!("rebase {branch}"),
            format!("the branch a rebase builds in, {name}, cannot be named: {e}"),
        )
    })?;
    Ok(name)
}

/// The candidate names of the branch keeping `branch`'s earlier history, in order of
/// preference: `<branch>-pre-rebase`, then `-2`, `-3`, ... (a bounded number).
pub(crate) fn kept_names(branch: &str) -> impl Iterator<Item = String> + '_ {
    (1..=100).map(move |n| {
        if n == 1 {
            format!("{branch}{KEPT_SUFFIX}")
        } else {
            format!("{branch}{KEPT_SUFFIX}-{n}")
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn test_names_follow_the_branch_and_overlong_names_are_refused() {
        assert_eq!(staging_name("dev").unwrap(), "dev~rebase");
        let kept: Vec<String> = kept_names("dev").take(3).collect();
        assert_eq!(
            kept,
            ["dev-pre-rebase", "dev-pre-rebase-2", "dev-pre-rebase-3"]
        );
        let long = "x".repeat(125);
        let err = staging_name(&long).unwrap_err().to_string();
        assert!(err.contains("rebase"), "{err}");
    }
}
