//! What `arbor branch merge`, `arbor branch rebase` and `arbor cherry-pick` share:
//! `--strategy` and the report of their outcome.

use arbor_branching::{MergeOptions, MergeOutcome, MergeStrategy, RebaseOutcome};
use clap::ValueEnum;

/// What a merge conflict does (`--strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    /// Refuse the merge, naming the conflicting keys and both values.
    Fail,
    /// Take the source's side.
    Source,
    /// Keep the target's side.
    Target,
    /// Keep the record with the greater ordering field (ties: the source's).
    Ordering,
}

impl From<StrategyArg> for MergeStrategy {
    fn from(s: StrategyArg) -> Self {
        match s {
            StrategyArg::Fail => MergeStrategy::Fail,
            StrategyArg::Source => MergeStrategy::Source,
            StrategyArg::Target => MergeStrategy::Target,
            StrategyArg::Ordering => MergeStrategy::Ordering,
        }
    }
}

/// `--json` of `arbor branch merge` and `arbor cherry-pick`.
pub fn merge_json(table: &str, o: &MergeOutcome, options: &MergeOptions) -> serde_json::Value {
    let t = |v: &Option<arbor_timeline::InstantTime>| v.as_ref().map(ToString::to_string);
    serde_json::json!({
        "table": table,
        "source": o.source.label,
        "source_instant": t(&o.source.instant),
        "target": o.target.branch_label(),
        "target_instant": t(&o.target.instant),
        "source_since": t(&o.source_since),
        "target_since": t(&o.target_since),
        "strategy": options.strategy.name(),
        "dry_run": options.dry_run,
        "up_to_date": o.is_up_to_date(),
        "inserted": o.inserts,
        "updated": o.updates,
        "deleted": o.deletes,
        "file_groups_read": o.file_groups_read,
        "conflict_count": o.conflict_count,
        "conflicts": o.conflicts.iter().map(|c| serde_json::json!({
            "partition": c.partition,
            "key": c.key,
            "source": c.source,
            "target": c.target,
        })).collect::<Vec<_>>(),
        "commit": o.commit.as_ref().map(|c| c.instant.to_string()),
        "operation": o.commit.as_ref().map(|c| c.operation.name()),
    })
}

/// The text of `arbor branch merge` and `arbor cherry-pick`.
/// `picking`: the words of a cherry-pick instead of a merge's.
pub fn merge_text(table: &str, o: &MergeOutcome, options: &MergeOptions, picking: bool) -> String {
    let (done, doing) = if picking {
        ("cherry-picked", "cherry-picking")
    } else {
        ("merged", "merging")
    };
    let target = o.target.branch_label();
    let since = o
        .source_since
        .as_ref()
        .map_or_else(|| "its first write".to_string(), |t| t.to_string());
    if o.is_up_to_date() {
        return format!(
            "{table}: {} has no change for {target} since {since} (already {})",
            o.source.label,
            if picking { "applied" } else { "up to date" }
        );
    }
    let counts = format!(
        "{} inserted, {} updated, {} deleted key(s)",
        o.inserts, o.updates, o.deletes
    );
    let mut text = match &o.commit {
        Some(c) => format!(
            "{table}: {done} {} into {target} as commit {} ({counts}; changes since {since}, \
             {} file group(s) read)",
            o.source.label, c.instant, o.file_groups_read
        ),
        None if options.dry_run => format!(
            "{table}: dry run, nothing written: {doing} {} into {target} would apply {counts} \
             (changes since {since}, {} file group(s) read)",
            o.source.label, o.file_groups_read
        ),
        None => format!(
            "{table}: nothing to write: every change of {} is already on {target} or lost to \
             --strategy {}",
            o.source.label,
            options.strategy.name()
        ),
    };
    text.push_str(&conflicts_text(o, options));
    text
}

/// The conflicts part of a merge's or rebase's text (empty without conflicts): how many, how
/// they are settled, the first ones.
fn conflicts_text(o: &MergeOutcome, options: &MergeOptions) -> String {
    if o.conflict_count == 0 {
        return String::new();
    }
    let settled = match (options.strategy, options.dry_run) {
        (MergeStrategy::Fail, _) => "they would refuse it (--strategy fail)".to_string(),
        (s, true) => format!("--strategy {} would settle them", s.name()),
        (s, false) => format!("settled by --strategy {}", s.name()),
    };
    let mut text = format!("\n{} conflict(s), {settled}:", o.conflict_count);
    for c in &o.conflicts {
        text.push_str(&format!("\n  {c}"));
    }
    if o.conflict_count > o.conflicts.len() {
        text.push_str(&format!(
            "\n  ... and {} more",
            o.conflict_count - o.conflicts.len()
        ));
    }
    text
}

/// `--json` of `arbor branch rebase`.
pub fn rebase_json(table: &str, o: &RebaseOutcome, options: &MergeOptions) -> serde_json::Value {
    let t = |v: &Option<arbor_timeline::InstantTime>| v.as_ref().map(ToString::to_string);
    serde_json::json!({
        "table": table,
        "branch": o.branch,
        "previous_base": t(&o.previous_base),
        "onto": t(&o.onto),
        "strategy": options.strategy.name(),
        "dry_run": o.dry_run,
        "up_to_date": o.up_to_date,
        "resumed": o.resumed,
        "kept": o.kept,
        "changes": o.changes.as_ref().map(|c| merge_json(table, c, options)),
    })
}

/// The text of `arbor branch rebase`.
pub fn rebase_text(table: &str, o: &RebaseOutcome, options: &MergeOptions) -> String {
    let b = &o.branch;
    let onto = o
        .onto
        .as_ref()
        .map_or_else(|| "(empty)".to_string(), ToString::to_string);
    if o.up_to_date {
        return format!(
            "{table}: branch {b} is already based on main's head {onto}; nothing to rebase"
        );
    }
    let counts = |c: &MergeOutcome| {
        format!(
            "{} inserted, {} updated, {} deleted key(s)",
            c.inserts, c.updates, c.deletes
        )
    };
    let was = o
        .previous_base
        .as_ref()
        .map_or_else(String::new, |p| format!(" (was based on {p})"));
    let mut text = if o.dry_run {
        match &o.changes {
            Some(c) => format!(
                "{table}: dry run, nothing written: rebasing branch {b} onto main's head {onto}{was} \
                 would carry {} ({} file group(s) read)",
                counts(c),
                c.file_groups_read
            ),
            None => format!(
                "{table}: dry run, nothing written: an interrupted rebase of branch {b} would be \
                 finished"
            ),
        }
    } else {
        let carried = match o.changes.as_ref() {
            Some(c) => match &c.commit {
                Some(commit) => format!("carried {} as commit {}", counts(c), commit.instant),
                None => "no change of the branch to carry".to_string(),
            },
            None => "its changes were already carried".to_string(),
        };
        let resumed = if o.resumed {
            "finished an interrupted rebase: "
        } else {
            ""
        };
        format!(
            "{table}: {resumed}branch {b} rebased onto main's head {onto}{was}; {carried}; publish \
             it by fast-forward with `arbor branch publish {table} {b}`"
        )
    };
    if let Some(k) = &o.kept {
        text.push_str(&format!(
            "\nits earlier history and the tags the rebased branch lacks are on branch {k} \
             (`arbor read {table} --branch {k} --tag <name>`; drop {k} to free its files)"
        ));
    }
    if let Some(c) = &o.changes {
        text.push_str(&conflicts_text(c, options));
    }
    text
}
