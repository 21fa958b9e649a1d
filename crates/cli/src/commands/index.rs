//! `arbor index`: create, list and query the record index, secondary indexes and column /
//! partition stats.

use arbor_mdt::secondary_index::{IndexDefinitions, SECONDARY_INDEX_PREFIX};
use arbor_storage::StorageOptions;
use arbor_table::secondary_lookup;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::TableConfig;
use clap::{Args, Subcommand};

use crate::context::{open_table_on, open_table_storage, MAIN};
use crate::error::{CliError, CliResult};

/// Arguments of `arbor index`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: IndexCommand,
}

/// The `arbor index` subcommands.
#[derive(Debug, Subcommand)]
pub enum IndexCommand {
    /// Build an index on an existing table (in its metadata table); from then on every commit
    /// keeps it in step.
    Create {
        /// The table's base path or URL.
        table: String,
        /// Build a secondary index on this column.
        #[arg(long, value_name = "COLUMN", conflicts_with = "record_index")]
        secondary: Option<String>,
        /// The secondary index's name (default: the column name).
        #[arg(long, requires = "secondary")]
        name: Option<String>,
        /// Build the record index (record key -> file group).
        #[arg(long)]
        record_index: bool,
        /// Build the column stats index (per-file min/max/counts of the indexed columns: the
        /// table's `column_stats` definition, `hoodie.metadata.index.column.stats.column.list`,
        /// or Hudi's default of the meta columns and the first 32 supported columns).
        #[arg(long, conflicts_with_all = ["secondary", "record_index"])]
        column_stats: bool,
        /// Build the partition stats index (per-partition min/max/counts).
        #[arg(long, conflicts_with_all = ["secondary", "record_index"])]
        partition_stats: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the record keys (and their partition and file group) whose indexed column equals
    /// a value.
    Lookup {
        /// The table's base path or URL.
        table: String,
        /// The secondary index name (with or without `secondary_index_`).
        #[arg(long)]
        index: String,
        /// The value as text (dates as epoch days, timestamps as the integer of the column's
        /// unit, as Hudi stores them).
        value: Option<String>,
        /// Look up records whose value is null.
        #[arg(long, conflicts_with = "value")]
        null: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the table's indexes.
    List {
        /// The table's base path or URL.
        table: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the command.
pub async fn run(args: IndexArgs, options: &StorageOptions) -> CliResult<()> {
    match args.command {
        IndexCommand::Create {
            table,
            secondary,
            name,
            record_index,
            column_stats,
            partition_stats,
            json,
        } => {
            let t = open_table_on(&table, options, MAIN).await?;
            let (index, count) = match (secondary, record_index) {
                (None, false) if column_stats || partition_stats => {
                    let n = t
                        .create_stats_indexes(column_stats, partition_stats)
                        .await
                        .map_err(|e| CliError::at(&table, e))?;
                    let names: Vec<&str> = [
                        (column_stats, "column_stats"),
                        (partition_stats, "partition_stats"),
                    ]
                    .into_iter()
                    .filter(|(w, _)| *w)
                    .map(|(_, n)| n)
                    .collect();
                    (names.join(","), n)
                }
                (Some(column), _) => {
                    let name = name.unwrap_or_else(|| column.clone());
                    let n = t
                        .create_secondary_index(&name, &column)
                        .await
                        .map_err(|e| CliError::at(&table, e))?;
                    (format!("{SECONDARY_INDEX_PREFIX}{}", strip(&name)), n)
                }
                (None, true) => {
                    let n = t
                        .create_record_index()
                        .await
                        .map_err(|e| CliError::at(&table, e))?;
                    ("record_index".to_string(), n)
                }
                (None, false) => {
                    return Err(CliError::Usage(
                        "say which index to create: --secondary <COLUMN>, --record-index, \
                         --column-stats or --partition-stats"
                            .to_string(),
                    ))
                }
            };
            if json {
                outln!(
                    "{}",
                    serde_json::json!({ "table": table, "index": index, "entries": count })
                )?;
            } else {
                outln!("{table}: created {index} with {count} entr(y/ies)")?;
            }
            Ok(())
        }
        IndexCommand::Lookup {
            table,
            index,
            value,
            null,
            json,
        } => {
            if value.is_none() && !null {
                return Err(CliError::Usage(
                    "give the value to look up (or --null)".to_string(),
                ));
            }
            let storage = open_table_storage(&table, options).await?;
            let found = secondary_lookup(&storage, &index, value.as_deref())
                .await
                .map_err(|e| CliError::at(&table, e))?;
            if json {
                let rows: Vec<serde_json::Value> = found
                    .iter()
                    .map(|(k, l)| {
                        serde_json::json!({
                            "key": k,
                            "partition": l.partition,
                            "file_id": l.file_id,
                            "base_instant": l.base_instant.to_string(),
                        })
                    })
                    .collect();
                outln!("{}", serde_json::Value::Array(rows))?;
            } else {
                for (k, l) in &found {
                    let at = if l.partition.is_empty() {
                        l.file_id.clone()
                    } else {
                        format!("{}/{}", l.partition, l.file_id)
                    };
                    outln!("{k}\t{at}")?;
                }
                errln!("{} record(s)", found.len());
            }
            Ok(())
        }
        IndexCommand::List { table, json } => {
            let storage = open_table_storage(&table, options).await?;
            let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR)
                .await
                .map_err(|e| CliError::at(&table, e))?;
            let defs = IndexDefinitions::load(storage.as_ref())
                .await
                .map_err(|e| CliError::at(&table, CliError::Usage(e.to_string())))?
                .unwrap_or_default();
            let mut rows = Vec::new();
            for p in config.metadata_partitions() {
                let def = defs.get(&p);
                let kind = match (p.as_str(), def) {
                    ("files", _) => "files",
                    ("record_index", _) => "record_index",
                    ("partition_stats", _) => "partition_stats",
                    (_, Some(d)) => d.index_type.as_str(),
                    _ => "other",
                }
                .to_string();
                let columns = def.map(|d| d.source_fields.clone()).unwrap_or_default();
                rows.push((p, kind, columns));
            }
            if json {
                let v: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|(n, k, c)| serde_json::json!({ "name": n, "type": k, "columns": c }))
                    .collect();
                outln!("{}", serde_json::Value::Array(v))?;
            } else if rows.is_empty() {
                outln!("{table}: no metadata table, no indexes")?;
            } else {
                for (n, k, c) in &rows {
                    if c.is_empty() {
                        outln!("{n}\t{k}")?;
                    } else {
                        outln!("{n}\t{k}\t{}", c.join(","))?;
                    }
                }
            }
            Ok(())
        }
    }
}

fn strip(name: &str) -> &str {
    name.strip_prefix(SECONDARY_INDEX_PREFIX).unwrap_or(name)
}
