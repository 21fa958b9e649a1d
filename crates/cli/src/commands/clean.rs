//! `arbor clean <table> [--branch B] [--policy commits|versions|hours] [--retain N]
//! [--dry-run] [--no-archive] [--json]`, and `arbor clean <table> --orphans [--older-than AGE]
//! [--dry-run] [--json]`.
//!
//! Every clean goes through `arbor_branching::clean`: data files are shared by branches, so a
//! file another branch (or its tags, pending services or retention window) needs is kept.

use arbor_cleaner::{CleanOptions, CleanOutcome, CleanPolicy};
use arbor_fsview::slice::join;
use arbor_storage::StorageOptions;
use clap::Args;

use crate::context::{branching_error, cleaner_error, label, open_table_on, Progress};
use crate::error::{CliError, CliResult};
use crate::output::{human_bytes, print_json, print_text};

/// Arguments of `arbor clean`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    arbor clean ./trips --dry-run                       # what KEEP_LATEST_COMMITS 10 would delete\n  \
    arbor clean ./trips --policy versions --retain 1    # keep one slice per file group\n  \
    arbor clean ./trips --policy hours --retain 48\n  \
    arbor clean ./trips --branch audit                 # files other branches need are kept\n  \
    arbor clean ./trips --orphans --dry-run            # data files nothing references, with sizes\n  \
    arbor clean ./trips --orphans --older-than 1d")]
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
    /// Instead of a policy clean, delete the data files nothing references: no root (main,
    /// branches), tag, savepoint, clone pin or instant of any timeline (pending ones included)
    /// names them; e.g. files of dropped branches or of writers that died before recording
    /// anything. Files under `.hoodie/` and of tables nested in the directory are never touched.
    #[arg(long, conflicts_with_all = ["policy", "retain", "no_archive"])]
    pub orphans: bool,
    /// With `--orphans`: only files last modified longer ago than AGE (a whole number followed
    /// by d, h, m or s; default 1h), so writers that do not share arbor's lock are safe.
    #[arg(long, value_name = "AGE", requires = "orphans")]
    pub older_than: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Parses an `--older-than` age: a whole number (0 allowed) followed by d, h, m or s.
fn parse_age(s: &str) -> CliResult<std::time::Duration> {
    let bad = || {
        CliError::Usage(format!(
            "--older-than expects a whole number followed by d, h, m or s (1d, 12h, 30m, 0s), \
             got {s:?}"
        ))
    };
    let t = s.trim();
    let unit = t.chars().last().ok_or_else(bad)?;
    let digits = t.strip_suffix(unit).ok_or_else(bad)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let per_unit: u64 = match unit {
        'd' => 86_400,
        'h' => 3_600,
        'm' => 60,
        's' => 1,
        _ => return Err(bad()),
    };
    n.checked_mul(per_unit)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| CliError::Usage(format!("--older-than {s:?} is too long")))
}

/// `arbor clean --orphans`.
async fn run_orphans(args: &CleanArgs, options: &StorageOptions) -> CliResult<()> {
    let min_age = match &args.older_than {
        Some(a) => parse_age(a).map_err(|e| CliError::at(&args.table, e))?,
        None => arbor_cleaner::reclaim::DEFAULT_ORPHAN_MIN_AGE,
    };
    let table = open_table_on(&args.table, options, &args.branch).await?;
    let progress = Progress::start(if args.dry_run {
        "looking for unreferenced files"
    } else {
        "deleting unreferenced files"
    });
    let outcome = arbor_cleaner::reclaim::clean_orphans(&table, min_age, args.dry_run)
        .await
        .map_err(|e| cleaner_error(&args.table, e))?;
    progress.finish();
    if args.json {
        return print_json(&serde_json::json!({
            "table": args.table,
            "dry_run": args.dry_run,
            "older_than_s": min_age.as_secs(),
            "files": outcome.files,
            "bytes": outcome.bytes(),
            "too_young": outcome.too_young,
            "dropped_branch_ledgers": outcome.ledgers,
        }));
    }
    let mut lines: Vec<String> = Vec::new();
    if args.dry_run {
        for f in &outcome.files {
            lines.push(format!("{}\t{}", f.key, human_bytes(f.size)));
        }
    }
    let verb = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    lines.push(format!(
        "{}: {verb} {} unreferenced file(s), {}{}",
        args.table,
        outcome.files.len(),
        human_bytes(outcome.bytes()),
        if outcome.too_young > 0 {
            format!(
                "; {} more modified within the last {} s are left (--older-than)",
                outcome.too_young,
                min_age.as_secs()
            )
        } else {
            String::new()
        }
    ));
    print_text(&lines.join("\n"))
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
    if args.orphans {
        return run_orphans(&args, options).await;
    }
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
            "reclaimed_files": outcome.reclaimed.files.len(),
            "reclaimed_bytes": outcome.reclaimed.bytes(),
        }));
    }
    let table = &label(&args.table, &args.branch);
    if !outcome.reclaimed.files.is_empty() {
        print_text(&format!(
            "{table}: {} {} file(s) ({}) of dropped branches that nothing references",
            if args.dry_run {
                "would reclaim"
            } else {
                "reclaimed"
            },
            outcome.reclaimed.files.len(),
            human_bytes(outcome.reclaimed.bytes())
        ))?;
    }
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
