//! The metadata table cleaning its own file slices (`arbor_mdt::clean`): the MDT's file count
//! stays bounded by the retention, reads (arbor through FILES and through listings, `validate`,
//! hudi-rs) equal the model after MDT cleans, and a crash at any storage operation of an MDT
//! clean leaves the table readable with the next write finishing or redoing the clean.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use arbor_fsview::parse_data_file_name;
use arbor_mdt::clean::{MdtCleanScope, DEFAULT_MDT_COMMITS_RETAINED};
use arbor_mdt::{MetadataTable, MDT_BASE, MDT_META_DIR};
use arbor_storage::{
    FaultInjectingStorage, FaultMode, InProcessLockProvider, ObjectStoreStorage, Storage,
    StorageExt,
};
use arbor_table::{ListingSource, Table, WriteOperation, WriteOptions};
use arbor_testkit::crash::copy_dir;
use arbor_timeline::avro::{decode, HoodieCleanMetadata, HoodieCleanerPlan};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::MetaRoot;
use arbor_timeline::{Action, ActiveTimeline, Instant, State, TableConfig, TableLayout};

use super::mdt::{assert_mdt_instants_have_data_instants, assert_mdt_valid, rows_from};
use super::write_support::{
    assert_peer_agrees, assert_snapshot, create, rows, Layout, Model, Query, TestTable,
};

/// The MDT's data files (base HFiles and log files) per MDT partition, from a listing.
pub async fn mdt_files(storage: &Arc<dyn Storage>) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for o in storage.list_all(MDT_BASE).await.unwrap() {
        let Some(rest) = o.key.strip_prefix(&format!("{MDT_BASE}/")) else {
            continue;
        };
        if rest.starts_with(".hoodie/") {
            continue;
        }
        let Some((partition, name)) = rest.split_once('/') else {
            continue;
        };
        if matches!(parse_data_file_name(name, o.size), Ok(Some(_))) {
            out.entry(partition.to_string())
                .or_default()
                .insert(name.to_string());
        }
    }
    out
}

/// The number of MDT data files.
pub async fn mdt_file_count(storage: &Arc<dyn Storage>) -> usize {
    mdt_files(storage).await.values().map(BTreeSet::len).sum()
}

/// The MDT's active timeline.
pub async fn mdt_timeline(storage: &Arc<dyn Storage>) -> ActiveTimeline {
    let config = TableConfig::load(storage.as_ref(), MDT_META_DIR)
        .await
        .unwrap();
    let layout = TableLayout::from_config(MDT_META_DIR, &config).unwrap();
    ActiveTimeline::load(storage.clone(), layout).await.unwrap()
}

/// The completed MDT cleans.
pub async fn mdt_cleans(storage: &Arc<dyn Storage>) -> Vec<Instant> {
    mdt_timeline(storage)
        .await
        .filter(&[Action::Clean], &[State::Completed])
}

/// Every file of the MDT's latest slices exists, and the FILES listing reads.
async fn assert_latest_slices_present(storage: &Arc<dyn Storage>, label: &str) {
    let mdt = MetadataTable::open(storage.clone()).await.unwrap().unwrap();
    for p in mdt.view().partitions().await.unwrap().iter() {
        for s in mdt.view().latest_file_slices(Some(p), None).await.unwrap() {
            for key in s.base_file_path().into_iter().chain(s.log_file_paths()) {
                assert!(
                    storage.exists(&format!("{MDT_BASE}/{key}")).await.unwrap(),
                    "{label}: latest MDT slice file {key} is gone"
                );
            }
        }
    }
    mdt.files_listing().await.unwrap();
}

/// Reads through FILES and through a listing equal the model; `validate` finds nothing.
async fn assert_reads(t: &TestTable, model: &Model, label: &str) {
    assert_snapshot(t, model, label).await;
    assert_eq!(
        rows_from(&t.storage, ListingSource::MetadataTable).await,
        model.sorted(),
        "{label}: through FILES"
    );
    assert_eq!(
        rows_from(&t.storage, ListingSource::Storage).await,
        model.sorted(),
        "{label}: through a listing"
    );
    assert_mdt_valid(&t.storage, label).await;
    assert_latest_slices_present(&t.storage, label).await;
}

#[tokio::test]
async fn test_mdt_file_count_stays_bounded_by_retention_not_history() {
    let t = create(TableType::MergeOnRead, Layout::Hive).await;
    let mut model = Model::default();
    let mut counts = Vec::new();
    for i in 0..60u32 {
        let r = rows(i * 2..i * 2 + 4, i64::from(i), "w");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        counts.push(mdt_file_count(&t.storage).await);
    }
    eprintln!("MDT files after each commit: {counts:?}");
    let (at30, at60) = (counts[29], counts[59]);
    // One compaction cycle (a base file and ten log files) is the most the count may vary
    // by once the retention window is full; without cleaning it grows by one log file per
    // commit (30 more).
    assert!(
        at60 <= at30 + 11,
        "MDT files after 30 commits: {at30}, after 60: {at60} ({counts:?})"
    );
    assert!(
        counts.iter().max().copied().unwrap_or(0) < 50,
        "MDT files: {counts:?}"
    );
    let cleans = mdt_cleans(&t.storage).await;
    assert!(cleans.len() >= 2, "MDT cleans: {cleans:?}");
    // Each clean is written as Java writes it and deleted exactly what it names.
    let tl = mdt_timeline(&t.storage).await;
    let present = mdt_files(&t.storage).await;
    for c in &cleans {
        let key = tl.key_of(c).unwrap();
        let meta: HoodieCleanMetadata = decode(&tl.read(c).await.unwrap(), &key).unwrap();
        assert_eq!(meta.policy, "KEEP_LATEST_COMMITS");
        assert!(meta.total_files_deleted > 0, "{meta:?}");
        for (partition, pm) in &meta.partition_metadata {
            for name in &pm.success_delete_files {
                assert!(
                    !present.get(partition).is_some_and(|f| f.contains(name)),
                    "{partition}/{name} is still there"
                );
            }
        }
        let requested = c.with_state(State::Requested);
        let rkey = tl.key_of(&requested).unwrap();
        let plan: HoodieCleanerPlan = decode(&tl.read(&requested).await.unwrap(), &rkey).unwrap();
        assert!(plan.earliest_instant_to_retain.is_some(), "{plan:?}");
    }
    // The retention: at least the MDT writes' latest 20 snapshots still resolve to files.
    let mdt = MetadataTable::open(t.storage.clone())
        .await
        .unwrap()
        .unwrap();
    let writes: Vec<_> = mdt
        .view()
        .index()
        .completed_writes()
        .map(|i| i.requested_time.clone())
        .collect();
    for w in writes.iter().rev().take(DEFAULT_MDT_COMMITS_RETAINED) {
        for s in mdt.view().latest_file_slices(None, Some(w)).await.unwrap() {
            for key in s.base_file_path().into_iter().chain(s.log_file_paths()) {
                assert!(
                    t.storage
                        .exists(&format!("{MDT_BASE}/{key}"))
                        .await
                        .unwrap(),
                    "retained snapshot as of {w} lost {key}"
                );
            }
        }
    }
    assert_reads(&t, &model, "after 60 commits").await;
    assert_mdt_instants_have_data_instants(&t.storage, "after 60 commits").await;
    let first = t.completed().await[0].requested_time.to_string();
    assert_peer_agrees(
        &t,
        &[Query::Snapshot, Query::AsOf(first)],
        "after MDT cleans",
    )
    .await;
}

#[tokio::test]
async fn test_mdt_clean_off_keeps_every_file() {
    let mut t = create(TableType::CopyOnWrite, Layout::Plain).await;
    t.table = without_mdt_clean(&t.storage).await;
    let mut model = Model::default();
    for i in 0..40u32 {
        let r = rows(i..i + 2, i64::from(i), "w");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
    }
    assert!(mdt_cleans(&t.storage).await.is_empty());
    // One log file per commit, never removed.
    assert!(mdt_file_count(&t.storage).await >= 40);
    assert_reads(&t, &model, "without MDT cleaning").await;
}

/// A handle that writes without the MDT's own clean.
async fn without_mdt_clean(storage: &Arc<dyn Storage>) -> Table {
    Table::open(storage.clone())
        .await
        .unwrap()
        .with_write_options(WriteOptions {
            mdt_clean: false,
            ..WriteOptions::default()
        })
}

fn local(base: &std::path::Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

/// A fresh handle as a restarted process opens it (own lock, rolls back every pending write).
async fn recovering_table(storage: &Arc<dyn Storage>) -> Table {
    Table::open(storage.clone())
        .await
        .unwrap()
        .with_lock_provider(Arc::new(InProcessLockProvider::new()))
        .with_write_options(WriteOptions {
            heartbeat_timeout: Duration::ZERO,
            ..WriteOptions::default()
        })
}

/// Crashes an MDT clean before each of its storage writes in turn (deletes of a batch
/// partly done included): the table reads as before at every point (arbor through FILES and
/// listings, `validate`, hudi-rs once per distinct timeline state), and the next write
/// finishes or redoes the clean, leaving what an uninterrupted clean leaves.
#[tokio::test]
async fn test_crash_sweep_over_mdt_clean() {
    // The template: 35 commits with the MDT's own clean off, so a clean is due and has work.
    let mut template = create(TableType::MergeOnRead, Layout::Hive).await;
    template.table = without_mdt_clean(&template.storage).await;
    let mut model = Model::default();
    for i in 0..35u32 {
        let r = rows(i..i + 3, i64::from(i), "s");
        template.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
    }
    let before = mdt_files(&template.storage).await;

    // The uninterrupted clean, for reference.
    let reference_dir = tempfile::tempdir().unwrap();
    copy_dir(&template.base, reference_dir.path());
    let reference = local(reference_dir.path());
    let handle = recovering_table(&reference).await;
    let scope = MdtCleanScope {
        view: &reference,
        table: &reference,
        root: &MetaRoot::Root,
        retained: DEFAULT_MDT_COMMITS_RETAINED,
    };
    let done = arbor_mdt::clean::clean(scope, handle.generator())
        .await
        .unwrap()
        .unwrap();
    assert!(done.deleted > 0, "{done:?}");
    let after_clean = mdt_files(&reference).await;
    let deleted: BTreeSet<(String, String)> = before
        .iter()
        .flat_map(|(p, names)| names.iter().map(move |n| (p.clone(), n.clone())))
        .filter(|(p, n)| !after_clean.get(p).is_some_and(|f| f.contains(n)))
        .collect();
    assert_eq!(deleted.len(), done.deleted);

    let next = rows(200..203, 999, "n");
    let mut after_model = model.clone();
    after_model.upsert(&next);
    let mut points = 0;
    let mut peer_states: BTreeSet<Vec<String>> = BTreeSet::new();
    for n in 0.. {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        copy_dir(&template.base, &base);
        let inner = local(&base);
        let faulty = Arc::new(FaultInjectingStorage::new(inner.clone()));
        faulty.set_count_only_writes(true);
        faulty.set_partial_batches(true);
        let faulty_dyn: Arc<dyn Storage> = faulty.clone();
        let handle = recovering_table(&faulty_dyn).await;
        faulty.set_mode(FaultMode::CrashAt(n));
        let scope = MdtCleanScope {
            view: &faulty_dyn,
            table: &faulty_dyn,
            root: &MetaRoot::Root,
            retained: DEFAULT_MDT_COMMITS_RETAINED,
        };
        let result = arbor_mdt::clean::clean(scope, handle.generator()).await;
        let crashed = faulty.has_crashed();
        let label = format!("crash at write {n}");
        // What a restarted process sees.
        let t = TestTable {
            _tmp: tmp,
            base: base.clone(),
            storage: inner.clone(),
            table: recovering_table(&inner).await,
            layout: Layout::Hive,
        };
        assert_reads(&t, &model, &label).await;
        let state: Vec<String> = mdt_timeline(&inner)
            .await
            .filter(
                &[Action::Clean],
                &[State::Requested, State::Inflight, State::Completed],
            )
            .iter()
            .map(|i| format!("{:?}", i.state))
            .collect();
        if peer_states.insert(state) {
            assert_peer_agrees(&t, &[Query::Snapshot], &label).await;
        }
        // The next write finishes (or redoes) the clean.
        t.write(WriteOperation::Upsert, &next).await;
        assert_reads(&t, &after_model, &format!("{label}, then a write")).await;
        let tl = mdt_timeline(&inner).await;
        assert!(
            tl.filter(&[Action::Clean], &[State::Requested, State::Inflight])
                .is_empty(),
            "{label}: a pending MDT clean is left"
        );
        let now = mdt_files(&inner).await;
        for (p, name) in &deleted {
            assert!(
                !now.get(p).is_some_and(|f| f.contains(name)),
                "{label}: {p}/{name} was not cleaned by the next write"
            );
        }
        points += 1;
        if !crashed {
            assert!(result.is_ok(), "{label}: {result:?}");
            break;
        }
        assert!(
            result.is_err(),
            "{label}: the clean reported success after a crash"
        );
    }
    eprintln!("{points} crash points, hudi-rs checked at {peer_states:?}");
    assert!(points > 3, "only {points} crash points");
    assert!(peer_states.len() >= 2, "{peer_states:?}");
}
