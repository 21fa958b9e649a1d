//! `arbor restore <table> --to <instant> [--json]`: roll the table back to a savepoint.

use arbor_cleaner::restore;
use arbor_storage::StorageOptions;
use arbor_table::Table;
use clap::Args;

use crate::commands::clean::cleaner_error;
use crate::commands::open_table_storage;
use crate::commands::read::parse_instant;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_text};

/// Arguments of `arbor restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The savepointed instant to restore to (`arbor savepoint list` shows them).
    #[arg(long, value_name = "T")]
    pub to: String,
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
    let storage = open_table_storage(&args.table, options)?;
    let table = Table::open(storage)
        .await
        .map_err(|e| CliError::at(&args.table, e))?;
    let outcome = restore(&table, &to)
        .await
        .map_err(|e| cleaner_error(&args.table, e))?;
    let rolled_back: Vec<String> = outcome
        .rolled_back
        .iter()
        .map(ToString::to_string)
        .collect();
    if args.json {
        return print_json(&serde_json::json!({
            "table": args.table,
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
        args.table,
        outcome.instant,
        rolled_back.len()
    ))
}
