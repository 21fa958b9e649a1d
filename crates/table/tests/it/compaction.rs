//! Compaction of merge-on-read tables: the plan, the rewrite (rows, commit times, time travel
//! and incremental reads unchanged; new slices without logs), hudi-rs reading the result, and
//! crashes at every write of a compaction finished by a re-run.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use arbor_fsview::{FileSystemView, StorageListing};
use arbor_storage::{FaultInjectingStorage, FaultMode, Storage};
use arbor_table::read::TableReader;
use arbor_table::write::compaction::{
    run_compaction, run_pending_compactions, schedule_compaction, COMPACTION_PLAN_VERSION,
};
use arbor_table::write::rollback::rollback_instant;
use arbor_table::TableError;
use arbor_testkit::peer_read;
use arbor_timeline::avro::{
    decode, HoodieCommitMetadata, HoodieCompactionPlan, WriteOperationType,
};
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, Instant, InstantTime, State, TimelineError};

use crate::support_tables::{
    arbor_snapshot_digest, incremental_lines, peer_python, peer_snapshot_digest, row,
    snapshot_lines, Finish, Kind, TestTable,
};

/// A MOR table: two base file groups (partitions a, b) with updates and a delete in logs, one
/// log-only group (partition c), and a group without logs (partition d). Returns the completed
/// instants in order.
async fn mor_table() -> (TestTable, Vec<InstantTime>) {
    let t = TestTable::create(TableType::MergeOnRead, true).await;
    let mut instants = Vec::new();
    instants.push(
        t.write(
            Kind::InsertBase,
            &[
                row("k1", 1, "a"),
                row("k2", 1, "a"),
                row("k3", 1, "b"),
                row("k4", 1, "b"),
                row("k7", 1, "d"),
            ],
            Finish::Complete,
        )
        .await,
    );
    instants.push(
        t.write(
            Kind::UpdateLog,
            &[row("k1", 2, "a"), row("k3", 2, "b")],
            Finish::Complete,
        )
        .await,
    );
    instants.push(
        t.write(
            Kind::InsertLog,
            &[row("k5", 1, "c"), row("k6", 1, "c")],
            Finish::Complete,
        )
        .await,
    );
    instants.push(
        t.write(Kind::DeleteLog, &[row("k4", 0, "b")], Finish::Complete)
            .await,
    );
    instants.push(
        t.write(
            Kind::UpdateLog,
            &[row("k1", 3, "a"), row("k6", 2, "c")],
            Finish::Complete,
        )
        .await,
    );
    (t, instants)
}

async fn plan_of(t: &TestTable, c: &InstantTime) -> HoodieCompactionPlan {
    let tl = t.timeline().await;
    let bytes = tl
        .read(&Instant::requested(c.clone(), Action::Compaction))
        .await
        .unwrap();
    decode(&bytes, "plan").unwrap()
}

async fn completion_of(t: &TestTable, i: &InstantTime) -> InstantTime {
    let tl = t.timeline().await;
    tl.completed()
        .into_iter()
        .find(|c| &c.requested_time == i)
        .unwrap()
        .completion_time
        .unwrap()
}

/// Everything a reader can ask, before and after: snapshot, time travel to every instant,
/// incremental from the start and from each completion.
async fn all_reads(
    storage: &Arc<dyn Storage>,
    instants: &[InstantTime],
    completions: &[InstantTime],
) -> Vec<Vec<String>> {
    let mut out = vec![snapshot_lines(storage, None).await];
    for i in instants {
        out.push(snapshot_lines(storage, Some(i)).await);
    }
    out.push(incremental_lines(storage, None, None).await);
    for c in completions {
        out.push(incremental_lines(storage, Some(c), None).await);
        out.push(incremental_lines(storage, None, Some(c)).await);
    }
    out
}

async fn latest_slices(storage: &Arc<dyn Storage>) -> Vec<arbor_fsview::FileSlice> {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    reader.view().latest_file_slices(None, None).await.unwrap()
}

#[tokio::test]
async fn test_schedule_compaction_plans_every_group_with_logs() {
    let (t, instants) = mor_table().await;
    let c = schedule_compaction(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap()
        .unwrap();
    assert!(c > *instants.last().unwrap());
    let plan = plan_of(&t, &c).await;
    assert_eq!(plan.version, Some(COMPACTION_PLAN_VERSION));
    assert_eq!(plan.preserve_hoodie_metadata, Some(false));
    let ops = plan.operations.unwrap();
    let partitions: Vec<String> = ops
        .iter()
        .map(|o| o.partition_path.clone().unwrap())
        .collect();
    assert_eq!(partitions, vec!["a", "b", "c"], "d has no logs");
    for op in &ops {
        let logs = op.delta_file_paths.clone().unwrap();
        assert!(!logs.is_empty());
        assert!(logs.iter().all(|l| l.starts_with('.') && !l.contains('/')));
        let metrics = op.metrics.clone().unwrap();
        assert_eq!(metrics["TOTAL_LOG_FILES"], logs.len() as f64);
        assert!(metrics["TOTAL_LOG_FILES_SIZE"] > 0.0);
    }
    assert_eq!(ops[0].delta_file_paths.as_ref().unwrap().len(), 2);
    assert_eq!(ops[1].delta_file_paths.as_ref().unwrap().len(), 2);
    assert!(ops[0]
        .data_file_path
        .as_ref()
        .unwrap()
        .ends_with(".parquet"));
    assert_eq!(ops[2].data_file_path, None, "log-only group");
    assert_eq!(
        ops[2].base_instant_time.as_deref(),
        Some(instants[2].as_str())
    );
    assert_eq!(
        ops[0].base_instant_time.as_deref(),
        Some(instants[0].as_str())
    );

    // A group under a pending compaction is not planned again.
    assert_eq!(
        schedule_compaction(&t.storage, &t.layout, &t.generator)
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn test_schedule_compaction_plan_fields_match_spark_fixture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip");
    let Ok(file) = std::fs::File::open(&root) else {
        assert!(std::env::var_os("CI").is_none(), "fixture missing under CI");
        eprintln!("SKIPPED: fixture {} not found", root.display());
        return;
    };
    let mut zip = zip::ZipArchive::new(file).unwrap();
    let mut entry = zip
        .by_name("v8_trips_8i3u1d/.hoodie/timeline/20251220210129235.compaction.requested")
        .unwrap();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
    let spark: HoodieCompactionPlan = decode(&bytes, "fixture").unwrap();

    let (t, _) = mor_table().await;
    let c = schedule_compaction(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap()
        .unwrap();
    let ours = plan_of(&t, &c).await;
    assert_eq!(ours.version, spark.version);
    assert_eq!(
        ours.preserve_hoodie_metadata,
        spark.preserve_hoodie_metadata
    );
    assert_eq!(ours.strategy, spark.strategy);
    assert_eq!(
        ours.missing_schedule_partitions,
        spark.missing_schedule_partitions
    );
    let keys = |p: &HoodieCompactionPlan| -> BTreeSet<String> {
        p.operations.as_ref().unwrap()[0]
            .metrics
            .as_ref()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(keys(&ours), keys(&spark));
}

#[tokio::test]
async fn test_schedule_compaction_cow_table_is_unsupported() {
    let t = TestTable::create(TableType::CopyOnWrite, false).await;
    t.write(Kind::InsertBase, &[row("k1", 1, "")], Finish::Complete)
        .await;
    let err = schedule_compaction(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap_err();
    assert!(matches!(err, TableError::Unsupported { .. }), "{err}");
}

#[tokio::test]
async fn test_schedule_compaction_no_logs_returns_none_and_writes_nothing() {
    let t = TestTable::create(TableType::MergeOnRead, false).await;
    t.write(Kind::InsertBase, &[row("k1", 1, "")], Finish::Complete)
        .await;
    let names = t.timeline_files();
    assert_eq!(
        schedule_compaction(&t.storage, &t.layout, &t.generator)
            .await
            .unwrap(),
        None
    );
    assert_eq!(t.timeline_files(), names);
}

#[tokio::test]
async fn test_run_compaction_mor_reads_unchanged_and_new_slices_have_no_logs() {
    let (t, instants) = mor_table().await;
    let mut completions = Vec::new();
    for i in &instants {
        completions.push(completion_of(&t, i).await);
    }
    let before = all_reads(&t.storage, &instants, &completions).await;
    assert_eq!(before[0].len(), 6, "{:?}", before[0]);

    let c = schedule_compaction(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        all_reads(&t.storage, &instants, &completions).await,
        before,
        "a pending compaction changes no read"
    );
    let result = run_compaction(&t.storage, &t.layout, &c, &t.generator)
        .await
        .unwrap();
    assert_eq!(result.instant, c);
    assert_eq!(result.action, Action::Commit);
    assert_eq!(result.operation, WriteOperationType::Compact);
    assert_eq!(result.files_written, 3);
    assert!(result.completion_time > c);

    // Rows unchanged, commit times and sequence numbers included; every earlier time travel
    // and incremental range unchanged.
    assert_eq!(all_reads(&t.storage, &instants, &completions).await, before);
    let slices = latest_slices(&t.storage).await;
    assert_eq!(slices.len(), 4);
    for s in &slices {
        assert!(s.log_files.is_empty(), "{s:?}");
        if s.partition != "d" {
            assert_eq!(s.base_instant, c, "{s:?}");
            assert_eq!(s.base_file.as_ref().unwrap().instant_time, c);
        }
    }

    // The completed commit: compacted, COMPACT, one stat per new base file.
    let tl = t.timeline().await;
    let done = tl
        .get(&c, Action::Compaction)
        .unwrap()
        .completed
        .clone()
        .unwrap();
    assert_eq!(done.action, Action::Commit);
    let meta: HoodieCommitMetadata = decode(&tl.read(&done).await.unwrap(), "c").unwrap();
    assert!(meta.is_compacted());
    assert_eq!(meta.operation_type(), Some(WriteOperationType::Compact));
    assert!(meta.schema().is_some());
    let stats: Vec<_> = meta.write_stats().collect();
    assert_eq!(stats.len(), 3);
    for (p, s) in &stats {
        assert!(s.path.as_ref().unwrap().starts_with(&format!("{p}/")));
        assert!(s.path.as_ref().unwrap().ends_with(&format!("_{c}.parquet")));
        assert!(s.file_size_in_bytes.unwrap() > 0);
    }
    let (_, a) = stats.iter().find(|(p, _)| *p == "a").unwrap();
    assert_eq!(a.prev_commit.as_deref(), Some(instants[0].as_str()));
    assert!(a.prev_base_file.as_ref().unwrap().ends_with(".parquet"));
    let (_, cst) = stats.iter().find(|(p, _)| *p == "c").unwrap();
    assert_eq!(cst.prev_base_file, None);

    // Writes after the compaction land in the new slices.
    t.write(Kind::UpdateLog, &[row("k2", 7, "a")], Finish::Complete)
        .await;
    let after = snapshot_lines(&t.storage, None).await;
    assert!(after.iter().any(|l| l.ends_with("|k2|7|a")), "{after:?}");
    assert_eq!(after.len(), 6);

    // A second run is refused.
    let err = run_compaction(&t.storage, &t.layout, &c, &t.generator)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            TableError::Timeline(TimelineError::AlreadyCompleted { .. })
        ),
        "{err}"
    );
}

#[tokio::test]
async fn test_run_compaction_unknown_instant_is_not_found() {
    let (t, instants) = mor_table().await;
    let err = run_compaction(&t.storage, &t.layout, &instants[1], &t.generator)
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
async fn test_run_compaction_peer_reader_reads_same_rows() {
    let Some(python) = peer_python() else { return };
    let (t, instants) = mor_table().await;
    let before = peer_snapshot_digest(&python, &t.base, None);
    assert_eq!(
        before,
        arbor_snapshot_digest(&python, &t.storage, None).await
    );
    let c = schedule_compaction(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(peer_snapshot_digest(&python, &t.base, None), before);
    run_compaction(&t.storage, &t.layout, &c, &t.generator)
        .await
        .unwrap();
    assert_eq!(peer_snapshot_digest(&python, &t.base, None), before);
    assert_eq!(
        arbor_snapshot_digest(&python, &t.storage, None).await,
        before
    );
    for i in &instants {
        assert_eq!(
            peer_snapshot_digest(&python, &t.base, Some(i)),
            arbor_snapshot_digest(&python, &t.storage, Some(i)).await,
            "time travel to {i}"
        );
    }
    let peer = peer_read(&python, &t.base);
    let last = peer["timeline"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["timestamp"], c.as_str());
    assert_eq!(last["action"], "commit");
    assert_eq!(last["operation"], "COMPACT");
    assert_eq!(peer["row_count"], 6);
}

/// Crash after every storage write of one compaction run: the table reads exactly as before,
/// the compaction stays pending, and `run_pending_compactions` completes it with one base file
/// per group.
#[tokio::test]
async fn test_run_compaction_crash_sweep_rerun_completes() {
    let mut n = 0;
    loop {
        let (t, instants) = mor_table().await;
        let mut completions = Vec::new();
        for i in &instants {
            completions.push(completion_of(&t, i).await);
        }
        let c = schedule_compaction(&t.storage, &t.layout, &t.generator)
            .await
            .unwrap()
            .unwrap();
        let expected = all_reads(&t.storage, &instants, &completions).await;
        let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
        faulty.set_count_only_writes(true);
        faulty.set_partial_batches(true);
        faulty.set_mode(FaultMode::CrashAt(n));
        let as_dyn: Arc<dyn Storage> = faulty.clone();
        let finished = run_compaction(&as_dyn, &t.layout, &c, &t.generator)
            .await
            .is_ok();

        let fresh = t.fresh_storage();
        assert_eq!(
            all_reads(&fresh, &instants, &completions).await,
            expected,
            "crash at write {n}: reads changed"
        );
        let pending = t.timeline().await.pending();
        assert_eq!(pending.is_empty(), finished, "crash at {n}: {pending:?}");
        let results = run_pending_compactions(&fresh, &t.layout, &t.generator)
            .await
            .unwrap();
        assert_eq!(results.len(), usize::from(!finished), "crash at {n}");
        assert_eq!(
            all_reads(&fresh, &instants, &completions).await,
            expected,
            "crash at write {n}: reads changed after the re-run"
        );
        let outputs: Vec<String> = t
            .data_files()
            .into_iter()
            .filter(|f| f.ends_with(&format!("_{c}.parquet")))
            .collect();
        assert_eq!(outputs.len(), 3, "crash at {n}: {outputs:?}");
        for s in latest_slices(&fresh).await {
            assert!(s.log_files.is_empty(), "crash at {n}: {s:?}");
        }
        if finished && faulty.op_count() <= n {
            assert!(n >= 4, "the sweep covered only {n} writes");
            break;
        }
        n += 1;
    }
}

/// The alternative to a re-run: rolling the pending compaction back removes its output and
/// plan; the table reads as before and can be compacted again.
#[tokio::test]
async fn test_rollback_instant_pending_compaction_removes_it_cleanly() {
    let (t, _) = mor_table().await;
    let expected = snapshot_lines(&t.storage, None).await;
    let c = schedule_compaction(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap()
        .unwrap();
    // Crash after the inflight file and the first base file.
    let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
    faulty.set_count_only_writes(true);
    faulty.set_mode(FaultMode::CrashAt(2));
    let as_dyn: Arc<dyn Storage> = faulty.clone();
    assert!(run_compaction(&as_dyn, &t.layout, &c, &t.generator)
        .await
        .is_err());
    assert_eq!(
        t.data_files()
            .iter()
            .filter(|f| f.contains(c.as_str()))
            .count(),
        1
    );

    let instant = Instant::requested(c.clone(), Action::Compaction).with_state(State::Inflight);
    rollback_instant(&t.storage, &t.layout, &instant, &t.generator)
        .await
        .unwrap();
    assert!(!t.data_files().iter().any(|f| f.contains(c.as_str())));
    assert!(!t.timeline_files().iter().any(|f| f.starts_with(c.as_str())));
    assert_eq!(snapshot_lines(&t.storage, None).await, expected);
    let view = FileSystemView::load(
        t.storage.clone(),
        t.layout.clone(),
        Arc::new(StorageListing::new(t.storage.clone())),
    )
    .await
    .unwrap();
    assert!(view.pending_compaction_operations().is_empty());

    let again = schedule_compaction(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap()
        .unwrap();
    run_compaction(&t.storage, &t.layout, &again, &t.generator)
        .await
        .unwrap();
    assert_eq!(snapshot_lines(&t.storage, None).await, expected);
}

/// The same through the write client: upserts and deletes as logs, then compaction; arbor and
/// hudi-rs read the same rows before and after.
#[tokio::test]
async fn test_run_compaction_after_client_writes_reads_unchanged() {
    use crate::support_tables::{client_table, rows_batch};
    use arbor_table::WriteOperation;
    let (_tmp, base, table) = client_table().await;
    let storage: Arc<dyn Storage> =
        Arc::new(arbor_storage::ObjectStoreStorage::local(&base).unwrap());
    let layout = arbor_timeline::TableLayout::v2(".hoodie");
    let generator = arbor_timeline::InstantTimeGenerator::new();
    let insert: Vec<_> = (0..6)
        .map(|i| row(&format!("k{i}"), 1, ["a", "b"][i % 2]))
        .collect();
    table
        .write(WriteOperation::Insert, vec![rows_batch(&insert)])
        .await
        .unwrap();
    table
        .write(
            WriteOperation::Upsert,
            vec![rows_batch(&[row("k0", 2, "a"), row("k3", 2, "b")])],
        )
        .await
        .unwrap();
    table
        .write(
            WriteOperation::Delete,
            vec![rows_batch(&[row("k1", 0, "b")])],
        )
        .await
        .unwrap();
    let before = snapshot_lines(&storage, None).await;
    assert_eq!(before.len(), 5);
    let c = schedule_compaction(&storage, &layout, &generator)
        .await
        .unwrap()
        .expect("the upserts and the delete left logs");
    run_compaction(&storage, &layout, &c, &generator)
        .await
        .unwrap();
    assert_eq!(snapshot_lines(&storage, None).await, before);
    for s in latest_slices(&storage).await {
        assert!(s.log_files.is_empty(), "{s:?}");
    }
    table
        .write(
            WriteOperation::Upsert,
            vec![rows_batch(&[row("k2", 9, "a")])],
        )
        .await
        .unwrap();
    let after = snapshot_lines(&storage, None).await;
    assert!(after.iter().any(|l| l.ends_with("|k2|9|a")), "{after:?}");
    if let Some(python) = peer_python() {
        assert_eq!(
            peer_snapshot_digest(&python, &base, None),
            arbor_snapshot_digest(&python, &storage, None).await
        );
    }
}

/// A compaction plan another writer scheduled, in Java's plan-version-1 shape (full `file:`
/// paths): `Table::compact_pending` runs it and schedules nothing else; a second plan rolled
/// back with `rollback_pending_compactions` leaves the table as it was.
#[tokio::test]
async fn test_compact_pending_runs_a_foreign_plan_and_rollback_pending_removes_one() {
    let (t, instants) = mor_table().await;
    let expected = snapshot_lines(&t.storage, None).await;
    let c = schedule_compaction(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap()
        .unwrap();
    // Rewrite the plan as Java 0.x/1.x plan version 1 writes it: paths, not file names.
    let mut plan = plan_of(&t, &c).await;
    let base = format!("file:{}", t.base.display());
    for op in plan.operations.iter_mut().flatten() {
        let p = op.partition_path.clone().unwrap_or_default();
        if let Some(d) = op.data_file_path.as_mut().filter(|d| !d.is_empty()) {
            *d = format!("{base}/{p}/{d}");
        }
        for l in op.delta_file_paths.iter_mut().flatten() {
            *l = format!("{base}/{p}/{l}");
        }
    }
    plan.version = Some(1);
    let key = t
        .base
        .join(format!(".hoodie/timeline/{c}.compaction.requested"));
    std::fs::write(&key, arbor_timeline::avro::encode(&plan).unwrap()).unwrap();

    let table = arbor_table::Table::open(t.storage.clone()).await.unwrap();
    let done = table.compact_pending().await.unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].instant, c);
    assert_eq!(snapshot_lines(&t.storage, None).await, expected);
    for s in latest_slices(&t.storage).await {
        assert!(s.log_files.is_empty(), "{s:?}");
    }
    assert!(table.compact_pending().await.unwrap().is_empty());

    // Another pending plan, rolled back.
    t.write(Kind::UpdateLog, &[row("k2", 9, "a")], Finish::Complete)
        .await;
    let after_update = snapshot_lines(&t.storage, None).await;
    let c2 = schedule_compaction(&t.storage, &t.layout, &t.generator)
        .await
        .unwrap()
        .unwrap();
    let table = arbor_table::Table::open(t.storage.clone()).await.unwrap();
    assert_eq!(
        table.rollback_pending_compactions().await.unwrap(),
        vec![c2]
    );
    assert!(t.timeline().await.pending().is_empty());
    assert_eq!(snapshot_lines(&t.storage, None).await, after_update);
    let _ = instants;
}

/// Log compaction: each slice with enough log files gets one compacted log file (a delete
/// block, then the merged records, both naming the compacted instants), completed as a
/// `LOG_COMPACT` deltacommit; every read (snapshot, time travel, incremental) is unchanged for
/// arbor and hudi-rs, and a later compaction still merges everything.
#[tokio::test]
async fn test_log_compaction_keeps_every_read_and_names_the_compacted_blocks() {
    let (t, instants) = mor_table().await;
    let mut completions = Vec::new();
    for i in &instants {
        completions.push(completion_of(&t, i).await);
    }
    let expected = all_reads(&t.storage, &instants, &completions).await;
    let table = arbor_table::Table::open(t.storage.clone()).await.unwrap();
    let cow_like = table.log_compact(Some(9)).await.unwrap();
    assert!(cow_like.is_empty(), "no slice has 9 log files");
    let done = table.log_compact(Some(2)).await.unwrap();
    assert_eq!(done.len(), 1);
    let lc = done[0].instant.clone();
    assert_eq!(done[0].operation, WriteOperationType::LogCompact);
    assert_eq!(
        done[0].files_written, 3,
        "groups a, b and c have two log files each"
    );
    assert_eq!(
        all_reads(&t.storage, &instants, &completions).await,
        expected
    );
    let files = t.timeline_files();
    assert!(
        files
            .iter()
            .any(|f| f.ends_with(&format!("{lc}.logcompaction.requested"))),
        "{files:?}"
    );
    assert!(
        files
            .iter()
            .any(|f| f.starts_with(&format!("{lc}_")) && f.ends_with(".deltacommit")),
        "{files:?}"
    );
    // The new log files name the compacted instants.
    let mut named = 0;
    for f in t
        .data_files()
        .into_iter()
        .filter(|f| f.contains(&format!("_{lc}.log.")))
    {
        let bytes = bytes::Bytes::from(std::fs::read(t.base.join(&f)).unwrap());
        let contents =
            arbor_format::log::read_log_bytes(&bytes, &f, arbor_format::log::ReadMode::Strict)
                .unwrap();
        for b in contents.blocks {
            let h = b
                .header
                .get(&arbor_format::log::HeaderKey::CompactedBlockTimes)
                .unwrap();
            assert!(
                h.split(',')
                    .all(|i| instants.iter().any(|x| x.as_str() == i)),
                "{h}"
            );
            named += 1;
        }
    }
    assert!(named >= 3, "{named}");
    if let Some(python) = peer_python() {
        assert_eq!(
            peer_snapshot_digest(&python, &t.base, None),
            arbor_snapshot_digest(&python, &t.storage, None).await
        );
        let peer = peer_read(&python, &t.base);
        let last = peer["timeline"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["operation"], "LOG_COMPACT", "{peer}");
    }
    // Nothing left to log-compact; a compaction then merges it all into base files.
    assert!(table.log_compact(Some(2)).await.unwrap().is_empty());
    assert_eq!(table.compact().await.unwrap().len(), 1);
    assert_eq!(snapshot_lines(&t.storage, None).await, expected[0]);
}

/// A crash before every write of a log compaction: reads never change, and the next run
/// completes it.
#[tokio::test]
async fn test_log_compaction_crash_sweep_rerun_completes() {
    let mut n = 0;
    loop {
        let (t, _) = mor_table().await;
        let expected = snapshot_lines(&t.storage, None).await;
        let c = arbor_table::write::log_compaction::schedule_log_compaction(
            &t.storage,
            &t.layout,
            &t.generator,
            2,
        )
        .await
        .unwrap()
        .unwrap();
        let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
        faulty.set_count_only_writes(true);
        faulty.set_partial_batches(true);
        faulty.set_mode(FaultMode::CrashAt(n));
        let as_dyn: Arc<dyn Storage> = faulty.clone();
        let finished = arbor_table::write::log_compaction::run_log_compaction(
            &as_dyn,
            &t.layout,
            &c,
            &t.generator,
        )
        .await
        .is_ok();
        let fresh = t.fresh_storage();
        assert_eq!(snapshot_lines(&fresh, None).await, expected, "crash at {n}");
        let rerun = arbor_table::write::log_compaction::run_pending_log_compactions(
            &fresh,
            &t.layout,
            &t.generator,
        )
        .await
        .unwrap();
        assert_eq!(rerun.len(), usize::from(!finished), "crash at {n}");
        assert_eq!(
            snapshot_lines(&fresh, None).await,
            expected,
            "crash at {n}, rerun"
        );
        assert!(t.timeline().await.pending().is_empty(), "crash at {n}");
        let outputs: Vec<String> = t
            .data_files()
            .into_iter()
            .filter(|f| f.contains(&format!("_{c}.log.")))
            .collect();
        assert_eq!(outputs.len(), 3, "crash at {n}: {outputs:?}");
        if finished && faulty.op_count() <= n {
            assert!(n >= 4, "the sweep covered only {n} writes");
            break;
        }
        n += 1;
    }
}

/// A log append planned before a log compaction and committed after it: its keys are in the
/// compacted log file (which sorts before nothing the append wrote later), so it conflicts and
/// its retry lands after the compacted blocks; a later value is never overridden by an older
/// one the compaction carried.
#[tokio::test]
async fn test_a_log_append_racing_a_log_compaction_conflicts_on_shared_keys() {
    use crate::support_tables::{client_table, rows_batch};
    use arbor_table::WriteOperation;
    let (_tmp, base, table) = client_table().await;
    let storage: Arc<dyn Storage> =
        Arc::new(arbor_storage::ObjectStoreStorage::local(&base).unwrap());
    let insert: Vec<_> = (0..4).map(|i| row(&format!("k{i}"), 1, "a")).collect();
    table
        .write(WriteOperation::Insert, vec![rows_batch(&insert)])
        .await
        .unwrap();
    for v in 2..5 {
        table
            .write(
                WriteOperation::Upsert,
                vec![rows_batch(&[row("k0", v, "a")])],
            )
            .await
            .unwrap();
    }
    let racing = table
        .prepare(
            WriteOperation::Upsert,
            vec![rows_batch(&[row("k0", 9, "a")])],
        )
        .await
        .unwrap();
    assert_eq!(table.log_compact(Some(2)).await.unwrap().len(), 1);
    let e = table.commit(racing).await.unwrap_err();
    assert!(matches!(e, TableError::CommitConflict { .. }), "{e}");
    table
        .write(
            WriteOperation::Upsert,
            vec![rows_batch(&[row("k0", 9, "a")])],
        )
        .await
        .unwrap();
    let lines = snapshot_lines(&storage, None).await;
    let k0: Vec<&String> = lines.iter().filter(|l| l.starts_with("k0|")).collect();
    assert_eq!(k0.len(), 1, "{lines:?}");
    assert!(
        k0[0].ends_with("|k0|9|a"),
        "the retried value wins: {lines:?}"
    );
}
