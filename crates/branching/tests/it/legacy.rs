//! Readers and writers that know nothing of branches, after publications: they follow the root
//! `hoodie.properties` files, which lead them to main (`arbor_timeline::legacy`).

use arbor_branching::{create_branch, publish, BranchSource};
use arbor_storage::StorageExt;
use arbor_table::{Table, WriteOperation};
use arbor_timeline::config::TableType;
use arbor_timeline::{MetaRoot, TableConfig, TableLayout};

use arbor_testkit_tables::{create, rows, Model, TestTable};

/// Main with one upsert, branch `audit` with an upsert and a delete, published as p1. Returns
/// main's model after the publication.
async fn published(t: &TestTable) -> Model {
    let mut model = Model::default();
    let r = rows(0..12, 1, "a");
    t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    create_branch(&t.table, "audit", BranchSource::MainHead)
        .await
        .unwrap();
    let b = t.branch("audit").await;
    let r = rows(6..18, 2, "b");
    t.write_on(&b, WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    let d = rows(0..2, 3, "");
    t.write_on(&b, WriteOperation::Delete, &d).await;
    model.delete(&d);
    let out = publish(&b).await.unwrap();
    assert_eq!(out.publication, 1);
    assert!(out.legacy_root);
    model
}

/// The instant files of the root's own (pre-publication) data timeline.
async fn root_own_timeline(t: &TestTable) -> Vec<String> {
    t.storage
        .list_all(".hoodie/timeline")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect()
}

#[tokio::test]
async fn test_writer_at_the_root_after_publication_writes_into_main_seen_by_arbor_and_hudi_rs() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let mut model = published(&t).await;
        assert_eq!(t.read(None).await, model.sorted(), "{tt:?}");
        t.assert_peer_agrees("branching peer check", "hudi-rs at the table path after p1")
            .await;
        let own = root_own_timeline(&t).await;

        // A branch-unaware writer: opens the root metadata (`.hoodie/hoodie.properties`) and
        // follows its `hoodie.timeline.path`, as Java and hudi-rs do.
        let legacy = Table::open_at(t.storage.clone(), MetaRoot::Root)
            .await
            .unwrap();
        assert_eq!(
            legacy.layout().timeline_dir,
            ".hoodie/branches/publications/p1/timeline"
        );
        let r = rows(30..36, 4, "legacy");
        let c = t.write_on(&legacy, WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        // The write is main's: arbor's main reads it, hudi-rs at the table path too, and the
        // root's replaced timeline did not change.
        assert_eq!(t.read(None).await, model.sorted(), "{tt:?}");
        let main = Table::open(t.storage.clone()).await.unwrap();
        assert_eq!(main.root(), &MetaRoot::Publication(1));
        let tl = arbor_timeline::ActiveTimeline::load(
            main.view_storage().clone(),
            main.layout().clone(),
        )
        .await
        .unwrap();
        assert!(tl.completed_writes().iter().any(|i| i.requested_time == c));
        assert_eq!(root_own_timeline(&t).await, own, "{tt:?}");
        t.assert_valid("after the legacy write").await;
        let report = arbor_branching::validate(&t.storage, None).await.unwrap();
        assert!(
            report.discrepancies.is_empty(),
            "{:?}",
            report.discrepancies
        );
        t.assert_peer_agrees("branching peer check", "hudi-rs after the legacy write")
            .await;

        // arbor's main keeps writing; both see it.
        let r = rows(40..44, 5, "main");
        t.write_on(&main, WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        assert_eq!(t.read(None).await, model.sorted(), "{tt:?}");
        t.assert_peer_agrees("branching peer check", "hudi-rs after arbor's next write")
            .await;
    }
}

#[tokio::test]
async fn test_main_property_changes_after_publication_are_mirrored_to_the_root() {
    let t = create(TableType::CopyOnWrite, true).await;
    let model = published(&t).await;
    let main = Table::open(t.storage.clone()).await.unwrap();
    main.create_record_index().await.unwrap();
    let p1 = TableConfig::load(
        t.storage.as_ref(),
        &MetaRoot::Publication(1).data_meta_dir(),
    )
    .await
    .unwrap();
    assert!(p1
        .metadata_partitions()
        .contains(&"record_index".to_string()));
    let root = TableConfig::load(t.storage.as_ref(), ".hoodie")
        .await
        .unwrap();
    assert_eq!(root.metadata_partitions(), p1.metadata_partitions());
    assert_eq!(root.timeline_path(), "branches/publications/p1/timeline");
    assert_eq!(t.read(None).await, model.sorted());
    t.assert_peer_agrees("branching peer check", "hudi-rs after the record index")
        .await;
}

/// A publication interrupted between `_SUCCESS` and the root repoint (simulated by putting the
/// pre-publication root files back): the next state change of main finishes the repoint, so
/// legacy readers see main's writes from then on.
#[tokio::test]
async fn test_interrupted_repoint_is_finished_by_the_next_write_to_main() {
    let t = create(TableType::MergeOnRead, true).await;
    let data = ".hoodie/hoodie.properties";
    let mdt = ".hoodie/metadata/.hoodie/hoodie.properties";
    // The root files as they were before the publication (one write on main first: the
    // publication's own first upsert then supersedes and deletes that row).
    t.write(WriteOperation::Upsert, &rows(0..1, 0, "z")).await;
    let (old_data, _) = t.storage.get(data).await.unwrap();
    let (old_mdt, _) = t.storage.get(mdt).await.unwrap();
    let mut model = published(&t).await;
    t.storage.put(data, old_data).await.unwrap();
    t.storage.put(mdt, old_mdt).await.unwrap();
    let root = TableConfig::load(t.storage.as_ref(), ".hoodie")
        .await
        .unwrap();
    assert_eq!(
        TableLayout::from_config(".hoodie", &root)
            .unwrap()
            .timeline_dir,
        ".hoodie/timeline"
    );
    let main = Table::open(t.storage.clone()).await.unwrap();
    let r = rows(50..53, 9, "after");
    t.write_on(&main, WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    for dir in [".hoodie", ".hoodie/metadata/.hoodie"] {
        let c = TableConfig::load(t.storage.as_ref(), dir).await.unwrap();
        assert_eq!(
            c.timeline_path(),
            "branches/publications/p1/timeline",
            "{dir}"
        );
    }
    assert_eq!(t.read(None).await, model.sorted());
    t.assert_peer_agrees(
        "branching peer check",
        "hudi-rs after the repoint was finished",
    )
    .await;
}

/// A branch-unaware writer's write in flight while arbor writes main: heartbeats are shared by
/// every root, so arbor's main sees the legacy writer's heartbeat and does not roll its write
/// back as failed; both writes land in main.
#[tokio::test]
async fn test_legacy_writer_in_flight_survives_a_concurrent_arbor_write_to_main() {
    let t = create(TableType::CopyOnWrite, true).await;
    let mut model = published(&t).await;
    let legacy = Table::open_at(t.storage.clone(), MetaRoot::Root)
        .await
        .unwrap();
    let r = rows(60..63, 7, "legacy");
    let prepared = legacy
        .prepare(
            WriteOperation::Upsert,
            vec![arbor_testkit_tables::batch(&r)],
        )
        .await
        .unwrap();
    // arbor's main rolls back failed writes (no live heartbeat) before its own.
    let main = Table::open(t.storage.clone()).await.unwrap();
    // (In another partition, so the two writes touch no common file group.)
    let m: Vec<_> = rows(70..72, 8, "main")
        .into_iter()
        .map(|(id, _, ts, name)| (id, "ap".to_string(), ts, name))
        .collect();
    t.write_on(&main, WriteOperation::Upsert, &m).await;
    model.upsert(&m);
    legacy
        .commit(prepared)
        .await
        .expect("the legacy writer's write was rolled back by arbor's main");
    model.upsert(&r);
    assert_eq!(t.read(None).await, model.sorted());
    t.assert_valid("after both writes").await;
    t.assert_peer_agrees("branching peer check", "hudi-rs after both writes")
        .await;
}
