//! The source's side of clones: `forget_pin` (refused while the clone lives, forced), `prune_pins`
//! (removes pins of removed clones, keeps live ones), and the rules every source operation
//! follows: a tag drop or a savepoint delete keeps a pinned savepoint, a pinned branch cannot
//! be dropped, a restore never rolls back a pinned instant, publication keeps main's pins.

use arbor_branching::clone::{forget_pin, list_pins, prune_pins, CloneAt};
use arbor_branching::{
    create_branch, create_tag, drop_branch, drop_tag, publish, BranchSource, BranchingError,
};
use arbor_cleaner::savepoint::{create_savepoint, delete_savepoint, list_savepoints};
use arbor_cleaner::{CleanOptions, CleanPolicy, CleanerError};
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, rows, TestTable};
use arbor_timeline::config::TableType;
use arbor_timeline::InstantTime;

use crate::clone_support::{clone_ok, loc, opener, read_at, write_at};

async fn savepoints(t: &TestTable) -> Vec<InstantTime> {
    let table = arbor_table::Table::open(t.storage.clone()).await.unwrap();
    list_savepoints(table.view_storage(), table.layout())
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.instant)
        .collect()
}

fn hard(policy: CleanPolicy) -> CleanOptions {
    CleanOptions {
        policy,
        dry_run: false,
        archive: true,
        extra_sources: Vec::new(),
    }
}

#[tokio::test]
async fn test_forget_refuses_a_live_clone_unless_forced_and_prune_removes_only_gone_clones() {
    let t = create(TableType::CopyOnWrite, true).await;
    let w1 = t.write(WriteOperation::Upsert, &rows(0..10, 1, "a")).await;
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
    );
    let ca = clone_ok(&t.base, &a, CloneAt::Main).await;
    let w2 = t.write(WriteOperation::Upsert, &rows(5..15, 2, "b")).await;
    let cb = clone_ok(&t.base, &b, CloneAt::Main).await;
    let cc = clone_ok(&t.base, &c, CloneAt::Main).await;
    assert_eq!(savepoints(&t).await, vec![w1.clone(), w2.clone()]);
    let source = loc(&t.base);

    // Alive: refused by id and by location; nothing changed.
    let err = forget_pin(&opener(), &source, &ca.id, false)
        .await
        .unwrap_err();
    assert!(matches!(err, BranchingError::CloneAlive { .. }), "{err}");
    assert!(err.to_string().contains("--force"), "{err}");
    let err = forget_pin(&opener(), &source, &loc(&a), false)
        .await
        .unwrap_err();
    assert!(matches!(err, BranchingError::CloneAlive { .. }), "{err}");
    let err = forget_pin(&opener(), &source, "no-such-clone", false)
        .await
        .unwrap_err();
    assert!(matches!(err, BranchingError::PinNotFound { .. }), "{err}");
    assert_eq!(list_pins(&opener(), &source).await.unwrap().len(), 3);

    // Forced: the pin goes, and with it the savepoint only it held.
    let gone = forget_pin(&opener(), &source, &loc(&a), true)
        .await
        .unwrap();
    assert_eq!(gone.clone_id, ca.id);
    assert_eq!(savepoints(&t).await, vec![w2.clone()]);

    // Prune: the removed clone's pin goes; the live one and its shared savepoint stay.
    std::fs::remove_dir_all(&b).unwrap();
    let out = prune_pins(&opener(), &source).await.unwrap();
    let removed: Vec<&str> = out.removed.iter().map(|p| p.clone_id.as_str()).collect();
    let kept: Vec<&str> = out.kept.iter().map(|p| p.clone_id.as_str()).collect();
    assert_eq!(removed, vec![cb.id.as_str()]);
    assert_eq!(kept, vec![cc.id.as_str()]);
    assert!(out.unreachable.is_empty());
    assert_eq!(savepoints(&t).await, vec![w2.clone()], "c still pins w2");
    // A location now holding another table (or nothing) no longer holds the clone: forget works
    // without force once the clone is gone.
    std::fs::remove_dir_all(&c).unwrap();
    forget_pin(&opener(), &source, &cc.id, false).await.unwrap();
    assert!(list_pins(&opener(), &source).await.unwrap().is_empty());
    assert!(savepoints(&t).await.is_empty());
}

#[tokio::test]
async fn test_tag_drop_and_savepoint_delete_keep_a_pinned_savepoint() {
    let t = create(TableType::MergeOnRead, true).await;
    t.write(WriteOperation::Upsert, &rows(0..10, 1, "a")).await;
    let w2 = t.write(WriteOperation::Upsert, &rows(5..15, 2, "b")).await;
    create_tag(&t.table, "v1", Some(&w2), None).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("c");
    let out = clone_ok(&t.base, &target, CloneAt::Tag("v1".into())).await;
    let expected = t.read(Some(&w2)).await;
    assert!(drop_tag(&t.table, "v1", false, false).await.unwrap());
    assert_eq!(savepoints(&t).await, vec![w2.clone()], "the pin holds it");
    let err = delete_savepoint(&t.table, &w2).await.unwrap_err();
    assert!(matches!(err, CleanerError::Refused { .. }), "{err}");
    assert!(err.to_string().contains(&out.id), "{err}");
    // Cleaned as hard as the policies allow, the clone still reads its snapshot.
    for i in 0..3 {
        t.write(WriteOperation::Upsert, &rows(0..15, 10 + i, "later"))
            .await;
    }
    arbor_branching::clean(&t.table, hard(CleanPolicy::KeepLatestCommits(1)))
        .await
        .unwrap();
    assert_eq!(read_at(&target, None).await, expected);
    // A tag on the pinned instant, dropped again: still held by the pin.
    create_tag(&t.table, "v2", Some(&w2), None).await.unwrap();
    drop_tag(&t.table, "v2", false, false).await.unwrap();
    assert_eq!(savepoints(&t).await, vec![w2.clone()]);
    // Once the pin is forgotten (forced: the clone is alive), the savepoint goes with it.
    forget_pin(&opener(), &loc(&t.base), &out.id, true)
        .await
        .unwrap();
    assert!(savepoints(&t).await.is_empty());
    delete_savepoint(&t.table, &w2).await.unwrap_err();
}

#[tokio::test]
async fn test_pinned_branch_cannot_be_dropped_and_restore_never_rolls_back_a_pin() {
    let t = create(TableType::CopyOnWrite, true).await;
    let w1 = t.write(WriteOperation::Upsert, &rows(0..10, 1, "a")).await;
    create_savepoint(&t.table, Some(&w1), "before")
        .await
        .unwrap();
    t.write(WriteOperation::Upsert, &rows(5..15, 2, "b")).await;
    create_branch(&t.table, "dev", BranchSource::MainHead)
        .await
        .unwrap();
    let dev = t.branch("dev").await;
    t.write_on(&dev, WriteOperation::Upsert, &rows(20..25, 3, "dev"))
        .await;
    let dir = tempfile::tempdir().unwrap();
    let (on_dev, on_main) = (dir.path().join("dev"), dir.path().join("main"));
    let cd = clone_ok(&t.base, &on_dev, CloneAt::Branch("dev".into())).await;
    let cm = clone_ok(&t.base, &on_main, CloneAt::Main).await;

    let err = drop_branch(&t.table, "dev").await.unwrap_err();
    assert!(matches!(err, BranchingError::PinHeld { .. }), "{err}");
    assert!(err.to_string().contains(&cd.id), "{err}");
    assert!(t.read_branch(Some("dev"), None).await.len() > 10);

    let main_before = t.read(None).await;
    let err = arbor_branching::restore(&t.table, &w1).await.unwrap_err();
    assert!(err.to_string().contains(&cm.id), "{err}");
    assert_eq!(t.read(None).await, main_before);

    // Once the clones are gone and pruned, both work.
    std::fs::remove_dir_all(&on_dev).unwrap();
    std::fs::remove_dir_all(&on_main).unwrap();
    let out = prune_pins(&opener(), &loc(&t.base)).await.unwrap();
    assert_eq!(out.removed.len(), 2);
    drop_branch(&t.table, "dev").await.unwrap();
    arbor_branching::restore(&t.table, &w1).await.unwrap();
    assert_eq!(t.read(None).await, t.read(Some(&w1)).await);
}

#[tokio::test]
async fn test_publication_keeps_the_savepoint_of_a_pin_on_main() {
    let t = create(TableType::CopyOnWrite, true).await;
    t.write(WriteOperation::Upsert, &rows(0..10, 1, "a")).await;
    let w2 = t.write(WriteOperation::Upsert, &rows(5..15, 2, "b")).await;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("c");
    let out = clone_ok(&t.base, &target, CloneAt::Main).await;
    let expected = t.read(None).await;
    create_branch(&t.table, "next", BranchSource::MainHead)
        .await
        .unwrap();
    let next = t.branch("next").await;
    // A branch from main does not inherit the pin-only savepoint.
    {
        let tl = arbor_timeline::ActiveTimeline::load(
            next.view_storage().clone(),
            next.layout().clone(),
        )
        .await
        .unwrap();
        assert!(tl.get(&w2, arbor_timeline::Action::Savepoint).is_none());
    }
    for i in 0..3 {
        t.write_on(&next, WriteOperation::Upsert, &rows(0..15, 10 + i, "n"))
            .await;
    }
    publish(&next).await.unwrap();
    // Main (now the publication) still holds the pinned savepoint, so a hard clean keeps the
    // clone reading.
    assert_eq!(savepoints(&t).await, vec![w2.clone()]);
    let main = arbor_table::Table::open(t.storage.clone()).await.unwrap();
    arbor_branching::clean(&main, hard(CleanPolicy::KeepLatestFileVersions(1)))
        .await
        .unwrap();
    assert_eq!(read_at(&target, None).await, expected);
    let pins = list_pins(&opener(), &loc(&t.base)).await.unwrap();
    assert_eq!(pins.len(), 1);
    assert_eq!(pins[0].clone_id, out.id);
    // The clone keeps working on its own.
    write_at(&target, WriteOperation::Upsert, &rows(90..92, 1, "c")).await;
    assert_eq!(read_at(&target, None).await.len(), expected.len() + 2);
}
