//! `cargo xtask interop`: the interop scenario matrix.
//!
//! Eight tables, {COW, MOR} × {hive-style partitioned, non-hive partitioned, non-partitioned}
//! and two with Lance base files (`lance/cow/hive`, `lance/mor/nonpartitioned`), are written through `arbor_table::Table` with one sequence of operations ([`scenario`])
//! while an in-memory [`model`] follows every instant. Then, for every completed instant of
//! every table, three queries are answered three ways ([`check`]): the snapshot of the table
//! as it was right after the instant (a copy taken then), time travel to the instant on the
//! final table, and the incremental range (previous completion time, this completion time] on
//! the final table; by arbor's reader, by hudi-rs 0.5.0 (`scripts/peer_digest.py`) and from
//! the model. Row counts, `data_sha256` (the canonicalisation of `scripts/canonical_rows.py`)
//! and schemas must agree ([`report`]).
//!
//! The tables are created with a metadata table (`--no-metadata-table`: without), so both
//! readers list files through its FILES partition. [`metadata`] adds, per instant, `mdt`:
//! `arbor_mdt::validate::validate_table` finds no discrepancy in the table right after it (or,
//! without a metadata table, that there is none); and per table, `hidden`: with the metadata
//! table's deltacommit of the latest data instant T deleted in a copy, validate_table reports
//! exactly T's files as missing from it and hudi-rs plans none of them, while on the original
//! it plans all of them (hudi-rs lists through arbor's FILES partition, spec 6.6).
//! [`branch`] adds the branch scenarios (`branch/cow`, ..., `branch/mor-rli`): hudi-rs reads main
//! unchanged after branch writes, and a publication (and the branch) through a peer view with
//! the rows arbor read from the branch.
//!
//! [`fixtures`] adds the fixture-management stage (`fixtures/cow/v6_empty`, `fixtures/mor/avro/v9_txns_simple_meta`, ...):
//! every Spark-written table of `../shared/fixtures` goes through upgrade (version
//! 6), delete, tag, re-insert, clean, read the tag, `mdt init`, branch, delete on the branch,
//! publish and validate with the `arbor` CLI, its rows checked after every step against a
//! model and hudi-rs; one check per table.
//!
//! [`spark`] adds the Spark stage (`spark/<hudi version>/<scenario>/<check>`): Java Hudi 1.0,
//! 1.1 and 1.2 under Spark read, write and manage arbor's tables and arbor manages theirs;
//! `--no-spark` leaves it out, `--only spark` runs only it.
//!
//! Usage: `cargo xtask interop [--keep DIR] [--only SUBSTRING] [--no-late-arrivals]
//! [--no-metadata-table] [--table-version 8|9] [--fixtures-allow-fail] [--no-spark]`. The tables are created
//! at table version 9 (`--table-version 8`: version 8). `--keep` writes the tables under DIR and keeps them; otherwise they
//! go to a temporary directory that is kept (and named) only when a check fails. `--only` runs the scenarios whose name
//! (`cow/hive`, `mor/plain`, `mor/nonpartitioned`, `fixtures/`, ...) contains SUBSTRING.
//! `--fixtures-allow-fail` still runs, reports and counts the fixture tables, but a failing one
//! no longer makes the run fail (nothing uses it by default).
//! By default the upserts also carry late arrivals (updates with a smaller ordering value than
//! the stored row, see `scenario::Scenario::late_arrivals`); `--no-late-arrivals` leaves them
//! out (`--late-arrivals`, the default, is still accepted). `--no-metadata-table` creates the
//! tables without a metadata table, for comparison (`mdt` then checks there is none and `hidden`
//! does not run). The peer Python is `$ARBOR_PEER_PYTHON`, else what
//! `scripts/peer.sh` prints. Closes with `interop: N passed, M failed`; exits non-zero when
//! M > 0 or nothing was checked.

mod branch;
mod check;
mod data;
mod fixtures;
mod metadata;
mod model;
mod peer;
mod report;
mod scenario;
pub(crate) mod spark;

use std::path::{Path, PathBuf};

use check::{Check, Kind};
use report::CheckIds;
use scenario::Scenario;

/// Runs the matrix. `python`: the peer Python (`None`: `$ARBOR_PEER_PYTHON`, else
/// `scripts/peer.sh`).
pub fn run(args: &[String], python: Option<PathBuf>) -> Result<(), String> {
    let mut keep: Option<PathBuf> = None;
    let mut only: Option<String> = None;
    let mut late_arrivals = true;
    let mut metadata_table = true;
    let mut table_version = arbor_timeline::config::TableVersion::default();
    let mut allow_fixture_failures = false;
    let mut spark = true;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--keep" => keep = it.next().map(PathBuf::from),
            "--only" => only = it.next().cloned(),
            "--late-arrivals" => late_arrivals = true,
            "--no-late-arrivals" => late_arrivals = false,
            "--no-metadata-table" => metadata_table = false,
            "--table-version" => {
                let given = it.next().map(String::as_str).unwrap_or_default();
                table_version = given
                    .parse::<u32>()
                    .ok()
                    .and_then(arbor_timeline::config::TableVersion::writable_from_code)
                    .ok_or_else(|| {
                        format!("interop: --table-version {given:?}: arbor writes 8 or 9")
                    })?;
            }
            "--fixtures-allow-fail" => allow_fixture_failures = true,
            "--no-spark" => spark = false,
            other => {
                return Err(format!(
                    "interop: unknown argument {other:?} (usage: interop [--keep DIR] [--only SUBSTRING] [--no-late-arrivals] [--no-metadata-table] [--table-version 8|9] [--fixtures-allow-fail] [--no-spark])"
                ))
            }
        }
    }
    let python = match python {
        Some(p) => p,
        None => peer_python()?,
    };
    let (work, temp) = match keep {
        Some(dir) => {
            if dir.exists() {
                return Err(format!(
                    "interop: {} exists; --keep wants a new directory",
                    dir.display()
                ));
            }
            (dir, None)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("arbor-interop-")
                .tempdir()
                .map_err(|e| format!("interop: cannot create a temporary directory: {e}"))?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let scenarios: Vec<Scenario> = Scenario::all(late_arrivals, metadata_table)
        .into_iter()
        .filter(|s| only.as_ref().is_none_or(|o| s.name().contains(o.as_str())))
        .map(|s| Scenario { table_version, ..s })
        // Lance base files need table version 9 (Hudi 1.2).
        .filter(|s| {
            s.base_format != arbor_table::BaseFormat::Lance
                || table_version == arbor_timeline::config::TableVersion::Nine
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("interop: tokio runtime: {e}"))?;
    let mut checks = runtime.block_on(write_and_read(&scenarios, &work));
    checks.extend(branch::run(
        &runtime,
        &python,
        &work,
        only.as_deref(),
        metadata_table,
        table_version,
    ));
    let (mut passed, mut failed) = digest_and_report(&python, &work, &checks)?;
    // A stage that cannot run (no CLI build, no peer Python) is one failure, never allowed.
    let (fixtures_passed, fixture_failures) = match fixtures::run(&python, &work, only.as_deref()) {
        Ok(counts) => counts,
        Err(e) => {
            println!("FAIL fixtures: {e}");
            failed += 1;
            (0, 0)
        }
    };
    passed += fixtures_passed;
    failed += fixture_failures;
    // The Java peer: a stage that cannot run in CI is one failure.
    if spark && only.as_deref().is_none_or(|o| o.starts_with("spark")) {
        match fixtures::build_cli().and_then(|arbor| spark::run(&work, &arbor)) {
            Ok((p, f)) => {
                passed += p;
                failed += f;
            }
            Err(e) => {
                println!("FAIL spark: {e}");
                failed += 1;
            }
        }
    }
    let allowed = if allow_fixture_failures {
        fixture_failures
    } else {
        0
    };
    if allowed > 0 {
        println!(
            "interop: {passed} passed, {failed} failed ({allowed} failing fixture tables allowed by --fixtures-allow-fail)"
        );
    } else {
        println!("interop: {passed} passed, {failed} failed");
    }
    if failed == allowed && passed + failed > 0 {
        if failed > 0 {
            let kept = temp.map(tempfile::TempDir::keep).unwrap_or(work);
            eprintln!("interop: tables kept in {}", kept.display());
        }
        return Ok(());
    }
    if let Some(t) = temp {
        let kept = t.keep();
        eprintln!("interop: tables kept in {}", kept.display());
    }
    if passed == 0 && failed == 0 {
        Err("interop: nothing was checked".to_string())
    } else {
        Err(format!("interop: {failed} checks failed"))
    }
}

/// The peer Python: `$ARBOR_PEER_PYTHON`, else what `scripts/peer.sh` prints.
fn peer_python() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("ARBOR_PEER_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    crate::script_output("peer.sh", &[])
        .map(PathBuf::from)
        .map_err(|e| format!("interop needs the peer reader: {e}"))
}

/// Writes every scenario table, then builds its checks (reading with arbor).
async fn write_and_read(scenarios: &[Scenario], work: &Path) -> Vec<Check> {
    let mut checks = Vec::new();
    for s in scenarios {
        let dir = work.join(s.name().replace('/', "-"));
        eprintln!("interop: writing {}", s.name());
        let outcome = scenario::run(*s, &dir).await;
        checks.extend(check::build(&outcome, dir.join("digests")).await);
    }
    checks
}

/// Digests every side of every check in one `peer_digest.py --batch` run, decides the checks
/// and prints the report. Returns `(passed, failed)`.
fn digest_and_report(
    python: &Path,
    work: &Path,
    checks: &[Check],
) -> Result<(usize, usize), String> {
    let mut requests = Vec::new();
    let mut tables: Vec<&Path> = Vec::new();
    let mut ids = Vec::new();
    for c in checks {
        let mut id = CheckIds::default();
        if let Kind::Hidden(Ok(h)) = &c.kind {
            id.original_slices = Some(tables.len());
            tables.push(&h.original);
            id.copy_slices = Some(tables.len());
            tables.push(&h.copy);
        }
        if let Kind::Rows { arbor, peer, model } = &c.kind {
            let mut add = |side: &check::Side,
                           slot: &mut Option<usize>,
                           err: &mut Option<String>| match side {
                Ok(req) => {
                    *slot = Some(requests.len());
                    requests.push(req.clone());
                }
                Err(e) => *err = Some(e.clone()),
            };
            add(arbor, &mut id.arbor, &mut id.arbor_error);
            add(peer, &mut id.peer, &mut id.peer_error);
            add(model, &mut id.model, &mut id.model_error);
        }
        ids.push(id);
    }
    let script = crate::repo_root().join("scripts").join("peer_digest.py");
    let answers = if requests.is_empty() {
        Default::default()
    } else {
        peer::digest_all(python, &script, work, &requests)?
    };
    let slices = if tables.is_empty() {
        Default::default()
    } else {
        peer::file_slices(python, work, &tables)?
    };
    let verdicts: Vec<_> = checks
        .iter()
        .zip(&ids)
        .map(|(c, id)| report::decide(c, &answers, &slices, id))
        .collect();
    Ok(report::print(checks, &verdicts))
}
