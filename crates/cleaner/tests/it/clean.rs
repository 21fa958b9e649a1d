//! Cleaning with the three policies, savepoints protecting their snapshot, pending compaction
//! inputs protected, dry runs, and the metadata table kept in step.

use arbor_cleaner::{
    clean, create_savepoint, delete_savepoint, list_savepoints, CleanOptions, CleanPolicy,
};
use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, InstantTime};

use arbor_testkit_tables::{create, rows, Model, TestTable};

fn options(policy: CleanPolicy) -> CleanOptions {
    CleanOptions {
        policy,
        ..CleanOptions::default()
    }
}

/// Five upserts of the same keys: every commit rewrites (COW) or appends to (MOR) the groups.
async fn history(t: &TestTable) -> (Vec<InstantTime>, Vec<Vec<arbor_testkit_tables::Row>>) {
    let mut model = Model::default();
    let mut instants = Vec::new();
    let mut snapshots = Vec::new();
    for v in 0..5i64 {
        let r = rows(0..8, v, &format!("v{v}-"));
        instants.push(t.write(WriteOperation::Upsert, &r).await);
        model.upsert(&r);
        snapshots.push(model.sorted());
    }
    (instants, snapshots)
}

#[tokio::test]
async fn test_clean_keep_latest_commits_keeps_retained_snapshots_and_deletes_the_rest() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, true).await;
        let (instants, snapshots) = history(&t).await;
        let before = t.data_files().await;
        let out = clean(&t.table, &options(CleanPolicy::KeepLatestCommits(2)))
            .await
            .unwrap();
        let after = t.data_files().await;
        if table_type == TableType::CopyOnWrite {
            assert!(out.deleted > 0, "{table_type:?}: nothing cleaned");
        }
        assert_eq!(before.len() - after.len(), out.deleted, "{table_type:?}");
        assert_eq!(out.earliest_retained.as_ref(), Some(&instants[3]));
        // The snapshots the policy keeps read exactly as before.
        for i in 3..5 {
            assert_eq!(t.read(Some(&instants[i])).await, snapshots[i], "as of {i}");
        }
        assert_eq!(t.read(None).await, snapshots[4]);
        t.assert_valid("after clean").await;
        t.assert_peer_agrees("cleaner peer check", "after clean")
            .await;
        // A second clean finds nothing.
        let again = clean(&t.table, &options(CleanPolicy::KeepLatestCommits(2)))
            .await
            .unwrap();
        assert_eq!(again.planned(), 0, "{table_type:?}: {:?}", again.plan);
        assert!(again.instant.is_none());
    }
}

#[tokio::test]
async fn test_clean_dry_run_changes_nothing_and_plans_what_the_clean_deletes() {
    let t = create(TableType::CopyOnWrite, true).await;
    history(&t).await;
    let before = t.listing().await;
    let dry = clean(
        &t.table,
        &CleanOptions {
            dry_run: true,
            ..options(CleanPolicy::KeepLatestCommits(1))
        },
    )
    .await
    .unwrap();
    assert_eq!(t.listing().await, before);
    assert!(dry.instant.is_none());
    assert!(dry.planned() > 0);
    let before_files = t.data_files().await;
    let real = clean(&t.table, &options(CleanPolicy::KeepLatestCommits(1)))
        .await
        .unwrap();
    assert_eq!(real.plan, dry.plan);
    let after_files = t.data_files().await;
    let gone: Vec<&String> = before_files
        .iter()
        .filter(|f| !after_files.contains(f))
        .collect();
    assert_eq!(gone.len(), dry.planned());
    for f in gone {
        let (p, name) = f.rsplit_once('/').unwrap();
        assert!(dry.plan[p].contains(name), "{f} deleted but not planned");
    }
}

#[tokio::test]
async fn test_clean_savepoint_protects_its_snapshot_until_deleted() {
    let t = create(TableType::CopyOnWrite, true).await;
    let (instants, snapshots) = history(&t).await;
    let sp = create_savepoint(&t.table, Some(&instants[1]), "keep v1")
        .await
        .unwrap();
    assert_eq!(sp.instant, instants[1]);
    assert!(sp.files > 0);
    let listed = list_savepoints(t.table.view_storage(), t.table.layout())
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].comment, "keep v1");
    // The metadata table got its side of the pair.
    assert!(t
        .listing()
        .await
        .iter()
        .any(|k| k.starts_with(".hoodie/metadata/.hoodie/timeline/")
            && k.ends_with(".savepoint")
            && k.contains(instants[1].as_str())));

    clean(&t.table, &options(CleanPolicy::KeepLatestCommits(1)))
        .await
        .unwrap();
    assert_eq!(t.read(Some(&instants[1])).await, snapshots[1]);
    assert_eq!(t.read(None).await, snapshots[4]);
    t.assert_valid("clean with savepoint").await;

    // Savepointing again, or an instant that is not a completed write, is refused.
    assert!(create_savepoint(&t.table, Some(&instants[1]), "")
        .await
        .is_err());
    assert!(
        create_savepoint(&t.table, Some(&"20000101000000000".parse().unwrap()), "")
            .await
            .is_err()
    );
    // A cleaned snapshot cannot be savepointed.
    let err = create_savepoint(&t.table, Some(&instants[2]), "")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("has been cleaned"), "{err}");

    delete_savepoint(&t.table, &instants[1]).await.unwrap();
    assert!(list_savepoints(t.table.view_storage(), t.table.layout())
        .await
        .unwrap()
        .is_empty());
    let out = clean(&t.table, &options(CleanPolicy::KeepLatestCommits(1)))
        .await
        .unwrap();
    assert!(out.deleted > 0);
    assert_eq!(t.read(None).await, snapshots[4]);
    t.assert_valid("clean after savepoint deletion").await;
    t.assert_peer_agrees("cleaner peer check", "clean after savepoint deletion")
        .await;
    assert!(delete_savepoint(&t.table, &instants[1]).await.is_err());
}

#[tokio::test]
async fn test_clean_keep_latest_file_versions_after_compaction_keeps_latest_slice() {
    let t = create(TableType::MergeOnRead, true).await;
    let (_instants, snapshots) = history(&t).await;
    let compactions = t.table.compact().await.unwrap();
    assert!(!compactions.is_empty());
    let out = clean(&t.table, &options(CleanPolicy::KeepLatestFileVersions(1)))
        .await
        .unwrap();
    assert!(out.deleted > 0);
    // Only the compacted base files are left.
    let left = t.data_files().await;
    assert!(left.iter().all(|f| f.ends_with(".parquet")), "{left:?}");
    assert_eq!(t.read(None).await, snapshots[4]);
    t.assert_valid("versions clean").await;
    t.assert_peer_agrees("cleaner peer check", "versions clean")
        .await;
}

#[tokio::test]
async fn test_clean_pending_compaction_inputs_are_protected() {
    let t = create(TableType::MergeOnRead, true).await;
    let (_instants, snapshots) = history(&t).await;
    let scheduled = arbor_table::write::compaction::schedule_compaction(
        t.table.view_storage(),
        t.table.layout(),
        t.table.generator(),
    )
    .await
    .unwrap()
    .unwrap();
    let before = t.data_files().await;
    let out = clean(&t.table, &options(CleanPolicy::KeepLatestFileVersions(1)))
        .await
        .unwrap();
    // Every slice is the input of the pending compaction: nothing may go.
    assert_eq!(out.deleted, 0, "{:?}", out.plan);
    assert_eq!(t.data_files().await, before);
    let done = arbor_table::write::compaction::run_compaction(
        t.table.view_storage(),
        t.table.layout(),
        &scheduled,
        t.table.generator(),
    )
    .await
    .unwrap();
    assert_eq!(done.action, Action::Commit);
    let out = clean(&t.table, &options(CleanPolicy::KeepLatestFileVersions(1)))
        .await
        .unwrap();
    assert!(out.deleted > 0);
    assert_eq!(t.read(None).await, snapshots[4]);
    t.assert_valid("after compaction and clean").await;
}

#[tokio::test]
async fn test_clean_replaced_groups_go_after_the_window_and_archival_follows() {
    let t = create(TableType::CopyOnWrite, true).await;
    let mut model = Model::default();
    let r = rows(0..8, 1, "a");
    t.write(WriteOperation::Insert, &r).await;
    let replaced = t.data_files().await;
    assert!(!replaced.is_empty());
    let r: Vec<_> = rows(100..104, 2, "o");
    t.write(WriteOperation::InsertOverwriteTable, &r).await;
    model.upsert(&r);
    // The replaced groups are needed while the window still sees the insert.
    let out = clean(&t.table, &options(CleanPolicy::KeepLatestCommits(2)))
        .await
        .unwrap();
    assert_eq!(out.deleted, 0);
    for v in 3..5 {
        let r = rows(100..104, v, "u");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
    }
    let out = clean(
        &t.table,
        &CleanOptions {
            archive: true,
            ..options(CleanPolicy::KeepLatestCommits(2))
        },
    )
    .await
    .unwrap();
    assert!(out.deleted > 0);
    let left = t.data_files().await;
    for f in &replaced {
        assert!(!left.contains(f), "replaced file {f} survived the window");
    }
    assert_eq!(t.read(None).await, model.sorted());
    t.assert_valid("after replaced groups cleaned").await;
    t.assert_peer_agrees("cleaner peer check", "after replaced groups cleaned")
        .await;
}

#[tokio::test]
async fn test_clean_keep_latest_by_hours_huge_window_keeps_all_zero_keeps_latest() {
    let t = create(TableType::CopyOnWrite, true).await;
    let (instants, snapshots) = history(&t).await;
    let out = clean(&t.table, &options(CleanPolicy::KeepLatestByHours(u64::MAX)))
        .await
        .unwrap();
    assert_eq!(out.planned(), 0, "{:?}", out.plan);
    for (i, instant) in instants.iter().enumerate() {
        assert_eq!(t.read(Some(instant)).await, snapshots[i]);
    }
    let out = clean(&t.table, &options(CleanPolicy::KeepLatestByHours(0)))
        .await
        .unwrap();
    assert!(out.deleted > 0);
    assert_eq!(t.read(None).await, snapshots[4]);
    t.assert_valid("hours clean").await;
}

#[tokio::test]
async fn test_time_travel_to_a_snapshot_a_clean_broke_is_refused_and_retained_ones_read() {
    let t = create(TableType::CopyOnWrite, true).await;
    let (instants, snapshots) = history(&t).await;
    for policy in [
        CleanPolicy::KeepLatestCommits(2),
        CleanPolicy::KeepLatestFileVersions(1),
    ] {
        clean(&t.table, &options(policy)).await.unwrap();
        let reader = arbor_table::read::TableReader::open(t.storage.clone())
            .await
            .unwrap();
        for (i, at) in instants.iter().enumerate() {
            match reader.snapshot(Some(at)).await {
                // A snapshot that still reads, reads exactly what it was.
                Ok(batches) => assert_eq!(
                    arbor_testkit_tables::rows_of(&batches),
                    snapshots[i],
                    "{policy:?}: as of {i}"
                ),
                Err(arbor_table::TableError::SnapshotNotRetained { instant, .. }) => {
                    assert_eq!(&instant, at.as_str());
                    assert!(i < 4, "{policy:?}: the latest snapshot refused");
                }
                Err(e) => panic!("{policy:?}: as of {i}: {e}"),
            }
        }
        // Before the clean, every snapshot read; after it, the older ones are refused, never
        // read short.
        let refused = reader.snapshot(Some(&instants[0])).await;
        assert!(refused.is_err(), "{policy:?}: the oldest snapshot read");
    }
}
