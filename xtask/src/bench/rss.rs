//! `cargo xtask bench rss`: whole-process time and peak memory of `arbor read TABLE --format
//! parquet --output F` against a Python process that reads the same table with hudi-rs 0.5.0
//! and writes the same rows with pyarrow (`peer_read_write.py`: sorted by partition path then
//! record key, data columns only, as the CLI writes them).
//!
//! For each size of `--rows` (default 2M and 20M), two tables of that many rows of the ten
//! columns of [`super::data`] are written as the data-path bench writes them, in one partition
//! per 200,000 rows (at least ten; so a larger table has more partitions of the same size, as
//! tables grow): a copy-on-write table (bulk insert) and a merge-on-read table (bulk insert,
//! then an upsert of 10% of the keys, which lands in log files). Measured, each `--runs` times
//! (default 3), interleaved, under `/usr/bin/time -v`: arbor's snapshot of each table, arbor's
//! read of the MOR table's key column alone (`--columns id`), and, up to `--peer-rows` rows
//! (default 2M; the peer holds the whole table twice), the peer's snapshot. The medians of
//! wall-clock time and of "Maximum resident set size" are reported, with the ratios arbor /
//! peer, the one-column read against the full one, and each size's peak memory against the
//! smallest size's. Every output file is checked: its row count and the rows whose ordering
//! value marks an update must be the table's; a mismatch fails the bench.
//!
//! Usage: `cargo xtask bench rss [--rows 2000000,20000000] [--runs 3] [--peer-rows N]
//! [--arbor PATH] [--no-peer] [--dir DIR]`. The arbor binary is `--arbor`, else `arbor` next to
//! the running xtask (a debug xtask builds it with `cargo build --release -p arbor-cli`). The
//! peer Python is `$ARBOR_PEER_PYTHON`, else what `scripts/peer.sh` prints.

use std::path::{Path, PathBuf};
use std::process::Command;

use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;
use arrow::array::AsArray;
use arrow::datatypes::Int64Type;

use super::report::median;
use super::{data, peer, start, timed_write};

const USAGE: &str = "usage: cargo xtask bench rss [--rows N,N,...] [--runs N] \
                     [--peer-rows N] [--arbor PATH] [--no-peer] [--dir DIR]";

/// Rows per partition of the bench's tables.
const ROWS_PER_PARTITION: u64 = 200_000;

/// The peer script, run with `python -c`.
const SCRIPT: &str = include_str!("peer_read_write.py");

#[derive(Debug, Clone, PartialEq)]
struct Options {
    rows: Vec<u64>,
    runs: usize,
    peer_rows: u64,
    arbor: Option<PathBuf>,
    peer: bool,
    dir: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        rows: vec![2_000_000, 20_000_000],
        runs: 3,
        peer_rows: 2_000_000,
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
                    .split(',')
                    .map(|v| {
                        v.trim()
                            .replace('_', "")
                            .parse::<u64>()
                            .ok()
                            .filter(|n| *n > 0)
                    })
                    .collect::<Option<Vec<_>>>()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| format!("--rows wants positive numbers\n{USAGE}"))?
            }
            "--peer-rows" => {
                o.peer_rows = value()?
                    .replace('_', "")
                    .parse()
                    .map_err(|_| format!("--peer-rows wants a number\n{USAGE}"))?
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
/// A whole process's wall-clock time and peak resident memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Measured {
    pub(super) seconds: f64,
    pub(super) max_rss_kib: u64,
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
pub(super) fn measure(program: &Path, args: &[&str]) -> Result<Measured, String> {
    measure_output(program, args).map(|(m, _)| m)
}

/// [`measure`], with what the process printed on stdout.
pub(super) fn measure_output(program: &Path, args: &[&str]) -> Result<(Measured, String), String> {
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
    let measured = parse_time_report(&stderr).map_err(|e| format!("{shown}: {e}"))?;
    Ok((measured, String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// Rows of a parquet file and rows whose `ts` marks an update (0 without a `ts` column).
pub(super) fn check_output(path: &Path) -> Result<(u64, u64), String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .build()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let (mut rows, mut updated) = (0u64, 0u64);
    for b in reader {
        let b = b.map_err(|e| format!("{}: {e}", path.display()))?;
        rows += b.num_rows() as u64;
        let Some(ts) = b.column_by_name(data::ORDERING) else {
            continue;
        };
        let ts = ts
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| format!("{}: ts is not a long column", path.display()))?;
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
    let Some(arbor) = super::release_cli("rss", options.arbor.as_deref(), args)? else {
        return Ok(());
    };
    let python = if options.peer {
        Some(peer::python()?)
    } else {
        None
    };
    let b = start("rss", options.dir.as_deref())?;
    let mut lines = Vec::new();
    let mut summary = Vec::new();
    let mut smallest: Option<(u64, f64)> = None;
    let mut sizes = options.rows.clone();
    sizes.sort_unstable();
    for &rows in &sizes {
        let regions = (rows / ROWS_PER_PARTITION).max(data::REGIONS);
        let dir = b.work.join(format!("{rows}"));
        let python = python.as_ref().filter(|_| rows <= options.peer_rows);
        let measured = measure_size(&b, &dir, rows, regions, &arbor, python, options.runs)?;
        let (full, one) = (measured.mor_full, measured.mor_one_column);
        summary.push(format!(
            "{rows} rows, {regions} partitions: one-column MOR read {:.2} s = {:.2}x the full read's time, {:.2}x its peak RSS",
            one.seconds,
            one.seconds / full.seconds,
            one.mib / full.mib
        ));
        match smallest {
            None => smallest = Some((rows, full.mib)),
            Some((base_rows, base_mib)) => summary.push(format!(
                "MOR snapshot peak RSS at {rows} rows = {:.2}x that at {base_rows} rows",
                full.mib / base_mib
            )),
        }
        lines.extend(measured.lines);
        if options.dir.is_none() {
            // A 20M-row size takes gigabytes; the next size should not sit beside it.
            std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
    }
    println!();
    println!("machine: {}", b.machine.describe());
    println!("load average (1, 5, 15 min) at the start: {}", b.load);
    println!(
        "10 columns, one partition per {ROWS_PER_PARTITION} rows (at least 10); medians of {} runs; whole bench {:.0} s",
        options.runs,
        b.started.elapsed().as_secs_f64()
    );
    println!();
    println!("| rows | table | arbor read --format parquet | peak RSS | hudi-rs + pyarrow | peak RSS | time ratio | RSS ratio |");
    println!("|---|---|---|---|---|---|---|---|");
    for l in lines {
        println!("{l}");
    }
    println!();
    for l in summary {
        println!("- {l}");
    }
    Ok(())
}

/// What one table size measured: table lines, and arbor's full and one-column MOR reads.
struct SizeMeasured {
    lines: Vec<String>,
    mor_full: Row,
    mor_one_column: Row,
}

/// One measured read: its name, table, expected rows (all, updated), extra CLI arguments, and
/// whether the peer reads it too.
type Case<'a> = (&'a str, &'a PathBuf, (u64, u64), &'a [&'a str], bool);

/// Writes the two tables of `rows` rows in `regions` partitions under `dir` and measures the
/// reads.
fn measure_size(
    b: &super::BenchStart,
    dir: &Path,
    rows: u64,
    regions: u64,
    arbor: &Path,
    python: Option<&PathBuf>,
    runs: usize,
) -> Result<SizeMeasured, String> {
    let updated_rows = data::update_count(rows);
    eprintln!("bench rss: {rows} rows in {regions} partitions: writing the COW and MOR tables");
    let inserts = data::inserts_in(rows, regions)?;
    let input_mib = inserts
        .iter()
        .map(|b| b.get_array_memory_size() as f64)
        .sum::<f64>()
        / (1024.0 * 1024.0);
    let cow = dir.join("cow");
    timed_write(
        &b.rt,
        &cow,
        None,
        TableType::CopyOnWrite,
        WriteOperation::BulkInsert,
        &inserts,
        (rows, 0),
    )?;
    let mor = dir.join("mor");
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
    let updates = data::updates_in(rows, regions)?;
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
    let (mut mor_full, mut mor_one_column) = (None, None);
    let cases: [Case<'_>; 3] = [
        ("COW", &cow, (rows, 0), &[], true),
        ("MOR (10% in logs)", &mor, (rows, updated_rows), &[], true),
        (
            "MOR, --columns id",
            &mor,
            (rows, 0),
            &["--columns", "id"],
            false,
        ),
    ];
    for (name, table_dir, expect, extra, with_peer) in cases {
        let table = table_dir.to_string_lossy().to_string();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for run in 0..runs {
            eprintln!("bench rss: {rows} rows, {name}: run {}/{runs}", run + 1);
            let out = dir.join("arbor.parquet");
            let out_s = out.to_string_lossy().to_string();
            let mut args = vec!["read", table.as_str()];
            args.extend_from_slice(extra);
            args.extend_from_slice(&["--format", "parquet", "--output", &out_s]);
            ours.push(measure(arbor, &args)?);
            let got = check_output(&out)?;
            if got != expect {
                return Err(format!("bench rss: arbor read {name} wrote {got:?} rows (updated), expected {expect:?}"));
            }
            std::fs::remove_file(&out).map_err(|e| format!("{out_s}: {e}"))?;
            if let Some(py) = python.filter(|_| with_peer) {
                let out = dir.join("peer.parquet");
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
        if name.starts_with("MOR (") {
            mor_full = Some(a);
        } else if name.starts_with("MOR,") {
            mor_one_column = Some(a);
        }
        let line = match summarize(&theirs) {
            Ok(p) => format!(
                "| {rows} ({input_mib:.0} MiB) | {name} | {:.2} s | {:.0} MiB | {:.2} s | {:.0} MiB | {:.2}x | {:.2}x |",
                a.seconds,
                a.mib,
                p.seconds,
                p.mib,
                a.seconds / p.seconds,
                a.mib / p.mib
            ),
            Err(_) => format!(
                "| {rows} ({input_mib:.0} MiB) | {name} | {:.2} s | {:.0} MiB | - | - | - | - |",
                a.seconds, a.mib
            ),
        };
        lines.push(line);
    }
    Ok(SizeMeasured {
        lines,
        mor_full: mor_full.ok_or("bench rss: no MOR read")?,
        mor_one_column: mor_one_column.ok_or("bench rss: no one-column read")?,
    })
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
        assert_eq!(
            (o.rows, o.runs, o.peer, o.peer_rows),
            (vec![2_000_000, 20_000_000], 3, true, 2_000_000)
        );
        let o = parse_args(&args(&["rss", "--rows", "1000,2_000", "--no-peer"]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((o.rows, o.peer), (vec![1000, 2000], false));
        assert!(parse_args(&args(&["rss", "--rows", "0"])).is_err());
        assert!(parse_args(&args(&["rss", "--rows", "1,x"])).is_err());
        assert!(parse_args(&args(&["rss", "--bogus"])).is_err());
    }
}
