//! `cargo xtask bench distributed`: distributed writes (issue 37).
//!
//! 1. **Commit time against the fragment count**: for each count of `--fragments` (default 1,
//!    100 and 10,000), a fresh copy-on-write table with the metadata table (ten partitions)
//!    gets a bulk insert begun with `Table::begin_write`, `--rows-per-fragment` rows (default
//!    10) written as each fragment (eight fragments at a time, in this process), and the time
//!    of `Table::commit_fragments` alone is reported, with the time per fragment: it must grow
//!    no faster than the count (the bench fails when the time per fragment at the largest
//!    count is more than 1.5x that at the smallest count of at least 100, noise included).
//! 2. **Ray against one process** (skipped with `--no-ray`): `scripts/ray.sh` starts the local
//!    cluster (a head and a worker node), the Python package is installed in release
//!    (`pip install ./python`), and `distributed_ray.py` times, on the same 2M rows (a parquet
//!    file, ten columns, ten partitions) in the same run: the release `arbor write
//!    --op bulk-insert` as a whole process, `arbor.Table.write` in one Python process, and
//!    `ArborDatasink` in 8 Ray tasks (reading the parquet file, repartitioning, writing, one
//!    commit), checking that every table holds every row.
//!
//! Usage: `cargo xtask bench distributed [--fragments 1,100,10000] [--rows-per-fragment N]
//! [--rows N] [--tasks N] [--no-ray]`.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_timeline::config::TableType;
use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use futures::StreamExt;

const USAGE: &str = "usage: cargo xtask bench distributed [--fragments N,N,...] \
                     [--rows-per-fragment N] [--rows N] [--tasks N] [--no-ray]";

#[derive(Debug, Clone, PartialEq)]
struct Options {
    fragments: Vec<usize>,
    rows_per_fragment: usize,
    rows: u64,
    tasks: usize,
    ray: bool,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        fragments: vec![1, 100, 10_000],
        rows_per_fragment: 10,
        rows: 2_000_000,
        tasks: 8,
        ray: true,
    };
    let mut it = args.iter().skip(1);
    let number = |v: Option<&String>| -> Result<u64, String> {
        v.and_then(|s| s.parse().ok())
            .ok_or_else(|| USAGE.to_string())
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--fragments" => {
                o.fragments = it
                    .next()
                    .ok_or_else(|| USAGE.to_string())?
                    .split(',')
                    .map(|s| s.trim().parse().map_err(|_| USAGE.to_string()))
                    .collect::<Result<_, _>>()?;
            }
            "--rows-per-fragment" => o.rows_per_fragment = number(it.next())? as usize,
            "--rows" => o.rows = number(it.next())?,
            "--tasks" => o.tasks = number(it.next())? as usize,
            "--no-ray" => o.ray = false,
            _ => return Err(USAGE.to_string()),
        }
    }
    if o.fragments.is_empty() || o.fragments.contains(&0) || o.rows_per_fragment == 0 {
        return Err(USAGE.to_string());
    }
    Ok(o)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("part", DataType::Utf8, false),
        Field::new("v", DataType::Int64, false),
    ]))
}

fn rows(from: usize, n: usize) -> RecordBatch {
    let ids = (from..from + n).map(|i| format!("k{i:09}"));
    let parts = (from..from + n).map(|i| format!("p{}", i % 10));
    let v = (from..from + n).map(|i| i as i64);
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(ids)),
            Arc::new(StringArray::from_iter_values(parts)),
            Arc::new(Int64Array::from_iter_values(v)),
        ],
    )
    .unwrap_or_else(|_| RecordBatch::new_empty(schema()))
}

/// What one count of fragments measured.
struct CommitTiming {
    fragments: usize,
    files: usize,
    write_s: f64,
    commit_s: f64,
}

async fn commit_of(dir: &Path, fragments: usize, per: usize) -> Result<CommitTiming, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let storage: Arc<dyn Storage> =
        Arc::new(ObjectStoreStorage::local(dir).map_err(|e| e.to_string())?);
    let table = Table::create(
        storage,
        CreateOptions {
            name: "frag".into(),
            table_type: TableType::CopyOnWrite,
            record_key_fields: vec!["id".into()],
            partition_fields: vec!["part".into()],
            hive_style_partitioning: false,
            ordering_field: None,
            merge_mode: None,
            schema: schema(),
            metadata_table: true,
            table_version: Default::default(),
            base_format: Default::default(),
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    let txn = table
        .begin_write(WriteOperation::BulkInsert)
        .await
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let context = txn.context().clone();
    let written: Vec<_> = futures::stream::iter(0..fragments)
        .map(|task| {
            let (table, context) = (table.clone(), context.clone());
            async move {
                table
                    .write_fragment(&context, task as u64, vec![rows(task * per, per)])
                    .await
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let written = written
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let write_s = started.elapsed().as_secs_f64();
    let files = written.iter().map(|f| f.files().len()).sum();
    let started = Instant::now();
    let result = table
        .commit_fragments(txn, written)
        .await
        .map_err(|e| e.to_string())?;
    let commit_s = started.elapsed().as_secs_f64();
    if result.inserted != (fragments * per) as u64 {
        return Err(format!(
            "{fragments} fragments inserted {} rows, not {}",
            result.inserted,
            fragments * per
        ));
    }
    Ok(CommitTiming {
        fragments,
        files,
        write_s,
        commit_s,
    })
}

/// Runs the bench.
pub fn run(args: &[String]) -> Result<(), String> {
    let options = parse_args(args)?;
    if cfg!(debug_assertions) {
        return super::run_release(args);
    }
    let temp = tempfile::Builder::new()
        .prefix("arbor-bench-distributed-")
        .tempdir()
        .map_err(|e| format!("bench: {e}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("bench: tokio runtime: {e}"))?;
    let machine = super::report::Machine::detect();
    let load = super::report::load_average();
    let mut timings = Vec::new();
    for &n in &options.fragments {
        eprintln!("bench: committing {n} fragments");
        let dir = temp.path().join(format!("commit-{n}"));
        timings.push(rt.block_on(commit_of(&dir, n, options.rows_per_fragment))?);
    }
    println!();
    println!("machine: {}", machine.describe());
    println!("load average (1, 5, 15 min) at the start: {load}");
    println!();
    println!(
        "Commit time of a distributed bulk insert against its fragment count \
         ({} rows per fragment, ten partitions, metadata table):",
        options.rows_per_fragment
    );
    println!();
    println!("| fragments | data files | writing them | commit | commit per fragment |");
    println!("|---:|---:|---:|---:|---:|");
    for t in &timings {
        println!(
            "| {} | {} | {:.2} s | {:.3} s | {:.2} ms |",
            t.fragments,
            t.files,
            t.write_s,
            t.commit_s,
            1000.0 * t.commit_s / t.fragments as f64
        );
    }
    if options.ray {
        let table = ray_bench(&options, temp.path())?;
        println!();
        print!("{table}");
    }
    // The time per fragment must not grow with the count (from 100 fragments on; one
    // fragment is dominated by the commit's fixed cost).
    let per = |t: &CommitTiming| t.commit_s / t.fragments as f64;
    let base = timings.iter().find(|t| t.fragments >= 100);
    if let (Some(base), Some(last)) = (base, timings.last()) {
        println!();
        println!(
            "commit time grew {:.1}x for {:.0}x the fragments ({} to {})",
            last.commit_s / base.commit_s,
            last.fragments as f64 / base.fragments as f64,
            base.fragments,
            last.fragments
        );
        if last.fragments > base.fragments && per(last) > 1.5 * per(base) {
            return Err(format!(
                "bench: commit time per fragment grew from {:.2} ms ({} fragments) to {:.2} ms \
                 ({} fragments)",
                1000.0 * per(base),
                base.fragments,
                1000.0 * per(last),
                last.fragments
            ));
        }
    }
    Ok(())
}

/// Part 2: starts the Ray cluster, installs the package in release, runs the Python side.
fn ray_bench(options: &Options, work: &Path) -> Result<String, String> {
    let repo = crate::repo_root();
    crate::run(Command::new("cargo").args(["build", "--release", "-p", "arbor-cli"]))?;
    let arbor = repo.join("target").join("release").join("arbor");
    let python = super::peer::python()?;
    eprintln!("bench: installing the Python package (release build)");
    let bin = python.parent().map(Path::to_path_buf).unwrap_or_default();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    crate::run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-build-isolation",
                "--force-reinstall",
                "--no-deps",
                "./python",
            ])
            .env("PATH", &path)
            .current_dir(&repo),
    )?;
    let started = Command::new("bash")
        .arg(repo.join("scripts").join("ray.sh"))
        .output()
        .map_err(|e| format!("scripts/ray.sh: {e}"))?;
    if !started.status.success() {
        return Err(format!(
            "scripts/ray.sh failed: {}",
            String::from_utf8_lossy(&started.stderr)
        ));
    }
    let line = String::from_utf8_lossy(&started.stdout).to_string();
    let address = line
        .lines()
        .last()
        .and_then(|l| l.split('=').nth(1))
        .ok_or_else(|| format!("scripts/ray.sh printed no address: {line}"))?
        .trim()
        .to_string();
    let script = repo
        .join("xtask")
        .join("src")
        .join("bench")
        .join("distributed_ray.py");
    let out = Command::new(&python)
        .arg(&script)
        .args(["--arbor", &arbor.to_string_lossy()])
        .args(["--work", &work.to_string_lossy()])
        .args(["--address", &address])
        .args(["--rows", &options.rows.to_string()])
        .args(["--tasks", &options.tasks.to_string()])
        .output()
        .map_err(|e| format!("{}: {e}", script.display()));
    let _ = Command::new("bash")
        .arg(repo.join("scripts").join("ray.sh"))
        .arg("stop")
        .output();
    let out = out?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}
