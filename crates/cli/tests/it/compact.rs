//! `arbor compact`: compacts a merge-on-read table (rows unchanged, log files gone from the
//! latest slices, a `commit` with operation COMPACT on the timeline), says when there is
//! nothing to compact, and refuses a copy-on-write table.

use std::path::Path;

use serde_json::Value;

use crate::create_write::{fails, file, id_fares, instants, ok, read_jsonl, s, trips_table};

fn log_files(table: &Path) -> usize {
    let slices: Value = serde_json::from_str(&ok(&["files", s(table), "--json"])).unwrap();
    slices
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["log_files"].as_array().unwrap().len())
        .sum()
}

#[test]
fn test_compact_mor_merges_logs_and_keeps_rows() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "mor");
    let changes = file(
        dir.path(),
        "changes.csv",
        "id,city,fare,n\na,sf,10.0,5\nc,nyc,30.0,6\n",
    );
    ok(&["write", s(&table), s(&changes)]);
    assert!(log_files(&table) > 0, "the upsert wrote log files");
    let before = id_fares(&read_jsonl(&table, &[]));

    let out = ok(&["compact", s(&table)]);
    assert!(
        out.contains("compacted 2 file group(s) in 1 compaction(s)"),
        "{out}"
    );
    for needle in ["PARTITION", "FILE GROUP", "RECORDS", "sf", "nyc"] {
        assert!(out.contains(needle), "{needle} in {out}");
    }
    assert_eq!(log_files(&table), 0, "the latest slices have no log files");
    assert_eq!(id_fares(&read_jsonl(&table, &[])), before);
    let last = instants(&table).last().cloned().unwrap();
    assert_eq!(last["action"], "commit", "{last}");
    assert!(out.contains(last["timestamp"].as_str().unwrap()), "{out}");

    let groups: Value = serde_json::from_str(&ok(&["files", s(&table), "--json"])).unwrap();
    let ids: Vec<&str> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["file_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.iter().all(|id| out.contains(id)),
        "every file group named: {out}"
    );

    // Nothing left: said so, nothing written.
    let n = instants(&table).len();
    let again = ok(&["compact", s(&table)]);
    assert!(again.contains("nothing to compact"), "{again}");
    assert_eq!(instants(&table).len(), n);
    let json: Value = serde_json::from_str(&ok(&["compact", s(&table), "--json"])).unwrap();
    assert_eq!(json["compactions"], serde_json::json!([]));
}

#[test]
fn test_compact_cow_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let n = instants(&table).len();
    let err = fails(&["compact", s(&table)]);
    assert!(err.contains("copy-on-write"), "{err}");
    assert!(err.contains("merge-on-read"), "{err}");
    assert_eq!(instants(&table).len(), n);
    let err = fails(&["compact", s(&dir.path().join("nowhere"))]);
    assert!(err.contains("no such directory"), "{err}");
}

#[test]
fn test_compact_json_lists_file_groups_and_records() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "mor");
    let changes = file(dir.path(), "changes.csv", "id,city,fare,n\nb,sf,20.0,9\n");
    ok(&["write", s(&table), s(&changes)]);
    let json: Value = serde_json::from_str(&ok(&["compact", s(&table), "--json"])).unwrap();
    let compactions = json["compactions"].as_array().unwrap();
    assert_eq!(compactions.len(), 1, "{json}");
    let groups = compactions[0]["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "only the group with a log file: {json}");
    assert_eq!(groups[0]["partition"], "sf");
    assert_eq!(groups[0]["records"], 2, "a and b: {json}");
    assert!(groups[0]["base_file"]
        .as_str()
        .unwrap()
        .ends_with(".parquet"));
}

#[test]
fn test_compact_pending_and_rollback_pending_say_when_nothing_is_pending() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "mor");
    let n = instants(&table).len();
    let out = ok(&["compact", s(&table), "--pending"]);
    assert!(out.contains("no compaction is pending"), "{out}");
    let out = ok(&["compact", s(&table), "--rollback-pending"]);
    assert!(out.contains("no compaction is pending"), "{out}");
    assert_eq!(instants(&table).len(), n);
    let both =
        crate::create_write::arbor(&["compact", s(&table), "--pending", "--rollback-pending"]);
    assert!(!both.status.success());
    assert!(String::from_utf8_lossy(&both.stderr).contains("cannot be used with"));
}

#[test]
fn test_compact_log_merges_log_files_and_keeps_rows() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "mor");
    for i in 1..=3 {
        let f = file(
            dir.path(),
            &format!("u{i}.csv"),
            &format!("id,city,fare,n\na,sf,{i}.5,1{i}\nc,nyc,{i}.0,1{i}\n"),
        );
        ok(&["write", s(&table), s(&f)]);
    }
    let before = id_fares(&read_jsonl(&table, &[]));
    let logs = log_files(&table);
    let none = ok(&["compact", s(&table), "--log", "--threshold", "9"]);
    assert!(none.contains("nothing to log-compact"), "{none}");
    let out = ok(&["compact", s(&table), "--log", "--threshold", "2"]);
    assert!(out.contains("compacted 2 file group(s)"), "{out}");
    assert_eq!(
        log_files(&table),
        logs + 2,
        "one compacted log file per group"
    );
    assert_eq!(id_fares(&read_jsonl(&table, &[])), before);
    let tl = ok(&["timeline", s(&table)]);
    assert!(
        tl.contains("LOG_COMPACT") || tl.contains("deltacommit"),
        "{tl}"
    );
    let again = ok(&["compact", s(&table), "--log", "--threshold", "2"]);
    assert!(again.contains("nothing to log-compact"), "{again}");
    let out = ok(&["validate", s(&table)]);
    assert!(out.contains("agrees"), "{out}");
    let both = crate::create_write::arbor(&["compact", s(&table), "--threshold", "2"]);
    assert!(!both.status.success());
}
