//! Files arbor writes read back identically, awkward types included.

use std::collections::HashMap;
use std::sync::Arc;

use arbor_lance::{encode, encode_blocking, LanceFileReader};
use arbor_storage::{ObjectStoreStorage, Storage};
use arrow_array::builder::{Int32Builder, ListBuilder, StringBuilder, StructBuilder};
use arrow_array::{
    ArrayRef, Date32Array, Decimal128Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field, Fields, Schema};
use futures::TryStreamExt;

fn awkward() -> RecordBatch {
    let mut list = ListBuilder::new(StringBuilder::new());
    list.values().append_value("x");
    list.append(true);
    list.append(false);
    list.values().append_null();
    list.append(true);
    let fields = Fields::from(vec![
        Field::new("a", DataType::Int32, true),
        Field::new("b", DataType::Utf8, true),
    ]);
    let mut st = StructBuilder::from_fields(fields.clone(), 3);
    for i in 0..3 {
        st.field_builder::<Int32Builder>(0)
            .unwrap()
            .append_option((i != 1).then_some(i));
        st.field_builder::<StringBuilder>(1)
            .unwrap()
            .append_value(format!("s{i}"));
        st.append(i != 2);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![Some("k1"), Some("k2"), Some("k3")])),
        Arc::new(Int64Array::from(vec![Some(1), None, Some(i64::MIN)])),
        Arc::new(
            TimestampMicrosecondArray::from(vec![Some(1_700_000_000_000_000), None, Some(-5)])
                .with_timezone("UTC"),
        ),
        Arc::new(TimestampMicrosecondArray::from(vec![
            Some(7),
            Some(8),
            None,
        ])),
        Arc::new(Date32Array::from(vec![Some(0), None, Some(-719_162)])),
        Arc::new(
            Decimal128Array::from(vec![Some(-99_999_999_999_999), None, Some(1)])
                .with_precision_and_scale(15, 2)
                .unwrap(),
        ),
        Arc::new(list.finish()),
        Arc::new(st.finish()),
    ];
    let names = [
        "key", "n", "zoned", "naive", "day", "amount", "tags", "nested",
    ];
    let schema = Schema::new(
        columns
            .iter()
            .zip(names)
            .map(|(c, n)| Field::new(n, c.data_type().clone(), true))
            .collect::<Vec<_>>(),
    )
    .with_metadata(HashMap::from([
        ("hoodie_min_record_key".to_string(), "k1".to_string()),
        ("hoodie_max_record_key".to_string(), "k3".to_string()),
    ]));
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_encoded_file_reads_back_values_types_and_metadata() {
    let batch = awkward();
    let schema = batch.schema();
    let bytes = encode("t.lance", &schema, &[batch.clone(), batch.slice(1, 2)])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
    let size = bytes.len() as u64;
    storage.put("p/t.lance", bytes).await.unwrap();
    let reader = LanceFileReader::open(storage, "p/t.lance", size)
        .await
        .unwrap();
    assert_eq!(reader.num_rows(), 5);
    assert_eq!(
        reader.metadata().get("hoodie_max_record_key").unwrap(),
        "k3"
    );
    assert_eq!(reader.schema().fields(), schema.fields());
    let read: Vec<RecordBatch> = reader
        .stream(None, 1024)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let read = arrow::compute::concat_batches(&read[0].schema(), &read).unwrap();
    let want = arrow::compute::concat_batches(&batch.schema(), &[batch.clone(), batch.slice(1, 2)])
        .unwrap();
    assert_eq!(read.columns(), want.columns());
}

/// The rows of the Lance file `bytes` (the schema metadata's order in the file follows a hash
/// map, so two encodings of the same rows may differ in bytes, never in content).
fn decoded(rt: &tokio::runtime::Runtime, bytes: bytes::Bytes) -> Vec<RecordBatch> {
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
        let size = bytes.len() as u64;
        storage.put("f.lance", bytes).await.unwrap();
        let reader = LanceFileReader::open(storage, "f.lance", size)
            .await
            .unwrap();
        reader
            .stream(None, 1024)
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    })
}

#[test]
fn test_encode_blocking_outside_any_runtime_matches_async() {
    let batch = awkward();
    let blocking =
        encode_blocking("t.lance", &batch.schema(), std::slice::from_ref(&batch)).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let inside = rt
        .block_on(async {
            encode_blocking("t.lance", &batch.schema(), std::slice::from_ref(&batch))
        })
        .unwrap();
    let current = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let asynced = current
        .block_on(encode(
            "t.lance",
            &batch.schema(),
            std::slice::from_ref(&batch),
        ))
        .unwrap();
    let want = decoded(&rt, blocking);
    assert_eq!(want[0].columns(), batch.columns());
    assert_eq!(decoded(&rt, inside), want);
    assert_eq!(decoded(&rt, asynced), want);
}

#[tokio::test]
async fn test_batch_of_another_schema_is_refused() {
    let batch = awkward();
    let other = Schema::new(vec![Field::new("x", DataType::Int32, true)]);
    let err = encode("t.lance", &other, &[batch]).await.unwrap_err();
    assert!(err.to_string().contains("t.lance"), "{err}");
}

#[tokio::test]
async fn test_file_without_null_structs_is_format_2_0_and_with_them_2_1() {
    let batch = awkward();
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
    // Rows 0 and 1 have non-null structs; row 2's struct is null.
    for (name, rows, version) in [("a.lance", 0..2, "0.3"), ("b.lance", 0..3, "2.1")] {
        let part = batch.slice(rows.start, rows.len());
        let bytes = encode(name, &batch.schema(), std::slice::from_ref(&part))
            .await
            .unwrap();
        // The footer ends with major (u16), minor (u16) and the magic "LANC".
        let n = bytes.len();
        let major = u16::from_le_bytes([bytes[n - 8], bytes[n - 7]]);
        let minor = u16::from_le_bytes([bytes[n - 6], bytes[n - 5]]);
        assert_eq!(&bytes[n - 4..], b"LANC");
        assert_eq!(format!("{major}.{minor}"), version, "{name}");
        let size = bytes.len() as u64;
        storage.put(name, bytes).await.unwrap();
        let reader = LanceFileReader::open(Arc::clone(&storage), name, size)
            .await
            .unwrap();
        let read: Vec<RecordBatch> = reader
            .stream(None, 10)
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(read[0].columns(), part.columns(), "{name}");
    }
}
