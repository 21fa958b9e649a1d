//! `cargo xtask bench rss`: whole-process time and peak memory of `arbor read TABLE --format
//! parquet --output F` against a Python process that reads the same table with hudi-rs 0.5.0
//! and writes the same rows with pyarrow (`peer_read_write.py`: sorted by partition path then
//! record key, data columns only, as the CLI writes them).
//!
//! Two tables of `--rows` rows (default 2M) of the ten columns of [`super::data`] in ten
//! partitions are written as the data-path bench writes them: a copy-on-write table (bulk
//! insert) and a merge-on-read table (bulk insert, then an upsert of 10% of the keys into log
//! files). Each process runs `--runs` times (default 3), interleaved, under `/usr/bin/time -v`;
//! the medians of its wall-clock time and of its "Maximum resident set size" are reported, with
//! the ratios arbor / peer. Every output file is checked: its row count and the rows whose
//! ordering value marks an update must be the table's; a mismatch fails the bench.
//!
//! Usage: `cargo xtask bench rss [--rows 2000000] [--runs 3] [--arbor PATH] [--no-peer]
//! [--dir DIR]`. The arbor binary is `--arbor`, else `arbor` next to the running xtask (build
//! it with `cargo build --release -p arbor-cli` into the same target directory). The peer
//! Python is `$ARBOR_PEER_PYTHON`, else what `scripts/peer.sh` prints.

use std::path::{Path, PathBuf};
use std::process::Command;

use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;
use arrow::array::AsArray;
use arrow::datatypes::Int64Type;

use super::report::median;
use super::{data, peer, start, timed_write};

const USAGE: &str = "usage: cargo xtask bench rss [--rows N] [--runs N] [--arbor PATH] \
                     [--no-peer] [--dir DIR]";

/// The peer script, run with `python -c`.
const SCRIPT: &str = include_str!("peer_read_write.py");

#[derive(Debug, Clone, PartialEq)]
struct Options {
    rows: u64,
    runs: usize,
    arbor: Option<PathBuf>,
    peer: bool,
    dir: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        rows: 2_000_000,
        runs: 3,
        arbor: None,
        peer: true,
        dir: None,
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
                o.rows = value()?
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("--rows wants a positive number\n{USAGE}"))?
            }
            "--runs" => {
                o.runs = value()?
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("--runs wants a positive number\n{USAGE}"))?
            }
            "--arbor" => o.arbor = Some(PathBuf::from(value()?)),
            "--dir" => o.dir = Some(PathBuf::from(value()?)),
            "--no-peer" => o.peer = false,
            _ => return Err(format!("unknown argument {a}\n{USAGE}")),
        }
    }
    Ok(o)
}

/// One measured process: wall-clock seconds and peak resident set size in KiB.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Measured {
    seconds: f64,
    max_rss_kib: u64,
}

/// Parses `/usr/bin/time -v`'s report.
fn parse_time_report(text: &str) -> Result<Measured, String> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name).map(str::trim))
            .ok_or_else(|| format!("no {name:?} in the /usr/bin/time report"))
    };
    let rss = field("Maximum resident set size (kbytes):")?
        .parse::<u64>()
        .map_err(|e| format!("maximum resident set size: {e}"))?;
    let wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss):")?;
    let mut seconds = 0.0;
    for part in wall.split(':') {
        let v: f64 = part
            .parse()
            .map_err(|e| format!("elapsed time {wall:?}: {e}"))?;
        seconds = seconds * 60.0 + v;
    }
    Ok(Measured {
        seconds,
        max_rss_kib: rss,
    })
}

/// Runs `program args` under `/usr/bin/time -v`.
fn measure(program: &Path, args: &[&str]) -> Result<Measured, String> {
    let shown = format!("{} {}", program.display(), args.join(" "));
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run /usr/bin/time -v {shown}: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "{shown} failed with {}: {}",
            out.status,
            stderr.trim()
        ));
    }
    parse_time_report(&stderr).map_err(|e| format!("{shown}: {e}"))
}

/// Rows of a parquet file and rows whose `ts` marks an update.
fn check_output(path: &Path) -> Result<(u64, u64), String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .build()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let (mut rows, mut updated) = (0u64, 0u64);
    for b in reader {
        let b = b.map_err(|e| format!("{}: {e}", path.display()))?;
        rows += b.num_rows() as u64;
        let ts = b
            .column_by_name(data::ORDERING)
            .and_then(|c| c.as_primitive_opt::<Int64Type>())
            .ok_or_else(|| format!("{}: no long ts column", path.display()))?;
        updated += ts
            .iter()
            .flatten()
            .filter(|&t| t >= data::UPDATE_TS)
            .count() as u64;
    }
    Ok((rows, updated))
}

/// The medians of one process's runs.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Row {
    seconds: f64,
    mib: f64,
}

fn summarize(runs: &[Measured]) -> Result<Row, String> {
    let seconds: Vec<f64> = runs.iter().map(|m| m.seconds).collect();
    let mib: Vec<f64> = runs.iter().map(|m| m.max_rss_kib as f64 / 1024.0).collect();
    Ok(Row {
        seconds: median(&seconds).ok_or("bench rss: no runs")?,
        mib: median(&mib).ok_or("bench rss: no runs")?,
    })
}

/// Runs the bench.
pub fn run(args: &[String]) -> Result<(), String> {
    let options = parse_args(args)?;
    if cfg!(debug_assertions) {
        if options.arbor.is_none() {
            eprintln!("bench rss: building the release arbor CLI");
            crate::run(Command::new("cargo").args(["build", "--release", "-p", "arbor-cli"]))?;
        }
        return super::run_release(args);
    }
    let arbor = match &options.arbor {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| format!("bench rss: {e}"))?
            .with_file_name("arbor"),
    };
    if !arbor.is_file() {
        return Err(format!(
            "bench rss: no arbor binary at {} (cargo build --release -p arbor-cli, or --arbor PATH)",
            arbor.display()
        ));
    }
    let python = if options.peer {
        Some(peer::python()?)
    } else {
        None
    };
    let b = start("rss", options.dir.as_deref())?;
    let rows = options.rows;
    let updated_rows = data::update_count(rows);
    eprintln!("bench rss: {rows} rows: writing the COW and MOR tables");
    let inserts = data::inserts(rows)?;
    let input_mib = inserts
        .iter()
        .map(|b| b.get_array_memory_size() as f64)
        .sum::<f64>()
        / (1024.0 * 1024.0);
    let cow = b.work.join("cow");
    timed_write(
        &b.rt,
        &cow,
        None,
        TableType::CopyOnWrite,
        WriteOperation::BulkInsert,
        &inserts,
        (rows, 0),
    )?;
    let mor = b.work.join("mor");
    let (_, table) = timed_write(
        &b.rt,
        &mor,
        None,
        TableType::MergeOnRead,
        WriteOperation::BulkInsert,
        &inserts,
        (rows, 0),
    )?;
    drop(inserts);
    let updates = data::updates(rows)?;
    timed_write(
        &b.rt,
        &mor,
        Some(table),
        TableType::MergeOnRead,
        WriteOperation::Upsert,
        &updates,
        (0, updated_rows),
    )?;
    drop(updates);

    let mut lines = Vec::new();
    for (name, dir, expect) in [
        ("COW", &cow, (rows, 0)),
        ("MOR (10% in logs)", &mor, (rows, updated_rows)),
    ] {
        let table = dir.to_string_lossy().to_string();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for run in 0..options.runs {
            eprintln!("bench rss: {name}: run {}/{}", run + 1, options.runs);
            let out = b.work.join("arbor.parquet");
            let out_s = out.to_string_lossy().to_string();
            ours.push(measure(
                &arbor,
                &["read", &table, "--format", "parquet", "--output", &out_s],
            )?);
            let got = check_output(&out)?;
            if got != expect {
                return Err(format!("bench rss: arbor read {name} wrote {got:?} rows (updated), expected {expect:?}"));
            }
            std::fs::remove_file(&out).map_err(|e| format!("{out_s}: {e}"))?;
            if let Some(py) = &python {
                let out = b.work.join("peer.parquet");
                let out_s = out.to_string_lossy().to_string();
                theirs.push(measure(py, &["-c", SCRIPT, &table, &out_s])?);
                let got = check_output(&out)?;
                if got != expect {
                    return Err(format!("bench rss: hudi-rs + pyarrow {name} wrote {got:?} rows (updated), expected {expect:?}"));
                }
                std::fs::remove_file(&out).map_err(|e| format!("{out_s}: {e}"))?;
            }
        }
        let a = summarize(&ours)?;
        let line = match summarize(&theirs) {
            Ok(p) => format!(
                "| {name} | {:.2} s | {:.0} MiB | {:.2} s | {:.0} MiB | {:.2}x | {:.2}x |",
                a.seconds,
                a.mib,
                p.seconds,
                p.mib,
                a.seconds / p.seconds,
                a.mib / p.mib
            ),
            Err(_) => format!(
                "| {name} | {:.2} s | {:.0} MiB | - | - | - | - |",
                a.seconds, a.mib
            ),
        };
        lines.push(line);
    }
    println!();
    println!("machine: {}", b.machine.describe());
    println!("load average (1, 5, 15 min) at the start: {}", b.load);
    println!(
        "{rows} rows x 10 columns ({input_mib:.0} MiB in Arrow), 10 partitions; medians of {} runs; whole bench {:.0} s",
        options.runs,
        b.started.elapsed().as_secs_f64()
    );
    println!();
    println!("| table | arbor read --format parquet | peak RSS | hudi-rs + pyarrow | peak RSS | time ratio | RSS ratio |");
    println!("|---|---|---|---|---|---|---|");
    for l in lines {
        println!("{l}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse_time_report_reads_rss_and_wall_clock() {
        let text = "\tCommand being timed: \"arbor read\"\n\
                    \tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02.50\n\
                    \tMaximum resident set size (kbytes): 650240\n";
        assert_eq!(
            parse_time_report(text),
            Ok(Measured {
                seconds: 62.5,
                max_rss_kib: 650_240
            })
        );
        assert!(parse_time_report("nothing").is_err());
    }

    #[test]
    fn test_parse_args_defaults_and_bad_input() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let o = parse_args(&args(&["rss"])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((o.rows, o.runs, o.peer), (2_000_000, 3, true));
        let o = parse_args(&args(&["rss", "--rows", "1000", "--no-peer"]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((o.rows, o.peer), (1000, false));
        assert!(parse_args(&args(&["rss", "--rows", "0"])).is_err());
        assert!(parse_args(&args(&["rss", "--bogus"])).is_err());
    }
}
