//! Avro <-> Arrow conversion, against the Spark fixtures and by round trip.

use std::sync::Arc;

use apache_avro::types::Value;
use arbor_format::avro_arrow::{
    arrow_schema_to_avro_json, avro_records_to_batch, avro_schema_to_arrow, batch_to_avro_records,
    parse_avro_schema,
};
use arbor_format::log::{
    decode_avro_data_block, decode_data_block, encode_avro_data_block_from_batch, read_log_file,
};
use arbor_format::FormatError;
use arrow::buffer::OffsetBuffer;
use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::Int16Type;
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, FixedSizeBinaryArray,
    Float32Array, Float64Array, Int32Array, Int64Array, MapArray, RecordBatch, StringArray,
    StringViewArray, StructArray, Time32MillisecondArray, Time64MicrosecondArray,
    TimestampMicrosecondArray, TimestampMillisecondArray,
};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::log::{fixture_files, is_log_file_name};

fn dir_of(name: &str) -> &str {
    name.rsplit_once('/').map_or("", |(d, _)| d)
}

#[test]
fn test_avro_schema_to_arrow_fixture_log_schema_matches_base_file() {
    let Some(files) = fixture_files(|b| {
        (is_log_file_name(b) || b.ends_with(".parquet")) && !b.starts_with(".files-")
    }) else {
        return;
    };
    let mut compared = 0;
    for (zip, name, bytes) in &files {
        if !is_log_file_name(name.rsplit('/').next().unwrap()) || name.contains("/.hoodie/") {
            continue;
        }
        let Some((_, _, base)) = files
            .iter()
            .find(|(z, n, _)| z == zip && n.ends_with(".parquet") && dir_of(n) == dir_of(name))
        else {
            continue;
        };
        let base_schema =
            ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(base.clone()))
                .unwrap()
                .schema()
                .clone();
        for block in read_log_file(bytes, name).unwrap().blocks {
            let Some(json) = block.schema_json() else {
                continue;
            };
            let avro = parse_avro_schema(json).unwrap();
            let arrow = avro_schema_to_arrow(&avro).unwrap();
            for field in arrow.fields() {
                let Ok(base_field) = base_schema.field_with_name(field.name()) else {
                    continue;
                };
                assert_eq!(field.as_ref(), base_field, "{zip}:{name}");
                compared += 1;
            }
        }
    }
    assert!(compared > 100, "{compared}");
}

#[test]
fn test_arrow_schema_to_avro_json_base_file_schema_equals_spark_log_schema() {
    let Some(files) = fixture_files(|b| {
        b == ".39cc539f-61e9-4996-8096-4d89715c4142-0_20260307162636727.log.1_0-78-180"
            || b == "39cc539f-61e9-4996-8096-4d89715c4142-0_1-27-53_20260307162628304.parquet"
    }) else {
        return;
    };
    let files: Vec<_> = files
        .into_iter()
        .filter(|(zip, _, _)| zip.contains("mor/avro/v9_txns_complex_meta"))
        .collect();
    let (_, name, log) = files.iter().find(|(_, n, _)| n.contains(".log.")).unwrap();
    let (_, _, base) = files
        .iter()
        .find(|(_, n, _)| n.ends_with(".parquet"))
        .unwrap();
    let spark_json = read_log_file(log, name).unwrap().blocks[0]
        .schema_json()
        .unwrap()
        .to_string();
    let base_schema = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(base.clone()))
        .unwrap()
        .schema()
        .clone();
    let ours = arrow_schema_to_avro_json(
        &base_schema,
        "v9_txns_mor_complex_meta_record",
        "hoodie.v9_txns_mor_complex_meta",
    )
    .unwrap();
    assert_eq!(ours, spark_json);
}

fn nested_v6_like_schema() -> SchemaRef {
    let entry = Fields::from(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new(
            "value",
            DataType::Struct(Fields::from(vec![Field::new("f", DataType::Float64, true)])),
            true,
        ),
    ]);
    Arc::new(Schema::new(vec![
        Field::new("_hoodie_commit_time", DataType::Utf8, true),
        Field::new("id", DataType::Int32, false),
        Field::new("flag", DataType::Boolean, true),
        Field::new("big", DataType::Int64, true),
        Field::new("f32", DataType::Float32, true),
        Field::new("f64", DataType::Float64, true),
        Field::new("bin", DataType::Binary, true),
        Field::new("fix", DataType::FixedSizeBinary(3), true),
        Field::new("dec", DataType::Decimal128(15, 2), true),
        Field::new("day", DataType::Date32, true),
        Field::new("ms", DataType::Time32(TimeUnit::Millisecond), true),
        Field::new("us", DataType::Time64(TimeUnit::Microsecond), true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new(
            "lts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        ),
        Field::new(
            "list",
            DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))),
            true,
        ),
        Field::new(
            "map",
            DataType::Map(
                Arc::new(Field::new("key_value", DataType::Struct(entry), false)),
                false,
            ),
            true,
        ),
        Field::new(
            "st",
            DataType::Struct(Fields::from(vec![
                Field::new("a", DataType::Utf8, true),
                Field::new(
                    "inner",
                    DataType::Struct(Fields::from(vec![Field::new("b", DataType::Int64, true)])),
                    true,
                ),
            ])),
            true,
        ),
    ]))
}

fn nested_v6_like_batch() -> RecordBatch {
    let schema = nested_v6_like_schema();
    let fields = schema.fields();
    let mut list = ListBuilder::new(StringBuilder::new()).with_field(Arc::new(Field::new(
        "element",
        DataType::Utf8,
        true,
    )));
    list.values().append_value("x");
    list.values().append_null();
    list.append(true);
    list.append(false);
    list.append(true);
    let map_field = fields[15].clone();
    let DataType::Map(entries, _) = map_field.data_type() else {
        unreachable!()
    };
    let DataType::Struct(kv) = entries.data_type() else {
        unreachable!()
    };
    let DataType::Struct(value_fields) = kv[1].data_type().clone() else {
        unreachable!()
    };
    let value_struct = StructArray::new(
        value_fields.clone(),
        vec![Arc::new(Float64Array::from(vec![
            Some(1.5),
            None,
            Some(-2.0),
        ]))],
        Some(vec![true, true, false].into()),
    );
    let map_entries = StructArray::new(
        kv.clone(),
        vec![
            Arc::new(StringArray::from(vec!["a", "b", "c"])),
            Arc::new(value_struct),
        ],
        None,
    );
    let map = MapArray::new(
        entries.clone(),
        OffsetBuffer::new(vec![0, 2, 2, 3].into()),
        map_entries,
        Some(vec![true, false, true].into()),
        false,
    );
    let DataType::Struct(st_fields) = fields[16].data_type().clone() else {
        unreachable!()
    };
    let DataType::Struct(inner_fields) = st_fields[1].data_type().clone() else {
        unreachable!()
    };
    let inner = StructArray::new(
        inner_fields,
        vec![Arc::new(Int64Array::from(vec![Some(7), None, Some(9)]))],
        Some(vec![true, false, true].into()),
    );
    let st = StructArray::new(
        st_fields,
        vec![
            Arc::new(StringArray::from(vec![Some("s"), None, Some("u")])),
            Arc::new(inner),
        ],
        Some(vec![true, true, false].into()),
    );
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![
            Some("20240101000000000"),
            None,
            Some("x"),
        ])),
        Arc::new(Int32Array::from(vec![1, 2, 3])),
        Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
        Arc::new(Int64Array::from(vec![Some(i64::MIN), None, Some(i64::MAX)])),
        Arc::new(Float32Array::from(vec![Some(1.25), None, Some(f32::MAX)])),
        Arc::new(Float64Array::from(vec![Some(-0.5), None, Some(1e300)])),
        Arc::new(BinaryArray::from(vec![
            Some(&b"\x00\xff"[..]),
            None,
            Some(&b""[..]),
        ])),
        Arc::new(
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                vec![Some(vec![1u8, 2, 3]), None, Some(vec![255, 0, 7])].into_iter(),
                3,
            )
            .unwrap(),
        ),
        Arc::new(
            Decimal128Array::from(vec![Some(123_456), None, Some(-99_999_999_999_999)])
                .with_precision_and_scale(15, 2)
                .unwrap(),
        ),
        Arc::new(Date32Array::from(vec![Some(19_737), None, Some(-1)])),
        Arc::new(Time32MillisecondArray::from(vec![
            Some(1_000),
            None,
            Some(86_399_999),
        ])),
        Arc::new(Time64MicrosecondArray::from(vec![
            Some(1),
            None,
            Some(86_399_999_999),
        ])),
        Arc::new(
            TimestampMicrosecondArray::from(vec![Some(1_705_314_600_000_000), None, Some(-1)])
                .with_timezone("UTC"),
        ),
        Arc::new(TimestampMillisecondArray::from(vec![
            Some(1),
            None,
            Some(2),
        ])),
        Arc::new(list.finish()),
        Arc::new(map),
        Arc::new(st),
    ];
    RecordBatch::try_new(schema, columns).unwrap()
}

#[test]
fn test_avro_data_block_every_supported_type_roundtrips_equal() {
    let batch = nested_v6_like_batch();
    let json = arrow_schema_to_avro_json(batch.schema_ref(), "t_record", "hoodie.t").unwrap();
    let avro = parse_avro_schema(&json).unwrap();
    // The Arrow schema survives Arrow -> Avro -> Arrow.
    assert_eq!(avro_schema_to_arrow(&avro).unwrap(), batch.schema());

    let block = encode_avro_data_block_from_batch("20240101000000000", &json, &batch).unwrap();
    let contents = read_log_file(&block, "rt.log").unwrap();
    assert!(contents.corrupt.is_empty());
    let back = decode_data_block(&contents.blocks[0], "rt.log", None).unwrap();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0], batch);

    let records = batch_to_avro_records(&batch, &avro).unwrap();
    let again = avro_records_to_batch(&avro, &records, batch.schema_ref()).unwrap();
    assert_eq!(again, batch);
}

#[test]
fn test_avro_schema_to_arrow_union_either_order_nullable() {
    let avro = parse_avro_schema(
        r#"{"type":"record","name":"r","fields":[
            {"name":"a","type":["null","int"]},
            {"name":"b","type":["long","null"]},
            {"name":"c","type":"string"},
            {"name":"e","type":{"type":"enum","name":"E","symbols":["X","Y"]}},
            {"name":"u","type":{"type":"string","logicalType":"uuid"}},
            {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":30,"scale":15}},
            {"name":"lt","type":{"type":"long","logicalType":"local-timestamp-micros"}},
            {"name":"tm","type":{"type":"long","logicalType":"timestamp-millis"}}
        ]}"#,
    )
    .unwrap();
    let arrow = avro_schema_to_arrow(&avro).unwrap();
    let expect = Schema::new(vec![
        Field::new("a", DataType::Int32, true),
        Field::new("b", DataType::Int64, true),
        Field::new("c", DataType::Utf8, false),
        Field::new("e", DataType::Utf8, false),
        Field::new("u", DataType::Utf8, false),
        Field::new("d", DataType::Decimal128(30, 15), false),
        Field::new(
            "lt",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            false,
        ),
        Field::new(
            "tm",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
    ]);
    assert_eq!(arrow.as_ref(), &expect);
}

#[test]
fn test_enum_uuid_bytes_decimal_and_tail_null_union_roundtrip_equal() {
    let json = r#"{"type":"record","name":"r","fields":[
        {"name":"b","type":["long","null"]},
        {"name":"e","type":{"type":"enum","name":"E","symbols":["X","Y"]}},
        {"name":"u","type":{"type":"string","logicalType":"uuid"}},
        {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":30,"scale":15}}
    ]}"#;
    let avro = parse_avro_schema(json).unwrap();
    let arrow = avro_schema_to_arrow(&avro).unwrap();
    let batch = RecordBatch::try_new(
        arrow.clone(),
        vec![
            Arc::new(Int64Array::from(vec![Some(5), None])),
            Arc::new(StringArray::from(vec!["Y", "X"])),
            Arc::new(StringArray::from(vec![
                "67e55044-10b1-426f-9247-bb680e5fe0c8",
                "00000000-0000-0000-0000-000000000001",
            ])),
            Arc::new(
                Decimal128Array::from(vec![-1_000_000_000_000_000_i128, 42])
                    .with_precision_and_scale(30, 15)
                    .unwrap(),
            ),
        ],
    )
    .unwrap();
    let block = encode_avro_data_block_from_batch("1", json, &batch).unwrap();
    let contents = read_log_file(&block, "e.log").unwrap();
    let data = decode_avro_data_block(&contents.blocks[0], "e.log").unwrap();
    // The tail-null union writes null as branch 1.
    let Value::Record(fields) = &data.records[1] else {
        panic!()
    };
    assert_eq!(fields[0].1, Value::Union(1, Box::new(Value::Null)));
    let back = avro_records_to_batch(&data.schema, &data.records, &arrow).unwrap();
    assert_eq!(back, batch);
}

#[test]
fn test_avro_records_to_batch_target_schema_casts_and_null_fills() {
    let avro = parse_avro_schema(
        r#"{"type":"record","name":"r","fields":[{"name":"small","type":"int"},{"name":"gone","type":"string"}]}"#,
    )
    .unwrap();
    let records = vec![Value::Record(vec![
        ("small".into(), Value::Int(7)),
        ("gone".into(), Value::String("x".into())),
    ])];
    let target = Arc::new(Schema::new(vec![
        Field::new("small", DataType::Int16, false),
        Field::new("added", DataType::Utf8, true),
    ]));
    let batch = avro_records_to_batch(&avro, &records, &target).unwrap();
    assert_eq!(batch.schema(), target);
    assert_eq!(batch.column(0).as_primitive::<Int16Type>().value(0), 7);
    assert!(batch.column(1).is_null(0));

    let strict = Arc::new(Schema::new(vec![Field::new(
        "added",
        DataType::Utf8,
        false,
    )]));
    let err = avro_records_to_batch(&avro, &records, &strict).unwrap_err();
    assert!(
        matches!(&err, FormatError::Schema { field: Some(f), .. } if f == "added"),
        "{err}"
    );
}

#[test]
fn test_avro_schema_to_arrow_multi_branch_union_errors_naming_field() {
    let avro = parse_avro_schema(
        r#"{"type":"record","name":"r","fields":[{"name":"s","type":{"type":"record","name":"S","fields":[{"name":"bad","type":["null","int","string"]}]}}]}"#,
    )
    .unwrap();
    let err = avro_schema_to_arrow(&avro).unwrap_err();
    assert!(
        matches!(&err, FormatError::Schema { field: Some(f), .. } if f == "s.bad"),
        "{err}"
    );
}

#[test]
fn test_batch_to_avro_records_null_in_required_field_errors_naming_field() {
    let avro = parse_avro_schema(
        r#"{"type":"record","name":"r","fields":[{"name":"k","type":"string"}]}"#,
    )
    .unwrap();
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, true)])),
        vec![Arc::new(StringArray::from(vec![Some("a"), None]))],
    )
    .unwrap();
    let err = batch_to_avro_records(&batch, &avro).unwrap_err();
    assert!(
        matches!(&err, FormatError::Schema { field: Some(f), .. } if f == "k"),
        "{err}"
    );
}

#[test]
fn test_batch_to_avro_records_missing_nullable_column_writes_null() {
    let avro = parse_avro_schema(
        r#"{"type":"record","name":"r","fields":[{"name":"k","type":"string"},{"name":"opt","type":["null","long"],"default":null}]}"#,
    )
    .unwrap();
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new(
            "k",
            DataType::Utf8View,
            false,
        )])),
        vec![Arc::new(StringViewArray::from(vec!["a"]))],
    )
    .unwrap();
    let records = batch_to_avro_records(&batch, &avro).unwrap();
    assert_eq!(
        records,
        vec![Value::Record(vec![
            ("k".into(), Value::String("a".into())),
            ("opt".into(), Value::Union(0, Box::new(Value::Null))),
        ])]
    );
}
