//! `arbor validate <table>`: compare the metadata table with storage.

use arbor_mdt::validate::validate_table;
use arbor_storage::StorageOptions;
use clap::Args;

use crate::commands::open_table_storage;
use crate::error::{CliError, CliResult};

/// Arguments of `arbor validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The table's base path or URL.
    pub table: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command: prints what was compared and every difference; fails (exit code 1) when
/// there is any difference.
pub async fn run(args: ValidateArgs, options: &StorageOptions) -> CliResult<()> {
    let storage = open_table_storage(&args.table, options)?;
    let report = validate_table(storage.clone())
        .await
        .map_err(|e| CliError::at(&args.table, CliError::Usage(e.to_string())))?;
    // The record index and secondary indexes against the data.
    let indexes = if report.has_metadata_table {
        arbor_table::validate_indexes(storage)
            .await
            .map_err(|e| CliError::at(&args.table, e))?
    } else {
        arbor_table::validate_indexes::IndexValidation::default()
    };
    let differences: Vec<String> = report
        .discrepancies
        .iter()
        .map(|d| d.to_string())
        .chain(indexes.discrepancies.iter().map(|d| d.to_string()))
        .collect();
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "table": args.table,
                "has_metadata_table": report.has_metadata_table,
                "partitions": report.partitions,
                "storage_files": report.storage_files,
                "mdt_files": report.mdt_files,
                "indexes": indexes
                    .checked
                    .iter()
                    .map(|(n, c)| serde_json::json!({ "index": n, "entries": c }))
                    .collect::<Vec<_>>(),
                "differences": differences,
            })
        );
    } else if !report.has_metadata_table {
        println!("{}: no metadata table; nothing to validate", args.table);
    } else {
        println!(
            "{}: files: {} committed file(s) in {} partition(s) on storage, {} in the metadata table",
            args.table, report.storage_files, report.partitions, report.mdt_files
        );
        for (n, c) in &indexes.checked {
            println!("{}: {n}: {c} entr(y/ies) in the data", args.table);
        }
        for d in &differences {
            println!("  {d}");
        }
    }
    if differences.is_empty() {
        if !args.json && report.has_metadata_table {
            println!("{}: metadata table agrees with storage", args.table);
        }
        Ok(())
    } else {
        Err(CliError::at(
            &args.table,
            CliError::Usage(format!(
                "the metadata table disagrees with storage in {} place(s)",
                differences.len()
            )),
        ))
    }
}
