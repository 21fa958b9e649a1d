//! `cargo xtask bench cluster`: clustering (issue 36).
//!
//! A non-partitioned copy-on-write table with the metadata table and column stats holds
//! `--files` base files (default 1,000) of `--rows-per-file` rows (default 1,000) whose value
//! column `v` is a permutation of the row numbers (random order: every file spans nearly the
//! whole range of `v`), and a second column `w`, another permutation. On a fresh copy for each
//! layout, `Table::cluster` rewrites it sorted by `v` (`linear`, `z-order`, `hilbert`; and
//! `z-order` over `v,w`, for comparison) into files of a target size that gives about
//! `--files / 10` files. Then a range query `v >= lo AND v < hi` matching 1% of the rows is
//! planned with data skipping: the share of files it reads must be at most 5% after a
//! clustering by `v` (the bench fails otherwise; before clustering it reads nearly all).
//!
//! The baseline, in the same run: reading every base file with arrow-rs's parquet reader and
//! writing the rows back with its `ArrowWriter` into as many files (no sort, no table):
//! clustering should take at most 1.5x that. Peak memory (resident high-water mark above what
//! the process held, [`super::peak_memory`]) is measured for the clustering of the table and
//! of a table with `--scale` times the rows (default 4), with the same `--memory` budget
//! (default 64 MiB): it should not grow with the table.
//!
//! Usage: `cargo xtask bench cluster [--files N] [--rows-per-file N] [--scale N] [--memory
//! MiB] [--dir DIR]`.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arbor_storage::Storage;
use arbor_table::cluster::{ClusterOptions, ClusterOutcome, Layout};
use arbor_table::read::{FilterOp, PartitionFilter, ReadOptions, TableReader};
use arbor_table::{CreateOptions, Table, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tokio::runtime::Runtime;

const USAGE: &str = "usage: cargo xtask bench cluster [--files N] [--rows-per-file N] \
                     [--scale N] [--memory MiB] [--dir DIR]";

#[derive(Debug, Clone, PartialEq)]
struct Options {
    files: u64,
    rows_per_file: u64,
    scale: u64,
    memory_mib: u64,
    dir: Option<std::path::PathBuf>,
    /// Internal: cluster the table at this directory in this process and print its time and
    /// peak memory (`--one DIR --sort C1,C2 --layout L --target BYTES`).
    one: Option<One>,
}

/// One clustering measured in a process of its own.
#[derive(Debug, Clone, PartialEq)]
struct One {
    dir: std::path::PathBuf,
    sort: Vec<String>,
    layout: String,
    target: u64,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    if it.next().map(String::as_str) != Some("cluster") {
        return Err(USAGE.to_string());
    }
    let mut o = Options {
        files: 1_000,
        rows_per_file: 1_000,
        scale: 4,
        memory_mib: 64,
        dir: None,
        one: None,
    };
    let mut one = One {
        dir: std::path::PathBuf::new(),
        sort: Vec::new(),
        layout: "linear".to_string(),
        target: 0,
    };
    let positive = |v: Option<&String>| -> Result<u64, String> {
        v.and_then(|v| v.replace('_', "").parse::<u64>().ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("bench cluster: a positive number; {USAGE}"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--files" => o.files = positive(it.next())?,
            "--rows-per-file" => o.rows_per_file = positive(it.next())?,
            "--scale" => o.scale = positive(it.next())?,
            "--memory" => o.memory_mib = positive(it.next())?,
            "--dir" => {
                o.dir = Some(std::path::PathBuf::from(
                    it.next().ok_or_else(|| USAGE.to_string())?,
                ))
            }
            "--one" => {
                one.dir = std::path::PathBuf::from(it.next().ok_or_else(|| USAGE.to_string())?);
                o.one = Some(one.clone());
            }
            "--sort" => {
                one.sort = it
                    .next()
                    .ok_or_else(|| USAGE.to_string())?
                    .split(',')
                    .map(str::to_string)
                    .collect()
            }
            "--layout" => one.layout = it.next().ok_or_else(|| USAGE.to_string())?.clone(),
            "--target" => one.target = positive(it.next())?,
            other => {
                return Err(format!(
                    "bench cluster: unknown argument {other:?}; {USAGE}"
                ))
            }
        }
    }
    if let Some(x) = o.one.as_mut() {
        x.dir = one.dir;
        x.sort = one.sort;
        x.layout = one.layout;
        x.target = one.target;
    }
    if o.files < 20 {
        return Err(format!(
            "bench cluster: --files must be at least 20; {USAGE}"
        ));
    }
    Ok(o)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("v", DataType::Int64, false),
        Field::new("w", DataType::Int64, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("payload", DataType::Utf8, false),
    ]))
}

/// A permutation of `0..n` that scatters neighbours: multiplication modulo `n` by a number
/// near `n * fraction` that is coprime with `n`.
fn permuted(i: u64, n: u64, fraction: f64) -> i64 {
    let mut p = ((n as f64 * fraction) as u64) | 1;
    while gcd(p, n) != 1 {
        p += 2;
    }
    ((i as u128 * p as u128) % n.max(1) as u128) as i64
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn batch(rows: u64) -> Result<RecordBatch, String> {
    let ids = StringArray::from_iter_values((0..rows).map(|i| format!("k{i:010}")));
    let v = Int64Array::from_iter_values((0..rows).map(|i| permuted(i, rows, 0.618_033_988_7)));
    let w = Int64Array::from_iter_values((0..rows).map(|i| permuted(i, rows, 0.414_213_562_3)));
    let ts = Int64Array::from_iter_values((0..rows).map(|_| 1));
    let payload = StringArray::from_iter_values((0..rows).map(|i| format!("payload-{i:09}-xyz")));
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(ids),
            Arc::new(v),
            Arc::new(w),
            Arc::new(ts),
            Arc::new(payload),
        ],
    )
    .map_err(|e| format!("bench cluster: building the batch: {e}"))
}

/// Writes the table of `files` files of `rows_per_file` rows and its column stats.
fn build(rt: &Runtime, dir: &Path, files: u64, rows_per_file: u64) -> Result<(), String> {
    let rows = files * rows_per_file;
    let input = batch(rows)?;
    let bytes_per_row = (input.get_array_memory_size() as u64 / rows.max(1)).max(1);
    let storage = super::local(dir)?;
    let options = CreateOptions {
        name: "cluster_bench".to_string(),
        table_type: TableType::CopyOnWrite,
        record_key_fields: vec!["id".to_string()],
        partition_fields: Vec::new(),
        hive_style_partitioning: false,
        ordering_field: Some("ts".to_string()),
        merge_mode: None,
        schema: schema(),
        metadata_table: true,
        table_version: Default::default(),
        base_format: Default::default(),
    };
    rt.block_on(async {
        let table = Table::create(storage.clone(), options)
            .await
            .map_err(|e| format!("bench cluster: creating the table: {e}"))?
            .with_write_options(WriteOptions {
                max_file_size: bytes_per_row * rows_per_file,
                small_file_limit: 0,
                ..WriteOptions::default()
            });
        table
            .write(WriteOperation::BulkInsert, vec![input])
            .await
            .map_err(|e| format!("bench cluster: bulk insert: {e}"))?;
        table
            .create_stats_indexes(true, false)
            .await
            .map_err(|e| format!("bench cluster: creating the stats: {e}"))?;
        Ok(())
    })
}

/// `(files read, files)` of a plan of the 1% range of `v` with data skipping.
fn range_query(
    rt: &Runtime,
    storage: Arc<dyn Storage>,
    rows: u64,
) -> Result<(usize, usize), String> {
    let lo = rows / 3;
    let hi = lo + rows / 100;
    rt.block_on(async {
        arbor_table::read::cache::clear();
        let reader = TableReader::open(storage)
            .await
            .map_err(|e| e.to_string())?;
        let all = reader
            .plan(&ReadOptions::new())
            .await
            .map_err(|e| e.to_string())?
            .file_slices()
            .count();
        let filters = vec![
            PartitionFilter::new("v", FilterOp::Ge, lo.to_string()),
            PartitionFilter::new("v", FilterOp::Lt, hi.to_string()),
        ];
        let plan = reader
            .plan(&ReadOptions::new().partition_filters(filters))
            .await
            .map_err(|e| e.to_string())?;
        let read = plan.file_slices().count();
        let batches: Vec<RecordBatch> = futures::TryStreamExt::try_collect(reader.execute(plan))
            .await
            .map_err(|e| e.to_string())?;
        let got: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if got as u64 != hi - lo {
            return Err(format!(
                "bench cluster: the range query returned {got} rows, expected {}",
                hi - lo
            ));
        }
        Ok((read, all))
    })
}

/// The base files of the table directory (data files outside `.hoodie`).
fn base_files(dir: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| format!("bench cluster: {e}"))? {
        let p = e.map_err(|e| format!("bench cluster: {e}"))?.path();
        if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// arrow-rs alone: read every base file, write the rows back into `outputs` files.
fn arrow_rewrite(dir: &Path, out: &Path, outputs: usize) -> Result<f64, String> {
    let files = base_files(dir)?;
    std::fs::create_dir_all(out).map_err(|e| format!("bench cluster: {e}"))?;
    let start = Instant::now();
    let mut batches = Vec::new();
    let mut rows = 0usize;
    for f in &files {
        let file = std::fs::File::open(f).map_err(|e| format!("bench cluster: {e}"))?;
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.build())
            .map_err(|e| format!("bench cluster: reading {}: {e}", f.display()))?;
        for b in reader {
            let b = b.map_err(|e| format!("bench cluster: {e}"))?;
            rows += b.num_rows();
            batches.push(b);
        }
    }
    let per_file = rows.div_ceil(outputs.max(1)).max(1);
    let schema = batches
        .first()
        .map(|b| b.schema())
        .ok_or("bench cluster: no rows")?;
    let all = arrow::compute::concat_batches(&schema, &batches)
        .map_err(|e| format!("bench cluster: {e}"))?;
    let mut offset = 0;
    let mut n = 0;
    while offset < all.num_rows() {
        let len = per_file.min(all.num_rows() - offset);
        let file = std::fs::File::create(out.join(format!("f{n}.parquet")))
            .map_err(|e| format!("bench cluster: {e}"))?;
        // Snappy, as arbor (and Hudi) write base files.
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .build();
        let mut w = parquet::arrow::ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|e| format!("bench cluster: {e}"))?;
        w.write(&all.slice(offset, len))
            .map_err(|e| format!("bench cluster: {e}"))?;
        w.close().map_err(|e| format!("bench cluster: {e}"))?;
        offset += len;
        n += 1;
    }
    Ok(start.elapsed().as_secs_f64())
}

fn table_bytes(dir: &Path) -> Result<u64, String> {
    let mut total = 0;
    for f in base_files(dir)? {
        total += std::fs::metadata(&f)
            .map_err(|e| format!("bench cluster: {e}"))?
            .len();
    }
    Ok(total)
}

/// Clusters the table at `dir` in this process; returns (seconds, outcome).
fn cluster_here(
    rt: &Runtime,
    dir: &Path,
    options: &ClusterOptions,
) -> Result<(f64, ClusterOutcome), String> {
    arbor_table::read::cache::clear();
    let storage = super::local(dir)?;
    let start = Instant::now();
    let outcome = rt.block_on(async {
        let table = Table::open(storage)
            .await
            .map_err(|e| format!("bench cluster: opening: {e}"))?;
        table
            .cluster(options)
            .await
            .map_err(|e| format!("bench cluster: clustering: {e}"))
    })?;
    Ok((start.elapsed().as_secs_f64(), outcome))
}

/// The internal `--one` mode: one clustering, then `seconds=S peak_kib=K spilled=N` on stdout
/// (the peak resident set of this whole process, `VmHWM`).
fn run_one(one: &One, memory_mib: u64) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("bench cluster: runtime: {e}"))?;
    let options = ClusterOptions {
        sort_by: one.sort.clone(),
        layout: one
            .layout
            .parse::<Layout>()
            .map_err(|e| format!("bench cluster: {e}"))?,
        target_file_size: one.target,
        memory_budget: usize::try_from(memory_mib * 1024 * 1024).unwrap_or(usize::MAX),
        ..ClusterOptions::default()
    };
    let (secs, outcome) = cluster_here(&rt, &one.dir, &options)?;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let peak = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("0");
    let spilled: usize = outcome.groups.iter().map(|g| g.spilled_runs).sum();
    println!("seconds={secs} peak_kib={peak} spilled={spilled}");
    Ok(())
}

/// Clusters the table at `dir` in a child process (this xtask with `--one`); returns
/// (seconds of the clustering, peak resident bytes of the child, runs spilled).
fn cluster(
    dir: &Path,
    sort: &[&str],
    layout: Layout,
    target: u64,
    memory_mib: u64,
    env: &[(&str, &str)],
) -> Result<(f64, Option<u64>, usize), String> {
    let exe = std::env::current_exe().map_err(|e| format!("bench cluster: {e}"))?;
    let out = std::process::Command::new(exe)
        .envs(env.iter().copied())
        .args([
            "bench",
            "cluster",
            "--memory",
            &memory_mib.to_string(),
            "--sort",
        ])
        .arg(sort.join(","))
        .args([
            "--layout",
            layout.name(),
            "--target",
            &target.to_string(),
            "--one",
        ])
        .arg(dir)
        .output()
        .map_err(|e| format!("bench cluster: running the child: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "bench cluster: the child failed: {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let field = |k: &str| -> Option<String> {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")).map(str::to_string))
    };
    let secs = field("seconds")
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or_else(|| format!("bench cluster: the child printed {text:?}"))?;
    let peak = field("peak_kib")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|k| *k > 0)
        .map(|k| k * 1024);
    let spilled = field("spilled").and_then(|v| v.parse().ok()).unwrap_or(0);
    Ok((secs, peak, spilled))
}

fn mib(b: Option<u64>) -> String {
    b.map_or("n/a".to_string(), |b| {
        format!("{:.0}", b as f64 / (1024.0 * 1024.0))
    })
}

/// Runs `cargo xtask bench cluster ...` (as a release build).
pub fn run(args: &[String]) -> Result<(), String> {
    let o = parse_args(args)?;
    if cfg!(debug_assertions) {
        return super::run_release(args);
    }
    if let Some(one) = &o.one {
        return run_one(one, o.memory_mib);
    }
    let super::BenchStart {
        work,
        _temp,
        rt,
        machine,
        load,
        started,
    } = super::start("cluster", o.dir.as_deref())?;
    let template = work.join("template");
    let rows = o.files * o.rows_per_file;
    let t0 = Instant::now();
    build(&rt, &template, o.files, o.rows_per_file)?;
    eprintln!(
        "bench cluster: built {rows} rows in {:.0} s",
        t0.elapsed().as_secs_f64()
    );
    let bytes = table_bytes(&template)?;
    let outputs = (o.files / 10).max(2);
    let target = bytes.div_ceil(outputs).max(1);
    let (before_read, before_all) = range_query(&rt, super::local(&template)?, rows)?;
    let baseline = arrow_rewrite(&template, &work.join("arrow-out"), outputs as usize)?;
    let cases: [(&str, &[&str], Layout); 4] = [
        ("linear v", &["v"], Layout::Linear),
        ("z-order v", &["v"], Layout::ZOrder),
        ("hilbert v", &["v"], Layout::Hilbert),
        ("z-order v,w", &["v", "w"], Layout::ZOrder),
    ];
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    for (name, cols, layout) in cases {
        let dir = work.join(name.replace([' ', ','], "_"));
        super::copy_dir(&template, &dir)?;
        let (secs, peak, spilled) = cluster(&dir, cols, layout, target, o.memory_mib, &[])?;
        let (read, all) = range_query(&rt, super::local(&dir)?, rows)?;
        let share = 100.0 * read as f64 / all.max(1) as f64;
        if cols == ["v"] && share > 5.0 {
            failures.push(format!(
                "{name}: the 1% range reads {share:.1}% of the files"
            ));
        }
        lines.push(format!(
            "| {name} | {read} of {all} ({share:.1}%) | {secs:.2} | {:.2}x | {} | {spilled} |",
            secs / baseline,
            mib(peak)
        ));
        eprintln!("bench cluster: {name}: {secs:.2} s");
    }
    // The same clustering on a table `scale` times larger: peak memory should not follow.
    let big = work.join("scaled");
    build(&rt, &big, o.files, o.rows_per_file * o.scale)?;
    let big_bytes = table_bytes(&big)?;
    let big_baseline = arrow_rewrite(
        &big,
        &work.join("arrow-out-scaled"),
        big_bytes.div_ceil(target) as usize,
    )?;
    // Live memory apart from glibc's per-thread heaps: both sizes again with fewer of them.
    let arenas = [("MALLOC_ARENA_MAX", "2")];
    let peak_with_fewer_heaps = |table: &Path, name: &str| -> Result<Option<u64>, String> {
        let copy = work.join(name);
        super::copy_dir(table, &copy)?;
        let (_, peak, _) = cluster(&copy, &["v"], Layout::ZOrder, target, o.memory_mib, &arenas)?;
        Ok(peak)
    };
    let small_peak_arenas = peak_with_fewer_heaps(&template, "arenas-1x")?;
    let big_peak_arenas = peak_with_fewer_heaps(&big, "arenas-scaled")?;
    let (big_secs, big_peak, big_spilled) =
        cluster(&big, &["v"], Layout::ZOrder, target, o.memory_mib, &[])?;
    println!();
    println!("machine: {}", machine.describe());
    println!("load average (1, 5, 15 min) at the start: {load}");
    println!(
        "table: copy-on-write, non-partitioned, column stats; {rows} rows in {before_all} base \
         files ({:.1} MiB), v and w random permutations; target file size {:.2} MiB; sort \
         memory budget {} MiB; whole bench {:.0} s",
        bytes as f64 / 1048576.0,
        target as f64 / 1048576.0,
        o.memory_mib,
        started.elapsed().as_secs_f64()
    );
    println!(
        "before clustering the 1% range of v reads {before_read} of {before_all} files; \
         arrow-rs read + rewrite of the same files (baseline): {baseline:.2} s"
    );
    println!();
    println!("| clustering | files the 1% range of v reads | seconds | / arrow-rs rewrite | peak MiB | sorted runs spilled |");
    println!("|---|---:|---:|---:|---:|---:|");
    for l in &lines {
        println!("{l}");
    }
    println!();
    println!(
        "{}x the rows ({} rows, {:.1} MiB), z-order v: {big_secs:.2} s ({:.2}x its arrow-rs \
         rewrite of {big_baseline:.2} s), peak {} MiB, {big_spilled} runs spilled",
        o.scale,
        rows * o.scale,
        big_bytes as f64 / 1048576.0,
        big_secs / big_baseline,
        mib(big_peak)
    );
    println!(
        "z-order v with MALLOC_ARENA_MAX=2 (glibc keeps two heaps, not one per thread): peak \
         {} MiB at 1x the rows, {} MiB at {}x",
        mib(small_peak_arenas),
        mib(big_peak_arenas),
        o.scale
    );
    if !failures.is_empty() {
        return Err(format!("bench cluster: {}", failures.join("; ")));
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
    fn test_parse_args_defaults_and_refusals() {
        let o = parse_args(&args(&["cluster"])).unwrap();
        assert_eq!(
            (o.files, o.rows_per_file, o.scale, o.memory_mib),
            (1000, 1000, 4, 64)
        );
        let o = parse_args(&args(&["cluster", "--files", "200", "--scale", "2"])).unwrap();
        assert_eq!((o.files, o.scale), (200, 2));
        assert!(parse_args(&args(&["cluster", "--files", "0"])).is_err());
        assert!(parse_args(&args(&["cluster", "--files", "10"])).is_err());
        assert!(parse_args(&args(&["cluster", "--nope"])).is_err());
        let o = parse_args(&args(&[
            "cluster", "--one", "/t", "--sort", "v,w", "--layout", "hilbert", "--target", "9",
        ]))
        .unwrap();
        let one = o.one.unwrap();
        assert_eq!(
            (one.sort.len(), one.layout.as_str(), one.target),
            (2, "hilbert", 9)
        );
    }

    #[test]
    fn test_permuted_is_a_permutation() {
        let n = 1000;
        let mut seen: Vec<i64> = (0..n).map(|i| permuted(i, n, 0.618_033_988_7)).collect();
        seen.sort();
        assert_eq!(seen, (0..n as i64).collect::<Vec<_>>());
    }
}
