//! `arbor doctor`: a table whose clock runs far ahead refuses writes with a message naming the
//! doctor, `arbor doctor` reports it (exit 1), `--fix` repairs it and writes resume; a lost lock
//! state is rebuilt; a wall-clock `--as-of` on a table whose clock runs ahead warns.

use std::path::Path;
use std::process::Command;

use chrono::{Duration, Utc};
use serde_json::Value;

use super::create_write::{fails, file, ok, read_jsonl, s, trips_table};

/// `arbor args...`: (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(args)
        .env_remove("ARBOR_LOG")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn doctor_json(table: &Path, fix: bool) -> (i32, Value) {
    let mut args = vec!["doctor", s(table), "--json"];
    if fix {
        args.push("--fix");
    }
    let (code, stdout, stderr) = run(&args);
    let v = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("doctor printed no JSON ({e}): {stdout} / {stderr}"));
    (code, v)
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
fn test_doctor_reports_and_fixes_a_table_clock_far_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let (code, healthy) = doctor_json(&table, false);
    assert_eq!(code, 0, "{healthy}");
    assert_eq!(
        healthy["problems"].as_array().unwrap().len(),
        0,
        "{healthy}"
    );

    std::fs::write(
        table.join(".hoodie/.locks/instant_clock"),
        "20990101000000000",
    )
    .unwrap();
    let input = file(dir.path(), "d.csv", "id,city,fare,n\nd,la,9.5,9\n");
    let line = fails(&["write", s(&table), s(&input)]);
    for part in ["ahead", "20990101", "arbor doctor"] {
        assert!(line.contains(part), "{part}: {line}");
    }
    assert_eq!(ids(&table), ["a", "b", "c"]);

    let (code, stdout, _) = run(&["doctor", s(&table)]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("problem:") && stdout.contains("clock"),
        "{stdout}"
    );

    let (code, fixed) = doctor_json(&table, true);
    assert_eq!(code, 0, "{fixed}");
    let what = fixed["fixed"].to_string();
    assert!(what.contains("clock back"), "{fixed}");
    assert_eq!(fixed["problems"].as_array().unwrap().len(), 0, "{fixed}");

    ok(&["write", s(&table), s(&input)]);
    assert_eq!(ids(&table), ["a", "b", "c", "d"]);
    let clock = std::fs::read_to_string(table.join(".hoodie/.locks/instant_clock")).unwrap();
    assert!(!clock.starts_with("2099"), "{clock}");
}

#[test]
fn test_doctor_fix_rebuilds_a_deleted_lock_state() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "mor");
    let (_, before) = doctor_json(&table, false);
    let token = before["diagnosis"]["lock"]["token"].as_u64().unwrap();
    std::fs::remove_file(table.join(".hoodie/.locks/table_lock.json")).unwrap();
    let (code, sick) = doctor_json(&table, false);
    assert_eq!(code, 1, "{sick}");
    assert_eq!(sick["diagnosis"]["lock"]["state"], "missing", "{sick}");
    let (code, fixed) = doctor_json(&table, true);
    assert_eq!(code, 0, "{fixed}");
    assert!(
        fixed["diagnosis"]["lock"]["token"].as_u64().unwrap() > token,
        "{fixed}"
    );
    let input = file(dir.path(), "d.csv", "id,city,fare,n\nd,la,9.5,9\n");
    ok(&["write", s(&table), s(&input)]);
    assert_eq!(ids(&table), ["a", "b", "c", "d"]);
}

#[test]
fn test_wall_clock_as_of_warns_when_the_table_clock_runs_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let now = Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string();
    let (code, _, stderr) = run(&["read", s(&table), "--as-of", &now]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");

    // A writer whose clock ran two minutes ahead (within the allowed skew) committed last.
    let ahead = (Utc::now() + Duration::seconds(120))
        .format("%Y%m%d%H%M%S%3f")
        .to_string();
    std::fs::write(table.join(".hoodie/.locks/instant_clock"), &ahead).unwrap();
    let input = file(dir.path(), "d.csv", "id,city,fare,n\nd,la,9.5,9\n");
    ok(&["write", s(&table), s(&input)]);
    let now = Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string();
    let (code, stdout, stderr) = run(&["read", s(&table), "--as-of", &now, "--format", "jsonl"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("warning: --as-of") && stderr.contains("s ahead"),
        "{stderr}"
    );
    // The read itself is what the time names: the later-stamped write is not in it.
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    let (code, _, stderr) = run(&[
        "sql",
        "select count(*) from t",
        "--table",
        &format!("t={}", s(&table)),
        "--as-of",
        &now,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("warning: t: as_of"), "{stderr}");
    let (_, doctor) = doctor_json(&table, false);
    assert!(
        doctor["diagnosis"]["clock"]["ahead_s"].as_i64().unwrap() > 60,
        "{doctor}"
    );
}
