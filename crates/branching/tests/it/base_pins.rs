//! A working branch pins its base on main with a savepoint pair, so engines that know nothing
//! of branches (Java's `CALL run_clean`) keep the files the branch inherited. The pin is shared
//! with tags, clone pins and other branches at the same instant, released by the last holder,
//! never inherited by a later branch, and carried (then released) through a publication.

use arbor_branching::{
    create_branch, create_tag, drop_branch, drop_tag, publish, publish_and_drop, BranchSource,
};
use arbor_cleaner::savepoint::list_savepoints;
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, rows, TestTable};
use arbor_timeline::config::TableType;
use arbor_timeline::{resolve_main, InstantTime};

/// Main's completed savepoints (on its current root, publications included).
async fn main_savepoints(t: &TestTable) -> Vec<InstantTime> {
    let root = resolve_main(t.storage.as_ref()).await.unwrap();
    let view = root.view(t.storage.clone());
    list_savepoints(&view, t.table.layout())
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.instant)
        .collect()
}

async fn branch_savepoints(t: &TestTable, name: &str) -> Vec<InstantTime> {
    let b = t.branch(name).await;
    list_savepoints(b.view_storage(), b.layout())
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.instant)
        .collect()
}

#[tokio::test]
async fn test_branch_base_is_savepointed_on_main_until_its_last_holder_goes() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        t.write(WriteOperation::Upsert, &rows(0..20, 1, "a")).await;
        let c2 = t.write(WriteOperation::Upsert, &rows(0..5, 2, "b")).await;
        create_branch(&t.table, "dev", BranchSource::MainHead)
            .await
            .unwrap();
        assert_eq!(main_savepoints(&t).await, vec![c2.clone()], "{tt:?}");
        // The savepoint lists what the branch reads at its base.
        let sps = list_savepoints(t.table.view_storage(), t.table.layout())
            .await
            .unwrap();
        assert!(sps[0].files > 0, "{tt:?}");
        assert!(sps[0].comment.contains("dev"), "{tt:?}: {}", sps[0].comment);
        // The branch does not inherit its own pin.
        assert!(branch_savepoints(&t, "dev").await.is_empty(), "{tt:?}");
        // A user cannot delete it while the branch stands; the error names the branch.
        let err = arbor_cleaner::delete_savepoint(&t.table, &c2)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("branch dev"), "{tt:?}: {err}");

        // A second branch at the same base and a tag share the one pair.
        create_branch(&t.table, "qa", BranchSource::MainHead)
            .await
            .unwrap();
        assert!(branch_savepoints(&t, "qa").await.is_empty(), "{tt:?}");
        create_tag(&t.table, "v2", None, None).await.unwrap();
        drop_branch(&t.table, "dev").await.unwrap();
        assert_eq!(main_savepoints(&t).await, vec![c2.clone()], "{tt:?}");
        drop_tag(&t.table, "v2", false, false).await.unwrap();
        assert_eq!(
            main_savepoints(&t).await,
            vec![c2.clone()],
            "{tt:?}: qa still holds it"
        );
        drop_branch(&t.table, "qa").await.unwrap();
        assert!(main_savepoints(&t).await.is_empty(), "{tt:?}: released");
        t.assert_valid("after the last holder went").await;
    }
}

#[tokio::test]
async fn test_a_later_branch_does_not_inherit_an_earlier_branch_base_pin() {
    let t = create(TableType::CopyOnWrite, true).await;
    let c1 = t.write(WriteOperation::Upsert, &rows(0..10, 1, "a")).await;
    create_branch(&t.table, "first", BranchSource::MainHead)
        .await
        .unwrap();
    let c2 = t.write(WriteOperation::Upsert, &rows(0..3, 2, "b")).await;
    create_tag(&t.table, "t1", Some(&c1), None).await.unwrap();
    create_branch(&t.table, "second", BranchSource::MainHead)
        .await
        .unwrap();
    assert_eq!(main_savepoints(&t).await, vec![c1.clone(), c2.clone()]);
    // The tag's savepoint is inherited (the tag is); the first branch's pin alone would not be,
    // but the tag shares it.
    assert_eq!(branch_savepoints(&t, "second").await, vec![c1.clone()]);
    drop_tag(&t.table, "t1", false, false).await.unwrap();
    assert_eq!(main_savepoints(&t).await, vec![c1.clone(), c2.clone()]);
    drop_branch(&t.table, "first").await.unwrap();
    assert_eq!(main_savepoints(&t).await, vec![c2.clone()]);

    let t = create(TableType::CopyOnWrite, true).await;
    t.write(WriteOperation::Upsert, &rows(0..10, 1, "a")).await;
    create_branch(&t.table, "first", BranchSource::MainHead)
        .await
        .unwrap();
    t.write(WriteOperation::Upsert, &rows(0..3, 2, "b")).await;
    create_branch(&t.table, "second", BranchSource::MainHead)
        .await
        .unwrap();
    assert!(branch_savepoints(&t, "second").await.is_empty());
}

#[tokio::test]
async fn test_publication_carries_the_base_pin_and_the_drop_releases_it() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let c1 = t.write(WriteOperation::Upsert, &rows(0..10, 1, "a")).await;
        create_branch(&t.table, "wap", BranchSource::MainHead)
            .await
            .unwrap();
        let b = t.branch("wap").await;
        t.write_on(&b, WriteOperation::Upsert, &rows(0..4, 3, "c"))
            .await;
        publish(&b).await.unwrap();
        assert_eq!(
            main_savepoints(&t).await,
            vec![c1.clone()],
            "{tt:?}: the published main keeps the pin while the branch stands"
        );
        let main = t
            .table
            .reopen_at(resolve_main(t.storage.as_ref()).await.unwrap())
            .await
            .unwrap();
        drop_branch(&main, "wap").await.unwrap();
        assert!(main_savepoints(&t).await.is_empty(), "{tt:?}");

        create_branch(&main, "wap2", BranchSource::MainHead)
            .await
            .unwrap();
        let b = t.branch("wap2").await;
        t.write_on(&b, WriteOperation::Upsert, &rows(0..4, 4, "d"))
            .await;
        publish_and_drop(&b).await.unwrap();
        assert!(main_savepoints(&t).await.is_empty(), "{tt:?}");
        t.assert_valid("after the publications").await;
    }
}
