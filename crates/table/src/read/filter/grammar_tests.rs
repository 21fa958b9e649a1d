//! Unit tests of the filter grammar (every accepted form, malformed predicates with their
//! positions) and of filters on fields inside struct columns.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arbor_timeline::config::TableType;
use arbor_timeline::TableConfig;
use arrow::array::{
    ArrayRef, Float64Array, Int32Array, ListArray, RecordBatch, StringArray, StructArray,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Field, Fields, Int32Type, Schema, SchemaRef};

use super::*;
use crate::error::TableError;

fn parsed(text: &str) -> PartitionFilter {
    PartitionFilter::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn check(text: &str, field: &str, op: FilterOp, values: &[&str]) {
    let f = parsed(text);
    assert_eq!(f.field, field, "field of {text:?}");
    assert_eq!(f.op, op, "op of {text:?}");
    assert_eq!(f.values, values, "values of {text:?}");
}

#[test]
fn test_grammar_comparisons() {
    use FilterOp::*;
    for (text, field, op, value) in [
        ("city=austin", "city", Eq, "austin"),
        ("city = austin", "city", Eq, "austin"),
        ("city='austin'", "city", Eq, "austin"),
        ("city = 'austin'", "city", Eq, "austin"),
        ("city = \"austin\"", "city", Eq, "austin"),
        ("city==austin", "city", Eq, "austin"),
        ("city == 'austin'", "city", Eq, "austin"),
        ("city != austin", "city", Ne, "austin"),
        ("city<>austin", "city", Ne, "austin"),
        ("n < 3", "n", Lt, "3"),
        ("n<=3", "n", Le, "3"),
        ("n > -3", "n", Gt, "-3"),
        ("n>=3.5", "n", Ge, "3.5"),
        ("year>=2024", "year", Ge, "2024"),
        // A bare value is the rest of the text, trimmed.
        ("city=san francisco", "city", Eq, "san francisco"),
        ("city!=a b  ", "city", Ne, "a b"),
        ("city=is null", "city", Eq, "is null"),
        ("p=region=eu/city=a/b", "p", Eq, "region=eu/city=a/b"),
        ("name = O'Brien", "name", Eq, "O'Brien"),
        // Quotes: removed, a doubled quote is one, blanks kept.
        ("name = 'O''Brien'", "name", Eq, "O'Brien"),
        ("name = \"say \"\"hi\"\"\"", "name", Eq, "say \"hi\""),
        ("name = '  padded '", "name", Eq, "  padded "),
        ("name = ''", "name", Eq, ""),
        ("name = '=x'", "name", Eq, "=x"),
        ("name = 'a, b'", "name", Eq, "a, b"),
        ("  city  =  sf  ", "city", Eq, "sf"),
        // Fields: dot paths and quoted names.
        ("rider.rating > 4", "rider.rating", Gt, "4"),
        ("a.b.c = 1", "a.b.c", Eq, "1"),
        ("\"my col\" = 1", "my col", Eq, "1"),
        ("`my col` = 1", "my col", Eq, "1"),
        ("`we``ird` = 1", "we`ird", Eq, "1"),
        ("\"rider\".\"rating\" = 5", "rider.rating", Eq, "5"),
        ("`rider`.rating = 5", "rider.rating", Eq, "5"),
        (
            "_hoodie_partition_path=2024/01",
            "_hoodie_partition_path",
            Eq,
            "2024/01",
        ),
        ("my-col=1", "my-col", Eq, "1"),
        ("été = 'ça'", "été", Eq, "ça"),
    ] {
        check(text, field, op, &[value]);
    }
}

#[test]
fn test_grammar_in_not_in_and_null_tests() {
    use FilterOp::*;
    for (text, field, op, values) in [
        ("city IN (a, b)", "city", In, &["a", "b"][..]),
        ("city IN ('a','b')", "city", In, &["a", "b"]),
        ("city in ( 'a' , \"b\" )", "city", In, &["a", "b"]),
        ("city In(a)", "city", In, &["a"]),
        ("city IN sf,paris", "city", In, &["sf", "paris"]),
        ("city IN sf", "city", In, &["sf"]),
        ("city IN (new york, sf)", "city", In, &["new york", "sf"]),
        ("city IN ('a,b', 'c)')", "city", In, &["a,b", "c)"]),
        ("city IN ('O''Brien', '')", "city", In, &["O'Brien", ""]),
        ("rider.name IN ('x')", "rider.name", In, &["x"]),
        ("city NOT IN ('a', 'b')", "city", NotIn, &["a", "b"]),
        ("city not  in a,b", "city", NotIn, &["a", "b"]),
        ("city IS NULL", "city", IsNull, &[]),
        ("city  is  null ", "city", IsNull, &[]),
        ("city IS NOT NULL", "city", IsNotNull, &[]),
        ("city  is  not  null", "city", IsNotNull, &[]),
        ("rider IS NOT NULL", "rider", IsNotNull, &[]),
        ("rider.rating is null", "rider.rating", IsNull, &[]),
        ("\"my col\" IS NULL", "my col", IsNull, &[]),
    ] {
        check(text, field, op, values);
    }
}

/// The 1-based character position an error names.
fn error_position(text: &str) -> usize {
    let err = match PartitionFilter::parse(text) {
        Ok(f) => panic!("{text:?} parsed as {f:?}"),
        Err(e) => e,
    };
    let TableError::InvalidInput { reason, .. } = &err else {
        panic!("{text:?}: not InvalidInput: {err:?}");
    };
    assert!(
        reason.contains(&format!("{text:?}")),
        "{text:?}: the error quotes the text: {reason}"
    );
    let (_, after) = reason
        .split_once(" at character ")
        .unwrap_or_else(|| panic!("{text:?}: no position: {reason}"));
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    let position: usize = digits.parse().unwrap();
    // The caret line puts `^` under that character.
    let lines: Vec<&str> = reason.lines().collect();
    let caret = lines.last().unwrap();
    let shown = lines.get(lines.len() - 2).unwrap();
    let column = caret.chars().count() - 1;
    assert_eq!(
        column - 4,
        position - 1,
        "{text:?}: caret under the position\n{reason}"
    );
    assert_eq!(shown.chars().count() - 4, text.chars().count(), "{reason}");
    position
}

#[test]
fn test_grammar_malformed_predicates_name_the_position() {
    for (text, position, what) in [
        ("", 1, "empty filter"),
        ("   ", 4, "empty filter"),
        ("= 3", 1, "expected a field name"),
        ("< 3", 1, "expected a field name"),
        ("city", 5, "expected an operator"),
        ("city   ", 8, "expected an operator"),
        ("city =", 7, "expected a value"),
        ("city = 'a", 8, "unterminated quote"),
        ("city = 'austin", 8, "unterminated quote"),
        ("city = \"a", 8, "unterminated quote"),
        ("city = 'a''", 8, "unterminated quote"),
        ("city IN ()", 10, "expected a value"),
        ("city IN ('a',)", 14, "expected a value"),
        ("city IN ('a' 'b')", 14, "expected ',' or ')'"),
        ("city IN ('a'", 13, "missing ')'"),
        ("city IN (a", 11, "missing ')'"),
        ("city IN", 8, "expected a value or '('"),
        ("city IN (a,,b)", 12, "expected a value"),
        ("city IN (a) b", 13, "unexpected text"),
        ("city IN ((a))", 10, "expected a value"),
        ("city IN a)", 10, "expected ','"),
        ("city IN ('a') 'b'", 15, "unexpected text"),
        ("city IS", 8, "expected NULL or NOT NULL"),
        ("city IS NOT", 12, "expected NULL after IS NOT"),
        ("city IS NULLX", 9, "expected NULL or NOT NULL"),
        ("city IS NULL x", 14, "unexpected text"),
        ("city IS NOT NULL NULL", 18, "unexpected text"),
        ("city IS 'a'", 9, "expected NULL or NOT NULL"),
        ("city NOT", 9, "expected IN after NOT"),
        ("city NOT LIKE 'a'", 10, "expected IN after NOT"),
        ("city === a", 6, "unknown operator"),
        ("city =< a", 6, "unknown operator"),
        ("city ! a", 6, "unknown operator"),
        ("city => a", 6, "unknown operator"),
        ("city = = a", 8, "expected a value"),
        ("city = 'a' extra", 12, "unexpected text"),
        ("city = 'a''b' 'c'", 15, "unexpected text"),
        (".city = a", 1, "expected a field name"),
        ("rider. = 1", 7, "expected a field name after '.'"),
        ("rider..x = 1", 7, "expected a field name after '.'"),
        ("rider.x. IS NULL", 9, "expected a field name after '.'"),
        ("\"city = a", 1, "unterminated quote"),
        ("`city = a", 1, "unterminated quote"),
        ("\"\" = a", 1, "empty field name"),
        ("my col = 1", 4, "quote a field name"),
        ("city LIKE 'a%'", 6, "expected an operator"),
        ("city INx (a)", 6, "expected an operator"),
        ("city 'a'", 6, "expected an operator"),
        ("city (a)", 6, "expected an operator"),
        ("(city = a)", 1, "expected a field name"),
        ("'city' = a", 1, "expected a field name"),
        ("été == 'ça", 8, "unterminated quote"),
    ] {
        let got = error_position(text);
        assert_eq!(got, position, "position of the error in {text:?}");
        let err = PartitionFilter::parse(text).unwrap_err().to_string();
        assert!(err.contains(what), "{text:?}: {err:?} should say {what:?}");
    }
}

#[test]
fn test_grammar_error_message_shape() {
    let err = PartitionFilter::parse("city = 'austin")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "invalid input: filter \"city = 'austin\": unterminated quote at character 8\n    \
         city = 'austin\n           ^"
    );
}

fn config() -> TableConfig {
    TableConfig::builder_v8("t", TableType::CopyOnWrite)
        .record_key_fields(["id"])
        .build()
        .unwrap()
}

fn rider_fields() -> Fields {
    Fields::from(vec![
        Field::new("name", DataType::Utf8, true),
        Field::new("rating", DataType::Float64, true),
        Field::new(
            "home",
            DataType::Struct(Fields::from(vec![Field::new("city", DataType::Utf8, true)])),
            true,
        ),
    ])
}

fn nested_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("rider", DataType::Struct(rider_fields()), true),
        Field::new(
            "tags",
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            true,
        ),
        Field::new("a.b", DataType::Int32, true),
    ]))
}

/// Rows a..e: `a` a full rider, `b` a null rider (whose children hold values, as Arrow
/// allows), `c` a rider with null fields, `d` and `e` more riders; `tags` null for `c`.
fn nested_batch() -> RecordBatch {
    let home = StructArray::new(
        Fields::from(vec![Field::new("city", DataType::Utf8, true)]),
        vec![Arc::new(StringArray::from(vec![
            Some("sf"),
            Some("sf"),
            None,
            Some("nyc"),
            Some("sf"),
        ])) as ArrayRef],
        Some(NullBuffer::from(vec![true, true, true, true, false])),
    );
    let rider = StructArray::new(
        rider_fields(),
        vec![
            Arc::new(StringArray::from(vec![
                Some("ann"),
                Some("ghost"),
                None,
                Some("dan"),
                Some("eve"),
            ])) as ArrayRef,
            Arc::new(Float64Array::from(vec![
                Some(4.5),
                Some(5.0),
                None,
                Some(3.0),
                Some(4.9),
            ])),
            Arc::new(home),
        ],
        Some(NullBuffer::from(vec![true, false, true, true, true])),
    );
    let tags = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
        Some(vec![Some(1)]),
        Some(vec![]),
        None,
        Some(vec![Some(2), None]),
        Some(vec![Some(3)]),
    ]);
    RecordBatch::try_new(
        nested_schema(),
        vec![
            Arc::new(StringArray::from(vec!["a", "b", "c", "d", "e"])),
            Arc::new(rider),
            Arc::new(tags),
            Arc::new(Int32Array::from(vec![1, 2, 3, 4, 5])),
        ],
    )
    .unwrap()
}

fn nested_ids(texts: &[&str]) -> Vec<String> {
    let filters: Vec<PartitionFilter> = texts.iter().map(|t| parsed(t)).collect();
    let p = PartitionPruner::new(&config(), &nested_schema(), &filters).unwrap();
    let out = p.filter_rows(nested_batch()).unwrap();
    let ids = out
        .column(0)
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    ids.iter().map(|v| v.unwrap().to_string()).collect()
}

#[test]
fn test_nested_fields_compare_and_null_parents_make_null_leaves() {
    assert_eq!(
        nested_ids(&["rider.rating > 4"]),
        ["a", "e"],
        "b's rider is null"
    );
    assert_eq!(nested_ids(&["rider.rating >= 3"]), ["a", "d", "e"]);
    assert_eq!(nested_ids(&["rider.name = 'dan'"]), ["d"]);
    assert_eq!(nested_ids(&["rider.name != 'dan'"]), ["a", "e"]);
    assert_eq!(nested_ids(&["rider.name IN ('ghost', 'ann')"]), ["a"]);
    assert_eq!(nested_ids(&["rider.name NOT IN ('ann')"]), ["d", "e"]);
    assert_eq!(nested_ids(&["rider.name IS NULL"]), ["b", "c"]);
    assert_eq!(nested_ids(&["rider.name IS NOT NULL"]), ["a", "d", "e"]);
    assert_eq!(
        nested_ids(&["rider.home.city = sf"]),
        ["a"],
        "e's home is null"
    );
    assert_eq!(nested_ids(&["rider.home.city IS NULL"]), ["b", "c", "e"]);
    assert_eq!(nested_ids(&["rider.home IS NULL"]), ["b", "e"]);
    assert_eq!(nested_ids(&["`rider`.\"rating\" < 4"]), ["d"]);
    assert_eq!(
        nested_ids(&["rider.rating > 4", "rider.name = eve"]),
        ["e"],
        "filters are ANDed"
    );
}

#[test]
fn test_is_null_on_struct_and_list_columns() {
    assert_eq!(nested_ids(&["rider IS NOT NULL"]), ["a", "c", "d", "e"]);
    assert_eq!(nested_ids(&["rider IS NULL"]), ["b"]);
    assert_eq!(nested_ids(&["tags IS NULL"]), ["c"]);
    assert_eq!(nested_ids(&["tags is not null"]), ["a", "b", "d", "e"]);
}

#[test]
fn test_column_names_holding_dots_are_looked_up_whole_first() {
    assert_eq!(nested_ids(&["\"a.b\" > 3"]), ["d", "e"]);
    assert_eq!(nested_ids(&["a.b <= 1"]), ["a"]);
}

#[test]
fn test_nested_filters_use_no_statistics() {
    let filters = [
        parsed("rider.rating > 4"),
        parsed("rider IS NOT NULL"),
        parsed("tags IS NULL"),
        parsed("id = a"),
    ];
    let p = PartitionPruner::new(&config(), &nested_schema(), &filters).unwrap();
    let stats: Vec<Option<&str>> = p.compiled().iter().map(|c| c.stats_column()).collect();
    assert_eq!(stats, [None, None, None, Some("id")]);
    // The rows are filtered by the whole struct column: it is read.
    assert_eq!(p.row_columns(), ["rider", "rider", "tags", "id"]);
}

#[test]
fn test_unknown_fields_and_bad_values_are_errors() {
    let c = config();
    for (text, says) in [
        ("nope = 1", "unknown column \"nope\""),
        (
            "rider.nope = 1",
            "struct \"rider\" has no field \"nope\" (fields: name, rating, home)",
        ),
        (
            "rider.home.zip IS NULL",
            "struct \"rider.home\" has no field \"zip\"",
        ),
        (
            "rider.name.first = x",
            "\"rider.name\" is of type Utf8, not a struct",
        ),
        ("tags.item = 1", "not a struct"),
        ("nope.x = 1", "unknown column \"nope.x\""),
        ("rider.rating > high", "filter value \"high\""),
        ("rider.rating IN (1, x)", "filter value \"x\""),
        ("rider > 1", "cannot be filtered by a comparison"),
        ("tags = 1", "cannot be filtered by a comparison"),
        ("rider IN (a)", "cannot be filtered by a comparison"),
    ] {
        let err = PartitionPruner::new(&c, &nested_schema(), &[parsed(text)])
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{text:?}: {err:?} should say {says:?}");
    }
}

#[test]
fn test_not_in_rows_and_nulls() {
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("n", DataType::Int32, true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(vec!["a", "b", "c", "d"])),
            Arc::new(Int32Array::from(vec![Some(1), Some(2), None, Some(3)])),
        ],
    )
    .unwrap();
    let p = PartitionPruner::new(&config(), &schema, &[parsed("n NOT IN (1, 3)")]).unwrap();
    let out = p.filter_rows(batch).unwrap();
    let ids: Vec<&str> = out
        .column(0)
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .iter()
        .map(|v| v.unwrap())
        .collect();
    assert_eq!(ids, ["b"], "a null is NOT IN nothing");
}

/// A conjunction or disjunction typed into one predicate is named, with what to type instead.
#[test]
fn test_and_or_after_a_predicate_say_what_to_type_instead() {
    for (text, says) in [
        (
            "ts >= '2024-03-01' and amt < 0",
            "each predicate takes a --where of its own",
        ),
        (
            "a = 1 AND b = 2",
            "each predicate takes a --where of its own",
        ),
        (
            "a = 1 && b = 2",
            "each predicate takes a --where of its own",
        ),
        ("a = 1 or a = 2", "FIELD IN (...)"),
        ("a = 1 || a = 2", "FIELD IN (...)"),
        ("a = 'x' y", "unexpected text after the predicate at"),
    ] {
        assert!(error_position(text) > 1, "{text}");
        let err = PartitionFilter::parse(text).unwrap_err().to_string();
        assert!(err.contains(says), "{text}: {err}");
    }
    // Quoted, such a word is part of the value; bare, a first word may be anything.
    check(
        "genre = 'rock and roll'",
        "genre",
        FilterOp::Eq,
        &["rock and roll"],
    );
    check("genre = and more", "genre", FilterOp::Eq, &["and more"]);
}
