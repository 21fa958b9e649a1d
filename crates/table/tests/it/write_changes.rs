//! `Table::prepare_changes`: upserts and deletes in one `upsert` commit, each upserted row
//! replacing its key's record even when the stored one has a greater ordering value, on
//! copy-on-write and merge-on-read, with and without a record index; a key in both inputs is
//! refused before anything is written; the record index follows; hudi-rs reads the result.

use arbor_table::{validate_indexes, TableError, WriteOperation};
use arbor_timeline::config::TableType;

use crate::write_support::{batch, create, rows, Layout, Model, Query, Row};

fn row(id: &str, region: &str, ts: i64, name: &str) -> Row {
    (id.into(), region.into(), ts, name.into())
}

#[tokio::test]
async fn test_prepare_changes_upserts_replace_and_deletes_in_one_commit() {
    for (table_type, record_index) in [
        (TableType::CopyOnWrite, false),
        (TableType::CopyOnWrite, true),
        (TableType::MergeOnRead, false),
        (TableType::MergeOnRead, true),
    ] {
        let step = format!("{table_type:?}, record index {record_index}");
        let t = create(table_type, Layout::Hive).await;
        if record_index {
            t.table.create_record_index().await.unwrap();
        }
        let first = rows(0..6, 5, "a");
        t.write(WriteOperation::Upsert, &first).await;
        let writes_before = t.completed().await.len();
        // k0000 goes back to ts 1 (the stored record has 5), k0001 moves on to ts 9, k0006 is
        // new; k0002 and k0003 are deleted.
        let upserts = vec![
            row("k0000", "us", 1, "older"),
            row("k0001", "eu", 9, "newer"),
            row("k0006", "us", 1, "new"),
        ];
        let deletes = vec![row("k0002", "us", 0, ""), row("k0003", "eu", 0, "")];
        let prepared = t
            .table
            .prepare_changes(vec![batch(&upserts)], vec![batch(&deletes)])
            .await
            .unwrap();
        let done = t.table.commit(prepared).await.unwrap();
        assert_eq!(t.completed().await.len(), writes_before + 1, "{step}");
        assert_eq!(
            (done.inserted, done.updated, done.deleted),
            (1, 2, 2),
            "{step}"
        );
        let mut model = Model::default();
        model.upsert(&first);
        model.delete(&deletes);
        for r in &upserts {
            model.rows.insert(r.0.clone(), r.clone());
        }
        crate::write_support::assert_snapshot(&t, &model, &step).await;
        let indexes = validate_indexes(t.storage.clone()).await.unwrap();
        assert!(indexes.discrepancies.is_empty(), "{step}: {indexes:?}");
        // A later ordinary upsert of the replaced key still follows event-time ordering.
        t.write(WriteOperation::Upsert, &[row("k0000", "us", 0, "stale")])
            .await;
        crate::write_support::assert_snapshot(&t, &model, &step).await;
        crate::write_support::assert_peer_agrees(&t, &[Query::Snapshot], &step).await;
    }
}

#[tokio::test]
async fn test_prepare_changes_refuses_a_key_both_upserted_and_deleted_writing_nothing() {
    let t = create(TableType::CopyOnWrite, Layout::Hive).await;
    t.write(WriteOperation::Upsert, &rows(0..2, 1, "a")).await;
    let before = t.listing().await;
    let e = t
        .table
        .prepare_changes(
            vec![batch(&[row("k0000", "us", 2, "b")])],
            vec![batch(&[row("k0000", "us", 0, "")])],
        )
        .await
        .unwrap_err();
    assert!(matches!(e, TableError::InvalidInput { .. }), "{e}");
    assert!(e.to_string().contains("both upserted and deleted"), "{e}");
    let e = t.table.prepare_changes(vec![], vec![]).await.unwrap_err();
    assert!(e.to_string().contains("no rows"), "{e}");
    assert_eq!(t.listing().await, before);
}

/// Known locations spare the index lookups and write exactly what an index lookup writes; a
/// location naming a file group without a latest slice fails the write before anything is
/// committed.
#[tokio::test]
async fn test_prepare_changes_with_known_locations_writes_the_same_and_refuses_a_stale_one() {
    use arbor_table::read::OrderKey;
    use arbor_table::KnownLocations;
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let step = format!("{table_type:?}");
        let t = create(table_type, Layout::Hive).await;
        let first = rows(0..4, 5, "a");
        t.write(WriteOperation::Upsert, &first).await;
        let reader = t.reader().await;
        let slices = reader.view().latest_file_slices(None, None).await.unwrap();
        let group_of = |p: &str| {
            slices
                .iter()
                .find(|s| s.partition == p)
                .unwrap()
                .file_id
                .clone()
        };
        let mut known = KnownLocations::new();
        known.insert(
            "region=us",
            "k0000",
            Some((group_of("region=us"), OrderKey::Long(5))),
        );
        known.insert("region=eu", "k0009", None);
        known.insert(
            "region=eu",
            "k0001",
            Some((group_of("region=eu"), OrderKey::Long(5))),
        );
        let upserts = vec![row("k0000", "us", 1, "older"), row("k0009", "eu", 1, "new")];
        let deletes = vec![row("k0001", "eu", 0, "")];
        let prepared = t
            .table
            .prepare_changes_with(vec![batch(&upserts)], vec![batch(&deletes)], known)
            .await
            .unwrap();
        let done = t.table.commit(prepared).await.unwrap();
        assert_eq!(
            (done.inserted, done.updated, done.deleted),
            (1, 1, 1),
            "{step}"
        );
        let mut model = Model::default();
        model.upsert(&first);
        model.delete(&deletes);
        for r in &upserts {
            model.rows.insert(r.0.clone(), r.clone());
        }
        crate::write_support::assert_snapshot(&t, &model, &step).await;
        let before = t.listing().await;
        let mut stale = KnownLocations::new();
        stale.insert(
            "region=us",
            "k0002",
            Some((
                "00000000-0000-0000-0000-000000000000-0".into(),
                OrderKey::Default,
            )),
        );
        let e = t
            .table
            .prepare_changes_with(vec![batch(&[row("k0002", "us", 9, "x")])], vec![], stale)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("has no latest slice"), "{step}: {e}");
        // The failed write left nothing readers see.
        crate::write_support::assert_snapshot(&t, &model, &step).await;
        assert!(t.listing().await.len() >= before.len());
    }
}
