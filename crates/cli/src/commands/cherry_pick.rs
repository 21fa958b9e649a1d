//! `arbor cherry-pick <table> <instant> --from <branch>`: one completed write of a branch applied
//! to main or another branch.

use arbor_branching::{cherry_pick, MergeOptions, RefSpec};
use arbor_storage::StorageOptions;
use clap::Args;

use crate::context::{
    branching_error, merge_json, merge_text, open_table_at, open_table_storage, parse_instant,
    StrategyArg, MAIN,
};
use crate::error::CliResult;
use crate::output::{print_json, print_text};

/// Arguments of `arbor cherry-pick`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    arbor timeline ./trips --branch audit             # find the write\n  \
    arbor cherry-pick ./trips 20261205101010123 --from audit\n  \
    arbor cherry-pick ./trips 20261205101010123 --from main --branch audit --dry-run")]
pub struct CherryPickArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The completed write to apply (its requested time, as `arbor timeline` lists it).
    pub instant: String,
    /// The branch the write is on (`main` for main).
    #[arg(long, value_name = "BRANCH")]
    pub from: String,
    /// The branch that receives it (default: main).
    #[arg(long, value_name = "BRANCH", default_value = MAIN)]
    pub branch: String,
    /// What a conflict does: a key the target changed differently since the two diverged.
    #[arg(long, value_enum, default_value = "fail")]
    pub strategy: StrategyArg,
    /// Print what would be applied and every conflict; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command.
pub async fn run(args: CherryPickArgs, options: &StorageOptions) -> CliResult<()> {
    let table = &args.table;
    let instant = parse_instant("instant", &args.instant)?;
    let storage = open_table_storage(table, options).await?;
    let target = open_table_at(table, storage, &args.branch).await?;
    let from = RefSpec::parse(&args.from).map_err(|e| branching_error(table, e))?;
    let options = MergeOptions::new(args.strategy.into()).with_dry_run(args.dry_run);
    let outcome = cherry_pick(&target, &from, &instant, &options)
        .await
        .map_err(|e| branching_error(table, e))?;
    if args.json {
        return print_json(&merge_json(table, &outcome, &options));
    }
    print_text(&merge_text(table, &outcome, &options, true))
}
