//! `cargo xtask bench skipping`: data skipping by column stats (issue 13, item 3).
//!
//! A non-partitioned copy-on-write table with the metadata table is written locally by one
//! `BulkInsert` of `ROWS` rows whose value column `v` rises with the row number, cut into
//! about `--files` base files (default 1,000) by `max_file_size`; then
//! `Table::create_stats_indexes` builds its `column_stats` (Hudi keeps no partition stats
//! for a non-partitioned table). Then,
//! `--runs` times (default 5), a range predicate `v >= lo AND v < hi` matching 2% of the rows
//! is planned and read (`TableReader::open` + `read`) with data skipping (the stats prune
//! files) and with `ReadOptions::data_skipping(false)` (the baseline in the same run: every
//! file is read and filtered). Both reads must return exactly the 2% of rows; the bench fails
//! otherwise. The goal: the skipping read reads at most 5% of the files and runs at least
//! 10x faster than the baseline.
//!
//! Then `id IN (...)` with 10 and with 10,000 keys spread evenly over the table, with and
//! without data skipping: without it every file is read by both, so the ratio is the cost of
//! the list itself (issue 32: within 2x); with it the 10-key list reads at most 10 files and
//! the 10,000-key list nearly all.
//!
//! Usage: `cargo xtask bench skipping [--files N] [--rows-per-file N] [--runs N] [--dir DIR]`.

use std::sync::Arc;
use std::time::Instant;

use arbor_storage::Storage;
use arbor_table::read::{FilterOp, PartitionFilter, ReadOptions, TableReader};
use arbor_table::{CreateOptions, Table, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tokio::runtime::Runtime;

use super::report::median;

const USAGE: &str =
    "usage: cargo xtask bench skipping [--files N] [--rows-per-file N] [--runs N] [--dir DIR]";

#[derive(Debug, Clone, PartialEq)]
struct Options {
    files: u64,
    rows_per_file: u64,
    runs: usize,
    dir: Option<std::path::PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    if it.next().map(String::as_str) != Some("skipping") {
        return Err(USAGE.to_string());
    }
    let mut o = Options {
        files: 1_000,
        rows_per_file: 1_000,
        runs: 5,
        dir: None,
    };
    let positive = |name: &str, v: Option<&String>| -> Result<u64, String> {
        let v = v.ok_or_else(|| USAGE.to_string())?;
        v.replace('_', "")
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("bench skipping: {name} {v:?}: a positive number"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--files" => o.files = positive("--files", it.next())?,
            "--rows-per-file" => o.rows_per_file = positive("--rows-per-file", it.next())?,
            "--runs" => o.runs = positive("--runs", it.next())? as usize,
            "--dir" => {
                o.dir = Some(it.next().ok_or_else(|| USAGE.to_string())?.into());
            }
            other => {
                return Err(format!(
                    "bench skipping: unknown argument {other:?}\n{USAGE}"
                ))
            }
        }
    }
    Ok(o)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("v", DataType::Int64, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("payload", DataType::Utf8, false),
    ]))
}

fn batch(rows: u64) -> Result<RecordBatch, String> {
    let ids = StringArray::from_iter_values((0..rows).map(|i| format!("k{i:09}")));
    let v = Int64Array::from_iter_values((0..rows).map(|i| i as i64));
    let ts = Int64Array::from_iter_values((0..rows).map(|_| 1));
    let payload = StringArray::from_iter_values((0..rows).map(|i| format!("payload-{i:09}-xyz")));
    RecordBatch::try_new(
        schema(),
        vec![Arc::new(ids), Arc::new(v), Arc::new(ts), Arc::new(payload)],
    )
    .map_err(|e| format!("bench skipping: building the batch: {e}"))
}

/// Writes the table and its stats; returns (seconds, base files).
fn build(rt: &Runtime, storage: Arc<dyn Storage>, o: &Options) -> Result<(f64, usize), String> {
    let start = Instant::now();
    let rows = o.files * o.rows_per_file;
    let input = batch(rows)?;
    // The writer cuts files at max_file_size / (in-memory bytes per row of the input).
    let bytes_per_row = (input.get_array_memory_size() as u64 / rows.max(1)).max(1);
    let options = CreateOptions {
        name: "skipping_bench".to_string(),
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
    let table = rt
        .block_on(Table::create(storage.clone(), options))
        .map_err(|e| format!("bench skipping: creating the table: {e}"))?
        .with_write_options(WriteOptions {
            max_file_size: bytes_per_row * o.rows_per_file,
            small_file_limit: 0,
            ..WriteOptions::default()
        });
    rt.block_on(table.write(WriteOperation::BulkInsert, vec![input]))
        .map_err(|e| format!("bench skipping: bulk insert: {e}"))?;
    rt.block_on(table.create_stats_indexes(true, false))
        .map_err(|e| format!("bench skipping: creating the stats: {e}"))?;
    let files = rt.block_on(async {
        let reader = TableReader::open(storage.clone())
            .await
            .map_err(|e| e.to_string())?;
        let plan = reader
            .plan(&ReadOptions::new())
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(plan.file_slices().count())
    })?;
    Ok((start.elapsed().as_secs_f64(), files))
}

/// One timed open + plan + read; returns (seconds, rows, slices read).
fn timed_read(
    rt: &Runtime,
    storage: Arc<dyn Storage>,
    filters: &[PartitionFilter],
    skipping: bool,
) -> Result<(f64, usize, usize), String> {
    let start = Instant::now();
    let (rows, slices) = rt.block_on(async {
        let reader = TableReader::open(storage)
            .await
            .map_err(|e| e.to_string())?;
        let options = ReadOptions::new()
            .partition_filters(filters.to_vec())
            .data_skipping(skipping);
        let plan = reader.plan(&options).await.map_err(|e| e.to_string())?;
        let slices = plan.file_slices().count();
        let batches: Vec<RecordBatch> = futures::TryStreamExt::try_collect(reader.execute(plan))
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((batches.iter().map(RecordBatch::num_rows).sum(), slices))
    })?;
    Ok((start.elapsed().as_secs_f64(), rows, slices))
}

/// Runs `cargo xtask bench skipping ...` (as a release build).
pub fn run(args: &[String]) -> Result<(), String> {
    let o = parse_args(args)?;
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
    } = super::start("skipping", o.dir.as_deref())?;
    let dir = work.join("t");
    let (built, files) = build(&rt, super::local(&dir)?, &o)?;
    let rows = o.files * o.rows_per_file;
    let lo = rows / 2;
    let hi = lo + rows / 50;
    let want = (hi - lo) as usize;
    let filters = [
        PartitionFilter::new("v", FilterOp::Ge, lo.to_string()),
        PartitionFilter::new("v", FilterOp::Lt, hi.to_string()),
    ];
    let cache = arbor_table::read::cache::clear;
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut read_with, mut read_without) = (0, 0);
    for _ in 0..o.runs {
        for (skipping, times, read) in [
            (true, &mut with, &mut read_with),
            (false, &mut without, &mut read_without),
        ] {
            cache();
            let (s, got, slices) = timed_read(&rt, super::local(&dir)?, &filters, skipping)?;
            if got != want {
                return Err(format!(
                    "bench skipping: the read (skipping {skipping}) returned {got} rows, \
                     expected {want}"
                ));
            }
            times.push(s);
            *read = slices;
        }
    }
    let (w, wo) = (
        median(&with).unwrap_or(f64::NAN),
        median(&without).unwrap_or(f64::NAN),
    );
    println!();
    println!("machine: {}", machine.describe());
    println!("load average (1, 5, 15 min) at the start: {load}");
    println!(
        "table: copy-on-write, non-partitioned, {rows} rows in {files} base files, column \
         stats; written in {built:.0} s; median of {} runs (open + plan + read, \
         cache cleared); whole bench {:.0} s",
        o.runs,
        started.elapsed().as_secs_f64()
    );
    println!("predicate: v >= {lo} AND v < {hi} ({want} rows, 2%)");
    println!();
    println!("| read | files read | of files | seconds | baseline / this |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| data skipping (column stats) | {read_with} | {:.1}% | {w:.3} | {:.1}x |",
        100.0 * read_with as f64 / files.max(1) as f64,
        wo / w
    );
    println!(
        "| stats ignored (`data_skipping(false)`, baseline) | {read_without} | {:.1}% | {wo:.3} | 1.0x |",
        100.0 * read_without as f64 / files.max(1) as f64
    );
    in_lists(&rt, &dir, rows, o.runs)?;
    Ok(())
}

/// `id IN (...)` with 10 and with 10,000 keys spread evenly over the table, with data skipping
/// and without it (every file read: the cost of the list itself). Both must return exactly
/// their keys' rows.
fn in_lists(rt: &Runtime, dir: &std::path::Path, rows: u64, runs: usize) -> Result<(), String> {
    let keys = |n: u64| -> Vec<String> {
        let step = (rows / n).max(1);
        (0..n.min(rows))
            .map(|i| format!("k{:09}", i * step))
            .collect()
    };
    println!();
    println!("| `id IN (...)` | data skipping | files read | seconds | vs 10 keys |");
    println!("|---|---|---:|---:|---:|");
    for skipping in [true, false] {
        let mut base = f64::NAN;
        for n in [10_u64, 10_000] {
            let list = keys(n);
            let filters = [PartitionFilter::is_in("id", list.clone())];
            let mut times = Vec::new();
            let mut read = 0;
            for _ in 0..runs {
                arbor_table::read::cache::clear();
                let (s, got, slices) = timed_read(rt, super::local(dir)?, &filters, skipping)?;
                if got != list.len() {
                    return Err(format!(
                        "bench skipping: id IN ({n} keys, skipping {skipping}) returned {got} \
                         rows, expected {}",
                        list.len()
                    ));
                }
                times.push(s);
                read = slices;
            }
            let m = median(&times).unwrap_or(f64::NAN);
            if n == 10 {
                base = m;
            }
            println!(
                "| {n} keys | {} | {read} | {m:.3} | {:.2}x |",
                if skipping { "on" } else { "off" },
                m / base
            );
        }
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
    fn test_parse_args_defaults_and_options() {
        let o = parse_args(&args(&["skipping"])).unwrap();
        assert_eq!((o.files, o.rows_per_file, o.runs), (1_000, 1_000, 5));
        let o = parse_args(&args(&["skipping", "--files", "10", "--runs", "2"])).unwrap();
        assert_eq!((o.files, o.runs), (10, 2));
        for bad in [
            &["skipping", "--files", "0"][..],
            &["skipping", "--nope"],
            &["cache"],
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad:?}");
        }
    }
}
