//! `arbor upgrade`: a version-6 fixture upgraded to 9 (default) or 8, re-runs and
//! downgrades, and the table read and written afterwards.

use arbor_testkit::{fixture_name, fixture_zips, fixtures_root_or_skip, unzip_table};
use serde_json::Value;

use super::create_write::{arbor, fails, ok, read_jsonl, s};

/// The unzipped v6 trips fixture (MOR, 2 deltacommits), or `None` (visibly skipped).
fn v6_trips() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    let root = fixtures_root_or_skip("arbor upgrade CLI tests")?;
    let zip = fixture_zips(&root)
        .into_iter()
        .find(|z| fixture_name(&root, z) == "quickstart_trips_table/mor/avro/v6_trips_8i1u")?;
    Some(unzip_table(&zip))
}

#[test]
fn test_upgrade_default_to_9_then_noop_and_downgrade_refused() {
    let Some((_tmp, table)) = v6_trips() else {
        return;
    };
    let rows_before = read_jsonl(&table, &[]);
    let out = ok(&["upgrade", s(&table)]);
    assert!(
        out.contains("upgraded from table version 6 to 9 (6 instant file(s) rewritten"),
        "{out}"
    );
    let props = std::fs::read_to_string(table.join(".hoodie/hoodie.properties")).unwrap();
    assert!(props.contains("hoodie.table.version=9"), "{props}");
    assert!(
        props.contains("hoodie.timeline.layout.version=2"),
        "{props}"
    );
    assert_eq!(read_jsonl(&table, &[]), rows_before);

    // Already at the target: a clear message, nothing changed, exit 0.
    let again = ok(&["upgrade", s(&table), "--to", "9"]);
    assert!(
        again.contains("already at table version 9; nothing to upgrade"),
        "{again}"
    );
    let json: Value = serde_json::from_str(&ok(&["upgrade", s(&table), "--json"])).unwrap();
    assert_eq!(json["upgraded"], false);
    assert_eq!(json["from"], 9);

    // Downgrades are refused, in one line.
    let err = fails(&["upgrade", s(&table), "--to", "8"]);
    assert!(err.contains("does not downgrade"), "{err}");
    // Targets other than 8 and 9 are usage errors.
    let out = arbor(&["upgrade", s(&table), "--to", "7"]);
    assert!(!out.status.success());
}

#[test]
fn test_upgrade_to_8_then_write_and_read() {
    let Some((tmp, table)) = v6_trips() else {
        return;
    };
    let out = ok(&["upgrade", s(&table), "--to", "8", "--json"]);
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (json["from"].as_u64(), json["to"].as_u64()),
        (Some(6), Some(8))
    );
    assert_eq!(json["upgraded"], true);
    let rows = read_jsonl(&table, &[]);
    let n = rows.len();
    assert!(n >= 8, "{n} rows");
    let input = tmp.path().join("new.jsonl");
    std::fs::write(
        &input,
        "{\"ts\":1,\"uuid\":\"upgrade-new\",\"rider\":\"r\",\"driver\":\"d\",\"fare\":1.5,\"city\":\"chennai\"}\n",
    )
    .unwrap();
    ok(&["write", s(&table), s(&input), "--op", "insert"]);
    assert_eq!(read_jsonl(&table, &[]).len(), n + 1);
}
