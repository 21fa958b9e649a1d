//! `arbor restore <table> --to <instant> [--branch B] [--json]`: roll a branch of the table back
//! to a savepoint. Goes through `arbor_branching::restore`: an instant another branch also has
//! is never rolled back.

use arbor_branching::restore;
use arbor_storage::StorageOptions;
use clap::Args;

use crate::context::{branching_error, label, open_table_on, parse_instant};
use crate::error::CliResult;
use crate::output::{print_json, print_text};

/// Arguments of `arbor restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The savepointed instant to restore to (`arbor savepoint list` shows them).
    #[arg(long, value_name = "T")]
    pub to: String,
    /// The branch to restore (main, or a working branch).
    #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
    pub branch: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command: restores the table to its savepoint at `--to` (every later write,
/// compaction and clustering is rolled back; a restore instant records it) and prints the
/// restore instant and the instants rolled back, newest first. Refusals (no such savepoint, a
/// newer savepoint, a pending clean) change nothing.
pub async fn run(args: RestoreArgs, options: &StorageOptions) -> CliResult<()> {
    let to = parse_instant("--to", &args.to)?;
    let table = open_table_on(&args.table, options, &args.branch).await?;
    let outcome = restore(&table, &to)
        .await
        .map_err(|e| branching_error(&args.table, e))?;
    let rolled_back: Vec<String> = outcome
        .rolled_back
        .iter()
        .map(ToString::to_string)
        .collect();
    if args.json {
        return print_json(&serde_json::json!({
            "table": args.table,
            "branch": args.branch,
            "restored_to": to.to_string(),
            "restore_instant": outcome.instant.to_string(),
            "rolled_back": rolled_back,
        }));
    }
    for t in &rolled_back {
        print_text(&format!("rolled back {t}"))?;
    }
    print_text(&format!(
        "{}: restored to savepoint {to} (restore {}, {} instant(s) rolled back)",
        label(&args.table, &args.branch),
        outcome.instant,
        rolled_back.len()
    ))
}
