//! Compaction of the metadata table's FILES partition, driven by data commits.

use arbor_mdt::validate::validate_table;
use arbor_mdt::MetadataTable;
use arbor_storage::StorageExt;
use arbor_table::read::TableReader;
use arbor_table::{ListingSource, WriteOperation};
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, ActiveTimeline, TableConfig, TableLayout};

use super::write_support::{
    assert_peer_agrees, assert_snapshot, create, rows, Layout, Model, Query, TestTable,
};

async fn mdt_timeline(t: &TestTable) -> ActiveTimeline {
    let dir = arbor_mdt::MDT_META_DIR;
    let config = TableConfig::load(t.storage.as_ref(), dir).await.unwrap();
    let layout = TableLayout::from_config(dir, &config).unwrap();
    ActiveTimeline::load(t.storage.clone(), layout)
        .await
        .unwrap()
}

#[tokio::test]
async fn test_commit_many_writes_compacts_mdt_every_ten_and_reads_stay_identical() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, Layout::Hive).await;
        let mut model = Model::default();
        let mut peer_checked = 0;
        for i in 0..23u32 {
            let r = rows(i * 3..i * 3 + 6, i64::from(i), "w");
            t.write(WriteOperation::Upsert, &r).await;
            model.upsert(&r);
            let report = validate_table(t.storage.clone()).await.unwrap();
            assert!(
                report.discrepancies.is_empty(),
                "{table_type:?} after write {i}: {:?}",
                report.discrepancies
            );
            if i == 10 || i == 22 {
                assert_snapshot(&t, &model, &format!("write {i}")).await;
                assert_peer_agrees(&t, &[Query::Snapshot], &format!("write {i}")).await;
                peer_checked += 1;
            }
        }
        assert_eq!(peer_checked, 2);
        let tl = mdt_timeline(&t).await;
        let compactions: Vec<_> = tl
            .completed()
            .into_iter()
            .filter(|i| i.action == Action::Commit)
            .collect();
        assert_eq!(compactions.len(), 2, "{table_type:?}: {compactions:?}");
        assert!(tl.pending().is_empty());
        // The latest FILES slice holds only the logs written since the last compaction.
        let mdt = MetadataTable::open(t.storage.clone())
            .await
            .unwrap()
            .unwrap();
        let slices = mdt.files_slices().await.unwrap();
        assert_eq!(slices.len(), 1);
        assert!(slices[0].base_file.is_some());
        assert!(slices[0].log_files.len() < 10, "{:?}", slices[0]);
        // Both listing sources agree.
        let a = TableReader::open_with(t.storage.clone(), ListingSource::Storage)
            .await
            .unwrap();
        let b = TableReader::open_with(t.storage.clone(), ListingSource::MetadataTable)
            .await
            .unwrap();
        assert_eq!(
            super::write_support::rows_of(&a.snapshot(None).await.unwrap()),
            super::write_support::rows_of(&b.snapshot(None).await.unwrap())
        );
    }
}

#[tokio::test]
async fn test_commit_after_interrupted_mdt_compaction_rolls_it_back() {
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    let mut model = Model::default();
    for i in 0..3u32 {
        let r = rows(i * 2..i * 2 + 4, i64::from(i), "a");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
    }
    // Plant a pending MDT compaction with a (garbage) base file, as a crash would leave it.
    let tl = mdt_timeline(&t).await;
    let time: arbor_timeline::InstantTime = "20991231000000000".parse().unwrap();
    let _ = tl;
    let plan_key = format!(
        "{}/timeline/{time}.compaction.requested",
        arbor_mdt::MDT_META_DIR
    );
    let base_key = format!(
        "{}/files/files-0000-0_0-0-1_{time}.hfile",
        arbor_mdt::MDT_BASE
    );
    let plan = arbor_timeline::avro::HoodieCompactionPlan {
        operations: Some(vec![]),
        version: Some(1),
        ..Default::default()
    };
    let requested = arbor_timeline::Instant::requested(time.clone(), Action::Compaction);
    let bytes = arbor_timeline::avro::encode_instant_for(
        &requested,
        &arbor_timeline::avro::InstantContent::Compaction(Box::new(plan)),
    )
    .unwrap();
    t.storage
        .put(&plan_key, bytes::Bytes::from(bytes))
        .await
        .unwrap();
    t.storage
        .put(&base_key, bytes::Bytes::from_static(b"partial"))
        .await
        .unwrap();
    // Readers ignore it.
    assert_snapshot(&t, &model, "planted compaction").await;
    let r = rows(100..102, 9, "b");
    t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    assert!(!t.storage.exists(&base_key).await.unwrap());
    assert!(!t.storage.exists(&plan_key).await.unwrap());
    assert_snapshot(&t, &model, "after the next write").await;
    let report = validate_table(t.storage.clone()).await.unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "{:?}",
        report.discrepancies
    );
}

#[tokio::test]
async fn test_commit_after_data_archival_archives_mdt_behind_its_latest_compaction() {
    use arbor_timeline::archive::{ArchivalPolicy, Archiver, TimelineHistory};
    let t = create(TableType::MergeOnRead, Layout::Plain).await;
    let mut model = Model::default();
    for i in 0..36u32 {
        let r = rows(i..i + 3, i64::from(i), "a");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
    }
    let before = mdt_timeline(&t).await.instants().len();
    // Archive the data table (its archiver stays behind the MDT's latest compaction).
    let data_layout = t.timeline().await.layout().clone();
    let outcome = Archiver::new(t.storage.clone(), data_layout, ArchivalPolicy::default())
        .unwrap()
        .run()
        .await
        .unwrap();
    assert!(!outcome.archived.is_empty());
    let r = rows(50..52, 99, "b");
    t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    let mdt_tl = mdt_timeline(&t).await;
    let latest_compaction = mdt_tl
        .completed()
        .into_iter()
        .filter(|i| i.action == Action::Commit)
        .map(|i| i.requested_time)
        .max()
        .unwrap();
    assert!(
        mdt_tl.instants().len() < before,
        "the MDT timeline was not archived: {} instants before, {} after",
        before,
        mdt_tl.instants().len()
    );
    // Nothing at or after the latest compaction left the active MDT timeline, and the MDT
    // history holds what was archived.
    let history = TimelineHistory::load(t.storage.clone(), mdt_tl.layout().clone())
        .await
        .unwrap();
    assert!(history
        .archived()
        .instants()
        .all(|i| i.instant.requested_time < latest_compaction));
    assert!(mdt_tl.get(&latest_compaction, Action::Commit).is_some());
    assert_snapshot(&t, &model, "after MDT archival").await;
    let report = validate_table(t.storage.clone()).await.unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "{:?}",
        report.discrepancies
    );
    assert_peer_agrees(&t, &[Query::Snapshot], "after MDT archival").await;
}
