//! `arbor mdt init <table>`: create the metadata table of an existing table.

use arbor_storage::StorageOptions;
use arbor_table::Table;
use clap::{Args, Subcommand};

use crate::commands::lock::with_chosen_lock;
use crate::commands::open_table_storage;
use crate::error::{CliError, CliResult};

/// Arguments of `arbor mdt`.
#[derive(Debug, Args)]
pub struct MdtArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: MdtCommand,
}

/// The `arbor mdt` subcommands.
#[derive(Debug, Subcommand)]
pub enum MdtCommand {
    /// Create the metadata table (FILES partition) of a table that has none, from a listing of
    /// its committed files; from then on every commit keeps it in step.
    Init {
        /// The table's base path or URL.
        table: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the command.
pub async fn run(args: MdtArgs, options: &StorageOptions) -> CliResult<()> {
    match args.command {
        MdtCommand::Init { table, json } => {
            let storage = open_table_storage(&table, options)?;
            let t = Table::open(storage)
                .await
                .map_err(|e| CliError::at(&table, e))?;
            let t = with_chosen_lock(&table, t).await?;
            let files = t
                .init_metadata_table()
                .await
                .map_err(|e| CliError::at(&table, e))?;
            if json {
                println!("{}", serde_json::json!({ "table": table, "files": files }));
            } else {
                println!("{table}: metadata table created with {files} committed file(s)");
            }
            Ok(())
        }
    }
}
