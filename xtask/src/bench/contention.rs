//! `cargo xtask bench contention`: concurrent writers of disjoint keys in shared file groups,
//! against one writer doing the same commits alone, copy-on-write and merge-on-read.
//!
//! For each table type a table is bulk-inserted with `--writers` x `--keys` keys in two
//! partitions (one file group each, so every writer's keys share both groups). Then:
//! - **single**: one writer makes `--commits` upserts of `--rows` of its keys, one after the
//!   other (on a fresh copy of the table);
//! - **concurrent**: `--writers` writers (default 8) each make `--commits` (default 25) upserts
//!   of `--rows` (default 20) of their own keys at the same time, on the same table.
//!
//! Writers are tasks of one multi-threaded tokio runtime in this process (as many worker
//! threads as writers), each with its own `Table` handle: they share only the table's storage
//! and its storage-based lock (`.hoodie/.locks`), as separate processes do. Each commit is a
//! `Table::write` with the default `RetryPolicy` (20 attempts, 100 ms..5 s jittered backoff).
//!
//! Reported per scenario: attempts per commit, median and p90 commit latency (one
//! `Table::write` call, retries and backoff included) and time per attempt (commit latency /
//! attempts), the ratio of the concurrent median to the single writer's, and the number of
//! files in `.hoodie/timeline/` at the end, before and after one archival (`arbor archive`'s
//! `arbor_cleaner::archive`). Checked (the bench fails otherwise): every commit landed (the
//! completed commits are exactly the initial one plus writers x commits), and a snapshot read
//! holds every key exactly once with the value of its writer's last commit.
//!
//! Usage: `cargo xtask bench contention [--writers N] [--commits N] [--keys N] [--rows N]
//! [--dir DIR]`. A debug build re-runs itself as the release xtask.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arbor_storage::Storage;
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_timeline::config::{RecordMergeMode, TableType};
use arbor_timeline::{Action, ActiveTimeline, State};
use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};

use super::clean::parse_positive;
use super::local;
use super::report::median;

const USAGE: &str = "usage: cargo xtask bench contention [--writers N] [--commits N] [--keys N] \
                     [--rows N] [--dir DIR]";

/// Bench options.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    writers: u32,
    commits: u32,
    keys: u32,
    rows: u32,
    dir: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("contention") => {}
        _ => return Err(USAGE.to_string()),
    }
    let mut o = Options {
        writers: 8,
        commits: 25,
        keys: 100,
        rows: 20,
        dir: None,
    };
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("bench: {a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--writers" => o.writers = parse_positive("--writers", value()?)?,
            "--commits" => o.commits = parse_positive("--commits", value()?)?,
            "--keys" => o.keys = parse_positive("--keys", value()?)?,
            "--rows" => o.rows = parse_positive("--rows", value()?)?,
            "--dir" => o.dir = Some(PathBuf::from(value()?)),
            other => return Err(format!("bench: unknown argument {other:?}\n{USAGE}")),
        }
    }
    if o.rows > o.keys {
        return Err(format!("bench: --rows must be at most --keys\n{USAGE}"));
    }
    Ok(o)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("writer", DataType::Utf8, false),
    ]))
}

fn key(writer: u32, k: u32) -> String {
    format!("w{writer:02}k{k:05}")
}

/// Writer `w`'s key `k` lives in region `a` or `b` by parity: every writer has keys in both
/// partitions' file groups.
fn region(k: u32) -> &'static str {
    if k % 2 == 0 {
        "a"
    } else {
        "b"
    }
}

/// Rows of `keys` of writer `w` with ordering value `ts`.
fn batch(w: u32, keys: impl Iterator<Item = u32>, ts: i64) -> Result<RecordBatch, String> {
    let keys: Vec<u32> = keys.collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(
                keys.iter().map(|&k| key(w, k)),
            )),
            Arc::new(StringArray::from_iter_values(
                keys.iter().map(|&k| region(k)),
            )),
            Arc::new(Int64Array::from(vec![ts; keys.len()])),
            Arc::new(StringArray::from(vec![format!("w{w}"); keys.len()])),
        ],
    )
    .map_err(|e| format!("bench: building rows: {e}"))
}

/// The keys writer commit `c` updates: `rows` consecutive keys, rotating through the writer's.
fn commit_keys(o: &Options, c: u32) -> impl Iterator<Item = u32> {
    let start = (c * o.rows) % o.keys;
    let (keys, rows) = (o.keys, o.rows);
    (0..rows).map(move |i| (start + i) % keys)
}

fn create_options(table_type: TableType) -> CreateOptions {
    CreateOptions {
        name: "bench_contention".to_string(),
        table_type,
        record_key_fields: vec!["id".to_string()],
        partition_fields: vec!["region".to_string()],
        hive_style_partitioning: false,
        ordering_field: Some("ts".to_string()),
        merge_mode: Some(RecordMergeMode::EventTimeOrdering),
        schema: schema(),
        metadata_table: true,
        table_version: Default::default(),
        base_format: Default::default(),
    }
}

/// Creates the table in `dir` with every key of `writers` writers at `ts = 0`.
async fn build(dir: &Path, table_type: TableType, o: &Options, writers: u32) -> Result<(), String> {
    let table = Table::create(local(dir)?, create_options(table_type))
        .await
        .map_err(|e| format!("bench: creating {}: {e}", dir.display()))?;
    let batches = (0..writers)
        .map(|w| batch(w, 0..o.keys, 0))
        .collect::<Result<Vec<_>, _>>()?;
    table
        .write(WriteOperation::BulkInsert, batches)
        .await
        .map_err(|e| format!("bench: initial write: {e}"))?;
    Ok(())
}

/// One commit's figures: attempts and seconds.
#[derive(Debug, Clone, Copy)]
struct Commit {
    attempts: u32,
    seconds: f64,
}

/// `writers` writers, each doing `o.commits` upserts; returns every commit's figures.
async fn run_writers(
    storage: Arc<dyn Storage>,
    o: &Options,
    writers: u32,
) -> Result<Vec<Commit>, String> {
    let mut tasks = Vec::new();
    for w in 0..writers {
        let table = Table::open(storage.clone())
            .await
            .map_err(|e| format!("bench: opening the table: {e}"))?;
        let o = o.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for c in 0..o.commits {
                let rows = batch(w, commit_keys(&o, c), i64::from(c) + 1)?;
                let start = Instant::now();
                let r = table
                    .write(WriteOperation::Upsert, vec![rows])
                    .await
                    .map_err(|e| format!("bench: writer {w} commit {c}: {e}"))?;
                out.push(Commit {
                    attempts: r.attempts,
                    seconds: start.elapsed().as_secs_f64(),
                });
            }
            Ok::<_, String>(out)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.map_err(|e| format!("bench: writer task: {e}"))??);
    }
    Ok(all)
}

/// The value every key must have after `writers` of the table's `o.writers` writers ran:
/// writer w's key k holds the `ts` of the last commit that updated it (0 if none).
fn expected(o: &Options, writers: u32) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for w in 0..o.writers {
        for k in 0..o.keys {
            out.insert(key(w, k), 0);
        }
    }
    for w in 0..writers {
        for c in 0..o.commits {
            for k in commit_keys(o, c) {
                out.insert(key(w, k), i64::from(c) + 1);
            }
        }
    }
    out
}

/// Checks the run: every commit completed, every key present once with its expected value.
async fn check(storage: &Arc<dyn Storage>, o: &Options, writers: u32) -> Result<(), String> {
    let table = Table::open(storage.clone())
        .await
        .map_err(|e| format!("bench: reopening: {e}"))?;
    let tl = ActiveTimeline::load(storage.clone(), table.layout().clone())
        .await
        .map_err(|e| format!("bench: timeline: {e}"))?;
    let history =
        arbor_timeline::archive::TimelineHistory::load(storage.clone(), table.layout().clone())
            .await
            .map_err(|e| format!("bench: history: {e}"))?;
    let commits = history
        .instants()
        .filter(|h| {
            matches!(h.instant.action, Action::Commit | Action::DeltaCommit)
                && h.instant.state == State::Completed
        })
        .count();
    let want = 1 + (writers * o.commits) as usize;
    if commits != want {
        return Err(format!(
            "bench: {commits} completed commits, expected {want}"
        ));
    }
    if !tl.pending().is_empty() {
        return Err(format!("bench: pending instants left: {:?}", tl.pending()));
    }
    let reader = TableReader::open(storage.clone())
        .await
        .map_err(|e| format!("bench: reader: {e}"))?;
    let batches = reader
        .snapshot(None)
        .await
        .map_err(|e| format!("bench: snapshot: {e}"))?;
    let mut got: BTreeMap<String, i64> = BTreeMap::new();
    for b in &batches {
        let (Some(ids), Some(ts)) = (b.column_by_name("id"), b.column_by_name("ts")) else {
            return Err("bench: snapshot lacks id or ts".to_string());
        };
        let ids = ids.as_string::<i32>();
        let ts = ts.as_primitive::<Int64Type>();
        for i in 0..ids.len() {
            if got.insert(ids.value(i).to_string(), ts.value(i)).is_some() {
                return Err(format!("bench: key {} read twice", ids.value(i)));
            }
        }
    }
    let want = expected(o, writers);
    if got != want {
        let wrong = want
            .iter()
            .filter(|(k, v)| got.get(*k) != Some(v))
            .take(5)
            .collect::<Vec<_>>();
        return Err(format!(
            "bench: {} keys read, {} expected; first differences: {wrong:?}",
            got.len(),
            want.len()
        ));
    }
    Ok(())
}

fn timeline_files(dir: &Path) -> usize {
    std::fs::read_dir(dir.join(".hoodie").join("timeline"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().is_file())
                .count()
        })
        .unwrap_or(0)
}

/// The p-th percentile (nearest rank) of `values`.
fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v.get(rank.saturating_sub(1).min(v.len() - 1)).copied()
}

/// One scenario's row of the table.
#[derive(Debug, Clone)]
struct Row {
    table_type: &'static str,
    scenario: String,
    commits: usize,
    attempts: u32,
    median: f64,
    p90: f64,
    per_attempt_median: f64,
    timeline_end: usize,
    timeline_archived: usize,
    wall: f64,
}

async fn scenario(
    work: &Path,
    table_type: TableType,
    o: &Options,
    writers: u32,
) -> Result<Row, String> {
    let name = if table_type == TableType::CopyOnWrite {
        "cow"
    } else {
        "mor"
    };
    let dir = work.join(format!("{name}-{writers}"));
    // Every scenario's table holds every writer's keys, so file groups are the same size.
    build(&dir, table_type, o, o.writers).await?;
    let storage = local(&dir)?;
    let started = Instant::now();
    let commits = run_writers(storage.clone(), o, writers).await?;
    let wall = started.elapsed().as_secs_f64();
    check(&storage, o, writers).await?;
    let timeline_end = timeline_files(&dir);
    let table = Table::open(storage.clone())
        .await
        .map_err(|e| format!("bench: reopening: {e}"))?;
    arbor_cleaner::archive(&table)
        .await
        .map_err(|e| format!("bench: archive: {e}"))?;
    check(&storage, o, writers).await?;
    let timeline_archived = timeline_files(&dir);
    let seconds: Vec<f64> = commits.iter().map(|c| c.seconds).collect();
    let per_attempt: Vec<f64> = commits
        .iter()
        .map(|c| c.seconds / f64::from(c.attempts.max(1)))
        .collect();
    let row = Row {
        table_type: name,
        scenario: if writers == 1 {
            "1 writer".to_string()
        } else {
            format!("{writers} writers")
        },
        commits: commits.len(),
        attempts: commits.iter().map(|c| c.attempts).sum(),
        median: median(&seconds).unwrap_or(f64::NAN),
        p90: percentile(&seconds, 90.0).unwrap_or(f64::NAN),
        per_attempt_median: median(&per_attempt).unwrap_or(f64::NAN),
        timeline_end,
        timeline_archived,
        wall,
    };
    std::fs::remove_dir_all(&dir).map_err(|e| format!("bench: removing {}: {e}", dir.display()))?;
    Ok(row)
}

fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "| table | writers | commits | attempts per commit | median commit (s) | p90 commit (s) | median per attempt (s) | median vs 1 writer | timeline files at end | after archive | wall (s) |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let single = rows
            .iter()
            .find(|s| s.table_type == r.table_type && s.scenario == "1 writer")
            .map_or(f64::NAN, |s| s.median);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} | {:.3} | {:.3} | {:.3} | {:.2}x | {} | {} | {:.1} |",
            r.table_type,
            r.scenario,
            r.commits,
            f64::from(r.attempts) / r.commits.max(1) as f64,
            r.median,
            r.p90,
            r.per_attempt_median,
            r.median / single,
            r.timeline_end,
            r.timeline_archived,
            r.wall
        );
    }
    out
}

/// Runs `cargo xtask bench contention ...` (`args` starts with `contention`).
pub fn run(args: &[String]) -> Result<(), String> {
    let o = parse_args(args)?;
    if cfg!(debug_assertions) {
        return super::run_release(args);
    }
    let (work, _temp) = super::work_dir(o.dir.as_deref(), "arbor-bench-contention-")?;
    // One worker thread per writer (plus one), as separate processes would each have one.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.writers as usize + 1)
        .enable_all()
        .build()
        .map_err(|e| format!("bench: tokio runtime: {e}"))?;
    let machine = super::report::Machine::detect();
    let load = super::report::load_average();
    eprintln!(
        "bench contention: {}; tables under {}",
        machine.describe(),
        work.display()
    );
    let started = Instant::now();
    let mut rows = Vec::new();
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        for writers in [1, o.writers] {
            eprintln!("bench contention: {table_type:?}, {writers} writer(s)");
            rows.push(rt.block_on(scenario(&work, table_type, &o, writers))?);
        }
    }
    println!();
    println!("machine: {}", machine.describe());
    println!(
        "load average (1, 5, 15 min) at the start: {load}; at the end: {}",
        super::report::load_average()
    );
    println!(
        "{} writers x {} upserts of {} of their own {} keys (two partitions, one file group each, \
         shared by every writer); writers are tasks of one process with their own handles; \
         default retry policy; whole bench {:.0} s",
        o.writers,
        o.commits,
        o.rows,
        o.keys,
        started.elapsed().as_secs_f64()
    );
    println!();
    print!("{}", table(&rows));
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_parse_args() {
        let a = |s: &str| -> Vec<String> { s.split(' ').map(str::to_string).collect() };
        let o = parse_args(&a("contention")).unwrap();
        assert_eq!((o.writers, o.commits, o.keys, o.rows), (8, 25, 100, 20));
        let o = parse_args(&a("contention --writers 2 --commits 3 --keys 10 --rows 5")).unwrap();
        assert_eq!((o.writers, o.commits, o.keys, o.rows), (2, 3, 10, 5));
        assert!(parse_args(&a("contention --rows 11 --keys 10")).is_err());
        assert!(parse_args(&a("contention --writers 0")).is_err());
        assert!(parse_args(&a("ttl")).is_err());
    }

    #[test]
    fn test_tiny_scenarios_pass_their_checks() {
        let o = parse_args(&a("contention --writers 3 --commits 2 --keys 4 --rows 2")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap();
        for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
            for writers in [1, 3] {
                let r = rt
                    .block_on(scenario(dir.path(), table_type, &o, writers))
                    .unwrap();
                assert_eq!(r.commits, (writers * 2) as usize);
                assert!(r.attempts >= r.commits as u32);
                assert!(r.timeline_archived <= r.timeline_end);
            }
        }
    }

    fn a(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn test_expected_values_follow_the_last_commit_of_each_key() {
        let o = parse_args(&a("contention --commits 3 --keys 4 --rows 3")).unwrap();
        // Commits touch keys 0,1,2 / 3,0,1 / 2,3,0.
        let e = expected(&o, 1);
        assert_eq!(e.get(&key(0, 0)), Some(&3));
        assert_eq!(e.get(&key(0, 1)), Some(&2));
        assert_eq!(e.get(&key(0, 2)), Some(&3));
        assert_eq!(e.get(&key(0, 3)), Some(&3));
        assert_eq!(
            percentile(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90.0),
            Some(9.0)
        );
    }
}
