//! Unit tests of partition filters: parsing, path splitting, pruning and row filtering.

#![allow(clippy::unwrap_used)]

use arbor_timeline::config::keys;
use arbor_timeline::TableConfig;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::datatypes::{DataType, TimeUnit};

use std::sync::Arc;

use arbor_timeline::config::TableType;
use arrow::datatypes::{Field, Schema};

use super::*;

fn config(fields: &[&str], hive: bool, urlencode: bool) -> TableConfig {
    TableConfig::builder_v8("t", TableType::CopyOnWrite)
        .record_key_fields(["id"])
        .partition_fields(fields.iter().copied())
        .hive_style_partitioning(hive)
        .url_encode_partitioning(urlencode)
        .build()
        .unwrap()
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("year", DataType::Int32, true),
        Field::new("city", DataType::Utf8, true),
        Field::new("day", DataType::Date32, true),
    ]))
}

#[test]
fn test_parse_operators_and_in() {
    assert_eq!(
        PartitionFilter::parse("year>=2024").unwrap(),
        PartitionFilter::new("year", FilterOp::Ge, "2024")
    );
    assert_eq!(
        PartitionFilter::parse("city!=a b").unwrap(),
        PartitionFilter::new("city", FilterOp::Ne, "a b")
    );
    assert_eq!(
        PartitionFilter::parse("city IN (a, b)").unwrap(),
        PartitionFilter::is_in("city", ["a", "b"])
    );
    assert!(PartitionFilter::parse("nothing").is_err());
    assert!(PartitionFilter::parse("=x").is_err());
}

#[test]
fn test_matches_hive_typed_numeric_compares_numbers() {
    let c = config(&["year", "city"], true, false);
    let p = PartitionPruner::new(
        &c,
        &schema(),
        &[PartitionFilter::new("year", FilterOp::Lt, "10")],
    )
    .unwrap();
    // As strings "9" > "10"; typed, 9 < 10.
    assert!(p.matches("year=9/city=x").unwrap());
    assert!(!p.matches("year=10/city=x").unwrap());
    assert!(!p.matches("year=__HIVE_DEFAULT_PARTITION__/city=x").unwrap());
}

#[test]
fn test_matches_plain_segments_and_in() {
    let c = config(&["year", "city"], false, false);
    let p = PartitionPruner::new(
        &c,
        &schema(),
        &[PartitionFilter::is_in("city", ["sf", "nyc"])],
    )
    .unwrap();
    assert!(p.matches("2024/sf").unwrap());
    assert!(!p.matches("2024/la").unwrap());
    // Ambiguous (a value holds '/' and nothing says where): not pruned, rows decide.
    assert!(p.matches("a/b/c").unwrap());
    assert!(p.partition_values("a/b/c").is_err());
}

#[test]
fn test_dropped_partition_columns_prune_by_path_only() {
    let c = TableConfig::builder_v8("t", TableType::CopyOnWrite)
        .record_key_fields(["id"])
        .partition_fields(["city"])
        .property(keys::DROP_PARTITION_COLUMNS, "true")
        .build()
        .unwrap();
    let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "sf")]).unwrap();
    assert!(p.row_columns().is_empty());
    assert!(p.matches("sf").unwrap());
    assert!(!p.matches("la").unwrap());
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("city", DataType::Utf8, true)])),
        vec![Arc::new(arrow::array::StringArray::from(vec![
            None::<&str>,
        ]))],
    )
    .unwrap();
    assert_eq!(
        p.filter_rows(batch).unwrap().num_rows(),
        1,
        "null-filled rows stay"
    );
    let c = TableConfig::builder_v8("t", TableType::CopyOnWrite)
        .record_key_fields(["id"])
        .partition_fields(["city"])
        .key_generator_type("TIMESTAMP")
        .property(keys::DROP_PARTITION_COLUMNS, "true")
        .build()
        .unwrap();
    let err = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "sf")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("do not hold the field's values"), "{err}");
}

#[test]
fn test_matches_hive_value_with_slash_not_url_encoded() {
    let c = config(&["year", "city"], true, false);
    let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "a/b")]).unwrap();
    assert_eq!(
        p.partition_values("year=1/city=a/b").unwrap(),
        vec!["1".to_string(), "a/b".to_string()]
    );
    assert!(p.matches("year=1/city=a/b").unwrap());
    assert!(!p.matches("year=1/city=a").unwrap());
    let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("year", "2024")]).unwrap();
    assert!(p.matches("year=2024/city=x/y/z").unwrap());
    assert!(!p.matches("year=2023/city=x/y/z").unwrap());
    let c = config(&["city", "year"], true, false);
    let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("year", "7")]).unwrap();
    assert_eq!(
        p.partition_values("city=x/y/year=7").unwrap(),
        vec!["x/y".to_string(), "7".to_string()]
    );
    assert!(p.matches("city=x/y/year=7").unwrap());
    assert!(!p.matches("city=x/y/year=8").unwrap());
}

#[test]
fn test_timestamp_keygen_and_timestamp_columns_filter_rows_not_paths() {
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("ms", DataType::Int64, true),
        Field::new(
            "at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
    ]));
    let c = TableConfig::builder_v8("t", TableType::CopyOnWrite)
        .record_key_fields(["id"])
        .partition_fields(["ms"])
        .key_generator_type("TIMESTAMP")
        .build()
        .unwrap();
    let p =
        PartitionPruner::new(&c, &schema, &[PartitionFilter::eq("ms", "1700000000000")]).unwrap();
    assert!(
        p.matches("2024/01/15/10").unwrap(),
        "formatted paths are not pruned"
    );
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(arrow::array::StringArray::from(vec!["a", "b", "c"])),
            Arc::new(arrow::array::Int64Array::from(vec![
                Some(1_700_000_000_000),
                Some(1),
                None,
            ])),
            Arc::new(
                arrow::array::TimestampMicrosecondArray::from(vec![
                    Some(1_705_314_600_000_000),
                    Some(0),
                    None,
                ])
                .with_timezone("UTC"),
            ),
        ],
    )
    .unwrap();
    assert_eq!(p.filter_rows(batch.clone()).unwrap().num_rows(), 1);

    let c = config(&["at"], false, false);
    let p = PartitionPruner::new(
        &c,
        &schema,
        &[PartitionFilter::new(
            "at",
            FilterOp::Ge,
            "2024-01-15T10:30:00Z",
        )],
    )
    .unwrap();
    assert!(p.matches("1705314600000000").unwrap());
    let kept = p.filter_rows(batch.clone()).unwrap();
    assert_eq!(
        kept.num_rows(),
        1,
        "2024-01-15T10:30:00Z >= itself; 1970 and null are not"
    );
    let p = PartitionPruner::new(
        &c,
        &schema,
        &[PartitionFilter::new(
            "at",
            FilterOp::Lt,
            "2024-01-15 10:30:00+01:00",
        )],
    )
    .unwrap();
    assert_eq!(p.filter_rows(batch).unwrap().num_rows(), 1, "only 1970");
    let err = PartitionPruner::new(&c, &schema, &[PartitionFilter::eq("at", "soon")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("timestamp") && err.contains("at"), "{err}");
}

#[test]
fn test_matches_url_encoded_value_is_decoded() {
    let c = config(&["city"], true, true);
    let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "a/b")]).unwrap();
    assert!(p.matches("city=a%2Fb").unwrap());
    assert!(!p.matches("city=a").unwrap());
}

#[test]
fn test_matches_date_and_single_field_multi_segment_path() {
    let c = config(&["day"], false, false);
    let p = PartitionPruner::new(
        &c,
        &schema(),
        &[PartitionFilter::new("day", FilterOp::Gt, "2024-01-05")],
    )
    .unwrap();
    assert!(p.matches("2024-01-10").unwrap());
    assert!(!p.matches("2024-01-05").unwrap());
    let c = config(&["city"], false, false);
    let p =
        PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "2024/01/31")]).unwrap();
    assert!(p.matches("2024/01/31").unwrap());
}

#[test]
fn test_new_unknown_field_or_bad_value_names_field() {
    let c = config(&["year"], true, false);
    let err = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("nope", "x")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown column \"nope\""), "{err}");
    // A column that is not a partition field filters rows and prunes no path.
    let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "x")]).unwrap();
    assert!(p.matches("year=1").unwrap());
    assert_eq!(p.row_columns(), vec!["city"]);
    let err = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("year", "abc")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("year"), "{err}");
    let p = PartitionPruner::new(
        &c,
        &schema(),
        &[PartitionFilter::eq("_hoodie_partition_path", "year=1")],
    )
    .unwrap();
    assert!(p.matches("year=1").unwrap());
    assert!(!p.matches("year=2").unwrap());
}

#[test]
fn test_parse_is_null_and_is_not_null() {
    assert_eq!(
        PartitionFilter::parse("city IS NULL").unwrap(),
        PartitionFilter::is_null("city")
    );
    assert_eq!(
        PartitionFilter::parse("city  is  not  null").unwrap(),
        PartitionFilter::is_not_null("city")
    );
    assert_eq!(
        PartitionFilter::parse("city=is null").unwrap(),
        PartitionFilter::eq("city", "is null")
    );
    assert!(PartitionFilter::parse(" IS NULL").is_err());
}

fn typed_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("amount", DataType::Decimal128(10, 2), true),
        Field::new("flag", DataType::Boolean, true),
        Field::new("n", DataType::UInt64, true),
        Field::new("blob", DataType::Binary, true),
        Field::new("city", DataType::Utf8, true),
    ]))
}

fn typed_batch() -> RecordBatch {
    RecordBatch::try_new(
        typed_schema(),
        vec![
            Arc::new(arrow::array::StringArray::from(vec!["a", "b", "c", "d"])),
            Arc::new(
                arrow::array::Decimal128Array::from(vec![Some(1050), Some(-5), None, Some(100)])
                    .with_precision_and_scale(10, 2)
                    .unwrap(),
            ),
            Arc::new(arrow::array::BooleanArray::from(vec![
                Some(true),
                Some(false),
                None,
                Some(true),
            ])),
            Arc::new(arrow::array::UInt64Array::from(vec![
                Some(u64::MAX),
                Some(0),
                None,
                Some(7),
            ])),
            Arc::new(arrow::array::BinaryArray::from(vec![
                Some(b"x".as_ref()),
                None,
                None,
                None,
            ])),
            Arc::new(arrow::array::StringArray::from(vec![
                Some("ny"),
                None,
                Some("sf"),
                Some("ny"),
            ])),
        ],
    )
    .unwrap()
}

fn kept_ids(filters: &[PartitionFilter]) -> Vec<String> {
    let c = config(&[], false, false);
    let p = PartitionPruner::new(&c, &typed_schema(), filters).unwrap();
    let out = p.filter_rows(typed_batch()).unwrap();
    let ids = out
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::StringArray>()
        .unwrap();
    ids.iter().map(|v| v.unwrap().to_string()).collect()
}

#[test]
fn test_rows_typed_decimal_bool_unsigned_and_nulls() {
    assert_eq!(
        kept_ids(&[PartitionFilter::new("amount", FilterOp::Ge, "1.00")]),
        ["a", "d"]
    );
    assert_eq!(
        kept_ids(&[PartitionFilter::eq("amount", "10.5")]),
        ["a"],
        "10.5 is 10.50 at scale 2"
    );
    assert_eq!(kept_ids(&[PartitionFilter::eq("flag", "TRUE")]), ["a", "d"]);
    assert_eq!(
        kept_ids(&[PartitionFilter::new("n", FilterOp::Gt, "7")]),
        ["a"],
        "u64::MAX compares exactly"
    );
    assert_eq!(
        kept_ids(&[PartitionFilter::new("city", FilterOp::Ne, "ny")]),
        ["c"],
        "a null is not != ny"
    );
    assert_eq!(kept_ids(&[PartitionFilter::is_null("city")]), ["b"]);
    assert_eq!(
        kept_ids(&[
            PartitionFilter::is_not_null("amount"),
            PartitionFilter::is_in("city", ["ny", "sf"])
        ]),
        ["a", "d"],
        "filters are ANDed"
    );
}

#[test]
fn test_new_value_not_of_column_type_names_column_and_value() {
    let c = config(&[], false, false);
    for (filter, column, value) in [
        (PartitionFilter::eq("amount", "1.005"), "amount", "1.005"),
        (PartitionFilter::eq("amount", "abc"), "amount", "abc"),
        (PartitionFilter::eq("flag", "yes"), "flag", "yes"),
        (PartitionFilter::eq("n", "1.5"), "n", "1.5"),
    ] {
        let err = PartitionPruner::new(&c, &typed_schema(), &[filter])
            .unwrap_err()
            .to_string();
        assert!(err.contains(column) && err.contains(value), "{err}");
    }
    let err = PartitionPruner::new(&c, &typed_schema(), &[PartitionFilter::eq("blob", "x")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot be filtered"), "{err}");
    let err = PartitionPruner::new(
        &c,
        &typed_schema(),
        &[PartitionFilter {
            field: "city".into(),
            op: FilterOp::IsNull,
            values: vec!["x".into()],
        }],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("takes no value"), "{err}");
}

#[test]
fn test_is_null_on_partition_field_keeps_default_partition_only() {
    let c = config(&["city"], true, false);
    let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::is_null("city")]).unwrap();
    assert!(p.matches("city=__HIVE_DEFAULT_PARTITION__").unwrap());
    assert!(!p.matches("city=ny").unwrap());
    let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::is_not_null("city")]).unwrap();
    assert!(p.matches("city=__HIVE_DEFAULT_PARTITION__").unwrap());
}

#[test]
fn test_string_values_compare_exactly_and_the_default_partition_holds_empty_strings() {
    let c = config(&["city"], true, false);
    let p = |f: PartitionFilter| PartitionPruner::new(&c, &schema(), &[f]).unwrap();
    // Blanks are part of a string value (only a parsed filter text is trimmed).
    let sf = p(PartitionFilter::eq("city", "sf"));
    assert!(sf.matches("city=sf").unwrap());
    assert!(!sf.matches("city= sf").unwrap());
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(arrow::array::StringArray::from(vec!["a", "b", "c"])),
            Arc::new(arrow::array::Int32Array::from(vec![1, 1, 1])),
            Arc::new(arrow::array::StringArray::from(vec![
                Some("sf"),
                Some(" sf"),
                None,
            ])),
            Arc::new(arrow::array::Date32Array::from(vec![1, 1, 1])),
        ],
    )
    .unwrap();
    assert_eq!(sf.filter_rows(batch.clone()).unwrap().num_rows(), 1);
    let blank = p(PartitionFilter::eq("city", " sf"));
    assert_eq!(blank.filter_rows(batch).unwrap().num_rows(), 1);
    // Hudi writes empty strings, like nulls, to the default partition: `= ''`, `<= 'z'` and
    // `!= 'x'` may hold there, `= 'sf'` may not.
    let default = "city=__HIVE_DEFAULT_PARTITION__";
    assert!(p(PartitionFilter::eq("city", "")).matches(default).unwrap());
    assert!(p(PartitionFilter::new("city", FilterOp::Le, "z"))
        .matches(default)
        .unwrap());
    assert!(p(PartitionFilter::new("city", FilterOp::Ne, "x"))
        .matches(default)
        .unwrap());
    assert!(!sf.matches(default).unwrap());
    assert!(p(PartitionFilter::is_null("city"))
        .matches(default)
        .unwrap());
}

fn in_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("f", DataType::Float64, true),
        Field::new("t", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("d", DataType::Date32, true),
        Field::new("big", DataType::LargeUtf8, true),
        Field::new(
            "dict",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
        Field::new("amount", DataType::Decimal128(10, 2), true),
        Field::new("n", DataType::Int32, true),
    ]))
}

fn in_batch() -> RecordBatch {
    let dict: arrow::array::DictionaryArray<arrow::datatypes::Int32Type> =
        vec![Some("x"), Some("x "), None, Some("y"), Some("")]
            .into_iter()
            .collect();
    RecordBatch::try_new(
        in_schema(),
        vec![
            Arc::new(arrow::array::StringArray::from(vec![
                "a", "b", "c", "d", "e",
            ])),
            Arc::new(arrow::array::Float64Array::from(vec![
                Some(0.0),
                Some(-0.0),
                Some(f64::NAN),
                None,
                Some(1.5),
            ])),
            Arc::new(arrow::array::TimestampMillisecondArray::from(vec![
                Some(0),
                Some(1_000),
                None,
                Some(86_400_000),
                Some(1),
            ])),
            Arc::new(arrow::array::Date32Array::from(vec![
                Some(0),
                Some(1),
                None,
                Some(20_000),
                Some(-1),
            ])),
            Arc::new(arrow::array::LargeStringArray::from(vec![
                Some("p"),
                Some(" p"),
                Some("P"),
                None,
                Some("p "),
            ])),
            Arc::new(dict),
            Arc::new(
                arrow::array::Decimal128Array::from(vec![
                    Some(1050),
                    Some(-5),
                    None,
                    Some(100),
                    Some(0),
                ])
                .with_precision_and_scale(10, 2)
                .unwrap(),
            ),
            Arc::new(arrow::array::Int32Array::from(vec![
                Some(1),
                Some(-1),
                None,
                Some(i32::MAX),
                Some(0),
            ])),
        ],
    )
    .unwrap()
}

fn in_kept(filters: &[PartitionFilter]) -> Vec<String> {
    let c = config(&[], false, false);
    let p = PartitionPruner::new(&c, &in_schema(), filters).unwrap();
    let out = p.filter_rows(in_batch()).unwrap();
    let ids = out
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::StringArray>()
        .unwrap();
    ids.iter().map(|v| v.unwrap().to_string()).collect()
}

/// `IN` (hashed once) keeps exactly the rows some `=` of its values keeps, for every type and
/// for a long list of mostly absent values; nulls and NaN match nothing.
#[test]
fn test_in_with_many_values_keeps_the_rows_of_its_equalities() {
    let cases: [(&str, Vec<&str>, Vec<&str>); 8] = [
        ("f", vec!["0", "1.5", "7.25"], vec!["a", "b", "e"]),
        (
            "t",
            vec!["1970-01-01T00:00:01Z", "1970-01-02", "1999-01-01T00:00:00"],
            vec!["b", "d"],
        ),
        (
            "d",
            vec!["1970-01-02", "1969-12-31", "2000-01-01"],
            vec!["b", "e"],
        ),
        ("big", vec!["p", "p ", "q"], vec!["a", "e"]),
        ("dict", vec!["x ", "", "z"], vec!["b", "e"]),
        (
            "amount",
            vec!["10.5", "1", "0.00", "3"],
            vec!["a", "d", "e"],
        ),
        ("n", vec!["-1", " 2147483647", "5"], vec!["b", "d"]),
        ("id", vec!["e", "a", "zz"], vec!["a", "e"]),
    ];
    for (column, present, want) in cases {
        // Absent values around the present ones, so the list is long.
        let mut values: Vec<String> = present.iter().map(|v| v.to_string()).collect();
        let absent: Vec<String> = match column {
            "f" => (2..3000).map(|i| format!("{i}.5")).collect(),
            "t" | "d" => (0..3000)
                .map(|i| format!("2001-01-01T00:00:{:02}", i % 60))
                .collect(),
            "amount" | "n" => (1000..4000).map(|i| i.to_string()).collect(),
            _ => (0..3000).map(|i| format!("v{i}")).collect(),
        };
        let absent: Vec<String> = match column {
            "d" => (0..3000)
                .map(|i| format!("2001-{:02}-01", i % 12 + 1))
                .collect(),
            _ => absent,
        };
        values.extend(absent);
        let got = in_kept(&[PartitionFilter::is_in(column, values.clone())]);
        assert_eq!(got, want, "{column}");
        let mut by_eq: Vec<String> = present
            .iter()
            .flat_map(|v| in_kept(&[PartitionFilter::eq(column, *v)]))
            .collect();
        by_eq.sort();
        by_eq.dedup();
        assert_eq!(got, by_eq, "{column}: IN differs from its equalities");
    }
}

/// A partition field `IN` a long list prunes like its equalities, default partition included.
#[test]
fn test_in_with_many_values_matches_partition_paths() {
    let c = config(&["year", "city"], true, false);
    let mut cities: Vec<String> = (0..5000).map(|i| format!("c{i}")).collect();
    cities.push("".into());
    let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::is_in("city", cities)]).unwrap();
    assert!(p.matches("year=1/city=c4999").unwrap());
    assert!(!p.matches("year=1/city=c5000").unwrap());
    assert!(!p.matches("year=1/city=C1").unwrap());
    // The default partition holds the empty strings, which are listed.
    assert!(p.matches("year=1/city=__HIVE_DEFAULT_PARTITION__").unwrap());
    let mut years: Vec<String> = (2000..7000).map(|i| i.to_string()).collect();
    years.push("+1999".into());
    let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::is_in("year", years)]).unwrap();
    assert!(p.matches("year=1999/city=x").unwrap(), "+1999 is 1999");
    assert!(p.matches("year=6999/city=x").unwrap());
    assert!(!p.matches("year=7000/city=x").unwrap());
    assert!(!p.matches("year=__HIVE_DEFAULT_PARTITION__/city=x").unwrap());
}
