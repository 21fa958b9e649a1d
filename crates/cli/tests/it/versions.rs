//! Table versions 8 and 9 through the CLI: `--table-version` on `arbor create` and `arbor
//! write` (default 9; 6, 7 and 10 are usage errors; a value that differs from an existing
//! table's version is refused naming both), a matrix that runs every state change (insert,
//! upsert, delete, delete-partition, compaction, savepoint, clean, restore, tag, branch +
//! write + publish, index create) on v8 and v9 tables of both types and checks after each step
//! that every `hoodie.properties` of the table (data and metadata table, root and
//! publication) still carries the table's version in that version's spelling and that hudi-rs
//! reads the rows arbor reads; and the one-line refusal of every state change on a version 6
//! table.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::create_write::{arbor, fails, file, id_fares, ok, read_jsonl, s, tree, TRIPS};

/// Every `hoodie.properties` under `table` (data side and metadata tables, root and
/// publications), parsed into `key -> value`.
fn all_properties(table: &Path) -> Vec<(PathBuf, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let mut stack = vec![table.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "hoodie.properties") {
                let text = std::fs::read_to_string(&p).unwrap();
                let pairs = text
                    .lines()
                    .filter(|l| !l.starts_with('#'))
                    .filter_map(|l| l.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                out.push((p, pairs));
            }
        }
    }
    out.sort();
    out
}

/// Asserts every `hoodie.properties` of `table` is at `version` with that version's
/// conventions (spec §1.2, as Spark writes them): data side v9 `hoodie.table.format=native`,
/// `hoodie.table.ordering.fields`, no payload class or strategy id; v8 the precombine field,
/// the strategy id and the payload class; metadata tables at the same version, without
/// `hoodie.table.format`.
fn assert_conventions(table: &Path, version: u32, step: &str) {
    let files = all_properties(table);
    assert!(files.len() >= 2, "{step}: {files:?}");
    for (path, pairs) in files {
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        let at = format!("{step}: {}", path.display());
        let want = version.to_string();
        assert_eq!(get("hoodie.table.version"), Some(want.as_str()), "{at}");
        assert_eq!(
            get("hoodie.table.initial.version"),
            Some(want.as_str()),
            "{at}"
        );
        assert_eq!(get("hoodie.timeline.layout.version"), Some("2"), "{at}");
        let mdt = path.to_string_lossy().contains("/metadata/.hoodie/");
        if mdt {
            assert_eq!(get("hoodie.table.format"), None, "{at}");
            assert_eq!(get("hoodie.record.merge.mode"), Some("CUSTOM"), "{at}");
            assert_eq!(
                get("hoodie.compaction.payload.class"),
                Some("org.apache.hudi.metadata.HoodieMetadataPayload"),
                "{at}"
            );
            continue;
        }
        assert_eq!(
            get("hoodie.record.merge.mode"),
            Some("EVENT_TIME_ORDERING"),
            "{at}"
        );
        if version == 9 {
            assert_eq!(get("hoodie.table.format"), Some("native"), "{at}");
            assert_eq!(get("hoodie.table.ordering.fields"), Some("n"), "{at}");
            for absent in [
                "hoodie.table.precombine.field",
                "hoodie.compaction.payload.class",
                "hoodie.record.merge.strategy.id",
            ] {
                assert_eq!(get(absent), None, "{at}: {absent}");
            }
        } else {
            assert_eq!(get("hoodie.table.format"), None, "{at}");
            assert_eq!(get("hoodie.table.precombine.field"), Some("n"), "{at}");
            assert_eq!(get("hoodie.table.ordering.fields"), None, "{at}");
            assert_eq!(
                get("hoodie.record.merge.strategy.id"),
                Some("eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"),
                "{at}"
            );
            assert_eq!(
                get("hoodie.compaction.payload.class"),
                Some("org.apache.hudi.common.model.DefaultHoodieRecordPayload"),
                "{at}"
            );
        }
    }
}

/// `(id, fare)` rows hudi-rs reads at the table path (sorted), or `None` when the peer is
/// absent (skipped visibly).
fn peer_id_fares(table: &Path) -> Option<Vec<(String, f64)>> {
    let python = arbor_testkit::peer_python_or_skip("version checks against hudi-rs")?;
    let script = r#"
import json, sys
import pyarrow as pa
from hudi import HudiReadOptions, HudiTable
t = pa.Table.from_batches(HudiTable(sys.argv[1]).read(HudiReadOptions()))
rows = sorted([r["id"], r["fare"]] for r in t.to_pylist())
print(json.dumps(rows))
"#;
    let out = std::process::Command::new(python)
        .args(["-c", script])
        .arg(table)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hudi-rs failed on {}: {}",
        table.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<(String, f64)> = serde_json::from_slice(&out.stdout).unwrap();
    Some(rows)
}

/// After a step: the conventions hold and hudi-rs reads what arbor reads at main.
fn check(table: &Path, version: u32, step: &str) -> Vec<(String, f64)> {
    assert_conventions(table, version, step);
    let ours = id_fares(&read_jsonl(table, &[]));
    if let Some(peer) = peer_id_fares(table) {
        assert_eq!(peer, ours, "{step}: hudi-rs and arbor differ");
    }
    ours
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).unwrap()
}

/// The requested time of the latest completed write.
fn latest_write(table: &Path) -> String {
    let list = crate::create_write::instants(table);
    list.last().unwrap()["timestamp"]
        .as_str()
        .unwrap()
        .to_string()
}

fn id_list(rows: &[(String, f64)]) -> Vec<&str> {
    rows.iter().map(|(id, _)| id.as_str()).collect()
}

/// Runs every state change on a `kind` table created at `version` and checks each step.
fn run_matrix(version: u32, kind: &str) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let table = d.join("t");
    let v = version.to_string();
    let trips = file(d, "trips.csv", TRIPS);
    ok(&[
        "write",
        s(&table),
        s(&trips),
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
        "--table-version",
        &v,
    ]);
    let rows = check(&table, version, "create+insert");
    assert_eq!(id_list(&rows), ["a", "b", "c"]);

    let up = file(d, "up.csv", "id,city,fare,n\na,sf,10.5,10\nd,sf,4.5,4\n");
    ok(&["write", s(&table), s(&up), "--op", "upsert"]);
    let rows = check(&table, version, "upsert");
    assert_eq!(rows[0], ("a".to_string(), 10.5));

    let del = file(d, "del.csv", "id,city,fare,n\nb,sf,0,0\n");
    ok(&["write", s(&table), s(&del), "--op", "delete"]);
    let rows = check(&table, version, "delete");
    assert_eq!(id_list(&rows), ["a", "c", "d"]);

    ok(&["delete-partition", s(&table), "nyc"]);
    let rows = check(&table, version, "delete-partition");
    assert_eq!(id_list(&rows), ["a", "d"]);

    let more = file(d, "more.csv", "id,city,fare,n\ne,nyc,5.5,5\na,sf,11.5,11\n");
    ok(&["write", s(&table), s(&more), "--op", "upsert"]);
    if kind == "mor" {
        ok(&["compact", s(&table)]);
        check(&table, version, "compaction");
    }

    let sp = latest_write(&table);
    ok(&["savepoint", "create", s(&table), "--instant", &sp]);
    let at_savepoint = check(&table, version, "savepoint");

    let later = file(d, "later.csv", "id,city,fare,n\nf,sf,6.5,6\na,sf,12.5,12\n");
    ok(&["write", s(&table), s(&later), "--op", "upsert"]);
    ok(&["clean", s(&table), "--policy", "commits", "--retain", "1"]);
    check(&table, version, "clean");

    ok(&["restore", s(&table), "--to", &sp]);
    let rows = check(&table, version, "restore");
    assert_eq!(rows, at_savepoint);

    ok(&["tag", "create", s(&table), "v1"]);
    check(&table, version, "tag");

    ok(&["index", "create", s(&table), "--secondary", "city"]);
    check(&table, version, "index create");
    let defs = std::fs::read_to_string(table.join(".hoodie/.index_defs/index.json")).unwrap();
    let defs: Value = serde_json::from_str(&defs).unwrap();
    let want = if version == 9 { "V2" } else { "V1" };
    assert_eq!(
        defs["indexDefinitions"]["secondary_index_city"]["version"], want,
        "{defs}"
    );

    ok(&["branch", "create", s(&table), "audit"]);
    check(&table, version, "branch create");
    let fix = file(d, "fix.csv", "id,city,fare,n\ng,nyc,7.5,7\n");
    ok(&[
        "write",
        s(&table),
        s(&fix),
        "--op",
        "upsert",
        "--branch",
        "audit",
    ]);
    check(&table, version, "write on branch");
    json(&["branch", "publish", s(&table), "audit", "--json"]);
    let rows = check(&table, version, "publish");
    assert!(id_list(&rows).contains(&"g"), "{rows:?}");

    // A write after the publication lands in the published metadata and keeps the version.
    let after = file(d, "after.csv", "id,city,fare,n\nh,sf,8.5,8\n");
    ok(&["write", s(&table), s(&after), "--op", "upsert"]);
    let rows = check(&table, version, "write after publish");
    assert!(id_list(&rows).contains(&"h"), "{rows:?}");
}

#[test]
fn test_versions_matrix_v9_cow() {
    run_matrix(9, "cow");
}

#[test]
fn test_versions_matrix_v9_mor() {
    run_matrix(9, "mor");
}

#[test]
fn test_versions_matrix_v8_cow() {
    run_matrix(8, "cow");
}

#[test]
fn test_versions_matrix_v8_mor() {
    run_matrix(8, "mor");
}

#[test]
fn test_create_defaults_to_version_9_and_takes_8() {
    let dir = tempfile::tempdir().unwrap();
    let schema = file(dir.path(), "trips.csv", TRIPS);
    for (flag, want) in [(None, "9"), (Some("8"), "8"), (Some("9"), "9")] {
        let table = dir.path().join(format!("t{want}{}", flag.is_some()));
        let mut args = vec![
            "create",
            s(&table),
            "--type",
            "cow",
            "--key",
            "id",
            "--schema-from",
            s(&schema),
        ];
        if let Some(f) = flag {
            args.extend(["--table-version", f]);
        }
        let out = ok(&args);
        assert!(out.contains(&format!("(version {want})")), "{out}");
        let text = std::fs::read_to_string(table.join(".hoodie/hoodie.properties")).unwrap();
        assert!(
            text.lines()
                .any(|l| l == format!("hoodie.table.version={want}")),
            "{flag:?}: {text}"
        );
    }
}

#[test]
fn test_table_version_other_values_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let input = file(dir.path(), "trips.csv", TRIPS);
    let table = dir.path().join("t");
    for bad in ["6", "7", "10", "nine"] {
        let out = arbor(&[
            "write",
            s(&table),
            s(&input),
            "--type",
            "cow",
            "--key",
            "id",
            "--table-version",
            bad,
        ]);
        assert_eq!(out.status.code(), Some(2), "{bad}: usage errors exit 2");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("8 or 9"), "{bad}: {err}");
        assert!(!table.exists(), "{bad}: nothing is created");
    }
}

#[test]
fn test_table_version_differing_from_existing_table_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let input = file(dir.path(), "trips.csv", TRIPS);
    let table = dir.path().join("t");
    ok(&[
        "write",
        s(&table),
        s(&input),
        "--type",
        "cow",
        "--key",
        "id",
        "--table-version",
        "8",
    ]);
    let before = tree(&table);
    let err = fails(&["write", s(&table), s(&input), "--table-version", "9"]);
    assert!(err.contains("table version is 8, not 9"), "{err}");
    assert_eq!(tree(&table), before, "the refused write changed nothing");
    // The table's own version is accepted.
    ok(&["write", s(&table), s(&input), "--table-version", "8"]);
}

/// Every state change on a copy of the version 6 fixture `sample_table/cow/v6_nonpartitioned`
/// fails with the one line naming `arbor upgrade`, and changes nothing; reads keep working.
#[test]
fn test_v6_table_state_changes_refused_naming_upgrade() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("v6 refusal test") else {
        return;
    };
    let zip = root.join("sample_table/cow/v6_nonpartitioned.zip");
    let (_tmp, base) = arbor_testkit::unzip_table(&zip);
    let table = s(&base).to_string();
    let rows = read_jsonl(&base, &[]);
    assert!(!rows.is_empty(), "v6 reads keep working");
    let dir = tempfile::tempdir().unwrap();
    let one = file(dir.path(), "one.jsonl", "{\"id\": 1}\n");
    let want = format!(
        "error: table version 6 (Hudi 0.x) is read-only in arbor; run `arbor upgrade {table}` \
         to convert it to version 9"
    );
    let instant = crate::create_write::instants(&base).last().unwrap()["timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    let before = tree(&base);
    let commands: Vec<Vec<&str>> = vec![
        vec!["write", &table, s(&one), "--op", "upsert"],
        vec!["write", &table, s(&one), "--op", "delete"],
        vec!["delete-partition", &table, "x"],
        vec!["tag", "create", &table, "v1"],
        vec!["branch", "create", &table, "audit"],
        vec!["clean", &table],
        vec!["archive", &table],
        vec!["compact", &table],
        vec!["savepoint", "create", &table, "--instant", &instant],
        vec!["restore", &table, "--to", &instant],
        vec!["mdt", "init", &table],
        vec!["index", "create", &table, "--secondary", "name"],
    ];
    for args in &commands {
        let line = fails(args);
        assert_eq!(line, want, "{args:?}");
    }
    assert_eq!(tree(&base), before, "the refused commands changed nothing");
}
