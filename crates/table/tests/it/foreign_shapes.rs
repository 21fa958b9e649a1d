//! Table shapes Java writes that arbor must not write into the way it writes its own: a
//! bucket index (new keys refused, updates written), change-data-capture tables (writes and
//! compactions refused) and file groups under a pending clustering plan (updates refused, as
//! Java's default `SparkRejectUpdateStrategy` does). Every refusal names its cause and leaves
//! the table as it was.

use arbor_table::{Table, WriteOperation};
use arbor_timeline::avro::{
    encode, HoodieClusteringGroup, HoodieClusteringPlan, HoodieRequestedReplaceMetadata,
    HoodieSliceInfo,
};
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, InstantTimeGenerator};
use bytes::Bytes;

use super::write_support::*;

/// The data files and completed instants: what a refused write must leave as it was (a write
/// refused after its instant started leaves that instant rolled back, as any failed write).
async fn state(t: &TestTable) -> (Vec<String>, Vec<String>) {
    let files = t
        .listing()
        .await
        .into_iter()
        .filter(|k| !k.starts_with(".hoodie/"))
        .collect();
    let completed = t
        .completed()
        .await
        .into_iter()
        .map(|i| i.requested_time.to_string())
        .collect();
    (files, completed)
}

/// Every write's refusal keeps the data files and completed instants as they were.
async fn assert_refused(t: &TestTable, op: WriteOperation, rows: &[Row], words: &[&str]) {
    let before = state(t).await;
    let err = t
        .table
        .write(op, vec![batch(rows)])
        .await
        .expect_err("the write must be refused")
        .to_string();
    for w in words {
        assert!(err.contains(w), "the refusal names {w:?}: {err}");
    }
    let after = state(t).await;
    assert_eq!(
        before, after,
        "a refused write leaves the table as it was: {err}"
    );
}

#[tokio::test]
async fn test_a_consistent_hashing_bucket_table_takes_updates_and_refuses_new_keys() {
    let t = create(TableType::CopyOnWrite, Layout::None).await;
    let mut m = Model::default();
    t.write(WriteOperation::Insert, &rows(0..3, 1, "a")).await;
    m.upsert(&rows(0..3, 1, "a"));
    // Java's consistent-hashing engine keeps its ring here.
    t.storage
        .put(
            ".hoodie/.bucket_index/consistent_hashing_metadata/00000000000000.hashing_meta",
            Bytes::from_static(b"{}"),
        )
        .await
        .unwrap();
    // An update of stored keys stays in their file groups.
    t.write(WriteOperation::Upsert, &rows(0..2, 2, "b")).await;
    m.upsert(&rows(0..2, 2, "b"));
    t.write(WriteOperation::Delete, &rows(2..3, 3, "x")).await;
    m.delete(&rows(2..3, 3, "x"));
    let mut mixed = rows(0..1, 4, "c");
    mixed.extend(rows(7..8, 4, "c"));
    assert_refused(
        &t,
        WriteOperation::Upsert,
        &mixed,
        &["bucket index", "1 new key"],
    )
    .await;
    assert_refused(
        &t,
        WriteOperation::Insert,
        &rows(8..9, 4, "c"),
        &["bucket index"],
    )
    .await;
    assert_snapshot(&t, &m, "after the refusals").await;
}

#[tokio::test]
async fn test_a_change_data_capture_table_refuses_writes_and_compaction() {
    let t = create(TableType::MergeOnRead, Layout::None).await;
    let m = {
        let mut m = Model::default();
        t.write(WriteOperation::Insert, &rows(0..3, 1, "a")).await;
        m.upsert(&rows(0..3, 1, "a"));
        t.write(WriteOperation::Upsert, &rows(0..1, 2, "b")).await;
        m.upsert(&rows(0..1, 2, "b"));
        m
    };
    let props = ".hoodie/hoodie.properties";
    let text = String::from_utf8(t.storage.get(props).await.unwrap().0.to_vec()).unwrap();
    t.storage
        .put(
            props,
            Bytes::from(format!("{text}hoodie.table.cdc.enabled=true\n")),
        )
        .await
        .unwrap();
    let table = Table::open(t.storage.clone()).await.unwrap();
    let before = t.listing().await;
    for op in [WriteOperation::Upsert, WriteOperation::Delete] {
        let err = table
            .write(op, vec![batch(&rows(1..2, 3, "c"))])
            .await
            .expect_err("refused")
            .to_string();
        assert!(err.contains("hoodie.table.cdc.enabled=true"), "{err}");
    }
    let err = table.compact().await.expect_err("refused").to_string();
    assert!(
        err.contains("compaction on a table with hoodie.table.cdc.enabled"),
        "{err}"
    );
    assert_eq!(before, t.listing().await);
    assert_snapshot(&t, &m, "after the refusals").await;
}

#[tokio::test]
async fn test_updates_of_file_groups_under_pending_clustering_are_refused() {
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    let mut m = Model::default();
    t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    m.upsert(&rows(0..4, 1, "a"));
    // A clustering plan over the "us" partition's file group, as Spark schedules it.
    let us = t.partition("us");
    let slices = t
        .reader()
        .await
        .view()
        .latest_file_slices(Some(&us), None)
        .await
        .unwrap();
    let slice = &slices[0];
    let base = slice.base_file.as_ref().unwrap();
    let plan = HoodieRequestedReplaceMetadata {
        operation_type: Some("CLUSTER".into()),
        clustering_plan: Some(HoodieClusteringPlan {
            input_groups: Some(vec![HoodieClusteringGroup {
                slices: Some(vec![HoodieSliceInfo {
                    data_file_path: Some(format!("{us}/{}", base.file_name())),
                    file_id: Some(slice.file_id.clone()),
                    partition_path: Some(us.clone()),
                    ..Default::default()
                }]),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut tl = t.timeline().await;
    let time = tl
        .next_instant_time(&InstantTimeGenerator::new())
        .await
        .unwrap();
    tl.create_requested(
        time.clone(),
        Action::Clustering,
        Bytes::from(encode(&plan).unwrap()),
    )
    .await
    .unwrap();
    // k0000 and k0002 live in "us": refused, naming the group and the plan.
    assert_refused(
        &t,
        WriteOperation::Upsert,
        &rows(0..1, 2, "b"),
        &["pending clustering", time.as_str(), slice.file_id.as_str()],
    )
    .await;
    assert_refused(
        &t,
        WriteOperation::Delete,
        &rows(2..3, 2, "b"),
        &["pending clustering"],
    )
    .await;
    // "eu" is not in the plan; a new key in "us" goes to a new file group.
    let mut ok = rows(1..2, 3, "c");
    ok.extend(rows(4..5, 3, "c"));
    t.write(WriteOperation::Upsert, &ok).await;
    m.upsert(&ok);
    assert_snapshot(&t, &m, "after the refusals").await;
    let after = t
        .reader()
        .await
        .view()
        .latest_file_slices(Some(&us), None)
        .await
        .unwrap();
    assert!(after
        .iter()
        .any(|s| s.file_id == slice.file_id && s.base_file.as_ref() == Some(base)));
}
