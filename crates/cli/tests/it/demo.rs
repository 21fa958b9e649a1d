//! `arbor demo`: runs, explains each step, can be rerun, never replaces what it did not make,
//! and leaves a table that hudi-rs 0.5.0 reads.

use std::path::Path;

use arbor_testkit::{peer_python_or_skip, peer_read};

use crate::create_write::{fails, instants, ok, read_jsonl, s};

fn run_demo(dir: &Path, kind: &str) -> String {
    let out = ok(&["demo", s(dir), "--type", kind]);
    for step in 1..=11 {
        assert!(
            out.contains(&format!("\n== {step}. ")),
            "step {step} missing:\n{out}"
        );
    }
    assert!(out.contains("$ arbor write"), "{out}");
    assert!(out.contains("metadata table agrees with storage"), "{out}");
    out
}

#[test]
fn test_demo_cow_runs_and_leaves_the_expected_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_demo(dir.path(), "cow");
    assert!(out.contains("6 rows"), "{out}");
    let table = dir.path().join("trips");
    let list = instants(&table);
    let ops: Vec<&str> = list
        .iter()
        .map(|i| i["operation"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["INSERT", "UPSERT", "DELETE"]);
    let rows = read_jsonl(&table, &[]);
    let mut ids: Vec<&str> = rows.iter().map(|r| r["uuid"].as_str().unwrap()).collect();
    ids.sort();
    assert_eq!(
        ids,
        ["trip-01", "trip-02", "trip-04", "trip-05", "trip-06", "trip-08"]
    );
    let t1 = rows.iter().find(|r| r["uuid"] == "trip-01").unwrap();
    assert_eq!(t1["fare"], 25.0);
    if let Some(python) = peer_python_or_skip("peer-reader check needs hudi==0.5.0") {
        let peer = peer_read(&python, &table);
        assert_eq!(peer["row_count"], 6, "{peer}");
        assert_eq!(peer["timeline"].as_array().unwrap().len(), 3, "{peer}");
    }
}

#[test]
fn test_demo_mor_reruns_in_the_same_directory() {
    let dir = tempfile::tempdir().unwrap();
    run_demo(dir.path(), "mor");
    let first = instants(&dir.path().join("trips"));
    run_demo(dir.path(), "mor");
    let second = instants(&dir.path().join("trips"));
    assert_eq!(second.len(), 3, "the rerun starts from a fresh table");
    assert_ne!(first[0]["timestamp"], second[0]["timestamp"]);
    assert_eq!(second[0]["action"], "deltacommit");
}

#[test]
fn test_demo_refuses_a_directory_it_did_not_make() {
    let dir = tempfile::tempdir().unwrap();
    let mine = dir.path().join("trips");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("precious.txt"), "keep").unwrap();
    let err = fails(&["demo", s(dir.path())]);
    assert!(err.contains("did not make"), "{err}");
    assert_eq!(
        std::fs::read_to_string(mine.join("precious.txt")).unwrap(),
        "keep"
    );
}
