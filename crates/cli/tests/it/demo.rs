//! `arbor demo`: runs, explains each step, can be rerun, never replaces what it did not make,
//! walks through a branch (write, validate, publish) and a tag read, and leaves a table that
//! hudi-rs 0.5.0 reads as arbor reads main (hudi-rs knows nothing of branches; the root
//! metadata leads it to the publication).

use std::path::Path;

use arbor_testkit::{peer_python_or_skip, peer_read};

use crate::create_write::{fails, instants, ok, read_jsonl, s};

fn run_demo(dir: &Path, kind: &str) -> String {
    let out = ok(&["demo", s(dir), "--type", kind]);
    for step in 1..=31 {
        assert!(
            out.contains(&format!("\n== {step}. ")),
            "step {step} missing:\n{out}"
        );
    }
    assert!(out.contains("$ arbor write"), "{out}");
    assert!(out.contains("metadata table agrees with storage"), "{out}");
    assert!(
        out.contains("(branch audit): metadata table agrees with storage"),
        "{out}"
    );
    assert!(out.contains("$ arbor branch publish"), "{out}");
    assert!(out.contains("published as publication p1"), "{out}");
    assert!(out.contains("tag v1 created on main"), "{out}");
    // Main before the branch's publication, the branch, and the tag after main moved on.
    let section = |n: u32| {
        let start = out.find(&format!("\n== {n}. ")).unwrap();
        let rest = &out[start + 1..];
        let end = rest.find("\n== ").unwrap_or(rest.len());
        rest[..end].to_string()
    };
    assert!(section(14).contains("6 rows"), "{}", section(14));
    assert!(!section(14).contains("trip-09"), "{}", section(14));
    assert!(section(15).contains("trip-09"), "{}", section(15));
    assert!(section(18).contains("trip-09"), "{}", section(18));
    assert!(section(21).contains("34.15"), "{}", section(21));
    assert!(!section(21).contains("36.0"), "{}", section(21));
    assert!(
        section(23).contains("would delete") && section(23).contains("chennai"),
        "{}",
        section(23)
    );
    assert!(section(24).contains("DELETE_PARTITION"), "{}", section(24));
    assert!(!section(25).contains("chennai"), "{}", section(25));
    assert!(section(26).contains("chennai"), "{}", section(26));
    // The clone of tag v1: no data copied, its own write, the source's pin, detached.
    assert!(
        section(27).contains("shallow clone") && section(27).contains("none copied"),
        "{}",
        section(27)
    );
    assert!(
        section(29).contains("trip-10") && section(29).contains("34.15"),
        "{}",
        section(29)
    );
    assert!(section(30).contains("tag v1"), "{}", section(30));
    assert!(section(31).contains("detached"), "{}", section(31));
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
    // The branch's upsert came to main by publication, the late fare change after it.
    assert_eq!(
        ops,
        [
            "INSERT",
            "UPSERT",
            "DELETE",
            "UPSERT",
            "UPSERT",
            "DELETE_PARTITION"
        ]
    );
    let rows = read_jsonl(&table, &[]);
    let mut ids: Vec<&str> = rows.iter().map(|r| r["uuid"].as_str().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, ["trip-01", "trip-02", "trip-04", "trip-05", "trip-08"]);
    let fare = |id: &str| rows.iter().find(|r| r["uuid"] == id).unwrap()["fare"].clone();
    assert_eq!(fare("trip-01"), 25.0);
    assert_eq!(fare("trip-02"), 29.95);
    assert_eq!(fare("trip-04"), 36.0);
    let tagged = read_jsonl(&table, &["--tag", "v1"]);
    assert_eq!(tagged.len(), 7);
    let t4 = tagged.iter().find(|r| r["uuid"] == "trip-04").unwrap();
    assert_eq!(t4["fare"], 34.15);
    // A reader that knows nothing of branches follows the root metadata to main: it reads
    // main as arbor does, the publication and the later write included.
    if let Some(python) = peer_python_or_skip("peer-reader check needs hudi==0.5.0") {
        let peer = peer_read(&python, &table);
        assert_eq!(peer["row_count"], rows.len(), "{peer}");
        assert_eq!(
            peer["timeline"].as_array().unwrap().len(),
            list.len(),
            "{peer}"
        );
        // The detached clone: tag v1's 7 rows and the clone's own trip-10.
        let lab = dir.path().join("trips-lab");
        let peer = peer_read(&python, &lab);
        assert_eq!(peer["row_count"], 8, "{peer}");
        assert_eq!(read_jsonl(&lab, &[]).len(), 8);
    }
}

#[test]
fn test_demo_mor_reruns_in_the_same_directory() {
    let dir = tempfile::tempdir().unwrap();
    run_demo(dir.path(), "mor");
    let first = instants(&dir.path().join("trips"));
    run_demo(dir.path(), "mor");
    let second = instants(&dir.path().join("trips"));
    assert_eq!(second.len(), 6, "the rerun starts from a fresh table");
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
