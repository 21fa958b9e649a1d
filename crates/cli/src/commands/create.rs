//! `arbor create <table> --type cow|mor --key <cols> --schema-from <file> [...]`. The table
//! definition flags it shares with `arbor write` are [`crate::context::TableSpec`].

use std::path::PathBuf;

use arbor_storage::StorageOptions;
use clap::Args;
use serde::Serialize;

use crate::context::{create_table, open_target, warn_storage_notes, TableSpec};
use crate::error::{CliError, CliResult};
use crate::input;
use crate::output::{print_json, print_text};

/// Arguments of `arbor create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Where to create the table: a local directory (created if missing; it must not hold a
    /// table yet), `file://...`, `s3://bucket/prefix`, `az://container/prefix` or
    /// `gs://bucket/prefix`.
    pub table: String,
    #[command(flatten)]
    pub spec: TableSpec,
    /// A .parquet, .csv or .jsonl file whose columns (names and types, inferred for CSV and
    /// JSON lines) become the table's data schema. Its rows are not written.
    #[arg(long, value_name = "FILE")]
    pub schema_from: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct Created {
    table: String,
    name: String,
    table_type: String,
    table_version: u32,
    record_key_fields: Vec<String>,
    partition_fields: Vec<String>,
    hive_style_partitioning: bool,
    ordering_field: Option<String>,
    columns: Vec<Column>,
}

#[derive(Debug, Serialize)]
struct Column {
    name: String,
    data_type: String,
    nullable: bool,
}

/// Runs the command.
pub async fn run(args: CreateArgs, options: &StorageOptions) -> CliResult<()> {
    let schema = input::infer_schema(&args.schema_from)?;
    warn_storage_notes(&schema);
    let create = args
        .spec
        .create_options(&args.table, schema.clone(), "arbor create")?;
    let target = open_target(&args.table, options, true)
        .await?
        .ok_or_else(|| CliError::at(&args.table, CliError::Usage("cannot open".into())))?;
    if target.exists {
        return Err(CliError::at(
            &args.table,
            CliError::Usage("a table already exists here".into()),
        ));
    }
    let table = create_table(&args.table, &target, create).await?;
    let config = table.config();
    let report = Created {
        table: args.table.clone(),
        name: config.name().to_string(),
        table_type: config.table_type().name().to_string(),
        table_version: config.version().code(),
        record_key_fields: config.record_key_fields(),
        partition_fields: config.partition_fields(),
        hive_style_partitioning: config.hive_style_partitioning(),
        ordering_field: config.ordering_fields().into_iter().next(),
        // The columns as the table stores them (see arbor_table::storage_type).
        columns: table
            .schema()
            .fields()
            .iter()
            .map(|f| Column {
                name: f.name().clone(),
                data_type: f.data_type().to_string(),
                nullable: f.is_nullable(),
            })
            .collect(),
    };
    if args.json {
        return print_json(&report);
    }
    let partitioning = if report.partition_fields.is_empty() {
        "not partitioned".to_string()
    } else {
        format!(
            "partitioned by {}{}",
            report.partition_fields.join(","),
            if report.hive_style_partitioning {
                " (hive style)"
            } else {
                ""
            }
        )
    };
    print_text(&format!(
        "created {} table {:?} (version {}) at {}: key {}, {}{}, {} columns",
        report.table_type,
        report.name,
        report.table_version,
        report.table,
        report.record_key_fields.join(","),
        partitioning,
        report
            .ordering_field
            .as_ref()
            .map(|o| format!(", ordering {o}"))
            .unwrap_or_default(),
        report.columns.len()
    ))
}
