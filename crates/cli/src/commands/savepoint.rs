//! `arbor savepoint create|list|delete <table> [--branch B]`: savepoints protect a snapshot of
//! a branch from the cleaner.

use arbor_cleaner::{create_savepoint, delete_savepoint, list_savepoints, SavepointInfo};
use arbor_storage::StorageOptions;
use arrow::temporal_conversions::timestamp_s_to_datetime;
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::context::{cleaner_error, label, open_table_on, parse_instant};
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_table, print_text};

/// Arguments of `arbor savepoint`.
#[derive(Debug, Args)]
pub struct SavepointArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: SavepointCommand,
}

/// The `arbor savepoint` subcommands.
#[derive(Debug, Subcommand)]
pub enum SavepointCommand {
    /// Savepoint a completed write: its snapshot stays readable (`arbor read --as-of T`) and
    /// no clean deletes its files until the savepoint is deleted.
    Create {
        /// The table's base path or URL.
        table: String,
        /// The branch (main, or a working branch).
        #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
        branch: String,
        /// The instant to savepoint (default: the latest completed write).
        #[arg(long, value_name = "T")]
        instant: Option<String>,
        /// A comment stored with the savepoint.
        #[arg(long, value_name = "C", default_value = "")]
        comment: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the table's savepoints, oldest first.
    List {
        /// The table's base path or URL.
        table: String,
        /// The branch (main, or a working branch).
        #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
        branch: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Delete a savepoint; its files become cleanable.
    Delete {
        /// The table's base path or URL.
        table: String,
        /// The savepointed instant.
        instant: String,
        /// The branch (main, or a working branch).
        #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
        branch: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// One savepoint as `--json` prints it.
#[derive(Debug, Serialize)]
struct SavepointJson {
    instant: String,
    savepointed_at: i64,
    savepointed_by: String,
    comment: String,
    files: usize,
}

impl From<&SavepointInfo> for SavepointJson {
    fn from(s: &SavepointInfo) -> Self {
        SavepointJson {
            instant: s.instant.to_string(),
            savepointed_at: s.savepointed_at,
            savepointed_by: s.savepointed_by.clone(),
            comment: s.comment.clone(),
            files: s.files,
        }
    }
}

/// `savepointed_at` (epoch seconds) as a UTC date and time.
fn when(epoch_seconds: i64) -> String {
    timestamp_s_to_datetime(epoch_seconds)
        .map_or_else(|| epoch_seconds.to_string(), |t| format!("{t} UTC"))
}

/// Runs the command.
pub async fn run(args: SavepointArgs, options: &StorageOptions) -> CliResult<()> {
    match args.command {
        SavepointCommand::Create {
            table,
            branch,
            instant,
            comment,
            json,
        } => {
            let time = instant
                .as_deref()
                .map(|t| parse_instant("--instant", t))
                .transpose()
                .map_err(|e| CliError::at(&table, e))?;
            let t = open_table_on(&table, options, &branch).await?;
            let info = create_savepoint(&t, time.as_ref(), &comment)
                .await
                .map_err(|e| cleaner_error(&table, e))?;
            if json {
                print_json(&serde_json::json!({
                    "table": table,
                    "savepoint": SavepointJson::from(&info),
                }))
            } else {
                print_text(&format!(
                    "{}: savepoint {} created; it protects {} file(s)",
                    label(&table, &branch),
                    info.instant,
                    info.files
                ))
            }
        }
        SavepointCommand::List {
            table,
            branch,
            json,
        } => {
            let t = open_table_on(&table, options, &branch).await?;
            let savepoints = list_savepoints(t.view_storage(), t.layout())
                .await
                .map_err(|e| cleaner_error(&table, e))?;
            if json {
                return print_json(
                    &savepoints
                        .iter()
                        .map(SavepointJson::from)
                        .collect::<Vec<_>>(),
                );
            }
            if savepoints.is_empty() {
                return print_text(&format!("{}: no savepoints", label(&table, &branch)));
            }
            let rows = savepoints
                .iter()
                .map(|s| {
                    vec![
                        s.instant.to_string(),
                        when(s.savepointed_at),
                        s.savepointed_by.clone(),
                        s.files.to_string(),
                        s.comment.clone(),
                    ]
                })
                .collect();
            print_table(&["INSTANT", "TAKEN", "BY", "FILES", "COMMENT"], rows)
        }
        SavepointCommand::Delete {
            table,
            branch,
            instant,
            json,
        } => {
            let time = parse_instant("instant", &instant).map_err(|e| CliError::at(&table, e))?;
            let t = open_table_on(&table, options, &branch).await?;
            delete_savepoint(&t, &time)
                .await
                .map_err(|e| cleaner_error(&table, e))?;
            if json {
                print_json(&serde_json::json!({ "table": table, "deleted": time.to_string() }))
            } else {
                print_text(&format!(
                    "{}: savepoint {time} deleted",
                    label(&table, &branch)
                ))
            }
        }
    }
}
