//! Shared helpers: sessions, canonical rows, a DataFusion memory table of arbor's own read.

use std::sync::Arc;

use arbor_datafusion::{arbor_session, ArborTableOptions, ArborTableProvider};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};

/// A session with `STORED AS HUDI` registered and 4 target partitions (so scans run in
/// parallel partitions even on small machines).
pub fn session() -> SessionContext {
    arbor_session(SessionConfig::new().with_target_partitions(4))
}

/// Runs `query` and collects its batches.
pub async fn sql(ctx: &SessionContext, query: &str) -> Vec<RecordBatch> {
    ctx.sql(query)
        .await
        .unwrap_or_else(|e| panic!("planning {query}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("running {query}: {e}"))
}

/// The error `query` fails with (planning or execution).
pub async fn sql_err(ctx: &SessionContext, query: &str) -> String {
    match ctx.sql(query).await {
        Err(e) => e.to_string(),
        Ok(df) => match df.collect().await {
            Err(e) => e.to_string(),
            Ok(b) => panic!("{query} succeeded with {} batches", b.len()),
        },
    }
}

/// Every row as `v1|v2|...` (arrow's display of each value, `NULL` for nulls), sorted.
pub fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let options = FormatOptions::default().with_null("NULL");
    let mut out = Vec::new();
    for b in batches {
        let formatters: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for row in 0..b.num_rows() {
            let cells: Vec<String> = formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect();
            out.push(cells.join("|"));
        }
    }
    out.sort();
    out
}

/// Registers `batches` (arbor's own read) as memory table `name` of `ctx`.
pub fn register_mem(
    ctx: &SessionContext,
    name: &str,
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
) {
    let table = MemTable::try_new(schema.clone(), vec![batches]).unwrap();
    ctx.register_table(name, Arc::new(table)).unwrap();
}

/// Registers the table at `location` with `options` as `name` of `ctx`.
pub async fn register(
    ctx: &SessionContext,
    name: &str,
    location: &str,
    options: ArborTableOptions,
) {
    let provider = ArborTableProvider::try_new(location, options)
        .await
        .unwrap();
    ctx.register_table(name, Arc::new(provider)).unwrap();
}

/// The plan text of `EXPLAIN ANALYZE query`.
pub async fn explain_analyze(ctx: &SessionContext, query: &str) -> String {
    let batches = sql(ctx, &format!("EXPLAIN ANALYZE {query}")).await;
    arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string()
}

/// The value of metric `name` in the `ArborScanExec` line of an `EXPLAIN ANALYZE` text.
pub fn metric(plan: &str, name: &str) -> usize {
    let line = plan
        .lines()
        .find(|l| l.contains("ArborScanExec"))
        .unwrap_or_else(|| panic!("no ArborScanExec in\n{plan}"));
    let at = line
        .find(&format!("{name}="))
        .unwrap_or_else(|| panic!("no metric {name} in {line}"));
    line[at + name.len() + 1..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap()
}
