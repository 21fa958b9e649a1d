//! `arbor demo`: runs, explains each step, can be rerun, never replaces what it did not make,
//! and leaves a table that hudi-rs 0.5.0 reads.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::create_write::{fails, instants, ok, read_jsonl, s};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python that runs the peer reader: `ARBOR_PEER_PYTHON`, else what `scripts/peer.sh`
/// installs. `None` (visibly skipped) only outside CI.
fn peer_python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ARBOR_PEER_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/peer.sh"))
        .output();
    let reason = match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            if let Some(line) = text.lines().rev().find(|l| !l.trim().is_empty()) {
                return Some(PathBuf::from(line.trim()));
            }
            "scripts/peer.sh printed nothing".to_string()
        }
        Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
        Err(e) => e.to_string(),
    };
    let msg = format!("SKIPPED: peer-reader check needs hudi==0.5.0: {reason}");
    assert!(std::env::var_os("CI").is_none(), "{msg}, but CI is set");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{msg}");
    None
}

fn run_demo(dir: &Path, kind: &str) -> String {
    let out = ok(&["demo", s(dir), "--type", kind]);
    for step in 1..=10 {
        assert!(
            out.contains(&format!("\n== {step}. ")),
            "step {step} missing:\n{out}"
        );
    }
    assert!(out.contains("$ arbor write"), "{out}");
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
    if let Some(python) = peer_python() {
        let out = Command::new(&python)
            .arg(repo_root().join("scripts/peer_reader.py"))
            .arg(&table)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "hudi-rs could not read the demo table: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let peer: Value = serde_json::from_slice(&out.stdout).unwrap();
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
