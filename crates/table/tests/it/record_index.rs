//! The record index: created on an existing table, kept in step with every write, used by
//! upserts and deletes to find file groups, global keys (KeyMove).

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_format::meta;
use arbor_mdt::record_index::read_record_index;
use arbor_mdt::validate::validate_table;
use arbor_mdt::MetadataTable;
use arbor_storage::{FaultInjectingStorage, OpKind, Storage};
use arbor_table::{KeyMove, Table, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arrow::array::AsArray;

use super::write_support::{
    assert_peer_agrees, assert_snapshot, batch, create, rows, Layout, Model, Query, Row, TestTable,
};

/// key -> (partition, file id) of every record of the snapshot.
async fn data_locations(t: &TestTable) -> BTreeMap<String, (String, String)> {
    let reader = t.reader().await;
    let mut out = BTreeMap::new();
    for b in reader.snapshot(None).await.unwrap() {
        let s = |n: &str| b.column_by_name(n).unwrap().as_string::<i32>().clone();
        let (k, p, f) = (
            s(meta::RECORD_KEY),
            s(meta::PARTITION_PATH),
            s(meta::FILE_NAME),
        );
        for i in 0..b.num_rows() {
            let name = f.value(i).trim_start_matches('.');
            let file_id = name.split('_').next().unwrap().to_string();
            out.insert(k.value(i).to_string(), (p.value(i).to_string(), file_id));
        }
    }
    out
}

async fn index_locations(t: &TestTable) -> BTreeMap<String, (String, String)> {
    let mdt = MetadataTable::open(t.storage.clone())
        .await
        .unwrap()
        .unwrap();
    read_record_index(t.storage.as_ref(), &mdt)
        .await
        .unwrap()
        .into_iter()
        .map(|(k, e)| (k, (e.location.partition, e.location.file_id)))
        .collect()
}

async fn assert_index_matches(t: &TestTable, model: &Model, step: &str) {
    assert_snapshot(t, model, step).await;
    let data = data_locations(t).await;
    let index = index_locations(t).await;
    assert_eq!(index, data, "record index vs data after {step}");
    let report = validate_table(t.storage.clone()).await.unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "{step}: {:?}",
        report.discrepancies
    );
}

fn moved(id: u32, region: &str, ts: i64) -> Row {
    (
        format!("k{id:04}"),
        region.to_string(),
        ts,
        format!("moved{id}"),
    )
}

#[tokio::test]
async fn test_write_with_record_index_keeps_index_equal_to_data_through_every_operation() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, Layout::Hive).await;
        let mut model = Model::default();
        let r = rows(0..20, 1, "a");
        t.write(WriteOperation::Insert, &r).await;
        model.upsert(&r);
        let n = t.table.create_record_index().await.unwrap();
        assert_eq!(n, 20);
        assert_index_matches(&t, &model, "create_record_index").await;
        assert!(t.table.create_record_index().await.is_err());

        let r = rows(10..30, 2, "b");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        assert_index_matches(&t, &model, "upsert").await;

        let r = rows(0..5, 3, "c");
        t.write(WriteOperation::Delete, &r).await;
        model.delete(&r);
        assert_index_matches(&t, &model, "delete").await;

        // k0010 lives in region=us; an upsert saying eu updates it in place (default).
        let before = data_locations(&t).await["k0010"].clone();
        let r = vec![moved(10, "eu", 4)];
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        assert_index_matches(&t, &model, "update in place").await;
        assert_eq!(data_locations(&t).await["k0010"], before);

        // With DeleteAndInsert, k0012 (us) moves to eu: deleted there, inserted here.
        let mover = t.table.clone().with_write_options(WriteOptions {
            key_move: KeyMove::DeleteAndInsert,
            ..WriteOptions::default()
        });
        let r = vec![moved(12, "eu", 5)];
        mover
            .write(WriteOperation::Upsert, vec![batch(&r)])
            .await
            .unwrap();
        model.upsert(&r);
        assert_index_matches(&t, &model, "delete and insert").await;
        assert_eq!(data_locations(&t).await["k0012"].0, "region=eu");

        // A delete naming the wrong partition still finds the key (global index).
        let r = vec![moved(14, "eu", 6)];
        t.write(WriteOperation::Delete, &r).await;
        model.delete(&r);
        assert_index_matches(&t, &model, "global delete").await;

        // Overwriting region=us drops its keys from the index.
        let r: Vec<Row> = rows(100..104, 7, "o")
            .into_iter()
            .filter(|r| r.1 == "us")
            .collect();
        t.write(WriteOperation::InsertOverwrite, &r).await;
        model.overwrite(&r, true);
        // k0010 was updated in place: it lives in region=us although its column says eu.
        model.rows.remove("k0010");
        assert_index_matches(&t, &model, "insert overwrite").await;

        t.table
            .delete_partitions(&["region=eu".to_string()])
            .await
            .unwrap();
        model.drop_region("eu");
        assert_index_matches(&t, &model, "delete partition").await;
        assert_peer_agrees(
            &t,
            &[Query::Snapshot],
            &format!("{table_type:?} record index"),
        )
        .await;
    }
}

#[tokio::test]
async fn test_upsert_with_record_index_reads_no_base_file_to_locate_keys() {
    let t = create(TableType::MergeOnRead, Layout::Plain).await;
    for i in 0..4 {
        t.write(WriteOperation::Insert, &rows(i * 50..i * 50 + 50, 1, "a"))
            .await;
    }
    t.table.create_record_index().await.unwrap();
    let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
    let storage: Arc<dyn Storage> = faulty.clone();
    let table = Table::open(storage).await.unwrap();
    faulty.reset();
    table
        .write(WriteOperation::Upsert, vec![batch(&rows(7..9, 2, "u"))])
        .await
        .unwrap();
    let parquet_reads: Vec<String> = faulty
        .ops()
        .into_iter()
        .filter(|o| matches!(o.kind, OpKind::Get | OpKind::GetRange))
        .filter(|o| o.key.ends_with(".parquet"))
        .map(|o| o.key)
        .collect();
    assert!(parquet_reads.is_empty(), "{parquet_reads:?}");
    let mut model = Model::default();
    for i in 0..4 {
        model.upsert(&rows(i * 50..i * 50 + 50, 1, "a"));
    }
    model.upsert(&rows(7..9, 2, "u"));
    assert_index_matches(&t, &model, "upsert through the record index").await;
}

#[tokio::test]
async fn test_record_index_survives_mdt_compaction_and_archival() {
    use arbor_timeline::archive::{ArchivalPolicy, Archiver};
    let t = create(TableType::MergeOnRead, Layout::Plain).await;
    let mut model = Model::default();
    let r = rows(0..10, 1, "a");
    t.write(WriteOperation::Insert, &r).await;
    model.upsert(&r);
    t.table.create_record_index().await.unwrap();
    for i in 0..34u32 {
        let r = rows(i * 2..i * 2 + 4, i64::from(i) + 2, "u");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
    }
    let data_layout = t.timeline().await.layout().clone();
    let outcome = Archiver::new(t.storage.clone(), data_layout, ArchivalPolicy::default())
        .unwrap()
        .run()
        .await
        .unwrap();
    assert!(!outcome.archived.is_empty());
    let r = rows(200..202, 99, "z");
    t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    // The record-index groups were compacted into base files at the MDT compaction.
    let (objects, _) = t
        .storage
        .list_dir(".hoodie/metadata/record_index")
        .await
        .unwrap();
    let bases: Vec<String> = objects
        .iter()
        .map(|o| o.key.clone())
        .filter(|k| k.ends_with(".hfile") && !k.contains("_00000000000000001."))
        .collect();
    assert!(!bases.is_empty(), "no compacted record-index base file");
    assert_index_matches(&t, &model, "after MDT compaction and archival").await;
}
