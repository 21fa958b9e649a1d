//! The branch checks (issue 6, RFC-116): what a peer reader sees of branches and publications.
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
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_branching::{create_branch, open_branch, open_reader, publish, BranchSource};
use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_timeline::config::TableType;
use arbor_timeline::{resolve_main, InstantTime, MetaRoot};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use serde_json::{json, Value};

use super::check::{Check, Kind, Side};
use super::data::{self, hash, key, row, Row};
use super::model::Model;
use super::peer;
use super::report::Digest;
use super::scenario::copy_dir;

/// The working branch every scenario writes.
pub const BRANCH: &str = "audit";
/// The partition value only the branch writes.
const NEW_REGION: &str = "africa";
/// Rows of main's first insert.
const MAIN_ROWS: u64 = 150;

/// One table of the branch checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BranchScenario {
    pub table_type: TableType,
    /// The record index is created on main right after the first insert.
    pub record_index: bool,
}

impl BranchScenario {
    /// {COW, MOR} × {without, with the record index}, all with the metadata table.
    pub fn all() -> Vec<BranchScenario> {
        let mut out = Vec::new();
        for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
            for record_index in [false, true] {
                out.push(BranchScenario {
                    table_type,
                    record_index,
                });
            }
        }
        out
    }

    /// `branch/cow`, `branch/mor-rli`, ...
    pub fn name(&self) -> String {
        let t = match self.table_type {
            TableType::CopyOnWrite => "cow",
            TableType::MergeOnRead => "mor",
        };
        let rli = if self.record_index { "-rli" } else { "" };
        format!("branch/{t}{rli}")
    }

    fn create_options(&self) -> CreateOptions {
        CreateOptions {
            name: format!("interop_{}", self.name().replace(['/', '-'], "_")),
            table_type: self.table_type,
            record_key_fields: vec![data::KEY.to_string()],
            partition_fields: vec![data::PARTITION.to_string()],
            hive_style_partitioning: true,
            ordering_field: Some(data::ORDERING.to_string()),
            merge_mode: None,
            schema: data::schema(),
            metadata_table: true,
        }
    }
}

/// One reading of rows to digest.
#[derive(Debug)]
struct Reading {
    /// What was read, by whom, when (`hudi-rs main after branch writes`).
    label: String,
    /// The digest request, or why there is none.
    request: Side,
    /// The rows carry the `_hoodie_*` meta columns (read from the table, not the model).
    meta: bool,
}

impl Reading {
    fn table(label: &str, request: Side) -> Reading {
        Reading {
            label: label.to_string(),
            request,
            meta: true,
        }
    }

    fn model(label: &str, request: Side) -> Reading {
        Reading {
            label: label.to_string(),
            request,
            meta: false,
        }
    }
}

/// What one check compares before it is decided.
#[derive(Debug)]
enum Pending {
    /// Decided without digests.
    Done(Result<(), String>),
    /// Every reading must agree with the first.
    Same(Vec<Reading>),
}

#[derive(Debug)]
struct PendingCheck {
    position: String,
    instant: String,
    query: String,
    pending: Pending,
}

/// Collects one scenario's checks and writes its Arrow files.
struct Recorder {
    dir: PathBuf,
    next: usize,
    position: String,
    instant: String,
    checks: Vec<PendingCheck>,
}

impl Recorder {
    fn push(&mut self, query: &str, pending: Pending) {
        self.checks.push(PendingCheck {
            position: self.position.clone(),
            instant: self.instant.clone(),
            query: query.to_string(),
            pending,
        });
    }

    fn at(&mut self, position: &str, instant: &InstantTime) {
        self.position = position.to_string();
        self.instant = instant.to_string();
    }

    fn arrow_path(&mut self) -> PathBuf {
        self.next += 1;
        self.dir.join(format!("{:04}.arrow", self.next))
    }

    /// arbor's latest snapshot through `reader`, written as an Arrow file.
    async fn arbor<E: std::fmt::Display>(&mut self, reader: Result<TableReader, E>) -> Side {
        let reader = reader.map_err(|e| format!("arbor cannot open the table: {e}"))?;
        let batches = reader
            .snapshot(None)
            .await
            .map_err(|e| format!("arbor read failed: {e}"))?;
        let path = self.arrow_path();
        write_arrow(&path, reader.schema(), &batches)?;
        Ok(json!({ "arrow": path }))
    }

    /// The model's rows, written as an Arrow file.
    fn model(&mut self, model: &Model) -> Side {
        let batch = data::to_batch(&model.rows())?;
        let path = self.arrow_path();
        write_arrow(&path, &data::schema(), &[batch])?;
        Ok(json!({ "arrow": path }))
    }
}

fn write_arrow(path: &Path, schema: &SchemaRef, batches: &[RecordBatch]) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("writing {}: {e}", path.display());
    let file = std::fs::File::create(path).map_err(|e| err(&e))?;
    let mut w = arrow::ipc::writer::FileWriter::try_new(file, schema).map_err(|e| err(&e))?;
    for b in batches {
        w.write(b).map_err(|e| err(&e))?;
    }
    w.finish().map_err(|e| err(&e))
}

/// hudi-rs' latest snapshot of the table (or peer view) at `dir`.
fn hudi(dir: &Path) -> Side {
    Ok(json!({ "table": dir }))
}

/// Runs the branch scenarios whose name contains `only` (all for `None`) under `work/branch`,
/// digests every reading with `python` and returns the decided checks. Branches need a metadata
/// table, so nothing runs without one (`metadata_table` false).
pub fn run(
    runtime: &tokio::runtime::Runtime,
    python: &Path,
    work: &Path,
    only: Option<&str>,
    metadata_table: bool,
) -> Vec<Check> {
    let scenarios: Vec<BranchScenario> = BranchScenario::all()
        .into_iter()
        .filter(|s| only.is_none_or(|o| s.name().contains(o)))
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

fn short(d: &Digest) -> String {
    let sha: String = d.data_sha256.chars().take(10).collect();
    format!("{} rows, data_sha256 {sha}", d.row_count)
}

/// Every reading agrees with the first: row count and `data_sha256`, and for two readings of
/// the table also `rows_sha256` and the schema. `Err` names every disagreement by label.
fn decide_same(
    readings: &[Reading],
    ids: &[Result<usize, String>],
    answers: &HashMap<usize, Result<Value, String>>,
) -> Result<(), String> {
    let mut digests = Vec::new();
    let mut problems = Vec::new();
    for (r, id) in readings.iter().zip(ids) {
        let digest = id
            .clone()
            .and_then(|i| {
                answers
                    .get(&i)
                    .cloned()
                    .unwrap_or_else(|| Err("no answer from peer_digest.py".to_string()))
            })
            .and_then(|v| Digest::parse(&v));
        match digest {
            Ok(d) => digests.push((r, d)),
            Err(e) => problems.push(format!("{}: {e}", r.label)),
        }
    }
    if digests.len() != readings.len() || readings.len() < 2 {
        if problems.is_empty() {
            problems.push("fewer than two readings to compare".to_string());
        }
        return Err(problems.join("; "));
    }
    let mut it = digests.iter();
    let Some((first, d0)) = it.next() else {
        return Err("nothing to compare".to_string());
    };
    for (r, d) in it {
        if d.row_count != d0.row_count || d.data_sha256 != d0.data_sha256 {
            problems.push(format!(
                "{} ≠ {} ({} vs {})",
                r.label,
                first.label,
                short(d),
                short(d0)
            ));
        } else if r.meta && first.meta && d.rows_sha256 != d0.rows_sha256 {
            let s = |x: &str| x.chars().take(10).collect::<String>();
            problems.push(format!(
                "meta columns {} ≠ {} (rows_sha256 {} vs {})",
                r.label,
                first.label,
                s(&d.rows_sha256),
                s(&d0.rows_sha256)
            ));
        }
        if r.meta && first.meta && d.schema != d0.schema {
            problems.push(format!(
                "schema {} ≠ {} ({:?} vs {:?})",
                r.label, first.label, d.schema, d0.schema
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// Runs one scenario under `dir`; a step that fails ends it with a failed check at its position.
async fn run_scenario(s: BranchScenario, dir: &Path) -> Vec<PendingCheck> {
    let files = dir.join("digests");
    let mut rec = Recorder {
        dir: files.clone(),
        next: 0,
        position: "1:main".to_string(),
        instant: String::new(),
        checks: Vec::new(),
    };
    let outcome = match std::fs::create_dir_all(&files) {
        Ok(()) => scenario(s, dir, &mut rec).await,
        Err(e) => Err(format!("cannot create {}: {e}", files.display())),
    };
    if let Err(e) = outcome {
        rec.push(
            "steps",
            Pending::Done(Err(format!("later steps not run: {e}"))),
        );
    }
    rec.checks
}

fn local_storage(dir: &Path) -> Result<Arc<dyn Storage>, String> {
    Ok(Arc::new(ObjectStoreStorage::local(dir).map_err(|e| {
        format!("storage at {}: {e}", dir.display())
    })?))
}

/// Writes `rows` on `table`; returns the instant.
async fn write(
    table: &Table,
    op: WriteOperation,
    rows: &[Row],
    what: &str,
) -> Result<InstantTime, String> {
    let batch = data::to_batch(rows)?;
    table
        .write(op, vec![batch])
        .await
        .map(|r| r.instant)
        .map_err(|e| format!("{what}: {e}"))
}

/// The current rows of the keys `pick` selects, at row version `version`.
fn updates(model: &Model, version: u64, pick: impl Fn(u64) -> bool) -> Vec<Row> {
    (0..1000)
        .filter(|n| model.get(&key(*n)).is_some() && pick(*n))
        .map(|n| {
            let mut r = row(n, version);
            if let Some(stored) = model.get(&key(n)) {
                r.region = stored.region;
            }
            r
        })
        .collect()
}

/// The stored rows of the keys `pick` selects (what a delete is given).
fn stored(model: &Model, pick: impl Fn(u64) -> bool) -> Vec<Row> {
    (0..1000)
        .filter(|n| pick(*n))
        .filter_map(|n| model.get(&key(n)).cloned())
        .collect()
}

fn keys(rows: &[Row]) -> Vec<String> {
    rows.iter().map(|r| r.id.clone()).collect()
}

/// The validation of `branch` (main for `None`) by `arbor_branching::validate`.
async fn validate(storage: &Arc<dyn Storage>, branch: Option<&str>) -> Result<(), String> {
    let report = arbor_branching::validate(storage, branch)
        .await
        .map_err(|e| format!("validate: {e}"))?;
    if !report.has_metadata_table {
        return Err("no metadata table".to_string());
    }
    if report.discrepancies.is_empty() {
        Ok(())
    } else {
        let shown: Vec<String> = report
            .discrepancies
            .iter()
            .take(5)
            .map(ToString::to_string)
            .collect();
        Err(format!(
            "{} discrepancies: {}",
            report.discrepancies.len(),
            shown.join("; ")
        ))
    }
}

async fn scenario(s: BranchScenario, dir: &Path, rec: &mut Recorder) -> Result<(), String> {
    let base = dir.join("table");
    std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    let base = base
        .canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", base.display()))?;
    let storage = local_storage(&base)?;
    let table = Table::create(storage.clone(), s.create_options())
        .await
        .map_err(|e| format!("create: {e}"))?;

    // 1. Main: insert, (record index), upsert, delete.
    let mut main = Model::default();
    let rows: Vec<Row> = (0..MAIN_ROWS).map(|n| row(n, 0)).collect();
    let t = write(&table, WriteOperation::Insert, &rows, "insert on main").await?;
    main.upsert(&rows, t.as_str());
    if s.record_index {
        table
            .create_record_index()
            .await
            .map_err(|e| format!("create_record_index: {e}"))?;
    }
    let mut rows = updates(&main, 1, |n| hash(n, 101) % 4 == 0);
    rows.extend((MAIN_ROWS..MAIN_ROWS + 30).map(|n| row(n, 1)));
    let t = write(&table, WriteOperation::Upsert, &rows, "upsert on main").await?;
    main.upsert(&rows, t.as_str());
    let rows = stored(&main, |n| hash(n, 77) % 7 == 0);
    let t = write(&table, WriteOperation::Delete, &rows, "delete on main").await?;
    main.delete(&keys(&rows));
    rec.at("1:main", &t);
    let before = dir.join("main-before-branch");
    copy_dir(&base, &before)?;
    let arbor_main_before = rec.arbor(TableReader::open(storage.clone()).await).await;
    let main_model = rec.model(&main);
    rec.push(
        "main",
        Pending::Same(vec![
            Reading::table("hudi-rs main", hudi(&before)),
            Reading::table("arbor main", arbor_main_before.clone()),
            Reading::model("model main", main_model.clone()),
        ]),
    );

    // 2. Branch `audit`: upserts, a delete, a new partition, (compaction), clean, upsert.
    rec.position = "2:branch".to_string();
    create_branch(&table, BRANCH, BranchSource::MainHead)
        .await
        .map_err(|e| format!("create_branch {BRANCH}: {e}"))?;
    let b = open_branch(storage.clone(), BRANCH)
        .await
        .map_err(|e| format!("open_branch {BRANCH}: {e}"))?;
    let mut branch = main.clone();
    let mut rows = updates(&branch, 2, |n| hash(n, 102) % 3 == 0);
    rows.extend((MAIN_ROWS + 30..MAIN_ROWS + 50).map(|n| row(n, 2)));
    let t = write(&b, WriteOperation::Upsert, &rows, "upsert on the branch").await?;
    branch.upsert(&rows, t.as_str());
    let rows = stored(&branch, |n| hash(n, 78) % 9 == 0);
    write(&b, WriteOperation::Delete, &rows, "delete on the branch").await?;
    branch.delete(&keys(&rows));
    let rows: Vec<Row> = (600..630)
        .map(|n| {
            let mut r = row(n, 2);
            r.region = NEW_REGION;
            r
        })
        .collect();
    let t = write(
        &b,
        WriteOperation::Upsert,
        &rows,
        "upsert into a new partition on the branch",
    )
    .await?;
    branch.upsert(&rows, t.as_str());
    let rows = updates(&branch, 3, |n| hash(n, 103) % 3 == 0);
    let t = write(
        &b,
        WriteOperation::Upsert,
        &rows,
        "second upsert on the branch",
    )
    .await?;
    branch.upsert(&rows, t.as_str());
    rec.at("2:branch", &t);
    // Decided now, reported after the last upsert (whose instant heads the report line).
    let mut services = Vec::new();
    if s.table_type == TableType::MergeOnRead {
        let done = b
            .compact()
            .await
            .map_err(|e| format!("compaction on the branch: {e}"))?;
        services.push((
            "compaction",
            if done.is_empty() {
                Err("compaction on the branch compacted nothing after upserts".to_string())
            } else {
                Ok(())
            },
        ));
    }
    let cleaned = arbor_branching::clean(
        &b,
        CleanOptions {
            policy: CleanPolicy::KeepLatestCommits(1),
            ..CleanOptions::default()
        },
    )
    .await
    .map_err(|e| format!("clean on the branch: {e}"))?;
    services.push((
        "clean",
        if cleaned.deleted > 0 {
            Ok(())
        } else {
            Err(format!(
                "clean on the branch (keep the latest commit) deleted no file; plan {:?}",
                cleaned.plan
            ))
        },
    ));
    let rows = updates(&branch, 4, |n| hash(n, 104) % 5 == 0);
    let last = write(
        &b,
        WriteOperation::Upsert,
        &rows,
        "last upsert on the branch",
    )
    .await?;
    branch.upsert(&rows, last.as_str());
    let t = last;
    rec.at("2:branch", &t);
    for (query, result) in services {
        rec.push(query, Pending::Done(result));
    }

    let arbor_main_after = rec.arbor(TableReader::open(storage.clone()).await).await;
    let arbor_branch = rec
        .arbor(open_reader(storage.clone(), Some(BRANCH)).await)
        .await;
    let branch_model = rec.model(&branch);
    // hudi-rs reads copies taken now: later steps change the table.
    let at_branch = dir.join("main-after-branch-writes");
    copy_dir(&base, &at_branch)?;
    let branch_view = dir.join(format!("view-{BRANCH}"));
    let branch_view_side = peer_view(
        &at_branch,
        &MetaRoot::Branch(BRANCH.to_string()),
        &branch_view,
    )
    .map(|()| branch_view);
    rec.push(
        "peer_main_kept",
        Pending::Same(vec![
            Reading::table("hudi-rs main after branch writes", hudi(&at_branch)),
            Reading::table("hudi-rs main before branch writes", hudi(&before)),
        ]),
    );
    rec.push(
        "peer_main_arbor",
        Pending::Same(vec![
            Reading::table("hudi-rs main after branch writes", hudi(&at_branch)),
            Reading::table("arbor main after branch writes", arbor_main_after),
            Reading::table("arbor main before branch writes", arbor_main_before),
            Reading::model("model main", main_model),
        ]),
    );
    rec.push(
        "arbor_branch",
        Pending::Same(vec![
            Reading::table("arbor branch", arbor_branch.clone()),
            Reading::model("model branch", branch_model.clone()),
        ]),
    );
    rec.push(
        "peer_branch_view",
        Pending::Same(vec![
            Reading::table(
                "hudi-rs branch view",
                branch_view_side.and_then(|d| hudi(&d)),
            ),
            Reading::table("arbor branch", arbor_branch.clone()),
        ]),
    );
    rec.push(
        "validate_branch",
        Pending::Done(validate(&storage, Some(BRANCH)).await),
    );
    rec.push(
        "validate_main",
        Pending::Done(validate(&storage, None).await),
    );

    // 3. Publication.
    let published = publish(&b)
        .await
        .map_err(|e| format!("publish {BRANCH}: {e}"))?;
    let n = published.publication;
    rec.at(&format!("3:published p{n}"), &t);
    let resolved = resolve_main(storage.as_ref())
        .await
        .map_err(|e| format!("resolve_main after publish: {e}"));
    rec.push(
        "publish",
        Pending::Done(match resolved {
            Ok(MetaRoot::Publication(m)) if m == n && published.head.as_ref() == Some(&t) => Ok(()),
            Ok(other) => Err(format!(
                "after publication p{n} (head {:?}, branch head {t}) main resolves to {other}",
                published.head.as_ref().map(ToString::to_string)
            )),
            Err(e) => Err(e),
        }),
    );
    let arbor_main_published = rec.arbor(TableReader::open(storage.clone()).await).await;
    let at_publish = dir.join(format!("main-after-p{n}"));
    copy_dir(&base, &at_publish)?;
    let pub_view = dir.join(format!("view-p{n}"));
    let pub_view_side =
        peer_view(&at_publish, &MetaRoot::Publication(n), &pub_view).map(|()| pub_view);
    rec.push(
        "arbor_main_published",
        Pending::Same(vec![
            Reading::table("arbor main after publication", arbor_main_published),
            Reading::table("arbor branch before publication", arbor_branch.clone()),
            Reading::model("model branch", branch_model),
        ]),
    );
    rec.push(
        "peer_publication_view",
        Pending::Same(vec![
            Reading::table(
                &format!("hudi-rs publication view p{n}"),
                pub_view_side.and_then(|d| hudi(&d)),
            ),
            Reading::table("arbor branch before publication", arbor_branch),
        ]),
    );
    rec.push(
        "validate_main",
        Pending::Done(validate(&storage, None).await),
    );
    // hudi-rs at the table path itself follows the publication (the root hoodie.properties
    // point at p<N>'s timelines): it reads exactly arbor's main.
    let arbor_main_at_publish = rec.arbor(TableReader::open(storage.clone()).await).await;
    let branch_model_again = rec.model(&branch);
    rec.push(
        "peer_main_published",
        Pending::Same(vec![
            Reading::table(&format!("hudi-rs main after p{n}"), hudi(&at_publish)),
            Reading::table(&format!("arbor main after p{n}"), arbor_main_at_publish),
            Reading::model("model branch", branch_model_again),
        ]),
    );

    // 4. Three further writes on main (they land in p<N>'s timeline), then a clean of main.
    let main_table = Table::open(storage.clone())
        .await
        .map_err(|e| format!("open main after publication: {e}"))?;
    let mut model = branch.clone();
    let rows = updates(&model, 5, |n| hash(n, 105) % 4 == 0);
    let t = write(
        &main_table,
        WriteOperation::Upsert,
        &rows,
        "upsert on main after p1",
    )
    .await?;
    model.upsert(&rows, t.as_str());
    let rows = stored(&model, |n| hash(n, 79) % 11 == 0);
    write(
        &main_table,
        WriteOperation::Delete,
        &rows,
        "delete on main after p1",
    )
    .await?;
    model.delete(&keys(&rows));
    let rows: Vec<Row> = (700..720).map(|n| row(n, 6)).collect();
    let t = write(
        &main_table,
        WriteOperation::Upsert,
        &rows,
        "insert on main after p1",
    )
    .await?;
    model.upsert(&rows, t.as_str());
    arbor_branching::clean(
        &main_table,
        CleanOptions {
            policy: CleanPolicy::KeepLatestCommits(1),
            ..CleanOptions::default()
        },
    )
    .await
    .map_err(|e| format!("clean of main after p{n}: {e}"))?;
    rec.at(&format!("4:main writes after p{n}"), &t);
    let after_writes = dir.join(format!("main-writes-after-p{n}"));
    copy_dir(&base, &after_writes)?;
    let arbor_later = rec.arbor(TableReader::open(storage.clone()).await).await;
    let model_later = rec.model(&model);
    rec.push(
        "peer_main_later_writes",
        Pending::Same(vec![
            Reading::table("hudi-rs main after writes and a clean", hudi(&after_writes)),
            Reading::table("arbor main after writes and a clean", arbor_later),
            Reading::model("model main", model_later),
        ]),
    );
    rec.push(
        "validate_main",
        Pending::Done(validate(&storage, None).await),
    );

    // 5. A second publication: branch `audit2` from main's head, one upsert, published.
    create_branch(&main_table, "audit2", BranchSource::MainHead)
        .await
        .map_err(|e| format!("create_branch audit2: {e}"))?;
    let b2 = open_branch(storage.clone(), "audit2")
        .await
        .map_err(|e| format!("open_branch audit2: {e}"))?;
    let rows = updates(&model, 7, |n| hash(n, 107) % 3 == 0);
    let t = write(&b2, WriteOperation::Upsert, &rows, "upsert on audit2").await?;
    model.upsert(&rows, t.as_str());
    let second = publish(&b2)
        .await
        .map_err(|e| format!("publish audit2: {e}"))?;
    let m = second.publication;
    rec.at(&format!("5:published p{m}"), &t);
    rec.push(
        "publish_again",
        Pending::Done(if m > n && second.legacy_root && published.legacy_root {
            Ok(())
        } else {
            Err(format!(
                "second publication p{m} after p{n} (root repointed: {}, {})",
                published.legacy_root, second.legacy_root
            ))
        }),
    );
    let at_second = dir.join(format!("main-after-p{m}"));
    copy_dir(&base, &at_second)?;
    let arbor_second = rec.arbor(TableReader::open(storage.clone()).await).await;
    let model_second = rec.model(&model);
    rec.push(
        "peer_main_published_again",
        Pending::Same(vec![
            Reading::table(&format!("hudi-rs main after p{m}"), hudi(&at_second)),
            Reading::table(&format!("arbor main after p{m}"), arbor_second),
            Reading::model("model main", model_second),
        ]),
    );
    rec.push(
        "validate_main",
        Pending::Done(validate(&storage, None).await),
    );
    Ok(())
}

/// Builds at `view` a table directory that shows metadata root `root` of the table at `base`
/// to a reader that knows only `.hoodie/`: `.hoodie/hoodie.properties` and `.hoodie/timeline`
/// link to the root's data-side ones, `.hoodie/metadata/<partition>` to every real
/// metadata-table partition, `.hoodie/metadata/.hoodie` to the root's MDT-side meta directory,
/// and every other entry of `base` (the data partitions) is linked as is.
pub fn peer_view(base: &Path, root: &MetaRoot, view: &Path) -> Result<(), String> {
    let meta = view.join(".hoodie");
    let mdt = meta.join("metadata");
    std::fs::create_dir_all(&mdt).map_err(|e| format!("cannot create {}: {e}", mdt.display()))?;
    let data_meta = base.join(root.data_meta_dir());
    for name in ["hoodie.properties", "timeline"] {
        link(&data_meta.join(name), &meta.join(name))?;
    }
    link(&base.join(root.mdt_meta_dir()), &mdt.join(".hoodie"))?;
    for (from, to) in [
        (base.join(".hoodie/metadata"), mdt),
        (base.to_path_buf(), view.to_path_buf()),
    ] {
        let entries =
            std::fs::read_dir(&from).map_err(|e| format!("cannot list {}: {e}", from.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot list {}: {e}", from.display()))?;
            let name = entry.file_name();
            if name != ".hoodie" {
                link(&entry.path(), &to.join(&name))?;
            }
        }
    }
    Ok(())
}

#[cfg(unix)]
fn link(target: &Path, at: &Path) -> Result<(), String> {
    if !target.exists() {
        return Err(format!("{} does not exist", target.display()));
    }
    std::os::unix::fs::symlink(target, at)
        .map_err(|e| format!("cannot link {} to {}: {e}", at.display(), target.display()))
}

#[cfg(not(unix))]
fn link(target: &Path, at: &Path) -> Result<(), String> {
    if target.is_dir() {
        copy_dir(target, at)
    } else {
        std::fs::copy(target, at)
            .map(|_| ())
            .map_err(|e| format!("cannot copy {} to {}: {e}", target.display(), at.display()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn digest(rows: u64, sha: &str, rows_sha: &str) -> Value {
        json!({
            "row_count": rows, "data_sha256": sha, "rows_sha256": rows_sha,
            "schema": [["id", "string", false]]
        })
    }

    fn readings(labels: &[(&str, bool)]) -> Vec<Reading> {
        labels
            .iter()
            .map(|(l, meta)| Reading {
                label: l.to_string(),
                request: Ok(Value::Null),
                meta: *meta,
            })
            .collect()
    }

    #[test]
    fn test_decide_same_all_agree_ok() {
        let r = readings(&[("a", true), ("b", true), ("m", false)]);
        let answers = HashMap::from([
            (0, Ok(digest(3, "x", "r"))),
            (1, Ok(digest(3, "x", "r"))),
            (2, Ok(digest(3, "x", "model-rows"))),
        ]);
        assert_eq!(decide_same(&r, &[Ok(0), Ok(1), Ok(2)], &answers), Ok(()));
    }

    #[test]
    fn test_decide_same_rows_differ_names_both_labels() {
        let r = readings(&[("hudi-rs main", true), ("arbor main", true)]);
        let answers = HashMap::from([(0, Ok(digest(3, "x", "r"))), (1, Ok(digest(2, "y", "r")))]);
        let e = decide_same(&r, &[Ok(0), Ok(1)], &answers).unwrap_err();
        assert!(
            e.starts_with("arbor main ≠ hudi-rs main (2 rows, data_sha256 y vs 3 rows"),
            "{e}"
        );
    }

    #[test]
    fn test_decide_same_meta_columns_differ_only_between_table_reads() {
        let r = readings(&[("a", true), ("b", true)]);
        let answers = HashMap::from([(0, Ok(digest(3, "x", "r1"))), (1, Ok(digest(3, "x", "r2")))]);
        let e = decide_same(&r, &[Ok(0), Ok(1)], &answers).unwrap_err();
        assert!(e.starts_with("meta columns b ≠ a"), "{e}");
        let r = readings(&[("a", true), ("m", false)]);
        assert_eq!(decide_same(&r, &[Ok(0), Ok(1)], &answers), Ok(()));
    }

    #[test]
    fn test_decide_same_missing_answer_error() {
        let r = readings(&[("a", true), ("b", true)]);
        let answers = HashMap::from([(0, Ok(digest(3, "x", "r")))]);
        let e = decide_same(&r, &[Ok(0), Err("no view".to_string())], &answers).unwrap_err();
        assert_eq!(e, "b: no view");
        let e = decide_same(&r, &[Ok(0), Ok(1)], &answers).unwrap_err();
        assert_eq!(e, "b: no answer from peer_digest.py");
    }

    #[test]
    fn test_peer_view_links_root_metadata_and_partitions() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        let root = MetaRoot::Publication(2);
        let data_meta = base.join(root.data_meta_dir());
        let mdt_meta = base.join(root.mdt_meta_dir());
        for d in [
            data_meta.join("timeline"),
            mdt_meta.join("timeline"),
            base.join(".hoodie/timeline"),
            base.join(".hoodie/metadata/files"),
            base.join("region=asia"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(data_meta.join("hoodie.properties"), "p2").unwrap();
        std::fs::write(data_meta.join("timeline/1_2.commit"), "c").unwrap();
        std::fs::write(mdt_meta.join("hoodie.properties"), "mdt p2").unwrap();
        std::fs::write(base.join(".hoodie/hoodie.properties"), "root").unwrap();
        std::fs::write(base.join("region=asia/f.parquet"), "d").unwrap();
        let view = tmp.path().join("view");
        assert_eq!(peer_view(&base, &root, &view), Ok(()));
        let read = |p: &str| std::fs::read_to_string(view.join(p)).unwrap();
        assert_eq!(read(".hoodie/hoodie.properties"), "p2");
        assert_eq!(read(".hoodie/timeline/1_2.commit"), "c");
        assert_eq!(read(".hoodie/metadata/.hoodie/hoodie.properties"), "mdt p2");
        assert!(view.join(".hoodie/metadata/files").is_dir());
        assert_eq!(read("region=asia/f.parquet"), "d");
        assert!(!view.join(".hoodie/branches").exists());
        // A root without metadata cannot be viewed.
        let e = peer_view(&base, &MetaRoot::Publication(3), &tmp.path().join("v3")).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
    }

    #[test]
    fn test_all_four_combinations_named() {
        let all = BranchScenario::all();
        let names: Vec<String> = all.iter().map(BranchScenario::name).collect();
        assert_eq!(
            names,
            [
                "branch/cow",
                "branch/cow-rli",
                "branch/mor",
                "branch/mor-rli"
            ]
        );
    }

    /// The whole sequence on copy-on-write without the peer: every check decided without
    /// digests passes, and every reading arbor makes has a request.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn test_run_scenario_cow_local_checks_pass() {
        let tmp = tempfile::tempdir().unwrap();
        let s = BranchScenario::all()[0];
        let checks = run_scenario(s, tmp.path()).await;
        let queries: Vec<&str> = checks.iter().map(|c| c.query.as_str()).collect();
        assert!(queries.contains(&"peer_publication_view"), "{queries:?}");
        for c in &checks {
            match &c.pending {
                Pending::Done(r) => assert_eq!(r, &Ok(()), "{} {}", c.position, c.query),
                Pending::Same(readings) => {
                    for r in readings {
                        assert!(
                            r.request.is_ok(),
                            "{} {}: {:?}",
                            c.query,
                            r.label,
                            r.request
                        );
                    }
                }
            }
        }
    }
}
