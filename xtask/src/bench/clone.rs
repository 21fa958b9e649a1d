//! `cargo xtask bench clone`: the cost of a shallow clone, which must not grow with the data:
//! it writes metadata only and never reads or copies a data file, against a deep clone (the
//! snapshot's files copied too) and a full listing of the source, measured in the same run.
//!
//! At every size of `--files` (default 1,000 and 100,000) a copy-on-write source table with the
//! metadata table and ten partitions is written with bulk inserts of at most 10,000 rows and
//! `max_file_size: 1`, so every row is its own base file (the table arbor reads is a real one:
//! every file is in its FILES partition). Then, `--runs` times (default 3), interleaved:
//! - **list**: one raw recursive listing of the whole source (`list_all("")`);
//! - **shallow**: `clone_table` of main's head into a new local directory;
//! - **deep**: `clone_table` with `deep: true` into another new directory (both locations on
//!   the local file system, so the copy is server-side: `Storage::copy` at their common root).
//!
//! Every location is opened through a counting opener (each storage wrapped in a pass-through
//! [`FaultInjectingStorage`]): the objects written (put, put-if-absent, put-if-match, copy)
//! are attributed to the target or to the source by their full path, and the bench fails when
//! a shallow clone reads (GET or ranged GET) or copies a data file, or writes one into the
//! target, or when a clone does not read the source's rows (count checked through
//! `open_location`). HEADs of data files are counted and reported (the source's savepoint
//! checks the snapshot's files exist). Between runs the clones are removed and their pins
//! pruned (untimed).
//!
//! Usage: `cargo xtask bench clone [--files 1000,100000] [--runs 3] [--dir DIR] [--quick]`
//! (`--quick`: `--files 100,2000 --runs 2`). Like the other benches, a debug build re-runs
//! itself as the release xtask. Progress goes to stderr; the machine and the tables to stdout.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arbor_branching::clone::{clone_table, prune_pins, CloneAt, CloneOutcome, CloneRequest};
use arbor_storage::{FaultInjectingStorage, OpKind, Storage, StorageExt, StorageOptions};
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, Table, WriteOperation, WriteOptions};
use arbor_timeline::layout::{normalize_location, open_location, LocationOpener, RegistryOpener};
use arrow::array::RecordBatch;
use tokio::runtime::Runtime;

use super::branch::{file_rows, FILES_PER_COMMIT, PARTITIONS};
use super::clean::parse_positive;
use super::local;

const USAGE: &str = "usage: cargo xtask bench clone [--files N,N] [--runs N] [--dir DIR] [--quick]";

/// Bench options.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    files: Vec<u32>,
    runs: usize,
    dir: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("clone") => {}
        _ => return Err(USAGE.to_string()),
    }
    let mut options = Options {
        files: vec![1_000, 100_000],
        runs: 3,
        dir: None,
    };
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("bench: {a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--files" => {
                options.files = value()?
                    .split(',')
                    .map(|v| parse_positive("--files", v))
                    .collect::<Result<Vec<_>, _>>()?
            }
            "--runs" => options.runs = parse_positive("--runs", value()?)? as usize,
            "--dir" => options.dir = Some(PathBuf::from(value()?)),
            "--quick" => {
                options.files = vec![100, 2_000];
                options.runs = 2;
            }
            other => return Err(format!("bench: unknown argument {other:?}\n{USAGE}")),
        }
    }
    options.files.sort_unstable();
    options.files.dedup();
    Ok(options)
}

fn table_options() -> CreateOptions {
    super::branch::named_table_options("bench_clone")
}

/// A built source table.
#[derive(Debug, Clone)]
struct Built {
    files: u32,
    dir: PathBuf,
    build_seconds: f64,
    /// Data files (parquet outside `.hoodie`), their bytes, and every object of the table.
    data_files: usize,
    data_bytes: u64,
    objects: usize,
}

/// Writes the source table of `files` one-row data files in `dir`.
fn build(rt: &Runtime, files: u32, dir: &Path) -> Result<Built, String> {
    let start = Instant::now();
    let storage = local(dir)?;
    rt.block_on(async {
        let table = Table::create(storage.clone(), table_options())
            .await
            .map_err(|e| format!("bench: creating the table in {}: {e}", dir.display()))?
            .with_write_options(WriteOptions {
                small_file_limit: 0,
                max_file_size: 1,
                ..WriteOptions::default()
            });
        let mut written = 0;
        while written < files {
            let to = (written + FILES_PER_COMMIT).min(files);
            let r = table
                .write(WriteOperation::BulkInsert, vec![file_rows(written, to)?])
                .await
                .map_err(|e| format!("bench: bulk insert of files {written}..{to}: {e}"))?;
            if r.files_written != (to - written) as usize {
                return Err(format!(
                    "bench: the bulk insert of {} rows wrote {} files",
                    to - written,
                    r.files_written
                ));
            }
            written = to;
            eprintln!(
                "bench clone: {files} files: {written} written ({:.0} s)",
                start.elapsed().as_secs_f64()
            );
        }
        Ok::<_, String>(())
    })?;
    let build_seconds = start.elapsed().as_secs_f64();
    let keys = rt
        .block_on(storage.list_all(""))
        .map_err(|e| format!("bench: listing {}: {e}", dir.display()))?;
    let data: Vec<_> = keys
        .iter()
        .filter(|o| !o.key.starts_with(".hoodie") && o.key.ends_with(".parquet"))
        .collect();
    if data.len() != files as usize {
        return Err(format!(
            "bench: {} has {} data files, expected {files}",
            dir.display(),
            data.len()
        ));
    }
    Ok(Built {
        files,
        dir: dir.to_path_buf(),
        build_seconds,
        data_files: data.len(),
        data_bytes: data.iter().map(|o| o.size).sum(),
        objects: keys.len(),
    })
}

/// Opens locations through the registry, each wrapped in a counting [`FaultInjectingStorage`],
/// and remembers every storage it opened with its location.
#[derive(Debug, Default)]
struct CountingOpener {
    inner: RegistryOpener,
    opened: Mutex<Vec<(String, Arc<FaultInjectingStorage>)>>,
}

impl LocationOpener for CountingOpener {
    fn open(&self, location: &str) -> arbor_storage::Result<Arc<dyn Storage>> {
        let counted = Arc::new(FaultInjectingStorage::new(self.inner.open(location)?));
        if let Ok(mut opened) = self.opened.lock() {
            opened.push((location.trim_end_matches('/').to_string(), counted.clone()));
        }
        Ok(counted)
    }
}

/// What the storages opened during one clone did, by full path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    /// Objects written below the target (put, put-if-absent, put-if-match, copy targets).
    target_writes: usize,
    /// Data files (outside `.hoodie/`) written or copied into the target.
    target_data_writes: usize,
    /// Objects written below the source (pins, savepoints).
    source_writes: usize,
    /// GETs and ranged GETs of the source's data files.
    data_reads: usize,
    /// HEADs of the source's data files.
    data_heads: usize,
    /// Every storage call.
    calls: usize,
}

fn is_data(relative: &str) -> bool {
    !relative.starts_with(".hoodie") && !relative.is_empty()
}

/// `path` relative to `root` when it lies below it.
fn below<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    path.strip_prefix(root)?.strip_prefix('/')
}

impl CountingOpener {
    fn counts(&self, source: &str, target: &str) -> Counts {
        let mut c = Counts::default();
        let Ok(opened) = self.opened.lock() else {
            return c;
        };
        for (location, storage) in opened.iter() {
            for op in storage.ops() {
                c.calls += 1;
                let keys: Vec<String> = match op.kind {
                    OpKind::Copy => op
                        .key
                        .split_once(" -> ")
                        .map(|(_, to)| vec![to.to_string()])
                        .unwrap_or_default(),
                    _ => vec![op.key.clone()],
                };
                for key in keys {
                    let full = format!("{location}/{key}");
                    if op.kind.is_write() && op.kind != OpKind::Delete {
                        if let Some(rel) = below(&full, target) {
                            c.target_writes += 1;
                            c.target_data_writes += usize::from(is_data(rel));
                        } else if below(&full, source).is_some() {
                            c.source_writes += 1;
                        }
                    }
                    if let Some(rel) = below(&full, source) {
                        if is_data(rel) {
                            match op.kind {
                                OpKind::Get | OpKind::GetRange => c.data_reads += 1,
                                OpKind::Head => c.data_heads += 1,
                                _ => {}
                            }
                        }
                    }
                }
                if op.kind == OpKind::Copy {
                    // The copy's source: a data file copied is a data file read.
                    if let Some((from, _)) = op.key.split_once(" -> ") {
                        let full = format!("{location}/{from}");
                        if below(&full, source).is_some_and(is_data) {
                            c.data_reads += 1;
                        }
                    }
                }
            }
        }
        c
    }
}

/// One timed clone: (seconds, outcome, counts).
fn clone_once(
    rt: &Runtime,
    source: &str,
    target: &Path,
    deep: bool,
) -> Result<(f64, CloneOutcome, Counts), String> {
    std::fs::create_dir_all(target)
        .map_err(|e| format!("bench: creating {}: {e}", target.display()))?;
    let target = normalize_location(&target.to_string_lossy())
        .map_err(|e| format!("bench: {}: {e}", target.display()))?;
    let opener = CountingOpener::default();
    let req = CloneRequest {
        source: source.to_string(),
        target: target.clone(),
        at: CloneAt::Main,
        tag_branch: None,
        deep,
    };
    let start = Instant::now();
    let out = rt
        .block_on(clone_table(&opener, &req))
        .map_err(|e| format!("bench: clone {source} -> {target} (deep {deep}): {e}"))?;
    let seconds = start.elapsed().as_secs_f64();
    Ok((seconds, out, opener.counts(source, &target)))
}

/// Rows of main of the table at `location` (a clone through its sources).
fn rows_at(rt: &Runtime, location: &str) -> Result<usize, String> {
    rt.block_on(async {
        let storage = open_location(location, &RegistryOpener::new(StorageOptions::default()))
            .await
            .map_err(|e| format!("bench: opening {location}: {e}"))?;
        let reader = TableReader::open(storage)
            .await
            .map_err(|e| format!("bench: reader of {location}: {e}"))?;
        let batches = reader
            .snapshot(None)
            .await
            .map_err(|e| format!("bench: reading {location}: {e}"))?;
        Ok(batches.iter().map(RecordBatch::num_rows).sum())
    })
}

/// The medians and last counts of one size.
#[derive(Debug, Clone, Default)]
struct Measured {
    list: f64,
    listed: usize,
    shallow: f64,
    shallow_counts: Counts,
    shallow_metadata_objects: usize,
    deep: f64,
    deep_counts: Counts,
    deep_files: usize,
    deep_bytes: u64,
    server_side: bool,
}

fn measure(rt: &Runtime, b: &Built, runs: usize, work: &Path) -> Result<Measured, String> {
    let source = normalize_location(&b.dir.to_string_lossy())
        .map_err(|e| format!("bench: {}: {e}", b.dir.display()))?;
    let storage = local(&b.dir)?;
    let (mut list, mut shallow, mut deep) = (Vec::new(), Vec::new(), Vec::new());
    let mut m = Measured::default();
    for run in 0..runs {
        eprintln!("bench clone: {} files: run {}/{runs}", b.files, run + 1);
        let start = Instant::now();
        let listed = rt
            .block_on(storage.list_all(""))
            .map_err(|e| format!("bench: listing {}: {e}", b.dir.display()))?;
        list.push(start.elapsed().as_secs_f64());
        m.listed = listed.len();

        let target = work.join(format!("shallow-{}-{run}", b.files));
        let (s, out, c) = clone_once(rt, &source, &target, false)?;
        if c.data_reads != 0 || c.target_data_writes != 0 || out.files_copied != 0 {
            return Err(format!(
                "bench: the shallow clone read {} data files and wrote {} into the target \
                 ({} copied)",
                c.data_reads, c.target_data_writes, out.files_copied
            ));
        }
        if out.data_files != b.data_files {
            return Err(format!(
                "bench: the shallow clone references {} data files, the source has {}",
                out.data_files, b.data_files
            ));
        }
        let rows = rows_at(rt, &out.location)?;
        if rows != b.files as usize {
            return Err(format!("bench: the shallow clone reads {rows} rows"));
        }
        shallow.push(s);
        m.shallow_counts = c;
        m.shallow_metadata_objects = out.metadata_objects;

        let target_deep = work.join(format!("deep-{}-{run}", b.files));
        let (s, out, c) = clone_once(rt, &source, &target_deep, true)?;
        // Every data file, plus the metadata table's files and the partition markers.
        if out.files_copied < b.data_files || c.target_data_writes < b.data_files {
            return Err(format!(
                "bench: the deep clone copied {} files ({} outside .hoodie), the snapshot has {} \
                 data files",
                out.files_copied, c.target_data_writes, b.data_files
            ));
        }
        let rows = rows_at(rt, &out.location)?;
        if rows != b.files as usize {
            return Err(format!("bench: the deep clone reads {rows} rows"));
        }
        deep.push(s);
        m.deep_counts = c;
        m.deep_files = out.files_copied;
        m.deep_bytes = out.bytes_copied;
        m.server_side = out.server_side_copy;

        // Untimed: remove both clones, then the shallow one's pin.
        for t in [&target, &target_deep] {
            std::fs::remove_dir_all(t)
                .map_err(|e| format!("bench: removing {}: {e}", t.display()))?;
        }
        let pruned = rt
            .block_on(prune_pins(&RegistryOpener::default(), &source))
            .map_err(|e| format!("bench: pruning the pins of {source}: {e}"))?;
        if !pruned.kept.is_empty() {
            return Err(format!(
                "bench: pins kept after removing the clones: {pruned:?}"
            ));
        }
    }
    let med = super::med;
    m.list = med("list", &list)?;
    m.shallow = med("shallow clone", &shallow)?;
    m.deep = med("deep clone", &deep)?;
    Ok(m)
}

fn ms(s: f64) -> String {
    format!("{:.1}", s * 1e3)
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.3}", a / b)
    } else {
        "-".to_string()
    }
}

fn sizes_table(results: &[(Built, Measured)]) -> String {
    let mut out = String::new();
    out.push_str("| data files | data bytes | source objects | built in (s) |\n");
    out.push_str("|---:|---:|---:|---:|\n");
    for (b, _) in results {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} |",
            b.data_files, b.data_bytes, b.objects, b.build_seconds
        );
    }
    out
}

fn timings_table(results: &[(Built, Measured)]) -> String {
    let mut out = String::new();
    out.push_str(
        "| data files | list_all (ms) | shallow clone (ms) | objects written (target + source) | \
         data files read / copied | data-file HEADs | deep clone (ms) | deep objects written | \
         deep files / bytes copied (data + MDT + markers) | shallow ÷ list | shallow ÷ deep |\n",
    );
    out.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (b, m) in results {
        let s = &m.shallow_counts;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} + {} | {} / {} | {} | {} | {} | {} / {}{} | {} | {} |",
            b.data_files,
            ms(m.list),
            ms(m.shallow),
            s.target_writes,
            s.source_writes,
            s.data_reads,
            s.target_data_writes,
            s.data_heads,
            ms(m.deep),
            m.deep_counts.target_writes,
            m.deep_files,
            m.deep_bytes,
            if m.server_side { " (server-side)" } else { "" },
            ratio(m.shallow, m.list),
            ratio(m.shallow, m.deep),
        );
    }
    out
}

fn growth_table(results: &[(Built, Measured)]) -> String {
    let mut out = String::new();
    let (Some((b0, m0)), Some((b1, m1))) = (results.first(), results.last()) else {
        return out;
    };
    if b0.files == b1.files {
        return out;
    }
    let _ = writeln!(
        out,
        "| growth ({}× the data files) | list_all | shallow clone | shallow objects written | deep clone |",
        b1.files / b0.files.max(1)
    );
    out.push_str("|---|---:|---:|---:|---:|\n");
    let _ = writeln!(
        out,
        "| {} ÷ {} files | {}× | {}× | {}× | {}× |",
        b1.files,
        b0.files,
        ratio(m1.list, m0.list),
        ratio(m1.shallow, m0.shallow),
        ratio(
            m1.shallow_counts.target_writes as f64,
            m0.shallow_counts.target_writes as f64
        ),
        ratio(m1.deep, m0.deep),
    );
    out
}

/// Runs `cargo xtask bench clone ...` (`args` starts with `clone`).
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
    } = super::start("clone", options.dir.as_deref())?;
    let mut results = Vec::new();
    for &n in &options.files {
        let dir = work.join(format!("source-{n}"));
        eprintln!("bench clone: writing {n} one-row files");
        let b = build(&rt, n, &dir)?;
        let m = measure(&rt, &b, options.runs, &work)?;
        results.push((b, m));
    }
    println!();
    println!("machine: {}", machine.describe());
    println!("load average (1, 5, 15 min) at the start: {load}");
    println!(
        "sources: copy-on-write, metadata table, {PARTITIONS} partitions, one row per data file \
         (bulk inserts of up to {FILES_PER_COMMIT}); clones of main's head into local \
         directories; median of {} runs; whole bench {:.0} s",
        options.runs,
        started.elapsed().as_secs_f64()
    );
    println!();
    print!("{}", sizes_table(&results));
    println!();
    print!("{}", timings_table(&results));
    let growth = growth_table(&results);
    if !growth.is_empty() {
        println!();
        print!("{growth}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn a(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn test_parse_args_defaults_quick_and_bad_input() {
        let o = parse_args(&a("clone")).unwrap();
        assert_eq!((o.files, o.runs), (vec![1_000, 100_000], 3));
        let o = parse_args(&a("clone --files 2000,100 --runs 2")).unwrap();
        assert_eq!((o.files, o.runs), (vec![100, 2_000], 2));
        let o = parse_args(&a("clone --quick")).unwrap();
        assert_eq!((o.files, o.runs), (vec![100, 2_000], 2));
        assert!(parse_args(&a("clone --files 0")).is_err());
        assert!(parse_args(&a("clone --bogus")).is_err());
        assert!(parse_args(&a("ttl")).is_err());
    }

    #[test]
    fn test_below_and_is_data() {
        assert_eq!(below("/t/c/p01/x.parquet", "/t/c"), Some("p01/x.parquet"));
        assert_eq!(below("/t/cc/x", "/t/c"), None);
        assert!(is_data("p01/x.parquet"));
        assert!(!is_data(".hoodie/timeline/1.commit"));
    }

    /// A small table through the whole measurement (debug build): the checks pass, and the
    /// shallow clone writes metadata only while the deep clone copies every data file.
    #[test]
    fn test_build_and_measure_small_table_checks_pass() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let work = tempfile::tempdir().unwrap();
        let b = build(&rt, 30, &work.path().join("source")).unwrap();
        assert_eq!(b.data_files, 30);
        let m = measure(&rt, &b, 1, work.path()).unwrap();
        assert_eq!(m.shallow_counts.data_reads, 0);
        assert_eq!(m.shallow_counts.target_data_writes, 0);
        assert!(m.shallow_counts.target_writes > 0);
        assert!(m.deep_files >= 30, "{m:?}");
        assert!(m.deep_counts.target_data_writes >= 30, "{m:?}");
        assert!(m.deep_counts.target_writes >= 30, "{:?}", m.deep_counts);
        let t = timings_table(&[(b, m)]);
        eprintln!("{t}");
        assert!(t.contains("| 30 |"), "{t}");
    }
}
