//! SQL over every Spark fixture (Lance ones included) equals hudi-rs (the expected `data_sha256` of
//! `expected/<table>/{snapshot,asof_first,asof_prev,incremental}.json`) and arbor's reader
//! (a filter on a partition column and on a data column, and aggregates, compared with the same
//! SQL over a memory table of `TableReader::snapshot`).

use std::sync::Arc;

use arbor_datafusion::{ArborTableOptions, ArborTableProvider};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_testkit::{
    batches_digest, expected_dir, expected_json, fixture_name, fixture_zips, fixtures_root_or_skip,
    peer_python_or_skip, unzip_table,
};
use arrow::array::RecordBatch;
use arrow::datatypes::DataType;
use datafusion::common::{Column, ScalarValue};
use datafusion::logical_expr::{lit, Expr};
use datafusion::prelude::SessionContext;
use serde_json::Value;

use crate::support::{register_mem, rows, session, sql};

fn options_of(query: &Value) -> ArborTableOptions {
    let s = |v: &Value| v.as_str().map(str::to_string);
    if query["type"] == "incremental" {
        ArborTableOptions::new().incremental(s(&query["start"]), s(&query["end"]))
    } else {
        match s(&query["as_of"]) {
            Some(t) => ArborTableOptions::new().as_of(t),
            None => ArborTableOptions::new(),
        }
    }
}

/// Whether DataFusion's `=` on this type is a plain comparison (no float NaN subtleties, no
/// nested values).
fn filterable(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int32
            | DataType::Int64
            | DataType::Utf8
            | DataType::Date32
            | DataType::Boolean
            | DataType::Decimal128(_, _)
            | DataType::Timestamp(_, _)
    )
}

/// `column = <its value in row 0 of the first non-empty batch>`.
fn equals_first_value(batches: &[RecordBatch], column: &str) -> Option<Expr> {
    let b = batches.iter().find(|b| b.num_rows() > 0)?;
    let array = b.column_by_name(column)?;
    if !filterable(array.data_type()) || array.is_null(0) {
        return None;
    }
    let value = ScalarValue::try_from_array(array, 0).ok()?;
    Some(Expr::Column(Column::from_name(column)).eq(lit(value)))
}

async fn filtered(ctx: &SessionContext, table: &str, filter: &Expr) -> Vec<String> {
    let df = ctx
        .table(table)
        .await
        .unwrap()
        .filter(filter.clone())
        .unwrap();
    rows(&df.collect().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_sql_over_every_fixture_equals_hudi_rs_and_arbor_read() {
    let Some(root) = fixtures_root_or_skip("SQL fixture tests") else {
        return;
    };
    let Some(python) = peer_python_or_skip("SQL fixture tests need python with pyarrow") else {
        return;
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    for zip in fixture_zips(&root) {
        let name = fixture_name(&root, &zip);
        let (_tmp, base) = unzip_table(&zip);
        let location = base.to_string_lossy().to_string();
        // hudi-rs's rows of each expected query, through SQL `SELECT *`.
        for query in ["snapshot", "asof_first", "asof_prev", "incremental"] {
            let Some(expected) =
                expected_json(&expected_dir(&root, &zip), &format!("{query}.json"))
            else {
                continue;
            };
            let ctx = session();
            let provider = match ArborTableProvider::try_new(
                &location,
                options_of(&expected["query"]),
            )
            .await
            {
                Ok(p) => p,
                Err(e) => {
                    failures.push(format!("{name}/{query}: open: {e}"));
                    continue;
                }
            };
            let schema = datafusion::catalog::TableProvider::schema(&provider);
            ctx.register_table("t", Arc::new(provider)).unwrap();
            let batches = match ctx.sql("SELECT * FROM t").await {
                Ok(df) => df.collect().await,
                Err(e) => Err(e),
            };
            let batches = match batches {
                Ok(b) => b,
                Err(e) => {
                    failures.push(format!("{name}/{query}: {e}"));
                    continue;
                }
            };
            let (n, sha) = batches_digest(&python, &schema, &batches);
            let want_rows = expected["row_count"].as_u64().unwrap();
            let want_sha = expected["data_sha256"].as_str().unwrap();
            if n != want_rows || sha != want_sha {
                failures.push(format!(
                    "{name}/{query}: SQL rows {n} (hudi-rs {want_rows}), data_sha256 {} (hudi-rs {})",
                    &sha[..12],
                    &want_sha[..12]
                ));
            } else {
                checked += 1;
            }
        }
        // Filters and aggregates against the same SQL over arbor's own read.
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
        let reader = TableReader::open(storage).await.unwrap();
        let ours = reader.snapshot(None).await.unwrap();
        let ctx = session();
        crate::support::register(&ctx, "t", &location, ArborTableOptions::new()).await;
        register_mem(&ctx, "m", reader.schema(), ours.clone());
        let schema = reader.schema().clone();
        let mut columns: Vec<String> = reader
            .config()
            .partition_fields()
            .into_iter()
            .map(|f| f.split(':').next().unwrap().to_string())
            .filter(|f| schema.field_with_name(f).is_ok())
            .collect();
        let partition_columns = columns.len();
        if let Some(data) = schema.fields().iter().find(|f| {
            !f.name().starts_with("_hoodie")
                && !columns.contains(f.name())
                && filterable(f.data_type())
        }) {
            columns.push(data.name().clone());
        }
        for column in &columns {
            let Some(filter) = equals_first_value(&ours, column) else {
                continue;
            };
            let (sql_rows, arbor_rows) = (
                filtered(&ctx, "t", &filter).await,
                filtered(&ctx, "m", &filter).await,
            );
            if sql_rows != arbor_rows || sql_rows.is_empty() {
                failures.push(format!(
                    "{name}: filter {filter}: SQL {} rows, arbor read {} rows",
                    sql_rows.len(),
                    arbor_rows.len()
                ));
            } else {
                checked += 1;
            }
        }
        let group = columns
            .first()
            .map(|c| format!("\"{c}\""))
            .unwrap_or_else(|| "1".to_string());
        let aggregate =
            |t: &str| format!("SELECT {group} AS g, count(*) AS n FROM {t} GROUP BY {group}");
        let (a, b) = (
            rows(&sql(&ctx, &aggregate("t")).await),
            rows(&sql(&ctx, &aggregate("m")).await),
        );
        if a != b {
            failures.push(format!("{name}: aggregate: SQL {a:?}, arbor read {b:?}"));
        } else {
            checked += 1;
        }
        let count = rows(&sql(&ctx, "SELECT count(*) FROM t").await);
        if count
            != vec![ours
                .iter()
                .map(RecordBatch::num_rows)
                .sum::<usize>()
                .to_string()]
        {
            failures.push(format!("{name}: count(*) {count:?}"));
        }
        let _ = partition_columns;
    }
    eprintln!("checked {checked} SQL fixture queries");
    assert!(checked > 60, "only {checked} fixture queries checked");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
