//! `arbor restore <table> --to <instant>`: a restore reads back the savepoint's rows, refusals
//! (no savepoint, a newer savepoint, a bad instant) print one line and change nothing.

use std::path::Path;

use serde_json::Value;

use crate::create_write::{fails, file, id_fares, read_jsonl, s, tree, trips_table};
use crate::create_write::{instants, ok};

/// The table's files and bytes, without the lock directory.
fn table_tree(table: &Path) -> Vec<(String, Vec<u8>)> {
    let locks = table.join(".hoodie").join(".locks");
    let locks = locks.to_str().unwrap().to_string();
    tree(table)
        .into_iter()
        .filter(|(p, _)| !p.starts_with(&locks))
        .collect()
}

/// Upserts a new fare for `a` and a new row `d` (one commit).
fn upsert(dir: &Path, table: &Path, round: u32) {
    let fare = f64::from(round) + 0.25;
    let input = file(
        dir,
        "upsert.csv",
        &format!(
            "id,city,fare,n\na,sf,{fare},{}\nd,nyc,{fare},{}\n",
            10 + round,
            10 + round
        ),
    );
    ok(&["write", s(table), s(&input), "--op", "upsert"]);
}

fn write_times(table: &Path) -> Vec<String> {
    instants(table)
        .iter()
        .map(|i| i["timestamp"].as_str().unwrap().to_string())
        .collect()
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).unwrap()
}

#[test]
fn test_restore_to_savepoint_reads_its_rows_and_rolls_back_later_writes() {
    for kind in ["cow", "mor"] {
        let dir = tempfile::tempdir().unwrap();
        let table = trips_table(dir.path(), kind);
        upsert(dir.path(), &table, 1);
        let times = write_times(&table);
        let sp = times[1].clone();
        ok(&["savepoint", "create", s(&table), "--instant", &sp]);
        let at_sp = id_fares(&read_jsonl(&table, &[]));
        upsert(dir.path(), &table, 2);
        upsert(dir.path(), &table, 3);
        let later: Vec<String> = write_times(&table)[2..].to_vec();
        assert_eq!(later.len(), 2);
        assert_ne!(id_fares(&read_jsonl(&table, &[])), at_sp);

        let out = json(&["restore", s(&table), "--to", &sp, "--json"]);
        assert_eq!(out["restored_to"], sp.as_str());
        let rolled_back: Vec<&str> = out["rolled_back"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(rolled_back, vec![later[1].as_str(), later[0].as_str()]);
        assert!(out["restore_instant"].as_str().unwrap() > later[1].as_str());
        assert_eq!(id_fares(&read_jsonl(&table, &[])), at_sp, "{kind}");
        assert_eq!(write_times(&table), times, "{kind}");
        ok(&["validate", s(&table)]);

        // Text output; nothing left to roll back.
        let text = ok(&["restore", s(&table), "--to", &sp]);
        assert!(
            text.contains(&format!("restored to savepoint {sp}"))
                && text.contains("0 instant(s) rolled back"),
            "{text}"
        );
        // The table keeps working.
        upsert(dir.path(), &table, 4);
        ok(&["validate", s(&table)]);
    }
}

#[test]
fn test_restore_refusals_print_one_line_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    upsert(dir.path(), &table, 1);
    let times = write_times(&table);

    let before = table_tree(&table);
    let line = fails(&["restore", s(&table), "--to", &times[0]]);
    assert!(line.contains("no completed savepoint"), "{line}");
    assert_eq!(table_tree(&table), before);

    ok(&["savepoint", "create", s(&table), "--instant", &times[0]]);
    ok(&["savepoint", "create", s(&table), "--instant", &times[1]]);
    let before = table_tree(&table);
    let line = fails(&["restore", s(&table), "--to", &times[0], "--json"]);
    assert!(
        line.contains(&times[1]),
        "the newer savepoint is named: {line}"
    );
    assert_eq!(table_tree(&table), before);

    let line = fails(&["restore", s(&table), "--to", "yesterday"]);
    assert!(line.contains("--to"), "{line}");
    let line = fails(&["restore", s(&dir.path().join("missing")), "--to", &times[0]]);
    assert!(line.contains("missing"), "{line}");
    assert_eq!(table_tree(&table), before);
}
