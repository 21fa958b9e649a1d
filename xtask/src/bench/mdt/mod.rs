//! `cargo xtask bench mdt`: what the metadata table buys.
//!
//! Sections (`--only` runs one; by default every written section runs):
//! - `listing` ([`listing`]): listing every file of a table with many partitions through the
//!   FILES partition of the metadata table, against directory listing and against a raw
//!   recursive listing of the table, on the local file system and on S3;
//! - `upsert` ([`upsert`]): upserts located through the record index against the simple index,
//!   on tables of growing size, and record-index point lookups per second.
//!
//! Usage: `cargo xtask bench mdt [--only listing|upsert] [--sizes 100x20,1000x20] [--runs 5]
//! [--no-s3] [--s3-build upload|write] [--dir DIR] [--upsert-rows 100000,1000000,5000000]
//! [--upsert-batch 10000] [--lookups 1000]`. `--sizes` gives the tables as
//! `PARTITIONSxFILES` (files per partition). `--no-s3` measures the local file system only;
//! `--s3-build write` builds the S3 tables by writing them through arbor on S3 instead of
//! copying the local table there (see [`listing`]). `--dir` keeps the local tables under DIR
//! (a new directory). Like `bench data-path`, a debug build re-runs itself as the release
//! xtask. Progress goes to stderr; the machine and the Markdown tables to stdout.

mod listing;
pub(super) mod s3;
mod upsert;

use std::path::PathBuf;
use std::time::Instant;

use tokio::runtime::Runtime;

use super::report::{self, Machine};

const USAGE: &str = "usage: cargo xtask bench mdt [--only listing|upsert] [--sizes PxF,PxF] \
                     [--runs N] [--no-s3] [--s3-build upload|write] [--dir DIR] \
                     [--upsert-rows N,N] [--upsert-batch N] [--lookups N]";

/// One part of the bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    /// Listing through FILES against directory listing.
    Listing,
    /// Upserts located through the record index against the simple index.
    Upsert,
}

/// The sections run when `--only` is not given: every section that is written.
const DEFAULT_SECTIONS: &[Section] = &[Section::Listing, Section::Upsert];

/// The shape of a table of the listing section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Partitions.
    pub partitions: u32,
    /// Data files (file groups, one base file each) per partition.
    pub files: u32,
}

impl Shape {
    /// Data files of the whole table.
    pub fn data_files(&self) -> usize {
        self.partitions as usize * self.files as usize
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} × {}", self.partitions, self.files)
    }
}

/// How the S3 tables are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum S3Build {
    /// The local table, copied object by object.
    Upload,
    /// Written through arbor directly on S3, the same commits as locally.
    Write,
}

/// Bench options.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    sections: Vec<Section>,
    sizes: Vec<Shape>,
    runs: usize,
    s3: bool,
    s3_build: S3Build,
    dir: Option<PathBuf>,
    upsert_rows: Vec<u64>,
    upsert_batch: u64,
    lookups: u64,
}

fn parse_count(flag: &str, v: &str) -> Result<u64, String> {
    v.trim()
        .replace('_', "")
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("bench: {flag} {v:?}: a positive number"))
}

fn parse_shape(s: &str) -> Result<Shape, String> {
    let bad = || format!("bench: size {s:?}: expected PARTITIONSxFILES, both positive");
    let (p, f) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let num = |v: &str| {
        v.trim()
            .replace('_', "")
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
    };
    Ok(Shape {
        partitions: num(p).ok_or_else(bad)?,
        files: num(f).ok_or_else(bad)?,
    })
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("mdt") => {}
        _ => return Err(USAGE.to_string()),
    }
    let mut options = Options {
        sections: DEFAULT_SECTIONS.to_vec(),
        sizes: vec![
            Shape {
                partitions: 100,
                files: 20,
            },
            Shape {
                partitions: 1_000,
                files: 20,
            },
        ],
        runs: 5,
        s3: true,
        s3_build: S3Build::Upload,
        dir: None,
        upsert_rows: vec![100_000, 1_000_000, 5_000_000],
        upsert_batch: 10_000,
        lookups: 1_000,
    };
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("bench: {a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--only" => {
                options.sections = vec![match value()?.as_str() {
                    "listing" => Section::Listing,
                    "upsert" => Section::Upsert,
                    other => return Err(format!("bench: --only {other:?}\n{USAGE}")),
                }]
            }
            "--sizes" => {
                options.sizes = value()?
                    .split(',')
                    .map(parse_shape)
                    .collect::<Result<_, _>>()?;
            }
            "--runs" => {
                let v = value()?;
                options.runs = v
                    .parse::<usize>()
                    .ok()
                    .filter(|r| *r > 0)
                    .ok_or_else(|| format!("bench: --runs {v:?}: a positive number"))?;
            }
            "--no-s3" => options.s3 = false,
            "--s3-build" => {
                options.s3_build = match value()?.as_str() {
                    "upload" => S3Build::Upload,
                    "write" => S3Build::Write,
                    other => return Err(format!("bench: --s3-build {other:?}\n{USAGE}")),
                }
            }
            "--dir" => options.dir = Some(PathBuf::from(value()?)),
            "--upsert-rows" => {
                options.upsert_rows = value()?
                    .split(',')
                    .map(|v| parse_count("--upsert-rows", v))
                    .collect::<Result<_, _>>()?;
            }
            "--upsert-batch" => options.upsert_batch = parse_count("--upsert-batch", value()?)?,
            "--lookups" => options.lookups = parse_count("--lookups", value()?)?,
            other => return Err(format!("bench: unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(options)
}

/// What every section gets: the runtime, where to put local tables, the S3 server (`None`:
/// local only) and the options.
struct Context {
    rt: Runtime,
    work: PathBuf,
    s3: Option<s3::S3Env>,
    runs: usize,
    sizes: Vec<Shape>,
    s3_build: S3Build,
    /// Keep the tables (`--dir` given).
    keep_tables: bool,
}

/// Runs `cargo xtask bench mdt ...` (`args` starts with `mdt`).
pub fn run(args: &[String]) -> Result<(), String> {
    let options = parse_args(args)?;
    if cfg!(debug_assertions) {
        return super::run_release(args);
    }
    let (work, _temp) = super::work_dir(options.dir.as_deref(), "arbor-bench-mdt-")?;
    let s3 = if options.s3 { Some(s3::env()?) } else { None };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("bench: tokio runtime: {e}"))?;
    let machine = Machine::detect();
    let load = report::load_average();
    eprintln!(
        "bench mdt: {}; local tables under {}",
        machine.describe(),
        work.display()
    );
    let ctx = Context {
        rt,
        work,
        s3,
        runs: options.runs,
        sizes: options.sizes.clone(),
        s3_build: options.s3_build,
        keep_tables: options.dir.is_some(),
    };
    let started = Instant::now();
    let mut out = String::new();
    for section in &options.sections {
        match section {
            Section::Listing => out.push_str(&listing::run(&ctx)?),
            Section::Upsert => out.push_str(&upsert::run(
                &ctx,
                &options.upsert_rows,
                options.upsert_batch,
                options.lookups,
            )?),
        }
    }
    println!();
    println!("machine: {}", machine.describe());
    println!("load average (1, 5, 15 min) at the start: {load}");
    if let Some(s3) = &ctx.s3 {
        println!("S3: {}", s3.describe());
    }
    println!(
        "runs: median of {}; whole bench {:.0} s",
        options.runs,
        started.elapsed().as_secs_f64()
    );
    print!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn test_parse_args_defaults_listing_two_sizes_with_s3() {
        let o = parse_args(&args(&["mdt"])).unwrap();
        assert_eq!(o.sections, vec![Section::Listing, Section::Upsert]);
        assert_eq!(o.upsert_rows, vec![100_000, 1_000_000, 5_000_000]);
        assert_eq!((o.upsert_batch, o.lookups), (10_000, 1_000));
        assert_eq!(
            o.sizes,
            vec![
                Shape {
                    partitions: 100,
                    files: 20
                },
                Shape {
                    partitions: 1_000,
                    files: 20
                }
            ]
        );
        assert_eq!((o.runs, o.s3, o.s3_build), (5, true, S3Build::Upload));
        assert_eq!(o.dir, None);
    }

    #[test]
    fn test_parse_args_options_applied() {
        let o = parse_args(&args(&[
            "mdt",
            "--only",
            "upsert",
            "--sizes",
            "10x2, 1_000X3",
            "--runs",
            "3",
            "--no-s3",
            "--s3-build",
            "write",
            "--dir",
            "d",
        ]))
        .unwrap();
        assert_eq!(o.sections, vec![Section::Upsert]);
        assert_eq!(
            o.sizes,
            vec![
                Shape {
                    partitions: 10,
                    files: 2
                },
                Shape {
                    partitions: 1_000,
                    files: 3
                }
            ]
        );
        assert_eq!((o.runs, o.s3, o.s3_build), (3, false, S3Build::Write));
        assert_eq!(o.dir, Some(PathBuf::from("d")));
    }

    #[test]
    fn test_parse_args_bad_input_rejected() {
        for bad in [
            &["data-path"][..],
            &["mdt", "--only", "both"],
            &["mdt", "--sizes", "10"],
            &["mdt", "--sizes", "0x5"],
            &["mdt", "--sizes", "5xa"],
            &["mdt", "--runs", "0"],
            &["mdt", "--runs"],
            &["mdt", "--s3-build", "copy"],
            &["mdt", "--wat"],
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn test_shape_display_and_data_files() {
        let s = parse_shape("1000x20").unwrap();
        assert_eq!(s.to_string(), "1000 × 20");
        assert_eq!(s.data_files(), 20_000);
    }
}
