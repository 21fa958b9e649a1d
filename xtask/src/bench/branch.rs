//! `cargo xtask bench branch`: the cost of creating and publishing a branch, which
//! must not grow with the number of data files: both copy metadata only (timelines, identity,
//! tags), never data files or the metadata table's data files.
//!
//! Tables (copy-on-write, with the metadata table, ten partitions), one per shape: every size of
//! `--files` (default 1,000 and 100,000) at the smallest size of `--instants` (default 100 and
//! 10,000), and every other size of `--instants` at the smallest size of `--files`. A table of
//! `F` files and `I` instants is built quickly:
//! - the files come from a few large bulk inserts (at most 10,000 rows each) with
//!   `max_file_size: 1`, so every row is its own base file (one file group each);
//! - the other instants are tiny commits (an upsert of one row of a hot file group, rewriting
//!   its one-row base file), with a clean (`KEEP_LATEST_FILE_VERSIONS(1)`) and archival every
//!   [`CLEAN_EVERY`] commits and once at the end, so old versions do not pile up and most
//!   instants move to the LSM history. The counts reported (writes, data files, active and
//!   archived instants) are measured on the built table.
//!
//! Then, `--runs` times each (default 5), the median of:
//! - **list**, the baseline: one raw recursive listing of the whole table (`list_all("")`);
//! - **copy timeline**, the baseline: copying the `.hoodie/timeline` directory (active instants
//!   and LSM history) with `std::fs`;
//! - **create_branch**: `create_branch(main, MainHead)` on a main handle (the branch is dropped
//!   afterwards, not timed);
//! - **publish**: a branch is created and gets one small commit (not timed), then `publish`
//!   is timed (main moves to the new publication; the branch is dropped afterwards).
//!
//! Usage: `cargo xtask bench branch [--files 1000,100000] [--instants 100,10000] [--runs 5]
//! [--dir DIR] [--quick]`. `--quick` is `--files 100,2000 --instants 20,200 --runs 2` (a smoke
//! run). Like the other benches, a debug build re-runs itself as the release xtask. Progress
//! goes to stderr; the machine and the Markdown tables to stdout.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arbor_branching::{create_branch, drop_branch, open_branch, publish, BranchSource};
use arbor_cleaner::{clean, CleanOptions, CleanPolicy};
use arbor_storage::{Storage, StorageExt};
use arbor_table::{CreateOptions, Table, WriteOperation, WriteOptions};
use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::config::TableType;
use arbor_timeline::{resolve_main, MetaRoot};
use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tokio::runtime::Runtime;

use super::{copy_dir, local};

const USAGE: &str = "usage: cargo xtask bench branch [--files N,N] [--instants N,N] [--runs N] \
                     [--dir DIR] [--quick]";

/// Tiny commits between two cleans (with archival) while building.
const CLEAN_EVERY: u32 = 200;
/// Rows (= files) of one bulk insert while building.
pub(super) const FILES_PER_COMMIT: u32 = 10_000;
/// Partitions of the bench tables.
pub(super) const PARTITIONS: u32 = 10;

/// Bench options.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    files: Vec<u32>,
    instants: Vec<u32>,
    runs: usize,
    dir: Option<PathBuf>,
}

/// A comma-separated list of positive numbers (`_` allowed as a separator), sorted, without
/// repeats; `flag` names it in errors.
pub(super) fn parse_list(flag: &str, v: &str) -> Result<Vec<u32>, String> {
    let mut out = v
        .split(',')
        .map(|s| {
            s.trim()
                .replace('_', "")
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("bench: {flag} {v:?}: positive numbers"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("branch") => {}
        _ => return Err(USAGE.to_string()),
    }
    let mut options = Options {
        files: vec![1_000, 100_000],
        instants: vec![100, 10_000],
        runs: 5,
        dir: None,
    };
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("bench: {a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--files" => options.files = parse_list("--files", value()?)?,
            "--instants" => options.instants = parse_list("--instants", value()?)?,
            "--runs" => {
                let v = value()?;
                options.runs = v
                    .parse::<usize>()
                    .ok()
                    .filter(|r| *r > 0)
                    .ok_or_else(|| format!("bench: --runs {v:?}: a positive number"))?;
            }
            "--dir" => options.dir = Some(PathBuf::from(value()?)),
            "--quick" => {
                options.files = vec![100, 2_000];
                options.instants = vec![20, 200];
                options.runs = 2;
            }
            other => return Err(format!("bench: unknown argument {other:?}\n{USAGE}")),
        }
    }
    // Every table needs its bulk inserts plus one hot commit as instants.
    for &f in &options.files {
        for &i in &options.instants {
            if i < f.div_ceil(FILES_PER_COMMIT) + 1 {
                return Err(format!(
                    "bench: {i} instants are too few for {f} files ({FILES_PER_COMMIT} files per commit)"
                ));
            }
        }
    }
    Ok(options)
}

/// The table shapes: every file count at the fewest instants, every other instant count at
/// the fewest files.
fn shapes(options: &Options) -> Vec<(u32, u32)> {
    let (Some(&f0), Some(&i0)) = (options.files.first(), options.instants.first()) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, u32)> = options.files.iter().map(|&f| (f, i0)).collect();
    out.extend(options.instants.iter().skip(1).map(|&i| (f0, i)));
    out
}

const KEY: &str = "id";
const ORDERING: &str = "ts";
const PARTITION: &str = "part";

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(KEY, DataType::Utf8, false),
        Field::new(ORDERING, DataType::Int64, false),
        Field::new(PARTITION, DataType::Utf8, false),
    ]))
}

fn rows(keys: Vec<String>, ts: i64, parts: Vec<String>) -> Result<RecordBatch, String> {
    let n = keys.len();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(keys)),
            Arc::new(Int64Array::from_iter_values(std::iter::repeat_n(ts, n))),
            Arc::new(StringArray::from_iter_values(parts)),
        ],
    )
    .map_err(|e| format!("bench: building a batch: {e}"))
}

/// Rows `from..to` of the file-making bulk inserts, spread over the partitions (one data file
/// each with the writer options of [`build`]; also the clone bench's source rows).
pub(super) fn file_rows(from: u32, to: u32) -> Result<RecordBatch, String> {
    rows(
        (from..to).map(|i| format!("f{i:07}")).collect(),
        0,
        (from..to)
            .map(|i| format!("p{:02}", i % PARTITIONS))
            .collect(),
    )
}

/// What one built table holds.
#[derive(Debug, Clone, Default, PartialEq)]
struct Built {
    files: u32,
    instants: u32,
    dir: PathBuf,
    /// Seconds building took.
    build_seconds: f64,
    /// Completed writes (active and archived).
    writes: usize,
    /// Instants of the data timeline: active, archived.
    active: usize,
    archived: usize,
    /// Data files (parquet outside `.hoodie`) and objects under `.hoodie`.
    data_files: usize,
    meta_objects: usize,
}

fn table_options() -> CreateOptions {
    named_table_options("bench_branch")
}

/// The copy-on-write table with the metadata table these benches write, named `name` (keyed by
/// `id`, ordered by `ts`, partitioned by `part`, as [`file_rows`] fills it).
pub(super) fn named_table_options(name: &str) -> CreateOptions {
    CreateOptions {
        name: name.to_string(),
        table_type: TableType::CopyOnWrite,
        record_key_fields: vec![KEY.to_string()],
        partition_fields: vec![PARTITION.to_string()],
        hive_style_partitioning: false,
        ordering_field: Some(ORDERING.to_string()),
        merge_mode: None,
        schema: schema(),
        metadata_table: true,
        table_version: Default::default(),
        base_format: Default::default(),
    }
}

async fn clean_and_archive(table: &Table) -> Result<(), String> {
    clean(
        table,
        &CleanOptions {
            policy: CleanPolicy::KeepLatestFileVersions(1),
            dry_run: false,
            archive: true,
            extra_sources: Vec::new(),
        },
    )
    .await
    .map(|_| ())
    .map_err(|e| format!("bench: clean and archive: {e}"))
}

/// Builds a table of `files` data files and `instants` writes in `dir`; see the module doc.
fn build(rt: &Runtime, files: u32, instants: u32, dir: &Path) -> Result<Built, String> {
    let start = Instant::now();
    let storage = local(dir)?;
    rt.block_on(async {
        let table = Table::create(storage.clone(), table_options())
            .await
            .map_err(|e| format!("bench: creating the table in {}: {e}", dir.display()))?
            .with_write_options(WriteOptions {
                small_file_limit: 0,
                max_file_size: 1,
                ..WriteOptions::default()
            });
        let mut written = 0;
        let mut commits = 0;
        while written < files {
            let to = (written + FILES_PER_COMMIT).min(files);
            let r = table
                .write(WriteOperation::BulkInsert, vec![file_rows(written, to)?])
                .await
                .map_err(|e| format!("bench: bulk insert of files {written}..{to}: {e}"))?;
            if r.files_written != (to - written) as usize {
                return Err(format!(
                    "bench: the bulk insert of {} rows wrote {} files",
                    to - written,
                    r.files_written
                ));
            }
            written = to;
            commits += 1;
            eprintln!(
                "bench branch: {files} files / {instants} instants: {written} files written ({:.0} s)",
                start.elapsed().as_secs_f64()
            );
        }
        let hot = |ts: i64| rows(vec!["hot".to_string()], ts, vec!["hot".to_string()]);
        while commits < instants {
            table
                .write(WriteOperation::Upsert, vec![hot(i64::from(commits))?])
                .await
                .map_err(|e| format!("bench: tiny commit {commits}: {e}"))?;
            commits += 1;
            if commits % CLEAN_EVERY == 0 {
                clean_and_archive(&table).await?;
                eprintln!(
                    "bench branch: {files} files / {instants} instants: {commits} commits ({:.0} s)",
                    start.elapsed().as_secs_f64()
                );
            }
        }
        clean_and_archive(&table).await?;
        Ok(())
    })?;
    let build_seconds = start.elapsed().as_secs_f64();
    let mut b = Built {
        files,
        instants,
        dir: dir.to_path_buf(),
        build_seconds,
        ..Built::default()
    };
    rt.block_on(async {
        let keys = storage
            .list_all("")
            .await
            .map_err(|e| format!("bench: listing {}: {e}", dir.display()))?;
        b.data_files = keys
            .iter()
            .filter(|o| !o.key.starts_with(".hoodie") && o.key.ends_with(".parquet"))
            .count();
        b.meta_objects = keys.iter().filter(|o| o.key.starts_with(".hoodie")).count();
        let table = Table::open(storage.clone())
            .await
            .map_err(|e| format!("bench: opening {}: {e}", dir.display()))?;
        let history = TimelineHistory::load(table.view_storage().clone(), table.layout().clone())
            .await
            .map_err(|e| format!("bench: timeline of {}: {e}", dir.display()))?;
        b.writes = history.completed_writes().len();
        b.active = history.active().instants().len();
        b.archived = history.archived().len();
        Ok::<_, String>(())
    })?;
    if b.writes != instants as usize {
        return Err(format!(
            "bench: {} has {} writes, expected {instants}",
            dir.display(),
            b.writes
        ));
    }
    // The hot file group keeps one live file after the last clean, plus one of the
    // file-making inserts per row.
    if b.data_files != files as usize + usize::from(instants > written_commits(files)) {
        return Err(format!(
            "bench: {} has {} data files, expected {files} (+1 hot)",
            dir.display(),
            b.data_files
        ));
    }
    Ok(b)
}

/// The bulk inserts a table of `files` files is built with.
fn written_commits(files: u32) -> u32 {
    files.div_ceil(FILES_PER_COMMIT)
}

/// The medians of one table.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Measured {
    list: f64,
    copy: f64,
    create: f64,
    publish: f64,
    /// Objects `list_all("")` found (last run).
    listed: usize,
    /// Objects the last publication copied.
    published_objects: usize,
}

fn secs<T>(start: Instant, r: T) -> (f64, T) {
    (start.elapsed().as_secs_f64(), r)
}

fn measure(rt: &Runtime, b: &Built, runs: usize) -> Result<Measured, String> {
    let storage: Arc<dyn Storage> = local(&b.dir)?;
    let mut m = Measured::default();
    let (mut list, mut copy, mut create) = (Vec::new(), Vec::new(), Vec::new());
    let label = format!("{} files / {} instants", b.files, b.instants);
    let timeline = b.dir.join(".hoodie").join("timeline");
    for run in 0..runs {
        eprintln!(
            "bench branch: {label}: baselines and create_branch, run {}/{runs}",
            run + 1
        );
        let (s, listed) = secs(Instant::now(), rt.block_on(storage.list_all("")));
        m.listed = listed
            .map_err(|e| format!("bench: listing {}: {e}", b.dir.display()))?
            .len();
        list.push(s);

        let to = b.dir.with_extension(format!("timeline-copy-{run}"));
        let (s, r) = secs(Instant::now(), copy_dir(&timeline, &to));
        r?;
        copy.push(s);
        std::fs::remove_dir_all(&to)
            .map_err(|e| format!("bench: removing {}: {e}", to.display()))?;

        let name = format!("c{run}");
        let (s, main) = rt.block_on(async {
            let main = Table::open(storage.clone())
                .await
                .map_err(|e| format!("bench: opening main: {e}"))?;
            let start = Instant::now();
            create_branch(&main, &name, BranchSource::MainHead)
                .await
                .map_err(|e| format!("bench: create_branch {name}: {e}"))?;
            Ok::<_, String>((start.elapsed().as_secs_f64(), main))
        })?;
        create.push(s);
        rt.block_on(drop_branch(&main, &name))
            .map_err(|e| format!("bench: drop branch {name}: {e}"))?;
    }
    let mut publishes = Vec::new();
    for run in 0..runs {
        eprintln!("bench branch: {label}: publish, run {}/{runs}", run + 1);
        let name = format!("p{run}");
        let s = rt.block_on(async {
            let main = Table::open(storage.clone())
                .await
                .map_err(|e| format!("bench: opening main: {e}"))?;
            create_branch(&main, &name, BranchSource::MainHead)
                .await
                .map_err(|e| format!("bench: create_branch {name}: {e}"))?;
            let branch = open_branch(storage.clone(), &name)
                .await
                .map_err(|e| format!("bench: open branch {name}: {e}"))?;
            let batch = rows(vec![format!("branch-{run}")], 1, vec!["p00".to_string()])?;
            branch
                .write(WriteOperation::BulkInsert, vec![batch])
                .await
                .map_err(|e| format!("bench: write on branch {name}: {e}"))?;
            let start = Instant::now();
            let out = publish(&branch)
                .await
                .map_err(|e| format!("bench: publish {name}: {e}"))?;
            let s = start.elapsed().as_secs_f64();
            m.published_objects = out.objects;
            let main = Table::open(storage.clone())
                .await
                .map_err(|e| format!("bench: reopening main: {e}"))?;
            if main.root() != &MetaRoot::Publication(out.publication) {
                return Err(format!(
                    "bench: main is {} after publication {}",
                    main.root(),
                    out.publication
                ));
            }
            drop_branch(&main, &name)
                .await
                .map_err(|e| format!("bench: drop branch {name}: {e}"))?;
            Ok::<_, String>(s)
        })?;
        publishes.push(s);
    }
    let root = rt
        .block_on(resolve_main(storage.as_ref()))
        .map_err(|e| format!("bench: resolving main: {e}"))?;
    if root != MetaRoot::Publication(runs as u64) {
        return Err(format!("bench: main is {root} after {runs} publications"));
    }
    let med = super::med;
    m.list = med("list", &list)?;
    m.copy = med("copy", &copy)?;
    m.create = med("create_branch", &create)?;
    m.publish = med("publish", &publishes)?;
    Ok(m)
}

fn ms(s: f64) -> String {
    format!("{:.1}", s * 1e3)
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "-".to_string()
    }
}

fn sizes_table(built: &[Built]) -> String {
    let mut out = String::new();
    out.push_str("| table | data files | writes | instants active | instants archived | `.hoodie` objects | build (s) |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
    for b in built {
        let _ = writeln!(
            out,
            "| {} files, {} instants | {} | {} | {} | {} | {} | {:.0} |",
            b.files,
            b.instants,
            b.data_files,
            b.writes,
            b.active,
            b.archived,
            b.meta_objects,
            b.build_seconds
        );
    }
    out
}

fn timings_table(results: &[(Built, Measured)]) -> String {
    let mut out = String::new();
    out.push_str(
        "| table | list_all (ms) | copy timeline (ms) | create_branch (ms) | ÷ list | ÷ copy | publish (ms) | ÷ list | ÷ copy | objects published |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (b, m) in results {
        let _ = writeln!(
            out,
            "| {} files, {} instants | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            b.files,
            b.instants,
            ms(m.list),
            ms(m.copy),
            ms(m.create),
            ratio(m.create, m.list),
            ratio(m.create, m.copy),
            ms(m.publish),
            ratio(m.publish, m.list),
            ratio(m.publish, m.copy),
            m.published_objects
        );
    }
    out
}

/// Growth of each figure from the smallest table to the one with the most files, and to the one
/// with the most instants.
fn growth_table(results: &[(Built, Measured)]) -> String {
    let find = |f: u32, i: u32| {
        results
            .iter()
            .find(|(b, _)| b.files == f && b.instants == i)
    };
    let (Some(f0), Some(i0)) = (
        results.iter().map(|(b, _)| b.files).min(),
        results.iter().map(|(b, _)| b.instants).min(),
    ) else {
        return String::new();
    };
    let f1 = results.iter().map(|(b, _)| b.files).max().unwrap_or(f0);
    let i1 = results.iter().map(|(b, _)| b.instants).max().unwrap_or(i0);
    let (Some((_, base)), Some((_, files)), Some((_, instants))) =
        (find(f0, i0), find(f1, i0), find(f0, i1))
    else {
        return String::new();
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| operation | {f1} ÷ {f0} files (at {i0} instants) | {i1} ÷ {i0} instants (at {f0} files) |"
    );
    out.push_str("|---|---:|---:|\n");
    for (what, get) in [
        (
            "list_all (baseline)",
            (|m: &Measured| m.list) as fn(&Measured) -> f64,
        ),
        ("copy timeline (baseline)", |m| m.copy),
        ("create_branch", |m| m.create),
        ("publish", |m| m.publish),
    ] {
        let _ = writeln!(
            out,
            "| {what} | {} | {} |",
            ratio(get(files), get(base)),
            ratio(get(instants), get(base))
        );
    }
    out
}

/// Builds and measures every table shape.
fn bench(rt: &Runtime, options: &Options, work: &Path) -> Result<Vec<(Built, Measured)>, String> {
    let mut results = Vec::new();
    for (files, instants) in shapes(options) {
        let dir = work.join(format!("t-{files}f-{instants}i"));
        let b = build(rt, files, instants, &dir)?;
        eprintln!(
            "bench branch: built {} files, {} writes ({} active, {} archived instants) in {:.0} s",
            b.data_files, b.writes, b.active, b.archived, b.build_seconds
        );
        let m = measure(rt, &b, options.runs)?;
        eprintln!(
            "bench branch: {files} files / {instants} instants: list_all {} ms, copy timeline {} ms, \
             create_branch {} ms, publish {} ms",
            ms(m.list),
            ms(m.copy),
            ms(m.create),
            ms(m.publish)
        );
        results.push((b, m));
    }
    Ok(results)
}

/// Runs `cargo xtask bench branch ...` (`args` starts with `branch`).
pub fn run(args: &[String]) -> Result<(), String> {
    let options = parse_args(args)?;
    if cfg!(debug_assertions) {
        return super::run_release(args);
    }
    let super::BenchStart {
        work,
        _temp,
        rt,
        machine,
        load,
        started,
    } = super::start("branch", options.dir.as_deref())?;
    let results = bench(&rt, &options, &work)?;
    println!();
    println!("machine: {}", machine.describe());
    println!("load average (1, 5, 15 min) at the start: {load}");
    println!(
        "tables: copy-on-write with the metadata table, {PARTITIONS} partitions, one row per data \
         file; median of {} runs; whole bench {:.0} s",
        options.runs,
        started.elapsed().as_secs_f64()
    );
    println!();
    let built: Vec<Built> = results.iter().map(|(b, _)| b.clone()).collect();
    print!("{}", sizes_table(&built));
    println!();
    print!("{}", timings_table(&results));
    println!();
    print!("{}", growth_table(&results));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn test_parse_args_defaults_two_file_and_two_instant_sizes() {
        let o = parse_args(&args(&["branch"])).unwrap();
        assert_eq!(o.files, vec![1_000, 100_000]);
        assert_eq!(o.instants, vec![100, 10_000]);
        assert_eq!(o.runs, 5);
        assert_eq!(
            shapes(&o),
            vec![(1_000, 100), (100_000, 100), (1_000, 10_000)]
        );
    }

    #[test]
    fn test_parse_args_quick_and_options_applied() {
        let o = parse_args(&args(&["branch", "--quick"])).unwrap();
        assert_eq!(
            (o.files.clone(), o.instants.clone(), o.runs),
            (vec![100, 2_000], vec![20, 200], 2)
        );
        let o = parse_args(&args(&[
            "branch",
            "--files",
            "50,5",
            "--instants",
            "9,3",
            "--runs",
            "1",
            "--dir",
            "d",
        ]))
        .unwrap();
        assert_eq!((o.files, o.instants, o.runs), (vec![5, 50], vec![3, 9], 1));
        assert_eq!(o.dir, Some(PathBuf::from("d")));
    }

    #[test]
    fn test_parse_args_bad_input_rejected() {
        for bad in [
            &["clean"][..],
            &["branch", "--files", "0"],
            &["branch", "--runs", "0"],
            &["branch", "--instants"],
            &["branch", "--files", "30000", "--instants", "3"],
            &["branch", "--wat"],
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn test_bench_small_tables_checks_pass_and_tables_printed() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let options = parse_args(&args(&[
            "branch",
            "--files",
            "12,30",
            "--instants",
            "3,8",
            "--runs",
            "1",
        ]))
        .unwrap();
        let results = bench(&rt, &options, dir.path()).unwrap();
        let shapes: Vec<(u32, u32, usize, usize)> = results
            .iter()
            .map(|(b, _)| (b.files, b.instants, b.data_files, b.writes))
            .collect();
        assert_eq!(shapes, vec![(12, 3, 13, 3), (30, 3, 31, 3), (12, 8, 13, 8)]);
        for (_, m) in &results {
            assert!(m.create > 0.0 && m.publish > 0.0 && m.list > 0.0, "{m:?}");
            assert!(m.published_objects > 0);
        }
        let growth = growth_table(&results);
        assert!(growth.contains("| create_branch |"), "{growth}");
        assert!(timings_table(&results).contains("| 12 files, 8 instants |"));
    }
}
