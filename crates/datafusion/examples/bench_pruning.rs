//! `cargo xtask bench sql` runs this (release): a selective SQL query on a 1,000-file table
//! with arbor's pruning, against the same query with stats pruning off, with every pruning off,
//! and against DataFusion's own `ListingTable` over the same parquet files (its pruning from
//! parquet footers only), all in one run.
//!
//! The table: copy-on-write, `--partitions` partitions (default 10) of `--files-per-partition`
//! base files (default 100) of `--rows-per-file` rows (default 2,000), `v` rising with the row
//! number so column stats separate the files, the metadata table with column and partition
//! stats. The query: `SELECT count(*), sum(v) FROM t WHERE region = 'r3' AND v BETWEEN lo AND
//! hi` (one file's worth of rows). Every variant must return the same answer; the bench fails
//! otherwise. Median of `--runs` (default 5), each on a fresh session.
//!
//! Usage: `cargo run --release -p arbor-datafusion --example bench_pruning -- [--partitions N]
//! [--files-per-partition N] [--rows-per-file N] [--runs N] [--dir DIR]`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;
use std::time::Instant;

use arbor_datafusion::{arbor_session, ArborTableOptions, ArborTableProvider};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::{CreateOptions, Table, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::prelude::{SessionConfig, SessionContext};

struct Options {
    partitions: u64,
    files_per_partition: u64,
    rows_per_file: u64,
    runs: usize,
    dir: Option<std::path::PathBuf>,
}

fn parse() -> Options {
    let mut o = Options {
        partitions: 10,
        files_per_partition: 100,
        rows_per_file: 2_000,
        runs: 5,
        dir: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut n = || -> u64 {
            it.next()
                .and_then(|v| v.replace('_', "").parse().ok())
                .filter(|n| *n > 0)
                .unwrap_or_else(|| panic!("{a} takes a positive number"))
        };
        match a.as_str() {
            "--partitions" => o.partitions = n(),
            "--files-per-partition" => o.files_per_partition = n(),
            "--rows-per-file" => o.rows_per_file = n(),
            "--runs" => o.runs = n() as usize,
            "--dir" => o.dir = Some(it.next().expect("--dir DIR").into()),
            other => panic!("unknown argument {other}"),
        }
    }
    o
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("v", DataType::Int64, false),
        Field::new("payload", DataType::Utf8, false),
    ]))
}

/// Rows of one partition: `v` rises through the table, so every file covers its own range.
fn partition_batch(p: u64, rows: u64) -> RecordBatch {
    let start = p * rows;
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(
                (start..start + rows).map(|i| format!("k{i:010}")),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|_| format!("r{p}")),
            )),
            Arc::new(Int64Array::from_iter_values(
                (start..start + rows).map(|i| i as i64),
            )),
            Arc::new(StringArray::from_iter_values(
                (start..start + rows).map(|i| format!("payload-{i:010}-{}", i % 97)),
            )),
        ],
    )
    .unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

async fn build(base: &std::path::Path, o: &Options) -> (f64, usize) {
    let start = Instant::now();
    std::fs::create_dir_all(base).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(base).unwrap());
    let rows = o.files_per_partition * o.rows_per_file;
    let sample = partition_batch(0, rows);
    let bytes_per_row = (sample.get_array_memory_size() as u64 / rows).max(1);
    let table = Table::create(
        storage.clone(),
        CreateOptions {
            name: "pruning_bench".into(),
            table_type: TableType::CopyOnWrite,
            record_key_fields: vec!["id".into()],
            partition_fields: vec!["region".into()],
            hive_style_partitioning: true,
            ordering_field: None,
            merge_mode: None,
            schema: schema(),
            metadata_table: true,
            table_version: Default::default(),
        },
    )
    .await
    .unwrap()
    .with_write_options(WriteOptions {
        max_file_size: bytes_per_row * o.rows_per_file,
        small_file_limit: 0,
        ..WriteOptions::default()
    });
    let batches: Vec<RecordBatch> = (0..o.partitions)
        .map(|p| partition_batch(p, rows))
        .collect();
    table
        .write(WriteOperation::BulkInsert, batches)
        .await
        .unwrap();
    table.create_stats_indexes(true, true).await.unwrap();
    let files = walk(base)
        .iter()
        .filter(|p| {
            p.extension().is_some_and(|e| e == "parquet")
                && !p.to_string_lossy().contains(".hoodie")
        })
        .count();
    (start.elapsed().as_secs_f64(), files)
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Runs `query` on a fresh session made by `register`; returns (seconds, answer).
async fn timed<F, Fut>(register: F, query: &str) -> (f64, String)
where
    F: Fn(SessionContext) -> Fut,
    Fut: std::future::Future<Output = SessionContext>,
{
    arbor_table::read::cache::clear();
    let start = Instant::now();
    let ctx = register(arbor_session(SessionConfig::new())).await;
    let batches = ctx.sql(query).await.unwrap().collect().await.unwrap();
    let answer = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    (start.elapsed().as_secs_f64(), answer)
}

#[tokio::main]
async fn main() {
    let o = parse();
    let temp = tempfile::tempdir().unwrap();
    let work = o.dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    let base = work.join("t");
    let started = Instant::now();
    let (built, files) = build(&base, &o).await;
    let location = base.to_string_lossy().to_string();
    let total_rows = o.partitions * o.files_per_partition * o.rows_per_file;
    let rows = o.files_per_partition * o.rows_per_file;
    let lo = 3 * rows + rows / 2;
    let hi = lo + o.rows_per_file - 1;
    let selective = format!(
        "SELECT count(*) AS n, sum(v) AS s FROM t WHERE region = 'r3' AND v BETWEEN {lo} AND {hi}"
    );
    // The same predicate written so that no pruning can use it.
    let opaque = format!(
        "SELECT count(*) AS n, sum(v) AS s FROM t WHERE concat(region, '') = 'r3' AND v + 0 BETWEEN {lo} AND {hi}"
    );
    let data_dir = format!("{location}/");
    let loc = location.clone();
    let arbor = |opts: ArborTableOptions| {
        let loc = loc.clone();
        move |ctx: SessionContext| {
            let loc = loc.clone();
            let opts = opts.clone();
            async move {
                let p = ArborTableProvider::try_new(&loc, opts).await.unwrap();
                ctx.register_table("t", Arc::new(p)).unwrap();
                ctx
            }
        }
    };
    let listing = |ctx: SessionContext| {
        let dir = data_dir.clone();
        async move {
            let url = ListingTableUrl::parse(&dir).unwrap();
            let options = ListingOptions::new(Arc::new(ParquetFormat::default()))
                .with_file_extension(".parquet")
                .with_table_partition_cols(vec![("region".to_string(), DataType::Utf8)]);
            let state = ctx.state();
            let file_schema = options.infer_schema(&state, &url).await.unwrap();
            let config = ListingTableConfig::new(url)
                .with_listing_options(options)
                .with_schema(file_schema);
            ctx.register_table("t", Arc::new(ListingTable::try_new(config).unwrap()))
                .unwrap();
            ctx
        }
    };
    let mut results: Vec<(&str, Vec<f64>, String)> = Vec::new();
    for _ in 0..o.runs {
        let runs: Vec<(&str, (f64, String))> = vec![
            (
                "arbor, pruning on",
                timed(arbor(ArborTableOptions::new()), &selective).await,
            ),
            (
                "arbor, stats pruning off (partition values only)",
                timed(
                    arbor(ArborTableOptions::new().data_skipping(false)),
                    &selective,
                )
                .await,
            ),
            (
                "arbor, every pruning off",
                timed(arbor(ArborTableOptions::new()), &opaque).await,
            ),
            (
                "DataFusion ListingTable (parquet footers only)",
                timed(listing, &selective).await,
            ),
        ];
        for (name, (secs, answer)) in runs {
            match results.iter_mut().find(|r| r.0 == name) {
                Some(r) => r.1.push(secs),
                None => results.push((name, vec![secs], answer)),
            }
        }
    }
    let want = results[0].2.clone();
    for r in &results {
        assert_eq!(r.2, want, "{} answered differently", r.0);
    }
    let base_time = median(results[0].1.clone());
    println!();
    println!(
        "table: copy-on-write, {} partitions, {files} base files, {total_rows} rows, column and \
         partition stats; written in {built:.0} s; whole bench {:.0} s",
        o.partitions,
        started.elapsed().as_secs_f64()
    );
    println!("query: {selective}");
    println!("answer:\n{want}");
    println!(
        "median of {} runs, each on a fresh session (open, plan, execute):",
        o.runs
    );
    println!();
    println!("| query | seconds | this / arbor with pruning |");
    println!("|---|---:|---:|");
    for (name, times, _) in &results {
        let t = median(times.clone());
        println!("| {name} | {t:.3} | {:.1}x |", t / base_time);
    }
    let ctx = arbor(ArborTableOptions::new())(arbor_session(SessionConfig::new())).await;
    let plan = ctx
        .sql(&format!("EXPLAIN ANALYZE {selective}"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&plan)
        .unwrap()
        .to_string();
    if let Some(line) = text.lines().find(|l| l.contains("ArborScanExec")) {
        println!();
        println!("{}", line.trim_matches(|c| c == '|' || c == ' '));
    }
}
