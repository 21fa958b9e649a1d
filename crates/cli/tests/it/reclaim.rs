//! Reclaiming space through the CLI: a rejected write-audit-publish branch (`branch drop`) is
//! freed by the next `arbor clean`, and `arbor clean --orphans` lists (dry run, with sizes) and
//! deletes planted files nothing references, and nothing else.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::create_write::{file, ok, read_jsonl, s, trips_table};

/// Every file outside `.hoodie/` with its size.
fn walk(base: &Path) -> BTreeMap<String, u64> {
    arbor_testkit::data_walk(base)
}

fn ids(table: &Path) -> Vec<String> {
    let mut v: Vec<String> = read_jsonl(table, &[])
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn test_branch_drop_then_clean_frees_the_branch_files() {
    for kind in ["cow", "mor"] {
        let dir = tempfile::tempdir().unwrap();
        let table = trips_table(dir.path(), kind);
        let before = walk(&table);
        ok(&["branch", "create", s(&table), "audit"]);
        let mut csv = String::from("id,city,fare,n\n");
        for i in 0..2000 {
            csv.push_str(&format!("x{i},tokyo,{i}.5,{i}\n"));
        }
        csv.push_str("a,sf,99.5,9\n");
        let input = file(dir.path(), "audit.csv", &csv);
        ok(&["write", s(&table), s(&input), "--branch", "audit"]);
        assert!(walk(&table).len() > before.len(), "{kind}");
        ok(&["branch", "drop", s(&table), "audit"]);
        // validate reports the dropped branch's files (not a failure) until the clean.
        let v: Value = serde_json::from_str(&ok(&["validate", s(&table), "--json"])).unwrap();
        assert!(
            v["unreferenced_files"].as_u64().unwrap() >= 2,
            "{kind}: {v}"
        );
        assert!(v["unreferenced_bytes"].as_u64().unwrap() > 0, "{kind}: {v}");
        assert!(
            ok(&["validate", s(&table)]).contains("referenced by no branch"),
            "{kind}"
        );
        let out: Value =
            serde_json::from_str(&ok(&["clean", s(&table), "--dry-run", "--json"])).unwrap();
        assert!(
            out["reclaimed_files"].as_u64().unwrap() >= 2,
            "{kind}: {out}"
        );
        let text = ok(&["clean", s(&table)]);
        assert!(
            text.contains("reclaimed") && text.contains("dropped branches"),
            "{kind}: {text}"
        );
        assert_eq!(
            walk(&table),
            before,
            "{kind}: the table is back to main's files"
        );
        assert_eq!(ids(&table), ["a", "b", "c"], "{kind}");
        let v: Value = serde_json::from_str(&ok(&["validate", s(&table), "--json"])).unwrap();
        assert_eq!(v["unreferenced_files"], 0, "{kind}: {v}");
    }
}

#[test]
fn test_clean_orphans_lists_with_sizes_then_deletes_only_planted_files() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let before = walk(&table);
    let planted = "sf/aaaaaaaa-0000-4000-8000-000000000001-0_0-1-0_20200101000000000.parquet";
    let kept = "sf/notes.txt";
    for k in [planted, kept] {
        std::fs::write(table.join(k), b"0123456789").unwrap();
    }
    // The default minimum age (1h) protects files just written.
    let young = ok(&["clean", s(&table), "--orphans"]);
    assert!(young.contains("deleted 0 unreferenced"), "{young}");
    assert!(young.contains("1 more"), "{young}");
    let dry = ok(&[
        "clean",
        s(&table),
        "--orphans",
        "--older-than",
        "0s",
        "--dry-run",
    ]);
    let lines: Vec<&str> = dry.lines().collect();
    assert_eq!(lines.len(), 2, "{dry}");
    assert!(
        lines[0].starts_with(planted) && lines[0].ends_with("10 B"),
        "{dry}"
    );
    assert!(
        lines[1].contains("would delete 1 unreferenced file(s), 10 B"),
        "{dry}"
    );
    assert!(table.join(planted).exists());
    let done: Value = serde_json::from_str(&ok(&[
        "clean",
        s(&table),
        "--orphans",
        "--older-than",
        "0s",
        "--json",
    ]))
    .unwrap();
    assert_eq!(done["files"].as_array().unwrap().len(), 1, "{done}");
    assert_eq!(done["bytes"], 10, "{done}");
    let mut expected = before.clone();
    expected.insert(kept.to_string(), 10);
    assert_eq!(walk(&table), expected);
    assert_eq!(ids(&table), ["a", "b", "c"]);
}
