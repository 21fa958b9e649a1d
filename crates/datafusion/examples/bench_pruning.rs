//! `cargo xtask bench sql` runs this (release): a selective SQL query on a 1,000-file table
//! with arbor's pruning, against the same query with stats pruning off, with every pruning off,
//! against DataFusion's own `ListingTable` over the same parquet files (its pruning from parquet
//! footers only), and, given `--peer-python PY` (a Python with PyPI `hudi` 0.5.0 and
//! `datafusion` 54; `cargo xtask bench sql` sets one up), against hudi-rs's DataFusion provider
//! on the same table, all in one run.
//!
//! The table: copy-on-write, `--partitions` partitions (default 10) of `--files-per-partition`
//! base files (default 100) of `--rows-per-file` rows (default 2,000), `v` rising with the row
//! number so column stats separate the files, the metadata table with column and partition
//! stats. The query: `SELECT count(*), sum(v) FROM t WHERE region = 'r3' AND v BETWEEN lo AND
//! hi` (one file's worth of rows). Every variant must return the same answer; the bench fails
//! otherwise. Median of `--runs` (default 5), each on a fresh session.
//!
//! Usage: `cargo run --release -p arbor-datafusion --example bench_pruning -- [--partitions N]
//! [--files-per-partition N] [--rows-per-file N] [--runs N] [--dir DIR] [--peer-python PY]`.

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
use arrow::array::{AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
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
    peer_python: Option<std::path::PathBuf>,
    /// Set by the bench for its second process: run the queries on this table.
    queries_on: Option<String>,
}

fn parse() -> Options {
    let mut o = Options {
        partitions: 10,
        files_per_partition: 100,
        rows_per_file: 2_000,
        runs: 5,
        dir: None,
        peer_python: None,
        queries_on: None,
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
            "--peer-python" => o.peer_python = Some(it.next().expect("--peer-python PY").into()),
            "--queries-on" => o.queries_on = Some(it.next().expect("--queries-on DIR").clone()),
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

/// Writes the table; returns (seconds, base files, their bytes).
async fn build(base: &std::path::Path, o: &Options) -> (f64, usize, u64) {
    let start = Instant::now();
    std::fs::create_dir_all(base).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(base).unwrap());
    let rows = o.files_per_partition * o.rows_per_file;
    let batches: Vec<RecordBatch> = (0..o.partitions)
        .map(|p| partition_batch(p, rows))
        .collect();
    // The writer cuts files at `max_file_size / (in-memory bytes per row of the whole input)`
    // rows: size the limit so that it cuts at exactly `rows_per_file`.
    let whole = arrow::compute::concat_batches(&schema(), &batches).unwrap();
    let bytes_per_row = (whole.get_array_memory_size() as u64 / whole.num_rows() as u64).max(1);
    drop(whole);
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
            base_format: Default::default(),
        },
    )
    .await
    .unwrap()
    .with_write_options(WriteOptions {
        max_file_size: bytes_per_row * o.rows_per_file + bytes_per_row / 2,
        small_file_limit: 0,
        ..WriteOptions::default()
    });
    table
        .write(WriteOperation::BulkInsert, batches)
        .await
        .unwrap();
    table.create_stats_indexes(true, true).await.unwrap();
    let files: Vec<_> = walk(base)
        .into_iter()
        .filter(|p| {
            p.extension().is_some_and(|e| e == "parquet")
                && !p.to_string_lossy().contains(".hoodie")
        })
        .collect();
    let bytes = files
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    (start.elapsed().as_secs_f64(), files.len(), bytes)
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

/// This process's peak resident set in MiB (Linux VmHWM), if known.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The hudi-rs side (see the script's header).
const HUDI_RS_SCRIPT: &str = include_str!("bench_pruning_hudi_rs.py");

/// What hudi-rs's provider measured: seconds per run, its answer (n, s), its scan's plan line.
struct HudiRs {
    versions: String,
    seconds: Vec<f64>,
    peak_mib: f64,
    answer: (i64, i64),
    plan: String,
}

/// Runs the selective query through hudi-rs's provider in `python`, `runs` times.
fn hudi_rs(python: &std::path::Path, table: &str, query: &str, runs: usize) -> HudiRs {
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(HUDI_RS_SCRIPT)
        .arg(table)
        .arg(query)
        .arg(runs.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    assert!(
        out.status.success(),
        "hudi-rs's provider failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    HudiRs {
        versions: format!(
            "hudi {}, datafusion-python {}",
            v["hudi"].as_str().unwrap_or("?"),
            v["datafusion"].as_str().unwrap_or("?")
        ),
        seconds: v["seconds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap())
            .collect(),
        answer: (
            v["answer"][0].as_i64().unwrap(),
            v["answer"][1].as_i64().unwrap(),
        ),
        plan: v["plan"].as_str().unwrap_or("").to_string(),
        peak_mib: v["peak_kib"].as_f64().unwrap_or(0.0) / 1024.0,
    }
}

/// The (n, s) of an answer.
fn numbers(batches: &[RecordBatch]) -> (i64, i64) {
    let value = |i: usize| batches[0].column(i).as_primitive::<Int64Type>().value(0);
    (value(0), value(1))
}

/// One timed query: seconds, the printed answer, its (n, s).
type Timed = (f64, String, (i64, i64));

/// Runs `query` on a fresh session made by `register`; returns (seconds, answer).
async fn timed<F, Fut>(register: F, query: &str) -> Timed
where
    F: Fn(SessionContext) -> Fut,
    Fut: std::future::Future<Output = SessionContext>,
{
    arbor_table::read::cache::clear();
    let start = Instant::now();
    let ctx = register(arbor_session(SessionConfig::new())).await;
    let batches = ctx.sql(query).await.unwrap().collect().await.unwrap();
    let elapsed = start.elapsed().as_secs_f64();
    let answer = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    (elapsed, answer, numbers(&batches))
}

#[tokio::main]
async fn main() {
    let o = parse();
    if let Some(location) = o.queries_on.clone() {
        queries(&o, &location).await;
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let work = o.dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    let base = work.join("t");
    let started = Instant::now();
    let (built, files, bytes) = build(&base, &o).await;
    let total_rows = o.partitions * o.files_per_partition * o.rows_per_file;
    println!();
    println!(
        "table: copy-on-write, {} partitions, {files} base files ({:.1} MiB), {total_rows} rows, \
         column and partition stats; written in {built:.0} s",
        o.partitions,
        bytes as f64 / (1024.0 * 1024.0),
    );
    // The queries run in a process of their own, so that its peak memory is theirs, not the
    // writer's.
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(std::env::args().skip(1))
        .arg("--queries-on")
        .arg(&base)
        .status()
        .unwrap();
    assert!(status.success(), "the queries failed: {status}");
    println!();
    println!("whole bench {:.0} s", started.elapsed().as_secs_f64());
}

/// Runs every variant of the query on the table at `location` and prints the report.
async fn queries(o: &Options, location: &str) {
    let location = location.to_string();
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
            // `region` is in the files too (Hudi keeps partition columns), so it is not declared
            // a partition column: this table prunes by parquet footers only.
            let options = ListingOptions::new(Arc::new(ParquetFormat::default()))
                .with_file_extension(".parquet");
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
    let mut want_numbers = None;
    for _ in 0..o.runs {
        let runs: Vec<(&str, Timed)> = vec![
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
        for (name, (secs, answer, n)) in runs {
            want_numbers.get_or_insert(n);
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
    let arbor_peak = peak_rss_mib();
    let peer = o.peer_python.as_ref().map(|py| {
        let h = hudi_rs(py, &location, &selective, o.runs);
        assert_eq!(
            Some(h.answer),
            want_numbers,
            "hudi-rs's provider answered differently"
        );
        h
    });
    let base_time = median(results[0].1.clone());
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
    match &peer {
        Some(h) => {
            let t = median(h.seconds.clone());
            println!(
                "| hudi-rs's DataFusion provider ({}) | {t:.3} | {:.1}x |",
                h.versions,
                t / base_time
            );
        }
        None => println!("(hudi-rs's provider not run: no --peer-python)"),
    }
    println!();
    match arbor_peak {
        Some(m) => print!(
            "peak memory (resident) of the queries: arbor's process {m:.0} MiB (all four variants)"
        ),
        None => print!("peak memory of the queries: not known here (no /proc)"),
    }
    match &peer {
        Some(h) => println!("; hudi-rs's Python process {:.0} MiB", h.peak_mib),
        None => println!(),
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
    if let Some(h) = &peer {
        println!("hudi-rs: {}", h.plan);
    }
}
