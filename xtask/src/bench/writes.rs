//! `cargo xtask bench writes`: writes into an existing table with many partitions, as whole
//! processes of the release CLI under `/usr/bin/time -v` (time and peak RSS).
//!
//! Input: parquet files of the ten columns of [`super::data`] spread over `--partitions`
//! partitions (default 60), one per size of `--rows` (default 2M and 20M), written batch by
//! batch. Measured, `--runs` times each (default 1), interleaved:
//! - the baseline: a bulk insert of the smallest size creating a copy-on-write table (the
//!   in-memory path, files encoded on every core);
//! - for each size, a bulk insert into an existing table of the same partitions (created
//!   beforehand with one row in each; not measured): the streamed path, which holds the open
//!   files of every partition within `WriteOptions::stream_memory`;
//! - with `--upserts` (the default when a size is at least 20M): on the largest table, an
//!   upsert of a tenth of its keys and a delete of a twentieth.
//!
//! Every write's `--json` report is checked (rows inserted, updated, deleted); a mismatch
//! fails the bench. Reported: medians of time and peak RSS, the streamed write against the
//! baseline, each size's peak against the smallest's, and the files each write made.
//!
//! Usage: `cargo xtask bench writes [--rows 2000000,20000000] [--partitions 60] [--runs 1]
//! [--no-upserts] [--arbor PATH] [--dir DIR]`.

use std::path::{Path, PathBuf};

use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use super::report::median;
use super::rss::{measure_output, Measured};
use super::{data, start};

const USAGE: &str = "usage: cargo xtask bench writes [--rows N,N,...] [--partitions N] \
                     [--runs N] [--no-upserts] [--arbor PATH] [--dir DIR]";

/// Keys of the seed rows start here (far above any input key).
const SEED_KEYS: u64 = 1_000_000_000_000;

#[derive(Debug, Clone, PartialEq)]
struct Options {
    rows: Vec<u64>,
    partitions: u64,
    runs: usize,
    upserts: bool,
    arbor: Option<PathBuf>,
    dir: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        rows: vec![2_000_000, 20_000_000],
        partitions: 60,
        runs: 1,
        upserts: true,
        arbor: None,
        dir: None,
    };
    let number = |name: &str, v: &str| {
        v.trim()
            .replace('_', "")
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{name} wants positive numbers, not {v}\n{USAGE}"))
    };
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--rows" => {
                let mut rows = value()?
                    .split(',')
                    .map(|v| number("--rows", v))
                    .collect::<Result<Vec<_>, _>>()?;
                rows.sort_unstable();
                rows.dedup();
                o.rows = rows;
            }
            "--partitions" => o.partitions = number("--partitions", &value()?)?,
            "--runs" => {
                o.runs = usize::try_from(number("--runs", &value()?)?).unwrap_or(usize::MAX)
            }
            "--no-upserts" => o.upserts = false,
            "--arbor" => o.arbor = Some(PathBuf::from(value()?)),
            "--dir" => o.dir = Some(PathBuf::from(value()?)),
            _ => return Err(format!("unknown argument {a}\n{USAGE}")),
        }
    }
    Ok(o)
}

/// Writes the rows with key numbers `keys` (version `version`) over `regions` partitions to
/// the parquet file `path`, a batch at a time.
fn write_input(
    path: &Path,
    keys: impl Iterator<Item = u64>,
    version: u64,
    regions: u64,
) -> Result<u64, String> {
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut w = ArrowWriter::try_new(file, data::schema(), Some(props))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut chunk = Vec::with_capacity(data::BATCH_ROWS as usize);
    let mut rows = 0u64;
    let flush = |chunk: &mut Vec<u64>, w: &mut ArrowWriter<std::fs::File>| {
        if chunk.is_empty() {
            return Ok::<_, String>(());
        }
        let batch = data::batch_in(chunk, version, regions)?;
        w.write(&batch)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        chunk.clear();
        Ok(())
    };
    for k in keys {
        chunk.push(k);
        rows += 1;
        if chunk.len() == data::BATCH_ROWS as usize {
            flush(&mut chunk, &mut w)?;
        }
    }
    flush(&mut chunk, &mut w)?;
    w.close().map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(rows)
}

/// Seed keys: the first keys from [`SEED_KEYS`] that give every one of `regions` partitions
/// one row.
fn seed_keys(regions: u64) -> Vec<u64> {
    let mut seen = std::collections::BTreeSet::new();
    let mut keys = Vec::new();
    let mut n = SEED_KEYS;
    while (seen.len() as u64) < regions && n < SEED_KEYS + regions * 1_000 {
        if seen.insert(data::region_in(n, regions)) {
            keys.push(n);
        }
        n += 1;
    }
    keys
}

/// One measured write and what its report says.
#[derive(Debug, Clone, PartialEq)]
struct Write {
    measured: Measured,
    files: u64,
}

/// Runs `arbor write TABLE INPUT --json ARGS...` and checks the report's counts.
fn write(
    bin: &Path,
    table: &Path,
    input: &Path,
    extra: &[&str],
    expect: (&str, u64),
) -> Result<Write, String> {
    let table = table.to_string_lossy().to_string();
    let input = input.to_string_lossy().to_string();
    let mut args = vec!["write", &table, &input, "--json"];
    args.extend_from_slice(extra);
    let (measured, stdout) = measure_output(bin, &args)?;
    let report: serde_json::Value = serde_json::from_str(stdout.trim())
        .map_err(|e| format!("bench writes: arbor {args:?} printed {stdout}: {e}"))?;
    let (field, want) = expect;
    let got = report.get(field).and_then(serde_json::Value::as_u64);
    if got != Some(want) {
        return Err(format!(
            "bench writes: arbor {args:?} reports {field} = {got:?}, expected {want}: {stdout}"
        ));
    }
    let files = report
        .get("files_written")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    Ok(Write { measured, files })
}

const CREATE: [&str; 10] = [
    "--type",
    "cow",
    "--key",
    data::KEY,
    "--partition-by",
    data::PARTITION,
    "--ordering",
    data::ORDERING,
    "--op",
    "bulk-insert",
];

fn summary(runs: &[Write]) -> (f64, f64, u64) {
    let secs: Vec<f64> = runs.iter().map(|w| w.measured.seconds).collect();
    let rss: Vec<f64> = runs
        .iter()
        .map(|w| w.measured.max_rss_kib as f64 / 1024.0)
        .collect();
    let files = runs.first().map_or(0, |w| w.files);
    (
        median(&secs).unwrap_or(0.0),
        median(&rss).unwrap_or(0.0),
        files,
    )
}

pub fn run(args: &[String]) -> Result<(), String> {
    let o = parse_args(args)?;
    let Some(bin) = super::release_cli("writes", o.arbor.as_deref(), args)? else {
        return Ok(());
    };
    let b = start("writes", o.dir.as_deref())?;
    let p = o.partitions;
    let seed = b.work.join("seed.parquet");
    let seeds = seed_keys(p);
    write_input(&seed, seeds.iter().copied(), 0, p)?;
    let mut inputs = Vec::new();
    for &rows in &o.rows {
        let path = b.work.join(format!("insert-{rows}.parquet"));
        eprintln!("bench writes: writing {}", path.display());
        write_input(&path, 0..rows, 0, p)?;
        inputs.push((rows, path));
    }
    let smallest = inputs.first().cloned().ok_or("bench writes: no --rows")?;
    let mut baseline = Vec::new();
    let mut streamed: Vec<Vec<Write>> = vec![Vec::new(); inputs.len()];
    let mut tables = Vec::new();
    for run in 0..o.runs {
        let table = b.work.join(format!("created-{run}"));
        eprintln!(
            "bench writes: run {run}: bulk insert creating a table ({} rows)",
            smallest.0
        );
        baseline.push(write(
            &bin,
            &table,
            &smallest.1,
            &CREATE,
            ("inserted", smallest.0),
        )?);
        let _ = std::fs::remove_dir_all(&table);
        for (i, (rows, input)) in inputs.iter().enumerate() {
            let table = b.work.join(format!("existing-{rows}-{run}"));
            write(
                &bin,
                &table,
                &seed,
                &CREATE,
                ("inserted", seeds.len() as u64),
            )?;
            eprintln!("bench writes: run {run}: bulk insert of {rows} rows into an existing table");
            let w = write(
                &bin,
                &table,
                input,
                &["--op", "bulk-insert"],
                ("inserted", *rows),
            )?;
            if let Some(v) = streamed.get_mut(i) {
                v.push(w);
            }
            if run + 1 == o.runs && i + 1 == inputs.len() {
                tables.push((*rows, table));
            } else {
                let _ = std::fs::remove_dir_all(&table);
            }
        }
    }
    let mut upserts = Vec::new();
    if o.upserts {
        if let Some((rows, table)) = tables.pop() {
            let updates = rows / 10;
            let deletes = rows / 20;
            let up = b.work.join("upsert.parquet");
            let del = b.work.join("delete.parquet");
            write_input(&up, (0..updates).map(|n| n * 10 + 3), 1, p)?;
            write_input(&del, (0..deletes).map(|n| n * 20 + 7), 0, p)?;
            eprintln!("bench writes: upsert of {updates} rows into {rows}");
            let u = write(&bin, &table, &up, &["--op", "upsert"], ("updated", updates))?;
            eprintln!("bench writes: delete of {deletes} keys of {rows}");
            let d = write(
                &bin,
                &table,
                &del,
                &["--op", "delete"],
                ("deleted", deletes),
            )?;
            upserts.push((format!("upsert of {updates} rows into {rows}"), u));
            upserts.push((format!("delete of {deletes} keys of {rows}"), d));
        }
    }

    println!();
    println!("machine: {}", b.machine.describe());
    println!("load average (1, 5, 15 min) at the start: {}", b.load);
    println!(
        "input: 10 columns over {p} partitions; copy-on-write with the metadata table; {} run(s), medians; whole bench {:.0} s",
        o.runs,
        b.started.elapsed().as_secs_f64()
    );
    println!();
    println!("| write | time | peak RSS | files | time / baseline | peak / smallest streamed |");
    println!("|---|---:|---:|---:|---:|---:|");
    let (base_s, base_rss, base_files) = summary(&baseline);
    println!(
        "| baseline: bulk insert of {} rows creating the table (in memory) | {base_s:.2} s | {base_rss:.0} MiB | {base_files} | 1.00x | |",
        smallest.0
    );
    let first_rss = streamed.first().map(|r| summary(r).1).unwrap_or(1.0);
    for ((rows, _), runs) in inputs.iter().zip(&streamed) {
        let (s, rss, files) = summary(runs);
        println!(
            "| bulk insert of {rows} rows into the existing table (streamed) | {s:.2} s | {rss:.0} MiB | {files} | {:.2}x | {:.2}x |",
            s / base_s,
            rss / first_rss
        );
    }
    for (name, w) in &upserts {
        println!(
            "| {name} | {:.2} s | {:.0} MiB | {} | | |",
            w.measured.seconds,
            w.measured.max_rss_kib as f64 / 1024.0,
            w.files
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        std::iter::once("writes")
            .chain(a.iter().copied())
            .map(String::from)
            .collect()
    }

    #[test]
    fn test_parse_args_defaults_and_bad_input() {
        let o = parse_args(&args(&[])).unwrap();
        assert_eq!(
            (o.rows.clone(), o.partitions, o.runs, o.upserts),
            (vec![2_000_000, 20_000_000], 60, 1, true)
        );
        let o = parse_args(&args(&[
            "--rows",
            "20_000,1000",
            "--partitions",
            "7",
            "--no-upserts",
        ]))
        .unwrap();
        assert_eq!(
            (o.rows, o.partitions, o.upserts),
            (vec![1000, 20_000], 7, false)
        );
        assert!(parse_args(&args(&["--rows", "0"])).is_err());
        assert!(parse_args(&args(&["--partitions"])).is_err());
        assert!(parse_args(&args(&["--bogus"])).is_err());
    }

    #[test]
    fn test_seed_keys_cover_every_partition_once() {
        let keys = seed_keys(60);
        let regions: std::collections::BTreeSet<String> =
            keys.iter().map(|&n| data::region_in(n, 60)).collect();
        assert_eq!((keys.len(), regions.len()), (60, 60));
    }

    #[test]
    fn test_write_input_writes_every_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.parquet");
        assert_eq!(write_input(&path, 0..70_000, 0, 5).unwrap(), 70_000);
        let file = std::fs::File::open(&path).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 70_000);
    }
}
