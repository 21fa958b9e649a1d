//! Distributed writes (`Table::begin_write`, `write_fragment`, `commit_fragments`): fragments
//! written by worker processes this test spawns (this test binary again, running
//! [`fragment_worker`]) and committed once equal a single-process write of the same rows, on
//! copy-on-write and merge-on-read tables, on main and on a branch, with the record index and a
//! secondary index; the coordinator's refusals; a retried fragment's leftovers; and crash
//! sweeps of a fragment writer and of the coordinator's commit.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arbor_branching::{create_branch, BranchSource};

use super::clone_detach_support::lapse_stale_lease;
use arbor_storage::{FaultInjectingStorage, FaultMode, ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::{Fragment, Table, WriteContext, WriteOperation};
use arbor_testkit_tables::{batch, create, rows, rows_of, Row, TestTable};
use arbor_timeline::config::TableType;
use arbor_timeline::MetaRoot;

/// What a worker process is asked to write (`ARBOR_FRAGMENT_WORKER`, JSON).
#[derive(serde::Serialize, serde::Deserialize)]
struct WorkerJob {
    base: String,
    branch: Option<String>,
    context: String,
    task: u64,
    rows: Vec<Row>,
    output: String,
}

const WORKER_ENV: &str = "ARBOR_FRAGMENT_WORKER";

/// The worker: run by [`spawn_fragments`] as a process of its own (ignored otherwise). Writes
/// one fragment and stores its bytes at the job's output path.
#[tokio::test]
#[ignore = "a worker process of the distributed-write tests, spawned by them"]
async fn fragment_worker() {
    let Ok(job) = std::env::var(WORKER_ENV) else {
        return;
    };
    let job: WorkerJob = serde_json::from_str(&job).unwrap();
    let storage: Arc<dyn Storage> =
        Arc::new(ObjectStoreStorage::local(Path::new(&job.base)).unwrap());
    let table = open(&storage, job.branch.as_deref()).await;
    let context = WriteContext::from_json(&job.context).unwrap();
    let fragment = table
        .write_fragment(&context, job.task, vec![batch(&job.rows)])
        .await
        .unwrap();
    std::fs::write(&job.output, fragment.to_bytes()).unwrap();
}

async fn open(storage: &Arc<dyn Storage>, branch: Option<&str>) -> Table {
    match branch {
        Some(b) => arbor_branching::open_branch(storage.clone(), b)
            .await
            .unwrap(),
        None => Table::open(storage.clone()).await.unwrap(),
    }
}

/// Writes one fragment per element of `parts` in worker processes running at once (task `i`
/// for `parts[i]`), returning the fragments in task order.
fn spawn_fragments(
    base: &Path,
    branch: Option<&str>,
    context: &WriteContext,
    parts: Vec<Vec<Row>>,
) -> Vec<Fragment> {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut children = Vec::new();
    for (task, rows) in parts.into_iter().enumerate() {
        let output = dir.path().join(format!("fragment-{task}"));
        let job = WorkerJob {
            base: base.to_string_lossy().into_owned(),
            branch: branch.map(str::to_string),
            context: context.to_json(),
            task: task as u64,
            rows,
            output: output.to_string_lossy().into_owned(),
        };
        let child = std::process::Command::new(&exe)
            .args([
                "distributed::fragment_worker",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WORKER_ENV, serde_json::to_string(&job).unwrap())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        children.push((output, child));
    }
    children
        .into_iter()
        .map(|(output, child)| {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "worker failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            Fragment::from_bytes(&std::fs::read(&output).unwrap()).unwrap()
        })
        .collect()
}

/// Rows split by region (every region's file groups written by one fragment).
fn by_region(rows: &[Row]) -> Vec<Vec<Row>> {
    let mut parts: std::collections::BTreeMap<String, Vec<Row>> = Default::default();
    for r in rows {
        parts.entry(r.1.clone()).or_default().push(r.clone());
    }
    parts.into_values().collect()
}

/// A table with the record index and a secondary index on `name`, 40 rows written.
async fn indexed_table(table_type: TableType) -> TestTable {
    let t = create(table_type, true).await;
    t.write(WriteOperation::BulkInsert, &rows(0..40, 1, "a"))
        .await;
    t.table.create_record_index().await.unwrap();
    t.table
        .create_secondary_index("by_name", "name")
        .await
        .unwrap();
    t
}

/// The rows of `branch` (main for `None`).
async fn read(t: &TestTable, branch: Option<&str>) -> Vec<Row> {
    t.read_branch(branch, None).await
}

/// Asserts the metadata table and the indexes of `branch` (main for `None`) agree with the
/// data.
async fn assert_indexes_valid(t: &TestTable, branch: Option<&str>, step: &str) {
    let view = match branch {
        Some(b) => MetaRoot::Branch(b.to_string()).view(t.storage.clone()),
        None => arbor_timeline::resolve_main(t.storage.as_ref())
            .await
            .unwrap()
            .view(t.storage.clone()),
    };
    let report = arbor_mdt::validate::validate_table(view.clone())
        .await
        .unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "{step}: {:?}",
        report.discrepancies
    );
    let indexes = arbor_table::validate_indexes(view).await.unwrap();
    assert!(
        indexes.checked.iter().any(|(n, _)| n == "record_index"),
        "{step}: {:?}",
        indexes.checked
    );
    assert!(
        indexes.discrepancies.is_empty(),
        "{step}: {:?}",
        indexes.discrepancies
    );
}

/// One distributed write on `handle` of `t` (its branch `branch`): begins, spawns the
/// workers, commits.
async fn distributed(
    t: &TestTable,
    handle: &Table,
    branch: Option<&str>,
    op: WriteOperation,
    parts: Vec<Vec<Row>>,
) -> arbor_table::CommitResult {
    let txn = handle.begin_write(op).await.unwrap();
    let fragments = spawn_fragments(&t.base, branch, txn.context(), parts);
    handle.commit_fragments(txn, fragments).await.unwrap()
}

/// A write of a sweep: the operation, all its rows, and the rows of each fragment.
type Step<'a> = (WriteOperation, &'a [Row], Vec<Vec<Row>>);

async fn fragments_equal_one_process(table_type: TableType, branch: Option<&str>) {
    let (ours, twin) = (
        indexed_table(table_type).await,
        indexed_table(table_type).await,
    );
    let handles = match branch {
        Some(b) => {
            for t in [&ours, &twin] {
                create_branch(&t.table, b, BranchSource::MainHead)
                    .await
                    .unwrap();
            }
            (ours.branch(b).await, twin.branch(b).await)
        }
        None => (ours.table.clone(), twin.table.clone()),
    };
    let case = format!("{table_type:?} on {}", branch.unwrap_or("main"));
    let inserted = rows(40..70, 2, "b");
    let upserted: Vec<Row> = rows(0..20, 3, "c")
        .into_iter()
        .chain(rows(70..80, 3, "c"))
        .collect();
    let deleted = rows(30..50, 4, "d");
    let steps: [Step<'_>; 3] = [
        (
            WriteOperation::BulkInsert,
            &inserted,
            inserted.chunks(10).map(<[Row]>::to_vec).collect(),
        ),
        (WriteOperation::Upsert, &upserted, by_region(&upserted)),
        (WriteOperation::Delete, &deleted, by_region(&deleted)),
    ];
    for (op, all, parts) in steps {
        let tasks = parts.len();
        let result = distributed(&ours, &handles.0, branch, op, parts).await;
        let single = handles.1.write(op, vec![batch(all)]).await.unwrap();
        let step = format!("{case}: {op:?} in {tasks} fragments");
        assert_eq!(
            (result.inserted, result.updated, result.deleted),
            (single.inserted, single.updated, single.deleted),
            "{step}"
        );
        assert_eq!(
            read(&ours, branch).await,
            read(&twin, branch).await,
            "{step}"
        );
        assert_indexes_valid(&ours, branch, &step).await;
    }
    // 40 + 30 bulk inserted + 10 new keys upserted - 20 deleted; a branch leaves main alone.
    assert_eq!(
        read(&ours, None).await.len(),
        if branch.is_some() { 40 } else { 60 }
    );
    if branch.is_none() {
        ours.assert_peer_agrees("distributed write peer check", &case)
            .await;
    }
    // Every marker is gone once the writes committed.
    assert!(
        !ours.listing().await.iter().any(|k| k.contains(".temp/")),
        "{case}: {:?}",
        ours.listing().await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_fragments_of_processes_equal_one_process_write_cow_main() {
    fragments_equal_one_process(TableType::CopyOnWrite, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_fragments_of_processes_equal_one_process_write_mor_main() {
    fragments_equal_one_process(TableType::MergeOnRead, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_fragments_of_processes_equal_one_process_write_cow_branch() {
    fragments_equal_one_process(TableType::CopyOnWrite, Some("dev")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_fragments_of_processes_equal_one_process_write_mor_branch() {
    fragments_equal_one_process(TableType::MergeOnRead, Some("dev")).await;
}

/// Expects `result` to be an `InvalidInput` error whose message holds `needle`.
fn assert_refused<T: std::fmt::Debug>(result: arbor_table::Result<T>, needle: &str) {
    match result {
        Err(arbor_table::TableError::InvalidInput { reason, .. }) => {
            assert!(reason.contains(needle), "{reason}")
        }
        other => panic!("expected a refusal naming {needle:?}, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_commit_refuses_fragments_no_single_write_could_make_and_leaves_the_table() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = indexed_table(table_type).await;
        let before = read(&t, None).await;
        let files_before = t.data_files().await;
        // One key in two fragments of an upsert.
        let txn = t.table.begin_write(WriteOperation::Upsert).await.unwrap();
        let a = t
            .table
            .write_fragment(txn.context(), 0, vec![batch(&rows(100..103, 2, "x"))])
            .await
            .unwrap();
        let b = t
            .table
            .write_fragment(txn.context(), 1, vec![batch(&rows(102..104, 2, "y"))])
            .await
            .unwrap();
        assert_refused(
            t.table.commit_fragments(txn, vec![a, b]).await,
            "write the same record key",
        );
        assert_eq!(read(&t, None).await, before, "{table_type:?}");
        assert_eq!(t.data_files().await, files_before, "{table_type:?}");
        // Two fragments updating keys of one file group (a base file rewrite on
        // copy-on-write; on merge-on-read, log appends are allowed).
        let txn = t.table.begin_write(WriteOperation::Upsert).await.unwrap();
        let a = t
            .table
            .write_fragment(txn.context(), 0, vec![batch(&rows(0..1, 2, "x"))])
            .await
            .unwrap();
        let b = t
            .table
            .write_fragment(txn.context(), 1, vec![batch(&rows(2..3, 2, "y"))])
            .await
            .unwrap();
        match table_type {
            TableType::CopyOnWrite => {
                assert_refused(
                    t.table.commit_fragments(txn, vec![a, b]).await,
                    "both write file group",
                );
                assert_eq!(read(&t, None).await, before);
                assert_eq!(t.data_files().await, files_before);
            }
            TableType::MergeOnRead => {
                t.table.commit_fragments(txn, vec![a, b]).await.unwrap();
                let got = read(&t, None).await;
                assert_eq!(got.iter().find(|r| r.0 == "k0000").unwrap().3, "x0");
                assert_eq!(got.iter().find(|r| r.0 == "k0002").unwrap().3, "y2");
                assert_indexes_valid(&t, None, "two fragments appending to one group").await;
            }
        }
        // One fragment twice, a fragment of another write, no fragment.
        let txn = t.table.begin_write(WriteOperation::Insert).await.unwrap();
        let a = t
            .table
            .write_fragment(txn.context(), 0, vec![batch(&rows(200..201, 2, "x"))])
            .await
            .unwrap();
        assert_refused(
            t.table
                .commit_fragments(txn, vec![a.clone(), a.clone()])
                .await,
            "two fragments of task 0",
        );
        let txn = t.table.begin_write(WriteOperation::Insert).await.unwrap();
        assert_refused(
            t.table.commit_fragments(txn, vec![a]).await,
            "was written for instant",
        );
        let txn = t.table.begin_write(WriteOperation::Insert).await.unwrap();
        assert_refused(t.table.commit_fragments(txn, vec![]).await, "no fragment");
        t.assert_valid("after the refusals").await;
        assert!(!t.listing().await.iter().any(|k| k.contains(".temp/")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_a_retried_fragments_first_attempt_is_deleted_at_commit_and_late_fragments_refused() {
    let t = indexed_table(TableType::MergeOnRead).await;
    let files_before = t.data_files().await;
    let txn = t.table.begin_write(WriteOperation::Upsert).await.unwrap();
    let context = txn.context().clone();
    // Task 0's first attempt wrote its files (an update: a log file, and a new key) but its
    // fragment never reached the coordinator; the retry wrote them again.
    let lost = t
        .table
        .write_fragment(&context, 0, vec![batch(&rows(38..42, 2, "lost"))])
        .await
        .unwrap();
    let retry = t
        .table
        .write_fragment(&context, 0, vec![batch(&rows(38..42, 2, "retry"))])
        .await
        .unwrap();
    assert!(lost.files().iter().all(|f| !retry.files().contains(f)));
    let result = t
        .table
        .commit_fragments(txn, vec![retry.clone()])
        .await
        .unwrap();
    assert_eq!((result.inserted, result.updated), (2, 2));
    let files = t.data_files().await;
    for f in lost.files() {
        assert!(!files.contains(&f), "{f} of the lost attempt is left");
    }
    for f in retry.files() {
        assert!(
            files.contains(&f),
            "{f} of the committed fragment is missing"
        );
    }
    assert_eq!(files.len(), files_before.len() + retry.files().len());
    let got = read(&t, None).await;
    assert!(got
        .iter()
        .filter(|r| r.0.as_str() >= "k0038")
        .all(|r| r.3.starts_with("retry")));
    assert_indexes_valid(&t, None, "after the retry").await;
    // A fragment written after the commit is refused and leaves nothing.
    let late = t
        .table
        .write_fragment(&context, 1, vec![batch(&rows(300..301, 2, "late"))])
        .await;
    assert!(
        matches!(late, Err(arbor_table::TableError::InstantRolledBack { .. })),
        "{late:?}"
    );
    assert_eq!(t.data_files().await, files);
}

/// Lets the heartbeat of the crashed write's `instant` lapse (as if its timeout had passed),
/// so that the next write rolls its instant back.
async fn lapse_heartbeat(storage: &Arc<dyn Storage>, instant: &str) {
    let keys: Vec<String> = vec![format!(".hoodie/.heartbeat/{instant}")];
    storage.delete_batch(&keys).await.unwrap();
}

/// After a crash that left `storage` (table `t`'s), as a restarted process: main reads
/// `before` or `after`; once the next write ran (rolling back a pending instant) and orphans
/// were reclaimed, no file of the crashed write's instant `instant` is left unless it
/// committed, and the table validates.
async fn check_after_crash(
    t: &TestTable,
    instant: &str,
    (before, after): (&[Row], &[Row]),
    step: &str,
) {
    let storage = &t.storage;
    lapse_stale_lease(storage).await;
    let reader = TableReader::open(storage.clone()).await.unwrap();
    let now = rows_of(&reader.snapshot(None).await.unwrap());
    let committed = now == after;
    assert!(committed || now == before, "{step}: reads {now:?}");
    lapse_heartbeat(storage, instant).await;
    let table = Table::open(storage.clone()).await.unwrap();
    table
        .write(
            WriteOperation::Upsert,
            vec![batch(&rows(500..501, 9, "next"))],
        )
        .await
        .unwrap();
    arbor_cleaner::reclaim::reclaim_orphans(storage, Duration::ZERO, false)
        .await
        .unwrap();
    let left: Vec<String> = t
        .data_files()
        .await
        .into_iter()
        .filter(|f| f.contains(instant))
        .collect();
    if !committed {
        assert!(
            left.is_empty(),
            "{step}: files of the crashed write left: {left:?}"
        );
    }
    let mut expected: Vec<Row> = if committed { after } else { before }.to_vec();
    expected.extend(rows(500..501, 9, "next"));
    expected.sort();
    assert_eq!(read(t, None).await, expected, "{step}");
    assert_indexes_valid(t, None, step).await;
}

/// A faulty handle over `t`'s storage and the fault layer.
async fn faulty(t: &TestTable) -> (Table, Arc<FaultInjectingStorage>) {
    let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
    let handle = Table::open(faulty.clone() as Arc<dyn Storage>)
        .await
        .unwrap();
    (handle, faulty)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_crash_sweep_of_a_fragment_writer_leaves_the_table_as_before() {
    let update = rows(0..4, 2, "u");
    let mut n = 0;
    loop {
        let t = indexed_table(TableType::MergeOnRead).await;
        let before = read(&t, None).await;
        let txn = t.table.begin_write(WriteOperation::Upsert).await.unwrap();
        let instant = txn.instant().to_string();
        let (worker, fault) = faulty(&t).await;
        fault.reset();
        fault.set_mode(FaultMode::CrashAt(n));
        let outcome = worker
            .write_fragment(txn.context(), 0, vec![batch(&update)])
            .await;
        if outcome.is_ok() && !fault.has_crashed() {
            assert!(
                n > 5,
                "the fragment writer made only {n} storage operations"
            );
            break;
        }
        // The worker died: the job fails and the coordinator gives the write up (every
        // even point), or the coordinator dies too (every odd point).
        if n % 2 == 0 {
            t.table.abort_write(txn).await;
        } else {
            drop(txn);
        }
        check_after_crash(
            &t,
            &instant,
            (&before, &before),
            &format!("worker crash at {n}"),
        )
        .await;
        n += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_crash_sweep_of_the_coordinators_commit_leaves_before_or_after() {
    let mut n = 0;
    let parts = by_region(&rows(0..6, 2, "u"));
    loop {
        let t = indexed_table(TableType::CopyOnWrite).await;
        let before = read(&t, None).await;
        let mut after = before.clone();
        after.retain(|r| !parts.iter().flatten().any(|p| p.0 == r.0));
        after.extend(parts.iter().flatten().cloned());
        after.sort();
        let (coordinator, fault) = faulty(&t).await;
        let txn = coordinator
            .begin_write(WriteOperation::Upsert)
            .await
            .unwrap();
        let instant = txn.instant().to_string();
        let mut fragments = Vec::new();
        for (task, part) in parts.iter().enumerate() {
            fragments.push(
                t.table
                    .write_fragment(txn.context(), task as u64, vec![batch(part)])
                    .await
                    .unwrap(),
            );
        }
        fault.reset();
        fault.set_mode(FaultMode::CrashAt(n));
        let outcome = coordinator.commit_fragments(txn, fragments).await;
        if outcome.is_ok() && !fault.has_crashed() {
            assert!(n > 10, "the commit made only {n} storage operations");
            assert_eq!(read(&t, None).await, after);
            break;
        }
        check_after_crash(
            &t,
            &instant,
            (&before, &after),
            &format!("commit crash at {n}"),
        )
        .await;
        n += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_upserts_routed_by_table_route_commit_in_any_number_of_fragments() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        for record_index in [false, true] {
            let case = format!("{table_type:?}, record index {record_index}");
            let (ours, twin) = (
                create(table_type, true).await,
                create(table_type, true).await,
            );
            for t in [&ours, &twin] {
                // Three writes: six file groups in two partitions.
                for (i, ids) in [0..20, 20..40, 40..60].into_iter().enumerate() {
                    t.write(WriteOperation::BulkInsert, &rows(ids, i as i64, "a"))
                        .await;
                }
                if record_index {
                    t.table.create_record_index().await.unwrap();
                }
            }
            let changes: Vec<Row> = rows(0..80, 5, "b").into_iter().step_by(2).collect();
            let routes = ours
                .table
                .route(WriteOperation::Upsert, &[batch(&changes)])
                .await
                .unwrap();
            assert_eq!(routes.len(), changes.len());
            let tasks = 4;
            let mut parts = vec![Vec::new(); tasks];
            for (row, route) in changes.iter().zip(&routes) {
                parts[(*route % tasks as u64) as usize].push(row.clone());
            }
            parts.retain(|p| !p.is_empty());
            assert!(parts.len() > 1, "{case}: every row routed to one task");
            let txn = ours
                .table
                .begin_write(WriteOperation::Upsert)
                .await
                .unwrap();
            let mut fragments = Vec::new();
            for (task, part) in parts.iter().enumerate() {
                fragments.push(
                    ours.table
                        .write_fragment(txn.context(), task as u64, vec![batch(part)])
                        .await
                        .unwrap(),
                );
            }
            let result = ours.table.commit_fragments(txn, fragments).await.unwrap();
            let single = twin
                .table
                .write(WriteOperation::Upsert, vec![batch(&changes)])
                .await
                .unwrap();
            assert_eq!(
                (result.inserted, result.updated),
                (single.inserted, single.updated),
                "{case}"
            );
            assert_eq!((result.inserted, result.updated), (10, 30), "{case}");
            assert_eq!(read(&ours, None).await, read(&twin, None).await, "{case}");
            ours.assert_valid(&case).await;
        }
    }
}
