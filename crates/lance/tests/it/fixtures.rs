//! The Lance base files Spark (Hudi 1.2) wrote in `../shared/fixtures`.

use std::path::Path;
use std::sync::Arc;

use arbor_lance::{LanceError, LanceFileReader};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_testkit::{files_with_extension, fixture_zips, fixtures_root_or_skip, unzip};
use arrow_array::cast::AsArray;
use arrow_array::RecordBatch;
use arrow_schema::DataType;
use futures::TryStreamExt;

fn key_of(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

#[tokio::test]
async fn test_every_fixture_lance_file_reads_whole_and_projected() {
    let Some(root) = fixtures_root_or_skip("lance fixtures") else {
        return;
    };
    let mut files = 0;
    for zip in fixture_zips(&root) {
        if !zip.to_string_lossy().contains("lance") {
            continue;
        }
        let dir = unzip(&zip);
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
        for file in files_with_extension(dir.path(), "lance") {
            let key = key_of(dir.path(), &file);
            let size = std::fs::metadata(&file).unwrap().len();
            let reader = LanceFileReader::open(Arc::clone(&storage), &key, size)
                .await
                .unwrap();
            let schema = reader.schema();
            assert_eq!(schema.field(0).name(), "_hoodie_commit_time", "{key}");
            assert_eq!(schema.field(2).name(), "_hoodie_record_key", "{key}");
            let all: Vec<RecordBatch> =
                reader.stream(None, 3).unwrap().try_collect().await.unwrap();
            let rows: usize = all.iter().map(RecordBatch::num_rows).sum();
            assert_eq!(rows as u64, reader.num_rows(), "{key}");
            assert!(all.iter().all(|b| b.num_rows() <= 3));
            // Hudi's record key range, in the schema metadata, bounds the keys read.
            let keys: Vec<String> = all
                .iter()
                .flat_map(|b| {
                    b.column(2)
                        .as_string::<i32>()
                        .iter()
                        .map(|k| k.unwrap().to_string())
                        .collect::<Vec<_>>()
                })
                .collect();
            let min = reader.metadata().get("hoodie_min_record_key").unwrap();
            let max = reader.metadata().get("hoodie_max_record_key").unwrap();
            assert_eq!(keys.iter().min().unwrap(), min, "{key}");
            assert_eq!(keys.iter().max().unwrap(), max, "{key}");
            // A projection in another order than the file's.
            let last = schema.field(schema.fields().len() - 1).name().clone();
            let names = vec![last.clone(), "_hoodie_record_key".to_string()];
            let projected: Vec<RecordBatch> = reader
                .stream(Some(&names), 1024)
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            let first = &projected[0];
            assert_eq!(first.schema().field(0).name(), &last);
            assert_eq!(first.schema().field(1).data_type(), &DataType::Utf8);
            assert_eq!(
                projected.iter().map(RecordBatch::num_rows).sum::<usize>(),
                rows
            );
            let keys_projected: Vec<&str> = projected
                .iter()
                .flat_map(|b| b.column(1).as_string::<i32>().iter().map(Option::unwrap))
                .collect();
            assert_eq!(
                keys_projected,
                keys.iter().map(String::as_str).collect::<Vec<_>>()
            );
            // No columns: the row count only.
            let counted: Vec<RecordBatch> = reader
                .stream(Some(&[]), 1)
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            assert_eq!(counted.len(), rows);
            // An unknown column names itself.
            let err = reader
                .stream(Some(&["nope".to_string()]), 10)
                .err()
                .unwrap();
            assert!(
                matches!(err, LanceError::Schema { ref column, .. } if column == "nope"),
                "{err}"
            );
            files += 1;
        }
    }
    if files == 0 {
        arbor_testkit::skip("no lance file among the fixtures");
    }
}

#[tokio::test]
async fn test_garbage_truncated_and_missing_files_are_errors_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
    storage
        .put("g.lance", bytes::Bytes::from(vec![7u8; 5000]))
        .await
        .unwrap();
    let err = LanceFileReader::open(Arc::clone(&storage), "g.lance", 5000)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("g.lance"), "{err}");
    let err = LanceFileReader::open(Arc::clone(&storage), "missing.lance", 100)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("missing.lance"), "{err}");
}
