//! Clean policies (spec 7.1, 7.3).

use std::fmt;

/// How much history a clean keeps (Hudi's `hoodie.clean.policy` with its retained count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanPolicy {
    /// `KEEP_LATEST_COMMITS`: every snapshot as of the `n` latest completed writes stays
    /// readable (Java default: 10).
    KeepLatestCommits(usize),
    /// `KEEP_LATEST_FILE_VERSIONS`: the latest `n` slices of every live file group are kept
    /// (Java default: 3); replaced file groups are removed.
    KeepLatestFileVersions(usize),
    /// `KEEP_LATEST_BY_HOURS`: every snapshot as of a write completed within the last `n` hours
    /// stays readable (Java default: 24).
    KeepLatestByHours(u64),
}

impl Default for CleanPolicy {
    fn default() -> Self {
        CleanPolicy::KeepLatestCommits(10)
    }
}

impl CleanPolicy {
    /// Hudi's name of the policy, as written in clean plans and metadata.
    pub fn hudi_name(&self) -> &'static str {
        match self {
            CleanPolicy::KeepLatestCommits(_) => "KEEP_LATEST_COMMITS",
            CleanPolicy::KeepLatestFileVersions(_) => "KEEP_LATEST_FILE_VERSIONS",
            CleanPolicy::KeepLatestByHours(_) => "KEEP_LATEST_BY_HOURS",
        }
    }
}

impl fmt::Display for CleanPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CleanPolicy::KeepLatestCommits(n) => write!(f, "KEEP_LATEST_COMMITS {n}"),
            CleanPolicy::KeepLatestFileVersions(n) => write!(f, "KEEP_LATEST_FILE_VERSIONS {n}"),
            CleanPolicy::KeepLatestByHours(n) => write!(f, "KEEP_LATEST_BY_HOURS {n}"),
        }
    }
}
