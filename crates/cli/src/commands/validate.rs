//! `arbor validate <table> [--branch B]`: compare a branch's metadata table with storage.
//!
//! Goes through `arbor_branching::validate`: data files are shared by branches, so a file this
//! branch still lists but another branch's clean released (once no branch needed it) is not a
//! difference.

use arbor_branching::select_root;
use arbor_storage::StorageOptions;
use clap::Args;

use crate::context::{branching_error, cleaner_error, label, open_table_storage, selected};
use crate::error::{CliError, CliResult};
use crate::output::human_bytes;

/// Arguments of `arbor validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The branch to validate (main, or a working branch).
    #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
    pub branch: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command: prints what was compared and every difference; fails (exit code 1) when
/// there is any difference.
pub async fn run(args: ValidateArgs, options: &StorageOptions) -> CliResult<()> {
    let storage = open_table_storage(&args.table, options).await?;
    let branch = selected(&args.branch);
    let root = select_root(&storage, branch)
        .await
        .map_err(|e| branching_error(&args.table, e))?;
    let report = arbor_branching::validate(&storage, branch)
        .await
        .map_err(|e| branching_error(&args.table, e))?;
    // The record index and secondary indexes against the data (of the branch's view).
    let indexes = if report.has_metadata_table {
        arbor_table::validate_indexes(root.view(storage.clone()))
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
    // Data files nothing references (a dropped branch's before the next clean, leftovers of
    // writers that died): reported, not a difference (`arbor clean` / `clean --orphans` free them).
    let (unreferenced, _) = arbor_cleaner::reclaim::find_orphans(
        &storage,
        std::time::Duration::ZERO,
        chrono::Utc::now(),
    )
    .await
    .map_err(|e| cleaner_error(&args.table, e))?;
    let unreferenced_bytes: u64 = unreferenced.iter().map(|f| f.size).sum();
    let table = label(&args.table, &args.branch);
    if args.json {
        outln!(
            "{}",
            serde_json::json!({
                "table": args.table,
                "branch": args.branch,
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
                "unreferenced_files": unreferenced.len(),
                "unreferenced_bytes": unreferenced_bytes,
            })
        )?;
    } else if !report.has_metadata_table {
        outln!("{table}: no metadata table; nothing to validate")?;
    } else {
        outln!(
            "{table}: files: {} committed file(s) in {} partition(s) on storage, {} in the metadata table",
            report.storage_files, report.partitions, report.mdt_files
        )?;
        for (n, c) in &indexes.checked {
            outln!("{table}: {n}: {c} entr(y/ies) in the data")?;
        }
        for d in &differences {
            outln!("  {d}")?;
        }
    }
    if !args.json && !unreferenced.is_empty() {
        outln!(
            "{table}: {} data file(s), {}, are referenced by no branch, tag, savepoint, clone or \
             instant (`arbor clean` frees a dropped branch's; `arbor clean --orphans` any)",
            unreferenced.len(),
            human_bytes(unreferenced_bytes)
        )?;
    }
    if differences.is_empty() {
        if !args.json && report.has_metadata_table {
            outln!("{table}: metadata table agrees with storage")?;
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
