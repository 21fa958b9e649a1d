//! `arbor write` keeps every value: lossy input is refused naming the column and row, new
//! columns and wider types evolve the schema (old rows read null in arbor and hudi-rs),
//! partial updates keep stored values, and inputs users have (CSV timestamps without
//! fractional seconds, pandas categoricals, list columns) write as they are.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, DictionaryArray, Int64Array, ListArray, StringArray};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, Int32Type};
use serde_json::Value;

use super::create_write::{fails, file, ok, read_jsonl, s, tree};

/// The rows hudi-rs reads (data columns only, sorted by `id`), or `None` when the peer is
/// absent (skipped visibly).
pub fn peer_rows(table: &Path) -> Option<Vec<Value>> {
    let python = arbor_testkit::peer_python_or_skip("value checks against hudi-rs")?;
    let script = r#"
import json, sys
import pyarrow as pa
from hudi import HudiReadOptions, HudiTable
t = pa.Table.from_batches(HudiTable(sys.argv[1]).read(HudiReadOptions()))
rows = [{k: v for k, v in r.items() if not k.startswith("_hoodie_")} for r in t.to_pylist()]
rows.sort(key=lambda r: r["id"])
print(json.dumps(rows, default=str))
"#;
    let out = std::process::Command::new(python)
        .args(["-c", script])
        .arg(table)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hudi-rs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

fn sorted(mut rows: Vec<Value>) -> Vec<Value> {
    rows.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    rows
}

#[test]
fn test_write_lossy_text_values_refused_naming_column_and_row() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let csv = file(dir.path(), "a.csv", "id,ts,n,s\na,1,7,x\nb,1,8,y\n");
    ok(&[
        "write",
        s(&table),
        s(&csv),
        "--type",
        "cow",
        "--key",
        "id",
        "--ordering",
        "ts",
    ]);
    let before = tree(&table);
    let frac = file(
        dir.path(),
        "frac.jsonl",
        "{\"id\":\"a\",\"ts\":2,\"n\":7,\"s\":\"x\"}\n{\"id\":\"b\",\"ts\":2,\"n\":9.7,\"s\":\"y\"}\n",
    );
    let err = fails(&["write", s(&table), s(&frac)]);
    assert!(err.contains("\"n\" at row 1"), "{err}");
    assert!(err.contains("9.7"), "{err}");
    let num = file(
        dir.path(),
        "num.jsonl",
        "{\"id\":\"a\",\"ts\":2,\"n\":7,\"s\":7}\n",
    );
    let err = fails(&["write", s(&table), s(&num)]);
    assert!(err.contains("\"s\""), "{err}");
    assert!(err.contains("not compatible"), "{err}");
    let text = file(dir.path(), "text.csv", "id,ts,n,s\na,2,seven,x\n");
    let err = fails(&["write", s(&table), s(&text)]);
    assert!(err.contains("\"n\"") && err.contains("row 0"), "{err}");
    assert_eq!(before, tree(&table), "a refused write changed the table");
}

fn evolve(kind: &str) {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let a = file(dir.path(), "a.csv", "id,ts,n\na,1,7\nb,1,8\n");
    ok(&[
        "write",
        s(&table),
        s(&a),
        "--type",
        kind,
        "--key",
        "id",
        "--ordering",
        "ts",
    ]);
    let b = file(
        dir.path(),
        "b.csv",
        "id,ts,n,extra,at\nb,2,9,1.5,2024-01-01 10:00:00\nc,2,10,2.5,2024-06-01 00:00:00\n",
    );
    let out = ok(&["write", s(&table), s(&b)]);
    assert!(out.contains("added column \"extra\""), "{out}");
    assert!(out.contains("added column \"at\""), "{out}");
    let rows = sorted(read_jsonl(&table, &[]));
    assert_eq!(rows.len(), 3);
    assert!(rows[0].get("extra").is_none_or(Value::is_null), "{rows:?}");
    assert_eq!(rows[1]["extra"], 1.5);
    assert_eq!(rows[2]["at"], "2024-06-01T00:00:00Z");
    if let Some(peer) = peer_rows(&table) {
        assert_eq!(peer.len(), 3);
        assert_eq!(peer[0]["extra"], Value::Null, "{peer:?}");
        assert_eq!(peer[1]["extra"], 1.5, "{peer:?}");
        assert_eq!(peer[1]["n"], 9, "{peer:?}");
        assert_eq!(peer[2]["at"], "2024-06-01 00:00:00+00:00", "{peer:?}");
    }
    // Dropping a column is refused; a partial update keeps the stored values.
    let c = file(dir.path(), "c.csv", "id,ts,n\nb,3,11\n");
    let err = fails(&["write", s(&table), s(&c)]);
    assert!(
        err.contains("lacks this column") && err.contains("--partial"),
        "{err}"
    );
    let out = ok(&["write", s(&table), s(&c), "--partial"]);
    assert!(out.contains("1 updated"), "{out}");
    let rows = sorted(read_jsonl(&table, &[]));
    assert_eq!(rows[1]["n"], 11);
    assert_eq!(rows[1]["extra"], 1.5);
    assert_eq!(rows[1]["at"], "2024-01-01T10:00:00Z");
    if let Some(peer) = peer_rows(&table) {
        assert_eq!(peer[1]["n"], 11, "{peer:?}");
        assert_eq!(peer[1]["extra"], 1.5, "{peer:?}");
    }
    // With --no-schema-evolution a new column is refused and nothing changes.
    let before = tree(&table);
    let d = file(
        dir.path(),
        "d.csv",
        "id,ts,n,extra,at,more\nb,4,1,1.0,2024-01-01 00:00:00,x\n",
    );
    let err = fails(&["write", s(&table), s(&d), "--no-schema-evolution"]);
    assert!(err.contains("\"more\""), "{err}");
    assert_eq!(before, tree(&table));
}

#[test]
fn test_write_new_columns_evolve_schema_cow_old_rows_read_null_in_arbor_and_hudi_rs() {
    evolve("cow");
}

#[test]
fn test_write_new_columns_evolve_schema_mor_old_rows_read_null_in_arbor_and_hudi_rs() {
    evolve("mor");
}

#[test]
fn test_write_categorical_and_list_columns_create_then_write_again() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let cat: DictionaryArray<Int32Type> = vec!["red", "blue", "red"].into_iter().collect();
    let list = ListArray::new(
        Arc::new(Field::new("item", DataType::Int64, true)),
        OffsetBuffer::from_lengths([2, 0, 1]),
        Arc::new(Int64Array::from(vec![1, 2, 3])),
        None,
    );
    let p = crate::read_output::parquet_file(
        dir.path(),
        "in.parquet",
        vec![
            (
                "id",
                Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef,
            ),
            ("ts", Arc::new(Int64Array::from(vec![1, 1, 1]))),
            ("cat", Arc::new(cat)),
            ("nums", Arc::new(list)),
        ],
    );
    ok(&[
        "write",
        s(&table),
        s(&p),
        "--type",
        "mor",
        "--key",
        "id",
        "--ordering",
        "ts",
    ]);
    // The same file again: dictionary decoded, the list's item field matches the table's.
    let out = ok(&["write", s(&table), s(&p)]);
    assert!(out.contains("3 updated"), "{out}");
    let rows = sorted(read_jsonl(&table, &[]));
    assert_eq!(rows[0]["cat"], "red");
    assert_eq!(rows[0]["nums"], serde_json::json!([1, 2]));
    assert_eq!(rows[1]["nums"], serde_json::json!([]));
    if let Some(peer) = peer_rows(&table) {
        assert_eq!(peer[1]["cat"], "blue", "{peer:?}");
        assert_eq!(peer[2]["nums"], serde_json::json!([3]), "{peer:?}");
    }
}

#[test]
fn test_create_from_csv_timestamps_without_fraction_then_write() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let csv = file(
        dir.path(),
        "a.csv",
        "id,ts,at\na,1,2024-01-01 10:00:00\nb,1,2024-02-29T23:59:59\n",
    );
    let out = ok(&[
        "write",
        s(&table),
        s(&csv),
        "--type",
        "cow",
        "--key",
        "id",
        "--ordering",
        "ts",
    ]);
    assert!(out.contains("2 inserted"), "{out}");
    let rows = sorted(read_jsonl(&table, &[]));
    assert_eq!(rows[1]["at"], "2024-02-29T23:59:59Z");
    if let Some(peer) = peer_rows(&table) {
        assert_eq!(peer[0]["at"], "2024-01-01 10:00:00+00:00", "{peer:?}");
    }
}
