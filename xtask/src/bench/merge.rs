//! `cargo xtask bench merge`: `diff` and `merge` of diverged branches read only the file groups
//! the writes since the merge base touched, so their cost follows the changed keys, not the
//! table.
//!
//! Tables (copy-on-write, metadata table, ten partitions, one row per data file, built as
//! `cargo xtask bench branch` builds them) of every size of `--files` (default 10,000 and
//! 100,000). On a copy of each, for every size of `--keys` (default 1,000 and 10,000): branch
//! `dev` is created, then `dev` upserts `K` keys and main upserts `K` other keys (one write
//! each; a size of `--keys` more than half a table's files is skipped for that table). Then,
//! `--runs` times (default 3), the median of:
//! - **diff**: `arbor_branching::diff(main, dev)` and its per-partition `stat` (every change
//!   read and compared), through a storage that counts the objects read: the data files read
//!   must be exactly the touched file groups' (twice `K` per state);
//! - **merge (dry run)**: `merge(dev into main)` computing everything, writing nothing;
//! - **full read**, the baseline: what a diff without the merge base costs, arbor's snapshot
//!   reads of main and of `dev` (every file, twice);
//!
//! and once, **merge**: the merge that writes its commit. The results are checked (`2K`
//! updates in the diff, `K` updates and no conflict in the merge, main reading dev's values
//! after it); a mismatch fails the bench.
//!
//! Usage: `cargo xtask bench merge [--files 10000,100000] [--keys 1000,10000] [--runs 3]
//! [--dir DIR] [--quick]`. `--quick` is `--files 200,2000 --keys 20,200 --runs 1`.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arbor_branching::{
    create_branch, diff, merge, open_branch, BranchSource, MergeOptions, MergeStrategy, RefSpec,
};
use arbor_storage::{FaultInjectingStorage, OpKind, Storage};
use arbor_table::{Table, WriteOperation, WriteOptions};
use tokio::runtime::Runtime;

use super::branch::{file_rows, named_table_options, parse_list, FILES_PER_COMMIT};
use super::{copy_dir, local};

const USAGE: &str =
    "usage: cargo xtask bench merge [--files N,N] [--keys N,N] [--runs N] [--dir DIR] [--quick]";

#[derive(Debug, Clone, PartialEq)]
struct Options {
    files: Vec<u32>,
    keys: Vec<u32>,
    runs: usize,
    dir: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        files: vec![10_000, 100_000],
        keys: vec![1_000, 10_000],
        runs: 3,
        dir: None,
    };
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let mut value = |flag: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("bench: {flag} needs a value; {USAGE}"))
        };
        match a.as_str() {
            "--files" => o.files = parse_list("--files", &value("--files")?)?,
            "--keys" => o.keys = parse_list("--keys", &value("--keys")?)?,
            "--runs" => {
                o.runs = value("--runs")?
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("bench: --runs: a positive number; {USAGE}"))?
            }
            "--dir" => o.dir = Some(PathBuf::from(value("--dir")?)),
            "--quick" => {
                o.files = vec![200, 2_000];
                o.keys = vec![20, 200];
                o.runs = 1;
            }
            other => return Err(format!("bench: unknown argument {other:?}; {USAGE}")),
        }
    }
    if let (Some(&k), Some(&f)) = (o.keys.first(), o.files.last()) {
        if 2 * k > f {
            return Err(format!(
                "bench: --keys {k} needs tables of at least {} files (two disjoint sets)",
                2 * k
            ));
        }
    }
    Ok(o)
}

/// One measured shape.
#[derive(Debug, Clone, Default)]
struct Row {
    files: u32,
    keys: u32,
    groups: usize,
    data_reads: usize,
    object_reads: usize,
    diff: f64,
    dry_run: f64,
    full_read: f64,
    merge: f64,
}

/// Builds the table of `files` one-row data files in `dir`.
fn build(rt: &Runtime, files: u32, dir: &Path) -> Result<(), String> {
    let start = Instant::now();
    let storage = local(dir)?;
    rt.block_on(async {
        let table = Table::create(storage.clone(), named_table_options("bench_merge"))
            .await
            .map_err(|e| format!("bench: creating {}: {e}", dir.display()))?
            .with_write_options(WriteOptions {
                small_file_limit: 0,
                max_file_size: 1,
                ..WriteOptions::default()
            });
        let mut written = 0;
        while written < files {
            let to = (written + FILES_PER_COMMIT).min(files);
            table
                .write(WriteOperation::BulkInsert, vec![file_rows(written, to)?])
                .await
                .map_err(|e| format!("bench: bulk insert of files {written}..{to}: {e}"))?;
            written = to;
            eprintln!(
                "bench merge: {files} files: {written} written ({:.0} s)",
                start.elapsed().as_secs_f64()
            );
        }
        Ok(())
    })
}

/// Rows `from..to` with ordering value 1 (an update of the files' rows).
fn updates(from: u32, to: u32) -> Result<arrow::array::RecordBatch, String> {
    let b = file_rows(from, to)?;
    let n = b.num_rows();
    let mut columns = b.columns().to_vec();
    let i = b
        .schema()
        .index_of("ts")
        .map_err(|e| format!("bench: {e}"))?;
    if let Some(c) = columns.get_mut(i) {
        *c = Arc::new(arrow::array::Int64Array::from(vec![1; n]));
    }
    arrow::array::RecordBatch::try_new(b.schema(), columns).map_err(|e| format!("bench: {e}"))
}

/// The objects `counting` read since its last reset: data files (outside `.hoodie`), all.
fn reads(counting: &FaultInjectingStorage) -> (usize, usize) {
    let ops = counting.ops();
    let read: Vec<&str> = ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::Get | OpKind::GetRange))
        .map(|o| o.key.as_str())
        .collect();
    let data: BTreeSet<&str> = read
        .iter()
        .copied()
        .filter(|k| !k.starts_with(".hoodie"))
        .collect();
    (data.len(), read.len())
}

fn measure(rt: &Runtime, dir: &Path, files: u32, keys: u32, runs: usize) -> Result<Row, String> {
    let storage = local(dir)?;
    let label = format!("{files} files / {keys} keys");
    rt.block_on(async {
        let main = Table::open(storage.clone())
            .await
            .map_err(|e| format!("bench: opening main: {e}"))?;
        create_branch(&main, "dev", BranchSource::MainHead)
            .await
            .map_err(|e| format!("bench: create_branch: {e}"))?;
        let dev = open_branch(storage.clone(), "dev")
            .await
            .map_err(|e| format!("bench: open dev: {e}"))?;
        dev.write(WriteOperation::Upsert, vec![updates(0, keys)?])
            .await
            .map_err(|e| format!("bench: upsert on dev: {e}"))?;
        main.write(WriteOperation::Upsert, vec![updates(keys, 2 * keys)?])
            .await
            .map_err(|e| format!("bench: upsert on main: {e}"))?;
        Ok::<_, String>(())
    })?;
    let mut row = Row {
        files,
        keys,
        ..Row::default()
    };
    let (mut d, mut m, mut f) = (Vec::new(), Vec::new(), Vec::new());
    let counting = Arc::new(FaultInjectingStorage::new(storage.clone()));
    let counted: Arc<dyn Storage> = counting.clone();
    for run in 0..runs {
        eprintln!("bench merge: {label}: run {}/{runs}", run + 1);
        arbor_table::read::cache::clear();
        counting.reset();
        let start = Instant::now();
        let (groups, stats) = rt.block_on(async {
            let planned = diff(&counted, &RefSpec::Main, &RefSpec::Branch("dev".into()))
                .await
                .map_err(|e| format!("bench: diff: {e}"))?;
            let stats = planned
                .stat()
                .await
                .map_err(|e| format!("bench: diff stat: {e}"))?;
            Ok::<_, String>((planned.file_groups(), stats))
        })?;
        d.push(start.elapsed().as_secs_f64());
        (row.data_reads, row.object_reads) = reads(&counting);
        row.groups = groups;
        let updated: usize = stats.iter().map(|s| s.updates).sum();
        let other: usize = stats.iter().map(|s| s.inserts + s.deletes).sum();
        if (updated, other) != (2 * keys as usize, 0) {
            return Err(format!(
                "bench: {label}: diff found {updated} updates and {other} other changes"
            ));
        }
        arbor_table::read::cache::clear();
        let start = Instant::now();
        let outcome = rt.block_on(async {
            let main = Table::open(counted.clone())
                .await
                .map_err(|e| format!("bench: opening main: {e}"))?;
            merge(
                &main,
                &RefSpec::Branch("dev".into()),
                &MergeOptions::new(MergeStrategy::Fail).with_dry_run(true),
            )
            .await
            .map_err(|e| format!("bench: merge dry run: {e}"))
        })?;
        m.push(start.elapsed().as_secs_f64());
        if (outcome.updates, outcome.conflict_count) != (keys as usize, 0) {
            return Err(format!(
                "bench: {label}: the merge would update {} keys with {} conflicts",
                outcome.updates, outcome.conflict_count
            ));
        }
        arbor_table::read::cache::clear();
        let start = Instant::now();
        let rows = rt.block_on(async {
            let mut n = 0;
            for b in [None, Some("dev")] {
                let reader = arbor_branching::open_reader(storage.clone(), b)
                    .await
                    .map_err(|e| format!("bench: reader: {e}"))?;
                n += reader
                    .snapshot(None)
                    .await
                    .map_err(|e| format!("bench: read: {e}"))?
                    .iter()
                    .map(|b| b.num_rows())
                    .sum::<usize>();
            }
            Ok::<_, String>(n)
        })?;
        f.push(start.elapsed().as_secs_f64());
        if rows != 2 * files as usize {
            return Err(format!(
                "bench: {label}: the full reads returned {rows} rows"
            ));
        }
    }
    row.diff = super::med("diff", &d)?;
    row.dry_run = super::med("merge dry run", &m)?;
    row.full_read = super::med("full read", &f)?;
    arbor_table::read::cache::clear();
    let start = Instant::now();
    let outcome = rt.block_on(async {
        let main = Table::open(storage.clone())
            .await
            .map_err(|e| format!("bench: opening main: {e}"))?;
        merge(
            &main,
            &RefSpec::Branch("dev".into()),
            &MergeOptions::new(MergeStrategy::Fail),
        )
        .await
        .map_err(|e| format!("bench: merge: {e}"))
    })?;
    row.merge = start.elapsed().as_secs_f64();
    if outcome.commit.is_none() || outcome.updates != keys as usize {
        return Err(format!(
            "bench: {label}: the merge did not commit {keys} updates"
        ));
    }
    Ok(row)
}

fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| data files | keys changed per side | file groups compared | data files read by diff | \
         objects read by diff | diff + stat (s) | merge, dry run (s) | merge (s) | full read of \
         both refs (s) | diff / full read |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2}x |",
            r.files,
            r.keys,
            r.groups,
            r.data_reads,
            r.object_reads,
            r.diff,
            r.dry_run,
            r.merge,
            r.full_read,
            r.diff / r.full_read.max(1e-9)
        );
    }
    s
}

fn growth(rows: &[Row]) -> String {
    let mut s = String::new();
    for a in rows {
        for b in rows {
            if a.files == b.files && b.keys > a.keys {
                let _ = writeln!(
                    s,
                    "- {} files, {}x the keys ({} -> {}): diff {:.1}x, merge dry run {:.1}x",
                    a.files,
                    b.keys / a.keys,
                    a.keys,
                    b.keys,
                    b.diff / a.diff.max(1e-9),
                    b.dry_run / a.dry_run.max(1e-9)
                );
            }
            if a.keys == b.keys && b.files > a.files {
                let _ = writeln!(
                    s,
                    "- {} keys, {}x the files ({} -> {}): diff {:.2}x, merge dry run {:.2}x, full read {:.1}x",
                    a.keys,
                    b.files / a.files,
                    a.files,
                    b.files,
                    b.diff / a.diff.max(1e-9),
                    b.dry_run / a.dry_run.max(1e-9),
                    b.full_read / a.full_read.max(1e-9)
                );
            }
        }
    }
    s
}

/// Runs `cargo xtask bench merge`.
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
    } = super::start("merge", options.dir.as_deref())?;
    let mut rows = Vec::new();
    for &files in &options.files {
        let template = work.join(format!("t{files}"));
        build(&rt, files, &template)?;
        for &keys in options.keys.iter().filter(|&&k| 2 * k <= files) {
            let dir = work.join(format!("t{files}-k{keys}"));
            copy_dir(&template, &dir)?;
            rows.push(measure(&rt, &dir, files, keys, options.runs)?);
            std::fs::remove_dir_all(&dir)
                .map_err(|e| format!("bench: removing {}: {e}", dir.display()))?;
        }
    }
    println!();
    println!("machine: {}", machine.describe());
    println!("load average (1, 5, 15 min) at the start: {load}");
    println!(
        "tables: copy-on-write with the metadata table, 10 partitions, one row per data file; \
         median of {} runs (merge: 1 run); whole bench {:.0} s",
        options.runs,
        started.elapsed().as_secs_f64()
    );
    println!();
    print!("{}", table(&rows));
    println!();
    print!("{}", growth(&rows));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        std::iter::once("merge")
            .chain(a.iter().copied())
            .map(String::from)
            .collect()
    }

    #[test]
    fn test_parse_args_defaults_quick_and_refusals() {
        let o = parse_args(&args(&[])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (o.files, o.keys, o.runs),
            (vec![10_000, 100_000], vec![1_000, 10_000], 3)
        );
        let q = parse_args(&args(&["--quick"])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (q.files, q.keys, q.runs),
            (vec![200, 2_000], vec![20, 200], 1)
        );
        assert!(parse_args(&args(&["--files", "100", "--keys", "60"])).is_err());
        // Shapes where the keys do not fit are skipped, not refused.
        assert!(parse_args(&args(&["--files", "100,1000", "--keys", "10,60"])).is_ok());
        assert!(parse_args(&args(&["--runs", "0"])).is_err());
        assert!(parse_args(&args(&["--bogus"])).is_err());
    }
}
