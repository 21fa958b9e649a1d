//! `cargo xtask bench data-path`: the data-path benchmark. `cargo xtask bench
//! mdt`, the metadata-table benchmark, lives in [`mdt`]; `cargo xtask bench clean`, clean
//! planning, in [`clean`]; `cargo xtask bench branch`, branch creation and publication, in
//! [`branch`]; `cargo xtask bench cache`, the process-wide table cache, in [`cache`];
//! `cargo xtask bench skipping`, data skipping by column stats, in [`skipping`]; `cargo xtask
//! bench ttl`, partition-TTL planning, in [`ttl`]; `cargo xtask bench clone`, shallow and deep
//! clones against a listing, in [`clone`]; `cargo xtask bench mdt-clean`, the metadata table's
//! file count with and without its own clean, in [`mdt_clean`]; `cargo xtask bench contention`,
//! concurrent writers against one, in [`contention`]; `cargo xtask bench merge`, diff and merge
//! of diverged branches against table size and changed keys, in [`merge`]; `cargo xtask bench
//! distributed`, distributed writes (commit time against fragments, Ray against one process), in
//! [`distributed`]; `cargo xtask bench commits`, a 100-row upsert as a whole process early and
//! late in a long history, in [`commits`]; `cargo xtask bench sql`, SQL pruning on a
//! 1,000-file table, is the example `bench_pruning` of arbor-datafusion ([`sql`]); `cargo
//! xtask bench requests`, the S3 requests of everyday operations counted by the server, in
//! [`requests`]; `cargo xtask bench spark`, Spark with Hudi as a yardstick for a bulk insert,
//! an upsert, a snapshot and a point lookup, in [`spark`].
//!
//! For each table size (default 250k, 1M and 2M rows of the ten columns of [`data`], in ten
//! partitions) it measures, on local storage in a temporary directory:
//! 1. arbor's `BulkInsert` into a new copy-on-write table, against arrow-rs writing the same
//!    batches to one parquet file with the same settings (snappy, 1 Mi rows per row group), and
//!    against arrow-rs writing them with the five `_hoodie_*` meta columns already prepended
//!    (built before the clock starts: the encoding cost of the meta columns, without Hudi);
//!    for each writer also the peak resident memory the write added, against the input's
//!    size ([`rss`]: the whole process's high-water mark, reset before the write);
//! 2. arbor's snapshot read of that table (`TableReader::open` + `snapshot`), against hudi-rs
//!    0.5.0 reading it (`HudiTable(path).read(HudiReadOptions())`, timed inside Python so
//!    interpreter start-up is excluded) and against arrow-rs reading its base files;
//! 3. a merge-on-read table made the same way, then an upsert of 10% of the keys (log files),
//!    then arbor's snapshot read against hudi-rs'.
//!
//! Every baseline is measured in the same run as what it is compared with. Writes and reads
//! are repeated `--runs` times (default 5; every write run into a fresh table) and the median
//! is reported; the MOR bulk insert and upsert run once. Reads are checked: every reader must
//! return every row, and the MOR readers exactly the updated rows with the new ordering value;
//! a mismatch fails the bench. The page cache is warm (the files were just written), so reads
//! measure decoding and merging rather than the disk.
//!
//! Usage: `cargo xtask bench data-path [--sizes 250000,1000000,2000000] [--runs 5] [--no-peer]
//! [--dir DIR]`. A debug build of xtask (what `cargo xtask` runs) builds the release xtask
//! with `cargo build --release -p xtask` and runs the bench there. `--dir` keeps the tables
//! under DIR (a new directory); `--no-peer` skips hudi-rs. The peer Python is
//! `$ARBOR_PEER_PYTHON`, else what `scripts/peer.sh` prints. Prints the machine and two
//! Markdown tables (sizes; timings with ratios; write memory).

mod branch;
mod cache;
mod clean;
mod clone;
mod cluster;
mod commits;
mod contention;
mod data;
mod distributed;
mod history;
mod mdt;
mod mdt_clean;
mod merge;
mod peak_memory;
mod peer;
mod raw;
mod report;
mod requests;
mod rss;
mod skipping;
mod spark;
mod ttl;
mod writes;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_timeline::config::TableType;
use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use tokio::runtime::Runtime;

use report::{median, Machine, SizeResult};

const USAGE: &str =
    "usage: cargo xtask bench data-path [--sizes N,N,...] [--runs N] [--no-peer] [--dir DIR]";

/// Bench options.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    sizes: Vec<u64>,
    runs: usize,
    peer: bool,
    dir: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("data-path") => {}
        _ => return Err(USAGE.to_string()),
    }
    let mut options = Options {
        sizes: vec![250_000, 1_000_000, 2_000_000],
        runs: 5,
        peer: true,
        dir: None,
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--sizes" => {
                let v = it.next().ok_or_else(|| USAGE.to_string())?;
                options.sizes = v
                    .split(',')
                    .map(|s| s.trim().replace('_', "").parse::<u64>())
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("bench: --sizes {v:?}: {e}"))?;
                if options.sizes.is_empty() || options.sizes.contains(&0) {
                    return Err(format!("bench: --sizes {v:?}: sizes must be positive"));
                }
            }
            "--runs" => {
                let v = it.next().ok_or_else(|| USAGE.to_string())?;
                options.runs = v
                    .parse::<usize>()
                    .ok()
                    .filter(|r| *r > 0)
                    .ok_or_else(|| format!("bench: --runs {v:?}: a positive number"))?;
            }
            "--no-peer" => options.peer = false,
            "--dir" => {
                options.dir = Some(PathBuf::from(it.next().ok_or_else(|| USAGE.to_string())?))
            }
            other => return Err(format!("bench: unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(options)
}

/// Runs `cargo xtask bench ...`: parses `args`, re-runs itself as a release build when this is
/// a debug build, then measures and prints the results.
pub fn run(args: &[String]) -> Result<(), String> {
    if args.first().map(String::as_str) == Some("mdt") {
        return mdt::run(args);
    }
    if args.first().map(String::as_str) == Some("mdt-clean") {
        return mdt_clean::run(args);
    }
    if args.first().map(String::as_str) == Some("clean") {
        return clean::run(args);
    }
    if args.first().map(String::as_str) == Some("branch") {
        return branch::run(args);
    }
    if args.first().map(String::as_str) == Some("merge") {
        return merge::run(args);
    }
    if args.first().map(String::as_str) == Some("clone") {
        return clone::run(args);
    }
    if args.first().map(String::as_str) == Some("distributed") {
        return distributed::run(args);
    }
    if args.first().map(String::as_str) == Some("commits") {
        return commits::run(args);
    }
    if args.first().map(String::as_str) == Some("requests") {
        return requests::run(args);
    }
    if args.first().map(String::as_str) == Some("spark") {
        return spark::run(args);
    }
    if args.first().map(String::as_str) == Some("writes") {
        return writes::run(args);
    }
    if args.first().map(String::as_str) == Some("cluster") {
        return cluster::run(args);
    }
    if args.first().map(String::as_str) == Some("cache") {
        return cache::run(args);
    }
    if args.first().map(String::as_str) == Some("skipping") {
        return skipping::run(args);
    }
    if args.first().map(String::as_str) == Some("history") {
        return history::run(args);
    }
    if args.first().map(String::as_str) == Some("ttl") {
        return ttl::run(args);
    }
    if args.first().map(String::as_str) == Some("rss") {
        return rss::run(args);
    }
    if args.first().map(String::as_str) == Some("contention") {
        return contention::run(args);
    }
    if args.first().map(String::as_str) == Some("sql") {
        return sql(args.get(1..).unwrap_or_default());
    }
    let options = parse_args(args)?;
    if cfg!(debug_assertions) {
        return run_release(args);
    }
    let python = if options.peer {
        Some(peer::python()?)
    } else {
        None
    };
    let (work, _temp) = match &options.dir {
        Some(dir) => {
            if dir.exists() {
                return Err(format!(
                    "bench: {} exists; --dir wants a new directory",
                    dir.display()
                ));
            }
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("bench: cannot create {}: {e}", dir.display()))?;
            (dir.clone(), None)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("arbor-bench-")
                .tempdir()
                .map_err(|e| format!("bench: cannot create a temporary directory: {e}"))?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("bench: tokio runtime: {e}"))?;
    let machine = Machine::detect();
    let load = report::load_average();
    eprintln!(
        "bench: {}; tables under {}",
        machine.describe(),
        work.display()
    );
    let started = Instant::now();
    let mut results = Vec::new();
    for &rows in &options.sizes {
        let r = bench_size(&rt, rows, options.runs, python.as_deref(), &work)?;
        results.push(r);
    }
    println!();
    println!("machine: {}", machine.describe());
    println!("load average (1, 5, 15 min) at the start: {load}");
    println!(
        "runs: median of {} (MOR bulk insert and upsert: 1 run); whole bench {:.0} s",
        options.runs,
        started.elapsed().as_secs_f64()
    );
    println!();
    print!("{}", report::sizes_table(&results));
    println!();
    print!("{}", report::timings_table(&results));
    println!();
    print!("{}", peak_memory::write_memory_table(&results));
    Ok(())
}

/// Builds the release xtask and runs `bench` with `args` there.
/// For a bench that runs the release `arbor` CLI. In a debug build: builds the CLI (unless
/// `arbor` names one), re-runs the bench as a release build and returns `None` (the bench ran
/// there). In a release build: the CLI to run, `arbor` or the `arbor` next to this xtask.
fn release_cli(
    kind: &str,
    arbor: Option<&Path>,
    args: &[String],
) -> Result<Option<PathBuf>, String> {
    if cfg!(debug_assertions) {
        if arbor.is_none() {
            eprintln!("bench {kind}: building the release arbor CLI");
            crate::run(Command::new("cargo").args(["build", "--release", "-p", "arbor-cli"]))?;
        }
        run_release(args)?;
        return Ok(None);
    }
    let bin = match arbor {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()
            .map_err(|e| format!("bench {kind}: {e}"))?
            .with_file_name("arbor"),
    };
    if !bin.is_file() {
        return Err(format!(
            "bench {kind}: no arbor binary at {} (cargo build --release -p arbor-cli, or --arbor PATH)",
            bin.display()
        ));
    }
    Ok(Some(bin))
}

fn run_release(args: &[String]) -> Result<(), String> {
    eprintln!("bench: this is a debug build; building the release xtask");
    crate::run(Command::new("cargo").args(["build", "--release", "-p", "xtask"]))?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::repo_root().join("target"));
    let exe = target.join("release").join("xtask");
    let status = Command::new(&exe)
        .arg("bench")
        .args(args)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} bench failed with {status}", exe.display()))
    }
}

/// `cargo xtask bench sql [--no-peer] [ARGS]`: the pruning benchmark of arbor-datafusion (a
/// selective query on a 1,000-file table with pruning, without, against DataFusion's
/// `ListingTable` and against hudi-rs's DataFusion provider), the example `bench_pruning` built in
/// release (DataFusion stays out of xtask's own build). hudi-rs's provider runs from the peer
/// reader's Python (scripts/peer.sh) with `datafusion` 54 added, the version `hudi` 0.5.0 asks
/// for; `--no-peer` leaves it out.
fn sql(rest: &[String]) -> Result<(), String> {
    let no_peer = rest.iter().any(|a| a == "--no-peer");
    let mut args: Vec<String> = rest.iter().filter(|a| *a != "--no-peer").cloned().collect();
    if !no_peer {
        let python = peer::python()?;
        let has = Command::new(&python)
            .args([
                "-c",
                "import datafusion, sys; sys.exit(0 if datafusion.__version__.startswith('54.') else 1)",
            ])
            .status()
            .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
        if !has.success() {
            eprintln!("bench sql: installing datafusion 54 (for hudi-rs's provider) beside hudi");
            crate::run(Command::new(&python).args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "datafusion>=54,<55",
            ]))?;
        }
        args.push("--peer-python".into());
        args.push(python.to_string_lossy().into_owned());
    }
    crate::run(
        Command::new("cargo")
            .args([
                "run",
                "--release",
                "-p",
                "arbor-datafusion",
                "--example",
                "bench_pruning",
                "--",
            ])
            .args(&args),
    )
}

/// A local-file-system storage rooted at `dir` (created if missing).
pub(crate) fn local(dir: &Path) -> Result<Arc<dyn Storage>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("bench: creating {}: {e}", dir.display()))?;
    Ok(Arc::new(ObjectStoreStorage::local(dir).map_err(|e| {
        format!("bench: storage at {}: {e}", dir.display())
    })?))
}

/// What a release bench starts with: its work directory (and the guard that removes a temporary
/// one), a multi-threaded runtime, the machine and its load average, and the start time.
pub(crate) struct BenchStart {
    pub work: PathBuf,
    pub _temp: Option<tempfile::TempDir>,
    pub rt: Runtime,
    pub machine: report::Machine,
    pub load: String,
    pub started: std::time::Instant,
}

/// Prepares bench `kind` (`clean`, `branch`, ...) with tables under `dir` (see [`work_dir`]) and
/// announces it on stderr.
pub(crate) fn start(kind: &str, dir: Option<&Path>) -> Result<BenchStart, String> {
    let (work, temp) = work_dir(dir, &format!("arbor-bench-{kind}-"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("bench: tokio runtime: {e}"))?;
    let machine = report::Machine::detect();
    let load = report::load_average();
    eprintln!(
        "bench {kind}: {}; tables under {}",
        machine.describe(),
        work.display()
    );
    Ok(BenchStart {
        work,
        _temp: temp,
        rt,
        machine,
        load,
        started: std::time::Instant::now(),
    })
}

/// The directory a bench keeps its tables in: `dir` (which must not exist yet; it is created
/// and kept), else a new temporary directory named `<prefix>...` (removed when the returned
/// guard drops).
pub(crate) fn work_dir(
    dir: Option<&Path>,
    prefix: &str,
) -> Result<(PathBuf, Option<tempfile::TempDir>), String> {
    match dir {
        Some(dir) => {
            if dir.exists() {
                return Err(format!(
                    "bench: {} exists; --dir wants a new directory",
                    dir.display()
                ));
            }
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("bench: cannot create {}: {e}", dir.display()))?;
            Ok((dir.to_path_buf(), None))
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .map_err(|e| format!("bench: cannot create a temporary directory: {e}"))?;
            Ok((t.path().to_path_buf(), Some(t)))
        }
    }
}

fn create_options(table_type: TableType) -> CreateOptions {
    CreateOptions {
        name: "bench".to_string(),
        table_type,
        record_key_fields: vec![data::KEY.to_string()],
        partition_fields: vec![data::PARTITION.to_string()],
        hive_style_partitioning: false,
        ordering_field: Some(data::ORDERING.to_string()),
        merge_mode: None,
        schema: data::schema(),
        metadata_table: true,
        table_version: Default::default(),
        base_format: Default::default(),
    }
}

/// Creates a table in `dir` (not timed), writes `batches` with `op`, returns the seconds the
/// write took and the table.
fn timed_write(
    rt: &Runtime,
    dir: &Path,
    table: Option<Table>,
    table_type: TableType,
    op: WriteOperation,
    batches: &[RecordBatch],
    expect: (u64, u64),
) -> Result<(f64, Table), String> {
    let storage = local(dir)?;
    let table = match table {
        Some(t) => t,
        None => rt
            .block_on(Table::create(storage, create_options(table_type)))
            .map_err(|e| format!("creating the table in {}: {e}", dir.display()))?,
    };
    let input = batches.to_vec();
    let start = Instant::now();
    let result = rt
        .block_on(table.write(op, input))
        .map_err(|e| format!("{op:?} into {}: {e}", dir.display()))?;
    let seconds = start.elapsed().as_secs_f64();
    if (result.inserted, result.updated) != expect {
        return Err(format!(
            "{op:?} into {}: inserted {} and updated {} rows, expected {expect:?}",
            dir.display(),
            result.inserted,
            result.updated
        ));
    }
    Ok((seconds, table))
}

/// Opens the table in `dir` and reads its snapshot; returns the seconds, rows and rows whose
/// ordering value marks an update.
fn arbor_read(rt: &Runtime, dir: &Path) -> Result<(f64, u64, u64), String> {
    let storage = local(dir)?;
    let start = Instant::now();
    let batches = rt
        .block_on(async {
            let reader = TableReader::open(storage).await?;
            reader.snapshot(None).await
        })
        .map_err(|e| format!("arbor snapshot of {}: {e}", dir.display()))?;
    let seconds = start.elapsed().as_secs_f64();
    let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
    let mut updated = 0u64;
    for b in &batches {
        let ts = b
            .column_by_name(data::ORDERING)
            .and_then(|c| c.as_primitive_opt::<Int64Type>())
            .ok_or_else(|| format!("arbor snapshot of {}: no long ts column", dir.display()))?;
        updated += ts
            .iter()
            .flatten()
            .filter(|&t| t >= data::UPDATE_TS)
            .count() as u64;
    }
    Ok((seconds, rows, updated))
}

fn check(what: &str, got: (u64, u64), expected: (u64, u64)) -> Result<(), String> {
    if got == expected {
        Ok(())
    } else {
        Err(format!(
            "bench: {what} returned {} rows ({} updated), expected {} ({} updated)",
            got.0, got.1, expected.0, expected.1
        ))
    }
}

/// The median of `values`, or an error naming `what` when there is none.
pub(crate) fn med(what: &str, values: &[f64]) -> Result<f64, String> {
    median(values).ok_or_else(|| format!("bench: no timing of {what}"))
}

/// Measures one table size; see the module doc.
fn bench_size(
    rt: &Runtime,
    rows: u64,
    runs: usize,
    python: Option<&Path>,
    work: &Path,
) -> Result<SizeResult, String> {
    eprintln!("bench: {rows} rows: generating the input");
    let inserts = data::inserts(rows)?;
    let updates = data::updates(rows)?;
    let updated_rows = data::update_count(rows);
    let mut r = SizeResult {
        rows,
        updated_rows,
        input_bytes: inserts
            .iter()
            .map(|b| b.get_array_memory_size() as u64)
            .sum(),
        ..SizeResult::default()
    };

    // 1. Writes: arbor bulk insert into a new COW table, and arrow-rs to one parquet file.
    let mut cow_times = Vec::new();
    let mut raw_times = Vec::new();
    let mut raw_meta_times = Vec::new();
    let with_meta = raw::with_meta_columns(&inserts, data::KEY, data::PARTITION)?;
    let cow_dir = work.join(format!("cow-{rows}"));
    for run in 0..runs {
        eprintln!("bench: {rows} rows: write run {}/{runs}", run + 1);
        let dir = work.join(format!("cow-{rows}-run{run}"));
        let ((s, _), added) = measured(|| {
            timed_write(
                rt,
                &dir,
                None,
                TableType::CopyOnWrite,
                WriteOperation::BulkInsert,
                &inserts,
                (rows, 0),
            )
        })?;
        cow_times.push(s);
        r.cow_write_rss = peak_memory::max(r.cow_write_rss, added);
        let path = work.join(format!("raw-{rows}-run{run}.parquet"));
        let start = Instant::now();
        let (bytes, added) = measured(|| raw::write_parquet(&inserts, &path))?;
        r.raw_bytes = bytes;
        raw_times.push(start.elapsed().as_secs_f64());
        r.raw_write_rss = peak_memory::max(r.raw_write_rss, added);
        remove(&path)?;
        let path = work.join(format!("raw-meta-{rows}-run{run}.parquet"));
        let start = Instant::now();
        let (bytes, added) = measured(|| raw::write_parquet(&with_meta, &path))?;
        r.raw_meta_bytes = bytes;
        raw_meta_times.push(start.elapsed().as_secs_f64());
        r.raw_meta_write_rss = peak_memory::max(r.raw_meta_write_rss, added);
        remove(&path)?;
        if run + 1 == runs {
            std::fs::rename(&dir, &cow_dir)
                .map_err(|e| format!("renaming {}: {e}", dir.display()))?;
        } else {
            remove(&dir)?;
        }
    }
    r.cow_write = med("COW writes", &cow_times)?;
    r.raw_write = med("raw writes", &raw_times)?;
    r.raw_meta_write = med("raw writes with meta columns", &raw_meta_times)?;
    drop(with_meta);
    let cow_files = raw::table_files(&cow_dir, raw::is_base)?;
    r.cow_files = cow_files.len();
    r.cow_bytes = raw::size_of(&cow_files)?;

    // 2. COW reads: arbor, arrow-rs over the same base files, hudi-rs.
    let mut arbor_times = Vec::new();
    let mut raw_times = Vec::new();
    for run in 0..runs {
        eprintln!("bench: {rows} rows: COW read run {}/{runs}", run + 1);
        let (s, n, u) = arbor_read(rt, &cow_dir)?;
        check("arbor's COW snapshot", (n, u), (rows, 0))?;
        arbor_times.push(s);
        let start = Instant::now();
        let n = raw::read_parquet(&cow_files)?;
        raw_times.push(start.elapsed().as_secs_f64());
        check("arrow-rs reading the COW base files", (n, 0), (rows, 0))?;
    }
    r.cow_read = med("COW reads", &arbor_times)?;
    r.cow_read_raw = med("raw reads", &raw_times)?;
    if let Some(py) = python {
        eprintln!("bench: {rows} rows: hudi-rs COW reads");
        let p = peer::read(py, &cow_dir, runs, data::UPDATE_TS)?;
        check("hudi-rs' COW snapshot", (p.rows, p.updated), (rows, 0))?;
        r.cow_read_peer = median(&p.seconds);
    }

    // 3. MOR: bulk insert, upsert 10% of the keys into log files, reads.
    eprintln!("bench: {rows} rows: MOR bulk insert and upsert");
    let mor_dir = work.join(format!("mor-{rows}"));
    let (s, table) = timed_write(
        rt,
        &mor_dir,
        None,
        TableType::MergeOnRead,
        WriteOperation::BulkInsert,
        &inserts,
        (rows, 0),
    )?;
    r.mor_write = s;
    drop(inserts);
    let (s, _) = timed_write(
        rt,
        &mor_dir,
        Some(table),
        TableType::MergeOnRead,
        WriteOperation::Upsert,
        &updates,
        (0, updated_rows),
    )?;
    r.mor_upsert = s;
    drop(updates);
    let base = raw::table_files(&mor_dir, raw::is_base)?;
    let logs = raw::table_files(&mor_dir, raw::is_log)?;
    r.mor_base_bytes = raw::size_of(&base)?;
    r.mor_log_bytes = raw::size_of(&logs)?;
    r.mor_log_files = logs.len();
    if logs.is_empty() {
        return Err(format!(
            "bench: the upsert into {} wrote no log files",
            mor_dir.display()
        ));
    }
    let mut arbor_times = Vec::new();
    for run in 0..runs {
        eprintln!("bench: {rows} rows: MOR read run {}/{runs}", run + 1);
        let (s, n, u) = arbor_read(rt, &mor_dir)?;
        check("arbor's MOR snapshot", (n, u), (rows, updated_rows))?;
        arbor_times.push(s);
    }
    r.mor_read = med("MOR reads", &arbor_times)?;
    if let Some(py) = python {
        eprintln!("bench: {rows} rows: hudi-rs MOR reads");
        let p = peer::read(py, &mor_dir, runs, data::UPDATE_TS)?;
        check(
            "hudi-rs' MOR snapshot",
            (p.rows, p.updated),
            (rows, updated_rows),
        )?;
        r.mor_read_peer = median(&p.seconds);
    }
    eprintln!(
        "bench: {rows} rows: COW write {:.2} s (raw {:.2} s), COW read {:.2} s (raw {:.2} s, hudi-rs {}), MOR read {:.2} s (hudi-rs {})",
        r.cow_write,
        r.raw_write,
        r.cow_read,
        r.cow_read_raw,
        r.cow_read_peer.map_or("-".to_string(), |s| format!("{s:.2} s")),
        r.mor_read,
        r.mor_read_peer.map_or("-".to_string(), |s| format!("{s:.2} s")),
    );
    Ok(r)
}

/// `step`'s result and the peak memory it added ([`peak_memory::peak_of`]), or its error.
fn measured<T>(step: impl FnOnce() -> Result<T, String>) -> Result<(T, Option<u64>), String> {
    let (out, added) = peak_memory::peak_of(step);
    out.map(|v| (v, added))
}

fn remove(path: &Path) -> Result<(), String> {
    let r = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    r.map_err(|e| format!("removing {}: {e}", path.display()))
}

/// Copies the directory tree `from` to `to` (created).
pub(crate) fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("bench: creating {}: {e}", to.display()))?;
    let entries =
        std::fs::read_dir(from).map_err(|e| format!("bench: reading {}: {e}", from.display()))?;
    for e in entries {
        let e = e.map_err(|e| format!("bench: reading {}: {e}", from.display()))?;
        let target = to.join(e.file_name());
        let is_dir = e
            .file_type()
            .map_err(|err| format!("bench: {}: {err}", e.path().display()))?
            .is_dir();
        if is_dir {
            copy_dir(&e.path(), &target)?;
        } else {
            std::fs::copy(e.path(), &target)
                .map_err(|err| format!("bench: copying {}: {err}", e.path().display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn test_parse_args_defaults_three_sizes_five_runs() {
        let o = parse_args(&args(&["data-path"])).unwrap();
        assert_eq!(o.sizes, vec![250_000, 1_000_000, 2_000_000]);
        assert_eq!(o.runs, 5);
        assert!(o.peer);
        assert_eq!(o.dir, None);
    }

    #[test]
    fn test_parse_args_options_applied() {
        let o = parse_args(&args(&[
            "data-path",
            "--sizes",
            "1_000,20",
            "--runs",
            "7",
            "--no-peer",
            "--dir",
            "x",
        ]))
        .unwrap();
        assert_eq!(o.sizes, vec![1_000, 20]);
        assert_eq!(o.runs, 7);
        assert!(!o.peer);
        assert_eq!(o.dir, Some(PathBuf::from("x")));
    }

    #[test]
    fn test_parse_args_bad_input_rejected() {
        assert!(parse_args(&args(&[])).is_err());
        assert!(parse_args(&args(&["other"])).is_err());
        assert!(parse_args(&args(&["data-path", "--runs", "0"])).is_err());
        assert!(parse_args(&args(&["data-path", "--sizes", "0"])).is_err());
        assert!(parse_args(&args(&["data-path", "--sizes", "a"])).is_err());
        assert!(parse_args(&args(&["data-path", "--wat"])).is_err());
    }

    #[test]
    fn test_bench_size_small_table_checks_pass() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let r = bench_size(&rt, 2_000, 2, None, dir.path()).unwrap();
        assert_eq!((r.rows, r.updated_rows), (2_000, 200));
        assert_eq!(r.cow_files, data::REGIONS as usize);
        assert!(r.mor_log_files > 0 && r.mor_log_bytes > 0);
        assert!(r.cow_bytes > 0 && r.raw_bytes > 0);
        assert_eq!((r.cow_read_peer, r.mor_read_peer), (None, None));
    }
}
