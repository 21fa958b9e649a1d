//! `arbor compact <table> [--branch B] [--json]`: compact a merge-on-read table (schedule and
//! run).

use arbor_storage::StorageOptions;
use arbor_table::{CommitResult, Table, TableError};
use arbor_timeline::avro::{decode_instant, InstantContent};
use arbor_timeline::config::TableType;
use arbor_timeline::naming::LayoutVersion;
use arbor_timeline::ActiveTimeline;
use clap::Args;
use serde::Serialize;

use crate::context::{label, open_table_on, Progress};
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
    arbor compact ./trips --pending            # run the compactions Spark scheduled\n  \
    arbor compact ./trips --rollback-pending\n  \
    arbor compact ./trips --log --threshold 5     # merge log files, keep base files\n  \
    arbor compact ./trips --branch audit --json"
)]
pub struct CompactArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The branch to compact (main, or a working branch).
    #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
    pub branch: String,
    /// Only run the compactions already pending (scheduled by another writer such as Spark,
    /// or left by a killed run); schedule nothing new.
    #[arg(long, conflicts_with = "rollback_pending")]
    pub pending: bool,
    /// Roll back the pending compactions instead (their slices read as before).
    #[arg(long)]
    pub rollback_pending: bool,
    /// Log compaction instead (Hudi's `logcompaction`): each slice with at least --threshold
    /// log files gets one compacted log file; base files are not rewritten.
    #[arg(long, conflicts_with_all = ["pending", "rollback_pending"])]
    pub log: bool,
    /// With --log: log files a slice needs (default: the table's
    /// hoodie.log.compaction.blocks.threshold, else 5).
    #[arg(long, value_name = "N", requires = "log")]
    pub threshold: Option<usize>,
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
    /// Each compacted file group, from the compaction's commit metadata.
    pub groups: Vec<CompactedGroup>,
}

/// One file group a compaction rewrote.
#[derive(Debug, Clone, Serialize)]
pub struct CompactedGroup {
    /// The partition path.
    pub partition: String,
    /// The file group id.
    pub file_id: String,
    /// Records in the new base file.
    pub records: i64,
    /// The new base file (path in the table).
    pub base_file: String,
}

/// The report of compaction `r`, with its file groups read from its completed commit.
async fn report(table: &Table, r: &CommitResult) -> CliResult<CompactionReport> {
    let tl = ActiveTimeline::load(table.view_storage().clone(), table.layout().clone()).await?;
    let instant = tl
        .completed()
        .into_iter()
        .find(|i| i.requested_time == r.instant)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "compaction {} completed but is not on the timeline",
                r.instant
            ))
        })?;
    let bytes = tl.read(&instant).await?;
    let legacy = table.layout().layout == LayoutVersion::V1;
    let path = format!("compaction {}", r.instant);
    let groups = match decode_instant(&instant, &bytes, &path, legacy)? {
        InstantContent::Commit(meta) => meta
            .write_stats()
            .map(|(p, s)| CompactedGroup {
                partition: p.to_string(),
                file_id: s.file_id.clone().unwrap_or_default(),
                records: s.num_writes.unwrap_or(0),
                base_file: s.path.clone().unwrap_or_default(),
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(CompactionReport {
        instant: r.instant.to_string(),
        completion_time: r.completion_time.to_string(),
        file_groups: r.files_written,
        groups,
    })
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
    if args.rollback_pending {
        let progress = Progress::start(&format!("{at}: rolling back pending compactions"));
        let done = table
            .rollback_pending_compactions()
            .await
            .map_err(|e: TableError| CliError::at(&args.table, e))?;
        progress.finish();
        let names: Vec<String> = done.iter().map(|t| t.to_string()).collect();
        if args.json {
            return print_json(&serde_json::json!({
                "table": args.table,
                "branch": args.branch,
                "rolled_back": names,
            }));
        }
        return print_text(&if names.is_empty() {
            format!("{at}: no compaction is pending")
        } else {
            format!(
                "{at}: rolled back {} pending compaction(s): {}",
                names.len(),
                names.join(", ")
            )
        });
    }
    let progress = Progress::start(&format!("{at}: compacting"));
    let results = if args.log {
        table.log_compact(args.threshold).await
    } else if args.pending {
        table.compact_pending().await
    } else {
        table.compact().await
    }
    .map_err(|e: TableError| CliError::at(&args.table, e))?;
    progress.set(&format!("{at}: reading the compaction reports"));
    let mut done = Vec::with_capacity(results.len());
    for r in &results {
        done.push(
            report(&table, r)
                .await
                .map_err(|e| CliError::at(&args.table, e))?,
        );
    }
    progress.finish();
    if args.json {
        return print_json(&serde_json::json!({
            "table": args.table,
            "branch": args.branch,
            "compactions": done,
        }));
    }
    if done.is_empty() {
        return print_text(&if args.log {
            format!("{at}: nothing to log-compact (no slice has enough log files)")
        } else if args.pending {
            format!("{at}: no compaction is pending")
        } else {
            format!("{at}: nothing to compact (no file group has log files)")
        });
    }
    print_table(
        &["INSTANT", "PARTITION", "FILE GROUP", "RECORDS"],
        done.iter()
            .flat_map(|c| {
                c.groups.iter().map(|g| {
                    vec![
                        c.instant.clone(),
                        if g.partition.is_empty() {
                            "(none)".to_string()
                        } else {
                            g.partition.clone()
                        },
                        g.file_id.clone(),
                        g.records.to_string(),
                    ]
                })
            })
            .collect(),
    )?;
    let groups: usize = done.iter().map(|c| c.file_groups).sum();
    print_text(&format!(
        "{at}: compacted {groups} file group(s) in {} compaction(s)",
        done.len()
    ))
}
