//! `cargo xtask bench ttl`: the cost of planning a partition-TTL run on a table with many
//! partitions, with the metadata table (no data-partition LIST) and without it (a directory
//! listing of every partition), measured in the same run.
//!
//! At every size of `--sizes` (default 1,000 and 10,000 partitions) two copy-on-write tables
//! are written side by side, one with the metadata table (MDT) and one created with
//! `metadata_table: false`: one bulk insert of one row into each of N hive-style daily
//! partitions `dt=2000-01-01`, `dt=2000-01-02`, ... (one base file per partition). Then,
//! `--runs` times each (default 5), interleaved, `Table::run_ttl` with `dry_run: true` is timed
//! for two policies:
//! - **event-time** `--retain 365d` on `dt` (`yyyy-MM-dd`) as of the last day: every partition
//!   but the last year's expires; the plan needs the partition list;
//! - **size** keeping the newest partitions whose latest files fit in a tenth of the table:
//!   the plan needs every partition's latest file slices.
//!
//! Every storage call goes through a pass-through [`FaultInjectingStorage`] that counts LIST
//! calls of data partitions (outside `.hoodie/`): with the MDT they must be zero; both tables
//! must plan the same partitions; a mismatch fails the bench. Peak memory is the process's
//! high-water mark (`VmHWM`) after the whole bench.
//!
//! Usage: `cargo xtask bench ttl [--sizes 1000,10000] [--runs 5] [--dir DIR]`. A debug build
//! re-runs itself as the release xtask. Progress goes to stderr; the table to stdout.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arbor_storage::{FaultInjectingStorage, OpKind, Storage};
use arbor_table::ttl::{PolicyScope, Retention, TtlPolicy, TtlRunOptions, TtlStrategy};
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_timeline::config::TableType;
use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use chrono::{Duration, NaiveDate, TimeZone, Utc};
use tokio::runtime::Runtime;

use super::clean::parse_positive;
use super::local;
use super::report::median;

const USAGE: &str = "usage: cargo xtask bench ttl [--sizes N,N] [--runs N] [--dir DIR]";

/// Bench options.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    sizes: Vec<u32>,
    runs: usize,
    dir: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("ttl") => {}
        _ => return Err(USAGE.to_string()),
    }
    let mut options = Options {
        sizes: vec![1_000, 10_000],
        runs: 5,
        dir: None,
    };
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("bench: {a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--sizes" => {
                options.sizes = value()?
                    .split(',')
                    .map(|v| parse_positive("--sizes", v))
                    .collect::<Result<Vec<_>, _>>()?
            }
            "--runs" => options.runs = parse_positive("--runs", value()?)? as usize,
            "--dir" => options.dir = Some(PathBuf::from(value()?)),
            other => return Err(format!("bench: unknown argument {other:?}\n{USAGE}")),
        }
    }
    options.sizes.sort_unstable();
    options.sizes.dedup();
    Ok(options)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("dt", DataType::Utf8, false),
        Field::new("payload", DataType::Utf8, false),
    ]))
}

fn day(i: u32) -> Result<NaiveDate, String> {
    NaiveDate::from_ymd_opt(2000, 1, 1)
        .and_then(|d| d.checked_add_signed(Duration::days(i64::from(i))))
        .ok_or_else(|| format!("bench: day {i} out of range"))
}

/// One row per partition.
fn rows(partitions: u32) -> Result<RecordBatch, String> {
    let days = (0..partitions)
        .map(|i| day(i).map(|d| d.format("%Y-%m-%d").to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let ids = StringArray::from_iter_values((0..partitions).map(|i| format!("k{i:06}")));
    let payload = StringArray::from_iter_values((0..partitions).map(|i| format!("row {i}")));
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(ids),
            Arc::new(StringArray::from_iter_values(days)),
            Arc::new(payload),
        ],
    )
    .map_err(|e| format!("bench: building the rows: {e}"))
}

fn create_options(metadata_table: bool) -> CreateOptions {
    CreateOptions {
        name: "bench_ttl".to_string(),
        table_type: TableType::CopyOnWrite,
        record_key_fields: vec!["id".to_string()],
        partition_fields: vec!["dt".to_string()],
        hive_style_partitioning: true,
        ordering_field: None,
        merge_mode: None,
        schema: schema(),
        metadata_table,
        table_version: Default::default(),
        base_format: Default::default(),
    }
}

/// The two policies measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    EventTime,
    Size,
}

impl Policy {
    fn describe(self) -> &'static str {
        match self {
            Policy::EventTime => "event-time 365d",
            Policy::Size => "size (a tenth of the table)",
        }
    }

    fn ttl(self, table_bytes: u64) -> TtlPolicy {
        let default = PolicyScope::Default { fields: Vec::new() };
        match self {
            Policy::EventTime => TtlPolicy {
                strategy: TtlStrategy::EventTime,
                retain: Retention::Duration(std::time::Duration::from_secs(365 * 86_400)),
                scope: default,
                time_field: Some("dt".to_string()),
                format: Some("yyyy-MM-dd".to_string()),
            },
            Policy::Size => TtlPolicy {
                strategy: TtlStrategy::Size,
                retain: Retention::Bytes((table_bytes / 10).max(1)),
                scope: default,
                time_field: None,
                format: None,
            },
        }
    }
}

/// Writes the table of `partitions` partitions in `dir`; returns the seconds taken and the
/// bytes of its data files.
fn build(rt: &Runtime, dir: &Path, partitions: u32, mdt: bool) -> Result<(f64, u64), String> {
    let batch = rows(partitions)?;
    let start = Instant::now();
    let table = rt
        .block_on(Table::create(local(dir)?, create_options(mdt)))
        .map_err(|e| format!("bench: creating {}: {e}", dir.display()))?;
    let r = rt
        .block_on(table.write(WriteOperation::BulkInsert, vec![batch]))
        .map_err(|e| format!("bench: writing {}: {e}", dir.display()))?;
    if r.files_written != partitions as usize {
        return Err(format!(
            "bench: wrote {} files, expected {partitions}",
            r.files_written
        ));
    }
    let seconds = start.elapsed().as_secs_f64();
    let bytes = data_bytes(dir)?;
    Ok((seconds, bytes))
}

/// Bytes of the parquet files under `dir` outside `.hoodie`.
fn data_bytes(dir: &Path) -> Result<u64, String> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).map_err(|e| format!("bench: {}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| format!("bench: {}: {e}", dir.display()))?;
        let path = entry.path();
        if entry.file_name() == ".hoodie" {
            continue;
        }
        if path.is_dir() {
            total += data_bytes(&path)?;
        } else if path.extension().is_some_and(|e| e == "parquet") {
            total += entry
                .metadata()
                .map_err(|e| format!("bench: {}: {e}", path.display()))?
                .len();
        }
    }
    Ok(total)
}

/// One timed dry run: (seconds, data-partition LISTs, every call, planned partitions).
fn once(
    rt: &Runtime,
    dir: &Path,
    policy: &TtlPolicy,
    now: chrono::DateTime<Utc>,
) -> Result<(f64, usize, usize, Vec<String>), String> {
    let counter = Arc::new(FaultInjectingStorage::new(local(dir)?));
    let storage: Arc<dyn Storage> = counter.clone();
    let table = rt
        .block_on(Table::open(storage))
        .map_err(|e| format!("bench: opening {}: {e}", dir.display()))?;
    let policies = table
        .ttl_policies()
        .map_err(|e| format!("bench: {}: {e}", dir.display()))?;
    if policies.default.as_ref() != Some(policy) {
        return Err(format!("bench: {} does not hold the policy", dir.display()));
    }
    counter.reset();
    let start = Instant::now();
    let outcome = rt
        .block_on(table.run_ttl(&TtlRunOptions {
            now: Some(now),
            dry_run: true,
            max_partitions: None,
        }))
        .map_err(|e| format!("bench: TTL dry run of {}: {e}", dir.display()))?;
    let seconds = start.elapsed().as_secs_f64();
    let mut data_lists = 0;
    let mut total = 0;
    for o in counter.ops() {
        total += 1;
        if matches!(o.kind, OpKind::List | OpKind::ListDir) && !o.key.starts_with(".hoodie") {
            data_lists += 1;
        }
    }
    let planned = outcome
        .plan
        .expired
        .iter()
        .chain(&outcome.plan.capped)
        .map(|e| e.partition.clone())
        .collect();
    Ok((seconds, data_lists, total, planned))
}

/// One result row.
#[derive(Debug, Clone)]
struct Row {
    partitions: u32,
    policy: Policy,
    mdt: bool,
    seconds: f64,
    data_lists: usize,
    calls: usize,
    expired: usize,
}

fn measure(
    rt: &Runtime,
    work: &Path,
    partitions: u32,
    runs: usize,
) -> Result<(Vec<Row>, (f64, f64)), String> {
    let dirs = [
        work.join(format!("mdt-{partitions}")),
        work.join(format!("no-mdt-{partitions}")),
    ];
    eprintln!("bench ttl: writing {partitions} partitions, with and without the MDT");
    let (built_mdt, bytes) = build(rt, &dirs[0], partitions, true)?;
    let (built_plain, _) = build(rt, &dirs[1], partitions, false)?;
    let last = day(partitions.saturating_sub(1))?;
    let now = Utc.from_utc_datetime(
        &last
            .and_hms_opt(12, 0, 0)
            .ok_or("bench: no noon on the last day")?,
    );
    let mut rows = Vec::new();
    for policy in [Policy::EventTime, Policy::Size] {
        let ttl = policy.ttl(bytes);
        for dir in &dirs {
            let table = rt
                .block_on(Table::open(local(dir)?))
                .map_err(|e| format!("bench: opening {}: {e}", dir.display()))?;
            rt.block_on(table.set_ttl_policy(ttl.clone()))
                .map_err(|e| format!("bench: setting the policy on {}: {e}", dir.display()))?;
        }
        let mut seconds = [Vec::new(), Vec::new()];
        let mut last_seen: [Option<(usize, usize, Vec<String>)>; 2] = [None, None];
        for run in 0..runs {
            eprintln!(
                "bench ttl: {partitions} partitions, {}: run {}/{runs}",
                policy.describe(),
                run + 1
            );
            for (i, dir) in dirs.iter().enumerate() {
                let (s, lists, calls, planned) = once(rt, dir, &ttl, now)?;
                if i == 0 && lists != 0 {
                    return Err(format!(
                        "bench: the dry run with the metadata table listed {lists} data partitions"
                    ));
                }
                if let Some(v) = seconds.get_mut(i) {
                    v.push(s);
                }
                if let Some(l) = last_seen.get_mut(i) {
                    *l = Some((lists, calls, planned));
                }
            }
        }
        let [Some((l0, c0, p0)), Some((l1, c1, p1))] = last_seen else {
            return Err("bench: no runs".to_string());
        };
        if p0 != p1 {
            return Err(format!(
                "bench: {}: the plans differ with and without the MDT ({} and {} partitions)",
                policy.describe(),
                p0.len(),
                p1.len()
            ));
        }
        if p0.is_empty() {
            return Err(format!("bench: {}: nothing expired", policy.describe()));
        }
        let [s0, s1] = seconds;
        for (mdt, s, lists, calls) in [(true, s0, l0, c0), (false, s1, l1, c1)] {
            rows.push(Row {
                partitions,
                policy,
                mdt,
                seconds: median(&s).ok_or("bench: no timing")?,
                data_lists: lists,
                calls,
                expired: p0.len(),
            });
        }
    }
    for d in &dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    Ok((rows, (built_mdt, built_plain)))
}

fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "| partitions | policy | MDT | median dry run (s) | µs per partition | data-partition LISTs | all calls | expired | MDT ÷ listing |\n",
    );
    out.push_str("|---:|---|---|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let ratio = if r.mdt {
            rows.iter()
                .find(|o| !o.mdt && o.partitions == r.partitions && o.policy == r.policy)
                .map_or("-".to_string(), |o| format!("{:.2}", r.seconds / o.seconds))
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.3} | {:.1} | {} | {} | {} | {} |",
            r.partitions,
            r.policy.describe(),
            if r.mdt { "on" } else { "off (listing)" },
            r.seconds,
            r.seconds * 1e6 / f64::from(r.partitions),
            r.data_lists,
            r.calls,
            r.expired,
            ratio
        );
    }
    out
}

/// The process's peak resident memory (`VmHWM`), when the OS says.
fn peak_memory() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .map(|l| l.trim_start_matches("VmHWM:").trim().to_string())
}

/// Runs `cargo xtask bench ttl ...` (`args` starts with `ttl`).
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
    } = super::start("ttl", options.dir.as_deref())?;
    let mut rows = Vec::new();
    let mut builds = Vec::new();
    for &n in &options.sizes {
        let (r, b) = measure(&rt, &work, n, options.runs)?;
        rows.extend(r);
        builds.push((n, b));
    }
    println!();
    println!("machine: {}", machine.describe());
    println!("load average (1, 5, 15 min) at the start: {load}");
    for (n, (a, b)) in builds {
        println!(
            "tables: copy-on-write, {n} hive-style daily partitions of one row, one bulk insert: \
             written in {a:.1} s with the MDT and {b:.1} s without"
        );
    }
    println!(
        "`Table::run_ttl` with dry_run; median of {} runs; peak memory {}; whole bench {:.0} s",
        options.runs,
        peak_memory().unwrap_or_else(|| "unknown".to_string()),
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

    #[test]
    fn test_parse_args() {
        let a = |s: &str| -> Vec<String> { s.split(' ').map(str::to_string).collect() };
        let o = parse_args(&a("ttl")).unwrap();
        assert_eq!(o.sizes, vec![1_000, 10_000]);
        let o = parse_args(&a("ttl --sizes 10000,100 --runs 2")).unwrap();
        assert_eq!((o.sizes, o.runs), (vec![100, 10_000], 2));
        assert!(parse_args(&a("ttl --sizes 0")).is_err());
        assert!(parse_args(&a("ttl --bogus")).is_err());
        assert!(parse_args(&a("clean")).is_err());
    }

    #[test]
    fn test_rows_one_per_daily_partition() {
        let b = rows(3).unwrap();
        assert_eq!(b.num_rows(), 3);
        assert_eq!(day(366).unwrap().to_string(), "2001-01-01");
    }
}
