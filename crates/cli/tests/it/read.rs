//! `arbor read` (every format, time travel, incremental, projection, limit, read-optimized) and
//! `arbor files`.

use std::fs;

use arrow::array::AsArray;
use serde_json::Value;

use crate::create_write::{fails, file, id_fares, instants, ok, read_jsonl, s, trips_table};

/// The trips table plus an upsert of `a` (fare 10.0) and a new row `d`: two commits.
fn two_commit_table(dir: &std::path::Path, kind: &str) -> std::path::PathBuf {
    let table = trips_table(dir, kind);
    let changes = file(
        dir,
        "changes.csv",
        "id,city,fare,n\na,sf,10.0,5\nd,la,4.5,1\n",
    );
    ok(&["write", s(&table), s(&changes)]);
    table
}

#[test]
fn test_read_table_format_shows_rows_and_count() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let out = ok(&["read", s(&table)]);
    for needle in ["id", "city", "fare", "nyc", "3.5", "3 rows"] {
        assert!(out.contains(needle), "{needle} missing in {out}");
    }
    assert!(!out.contains("_hoodie_commit_time"), "{out}");
    let out = ok(&["read", s(&table), "--meta"]);
    assert!(out.contains("_hoodie_commit_time"), "{out}");
}

#[test]
fn test_read_limit_cuts_rows_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let out = ok(&["read", s(&table), "--limit", "2"]);
    assert!(out.contains("2 of 3 rows shown"), "{out}");
    assert_eq!(read_jsonl(&table, &["--limit", "1"]).len(), 1);
}

#[test]
fn test_read_csv_format_has_header_and_rows_sorted_by_partition_then_key() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let out = ok(&["read", s(&table), "--format", "csv", "--columns", "id,fare"]);
    assert_eq!(out, "id,fare\nc,3.5\na,1.5\nb,2.5\n");
}

#[test]
fn test_read_columns_projection_and_unknown_column() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let rows = read_jsonl(&table, &["--columns", "_hoodie_record_key,fare"]);
    assert_eq!(rows.len(), 3);
    for r in &rows {
        let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 2, "{r}");
        assert!(r["_hoodie_record_key"].is_string(), "{r}");
    }
    let err = fails(&["read", s(&table), "--columns", "id,tip"]);
    assert!(err.contains("unknown column \"tip\""), "{err}");
}

#[test]
fn test_read_parquet_format_writes_a_file_and_needs_output() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let err = fails(&["read", s(&table), "--format", "parquet"]);
    assert!(err.contains("--output"), "{err}");
    let out = dir.path().join("out.parquet");
    ok(&[
        "read",
        s(&table),
        "--format",
        "parquet",
        "--output",
        s(&out),
    ]);
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        fs::File::open(&out).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let batches: Vec<_> = reader.map(Result::unwrap).collect();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 3);
    let ids = batches[0].column_by_name("id").unwrap().as_string::<i32>();
    assert_eq!(ids.value(0), "c");
    // The export is a valid input again (into a new table).
    let copy = dir.path().join("copy");
    ok(&["write", s(&copy), s(&out), "--type", "cow", "--key", "id"]);
    assert_eq!(
        id_fares(&read_jsonl(&copy, &[])),
        id_fares(&read_jsonl(&table, &[]))
    );
}

#[test]
fn test_read_output_file_for_text_formats() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let out = dir.path().join("rows.jsonl");
    let stdout = ok(&["read", s(&table), "--format", "jsonl", "--output", s(&out)]);
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(fs::read_to_string(&out).unwrap().lines().count(), 3);
}

#[test]
fn test_read_as_of_first_instant_shows_old_rows() {
    let dir = tempfile::tempdir().unwrap();
    let table = two_commit_table(dir.path(), "cow");
    let list = instants(&table);
    assert_eq!(list.len(), 2);
    let first = list[0]["timestamp"].as_str().unwrap();
    assert_eq!(
        id_fares(&read_jsonl(&table, &["--as-of", first])),
        [("a".into(), 1.5), ("b".into(), 2.5), ("c".into(), 3.5)]
    );
    assert_eq!(read_jsonl(&table, &[]).len(), 4);
    let err = fails(&["read", s(&table), "--as-of", "yesterday"]);
    assert!(err.contains("yesterday"), "{err}");
}

#[test]
fn test_read_incremental_after_first_completion_shows_second_commit() {
    let dir = tempfile::tempdir().unwrap();
    let table = two_commit_table(dir.path(), "mor");
    let list = instants(&table);
    let first_done = list[0]["completion_time"].as_str().unwrap();
    let second = list[1]["timestamp"].as_str().unwrap();
    let rows = read_jsonl(&table, &["--incremental", first_done, "--meta"]);
    assert_eq!(id_fares(&rows), [("a".into(), 10.0), ("d".into(), 4.5)]);
    assert!(rows.iter().all(|r| r["_hoodie_commit_time"] == second));
    // Open start: everything; end at the first completion: the first commit's rows.
    assert_eq!(read_jsonl(&table, &["--incremental", "-"]).len(), 4);
    let first = list[0]["timestamp"].as_str().unwrap();
    let firsts = read_jsonl(&table, &["--incremental", "-", first_done, "--meta"]);
    let ids: Vec<String> = id_fares(&firsts).into_iter().map(|(id, _)| id).collect();
    assert!(
        ids.contains(&"b".to_string()) && ids.contains(&"c".to_string()),
        "{ids:?}"
    );
    assert!(!ids.contains(&"d".to_string()), "{ids:?}");
    assert!(firsts.iter().all(|r| r["_hoodie_commit_time"] == first));
}

#[test]
fn test_read_optimized_skips_log_files_of_mor() {
    let dir = tempfile::tempdir().unwrap();
    let table = two_commit_table(dir.path(), "mor");
    let slices: Value = serde_json::from_str(&ok(&["files", s(&table), "--json"])).unwrap();
    let has_logs = slices
        .as_array()
        .unwrap()
        .iter()
        .any(|s| !s["log_files"].as_array().unwrap().is_empty());
    assert!(
        has_logs,
        "the upsert of a MOR table wrote log files: {slices}"
    );
    let ro = read_jsonl(&table, &["--read-optimized"]);
    let a = ro.iter().find(|r| r["id"] == "a").unwrap();
    assert_eq!(a["fare"], 1.5, "read-optimized reads base files only");
    let snap = read_jsonl(&table, &[]);
    let a = snap.iter().find(|r| r["id"] == "a").unwrap();
    assert_eq!(a["fare"], 10.0);
}

#[test]
fn test_files_json_lists_slices_that_exist_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let table = two_commit_table(dir.path(), "cow");
    let slices: Value = serde_json::from_str(&ok(&["files", s(&table), "--json"])).unwrap();
    let slices = slices.as_array().unwrap();
    let mut partitions: Vec<&str> = slices
        .iter()
        .map(|s| s["partition"].as_str().unwrap())
        .collect();
    partitions.sort();
    assert_eq!(partitions, ["la", "nyc", "sf"]);
    for sl in slices {
        let base = &sl["base_file"];
        let name = base["name"].as_str().unwrap();
        let path = table.join(sl["partition"].as_str().unwrap()).join(name);
        assert_eq!(
            fs::metadata(&path).unwrap().len(),
            base["size"].as_u64().unwrap(),
            "{}",
            path.display()
        );
        assert!(name.starts_with(sl["file_id"].as_str().unwrap()), "{sl}");
    }
    // As of the first instant: the two original partitions only.
    let first = instants(&table)[0]["timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    let old: Value =
        serde_json::from_str(&ok(&["files", s(&table), "--as-of", &first, "--json"])).unwrap();
    assert_eq!(old.as_array().unwrap().len(), 2);
    let text = ok(&["files", s(&table)]);
    assert!(text.contains("3 file slices"), "{text}");
    let long = ok(&["files", s(&table), "--long"]);
    assert!(long.contains(".parquet"), "{long}");
}

#[test]
fn test_read_closed_stdout_pipe_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("id,city,fare,n\n");
    for i in 0..6000 {
        text.push_str(&format!("key-{i:05},c{},{}.25,{i}\n", i % 3, i));
    }
    let input = file(dir.path(), "many.csv", &text);
    let table = dir.path().join("many");
    ok(&[
        "write",
        s(&table),
        s(&input),
        "--type",
        "cow",
        "--key",
        "id",
    ]);
    // More than a pipe buffer (64 KiB) of output, so the writer must meet the closed pipe.
    for format in ["csv", "jsonl", "table"] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_arbor"))
            .args(["read", s(&table), "--format", format, "--limit", "6000"])
            .env("ARBOR_LOG", "off")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader goes away, like `| head -0`
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.is_empty(), "{format}: {err}");
        assert_eq!(out.status.code(), Some(0), "{format}: {err}");
    }
}
