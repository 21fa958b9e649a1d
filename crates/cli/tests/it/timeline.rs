//! `arbor timeline` against every Spark-written fixture and against bad input.

use std::fs;
use std::process::{Command, Output};

use arbor_testkit::{fixture_name, fixture_zips, fixtures_root_or_skip, unzip_table};
use serde_json::Value;

use crate::create_write::{arbor, tree};

/// The completed commit/deltacommit/replacecommit instants hudi-rs lists for each fixture
/// (`expected/<table>/snapshot.json`, key `timeline`) are exactly what `arbor timeline --json`
/// lists, with the same completion times and operation types.
#[test]
fn test_timeline_json_matches_expected_for_every_fixture() {
    let Some(root) = fixtures_root_or_skip("test_timeline_json_matches_expected_for_every_fixture")
    else {
        return;
    };
    let zips = fixture_zips(&root);
    assert!(
        zips.len() >= 30,
        "expected the 30 fixture tables, found {}",
        zips.len()
    );
    let mut checked = 0;
    for zip in &zips {
        let name = fixture_name(&root, zip);
        if name.starts_with("expected") {
            continue;
        }
        let expected_path = root.join("expected").join(&name).join("snapshot.json");
        let expected: Value = serde_json::from_slice(&fs::read(&expected_path).unwrap()).unwrap();
        let (_tmp, base) = unzip_table(zip);
        let before = tree(&base);
        let out = arbor(&["timeline", base.to_str().unwrap(), "--json"]);
        assert!(
            out.status.success(),
            "{name}: arbor failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        let want = expected["timeline"].as_array().unwrap();
        let got = got.as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{name}: instant count");
        for (g, w) in got.iter().zip(want) {
            for key in [
                "timestamp",
                "completion_time",
                "action",
                "state",
                "operation",
            ] {
                assert_eq!(g[key], w[key], "{name}: field {key} of {w}");
            }
        }
        assert_eq!(before, tree(&base), "{name}: arbor modified the table");
        checked += 1;
    }
    eprintln!("checked the timeline of {checked} fixture tables");
    assert_eq!(checked, 30);
}

/// `--all` lists pending, non-write and archived instants too; on a fixture it is a superset.
#[test]
fn test_timeline_all_lists_superset() {
    let Some(root) = fixtures_root_or_skip("test_timeline_all_lists_superset") else {
        return;
    };
    let zip = root.join("quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip");
    let (_tmp, base) = unzip_table(&zip);
    let out = arbor(&["timeline", base.to_str().unwrap(), "--all", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    let actions: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["action"].as_str().unwrap())
        .collect();
    assert!(actions.contains(&"indexing"), "{actions:?}");
    assert!(actions.contains(&"commit"), "{actions:?}");
    // The human table also works.
    let out = arbor(&["timeline", base.to_str().unwrap(), "--all"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("20251220210129235"), "{text}");
    assert!(text.contains("COMPLETED"), "{text}");
}

fn assert_one_line_error(out: &Output, needle: &str) {
    assert_eq!(out.status.code(), Some(1), "exit code");
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one error line, got: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(
        lines[0].contains(needle),
        "error {err:?} does not name {needle:?}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn test_timeline_missing_table_fails_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let out = arbor(&["timeline", tmp.path().to_str().unwrap()]);
    assert_one_line_error(&out, ".hoodie/hoodie.properties");
    assert_eq!(
        fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "created files"
    );
}

#[test]
fn test_timeline_nonexistent_directory_fails_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no/such/table");
    let out = arbor(&["timeline", missing.to_str().unwrap()]);
    assert_one_line_error(&out, "no such directory");
    assert!(
        !tmp.path().join("no").exists(),
        "arbor created the directory"
    );
}

#[test]
fn test_timeline_closed_stdout_pipe_is_not_a_panic() {
    let Some(root) = fixtures_root_or_skip("test_timeline_closed_stdout_pipe_is_not_a_panic")
    else {
        return;
    };
    let (_tmp, base) = unzip_table(&root.join("sample_table/cow/v9_txns_simple_meta.zip"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(["timeline", base.to_str().unwrap(), "--all", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away, like `| head -0`
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}

#[test]
fn test_timeline_corrupt_properties_fails_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir_all(tmp.path().join(".hoodie/timeline")).unwrap();
    fs::write(
        tmp.path().join(".hoodie/hoodie.properties"),
        b"\xff\xfe garbage",
    )
    .unwrap();
    let out = arbor(&["timeline", tmp.path().to_str().unwrap()]);
    assert_one_line_error(&out, "hoodie.properties");
}

#[test]
fn test_timeline_truncated_instant_file_fails_with_one_line() {
    let Some(root) =
        fixtures_root_or_skip("test_timeline_truncated_instant_file_fails_with_one_line")
    else {
        return;
    };
    let zip = root.join("sample_table/cow/v8_nonpartitioned.zip");
    let (_tmp, base) = unzip_table(&zip);
    let tl = base.join(".hoodie/timeline");
    let completed = fs::read_dir(&tl)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with(".commit")
                && p.file_name().unwrap().to_string_lossy().contains('_')
        })
        .unwrap();
    let bytes = fs::read(&completed).unwrap();
    fs::write(&completed, &bytes[..bytes.len() / 2]).unwrap();
    let name = completed
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = arbor(&["timeline", base.to_str().unwrap()]);
    assert_one_line_error(&out, &name);
}

#[test]
fn test_timeline_bad_storage_option_is_usage_error() {
    let out = arbor(&["-o", "novalue", "timeline", "/nonexistent"]);
    assert_one_line_error(&out, "KEY=VALUE");
}
