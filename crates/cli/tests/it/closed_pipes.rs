//! Issue 33, item 5: no command panics when its stdout or stderr is closed (`arbor write ...
//! 2>&1 | head -2`). Every command that changes a table is run with stdout and stderr pipes
//! whose read ends are closed before it writes anything, with the log at debug level so that
//! stderr is written to throughout (also while the table lock is held); each must end without
//! a panic (exit code not 101), and leave the table with no pending instant and a free lock.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::create_write::{file, instants, ok, s, TRIPS};

/// The exit code of `arbor args...` run with stdout and stderr pipes closed at once (the log
/// at debug level).
fn with_closed_pipes(args: &[&str]) -> Option<i32> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(args)
        .env("ARBOR_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The readers go away before the process has started to write (it is still loading).
    drop(child.stdout.take());
    drop(child.stderr.take());
    child.wait().unwrap().code()
}

/// Asserts that `table` has no pending (requested or inflight) instant and that its lock is
/// free, as `arbor doctor --json` reports them.
fn assert_settled(table: &Path, after: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(["doctor", s(table), "--json"])
        .env("ARBOR_LOG", "off")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let doctor: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("after {after}: doctor printed no JSON ({e}): {text}"));
    let diagnosis = &doctor["diagnosis"];
    assert_eq!(
        diagnosis["lock"]["state"], "free",
        "after {after}: the lock is not free: {doctor}"
    );
    assert_eq!(
        diagnosis["pending"].as_array().map(Vec::len),
        Some(0),
        "after {after}: pending instants left behind: {doctor}"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "after {after}: doctor found problems: {doctor}"
    );
}

/// Runs `args` with closed pipes; asserts no panic, a completed command and a settled table.
fn run_closed(table: &Path, args: &[&str]) {
    let code = with_closed_pipes(args);
    assert_ne!(code, Some(101), "arbor {args:?} panicked");
    assert_eq!(
        code,
        Some(0),
        "arbor {args:?} failed with closed pipes (exit code {code:?})"
    );
    assert_settled(table, &args.join(" "));
}

#[test]
fn test_writing_commands_with_closed_stdout_and_stderr_finish_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let input = file(dir.path(), "trips.csv", TRIPS);
    let more = file(
        dir.path(),
        "more.csv",
        "id,city,fare,n\na,sf,9.5,9\nd,la,4.5,4\n",
    );
    let table = dir.path().join("t");
    let t = s(&table);
    let i = s(&input);
    let m = s(&more);
    // A new merge-on-read table, then upserts (log files for the compaction).
    #[rustfmt::skip]
    let create: &[&str] = &[
        "write", t, i, "--op", "insert", "--type", "mor", "--key", "id",
        "--partition-by", "city", "--ordering", "n",
    ];
    run_closed(&table, create);
    let mut count = instants(&table).len();
    assert_eq!(count, 1, "the first write did not commit");
    for args in [
        &["write", t, m][..],
        &["write", t, m, "--json"][..],
        &["compact", t][..],
    ] {
        run_closed(&table, args);
        let now = instants(&table).len();
        assert!(now > count, "arbor {args:?} committed nothing");
        count = now;
    }
    run_closed(&table, &["savepoint", "create", t]);
    let savepoints: Value = serde_json::from_str(&ok(&["savepoint", "list", t, "--json"])).unwrap();
    let savepoint = savepoints[0]["instant"].as_str().unwrap().to_string();
    run_closed(&table, &["tag", "create", t, "v1"]);
    run_closed(&table, &["branch", "create", t, "b1"]);
    run_closed(&table, &["write", t, m, "--branch", "b1"]);
    run_closed(&table, &["branch", "publish", t, "b1", "--drop"]);
    run_closed(&table, &["delete-partition", t, "la"]);
    run_closed(
        &table,
        &["ttl", "set", t, "--policy", "count", "--retain", "1"],
    );
    run_closed(&table, &["ttl", "run", t]);
    run_closed(&table, &["clean", t]);
    run_closed(&table, &["archive", t]);
    run_closed(&table, &["restore", t, "--to", &savepoint]);
    run_closed(&table, &["tag", "drop", t, "v1"]);
    // (A restore is refused while a clone reads a later snapshot: the clone comes last.)
    let target = dir.path().join("c");
    run_closed(&table, &["clone", t, s(&target)]);
    assert_settled(&target, "clone (the clone)");
    // The table still reads.
    ok(&["read", t, "--format", "jsonl"]);
}

#[test]
fn test_write_with_one_stream_closed_reports_on_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let input = file(dir.path(), "trips.csv", TRIPS);
    let table = dir.path().join("t");
    #[rustfmt::skip]
    let args = [
        "write", s(&table), s(&input), "--op", "insert", "--type", "cow", "--key", "id",
        "--partition-by", "city", "--json",
    ];
    // Stdout closed: stderr (the debug log) says nothing about a panic.
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(args)
        .env("ARBOR_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_settled(&table, "write with stdout closed");
    // Stderr closed: the report still comes on stdout.
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(["write", s(&table), s(&input), "--json"])
        .env("ARBOR_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["updated"], 3, "{report}");
    assert_settled(&table, "write with stderr closed");
    // A failing command with stderr closed exits 1 (not 101).
    let code = with_closed_pipes(&["write", s(&table), s(&dir.path().join("missing.csv"))]);
    assert_eq!(code, Some(1));
    assert_settled(&table, "a failed write with closed pipes");
}
