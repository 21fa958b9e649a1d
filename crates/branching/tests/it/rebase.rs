//! `arbor_branching::rebase`: a diverged branch moved onto main's head with its changes, then
//! published by strict fast-forward; conflicts refused or settled; up-to-date and dry runs
//! write nothing; the earlier history kept (and its tags readable) only when a tag would be
//! lost.

use std::collections::BTreeMap;

use arbor_branching::{
    create_branch, create_tag, list_branches, publish_and_drop, rebase, tag_reader, BranchSource,
    BranchingError, MergeOptions, MergeStrategy,
};
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, rows, rows_of, Row, TestTable};
use arbor_timeline::config::TableType;

/// Main `k0..k6`; then `dev` updates k1, inserts k7 and deletes k3, while main updates k4.
async fn diverged(table_type: TableType) -> TestTable {
    let t = create(table_type, true).await;
    t.write(WriteOperation::Upsert, &rows(0..6, 5, "a")).await;
    create_branch(&t.table, "dev", BranchSource::MainHead)
        .await
        .unwrap();
    let dev = t.branch("dev").await;
    let mut changed = rows(1..2, 6, "dev");
    changed.extend(rows(7..8, 6, "dev"));
    t.write_on(&dev, WriteOperation::Upsert, &changed).await;
    t.write_on(&dev, WriteOperation::Delete, &rows(3..4, 0, "x"))
        .await;
    t.write(WriteOperation::Upsert, &rows(4..5, 9, "main"))
        .await;
    t
}

/// Main's rows with the branch's changes of [`diverged`] applied.
fn expected(main: &[Row]) -> Vec<Row> {
    let mut by_key: BTreeMap<String, Row> = main.iter().map(|r| (r.0.clone(), r.clone())).collect();
    for r in rows(1..2, 6, "dev").into_iter().chain(rows(7..8, 6, "dev")) {
        by_key.insert(r.0.clone(), r);
    }
    by_key.remove("k0003");
    let mut out: Vec<Row> = by_key.into_values().collect();
    out.sort();
    out
}

async fn names(t: &TestTable) -> Vec<String> {
    list_branches(&t.storage)
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.info.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_rebase_carries_the_branch_onto_main_and_publishes_by_fast_forward() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = diverged(table_type).await;
        let main_rows = t.read(None).await;
        let want = expected(&main_rows);
        let dev = t.branch("dev").await;
        let err = publish_and_drop(&dev).await.unwrap_err().to_string();
        assert!(err.contains("arbor branch rebase"), "{err}");

        let out = rebase(&t.table, "dev", &MergeOptions::default())
            .await
            .unwrap();
        assert!(
            !out.up_to_date && !out.resumed && out.kept.is_none(),
            "{out:?}"
        );
        let changes = out.changes.as_ref().unwrap();
        assert_eq!(
            (changes.inserts, changes.updates, changes.deletes),
            (1, 1, 1),
            "{table_type:?}"
        );
        assert_eq!(
            t.read_branch(Some("dev"), None).await,
            want,
            "{table_type:?}"
        );
        assert_eq!(
            t.read(None).await,
            main_rows,
            "{table_type:?}: main unchanged"
        );
        // No tag would have been lost: no kept branch, no staging branch left.
        assert_eq!(names(&t).await, ["dev"]);
        let status = list_branches(&t.storage).await.unwrap();
        assert_eq!(
            status[0].info.base_instant.as_deref(),
            out.onto.as_ref().map(|o| o.as_str()),
        );
        t.assert_branch_valid("dev", "after rebase").await;
        t.assert_valid("after rebase").await;

        // A second rebase has nothing to do.
        let again = rebase(&t.table, "dev", &MergeOptions::default())
            .await
            .unwrap();
        assert!(again.up_to_date, "{again:?}");

        let dev = t.branch("dev").await;
        publish_and_drop(&dev).await.unwrap();
        assert_eq!(t.read(None).await, want, "{table_type:?}: published");
        t.assert_valid("after publication").await;
        t.assert_peer_agrees("rebase", "after publication").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_rebase_refuses_conflicts_writing_nothing_and_strategies_settle_them() {
    let t = diverged(TableType::CopyOnWrite).await;
    // Main changes k1 too, differently.
    t.write(WriteOperation::Upsert, &rows(1..2, 8, "main"))
        .await;
    let before = t.listing().await;
    let dev_rows = t.read_branch(Some("dev"), None).await;
    let err = rebase(&t.table, "dev", &MergeOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, BranchingError::MergeConflicts(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("rebase dev onto main refused") && text.contains("k0001"),
        "{text}"
    );
    assert_eq!(t.listing().await, before, "a refused rebase writes nothing");

    let dry = rebase(
        &t.table,
        "dev",
        &MergeOptions::new(MergeStrategy::Source).with_dry_run(true),
    )
    .await
    .unwrap();
    assert!(dry.dry_run && dry.changes.as_ref().unwrap().conflict_count == 1);
    assert_eq!(t.listing().await, before, "a dry run writes nothing");

    // `target`: main's k1 stays; the rest of dev's changes are carried.
    rebase(&t.table, "dev", &MergeOptions::new(MergeStrategy::Target))
        .await
        .unwrap();
    let dev = t.read_branch(Some("dev"), None).await;
    let k1 = dev.iter().find(|r| r.0 == "k0001").unwrap();
    assert_eq!(k1.3, "main1");
    assert!(dev.iter().any(|r| r.0 == "k0007"));
    assert!(!dev.iter().any(|r| r.0 == "k0003"));
    assert_ne!(dev, dev_rows);
    t.assert_branch_valid("dev", "after rebase").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_rebase_keeps_the_earlier_history_when_a_tag_would_be_lost() {
    let t = diverged(TableType::MergeOnRead).await;
    let dev = t.branch("dev").await;
    let dev_rows = t.read_branch(Some("dev"), None).await;
    create_tag(&dev, "reviewed", None, None).await.unwrap();
    let out = rebase(&t.table, "dev", &MergeOptions::default())
        .await
        .unwrap();
    assert_eq!(out.kept.as_deref(), Some("dev-pre-rebase"));
    assert_eq!(names(&t).await, ["dev", "dev-pre-rebase"]);
    // The old history reads through its tag, and as the kept branch.
    let (reader, _) = tag_reader(t.storage.clone(), Some("dev-pre-rebase"), "reviewed")
        .await
        .unwrap();
    assert_eq!(rows_of(&reader.snapshot(None).await.unwrap()), dev_rows);
    assert_eq!(t.read_branch(Some("dev-pre-rebase"), None).await, dev_rows);
    let want = expected(&t.read(None).await);
    assert_eq!(t.read_branch(Some("dev"), None).await, want);
    t.assert_branch_valid("dev-pre-rebase", "kept").await;
    // Nothing of the rebase blocks a fast-forward publication.
    publish_and_drop(&t.branch("dev").await).await.unwrap();
    assert_eq!(t.read(None).await, want);
    let main = arbor_branching::open_table(t.storage.clone(), None)
        .await
        .unwrap();
    arbor_branching::drop_branch(&main, "dev-pre-rebase")
        .await
        .unwrap();
    t.assert_valid("after dropping the kept branch").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_rebase_of_an_up_to_date_or_missing_branch() {
    let t = create(TableType::CopyOnWrite, true).await;
    t.write(WriteOperation::Upsert, &rows(0..4, 5, "a")).await;
    create_branch(&t.table, "dev", BranchSource::MainHead)
        .await
        .unwrap();
    let dev = t.branch("dev").await;
    t.write_on(&dev, WriteOperation::Upsert, &rows(5..6, 5, "b"))
        .await;
    let before = t.listing().await;
    let out = rebase(&t.table, "dev", &MergeOptions::default())
        .await
        .unwrap();
    assert!(out.up_to_date, "{out:?}");
    assert_eq!(t.listing().await, before);
    let err = rebase(&t.table, "nope", &MergeOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, BranchingError::BranchNotFound { .. }),
        "{err}"
    );
}
