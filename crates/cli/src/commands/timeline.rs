//! `arbor timeline <table> [--branch B] [--tag NAME] [--all] [--json]`.

use arbor_branching::select_root;
use arbor_branching::tag::resolve_tag;
use arbor_storage::StorageOptions;
use arbor_timeline::summary::{list_instants, InstantSummary, ListScope};
use clap::Args;

use crate::context::{branching_error, open_table_storage, selected};
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_table};

/// Arguments of `arbor timeline`.
#[derive(Debug, Args)]
pub struct TimelineArgs {
    /// The table's base path or URL (the directory that holds `.hoodie/`).
    pub table: String,
    /// The branch whose timeline to list (main follows publications).
    #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
    pub branch: String,
    /// Only the instants up to this tag of the branch (requested at or before its instant).
    #[arg(long, value_name = "NAME")]
    pub tag: Option<String>,
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
    let storage = open_table_storage(&args.table, options).await?;
    let at = |e| branching_error(&args.table, e);
    let (root, upto) = match &args.tag {
        Some(tag) => {
            let (root, info) = resolve_tag(&storage, selected(&args.branch), tag)
                .await
                .map_err(at)?;
            (root, Some(info.instant))
        }
        None => (
            select_root(&storage, selected(&args.branch))
                .await
                .map_err(at)?,
            None,
        ),
    };
    let scope = if args.all {
        ListScope::All
    } else {
        ListScope::CompletedWrites
    };
    let mut instants = list_instants(root.view(storage), scope)
        .await
        .map_err(|e| CliError::at(&args.table, e))?;
    if let Some(upto) = &upto {
        instants.retain(|i| i.timestamp.as_str() <= upto.as_str());
    }
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
