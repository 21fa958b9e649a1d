//! Issue 33, item 7: help wrapped to the terminal width with one-line global options, ids and
//! instant times never broken inside a human table's cell, no colour off a terminal, and
//! `--json` failures as one JSON object on stdout.

use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::create_write::{fails, file, instants, ok, s, trips_table};
use crate::read_output::ok_cols;

/// `arbor args...` with `env` set and stdin not a terminal (clap takes a terminal's width from
/// any of the three streams).
fn arbor_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_arbor"));
    cmd.args(args).stdin(Stdio::null()).env_remove("NO_COLOR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn test_help_wraps_to_columns_and_global_options_take_one_line() {
    for args in [
        &["--help"][..],
        &["write", "--help"][..],
        &["ttl", "set", "--help"][..],
    ] {
        for columns in ["60", "100"] {
            let out = arbor_env(args, &[("COLUMNS", columns)]);
            assert!(out.status.success());
            let text = String::from_utf8(out.stdout).unwrap();
            let limit: usize = columns.parse().unwrap();
            // clap does not wrap the usage line (`arbor ttl set` has a long one).
            for line in text.lines().filter(|l| !l.starts_with("Usage:")) {
                assert!(
                    line.chars().count() <= limit,
                    "arbor {args:?} at COLUMNS={columns}: {line:?} is wider"
                );
            }
        }
    }
    // Each global option's help is one line, whether beside the option or under it.
    let out = arbor_env(&["write", "--help"], &[("COLUMNS", "200")]);
    let text = String::from_utf8(out.stdout).unwrap();
    for (option, help) in [
        ("--storage-option", "Storage option KEY=VALUE"),
        ("--lock <URL>", "Table lock:"),
    ] {
        let at = text.lines().position(|l| l.contains(option)).unwrap();
        let lines: Vec<&str> = text.lines().skip(at).take(3).collect();
        let line = lines
            .iter()
            .find(|l| l.contains(help))
            .unwrap_or_else(|| panic!("{option}: {lines:?}"));
        assert!(line.contains("README"), "{option}: {lines:?}");
        assert!(line.chars().count() <= 130, "{line:?}");
    }
    assert!(!text.contains("Credentials are never read"), "{text}");
}

/// Asserts that every word of `text` that looks like a piece of one of `values` (digits, hex
/// and dashes) is a whole value, or a value with its middle elided (`head…tail`).
fn assert_not_broken(text: &str, values: &[String], what: &str) {
    for word in text.split(|c: char| c.is_whitespace() || c == '│') {
        if word.len() < 4 {
            continue;
        }
        if let Some((head, tail)) = word.split_once('…') {
            assert!(
                values.iter().any(|v| v.starts_with(head)
                    && v.ends_with(tail)
                    && v.chars().count() > word.chars().count()),
                "{what}: {word:?} is not the middle of a value: {text}"
            );
        } else if word.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            assert!(
                values.iter().any(|v| v == word),
                "{what}: {word:?} is a piece of a value, broken over lines: {text}"
            );
        }
    }
}

#[test]
fn test_tables_never_break_ids_or_instants_inside_a_cell() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "mor");
    let more = file(dir.path(), "more.csv", "id,city,fare,n\na,sf,9.5,9\n");
    ok(&["write", s(&table), s(&more)]);
    let mut values: Vec<String> = Vec::new();
    for i in instants(&table) {
        for (_, v) in i.as_object().unwrap() {
            if let Some(v) = v.as_str() {
                values.push(v.to_string());
            }
        }
    }
    let files: Value = serde_json::from_str(&ok(&["files", s(&table), "--json"])).unwrap();
    for f in files.as_array().unwrap() {
        for (_, v) in f.as_object().unwrap() {
            if let Some(v) = v.as_str() {
                values.push(v.to_string());
            }
        }
    }
    assert!(values.len() >= 4, "{values:?}");
    for columns in ["50", "60", "70", "90", "400"] {
        for cmd in ["timeline", "files"] {
            let text = ok_cols(columns, &[cmd, s(&table)]);
            assert_not_broken(&text, &values, &format!("{cmd} at {columns}"));
        }
    }
    // Wide enough, every instant is whole.
    let text = ok_cols("400", &["timeline", s(&table)]);
    for i in instants(&table) {
        let instant = i["timestamp"].as_str().unwrap();
        assert!(text.contains(instant), "{instant}: {text}");
    }
    // At 60 an instant is shortened in the middle (both ends kept), not wrapped.
    let text = ok_cols("60", &["timeline", s(&table)]);
    assert!(text.contains('…'), "{text}");
}

#[test]
fn test_read_table_elides_long_ids_in_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<String> = (0..3)
        .map(|i| format!("{i}{}-end{i}", "abcdef0123456789".repeat(4)))
        .collect();
    let mut csv = String::from("id,city\n");
    for id in &ids {
        csv.push_str(&format!("{id},sf\n"));
    }
    let input = file(dir.path(), "ids.csv", &csv);
    let table = dir.path().join("t");
    ok(&[
        "write",
        s(&table),
        s(&input),
        "--type",
        "cow",
        "--key",
        "id",
    ]);
    let text = ok_cols("50", &["read", s(&table), "--columns", "id,city"]);
    for line in text.lines().filter(|l| l.starts_with('│')).skip(1) {
        let cell = line
            .trim_start_matches('│')
            .split_whitespace()
            .next()
            .unwrap();
        let (head, tail) = cell.split_once('…').unwrap();
        assert!(
            ids.iter()
                .any(|id| id.starts_with(head) && id.ends_with(tail)),
            "{cell:?}: {text}"
        );
        assert!(tail.contains("-end") && head.len() > tail.len(), "{cell:?}");
    }
}

#[test]
fn test_log_is_not_coloured_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let input = file(dir.path(), "trips.csv", crate::create_write::TRIPS);
    let table = dir.path().join("t");
    for level in ["info", "debug"] {
        let out = arbor_env(
            &[
                "write",
                s(&table),
                s(&input),
                "--type",
                "cow",
                "--key",
                "id",
            ],
            &[("ARBOR_LOG", level)],
        );
        assert!(out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("\x1b["), "ARBOR_LOG={level}: {stderr:?}");
        if level == "debug" {
            assert!(stderr.contains("DEBUG"), "no log to check: {stderr}");
        }
    }
}

#[test]
fn test_json_failures_are_one_json_object_on_stdout() {
    let out = arbor_env(&["timeline", "/nonexistent", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("/nonexistent"),
        "{error}"
    );
    assert_eq!(error["kind"], "usage", "{error}");
    assert_eq!(error.as_object().unwrap().len(), 2, "{error}");
    // Without --json: the one line on stderr, nothing on stdout.
    let line = fails(&["timeline", "/nonexistent"]);
    assert!(line.contains("/nonexistent"), "{line}");
    // Subcommands of subcommands, and a command line clap rejects (exit code 2).
    let out = arbor_env(&["savepoint", "list", "/nonexistent", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(error["error"].is_string(), "{error}");
    let out = arbor_env(&["timeline", "--bogus", "--json"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("--bogus"),
        "{error}"
    );
    // A library failure has its kind.
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let out = arbor_env(&["compact", s(&table), "--json"], &[("ARBOR_LOG", "off")]);
    assert_eq!(out.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("copy-on-write"),
        "{error}"
    );
}
