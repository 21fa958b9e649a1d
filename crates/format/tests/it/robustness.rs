//! Hostile or damaged input: recursive Avro schemas, schema errors that must name the log file
//! and block, record counts read from a block, and parquet footers with impossible row counts.

use std::collections::BTreeMap;
use std::sync::Arc;

use apache_avro::types::Value;
use arbor_format::avro_arrow::{
    avro_records_to_batch, avro_schema_to_arrow, batch_to_avro_records, parse_avro_schema,
};
use arbor_format::base::BaseFileReader;
use arbor_format::log::{
    decode_avro_data_block, decode_data_block, encode_avro_data_block, encode_block,
    encode_parquet_data_block, read_log_file, BlockType, HeaderKey,
};
use arbor_format::FormatError;
use arbor_storage::{ObjectStoreStorage, Storage};
use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader, ParquetMetaDataWriter};
use parquet::file::properties::WriterProperties;

const SELF_RECURSIVE: &str = r#"{"type":"record","name":"N","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","N"]}]}"#;

fn assert_recursive_error(err: &FormatError, field: &str) {
    match err {
        FormatError::Schema {
            field: Some(f),
            reason,
        } => {
            assert_eq!(f, field, "{err}");
            assert!(reason.contains("recursive"), "{err}");
        }
        other => panic!("expected a schema error naming {field:?}, got {other:?}"),
    }
}

#[test]
fn test_avro_schema_to_arrow_self_recursive_record_errors_naming_field() {
    let avro = parse_avro_schema(SELF_RECURSIVE).unwrap();
    let err = avro_schema_to_arrow(&avro).unwrap_err();
    assert_recursive_error(&err, "next");
}

#[test]
fn test_avro_schema_to_arrow_mutual_recursion_through_array_and_map_errors() {
    // A -> b: B -> as: array<A>
    let via_array = r#"{"type":"record","name":"A","fields":[{"name":"b","type":{"type":"record","name":"B","fields":[{"name":"as","type":{"type":"array","items":"A"}}]}}]}"#;
    let err = avro_schema_to_arrow(&parse_avro_schema(via_array).unwrap()).unwrap_err();
    assert_recursive_error(&err, "b.as");
    let via_map = r#"{"type":"record","name":"M","fields":[{"name":"m","type":{"type":"map","values":["null","M"]}}]}"#;
    let err = avro_schema_to_arrow(&parse_avro_schema(via_map).unwrap()).unwrap_err();
    assert_recursive_error(&err, "m");
}

#[test]
fn test_avro_schema_to_arrow_named_type_used_twice_is_not_recursion() {
    let reused = r#"{"type":"record","name":"r","fields":[{"name":"a","type":{"type":"record","name":"P","fields":[{"name":"x","type":"int"}]}},{"name":"b","type":["null","P"]}]}"#;
    let arrow = avro_schema_to_arrow(&parse_avro_schema(reused).unwrap()).unwrap();
    assert_eq!(arrow.fields().len(), 2);
    assert_eq!(arrow.field(0).data_type(), arrow.field(1).data_type());
    assert!(arrow.field(1).is_nullable());
}

#[test]
fn test_avro_records_to_batch_recursive_schema_errors_instead_of_overflowing() {
    let avro = parse_avro_schema(SELF_RECURSIVE).unwrap();
    let record = Value::Record(vec![
        ("v".into(), Value::Int(1)),
        ("next".into(), Value::Union(0, Box::new(Value::Null))),
    ]);
    let target = Arc::new(Schema::new(vec![Field::new("v", DataType::Int32, false)]));
    let err = avro_records_to_batch(&avro, &[record], &target).unwrap_err();
    assert_recursive_error(&err, "next");
    let batch = RecordBatch::try_new(
        target,
        vec![Arc::new(arrow::array::Int32Array::from(vec![1]))],
    )
    .unwrap();
    let err = batch_to_avro_records(&batch, &avro).unwrap_err();
    assert_recursive_error(&err, "next");
}

/// A log block whose `SCHEMA` header is recursive and whose single record nests `depth` levels
/// (each level is a union index and an int: 2 bytes).
fn recursive_block(depth: usize) -> Bytes {
    let mut datum = Vec::with_capacity(depth * 2 + 2);
    for _ in 0..depth {
        datum.push(0); // v = 0 (zigzag)
        datum.push(2); // union branch 1 ("N")
    }
    datum.push(0); // v = 0
    datum.push(0); // union branch 0 (null)
    let mut content = Vec::new();
    content.extend_from_slice(&3i32.to_be_bytes());
    content.extend_from_slice(&1i32.to_be_bytes());
    content.extend_from_slice(&i32::try_from(datum.len()).unwrap().to_be_bytes());
    content.extend_from_slice(&datum);
    let mut header = BTreeMap::new();
    header.insert(HeaderKey::InstantTime, "20240101000000000".to_string());
    header.insert(HeaderKey::Schema, SELF_RECURSIVE.to_string());
    encode_block(BlockType::AvroData, &header, &content, &BTreeMap::new()).unwrap()
}

#[test]
fn test_decode_data_block_recursive_schema_header_errors_naming_file_and_field() {
    // Deep enough that following the data recursively would overflow a test thread's stack.
    let bytes = recursive_block(200_000);
    let contents = read_log_file(&bytes, "p/.f_1.log.1_0-1-0").unwrap();
    assert_eq!(contents.blocks.len(), 1);
    let block = &contents.blocks[0];
    for err in [
        decode_avro_data_block(block, "p/.f_1.log.1_0-1-0").unwrap_err(),
        decode_data_block(block, "p/.f_1.log.1_0-1-0", None).unwrap_err(),
    ] {
        match &err {
            FormatError::Avro { path, reason } => {
                assert!(path.contains("p/.f_1.log.1_0-1-0"), "{err}");
                assert!(path.contains("offset 0"), "{err}");
                assert!(
                    reason.contains("\"next\"") && reason.contains("recursive"),
                    "{err}"
                );
            }
            other => panic!("expected an Avro error, got {other:?}"),
        }
    }
}

fn kv_schema_json() -> &'static str {
    r#"{"type":"record","name":"r","fields":[{"name":"k","type":"string"},{"name":"n","type":"long"}]}"#
}

fn kv_records(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            Value::Record(vec![
                ("k".into(), Value::String(format!("key{i}"))),
                ("n".into(), Value::Long(i as i64)),
            ])
        })
        .collect()
}

/// Two blocks in one file, so the second one's offset is not 0.
fn two_block_log() -> (Bytes, u64) {
    let first =
        encode_avro_data_block("20240101000000000", kv_schema_json(), &kv_records(1)).unwrap();
    let second =
        encode_avro_data_block("20240101000000001", kv_schema_json(), &kv_records(2)).unwrap();
    let offset = first.len() as u64;
    let mut all = first.to_vec();
    all.extend_from_slice(&second);
    (Bytes::from(all), offset)
}

#[test]
fn test_decode_data_block_avro_missing_required_column_names_file_block_and_field() {
    let (bytes, offset) = two_block_log();
    let contents = read_log_file(&bytes, "a/.g_1.log.1_0-1-0").unwrap();
    let block = &contents.blocks[1];
    assert_eq!(block.offset, offset);
    let target = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, false),
        Field::new("required_new", DataType::Int64, false),
    ]));
    let err = decode_data_block(block, "a/.g_1.log.1_0-1-0", Some(&target)).unwrap_err();
    match &err {
        FormatError::Avro { path, reason } => {
            assert_eq!(
                path,
                &format!("a/.g_1.log.1_0-1-0 (block at offset {offset})"),
                "{err}"
            );
            assert!(reason.contains("\"required_new\""), "{err}");
        }
        other => panic!("expected an Avro error naming the block, got {other:?}"),
    }
    // A cast that cannot succeed is located the same way.
    let target = Arc::new(Schema::new(vec![Field::new(
        "k",
        DataType::Struct(vec![Field::new("x", DataType::Int32, true)].into()),
        true,
    )]));
    let err = decode_data_block(block, "a/.g_1.log.1_0-1-0", Some(&target)).unwrap_err();
    match &err {
        FormatError::Avro { path, reason } => {
            assert!(path.contains(&format!("offset {offset}")), "{err}");
            assert!(reason.contains("\"k\""), "{err}");
        }
        other => panic!("expected an Avro error naming the block, got {other:?}"),
    }
}

fn parquet_bytes(batch: &RecordBatch, props: Option<WriterProperties>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, batch.schema(), props).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    out
}

fn kv_batch(n: usize) -> RecordBatch {
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, false),
            Field::new("n", DataType::Int64, false),
        ])),
        vec![
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("key{i}")),
            )),
            Arc::new(Int64Array::from_iter_values(0..n as i64)),
        ],
    )
    .unwrap()
}

#[test]
fn test_decode_data_block_parquet_missing_required_column_names_file_block_and_field() {
    let parquet = parquet_bytes(&kv_batch(3), None);
    let first =
        encode_avro_data_block("20240101000000000", kv_schema_json(), &kv_records(1)).unwrap();
    let second =
        encode_parquet_data_block("20240101000000001", kv_schema_json(), &parquet).unwrap();
    let mut all = first.to_vec();
    all.extend_from_slice(&second);
    let contents = read_log_file(&all, "a/.h_1.log.1_0-1-0").unwrap();
    let block = &contents.blocks[1];
    let target = Arc::new(Schema::new(vec![Field::new(
        "absent",
        DataType::Utf8,
        false,
    )]));
    let err = decode_data_block(block, "a/.h_1.log.1_0-1-0", Some(&target)).unwrap_err();
    match &err {
        FormatError::Parquet { path, reason } => {
            assert_eq!(
                path,
                &format!("a/.h_1.log.1_0-1-0 (block at offset {})", first.len()),
                "{err}"
            );
            assert!(reason.contains("\"absent\""), "{err}");
        }
        other => panic!("expected a Parquet error naming the block, got {other:?}"),
    }
}

#[test]
fn test_decode_avro_data_block_more_records_than_reserved_all_decoded() {
    let n = 10_000;
    let bytes =
        encode_avro_data_block("20240101000000000", kv_schema_json(), &kv_records(n)).unwrap();
    let contents = read_log_file(&bytes, "x.log").unwrap();
    let data = decode_avro_data_block(&contents.blocks[0], "x.log").unwrap();
    assert_eq!(data.records.len(), n);
    assert_eq!(data.records[n - 1], kv_records(n)[n - 1]);
}

#[test]
fn test_decode_avro_data_block_count_beyond_content_corrupt() {
    let mut content = Vec::new();
    content.extend_from_slice(&3i32.to_be_bytes());
    content.extend_from_slice(&i32::MAX.to_be_bytes());
    content.extend_from_slice(&0i32.to_be_bytes());
    let mut header = BTreeMap::new();
    header.insert(HeaderKey::InstantTime, "20240101000000000".to_string());
    header.insert(HeaderKey::Schema, kv_schema_json().to_string());
    let bytes = encode_block(BlockType::AvroData, &header, &content, &BTreeMap::new()).unwrap();
    let contents = read_log_file(&bytes, "c.log").unwrap();
    let err = decode_avro_data_block(&contents.blocks[0], "c.log").unwrap_err();
    assert!(
        matches!(&err, FormatError::CorruptBlock { path, offset: 0, .. } if path == "c.log"),
        "{err}"
    );
}

/// `file` with its footer replaced by `metadata` (data pages unchanged).
fn with_footer(file: &[u8], metadata: &ParquetMetaData) -> Vec<u8> {
    let footer_len = u32::from_le_bytes(file[file.len() - 8..file.len() - 4].try_into().unwrap());
    let data_end = file.len() - 8 - footer_len as usize;
    let mut out = file[..data_end].to_vec();
    ParquetMetaDataWriter::new(&mut out, metadata)
        .finish()
        .unwrap();
    out
}

/// A parquet file of 3 rows in 3 row groups whose row group counts are replaced by `counts`.
fn file_with_row_group_counts(counts: [i64; 3]) -> Vec<u8> {
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(1))
        .build();
    let file = parquet_bytes(&kv_batch(3), Some(props));
    let metadata = ParquetMetaDataReader::new()
        .parse_and_finish(&Bytes::from(file.clone()))
        .unwrap();
    assert_eq!(metadata.num_row_groups(), 3);
    let row_groups = metadata
        .row_groups()
        .iter()
        .zip(counts)
        .map(|(rg, n)| rg.clone().into_builder().set_num_rows(n).build().unwrap())
        .collect();
    let patched = ParquetMetaData::new(metadata.file_metadata().clone(), row_groups);
    with_footer(&file, &patched)
}

async fn open_bytes(bytes: Vec<u8>) -> Result<BaseFileReader, FormatError> {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let key = "p/f_0-1-0_20240101000000000.parquet";
    storage
        .put_if_absent(key, Bytes::from(bytes))
        .await
        .unwrap();
    BaseFileReader::open(storage, key).await
}

#[tokio::test]
async fn test_base_file_reader_open_consistent_footer_counts_ok() {
    let reader = open_bytes(file_with_row_group_counts([1, 1, 1]))
        .await
        .unwrap();
    assert_eq!(reader.num_rows(), 3);
}

#[tokio::test]
async fn test_base_file_reader_open_negative_row_count_parquet_error() {
    // The file's count is written as the sum of the row groups': -1 + -1 + -1.
    let err = open_bytes(file_with_row_group_counts([-1, -1, -1]))
        .await
        .unwrap_err();
    match &err {
        FormatError::Parquet { path, reason } => {
            assert_eq!(path, "p/f_0-1-0_20240101000000000.parquet");
            assert!(reason.contains("negative"), "{err}");
        }
        other => panic!("expected a Parquet error, got {other:?}"),
    }
}

#[tokio::test]
async fn test_base_file_reader_open_negative_row_group_count_parquet_error() {
    // A total of 1 that hides a negative row group.
    let err = open_bytes(file_with_row_group_counts([-1, 1, 1]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FormatError::Parquet { reason, .. } if reason.contains("row group 0")),
        "{err}"
    );
}
