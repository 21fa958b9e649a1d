//! `arbor mdt init <table>`: create the metadata table of an existing table.

use arbor_storage::StorageOptions;
use clap::{Args, Subcommand};

use crate::context::{open_table_on, MAIN};
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
            let t = open_table_on(&table, options, MAIN).await?;
            let files = t
                .init_metadata_table()
                .await
                .map_err(|e| CliError::at(&table, e))?;
            if json {
                outln!("{}", serde_json::json!({ "table": table, "files": files }))?;
            } else {
                outln!("{table}: metadata table created with {files} committed file(s)")?;
            }
            Ok(())
        }
    }
}
