//! What a table's configuration says about when its services are due (Hudi's keys and
//! defaults), and the timeline counts they are judged by.

use std::collections::BTreeMap;

use arbor_cleaner::CleanPolicy;
use arbor_timeline::{Action, ActiveTimeline, TableConfig};

use crate::error::{BranchingError, Result};

/// The service thresholds of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfig {
    /// `hoodie.compact.inline.max.delta.commits` (default 5).
    pub compact_every: usize,
    /// `hoodie.clustering.inline` or `hoodie.clustering.async.enabled` is `true`.
    pub clustering_enabled: bool,
    /// `hoodie.clustering.inline.max.commits`, else `hoodie.clustering.async.max.commits`
    /// (default 4).
    pub cluster_every: usize,
    /// `hoodie.keep.max.commits` (default 30).
    pub keep_max_commits: usize,
    /// `hoodie.log.compaction.enable` is `true`.
    pub log_compaction_enabled: bool,
    /// `hoodie.log.compaction.blocks.threshold` (default 5).
    pub log_compaction_threshold: usize,
}

/// Settings: the caller's overrides, then the table's `hoodie.properties`.
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    /// `KEY=VALUE` pairs given for this run (win over the table's).
    pub overrides: &'a BTreeMap<String, String>,
    /// The table's properties.
    pub config: &'a TableConfig,
}

impl Settings<'_> {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<String> {
        self.overrides
            .get(key)
            .cloned()
            .or_else(|| self.config.get(key).map(str::to_string))
    }
}

fn number(config: &Settings<'_>, keys: &[&str], default: usize) -> usize {
    keys.iter()
        .find_map(|k| config.get(k))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn flag(config: &Settings<'_>, key: &str) -> bool {
    config
        .get(key)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

impl ServiceConfig {
    /// The thresholds `config` sets (Hudi's defaults for the keys it lacks; a value that does
    /// not parse counts as absent).
    pub fn of(config: &Settings<'_>) -> Self {
        ServiceConfig {
            compact_every: number(config, &["hoodie.compact.inline.max.delta.commits"], 5).max(1),
            clustering_enabled: flag(config, "hoodie.clustering.inline")
                || flag(config, "hoodie.clustering.async.enabled"),
            cluster_every: number(
                config,
                &[
                    "hoodie.clustering.inline.max.commits",
                    "hoodie.clustering.async.max.commits",
                ],
                4,
            )
            .max(1),
            keep_max_commits: number(config, &["hoodie.keep.max.commits"], 30),
            log_compaction_enabled: flag(config, "hoodie.log.compaction.enable"),
            log_compaction_threshold: number(
                config,
                &["hoodie.log.compaction.blocks.threshold"],
                5,
            )
            .max(2),
        }
    }
}

/// The clean policy `config` names (`hoodie.clean.policy`, or the older
/// `hoodie.cleaner.policy`) with its retained count (`hoodie.clean.commits.retained` /
/// `hoodie.cleaner.commits.retained`, `...fileversions.retained`, `...hours.retained`);
/// Hudi's defaults (`KEEP_LATEST_COMMITS`, 10 commits, 3 versions, 24 hours). An unknown
/// policy name is an error naming it.
pub fn clean_policy_from_config(config: &Settings<'_>) -> Result<CleanPolicy> {
    let name = ["hoodie.clean.policy", "hoodie.cleaner.policy"]
        .iter()
        .find_map(|k| config.get(k))
        .unwrap_or_else(|| "KEEP_LATEST_COMMITS".to_string())
        .trim()
        .to_ascii_uppercase();
    Ok(match name.as_str() {
        "KEEP_LATEST_COMMITS" => CleanPolicy::KeepLatestCommits(number(
            config,
            &[
                "hoodie.clean.commits.retained",
                "hoodie.cleaner.commits.retained",
            ],
            10,
        )),
        "KEEP_LATEST_FILE_VERSIONS" => CleanPolicy::KeepLatestFileVersions(number(
            config,
            &[
                "hoodie.clean.fileversions.retained",
                "hoodie.cleaner.fileversions.retained",
            ],
            3,
        )),
        "KEEP_LATEST_BY_HOURS" => CleanPolicy::KeepLatestByHours(number(
            config,
            &[
                "hoodie.clean.hours.retained",
                "hoodie.cleaner.hours.retained",
            ],
            24,
        ) as u64),
        other => {
            return Err(BranchingError::Service {
                service: "clean".to_string(),
                reason: format!(
                    "hoodie.clean.policy={other:?}: expected KEEP_LATEST_COMMITS, \
                     KEEP_LATEST_FILE_VERSIONS or KEEP_LATEST_BY_HOURS"
                ),
            })
        }
    })
}

/// Completed delta commits after the last completed compaction.
pub(crate) fn delta_commits_since_compaction(tl: &ActiveTimeline) -> usize {
    let done = tl.completed();
    let last = done
        .iter()
        .filter(|i| i.action == Action::Commit)
        .map(|i| i.requested_time.clone())
        .max();
    done.iter()
        .filter(|i| i.action == Action::DeltaCommit)
        .filter(|i| last.as_ref().is_none_or(|l| &i.requested_time > l))
        .count()
}

/// Completed writes after the last completed clustering (a replacecommit whose operation is
/// `CLUSTER`; read from its content).
pub(crate) fn commits_since_clustering(tl: &ActiveTimeline) -> usize {
    let done = tl.completed();
    let mut count = 0;
    for i in done.iter().rev() {
        if i.action == Action::ReplaceCommit && is_clustering(tl, i) {
            break;
        }
        if matches!(
            i.action,
            Action::Commit | Action::DeltaCommit | Action::ReplaceCommit
        ) {
            count += 1;
        }
    }
    count
}

/// True when `i` (a completed replacecommit) was a clustering: its pending states were
/// `clustering` instants (layout 2).
fn is_clustering(tl: &ActiveTimeline, i: &arbor_timeline::Instant) -> bool {
    [Action::Clustering, Action::ReplaceCommit].iter().any(|a| {
        tl.get(&i.requested_time, *a)
            .is_some_and(|f| f.pending_action == Action::Clustering)
    })
}
