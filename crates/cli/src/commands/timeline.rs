//! `arbor timeline <table> [--all] [--json]`.

use arbor_storage::StorageOptions;
use arbor_timeline::summary::{list_instants, InstantSummary, ListScope};
use clap::Args;

use crate::commands::open_table_storage;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_table};

/// Arguments of `arbor timeline`.
#[derive(Debug, Args)]
pub struct TimelineArgs {
    /// The table's base path or URL (the directory that holds `.hoodie/`).
    pub table: String,
    /// Also list pending instants, table services (clean, rollback, savepoint, ...) and archived
    /// instants. Without it: the completed commit, deltacommit and replacecommit instants.
    #[arg(long)]
    pub all: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command.
pub async fn run(args: TimelineArgs, options: &StorageOptions) -> CliResult<()> {
    let storage = open_table_storage(&args.table, options)?;
    let scope = if args.all {
        ListScope::All
    } else {
        ListScope::CompletedWrites
    };
    let instants = list_instants(storage, scope)
        .await
        .map_err(|e| CliError::at(&args.table, e))?;
    if args.json {
        return print_json(&instants);
    }
    let mut header = vec!["INSTANT", "COMPLETED", "ACTION", "STATE", "OPERATION"];
    if args.all {
        header.push("WHERE");
    }
    let rows = instants
        .iter()
        .map(|i: &InstantSummary| {
            let mut row = vec![
                i.timestamp.clone(),
                i.completion_time.clone().unwrap_or_else(|| "-".into()),
                i.action.clone(),
                i.state.clone(),
                i.operation.clone().unwrap_or_else(|| "-".into()),
            ];
            if args.all {
                row.push(if i.archived { "archived" } else { "active" }.into());
            }
            row
        })
        .collect();
    print_table(&header, rows)
}
