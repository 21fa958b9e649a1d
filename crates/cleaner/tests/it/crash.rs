//! Crash sweeps of the cleaner's operations: clean (KEEP_LATEST_COMMITS on copy-on-write with a
//! savepoint, KEEP_LATEST_FILE_VERSIONS on merge-on-read after compaction), savepoint creation,
//! savepoint deletion and archival are "crashed" before each of their storage operations in turn
//! ([`FaultMode::CrashAt`], every operation counted, reads included; a batch delete hit by the
//! crash deletes half of its keys first).
//!
//! After each crash a restarted process (fresh handles over the same directory, its own lock)
//! must find:
//! - the latest snapshot and every snapshot that must survive the operation (savepointed
//!   instants, the policy's retention window) reading exactly the model's rows;
//! - the metadata table in step with storage (`validate_table` finds nothing);
//! - the table as before or as after the operation: the same savepoints, archived instants and
//!   completed cleans as one of the two, every instant of the history exactly once, and the
//!   data files of one of the two (a clean that did not complete may have deleted part of its
//!   plan: its files lie between the two sets, and every snapshot reads the same);
//!
//! and the next run of the same operation must complete, leaving the state of the fault-free
//! run (same data files, savepoints, archived instants and history) with no pending instant on
//! the data or metadata timeline.
//!
//! A crash before a read leaves the storage a crash before the next write leaves: the crashed
//! run is exercised at every point, but a storage state (every file's path and bytes) already
//! checked is not checked again.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arbor_cleaner::{
    archive, clean, create_savepoint, delete_savepoint, list_savepoints, restore, CleanOptions,
    CleanPolicy, CleanerError,
};
use arbor_mdt::MDT_META_DIR;
use arbor_storage::{
    FaultInjectingStorage, FaultMode, InProcessLockProvider, ObjectStoreStorage, Storage,
    StorageExt,
};
use arbor_table::{Table, WriteOperation, WriteOptions};
use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, ActiveTimeline, InstantTime, State, TableConfig, TableLayout};

use arbor_testkit::crash::{copy_dir, fingerprint};
use arbor_testkit_tables::{create, rows, Model, Row, TestTable};

fn local(base: &Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

/// A table handle with its own in-process lock (a crashed process's lock died with it) that
/// treats every pending write as failed.
async fn table_over(storage: Arc<dyn Storage>) -> Table {
    Table::open(storage)
        .await
        .unwrap()
        .with_lock_provider(Arc::new(InProcessLockProvider::new()))
        .with_write_options(WriteOptions {
            heartbeat_timeout: Duration::ZERO,
            ..WriteOptions::default()
        })
}

/// A copy of `template`'s directory in a new temporary directory, opened by a fresh handle.
async fn copy_of(template: &TestTable) -> TestTable {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    copy_dir(&template.base, &base);
    let storage = local(&base);
    let table = table_over(storage.clone()).await;
    TestTable {
        _tmp: tmp,
        base,
        storage,
        table,
    }
}

/// The operation a sweep crashes.
#[derive(Debug, Clone)]
enum Operation {
    Clean(CleanPolicy),
    CreateSavepoint(InstantTime),
    DeleteSavepoint(InstantTime),
    Archive,
    Restore(InstantTime),
}

async fn run(table: &Table, op: &Operation) -> Result<(), CleanerError> {
    match op {
        Operation::Clean(policy) => clean(
            table,
            &CleanOptions {
                policy: *policy,
                ..CleanOptions::default()
            },
        )
        .await
        .map(|_| ()),
        Operation::CreateSavepoint(t) => create_savepoint(table, Some(t), "crash sweep")
            .await
            .map(|_| ()),
        Operation::DeleteSavepoint(t) => delete_savepoint(table, t).await,
        Operation::Archive => table.with_table_lock(archive(table)).await.map(|_| ()),
        Operation::Restore(t) => restore(table, t).await.map(|_| ()),
    }
}

/// What a restarted process sees of the table, beyond the rows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Observed {
    /// Data files (base and log) in storage.
    data_files: BTreeSet<String>,
    /// Savepointed instants (completed savepoints of the data timeline).
    savepoints: Vec<InstantTime>,
    /// Completed cleans (their times come from the clock: only the number is compared).
    completed_cleans: usize,
    /// Instants of the archived timeline.
    archived: BTreeSet<(InstantTime, Action)>,
    /// Every completed instant of the history except cleans, rollbacks and restores (their
    /// times come from the clock), as (time, action).
    history: Vec<(InstantTime, Action)>,
}

async fn observe(t: &TestTable) -> Observed {
    let storage = &t.storage;
    let layout = t.table.layout().clone();
    let history = TimelineHistory::load(storage.clone(), layout.clone())
        .await
        .unwrap();
    let completed = history.completed();
    Observed {
        data_files: t.data_files().await.into_iter().collect(),
        savepoints: list_savepoints(storage, &layout)
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.instant)
            .collect(),
        completed_cleans: completed
            .iter()
            .filter(|i| i.action == Action::Clean)
            .count(),
        archived: history
            .archived()
            .instants()
            .map(|a| (a.instant.requested_time.clone(), a.instant.action))
            .collect(),
        history: completed
            .iter()
            .filter(|i| !matches!(i.action, Action::Clean | Action::Rollback | Action::Restore))
            .map(|i| (i.requested_time.clone(), i.action))
            .collect(),
    }
}

/// Which side of the operation a crashed table is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Before,
    After,
}

/// Classifies `got` (whose latest snapshot reads `latest`) as `before` or `after`.
///
/// A clean that did not complete may have deleted part of its plan (files between the two
/// sets) and counts as before. A restore rolls back its instants one by one, newest first: a
/// crashed restore has removed some of them from the history (and some of their files), and
/// is on the side its latest snapshot reads as.
fn classify(
    got: &Observed,
    latest: &[Row],
    before: &Observed,
    after: &Observed,
    s: &Scenario,
) -> Option<Outcome> {
    let mut got = got.clone();
    let between =
        |g: &BTreeSet<String>| g.is_subset(&before.data_files) && g.is_superset(&after.data_files);
    match &s.operation {
        Operation::Clean(_)
            if got.completed_cleans == before.completed_cleans && between(&got.data_files) =>
        {
            got.data_files = before.data_files.clone();
        }
        Operation::Restore(_) => {
            let set = |h: &[(InstantTime, Action)]| h.iter().cloned().collect::<BTreeSet<_>>();
            let history = set(&got.history);
            if between(&got.data_files)
                && history.is_subset(&set(&before.history))
                && history.is_superset(&set(&after.history))
            {
                let side = if latest == s.latest.as_slice() {
                    before
                } else if Some(latest) == s.latest_after.as_deref() {
                    after
                } else {
                    return None;
                };
                got.data_files = side.data_files.clone();
                got.history = side.history.clone();
            }
        }
        _ => {}
    }
    if &got == before {
        Some(Outcome::Before)
    } else if &got == after {
        Some(Outcome::After)
    } else {
        None
    }
}

/// The pending instants of the data timeline and of the metadata table's.
async fn pending(storage: &Arc<dyn Storage>, layout: &TableLayout) -> Vec<String> {
    let mut out: Vec<String> = ActiveTimeline::load(storage.clone(), layout.clone())
        .await
        .unwrap()
        .pending()
        .iter()
        .map(|i| format!("data {i:?}"))
        .collect();
    if storage
        .exists(&format!("{MDT_META_DIR}/hoodie.properties"))
        .await
        .unwrap()
    {
        let config = TableConfig::load(storage.as_ref(), MDT_META_DIR)
            .await
            .unwrap();
        let mdt = TableLayout::from_config(MDT_META_DIR, &config).unwrap();
        out.extend(
            ActiveTimeline::load(storage.clone(), mdt)
                .await
                .unwrap()
                .pending()
                .iter()
                .map(|i| format!("metadata table {i:?}")),
        );
    }
    out
}

/// One operation to crash, on a prepared table.
struct Scenario {
    label: &'static str,
    template: TestTable,
    operation: Operation,
    /// The latest snapshot's rows before the operation.
    latest: Vec<Row>,
    /// The latest snapshot's rows after it, when it changes them (a restore).
    latest_after: Option<Vec<Row>>,
    /// Snapshots that must read the same throughout: (as of, rows).
    kept: Vec<(InstantTime, Vec<Row>)>,
}

/// Checks the rows and the metadata table of a table a restarted process opened. `deleting`
/// are the files (`partition/name`) of a clean that is pending (shown when validation fails).
async fn check_reads(
    t: &TestTable,
    s: &Scenario,
    outcome: Outcome,
    label: &str,
    deleting: &BTreeSet<String>,
) {
    let latest = match (outcome, &s.latest_after) {
        (Outcome::After, Some(rows)) => rows,
        _ => &s.latest,
    };
    assert_eq!(&t.read(None).await, latest, "{label}: latest snapshot");
    for (at, rows) in &s.kept {
        assert_eq!(
            &t.read(Some(at)).await,
            rows,
            "{label}: snapshot as of {at}"
        );
    }
    let report = arbor_mdt::validate::validate_table(t.storage.clone())
        .await
        .unwrap();
    // The validator knows a pending clean's files are being deleted: no discrepancy at all.
    assert!(
        report.discrepancies.is_empty(),
        "{label}: {:?} (pending clean deletes {deleting:?})",
        report.discrepancies
    );
}

/// The files of the plan of the pending clean, if one is pending (`partition/name`).
async fn pending_clean_files(
    t: &TestTable,
    before: &Observed,
    after: &Observed,
) -> BTreeSet<String> {
    let tl = ActiveTimeline::load(t.storage.clone(), t.table.layout().clone())
        .await
        .unwrap();
    if tl
        .filter(&[Action::Clean], &[State::Requested, State::Inflight])
        .is_empty()
    {
        return BTreeSet::new();
    }
    before
        .data_files
        .difference(&after.data_files)
        .cloned()
        .collect()
}

#[derive(Debug, Default)]
struct Report {
    crash_points: usize,
    before: usize,
    after: usize,
    /// Crash points that left a storage state an earlier point left (mostly crashes before a
    /// read): the crashed run is exercised, the state is not checked again.
    repeated: usize,
}

async fn sweep(s: Scenario) -> Report {
    let started = std::time::Instant::now();
    check_reads(
        &s.template,
        &s,
        Outcome::Before,
        &format!("{}: setup", s.label),
        &BTreeSet::new(),
    )
    .await;
    assert!(
        pending(&s.template.storage, s.template.table.layout())
            .await
            .is_empty(),
        "{}: setup leaves pending instants",
        s.label
    );
    let before = observe(&s.template).await;

    // The fault-free run on a copy: the state after, and the number of operations.
    let (after, total_ops) = {
        let t = copy_of(&s.template).await;
        let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
        let table = table_over(faulty.clone() as Arc<dyn Storage>).await;
        faulty.reset();
        run(&table, &s.operation)
            .await
            .unwrap_or_else(|e| panic!("{}: fault-free run: {e}", s.label));
        let ops = faulty.op_count();
        if std::env::var("CRASH_DEBUG").is_ok() {
            for o in faulty.ops() {
                println!("{}: {} {} {}", s.label, o.index, o.kind, o.key);
            }
        }
        check_reads(
            &t,
            &s,
            Outcome::After,
            &format!("{}: fault-free run", s.label),
            &BTreeSet::new(),
        )
        .await;
        (observe(&t).await, ops)
    };
    assert_ne!(
        before, after,
        "{}: the operation must change the table",
        s.label
    );

    let mut report = Report::default();
    let mut checked: HashSet<u64> = HashSet::new();
    let mut n = 0;
    loop {
        let t = copy_of(&s.template).await;
        let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
        faulty.set_partial_batches(true);
        let crashing = table_over(faulty.clone() as Arc<dyn Storage>).await;
        faulty.reset();
        faulty.set_mode(FaultMode::CrashAt(n));
        let result = run(&crashing, &s.operation).await;
        drop(crashing);
        let label = format!("{}: crash at operation {n}", s.label);
        if let Err(e) = &result {
            assert!(faulty.has_crashed(), "{label}: failed without a crash: {e}");
        }

        let done = result.is_ok() && faulty.op_count() <= n;
        if !done && !checked.insert(fingerprint(&t.base)) {
            report.repeated += 1;
            report.crash_points += 1;
            n += 1;
            continue;
        }

        // A restarted process: fresh storage and table handles over the same directory.
        let fresh = local(&t.base);
        let restarted = TestTable {
            table: table_over(fresh.clone()).await,
            storage: fresh.clone(),
            base: t.base.clone(),
            _tmp: t._tmp,
        };
        let got = observe(&restarted).await;
        let latest = restarted.read(None).await;
        let outcome = classify(&got, &latest, &before, &after, &s).unwrap_or_else(|| {
            panic!(
                "{label}: the table is neither as before nor as after:\n got {got:?}\n before \
                 {before:?}\n after {after:?}"
            )
        });
        if result.is_ok() {
            assert_eq!(
                outcome,
                Outcome::After,
                "{label}: a reported success is lost"
            );
        }
        let deleting = pending_clean_files(&restarted, &before, &after).await;
        check_reads(
            &restarted,
            &s,
            outcome,
            &format!("{label} (crashed)"),
            &deleting,
        )
        .await;
        let mut history = got.history.clone();
        history.dedup();
        assert_eq!(history, got.history, "{label}: an instant is seen twice");

        // The next run of the same operation completes (after a crash; a savepoint found
        // created or deleted already is refused as such: there is nothing left to do).
        if faulty.has_crashed() {
            let rerun = run(&restarted.table, &s.operation).await;
            match (&s.operation, outcome, rerun) {
                (Operation::CreateSavepoint(_), Outcome::After, Err(e)) => {
                    assert!(
                        e.to_string().contains("savepointed already"),
                        "{label}: {e}"
                    )
                }
                (Operation::DeleteSavepoint(_), Outcome::After, Err(e)) => {
                    assert!(e.to_string().contains("no such savepoint"), "{label}: {e}")
                }
                (_, _, Err(e)) => panic!("{label}: the next run failed: {e}"),
                (_, _, Ok(())) => {}
            }
        }
        let label = format!("{label} (next run)");
        check_reads(&restarted, &s, Outcome::After, &label, &BTreeSet::new()).await;
        assert_eq!(observe(&restarted).await, after, "{label}: final state");
        let left = pending(&restarted.storage, restarted.table.layout()).await;
        assert!(left.is_empty(), "{label}: pending instants left: {left:?}");

        match outcome {
            Outcome::Before => report.before += 1,
            Outcome::After => report.after += 1,
        }
        if done {
            // The operation finished before reaching operation n: every point was covered.
            break;
        }
        report.crash_points += 1;
        n += 1;
        assert!(n < 10_000, "{}: the operation never finished", s.label);
    }
    assert_eq!(
        report.crash_points, total_ops,
        "{}: the sweep must crash once before every operation of the fault-free run",
        s.label
    );
    assert!(report.before > 0, "{}: {report:?}", s.label);
    println!(
        "{}: swept {} crash points ({} distinct states: {} before, {} after), in {:.1?}",
        s.label,
        report.crash_points,
        report.crash_points - report.repeated,
        report.before,
        report.after,
        started.elapsed()
    );
    report
}

/// `versions` upserts of the same eight keys (every commit rewrites, or appends to, every
/// group). Returns the instants and the rows as of each.
async fn history(t: &TestTable, versions: i64) -> (Vec<InstantTime>, Vec<Vec<Row>>) {
    let mut model = Model::default();
    let mut instants = Vec::new();
    let mut snapshots = Vec::new();
    for v in 0..versions {
        let r = rows(0..8, v, &format!("v{v}-"));
        instants.push(t.write(WriteOperation::Upsert, &r).await);
        model.upsert(&r);
        snapshots.push(model.sorted());
    }
    (instants, snapshots)
}

#[tokio::test]
async fn test_clean_crash_sweep_cow_keep_latest_commits_reads_before_or_after_and_next_clean_completes(
) {
    let t = create(TableType::CopyOnWrite, true).await;
    let (instants, snapshots) = history(&t, 4).await;
    create_savepoint(&t.table, Some(&instants[1]), "kept")
        .await
        .unwrap();
    sweep(Scenario {
        label: "clean KEEP_LATEST_COMMITS(1), COW with a savepoint",
        template: t,
        operation: Operation::Clean(CleanPolicy::KeepLatestCommits(1)),
        latest: snapshots[3].clone(),
        latest_after: None,
        kept: vec![
            (instants[1].clone(), snapshots[1].clone()),
            (instants[3].clone(), snapshots[3].clone()),
        ],
    })
    .await;
}

#[tokio::test]
async fn test_clean_crash_sweep_mor_keep_latest_file_versions_reads_before_or_after_and_next_clean_completes(
) {
    let t = create(TableType::MergeOnRead, true).await;
    let (_instants, snapshots) = history(&t, 3).await;
    let compacted = t.table.compact().await.unwrap();
    assert!(!compacted.is_empty());
    sweep(Scenario {
        label: "clean KEEP_LATEST_FILE_VERSIONS(1), MOR after compaction",
        template: t,
        operation: Operation::Clean(CleanPolicy::KeepLatestFileVersions(1)),
        latest: snapshots[2].clone(),
        latest_after: None,
        kept: Vec::new(),
    })
    .await;
}

#[tokio::test]
async fn test_create_savepoint_crash_sweep_reads_before_or_after_and_next_create_completes() {
    let t = create(TableType::CopyOnWrite, true).await;
    let (instants, snapshots) = history(&t, 3).await;
    sweep(Scenario {
        label: "create savepoint",
        template: t,
        operation: Operation::CreateSavepoint(instants[1].clone()),
        latest: snapshots[2].clone(),
        latest_after: None,
        kept: vec![(instants[1].clone(), snapshots[1].clone())],
    })
    .await;
}

#[tokio::test]
async fn test_delete_savepoint_crash_sweep_reads_before_or_after_and_next_delete_completes() {
    let t = create(TableType::MergeOnRead, true).await;
    let (instants, snapshots) = history(&t, 3).await;
    create_savepoint(&t.table, Some(&instants[1]), "to delete")
        .await
        .unwrap();
    sweep(Scenario {
        label: "delete savepoint",
        template: t,
        operation: Operation::DeleteSavepoint(instants[1].clone()),
        latest: snapshots[2].clone(),
        latest_after: None,
        kept: vec![(instants[1].clone(), snapshots[1].clone())],
    })
    .await;
}

#[tokio::test]
async fn test_archive_crash_sweep_reads_before_or_after_and_next_archive_completes() {
    // More completed commits than the archiver's default maximum (30): it archives down to 20.
    let t = create(TableType::CopyOnWrite, true).await;
    let mut model = Model::default();
    let mut kept = Vec::new();
    for v in 0..32i64 {
        let r = rows(v as u32 % 8..v as u32 % 8 + 1, v, &format!("v{v}-"));
        let at = t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        if v >= 29 {
            kept.push((at, model.sorted()));
        }
    }
    sweep(Scenario {
        label: "archive",
        template: t,
        operation: Operation::Archive,
        latest: model.sorted(),
        latest_after: None,
        kept,
    })
    .await;
}

#[tokio::test]
async fn test_restore_crash_sweep_cow_reads_before_or_after_and_next_restore_completes() {
    let t = create(TableType::CopyOnWrite, true).await;
    let (instants, snapshots) = history(&t, 3).await;
    create_savepoint(&t.table, Some(&instants[1]), "restore point")
        .await
        .unwrap();
    sweep(Scenario {
        label: "restore, COW (one commit rolled back)",
        template: t,
        operation: Operation::Restore(instants[1].clone()),
        latest: snapshots[2].clone(),
        latest_after: Some(snapshots[1].clone()),
        kept: vec![(instants[1].clone(), snapshots[1].clone())],
    })
    .await;
}

#[tokio::test]
async fn test_restore_crash_sweep_mor_with_compaction_reads_before_or_after_and_next_restore_completes(
) {
    // A deltacommit and a compaction after the savepoint: the restore rolls back the compaction
    // (reads unchanged), then the deltacommit.
    let t = create(TableType::MergeOnRead, true).await;
    let (instants, snapshots) = history(&t, 3).await;
    create_savepoint(&t.table, Some(&instants[1]), "restore point")
        .await
        .unwrap();
    assert!(!t.table.compact().await.unwrap().is_empty());
    sweep(Scenario {
        label: "restore, MOR (a deltacommit and a compaction rolled back)",
        template: t,
        operation: Operation::Restore(instants[1].clone()),
        latest: snapshots[2].clone(),
        latest_after: Some(snapshots[1].clone()),
        kept: vec![(instants[1].clone(), snapshots[1].clone())],
    })
    .await;
}
