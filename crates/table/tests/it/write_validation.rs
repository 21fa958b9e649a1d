//! Bad input is rejected before anything is written: schema mismatch, missing and unknown
//! columns, null keys, empty input; bad create options.

use std::sync::Arc;

use arbor_storage::{ObjectStoreStorage, Storage, StorageExt};
use arbor_table::{CreateOptions, Table, TableError, WriteOperation};
use arbor_timeline::config::TableType;
use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;

use super::write_support::*;

fn assert_invalid(err: TableError, column: Option<&str>, row: Option<usize>) {
    match err {
        TableError::InvalidInput {
            column: c, row: r, ..
        } => {
            assert_eq!(c.as_deref(), column, "column");
            if row.is_some() {
                assert_eq!(r, row, "row");
            }
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

async fn rejected(t: &TestTable, op: WriteOperation, batches: Vec<RecordBatch>) -> TableError {
    let before = t.listing().await;
    let err = t.table.write(op, batches).await.unwrap_err();
    assert_eq!(
        t.listing().await,
        before,
        "storage changed by a rejected write"
    );
    err
}

async fn table_with_data() -> TestTable {
    let t = create(TableType::CopyOnWrite, Layout::Hive).await;
    t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    t
}

#[tokio::test]
async fn test_write_wrong_column_type_is_invalid_input_naming_column() {
    let t = table_with_data().await;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, true),
        Field::new("ts", DataType::Utf8, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let b = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(vec!["k9"])),
            Arc::new(StringArray::from(vec!["us"])),
            Arc::new(StringArray::from(vec!["x"])),
            Arc::new(StringArray::from(vec!["n"])),
        ],
    )
    .unwrap();
    assert_invalid(
        rejected(&t, WriteOperation::Upsert, vec![b]).await,
        Some("ts"),
        None,
    );
}

#[tokio::test]
async fn test_write_missing_column_is_invalid_input_naming_column() {
    let t = table_with_data().await;
    let b = batch(&rows(10..12, 1, "a")).project(&[0, 1, 2]).unwrap();
    assert_invalid(
        rejected(&t, WriteOperation::Insert, vec![b]).await,
        Some("name"),
        None,
    );
}

#[tokio::test]
async fn test_write_unknown_column_in_delete_is_invalid_input_naming_column() {
    // Writes add new columns (schema evolution: tests/it/value_types.rs); a delete never does.
    let t = table_with_data().await;
    let good = batch(&rows(10..11, 1, "a"));
    let mut fields: Vec<Field> = good
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("extra", DataType::Int64, true));
    let mut cols = good.columns().to_vec();
    cols.push(Arc::new(Int64Array::from(vec![1])));
    let b = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
    assert_invalid(
        rejected(&t, WriteOperation::Delete, vec![b]).await,
        Some("extra"),
        None,
    );
}

#[tokio::test]
async fn test_write_null_record_key_is_invalid_input_naming_row() {
    let t = table_with_data().await;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("region", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let b = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(vec![Some("k9"), None])),
            Arc::new(StringArray::from(vec!["us", "us"])),
            Arc::new(Int64Array::from(vec![1, 1])),
            Arc::new(StringArray::from(vec!["n", "n"])),
        ],
    )
    .unwrap();
    assert_invalid(
        rejected(&t, WriteOperation::Upsert, vec![b]).await,
        Some("id"),
        Some(1),
    );
}

#[tokio::test]
async fn test_write_empty_input_is_invalid_input() {
    let t = table_with_data().await;
    assert_invalid(
        rejected(&t, WriteOperation::Insert, vec![]).await,
        None,
        None,
    );
    let empty = RecordBatch::new_empty(schema());
    assert_invalid(
        rejected(&t, WriteOperation::Insert, vec![empty]).await,
        None,
        None,
    );
}

#[tokio::test]
async fn test_write_delete_without_key_column_is_invalid_input() {
    let t = table_with_data().await;
    let b = batch(&rows(0..1, 1, "a")).project(&[1, 2]).unwrap();
    assert_invalid(
        rejected(&t, WriteOperation::Delete, vec![b]).await,
        Some("id"),
        None,
    );
}

#[tokio::test]
async fn test_create_bad_options_are_invalid_input_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(tmp.path()).unwrap());
    let base = CreateOptions {
        name: "t".into(),
        table_type: TableType::CopyOnWrite,
        record_key_fields: vec!["id".into()],
        partition_fields: vec!["region".into()],
        hive_style_partitioning: false,
        ordering_field: Some("ts".into()),
        merge_mode: None,
        schema: schema(),
        metadata_table: true,
        table_version: Default::default(),
        base_format: Default::default(),
    };
    let cases: Vec<(CreateOptions, &str)> = vec![
        (
            CreateOptions {
                record_key_fields: vec!["nope".into()],
                table_version: Default::default(),
                ..base.clone()
            },
            "nope",
        ),
        (
            CreateOptions {
                partition_fields: vec!["zone".into()],
                table_version: Default::default(),
                ..base.clone()
            },
            "zone",
        ),
        (
            CreateOptions {
                ordering_field: Some("when".into()),
                table_version: Default::default(),
                ..base.clone()
            },
            "when",
        ),
        (
            CreateOptions {
                schema: Arc::new(Schema::new(vec![
                    Field::new("id", DataType::Utf8, false),
                    Field::new("_hoodie_commit_time", DataType::Utf8, true),
                ])),
                partition_fields: vec![],
                ordering_field: None,
                table_version: Default::default(),
                ..base.clone()
            },
            "_hoodie_commit_time",
        ),
    ];
    for (options, column) in cases {
        let err = Table::create(storage.clone(), options).await.unwrap_err();
        assert_invalid(err, Some(column), None);
        assert!(storage.list_all("").await.unwrap().is_empty());
    }
    Table::create(storage.clone(), base.clone()).await.unwrap();
    let again = Table::create(storage.clone(), base).await.unwrap_err();
    assert!(
        matches!(again, TableError::Timeline(_) | TableError::Storage(_)),
        "{again:?}"
    );
}

/// A table whose metadata table has a partition arbor does not keep in step (here a Spark
/// fixture whose listing also names `bloom_filters`) is readable but refused for writing;
/// nothing is written.
#[tokio::test]
async fn test_open_table_with_metadata_table_for_writing_is_unsupported() {
    let Some(root) = arbor_testkit::fixtures::fixtures_root_or_skip("metadata-table write refusal")
    else {
        return;
    };
    let zip = root.join("quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip");
    let (_tmp, base) = arbor_testkit::fixtures::unzip_table(&zip);
    let storage: std::sync::Arc<dyn arbor_storage::Storage> =
        std::sync::Arc::new(arbor_storage::ObjectStoreStorage::local(&base).unwrap());
    arbor_timeline::TableConfig::update(
        storage.as_ref(),
        arbor_timeline::layout::DEFAULT_META_DIR,
        |c| {
            let mut listed = c.metadata_partitions();
            listed.push("bloom_filters".to_string());
            c.set(
                arbor_timeline::config::keys::METADATA_PARTITIONS,
                listed.join(","),
            )
        },
    )
    .await
    .unwrap();
    let err = arbor_table::Table::open(storage.clone()).await.unwrap_err();
    assert!(
        matches!(err, arbor_table::TableError::Unsupported { .. })
            && err.to_string().contains("metadata table"),
        "{err}"
    );
    // Reading still works.
    let reader = arbor_table::read::TableReader::open(storage).await.unwrap();
    assert!(!reader.snapshot(None).await.unwrap().is_empty());
}
