//! `arbor write <table> <input> [--branch B] [--op OP] [table definition flags]`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arbor_storage::StorageOptions;
use arbor_table::WriteOperation;
use arrow::record_batch::RecordBatch;
use clap::{Args, ValueEnum};

use crate::context::{
    create_table, open_table_at, open_target, remove_made_dir, selected, CommitReport, Progress,
    TableSpec,
};
use crate::error::{CliError, CliResult};
use crate::input;

/// Arguments of `arbor write`.
///
/// Writing to a table that does not exist yet creates it, but only when the table definition
/// flags say how (at least --type and --key); its data schema is then inferred from the
/// input. For an existing table the input is checked against the table's schema: every table
/// column must be present (for --op delete, only the key and partition columns are needed),
/// no other column may be, and every value must convert to the table's type.
#[derive(Debug, Args)]
#[command(
    after_help = "A missing table is created by the write only when --type and --key are \
    given; its data schema is then inferred from the input (CSV: arrow-csv inference; JSON \
    lines: arrow-json inference; parquet: the file's schema). For an existing table the input \
    is checked against the table's schema by column name: every table column must be present \
    (--op delete needs only the key and partition columns), no other column may be, and every \
    value must convert to the table's type; the error names the column and row (counted from \
    0). Table definition flags given for an existing table must agree with it.\n\n\
    Examples:\n  \
    arbor write ./trips trips.csv --type cow --key uuid --partition-by city --ordering ts\n  \
    arbor write ./trips changes.jsonl              # upsert into the existing table\n  \
    arbor write ./trips fixes.csv --branch audit   # upsert into working branch audit\n  \
    arbor write ./trips gone.csv --op delete       # delete the keys gone.csv names"
)]
pub struct WriteArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The rows to write: a .parquet, .csv (with a header row) or .jsonl file. Hudi's
    /// `_hoodie_*` meta columns in it are ignored.
    pub input: PathBuf,
    /// The branch to write to: main, or an existing working branch (`arbor branch create`;
    /// a missing branch is an error, and a new table is created on main only).
    #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
    pub branch: String,
    /// The write operation.
    #[arg(long, value_enum, default_value_t = OpArg::Upsert)]
    pub op: OpArg,
    /// Partial update (upsert only): columns the input lacks keep their stored values for keys
    /// already in the table (new keys get nulls); reads the table's current rows first.
    #[arg(long)]
    pub partial: bool,
    /// Refuse input that would change the table's schema (new columns, wider types); by
    /// default such input evolves the schema as Hudi does.
    #[arg(long)]
    pub no_schema_evolution: bool,
    /// Drop these columns (comma separated) from the table's schema with this write: the
    /// schema the commit records omits them, so reads no longer show them (files written
    /// before keep their values, unread); input columns of these names are not written. Key,
    /// partition and ordering columns cannot be dropped. Existing tables only.
    #[arg(long, value_name = "COLS", value_delimiter = ',')]
    pub drop_columns: Vec<String>,
    /// Table definition, used only when the table does not exist yet.
    #[command(flatten)]
    pub spec: TableSpec,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The write operation on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OpArg {
    /// Add the rows (existing keys are not looked up).
    Insert,
    /// Add the rows without small-file packing or lookups (large initial loads).
    BulkInsert,
    /// Insert new keys, update existing ones.
    Upsert,
    /// Delete the records whose keys the rows name.
    Delete,
    /// Replace the partitions the rows touch with the rows.
    InsertOverwrite,
    /// Replace the whole table with the rows.
    InsertOverwriteTable,
}

impl OpArg {
    /// The library's operation.
    pub fn operation(self) -> WriteOperation {
        match self {
            OpArg::Insert => WriteOperation::Insert,
            OpArg::BulkInsert => WriteOperation::BulkInsert,
            OpArg::Upsert => WriteOperation::Upsert,
            OpArg::Delete => WriteOperation::Delete,
            OpArg::InsertOverwrite => WriteOperation::InsertOverwrite,
            OpArg::InsertOverwriteTable => WriteOperation::InsertOverwriteTable,
        }
    }
}

/// Writes the input to the table (creating it first when asked to); returns the report.
pub async fn write(args: &WriteArgs, options: &StorageOptions) -> CliResult<CommitReport> {
    let location = args.table.as_str();
    input::InputFormat::from_path(&args.input)?;
    if args.partial && args.op != OpArg::Upsert {
        return Err(CliError::Usage(
            "--partial applies to upserts only (--op upsert)".into(),
        ));
    }
    let on_main = selected(&args.branch).is_none();
    let may_create = on_main && args.spec.table_type.is_some();
    let target = open_target(location, options, may_create).await?;
    if !on_main && !target.as_ref().is_some_and(|t| t.exists) {
        return Err(CliError::at(
            location,
            CliError::Usage(format!(
                "no table here; --branch {} writes to an existing table's branch (a new table \
                 is created on main only)",
                args.branch
            )),
        ));
    }
    let progress = Progress::start(&format!("reading {}", args.input.display()));
    match target {
        Some(target) if target.exists => {
            let table = open_table_at(location, target.storage.clone(), &args.branch).await?;
            let options = arbor_table::WriteOptions {
                partial_updates: args.partial,
                schema_evolution: !args.no_schema_evolution,
                drop_columns: args
                    .drop_columns
                    .iter()
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect(),
                ..table.write_options().clone()
            };
            let table = table.with_write_options(options);
            args.spec.check_matches(table.config())?;
            let schema = table.schema().clone();
            if table
                .streams(args.op.operation())
                .await
                .map_err(|e| CliError::at(location, e))?
            {
                // A bulk insert streams, whatever the input's format: batches are read,
                // written and dropped one after the other.
                progress.set("writing and committing (bulk insert, streamed)");
                let batches = input::stream_for_schema(&args.input, &schema)?;
                let result = table
                    .write_stream(args.op.operation(), futures::stream::iter(batches))
                    .await
                    .map_err(|e| CliError::at(location, e))?;
                progress.finish();
                let rows = usize::try_from(result.inserted).unwrap_or(usize::MAX);
                return Ok(
                    CommitReport::new(location, false, Some(rows), &result).on_branch(&args.branch)
                );
            }
            if matches!(args.op, OpArg::Upsert | OpArg::Delete) {
                return reread(args, &table, &schema, &progress).await;
            }
            let data = input::read_for_schema(&args.input, &schema)?;
            let rows = non_empty(&args.input, &data)?;
            progress.set(&format!(
                "writing and committing {rows} rows ({})",
                args.op
                    .operation()
                    .operation_type()
                    .name()
                    .to_ascii_lowercase()
            ));
            let result = table
                .write(args.op.operation(), data.batches)
                .await
                .map_err(|e| CliError::at(location, e))?;
            progress.finish();
            Ok(CommitReport::new(location, false, Some(rows), &result).on_branch(&args.branch))
        }
        Some(target) if args.spec.table_type.is_some() => {
            if !args.drop_columns.is_empty() {
                remove_made_dir(&target);
                return Err(CliError::at(
                    location,
                    CliError::Usage(
                        "--drop-columns drops columns of an existing table; here the write \
                         would create one (leave the columns out of the input)"
                            .into(),
                    ),
                ));
            }
            let data = input::read_inferred(&args.input)?;
            crate::context::warn_storage_notes(&data.schema);
            let rows = match non_empty(&args.input, &data) {
                Ok(rows) => rows,
                Err(e) => {
                    remove_made_dir(&target);
                    return Err(e);
                }
            };
            let create =
                match args
                    .spec
                    .create_options(location, data.schema.clone(), "arbor write")
                {
                    Ok(c) => c,
                    Err(e) => {
                        remove_made_dir(&target);
                        return Err(e);
                    }
                };
            progress.set("creating the table");
            let table = create_table(location, &target, create).await?;
            progress.set(&format!(
                "writing and committing {rows} rows ({})",
                args.op
                    .operation()
                    .operation_type()
                    .name()
                    .to_ascii_lowercase()
            ));
            let result = match table.write(args.op.operation(), data.batches).await {
                Ok(r) => r,
                Err(e) => {
                    // Nothing else was ever in a directory this command made.
                    remove_made_dir(&target);
                    let note = if target.made_dir.is_some() {
                        ""
                    } else {
                        " (the table was created, but holds no data)"
                    };
                    return Err(CliError::at(
                        location,
                        CliError::Usage(format!("{e}{note}")),
                    ));
                }
            };
            progress.finish();
            Ok(CommitReport::new(location, true, Some(rows), &result))
        }
        _ if args.spec.any_given() => Err(CliError::at(
            location,
            CliError::Usage(
                "no table here; to create one with this write, give --type cow|mor and --key COLS"
                    .into(),
            ),
        )),
        _ => Err(CliError::at(
            location,
            CliError::Usage(
                "no table here (to create one with this write, add --type cow|mor --key COLS; \
                 see arbor write --help)"
                    .into(),
            ),
        )),
    }
}

/// An upsert or delete into an existing table through [`arbor_table::Table::write_reread`]:
/// the file is read batch by batch, once for the keys, and, when it is larger than the write
/// holds, once more per wave of rows.
async fn reread(
    args: &WriteArgs,
    table: &arbor_table::Table,
    schema: &arrow::datatypes::SchemaRef,
    progress: &Progress,
) -> CliResult<CommitReport> {
    let location = args.table.as_str();
    progress.set(&format!(
        "writing and committing ({})",
        args.op
            .operation()
            .operation_type()
            .name()
            .to_ascii_lowercase()
    ));
    // The first read's rows are the input's. The file is opened (and its errors met) on every
    // read; the first error of the input is reported as the input's, not the table's.
    let rows = Arc::new(AtomicUsize::new(0));
    let input_error: Arc<Mutex<Option<CliError>>> = Arc::new(Mutex::new(None));
    let mut reads = 0usize;
    let open = || {
        reads += 1;
        let count = (reads == 1).then(|| rows.clone());
        let stash = input_error.clone();
        let batches: Box<dyn Iterator<Item = CliResult<RecordBatch>> + Send> =
            match input::stream_for_schema(&args.input, schema) {
                Ok(b) => Box::new(b),
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
        futures::stream::iter(batches.map(move |b| match b {
            Ok(b) => {
                if let Some(count) = &count {
                    count.fetch_add(b.num_rows(), Ordering::Relaxed);
                }
                Ok(b)
            }
            Err(e) => {
                let shown = e.to_string();
                if let Ok(mut slot) = stash.lock() {
                    slot.get_or_insert(e);
                }
                Err(shown)
            }
        }))
    };
    let result = table.write_reread(args.op.operation(), open).await;
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            let from_input = input_error.lock().ok().and_then(|mut slot| slot.take());
            return Err(from_input.unwrap_or_else(|| CliError::at(location, e)));
        }
    };
    progress.finish();
    let rows = rows.load(Ordering::Relaxed);
    Ok(CommitReport::new(location, false, Some(rows), &result).on_branch(&args.branch))
}

fn non_empty(path: &std::path::Path, data: &input::Input) -> CliResult<usize> {
    match data.num_rows() {
        0 => Err(CliError::Input {
            path: path.display().to_string(),
            reason: "empty input: no rows to write".into(),
        }),
        n => Ok(n),
    }
}

/// Runs the command.
pub async fn run(args: WriteArgs, options: &StorageOptions) -> CliResult<()> {
    let report = write(&args, options).await?;
    report.print(args.json)
}
