//! Restore to a savepoint: later writes, deletes, insert overwrites, compactions and cleans are
//! undone (the savepoint's snapshot reads back exactly), the metadata table and its indexes
//! follow (also across a metadata-table compaction), refusals write nothing, and a restore a
//! crash interrupted is finished by the next call.

use std::sync::Arc;

use arbor_cleaner::{clean, create_savepoint, restore, CleanOptions, CleanPolicy, CleanerError};
use arbor_mdt::MdtWriter;
use arbor_storage::{
    FaultInjectingStorage, FaultMode, InProcessLockProvider, ObjectStoreStorage, Storage,
};
use arbor_table::{Table, WriteOperation};
use arbor_timeline::avro::{encode_instant_for, HoodieCleanerPlan, InstantContent};
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, ActiveTimeline, Instant, InstantTime, State};
use bytes::Bytes;

use arbor_testkit::crash::copy_dir;
use arbor_testkit_tables::{create, rows, Model, Row, TestTable};

async fn timeline(t: &TestTable) -> ActiveTimeline {
    ActiveTimeline::load(t.storage.clone(), t.table.layout().clone())
        .await
        .unwrap()
}

/// Completed MDT compactions (MDT `commit` instants).
async fn mdt_compactions(storage: &Arc<dyn Storage>) -> Vec<InstantTime> {
    let writer = MdtWriter::open(storage.clone()).await.unwrap().unwrap();
    ActiveTimeline::load(storage.clone(), writer.layout().clone())
        .await
        .unwrap()
        .completed()
        .into_iter()
        .filter(|i| i.action == Action::Commit)
        .map(|i| i.requested_time)
        .collect()
}

async fn assert_indexes_valid(storage: &Arc<dyn Storage>, step: &str) {
    let report = arbor_table::validate_indexes(storage.clone())
        .await
        .unwrap();
    assert!(
        report.checked.iter().any(|(n, _)| n == "record_index"),
        "{step}: no record index checked"
    );
    assert!(
        report.discrepancies.is_empty(),
        "{step}: {:?}",
        report.discrepancies
    );
}

fn refused(e: CleanerError) -> String {
    match e {
        CleanerError::Refused { reason, .. } => reason,
        other => panic!("expected a refusal, got {other}"),
    }
}

/// Writes, a savepoint at the second write, then upserts, deletes, an insert overwrite, a
/// compaction (MOR), more upserts and a clean. Returns the savepoint, the rows as of it, the
/// later instants and the latest rows.
async fn history(t: &TestTable) -> (InstantTime, Vec<Row>, Vec<InstantTime>, Vec<Row>) {
    let mut model = Model::default();
    let r = rows(0..12, 1, "a");
    t.write(WriteOperation::Insert, &r).await;
    model.upsert(&r);
    let r = rows(0..6, 2, "b");
    let sp = t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    let at_sp = model.sorted();
    create_savepoint(&t.table, Some(&sp), "before the changes")
        .await
        .unwrap();

    let mut later = Vec::new();
    let r = rows(0..12, 3, "c");
    later.push(t.write(WriteOperation::Upsert, &r).await);
    model.upsert(&r);
    let r = rows(0..3, 3, "c");
    later.push(t.write(WriteOperation::Delete, &r).await);
    model.delete(&r);
    // Insert overwrite of both partitions: every group of them is replaced.
    let r = rows(20..24, 4, "d");
    later.push(t.write(WriteOperation::InsertOverwrite, &r).await);
    model = Model::default();
    model.upsert(&r);
    let r = rows(20..22, 5, "e");
    later.push(t.write(WriteOperation::Upsert, &r).await);
    model.upsert(&r);
    if t.table.config().table_type() == TableType::MergeOnRead {
        let compacted = t.table.compact().await.unwrap();
        assert!(!compacted.is_empty(), "the MOR history compacts");
        later.extend(compacted.into_iter().map(|c| c.instant));
    }
    let r = rows(21..26, 6, "f");
    later.push(t.write(WriteOperation::Upsert, &r).await);
    model.upsert(&r);
    let out = clean(
        &t.table,
        &CleanOptions {
            policy: CleanPolicy::KeepLatestCommits(1),
            ..CleanOptions::default()
        },
    )
    .await
    .unwrap();
    assert!(out.deleted > 0, "the clean deletes something");
    assert_eq!(
        t.read(Some(&sp)).await,
        at_sp,
        "the clean kept the savepoint"
    );
    assert_eq!(t.read(None).await, model.sorted());
    later.sort();
    (sp, at_sp, later, model.sorted())
}

#[tokio::test]
async fn test_restore_rolls_back_every_later_write_and_reads_as_the_savepoint() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, true).await;
        let (sp, at_sp, later, _latest) = history(&t).await;
        let out = restore(&t.table, &sp).await.unwrap();
        let mut rolled_back = out.rolled_back.clone();
        assert!(
            out.rolled_back.windows(2).all(|w| w[0] > w[1]),
            "newest first"
        );
        rolled_back.sort();
        assert_eq!(rolled_back, later, "{table_type:?}");
        assert_eq!(t.read(None).await, at_sp, "{table_type:?}: restored rows");

        let tl = timeline(&t).await;
        assert!(
            tl.pending().is_empty(),
            "{table_type:?}: {:?}",
            tl.pending()
        );
        assert!(
            tl.completed_writes().iter().all(|i| i.requested_time <= sp),
            "{table_type:?}: a later write survived"
        );
        assert!(tl
            .get(&out.instant, Action::Restore)
            .is_some_and(|f| f.completed.is_some()));
        assert!(tl
            .get(&sp, Action::Savepoint)
            .is_some_and(|f| f.completed.is_some()));
        // Every file the later instants wrote is gone.
        for f in t.data_files().await {
            for l in &later {
                assert!(!f.contains(l.as_str()), "{table_type:?}: {f} survived");
            }
        }
        t.assert_valid("after restore").await;
        t.assert_peer_agrees("cleaner peer check", "after restore")
            .await;

        // Later writes work and stay valid.
        let mut model = Model::default();
        model.upsert(&at_sp);
        let r = rows(0..5, 9, "z");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        assert_eq!(t.read(None).await, model.sorted(), "{table_type:?}");
        t.assert_valid("write after restore").await;
        t.assert_peer_agrees("cleaner peer check", "write after restore")
            .await;
    }
}

#[tokio::test]
async fn test_restore_with_record_index_leaves_the_index_valid() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, true).await;
        t.write(WriteOperation::Insert, &rows(0..10, 1, "a")).await;
        t.table.create_record_index().await.unwrap();
        let mut model = Model::default();
        model.upsert(&rows(0..10, 1, "a"));
        let r = rows(0..4, 2, "b");
        let sp = t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        create_savepoint(&t.table, Some(&sp), "").await.unwrap();
        // New keys, moved keys (deleted), and an insert overwrite after the savepoint.
        t.write(WriteOperation::Insert, &rows(10..20, 3, "c")).await;
        t.write(WriteOperation::Delete, &rows(0..5, 3, "c")).await;
        t.write(WriteOperation::InsertOverwrite, &rows(30..32, 4, "d"))
            .await;
        assert_indexes_valid(&t.storage, "before restore").await;

        restore(&t.table, &sp).await.unwrap();
        assert_eq!(t.read(None).await, model.sorted(), "{table_type:?}");
        t.assert_valid("after restore").await;
        assert_indexes_valid(&t.storage, "after restore").await;
        t.assert_peer_agrees("cleaner peer check", "after restore")
            .await;

        // Keys the rolled-back writes added are written again: the index takes them.
        let r = rows(10..14, 5, "e");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        assert_eq!(t.read(None).await, model.sorted(), "{table_type:?}");
        assert_indexes_valid(&t.storage, "write after restore").await;
        t.assert_valid("write after restore").await;
    }
}

#[tokio::test]
async fn test_restore_across_a_metadata_table_compaction_undoes_it() {
    let t = create(TableType::CopyOnWrite, true).await;
    t.write(WriteOperation::Insert, &rows(0..10, 1, "a")).await;
    t.table.create_record_index().await.unwrap();
    let r = rows(0..3, 2, "b");
    let sp = t.write(WriteOperation::Upsert, &r).await;
    create_savepoint(&t.table, Some(&sp), "").await.unwrap();
    let at_sp = t.read(None).await;
    for v in 0..12u32 {
        let lo = 10 + v * 2;
        t.write(WriteOperation::Insert, &rows(lo..lo + 2, 3, "n"))
            .await;
    }
    let compactions = mdt_compactions(&t.storage).await;
    assert!(
        compactions.iter().any(|c| *c > sp),
        "the metadata table compacted after the savepoint: {compactions:?}"
    );
    assert_indexes_valid(&t.storage, "before restore").await;

    let out = restore(&t.table, &sp).await.unwrap();
    assert_eq!(out.rolled_back.len(), 12);
    assert!(
        mdt_compactions(&t.storage).await.iter().all(|c| *c <= sp),
        "a metadata-table compaction after the savepoint survived"
    );
    assert_eq!(t.read(None).await, at_sp);
    t.assert_valid("after restore").await;
    assert_indexes_valid(&t.storage, "after restore").await;
    t.assert_peer_agrees("cleaner peer check", "after restore")
        .await;

    // The table keeps working: enough writes to compact the metadata table again.
    let mut model = Model::default();
    model.upsert(&at_sp);
    for v in 0..11u32 {
        let r = rows(v..v + 1, 7, "w");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
    }
    assert_eq!(t.read(None).await, model.sorted());
    t.assert_valid("writes after restore").await;
    assert_indexes_valid(&t.storage, "writes after restore").await;
}

#[tokio::test]
async fn test_restore_refusals_write_nothing() {
    let t = create(TableType::MergeOnRead, true).await;
    let first = t.write(WriteOperation::Insert, &rows(0..6, 1, "a")).await;
    let second = t.write(WriteOperation::Upsert, &rows(0..3, 2, "b")).await;
    let third = t.write(WriteOperation::Upsert, &rows(0..3, 3, "c")).await;

    // No savepoint at the instant.
    let before = t.listing().await;
    let reason = refused(restore(&t.table, &second).await.unwrap_err());
    assert!(reason.contains("no completed savepoint"), "{reason}");
    assert_eq!(t.listing().await, before);

    // A newer savepoint is named.
    create_savepoint(&t.table, Some(&first), "").await.unwrap();
    create_savepoint(&t.table, Some(&third), "").await.unwrap();
    let before = t.listing().await;
    let reason = refused(restore(&t.table, &first).await.unwrap_err());
    assert!(reason.contains(third.as_str()), "{reason}");
    assert_eq!(t.listing().await, before);

    // A pending clean.
    let mut tl = timeline(&t).await;
    let time = tl.next_instant_time(t.table.generator()).await.unwrap();
    let plan = HoodieCleanerPlan {
        policy: "KEEP_LATEST_COMMITS".into(),
        version: Some(2),
        ..HoodieCleanerPlan::default()
    };
    let bytes = encode_instant_for(
        &Instant::requested(time.clone(), Action::Clean),
        &InstantContent::CleanerPlan(Box::new(plan)),
    )
    .unwrap();
    tl.create_requested(time.clone(), Action::Clean, Bytes::from(bytes))
        .await
        .unwrap();
    let before = t.listing().await;
    let reason = refused(restore(&t.table, &third).await.unwrap_err());
    assert!(
        reason.contains("clean") && reason.contains(time.as_str()),
        "{reason}"
    );
    assert_eq!(t.listing().await, before);
    assert!(timeline(&t)
        .await
        .filter(
            &[Action::Restore],
            &[State::Requested, State::Inflight, State::Completed]
        )
        .is_empty());
}

#[tokio::test]
async fn test_restore_crash_at_any_write_is_finished_by_the_next_call() {
    let template = create(TableType::MergeOnRead, true).await;
    let (sp, at_sp, later, latest) = history(&template).await;
    // Every state a crash may leave reads as the snapshot as of some instant at or after the
    // savepoint (rollbacks go newest first); the clean after them only removed files of older
    // snapshots, so compare with the snapshots that are still readable now (time travel to
    // one the clean broke is refused, never read short).
    let mut allowed = vec![at_sp.clone(), latest.clone()];
    let reader = arbor_table::read::TableReader::open(template.storage.clone())
        .await
        .unwrap();
    for l in &later {
        match reader.snapshot(Some(l)).await {
            Ok(batches) => allowed.push(arbor_testkit_tables::rows_of(&batches)),
            Err(arbor_table::TableError::SnapshotNotRetained { .. }) => {}
            Err(e) => panic!("as of {l}: {e}"),
        }
    }

    let mut n = 0;
    let mut crashed_with_pending_restore = 0;
    loop {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("t");
        copy_dir(&template.base, &base);
        let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
        let faulty = Arc::new(FaultInjectingStorage::new(inner.clone()));
        faulty.set_count_only_writes(true);
        faulty.set_partial_batches(true);
        let crashing = Table::open(faulty.clone() as Arc<dyn Storage>)
            .await
            .unwrap()
            .with_lock_provider(Arc::new(InProcessLockProvider::new()));
        faulty.reset();
        faulty.set_mode(FaultMode::CrashAt(n));
        let result = restore(&crashing, &sp).await;
        drop(crashing);
        let label = format!("crash at write {n}");
        if let Err(e) = &result {
            assert!(faulty.has_crashed(), "{label}: failed without a crash: {e}");
        }
        let t = TestTable {
            _tmp: dir,
            base: base.clone(),
            storage: inner.clone(),
            table: Table::open(inner.clone()).await.unwrap(),
        };
        let got = t.read(None).await;
        let pending = timeline(&t)
            .await
            .filter(&[Action::Restore], &[State::Requested, State::Inflight])
            .len()
            == 1;
        // With the restore pending, an intermediate state (some rollbacks done) reads as a
        // later snapshot, which the clean may have broken (time travel refuses those); the
        // next call below must finish the restore. Otherwise the state is a whole snapshot.
        assert!(
            allowed.contains(&got) || pending,
            "{label}: reads as no snapshot of the history: {got:?}"
        );
        t.assert_valid(&format!("{label} (crashed)")).await;
        if pending {
            crashed_with_pending_restore += 1;
        }

        // The next call finishes (or repeats) the restore.
        let out = restore(&t.table, &sp).await.unwrap();
        assert_eq!(t.read(None).await, at_sp, "{label}: restored rows");
        let tl = timeline(&t).await;
        assert!(tl.pending().is_empty(), "{label}: {:?}", tl.pending());
        assert!(tl.completed_writes().iter().all(|i| i.requested_time <= sp));
        assert!(tl
            .get(&out.instant, Action::Restore)
            .is_some_and(|f| f.completed.is_some()));
        t.assert_valid(&format!("{label} (finished)")).await;
        if result.is_ok() && faulty.op_count() <= n {
            break;
        }
        n += 1;
    }
    assert!(n > 10, "the restore performs many writes ({n})");
    assert!(
        crashed_with_pending_restore > 5,
        "crashes left pending restores {crashed_with_pending_restore} times"
    );
    template
        .assert_peer_agrees("cleaner peer check", "template")
        .await;
}

#[tokio::test]
async fn test_write_during_pending_restore_is_refused_until_restore_finishes() {
    let t = create(TableType::CopyOnWrite, true).await;
    let first = t.write(WriteOperation::Upsert, &rows(0..4, 1, "a")).await;
    create_savepoint(&t.table, Some(&first), "").await.unwrap();
    let later = t.write(WriteOperation::Upsert, &rows(0..4, 2, "b")).await;
    // A restore that stopped after writing its plan.
    // Later than every instant, not beyond how far the table's clock may run ahead.
    let time = InstantTime::from_datetime(chrono::Utc::now() + chrono::TimeDelta::seconds(60));
    let requested = Instant::requested(time.clone(), Action::Restore);
    let plan = arbor_timeline::avro::HoodieRestorePlan {
        instants_to_rollback: vec![arbor_timeline::avro::HoodieInstantInfo {
            commit_time: later.to_string(),
            action: "commit".to_string(),
        }],
        version: Some(2),
        savepoint_to_restore_timestamp: Some(first.to_string()),
    };
    let bytes =
        encode_instant_for(&requested, &InstantContent::RestorePlan(Box::new(plan))).unwrap();
    t.storage
        .put(
            &format!(".hoodie/timeline/{time}.restore.requested"),
            Bytes::from(bytes),
        )
        .await
        .unwrap();
    let err = t
        .table
        .write(
            WriteOperation::Upsert,
            vec![arbor_testkit_tables::batch(&rows(0..2, 3, "c"))],
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("restore") && err.contains("pending"), "{err}");
    restore(&t.table, &first).await.unwrap();
    assert_eq!(t.read(None).await, rows(0..4, 1, "a"));
    t.write(WriteOperation::Upsert, &rows(0..2, 3, "c")).await;
    t.assert_valid("after the finished restore").await;
}

#[tokio::test]
async fn test_restore_is_seen_by_a_reader_whose_table_state_was_cached() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, true).await;
        let mut model = Model::default();
        let r = rows(0..8, 1, "a");
        let sp = t.write(WriteOperation::Insert, &r).await;
        model.upsert(&r);
        let at_sp = model.sorted();
        create_savepoint(&t.table, Some(&sp), "cache")
            .await
            .unwrap();
        t.write(WriteOperation::Upsert, &rows(0..8, 2, "b")).await;
        // Another handle of the process caches the latest state.
        let handle: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&t.base).unwrap());
        let before = arbor_table::read::TableReader::open(handle.clone())
            .await
            .unwrap();
        let cached = arbor_table::read::TableReader::open(handle.clone())
            .await
            .unwrap();
        assert!(cached.is_from_cache(), "{table_type:?}");
        assert_ne!(
            arbor_testkit_tables::rows_of(&before.snapshot(None).await.unwrap()),
            at_sp
        );
        restore(&t.table, &sp).await.unwrap();
        let after = arbor_table::read::TableReader::open(handle).await.unwrap();
        assert!(!after.is_from_cache(), "{table_type:?}");
        assert_eq!(
            arbor_testkit_tables::rows_of(&after.snapshot(None).await.unwrap()),
            at_sp,
            "{table_type:?}"
        );
    }
}
