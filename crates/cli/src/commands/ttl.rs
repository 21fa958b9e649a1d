//! `arbor ttl set|unset|show|run <table>`: partition TTL policies (RFC-65), kept in
//! `hoodie.properties`, and the runs that delete expired partitions (one `DELETE_PARTITION`
//! replacecommit; `arbor clean` later reclaims the files nothing else reads).

use std::collections::BTreeMap;

use arbor_storage::StorageOptions;
use arbor_table::read::parse_datetime;
use arbor_table::ttl::{
    Expired, PolicyScope, Retention, TtlOutcome, TtlPolicies, TtlPolicy, TtlRunOptions, TtlStrategy,
};
use arbor_table::Table;
use arbor_timeline::config::TimelineTimezone;
use arbor_timeline::InstantTime;
use chrono::{DateTime, TimeZone, Utc};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::context::{cleaner_error, label, open_table_on, Progress, MAIN};
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_table, print_text};

/// Arguments of `arbor ttl`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    arbor ttl set ./events --policy time --retain 30d                 # whole table, by last write\n  \
    arbor ttl set ./events --policy event-time --retain 90d --time-field dt --format yyyy-MM-dd\n  \
    arbor ttl set ./events --policy count --retain 7 --fields region  # 7 newest per region\n  \
    arbor ttl set ./events --policy size --retain 100GiB --spec region=eu\n  \
    arbor ttl show ./events\n  \
    arbor ttl run ./events --dry-run --now 2027-01-01                  # what goes by then\n  \
    arbor ttl run ./events && arbor clean ./events                    # delete, then reclaim")]
pub struct TtlArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TtlCommand,
}

/// The `arbor ttl` subcommands.
#[derive(Debug, Subcommand)]
pub enum TtlCommand {
    /// Set a policy: the default one (optionally grouped by high-level partition fields with
    /// --fields), or one for the partitions of --spec, which overrides the default there.
    /// Replaces the policy of the same scope.
    Set(SetArgs),
    /// Remove the default policy, or the one of --spec.
    Unset {
        /// The table's base path or URL.
        table: String,
        /// The partition spec whose policy to remove (default: the default policy).
        #[arg(long, value_name = "SPEC")]
        spec: Option<String>,
        /// The branch whose policies to change.
        #[arg(long, value_name = "B", default_value = MAIN)]
        branch: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show the policies.
    Show {
        /// The table's base path or URL.
        table: String,
        /// The branch whose policies to show.
        #[arg(long, value_name = "B", default_value = MAIN)]
        branch: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Delete the partitions the policies expire (one DELETE_PARTITION replacecommit); their
    /// files stay until `arbor clean` finds no tag, branch, savepoint or clone reading them.
    Run(RunArgs),
}

/// Arguments of `arbor ttl set`.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// The table's base path or URL.
    pub table: String,
    /// `time` (newest base file of the partition's latest slices + retention), `creation-time`
    /// (the partition's creation commit + retention), `event-time` (the time in a partition
    /// field + retention), `count` (keep the N greatest partition values per group) or `size`
    /// (keep the greatest partition values whose latest files fit in N bytes, per group).
    #[arg(long, value_name = "POLICY")]
    pub policy: String,
    /// A duration for the time policies (`30d`, `12h`; days are 24 hours), a whole number for
    /// count, bytes for size (`107374182400`, `100GiB`).
    #[arg(long, value_name = "VALUE")]
    pub retain: String,
    /// The partitions this policy is for (`region=eu`); without it, the default policy.
    #[arg(long, value_name = "SPEC", conflicts_with = "fields")]
    pub spec: Option<String>,
    /// The default policy's groups: one per value of these leading partition fields
    /// (`region`); count and size policies apply per group.
    #[arg(long, value_name = "COLS", value_delimiter = ',')]
    pub fields: Vec<String>,
    /// event-time: the partition field holding the time.
    #[arg(long, value_name = "COL")]
    pub time_field: Option<String>,
    /// event-time: the pattern of its values, Java style (`yyyy-MM-dd`, `yyyyMMdd`,
    /// `yyyy-MM-dd-HH`); read as UTC.
    #[arg(long, value_name = "PATTERN")]
    pub format: Option<String>,
    /// The branch whose policies to change.
    #[arg(long, value_name = "B", default_value = MAIN)]
    pub branch: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `arbor ttl run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The table's base path or URL.
    pub table: String,
    /// Print what the run would delete (and which refs would keep its files), change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Evaluate the policies as of this time instead of now: an RFC 3339 or ISO time
    /// (`2027-01-01`, `2027-01-01T10:00:00Z`; without a zone, UTC) or an instant time (on the
    /// table's timeline clock).
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    /// Delete at most N partitions, oldest first; the rest wait for the next run.
    #[arg(long, value_name = "N")]
    pub max_partitions: Option<usize>,
    /// The branch to run on (only its partitions are deleted).
    #[arg(long, value_name = "B", default_value = MAIN)]
    pub branch: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Parses `--now`: an instant time (digits, on the timeline's clock `zone`) or an RFC 3339 /
/// ISO date or time (UTC without a zone).
pub fn parse_now(s: &str, zone: TimelineTimezone) -> CliResult<DateTime<Utc>> {
    let bad = || {
        CliError::Usage(format!(
            "--now: {s:?} is neither an instant time (yyyyMMddHHmmss[SSS]) nor an RFC 3339 or \
             ISO date/time (2027-01-01, 2027-01-01T10:00:00Z)"
        ))
    };
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        let instant = InstantTime::parse(s).map_err(|e| CliError::Usage(format!("--now: {e}")))?;
        let wall = instant.to_datetime().ok_or_else(bad)?.naive_utc();
        return match zone {
            TimelineTimezone::Utc => Ok(Utc.from_utc_datetime(&wall)),
            TimelineTimezone::Local => chrono::Local
                .from_local_datetime(&wall)
                .earliest()
                .map(|t| t.with_timezone(&Utc))
                .ok_or_else(bad),
        };
    }
    let parsed = parse_datetime(s).ok_or_else(bad)?;
    Ok(Utc.from_utc_datetime(&parsed.to_utc_naive()))
}

/// The policy `arbor ttl set` describes, checked for what needs no table.
fn policy_of(args: &SetArgs) -> CliResult<TtlPolicy> {
    let strategy = TtlStrategy::parse(&args.policy).map_err(|e| usage("--policy", e))?;
    let retain = Retention::parse(strategy, &args.retain).map_err(|e| usage("--retain", e))?;
    let scope = match &args.spec {
        Some(spec) => PolicyScope::Spec(spec.clone()),
        None => PolicyScope::Default {
            fields: args.fields.clone(),
        },
    };
    Ok(TtlPolicy {
        strategy,
        retain,
        scope,
        time_field: args.time_field.clone(),
        format: args.format.clone(),
    })
}

fn usage(flag: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Usage(format!("{flag}: {e}"))
}

/// The scope column of `ttl show`.
fn scope_text(p: &TtlPolicy) -> String {
    match &p.scope {
        PolicyScope::Default { fields } if fields.is_empty() => "default".to_string(),
        PolicyScope::Default { fields } => format!("default (per {})", fields.join(", ")),
        PolicyScope::Spec(spec) => spec.clone(),
    }
}

fn policy_json(p: &TtlPolicy) -> Value {
    let (kind, fields, spec) = match &p.scope {
        PolicyScope::Default { fields } => ("default", fields.clone(), None),
        PolicyScope::Spec(s) => ("spec", Vec::new(), Some(s.clone())),
    };
    json!({
        "scope": kind,
        "spec": spec,
        "fields": fields,
        "policy": p.strategy.name(),
        "hudi_policy": p.strategy.hudi_name(),
        "retain": p.retain.to_string(),
        "retain_value": match p.retain {
            Retention::Duration(d) => d.as_secs(),
            Retention::Count(n) | Retention::Bytes(n) => n,
        },
        "time_field": p.time_field,
        "format": p.format,
    })
}

fn every_policy(p: &TtlPolicies) -> impl Iterator<Item = &TtlPolicy> {
    p.default.iter().chain(p.explicit.iter())
}

fn policies_json(table: &str, branch: &str, p: &TtlPolicies) -> Value {
    json!({
        "table": table,
        "branch": branch,
        "policies": every_policy(p).map(policy_json).collect::<Vec<_>>(),
        "inline": p.inline,
        "max_partitions": p.max_partitions,
    })
}

/// Prints the policies as a table (or a line saying there are none).
fn print_policies(location: &str, p: &TtlPolicies) -> CliResult<()> {
    if p.is_empty() {
        return print_text(&format!(
            "{location}: no TTL policy (arbor ttl set {location} --policy ... --retain ...)"
        ));
    }
    let rows: Vec<Vec<String>> = every_policy(p)
        .map(|pol| {
            vec![
                scope_text(pol),
                pol.strategy.name().to_string(),
                pol.retain.to_string(),
                match (&pol.time_field, &pol.format) {
                    (Some(f), Some(fmt)) => format!("{f} as {fmt}"),
                    (Some(f), None) => f.clone(),
                    _ => String::new(),
                },
            ]
        })
        .collect();
    print_table(&["SCOPE", "POLICY", "RETAIN", "TIME FIELD"], rows)?;
    let mut notes = Vec::new();
    if p.inline {
        notes.push("runs after every write (hoodie.partition.ttl.inline=true)".to_string());
    }
    if let Some(n) = p.max_partitions {
        notes.push(format!("at most {n} partitions per run"));
    }
    if notes.is_empty() {
        Ok(())
    } else {
        print_text(&notes.join("; "))
    }
}

/// Runs the command.
pub async fn run(args: TtlArgs, options: &StorageOptions) -> CliResult<()> {
    match args.command {
        TtlCommand::Set(set) => {
            let policy = policy_of(&set).map_err(|e| CliError::at(&set.table, e))?;
            let table = open_table_on(&set.table, options, &set.branch).await?;
            let shown = policy.to_string();
            let all = table
                .set_ttl_policy(policy)
                .await
                .map_err(|e| CliError::at(&set.table, e))?;
            if set.json {
                return print_json(&policies_json(&set.table, &set.branch, &all));
            }
            print_text(&format!(
                "{}: TTL policy set: {shown}",
                label(&set.table, &set.branch)
            ))
        }
        TtlCommand::Unset {
            table: location,
            spec,
            branch,
            json,
        } => {
            let table = open_table_on(&location, options, &branch).await?;
            let all = table
                .unset_ttl_policy(spec.as_deref())
                .await
                .map_err(|e| CliError::at(&location, e))?;
            if json {
                return print_json(&policies_json(&location, &branch, &all));
            }
            print_text(&format!(
                "{}: TTL policy removed: {}",
                label(&location, &branch),
                spec.as_deref().unwrap_or("default")
            ))
        }
        TtlCommand::Show {
            table: location,
            branch,
            json,
        } => {
            let table = open_table_on(&location, options, &branch).await?;
            let all = table
                .ttl_policies()
                .map_err(|e| CliError::at(&location, e))?;
            if json {
                return print_json(&policies_json(&location, &branch, &all));
            }
            print_policies(&label(&location, &branch), &all)
        }
        TtlCommand::Run(run) => run_ttl(run, options).await,
    }
}

async fn run_ttl(args: RunArgs, options: &StorageOptions) -> CliResult<()> {
    let table = open_table_on(&args.table, options, &args.branch).await?;
    let now = args
        .now
        .as_deref()
        .map(|s| parse_now(s, table.config().timeline_timezone()))
        .transpose()
        .map_err(|e| CliError::at(&args.table, e))?;
    if args.max_partitions == Some(0) {
        return Err(CliError::at(
            &args.table,
            CliError::Usage("--max-partitions expects at least 1".into()),
        ));
    }
    let progress = Progress::start(if args.dry_run {
        "planning the TTL run"
    } else {
        "running TTL"
    });
    let outcome = table
        .run_ttl(&TtlRunOptions {
            now,
            dry_run: args.dry_run,
            max_partitions: args.max_partitions,
        })
        .await
        .map_err(|e| CliError::at(&args.table, e))?;
    // Which refs keep the files of what is (or would be) deleted: the cleaner decides.
    let expired: Vec<String> = outcome
        .plan
        .expired
        .iter()
        .map(|e| e.partition.clone())
        .collect();
    let holders = if args.dry_run && !expired.is_empty() {
        arbor_cleaner::holders_of_partitions(&table, &expired)
            .await
            .map_err(|e| cleaner_error(&args.table, e))?
    } else {
        BTreeMap::new()
    };
    progress.finish();
    if args.json {
        return print_json(&run_json(&args, &table, &outcome, &holders));
    }
    print_text(&run_text(&args, &outcome, &holders))
}

fn expired_json(e: &Expired, holders: &BTreeMap<String, Vec<String>>) -> Value {
    json!({
        "partition": e.partition,
        "policy": e.policy,
        "reason": e.reason,
        "kept_by": holders.get(&e.partition).cloned().unwrap_or_default(),
    })
}

fn run_json(
    args: &RunArgs,
    table: &Table,
    outcome: &TtlOutcome,
    holders: &BTreeMap<String, Vec<String>>,
) -> Value {
    let plan = &outcome.plan;
    json!({
        "table": args.table,
        "branch": args.branch,
        "table_name": table.config().name(),
        "now": plan.now.to_rfc3339(),
        "dry_run": args.dry_run,
        "partitions": plan.partitions,
        "expired": plan.expired.iter().map(|e| expired_json(e, holders)).collect::<Vec<_>>(),
        "capped": plan.capped.iter().map(|e| expired_json(e, holders)).collect::<Vec<_>>(),
        "skipped": plan.skipped.iter().map(|s| json!({"partition": s.partition, "reason": s.reason})).collect::<Vec<_>>(),
        "instant": outcome.commit.as_ref().map(|c| c.instant.to_string()),
        "completed": outcome.commit.as_ref().map(|c| c.completion_time.to_string()),
    })
}

fn run_text(
    args: &RunArgs,
    outcome: &TtlOutcome,
    holders: &BTreeMap<String, Vec<String>>,
) -> String {
    let plan = &outcome.plan;
    let place = label(&args.table, &args.branch);
    let when = plan.now.format("%Y-%m-%d %H:%M:%S UTC");
    let mut out = format!(
        "{place}: TTL as of {when}: {} of {} partition(s) expired",
        plan.expired.len() + plan.capped.len(),
        plan.partitions
    );
    let verb = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    for e in &plan.expired {
        out.push_str(&format!(
            "\n  {verb}  {}  ({}: {})",
            e.partition, e.policy, e.reason
        ));
        if let Some(h) = holders.get(&e.partition).filter(|h| !h.is_empty()) {
            out.push_str(&format!(
                "\n      its files stay (until `arbor clean` finds them unused) for: {}",
                h.join(", ")
            ));
        }
    }
    for e in &plan.capped {
        out.push_str(&format!(
            "\n  next run  {}  ({}: {}; over --max-partitions)",
            e.partition, e.policy, e.reason
        ));
    }
    for s in &plan.skipped {
        out.push_str(&format!("\n  skipped  {}  ({})", s.partition, s.reason));
    }
    match (&outcome.commit, args.dry_run) {
        (_, true) => out.push_str("\n(dry run: nothing changed)"),
        (Some(c), false) => {
            out.push_str(&format!(
                "\nreplacecommit {} (DELETE_PARTITION, completed {})",
                c.instant, c.completion_time
            ));
            out.push_str(&reclaim_note(
                &args.table,
                &args.branch,
                &c.instant.to_string(),
            ));
        }
        (None, false) => out.push_str("\nnothing to delete"),
    }
    out
}

/// What a clean needs to delete the files of the partitions a TTL run deleted at `instant`:
/// time travel to before `instant` still reads them, so the default policy
/// (`KEEP_LATEST_COMMITS 10`: the snapshots as of the 10 latest completed writes, the
/// replacecommit included) keeps them until 9 more writes have completed after it; a policy
/// keeping only the latest snapshot deletes them at once. Files a tag, branch, savepoint or
/// clone reads stay either way.
fn reclaim_note(table: &str, branch: &str, instant: &str) -> String {
    let default = arbor_cleaner::CleanPolicy::default();
    let n = match default {
        arbor_cleaner::CleanPolicy::KeepLatestCommits(n) => n,
        _ => 10,
    };
    let on = if branch == MAIN {
        String::new()
    } else {
        format!(" --branch {branch}")
    };
    format!(
        "\nthe deleted partitions' files stay readable by time travel to before {instant}; \
         `arbor clean {table}{on}` (default policy: the snapshots of the {n} latest writes) deletes \
         them once {} more write(s) have completed after {instant}; `arbor clean {table}{on} \
         --retain 1` deletes them now (ending time travel to before {instant}); files a tag, \
         branch, savepoint or clone reads stay until it is dropped",
        n.saturating_sub(1)
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_parse_now_forms() {
        let utc = TimelineTimezone::Utc;
        let t = |s: &str| parse_now(s, utc).unwrap().to_rfc3339();
        assert_eq!(t("2027-01-01"), "2027-01-01T00:00:00+00:00");
        assert_eq!(t("2027-01-01T10:00:00Z"), "2027-01-01T10:00:00+00:00");
        assert_eq!(t("2027-01-01T10:00:00+02:00"), "2027-01-01T08:00:00+00:00");
        assert_eq!(t("20270101100000123"), "2027-01-01T10:00:00.123+00:00");
        for bad in ["", "next week", "2027-13-01", "2027"] {
            let e = parse_now(bad, utc).unwrap_err().to_string();
            assert!(e.contains("--now"), "{bad}: {e}");
        }
    }
}
