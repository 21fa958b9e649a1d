//! Crash sweep of a TTL run: the run is "crashed" before each of its storage operations in
//! turn (every operation counted, reads included). A restarted process (fresh handles over the
//! same directory) must open the table and read it exactly as before or exactly as after the
//! run (through the MDT and through a directory listing alike), the MDT must validate, and its
//! next TTL run must succeed and leave the table as after the run, with exactly one completed
//! DELETE_PARTITION replacecommit and nothing pending; hudi-rs agrees once per outcome.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use arbor_storage::{FaultInjectingStorage, FaultMode, InProcessLockProvider, Storage};
use arbor_table::read::TableReader;
use arbor_table::ttl::TtlRunOptions;
use arbor_table::{ListingSource, Table, WriteOperation, WriteOptions};
use arbor_testkit::crash::copy_dir;
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, InstantTime};

use super::mdt::{assert_mdt_instants_have_data_instants, assert_mdt_valid};
use super::ttl_support::{
    assert_peer_reads, create, event_time, local, rows, rows_of, utc, whole, Row, Shape,
};

async fn read_rows(storage: &Arc<dyn Storage>, source: ListingSource) -> Vec<Row> {
    let reader = TableReader::open_with(storage.clone(), source)
        .await
        .unwrap();
    rows_of(&reader.snapshot(None).await.unwrap())
}

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

fn replacecommits(tl: &arbor_timeline::ActiveTimeline, initial: &BTreeSet<InstantTime>) -> usize {
    tl.completed()
        .into_iter()
        .filter(|i| i.action == Action::ReplaceCommit && !initial.contains(&i.requested_time))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_ttl_run_crash_sweep_reads_before_or_after_and_recovers() {
    let shape = Shape {
        table_type: TableType::MergeOnRead,
        hive: true,
        levels: 2,
    };
    let mut template = create(shape).await;
    let mut all = Vec::new();
    for r in ["eu", "us"] {
        for d in ["2024-01-01", "2024-01-02", "2024-01-03"] {
            all.extend(rows(r, d, 2, 1));
        }
    }
    template.write(WriteOperation::Insert, &all).await;
    template
        .write(WriteOperation::Upsert, &rows("eu", "2024-01-01", 1, 2))
        .await;
    template
        .table
        .set_ttl_policy(event_time("1d", whole()))
        .await
        .unwrap();
    let options = TtlRunOptions {
        now: Some(utc("2024-01-02T12:00:00Z")),
        ..Default::default()
    };
    let before = template.expected();
    let mut after_model = template.model.clone();
    let doomed: BTreeSet<String> = ["region=eu/dt=2024-01-01", "region=us/dt=2024-01-01"]
        .into_iter()
        .map(String::from)
        .collect();
    after_model.retain(|_, r| r.2 != "2024-01-01");
    let after: Vec<Row> = after_model.values().cloned().collect();
    assert_ne!(before, after);
    let initial: BTreeSet<InstantTime> = template
        .timeline()
        .await
        .instants()
        .into_iter()
        .map(|i| i.requested_time)
        .collect();

    // The fault-free run counts the operations.
    let total_ops = {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        copy_dir(&template.base, &base);
        let faulty = Arc::new(FaultInjectingStorage::new(local(&base)));
        let table = Table::open(faulty.clone() as Arc<dyn Storage>)
            .await
            .unwrap()
            .with_lock_provider(Arc::new(InProcessLockProvider::new()));
        faulty.reset();
        let out = table.run_ttl(&options).await.unwrap();
        let got: BTreeSet<String> = out.plan.expired_partitions().into_iter().collect();
        assert_eq!(got, doomed);
        faulty.op_count()
    };

    let python = super::write_support::peer_python().is_some();
    let mut outcomes = std::collections::BTreeMap::<bool, usize>::new();
    let mut peer_checked = BTreeSet::new();
    let mut n = 0;
    loop {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        copy_dir(&template.base, &base);
        let faulty = Arc::new(FaultInjectingStorage::new(local(&base)));
        faulty.set_partial_batches(true);
        let crashing = Table::open(faulty.clone() as Arc<dyn Storage>)
            .await
            .unwrap()
            .with_lock_provider(Arc::new(InProcessLockProvider::new()));
        faulty.reset();
        faulty.set_mode(FaultMode::CrashAt(n));
        let result = crashing.run_ttl(&options).await;
        drop(crashing);
        let label = format!("TTL run: crash at operation {n}");
        if let Err(e) = &result {
            assert!(faulty.has_crashed(), "{label}: failed without a crash: {e}");
        }
        let fresh = local(&base);
        let got = read_rows(&fresh, ListingSource::MetadataTable).await;
        let is_after = if got == before {
            false
        } else if got == after {
            true
        } else {
            panic!("{label}: reads neither as before nor as after: {got:?}");
        };
        if result.is_ok() {
            assert!(is_after, "{label}: a reported run is lost");
        }
        assert_eq!(
            read_rows(&fresh, ListingSource::Storage).await,
            got,
            "{label}: listing through storage and through the MDT differ"
        );
        assert_mdt_valid(&fresh, &format!("{label} (crashed)")).await;
        assert_mdt_instants_have_data_instants(&fresh, &format!("{label} (crashed)")).await;
        let check_peer = python && peer_checked.insert(is_after);
        if check_peer {
            let reader = TableReader::open(fresh.clone()).await.unwrap();
            let batches = reader.snapshot(None).await.unwrap();
            assert_peer_reads(&base, &reader, &batches, &format!("{label} (crashed)"));
        }

        // The next run (a restarted process) completes what the crashed one did not.
        let next = recovering_table(&fresh).await;
        let retry = next
            .run_ttl(&options)
            .await
            .unwrap_or_else(|e| panic!("{label}: the next run failed: {e}"));
        assert_eq!(retry.commit.is_some(), !is_after, "{label}");
        assert_eq!(
            read_rows(&fresh, ListingSource::MetadataTable).await,
            after,
            "{label}"
        );
        assert_eq!(
            read_rows(&fresh, ListingSource::Storage).await,
            after,
            "{label}"
        );
        assert_mdt_valid(&fresh, &format!("{label} (next run)")).await;
        let reader = TableReader::open(fresh.clone()).await.unwrap();
        let tl =
            arbor_timeline::ActiveTimeline::load(fresh.clone(), reader.view().layout().clone())
                .await
                .unwrap();
        assert!(tl.pending().is_empty(), "{label}: {:?}", tl.pending());
        assert_eq!(replacecommits(&tl, &initial), 1, "{label}");
        if check_peer {
            let batches = reader.snapshot(None).await.unwrap();
            assert_peer_reads(&base, &reader, &batches, &format!("{label} (next run)"));
        }
        *outcomes.entry(is_after).or_default() += 1;
        if result.is_ok() && faulty.op_count() <= n {
            break;
        }
        n += 1;
        assert!(n < 10_000, "the run never finished");
    }
    assert_eq!(
        n, total_ops,
        "one crash before every operation of the fault-free run"
    );
    assert!(
        outcomes.get(&false).copied().unwrap_or(0) > 0
            && outcomes.get(&true).copied().unwrap_or(0) > 1,
        "both outcomes must occur: {outcomes:?}"
    );
    println!("TTL run: swept {n} crash points ({outcomes:?})");
}
