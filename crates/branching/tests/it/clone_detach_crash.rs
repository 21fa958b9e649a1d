//! Crash sweeps of `detach_clone`: the detach is "crashed" before each storage operation of the
//! source in turn, then before each storage operation of the clone in turn
//! ([`FaultMode::CrashAt`]: from the N-th operation of that storage on every operation fails; a
//! batch delete hit by the crash deletes part of its keys). The locations are names mapped to
//! directories (no shared root: files are copied through the process, one at a time).
//!
//! After each crash, a restarted process (fresh storages over the same directories, the
//! source's lock lease lapsed as if its 120 s had passed) must find the clone reading its rows
//! (as a shallow clone or detached) and the source reading its own; rerunning the detach must
//! succeed and leave the clone detached and self-contained, no pin and no savepoint on the
//! source (the rerun rebuilds the pin from the clone's descriptor, so a crash between the
//! record's deletion and its savepoint's release leaks no savepoint).

use std::path::Path;
use std::sync::Arc;

use arbor_branching::clone::{detach_clone, CloneAt};
use arbor_storage::{FaultInjectingStorage, FaultMode, Storage};
use arbor_table::WriteOperation;
use arbor_testkit::crash::copy_dir;
use arbor_testkit_tables::{create, rows, Model, Row};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::LocationOpener;

use crate::clone_detach_support::*;

/// The source and a shallow clone that wrote rows of its own, in `dir/src` and
/// `dir/clone`: (source rows, clone rows).
async fn template(dir: &Path, tt: TableType) -> (Vec<Row>, Vec<Row>) {
    let t = create(tt, true).await;
    let mut source = Model::default();
    for i in 1..3 {
        let r = rows(0..12, i, "s");
        t.write(WriteOperation::Upsert, &r).await;
        source.upsert(&r);
    }
    copy_dir(&t.base, &dir.join("src"));
    let opener = opener_over(dir);
    shallow(&opener, SRC, CLONE, CloneAt::Main).await;
    let mut clone = source.clone();
    let r = rows(0..4, 5, "c");
    write(&opener, CLONE, WriteOperation::Upsert, &r).await;
    clone.upsert(&r);
    let r = rows(20..24, 6, "s");
    write(&opener, SRC, WriteOperation::Upsert, &r).await;
    source.upsert(&r);
    (source.sorted(), clone.sorted())
}

/// Runs the sweep of `side`; returns the number of crash points.
async fn sweep(tt: TableType, side: Side) -> usize {
    let tpl = tempfile::tempdir().unwrap();
    let (source_rows, clone_rows) = template(tpl.path(), tt).await;
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
        let result = detach_clone(&crashing, CLONE).await;
        if !faulty.has_crashed() {
            let out = result.unwrap();
            assert_eq!(out.pins_removed.len(), 1, "{tt:?} {side:?}");
            assert_self_contained(&clean, CLONE, &clone_rows, "fault-free run").await;
            assert!(pins(&clean, SRC).await.is_empty());
            return k;
        }
        // (A crash at the lock's release after the last change still succeeds.)
        drop(result);
        let step = format!("{tt:?} {side:?} crash at {k}");
        // A restarted process.
        let fresh = opener_over(run.path());
        lapse_stale_lease(&fresh.open(SRC).unwrap()).await;
        assert_eq!(read(&fresh, CLONE).await, clone_rows, "{step}: clone");
        assert_eq!(read(&fresh, SRC).await, source_rows, "{step}: source");
        let out = detach_clone(&fresh, CLONE)
            .await
            .unwrap_or_else(|e| panic!("{step}: rerun: {e}"));
        assert!(out.pins_removed.len() <= 1, "{step}");
        assert_self_contained(&fresh, CLONE, &clone_rows, &step).await;
        assert!(pins(&fresh, SRC).await.is_empty(), "{step}: pins left");
        assert!(
            savepoint_files(fresh.open(SRC).unwrap().as_ref())
                .await
                .is_empty(),
            "{step}: the pin's savepoint is left: {:?}",
            savepoint_files(fresh.open(SRC).unwrap().as_ref()).await
        );
        assert_eq!(read(&fresh, SRC).await, source_rows, "{step}: source after");
    }
    unreachable!()
}

#[tokio::test]
async fn test_detach_crash_sweep_of_the_source_side() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let n = sweep(tt, Side::Source).await;
        eprintln!(
            "detach crash sweep ({tt:?}, {:?}): {n} crash points",
            Side::Source
        );
        assert!(n > 3, "{tt:?}: {n} crash points");
    }
}

#[tokio::test]
async fn test_detach_crash_sweep_of_the_clone_side() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let n = sweep(tt, Side::Clone).await;
        eprintln!(
            "detach crash sweep ({tt:?}, {:?}): {n} crash points",
            Side::Clone
        );
        assert!(n > 10, "{tt:?}: {n} crash points");
    }
}
