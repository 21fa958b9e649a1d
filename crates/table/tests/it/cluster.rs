//! Clustering: rows (with their commit times) identical before and after in arbor and hudi-rs,
//! on copy-on-write and merge-on-read, partitioned and not, with the record index, a secondary
//! index and column/partition stats kept exact; the sort order of the new files; writes racing
//! a clustering; plans scheduled by another writer in Java's format run or rolled back; a
//! crash at every write of a clustering, with hudi-rs reading each crashed state.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use arbor_storage::{FaultInjectingStorage, FaultMode, InProcessLockProvider, Storage};
use arbor_table::cluster::{ClusterOptions, ClusterOutcome, Layout};
use arbor_table::read::TableReader;
use arbor_table::{Table, TableError, WriteOperation, WriteOptions};
use arbor_testkit::crash::copy_dir;
use arbor_timeline::avro::{
    decode_instant, encode_instant_for, HoodieClusteringGroup, HoodieClusteringPlan,
    HoodieClusteringStrategy, HoodieRequestedReplaceMetadata, HoodieSliceInfo, InstantContent,
};
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, Instant, InstantTime};
use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use bytes::Bytes;

use super::write_support::{
    assert_peer_agrees, batch, create, peer_python, rows, rows_of, Layout as Parts, Query, Row,
    TestTable,
};

/// Every row with its key, commit time and sequence number (not its file name).
async fn full_rows(storage: &Arc<dyn Storage>) -> Vec<String> {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    let mut out = Vec::new();
    for b in reader.snapshot(None).await.unwrap() {
        let s = |n: &str| {
            arrow::compute::cast(
                b.column_by_name(n).unwrap(),
                &arrow::datatypes::DataType::Utf8,
            )
            .unwrap()
            .as_string::<i32>()
            .clone()
        };
        let cols: Vec<_> = [
            "_hoodie_record_key",
            "_hoodie_commit_time",
            "_hoodie_commit_seqno",
            "_hoodie_partition_path",
            "id",
            "region",
            "ts",
            "name",
        ]
        .iter()
        .map(|c| s(c))
        .collect();
        for i in 0..b.num_rows() {
            out.push(
                cols.iter()
                    .map(|c| c.value(i).to_string())
                    .collect::<Vec<_>>()
                    .join("|"),
            );
        }
    }
    out.sort();
    out
}

/// Writes of many small file groups: inserts never pack into existing groups.
fn small_files(t: &TestTable) -> Table {
    t.table.clone().with_write_options(WriteOptions {
        small_file_limit: 0,
        ..WriteOptions::default()
    })
}

/// Rows whose `ts` runs against their key order (so a sort by `ts` is visible).
fn shuffled(from: u32, to: u32, tag: &str) -> Vec<Row> {
    rows(from..to, 0, tag)
        .into_iter()
        .map(|mut r| {
            let i: i64 = r.0[1..].parse().unwrap();
            r.2 = (i * 7919) % 1000;
            r
        })
        .collect()
}

/// A table with 6 insert commits (12 file groups when partitioned), an update and a delete.
async fn table_with_small_files(table_type: TableType, parts: Parts, indexes: bool) -> TestTable {
    let t = create(table_type, parts).await;
    let w = small_files(&t);
    if indexes {
        w.write(WriteOperation::Insert, vec![batch(&shuffled(0, 2, "a"))])
            .await
            .unwrap();
        t.table.create_record_index().await.unwrap();
        t.table
            .create_secondary_index("by_name", "name")
            .await
            .unwrap();
        t.table
            .create_stats_indexes(true, parts != Parts::None)
            .await
            .unwrap();
    }
    for c in 0..6u32 {
        w.write(
            WriteOperation::Insert,
            vec![batch(&shuffled(10 + c * 20, 30 + c * 20, "r"))],
        )
        .await
        .unwrap();
    }
    let mut up = shuffled(10, 14, "u");
    for r in &mut up {
        r.2 += 5000;
    }
    w.write(WriteOperation::Upsert, vec![batch(&up)])
        .await
        .unwrap();
    w.write(WriteOperation::Delete, vec![batch(&shuffled(30, 32, "d"))])
        .await
        .unwrap();
    t
}

fn options(sort_by: &[&str], layout: Layout) -> ClusterOptions {
    ClusterOptions {
        sort_by: sort_by.iter().map(|s| s.to_string()).collect(),
        layout,
        ..ClusterOptions::default()
    }
}

async fn latest_groups(storage: &Arc<dyn Storage>) -> BTreeSet<(String, String)> {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    reader
        .view()
        .latest_file_slices(None, None)
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.partition, s.file_id))
        .collect()
}

/// The `ts` values of each new file, in file order.
async fn ts_per_file(t: &TestTable, outcome: &ClusterOutcome) -> Vec<Vec<i64>> {
    let mut out = Vec::new();
    for g in &outcome.groups {
        for id in &g.output_file_groups {
            let dir = if g.partition.is_empty() {
                t.base.clone()
            } else {
                t.base.join(&g.partition)
            };
            let file = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| {
                    p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with(id.as_str())
                })
                .unwrap();
            let f = std::fs::File::open(file).unwrap();
            let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
                .unwrap()
                .build()
                .unwrap();
            let mut ts = Vec::new();
            for b in reader {
                let b: RecordBatch = b.unwrap();
                ts.extend(
                    b.column_by_name("ts")
                        .unwrap()
                        .as_primitive::<Int64Type>()
                        .values()
                        .iter()
                        .copied(),
                );
            }
            out.push(ts);
        }
    }
    out
}

async fn assert_indexes_valid(t: &TestTable, step: &str) {
    let v = arbor_table::validate_indexes(t.storage.clone())
        .await
        .unwrap();
    assert!(v.discrepancies.is_empty(), "{step}: {:?}", v.discrepancies);
}

async fn cluster_case(table_type: TableType, parts: Parts, indexes: bool, layout: Layout) {
    let step = format!("{table_type:?} {parts:?} indexes={indexes} {layout:?}");
    let t = table_with_small_files(table_type, parts, indexes).await;
    let before = full_rows(&t.storage).await;
    let groups_before = latest_groups(&t.storage).await;
    let last_write = t.completed().await.last().unwrap().requested_time.clone();
    let sort: &[&str] = if layout == Layout::Linear {
        &["ts"]
    } else {
        &["ts", "name"]
    };
    let dry = t
        .table
        .plan_clustering(&options(sort, layout))
        .await
        .unwrap();
    assert!(
        dry.dry_run && dry.instant.is_none() && !dry.groups.is_empty(),
        "{step}"
    );
    let listing = t.listing().await;
    let outcome = t.table.cluster(&options(sort, layout)).await.unwrap();
    let instant = outcome.instant.clone().unwrap();
    assert_eq!(
        dry.groups
            .iter()
            .map(|g| g.input_file_groups.clone())
            .collect::<Vec<_>>(),
        outcome
            .groups
            .iter()
            .map(|g| g.input_file_groups.clone())
            .collect::<Vec<_>>(),
        "{step}: the dry run planned what ran"
    );
    assert_ne!(listing, t.listing().await);
    assert_eq!(full_rows(&t.storage).await, before, "{step}: rows changed");
    let groups_after = latest_groups(&t.storage).await;
    assert!(groups_after.len() < groups_before.len(), "{step}");
    let rewritten: BTreeSet<(String, String)> = outcome
        .groups
        .iter()
        .flat_map(|g| {
            g.input_file_groups
                .iter()
                .map(|f| (g.partition.clone(), f.clone()))
        })
        .collect();
    assert!(groups_after.is_disjoint(&rewritten), "{step}");
    if layout == Layout::Linear {
        for ts in ts_per_file(&t, &outcome).await {
            assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{step}: {ts:?}");
        }
    }
    // The completed instant, as Java writes it.
    let tl = t.timeline().await;
    let done = tl
        .completed()
        .into_iter()
        .find(|i| i.requested_time == instant)
        .unwrap();
    assert_eq!(done.action, Action::ReplaceCommit);
    let key = tl.key_of(&done).unwrap();
    match decode_instant(&done, &tl.read(&done).await.unwrap(), &key, false).unwrap() {
        InstantContent::ReplaceCommit(m) => {
            assert_eq!(m.operation_type.as_deref(), Some("CLUSTER"));
            let replaced: usize = m
                .partition_to_replace_file_ids
                .as_ref()
                .unwrap()
                .values()
                .map(Vec::len)
                .sum();
            assert_eq!(replaced, rewritten.len(), "{step}");
        }
        other => panic!("{step}: {other:?}"),
    }
    let inflight = t
        .base
        .join(format!(".hoodie/timeline/{instant}.clustering.inflight"));
    assert_eq!(std::fs::metadata(inflight).unwrap().len(), 0, "{step}");
    if indexes {
        assert_indexes_valid(&t, &step).await;
    }
    assert_peer_agrees(
        &t,
        &[Query::Snapshot, Query::AsOf(last_write.to_string())],
        &step,
    )
    .await;
    // Writes find the rewritten records (the record index points at the new groups).
    let mut up = shuffled(40, 44, "v");
    for r in &mut up {
        r.2 += 9000;
    }
    let w = t
        .table
        .write(WriteOperation::Upsert, vec![batch(&up)])
        .await
        .unwrap();
    assert_eq!((w.inserted, w.updated), (0, 4), "{step}");
    let after = rows_of(&t.reader().await.snapshot(None).await.unwrap());
    assert_eq!(after.len(), before.len(), "{step}");
    for r in &up {
        assert!(after.contains(r), "{step}: {r:?}");
    }
    if indexes {
        assert_indexes_valid(&t, &format!("{step}, then an upsert")).await;
    }
    // Nothing is left to do: the new files are sorted and large enough together.
    let again = t
        .table
        .plan_clustering(&options(&[], Layout::Linear))
        .await
        .unwrap();
    assert!(
        again.groups.iter().all(|g| g.input_file_groups.len() <= 2),
        "{step}: {again:?}"
    );
}

#[tokio::test]
async fn test_cluster_cow_partitioned_with_every_index() {
    cluster_case(TableType::CopyOnWrite, Parts::Hive, true, Layout::Linear).await;
}

#[tokio::test]
async fn test_cluster_mor_partitioned_with_every_index_z_order() {
    cluster_case(TableType::MergeOnRead, Parts::Hive, true, Layout::ZOrder).await;
}

#[tokio::test]
async fn test_cluster_cow_unpartitioned_hilbert() {
    cluster_case(TableType::CopyOnWrite, Parts::None, false, Layout::Hilbert).await;
}

#[tokio::test]
async fn test_cluster_mor_unpartitioned_with_every_index() {
    cluster_case(TableType::MergeOnRead, Parts::None, true, Layout::Linear).await;
}

#[tokio::test]
async fn test_cluster_refuses_bad_options_before_writing() {
    let t = table_with_small_files(TableType::CopyOnWrite, Parts::Plain, false).await;
    let listing = t.listing().await;
    for (o, needle) in [
        (options(&["nope"], Layout::Linear), "\"nope\""),
        (options(&[], Layout::Hilbert), "--sort-by"),
        (
            ClusterOptions {
                partitions: vec!["mars".into()],
                ..ClusterOptions::default()
            },
            "\"mars\"",
        ),
        (
            ClusterOptions {
                target_file_size: 0,
                ..ClusterOptions::default()
            },
            "target file size",
        ),
    ] {
        let e = t.table.cluster(&o).await.unwrap_err();
        assert!(e.to_string().contains(needle), "{needle}: {e}");
    }
    assert_eq!(listing, t.listing().await);
    // Only the partitions asked for.
    let o = ClusterOptions {
        partitions: vec!["eu".into()],
        ..options(&["ts"], Layout::Linear)
    };
    let out = t.table.cluster(&o).await.unwrap();
    assert!(!out.groups.is_empty());
    assert!(out.groups.iter().all(|g| g.partition == "eu"), "{out:?}");
}

#[tokio::test]
async fn test_cluster_with_a_small_memory_budget_spills_and_keeps_the_order() {
    let t = table_with_small_files(TableType::CopyOnWrite, Parts::None, false).await;
    for c in 0..3 {
        small_files(&t)
            .write(
                WriteOperation::Insert,
                vec![batch(&shuffled(1000 + c * 3000, 4000 + c * 3000, "big"))],
            )
            .await
            .unwrap();
    }
    let before = full_rows(&t.storage).await;
    let o = ClusterOptions {
        memory_budget: 50_000,
        target_file_size: 30_000,
        ..options(&["ts"], Layout::Linear)
    };
    let out = t.table.cluster(&o).await.unwrap();
    assert!(out.groups[0].spilled_runs > 1, "{out:?}");
    assert!(out.groups[0].output_file_groups.len() > 1, "{out:?}");
    assert_eq!(full_rows(&t.storage).await, before);
    let all: Vec<i64> = ts_per_file(&t, &out).await.concat();
    assert!(all.windows(2).all(|w| w[0] <= w[1]), "{all:?}");
}

/// A clustering plan written as Java writes one (full `file:` paths, sort columns in the
/// strategy parameters) over every latest slice of `partition`.
async fn java_plan(t: &TestTable, partition: &str) -> InstantTime {
    let reader = t.reader().await;
    let slices = reader
        .view()
        .latest_file_slices(Some(partition), None)
        .await
        .unwrap();
    let base = format!("file:{}", t.base.display());
    let infos = slices
        .iter()
        .map(|s| HoodieSliceInfo {
            data_file_path: Some(
                s.base_file
                    .as_ref()
                    .map(|b| format!("{base}/{partition}/{}", b.file_name()))
                    .unwrap_or_default(),
            ),
            delta_file_paths: Some(
                s.log_files
                    .iter()
                    .map(|l| format!("{base}/{partition}/{}", l.file_name()))
                    .collect(),
            ),
            file_id: Some(s.file_id.clone()),
            partition_path: Some(partition.to_string()),
            bootstrap_file_path: Some(String::new()),
            version: Some(1),
        })
        .collect();
    let meta = HoodieRequestedReplaceMetadata {
        operation_type: Some("CLUSTER".into()),
        clustering_plan: Some(HoodieClusteringPlan {
            input_groups: Some(vec![HoodieClusteringGroup {
                slices: Some(infos),
                metrics: Some(BTreeMap::new()),
                num_output_file_groups: Some(1),
                extra_metadata: None,
                version: Some(1),
            }]),
            strategy: Some(HoodieClusteringStrategy {
                strategy_class_name: Some(
                    "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
                        .into(),
                ),
                strategy_params: Some(BTreeMap::from([(
                    "hoodie.clustering.plan.strategy.sort.columns".to_string(),
                    "ts".to_string(),
                )])),
                version: Some(1),
            }),
            extra_metadata: Some(BTreeMap::new()),
            version: Some(1),
            preserve_hoodie_metadata: Some(true),
            missing_schedule_partitions: None,
        }),
        extra_metadata: Some(BTreeMap::new()),
        version: Some(1),
    };
    let mut tl = t.timeline().await;
    let time = InstantTime::from_datetime(chrono::Utc::now());
    let requested = Instant::requested(time.clone(), Action::Clustering);
    let bytes = encode_instant_for(
        &requested,
        &InstantContent::RequestedReplace(Box::new(meta)),
    )
    .unwrap();
    tl.create_requested(time.clone(), Action::Clustering, Bytes::from(bytes))
        .await
        .unwrap();
    time
}

fn lapsed(t: &TestTable) -> Table {
    t.table.clone().with_write_options(WriteOptions {
        heartbeat_timeout: Duration::ZERO,
        ..WriteOptions::default()
    })
}

#[tokio::test]
async fn test_a_pending_plan_of_another_writer_refuses_updates_then_runs_as_planned() {
    let t = table_with_small_files(TableType::MergeOnRead, Parts::Plain, true).await;
    let before = full_rows(&t.storage).await;
    let time = java_plan(&t, "eu").await;
    let pending = t.table.pending_clustering().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].instant, time);
    assert!(!pending[0].inflight && !pending[0].writer_alive);
    // An update of a record in a planned group is refused (Java's reject strategy) ...
    let eu_row = shuffled(11, 12, "x");
    let e = t
        .table
        .write(WriteOperation::Upsert, vec![batch(&eu_row)])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("pending clustering"), "{e}");
    assert!(e.to_string().contains("arbor cluster --pending"), "{e}");
    // ... a new clustering leaves the planned groups alone ...
    let out = t
        .table
        .cluster(&options(&["ts"], Layout::Linear))
        .await
        .unwrap();
    assert!(out.groups.iter().all(|g| g.partition != "eu"), "{out:?}");
    // ... and the plan runs as written.
    let done = lapsed(&t).run_pending_clustering().await.unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].instant.as_ref(), Some(&time));
    assert_eq!(done[0].groups[0].output_file_groups.len(), 1);
    assert_eq!(full_rows(&t.storage).await, before);
    for ts in ts_per_file(&t, &done[0]).await {
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{ts:?}");
    }
    assert!(t.table.pending_clustering().await.unwrap().is_empty());
    assert_indexes_valid(&t, "after the pending plan ran").await;
    assert_peer_agrees(&t, &[Query::Snapshot], "after the pending plan ran").await;
    t.table
        .write(WriteOperation::Upsert, vec![batch(&eu_row)])
        .await
        .unwrap();
}

#[tokio::test]
async fn test_a_pending_plan_rolled_back_frees_its_groups() {
    let t = table_with_small_files(TableType::CopyOnWrite, Parts::Plain, false).await;
    let before = full_rows(&t.storage).await;
    let listing = t.listing().await;
    let time = java_plan(&t, "us").await;
    let rolled = lapsed(&t).rollback_pending_clustering().await.unwrap();
    assert_eq!(rolled, vec![time]);
    assert!(t.table.pending_clustering().await.unwrap().is_empty());
    assert_eq!(full_rows(&t.storage).await, before);
    let data = |l: &[String]| -> Vec<String> {
        l.iter()
            .filter(|k| !k.starts_with(".hoodie"))
            .cloned()
            .collect()
    };
    assert_eq!(data(&listing), data(&t.listing().await));
    t.table
        .write(WriteOperation::Upsert, vec![batch(&shuffled(10, 12, "y"))])
        .await
        .unwrap();
}

/// A write prepared before the clustering committed after it: the write's file groups were
/// replaced, so its commit is refused (the conflict rule), and the table keeps the clustered
/// rows.
#[tokio::test]
async fn test_a_write_racing_a_clustering_follows_the_conflict_rule() {
    let t = table_with_small_files(TableType::CopyOnWrite, Parts::Plain, false).await;
    let prepared = t
        .table
        .prepare(WriteOperation::Upsert, vec![batch(&shuffled(10, 12, "z"))])
        .await
        .unwrap();
    let before = full_rows(&t.storage).await;
    t.table
        .cluster(&options(&["ts"], Layout::Linear))
        .await
        .unwrap();
    let e = t.table.commit(prepared).await.unwrap_err();
    assert!(matches!(e, TableError::CommitConflict { .. }), "{e}");
    assert_eq!(full_rows(&t.storage).await, before);
    // Retried, the write lands on the clustered groups.
    t.table
        .write(WriteOperation::Upsert, vec![batch(&shuffled(10, 12, "z"))])
        .await
        .unwrap();
}

/// A crash before every storage write of a clustering: a restarted process reads the same rows
/// (arbor, and hudi-rs at every crash point), the metadata table validates, and running the
/// pending plan (or a new clustering, when none was scheduled) leaves exactly one completed
/// clustering, no pending instant and no stray file of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_cluster_crash_sweep_reads_the_same_and_recovers() {
    let template = table_with_small_files(TableType::MergeOnRead, Parts::Plain, true).await;
    let before = full_rows(&template.storage).await;
    let o = options(&["ts", "name"], Layout::ZOrder);
    let python = peer_python();
    let mut n = 0;
    let mut outcomes = BTreeMap::<&str, usize>::new();
    loop {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        copy_dir(&template.base, &base);
        let local: Arc<dyn Storage> =
            Arc::new(arbor_storage::ObjectStoreStorage::local(&base).unwrap());
        let faulty = Arc::new(FaultInjectingStorage::new(local.clone()));
        faulty.set_count_only_writes(true);
        faulty.set_partial_batches(true);
        let crashing = Table::open(faulty.clone() as Arc<dyn Storage>)
            .await
            .unwrap()
            .with_lock_provider(Arc::new(InProcessLockProvider::new()));
        faulty.reset();
        faulty.set_mode(FaultMode::CrashAt(n));
        let result = crashing.cluster(&o).await;
        drop(crashing);
        let label = format!("clustering: crash at write {n}");
        if let Err(e) = &result {
            assert!(faulty.has_crashed(), "{label}: failed without a crash: {e}");
        }
        let fresh: Arc<dyn Storage> =
            Arc::new(arbor_storage::ObjectStoreStorage::local(&base).unwrap());
        assert_eq!(full_rows(&fresh).await, before, "{label}: rows changed");
        super::mdt::assert_mdt_valid(&fresh, &label).await;
        if let Some(python) = &python {
            let digest = arbor_testkit::peer_read(python, &base);
            assert_eq!(
                digest["row_count"].as_u64().map(|r| r as usize),
                Some(before.len()),
                "{label}: hudi-rs: {digest}"
            );
        }
        let next = Table::open(fresh.clone())
            .await
            .unwrap()
            .with_lock_provider(Arc::new(InProcessLockProvider::new()))
            .with_write_options(WriteOptions {
                heartbeat_timeout: Duration::ZERO,
                ..WriteOptions::default()
            });
        let pending = next.pending_clustering().await.unwrap();
        let kind = match (&result, pending.is_empty()) {
            (Ok(_), true) => "completed",
            (Err(_), false) => {
                next.run_pending_clustering().await.unwrap();
                "pending, then run"
            }
            (Err(_), true) => {
                if new_clusterings(&fresh, &template).await.is_empty() {
                    next.cluster(&o).await.unwrap();
                    "nothing, then a new clustering"
                } else {
                    "completed, reported failed"
                }
            }
            (Ok(_), false) => panic!("{label}: completed but still pending: {pending:?}"),
        };
        *outcomes.entry(kind).or_default() += 1;
        assert_eq!(
            full_rows(&fresh).await,
            before,
            "{label}: rows after recovery"
        );
        super::mdt::assert_mdt_valid(&fresh, &format!("{label}, recovered")).await;
        let v = arbor_table::validate_indexes(fresh.clone()).await.unwrap();
        assert!(v.discrepancies.is_empty(), "{label}: {:?}", v.discrepancies);
        let reader = TableReader::open(fresh.clone()).await.unwrap();
        let tl = timeline_of(&fresh).await;
        assert!(tl.pending().is_empty(), "{label}: {:?}", tl.pending());
        let clusterings = new_clusterings(&fresh, &template).await;
        assert_eq!(clusterings.len(), 1, "{label}: {clusterings:?}");
        // No file of an attempt that did not complete is left behind.
        let committed: BTreeSet<String> = reader
            .view()
            .latest_file_slices(None, None)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|s| s.base_file.map(|b| b.file_name()))
            .collect();
        for p in ["eu", "us"] {
            for e in std::fs::read_dir(base.join(p)).unwrap() {
                let name = e.unwrap().file_name().to_string_lossy().to_string();
                let stray = tl.pending().is_empty()
                    && name.ends_with(".parquet")
                    && name.contains(&format!("_{}.parquet", clusterings[0].requested_time))
                    && !committed.contains(&name);
                assert!(!stray, "{label}: stray file {name}");
            }
        }
        if result.is_ok() && faulty.op_count() <= n {
            break;
        }
        n += 1;
        assert!(n < 500, "the clustering never finished");
    }
    assert!(n >= 8, "the sweep covered only {n} writes");
    assert!(outcomes.len() >= 2, "{outcomes:?}");
    println!("clustering: swept {n} crash points ({outcomes:?})");
}

async fn timeline_of(storage: &Arc<dyn Storage>) -> arbor_timeline::ActiveTimeline {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    arbor_timeline::ActiveTimeline::load(storage.clone(), reader.view().layout().clone())
        .await
        .unwrap()
}

/// Completed replacecommits the template did not have.
async fn new_clusterings(storage: &Arc<dyn Storage>, template: &TestTable) -> Vec<Instant> {
    timeline_of(storage)
        .await
        .completed()
        .into_iter()
        .filter(|i| i.action == Action::ReplaceCommit && !template_has(template, &i.requested_time))
        .collect()
}

fn template_has(t: &TestTable, time: &InstantTime) -> bool {
    t.base
        .join(".hoodie/timeline")
        .read_dir()
        .unwrap()
        .any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(time.as_str())
        })
}

/// The futures of the clustering API can run on any runtime thread (`tokio::spawn`).
#[test]
fn test_clustering_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    fn check(t: &Table, o: &ClusterOptions) {
        send(&t.cluster(o));
        send(&t.plan_clustering(o));
        send(&t.run_pending_clustering());
        send(&t.rollback_pending_clustering());
        send(&t.pending_clustering());
    }
    let _ = check;
}
