//! `arbor_table::doctor`: what `diagnose` reports and what `repair` fixes, one broken state at
//! a time: a shared clock far ahead (writes refused, then set back), a lost lock state
//! (rebuilt with a greater token), a commit whose instant file a crash left unwritten (rolled
//! forward) and a failed write without a live writer (rolled back).

use arbor_storage::{StorageExt, TABLE_LOCK_DIR};
use arbor_table::doctor::{diagnose, repair};
use arbor_table::{Table, TableError, WriteOperation};
use arbor_timeline::config::TableType;
use arbor_timeline::generator::SHARED_CLOCK_KEY;
use arbor_timeline::TimelineError;
use bytes::Bytes;

use super::write_support::*;

#[tokio::test]
async fn test_clock_far_ahead_refuses_writes_and_repair_sets_it_back() {
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    let healthy = diagnose(&t.table).await.unwrap();
    assert!(healthy.problems().is_empty(), "{:?}", healthy.problems());
    assert!(!healthy.clock.is_ahead());

    t.storage
        .put(SHARED_CLOCK_KEY, Bytes::from("20990101000000000"))
        .await
        .unwrap();
    let listing = t.listing().await;
    let err = t
        .table
        .write(WriteOperation::Upsert, vec![batch(&rows(0..4, 2, "b"))])
        .await
        .unwrap_err();
    let TableError::Timeline(te) = &err else {
        panic!("not a timeline error: {err:?}");
    };
    assert!(matches!(te, TimelineError::ClockAhead { .. }), "{err:?}");
    let text = err.to_string();
    for part in ["20990101", "ahead", "arbor doctor"] {
        assert!(text.contains(part), "{part}: {text}");
    }
    assert_eq!(
        t.listing().await,
        listing,
        "a refused write changed the table"
    );

    let sick = diagnose(&t.table).await.unwrap();
    assert!(sick.clock.is_ahead(), "{:?}", sick.clock);
    assert_eq!(
        sick.clock.shared_clock.as_deref(),
        Some("20990101000000000")
    );
    assert!(
        sick.problems().iter().any(|p| p.contains("clock")),
        "{:?}",
        sick.problems()
    );

    let fixed = repair(&t.table).await.unwrap();
    assert!(
        fixed
            .iter()
            .any(|f| f.contains("set the table's clock back")),
        "{fixed:?}"
    );
    let after = diagnose(&t.table).await.unwrap();
    assert!(after.problems().is_empty(), "{:?}", after.problems());

    let result = t
        .table
        .write(WriteOperation::Upsert, vec![batch(&rows(0..4, 2, "b"))])
        .await
        .unwrap();
    let year = &result.instant.as_str()[..4];
    assert_ne!(year, "2099", "the repaired clock still issued {result:?}");
    let mut m = Model::default();
    m.upsert(&rows(0..4, 2, "b"));
    assert_snapshot(&t, &m, "after the repaired clock").await;
}

#[tokio::test]
async fn test_repair_rebuilds_a_lost_lock_state_with_a_greater_token() {
    let t = create(TableType::MergeOnRead, Layout::Hive).await;
    t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    t.write(WriteOperation::Upsert, &rows(0..2, 2, "b")).await;
    let before = diagnose(&t.table).await.unwrap();
    assert_eq!(before.lock.state, "free", "{:?}", before.lock);
    let token_before = before.lock.token.unwrap();

    let state = format!("{TABLE_LOCK_DIR}/table_lock.json");
    t.storage.delete(&state).await.unwrap();
    let lost = diagnose(&t.table).await.unwrap();
    assert_eq!(lost.lock.state, "missing");
    assert!(
        lost.problems().iter().any(|p| p.contains("lock")),
        "{:?}",
        lost.problems()
    );
    let fixed = repair(&t.table).await.unwrap();
    assert!(fixed.iter().any(|f| f.contains("rebuilt")), "{fixed:?}");
    let after = diagnose(&t.table).await.unwrap();
    assert_eq!(after.lock.state, "free", "{:?}", after.lock);
    assert!(
        after.lock.token.unwrap() > token_before,
        "token went from {token_before} to {:?}",
        after.lock.token
    );
    assert!(after.problems().is_empty(), "{:?}", after.problems());

    // Garbage in the state: reported as corrupt, rebuilt the same way.
    t.storage
        .put(&state, Bytes::from_static(b"{not json"))
        .await
        .unwrap();
    assert_eq!(diagnose(&t.table).await.unwrap().lock.state, "corrupt");
    repair(&t.table).await.unwrap();
    let rebuilt = diagnose(&t.table).await.unwrap();
    assert!(rebuilt.lock.token.unwrap() > after.lock.token.unwrap());
    t.write(WriteOperation::Upsert, &rows(2..4, 3, "c")).await;
}

#[tokio::test]
async fn test_repair_rolls_forward_a_commit_whose_instant_file_is_missing() {
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    let second = t.write(WriteOperation::Upsert, &rows(0..4, 2, "b")).await;
    let record = diagnose(&t.table).await.unwrap().commit.unwrap();
    assert!(record.complete);
    assert!(
        record.target.contains(second.instant.as_str()),
        "{record:?} against {second:?}"
    );
    // What a crash between the commit record's swap and the instant file leaves.
    t.storage.delete(&record.target).await.unwrap();
    let sick = diagnose(&t.table).await.unwrap();
    assert!(!sick.commit.as_ref().unwrap().complete);
    assert!(
        sick.problems().iter().any(|p| p.contains("roll")),
        "{:?}",
        sick.problems()
    );
    let fixed = repair(&t.table).await.unwrap();
    assert!(
        fixed.iter().any(|f| f.contains("rolled forward")),
        "{fixed:?}"
    );
    assert!(t.storage.exists(&record.target).await.unwrap());
    assert!(diagnose(&t.table).await.unwrap().problems().is_empty());
    let mut m = Model::default();
    m.upsert(&rows(0..4, 2, "b"));
    assert_snapshot(&t, &m, "after the roll forward").await;
}

#[tokio::test]
async fn test_repair_rolls_back_a_failed_write_without_a_live_writer() {
    let t = create(TableType::MergeOnRead, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    let other = Table::open(t.storage.clone()).await.unwrap();
    let prepared = other
        .prepare(WriteOperation::Upsert, vec![batch(&rows(0..4, 9, "z"))])
        .await
        .unwrap();
    drop(prepared);
    drop(other);
    let d = diagnose(&t.table).await.unwrap();
    assert_eq!(d.pending.len(), 1, "{:?}", d.pending);
    let instant = d.pending[0].instant.clone();
    // Its writer is gone: no heartbeat (as after a crash once the beat has expired).
    t.storage
        .delete(&arbor_timeline::layout::paths::heartbeat_key(
            &arbor_timeline::InstantTime::parse(&instant).unwrap(),
        ))
        .await
        .unwrap();
    let sick = diagnose(&t.table).await.unwrap();
    assert!(sick.pending[0].orphaned, "{:?}", sick.pending);
    assert!(
        sick.problems().iter().any(|p| p.contains(&instant)),
        "{:?}",
        sick.problems()
    );
    let fixed = repair(&t.table).await.unwrap();
    assert!(
        fixed
            .iter()
            .any(|f| f.contains("rolled back") && f.contains(&instant)),
        "{fixed:?}"
    );
    let after = diagnose(&t.table).await.unwrap();
    assert!(after.pending.is_empty(), "{:?}", after.pending);
    let mut m = Model::default();
    m.upsert(&rows(0..4, 1, "a"));
    assert_snapshot(&t, &m, "after the roll back").await;
}

/// Java's writers (`HoodieHeartbeatClient`) beat by re-creating an EMPTY heartbeat file and are
/// alive while its modification time is within 2 x 60 s. A pending write of a live Java writer
/// must neither be rolled back by arbor's next write nor reported orphaned; once its file is
/// older than Java's window it is a failed write like any other.
#[tokio::test]
async fn test_a_java_writer_beating_with_an_empty_heartbeat_file_is_alive_until_its_window() {
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    let other = Table::open(t.storage.clone()).await.unwrap();
    let prepared = other
        .prepare(WriteOperation::Upsert, vec![batch(&rows(0..4, 9, "z"))])
        .await
        .unwrap();
    drop(prepared);
    drop(other);
    let d = diagnose(&t.table).await.unwrap();
    let instant = d.pending[0].instant.clone();
    let key = arbor_timeline::layout::paths::heartbeat_key(
        &arbor_timeline::InstantTime::parse(&instant).unwrap(),
    );
    // Java's beat: an empty file, written now.
    t.storage.delete(&key).await.unwrap();
    t.storage.put(&key, Bytes::new()).await.unwrap();
    let d = diagnose(&t.table).await.unwrap();
    assert!(!d.pending[0].orphaned, "{:?}", d.pending);
    assert!(d.pending[0].heartbeat_age_s.is_some_and(|a| a < 60));
    // arbor's next write (default 60 s timeout) leaves the live Java write alone.
    t.write(WriteOperation::Upsert, &rows(0..2, 3, "c")).await;
    let d = diagnose(&t.table).await.unwrap();
    assert_eq!(d.pending.len(), 1, "the live Java write was rolled back");
    // 100 s later (past arbor's 60 s, within Java's 120 s) it is still alive.
    let path = t.base.join(&key);
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(100))
        .unwrap();
    t.write(WriteOperation::Upsert, &rows(0..2, 4, "d")).await;
    assert_eq!(diagnose(&t.table).await.unwrap().pending.len(), 1);
    // 200 s old: Java's own rule says its writer is dead; arbor rolls it back.
    file.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(200))
        .unwrap();
    let d = diagnose(&t.table).await.unwrap();
    assert!(d.pending[0].orphaned, "{:?}", d.pending);
    t.write(WriteOperation::Upsert, &rows(0..2, 5, "e")).await;
    assert!(diagnose(&t.table).await.unwrap().pending.is_empty());
}
