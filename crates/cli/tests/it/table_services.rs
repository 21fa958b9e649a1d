//! `arbor savepoint`, `arbor clean` and `arbor archive`: savepoint round trips, dry runs that
//! change nothing, cleans that keep every row readable, savepoints that survive cleans, and bad
//! input (one-line error, exit 1, table unchanged).

use std::path::Path;

use serde_json::Value;

use crate::create_write::{fails, file, id_fares, instants, ok, read_jsonl, s, tree, trips_table};

/// The table's files and bytes, without the lock directory (taking the table lock may leave
/// lock files behind even when nothing else changes).
fn table_tree(table: &Path) -> Vec<(String, Vec<u8>)> {
    let locks = table.join(".hoodie").join(".locks");
    let locks = locks.to_str().unwrap();
    tree(table)
        .into_iter()
        .filter(|(p, _)| !p.starts_with(locks))
        .collect()
}

/// Upserts new fares for `a` and `c` (one commit).
fn upsert(dir: &Path, table: &Path, round: u32) {
    let fare = f64::from(round) + 0.25;
    let input = file(
        dir,
        "upsert.csv",
        &format!(
            "id,city,fare,n\na,sf,{fare},{}\nc,nyc,{fare},{}\n",
            10 + round,
            10 + round
        ),
    );
    ok(&["write", s(table), s(&input), "--op", "upsert"]);
}

/// The requested times of the completed writes, oldest first.
fn write_times(table: &Path) -> Vec<String> {
    instants(table)
        .iter()
        .map(|i| i["timestamp"].as_str().unwrap().to_string())
        .collect()
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).unwrap()
}

/// `(id, fare)` rows as of `t`.
fn rows_as_of(table: &Path, t: &str) -> Vec<(String, f64)> {
    id_fares(&read_jsonl(table, &["--as-of", t]))
}

fn savepoint_instants(table: &Path) -> Vec<String> {
    json(&["savepoint", "list", s(table), "--json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|sp| sp["instant"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn test_savepoint_create_list_delete_round_trips_json() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    upsert(dir.path(), &table, 1);
    let times = write_times(&table);
    assert_eq!(times.len(), 2);
    assert_eq!(
        ok(&["savepoint", "list", s(&table)]).trim(),
        format!("{}: no savepoints", s(&table))
    );

    let first = json(&[
        "savepoint",
        "create",
        s(&table),
        "--instant",
        &times[0],
        "--comment",
        "before the upsert",
        "--json",
    ]);
    assert_eq!(first["savepoint"]["instant"], times[0].as_str());
    assert_eq!(first["savepoint"]["comment"], "before the upsert");
    // Two partitions, one base file each.
    assert_eq!(first["savepoint"]["files"], 2);
    // Without --instant: the latest completed write.
    let latest = json(&["savepoint", "create", s(&table), "--json"]);
    assert_eq!(latest["savepoint"]["instant"], times[1].as_str());

    let listed = json(&["savepoint", "list", s(&table), "--json"]);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["instant"], times[0].as_str());
    assert_eq!(listed[0]["comment"], "before the upsert");
    assert_eq!(listed[0]["savepointed_by"], "arbor");
    assert_eq!(listed[1]["instant"], times[1].as_str());
    let text = ok(&["savepoint", "list", s(&table)]);
    assert!(
        text.contains(&times[0]) && text.contains("before the upsert"),
        "{text}"
    );

    let deleted = json(&["savepoint", "delete", s(&table), &times[0], "--json"]);
    assert_eq!(deleted["deleted"], times[0].as_str());
    assert_eq!(savepoint_instants(&table), vec![times[1].clone()]);
    ok(&["validate", s(&table)]);
}

#[test]
fn test_clean_dry_run_prints_plan_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    for round in 1..=3 {
        upsert(dir.path(), &table, round);
    }
    let before = table_tree(&table);
    let out = ok(&[
        "clean",
        s(&table),
        "--policy",
        "versions",
        "--retain",
        "1",
        "--dry-run",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    let (summary, files) = lines.split_last().unwrap();
    // Two file groups with four slices each: three old slices of each would go.
    assert_eq!(files.len(), 6, "{out}");
    for f in files {
        assert!(table.join(f).is_file(), "{f} is not a file of the table");
    }
    assert!(
        summary.contains("6 file(s) in 2 partition(s) would be deleted"),
        "{summary}"
    );
    let planned = json(&[
        "clean",
        s(&table),
        "--policy",
        "versions",
        "--retain",
        "1",
        "--dry-run",
        "--json",
    ]);
    assert_eq!(planned["dry_run"], true);
    assert_eq!(planned["planned"], 6);
    assert_eq!(planned["deleted"], 0);
    assert_eq!(planned["instant"], Value::Null);
    let json_files: Vec<&str> = planned["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(json_files, files.to_vec());
    assert_eq!(table_tree(&table), before);
}

#[test]
fn test_clean_deletes_planned_files_and_table_reads_the_same() {
    for kind in ["cow", "mor"] {
        let dir = tempfile::tempdir().unwrap();
        let table = trips_table(dir.path(), kind);
        for round in 1..=3 {
            upsert(dir.path(), &table, round);
        }
        // Replaces the file group of partition sf (merge-on-read upserts add log files to the
        // same slice: the replaced group is what a clean can remove there).
        let overwrite = file(dir.path(), "overwrite.csv", "id,city,fare,n\nd,sf,7.5,20\n");
        ok(&[
            "write",
            s(&table),
            s(&overwrite),
            "--op",
            "insert-overwrite",
        ]);
        let rows = id_fares(&read_jsonl(&table, &[]));
        assert_eq!(rows.len(), 2, "{kind}: {rows:?}");
        let cleaned = json(&[
            "clean",
            s(&table),
            "--policy",
            "versions",
            "--retain",
            "1",
            "--json",
        ]);
        let files: Vec<&str> = cleaned["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        assert!(!files.is_empty(), "{kind}: nothing cleaned");
        assert_eq!(cleaned["deleted"], files.len(), "{kind}");
        assert_eq!(cleaned["policy"], "KEEP_LATEST_FILE_VERSIONS");
        let instant = cleaned["instant"].as_str().unwrap();
        for f in &files {
            assert!(!table.join(f).exists(), "{kind}: {f} still exists");
        }
        assert_eq!(id_fares(&read_jsonl(&table, &[])), rows, "{kind}");
        ok(&["validate", s(&table)]);
        let all: Value =
            serde_json::from_str(&ok(&["timeline", s(&table), "--all", "--json"])).unwrap();
        assert!(
            all.as_array()
                .unwrap()
                .iter()
                .any(|i| i["action"] == "clean"
                    && i["timestamp"] == instant
                    && i["state"] == "COMPLETED"),
            "{kind}: no completed clean {instant}"
        );
        // Nothing is left to clean under the same policy.
        let again = ok(&["clean", s(&table), "--policy", "versions", "--retain", "1"]);
        assert!(again.contains("nothing to clean"), "{kind}: {again}");
    }
}

#[test]
fn test_clean_default_policy_keeps_ten_commits() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    for round in 1..=3 {
        upsert(dir.path(), &table, round);
    }
    let before = table_tree(&table);
    let out = ok(&["clean", s(&table)]);
    assert!(out.contains("KEEP_LATEST_COMMITS 10"), "{out}");
    assert!(out.contains("nothing to clean"), "{out}");
    assert_eq!(table_tree(&table), before);
    // Versions keep 3 by default: of four slices per file group, one goes.
    let planned = json(&[
        "clean",
        s(&table),
        "--policy",
        "versions",
        "--dry-run",
        "--json",
    ]);
    assert_eq!(planned["retain"], 3);
    assert_eq!(planned["planned"], 2);
}

#[test]
fn test_savepoint_protects_snapshot_across_clean() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    upsert(dir.path(), &table, 1);
    let saved = write_times(&table)[1].clone();
    let saved_rows = rows_as_of(&table, &saved);
    ok(&["savepoint", "create", s(&table), "--instant", &saved]);
    for round in 2..=4 {
        upsert(dir.path(), &table, round);
    }
    let latest = id_fares(&read_jsonl(&table, &[]));
    assert_ne!(latest, saved_rows);

    let cleaned = json(&[
        "clean",
        s(&table),
        "--policy",
        "versions",
        "--retain",
        "1",
        "--json",
    ]);
    // The first write's and two of the later writes' slices go; the savepoint's stay.
    assert_eq!(cleaned["deleted"], 6, "{cleaned}");
    assert_eq!(rows_as_of(&table, &saved), saved_rows);
    assert_eq!(id_fares(&read_jsonl(&table, &[])), latest);
    ok(&["validate", s(&table)]);

    // Once the savepoint is gone, its files are cleaned too.
    ok(&["savepoint", "delete", s(&table), &saved]);
    let cleaned = json(&[
        "clean",
        s(&table),
        "--policy",
        "versions",
        "--retain",
        "1",
        "--json",
    ]);
    assert_eq!(cleaned["deleted"], 2, "{cleaned}");
    assert_eq!(id_fares(&read_jsonl(&table, &[])), latest);
    ok(&["validate", s(&table)]);
}

#[test]
fn test_archive_moves_old_instants_and_clean_no_archive_leaves_them() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    // The default archival policy keeps at least 20 and at most 30 completed instants.
    for round in 1..=31 {
        upsert(dir.path(), &table, round);
    }
    let rows = id_fares(&read_jsonl(&table, &[]));
    let cleaned = json(&["clean", s(&table), "--no-archive", "--json"]);
    assert!(cleaned["deleted"].as_u64().unwrap() > 0, "{cleaned}");
    assert_eq!(cleaned["archived"], 0);
    assert_eq!(write_times(&table).len(), 32);

    let archived = json(&["archive", s(&table), "--json"]);
    let archived: Vec<String> = archived["archived"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["timestamp"].as_str().unwrap().to_string())
        .collect();
    assert!(!archived.is_empty());
    let active = write_times(&table);
    assert_eq!(active.len() + archived.len(), 32, "{archived:?}");
    assert!(archived.iter().all(|t| !active.contains(t)));
    assert_eq!(id_fares(&read_jsonl(&table, &[])), rows);
    ok(&["validate", s(&table)]);

    let again = ok(&["archive", s(&table)]);
    assert_eq!(again.trim(), format!("{}: nothing to archive", s(&table)));
}

#[test]
fn test_table_services_bad_input_fails_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    upsert(dir.path(), &table, 1);
    ok(&["savepoint", "create", s(&table)]);
    let t = s(&table);
    let before = table_tree(&table);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["savepoint", "create", t, "--instant", "20000101000000000"],
            "not a completed commit",
        ),
        (vec!["savepoint", "create", t], "savepointed already"),
        (
            vec!["savepoint", "create", t, "--instant", "yesterday"],
            "--instant",
        ),
        (
            vec!["savepoint", "delete", t, "20000101000000000"],
            "no such savepoint",
        ),
        (vec!["clean", t, "--policy", "bogus"], "--policy"),
        (vec!["clean", t, "--retain", "0"], "--retain"),
        (
            vec!["clean", t, "--policy", "hours", "--retain", "three"],
            "--retain",
        ),
    ];
    for (args, reason) in &cases {
        let line = fails(args);
        assert!(line.starts_with(&format!("error: {t}: ")), "{line}");
        assert!(line.contains(reason), "{args:?}: {line}");
        assert_eq!(table_tree(&table), before, "{args:?} changed the table");
    }
    let missing = dir.path().join("missing");
    let m = s(&missing);
    for args in [
        vec!["savepoint", "create", m],
        vec!["savepoint", "list", m],
        vec!["savepoint", "delete", m, "20000101000000000"],
        vec!["clean", m],
        vec!["clean", m, "--dry-run"],
        vec!["archive", m],
    ] {
        let line = fails(&args);
        assert!(line.starts_with(&format!("error: {m}: ")), "{line}");
    }
    assert!(!missing.exists());
    // A directory that holds no table.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for args in [
        vec!["savepoint", "list", s(&empty)],
        vec!["clean", s(&empty)],
        vec!["archive", s(&empty)],
    ] {
        let line = fails(&args);
        assert!(
            line.starts_with(&format!("error: {}: ", s(&empty))),
            "{line}"
        );
    }
    assert!(tree(&empty).is_empty());
}
