//! `arbor clean <table> [--branch B] [--policy commits|versions|hours] [--retain N]
//! [--dry-run] [--no-archive] [--json]`.
//!
//! Every clean goes through `arbor_branching::clean`: data files are shared by branches, so a
//! file another branch (or its tags, pending services or retention window) needs is kept.

use arbor_cleaner::{CleanOptions, CleanOutcome, CleanPolicy};
use arbor_fsview::slice::join;
use arbor_storage::StorageOptions;
use clap::Args;

use crate::context::{branching_error, label, open_table_on, Progress};
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_text};

/// Arguments of `arbor clean`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    arbor clean ./trips --dry-run                       # what KEEP_LATEST_COMMITS 10 would delete\n  \
    arbor clean ./trips --policy versions --retain 1    # keep one slice per file group\n  \
    arbor clean ./trips --policy hours --retain 48\n  \
    arbor clean ./trips --branch audit                 # files other branches need are kept")]
pub struct CleanArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The branch to clean (main, or a working branch). Files any other branch needs are kept.
    #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
    pub branch: String,
    /// What to keep: `commits` (every snapshot of the N latest writes), `versions` (the N
    /// latest slices of every file group) or `hours` (every snapshot of the last N hours).
    /// Savepointed snapshots and files of pending instants are always kept.
    #[arg(long, value_name = "commits|versions|hours", default_value = "commits")]
    pub policy: String,
    /// N of the policy (default: 10 commits, 3 versions, 24 hours, as Hudi).
    #[arg(long, value_name = "N")]
    pub retain: Option<String>,
    /// Print the files a clean would delete, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not archive the timeline after cleaning.
    #[arg(long)]
    pub no_archive: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The policy the arguments name.
fn policy(args: &CleanArgs) -> CliResult<CleanPolicy> {
    let retain = match &args.retain {
        None => None,
        Some(r) => match r.trim().parse::<u64>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                return Err(CliError::Usage(format!(
                    "--retain expects a whole number of at least 1, got {r:?}"
                )))
            }
        },
    };
    let count = |default: usize| -> CliResult<usize> {
        retain.map_or(Ok(default), |n| {
            usize::try_from(n).map_err(|_| CliError::Usage(format!("--retain {n} is too large")))
        })
    };
    match args.policy.as_str() {
        "commits" => Ok(CleanPolicy::KeepLatestCommits(count(10)?)),
        "versions" => Ok(CleanPolicy::KeepLatestFileVersions(count(3)?)),
        "hours" => Ok(CleanPolicy::KeepLatestByHours(retain.unwrap_or(24))),
        other => Err(CliError::Usage(format!(
            "--policy expects commits, versions or hours, got {other:?}"
        ))),
    }
}

/// Every planned file as `partition/name`.
fn planned_files(outcome: &CleanOutcome) -> Vec<String> {
    outcome
        .plan
        .iter()
        .flat_map(|(p, names)| names.iter().map(move |n| join(p, n)))
        .collect()
}

/// Runs the command.
pub async fn run(args: CleanArgs, options: &StorageOptions) -> CliResult<()> {
    let policy = policy(&args).map_err(|e| CliError::at(&args.table, e))?;
    let table = open_table_on(&args.table, options, &args.branch).await?;
    let progress = Progress::start(if args.dry_run {
        "planning the clean"
    } else {
        "cleaning"
    });
    let outcome = arbor_branching::clean(
        &table,
        CleanOptions {
            policy,
            dry_run: args.dry_run,
            archive: !args.no_archive,
            extra_sources: Vec::new(),
        },
    )
    .await
    .map_err(|e| branching_error(&args.table, e))?;
    progress.finish();
    let files = planned_files(&outcome);
    if args.json {
        return print_json(&serde_json::json!({
            "table": args.table,
            "branch": args.branch,
            "policy": policy.hudi_name(),
            "retain": match policy {
                CleanPolicy::KeepLatestCommits(n) | CleanPolicy::KeepLatestFileVersions(n) => n as u64,
                CleanPolicy::KeepLatestByHours(h) => h,
            },
            "dry_run": args.dry_run,
            "instant": outcome.instant.as_ref().map(ToString::to_string),
            "earliest_retained": outcome.earliest_retained.as_ref().map(ToString::to_string),
            "finished_pending": outcome.finished_pending.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "planned": outcome.planned(),
            "deleted": outcome.deleted,
            "files": files,
            "partitions_removed": outcome.partitions_deleted.iter().collect::<Vec<_>>(),
            "archived": outcome.archived,
        }));
    }
    let table = &label(&args.table, &args.branch);
    for t in &outcome.finished_pending {
        print_text(&format!("{table}: finished pending clean {t}"))?;
    }
    let retained = outcome
        .earliest_retained
        .as_ref()
        .map(|t| format!("; snapshots from {t} on are kept"))
        .unwrap_or_default();
    let removed = outcome
        .partitions_deleted
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if args.dry_run {
        for f in &files {
            print_text(f)?;
        }
        if !removed.is_empty() {
            print_text(&format!(
                "{table}: deleted partition(s) whose marker and directory would be removed: {removed}"
            ))?;
        }
        return print_text(&format!(
            "{table}: dry run ({policy}): {} file(s) in {} partition(s) would be deleted{retained}",
            files.len(),
            outcome.plan.len()
        ));
    }
    match &outcome.instant {
        Some(instant) => print_text(&format!(
            "{table}: clean {instant} ({policy}) deleted {} file(s) in {} partition(s){retained}",
            outcome.deleted,
            outcome.plan.len()
        ))?,
        None => print_text(&format!("{table}: nothing to clean ({policy}){retained}"))?,
    }
    if !removed.is_empty() {
        print_text(&format!(
            "{table}: removed deleted partition(s) nothing keeps: {removed}"
        ))?;
    }
    if !args.no_archive {
        print_text(&format!(
            "{table}: archived {} instant(s)",
            outcome.archived
        ))?;
    }
    Ok(())
}
