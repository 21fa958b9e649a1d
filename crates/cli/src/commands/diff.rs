//! `arbor diff <table> <from> <to>`: the records that differ between two refs, by record key.

use std::path::PathBuf;

use arbor_branching::diff::PartitionStat;
use arbor_branching::{diff, RefSpec};
use arbor_storage::StorageOptions;
use arrow::array::RecordBatch;
use async_trait::async_trait;
use clap::Args;
use futures::stream::BoxStream;
use futures::StreamExt;

use crate::context::{branching_error, open_table_storage};
use crate::emit::{emit, EmitOptions, ReadFormat, RowSource};
use crate::error::CliResult;
use crate::output::{print_json, print_table, print_text};
use crate::stdio;

/// Arguments of `arbor diff`.
#[derive(Debug, Args)]
#[command(
    after_help = "Refs: main, a branch name, tag:<name>, an instant (main as of it), \
    <branch>@<instant>.\n\
    Change rows carry _change_type: insert, delete, update_preimage, update_postimage.\n\n\
    Examples:\n  \
    arbor diff ./trips main audit                     # what the branch changed\n  \
    arbor diff ./trips main audit --stat              # counts per partition\n  \
    arbor diff ./trips tag:v1 main --keys-only --format csv\n  \
    arbor diff ./trips main audit --format parquet --output changes.parquet"
)]
pub struct DiffArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The earlier state: main, a branch, tag:<name>, an instant, or <branch>@<instant>.
    pub from: String,
    /// The later state (the same forms).
    pub to: String,
    /// Only the change type, partition path and record key of each change.
    #[arg(long)]
    pub keys_only: bool,
    /// Counts of inserted, updated and deleted keys per partition instead of rows.
    #[arg(long)]
    pub stat: bool,
    /// Output format of the change rows.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReadFormat,
    /// Write the rows to this file (needed by --format parquet).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Most rows to output (default 50 for the table format, all for the others).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Table format: every column and value whole.
    #[arg(long)]
    pub wide: bool,
    /// With --stat: print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The change rows, batch by batch.
struct Changes(
    BoxStream<'static, arbor_branching::Result<RecordBatch>>,
    String,
);

#[async_trait]
impl RowSource for Changes {
    async fn next(&mut self) -> CliResult<Option<RecordBatch>> {
        match self.0.next().await {
            None => Ok(None),
            Some(Ok(b)) => Ok(Some(b)),
            Some(Err(e)) => Err(branching_error(&self.1, e)),
        }
    }
}

fn stat_text(stats: &[PartitionStat]) -> CliResult<()> {
    let rows: Vec<Vec<String>> = stats
        .iter()
        .map(|s| {
            vec![
                if s.partition.is_empty() {
                    "(table)".to_string()
                } else {
                    s.partition.clone()
                },
                format!("+{}", s.inserts),
                format!("~{}", s.updates),
                format!("-{}", s.deletes),
            ]
        })
        .collect();
    if !rows.is_empty() {
        print_table(&["PARTITION", "INSERTED", "UPDATED", "DELETED"], rows)?;
    }
    let sum = |f: fn(&PartitionStat) -> usize| stats.iter().map(f).sum::<usize>();
    print_text(&format!(
        "{} partition(s) changed: {} inserted, {} updated, {} deleted",
        stats.len(),
        sum(|s| s.inserts),
        sum(|s| s.updates),
        sum(|s| s.deletes)
    ))
}

/// Runs the command.
pub async fn run(args: DiffArgs, options: &StorageOptions) -> CliResult<()> {
    let table = &args.table;
    let storage = open_table_storage(table, options).await?;
    let from = RefSpec::parse(&args.from).map_err(|e| branching_error(table, e))?;
    let to = RefSpec::parse(&args.to).map_err(|e| branching_error(table, e))?;
    let planned = diff(&storage, &from, &to)
        .await
        .map_err(|e| branching_error(table, e))?;
    let at = |r: &arbor_branching::TableRef| {
        r.instant
            .as_ref()
            .map_or_else(|| "empty".to_string(), ToString::to_string)
    };
    let summary = format!(
        "diff {} ({}) .. {} ({}): merge base {}; {} write(s) since, {} file group(s) compared",
        planned.from().label,
        at(planned.from()),
        planned.to().label,
        at(planned.to()),
        planned
            .base()
            .map_or_else(|| "none".to_string(), ToString::to_string),
        planned.writes(),
        planned.file_groups()
    );
    if args.stat {
        let stats = planned
            .stat()
            .await
            .map_err(|e| branching_error(table, e))?;
        if args.json {
            let parts: Vec<serde_json::Value> = stats
                .iter()
                .map(|s| {
                    serde_json::json!({
                        "partition": s.partition,
                        "inserted": s.inserts,
                        "updated": s.updates,
                        "deleted": s.deletes,
                    })
                })
                .collect();
            return print_json(&serde_json::json!({
                "table": table,
                "from": planned.from().label,
                "from_instant": planned.from().instant.as_ref().map(ToString::to_string),
                "to": planned.to().label,
                "to_instant": planned.to().instant.as_ref().map(ToString::to_string),
                "merge_base": planned.base().map(ToString::to_string),
                "writes": planned.writes(),
                "file_groups": planned.file_groups(),
                "partitions": parts,
            }));
        }
        print_text(&summary)?;
        return stat_text(&stats);
    }
    stdio::err(&summary);
    let schema = planned.schema(args.keys_only);
    let mut rows = Changes(planned.changes(args.keys_only), table.clone());
    emit(
        &mut rows,
        &schema,
        &EmitOptions {
            format: args.format,
            output: args.output.clone(),
            limit: args.limit,
            wide: args.wide,
            columns_flag: false,
        },
    )
    .await
}
