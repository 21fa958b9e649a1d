//! `cargo xtask bench commits`: a 100-row upsert as a whole `arbor write` process, early in a
//! table's history and after thousands of commits.
//!
//! A copy-on-write table with the metadata table (ten partitions) gets 10,000 rows in one
//! bulk insert through `arbor write`, then `--commits` upserts of 100 existing keys each, one
//! `arbor write ... --op upsert` process per commit (start-up, table open, commit and the
//! metadata table's own services included), from a CSV file written before the clock starts.
//! Every 100 commits `arbor clean` and `arbor archive` run (untimed), as a scheduled job would
//! run them. Reported: the median of commits 31-80 against the median of the last 50, their
//! ratio, the machine's load; then, because a machine's speed drifts over the minutes between
//! those two windows, the same comparison interleaved: copies of the table as it was after
//! commit 50 and as it is at the end get [`RUN_LENGTH`] consecutive upserts each, in turn
//! ([`INTERLEAVED`] rounds, each on a fresh copy, the copy untimed; ten commits are one cycle
//! of the metadata table's compaction, so each state pays for its services at their cadence),
//! and the medians of those upserts and their ratio are reported too. At the end, the active instants of the data timeline and of
//! the metadata table's (with those at or after its latest compaction, which its readers still
//! need), and the storage calls of a one-key read in a fresh process's worth of work (table
//! open, plan, read; through a pass-through `FaultInjectingStorage`) against the active
//! instants and the files under `.hoodie`. Each upsert must report 100 updated rows.
//!
//! Usage: `cargo xtask bench commits [--commits 2000] [--arbor PATH] [--dir DIR]`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use arbor_storage::{FaultInjectingStorage, OpKind, Storage};
use arbor_table::read::{ReadOptions, TableReader};

use super::report::median;
use super::{local, start};

const USAGE: &str = "usage: cargo xtask bench commits [--commits N] [--arbor PATH] [--dir DIR]";

/// Rows of the table.
const ROWS: u64 = 10_000;
/// Rows of each upsert.
const UPSERT_ROWS: u64 = 100;
/// Commits between a clean and archival.
const SERVICE_EVERY: u64 = 100;
/// The commit after which the early state is kept for the interleaved comparison.
const EARLY_STATE: u64 = 50;
/// Rounds of the interleaved comparison.
const INTERLEAVED: u64 = 5;
/// Consecutive upserts on each state per round (one cycle of the MDT's compaction, every ten
/// log files).
const RUN_LENGTH: u64 = 10;

#[derive(Debug, Clone, PartialEq)]
struct Options {
    commits: u64,
    arbor: Option<PathBuf>,
    dir: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        commits: 2_000,
        arbor: None,
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
            "--commits" => {
                o.commits = value()?
                    .replace('_', "")
                    .parse()
                    .ok()
                    .filter(|n| *n >= 130)
                    .ok_or_else(|| format!("--commits wants a number of at least 130\n{USAGE}"))?
            }
            "--arbor" => o.arbor = Some(PathBuf::from(value()?)),
            "--dir" => o.dir = Some(PathBuf::from(value()?)),
            _ => return Err(format!("unknown argument {a}\n{USAGE}")),
        }
    }
    Ok(o)
}

/// The CSV of rows `keys` at version `version`.
fn csv(keys: impl Iterator<Item = u64>, version: u64) -> String {
    let mut out = String::from("id,part,ts,v\n");
    for k in keys {
        let v = (k.wrapping_mul(2_654_435_761) ^ version) % 1_000_003;
        out.push_str(&format!("k{k:05},p{},{version},{v}\n", k % 10));
    }
    out
}

/// Runs the arbor CLI; returns its stdout, or an error with its stderr.
pub(super) fn arbor(bin: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(bin)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(format!(
            "arbor {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// Completed instants in a timeline directory, and those at or after its latest `.commit`
/// (for the metadata table: its latest compaction).
fn completed_instants(timeline: &Path) -> Result<(usize, usize), String> {
    let mut completed: Vec<(String, bool)> = Vec::new();
    for e in std::fs::read_dir(timeline).map_err(|e| format!("{}: {e}", timeline.display()))? {
        let name = e
            .map_err(|e| format!("{}: {e}", timeline.display()))?
            .file_name()
            .to_string_lossy()
            .to_string();
        let mut parts = name.splitn(2, '.');
        let (Some(time), Some(action)) = (parts.next(), parts.next()) else {
            continue;
        };
        if action.ends_with("requested") || action.ends_with("inflight") || time.len() < 14 {
            continue;
        }
        let time = time.split('_').next().unwrap_or(time).to_string();
        completed.push((time, action == "commit"));
    }
    let latest_commit = completed
        .iter()
        .filter(|(_, c)| *c)
        .map(|(t, _)| t.clone())
        .max();
    let kept = completed
        .iter()
        .filter(|(t, _)| latest_commit.as_ref().is_some_and(|c| t >= c))
        .count();
    Ok((completed.len(), kept))
}

fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        files_under(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Runs the bench.
pub fn run(args: &[String]) -> Result<(), String> {
    let options = parse_args(args)?;
    let Some(bin) = super::release_cli("commits", options.arbor.as_deref(), args)? else {
        return Ok(());
    };
    let b = start("commits", options.dir.as_deref())?;
    let table = b.work.join("t");
    let t = table.to_string_lossy().to_string();
    let init = b.work.join("init.csv");
    std::fs::write(&init, csv(0..ROWS, 0)).map_err(|e| format!("{}: {e}", init.display()))?;
    arbor(
        &bin,
        &[
            "write",
            &t,
            &init.to_string_lossy(),
            "--key",
            "id",
            "--partition-by",
            "part",
            "--ordering",
            "ts",
            "--type",
            "cow",
            "--op",
            "bulk-insert",
        ],
    )?;
    let input = b.work.join("upsert.csv");
    let input_s = input.to_string_lossy().to_string();
    let mut seconds = Vec::with_capacity(options.commits as usize);
    for i in 1..=options.commits {
        // 100 existing keys, spread over the partitions, a different set each commit.
        let keys = (0..UPSERT_ROWS).map(|j| (i * 7_919 + j * 101) % ROWS);
        std::fs::write(&input, csv(keys, i)).map_err(|e| format!("{input_s}: {e}"))?;
        let started = Instant::now();
        let out = arbor(&bin, &["write", &t, &input_s, "--op", "upsert", "--json"])?;
        seconds.push(started.elapsed().as_secs_f64());
        let v: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| format!("commit {i}: {e}: {out}"))?;
        let updated = v.get("updated").and_then(serde_json::Value::as_u64);
        if updated != Some(UPSERT_ROWS) {
            return Err(format!(
                "commit {i}: updated {updated:?} rows, expected {UPSERT_ROWS}: {out}"
            ));
        }
        if i % SERVICE_EVERY == 0 {
            arbor(&bin, &["clean", &t])?;
            arbor(&bin, &["archive", &t])?;
            eprintln!("bench commits: {i}/{} commits", options.commits);
        }
        if i == EARLY_STATE {
            super::copy_dir(&table, &b.work.join("early"))?;
        }
    }
    super::copy_dir(&table, &b.work.join("late"))?;
    let (mut early_runs, mut late_runs) = (Vec::new(), Vec::new());
    let run = b.work.join("run");
    let run_s = run.to_string_lossy().to_string();
    for r in 0..INTERLEAVED {
        for (state, out) in [("early", &mut early_runs), ("late", &mut late_runs)] {
            if run.exists() {
                std::fs::remove_dir_all(&run).map_err(|e| format!("{run_s}: {e}"))?;
            }
            super::copy_dir(&b.work.join(state), &run)?;
            for k in 0..RUN_LENGTH {
                let version = options.commits + 1 + r * RUN_LENGTH + k;
                let keys = (0..UPSERT_ROWS).map(|j| (version * 7_919 + j * 101) % ROWS);
                std::fs::write(&input, csv(keys, version))
                    .map_err(|e| format!("{input_s}: {e}"))?;
                let started = Instant::now();
                let got = arbor(
                    &bin,
                    &["write", &run_s, &input_s, "--op", "upsert", "--json"],
                )?;
                out.push(started.elapsed().as_secs_f64());
                let v: serde_json::Value = serde_json::from_str(&got)
                    .map_err(|e| format!("{state} round {r}: {e}: {got}"))?;
                if v.get("updated").and_then(serde_json::Value::as_u64) != Some(UPSERT_ROWS) {
                    return Err(format!(
                        "{state} round {r}: expected {UPSERT_ROWS} updated: {got}"
                    ));
                }
            }
        }
    }
    let early_i = median(&early_runs).ok_or("no interleaved early runs")?;
    let late_i = median(&late_runs).ok_or("no interleaved late runs")?;
    let early = median(seconds.get(30..80).unwrap_or_default()).ok_or("no early commits")?;
    let late_from = seconds.len().saturating_sub(50);
    let late = median(seconds.get(late_from..).unwrap_or_default()).ok_or("no late commits")?;

    let (data, _) = completed_instants(&table.join(".hoodie/timeline"))?;
    let (mdt, mdt_kept) = completed_instants(&table.join(".hoodie/metadata/.hoodie/timeline"))?;
    let hoodie_files = files_under(&table.join(".hoodie"));
    let (reads, lists) = point_read_calls(&b.rt, &table)?;

    println!();
    println!("machine: {}", b.machine.describe());
    println!("load average (1, 5, 15 min) at the start: {}", b.load);
    println!(
        "copy-on-write, metadata table, {ROWS} rows in 10 partitions; upserts of {UPSERT_ROWS} rows as whole `arbor write` processes; clean and archive every {SERVICE_EVERY} commits; whole bench {:.0} s",
        b.started.elapsed().as_secs_f64()
    );
    println!();
    println!("| commits | median upsert (whole process) |");
    println!("|---|---|");
    println!("| 31-80 | {early:.3} s |");
    println!(
        "| {}-{} | {late:.3} s ({:.2}x) |",
        late_from + 1,
        seconds.len(),
        late / early
    );
    println!();
    println!("Interleaved ({INTERLEAVED} rounds of {RUN_LENGTH} consecutive upserts on a fresh copy of each state in turn):");
    println!();
    println!("| table state | median upsert (whole process) |");
    println!("|---|---|");
    println!("| after commit {EARLY_STATE} | {early_i:.3} s |");
    println!(
        "| after commit {} | {late_i:.3} s ({:.2}x) |",
        options.commits,
        late_i / early_i
    );
    println!();
    println!(
        "- at the end: {data} completed data instants active; the metadata table's timeline {mdt} ({mdt_kept} at or after its latest compaction; bound 2 x {data} + {mdt_kept} = {})",
        2 * data + mdt_kept
    );
    println!(
        "- a one-key read (open, plan, read): {reads} reads (GET/HEAD) and {lists} listings, with {} active instants and {hoodie_files} files under .hoodie",
        data + mdt
    );
    Ok(())
}

/// Storage calls of reading key `k00042` through a fresh reader.
fn point_read_calls(rt: &tokio::runtime::Runtime, table: &Path) -> Result<(usize, usize), String> {
    let counter = Arc::new(FaultInjectingStorage::new(local(table)?));
    let storage: Arc<dyn Storage> = counter.clone();
    rt.block_on(async {
        let reader = TableReader::open(storage).await?;
        let filter = arbor_table::read::PartitionFilter::parse("id = 'k00042'")?;
        let rows: usize = reader
            .read(ReadOptions::new().filter(filter))
            .await?
            .iter()
            .map(|b| b.num_rows())
            .sum();
        Ok::<_, arbor_table::TableError>(rows)
    })
    .map_err(|e| format!("point read: {e}"))
    .and_then(|rows| {
        if rows == 1 {
            Ok(())
        } else {
            Err(format!("point read returned {rows} rows, expected 1"))
        }
    })?;
    let (mut reads, mut lists) = (0, 0);
    for op in counter.ops() {
        match op.kind {
            OpKind::List | OpKind::ListDir => lists += 1,
            k if k.is_write() => {}
            _ => reads += 1,
        }
    }
    Ok((reads, lists))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse_args_and_completed_instants() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let o = parse_args(&args(&["commits"])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o.commits, 2_000);
        assert!(parse_args(&args(&["commits", "--commits", "10"])).is_err());
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for name in [
            "20260101000000000_20260101000000100.deltacommit",
            "20260101000001000_20260101000001100.commit",
            "20260101000002000_20260101000002100.deltacommit",
            "20260101000003000.deltacommit.requested",
            "20260101000003000.deltacommit.inflight",
            "history",
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(completed_instants(dir.path()), Ok((3, 2)));
    }
}
