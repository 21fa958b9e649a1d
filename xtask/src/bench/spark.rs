//! `cargo xtask bench spark`: Spark 3.5 with Hudi (the Java reference) as a yardstick, in the
//! same run as arbor, on the same input files and this machine.
//!
//! `--rows` rows (default 2M) of the ten columns of [`super::data`] in ten partitions are
//! written to `insert.parquet`, and an update of every tenth key (10%) to `upsert.parquet`.
//! Then, on a copy-on-write table with the metadata table (record key `id`, partition path
//! `region`, ordering `ts`), each system does four operations:
//! 1. bulk insert of `insert.parquet` into a new table;
//! 2. upsert of `upsert.parquet`;
//! 3. snapshot read, written to parquet (data columns only);
//! 4. point lookup of one key (`id = key-0000000042`).
//!
//! arbor runs each as one whole `arbor` process under `/usr/bin/time -v` (start-up included;
//! time and peak RSS). Spark runs them in one `local[2]` session (`spark_yardstick.py`, started
//! as `scripts/spark_peer.py` starts its own), timed inside the session, so the JVM's start-up
//! is reported apart; the whole Spark process's time and the JVM's peak RSS (VmHWM) are
//! reported too. Both
//! snapshots are checked: every row, and exactly the updated rows carry the new ordering value;
//! both point lookups find one row. A mismatch fails the bench.
//!
//! Usage: `cargo xtask bench spark [--rows 2000000] [--hudi-version 1.1.1] [--driver-memory
//! 4g] [--arbor PATH] [--dir DIR]`. The Spark install is `scripts/spark.sh`'s (pyspark 3.5 and
//! the Hudi bundles from Maven Central, once per machine).

use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use super::rss::{check_output, measure_output, Measured};
use super::{data, start};

const USAGE: &str = "usage: cargo xtask bench spark [--rows N] [--hudi-version V] \
                     [--driver-memory M] [--arbor PATH] [--dir DIR]";

/// The Spark side, run with `python -c`.
const SCRIPT: &str = include_str!("spark_yardstick.py");

/// The key of the point lookup.
const POINT_KEY: u64 = 42;

#[derive(Debug, Clone, PartialEq)]
struct Options {
    rows: u64,
    hudi_version: String,
    driver_memory: String,
    arbor: Option<PathBuf>,
    dir: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        rows: 2_000_000,
        hudi_version: "1.1.1".to_string(),
        driver_memory: "4g".to_string(),
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
            "--rows" => {
                o.rows = value()?
                    .replace('_', "")
                    .parse()
                    .ok()
                    .filter(|n| *n > POINT_KEY)
                    .ok_or_else(|| format!("--rows wants a number above {POINT_KEY}\n{USAGE}"))?
            }
            "--hudi-version" => o.hudi_version = value()?,
            "--driver-memory" => o.driver_memory = value()?,
            "--arbor" => o.arbor = Some(PathBuf::from(value()?)),
            "--dir" => o.dir = Some(PathBuf::from(value()?)),
            _ => return Err(format!("unknown argument {a}\n{USAGE}")),
        }
    }
    Ok(o)
}

/// Writes `batches` to the parquet file `path` (snappy).
fn write_parquet(path: &Path, batches: &[RecordBatch]) -> Result<(), String> {
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut w = ArrowWriter::try_new(file, data::schema(), Some(props))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    for b in batches {
        w.write(b).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    w.close().map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

/// The Python of the Spark install, after checking it has the jars of `version`.
fn spark_python(version: &str) -> Result<PathBuf, String> {
    let line = crate::script_output("spark.sh", &[])?;
    let v: serde_json::Value =
        serde_json::from_str(&line).map_err(|e| format!("scripts/spark.sh printed {line}: {e}"))?;
    if v.get("versions").and_then(|vs| vs.get(version)).is_none() {
        return Err(format!(
            "scripts/spark.sh has no Hudi {version} jars (it printed {line}); ARBOR_HUDI_VERSIONS selects the versions it installs"
        ));
    }
    v.get("python")
        .and_then(serde_json::Value::as_str)
        .map(PathBuf::from)
        .ok_or_else(|| format!("scripts/spark.sh printed no python: {line}"))
}

/// What the Spark side reports.
#[derive(Debug, Clone, PartialEq)]
struct SparkRun {
    session: f64,
    steps: [f64; 4],
    whole: Measured,
    /// The JVM's peak resident memory (the Python process's is `whole`'s).
    jvm_peak_kib: Option<u64>,
}

fn spark_run(
    python: &Path,
    o: &Options,
    files: (&str, &str),
    work: &Path,
    expect: (u64, u64),
) -> Result<SparkRun, String> {
    let table = work.join("spark-table").to_string_lossy().to_string();
    let out = work.join("spark-out").to_string_lossy().to_string();
    let repo = crate::repo_root().to_string_lossy().to_string();
    let key = data::key(POINT_KEY);
    let (whole, stdout) = measure_output(
        python,
        &[
            "-c",
            SCRIPT,
            &repo,
            &o.hudi_version,
            &o.driver_memory,
            files.0,
            files.1,
            &table,
            &out,
            &key,
        ],
    )?;
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or("bench spark: the Spark side printed nothing")?;
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("bench spark: {line}: {e}"))?;
    let num = |k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_f64)
            .ok_or_else(|| format!("bench spark: no {k} in {line}"))
    };
    let got = (
        num("snapshot_rows")? as u64,
        num("snapshot_updated")? as u64,
    );
    if got != expect || num("point_rows")? as u64 != 1 {
        return Err(format!(
            "bench spark: Spark's snapshot has {got:?} rows (updated), expected {expect:?}, and its point lookup {} rows: {line}",
            num("point_rows")?
        ));
    }
    Ok(SparkRun {
        session: num("session")?,
        steps: [
            num("bulk_insert")?,
            num("upsert")?,
            num("snapshot")?,
            num("point")?,
        ],
        whole,
        jvm_peak_kib: v.get("jvm_peak_kib").and_then(serde_json::Value::as_u64),
    })
}

/// Runs the bench.
pub fn run(args: &[String]) -> Result<(), String> {
    let o = parse_args(args)?;
    let Some(bin) = super::release_cli("spark", o.arbor.as_deref(), args)? else {
        return Ok(());
    };
    let python = spark_python(&o.hudi_version)?;
    let b = start("spark", o.dir.as_deref())?;
    let rows = o.rows;
    let updated = data::update_count(rows);
    eprintln!("bench spark: writing the input files ({rows} rows, {updated} updates)");
    let insert = b.work.join("insert.parquet");
    let upsert = b.work.join("upsert.parquet");
    write_parquet(&insert, &data::inserts(rows)?)?;
    write_parquet(&upsert, &data::updates(rows)?)?;
    let size_mib = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.len() as f64 / (1024.0 * 1024.0))
            .unwrap_or(0.0)
    };
    let (insert_s, upsert_s) = (
        insert.to_string_lossy().to_string(),
        upsert.to_string_lossy().to_string(),
    );

    eprintln!("bench spark: arbor");
    let table = b.work.join("arbor-table").to_string_lossy().to_string();
    let out = b.work.join("arbor-out.parquet");
    let out_s = out.to_string_lossy().to_string();
    let key = data::key(POINT_KEY);
    let filter = format!("id={key}");
    let steps: [Vec<&str>; 4] = [
        vec![
            "write",
            &table,
            &insert_s,
            "--key",
            data::KEY,
            "--partition-by",
            data::PARTITION,
            "--ordering",
            data::ORDERING,
            "--type",
            "cow",
            "--op",
            "bulk-insert",
        ],
        vec!["write", &table, &upsert_s, "--op", "upsert"],
        vec!["read", &table, "--format", "parquet", "--output", &out_s],
        vec!["read", &table, "--where", &filter, "--format", "csv"],
    ];
    let mut ours = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let (m, stdout) = measure_output(&bin, step)?;
        if i == 3 && (stdout.lines().count() != 2 || !stdout.contains(&key)) {
            return Err(format!(
                "bench spark: arbor's point lookup printed {stdout}"
            ));
        }
        ours.push(m);
    }
    let got = check_output(&out)?;
    if got != (rows, updated) {
        return Err(format!(
            "bench spark: arbor's snapshot has {got:?} rows (updated), expected {:?}",
            (rows, updated)
        ));
    }

    eprintln!(
        "bench spark: Spark 3.5 with Hudi {} (local[2], driver memory {})",
        o.hudi_version, o.driver_memory
    );
    let spark = spark_run(
        &python,
        &o,
        (&insert_s, &upsert_s),
        &b.work,
        (rows, updated),
    )?;

    println!();
    println!("machine: {}", b.machine.describe());
    println!("load average (1, 5, 15 min) at the start: {}", b.load);
    println!(
        "input: {rows} rows x 10 columns in 10 partitions ({:.0} MiB parquet), upsert of {updated} rows ({:.0} MiB); copy-on-write with the metadata table; whole bench {:.0} s",
        size_mib(&insert),
        size_mib(&upsert),
        b.started.elapsed().as_secs_f64()
    );
    println!();
    println!("| operation | arbor (whole process) | arbor peak RSS | Spark + Hudi {} (in session) | arbor / Spark |", o.hudi_version);
    println!("|---|---:|---:|---:|---:|");
    let names = [
        "bulk insert",
        "upsert 10%",
        "snapshot to parquet",
        "point lookup",
    ];
    for ((name, a), s) in names.iter().zip(&ours).zip(spark.steps) {
        println!(
            "| {name} | {:.2} s | {:.0} MiB | {s:.2} s | {:.2}x |",
            a.seconds,
            a.max_rss_kib as f64 / 1024.0,
            a.seconds / s
        );
    }
    let arbor_total: f64 = ours.iter().map(|m| m.seconds).sum();
    let arbor_peak = ours.iter().map(|m| m.max_rss_kib).max().unwrap_or(0);
    println!(
        "| all four | {arbor_total:.2} s (4 processes) | {:.0} MiB | {:.2} s + {:.1} s session start; whole process {:.1} s, JVM peak RSS {} | {:.2}x of the in-session time |",
        arbor_peak as f64 / 1024.0,
        spark.steps.iter().sum::<f64>(),
        spark.session,
        spark.whole.seconds,
        spark
            .jvm_peak_kib
            .map_or("unknown".to_string(), |k| format!("{:.0} MiB", k as f64 / 1024.0)),
        arbor_total / spark.steps.iter().sum::<f64>()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse_args_defaults_and_bad_input() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let o = parse_args(&args(&["spark"])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((o.rows, o.hudi_version.as_str()), (2_000_000, "1.1.1"));
        let o = parse_args(&args(&[
            "spark",
            "--rows",
            "1_000",
            "--hudi-version",
            "1.0.2",
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((o.rows, o.hudi_version.as_str()), (1_000, "1.0.2"));
        assert!(parse_args(&args(&["spark", "--rows", "10"])).is_err());
        assert!(parse_args(&args(&["spark", "--rows"])).is_err());
        assert!(parse_args(&args(&["spark", "--bogus"])).is_err());
    }

    #[test]
    fn test_input_files_round_trip() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("in.parquet");
        write_parquet(
            &path,
            &data::inserts(1_000).unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(check_output(&path), Ok((1_000, 0)));
        let up = dir.path().join("up.parquet");
        write_parquet(&up, &data::updates(1_000).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(check_output(&up), Ok((100, 100)));
    }
}
