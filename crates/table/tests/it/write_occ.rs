//! Optimistic concurrency: two handles on one table prepare writes concurrently; disjoint file
//! groups both commit, overlapping ones make the later commit fail with `CommitConflict`
//! (merge-on-read: only when their keys overlap too; `contention.rs`).
//!
//! The tests named `..._rolls_back_...` need rollback (`write/rollback.rs`) to be implemented.

use arbor_table::{Table, TableError, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;

use super::write_support::*;

async fn two_handles(table_type: TableType) -> (TestTable, Table) {
    let t = create(table_type, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..8, 1, "a")).await;
    let other = Table::open(t.storage.clone()).await.unwrap();
    (t, other)
}

#[tokio::test]
async fn test_commit_disjoint_file_groups_both_commit() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let (t, other) = two_handles(table_type).await;
        let us: Vec<Row> = rows(0..8, 2, "us")
            .into_iter()
            .filter(|r| r.1 == "us")
            .collect();
        let eu: Vec<Row> = rows(0..8, 2, "eu")
            .into_iter()
            .filter(|r| r.1 == "eu")
            .collect();
        let p1 = t
            .table
            .prepare(WriteOperation::Upsert, vec![batch(&us)])
            .await
            .unwrap();
        let p2 = other
            .prepare(WriteOperation::Upsert, vec![batch(&eu)])
            .await
            .unwrap();
        assert!(p1.file_groups().is_disjoint(p2.file_groups()));
        let c1 = t.table.commit(p1).await.unwrap();
        let c2 = other.commit(p2).await.unwrap();
        assert!(c2.completion_time > c1.completion_time);
        let mut m = Model::default();
        m.upsert(&rows(0..8, 1, "a"));
        m.upsert(&us);
        m.upsert(&eu);
        assert_snapshot(&t, &m, "two disjoint commits").await;
        assert_peer_agrees(&t, &[Query::Snapshot], "two disjoint commits").await;
    }
}

#[tokio::test]
async fn test_commit_overlapping_file_groups_later_fails_with_conflict() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let (t, other) = two_handles(table_type).await;
        let a = rows(0..1, 2, "first");
        // Copy-on-write: another key of the same file group conflicts. Merge-on-read: log
        // appends of disjoint keys do not (docs/concurrency.md), so the second writer updates
        // the same key.
        let b = match table_type {
            TableType::CopyOnWrite => rows(2..3, 2, "second"),
            TableType::MergeOnRead => rows(0..1, 3, "second"),
        };
        let p1 = t
            .table
            .prepare(WriteOperation::Upsert, vec![batch(&a)])
            .await
            .unwrap();
        let p2 = other
            .prepare(WriteOperation::Upsert, vec![batch(&b)])
            .await
            .unwrap();
        let shared: Vec<_> = p1
            .file_groups()
            .intersection(p2.file_groups())
            .cloned()
            .collect();
        assert_eq!(shared.len(), 1);
        let c1 = t.table.commit(p1).await.unwrap();
        let loser = p2.instant().to_string();
        match other.commit(p2).await.unwrap_err() {
            TableError::CommitConflict {
                instant,
                other,
                file_groups,
                ..
            } => {
                assert_eq!(instant, loser);
                assert_eq!(other, c1.instant.to_string());
                assert!(file_groups.contains(&shared[0].1), "{file_groups}");
            }
            e => panic!("expected CommitConflict, got {e:?}"),
        }
        let mut m = Model::default();
        m.upsert(&rows(0..8, 1, "a"));
        m.upsert(&a);
        assert_snapshot(&t, &m, "conflict").await;
        assert!(t
            .completed()
            .await
            .iter()
            .all(|i| i.requested_time.to_string() != loser));
    }
}

/// Needs rollback (W2): the loser's files and instant are removed.
#[tokio::test]
async fn test_commit_overlapping_conflict_rolls_back_loser_files() {
    let (t, other) = two_handles(TableType::CopyOnWrite).await;
    let p1 = t
        .table
        .prepare(WriteOperation::Upsert, vec![batch(&rows(0..1, 2, "x"))])
        .await
        .unwrap();
    let p2 = other
        .prepare(WriteOperation::Upsert, vec![batch(&rows(2..3, 2, "y"))])
        .await
        .unwrap();
    let loser = p2.instant().to_string();
    t.table.commit(p1).await.unwrap();
    assert!(matches!(
        other.commit(p2).await,
        Err(TableError::CommitConflict { .. })
    ));
    let left: Vec<String> = t
        .listing()
        .await
        .into_iter()
        .filter(|k| k.contains(&loser) && !k.contains(".rollback"))
        .collect();
    let timeline_left: Vec<_> = t
        .timeline()
        .await
        .instants()
        .into_iter()
        .filter(|i| i.requested_time.to_string() == loser)
        .collect();
    assert!(
        left.is_empty() && timeline_left.is_empty(),
        "left behind: {left:?} {timeline_left:?}"
    );
}

/// Needs rollback (W2): an abandoned prepared write is rolled back by the next writer once its
/// heartbeat lapsed (here: a zero heartbeat timeout).
#[tokio::test]
async fn test_write_after_abandoned_prepare_rolls_it_back() {
    let (t, _) = two_handles(TableType::MergeOnRead).await;
    let p = t
        .table
        .prepare(WriteOperation::Upsert, vec![batch(&rows(0..2, 3, "lost"))])
        .await
        .unwrap();
    let abandoned = p.instant().to_string();
    drop(p);
    let next = t.table.clone().with_write_options(WriteOptions {
        heartbeat_timeout: std::time::Duration::ZERO,
        ..WriteOptions::default()
    });
    next.write(WriteOperation::Upsert, vec![batch(&rows(4..5, 3, "next"))])
        .await
        .unwrap();
    let left: Vec<String> = t
        .listing()
        .await
        .into_iter()
        .filter(|k| k.contains(&abandoned) && !k.contains(".rollback"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let mut m = Model::default();
    m.upsert(&rows(0..8, 1, "a"));
    m.upsert(&rows(4..5, 3, "next"));
    assert_snapshot(&t, &m, "after rollback").await;
}

#[tokio::test]
async fn test_prepare_keeps_other_writers_live_pending_instant() {
    let (t, other) = two_handles(TableType::CopyOnWrite).await;
    let p1 = t
        .table
        .prepare(WriteOperation::Upsert, vec![batch(&rows(0..1, 2, "x"))])
        .await
        .unwrap();
    // The other writer starts while p1 is pending with a live heartbeat: p1 is not rolled back.
    other
        .write(WriteOperation::Upsert, vec![batch(&rows(1..2, 2, "y"))])
        .await
        .unwrap();
    t.table.commit(p1).await.unwrap();
    let mut m = Model::default();
    m.upsert(&rows(0..8, 1, "a"));
    m.upsert(&rows(0..1, 2, "x"));
    m.upsert(&rows(1..2, 2, "y"));
    assert_snapshot(&t, &m, "both").await;
}
