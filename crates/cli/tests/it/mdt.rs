//! `arbor validate` and `arbor mdt init`, and the metadata table a CLI-created table gets.

use std::fs;

use serde_json::Value;

use super::create_write::{fails, file, ok, read_jsonl, s, tree, trips_table, TRIPS};

fn validate_json(table: &std::path::Path) -> Value {
    serde_json::from_str(&ok(&["validate", s(table), "--json"])).unwrap()
}

#[test]
fn test_validate_new_table_agrees_and_planted_discrepancies_fail() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    assert!(table
        .join(".hoodie/metadata/.hoodie/hoodie.properties")
        .exists());
    let report = validate_json(&table);
    assert_eq!(report["has_metadata_table"], true);
    assert_eq!(report["differences"].as_array().unwrap().len(), 0);
    assert!(report["storage_files"].as_u64().unwrap() >= 2);
    let text = ok(&["validate", s(&table)]);
    assert!(text.contains("agrees with storage"), "{text}");

    // Plant: a committed data file deleted from storage.
    let victim = fs::read_dir(table.join("sf"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    let name = victim.file_name().unwrap().to_str().unwrap().to_string();
    fs::remove_file(&victim).unwrap();
    let out = super::create_write::arbor(&["validate", s(&table)]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "sf/{name} is listed by the metadata table but missing from storage"
        )),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("disagrees with storage in 1 place"),
        "{stderr}"
    );
}

#[test]
fn test_mdt_init_on_table_without_one_then_writes_keep_it_valid() {
    let dir = tempfile::tempdir().unwrap();
    let input = file(dir.path(), "trips.csv", TRIPS);
    let table = dir.path().join("t");
    ok(&[
        "create",
        s(&table),
        "--type",
        "mor",
        "--key",
        "id",
        "--partition-by",
        "city",
        "--schema-from",
        s(&input),
        "--no-metadata-table",
    ]);
    ok(&["write", s(&table), s(&input), "--op", "insert"]);
    assert!(!table.join(".hoodie/metadata").exists());
    let report = validate_json(&table);
    assert_eq!(report["has_metadata_table"], false);
    let before = read_jsonl(&table, &[]);

    let out = ok(&["mdt", "init", s(&table)]);
    assert!(
        out.contains("metadata table created with 2 committed file(s)"),
        "{out}"
    );
    let props = fs::read_to_string(table.join(".hoodie/hoodie.properties")).unwrap();
    assert!(
        props.contains("hoodie.table.metadata.partitions=files"),
        "{props}"
    );
    assert_eq!(
        validate_json(&table)["differences"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(read_jsonl(&table, &[]), before);

    let more = file(
        dir.path(),
        "more.csv",
        "id,city,fare,n\nd,la,9.5,4\na,sf,7.5,5\n",
    );
    ok(&["write", s(&table), s(&more), "--op", "upsert"]);
    assert_eq!(
        validate_json(&table)["differences"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(read_jsonl(&table, &[]).len(), 4);

    // A second init is refused and changes nothing.
    let snapshot = tree(&table);
    let err = fails(&["mdt", "init", s(&table)]);
    assert!(err.contains("already has a metadata table"), "{err}");
    assert_eq!(tree(&table), snapshot);
}

#[test]
fn test_validate_missing_table_is_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = fails(&["validate", s(&dir.path().join("nope"))]);
    assert!(err.contains("no such directory"), "{err}");
}
