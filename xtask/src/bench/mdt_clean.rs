//! `cargo xtask bench mdt-clean`: the metadata table's file count over many commits, with the
//! MDT's own clean (`arbor_mdt::clean`, the default) and without it
//! (`WriteOptions::mdt_clean = false`), measured side by side.
//!
//! Two copy-on-write tables with the metadata table (FILES partition) are written in the same
//! loop, commit by commit alternately: `--commits` upserts (default 2,000) of 4 rows each,
//! keys cycling over 1,000 ids in 4 partitions. At every `--every` commits (default 500) the
//! MDT's base and log files are counted per MDT partition from a listing of `.hoodie/metadata/`
//! (its `.hoodie/` excluded), with the seconds per commit of the last interval.
//!
//! Checks (a failure fails the bench): both tables read every key once with the value of its
//! last write; `validate` finds the FILES partition equal to a listing; with the clean on, at
//! least one MDT clean completed and the final count is at most the count at the first
//! checkpoint plus one compaction cycle (Java's cadence: `10` log files and a base file).
//!
//! Usage: `cargo xtask bench mdt-clean [--commits 2000] [--every 500] [--dir DIR]`. A debug
//! build re-runs itself as the release xtask. Progress to stderr, the table to stdout.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arbor_storage::{Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, Table, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use tokio::runtime::Runtime;

use super::clean::parse_positive;
use super::local;

const USAGE: &str = "usage: cargo xtask bench mdt-clean [--commits N] [--every N] [--dir DIR]";

/// Distinct record keys the upserts cycle over.
const KEYS: u32 = 1_000;
/// Rows per commit.
const ROWS: u32 = 4;
/// Data partitions.
const PARTITIONS: u32 = 4;
/// The most the cleaned count may grow past the first checkpoint: one compaction cycle.
const CYCLE: usize = 11;

/// Bench options.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    commits: u32,
    every: u32,
    dir: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("mdt-clean") => {}
        _ => return Err(USAGE.to_string()),
    }
    let mut options = Options {
        commits: 2_000,
        every: 500,
        dir: None,
    };
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("bench: {a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--commits" => options.commits = parse_positive("--commits", value()?)?,
            "--every" => options.every = parse_positive("--every", value()?)?,
            "--dir" => options.dir = Some(PathBuf::from(value()?)),
            other => return Err(format!("bench: unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(options)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
    ]))
}

/// The rows of commit `i`: keys `i*ROWS .. i*ROWS+ROWS` modulo [`KEYS`], value `i`.
fn batch(i: u32) -> Result<RecordBatch, String> {
    let keys: Vec<u32> = (0..ROWS).map(|r| (i * ROWS + r) % KEYS).collect();
    let ids: Vec<String> = keys.iter().map(|k| format!("k{k:04}")).collect();
    let regions: Vec<String> = keys
        .iter()
        .map(|k| format!("r{}", k % PARTITIONS))
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from(ids)),
            Arc::new(StringArray::from(regions)),
            Arc::new(Int64Array::from(vec![i64::from(i); keys.len()])),
        ],
    )
    .map_err(|e| format!("bench: batch: {e}"))
}

async fn create(dir: &Path, clean: bool) -> Result<(Arc<dyn Storage>, Table), String> {
    let storage = local(dir)?;
    let table = Table::create(
        storage.clone(),
        CreateOptions {
            name: "mdt_clean".into(),
            table_type: TableType::CopyOnWrite,
            record_key_fields: vec!["id".into()],
            partition_fields: vec!["region".into()],
            hive_style_partitioning: true,
            ordering_field: Some("ts".into()),
            merge_mode: None,
            schema: schema(),
            metadata_table: true,
            table_version: Default::default(),
            base_format: Default::default(),
        },
    )
    .await
    .map_err(|e| format!("bench: create: {e}"))?
    .with_write_options(WriteOptions {
        mdt_clean: clean,
        ..WriteOptions::default()
    });
    Ok((storage, table))
}

/// MDT base and log files per MDT partition.
pub(super) async fn mdt_files(
    storage: &Arc<dyn Storage>,
) -> Result<BTreeMap<String, usize>, String> {
    let mut out = BTreeMap::new();
    let base = arbor_mdt::MDT_BASE;
    for o in storage
        .list_all(base)
        .await
        .map_err(|e| format!("bench: listing the MDT: {e}"))?
    {
        let Some(rest) = o.key.strip_prefix(base).and_then(|r| r.strip_prefix('/')) else {
            continue;
        };
        if rest.starts_with(".hoodie/") {
            continue;
        }
        let Some((partition, name)) = rest.split_once('/') else {
            continue;
        };
        // Base HFiles and log files (`.<file id>_<instant>.log.<n>_<token>`).
        if name.ends_with(".hfile") || (name.starts_with('.') && name.contains(".log.")) {
            *out.entry(partition.to_string()).or_insert(0) += 1;
        }
    }
    Ok(out)
}

/// Completed MDT cleans on the MDT timeline (listed).
async fn mdt_cleans(storage: &Arc<dyn Storage>) -> Result<usize, String> {
    let dir = format!("{}/timeline", arbor_mdt::MDT_META_DIR);
    let (objects, _) = storage
        .list_dir(&dir)
        .await
        .map_err(|e| format!("bench: listing {dir}: {e}"))?;
    Ok(objects
        .iter()
        .filter(|o| o.key.ends_with(".clean") && o.key.contains('_'))
        .count())
}

/// Every key once with the value of its last write; `validate` clean.
async fn check(storage: &Arc<dyn Storage>, commits: u32, label: &str) -> Result<(), String> {
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..commits {
        for r in 0..ROWS {
            expected.insert(format!("k{:04}", (i * ROWS + r) % KEYS), i64::from(i));
        }
    }
    let reader = TableReader::open(storage.clone())
        .await
        .map_err(|e| format!("bench: {label}: open: {e}"))?;
    let batches = reader
        .snapshot(None)
        .await
        .map_err(|e| format!("bench: {label}: read: {e}"))?;
    let mut got: BTreeMap<String, i64> = BTreeMap::new();
    for b in &batches {
        let (Some(id), Some(ts)) = (b.column_by_name("id"), b.column_by_name("ts")) else {
            return Err(format!("bench: {label}: columns missing"));
        };
        let id = id.as_string::<i32>();
        let ts = ts.as_primitive::<Int64Type>();
        for r in 0..b.num_rows() {
            if got.insert(id.value(r).to_string(), ts.value(r)).is_some() {
                return Err(format!("bench: {label}: key {} twice", id.value(r)));
            }
        }
        if id.null_count() > 0 {
            return Err(format!("bench: {label}: null keys"));
        }
    }
    if got != expected {
        return Err(format!(
            "bench: {label}: {} rows read, {} expected, or values differ",
            got.len(),
            expected.len()
        ));
    }
    let report = arbor_mdt::validate::validate_table(storage.clone())
        .await
        .map_err(|e| format!("bench: {label}: validate: {e}"))?;
    if !report.discrepancies.is_empty() {
        return Err(format!(
            "bench: {label}: validate: {:?}",
            report.discrepancies
        ));
    }
    Ok(())
}

/// One checkpoint.
struct Checkpoint {
    commits: u32,
    on: BTreeMap<String, usize>,
    off: BTreeMap<String, usize>,
    seconds_per_commit: (f64, f64),
}

pub(super) fn total(m: &BTreeMap<String, usize>) -> usize {
    m.values().sum()
}

fn describe(m: &BTreeMap<String, usize>) -> String {
    m.iter()
        .map(|(p, n)| format!("{p} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn write_all(rt: &Runtime, work: &Path, options: &Options) -> Result<Vec<Checkpoint>, String> {
    rt.block_on(async {
        let (on_storage, on) = create(&work.join("clean-on"), true).await?;
        let (off_storage, off) = create(&work.join("clean-off"), false).await?;
        let mut out = Vec::new();
        let mut spent = (0f64, 0f64);
        for i in 0..options.commits {
            let b = batch(i)?;
            let t = Instant::now();
            on.write(WriteOperation::Upsert, vec![b.clone()])
                .await
                .map_err(|e| format!("bench: commit {i} (clean on): {e}"))?;
            spent.0 += t.elapsed().as_secs_f64();
            let t = Instant::now();
            off.write(WriteOperation::Upsert, vec![b])
                .await
                .map_err(|e| format!("bench: commit {i} (clean off): {e}"))?;
            spent.1 += t.elapsed().as_secs_f64();
            let done = i + 1;
            if done % options.every == 0 || done == options.commits {
                let interval = f64::from(done - out.last().map_or(0, |c: &Checkpoint| c.commits));
                let c = Checkpoint {
                    commits: done,
                    on: mdt_files(&on_storage).await?,
                    off: mdt_files(&off_storage).await?,
                    seconds_per_commit: (spent.0 / interval, spent.1 / interval),
                };
                eprintln!(
                    "bench mdt-clean: {done} commits: MDT files {} with the clean ({}), {} without",
                    total(&c.on),
                    describe(&c.on),
                    total(&c.off)
                );
                spent = (0.0, 0.0);
                out.push(c);
            }
        }
        check(&on_storage, options.commits, "clean on").await?;
        check(&off_storage, options.commits, "clean off").await?;
        let cleans = mdt_cleans(&on_storage).await?;
        if cleans == 0 && options.commits >= 40 {
            return Err("bench: no MDT clean completed".to_string());
        }
        if mdt_cleans(&off_storage).await? != 0 {
            return Err("bench: the table without MDT clean has MDT cleans".to_string());
        }
        if let (Some(first), Some(last)) = (out.first(), out.last()) {
            if first.commits >= 40 && total(&last.on) > total(&first.on) + CYCLE {
                return Err(format!(
                    "bench: MDT files grew from {} to {} with the clean on",
                    total(&first.on),
                    total(&last.on)
                ));
            }
        }
        eprintln!("bench mdt-clean: {cleans} MDT cleans completed");
        Ok(out)
    })
}

fn table(rows: &[Checkpoint]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| commits | MDT files, clean on (per partition) | MDT files, clean off | s/commit on | s/commit off |"
    );
    let _ = writeln!(s, "|---:|---|---:|---:|---:|");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} ({}) | {} | {:.3} | {:.3} |",
            r.commits,
            total(&r.on),
            describe(&r.on),
            total(&r.off),
            r.seconds_per_commit.0,
            r.seconds_per_commit.1
        );
    }
    s
}

/// Runs the bench (module doc).
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
    } = super::start("mdt-clean", options.dir.as_deref())?;
    let rows = write_all(&rt, &work, &options)?;
    println!();
    println!("machine: {}", machine.describe());
    println!(
        "load average (1, 5, 15 min) at the start: {load}, at the end: {}",
        super::report::load_average()
    );
    println!(
        "tables: copy-on-write with the metadata table (FILES), {} partitions, {} upserts of {ROWS} \
         rows over {KEYS} keys, written alternately; MDT clean: KEEP_LATEST_COMMITS({}), after \
         each MDT compaction (every {} log files); whole bench {:.0} s",
        PARTITIONS,
        options.commits,
        arbor_mdt::clean::DEFAULT_MDT_COMMITS_RETAINED,
        arbor_mdt::compaction::DEFAULT_COMPACT_EVERY,
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

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn test_parse_args_defaults_and_flags() {
        let o = parse_args(&args(&["mdt-clean"])).unwrap();
        assert_eq!((o.commits, o.every), (2_000, 500));
        let o = parse_args(&args(&[
            "mdt-clean",
            "--commits",
            "10_000",
            "--every",
            "1000",
        ]))
        .unwrap();
        assert_eq!((o.commits, o.every), (10_000, 1_000));
        assert!(parse_args(&args(&["mdt-clean", "--commits", "0"])).is_err());
        assert!(parse_args(&args(&["mdt-clean", "--bogus"])).is_err());
    }

    #[test]
    fn test_batches_cycle_over_the_keys() {
        let b = batch(KEYS / ROWS).unwrap();
        let id = b.column(0).as_string::<i32>();
        assert_eq!(id.value(0), "k0000");
        assert_eq!(b.num_rows(), ROWS as usize);
    }
}
