//! `arbor create`, `arbor write` and `arbor delete-partition`: round trips from CSV, JSON lines
//! and parquet inputs, and bad inputs (one-line error, exit 1, table unchanged).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use arrow::array::{Float64Array, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use serde_json::Value;

/// Runs the `arbor` binary.
pub fn arbor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(args)
        .env("ARBOR_LOG", "off")
        .output()
        .unwrap()
}

/// Runs `arbor` and asserts success; returns stdout.
pub fn ok(args: &[&str]) -> String {
    let out = arbor(args);
    assert!(
        out.status.success(),
        "arbor {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `arbor`, asserts exit 1 with exactly one `error: ...` line on stderr and nothing on
/// stdout (with `--json`: one JSON object `{"error": ...}` on stdout and nothing on stderr);
/// returns the line (`error: ` and the message).
pub fn fails(args: &[&str]) -> String {
    let out = arbor(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "arbor {args:?}: {stderr}");
    if args.contains(&"--json") {
        assert!(
            stderr.is_empty(),
            "arbor {args:?} printed to stderr: {stderr}"
        );
        let error: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let message = error["error"].as_str().unwrap();
        assert!(error["kind"].is_string(), "{error}");
        return format!("error: {message}");
    }
    assert!(out.stdout.is_empty(), "arbor {args:?} printed to stdout");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "arbor {args:?}: not one line: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    lines[0].to_string()
}

/// Every file under `dir` with its bytes, sorted (to show a failed command changed nothing).
pub fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.display().to_string(), fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Writes `text` to `dir/name`.
pub fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

/// `s` of a path.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The JSON lines `arbor read --format jsonl` prints, with the given extra arguments.
pub fn read_jsonl(table: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["read", s(table), "--format", "jsonl"];
    args.extend_from_slice(extra);
    ok(&args)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `(id, fare)` of every row, sorted by id.
pub fn id_fares(rows: &[Value]) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = rows
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["fare"].as_f64().unwrap(),
            )
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Completed instants of the table (`arbor timeline --json`).
pub fn instants(table: &Path) -> Vec<Value> {
    serde_json::from_str::<Value>(&ok(&["timeline", s(table), "--json"]))
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

pub const TRIPS: &str = "id,city,fare,n\na,sf,1.5,1\nb,sf,2.5,2\nc,nyc,3.5,3\n";

/// A COW table partitioned by city holding [`TRIPS`], created by `arbor write`.
pub fn trips_table(dir: &Path, kind: &str) -> PathBuf {
    let input = file(dir, "trips.csv", TRIPS);
    let table = dir.join("t");
    ok(&[
        "write",
        s(&table),
        s(&input),
        "--op",
        "insert",
        "--type",
        kind,
        "--key",
        "id",
        "--partition-by",
        "city",
        "--ordering",
        "n",
    ]);
    table
}

#[test]
fn test_write_csv_new_table_round_trips_through_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let rows = read_jsonl(&table, &[]);
    assert_eq!(
        id_fares(&rows),
        [("a".into(), 1.5), ("b".into(), 2.5), ("c".into(), 3.5)]
    );
    // Inferred types survive: n is an integer, city a string.
    assert!(rows[0]["n"].is_i64(), "{}", rows[0]);
    assert!(rows[0]["city"].is_string(), "{}", rows[0]);
    let props = fs::read_to_string(table.join(".hoodie/hoodie.properties")).unwrap();
    assert!(props.contains("hoodie.table.type=COPY_ON_WRITE"), "{props}");
    assert!(props.contains("hoodie.table.name=t"), "{props}");
}

#[test]
fn test_write_jsonl_mor_upsert_updates_and_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "mor");
    let changes = file(
        dir.path(),
        "changes.jsonl",
        "{\"id\":\"a\",\"city\":\"sf\",\"fare\":10.0,\"n\":5}\n\
         {\"id\":\"d\",\"city\":\"la\",\"fare\":4.5,\"n\":1}\n",
    );
    let out = ok(&["write", s(&table), s(&changes), "--json"]);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["operation"], "UPSERT");
    assert_eq!(report["action"], "deltacommit");
    assert_eq!(report["inserted"], 1);
    assert_eq!(report["updated"], 1);
    assert_eq!(report["input_rows"], 2);
    assert_eq!(report["created"], false);
    assert_eq!(
        id_fares(&read_jsonl(&table, &[])),
        [
            ("a".into(), 10.0),
            ("b".into(), 2.5),
            ("c".into(), 3.5),
            ("d".into(), 4.5)
        ]
    );
}

#[test]
fn test_write_parquet_input_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("fare", DataType::Float64, true),
        Field::new("n", DataType::Int32, true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(vec!["x", "y"])),
            Arc::new(Float64Array::from(vec![Some(7.0), None])),
            Arc::new(Int32Array::from(vec![1, 2])),
        ],
    )
    .unwrap();
    let input = dir.path().join("in.parquet");
    let mut w =
        parquet::arrow::ArrowWriter::try_new(fs::File::create(&input).unwrap(), schema, None)
            .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let table = dir.path().join("p");
    let out = ok(&[
        "write",
        s(&table),
        s(&input),
        "--type",
        "cow",
        "--key",
        "id",
        "--json",
    ]);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["created"], true);
    assert_eq!(report["inserted"], 2);
    let rows = read_jsonl(&table, &[]);
    assert_eq!(rows.len(), 2);
    let x = rows.iter().find(|r| r["id"] == "x").unwrap();
    assert_eq!(x["fare"], 7.0);
    assert_eq!(x["n"], 1);
    let y = rows.iter().find(|r| r["id"] == "y").unwrap();
    assert!(y.get("fare").is_none_or(Value::is_null), "{y}");
}

#[test]
fn test_create_schema_from_then_write_existing_table_converts_types() {
    let dir = tempfile::tempdir().unwrap();
    let sample = file(dir.path(), "sample.csv", TRIPS);
    let table = dir.path().join("c");
    let out = ok(&[
        "create",
        s(&table),
        "--type",
        "mor",
        "--key",
        "id",
        "--partition-by",
        "city",
        "--hive-style",
        "--name",
        "trips",
        "--schema-from",
        s(&sample),
        "--json",
    ]);
    let created: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(created["table_type"], "MERGE_ON_READ");
    assert_eq!(created["name"], "trips");
    assert_eq!(created["hive_style_partitioning"], true);
    assert!(instants(&table).is_empty(), "create writes no data");
    // JSON integers go into the float column `fare`, columns in another order.
    let input = file(
        dir.path(),
        "rows.jsonl",
        "{\"n\":1,\"fare\":3,\"city\":\"sf\",\"id\":\"k\"}\n",
    );
    ok(&["write", s(&table), s(&input), "--op", "insert"]);
    assert_eq!(id_fares(&read_jsonl(&table, &[])), [("k".into(), 3.0)]);
    assert!(table.join("city=sf").is_dir(), "hive-style partition dir");
}

#[test]
fn test_create_existing_table_errors_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let before = tree(&table);
    let sample = dir.path().join("trips.csv");
    let err = fails(&[
        "create",
        s(&table),
        "--type",
        "cow",
        "--key",
        "id",
        "--schema-from",
        s(&sample),
    ]);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(before, tree(&table));
}

#[test]
fn test_create_unknown_key_column_errors_and_leaves_no_directory() {
    let dir = tempfile::tempdir().unwrap();
    let sample = file(dir.path(), "sample.csv", TRIPS);
    let table = dir.path().join("new/nested");
    let err = fails(&[
        "create",
        s(&table),
        "--type",
        "cow",
        "--key",
        "nope",
        "--schema-from",
        s(&sample),
    ]);
    assert!(err.contains("\"nope\""), "{err}");
    assert!(
        !dir.path().join("new").exists(),
        "the made directory is removed"
    );
}

#[test]
fn test_write_missing_table_without_flags_errors_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = file(dir.path(), "in.csv", TRIPS);
    let table = dir.path().join("missing");
    let err = fails(&["write", s(&table), s(&input)]);
    assert!(err.contains("no table here"), "{err}");
    assert!(err.contains("--type"), "{err}");
    assert!(!table.exists());
    // An existing empty directory is not a table either, and stays empty.
    fs::create_dir(&table).unwrap();
    let err = fails(&["write", s(&table), s(&input), "--key", "id"]);
    assert!(err.contains("no table here"), "{err}");
    assert!(tree(&table).is_empty());
}

#[test]
fn test_write_new_table_with_null_key_errors_and_leaves_no_directory() {
    let dir = tempfile::tempdir().unwrap();
    let input = file(dir.path(), "in.csv", "id,fare\na,1.0\n,2.0\n");
    let table = dir.path().join("t");
    let err = fails(&[
        "write",
        s(&table),
        s(&input),
        "--type",
        "cow",
        "--key",
        "id",
    ]);
    assert!(err.contains("\"id\""), "{err}");
    assert!(err.contains("row 1"), "{err}");
    assert!(
        !table.exists(),
        "the table directory this write made is removed"
    );
}

/// Runs a write that must fail on the trips table; asserts the table is unchanged and returns
/// the error line.
fn bad_write(input_name: &str, text: &str, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let before = tree(&table);
    let input = file(dir.path(), input_name, text);
    let mut args = vec!["write", s(&table), s(&input)];
    args.extend_from_slice(extra);
    let err = fails(&args);
    assert_eq!(before, tree(&table), "the failed write changed the table");
    err
}

#[test]
fn test_write_meta_named_new_column_errors_naming_it() {
    let err = bad_write("in.csv", "id,city,fare,n,_hoodie_x\na,sf,1.0,1,2\n", &[]);
    assert!(err.contains("\"_hoodie_x\""), "{err}");
}

#[test]
fn test_write_missing_column_errors_naming_it() {
    let err = bad_write("in.jsonl", "{\"id\":\"a\",\"city\":\"sf\",\"n\":1}\n", &[]);
    assert!(err.contains("\"fare\""), "{err}");
    assert!(err.contains("lacks this column"), "{err}");
}

#[test]
fn test_write_schema_mismatch_errors_naming_column_and_row() {
    let err = bad_write("in.csv", "id,city,fare,n\na,sf,1.0,1\nb,sf,cheap,2\n", &[]);
    assert!(err.contains("column \"fare\""), "{err}");
    assert!(err.contains("row 1"), "{err}");
    assert!(err.contains("cheap"), "{err}");
}

#[test]
fn test_write_null_key_errors_naming_row() {
    let err = bad_write(
        "in.jsonl",
        "{\"id\":\"a\",\"city\":\"sf\",\"fare\":1.0,\"n\":1}\n\
         {\"id\":null,\"city\":\"sf\",\"fare\":1.0,\"n\":1}\n",
        &[],
    );
    assert!(err.contains("\"id\""), "{err}");
    assert!(err.contains("row 1"), "{err}");
}

#[test]
fn test_write_empty_input_errors() {
    let err = bad_write("in.csv", "id,city,fare,n\n", &[]);
    assert!(err.contains("no rows"), "{err}");
}

#[test]
fn test_write_unreadable_input_errors() {
    let err = bad_write("in.parquet", "this is not parquet", &[]);
    assert!(err.contains("not a readable parquet file"), "{err}");
    let err = bad_write("in.txt", "id\n", &[]);
    assert!(err.contains("unknown input format"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let err = fails(&["write", s(&table), s(&dir.path().join("gone.csv"))]);
    assert!(err.contains("cannot open"), "{err}");
}

#[test]
fn test_write_flags_disagreeing_with_table_error() {
    let err = bad_write(
        "in.csv",
        "id,city,fare,n\na,sf,1.0,1\n",
        &["--type", "mor", "--key", "id"],
    );
    assert!(
        err.contains("the table exists and its type is COPY_ON_WRITE"),
        "{err}"
    );
}

#[test]
fn test_write_flags_agreeing_with_table_write() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let input = file(dir.path(), "in.csv", "id,city,fare,n\nz,sf,9.0,1\n");
    ok(&[
        "write",
        s(&table),
        s(&input),
        "--type",
        "cow",
        "--key",
        "id",
        "--partition-by",
        "city",
    ]);
    assert_eq!(read_jsonl(&table, &[]).len(), 4);
}

#[test]
fn test_write_missing_table_errors_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none");
    for args in [
        vec!["read", s(&missing)],
        vec!["files", s(&missing)],
        vec!["delete-partition", s(&missing), "sf"],
    ] {
        let err = fails(&args);
        assert!(err.contains("no such directory"), "{args:?}: {err}");
    }
    assert!(!missing.exists());
}

#[test]
fn test_write_delete_op_removes_keys() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "mor");
    let gone = file(dir.path(), "gone.csv", "id,city\nb,sf\n");
    let report: Value = serde_json::from_str(&ok(&[
        "write",
        s(&table),
        s(&gone),
        "--op",
        "delete",
        "--json",
    ]))
    .unwrap();
    assert_eq!(report["operation"], "DELETE");
    assert_eq!(report["deleted"], 1);
    assert_eq!(
        id_fares(&read_jsonl(&table, &[])),
        [("a".into(), 1.5), ("c".into(), 3.5)]
    );
}

#[test]
fn test_write_delete_without_partition_column_errors() {
    let err = bad_write("gone.csv", "id\nb\n", &["--op", "delete"]);
    assert!(err.contains("\"city\""), "{err}");
}

#[test]
fn test_write_insert_overwrite_replaces_touched_partitions_only() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let input = file(dir.path(), "sf.csv", "id,city,fare,n\nq,sf,5.0,1\n");
    let report: Value = serde_json::from_str(&ok(&[
        "write",
        s(&table),
        s(&input),
        "--op",
        "insert-overwrite",
        "--json",
    ]))
    .unwrap();
    assert_eq!(report["action"], "replacecommit");
    assert_eq!(
        id_fares(&read_jsonl(&table, &[])),
        [("c".into(), 3.5), ("q".into(), 5.0)]
    );
    ok(&[
        "write",
        s(&table),
        s(&input),
        "--op",
        "insert-overwrite-table",
    ]);
    assert_eq!(id_fares(&read_jsonl(&table, &[])), [("q".into(), 5.0)]);
}

#[test]
fn test_delete_partition_removes_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let out = ok(&["delete-partition", s(&table), "sf"]);
    assert!(out.contains("delete_partition committed"), "{out}");
    assert_eq!(id_fares(&read_jsonl(&table, &[])), [("c".into(), 3.5)]);
    let last = instants(&table).last().cloned().unwrap();
    assert_eq!(last["action"], "replacecommit");
    assert_eq!(last["operation"], "DELETE_PARTITION");
}

#[test]
fn test_delete_partition_unknown_partition_errors_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let before = tree(&table);
    let err = fails(&["delete-partition", s(&table), "sf", "paris"]);
    assert!(err.contains("no partition \"paris\""), "{err}");
    assert!(err.contains("nyc"), "{err}");
    assert_eq!(before, tree(&table));
}

#[test]
fn test_write_text_report_names_instant_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let input = file(dir.path(), "in.csv", TRIPS);
    let table = dir.path().join("t");
    let out = ok(&[
        "write",
        s(&table),
        s(&input),
        "--op",
        "bulk-insert",
        "--type",
        "cow",
        "--key",
        "id",
    ]);
    let instant = instants(&table)[0]["timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(out.contains("created the table at"), "{out}");
    assert!(out.contains(&format!("instant {instant}")), "{out}");
    assert!(out.contains("3 inserted, 0 updated, 0 deleted"), "{out}");
}

/// A bulk insert of a parquet file into an existing table streams it (read batch by batch,
/// meta columns of a file `arbor read` wrote dropped) and lands as one commit with every row.
#[test]
fn test_write_bulk_insert_of_parquet_into_existing_table_streams_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let input = file(dir.path(), "in.csv", TRIPS);
    let a = dir.path().join("a");
    ok(&[
        "write",
        s(&a),
        s(&input),
        "--op",
        "insert",
        "--type",
        "cow",
        "--key",
        "id",
        "--partition-by",
        "city",
    ]);
    let exported = dir.path().join("a.parquet");
    ok(&[
        "read",
        s(&a),
        "--format",
        "parquet",
        "--output",
        s(&exported),
    ]);
    let b = dir.path().join("b");
    ok(&[
        "write",
        s(&b),
        s(&input),
        "--op",
        "insert",
        "--type",
        "cow",
        "--key",
        "id",
        "--partition-by",
        "city",
    ]);
    let out = ok(&["write", s(&b), s(&exported), "--op", "bulk-insert"]);
    assert!(out.contains("3 inserted, 0 updated, 0 deleted"), "{out}");
    assert_eq!(instants(&b).len(), 2);
    // A bulk insert does not deduplicate against the table: every key is there twice.
    let fares = id_fares(&read_jsonl(&b, &[]));
    assert_eq!(
        fares,
        vec![
            ("a".to_string(), 1.5),
            ("a".to_string(), 1.5),
            ("b".to_string(), 2.5),
            ("b".to_string(), 2.5),
            ("c".to_string(), 3.5),
            ("c".to_string(), 3.5)
        ]
    );
}
