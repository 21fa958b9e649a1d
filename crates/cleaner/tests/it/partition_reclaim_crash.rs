//! Crash sweep of the clean that removes a deleted partition: the clean after
//! `delete_partitions` is "crashed" before each of its storage operations in turn
//! ([`FaultMode::CrashAt`], reads included; a batch delete hit by the crash deletes half of its
//! keys first). After each crash a restarted process must read the model's rows (arbor; hudi-rs
//! on every distinct state a pending clean left, where the partition's marker may be gone while
//! the metadata table still lists it), find the metadata table in step with storage, and its
//! next clean must finish the removal: the state of the fault-free run (no file, marker or
//! directory of the partition, not listed, `isPartitionDeleted` recorded, nothing pending).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arbor_cleaner::clean;
use arbor_storage::{
    FaultInjectingStorage, FaultMode, InProcessLockProvider, ObjectStoreStorage, Storage,
};
use arbor_table::{Table, WriteOptions};
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, ActiveTimeline, State};

use arbor_testkit::crash::{copy_dir, fingerprint};
use arbor_testkit_tables::{Model, TestTable};

use crate::partition_reclaim::{
    create_table, dir_files, fill, keep, listed_partitions, without, Layout,
};

fn local(base: &Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

async fn table_over(storage: Arc<dyn Storage>) -> Table {
    Table::open(storage)
        .await
        .unwrap()
        .with_lock_provider(Arc::new(InProcessLockProvider::new()))
        .with_write_options(WriteOptions {
            heartbeat_timeout: Duration::ZERO,
            ..WriteOptions::default()
        })
}

async fn copy_of(template: &TestTable) -> TestTable {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    copy_dir(&template.base, &base);
    let storage = local(&base);
    let table = table_over(storage.clone()).await;
    TestTable {
        _tmp: tmp,
        base,
        storage,
        table,
    }
}

/// Pending instants of the data timeline and of the metadata table's.
async fn pending(t: &TestTable) -> Vec<String> {
    let tl = ActiveTimeline::load(t.storage.clone(), t.table.layout().clone())
        .await
        .unwrap();
    let mut out: Vec<String> = tl.pending().iter().map(|i| format!("data {i}")).collect();
    let mdt = arbor_mdt::MetadataTable::open(t.storage.clone())
        .await
        .unwrap();
    if let Some(m) = mdt {
        out.extend(
            m.view()
                .history()
                .active()
                .pending()
                .iter()
                .map(|i| format!("metadata table {i}")),
        );
    }
    out
}

async fn pending_clean(t: &TestTable) -> bool {
    let tl = ActiveTimeline::load(t.storage.clone(), t.table.layout().clone())
        .await
        .unwrap();
    !tl.filter(&[Action::Clean], &[State::Requested, State::Inflight])
        .is_empty()
}

/// Rows, metadata table.
async fn check(t: &TestTable, model: &Model, label: &str) {
    assert_eq!(t.read(None).await, model.sorted(), "{label}: arbor rows");
    let report = arbor_mdt::validate::validate_table(t.storage.clone())
        .await
        .unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "{label}: {:?}",
        report.discrepancies
    );
}

/// The removal's final state: no trace of `partition`, nothing pending.
async fn check_removed(t: &TestTable, partition: &str, model: &Model, label: &str) {
    check(t, model, label).await;
    assert!(
        dir_files(&t.base, partition).is_empty() && !t.base.join(partition).exists(),
        "{label}: {:?}",
        dir_files(&t.base, partition)
    );
    let listed = listed_partitions(&t.storage).await;
    assert!(
        !listed.iter().any(|p| p == partition),
        "{label}: still listed {listed:?}"
    );
    let left = pending(t).await;
    assert!(left.is_empty(), "{label}: pending {left:?}");
}

async fn sweep(layout: Layout) {
    let started = std::time::Instant::now();
    let label = format!("{layout:?}");
    let template = create_table(layout).await;
    let model = fill(&template).await;
    let eu = layout.partition("eu");
    template
        .table
        .delete_partitions(std::slice::from_ref(&eu))
        .await
        .unwrap();
    let after = without(&model, "eu");
    check(&template, &after, &format!("{label}: setup")).await;

    // The fault-free run: its number of storage operations.
    let total_ops = {
        let t = copy_of(&template).await;
        let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
        let table = table_over(faulty.clone() as Arc<dyn Storage>).await;
        faulty.reset();
        let out = clean(&table, &keep(1)).await.unwrap();
        assert_eq!(
            out.partitions_deleted.iter().cloned().collect::<Vec<_>>(),
            vec![eu.clone()],
            "{label}: fault-free run"
        );
        let ops = faulty.op_count();
        check_removed(&t, &eu, &after, &format!("{label}: fault-free run")).await;
        t.assert_peer_agrees(
            "partition reclaim crash peer check",
            &format!("{label}: fault-free"),
        )
        .await;
        ops
    };

    let mut checked: HashSet<u64> = HashSet::new();
    let mut peer_checked = 0usize;
    let mut markers_gone_pending = 0usize;
    let mut n = 0usize;
    loop {
        let t = copy_of(&template).await;
        let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
        faulty.set_partial_batches(true);
        let crashing = table_over(faulty.clone() as Arc<dyn Storage>).await;
        faulty.reset();
        faulty.set_mode(FaultMode::CrashAt(n));
        let result = clean(&crashing, &keep(1)).await;
        drop(crashing);
        let at = format!("{label}: crash at operation {n}");
        if let Err(e) = &result {
            assert!(faulty.has_crashed(), "{at}: failed without a crash: {e}");
        }
        let done = result.is_ok() && faulty.op_count() <= n;
        if done || checked.insert(fingerprint(&t.base)) {
            let fresh = local(&t.base);
            let restarted = TestTable {
                table: table_over(fresh.clone()).await,
                storage: fresh,
                base: t.base.clone(),
                _tmp: t._tmp,
            };
            check(&restarted, &after, &format!("{at} (crashed)")).await;
            if pending_clean(&restarted).await {
                let marker = restarted.base.join(&eu).join(".hoodie_partition_metadata");
                if !marker.exists() {
                    markers_gone_pending += 1;
                }
                restarted
                    .assert_peer_agrees("partition reclaim crash peer check", &at)
                    .await;
                peer_checked += 1;
            }
            if faulty.has_crashed() {
                let next = clean(&restarted.table, &keep(1))
                    .await
                    .unwrap_or_else(|e| panic!("{at}: the next clean failed: {e}"));
                let removed_now = next.partitions_deleted.contains(&eu);
                assert!(
                    removed_now || !listed_partitions(&restarted.storage).await.contains(&eu),
                    "{at}: the next clean did not remove {eu}: {next:?}"
                );
            }
            check_removed(&restarted, &eu, &after, &format!("{at} (next clean)")).await;
        }
        if done {
            break;
        }
        n += 1;
        assert!(n < 10_000, "{label}: the clean never finished");
    }
    assert_eq!(
        n, total_ops,
        "{label}: the sweep must crash once before every operation of the fault-free run"
    );
    assert!(
        markers_gone_pending > 0,
        "{label}: no crash point left a pending clean with the marker gone"
    );
    println!(
        "{label}: swept {n} crash points ({} distinct states, {peer_checked} read by hudi-rs, \
         {markers_gone_pending} with the marker gone and the clean pending) in {:.1?}",
        checked.len(),
        started.elapsed()
    );
}

#[tokio::test]
async fn test_reclaim_crash_sweep_cow_hive_one_level_reads_the_same_and_next_clean_removes() {
    sweep(Layout {
        table_type: TableType::CopyOnWrite,
        hive: true,
        two_level: false,
        metadata_table: true,
    })
    .await;
}

#[tokio::test]
async fn test_reclaim_crash_sweep_mor_plain_two_level_reads_the_same_and_next_clean_removes() {
    sweep(Layout {
        table_type: TableType::MergeOnRead,
        hive: false,
        two_level: true,
        metadata_table: true,
    })
    .await;
}
