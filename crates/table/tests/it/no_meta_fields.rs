//! Tables without meta fields (`hoodie.populate.meta.fields=false`): record keys come from the
//! data columns through the key generator, so deletes and upserts find the stored records
//! (regression: a delete of three rows of such a table once deleted nothing and committed),
//! and written files keep Spark's shape (meta columns present, null but `_hoodie_file_name`).

use std::path::Path;
use std::sync::Arc;

use arbor_format::meta;
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::{Table, WriteOperation};
use arbor_testkit::{
    assert_peer_snapshot_matches, files_with_extension, fixtures_root_or_skip, unzip_table,
};
use arrow::array::{Array, AsArray, BooleanArray, Int32Array, RecordBatch, StringArray};
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::Int32Type;

const FIXTURE: &str = "sample_table/cow/v8_simplekeygen_hivestyle_no_metafields.zip";

/// The fixture table unzipped to a temporary directory, or `None` (visibly skipped).
fn fixture() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    let root = fixtures_root_or_skip("tables without meta fields")?;
    Some(unzip_table(&root.join(FIXTURE)))
}

async fn snapshot(storage: &Arc<dyn Storage>) -> (TableReader, RecordBatch) {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    let batches = reader.snapshot(None).await.unwrap();
    let all = concat_batches(reader.schema(), &batches).unwrap();
    (reader, all)
}

fn ids(batch: &RecordBatch) -> Vec<i32> {
    let mut out: Vec<i32> = batch
        .column_by_name("id")
        .unwrap()
        .as_primitive::<Int32Type>()
        .iter()
        .map(Option::unwrap)
        .collect();
    out.sort_unstable();
    out
}

fn rows_with_ids(batch: &RecordBatch, wanted: &[i32]) -> RecordBatch {
    let id = batch
        .column_by_name("id")
        .unwrap()
        .as_primitive::<Int32Type>();
    let mask: BooleanArray = id
        .iter()
        .map(|v| Some(v.is_some_and(|v| wanted.contains(&v))))
        .collect();
    filter_record_batch(batch, &mask).unwrap()
}

fn with_column(batch: &RecordBatch, name: &str, values: arrow::array::ArrayRef) -> RecordBatch {
    let schema = batch.schema();
    let i = schema.index_of(name).unwrap();
    let mut columns = batch.columns().to_vec();
    columns[i] = values;
    RecordBatch::try_new(schema, columns).unwrap()
}

/// Every parquet file of the table keeps the meta columns with null values but the file name,
/// as Spark writes a table without meta fields.
async fn assert_files_have_null_meta_values(base: &Path) {
    for file in files_with_extension(base, "parquet") {
        if file.to_string_lossy().contains("/.hoodie/") {
            continue;
        }
        let dir = file.parent().unwrap();
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir).unwrap());
        for b in arbor_format::base::read_base_file(storage, &name, None, None)
            .await
            .unwrap()
        {
            for column in [
                meta::COMMIT_TIME,
                meta::COMMIT_SEQNO,
                meta::RECORD_KEY,
                meta::PARTITION_PATH,
            ] {
                let c = b.column_by_name(column).unwrap();
                assert_eq!(c.null_count(), c.len(), "{name}: {column} must stay null");
            }
            let names = b.column_by_name(meta::FILE_NAME).unwrap();
            let names = names.as_string::<i32>();
            assert!(names.iter().all(|n| n == Some(name.as_str())), "{name}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_no_meta_fields_delete_removes_the_named_rows() {
    let Some((_tmp, base)) = fixture() else {
        return;
    };
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let (_, before) = snapshot(&storage).await;
    assert_eq!(ids(&before), vec![1, 2, 3, 4]);

    let table = Table::open(storage.clone()).await.unwrap();
    let doomed = rows_with_ids(&before, &[1, 2, 3]);
    let result = table
        .write(WriteOperation::Delete, vec![doomed])
        .await
        .unwrap();
    assert_eq!(result.deleted, 3, "{result:?}");
    let (reader, after) = snapshot(&storage).await;
    assert_eq!(ids(&after), vec![4]);
    assert_files_have_null_meta_values(&base).await;
    if let Some(python) = arbor_testkit::peer_python_or_skip("no-meta-fields peer check") {
        assert_peer_snapshot_matches(&python, &base, reader.schema(), &[after], "delete");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_no_meta_fields_upsert_updates_and_inserts_into_spark_partition() {
    let Some((_tmp, base)) = fixture() else {
        return;
    };
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let (_, before) = snapshot(&storage).await;
    let table = Table::open(storage.clone()).await.unwrap();

    // Update Alice (id 1, byteField 10) and Bob (id 2, byteField 20) in place.
    let changed = rows_with_ids(&before, &[1, 2]);
    let names: Vec<String> = changed
        .column_by_name("name")
        .unwrap()
        .as_string::<i32>()
        .iter()
        .map(|n| format!("{}-v2", n.unwrap()))
        .collect();
    let changed = with_column(&changed, "name", Arc::new(StringArray::from(names)));
    let result = table
        .write(WriteOperation::Upsert, vec![changed])
        .await
        .unwrap();
    assert_eq!((result.inserted, result.updated), (0, 2), "{result:?}");

    // A new key with Diana's values but id 5 goes to Diana's partition, byteField=30.
    let new_row = rows_with_ids(&before, &[4]);
    let new_row = with_column(&new_row, "id", Arc::new(Int32Array::from(vec![5])));
    let result = table
        .write(WriteOperation::Upsert, vec![new_row])
        .await
        .unwrap();
    assert_eq!((result.inserted, result.updated), (1, 0), "{result:?}");

    let (reader, after) = snapshot(&storage).await;
    assert_eq!(
        ids(&after),
        vec![1, 2, 3, 4, 5],
        "an upsert must not duplicate"
    );
    let alice = rows_with_ids(&after, &[1]);
    assert_eq!(
        alice
            .column_by_name("name")
            .unwrap()
            .as_string::<i32>()
            .value(0),
        "Alice-v2"
    );
    let in_30 = files_with_extension(&base.join("byteField=30"), "parquet");
    assert_eq!(
        in_30.len(),
        2,
        "the new row's file is in byteField=30: {in_30:?}"
    );
    assert_files_have_null_meta_values(&base).await;

    // A delete of a key the table does not hold deletes nothing, as for tables with meta
    // fields, and leaves every row.
    let absent = with_column(
        &rows_with_ids(&after, &[3]),
        "id",
        Arc::new(Int32Array::from(vec![42])),
    );
    let result = table
        .write(WriteOperation::Delete, vec![absent])
        .await
        .unwrap();
    assert_eq!(result.deleted, 0);
    let (_, unchanged) = snapshot(&storage).await;
    assert_eq!(ids(&unchanged), vec![1, 2, 3, 4, 5]);
    if let Some(python) = arbor_testkit::peer_python_or_skip("no-meta-fields peer check") {
        assert_peer_snapshot_matches(&python, &base, reader.schema(), &[after], "upsert");
    }
}
