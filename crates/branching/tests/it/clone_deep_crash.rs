//! Crash sweeps of a deep clone (`clone_table` with `deep: true`): crashed before each storage
//! operation of the source in turn, then before each storage operation of the clone in turn
//! ([`FaultMode::CrashAt`], partial batch deletes). The locations are names mapped to
//! directories (no shared root: files are copied through the process).
//!
//! After each crash, a restarted process (fresh storages, stale lock leases lapsed) must find
//! the source reading as before, and the target either refusing to open as a clone still being
//! created (`CloneIncomplete`), or holding nothing yet, or reading the snapshot (an activated
//! clone, shallow until its copy finishes, or detached); the same `clone_table` call again must
//! succeed and leave a deep clone: detached, self-contained, reading the snapshot, with no pin
//! and no savepoint on the source.

use std::path::Path;
use std::sync::Arc;

use arbor_branching::clone::{clone_table, CloneAt, CloneRequest};
use arbor_branching::BranchingError;
use arbor_storage::{FaultInjectingStorage, FaultMode, Storage};
use arbor_table::WriteOperation;
use arbor_testkit::crash::copy_dir;
use arbor_testkit_tables::{create, rows, Model, Row};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::{open_location, LocationOpener};
use arbor_timeline::TimelineError;

use crate::clone_detach_support::*;

fn request() -> CloneRequest {
    CloneRequest {
        source: SRC.to_string(),
        target: CLONE.to_string(),
        at: CloneAt::Main,
        tag_branch: None,
        deep: true,
    }
}

/// The source in `dir/src` and an empty `dir/clone`: the source's rows.
async fn template(dir: &Path, tt: TableType) -> Vec<Row> {
    let t = create(tt, true).await;
    let mut source = Model::default();
    for (i, ids) in [(1, 0..12), (2, 6..18)] {
        let r = rows(ids, i, "s");
        t.write(WriteOperation::Upsert, &r).await;
        source.upsert(&r);
    }
    copy_dir(&t.base, &dir.join("src"));
    std::fs::create_dir_all(dir.join("clone")).unwrap();
    source.sorted()
}

async fn sweep(tt: TableType, side: Side) -> usize {
    let tpl = tempfile::tempdir().unwrap();
    let source_rows = template(tpl.path(), tt).await;
    for k in 0.. {
        let run = tempfile::tempdir().unwrap();
        copy_dir(&tpl.path().join("src"), &run.path().join("src"));
        copy_dir(&tpl.path().join("clone"), &run.path().join("clone"));
        let clean = opener_over(run.path());
        let faulty = Arc::new(FaultInjectingStorage::new(match side {
            Side::Source => clean.open(SRC).unwrap(),
            Side::Clone => clean.open(CLONE).unwrap(),
        }));
        faulty.set_partial_batches(true);
        faulty.set_mode(FaultMode::CrashAt(k));
        let faulty_dyn: Arc<dyn Storage> = faulty.clone();
        let crashing = MapOpener(match side {
            Side::Source => vec![
                (SRC.to_string(), faulty_dyn),
                (CLONE.to_string(), clean.open(CLONE).unwrap()),
            ],
            Side::Clone => vec![
                (SRC.to_string(), clean.open(SRC).unwrap()),
                (CLONE.to_string(), faulty_dyn),
            ],
        });
        let result = clone_table(&crashing, &request()).await;
        if !faulty.has_crashed() {
            let out = result.unwrap();
            assert!(out.deep && out.pins.is_empty(), "{out:?}");
            assert_self_contained(&clean, CLONE, &source_rows, "fault-free run").await;
            return k;
        }
        drop(result);
        let step = format!("deep {tt:?} {side:?} crash at {k}");
        let fresh = opener_over(run.path());
        lapse_stale_lease(&fresh.open(SRC).unwrap()).await;
        lapse_stale_lease(&fresh.open(CLONE).unwrap()).await;
        assert_eq!(read(&fresh, SRC).await, source_rows, "{step}: source");
        match open_location(CLONE, &fresh).await {
            Ok(storage) => {
                // Nothing made yet (no table there), or an activated clone reading the snapshot.
                if arbor_table::read::TableReader::open(storage.clone())
                    .await
                    .is_ok()
                {
                    assert_eq!(read_storage(storage).await, source_rows, "{step}: clone");
                }
            }
            Err(TimelineError::CloneIncomplete { .. }) => {}
            Err(e) => panic!("{step}: the target does not open: {e}"),
        }
        let out = clone_table(&fresh, &request())
            .await
            .unwrap_or_else(|e: BranchingError| panic!("{step}: rerun: {e}"));
        assert!(out.deep && out.pins.is_empty(), "{step}: {out:?}");
        assert_self_contained(&fresh, CLONE, &source_rows, &step).await;
        assert!(pins(&fresh, SRC).await.is_empty(), "{step}: pins left");
        assert!(
            savepoint_files(fresh.open(SRC).unwrap().as_ref()).await.is_empty(),
            "{step}: a savepoint is left"
        );
        assert_eq!(read(&fresh, SRC).await, source_rows, "{step}: source after");
    }
    unreachable!()
}

#[tokio::test]
async fn test_deep_clone_crash_sweep_of_the_source_side() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let n = sweep(tt, Side::Source).await;
        eprintln!("deep clone crash sweep ({tt:?}, source): {n} crash points");
        assert!(n > 5, "{tt:?}: {n} crash points");
    }
}

#[tokio::test]
async fn test_deep_clone_crash_sweep_of_the_clone_side() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let n = sweep(tt, Side::Clone).await;
        eprintln!("deep clone crash sweep ({tt:?}, clone): {n} crash points");
        assert!(n > 10, "{tt:?}: {n} crash points");
    }
}
