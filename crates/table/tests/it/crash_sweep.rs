//! Crash sweeps of the write client: one copy-on-write upsert commit and merge-on-read
//! deltacommits (an upsert writing log files and new base files, and a delete writing delete
//! blocks) are "crashed" before each of their storage operations in turn
//! ([`FaultMode::CrashAt`], every operation counted, reads included). A restarted process
//! (fresh handles over the same directory) must read the table exactly as before or exactly as
//! after the write, see no file of a failed instant, and its next write must succeed (rolling
//! back the failed instant) and read as expected; hudi-rs 0.5.0 must agree at one crash point
//! of every distinct on-disk outcome.
//!
//! Counting every operation (not only writes) makes the sweep a superset of the write-only
//! sweep: a crash just before a read leaves storage as a crash before the next write does,
//! while also exercising the crashing writer's error paths at each read.
//!
//! The tables have a metadata table (MDT). At every crash point the MDT must stay in step with
//! the data table: `arbor validate` finds nothing right after the crash and after the next
//! write, readers listing through FILES and through directory listing read the same rows, every
//! completed MDT deltacommit belongs to a data instant, and after the next write the MDT has no
//! pending instant and each completed MDT deltacommit has a completed data instant of the same
//! time (and each completed data write an MDT deltacommit).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arbor_format::meta;
use arbor_fsview::parse_data_file_name;
use arbor_storage::{
    FaultInjectingStorage, FaultMode, InProcessLockProvider, ObjectStoreStorage, Storage,
    StorageExt,
};
use arbor_table::read::TableReader;
use arbor_table::{ListingSource, Table, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, InstantTime};
use arrow::array::{Array, AsArray};
use arrow::record_batch::RecordBatch;

use super::mdt::{
    assert_mdt_instants_have_data_instants, assert_mdt_timeline_in_step, assert_mdt_valid,
};
use super::write_support::{
    assert_peer_agrees, batch, create, rows, Layout, Model, Query, Row, TestTable,
};
use arbor_testkit::crash::copy_dir;

/// A snapshot in canonical form: `(record key, (id, region, ts, name))`, sorted.
type Canon = Vec<(String, Row)>;

/// The canonical rows and the distinct `_hoodie_commit_time`s of batches.
fn canonical(batches: &[RecordBatch]) -> (Canon, BTreeSet<String>) {
    let mut rows = Vec::new();
    let mut commit_times = BTreeSet::new();
    for b in batches {
        let s = |n: &str| b.column_by_name(n).unwrap().as_string::<i32>().clone();
        let (key, time, id, region, name) = (
            s(meta::RECORD_KEY),
            s(meta::COMMIT_TIME),
            s("id"),
            s("region"),
            s("name"),
        );
        let ts = b
            .column_by_name("ts")
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>()
            .clone();
        for i in 0..b.num_rows() {
            commit_times.insert(time.value(i).to_string());
            rows.push((
                key.value(i).to_string(),
                (
                    id.value(i).to_string(),
                    region.value(i).to_string(),
                    if ts.is_null(i) { i64::MIN } else { ts.value(i) },
                    name.value(i).to_string(),
                ),
            ));
        }
    }
    rows.sort();
    (rows, commit_times)
}

/// The canonical form of a model (the record key is `id`).
fn canon_of(model: &Model) -> Canon {
    model
        .sorted()
        .into_iter()
        .map(|r| (r.0.clone(), r))
        .collect()
}

async fn read_canonical(storage: &Arc<dyn Storage>) -> (Canon, BTreeSet<String>) {
    read_canonical_from(storage, ListingSource::Auto).await
}

/// The canonical rows read with the file listing from `source`.
async fn read_canonical_from(
    storage: &Arc<dyn Storage>,
    source: ListingSource,
) -> (Canon, BTreeSet<String>) {
    let reader = TableReader::open_with(storage.clone(), source)
        .await
        .unwrap_or_else(|e| panic!("opening a reader listing from {source:?}: {e}"));
    canonical(&reader.snapshot(None).await.unwrap())
}

fn local(base: &Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

/// A copy of `template`'s directory in a new temporary directory, opened by a fresh `Table`
/// (in-process lock, heartbeat timeout zero: it rolls back every pending write).
async fn copy_of(template: &TestTable) -> TestTable {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    copy_dir(&template.base, &base);
    let storage = local(&base);
    let table = recovering_table(&storage).await;
    TestTable {
        _tmp: tmp,
        base,
        storage,
        table,
        layout: template.layout,
    }
}

/// What a restarted process opens: a fresh handle with its own lock provider (the crashed
/// process's in-process lock died with it) that rolls back every pending write at once.
async fn recovering_table(storage: &Arc<dyn Storage>) -> Table {
    Table::open(storage.clone())
        .await
        .unwrap()
        .with_lock_provider(Arc::new(InProcessLockProvider::new()))
        .with_write_options(WriteOptions {
            heartbeat_timeout: Duration::ZERO,
            ..WriteOptions::default()
        })
}

/// Data files (base and log) under the table, as (key, instant time of the file).
async fn data_files(storage: &Arc<dyn Storage>) -> Vec<(String, InstantTime)> {
    let mut out = Vec::new();
    for o in storage.list_all("").await.unwrap() {
        if o.key.starts_with(".hoodie/") {
            continue;
        }
        let name = o.key.rsplit('/').next().unwrap();
        if let Ok(Some(d)) = parse_data_file_name(name, o.size) {
            out.push((o.key.clone(), d.instant_time().clone()));
        }
    }
    out.sort();
    out
}

/// Instant times of the data files the reader's latest file slices reference.
async fn visible_file_instants(storage: &Arc<dyn Storage>) -> BTreeSet<InstantTime> {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    let mut out = BTreeSet::new();
    for s in reader.view().latest_file_slices(None, None).await.unwrap() {
        if let Some(b) = &s.base_file {
            out.insert(b.instant_time.clone());
        }
        for l in &s.log_files {
            out.insert(l.delta_commit_time.clone());
        }
    }
    out
}

/// Which side of the write a crashed table reads as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Before,
    After,
}

/// One write to crash, on a table built by `setup`, followed by `next` (an upsert).
struct Scenario {
    label: &'static str,
    table_type: TableType,
    setup: Vec<(WriteOperation, Vec<Row>)>,
    operation: WriteOperation,
    input: Vec<Row>,
    next: Vec<Row>,
    /// The action the swept write completes as.
    action: Action,
    /// Whether the table has column and partition stats (created after `setup`).
    stats: bool,
    /// Whether the write is `Table::write_stream` of the input in batches of 3 rows, every
    /// file closed as soon as it has rows (`max_file_size` 1), rather than `Table::write`.
    streamed: bool,
}

/// The swept write of `s` through `table`.
async fn run(table: &Table, s: &Scenario) -> arbor_table::Result<arbor_table::CommitResult> {
    if !s.streamed {
        return table.write(s.operation, vec![batch(&s.input)]).await;
    }
    let table = table.clone().with_write_options(WriteOptions {
        max_file_size: 1,
        ..table.write_options().clone()
    });
    let batches: Vec<Result<RecordBatch, String>> =
        s.input.chunks(3).map(|c| Ok(batch(c))).collect();
    table
        .write_stream(s.operation, futures::stream::iter(batches))
        .await
}

fn apply(model: &mut Model, op: WriteOperation, rows: &[Row]) {
    match op {
        WriteOperation::Delete => model.delete(rows),
        // A bulk insert of keys the table does not hold (the only kind swept) is an upsert.
        WriteOperation::Upsert | WriteOperation::Insert | WriteOperation::BulkInsert => {
            model.upsert(rows)
        }
        other => panic!("the sweep models no {other:?}"),
    }
}

/// What a sweep did.
#[derive(Debug, Default)]
struct Report {
    crash_points: usize,
    outcomes: BTreeMap<Outcome, usize>,
    peer_checks: usize,
}

/// The files of the new instants on the timeline, by state suffix (`commit.requested`,
/// `deltacommit.inflight`, `commit` ...).
async fn timeline_states(
    storage: &Arc<dyn Storage>,
    new_instants: &BTreeSet<InstantTime>,
) -> Vec<String> {
    let mut out: Vec<String> = storage
        .list_all(".hoodie/timeline")
        .await
        .unwrap()
        .into_iter()
        .filter_map(|o| {
            let name = o.key.rsplit('/').next()?.to_string();
            let (head, suffix) = name.split_once('.')?;
            let time = head.split('_').next()?;
            new_instants
                .iter()
                .any(|t| t.as_str() == time)
                .then(|| suffix.to_string())
        })
        .collect();
    out.sort();
    out
}

/// Column and partition stats agree with the files (`validate_indexes` compares them).
async fn assert_stats_valid(storage: &Arc<dyn Storage>, label: &str) {
    let v = arbor_table::validate_indexes(storage.clone())
        .await
        .unwrap();
    assert!(
        v.checked.iter().any(|(n, _)| n == "column_stats"),
        "{label}: {:?}",
        v.checked
    );
    assert!(v.discrepancies.is_empty(), "{label}: {:?}", v.discrepancies);
}

async fn sweep(s: &Scenario) -> Report {
    let started = std::time::Instant::now();
    // The table before the write, built once and copied for every crash point.
    let template = create(s.table_type, Layout::Hive).await;
    let mut before_model = Model::default();
    for (op, rows) in &s.setup {
        template.write(*op, rows).await;
        apply(&mut before_model, *op, rows);
    }
    if s.stats {
        template
            .table
            .create_stats_indexes(true, true)
            .await
            .unwrap();
        assert_stats_valid(&template.storage, &format!("{}: setup", s.label)).await;
    }
    let (before, _) = read_canonical(&template.storage).await;
    assert_eq!(before, canon_of(&before_model), "{}: setup", s.label);
    assert!(
        template
            .table
            .config()
            .metadata_partitions()
            .contains(&"files".to_string()),
        "{}: the swept table must have a metadata table",
        s.label
    );
    assert_mdt_valid(&template.storage, &format!("{}: setup", s.label)).await;
    assert_mdt_timeline_in_step(&template.storage, &format!("{}: setup", s.label)).await;
    let initial: BTreeSet<InstantTime> = template
        .timeline()
        .await
        .instants()
        .into_iter()
        .map(|i| i.requested_time)
        .collect();
    assert!(template.timeline().await.pending().is_empty());

    // The fault-free run, on a copy: the "after" rows and the number of operations.
    let mut after_model = before_model.clone();
    apply(&mut after_model, s.operation, &s.input);
    let total_ops = {
        let t = copy_of(&template).await;
        let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
        let table = Table::open(faulty.clone() as Arc<dyn Storage>)
            .await
            .unwrap()
            .with_lock_provider(Arc::new(InProcessLockProvider::new()));
        faulty.reset();
        let res = run(&table, s).await.unwrap();
        assert_eq!(res.action, s.action, "{}", s.label);
        if s.table_type == TableType::MergeOnRead {
            let logs = data_files(&t.storage)
                .await
                .into_iter()
                .filter(|(k, time)| time == &res.instant && k.contains(".log."))
                .count();
            assert!(
                logs > 0,
                "{}: the swept deltacommit writes log files",
                s.label
            );
        }
        faulty.op_count()
    };
    let after = canon_of(&after_model);
    assert_ne!(
        before, after,
        "{}: the write must change the table",
        s.label
    );

    let python_available = super::write_support::peer_python().is_some();
    let mut report = Report::default();
    let mut seen_states: BTreeSet<(Outcome, Vec<String>, bool)> = BTreeSet::new();
    let mut n = 0;
    loop {
        let t = copy_of(&template).await;
        let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
        faulty.set_partial_batches(true);
        let crashing = Table::open(faulty.clone() as Arc<dyn Storage>)
            .await
            .unwrap()
            .with_lock_provider(Arc::new(InProcessLockProvider::new()));
        faulty.reset();
        faulty.set_mode(FaultMode::CrashAt(n));
        let result = run(&crashing, s).await;
        drop(crashing);
        let label = format!("{}: crash at operation {n}", s.label);
        if let Err(e) = &result {
            assert!(faulty.has_crashed(), "{label}: failed without a crash: {e}");
        }

        // A restarted process: fresh storage handle, fresh reader. The table lists `files`, so
        // the default reader lists through the metadata table: read with that source forced.
        let fresh = local(&t.base);
        let (got, commit_times) = read_canonical_from(&fresh, ListingSource::MetadataTable).await;
        let outcome = if got == before {
            Outcome::Before
        } else if got == after {
            Outcome::After
        } else {
            panic!("{label}: the table reads neither as before nor as after the write: {got:?}");
        };
        if result.is_ok() {
            assert_eq!(
                outcome,
                Outcome::After,
                "{label}: a reported commit is lost"
            );
        }
        // The MDT is in step before any recovery: validate finds nothing, both listing sources
        // read the same rows, and no completed MDT deltacommit outlived its data instant.
        assert_mdt_valid(&fresh, &format!("{label} (crashed)")).await;
        if s.stats {
            assert_stats_valid(&fresh, &format!("{label} (crashed)")).await;
        }
        let (by_storage, _) = read_canonical_from(&fresh, ListingSource::Storage).await;
        assert_eq!(
            by_storage, got,
            "{label}: listing through storage and through the metadata table differ"
        );
        assert_mdt_instants_have_data_instants(&fresh, &format!("{label} (crashed)")).await;
        let tl = t.timeline().await;
        let new_instants: BTreeSet<InstantTime> = tl
            .instants()
            .into_iter()
            .map(|i| i.requested_time)
            .filter(|t| !initial.contains(t))
            .collect();
        let new_completed: Vec<_> = tl
            .completed_writes()
            .into_iter()
            .filter(|i| !initial.contains(&i.requested_time))
            .collect();
        let files = data_files(&fresh).await;
        let failed: BTreeSet<InstantTime> = files
            .iter()
            .map(|(_, t)| t.clone())
            .filter(|t| !initial.contains(t))
            .chain(new_instants.iter().cloned())
            .collect();
        match outcome {
            Outcome::Before => {
                assert!(
                    new_completed.is_empty(),
                    "{label}: reads as before, yet {new_completed:?} completed"
                );
                let visible = visible_file_instants(&fresh).await;
                let leaked: Vec<_> = visible.intersection(&failed).collect();
                assert!(
                    leaked.is_empty(),
                    "{label}: files of the failed instant {leaked:?} are visible"
                );
                assert!(
                    commit_times
                        .iter()
                        .all(|c| initial.iter().any(|i| i.as_str() == c)),
                    "{label}: rows of a failed instant are read: {commit_times:?}"
                );
            }
            Outcome::After => {
                assert_eq!(new_completed.len(), 1, "{label}: {new_completed:?}");
                assert_eq!(new_completed[0].action, s.action, "{label}");
            }
        }

        // hudi-rs reads the crashed table like arbor, once per distinct on-disk outcome.
        let has_orphans = files.iter().any(|(_, t)| {
            !initial.contains(t) && !new_completed.iter().any(|c| &c.requested_time == t)
        });
        let state = (
            outcome,
            timeline_states(&fresh, &new_instants).await,
            has_orphans,
        );
        let check_peer = python_available && seen_states.insert(state);
        if check_peer {
            assert_peer_agrees(&t, &[Query::Snapshot], &format!("{label} (crashed)")).await;
            report.peer_checks += 1;
        }

        // The next write (by a fresh handle) rolls back the failed instant and succeeds.
        let next = recovering_table(&fresh).await;
        next.write(WriteOperation::Upsert, vec![batch(&s.next)])
            .await
            .unwrap_or_else(|e| panic!("{label}: the next write failed: {e}"));
        let mut expected = match outcome {
            Outcome::Before => before_model.clone(),
            Outcome::After => after_model.clone(),
        };
        expected.upsert(&s.next);
        let (got, _) = read_canonical(&fresh).await;
        assert_eq!(got, canon_of(&expected), "{label}: after the next write");
        assert_mdt_valid(&fresh, &format!("{label} (next write)")).await;
        if s.stats {
            assert_stats_valid(&fresh, &format!("{label} (next write)")).await;
        }
        assert_mdt_timeline_in_step(&fresh, &format!("{label} (next write)")).await;
        let tl = t.timeline().await;
        assert!(tl.pending().is_empty(), "{label}: {:?}", tl.pending());
        let completed: BTreeSet<InstantTime> = tl
            .completed_writes()
            .into_iter()
            .map(|i| i.requested_time)
            .collect();
        for (key, time) in data_files(&fresh).await {
            assert!(
                completed.contains(&time),
                "{label}: {key} of an instant that is not completed is left after recovery"
            );
        }
        if check_peer {
            assert_peer_agrees(&t, &[Query::Snapshot], &format!("{label} (next write)")).await;
            report.peer_checks += 1;
        }

        *report.outcomes.entry(outcome).or_default() += 1;
        if result.is_ok() && faulty.op_count() <= n {
            // The write finished before reaching operation n: every point was covered.
            break;
        }
        report.crash_points += 1;
        n += 1;
        assert!(n < 10_000, "{}: the write never finished", s.label);
    }
    assert_eq!(
        report.crash_points, total_ops,
        "{}: the sweep must crash once before every operation of the fault-free run",
        s.label
    );
    assert!(
        report.outcomes.get(&Outcome::Before).copied().unwrap_or(0) > 0
            && report.outcomes.get(&Outcome::After).copied().unwrap_or(0) > 1,
        "{}: both outcomes (and a crash after the commit point) must occur: {:?}",
        s.label,
        report.outcomes
    );
    println!(
        "{}: swept {} crash points ({:?}), {} peer checks, in {:.1?}",
        s.label,
        report.crash_points,
        report.outcomes,
        report.peer_checks,
        started.elapsed()
    );
    report
}

/// The rows of the initial table: 16 inserted keys in both partitions, then 4 updated (base
/// files rewritten on COW; log files on MOR).
fn setup() -> Vec<(WriteOperation, Vec<Row>)> {
    vec![
        (WriteOperation::Insert, rows(0..16, 1, "a")),
        (WriteOperation::Upsert, rows(0..4, 2, "b")),
    ]
}

/// Updates of existing keys (some with earlier updates) in both partitions, new keys in the
/// existing partitions and in a new one.
fn upsert_input() -> Vec<Row> {
    let mut r = rows(2..8, 5, "u");
    r.extend(rows(100..103, 5, "n"));
    r.push(("k0200".into(), "ap".into(), 5, "n200".into()));
    r
}

/// The write after recovery: updates, and a new key.
fn next_input() -> Vec<Row> {
    let mut r = rows(10..13, 50, "z");
    r.push(("k0300".into(), "eu".into(), 50, "z300".into()));
    r
}

#[tokio::test]
async fn test_crash_sweep_cow_upsert_commit_reads_before_or_after_and_next_write_succeeds() {
    let report = sweep(&Scenario {
        label: "COW upsert commit",
        table_type: TableType::CopyOnWrite,
        setup: setup(),
        operation: WriteOperation::Upsert,
        input: upsert_input(),
        next: next_input(),
        action: Action::Commit,
        stats: false,
        streamed: false,
    })
    .await;
    assert!(report.crash_points > 10, "{report:?}");
}

#[tokio::test]
async fn test_crash_sweep_mor_deltacommit_reads_before_or_after_and_next_write_succeeds() {
    // An upsert deltacommit: log files for updates (and inserts packed into small file
    // groups), a base file in a new partition.
    let upsert = sweep(&Scenario {
        label: "MOR upsert deltacommit",
        table_type: TableType::MergeOnRead,
        setup: setup(),
        operation: WriteOperation::Upsert,
        input: upsert_input(),
        next: next_input(),
        action: Action::DeltaCommit,
        stats: false,
        streamed: false,
    })
    .await;
    // A delete deltacommit: delete blocks in the log files of existing file groups (keys with
    // and without earlier log updates).
    let mut deletes = rows(2..4, 9, "x");
    deletes.extend(rows(8..10, 9, "x"));
    let delete = sweep(&Scenario {
        label: "MOR delete deltacommit",
        table_type: TableType::MergeOnRead,
        setup: setup(),
        operation: WriteOperation::Delete,
        input: deletes,
        next: next_input(),
        action: Action::DeltaCommit,
        stats: false,
        streamed: false,
    })
    .await;
    assert!(upsert.crash_points > 10, "{upsert:?}");
    assert!(delete.crash_points > 10, "{delete:?}");
}

/// An upsert on a version-9 COW table (the default version) with column and partition stats: at every crash point the table
/// reads as before or after, the stats agree with the files, and the next write succeeds and
/// keeps them in step.
#[tokio::test]
async fn test_crash_sweep_cow_upsert_with_column_stats_keeps_stats_valid() {
    let report = sweep(&Scenario {
        label: "COW upsert with column stats",
        table_type: TableType::CopyOnWrite,
        setup: setup(),
        operation: WriteOperation::Upsert,
        input: upsert_input(),
        next: next_input(),
        action: Action::Commit,
        stats: true,
        streamed: false,
    })
    .await;
    assert!(report.crash_points > 10, "{report:?}");
}

#[tokio::test]
async fn test_crash_sweep_streamed_bulk_insert_with_column_stats_reads_before_or_after() {
    // New keys in the existing partitions and in a new one, in batches of 3 rows, each file
    // stored as soon as it has rows: markers, files and timeline writes interleave.
    let mut input = rows(100..106, 5, "s");
    input.push(("k0200".into(), "ap".into(), 5, "s200".into()));
    let report = sweep(&Scenario {
        label: "COW streamed bulk insert with column stats",
        table_type: TableType::CopyOnWrite,
        setup: setup(),
        operation: WriteOperation::BulkInsert,
        input,
        next: next_input(),
        action: Action::Commit,
        stats: true,
        streamed: true,
    })
    .await;
    assert!(report.crash_points > 10, "{report:?}");
}
