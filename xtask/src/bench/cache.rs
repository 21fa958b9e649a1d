//! `cargo xtask bench cache`: what the process-wide table cache saves (issue 12, item 6).
//!
//! For each table shape (`PARTITIONS × FILES`, default 100 × 20 and 1,000 × 20, i.e. 2,000 and
//! 20,000 data files) a copy-on-write table with the metadata table is written locally: FILES
//! commits, each inserting one row into every partition with small-file packing off, so every
//! commit adds one base file per partition. Then, `--runs` times, for the FILES listing
//! (`ListingSource::Auto`, which uses the metadata table) and for directory listing
//! (`ListingSource::Storage`):
//! - the cache is cleared, then **first** = `TableReader::open_with` + `plan` of a full
//!   snapshot (every latest slice) on the unchanged table, which loads everything and fills
//!   the cache;
//! - **second** = the same open + plan again, on a new storage handle of the same location
//!   (what another handle of the process does): served from the cache after listing the
//!   timeline;
//! - **cold** = the same open + plan with `CacheMode::Bypass` (the baseline without cache, in
//!   the same run).
//!
//! Every plan is checked to hold exactly `PARTITIONS × FILES` slices, and the second open
//! must come from the cache; the bench fails otherwise. The ratio reported is median second /
//! median first; the goal (issue 12) is at most 0.2 for 20,000 files.
//!
//! Usage: `cargo xtask bench cache [--sizes 100x20,1000x20] [--runs 5] [--quick] [--dir DIR]`;
//! `--quick` is one shape of 1,000 × 20 and 3 runs.

use std::sync::Arc;
use std::time::Instant;

use arbor_storage::Storage;
use arbor_table::read::{cache, CacheMode, OpenOptions, ReadOptions, TableReader};
use arbor_table::{CreateOptions, ListingSource, Table, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tokio::runtime::Runtime;

use super::local;
use super::report::median;

const USAGE: &str =
    "usage: cargo xtask bench cache [--sizes PxF,PxF,...] [--runs N] [--quick] [--dir DIR]";

/// Bench options.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    shapes: Vec<(u32, u32)>,
    runs: usize,
    dir: Option<std::path::PathBuf>,
}

fn parse_shape(s: &str) -> Result<(u32, u32), String> {
    let (p, f) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("bench cache: shape {s:?} is not PARTITIONSxFILES"))?;
    let n = |v: &str| {
        v.trim()
            .replace('_', "")
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("bench cache: shape {s:?}: {v:?} is not a positive number"))
    };
    Ok((n(p)?, n(f)?))
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    if it.next().map(String::as_str) != Some("cache") {
        return Err(USAGE.to_string());
    }
    let mut options = Options {
        shapes: vec![(100, 20), (1_000, 20)],
        runs: 5,
        dir: None,
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--sizes" => {
                let v = it.next().ok_or_else(|| USAGE.to_string())?;
                options.shapes = v.split(',').map(parse_shape).collect::<Result<_, _>>()?;
            }
            "--runs" => {
                let v = it.next().ok_or_else(|| USAGE.to_string())?;
                options.runs = v
                    .parse::<usize>()
                    .ok()
                    .filter(|r| *r > 0)
                    .ok_or_else(|| format!("bench cache: --runs {v:?}: a positive number"))?;
            }
            "--quick" => {
                options.shapes = vec![(1_000, 20)];
                options.runs = 3;
            }
            "--dir" => {
                options.dir = Some(it.next().ok_or_else(|| USAGE.to_string())?.into());
            }
            other => return Err(format!("bench cache: unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(options)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("part", DataType::Utf8, false),
    ]))
}

/// Writes the bench table: `files` commits of one row per partition. Returns the seconds.
fn build(rt: &Runtime, storage: Arc<dyn Storage>, shape: (u32, u32)) -> Result<f64, String> {
    let (partitions, files) = shape;
    let start = Instant::now();
    let options = CreateOptions {
        name: "cache_bench".to_string(),
        table_type: TableType::CopyOnWrite,
        record_key_fields: vec!["id".to_string()],
        partition_fields: vec!["part".to_string()],
        hive_style_partitioning: false,
        ordering_field: Some("ts".to_string()),
        merge_mode: None,
        schema: schema(),
        metadata_table: true,
        table_version: Default::default(),
        base_format: Default::default(),
    };
    let table = rt
        .block_on(Table::create(storage.clone(), options))
        .map_err(|e| format!("bench cache: creating the table in {storage}: {e}"))?
        .with_write_options(WriteOptions {
            small_file_limit: 0,
            ..WriteOptions::default()
        });
    for commit in 0..files {
        let parts = 0..partitions;
        let keys =
            StringArray::from_iter_values(parts.clone().map(|p| format!("k{p:05}-{commit:04}")));
        let ts = Int64Array::from_iter_values(parts.clone().map(|_| i64::from(commit)));
        let part = StringArray::from_iter_values(parts.map(|p| format!("p{p:05}")));
        let batch =
            RecordBatch::try_new(schema(), vec![Arc::new(keys), Arc::new(ts), Arc::new(part)])
                .map_err(|e| format!("bench cache: building a batch: {e}"))?;
        rt.block_on(table.write(WriteOperation::Insert, vec![batch]))
            .map_err(|e| format!("bench cache: commit {commit} into {storage}: {e}"))?;
        eprintln!(
            "bench cache: {partitions} × {files}: commit {}/{files} ({:.1} s)",
            commit + 1,
            start.elapsed().as_secs_f64()
        );
    }
    Ok(start.elapsed().as_secs_f64())
}

/// One timed open + plan of a full snapshot; checks the slice count and where the state came
/// from (`expect_cached`).
fn open_and_plan(
    rt: &Runtime,
    storage: Arc<dyn Storage>,
    options: OpenOptions,
    expected_slices: usize,
    expect_cached: bool,
) -> Result<f64, String> {
    let start = Instant::now();
    let (slices, cached) = rt.block_on(async {
        let reader = TableReader::open_view_opts(storage, options)
            .await
            .map_err(|e| e.to_string())?;
        let plan = reader
            .plan(&ReadOptions::new())
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((plan.file_slices().count(), reader.is_from_cache()))
    })?;
    let seconds = start.elapsed().as_secs_f64();
    if slices != expected_slices {
        return Err(format!(
            "bench cache: planned {slices} slices, expected {expected_slices}"
        ));
    }
    if cached != expect_cached {
        return Err(format!(
            "bench cache: the open was {}served from the cache, expected the opposite",
            if cached { "" } else { "not " }
        ));
    }
    Ok(seconds)
}

/// What one shape and listing source measured (median seconds).
struct Row {
    shape: (u32, u32),
    source: &'static str,
    first: f64,
    second: f64,
    cold: f64,
}

/// Runs `cargo xtask bench cache ...` (as a release build).
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
    } = super::start("cache", options.dir.as_deref())?;
    let mut rows = Vec::new();
    let mut builds = Vec::new();
    for &shape in &options.shapes {
        let dir = work.join(format!("t{}x{}", shape.0, shape.1));
        let built = build(&rt, local(&dir)?, shape)?;
        builds.push(format!("{} × {}: {built:.0} s", shape.0, shape.1));
        let expected = shape.0 as usize * shape.1 as usize;
        for (source, name) in [
            (ListingSource::Auto, "FILES (metadata table)"),
            (ListingSource::Storage, "directory listing"),
        ] {
            let (mut first, mut second, mut cold): (Vec<f64>, Vec<f64>, Vec<f64>) =
                (Vec::new(), Vec::new(), Vec::new());
            let shared = OpenOptions::new().listing(source);
            for _ in 0..options.runs {
                cache::clear();
                first.push(open_and_plan(&rt, local(&dir)?, shared, expected, false)?);
                second.push(open_and_plan(&rt, local(&dir)?, shared, expected, true)?);
                let bypass = shared.cache(CacheMode::Bypass);
                cold.push(open_and_plan(&rt, local(&dir)?, bypass, expected, false)?);
            }
            rows.push(Row {
                shape,
                source: name,
                first: median(&first).unwrap_or(f64::NAN),
                second: median(&second).unwrap_or(f64::NAN),
                cold: median(&cold).unwrap_or(f64::NAN),
            });
        }
    }
    println!();
    println!("machine: {}", machine.describe());
    println!("load average (1, 5, 15 min) at the start: {load}");
    println!(
        "tables (copy-on-write, one base file per partition per commit) written in {}; \
         median of {} runs; whole bench {:.0} s",
        builds.join(", "),
        options.runs,
        started.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "| table (partitions × files) | data files | listing | first open + plan (fills the cache) | second open + plan | second / first | no cache (bypass) |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} × {} | {} | {} | {:.1} ms | {:.1} ms | {:.3}x | {:.1} ms |",
            r.shape.0,
            r.shape.1,
            r.shape.0 as usize * r.shape.1 as usize,
            r.source,
            r.first * 1e3,
            r.second * 1e3,
            r.second / r.first,
            r.cold * 1e3
        );
    }
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
    fn test_parse_args_defaults_quick_and_sizes() {
        let o = parse_args(&args(&["cache"])).unwrap();
        assert_eq!(o.shapes, vec![(100, 20), (1_000, 20)]);
        assert_eq!(o.runs, 5);
        let o = parse_args(&args(&["cache", "--quick"])).unwrap();
        assert_eq!((o.shapes, o.runs), (vec![(1_000, 20)], 3));
        let o = parse_args(&args(&["cache", "--sizes", "10x2,2_000x10", "--runs", "2"])).unwrap();
        assert_eq!((o.shapes, o.runs), (vec![(10, 2), (2_000, 10)], 2));
        for bad in [
            &["cache", "--sizes", "10"][..],
            &["cache", "--sizes", "0x2"],
            &["cache", "--runs", "0"],
            &["cache", "--nope"],
            &["mdt"],
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad:?}");
        }
    }
}
