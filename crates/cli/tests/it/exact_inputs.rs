//! One exact conversion for every input path: a value written as parquet, CSV, JSON lines and
//! an SQL `INSERT` (through `arbor sql`) into copy-on-write and merge-on-read tables is stored
//! as the same value by all four, or refused by all four naming the column.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    new_null_array, ArrayRef, Date32Array, Decimal128Array, Float32Array, Float64Array, Int64Array,
    RecordBatch, StringArray, TimestampNanosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use chrono::DateTime;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::create_write::{arbor, ok, s};

/// A column's name and type.
type Column = (&'static str, fn() -> DataType);

/// The table's columns (after `id`).
const COLUMNS: [Column; 8] = [
    ("dec", || DataType::Decimal128(10, 2)),
    ("f64", || DataType::Float64),
    ("f32", || DataType::Float32),
    ("i32", || DataType::Int32),
    ("i64", || DataType::Int64),
    ("tsu", || {
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    }),
    ("tsn", || DataType::Timestamp(TimeUnit::Microsecond, None)),
    ("dt", || DataType::Date32),
];

/// A value as an input holds it: typed for parquet (`None`: parquet cannot hold it) and as
/// text for CSV, JSON lines (`json`: the JSON value) and SQL (`sql`: the literal).
#[derive(Debug, Clone)]
struct Case {
    column: &'static str,
    typed: Option<ArrayRef>,
    text: String,
    json: String,
    sql: String,
}

fn number(column: &'static str, typed: Option<ArrayRef>, text: String) -> Case {
    Case {
        column,
        typed,
        json: text.clone(),
        sql: text.clone(),
        text,
    }
}

fn quoted(column: &'static str, typed: Option<ArrayRef>, text: String) -> Case {
    Case {
        column,
        typed,
        json: format!("{text:?}"),
        sql: format!("'{text}'"),
        text,
    }
}

fn decimal_text(m: i128, scale: u32) -> String {
    let digits = m.unsigned_abs().to_string();
    let width = scale as usize + 1;
    let padded = format!("{digits:0>width$}");
    let (int, frac) = padded.split_at(padded.len() - scale as usize);
    let sign = if m < 0 { "-" } else { "" };
    if scale == 0 {
        format!("{sign}{int}")
    } else {
        format!("{sign}{int}.{frac}")
    }
}

fn float64(column: &'static str, v: f64) -> Case {
    let a: ArrayRef = Arc::new(Float64Array::from(vec![v]));
    if v.is_finite() {
        number(column, Some(a), format!("{v:?}"))
    } else {
        // JSON and SQL have no literal for the non-finite values: their names as strings.
        let name = if v.is_nan() {
            "NaN".to_string()
        } else {
            format!("{v}")
        };
        Case {
            column,
            typed: Some(a),
            json: format!("{name:?}"),
            sql: format!("CAST('{name}' AS DOUBLE)"),
            text: name,
        }
    }
}

fn cases() -> impl Strategy<Value = Case> {
    let edge_decimals = prop_oneof![
        Just(9_999_999_999_i128),
        Just(-9_999_999_999_i128),
        Just(10_000_000_000_i128),
        Just(1_005i128),
        Just(1_500i128),
        any::<i64>().prop_map(i128::from),
        -100_000i128..100_000,
    ];
    let decimal = (edge_decimals, 0u32..5).prop_map(|(m, scale)| {
        let a: ArrayRef = Arc::new(
            Decimal128Array::from(vec![m])
                .with_precision_and_scale(38, scale as i8)
                .unwrap(),
        );
        number("dec", Some(a), decimal_text(m, scale))
    });
    let f64s = prop_oneof![
        any::<f64>(),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        Just(5e-324),
        Just(-0.0),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(0.1),
    ]
    .prop_map(|v| float64("f64", v));
    // A double written into a float column: exact in a float, or beyond its range.
    let f32s = prop_oneof![
        any::<f32>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| {
                let a: ArrayRef = Arc::new(Float32Array::from(vec![f]));
                number("f32", Some(a), format!("{f:?}"))
            }),
        prop_oneof![Just(1e39), Just(-3.5e38), Just(1e-50)].prop_map(|v| float64("f32", v)),
    ];
    let ints = prop_oneof![
        Just(i128::from(i32::MAX)),
        Just(i128::from(i32::MAX) + 1),
        Just(i128::from(i32::MIN) - 1),
        Just(i128::from(i64::MAX)),
        Just(i128::from(i64::MAX) + 1),
        Just(i128::from(i64::MIN)),
        any::<i64>().prop_map(i128::from),
    ];
    let integer = (ints, prop_oneof![Just("i32"), Just("i64")]).prop_map(|(v, column)| {
        // Beyond a long, parquet holds it as a decimal.
        let a: ArrayRef = match i64::try_from(v) {
            Ok(v) => Arc::new(Int64Array::from(vec![v])),
            Err(_) => Arc::new(
                Decimal128Array::from(vec![v])
                    .with_precision_and_scale(38, 0)
                    .unwrap(),
            ),
        };
        number(column, Some(a), v.to_string())
    });
    let nanos = prop_oneof![
        Just(0u32),
        Just(123_456_000),
        Just(123_456_789),
        Just(999_999_999),
        Just(1_000),
        0u32..1_000_000_000
    ];
    let secs = prop_oneof![
        Just(0i64),
        Just(-1),
        Just(9_000_000_000),
        -9_000_000_000i64..9_000_000_000
    ];
    let timestamp = (secs, nanos, any::<bool>()).prop_map(|(secs, nanos, zoned)| {
        let t = DateTime::from_timestamp(secs, nanos).unwrap();
        let n = secs * 1_000_000_000 + i64::from(nanos);
        let a = TimestampNanosecondArray::from(vec![n]);
        let (column, a, text) = if zoned {
            let a = a.with_timezone("UTC");
            ("tsu", a, t.format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string())
        } else {
            ("tsn", a, t.format("%Y-%m-%dT%H:%M:%S%.9f").to_string())
        };
        quoted(column, Some(Arc::new(a)), text)
    });
    let date = prop_oneof![
        Just(0i32),
        Just(-719_162),
        Just(2_932_896),
        -800_000i32..3_000_000
    ]
    .prop_map(|days| {
        let d = DateTime::from_timestamp(i64::from(days) * 86_400, 0)
            .unwrap()
            .date_naive();
        let a: ArrayRef = Arc::new(Date32Array::from(vec![days]));
        quoted("dt", Some(a), d.format("%Y-%m-%d").to_string())
    });
    // Text no parquet value can be: beyond every type's range, or digits past the scale.
    let text_only = prop_oneof![
        Just(("f64", "1e400")),
        Just(("f64", "-1e400")),
        Just(("f32", "1e39")),
        Just(("f64", "1e-400")),
        Just(("dec", "1.005")),
        Just(("dec", "1.500")),
        Just(("dec", "12345678901234567.89")),
        Just(("i64", "9223372036854775808")),
        Just(("i32", "7.0")),
    ]
    .prop_map(|(c, t)| number(c, None, t.to_string()));
    prop_oneof![decimal, f64s, f32s, integer, timestamp, date, text_only]
}

fn data_type(column: &str) -> DataType {
    COLUMNS
        .iter()
        .find(|(n, _)| *n == column)
        .map(|(_, t)| t())
        .unwrap()
}

fn table_schema() -> Arc<Schema> {
    let mut fields = vec![Field::new("id", DataType::Utf8, false)];
    fields.extend(COLUMNS.iter().map(|(n, t)| Field::new(*n, t(), true)));
    Arc::new(Schema::new(fields))
}

fn parquet(path: &Path, id: &str, case: &Case, typed: &ArrayRef) {
    let mut fields = vec![Field::new("id", DataType::Utf8, false)];
    let mut columns: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec![id]))];
    for (n, t) in COLUMNS.iter() {
        if *n == case.column {
            fields.push(Field::new(*n, typed.data_type().clone(), true));
            columns.push(typed.clone());
        } else {
            fields.push(Field::new(*n, t(), true));
            columns.push(new_null_array(&t(), 1));
        }
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(fs::File::create(path).unwrap(), schema, None)
        .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

fn create(dir: &Path, kind: &str) -> PathBuf {
    let schema_file = dir.join(format!("schema-{kind}.parquet"));
    let schema = table_schema();
    let batch = RecordBatch::new_empty(schema.clone());
    let mut w =
        parquet::arrow::ArrowWriter::try_new(fs::File::create(&schema_file).unwrap(), schema, None)
            .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let table = dir.join(kind);
    ok(&[
        "create",
        s(&table),
        "--schema-from",
        s(&schema_file),
        "--type",
        kind,
        "--key",
        "id",
    ]);
    table
}

/// Writes `case` in `format` with key `id`: `Ok(())` or the error text.
fn write(
    dir: &Path,
    table: &Path,
    format: &str,
    id: &str,
    case: &Case,
) -> Option<Result<(), String>> {
    let names: Vec<&str> = COLUMNS.iter().map(|(n, _)| *n).collect();
    let out = match format {
        "parquet" => {
            let typed = case.typed.as_ref()?;
            let p = dir.join(format!("{id}.parquet"));
            parquet(&p, id, case, typed);
            // Typed input may widen a column (float -> double); values are compared in the
            // table's own types.
            arbor(&["write", s(table), s(&p), "--no-schema-evolution"])
        }
        "csv" => {
            let p = dir.join(format!("{id}.csv"));
            let row: Vec<String> = names
                .iter()
                .map(|n| {
                    if *n == case.column {
                        case.text.clone()
                    } else {
                        String::new()
                    }
                })
                .collect();
            fs::write(
                &p,
                format!("id,{}\n{id},{}\n", names.join(","), row.join(",")),
            )
            .unwrap();
            arbor(&["write", s(table), s(&p)])
        }
        "jsonl" => {
            let p = dir.join(format!("{id}.jsonl"));
            let fields: Vec<String> = names
                .iter()
                .map(|n| {
                    let v = if *n == case.column {
                        case.json.as_str()
                    } else {
                        "null"
                    };
                    format!("\"{n}\":{v}")
                })
                .collect();
            fs::write(&p, format!("{{\"id\":\"{id}\",{}}}\n", fields.join(","))).unwrap();
            arbor(&["write", s(table), s(&p)])
        }
        _ => {
            let spec = format!("t={}", s(table));
            let stmt = format!(
                "INSERT INTO t (id, {}) VALUES ('{id}', {})",
                case.column, case.sql
            );
            arbor(&["sql", &stmt, "--table", &spec])
        }
    };
    Some(if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    })
}

/// The stored text of `column` per id (`arbor read --format csv`).
fn stored(table: &Path, column: &str) -> std::collections::BTreeMap<String, String> {
    let out = ok(&[
        "read",
        s(table),
        "--format",
        "csv",
        "--columns",
        &format!("id,{column}"),
    ]);
    out.lines()
        .skip(1)
        .filter_map(|l| l.split_once(','))
        .map(|(id, v)| (id.to_string(), v.to_string()))
        .collect()
}

#[test]
fn prop_every_input_format_converts_exactly_alike() {
    let dir = tempfile::tempdir().unwrap();
    let tables = [create(dir.path(), "cow"), create(dir.path(), "mor")];
    let mut runner = TestRunner::new(Config {
        cases: 16,
        failure_persistence: None,
        ..Config::default()
    });
    let n = std::cell::Cell::new(0usize);
    runner
        .run(&cases(), |case| {
            n.set(n.get() + 1);
            let n = n.get();
            for table in &tables {
                let mut outcomes = Vec::new();
                for format in ["parquet", "csv", "jsonl", "sql"] {
                    let id = format!("c{n}-{format}");
                    if let Some(r) = write(dir.path(), table, format, &id, &case) {
                        outcomes.push((format, id, r));
                    }
                }
                let refused: Vec<&str> = outcomes
                    .iter()
                    .filter(|(_, _, r)| r.is_err())
                    .map(|(f, _, _)| *f)
                    .collect();
                prop_assert!(
                    refused.is_empty() || refused.len() == outcomes.len(),
                    "{case:?} into {}: refused by {refused:?} only: {outcomes:?}",
                    data_type(case.column)
                );
                for (format, _, r) in &outcomes {
                    if let Err(e) = r {
                        // arrow-json's schema inference (serde_json) refuses a number beyond
                        // the double range before arbor sees it, naming the line, not the column.
                        let inference = *format == "jsonl" && e.contains("number out of range");
                        prop_assert!(inference || e.contains(case.column), "{format}: {e}");
                    }
                }
                if refused.is_empty() {
                    let values = stored(table, case.column);
                    let got: Vec<(&str, Option<&String>)> = outcomes
                        .iter()
                        .map(|(f, id, _)| (*f, values.get(id)))
                        .collect();
                    let first = got.first().and_then(|(_, v)| *v);
                    prop_assert!(first.is_some(), "{case:?}: not stored: {got:?}");
                    prop_assert!(
                        got.iter().all(|(_, v)| *v == first),
                        "{case:?}: stored differently: {got:?}"
                    );
                }
            }
            Ok(())
        })
        .unwrap();
}
