//! `arbor compact <table> [--branch B] [--json]`: compact a merge-on-read table (schedule and
//! run).

use arbor_storage::StorageOptions;
use arbor_table::{CommitResult, TableError};
use arbor_timeline::config::TableType;
use clap::Args;
use serde::Serialize;

use crate::commands::branch::{label, open_table_on};
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_table, print_text};

/// Arguments of `arbor compact`.
#[derive(Debug, Args)]
#[command(
    after_help = "Completes any pending compaction first (one a crash cut short), then \
    schedules a compaction of every file group whose latest file slice has log files and runs \
    it: each such group gets a new base file holding its merged records (commit times kept, \
    so incremental queries are unchanged). Runs under the table lock. Only merge-on-read \
    tables have anything to compact.\n\n\
    Examples:\n  \
    arbor compact ./trips\n  \
    arbor compact ./trips --branch audit --json"
)]
pub struct CompactArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The branch to compact (main, or a working branch).
    #[arg(long, value_name = "B", default_value = crate::commands::branch::MAIN)]
    pub branch: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One completed compaction, as printed.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionReport {
    /// The compaction instant (requested time).
    pub instant: String,
    /// Its completion time.
    pub completion_time: String,
    /// File groups compacted (one new base file each).
    pub file_groups: usize,
}

impl From<&CommitResult> for CompactionReport {
    fn from(r: &CommitResult) -> Self {
        CompactionReport {
            instant: r.instant.to_string(),
            completion_time: r.completion_time.to_string(),
            file_groups: r.files_written,
        }
    }
}

/// Runs the command: [`arbor_table::Table::compact`] on the branch; a copy-on-write table is
/// a usage error saying so (before any lock is taken or file written).
pub async fn run(args: CompactArgs, options: &StorageOptions) -> CliResult<()> {
    let table = open_table_on(&args.table, options, &args.branch).await?;
    let at = label(&args.table, &args.branch);
    if table.config().table_type() != TableType::MergeOnRead {
        return Err(CliError::at(
            &args.table,
            CliError::Usage(
                "is a copy-on-write table: its base files are rewritten on every write, there \
                 are no log files to compact (only merge-on-read tables are compacted)"
                    .to_string(),
            ),
        ));
    }
    let done: Vec<CompactionReport> = table
        .compact()
        .await
        .map_err(|e: TableError| CliError::at(&args.table, e))?
        .iter()
        .map(CompactionReport::from)
        .collect();
    if args.json {
        return print_json(&serde_json::json!({
            "table": args.table,
            "branch": args.branch,
            "compactions": done,
        }));
    }
    if done.is_empty() {
        return print_text(&format!(
            "{at}: nothing to compact (no file group has log files)"
        ));
    }
    print_table(
        &["INSTANT", "COMPLETED", "FILE GROUPS"],
        done.iter()
            .map(|c| {
                vec![
                    c.instant.clone(),
                    c.completion_time.clone(),
                    c.file_groups.to_string(),
                ]
            })
            .collect(),
    )?;
    let groups: usize = done.iter().map(|c| c.file_groups).sum();
    print_text(&format!(
        "{at}: compacted {groups} file group(s) in {} compaction(s)",
        done.len()
    ))
}
