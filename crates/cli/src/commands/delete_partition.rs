//! `arbor delete-partition <table> <partition>... [--branch B]`.

use arbor_storage::StorageOptions;
use clap::Args;

use crate::context::{open_table_on, CommitReport, Progress};
use crate::error::{CliError, CliResult};

/// Arguments of `arbor delete-partition`.
#[derive(Debug, Args)]
pub struct DeletePartitionArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The partition paths to delete, as `arbor files` lists them (e.g. `city=sf` for a
    /// hive-style table). All go in one replacecommit.
    #[arg(required = true, value_name = "PARTITION")]
    pub partitions: Vec<String>,
    /// The branch to delete them on (main, or an existing working branch).
    #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
    pub branch: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command.
pub async fn run(args: DeletePartitionArgs, options: &StorageOptions) -> CliResult<()> {
    let table = open_table_on(&args.table, options, &args.branch).await?;
    // A partition that is not there would make an empty replacecommit: refuse it instead.
    let reader = table
        .reader()
        .await
        .map_err(|e| CliError::at(&args.table, e))?;
    let existing = reader
        .view()
        .partitions()
        .await
        .map_err(|e| CliError::at(&args.table, CliError::Usage(e.to_string())))?;
    if let Some(p) = args.partitions.iter().find(|p| !existing.contains(p)) {
        return Err(CliError::at(
            &args.table,
            CliError::Usage(format!(
                "no partition {p:?} (partitions: {})",
                existing.join(", ")
            )),
        ));
    }
    let progress = Progress::start(&format!("deleting {} partition(s)", args.partitions.len()));
    let result = table
        .delete_partitions(&args.partitions)
        .await
        .map_err(|e| CliError::at(&args.table, e))?;
    progress.finish();
    CommitReport::new(&args.table, false, None, &result)
        .on_branch(&args.branch)
        .print(args.json)
}
