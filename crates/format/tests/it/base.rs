//! Parquet base files: every Spark-written fixture base file reads, and arbor's own files
//! round-trip with the layout Spark uses.

use std::path::Path;
use std::sync::Arc;

use arbor_format::base::{
    base_file_metadata, base_file_schema, read_base_file, BaseFileReader, BaseFileWriter,
    Compression, ReadOptions, FOOTER_AVRO_SCHEMA, FOOTER_MAX_RECORD_KEY, FOOTER_MIN_RECORD_KEY,
    FOOTER_WRITER_MODEL,
};
use arbor_format::{meta, FormatError};
use arbor_storage::{ObjectStoreStorage, Storage, StorageError};
use arbor_testkit::{files_with_extension, fixture_zips, fixtures_root_or_skip, unzip};
use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Int32Array, RecordBatch, StringArray,
    TimestampMillisecondArray,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use bytes::Bytes;
use futures::TryStreamExt;
use parquet::basic::{LogicalType, Repetition, TimeUnit as ParquetTimeUnit, Type as PhysicalType};

// ---------------------------------------------------------------------------------------------
// fixtures

fn key_of(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

#[tokio::test]
async fn test_read_base_file_every_fixture_row_counts_match_footer() {
    let Some(root) = fixtures_root_or_skip("base file fixtures") else {
        return;
    };
    let zips = fixture_zips(&root);
    assert!(!zips.is_empty(), "no fixture zips under {}", root.display());
    let mut files_read = 0;
    let mut lance_seen = 0;
    for zip in &zips {
        let dir = unzip(zip);
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
        let parquet = files_with_extension(dir.path(), "parquet");
        for file in &parquet {
            let key = key_of(dir.path(), file);
            let reader = BaseFileReader::open(Arc::clone(&storage), &key)
                .await
                .unwrap();
            let footer_rows = reader.num_rows();
            let group_rows: i64 = reader
                .parquet_metadata()
                .unwrap()
                .row_groups()
                .iter()
                .map(|g| g.num_rows())
                .sum();
            assert_eq!(footer_rows, group_rows as u64, "{key}");
            let batches = read_base_file(Arc::clone(&storage), &key, None, None)
                .await
                .unwrap();
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            assert_eq!(rows as u64, footer_rows, "{key}");
            let schema = base_file_schema(Arc::clone(&storage), &key).await.unwrap();
            for b in &batches {
                assert_eq!(b.schema().fields(), schema.fields(), "{key}");
            }
            // Files with meta columns have the five first, as nullable strings.
            if schema.index_of(meta::RECORD_KEY).is_ok() {
                for (i, name) in meta::META_COLUMNS.iter().enumerate() {
                    let f = schema.field(i);
                    assert_eq!(f.name(), name, "{key}");
                    assert_eq!(f.data_type(), &DataType::Utf8, "{key}");
                    assert!(f.is_nullable(), "{key}");
                }
                // The file name column holds this file's name.
                let name = file.file_name().unwrap().to_string_lossy().to_string();
                let projected = read_base_file(
                    Arc::clone(&storage),
                    &key,
                    None,
                    Some(&[meta::FILE_NAME.to_string()]),
                )
                .await
                .unwrap();
                for b in &projected {
                    assert_eq!(b.num_columns(), 1);
                    let col = b.column(0).as_string::<i32>();
                    assert!(col.iter().all(|v| v == Some(name.as_str())), "{key}");
                }
            }
            files_read += 1;
        }
        let lance = files_with_extension(dir.path(), "lance");
        for file in &lance {
            let key = key_of(dir.path(), file);
            // Lance base files (Hudi 1.2) read like parquet ones: the footer's row count,
            // whole and projected.
            let reader = BaseFileReader::open(Arc::clone(&storage), &key)
                .await
                .unwrap();
            assert_eq!(reader.format(), arbor_format::base::BaseFormat::Lance);
            assert!(reader.parquet_metadata().is_none());
            assert!(
                reader.footer_value(FOOTER_MIN_RECORD_KEY).is_some(),
                "{key}"
            );
            let batches = read_base_file(Arc::clone(&storage), &key, None, None)
                .await
                .unwrap();
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            assert_eq!(rows as u64, reader.num_rows(), "{key}");
            let projected = read_base_file(
                Arc::clone(&storage),
                &key,
                None,
                Some(&[meta::RECORD_KEY.to_string()]),
            )
            .await
            .unwrap();
            assert!(projected.iter().all(|b| b.num_columns() == 1));
            lance_seen += 1;
        }
    }
    assert!(files_read > 50, "only {files_read} base files read");
    assert!(lance_seen > 0, "no lance base file among the fixtures");
}

/// The physical layout Spark wrote, which arbor's writer reproduces.
#[tokio::test]
async fn test_fixture_base_file_types_are_what_the_writer_emits() {
    let Some(root) = fixtures_root_or_skip("spark base file types") else {
        return;
    };
    let zip = root.join("sample_table/cow/v8_complexkeygen_hivestyle.zip");
    let dir = unzip(&zip);
    let storage = ObjectStoreStorage::local(dir.path()).unwrap();
    let parquet = files_with_extension(dir.path(), "parquet");
    let key = key_of(dir.path(), parquet.first().unwrap());
    let md = base_file_metadata(&storage, &key, None).await.unwrap();
    let descr = md.file_metadata().schema_descr();
    let col = |name: &str| {
        descr
            .columns()
            .iter()
            .find(|c| c.path().string() == name)
            .unwrap_or_else(|| panic!("{name} not in {key}"))
            .clone()
    };
    let ts = col("timestampField");
    assert_eq!(ts.physical_type(), PhysicalType::INT64);
    assert_eq!(
        ts.logical_type_ref(),
        Some(&LogicalType::timestamp(true, ParquetTimeUnit::MICROS))
    );
    let dec = col("decimalField");
    assert_eq!(dec.physical_type(), PhysicalType::FIXED_LEN_BYTE_ARRAY);
    assert_eq!(dec.type_length(), 5);
    let date = col("dateField");
    assert_eq!(date.physical_type(), PhysicalType::INT32);
    assert_eq!(date.logical_type_ref(), Some(&LogicalType::Date));
    let rk = col(meta::RECORD_KEY);
    assert_eq!(rk.physical_type(), PhysicalType::BYTE_ARRAY);
    assert_eq!(
        rk.self_type().get_basic_info().repetition(),
        Repetition::OPTIONAL
    );
    let kv = md.file_metadata().key_value_metadata().unwrap();
    for wanted in [
        FOOTER_AVRO_SCHEMA,
        FOOTER_WRITER_MODEL,
        FOOTER_MIN_RECORD_KEY,
        FOOTER_MAX_RECORD_KEY,
    ] {
        assert!(
            kv.iter().any(|e| e.key == wanted),
            "{wanted} missing in {key}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// writer round trips

const INSTANT: &str = "20250101000000000";
const FILE_NAME: &str = "3e93c8a9-fda0-4e8a-91dc-b4ade7dab76d-0_0-1-2_20250101000000000.parquet";

fn data_batch(ids: &[i32]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("active", DataType::Boolean, true),
        Field::new("day", DataType::Date32, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("amount", DataType::Decimal128(10, 5), true),
    ]));
    let n = ids.len();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(ids.to_vec())),
        Arc::new(StringArray::from_iter(
            ids.iter()
                .map(|i| (i % 3 != 0).then(|| format!("name-{i}"))),
        )),
        Arc::new(BooleanArray::from_iter(
            ids.iter().map(|i| Some(i % 2 == 0)),
        )),
        Arc::new(Date32Array::from_iter_values(
            ids.iter().map(|i| 19_000 + i),
        )),
        Arc::new(TimestampMillisecondArray::from_iter_values(
            ids.iter().map(|i| 1_700_000_000_000 + i64::from(*i)),
        )),
        Arc::new(
            Decimal128Array::from_iter_values(ids.iter().map(|i| i128::from(*i) * 100_001))
                .with_precision_and_scale(10, 5)
                .unwrap(),
        ),
    ];
    assert_eq!(columns.len(), 6);
    let b = RecordBatch::try_new(schema, columns).unwrap();
    assert_eq!(b.num_rows(), n);
    b
}

fn avro_schema() -> String {
    BaseFileWriter::avro_schema_with_meta_fields(
        r#"{"type":"record","name":"t_record","namespace":"hoodie.t","fields":[
        {"name":"id","type":"int"},{"name":"name","type":["null","string"],"default":null}]}"#,
    )
    .unwrap()
}

fn writer() -> BaseFileWriter {
    BaseFileWriter::new(INSTANT, FILE_NAME, "region=us", avro_schema()).task_partition_id(3)
}

fn keys(ids: &[i32]) -> Vec<String> {
    ids.iter().map(|i| format!("key-{i:03}")).collect()
}

fn temp_storage() -> (tempfile::TempDir, Arc<dyn Storage>) {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
    (dir, storage)
}

#[tokio::test]
async fn test_write_base_file_round_trip_meta_and_data_columns() {
    let (_dir, storage) = temp_storage();
    let key = format!("region=us/{FILE_NAME}");
    let b1 = data_batch(&[5, 1, 9]);
    let b2 = data_batch(&[2, 7]);
    let ids = [5, 1, 9, 2, 7];
    let written = writer()
        .row_group_rows(2)
        .write(
            storage.as_ref(),
            &key,
            &[b1.clone(), b2.clone()],
            &keys(&ids),
        )
        .await
        .unwrap();
    assert_eq!(written.num_rows, 5);
    assert_eq!(written.min_record_key.as_deref(), Some("key-001"));
    assert_eq!(written.max_record_key.as_deref(), Some("key-009"));
    assert_eq!(written.size, storage.head(&key).await.unwrap().size);

    let reader = BaseFileReader::open(Arc::clone(&storage), &key)
        .await
        .unwrap();
    assert_eq!(reader.num_rows(), 5);
    assert_eq!(reader.parquet_metadata().unwrap().num_row_groups(), 3);
    assert_eq!(reader.footer_value(FOOTER_MIN_RECORD_KEY), Some("key-001"));
    assert_eq!(reader.footer_value(FOOTER_MAX_RECORD_KEY), Some("key-009"));
    assert_eq!(reader.footer_value(FOOTER_WRITER_MODEL), Some("avro"));
    assert_eq!(
        reader.footer_value(FOOTER_AVRO_SCHEMA),
        Some(avro_schema().as_str())
    );
    assert!(reader.footer_value("ARROW:schema").is_none());

    let schema = reader.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        [
            meta::COMMIT_TIME,
            meta::COMMIT_SEQNO,
            meta::RECORD_KEY,
            meta::PARTITION_PATH,
            meta::FILE_NAME,
            "id",
            "name",
            "active",
            "day",
            "ts",
            "amount"
        ]
    );
    assert!(schema.fields().iter().all(|f| f.is_nullable()));
    // Every meta column, constant ones included (fed to parquet as one-value dictionaries),
    // is an optional BYTE_ARRAY STRING column, as parquet-avro writes Avro strings.
    let descr = reader
        .parquet_metadata()
        .unwrap()
        .file_metadata()
        .schema_descr();
    for i in 0..meta::META_COLUMNS.len() {
        let c = descr.column(i);
        assert_eq!(c.physical_type(), PhysicalType::BYTE_ARRAY, "{}", c.name());
        assert_eq!(
            c.logical_type_ref(),
            Some(&LogicalType::String),
            "{}",
            c.name()
        );
        assert_eq!(
            c.self_type().get_basic_info().repetition(),
            Repetition::OPTIONAL
        );
    }

    let batches = read_base_file(Arc::clone(&storage), &key, None, None)
        .await
        .unwrap();
    let all = arrow::compute::concat_batches(&schema, &batches).unwrap();
    assert_eq!(all.num_rows(), 5);
    let s = |i: usize| all.column(i).as_string::<i32>();
    for (row, id) in ids.iter().enumerate() {
        assert_eq!(s(0).value(row), INSTANT);
        assert_eq!(s(1).value(row), format!("{INSTANT}_3_{row}"));
        assert_eq!(s(2).value(row), format!("key-{id:03}"));
        assert_eq!(s(3).value(row), "region=us");
        assert_eq!(s(4).value(row), FILE_NAME);
        assert_eq!(all.column(5).as_primitive::<Int32Type>().value(row), *id);
    }
    // Data columns equal the input, the timestamp keeping its unit and (absent) zone.
    let input = arrow::compute::concat_batches(&b1.schema(), &[b1, b2]).unwrap();
    for c in [1usize, 2, 3, 4, 5] {
        assert_eq!(
            all.column(5 + c).as_ref(),
            input.column(c).as_ref(),
            "column {c}"
        );
    }

    // Physical types as Spark writes them.
    let descr = reader
        .parquet_metadata()
        .unwrap()
        .file_metadata()
        .schema_descr_ptr();
    let col = |name: &str| {
        descr
            .columns()
            .iter()
            .find(|c| c.path().string() == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        col("amount").physical_type(),
        PhysicalType::FIXED_LEN_BYTE_ARRAY
    );
    assert_eq!(col("amount").type_length(), 5);
    assert_eq!(
        col("ts").logical_type_ref(),
        Some(&LogicalType::timestamp(false, ParquetTimeUnit::MILLIS))
    );
    assert_eq!(
        col(meta::RECORD_KEY)
            .self_type()
            .get_basic_info()
            .repetition(),
        Repetition::OPTIONAL
    );
    let codec = reader
        .parquet_metadata()
        .unwrap()
        .row_group(0)
        .column(0)
        .compression();
    assert_eq!(codec, parquet::basic::Compression::SNAPPY);
}

#[tokio::test]
async fn test_write_base_file_existing_key_already_exists_and_untouched() {
    let (_dir, storage) = temp_storage();
    let key = FILE_NAME.to_string();
    let first = writer()
        .write(storage.as_ref(), &key, &[data_batch(&[1])], &keys(&[1]))
        .await
        .unwrap();
    let err = writer()
        .write(
            storage.as_ref(),
            &key,
            &[data_batch(&[1, 2])],
            &keys(&[1, 2]),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::Storage(StorageError::AlreadyExists { .. })
        ),
        "{err:?}"
    );
    assert_eq!(storage.head(&key).await.unwrap().size, first.size);
}

#[tokio::test]
async fn test_write_base_file_preserved_commit_metadata_and_zstd() {
    let (_dir, storage) = temp_storage();
    let key = FILE_NAME.to_string();
    writer()
        .compression(Compression::Zstd(3))
        .preserve_commit_metadata(
            vec!["20240101000000000".into(), "20240202000000000".into()],
            vec![
                "20240101000000000_0_7".into(),
                "20240202000000000_1_0".into(),
            ],
        )
        .write(
            storage.as_ref(),
            &key,
            &[data_batch(&[1, 2])],
            &keys(&[1, 2]),
        )
        .await
        .unwrap();
    let projection = [
        meta::COMMIT_SEQNO.to_string(),
        meta::COMMIT_TIME.to_string(),
    ];
    let batches = read_base_file(Arc::clone(&storage), &key, None, Some(&projection))
        .await
        .unwrap();
    let b = batches.first().unwrap();
    assert_eq!(b.schema().field(0).name(), meta::COMMIT_SEQNO);
    assert_eq!(
        b.column(0).as_string::<i32>().value(1),
        "20240202000000000_1_0"
    );
    assert_eq!(b.column(1).as_string::<i32>().value(0), "20240101000000000");
    let reader = BaseFileReader::open(Arc::clone(&storage), &key)
        .await
        .unwrap();
    assert!(matches!(
        reader
            .parquet_metadata()
            .unwrap()
            .row_group(0)
            .column(0)
            .compression(),
        parquet::basic::Compression::ZSTD(_)
    ));
}

#[tokio::test]
async fn test_encode_bad_input_errors() {
    // Key count differs from the row count.
    let err = writer()
        .encode("k.parquet", &[data_batch(&[1, 2])], &keys(&[1]))
        .unwrap_err();
    assert!(
        matches!(&err, FormatError::Arrow { path, .. } if path == "k.parquet"),
        "{err:?}"
    );
    // Meta columns in the data.
    let schema = Arc::new(Schema::new(vec![Field::new(
        meta::RECORD_KEY,
        DataType::Utf8,
        true,
    )]));
    let b = RecordBatch::try_new(
        schema,
        vec![Arc::new(StringArray::from(vec!["a"])) as ArrayRef],
    )
    .unwrap();
    let err = writer().encode("k.parquet", &[b], &keys(&[1])).unwrap_err();
    assert!(
        matches!(&err, FormatError::Schema { field: Some(f), .. } if f == meta::RECORD_KEY),
        "{err:?}"
    );
    // Batches with different schemas.
    let other = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, true)])),
        vec![Arc::new(Int32Array::from(vec![1])) as ArrayRef],
    )
    .unwrap();
    let err = writer()
        .encode("k.parquet", &[data_batch(&[1]), other], &keys(&[1, 2]))
        .unwrap_err();
    assert!(matches!(err, FormatError::Arrow { .. }), "{err:?}");
}

#[tokio::test]
async fn test_read_base_file_garbage_and_truncated_errors_name_path() {
    let (_dir, storage) = temp_storage();
    let garbage = "p/garbage_0-1-2_20250101000000000.parquet";
    storage
        .put(
            garbage,
            Bytes::from_static(b"this is not a parquet file at all, not even close"),
        )
        .await
        .unwrap();
    let err = read_base_file(Arc::clone(&storage), garbage, None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FormatError::Parquet { path, .. } if path == garbage),
        "{err:?}"
    );
    assert!(err.to_string().contains(garbage));

    let good = writer()
        .encode("x", &[data_batch(&[1, 2, 3, 4])], &keys(&[1, 2, 3, 4]))
        .unwrap();
    let truncated = "p/truncated_0-1-2_20250101000000000.parquet";
    let half = good.bytes.slice(0..good.bytes.len() / 2);
    storage.put(truncated, half).await.unwrap();
    let err = read_base_file(Arc::clone(&storage), truncated, None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FormatError::Parquet { path, .. } if path == truncated),
        "{err:?}"
    );

    // Footer intact, data pages cut out: the footer parses, decoding fails.
    let mut spliced = good.bytes.to_vec();
    for b in spliced.iter_mut().skip(4).take(good.bytes.len() / 3) {
        *b = 0xAB;
    }
    let corrupt = "p/corrupt_0-1-2_20250101000000000.parquet";
    storage.put(corrupt, Bytes::from(spliced)).await.unwrap();
    let err = read_base_file(Arc::clone(&storage), corrupt, None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FormatError::Parquet { path, .. } if path == corrupt),
        "{err:?}"
    );
}

#[tokio::test]
async fn test_read_base_file_missing_is_not_found_and_unknown_column_schema_error() {
    let (_dir, storage) = temp_storage();
    let err = read_base_file(Arc::clone(&storage), "nope.parquet", None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FormatError::Storage(ref e) if e.is_not_found()),
        "{err:?}"
    );

    writer()
        .write(
            storage.as_ref(),
            FILE_NAME,
            &[data_batch(&[1])],
            &keys(&[1]),
        )
        .await
        .unwrap();
    let err = read_base_file(
        Arc::clone(&storage),
        FILE_NAME,
        None,
        Some(&["nope".to_string()]),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, FormatError::Schema { field: Some(f), .. } if f == "nope"),
        "{err:?}"
    );
}

#[tokio::test]
async fn test_base_file_reader_stream_batch_size_splits_rows() {
    let (_dir, storage) = temp_storage();
    let ids: Vec<i32> = (0..10).collect();
    writer()
        .write(
            storage.as_ref(),
            FILE_NAME,
            &[data_batch(&ids)],
            &keys(&ids),
        )
        .await
        .unwrap();
    let reader = BaseFileReader::open(Arc::clone(&storage), FILE_NAME)
        .await
        .unwrap();
    let options = ReadOptions {
        projection: Some(vec!["id".into()]),
        batch_size: 3,
    };
    let batches: Vec<RecordBatch> = reader
        .stream(&options)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let sizes: Vec<usize> = batches.iter().map(RecordBatch::num_rows).collect();
    assert_eq!(sizes, [3, 3, 3, 1]);
}

/// A table without meta fields: the five meta columns are written (as Spark does) but only
/// `_hoodie_file_name` holds values, and the footer has no record key range.
#[tokio::test]
async fn test_write_base_file_without_meta_values() {
    let (_dir, storage) = temp_storage();
    let key = format!("region=us/{FILE_NAME}");
    let written = writer()
        .populate_meta_fields(false)
        .write(
            storage.as_ref(),
            &key,
            &[data_batch(&[3, 1])],
            &keys(&[3, 1]),
        )
        .await
        .unwrap();
    assert_eq!(written.num_rows, 2);
    assert_eq!(written.min_record_key, None);
    assert_eq!(written.max_record_key, None);
    let reader = BaseFileReader::open(Arc::clone(&storage), &key)
        .await
        .unwrap();
    assert_eq!(reader.footer_value(FOOTER_MIN_RECORD_KEY), None);
    assert_eq!(reader.footer_value(FOOTER_MAX_RECORD_KEY), None);
    let batches = read_base_file(Arc::clone(&storage), &key, None, None)
        .await
        .unwrap();
    let all = arrow::compute::concat_batches(&reader.schema(), &batches).unwrap();
    for c in [
        meta::COMMIT_TIME,
        meta::COMMIT_SEQNO,
        meta::RECORD_KEY,
        meta::PARTITION_PATH,
    ] {
        assert_eq!(all.column_by_name(c).unwrap().null_count(), 2, "{c}");
    }
    let names = all
        .column_by_name(meta::FILE_NAME)
        .unwrap()
        .as_string::<i32>();
    assert!(names.iter().all(|n| n == Some(FILE_NAME)));
    assert_eq!(
        all.column_by_name("id")
            .unwrap()
            .as_primitive::<Int32Type>()
            .values()
            .to_vec(),
        [3, 1]
    );
}

/// A (nearly) unique data column large enough to overflow its dictionary page is written
/// plain from the first row; a repeated one keeps its dictionary; both read back unchanged.
#[tokio::test]
async fn test_write_unique_column_plain_repeated_column_dictionary_values_unchanged() {
    let (_dir, storage) = temp_storage();
    let key = format!("region=us/{FILE_NAME}");
    let ids: Vec<i32> = (0..300_000).collect();
    let mut batch = data_batch(&ids);
    // `name` repeats ten values; `id` is unique (1.2 MB of dictionary at 4 bytes a value).
    let names: ArrayRef = Arc::new(StringArray::from_iter_values(
        ids.iter().map(|i| format!("name-{}", i % 10)),
    ));
    let mut columns = batch.columns().to_vec();
    columns[1] = names;
    batch = RecordBatch::try_new(batch.schema(), columns).unwrap();
    let record_keys: Vec<String> = ids.iter().map(|i| format!("key-{i:06}")).collect();
    writer()
        .write(
            storage.as_ref(),
            &key,
            std::slice::from_ref(&batch),
            &record_keys,
        )
        .await
        .unwrap();
    let reader = BaseFileReader::open(Arc::clone(&storage), &key)
        .await
        .unwrap();
    let meta = reader.parquet_metadata().unwrap();
    let group = meta.row_group(0);
    let column = |name: &str| {
        group
            .columns()
            .iter()
            .find(|c| c.column_path().string() == name)
            .unwrap()
    };
    assert!(
        column("id").dictionary_page_offset().is_none(),
        "id is plain"
    );
    assert!(
        column("name").dictionary_page_offset().is_some(),
        "name keeps its dictionary"
    );
    let read = read_base_file(Arc::clone(&storage), &key, None, None)
        .await
        .unwrap();
    let rows: usize = read.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, ids.len());
    let mut at = 0usize;
    for b in &read {
        for name in ["id", "name", "day", "amount"] {
            let want = batch.column_by_name(name).unwrap().slice(at, b.num_rows());
            assert_eq!(
                b.column_by_name(name).unwrap().as_ref(),
                want.as_ref(),
                "{name}"
            );
        }
        at += b.num_rows();
    }
}

/// A file written batch by batch is byte for byte the file `encode_keyed` writes for the same
/// rows (sequence numbers continue across batches, the key range spans them all); a batch of
/// another schema or with a key count that does not match is refused, and a stream with
/// preserved commit metadata for other rows does not finish.
#[test]
fn test_open_stream_writes_the_same_bytes_as_encode_keyed_and_refuses_bad_batches() {
    let key = format!("region=us/{FILE_NAME}");
    let ids = [5, 1, 9, 2, 7, 3];
    let (b1, b2) = (data_batch(&ids[..4]), data_batch(&ids[4..]));
    let all_keys = StringArray::from_iter_values(keys(&ids));
    let w = writer().row_group_rows(3);
    let whole = w
        .encode_keyed(&key, &[b1.clone(), b2.clone()], &all_keys)
        .unwrap();
    let mut stream = w
        .open_stream(&key, b1.schema(), &[b1.clone(), b2.clone()])
        .unwrap();
    stream.write(&b1, &all_keys.slice(0, 4)).unwrap();
    assert_eq!(stream.rows(), 4);
    assert!(stream.size_estimate() > 0);
    // Refused batches leave the stream as it was.
    let other = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)])),
        vec![Arc::new(Int32Array::from(vec![1]))],
    )
    .unwrap();
    assert!(stream.write(&other, &all_keys.slice(0, 1)).is_err());
    assert!(stream.write(&b2, &all_keys.slice(0, 1)).is_err());
    assert_eq!(stream.rows(), 4);
    stream.write(&b2, &all_keys.slice(4, 2)).unwrap();
    let streamed = stream.finish().unwrap();
    assert_eq!(streamed.bytes, whole.bytes);
    assert_eq!(streamed.num_rows, 6);
    assert_eq!(streamed.min_record_key.as_deref(), Some("key-001"));
    assert_eq!(streamed.max_record_key.as_deref(), Some("key-009"));

    let preserved = writer().preserve_commit_metadata_arrays(
        StringArray::from_iter_values(["t"; 6]),
        StringArray::from_iter_values(["s"; 6]),
    );
    let mut short = preserved.open_stream(&key, b1.schema(), &[]).unwrap();
    short.write(&b1, &all_keys.slice(0, 4)).unwrap();
    let err = short.finish().unwrap_err().to_string();
    assert!(err.contains("6 preserved commit times"), "{err}");
}

/// A stream whose row groups are cut by the caller (and whose pages are small) holds every
/// row once, in order, in one row group per cut; cutting frees the memory the row group in
/// progress held, and a cut without rows adds no row group.
#[tokio::test]
async fn test_a_stream_cut_into_row_groups_with_small_pages_reads_every_row() {
    let (_dir, storage) = temp_storage();
    let key = format!("region=us/{FILE_NAME}");
    let ids: Vec<i32> = (0..3_000).collect();
    let w = writer().data_page_bytes(4 * 1024);
    let first = data_batch(&ids[..1_000]);
    let mut stream = w.open_stream(&key, first.schema(), &[first]).unwrap();
    for chunk in ids.chunks(1_000) {
        let batch = data_batch(chunk);
        stream
            .write(&batch, &StringArray::from_iter_values(keys(chunk)))
            .unwrap();
        assert!(stream.row_group_memory() > 0);
        let held = stream.memory_size();
        stream.flush_row_group().unwrap();
        assert_eq!(stream.row_group_memory(), 0);
        assert!(stream.memory_size() < held, "a cut frees encoder state");
        // A second cut has nothing to encode.
        stream.flush_row_group().unwrap();
    }
    let encoded = stream.finish().unwrap();
    let bytes = encoded.bytes.clone();
    encoded.store(storage.as_ref(), &key).await.unwrap();
    let meta = parquet::file::reader::SerializedFileReader::new(bytes).unwrap();
    use parquet::file::reader::FileReader;
    assert_eq!(meta.metadata().num_row_groups(), 3);
    let read = read_base_file(Arc::clone(&storage), &key, None, None)
        .await
        .unwrap();
    let read_ids: Vec<i32> = read
        .iter()
        .flat_map(|b| {
            b.column_by_name("id")
                .unwrap()
                .as_primitive::<Int32Type>()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(read_ids, ids);
}

#[tokio::test]
async fn test_a_small_file_of_known_size_is_read_with_one_request_a_large_one_by_ranges() {
    use arbor_storage::{FaultInjectingStorage, OpKind};
    let (_dir, storage) = temp_storage();
    let small_ids: Vec<i32> = (0..20).collect();
    let large_ids: Vec<i32> = (0..40_000).collect();
    let mut sizes = Vec::new();
    for (name, ids) in [("small", &small_ids), ("large", &large_ids)] {
        let key = format!("{name}/{FILE_NAME}");
        let written = writer()
            .write(storage.as_ref(), &key, &[data_batch(ids)], &keys(ids))
            .await
            .unwrap();
        sizes.push((key, written.size, ids.len()));
    }
    assert!(
        sizes[0].1 <= 64 * 1024 && sizes[1].1 > 64 * 1024,
        "{sizes:?}"
    );
    for (key, size, rows) in &sizes {
        let counter = Arc::new(FaultInjectingStorage::new(Arc::clone(&storage)));
        let counted: Arc<dyn Storage> = counter.clone();
        // Read twice: whole, then projected.
        let all = read_base_file(Arc::clone(&counted), key, Some(*size), None)
            .await
            .unwrap();
        assert_eq!(all.iter().map(|b| b.num_rows()).sum::<usize>(), *rows);
        let projected = ["id".to_string()];
        let one = read_base_file(Arc::clone(&counted), key, Some(*size), Some(&projected))
            .await
            .unwrap();
        assert_eq!(one.iter().map(|b| b.num_rows()).sum::<usize>(), *rows);
        let ops = counter.ops();
        assert!(ops.iter().all(|o| o.kind != OpKind::Head), "{key}: {ops:?}");
        let gets = ops.iter().filter(|o| o.kind == OpKind::Get).count();
        let ranges = ops.iter().filter(|o| o.kind == OpKind::GetRange).count();
        if *size <= 64 * 1024 {
            // One whole-object GET per open; the data come from it.
            assert_eq!((gets, ranges), (2, 0), "{key}: {ops:?}");
        } else {
            assert_eq!(gets, 0, "{key}: {ops:?}");
            assert!(ranges >= 4, "{key}: {ops:?}");
        }
        // The same rows as through a head.
        let headed = read_base_file(Arc::clone(&storage), key, None, None)
            .await
            .unwrap();
        assert_eq!(headed, all);
    }
}
