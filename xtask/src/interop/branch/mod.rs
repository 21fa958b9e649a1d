//! The branch checks (RFC-116): what a peer reader sees of branches and publications.
//!
//! For each table of [`BranchScenario::all`] ({COW, MOR} × {without, with the record index}, all
//! with a metadata table; hive-style partitioned by `region`) the sequence is:
//!
//! 1. `main`: on main an insert, an upsert and a delete. arbor's and hudi-rs' reads of main are
//!    recorded (hudi-rs reads a copy of the table taken then, as the matrix's `snapshot`
//!    queries do), and must agree with each other and with the model (`main`).
//! 2. `branch`: branch `audit` is created from main's head and written: upserts, a delete, a new
//!    partition, for merge-on-read a compaction, then a clean of the branch through
//!    `arbor_branching::clean` (which must delete some of the branch's own superseded files)
//!    and a last upsert. Then hudi-rs reads main (the table base path) with the same rows, meta
//!    columns included, as before the branch writes (`peer_main_kept`) and as arbor's main
//!    (`peer_main_arbor`); arbor reads the branch as the model says (`arbor_branch`); hudi-rs
//!    reads the branch through a peer view of `.hoodie/branches/audit/` ([`peer_view`]) with
//!    arbor's rows (`peer_branch_view`); `arbor_branching::validate` finds no discrepancy on
//!    the branch and on main (`validate_branch`, `validate_main`).
//! 3. `published`: the branch is published (`publish`: main now resolves to the new `p<N>`).
//!    arbor's main (`TableReader::open`) reads what arbor read from the branch before
//!    publishing (`arbor_main_published`), hudi-rs reading a peer view of `p<N>` gives the same
//!    rows (`peer_publication_view`), and main validates (`validate_main`). hudi-rs at the
//!    table path itself (no view: the root `hoodie.properties` files now point at `p<N>`'s
//!    timelines) reads exactly arbor's main and the model (`peer_main_published`).
//! 4. `main writes after p<N>`: an upsert, a delete and an insert on main (they land in
//!    `p<N>`'s timeline), then a clean of main; hudi-rs at the table path reads arbor's main and
//!    the model (`peer_main_later_writes`), main validates.
//! 5. `published p<M>`: branch `audit2` from main's head gets an upsert and is published
//!    (`publish_again`: a greater number, both publications repointed the root); hudi-rs at
//!    the table path reads arbor's main and the model (`peer_main_published_again`).
//!
//! hudi-rs knows nothing of branches: it reads `.hoodie/` and `.hoodie/metadata/.hoodie/`,
//! whose `hoodie.properties` lead it to main after a publication (`arbor_timeline::legacy`). A
//! peer view ([`peer_view`]) is a directory whose `.hoodie/` holds the root's data-side
//! `hoodie.properties` and `timeline/`, whose `.hoodie/metadata/` holds the table's real
//! metadata-table partitions and, as `.hoodie/`, the root's MDT-side meta directory, and whose
//! other entries are the table's data partitions (all symbolic links).
//!
//! Every side is digested in one `peer_digest.py --batch` run (its own, after the writes); each
//! comparison becomes one decided check of the report. Two sides agree when their row counts and
//! `data_sha256` are equal and, when both are read from the table (not the model), also their
//! `rows_sha256` (meta columns) and schemas.

use std::collections::HashMap;
use std::path::Path;

use self::decide::decide_same;
use self::record::Pending;
use self::record::PendingCheck;
use self::sequence::run_scenario;
use crate::interop::check::{Check, Kind};
use crate::interop::peer;

mod cases;
mod decide;
mod record;
mod sequence;
mod view;

pub use cases::BranchScenario;

/// Runs the branch scenarios whose name contains `only` (all for `None`) under `work/branch`,
/// digests every reading with `python` and returns the decided checks. Branches need a metadata
/// table, so nothing runs without one (`metadata_table` false).
pub fn run(
    runtime: &tokio::runtime::Runtime,
    python: &Path,
    work: &Path,
    only: Option<&str>,
    metadata_table: bool,
    table_version: arbor_timeline::config::TableVersion,
) -> Vec<Check> {
    let scenarios: Vec<BranchScenario> = BranchScenario::all()
        .into_iter()
        .filter(|s| only.is_none_or(|o| s.name().contains(o)))
        .map(|s| BranchScenario { table_version, ..s })
        .filter(|s| {
            s.base_format != arbor_table::BaseFormat::Lance
                || table_version == arbor_timeline::config::TableVersion::Nine
        })
        .collect();
    if scenarios.is_empty() {
        return Vec::new();
    }
    if !metadata_table {
        eprintln!("interop: branch scenarios skipped: branches need a metadata table");
        return Vec::new();
    }
    let dir = work.join("branch");
    let mut all: Vec<(String, PendingCheck)> = Vec::new();
    for s in scenarios {
        eprintln!("interop: writing {}", s.name());
        let checks = runtime.block_on(run_scenario(s, &dir.join(s.name().replace('/', "-"))));
        all.extend(checks.into_iter().map(|c| (s.name(), c)));
    }
    let mut requests = Vec::new();
    let mut ids: Vec<Vec<Result<usize, String>>> = Vec::new();
    for (_, c) in &all {
        let mut mine = Vec::new();
        if let Pending::Same(readings) = &c.pending {
            for r in readings {
                mine.push(match &r.request {
                    Ok(req) => {
                        requests.push(req.clone());
                        Ok(requests.len() - 1)
                    }
                    Err(e) => Err(e.clone()),
                });
            }
        }
        ids.push(mine);
    }
    let script = crate::repo_root().join("scripts").join("peer_digest.py");
    let answers = if requests.is_empty() {
        Ok(HashMap::new())
    } else {
        peer::digest_all(python, &script, &dir, &requests)
    };
    all.into_iter()
        .zip(ids)
        .map(|((scenario, c), ids)| {
            let result = match c.pending {
                Pending::Done(r) => r,
                Pending::Same(readings) => match &answers {
                    Ok(answers) => decide_same(&readings, &ids, answers),
                    Err(e) => Err(e.clone()),
                },
            };
            Check {
                scenario,
                position: c.position,
                instant: c.instant,
                query: c.query,
                kind: Kind::Local(result),
            }
        })
        .collect()
}
