//! `arbor sql`: SQL over tables registered with `--table NAME=PATH` (or declared inside the
//! query), on a branch, at a tag or as of an instant, printed like `arbor read`; `INSERT INTO`
//! writes one commit.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::create_write::{fails, file, instants, ok, read_jsonl, s, trips_table};

/// `arbor sql QUERY --format jsonl` plus `extra`, as sorted JSON lines.
fn sql_jsonl(query: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["sql", query, "--format", "jsonl"];
    args.extend_from_slice(extra);
    let mut lines: Vec<String> = ok(&args)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap().to_string())
        .collect();
    lines.sort();
    lines
}

/// `arbor read` rows (jsonl) as sorted lines.
fn read_lines(table: &std::path::Path, extra: &[&str]) -> Vec<String> {
    let mut lines: Vec<String> = read_jsonl(table, extra)
        .iter()
        .map(Value::to_string)
        .collect();
    lines.sort();
    lines
}

#[test]
fn test_sql_aggregate_and_filter_print_like_read() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "mor");
    let spec = format!("t={}", s(&table));
    let out = ok(&[
        "sql",
        "SELECT city, count(*) AS n, sum(fare) AS fares FROM t GROUP BY city ORDER BY city",
        "--table",
        &spec,
        "--format",
        "csv",
    ]);
    assert_eq!(out, "city,n,fares\nnyc,1,3.5\nsf,2,4.0\n");
    let out = ok(&[
        "sql",
        "SELECT id, fare FROM t WHERE city = 'sf'",
        "--table",
        &spec,
    ]);
    for needle in ["id", "fare", "1.5", "2.5", "2 rows"] {
        assert!(out.contains(needle), "{needle} missing in {out}");
    }
    assert!(!out.contains("3.5"), "{out}");
    // The same rows as `arbor read --meta`: every column, meta columns included.
    assert_eq!(
        sql_jsonl("SELECT * FROM t", &["--table", &spec]),
        read_lines(&table, &["--meta"])
    );
}

#[test]
fn test_sql_as_of_in_the_future_is_an_error_naming_now_and_the_latest_commit() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let latest = instants(&table)[0]["timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    let spec = format!("t={}", s(&table));
    let q = "SELECT id FROM t";
    let err = fails(&["sql", q, "--table", &spec, "--as-of", "9999-01-01"]);
    assert!(err.contains("99990101000000000"), "{err}");
    assert!(
        err.contains("in the future") && err.contains("it is now"),
        "{err}"
    );
    assert!(err.contains(&latest), "{err}");
    // The latest commit itself reads the latest rows.
    assert_eq!(
        sql_jsonl(q, &["--table", &spec, "--as-of", &latest]).len(),
        3
    );
}

#[test]
fn test_sql_on_branch_tag_and_as_of_equals_read() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let first = instants(&table)[0]["timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    ok(&["tag", "create", s(&table), "v1"]);
    let changes = file(
        dir.path(),
        "up.csv",
        "id,city,fare,n\na,sf,10.0,5\nd,la,4.5,1\n",
    );
    ok(&["write", s(&table), s(&changes)]);
    ok(&["branch", "create", s(&table), "audit"]);
    let more = file(dir.path(), "more.csv", "id,city,fare,n\ne,la,7.0,2\n");
    ok(&["write", s(&table), s(&more), "--branch", "audit"]);
    let spec = format!("t={}", s(&table));
    let q = "SELECT id, city, fare, n FROM t";
    let cols = ["--columns", "id,city,fare,n"];
    for (flags, read_flags) in [
        (vec![], vec![]),
        (vec!["--branch", "audit"], vec!["--branch", "audit"]),
        (vec!["--tag", "v1"], vec!["--tag", "v1"]),
        (
            vec!["--as-of", first.as_str()],
            vec!["--as-of", first.as_str()],
        ),
    ] {
        let mut sql_args = vec!["--table", spec.as_str()];
        sql_args.extend(flags.iter().copied());
        let mut read_args = cols.to_vec();
        read_args.extend(read_flags.iter().copied());
        assert_eq!(
            sql_jsonl(q, &sql_args),
            read_lines(&table, &read_args),
            "{flags:?}"
        );
    }
    // Per-table refs inside the query; several statements, the last one printed.
    let query = format!(
        "CREATE EXTERNAL TABLE tagged STORED AS HUDI LOCATION '{}' OPTIONS ('tag' 'v1'); \
         CREATE EXTERNAL TABLE branch STORED AS HUDI LOCATION '{}' OPTIONS ('branch' 'audit'); \
         SELECT b.id FROM branch b LEFT JOIN tagged t ON b.id = t.id WHERE t.id IS NULL ORDER BY b.id",
        s(&table),
        s(&table)
    );
    assert_eq!(ok(&["sql", &query, "--format", "csv"]), "id\nd\ne\n");
}

#[test]
fn test_sql_insert_into_a_branch_commits_once_and_read_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "mor");
    ok(&["branch", "create", s(&table), "audit"]);
    let spec = format!("t={}", s(&table));
    let out = ok(&[
        "sql",
        "INSERT INTO t (id, city, fare, n) VALUES ('z', 'la', 9.5, 9), ('a', 'sf', 11.0, 6)",
        "--table",
        &spec,
        "--branch",
        "audit",
        "--format",
        "csv",
    ]);
    assert_eq!(out, "count\n2\n");
    let on_branch: BTreeSet<String> = read_jsonl(&table, &["--branch", "audit"])
        .iter()
        .map(|r| format!("{}={}", r["id"], r["fare"]))
        .collect();
    assert!(
        on_branch.contains("\"z\"=9.5") && on_branch.contains("\"a\"=11.0"),
        "{on_branch:?}"
    );
    assert_eq!(read_jsonl(&table, &[]).len(), 3, "main unchanged");
}

#[test]
fn test_sql_errors_are_one_line_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let spec = format!("t={}", s(&table));
    let e = fails(&["sql", "SELECT * FROM nope", "--table", &spec]);
    assert!(e.contains("nope"), "{e}");
    let e = fails(&["sql", "SELECT 1", "--table", "t"]);
    assert!(e.contains("NAME=PATH"), "{e}");
    let e = fails(&["sql", "SELECT * FROM t", "--table", &spec, "--tag", "v9"]);
    assert!(e.contains("v9"), "{e}");
    let e = fails(&[
        "sql",
        "INSERT INTO t (id, city, fare, n) VALUES ('q', 'sf', 1.0, 1)",
        "--table",
        &spec,
        "--as-of",
        "2020-01-01",
    ]);
    assert!(
        e.contains("before the table's first commit") || e.contains("cannot write"),
        "{e}"
    );
    let e = fails(&["sql", "SELEC 1"]);
    assert!(
        e.to_lowercase().contains("sql") || e.contains("SELEC"),
        "{e}"
    );
}
