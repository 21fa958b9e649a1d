//! `cargo xtask bench history`: a commit's cost against the table's history and size.
//!
//! Tables (copy-on-write, with the metadata table, on local storage, partitioned by `part` into
//! ten partitions):
//! - **history**: 10,000 rows in one bulk insert, then tiny upserts (10 rows) until the table
//!   has `--instants` completed writes (active + archived), cleaned (latest file version) and
//!   archived (the archiver's default policy) every 100 commits, as a table with inline
//!   services would be;
//! - **files**: `--files` data files, 100 per partition (so `files / 100` partitions), made
//!   by bulk inserts of 10,000 rows with one row per file (`max_file_size: 1`, the faster path
//!   than one commit per file). The upsert touches ten partitions at every size: a write's
//!   cost follows the partitions it touches (their FILES records, their files' keys for the
//!   simple index, as Java's SIMPLE index), not the table's other partitions.
//!
//! For each table, `--runs` rounds (interleaved across the tables, so load on the machine
//! spreads over all of them) open a fresh handle and upsert 100 existing keys (spread over the
//! ten partitions); the median time is reported with the storage calls of the last upsert
//! (GET/HEAD, LIST, writes; through a pass-through `FaultInjectingStorage`), split into those
//! of the archived timelines and of the FILES partition, and the metadata table's base and log
//! files once each table is built (kept bounded by its own clean; printed every 100 commits
//! while the history grows). Each upsert is checked: it must update
//! exactly 100 rows and insert none; a mismatch fails the bench. Ratios compare the largest
//! against the smallest table of each kind (acceptance: history at most 1.2x, files 1.5x).
//!
//! Usage: `cargo xtask bench history [--instants 100,10000] [--files 1000,100000] [--runs 5]
//! [--dir DIR]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arbor_cleaner::{clean, CleanOptions, CleanPolicy};
use arbor_storage::{FaultInjectingStorage, OpKind, Storage};
use arbor_table::{Table, WriteOperation, WriteOptions};
use arrow::array::{Int64Array, RecordBatch, StringArray};
use tokio::runtime::Runtime;

use super::branch::named_table_options;
use super::clean::parse_positive;
use super::local;
use super::mdt_clean::{mdt_files, total};

const USAGE: &str = "usage: cargo xtask bench history [--instants N,N] [--files N,N] [--runs N] \
                     [--dir DIR]";

/// Rows of the history table.
const HISTORY_ROWS: u32 = 10_000;
/// Rows of one tiny commit while growing the history.
const TINY_ROWS: u32 = 10;
/// Commits between two cleans with archival.
const CLEAN_EVERY: u32 = 100;
/// Rows of the measured upsert.
const UPSERT_ROWS: u32 = 100;
/// Rows (= files) of one file-making bulk insert.
const FILES_PER_COMMIT: u32 = 10_000;
/// Partitions of the history table, and partitions the measured upsert touches.
const PARTITIONS: u32 = 10;
/// Data files per partition of the files tables.
const FILES_PER_PARTITION: u32 = 100;

/// Partitions of a files table of `files` files (at least [`PARTITIONS`]).
fn files_partitions(files: u32) -> u32 {
    (files / FILES_PER_PARTITION).max(PARTITIONS)
}

#[derive(Debug, Clone, PartialEq)]
struct Options {
    instants: Vec<u32>,
    files: Vec<u32>,
    runs: usize,
    dir: Option<PathBuf>,
}

fn parse_list(flag: &str, v: &str) -> Result<Vec<u32>, String> {
    v.split(',')
        .map(|s| parse_positive(flag, s.trim()))
        .collect()
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    if it.next().map(String::as_str) != Some("history") {
        return Err(USAGE.to_string());
    }
    let mut o = Options {
        instants: vec![100, 10_000],
        files: vec![1_000, 100_000],
        runs: 5,
        dir: None,
    };
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("bench history: {flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--instants" => o.instants = parse_list(flag, value)?,
            "--files" => o.files = parse_list(flag, value)?,
            "--runs" => o.runs = parse_positive(flag, value)? as usize,
            "--dir" => o.dir = Some(PathBuf::from(value)),
            _ => return Err(format!("bench history: unknown option {flag}\n{USAGE}")),
        }
    }
    Ok(o)
}

/// Rows with keys `<prefix><i>`, ordering value `ts`, key `i` in partition `i % partitions`.
fn batch(
    keys: impl Iterator<Item = u32>,
    prefix: &str,
    ts: i64,
    partitions: u32,
) -> Result<RecordBatch, String> {
    let keys: Vec<u32> = keys.collect();
    let schema = named_table_options("x").schema;
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(
                keys.iter().map(|i| format!("{prefix}{i:07}")),
            )),
            Arc::new(Int64Array::from_iter_values(keys.iter().map(|_| ts))),
            Arc::new(StringArray::from_iter_values(
                keys.iter()
                    .map(|i| format!("p{:04}", i % partitions.max(1))),
            )),
        ],
    )
    .map_err(|e| format!("bench history: building a batch: {e}"))
}

/// One built table.
struct Built {
    kind: &'static str,
    size: u32,
    prefix: &'static str,
    /// Keys of the table's rows: 0..keys.
    keys: u32,
    /// Partitions: key `i` is in partition `i % partitions`.
    partitions: u32,
    counter: Arc<FaultInjectingStorage>,
    build_seconds: f64,
    ts: i64,
    /// Base and log files of the metadata table once built (its own clean keeps them bounded).
    mdt_files: usize,
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
    .map_err(|e| format!("bench history: clean and archive: {e}"))
}

fn build_history(rt: &Runtime, instants: u32, dir: &Path) -> Result<Built, String> {
    let start = Instant::now();
    let counter = Arc::new(FaultInjectingStorage::new(local(dir)?));
    let storage: Arc<dyn Storage> = counter.clone();
    rt.block_on(async {
        let table = Table::create(storage.clone(), named_table_options("bench_history"))
            .await
            .map_err(|e| format!("bench history: creating {}: {e}", dir.display()))?;
        table
            .write(
                WriteOperation::BulkInsert,
                vec![batch(0..HISTORY_ROWS, "k", 0, PARTITIONS)?],
            )
            .await
            .map_err(|e| format!("bench history: bulk insert: {e}"))?;
        let mut commits = 1;
        while commits < instants {
            let from = (commits * TINY_ROWS) % HISTORY_ROWS;
            table
                .write(
                    WriteOperation::Upsert,
                    vec![batch(
                        from..from + TINY_ROWS,
                        "k",
                        i64::from(commits),
                        PARTITIONS,
                    )?],
                )
                .await
                .map_err(|e| format!("bench history: tiny commit {commits}: {e}"))?;
            commits += 1;
            if commits % CLEAN_EVERY == 0 {
                clean_and_archive(&table).await?;
                let mdt = total(&mdt_files(&storage).await?);
                eprintln!(
                    "bench history: {instants} instants: {commits} commits ({:.0} s), {mdt} MDT files",
                    start.elapsed().as_secs_f64()
                );
            }
        }
        Ok::<_, String>(())
    })?;
    let mdt_files = rt.block_on(mdt_files(&storage)).map(|m| total(&m))?;
    Ok(Built {
        kind: "history (instants)",
        size: instants,
        prefix: "k",
        keys: HISTORY_ROWS,
        partitions: PARTITIONS,
        counter,
        build_seconds: start.elapsed().as_secs_f64(),
        ts: i64::from(instants) + 1,
        mdt_files,
    })
}

fn build_files(rt: &Runtime, files: u32, dir: &Path) -> Result<Built, String> {
    let start = Instant::now();
    let counter = Arc::new(FaultInjectingStorage::new(local(dir)?));
    let storage: Arc<dyn Storage> = counter.clone();
    rt.block_on(async {
        let table = Table::create(storage.clone(), named_table_options("bench_files"))
            .await
            .map_err(|e| format!("bench history: creating {}: {e}", dir.display()))?
            .with_write_options(WriteOptions {
                small_file_limit: 0,
                max_file_size: 1,
                ..WriteOptions::default()
            });
        let mut written = 0;
        while written < files {
            let to = (written + FILES_PER_COMMIT).min(files);
            let r = table
                .write(
                    WriteOperation::BulkInsert,
                    vec![batch(written..to, "f", 0, files_partitions(files))?],
                )
                .await
                .map_err(|e| format!("bench history: bulk insert {written}..{to}: {e}"))?;
            if r.files_written != (to - written) as usize {
                return Err(format!(
                    "bench history: a bulk insert of {} rows wrote {} files",
                    to - written,
                    r.files_written
                ));
            }
            written = to;
        }
        Ok(())
    })?;
    let mdt_files = rt.block_on(mdt_files(&storage)).map(|m| total(&m))?;
    Ok(Built {
        kind: "files",
        size: files,
        prefix: "f",
        keys: files,
        partitions: files_partitions(files),
        counter,
        build_seconds: start.elapsed().as_secs_f64(),
        ts: 1,
        mdt_files,
    })
}

/// Storage calls of one upsert.
#[derive(Debug, Clone, Default, PartialEq)]
struct Calls {
    reads: usize,
    lists: usize,
    writes: usize,
    archive: usize,
    files_partition: usize,
}

fn calls(counter: &FaultInjectingStorage) -> Calls {
    let mut c = Calls::default();
    for op in counter.ops() {
        match op.kind {
            OpKind::List | OpKind::ListDir => c.lists += 1,
            k if k.is_write() => c.writes += 1,
            _ => c.reads += 1,
        }
        if op.key.contains("timeline/history") {
            c.archive += 1;
        }
        if op.key.starts_with(".hoodie/metadata/files") {
            c.files_partition += 1;
        }
    }
    c
}

/// One measured upsert of 100 existing keys spread over the table.
fn upsert(rt: &Runtime, b: &mut Built) -> Result<(f64, Calls), String> {
    // 100 existing keys, 10 in each of the first ten partitions (the same partitions at
    // every size).
    let per = UPSERT_ROWS / PARTITIONS;
    let rows_per_partition = (b.keys / b.partitions).max(1);
    let keys = (0..UPSERT_ROWS).map(|i| {
        let (p, j) = (i % PARTITIONS, i / PARTITIONS);
        p + b.partitions * ((j * rows_per_partition / per) % rows_per_partition)
    });
    let input = batch(keys, b.prefix, b.ts, b.partitions)?;
    b.ts += 1;
    let storage: Arc<dyn Storage> = b.counter.clone();
    rt.block_on(async {
        let start = Instant::now();
        b.counter.reset();
        let table = Table::open(storage)
            .await
            .map_err(|e| format!("bench history: open: {e}"))?;
        let r = table
            .write(WriteOperation::Upsert, vec![input])
            .await
            .map_err(|e| format!("bench history: upsert: {e}"))?;
        let seconds = start.elapsed().as_secs_f64();
        if r.updated != u64::from(UPSERT_ROWS) || r.inserted != 0 {
            return Err(format!(
                "bench history: the upsert on the {} {} table updated {} and inserted {} rows, \
                 expected {UPSERT_ROWS} updates",
                b.size, b.kind, r.updated, r.inserted
            ));
        }
        Ok((seconds, calls(&b.counter)))
    })
}

/// Runs the bench (release build).
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
    } = super::start("history", options.dir.as_deref())?;
    let mut built = Vec::new();
    for &n in &options.instants {
        built.push(build_history(&rt, n, &work.join(format!("history-{n}")))?);
    }
    for &n in &options.files {
        built.push(build_files(&rt, n, &work.join(format!("files-{n}")))?);
    }
    let mut times: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut last: BTreeMap<usize, Calls> = BTreeMap::new();
    for _ in 0..options.runs {
        for (i, b) in built.iter_mut().enumerate() {
            let (s, c) = upsert(&rt, b)?;
            times.entry(i).or_default().push(s);
            last.insert(i, c);
        }
    }
    println!();
    println!("machine: {}", machine.describe());
    println!("load average (1, 5, 15 min) at the start: {load}");
    println!(
        "copy-on-write with the MDT; 100-row upsert through a fresh handle; median of {} \
         interleaved runs; whole bench {:.0} s",
        options.runs,
        started.elapsed().as_secs_f64()
    );
    println!();
    println!("| table | size | built in (s) | MDT files | upsert median (ms) | × smallest | GET/HEAD | LIST | writes | archive calls | FILES calls |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut smallest: BTreeMap<&str, f64> = BTreeMap::new();
    for (i, b) in built.iter().enumerate() {
        let m = super::med("upsert", times.get(&i).map(Vec::as_slice).unwrap_or(&[]))?;
        let base = *smallest.entry(b.kind).or_insert(m);
        let c = last.get(&i).cloned().unwrap_or_default();
        println!(
            "| {} | {} | {:.1} | {} | {:.1} | {:.2} | {} | {} | {} | {} | {} |",
            b.kind,
            b.size,
            b.build_seconds,
            b.mdt_files,
            m * 1000.0,
            m / base,
            c.reads,
            c.lists,
            c.writes,
            c.archive,
            c.files_partition
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse_args_defaults_and_lists() {
        let o = parse_args(&["history".to_string()]).unwrap();
        assert_eq!(o.instants, vec![100, 10_000]);
        let o = parse_args(&[
            "history".to_string(),
            "--files".to_string(),
            "10,20".to_string(),
        ])
        .unwrap();
        assert_eq!(o.files, vec![10, 20]);
        assert!(parse_args(&["history".to_string(), "--bad".to_string()]).is_err());
    }
}
