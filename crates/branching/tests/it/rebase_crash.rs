//! Crash sweeps of `arbor_branching::rebase`: branch `dev` (an update that must replace a
//! record with a greater ordering value, an insert, deletes) rebased onto main, which updated
//! another key, is "crashed" before each of its storage operations in turn
//! ([`FaultMode::CrashAt`]: from the N-th operation on every operation fails, reads included; a
//! batch delete hit by the crash deletes half of its keys first): on copy-on-write with a
//! record index and a tag on `dev` (so the earlier history is kept on `dev-pre-rebase`), and on
//! merge-on-read without.
//!
//! After each crash a restarted process (fresh storage over the same directory, the crashed
//! process's lease lapsed) must find main unchanged, `dev` reading exactly as before or after
//! the rebase, or (a crash between its drop and its install) not existing with an error that
//! names the interrupted rebase; `arbor_branching::validate` and the index validation clean on
//! every root that exists. The retried rebase must leave `dev` exactly as the fault-free one
//! did, with the same branches. hudi-rs (which knows nothing of branches) reads main unchanged
//! at every distinct crashed state and after every retry (one `peer_digest.py --batch` run per
//! sweep; skipped visibly without the peer outside CI). The fault-free result is then
//! published by fast-forward.
//!
//! Each sweep crashes at every third operation (a rebase runs about 600: the merge's reads,
//! the staging branch, the merge commit, the swap), offset per sweep, to stay within CI's
//! time; `ARBOR_CRASH_STRIDE=1` crashes at every one (both sweeps then take about 5 minutes).

use std::collections::HashSet;
use std::sync::Arc;

use super::merge_crash::{lapse_lease, local, main_batches};
use arbor_branching::{
    create_branch, create_tag, list_branches, open_table, publish_and_drop, rebase, select_root,
    validate, BranchSource, BranchingError, MergeOptions, MergeStrategy,
};
use arbor_storage::{FaultInjectingStorage, FaultMode, Storage, StorageExt};
use arbor_table::{validate_indexes, Table, WriteOperation};
use arbor_testkit::crash::{copy_dir, fingerprint};
use arbor_testkit_tables::{create, rows, rows_of, Row, TestTable};
use arbor_timeline::config::TableType;

/// Makes every writer heartbeat a crashed process left look lapsed (as the heartbeat timeout
/// passing would).
async fn lapse_heartbeats(storage: &Arc<dyn Storage>) {
    for o in storage.list_all(".hoodie").await.unwrap() {
        if o.key.contains("/.heartbeat/") {
            storage.put(&o.key, "0".into()).await.unwrap();
        }
    }
}

/// The rows of `branch`, or `None` when it does not exist because a rebase of it was
/// interrupted between its drop and its install (any other error fails the test).
async fn read(storage: &Arc<dyn Storage>, branch: Option<&str>) -> Option<Vec<Row>> {
    match arbor_branching::open_reader(storage.clone(), branch).await {
        Ok(reader) => Some(rows_of(&reader.snapshot(None).await.unwrap())),
        Err(BranchingError::BranchNotFound {
            interrupted_rebase: Some(_),
            ..
        }) => None,
        Err(e) => panic!("read {branch:?}: {e}"),
    }
}

async fn names(storage: &Arc<dyn Storage>) -> Vec<String> {
    list_branches(storage)
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.info.name)
        .collect()
}

/// `validate` and the index validation on main and every branch.
async fn assert_valid(storage: &Arc<dyn Storage>, label: &str) {
    let mut roots: Vec<Option<String>> = vec![None];
    roots.extend(names(storage).await.into_iter().map(Some));
    for b in &roots {
        let b = b.as_deref();
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

async fn run_rebase(storage: Arc<dyn Storage>) -> arbor_branching::Result<()> {
    let main = Table::open(storage).await?;
    rebase(&main, "dev", &MergeOptions::new(MergeStrategy::Source)).await?;
    Ok(())
}

/// Main and `dev` diverged: `dev` deleted k1, re-inserted it (with an ordering value below
/// main's), inserted k7 and deleted k3; main updated k4 with the greatest ordering value.
async fn setup(table_type: TableType, record_index: bool, tagged: bool) -> TestTable {
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
    if tagged {
        create_tag(&dev, "reviewed", None, None).await.unwrap();
    }
    t.write(WriteOperation::Upsert, &rows(4..5, 9, "main"))
        .await;
    t
}

async fn sweep(
    table_type: TableType,
    record_index: bool,
    tagged: bool,
    offset: usize,
    label: &str,
) {
    let started = std::time::Instant::now();
    let template = setup(table_type, record_index, tagged).await;
    let main_rows = read(&template.storage, None).await.unwrap();
    let dev_before = read(&template.storage, Some("dev")).await.unwrap();
    let before_batches = main_batches(&template.storage).await;
    let peer_python = arbor_testkit::peer_python_or_skip("rebase crash sweep with hudi-rs");
    let peer_dir = tempfile::tempdir().unwrap();
    let mut peer_states: Vec<String> = Vec::new();

    // The fault-free run: dev after, the branches, the number of operations; then the rebased
    // branch publishes by fast-forward.
    let (dev_after, branches_after, total) = {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        copy_dir(&template.base, &base);
        let faulty = Arc::new(FaultInjectingStorage::new(local(&base)));
        faulty.reset();
        run_rebase(faulty.clone()).await.unwrap();
        let total = faulty.op_count();
        let fresh = local(&base);
        assert_valid(&fresh, &format!("{label}: fault-free")).await;
        let after = read(&fresh, Some("dev")).await.unwrap();
        let branches = names(&fresh).await;
        let dev = open_table(fresh.clone(), Some("dev")).await.unwrap();
        publish_and_drop(&dev).await.unwrap();
        assert_eq!(
            read(&fresh, None).await.unwrap(),
            after,
            "{label}: published"
        );
        (after, branches, total)
    };
    assert_ne!(dev_before, dev_after, "{label}: the rebase must change dev");
    let want_branches: Vec<&str> = if tagged {
        vec!["dev", "dev-pre-rebase"]
    } else {
        vec!["dev"]
    };
    assert_eq!(branches_after, want_branches, "{label}");
    let mut seen: HashSet<u64> = HashSet::new();
    let (mut before, mut after, mut missing, mut points) = (0, 0, 0, 0);
    let stride: usize = std::env::var("ARBOR_CRASH_STRIDE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|s| *s > 0)
        .unwrap_or(3);
    for n in (offset % stride..total).step_by(stride) {
        points += 1;
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        copy_dir(&template.base, &base);
        let faulty = Arc::new(FaultInjectingStorage::new(local(&base)));
        faulty.set_partial_batches(true);
        faulty.reset();
        faulty.set_mode(FaultMode::CrashAt(n));
        let result = run_rebase(faulty.clone()).await;
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
        lapse_heartbeats(&fresh).await;
        assert_eq!(
            read(&fresh, None).await.as_ref(),
            Some(&main_rows),
            "{at}: main changed"
        );
        match read(&fresh, Some("dev")).await {
            Some(rows) if rows == dev_before => before += 1,
            Some(rows) => {
                assert_eq!(rows, dev_after, "{at}: dev reads neither before nor after");
                after += 1;
            }
            None => missing += 1,
        }
        assert_valid(&fresh, &at).await;
        if peer_python.is_some() {
            let id = format!("p{n}");
            copy_dir(&base, &peer_dir.path().join(&id));
            peer_states.push(id);
        }
        // The retry finishes the rebase.
        run_rebase(fresh.clone())
            .await
            .unwrap_or_else(|e| panic!("{at}: retry: {e}"));
        assert_eq!(
            read(&fresh, Some("dev")).await.as_ref(),
            Some(&dev_after),
            "{at}: dev after the retry"
        );
        assert_eq!(
            names(&fresh).await,
            want_branches,
            "{at}: branches after the retry"
        );
        assert_valid(&fresh, &format!("{at}, after the retry")).await;
        if peer_python.is_some() {
            let id = format!("p{n}-retried");
            copy_dir(&base, &peer_dir.path().join(&id));
            peer_states.push(id);
        }
    }
    assert!(
        before > 0 && after > 0,
        "{label}: {before} before, {after} after, {missing} missing"
    );
    if let Some(python) = peer_python {
        let path = peer_dir.path().join("main.arrow");
        arbor_testkit::write_arrow_ipc(&path, &before_batches[0].schema(), &before_batches);
        let mut requests = vec![serde_json::json!({"id": "main.arrow", "arrow": path})];
        for id in &peer_states {
            requests.push(serde_json::json!({"id": id, "table": peer_dir.path().join(id)}));
        }
        let docs = arbor_testkit::peer_digest_batch(&python, &requests);
        let digest = |id: &str| {
            let d = &docs[id];
            assert!(d.get("error").is_none(), "{label}: hudi-rs on {id}: {d}");
            (d["row_count"].clone(), d["data_sha256"].clone())
        };
        let want = digest("main.arrow");
        for id in &peer_states {
            assert_eq!(digest(id), want, "{label}: hudi-rs on {id}: main changed");
        }
    }
    println!(
        "{label}: {points} crash points, {} distinct states ({before} before, {after} after, \
         {missing} between drop and install), hudi-rs on {} states, in {:.1?}",
        before + after + missing,
        peer_states.len(),
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_rebase_crash_sweep_cow_record_index_tagged_before_or_after_and_retry_completes() {
    sweep(
        TableType::CopyOnWrite,
        true,
        true,
        0,
        "rebase cow rli tagged",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_rebase_crash_sweep_mor_before_or_after_and_retry_completes() {
    sweep(TableType::MergeOnRead, false, false, 1, "rebase mor").await;
}
