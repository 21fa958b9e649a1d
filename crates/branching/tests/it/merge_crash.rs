//! Crash sweeps of `arbor_branching::merge`: a merge of branch `dev` into main (upserts, an
//! update that must replace a record with a greater ordering value, a delete) is "crashed"
//! before each of its storage operations in turn ([`FaultMode::CrashAt`]: from the N-th
//! operation on every operation fails, reads included; a batch delete hit by the crash deletes
//! half of its keys first), on copy-on-write with a record index and on merge-on-read.
//!
//! After each crash a restarted process (fresh storage over the same directory, the crashed
//! process's lease lapsed) must find main reading exactly the rows before or after the merge,
//! `dev` unchanged, `arbor_branching::validate` and the index validation clean on both; the
//! retried merge must then leave main exactly as the fault-free merge did (a merge whose
//! commit landed is found up to date, so nothing is applied twice). hudi-rs (a reader that
//! knows nothing of branches) reads every distinct crashed state as main before or after,
//! before as long as arbor reads before, and after every retry (one `peer_digest.py --batch`
//! run per sweep; skipped visibly without the peer outside CI). States a crash left that an
//! earlier crash point already left are not checked again.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use arbor_branching::{
    create_branch, merge, select_root, validate, BranchSource, MergeOptions, MergeStrategy, RefSpec,
};
use arbor_storage::{FaultInjectingStorage, FaultMode, ObjectStoreStorage, Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::{validate_indexes, Table, WriteOperation};
use arbor_testkit::crash::{copy_dir, fingerprint};
use arbor_testkit_tables::{create, rows, rows_of, Row, TestTable};
use arbor_timeline::config::TableType;
use arrow::array::RecordBatch;

const LOCK_KEY: &str = ".hoodie/.locks/table_lock.json";

pub(super) fn local(base: &Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

/// Moves the expiry of a lease a crashed process left into the past (as if it had lapsed).
pub(super) async fn lapse_lease(storage: &Arc<dyn Storage>) {
    let Some((bytes, _)) = storage.get_opt(LOCK_KEY).await.unwrap() else {
        return;
    };
    let mut state: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    if state["owner"].is_null() {
        return;
    }
    state["expires_at"] = serde_json::json!(chrono::Utc::now() - chrono::Duration::seconds(1));
    storage
        .put(LOCK_KEY, serde_json::to_vec(&state).unwrap().into())
        .await
        .unwrap();
}

pub(super) async fn main_batches(storage: &Arc<dyn Storage>) -> Vec<RecordBatch> {
    TableReader::open(storage.clone())
        .await
        .unwrap()
        .snapshot(None)
        .await
        .unwrap()
}

async fn read(storage: &Arc<dyn Storage>, branch: Option<&str>) -> Vec<Row> {
    let reader = arbor_branching::open_reader(storage.clone(), branch)
        .await
        .unwrap();
    rows_of(&reader.snapshot(None).await.unwrap())
}

async fn assert_valid(storage: &Arc<dyn Storage>, label: &str) {
    for b in [None, Some("dev")] {
        let report = validate(storage, b).await.unwrap();
        assert!(
            report.discrepancies.is_empty(),
            "{label}: validate {b:?}: {:?}",
            report.discrepancies
        );
        let root = select_root(storage, b).await.unwrap();
        let indexes = validate_indexes(root.view(storage.clone())).await.unwrap();
        assert!(
            indexes.discrepancies.is_empty(),
            "{label}: indexes {b:?}: {:?}",
            indexes.discrepancies
        );
    }
}

async fn run_merge(storage: Arc<dyn Storage>) -> arbor_branching::Result<bool> {
    let main = Table::open(storage).await?;
    let outcome = merge(
        &main,
        &RefSpec::Branch("dev".into()),
        &MergeOptions::new(MergeStrategy::Source),
    )
    .await?;
    Ok(outcome.commit.is_some())
}

/// Main and `dev` diverged: `dev` updated k1 (with an ordering value below main's), inserted
/// k7 and deleted k3; main updated k4 with the greatest ordering value (a conflict-free
/// change of its own).
async fn setup(table_type: TableType, record_index: bool) -> TestTable {
    let t = create(table_type, true).await;
    if record_index {
        t.table.create_record_index().await.unwrap();
    }
    t.write(WriteOperation::Upsert, &rows(0..6, 5, "a")).await;
    create_branch(&t.table, "dev", BranchSource::MainHead)
        .await
        .unwrap();
    let dev = t.branch("dev").await;
    t.write_on(&dev, WriteOperation::Delete, &rows(1..2, 0, "x"))
        .await;
    let mut changed = rows(1..2, 1, "dev");
    changed.extend(rows(7..8, 1, "dev"));
    t.write_on(&dev, WriteOperation::Upsert, &changed).await;
    t.write_on(&dev, WriteOperation::Delete, &rows(3..4, 0, "x"))
        .await;
    t.write(WriteOperation::Upsert, &rows(4..5, 9, "main"))
        .await;
    t
}

async fn sweep(table_type: TableType, record_index: bool, label: &str) {
    let started = std::time::Instant::now();
    let template = setup(table_type, record_index).await;
    let before_rows = read(&template.storage, None).await;
    let dev_rows = read(&template.storage, Some("dev")).await;
    let before_batches = main_batches(&template.storage).await;
    let peer_python = arbor_testkit::peer_python_or_skip("merge crash sweep with hudi-rs");
    let peer_dir = tempfile::tempdir().unwrap();
    let mut peer_states: Vec<(String, bool, bool)> = Vec::new();

    // The fault-free run: the rows after and the number of operations.
    let (after_rows, after_batches, total) = {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        copy_dir(&template.base, &base);
        let faulty = Arc::new(FaultInjectingStorage::new(local(&base)));
        faulty.reset();
        assert!(
            run_merge(faulty.clone()).await.unwrap(),
            "{label}: no commit"
        );
        let total = faulty.op_count();
        let fresh = local(&base);
        assert_valid(&fresh, &format!("{label}: fault-free")).await;
        (read(&fresh, None).await, main_batches(&fresh).await, total)
    };
    assert_ne!(
        before_rows, after_rows,
        "{label}: the merge must change main"
    );
    let mut seen: HashSet<u64> = HashSet::new();
    let (mut before, mut after, mut points) = (0, 0, 0);
    for n in 0..total {
        points += 1;
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        copy_dir(&template.base, &base);
        let faulty = Arc::new(FaultInjectingStorage::new(local(&base)));
        faulty.set_partial_batches(true);
        faulty.reset();
        faulty.set_mode(FaultMode::CrashAt(n));
        let result = run_merge(faulty.clone()).await;
        let at = format!("{label}: crash at operation {n}");
        if let Err(e) = &result {
            assert!(faulty.has_crashed(), "{at}: failed without a crash: {e}");
        }
        drop(faulty);
        if !seen.insert(fingerprint(&base)) {
            continue;
        }
        let fresh = local(&base);
        lapse_lease(&fresh).await;
        let main = read(&fresh, None).await;
        let is_after = if main == before_rows {
            before += 1;
            false
        } else {
            assert_eq!(
                main, after_rows,
                "{at}: main reads neither before nor after"
            );
            after += 1;
            true
        };
        assert_eq!(
            read(&fresh, Some("dev")).await,
            dev_rows,
            "{at}: dev changed"
        );
        assert_valid(&fresh, &at).await;
        if peer_python.is_some() {
            let id = format!("p{n}");
            copy_dir(&base, &peer_dir.path().join(&id));
            peer_states.push((id, is_after, false));
        }
        // The retry finishes the merge exactly once.
        run_merge(fresh.clone())
            .await
            .unwrap_or_else(|e| panic!("{at}: retry: {e}"));
        assert_eq!(
            read(&fresh, None).await,
            after_rows,
            "{at}: after the retry"
        );
        assert_valid(&fresh, &format!("{at}, after the retry")).await;
        if peer_python.is_some() {
            let id = format!("p{n}-retried");
            copy_dir(&base, &peer_dir.path().join(&id));
            peer_states.push((id, true, true));
        }
    }
    assert!(
        before > 0 && after > 0,
        "{label}: {before} before, {after} after"
    );
    if let Some(python) = peer_python {
        let write = |name: &str, batches: &[RecordBatch]| {
            let path = peer_dir.path().join(name);
            arbor_testkit::write_arrow_ipc(&path, &batches[0].schema(), batches);
            serde_json::json!({"id": name, "arrow": path})
        };
        let mut requests = vec![
            write("before.arrow", &before_batches),
            write("after.arrow", &after_batches),
        ];
        for (id, _, _) in &peer_states {
            requests.push(serde_json::json!({"id": id, "table": peer_dir.path().join(id)}));
        }
        let docs = arbor_testkit::peer_digest_batch(&python, &requests);
        let digest = |id: &str| {
            let d = &docs[id];
            assert!(d.get("error").is_none(), "{label}: hudi-rs on {id}: {d}");
            (d["row_count"].clone(), d["data_sha256"].clone())
        };
        let (old, new) = (digest("before.arrow"), digest("after.arrow"));
        assert_ne!(
            old, new,
            "{label}: the merge must change what hudi-rs reads"
        );
        for (id, arbor_after, _) in &peer_states {
            let want = if *arbor_after { &new } else { &old };
            assert_eq!(&digest(id), want, "{label}: hudi-rs on {id}");
        }
    }
    println!(
        "{label}: {points} crash points, {} distinct states ({before} before, {after} after), \
         hudi-rs on {} states, in {:.1?}",
        before + after,
        peer_states.len(),
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_merge_crash_sweep_cow_record_index_main_before_or_after_and_retry_completes() {
    sweep(TableType::CopyOnWrite, true, "merge cow rli").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_merge_crash_sweep_mor_main_before_or_after_and_retry_completes() {
    sweep(TableType::MergeOnRead, false, "merge mor").await;
}
