//! Rollback of failed writes: files and timeline files of the failed instant are removed, a
//! rollback instant records it, crashes at every step are finished by the next writer, and
//! hudi-rs reads the result.

use std::sync::Arc;

use arbor_storage::{FaultInjectingStorage, FaultMode, Storage};
use arbor_table::write::compaction::schedule_compaction;
use arbor_table::write::rollback::{
    rollback_failed_writes, rollback_failed_writes_where, rollback_instant,
};
use arbor_table::TableError;
use arbor_testkit::peer_read;
use arbor_timeline::avro::{decode, HoodieRollbackMetadata, HoodieRollbackPlan};
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, Instant, InstantTime, State, TimelineError};

use crate::support_tables::{
    arbor_snapshot_digest, peer_python, peer_snapshot_digest, row, snapshot_lines, Finish, Kind,
    TestTable,
};

fn written_by(files: &[String], t: &InstantTime) -> Vec<String> {
    files
        .iter()
        .filter(|f| f.contains(t.as_str()))
        .cloned()
        .collect()
}

async fn rollback_metadata(t: &TestTable) -> Vec<HoodieRollbackMetadata> {
    let tl = t.timeline().await;
    let mut out = Vec::new();
    for r in tl.filter(&[Action::Rollback], &[State::Completed]) {
        let bytes = tl.read(&r).await.unwrap();
        out.push(decode(&bytes, "r").unwrap());
    }
    out
}

/// A MOR table with committed base files and logs, plus a failed deltacommit (inflight, log
/// updates) and a failed insert into a new partition (requested only, base file).
async fn mor_with_failures() -> (TestTable, InstantTime, InstantTime) {
    let t = TestTable::create(TableType::MergeOnRead, true).await;
    t.write(
        Kind::InsertBase,
        &[row("k1", 1, "a"), row("k2", 1, "a"), row("k3", 1, "b")],
        Finish::Complete,
    )
    .await;
    t.write(Kind::UpdateLog, &[row("k1", 2, "a")], Finish::Complete)
        .await;
    let failed_update = t
        .write(
            Kind::UpdateLog,
            &[row("k2", 9, "a"), row("k3", 9, "b")],
            Finish::Inflight,
        )
        .await;
    let failed_insert = t
        .write(Kind::InsertBase, &[row("k9", 9, "c")], Finish::Requested)
        .await;
    (t, failed_update, failed_insert)
}

#[tokio::test]
async fn test_rollback_instant_cow_inflight_write_deletes_files_and_timeline_files() {
    let t = TestTable::create(TableType::CopyOnWrite, true).await;
    t.write(
        Kind::InsertBase,
        &[row("k1", 1, "a"), row("k2", 1, "b")],
        Finish::Complete,
    )
    .await;
    let before = snapshot_lines(&t.storage, None).await;
    let failed = t
        .write(
            Kind::InsertBase,
            &[row("k3", 1, "a"), row("k4", 1, "b")],
            Finish::Inflight,
        )
        .await;
    assert_eq!(written_by(&t.data_files(), &failed).len(), 2);

    let instant = Instant::requested(failed.clone(), Action::Commit).with_state(State::Inflight);
    let r = rollback_instant(&t.storage, &t.layout, &instant, &t.generator)
        .await
        .unwrap();

    assert!(written_by(&t.data_files(), &failed).is_empty());
    let names = t.timeline_files();
    assert!(
        !names.iter().any(|n| n.starts_with(failed.as_str())),
        "{names:?}"
    );
    for state in ["rollback.requested", "rollback.inflight"] {
        assert!(names.contains(&format!("{r}.{state}")), "{names:?}");
    }
    let tl = t.timeline().await;
    let done = tl.get(&r, Action::Rollback).unwrap();
    let completed = done.completed.clone().unwrap();
    assert!(completed.completion_time.unwrap() > r);
    let meta = rollback_metadata(&t).await;
    assert_eq!(meta.len(), 1);
    assert_eq!(meta[0].commits_rollback, vec![failed.to_string()]);
    assert_eq!(meta[0].total_files_deleted, 2);
    assert_eq!(meta[0].instants_rollback[0].action, "commit");
    assert_eq!(
        meta[0]
            .partition_metadata
            .keys()
            .cloned()
            .collect::<Vec<_>>(),
        vec!["a".to_string(), "b".to_string()]
    );
    let plan_bytes = tl
        .read(&Instant::requested(r.clone(), Action::Rollback))
        .await
        .unwrap();
    let plan: HoodieRollbackPlan = decode(&plan_bytes, "plan").unwrap();
    let planned: usize = plan
        .rollback_requests
        .unwrap()
        .iter()
        .map(|q| q.files_to_be_deleted.len())
        .sum();
    assert_eq!(planned, 2);
    assert_eq!(snapshot_lines(&t.storage, None).await, before);
}

#[tokio::test]
async fn test_rollback_failed_writes_mor_requested_and_inflight_both_rolled_back() {
    let (t, failed_update, failed_insert) = mor_with_failures().await;
    let done = rollback_failed_writes(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap();
    assert_eq!(done, vec![failed_update.clone(), failed_insert.clone()]);
    let files = t.data_files();
    assert!(written_by(&files, &failed_update).is_empty(), "{files:?}");
    assert!(written_by(&files, &failed_insert).is_empty(), "{files:?}");
    assert!(t.timeline().await.pending().is_empty());
    let meta = rollback_metadata(&t).await;
    assert_eq!(meta.len(), 2);
    assert_eq!(meta[0].instants_rollback[0].action, "deltacommit");
    let lines = snapshot_lines(&t.storage, None).await;
    assert_eq!(lines.len(), 3);
    assert!(lines
        .iter()
        .any(|l| l.starts_with("k1|") && l.ends_with("|k1|2|a")));
    assert!(lines.iter().any(|l| l.ends_with("|k2|1|a")));
    // Nothing left to do: a second call rolls back nothing and writes nothing.
    let names = t.timeline_files();
    let again = rollback_failed_writes(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap();
    assert!(again.is_empty());
    assert_eq!(t.timeline_files(), names);
}

#[tokio::test]
async fn test_rollback_failed_writes_where_skips_unselected_instants() {
    let (t, failed_update, failed_insert) = mor_with_failures().await;
    let done = rollback_failed_writes_where(&t.storage, &t.layout, &t.generator, |i| {
        i.requested_time == failed_insert
    })
    .await
    .unwrap();
    assert_eq!(done, vec![failed_insert]);
    let pending = t.timeline().await.pending();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].requested_time, failed_update);
}

#[tokio::test]
async fn test_rollback_instant_completed_instant_is_refused() {
    let t = TestTable::create(TableType::CopyOnWrite, false).await;
    let done = t
        .write(Kind::InsertBase, &[row("k1", 1, "")], Finish::Complete)
        .await;
    let files = t.data_files();
    let names = t.timeline_files();
    let err = rollback_instant(
        &t.storage,
        &t.layout,
        &Instant::requested(done, Action::Commit),
        &t.generator,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            TableError::Timeline(TimelineError::InvalidTransition { .. })
        ),
        "{err}"
    );
    assert_eq!(t.data_files(), files);
    assert_eq!(t.timeline_files(), names);
}

#[tokio::test]
async fn test_rollback_instant_unknown_instant_is_not_found() {
    let t = TestTable::create(TableType::CopyOnWrite, false).await;
    let time = InstantTime::parse("20200101000000000").unwrap();
    let err = rollback_instant(
        &t.storage,
        &t.layout,
        &Instant::requested(time, Action::Commit),
        &t.generator,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            TableError::Timeline(TimelineError::InstantNotFound { .. })
        ),
        "{err}"
    );
}

#[tokio::test]
async fn test_rollback_failed_writes_pending_compaction_is_left_alone() {
    let t = TestTable::create(TableType::MergeOnRead, true).await;
    t.write(Kind::InsertBase, &[row("k1", 1, "a")], Finish::Complete)
        .await;
    t.write(Kind::UpdateLog, &[row("k1", 2, "a")], Finish::Complete)
        .await;
    let c = schedule_compaction(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap()
        .unwrap();
    let done = rollback_failed_writes(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap();
    assert!(done.is_empty());
    let pending = t.timeline().await.pending();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].requested_time, c);
    assert_eq!(pending[0].action, Action::Compaction);
}

/// Crash after every storage write of one `rollback_failed_writes` (partial delete batches
/// included): the table reads as before the failed writes at once, a fresh
/// `rollback_failed_writes` finishes the job without a second rollback of the same instant, and
/// the next write succeeds.
#[tokio::test]
async fn test_rollback_failed_writes_crash_sweep_next_writer_finishes() {
    let mut n = 0;
    loop {
        let (t, failed_update, failed_insert) = mor_with_failures().await;
        let expected = snapshot_lines(&t.storage, None).await;
        let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
        faulty.set_count_only_writes(true);
        faulty.set_partial_batches(true);
        faulty.set_mode(FaultMode::CrashAt(n));
        let as_dyn: Arc<dyn Storage> = faulty.clone();
        let finished = rollback_failed_writes(&as_dyn, &t.layout, &t.generator)
            .await
            .is_ok();

        let fresh = t.fresh_storage();
        assert_eq!(
            snapshot_lines(&fresh, None).await,
            expected,
            "crash at write {n}: reads changed before recovery"
        );
        let done = rollback_failed_writes(&fresh, &t.layout, &t.generator)
            .await
            .unwrap();
        if finished {
            assert!(done.is_empty(), "crash at {n}: {done:?}");
        }
        assert_eq!(
            snapshot_lines(&fresh, None).await,
            expected,
            "crash at write {n}"
        );
        let files = t.data_files();
        assert!(
            written_by(&files, &failed_update).is_empty(),
            "crash at {n}"
        );
        assert!(
            written_by(&files, &failed_insert).is_empty(),
            "crash at {n}"
        );
        let tl = t.timeline().await;
        assert!(tl.pending().is_empty(), "crash at {n}: {:?}", tl.pending());
        let mut rolled: Vec<String> = rollback_metadata(&t)
            .await
            .into_iter()
            .flat_map(|m| m.commits_rollback)
            .collect();
        rolled.sort();
        assert_eq!(
            rolled,
            vec![failed_update.to_string(), failed_insert.to_string()],
            "crash at {n}: each failed instant rolled back exactly once"
        );
        t.write(Kind::UpdateLog, &[row("k2", 5, "a")], Finish::Complete)
            .await;
        assert!(snapshot_lines(&fresh, None)
            .await
            .iter()
            .any(|l| l.ends_with("|k2|5|a")));

        if finished && faulty.op_count() <= n {
            assert!(n > 6, "the sweep covered only {n} writes");
            break;
        }
        n += 1;
    }
}

#[tokio::test]
async fn test_rollback_failed_writes_peer_reader_reads_result() {
    let Some(python) = peer_python() else { return };
    let (t, _, _) = mor_with_failures().await;
    rollback_failed_writes(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap();
    let peer = peer_read(&python, &t.base);
    assert_eq!(peer["row_count"], 3);
    assert_eq!(peer["timeline"].as_array().unwrap().len(), 2);
    assert_eq!(
        peer_snapshot_digest(&python, &t.base, None),
        arbor_snapshot_digest(&python, &t.storage, None).await
    );
}

/// A write client's upsert crashed after each of its storage writes: `rollback_failed_writes`
/// leaves the table reading exactly as before or after the upsert, with no pending instant and
/// no file of an instant that is not completed.
#[tokio::test]
async fn test_rollback_failed_writes_after_crashed_client_write_reads_before_or_after() {
    use crate::support_tables::{client_table, rows_batch};
    use arbor_fsview::parse_data_file_name;
    use arbor_table::{Table, WriteOperation};
    let layout = arbor_timeline::TableLayout::v2(".hoodie");
    let generator = arbor_timeline::InstantTimeGenerator::new();
    let update = [row("k0", 2, "a"), row("k3", 2, "b"), row("k9", 1, "c")];
    let mut n = 0;
    loop {
        let (_tmp, base, table) = client_table().await;
        let insert: Vec<_> = (0..4)
            .map(|i| row(&format!("k{i}"), 1, ["a", "b"][i % 2]))
            .collect();
        table
            .write(WriteOperation::Insert, vec![rows_batch(&insert)])
            .await
            .unwrap();
        let inner: Arc<dyn Storage> =
            Arc::new(arbor_storage::ObjectStoreStorage::local(&base).unwrap());
        let before = snapshot_lines(&inner, None).await;

        let faulty = Arc::new(FaultInjectingStorage::new(inner.clone()));
        let as_dyn: Arc<dyn Storage> = faulty.clone();
        let crashing = Table::open(as_dyn).await.unwrap();
        faulty.set_count_only_writes(true);
        faulty.set_mode(FaultMode::CrashAt(n));
        let finished = crashing
            .write(WriteOperation::Upsert, vec![rows_batch(&update)])
            .await
            .is_ok();

        let fresh: Arc<dyn Storage> =
            Arc::new(arbor_storage::ObjectStoreStorage::local(&base).unwrap());
        rollback_failed_writes(&fresh, &layout, &generator)
            .await
            .unwrap();
        let lines = snapshot_lines(&fresh, None).await;
        if finished {
            assert_ne!(lines, before, "crash at {n}");
        } else if lines != before {
            // The commit point was passed before the crash.
            assert_eq!(lines.len(), 5, "crash at {n}: {lines:?}");
        }
        let tl = arbor_timeline::ActiveTimeline::load(fresh.clone(), layout.clone())
            .await
            .unwrap();
        assert!(tl.pending().is_empty(), "crash at {n}: {:?}", tl.pending());
        let completed: Vec<InstantTime> = tl
            .completed()
            .into_iter()
            .map(|i| i.requested_time)
            .collect();
        let reader = arbor_table::read::TableReader::open(fresh.clone())
            .await
            .unwrap();
        for p in reader.view().partitions().await.unwrap().iter() {
            for f in reader.view().partition_files(p).await.unwrap().iter() {
                if let Ok(Some(d)) = parse_data_file_name(&f.name, f.size) {
                    assert!(
                        completed.contains(d.instant_time()),
                        "crash at {n}: {p}/{} of an instant that is not completed",
                        f.name
                    );
                }
            }
        }
        if finished && faulty.op_count() <= n {
            break;
        }
        n += 1;
        assert!(n < 200, "the write never finished");
    }
}

/// Java's restore past a savepointed commit stops with its own rollback of a completed instant
/// pending (`Could not rollback a savepointed commit`): that rollback is the restore's, so the
/// next writer's cleanup leaves it (and rolls back the failed writes), where without a pending
/// restore such a rollback is refused as before.
#[tokio::test]
async fn test_rollback_failed_writes_leaves_a_pending_restores_rollback_of_a_completed_instant() {
    use arbor_timeline::avro::{encode, HoodieInstantInfo};
    use bytes::Bytes;

    let (t, failed_update, failed_insert) = mor_with_failures().await;
    let completed = t.timeline().await.completed_writes();
    let target = completed.last().unwrap().clone();
    let plan = HoodieRollbackPlan {
        instant_to_rollback: Some(HoodieInstantInfo {
            commit_time: target.requested_time.to_string(),
            action: target.action.name().to_string(),
        }),
        rollback_requests: Some(Vec::new()),
        version: Some(1),
    };
    let restore = Instant::requested(t.generator.next().unwrap(), Action::Restore);
    let rollback = Instant::requested(t.generator.next().unwrap(), Action::Rollback);
    t.storage
        .put(
            &t.layout.instant_key(&rollback).unwrap(),
            Bytes::from(encode(&plan).unwrap()),
        )
        .await
        .unwrap();

    // No restore pending: the rollback of a completed instant is refused, nothing changes.
    let err = rollback_failed_writes(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("would roll back a completed instant"),
        "{err}"
    );

    // Java's restore pending: its rollback is left to it, the failed writes go.
    t.storage
        .put(&t.layout.instant_key(&restore).unwrap(), Bytes::new())
        .await
        .unwrap();
    let done = rollback_failed_writes(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap();
    let mut failed = vec![failed_update, failed_insert];
    failed.sort();
    assert_eq!(done, failed);
    let tl = t.timeline().await;
    assert!(tl
        .get(&target.requested_time, target.action)
        .is_some_and(|f| f.completed.is_some()));
    assert!(tl
        .filter(&[Action::Rollback], &[State::Requested])
        .iter()
        .any(|r| r.requested_time == rollback.requested_time));
}
