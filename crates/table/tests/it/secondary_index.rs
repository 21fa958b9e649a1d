//! Secondary indexes: created on an existing table, kept in step with every kind of write,
//! looked up (with locations), validated against the data; our value text against Java's in
//! the fixtures.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_mdt::secondary_index::IndexDefinitions;
use arbor_mdt::validate::IndexDiscrepancy;
use arbor_mdt::{read_secondary_index, MetadataTable};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::write::table_entries;
use arbor_table::{secondary_lookup, validate_indexes, Table, WriteOperation};
use arbor_testkit::fixtures::{fixtures_root_or_skip, unzip_table};
use arbor_timeline::config::TableType;

use super::write_support::{
    assert_peer_agrees, create, rows, Layout, Model, Query, Row, TestTable,
};

/// The (name, id) pairs of the model: what an index on `name` must hold.
fn expected(model: &Model) -> BTreeSet<(Option<String>, String)> {
    model
        .rows
        .values()
        .map(|r| (Some(r.3.clone()), r.0.clone()))
        .collect()
}

async fn index_pairs(t: &TestTable, name: &str) -> BTreeSet<(Option<String>, String)> {
    let mdt = MetadataTable::open(t.storage.clone())
        .await
        .unwrap()
        .unwrap();
    read_secondary_index(t.storage.as_ref(), &mdt, name)
        .await
        .unwrap()
        .into_iter()
        .flat_map(|(v, keys)| keys.into_iter().map(move |k| (v.clone(), k)))
        .collect()
}

async fn assert_index_matches(t: &TestTable, model: &Model, step: &str) {
    super::write_support::assert_snapshot(t, model, step).await;
    assert_eq!(
        index_pairs(t, "by_name").await,
        expected(model),
        "secondary index vs model after {step}"
    );
    // Lookups: one present value and one absent value.
    if let Some(r) = model.rows.values().next() {
        let found = secondary_lookup(&t.storage, "by_name", Some(&r.3))
            .await
            .unwrap();
        let want: Vec<String> = model
            .rows
            .values()
            .filter(|x| x.3 == r.3)
            .map(|x| x.0.clone())
            .collect();
        let keys: Vec<String> = found.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, want, "lookup of {:?} after {step}", r.3);
        for (k, loc) in &found {
            let row = &model.rows[k];
            assert_eq!(
                loc.partition,
                t.partition(&row.1),
                "{step}: location of {k}"
            );
        }
    }
    assert!(
        secondary_lookup(&t.storage, "by_name", Some("no such value"))
            .await
            .unwrap()
            .is_empty()
    );
    let v = validate_indexes(t.storage.clone()).await.unwrap();
    assert!(v.discrepancies.is_empty(), "{step}: {:?}", v.discrepancies);
    assert!(
        v.checked
            .iter()
            .any(|(n, _)| n == "secondary_index_by_name"),
        "{:?}",
        v.checked
    );
    let files = arbor_mdt::validate::validate_table(t.storage.clone())
        .await
        .unwrap();
    assert!(
        files.discrepancies.is_empty(),
        "{step}: {:?}",
        files.discrepancies
    );
}

fn renamed(id: u32, ts: i64, name: &str) -> Row {
    let region = if id % 2 == 0 { "us" } else { "eu" };
    (
        format!("k{id:04}"),
        region.to_string(),
        ts,
        name.to_string(),
    )
}

async fn run_every_write_kind(table_type: TableType, with_record_index: bool) {
    let t = create(table_type, Layout::Hive).await;
    let mut model = Model::default();
    let r = rows(0..20, 1, "a");
    t.write(WriteOperation::Insert, &r).await;
    model.upsert(&r);
    if with_record_index {
        t.table.create_record_index().await.unwrap();
    }
    let n = t
        .table
        .create_secondary_index("by_name", "name")
        .await
        .unwrap();
    assert_eq!(n, 20);
    let props = std::fs::read_to_string(t.base.join(".hoodie/hoodie.properties")).unwrap();
    assert!(props.contains("secondary_index_by_name"), "{props}");
    assert!(props.contains("hoodie.table.index.defs.path=.hoodie/.index_defs/index.json"));
    let defs = IndexDefinitions::load(t.storage.as_ref())
        .await
        .unwrap()
        .unwrap();
    let def = defs.get("by_name").unwrap();
    assert_eq!(def.source_fields, vec!["name".to_string()]);
    // Tables are created at version 9 by default, whose secondary indexes are V2 (Java 1.1).
    assert_eq!(def.version.as_deref(), Some("V2"));
    assert!(t
        .base
        .join(".hoodie/metadata/secondary_index_by_name")
        .read_dir()
        .unwrap()
        .any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("secondary-index-by-name-0009-0_")));
    assert_index_matches(&t, &model, "create").await;
    // Duplicate name, unknown column.
    assert!(t
        .table
        .create_secondary_index("by_name", "name")
        .await
        .is_err());
    assert!(t.table.create_secondary_index("x", "nope").await.is_err());

    // Inserts and upserts changing the value (k0010..k0019 renamed, k0020.. new); some rows
    // share a value.
    let mut r = rows(10..30, 2, "b");
    r.push(renamed(3, 2, "shared"));
    r.push(renamed(4, 2, "shared"));
    t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    assert_index_matches(&t, &model, "upsert").await;
    let shared = secondary_lookup(&t.storage, "by_name", Some("shared"))
        .await
        .unwrap();
    assert_eq!(shared.len(), 2);

    // An upsert keeping the value (only ts changes) and one with a stale ts (ignored).
    let r = vec![renamed(3, 5, "shared"), renamed(5, 0, "stale")];
    t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    assert_index_matches(&t, &model, "upsert same value").await;

    let r = rows(0..3, 3, "c");
    t.write(WriteOperation::Delete, &r).await;
    model.delete(&r);
    assert_index_matches(&t, &model, "delete").await;

    let r: Vec<Row> = rows(100..104, 7, "o")
        .into_iter()
        .filter(|r| r.1 == "us")
        .collect();
    t.write(WriteOperation::InsertOverwrite, &r).await;
    model.overwrite(&r, true);
    assert_index_matches(&t, &model, "insert overwrite").await;

    t.table
        .delete_partitions(&["region=eu".to_string()])
        .await
        .unwrap();
    model.drop_region("eu");
    assert_index_matches(&t, &model, "delete partition").await;

    if table_type == TableType::MergeOnRead {
        t.table.compact().await.unwrap();
        assert_index_matches(&t, &model, "compaction").await;
    }
    // Reopened handle keeps writing (the index is maintained, not refused).
    let reopened = Table::open(t.storage.clone()).await.unwrap();
    let r = vec![renamed(200, 9, "late")];
    reopened
        .write(
            WriteOperation::Insert,
            vec![super::write_support::batch(&r)],
        )
        .await
        .unwrap();
    model.upsert(&r);
    assert_index_matches(&t, &model, "reopened insert").await;
    // hudi-rs still reads the table (it lists through FILES; the index partitions are extra).
    assert_peer_agrees(
        &t,
        &[Query::Snapshot],
        &format!("{table_type:?} secondary index"),
    )
    .await;
}

#[tokio::test]
async fn test_create_secondary_index_cow_every_write_kind_index_equals_model() {
    run_every_write_kind(TableType::CopyOnWrite, false).await;
}

#[tokio::test]
async fn test_create_secondary_index_mor_every_write_kind_index_equals_model() {
    run_every_write_kind(TableType::MergeOnRead, false).await;
}

#[tokio::test]
async fn test_create_secondary_index_with_record_index_lookups_use_it() {
    run_every_write_kind(TableType::MergeOnRead, true).await;
}

#[tokio::test]
async fn test_create_secondary_index_without_metadata_table_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(tmp.path()).unwrap());
    let table = Table::create(
        storage,
        arbor_table::CreateOptions {
            name: "t".into(),
            table_type: TableType::CopyOnWrite,
            record_key_fields: vec!["id".into()],
            partition_fields: vec![],
            hive_style_partitioning: false,
            ordering_field: None,
            merge_mode: None,
            schema: super::write_support::schema(),
            metadata_table: false,
            table_version: Default::default(),
            base_format: Default::default(),
        },
    )
    .await
    .unwrap();
    let err = table
        .create_secondary_index("by_name", "name")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("metadata table"), "{err}");
}

#[tokio::test]
async fn test_validate_indexes_planted_secondary_discrepancy_reported() {
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..30, 1, "a")).await;
    t.table
        .create_secondary_index("by_name", "name")
        .await
        .unwrap();
    assert!(validate_indexes(t.storage.clone())
        .await
        .unwrap()
        .discrepancies
        .is_empty());
    // Plant: remove one non-empty base HFile of the index (its entries disappear).
    let dir = t.base.join(".hoodie/metadata/secondary_index_by_name");
    let victim = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "hfile"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    std::fs::remove_file(&victim).unwrap();
    let v = validate_indexes(t.storage.clone()).await.unwrap();
    assert!(!v.discrepancies.is_empty());
    assert!(v
        .discrepancies
        .iter()
        .all(|d| matches!(d, IndexDiscrepancy::SecondaryEntryMissing { .. })));
    assert!(
        v.discrepancies[0]
            .to_string()
            .contains("secondary_index_by_name"),
        "{}",
        v.discrepancies[0]
    );
}

#[tokio::test]
async fn test_table_entries_fixture_text_equals_java_index_for_string_and_date_columns() {
    let Some(root) = fixtures_root_or_skip("secondary index value text") else {
        return;
    };
    let mut checked = Vec::new();
    for rel in [
        "sample_table/cow/v9_txns_simple_meta.zip",
        "sample_table/cow/v9_txns_complex_meta.zip",
        "quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip",
    ] {
        let zip = root.join(rel);
        if !zip.is_file() {
            continue;
        }
        let (_tmp, base) = unzip_table(&zip);
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
        let reader = TableReader::open(storage.clone()).await.unwrap();
        let mdt = MetadataTable::open(storage.clone()).await.unwrap().unwrap();
        let defs = IndexDefinitions::load(storage.as_ref())
            .await
            .unwrap()
            .unwrap();
        for def in defs.secondary_indexes() {
            let column = &def.source_fields[0];
            let ours = table_entries(&storage, &reader, column).await.unwrap();
            let java: BTreeSet<(Option<String>, String)> =
                read_secondary_index(storage.as_ref(), &mdt, &def.index_name)
                    .await
                    .unwrap()
                    .into_iter()
                    .flat_map(|(v, keys)| keys.into_iter().map(move |k| (v.clone(), k)))
                    .collect();
            assert!(!ours.is_empty(), "{rel} {column}");
            assert_eq!(ours, java, "{rel}: {}", def.index_name);
            checked.push(format!("{rel}:{column}"));
        }
    }
    assert!(
        checked.iter().any(|c| c.ends_with("txn_date")),
        "a date column was checked: {checked:?}"
    );
    assert!(checked.iter().any(|c| c.ends_with("rider")), "{checked:?}");
}

#[tokio::test]
async fn test_create_secondary_index_then_record_index_both_stay_valid() {
    let t = create(TableType::MergeOnRead, Layout::Plain).await;
    let mut model = Model::default();
    let r = rows(0..10, 1, "a");
    t.write(WriteOperation::Insert, &r).await;
    model.upsert(&r);
    t.table
        .create_secondary_index("by_name", "name")
        .await
        .unwrap();
    t.table.create_record_index().await.unwrap();
    let r = vec![renamed(3, 2, "x"), renamed(30, 2, "y")];
    t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    assert_index_matches(&t, &model, "upsert after both indexes").await;
    let v = validate_indexes(t.storage.clone()).await.unwrap();
    let names: Vec<&str> = v.checked.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["record_index", "secondary_index_by_name"]);
    let mdt_timeline = t.base.join(".hoodie/metadata/.hoodie/timeline");
    let inits: BTreeSet<String> = std::fs::read_dir(mdt_timeline)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with("0000000000000000") && n.ends_with(".deltacommit") && n.contains('_')
        })
        .map(|n| n[..17].to_string())
        .collect();
    assert_eq!(
        inits.into_iter().collect::<Vec<_>>(),
        [
            "00000000000000000",
            "00000000000000001",
            "00000000000000002"
        ]
    );
}
