//! `arbor sql "<query>" --table NAME=PATH [--table ...] [--branch B | --tag T | --as-of I]
//! [--format table|jsonl|csv|parquet] [--output FILE] [--limit N] [--wide]`: SQL through
//! DataFusion over arbor's tables (arbor-datafusion), printed like `arbor read`.

use std::sync::Arc;

use arbor_datafusion::{arbor_session, ArborTableOptions, ArborTableProvider};
use arbor_storage::StorageOptions;
use arrow::array::RecordBatch;
use async_trait::async_trait;
use clap::Args;
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::DFParser;
use futures::StreamExt;

use crate::context::lock::chosen_lock;
use crate::context::{open_table_on, MAIN};
use crate::emit::{emit, EmitOptions, ReadFormat, RowSource};
use crate::error::{CliError, CliResult};

/// Arguments of `arbor sql`.
#[derive(Debug, Args)]
#[command(
    after_help = "Each --table NAME=PATH registers the table at PATH (a local path or \
    URL; -o storage options apply) as NAME, on --branch (default main), at --tag, or as of \
    --as-of (an instant time or ISO date/time); those flags apply to every --table. Tables \
    can also be declared inside the query, each with its own ref:\n  \
    CREATE EXTERNAL TABLE t STORED AS HUDI LOCATION './trips' OPTIONS ('branch' 'audit');\n\
    (options: branch, tag, as_of, incremental_start, incremental_end, read_optimized, \
    data_skipping, write_operation, and storage options s3.*, azure.*, gs.*). Several \
    statements are separated by ';' and run in order; the last one's rows are printed. \
    INSERT INTO writes one commit per statement on main or the branch (an upsert by record \
    key unless OPTIONS ('write_operation' 'insert'|'bulk_insert')); INSERT OVERWRITE replaces \
    the partitions written. The _hoodie_* meta columns are part of every table's columns: \
    INSERT names its columns (INSERT INTO t (id, city) VALUES ...).\n\n\
    Examples:\n  \
    arbor sql \"SELECT city, count(*) FROM trips GROUP BY city\" --table trips=./trips\n  \
    arbor sql \"SELECT * FROM trips WHERE fare > 20\" --table trips=./trips --tag v1\n  \
    arbor sql \"EXPLAIN ANALYZE SELECT * FROM trips WHERE city = 'sf'\" --table trips=./trips\n  \
    arbor sql \"INSERT INTO trips (uuid, city, fare, ts) VALUES ('u9', 'sf', 9.5, 1)\" \
    --table trips=./trips --branch audit"
)]
pub struct SqlArgs {
    /// The SQL: one statement, or several separated by ';'.
    pub query: String,
    /// A table as NAME=PATH (repeatable).
    #[arg(long = "table", value_name = "NAME=PATH")]
    pub tables: Vec<String>,
    /// The branch every --table reads and writes (default main).
    #[arg(long, value_name = "B", default_value = MAIN)]
    pub branch: String,
    /// Read every --table as of this tag of the branch.
    #[arg(long, value_name = "NAME", conflicts_with = "as_of")]
    pub tag: Option<String>,
    /// Read every --table as of this instant time or ISO date/time.
    #[arg(long, value_name = "T")]
    pub as_of: Option<String>,
    /// Output format; parquet needs --output.
    #[arg(long, value_enum, default_value_t = ReadFormat::Table)]
    pub format: ReadFormat,
    /// Write to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Output at most N rows. Default: 50 for the table format, all rows for the others.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Table format: print every column and every value whole, however wide.
    #[arg(long)]
    pub wide: bool,
}

/// A DataFusion error as the CLI shows it: arbor's own message when the provider failed.
fn sql_error(e: DataFusionError) -> CliError {
    let root = e.find_root();
    let text = match root {
        DataFusionError::External(inner) => inner.to_string(),
        other => other.to_string(),
    };
    CliError::Sql(text)
}

/// The rows of a DataFusion stream.
struct StreamRows(SendableRecordBatchStream);

#[async_trait]
impl RowSource for StreamRows {
    async fn next(&mut self) -> CliResult<Option<RecordBatch>> {
        loop {
            match self.0.next().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(sql_error(e)),
                Some(Ok(b)) if b.num_rows() == 0 && b.num_columns() > 0 => continue,
                Some(Ok(b)) => return Ok(Some(b)),
            }
        }
    }
}

/// Registers the `--table` arguments in `ctx`.
async fn register_tables(
    ctx: &SessionContext,
    args: &SqlArgs,
    storage: &StorageOptions,
) -> CliResult<()> {
    for spec in &args.tables {
        let (name, location) = spec
            .split_once('=')
            .ok_or_else(|| CliError::Usage(format!("--table expects NAME=PATH, got {spec:?}")))?;
        let (name, location) = (name.trim(), location.trim());
        if name.is_empty() || location.is_empty() {
            return Err(CliError::Usage(format!(
                "--table expects NAME=PATH, got {spec:?}"
            )));
        }
        let mut options = ArborTableOptions::new()
            .branch(args.branch.clone())
            .storage_options(storage.clone());
        if let Some(t) = &args.tag {
            options = options.tag(t.clone());
        }
        if let Some(t) = &args.as_of {
            options = options.as_of(t.clone());
        }
        let writable = options.read_only_reason().is_none();
        let mut provider = ArborTableProvider::try_new(location, options)
            .await
            .map_err(|e| CliError::Sql(e.to_string()))?;
        for w in provider.warnings() {
            errln!("warning: {name}: {w}");
        }
        // A version arbor only reads (6) is registered read-only: SELECT reads it as `arbor
        // read` does, INSERT fails naming `arbor upgrade`.
        if writable && provider.is_writable_version() {
            // Writes take the lock `arbor write` would: --lock, the table's Hudi lock
            // properties, else the storage lock (released on SIGINT/SIGTERM).
            let table = open_table_on(location, storage, &args.branch).await?;
            let lock = chosen_lock(
                location,
                table.config(),
                table.view_storage(),
                table.table_storage(),
            )
            .await?;
            provider = provider.with_lock_provider(lock);
        }
        ctx.register_table(name, Arc::new(provider))
            .map_err(sql_error)?;
    }
    Ok(())
}

/// Runs `arbor sql`.
pub async fn run(args: SqlArgs, storage: &StorageOptions) -> CliResult<()> {
    if args.format == ReadFormat::Parquet && args.output.is_none() {
        return Err(CliError::Usage(
            "--format parquet needs --output FILE".into(),
        ));
    }
    let ctx = arbor_session(SessionConfig::new());
    register_tables(&ctx, &args, storage).await?;
    let statements = DFParser::parse_sql(&args.query).map_err(sql_error)?;
    let count = statements.len();
    if count == 0 {
        return Err(CliError::Usage("the query holds no SQL statement".into()));
    }
    for (i, mut statement) in statements.into_iter().enumerate() {
        // INSERT literals are parsed from their own text, exactly (not as doubles).
        arbor_datafusion::exact_number_literals(&mut statement);
        // Each statement sees what the ones before it registered.
        let plan = ctx
            .state()
            .statement_to_plan(statement)
            .await
            .map_err(sql_error)?;
        let df = ctx.execute_logical_plan(plan).await.map_err(sql_error)?;
        if i + 1 < count {
            df.collect().await.map_err(sql_error)?;
            continue;
        }
        let stream = df.execute_stream().await.map_err(sql_error)?;
        let schema = stream.schema();
        let mut rows = StreamRows(stream);
        return emit(
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
        .await;
    }
    Ok(())
}
