//! Unit tests of key generation: key shapes, partition paths and Java's value strings.

use arrow::datatypes::DataType;
use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};

use crate::error::TableError;
use std::sync::Arc;

use arrow_array::{
    BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array, Int32Array, Int64Array,
    StringArray, TimestampMicrosecondArray,
};
use arrow_schema::{Field, Fields, Schema};

use super::value::sql_timestamp;
use super::value::value_string;
use super::*;

fn config(kind: KeyGeneratorType, keys: &[&str], parts: &[&str]) -> KeyGenConfig {
    KeyGenConfig {
        kind,
        record_key_fields: keys.iter().map(|s| s.to_string()).collect(),
        partition_fields: parts.iter().map(|s| s.to_string()).collect(),
        hive_style: false,
        url_encode: false,
        timestamp_format: TimestampKeyFormat::EpochMicros,
        timestamp: None,
    }
}

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap()
}

fn one(array: ArrayRef) -> Option<String> {
    value_string(array.as_ref(), 0, TimestampKeyFormat::EpochMicros).unwrap()
}

#[test]
fn test_simple_keys_plain_value_and_partition() {
    let b = batch(vec![
        ("id", Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef),
        (
            "region",
            Arc::new(StringArray::from(vec![Some("us"), None])),
        ),
    ]);
    let g = KeyGenerator::new(config(KeyGeneratorType::Simple, &["id"], &["region"])).unwrap();
    let keys = g.keys(&b).unwrap();
    assert_eq!(keys[0].record_key, "1");
    assert_eq!(&*keys[0].partition_path, "us");
    assert_eq!(&*keys[1].partition_path, DEFAULT_PARTITION_PATH);
    let mut hive = config(KeyGeneratorType::Simple, &["id"], &["region"]);
    hive.hive_style = true;
    let keys = KeyGenerator::new(hive).unwrap().keys(&b).unwrap();
    assert_eq!(&*keys[0].partition_path, "region=us");
    assert_eq!(
        &*keys[1].partition_path,
        "region=__HIVE_DEFAULT_PARTITION__"
    );
}

#[test]
fn test_complex_keys_format_placeholders_and_all_null_error() {
    let b = batch(vec![
        (
            "id",
            Arc::new(Int32Array::from(vec![Some(2), None, None])) as ArrayRef,
        ),
        (
            "name",
            Arc::new(StringArray::from(vec![Some("Bob"), Some(""), None])),
        ),
        ("a", Arc::new(Int32Array::from(vec![10, 20, 30]))),
        ("b", Arc::new(StringArray::from(vec!["x/y", "", "z"]))),
    ]);
    let mut c = config(KeyGeneratorType::Complex, &["id", "name", "a"], &["a", "b"]);
    c.hive_style = true;
    c.url_encode = true;
    let g = KeyGenerator::new(c).unwrap();
    let rk = g.record_keys_at(&b, 0).unwrap();
    assert_eq!(
        rk,
        [
            "id:2,name:Bob,a:10",
            "id:__null__,name:__empty__,a:20",
            "id:__null__,name:__null__,a:30"
        ]
    );
    let pp = g.partition_paths_at(&b, 0).unwrap();
    assert_eq!(&*pp[0], "a=10/b=x%2Fy");
    assert_eq!(&*pp[1], "a=20/b=__HIVE_DEFAULT_PARTITION__");
    let two = KeyGenerator::new(config(KeyGeneratorType::Complex, &["id", "name"], &[])).unwrap();
    assert_eq!(
        two.record_keys_at(&b.slice(0, 1), 0).unwrap(),
        ["id:2,name:Bob"]
    );
    match two.record_keys_at(&b.slice(1, 2), 100) {
        Err(TableError::InvalidInput { column, row, .. }) => {
            assert_eq!(column.as_deref(), Some("id"));
            assert_eq!(row, Some(100));
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[test]
fn test_complex_single_field_is_encoded_with_field_name() {
    let b = batch(vec![(
        "id",
        Arc::new(Int32Array::from(vec![7])) as ArrayRef,
    )]);
    let g = KeyGenerator::new(config(KeyGeneratorType::Complex, &["id"], &[])).unwrap();
    assert_eq!(g.record_keys_at(&b, 0).unwrap(), ["id:7"]);
    assert!(!g.is_partitioned());
    assert_eq!(g.partition_paths_at(&b, 0).unwrap(), [Arc::from("")]);
}

#[test]
fn test_non_partition_single_plain_multi_complex_path_empty() {
    let b = batch(vec![
        ("id", Arc::new(Int32Array::from(vec![7])) as ArrayRef),
        ("k", Arc::new(StringArray::from(vec!["v"]))),
    ]);
    let single =
        KeyGenerator::new(config(KeyGeneratorType::NonPartition, &["id"], &["k"])).unwrap();
    assert_eq!(
        single.keys(&b).unwrap(),
        [HoodieKey {
            record_key: "7".into(),
            partition_path: Arc::from("")
        }]
    );
    let multi =
        KeyGenerator::new(config(KeyGeneratorType::NonPartition, &["id", "k"], &[])).unwrap();
    assert_eq!(multi.record_keys_at(&b, 0).unwrap(), ["id:7,k:v"]);
}

#[test]
fn test_simple_null_or_empty_key_invalid_input_names_column_and_row() {
    let b = batch(vec![(
        "id",
        Arc::new(StringArray::from(vec![Some("a"), Some(""), None])) as ArrayRef,
    )]);
    let g = KeyGenerator::new(config(KeyGeneratorType::Simple, &["id"], &[])).unwrap();
    for (offset, expected_row) in [(1usize, 1usize), (2, 2)] {
        match g.record_keys_at(&b.slice(offset, 1), offset) {
            Err(TableError::InvalidInput { column, row, .. }) => {
                assert_eq!(column.as_deref(), Some("id"));
                assert_eq!(row, Some(expected_row));
            }
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }
}

#[test]
fn test_missing_column_invalid_input_names_column() {
    let b = batch(vec![(
        "id",
        Arc::new(Int32Array::from(vec![1])) as ArrayRef,
    )]);
    let g = KeyGenerator::new(config(KeyGeneratorType::Simple, &["id"], &["nope"])).unwrap();
    match g.keys(&b) {
        Err(TableError::InvalidInput { column, row, .. }) => {
            assert_eq!(column.as_deref(), Some("nope"));
            assert_eq!(row, None);
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[test]
fn test_new_invalid_configs_unsupported() {
    assert!(KeyGenerator::new(config(KeyGeneratorType::Simple, &[], &[])).is_err());
    assert!(KeyGenerator::new(config(KeyGeneratorType::Simple, &["a", "b"], &[])).is_err());
    assert!(KeyGenerator::new(config(KeyGeneratorType::Simple, &["a"], &["x", "y"])).is_err());
}

#[test]
fn test_nested_field_path_and_null_parent() {
    let inner = StructArray::from(vec![(
        Arc::new(Field::new("id", DataType::Int64, true)),
        Arc::new(Int64Array::from(vec![5, 6])) as ArrayRef,
    )]);
    let outer = StructArray::new(
        Fields::from(vec![Field::new("id", DataType::Int64, true)]),
        inner.columns().to_vec(),
        Some(vec![true, false].into()),
    );
    let b = batch(vec![("s", Arc::new(outer) as ArrayRef)]);
    let g = KeyGenerator::new(config(KeyGeneratorType::Complex, &["s.id"], &[])).unwrap();
    assert_eq!(g.record_keys_at(&b.slice(0, 1), 0).unwrap(), ["s.id:5"]);
    assert!(g.record_keys_at(&b, 0).is_err()); // row 1: the only part is null
}

#[test]
fn test_value_string_java_renderings() {
    assert_eq!(
        one(Arc::new(BooleanArray::from(vec![true]))).unwrap(),
        "true"
    );
    assert_eq!(
        one(Arc::new(Date32Array::from(vec![19_448]))).unwrap(),
        "2023-04-01"
    );
    assert_eq!(
        one(Arc::new(Date32Array::from(vec![-1]))).unwrap(),
        "1969-12-31"
    );
    let dec = |v: i128, p: u8, s: i8| -> String {
        one(Arc::new(
            Decimal128Array::from(vec![v])
                .with_precision_and_scale(p, s)
                .unwrap(),
        ))
        .unwrap()
    };
    assert_eq!(dec(1_234_567_890, 10, 5), "12345.67890");
    assert_eq!(dec(-5, 10, 2), "-0.05");
    assert_eq!(dec(1, 10, 7), "1E-7");
    assert_eq!(dec(0, 10, 7), "0E-7");
    assert_eq!(dec(0, 10, 2), "0.00");
    assert_eq!(dec(42, 10, 0), "42");
    let f64s = |v: f64| one(Arc::new(Float64Array::from(vec![v]))).unwrap();
    assert_eq!(f64s(1.0), "1.0");
    assert_eq!(f64s(4.25159), "4.25159");
    assert_eq!(f64s(-0.5), "-0.5");
    assert_eq!(f64s(0.001), "0.001");
    assert_eq!(f64s(0.0001), "1.0E-4");
    assert_eq!(f64s(1e7), "1.0E7");
    assert_eq!(f64s(9_999_999.0), "9999999.0");
    assert_eq!(f64s(1.5e10), "1.5E10");
    assert_eq!(f64s(123.456), "123.456");
    assert_eq!(f64s(0.0), "0.0");
    assert_eq!(f64s(-0.0), "-0.0");
    assert_eq!(f64s(f64::NAN), "NaN");
    assert_eq!(f64s(f64::NEG_INFINITY), "-Infinity");
    assert_eq!(
        one(Arc::new(Float32Array::from(vec![0.1f32]))).unwrap(),
        "0.1"
    );
    assert_eq!(
        one(Arc::new(Float32Array::from(vec![2.0f32]))).unwrap(),
        "2.0"
    );
    // 2023-04-01 12:01:00 UTC in micros.
    let ts = Arc::new(TimestampMicrosecondArray::from(vec![1_680_350_460_123_000]));
    assert_eq!(one(ts.clone()).unwrap(), "1680350460123000");
    assert_eq!(
        value_string(ts.as_ref(), 0, TimestampKeyFormat::SqlTimestampUtc).unwrap(),
        Some("2023-04-01 12:01:00.123".to_string())
    );
    assert_eq!(sql_timestamp(1_680_350_460_000), "2023-04-01 12:01:00.0");
    assert_eq!(one(Arc::new(Int32Array::from(vec![None::<i32>]))), None);
    let bin: ArrayRef = Arc::new(arrow_array::BinaryArray::from(vec![&b"x"[..]]));
    assert!(value_string(bin.as_ref(), 0, TimestampKeyFormat::EpochMicros).is_err());
}

#[test]
fn test_escape_partition_value_hive_set() {
    assert_eq!(escape_partition_value("a/b:c=d%e"), "a%2Fb%3Ac%3Dd%25e");
    assert_eq!(escape_partition_value("x\ny\u{7F}"), "x%0Ay%7F");
    assert_eq!(escape_partition_value("héllo wörld"), "héllo wörld");
    assert_eq!(
        escape_partition_value("[a]{b}^'\"#*?\\"),
        "%5Ba%5D%7Bb}%5E%27%22%23%2A%3F%5C"
    );
    assert_eq!(escape_partition_value(""), DEFAULT_PARTITION_PATH);
}

#[test]
fn test_key_generator_type_parse_and_class_names() {
    assert_eq!(
        KeyGeneratorType::parse("simple"),
        Some(KeyGeneratorType::Simple)
    );
    assert_eq!(
        KeyGeneratorType::parse("COMPLEX_AVRO"),
        Some(KeyGeneratorType::Complex)
    );
    assert_eq!(
        KeyGeneratorType::parse("TIMESTAMP"),
        Some(KeyGeneratorType::Timestamp)
    );
    assert_eq!(KeyGeneratorType::parse("CUSTOM"), None);
    assert_eq!(KeyGeneratorType::from_class_name("com.acme.MyKeyGen"), None);
    assert_eq!(
        KeyGeneratorType::from_class_name("org.apache.hudi.keygen.NonpartitionedKeyGenerator"),
        Some(KeyGeneratorType::NonPartition)
    );
    assert_eq!(
        KeyGeneratorType::from_class_name("org.apache.hudi.keygen.TimestampBasedKeyGenerator"),
        Some(KeyGeneratorType::Timestamp)
    );
}

fn timestamp_generator(props: &[(&str, &str)], hive: bool, url: bool) -> KeyGenerator {
    let mut b = arbor_timeline::TableConfig::builder_v8(
        "t",
        arbor_timeline::config::TableType::CopyOnWrite,
    )
    .record_key_fields(["id"])
    .partition_fields(["ts"])
    .key_generator_type("TIMESTAMP")
    .hive_style_partitioning(hive)
    .url_encode_partitioning(url);
    for (k, v) in props {
        b = b.property(*k, *v);
    }
    KeyGenerator::from_table_config(&b.build().unwrap()).unwrap()
}

fn ts_paths(g: &KeyGenerator, ts: ArrayRef) -> Vec<String> {
    let n = ts.len();
    let ids: ArrayRef = Arc::new(Int32Array::from_iter_values(0..n as i32));
    g.partition_paths_at(&batch(vec![("id", ids), ("ts", ts)]), 0)
        .unwrap()
        .iter()
        .map(|p| p.to_string())
        .collect()
}

#[test]
fn test_timestamp_keygen_numeric_types_units_and_zones() {
    let out = "hoodie.keygen.timebased.output.dateformat";
    let ty = "hoodie.keygen.timebased.timestamp.type";
    let millis = timestamp_generator(
        &[(ty, "EPOCHMILLISECONDS"), (out, "yyyy/MM/dd/HH")],
        false,
        false,
    );
    // 1705311000000 ms = 2024-01-15T09:30:00Z (the fixture's partition 2024/01/15/09); a null
    // value is Java's default of 1 unit after the epoch; a string holds the number.
    assert_eq!(
        ts_paths(
            &millis,
            Arc::new(Int64Array::from(vec![Some(1_705_311_000_000), None]))
        ),
        ["2024/01/15/09", "1970/01/01/00"]
    );
    assert_eq!(
        ts_paths(&millis, Arc::new(StringArray::from(vec!["1705311000000"]))),
        ["2024/01/15/09"]
    );
    let bad = millis.partition_paths_at(
        &batch(vec![
            ("id", Arc::new(Int32Array::from(vec![1])) as ArrayRef),
            ("ts", Arc::new(StringArray::from(vec!["soon"]))),
        ]),
        7,
    );
    assert!(
        matches!(bad, Err(TableError::InvalidInput { row: Some(7), column: Some(ref c), .. }) if c == "ts"),
        "{bad:?}"
    );
    let unix = timestamp_generator(
        &[
            (ty, "UNIX_TIMESTAMP"),
            (out, "yyyy-MM-dd HH:mm"),
            ("hoodie.keygen.timebased.output.timezone", "Asia/Kolkata"),
        ],
        true,
        true,
    );
    // Hive style, URL-encoded (':' escaped), in the output zone (+05:30).
    assert_eq!(
        ts_paths(&unix, Arc::new(Int32Array::from(vec![0]))),
        ["ts=1970-01-01 05%3A30"]
    );
    let scalar = timestamp_generator(
        &[
            (ty, "SCALAR"),
            ("hoodie.keygen.timebased.timestamp.scalar.time.unit", "days"),
            (out, "yyyyMMdd"),
        ],
        false,
        false,
    );
    assert_eq!(
        ts_paths(&scalar, Arc::new(Float64Array::from(vec![19737.9]))),
        ["20240115"]
    );
    // A date is its epoch day counted in the unit, as Java does.
    assert_eq!(
        ts_paths(&scalar, Arc::new(Date32Array::from(vec![19737]))),
        ["20240115"]
    );
}

#[test]
fn test_timestamp_keygen_date_strings_keep_or_convert_offsets() {
    let props = |extra: &[(&'static str, &'static str)]| {
        let mut p = vec![
            ("hoodie.keygen.timebased.timestamp.type", "DATE_STRING"),
            ("hoodie.keygen.timebased.output.dateformat", "yyyy/MM/dd/HH"),
            (
                "hoodie.keygen.timebased.input.dateformat",
                "yyyy-MM-dd'T'HH:mm:ss.SSSZ,yyyy-MM-dd",
            ),
        ];
        p.extend_from_slice(extra);
        p
    };
    let values = || -> ArrayRef {
        Arc::new(StringArray::from(vec![
            Some("2024-01-15T10:30:00.000Z"),
            Some("2024-01-15T23:30:00.000-0200"),
            Some("2024-03-02"),
            None,
        ]))
    };
    // No output zone: each value prints in the offset it was written with.
    let g = timestamp_generator(&props(&[]), false, false);
    assert_eq!(
        ts_paths(&g, values()),
        [
            "2024/01/15/10",
            "2024/01/15/23",
            "2024/03/02/00",
            "1970/01/01/00"
        ]
    );
    // One zone for input and output.
    let g = timestamp_generator(
        &props(&[("hoodie.keygen.timebased.timezone", "GMT+01:00")]),
        false,
        false,
    );
    assert_eq!(
        ts_paths(&g, values()),
        [
            "2024/01/15/11",
            "2024/01/16/02",
            "2024/03/02/00",
            "1970/01/01/01"
        ]
    );
    // MIXED refuses numbers (no unit), as Java.
    let g = timestamp_generator(
        &[
            ("hoodie.keygen.timebased.timestamp.type", "MIXED"),
            ("hoodie.keygen.timebased.output.dateformat", "yyyy"),
            ("hoodie.keygen.timebased.input.dateformat", "yyyy-MM-dd"),
        ],
        false,
        false,
    );
    let err = g
        .partition_paths_at(
            &batch(vec![
                ("id", Arc::new(Int32Array::from(vec![1])) as ArrayRef),
                ("ts", Arc::new(Int64Array::from(vec![5]))),
            ]),
            0,
        )
        .unwrap_err();
    assert!(err.to_string().contains("scalar.time.unit"), "{err}");
}

#[test]
fn test_timestamp_keygen_bad_settings_are_refused_by_name() {
    let cfg = |props: &[(&str, &str)]| {
        let mut b = arbor_timeline::TableConfig::builder_v8(
            "t",
            arbor_timeline::config::TableType::CopyOnWrite,
        )
        .record_key_fields(["id"])
        .partition_fields(["ts"])
        .key_generator_type("TIMESTAMP");
        for (k, v) in props {
            b = b.property(*k, *v);
        }
        KeyGenerator::from_table_config(&b.build().unwrap())
            .unwrap_err()
            .to_string()
    };
    assert!(cfg(&[]).contains("hoodie.keygen.timebased.timestamp.type"));
    let ty = (
        "hoodie.keygen.timebased.timestamp.type",
        "EPOCHMILLISECONDS",
    );
    assert!(cfg(&[ty]).contains("output.dateformat"));
    let out = ("hoodie.keygen.timebased.output.dateformat", "yyyy");
    assert!(cfg(&[
        ty,
        out,
        ("hoodie.keygen.timebased.timezone", "Mars/Olympus")
    ])
    .contains("Mars/Olympus"));
    assert!(cfg(&[("hoodie.keygen.timebased.timestamp.type", "WEEKLY"), out]).contains("WEEKLY"));
    assert!(cfg(&[ty, ("hoodie.keygen.timebased.output.dateformat", "yyyy-ww")]).contains("'w'"));
    assert!(cfg(&[
        ("hoodie.keygen.timebased.timestamp.type", "DATE_STRING"),
        out
    ])
    .contains("input.dateformat"));
}

#[test]
fn test_keys_in_parallel_match_keys_of_concatenated_batches_and_name_the_input_row() {
    let part = |ids: Vec<Option<&str>>, regions: Vec<Option<&str>>| {
        batch(vec![
            ("id", Arc::new(StringArray::from(ids)) as ArrayRef),
            ("region", Arc::new(StringArray::from(regions)) as ArrayRef),
        ])
    };
    let batches = vec![
        part(
            vec![Some("a"), Some("b"), Some("c")],
            vec![Some("us"), None, Some("e/u")],
        ),
        part(vec![Some("d")], vec![Some("us")]),
        part(vec![Some("e"), Some("f")], vec![Some(""), Some("us")]),
    ];
    let mut cfg = config(KeyGeneratorType::Simple, &["id"], &["region"]);
    cfg.url_encode = true;
    let g = KeyGenerator::new(cfg).unwrap();
    let schema = batches[0].schema();
    let all = arrow::compute::concat_batches(&schema, &batches).unwrap();
    let expected = g.keys(&all).unwrap();
    assert_eq!(&*expected[2].partition_path, "e%2Fu");
    assert_eq!(&*expected[4].partition_path, DEFAULT_PARTITION_PATH);
    for threads in [1, 2, 3, 4, 7] {
        assert_eq!(g.keys_in_parallel(&batches, threads).unwrap(), expected);
    }
    // A null key in the last batch is reported at its row of the whole input.
    let bad = vec![
        batches[0].clone(),
        part(vec![Some("x"), None], vec![Some("us"), Some("us")]),
    ];
    for threads in [1, 2, 3] {
        match g.keys_in_parallel(&bad, threads) {
            Err(TableError::InvalidInput { column, row, .. }) => {
                assert_eq!(column.as_deref(), Some("id"));
                assert_eq!(row, Some(4), "{threads} threads");
            }
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }
}

#[test]
fn test_record_key_column_only_where_keys_are_a_string_columns_values() {
    let b = batch(vec![
        (
            "id",
            Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef,
        ),
        ("n", Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef),
        (
            "region",
            Arc::new(StringArray::from(vec!["us", "eu"])) as ArrayRef,
        ),
    ]);
    let schema = b.schema();
    let keygen = |kind, keys: &[&str]| KeyGenerator::new(config(kind, keys, &["region"])).unwrap();
    let simple = keygen(KeyGeneratorType::Simple, &["id"]);
    assert_eq!(simple.record_key_column(&schema), Some("id"));
    // The keys it names are the column's values, row for row.
    let keys: Vec<String> = simple
        .keys(&b)
        .unwrap()
        .into_iter()
        .map(|k| k.record_key)
        .collect();
    assert_eq!(keys, ["a", "b"]);
    // An int column's keys are formatted, a complex key is `field:value`, a missing or
    // nested field is not a top-level string column.
    assert_eq!(
        keygen(KeyGeneratorType::Simple, &["n"]).record_key_column(&schema),
        None
    );
    assert_eq!(
        keygen(KeyGeneratorType::Complex, &["id"]).record_key_column(&schema),
        None
    );
    assert_eq!(
        keygen(KeyGeneratorType::Complex, &["id", "n"]).record_key_column(&schema),
        None
    );
    assert_eq!(
        keygen(KeyGeneratorType::Simple, &["s.id"]).record_key_column(&schema),
        None
    );
    let non_partition =
        KeyGenerator::new(config(KeyGeneratorType::NonPartition, &["id"], &[])).unwrap();
    assert_eq!(non_partition.record_key_column(&schema), Some("id"));
}
