//! `cargo xtask bench clean`: the cost of planning a clean on a table with many file slices and
//! a long timeline, with and without the metadata table.
//!
//! Two copy-on-write tables are written side by side, one with the metadata table (MDT) and one
//! created with `metadata_table: false`: `--commits` commits (default 1,000), each inserting one
//! row into every one of `--partitions` partitions (default 100) with small-file packing off, so
//! every commit adds one file group (one base file, one file slice) per partition: 100,000
//! slices and 1,000 completed commits on the active timeline at the default size (writes do not
//! archive). At every size of `--sizes` (default 250 and 1,000 commits) both tables are copied
//! aside and measured. Then, `--runs` times each (default 5), interleaved:
//! - **plan**: `TableReader::open` + [`arbor_cleaner::plan_clean`] with KEEP_LATEST_COMMITS(10)
//!   (Hudi's default retention): the view (the MDT's FILES listing, or a directory listing of
//!   every partition), the protection sources (savepoints, pending instants, the retention
//!   window's snapshots) and the candidates;
//! - **dry run**: the whole [`arbor_cleaner::clean`] with `dry_run: true` (table lock, failed
//!   writes check, plan; nothing written but the lock).
//!
//! Every storage call goes through a pass-through [`FaultInjectingStorage`] that counts them by
//! kind: LIST calls are `list_page` + `list_dir`, split into those under `.hoodie/` (timelines,
//! MDT, lock) and those of data partitions. With the MDT, data-partition LIST calls must be
//! zero, and both tables must plan the same files (none: no file group has an older slice)
//! over `commits × partitions` committed files; a mismatch fails the bench.
//!
//! Usage: `cargo xtask bench clean [--commits 1000] [--partitions 100] [--sizes 250,1000]
//! [--runs 5] [--dir DIR]`. Like the other benches, a debug build re-runs itself as the release
//! xtask. Progress goes to stderr; the machine and the Markdown tables to stdout.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arbor_cleaner::{clean, plan_clean, CleanOptions, CleanPolicy};
use arbor_storage::{FaultInjectingStorage, OpKind, Storage};
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, Table, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tokio::runtime::Runtime;

use super::report::median;
use super::{copy_dir, local};

const USAGE: &str = "usage: cargo xtask bench clean [--commits N] [--partitions N] \
                     [--sizes N,N] [--runs N] [--dir DIR]";

/// The retention the bench plans with (Hudi's default `hoodie.cleaner.commits.retained`).
const RETAINED_COMMITS: usize = 10;

/// Bench options.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    commits: u32,
    partitions: u32,
    sizes: Vec<u32>,
    runs: usize,
    dir: Option<PathBuf>,
}

/// A positive whole number given to `flag` (`_` separators allowed), or the error naming it.
pub(super) fn parse_positive(flag: &str, v: &str) -> Result<u32, String> {
    v.trim()
        .replace('_', "")
        .parse::<u32>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("bench: {flag} {v:?}: a positive number"))
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("clean") => {}
        _ => return Err(USAGE.to_string()),
    }
    let mut options = Options {
        commits: 1_000,
        partitions: 100,
        sizes: Vec::new(),
        runs: 5,
        dir: None,
    };
    let mut sizes = None;
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("bench: {a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--commits" => options.commits = parse_positive("--commits", value()?)?,
            "--partitions" => options.partitions = parse_positive("--partitions", value()?)?,
            "--sizes" => {
                sizes = Some(
                    value()?
                        .split(',')
                        .map(|v| parse_positive("--sizes", v))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            }
            "--runs" => options.runs = parse_positive("--runs", value()?)? as usize,
            "--dir" => options.dir = Some(PathBuf::from(value()?)),
            other => return Err(format!("bench: unknown argument {other:?}\n{USAGE}")),
        }
    }
    // Default sizes: a quarter of the commits and all of them.
    let mut sizes = sizes.unwrap_or_else(|| vec![(options.commits / 4).max(1), options.commits]);
    sizes.sort_unstable();
    sizes.dedup();
    if let Some(big) = sizes.iter().find(|s| **s > options.commits) {
        return Err(format!(
            "bench: --sizes {big} is more than --commits {}",
            options.commits
        ));
    }
    options.sizes = sizes;
    Ok(options)
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

/// Commit `commit`'s rows: one new key per partition.
fn commit_batch(partitions: u32, commit: u32) -> Result<RecordBatch, String> {
    let parts = 0..partitions;
    let keys = StringArray::from_iter_values(parts.clone().map(|p| format!("k{p:05}-{commit:05}")));
    let ts = Int64Array::from_iter_values(parts.clone().map(|_| i64::from(commit)));
    let part = StringArray::from_iter_values(parts.map(|p| format!("p{p:05}")));
    RecordBatch::try_new(schema(), vec![Arc::new(keys), Arc::new(ts), Arc::new(part)])
        .map_err(|e| format!("bench: building a batch: {e}"))
}

/// The two tables at one size.
#[derive(Debug, Clone)]
struct Built {
    commits: u32,
    /// (with the MDT, without).
    dirs: (PathBuf, PathBuf),
}

/// What building took.
#[derive(Debug, Clone, Default)]
struct BuildTimes {
    /// Seconds writing the table with the MDT, and without.
    with_mdt: f64,
    without_mdt: f64,
    /// Seconds of the last 10% of the commits, per commit (with, without).
    last_commit: (f64, f64),
}

fn create_options(metadata_table: bool) -> CreateOptions {
    CreateOptions {
        name: "bench_clean".to_string(),
        table_type: TableType::CopyOnWrite,
        record_key_fields: vec![KEY.to_string()],
        partition_fields: vec![PARTITION.to_string()],
        hive_style_partitioning: false,
        ordering_field: Some(ORDERING.to_string()),
        merge_mode: None,
        schema: schema(),
        metadata_table,
        table_version: Default::default(),
        base_format: Default::default(),
    }
}

/// Writes both tables commit by commit, copying them aside at every size of `options.sizes`
/// below the full size.
fn build(rt: &Runtime, options: &Options, work: &Path) -> Result<(Vec<Built>, BuildTimes), String> {
    let dirs = (work.join("mdt"), work.join("no-mdt"));
    let open = |dir: &Path, mdt: bool| -> Result<Table, String> {
        let table = rt
            .block_on(Table::create(local(dir)?, create_options(mdt)))
            .map_err(|e| format!("bench: creating the table in {}: {e}", dir.display()))?;
        Ok(table.with_write_options(WriteOptions {
            small_file_limit: 0,
            ..WriteOptions::default()
        }))
    };
    let tables = (open(&dirs.0, true)?, open(&dirs.1, false)?);
    let mut times = BuildTimes::default();
    let mut built = Vec::new();
    let tail_from = options.commits - (options.commits / 10).max(1);
    let mut tail = (0.0, 0.0);
    let started = Instant::now();
    for commit in 0..options.commits {
        let batch = commit_batch(options.partitions, commit)?;
        let mut took = [0.0; 2];
        for (i, table) in [&tables.0, &tables.1].into_iter().enumerate() {
            let start = Instant::now();
            let r = rt
                .block_on(table.write(WriteOperation::BulkInsert, vec![batch.clone()]))
                .map_err(|e| format!("bench: commit {commit}: {e}"))?;
            if let Some(t) = took.get_mut(i) {
                *t = start.elapsed().as_secs_f64();
            }
            let parts = options.partitions as usize;
            if r.files_written != parts {
                return Err(format!(
                    "bench: commit {commit} wrote {} files, expected {parts}",
                    r.files_written
                ));
            }
        }
        let [a, b] = took;
        times.with_mdt += a;
        times.without_mdt += b;
        if commit >= tail_from {
            tail.0 += a;
            tail.1 += b;
        }
        let done = commit + 1;
        if done % 50 == 0 || done == options.commits {
            eprintln!(
                "bench clean: commit {done}/{} ({:.0} s; last commit {a:.3} s with the MDT, {b:.3} s without)",
                options.commits,
                started.elapsed().as_secs_f64()
            );
        }
        if options.sizes.contains(&done) {
            let at = if done == options.commits {
                dirs.clone()
            } else {
                let aside = (
                    work.join(format!("mdt-{done}")),
                    work.join(format!("no-mdt-{done}")),
                );
                copy_dir(&dirs.0, &aside.0)?;
                copy_dir(&dirs.1, &aside.1)?;
                aside
            };
            built.push(Built {
                commits: done,
                dirs: at,
            });
        }
    }
    let n = f64::from(options.commits - tail_from);
    times.last_commit = (tail.0 / n, tail.1 / n);
    Ok((built, times))
}

/// Call counts of one measured run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    /// LIST calls of data partitions.
    data_lists: usize,
    /// LIST calls under `.hoodie/`.
    meta_lists: usize,
    /// GET, GET range and HEAD calls.
    reads: usize,
    /// Every call.
    total: usize,
}

fn counts(counter: &FaultInjectingStorage) -> Counts {
    let mut c = Counts::default();
    for o in counter.ops() {
        c.total += 1;
        match o.kind {
            OpKind::List | OpKind::ListDir => {
                if o.key.starts_with(".hoodie") {
                    c.meta_lists += 1;
                } else {
                    c.data_lists += 1;
                }
            }
            OpKind::Get | OpKind::GetRange | OpKind::Head => c.reads += 1,
            _ => {}
        }
    }
    c
}

/// What is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    Plan,
    DryRun,
}

impl What {
    fn describe(self) -> &'static str {
        match self {
            What::Plan => "plan (`TableReader::open` + `plan_clean`)",
            What::DryRun => "`clean` with `dry_run: true`",
        }
    }
}

/// One measured run: (seconds, counts, files planned, committed files seen).
fn once(
    rt: &Runtime,
    dir: &Path,
    what: What,
) -> Result<(f64, Counts, BTreeSet<String>, usize), String> {
    let counter = Arc::new(FaultInjectingStorage::new(local(dir)?));
    let storage: Arc<dyn Storage> = counter.clone();
    let policy = CleanPolicy::KeepLatestCommits(RETAINED_COMMITS);
    let table = match what {
        What::DryRun => Some(
            rt.block_on(Table::open(storage.clone()))
                .map_err(|e| format!("bench: opening {}: {e}", dir.display()))?,
        ),
        What::Plan => None,
    };
    counter.reset();
    let start = Instant::now();
    let plan = rt
        .block_on(async {
            match &table {
                None => {
                    let reader = TableReader::open(storage.clone())
                        .await
                        .map_err(|e| e.to_string())?;
                    plan_clean(&storage, reader.view(), policy, &[])
                        .await
                        .map(|(plan, _)| plan)
                        .map_err(|e| e.to_string())
                }
                Some(table) => clean(
                    table,
                    &CleanOptions {
                        policy,
                        dry_run: true,
                        ..CleanOptions::default()
                    },
                )
                .await
                .map(|o| o.plan)
                .map_err(|e| e.to_string()),
            }
        })
        .map_err(|e| format!("bench: {} of {}: {e}", what.describe(), dir.display()))?;
    let seconds = start.elapsed().as_secs_f64();
    let c = counts(&counter);
    let planned = plan
        .iter()
        .flat_map(|(p, names)| names.iter().map(move |n| format!("{p}/{n}")))
        .collect();
    // Not timed: the committed files the plan was made over.
    let committed = rt
        .block_on(async {
            let reader = TableReader::open(local(dir)?)
                .await
                .map_err(|e| e.to_string())?;
            arbor_cleaner::clean::committed_files(reader.view())
                .await
                .map(|f| f.len())
                .map_err(|e| e.to_string())
        })
        .map_err(|e| format!("bench: listing {}: {e}", dir.display()))?;
    Ok((seconds, c, planned, committed))
}

/// One row of the results.
#[derive(Debug, Clone)]
struct Row {
    commits: u32,
    slices: usize,
    what: What,
    mdt: bool,
    seconds: f64,
    counts: Counts,
    planned: usize,
}

fn measure(rt: &Runtime, b: &Built, options: &Options) -> Result<Vec<Row>, String> {
    let slices = b.commits as usize * options.partitions as usize;
    let mut rows = Vec::new();
    for what in [What::Plan, What::DryRun] {
        let mut seconds = [Vec::new(), Vec::new()];
        let mut last: [Option<(Counts, BTreeSet<String>)>; 2] = [None, None];
        for run in 0..options.runs {
            eprintln!(
                "bench clean: {} commits: {} run {}/{}",
                b.commits,
                what.describe(),
                run + 1,
                options.runs
            );
            for (i, dir) in [&b.dirs.0, &b.dirs.1].into_iter().enumerate() {
                let (s, c, planned, committed) = once(rt, dir, what)?;
                if committed != slices {
                    return Err(format!(
                        "bench: {} has {committed} committed files, expected {slices}",
                        dir.display()
                    ));
                }
                if i == 0 && c.data_lists != 0 {
                    return Err(format!(
                        "bench: {} with the metadata table listed {} data partitions",
                        what.describe(),
                        c.data_lists
                    ));
                }
                if let Some(v) = seconds.get_mut(i) {
                    v.push(s);
                }
                if let Some(l) = last.get_mut(i) {
                    *l = Some((c, planned));
                }
            }
        }
        let [Some((c_mdt, p_mdt)), Some((c_dirs, p_dirs))] = last else {
            return Err("bench: no runs".to_string());
        };
        if p_mdt != p_dirs {
            return Err(format!(
                "bench: {} at {} commits: the plans differ with and without the MDT ({} and {} files)",
                what.describe(),
                b.commits,
                p_mdt.len(),
                p_dirs.len()
            ));
        }
        let [s_mdt, s_dirs] = seconds;
        for (mdt, s, c, p) in [
            (true, s_mdt, c_mdt, &p_mdt),
            (false, s_dirs, c_dirs, &p_dirs),
        ] {
            rows.push(Row {
                commits: b.commits,
                slices,
                what,
                mdt,
                seconds: median(&s).ok_or("bench: no timing")?,
                counts: c,
                planned: p.len(),
            });
        }
    }
    Ok(rows)
}

fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "| commits | file slices | operation | MDT | median (s) | µs per slice | data-partition LISTs | `.hoodie` LISTs | GET/HEAD | all calls | files planned | MDT ÷ no MDT |\n",
    );
    out.push_str("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let ratio = if r.mdt {
            rows.iter()
                .find(|o| !o.mdt && o.commits == r.commits && o.what == r.what)
                .map_or("-".to_string(), |o| format!("{:.2}", r.seconds / o.seconds))
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.3} | {:.1} | {} | {} | {} | {} | {} | {} |",
            r.commits,
            r.slices,
            r.what.describe(),
            if r.mdt { "on" } else { "off" },
            r.seconds,
            r.seconds * 1e6 / r.slices as f64,
            r.counts.data_lists,
            r.counts.meta_lists,
            r.counts.reads,
            r.counts.total,
            r.planned,
            ratio
        );
    }
    out
}

/// Runs `cargo xtask bench clean ...` (`args` starts with `clean`).
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
    } = super::start("clean", options.dir.as_deref())?;
    let (built, times) = build(&rt, &options, &work)?;
    let mut rows = Vec::new();
    for b in &built {
        rows.extend(measure(&rt, b, &options)?);
    }
    println!();
    println!("machine: {}", machine.describe());
    println!("load average (1, 5, 15 min) at the start: {load}");
    println!(
        "tables: copy-on-write, {} partitions, {} commits of one new file group per partition; \
         written in {:.0} s with the MDT and {:.0} s without (last 10% of the commits: {:.3} s and \
         {:.3} s per commit)",
        options.partitions,
        options.commits,
        times.with_mdt,
        times.without_mdt,
        times.last_commit.0,
        times.last_commit.1
    );
    println!(
        "policy KEEP_LATEST_COMMITS({RETAINED_COMMITS}); median of {} runs; whole bench {:.0} s",
        options.runs,
        started.elapsed().as_secs_f64()
    );
    println!();
    print!("{}", table(&rows));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn test_parse_args_defaults_1000_commits_100_partitions_two_sizes() {
        let o = parse_args(&args(&["clean"])).unwrap();
        assert_eq!((o.commits, o.partitions, o.runs), (1_000, 100, 5));
        assert_eq!(o.sizes, vec![250, 1_000]);
        assert_eq!(o.dir, None);
    }

    #[test]
    fn test_parse_args_options_applied_and_sizes_sorted() {
        let o = parse_args(&args(&[
            "clean",
            "--commits",
            "40",
            "--partitions",
            "7",
            "--sizes",
            "40,10,10",
            "--runs",
            "2",
            "--dir",
            "d",
        ]))
        .unwrap();
        assert_eq!((o.commits, o.partitions, o.runs), (40, 7, 2));
        assert_eq!(o.sizes, vec![10, 40]);
        assert_eq!(o.dir, Some(PathBuf::from("d")));
    }

    #[test]
    fn test_parse_args_bad_input_rejected() {
        for bad in [
            &["mdt"][..],
            &["clean", "--commits", "0"],
            &["clean", "--commits", "10", "--sizes", "20"],
            &["clean", "--runs"],
            &["clean", "--wat"],
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn test_build_and_measure_small_tables_checks_pass() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let options = parse_args(&args(&[
            "clean",
            "--commits",
            "4",
            "--partitions",
            "3",
            "--sizes",
            "2,4",
            "--runs",
            "1",
        ]))
        .unwrap();
        let (built, _) = build(&rt, &options, dir.path()).unwrap();
        assert_eq!(built.iter().map(|b| b.commits).collect::<Vec<_>>(), [2, 4]);
        let rows = measure(&rt, &built[1], &options).unwrap();
        assert_eq!(rows.len(), 4);
        for r in &rows {
            assert_eq!(r.slices, 12);
            assert_eq!(r.planned, 0);
            if r.mdt {
                assert_eq!(r.counts.data_lists, 0, "{r:?}");
            } else {
                assert!(r.counts.data_lists >= 3, "{r:?}");
            }
        }
        assert!(table(&rows).contains("| 4 | 12 |"));
    }
}
