//! Table versions 8 and 9 in the library: a matrix that, for each version and table type,
//! creates a table, inserts, upserts, deletes, deletes a partition, compacts (MOR), builds the
//! metadata table's record and secondary indexes, and after each step checks the version and
//! that version's property spelling on the data table and its metadata table, and that hudi-rs
//! reads the rows arbor reads; and the same operations on copies of Spark-written version 9
//! fixtures (`sample_table/{cow,mor/avro}/v9_txns_{simple,nonpart}_nometa`), which stay at
//! version 9 in Spark's spelling. (Clean, savepoint, restore, tags and branches live in other
//! crates; the CLI's `versions` tests run them on both versions.)

use std::path::Path;
use std::sync::Arc;

use arbor_mdt::secondary_index::IndexDefinitions;
use arbor_storage::{ObjectStoreStorage, Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_testkit::{assert_peer_snapshot_matches, fixtures_root_or_skip, unzip_table};
use arbor_timeline::config::{keys, RecordMergeMode, TableType, TableVersion};
use arbor_timeline::TableConfig;
use arrow::array::RecordBatch;
use arrow::datatypes::Schema;

use crate::support_tables::{data_arrow_schema, peer_python, row, rows_batch};

/// Asserts the data table's and (when present) the MDT's `hoodie.properties` carry `version`
/// in its spelling; `ordering` is the table's ordering field.
async fn assert_version(
    storage: &Arc<dyn Storage>,
    version: TableVersion,
    ordering: &str,
    step: &str,
) {
    let data = TableConfig::load(storage.as_ref(), ".hoodie")
        .await
        .unwrap();
    assert_eq!(data.version(), version, "{step}: data table version");
    let get = |k: &str| data.get(k).map(str::to_string);
    if version == TableVersion::Nine {
        assert_eq!(get(keys::TABLE_FORMAT).as_deref(), Some("native"), "{step}");
        assert_eq!(
            get(keys::ORDERING_FIELDS).as_deref(),
            Some(ordering),
            "{step}"
        );
        assert_eq!(get(keys::PRECOMBINE_FIELD), None, "{step}");
        assert_eq!(get(keys::PAYLOAD_CLASS), None, "{step}");
    } else {
        assert_eq!(get(keys::TABLE_FORMAT), None, "{step}");
        assert_eq!(
            get(keys::PRECOMBINE_FIELD).as_deref(),
            Some(ordering),
            "{step}"
        );
        assert_eq!(get(keys::ORDERING_FIELDS), None, "{step}");
    }
    assert_eq!(data.ordering_fields(), vec![ordering.to_string()], "{step}");
    if storage
        .exists(".hoodie/metadata/.hoodie/hoodie.properties")
        .await
        .unwrap()
    {
        let mdt = TableConfig::load(storage.as_ref(), ".hoodie/metadata/.hoodie")
            .await
            .unwrap();
        assert_eq!(mdt.version(), version, "{step}: MDT version");
        assert_eq!(mdt.get(keys::TABLE_FORMAT), None, "{step}: MDT");
    }
}

/// arbor's snapshot of the table at `base` (all columns, meta columns included).
async fn snapshot(base: &Path) -> (arrow::datatypes::SchemaRef, Vec<RecordBatch>) {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(base).unwrap());
    let reader = TableReader::open(storage).await.unwrap();
    let batches = reader.snapshot(None).await.unwrap();
    (reader.schema().clone(), batches)
}

fn rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

/// After a step: the version holds and hudi-rs reads what arbor reads. Returns the row count.
async fn check(
    base: &Path,
    storage: &Arc<dyn Storage>,
    version: TableVersion,
    ordering: &str,
    step: &str,
) -> usize {
    assert_version(storage, version, ordering, step).await;
    let (schema, batches) = snapshot(base).await;
    if let Some(python) = peer_python() {
        assert_peer_snapshot_matches(&python, base, &schema, &batches, step);
    }
    rows(&batches)
}

async fn run_matrix(version: TableVersion, table_type: TableType) {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    std::fs::create_dir_all(&base).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let table = Table::create(
        storage.clone(),
        CreateOptions {
            name: "t".into(),
            table_type,
            record_key_fields: vec!["id".into()],
            partition_fields: vec!["p".into()],
            hive_style_partitioning: false,
            ordering_field: Some("v".into()),
            merge_mode: Some(RecordMergeMode::EventTimeOrdering),
            schema: data_arrow_schema(),
            metadata_table: true,
            table_version: version,
            base_format: Default::default(),
        },
    )
    .await
    .unwrap();
    assert_eq!(table.config().version(), version);
    let c = |step: &'static str| {
        let (base, storage) = (base.clone(), storage.clone());
        async move { check(&base, &storage, version, "v", step).await }
    };
    assert_version(&storage, version, "v", "create").await;
    let insert = [row("a", 1, "x"), row("b", 1, "x"), row("c", 1, "y")];
    table
        .write(WriteOperation::Insert, vec![rows_batch(&insert)])
        .await
        .unwrap();
    assert_eq!(c("insert").await, 3);
    table
        .write(
            WriteOperation::Upsert,
            vec![rows_batch(&[row("a", 2, "x"), row("d", 1, "y")])],
        )
        .await
        .unwrap();
    assert_eq!(c("upsert").await, 4);
    table
        .write(
            WriteOperation::Delete,
            vec![rows_batch(&[row("b", 9, "x")])],
        )
        .await
        .unwrap();
    assert_eq!(c("delete").await, 3);
    if table_type == TableType::MergeOnRead {
        assert!(!table.compact().await.unwrap().is_empty());
        assert_eq!(c("compaction").await, 3);
    }
    table.create_record_index().await.unwrap();
    assert_eq!(c("record index").await, 3);
    // Hudi 1.1 defines the record index in index.json on version 9 tables (V1); version 8
    // tables carry no definition for it.
    let defs = IndexDefinitions::load(storage.as_ref()).await.unwrap();
    let ri = defs.as_ref().and_then(|d| d.get("record_index"));
    if version == TableVersion::Nine {
        let ri = ri.unwrap();
        assert_eq!(ri.version.as_deref(), Some("V1"));
        assert_eq!(ri.index_type, "record_index");
        let config = TableConfig::load(storage.as_ref(), ".hoodie")
            .await
            .unwrap();
        assert_eq!(
            config.get(keys::INDEX_DEFS_PATH),
            Some(".hoodie/.index_defs/index.json")
        );
    } else {
        assert!(ri.is_none(), "{defs:?}");
    }
    table.create_secondary_index("by_p", "p").await.unwrap();
    assert_eq!(c("secondary index").await, 3);
    let defs = IndexDefinitions::load(storage.as_ref())
        .await
        .unwrap()
        .unwrap();
    let want = if version == TableVersion::Nine {
        "V2"
    } else {
        "V1"
    };
    assert_eq!(defs.get("by_p").unwrap().version.as_deref(), Some(want));
    table.delete_partitions(&["y".to_string()]).await.unwrap();
    assert_eq!(c("delete partition").await, 1);
    // A reopened handle writes on at the table's version.
    let reopened = Table::open(storage.clone()).await.unwrap();
    reopened
        .write(
            WriteOperation::Upsert,
            vec![rows_batch(&[row("e", 1, "y")])],
        )
        .await
        .unwrap();
    assert_eq!(c("write after reopen").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_versions_matrix_v9_cow() {
    run_matrix(TableVersion::Nine, TableType::CopyOnWrite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_versions_matrix_v9_mor() {
    run_matrix(TableVersion::Nine, TableType::MergeOnRead).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_versions_matrix_v8_cow() {
    run_matrix(TableVersion::Eight, TableType::CopyOnWrite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_versions_matrix_v8_mor() {
    run_matrix(TableVersion::Eight, TableType::MergeOnRead).await;
}

#[tokio::test]
async fn test_create_version_6_is_refused_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(tmp.path()).unwrap());
    let err = Table::create(
        storage.clone(),
        CreateOptions {
            name: "t".into(),
            table_type: TableType::CopyOnWrite,
            record_key_fields: vec!["id".into()],
            partition_fields: vec![],
            hive_style_partitioning: false,
            ordering_field: None,
            merge_mode: None,
            schema: data_arrow_schema(),
            metadata_table: true,
            table_version: TableVersion::Six,
            base_format: Default::default(),
        },
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("version 8 or 9, not 6"), "{err}");
    assert!(storage.list_all("").await.unwrap().is_empty());
}

/// The data columns of `batches` (meta columns dropped), as a write takes them.
fn data_columns(batches: &[RecordBatch]) -> Vec<RecordBatch> {
    batches
        .iter()
        .map(|b| {
            let keep: Vec<usize> = (0..b.num_columns())
                .filter(|&i| !b.schema().field(i).name().starts_with("_hoodie_"))
                .collect();
            b.project(&keep).unwrap()
        })
        .collect()
}

/// The first `n` rows of `batches`, as one batch.
fn first_rows(batches: &[RecordBatch], n: usize) -> RecordBatch {
    let schema: Arc<Schema> = batches[0].schema();
    let all = arrow::compute::concat_batches(&schema, batches).unwrap();
    all.slice(0, n.min(all.num_rows()))
}

/// Delete 3 rows, re-insert them, (MOR) compact, delete a partition (partitioned tables),
/// build the metadata table and its record index, on a copy of each Spark-written v9 fixture
/// without a metadata table: the table stays at version 9 in Spark's spelling and hudi-rs
/// reads what arbor reads after every step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_v9_fixtures_keep_version_9_through_every_operation() {
    let Some(root) = fixtures_root_or_skip("v9 fixture write tests") else {
        return;
    };
    for (fixture, mor, partitioned) in [
        ("sample_table/cow/v9_txns_simple_nometa.zip", false, true),
        ("sample_table/cow/v9_txns_nonpart_nometa.zip", false, false),
        (
            "sample_table/mor/avro/v9_txns_simple_nometa.zip",
            true,
            true,
        ),
        (
            "sample_table/mor/avro/v9_txns_nonpart_nometa.zip",
            true,
            false,
        ),
    ] {
        let (_tmp, base) = unzip_table(&root.join(fixture));
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
        let ordering = "txn_ts";
        let before = TableConfig::load(storage.as_ref(), ".hoodie")
            .await
            .unwrap();
        let step = |s: &str| format!("{fixture}: {s}");
        let start = check(
            &base,
            &storage,
            TableVersion::Nine,
            ordering,
            &step("as written"),
        )
        .await;
        assert!(start > 3, "{fixture}: {start} rows");

        let table = Table::open(storage.clone()).await.unwrap();
        let (_, batches) = snapshot(&base).await;
        let three = first_rows(&data_columns(&batches), 3);
        table
            .write(WriteOperation::Delete, vec![three.clone()])
            .await
            .unwrap();
        let n = check(
            &base,
            &storage,
            TableVersion::Nine,
            ordering,
            &step("delete 3"),
        )
        .await;
        assert_eq!(n, start - 3, "{fixture}");
        table
            .write(WriteOperation::Upsert, vec![three])
            .await
            .unwrap();
        let n = check(
            &base,
            &storage,
            TableVersion::Nine,
            ordering,
            &step("re-insert"),
        )
        .await;
        assert_eq!(n, start, "{fixture}");
        if mor {
            table.compact().await.unwrap();
            check(
                &base,
                &storage,
                TableVersion::Nine,
                ordering,
                &step("compaction"),
            )
            .await;
        }
        table.init_metadata_table().await.unwrap();
        check(
            &base,
            &storage,
            TableVersion::Nine,
            ordering,
            &step("mdt init"),
        )
        .await;
        let table = Table::open(storage.clone()).await.unwrap();
        table.create_record_index().await.unwrap();
        check(
            &base,
            &storage,
            TableVersion::Nine,
            ordering,
            &step("record index"),
        )
        .await;
        if partitioned {
            let (_, batches) = snapshot(&base).await;
            let b = &batches[0];
            let col = b.column_by_name("_hoodie_partition_path").unwrap();
            let part = arrow::array::cast::as_string_array(col)
                .value(0)
                .to_string();
            table.delete_partitions(&[part]).await.unwrap();
            let n = check(
                &base,
                &storage,
                TableVersion::Nine,
                ordering,
                &step("delete partition"),
            )
            .await;
            assert!(n < start, "{fixture}");
        }
        // Spark's keys are kept as they were: nothing but the metadata partitions changed.
        let after = TableConfig::load(storage.as_ref(), ".hoodie")
            .await
            .unwrap();
        for (k, v) in before.properties().iter() {
            if k.starts_with("hoodie.table.metadata.partitions") || k == keys::CHECKSUM {
                continue;
            }
            assert_eq!(after.get(k), Some(v), "{fixture}: {k}");
        }
    }
}
