//! Issue 33: `validate` on what is no table, damaged `hoodie.properties`, restore refused by
//! inherited instants, requested vs completion times, TTL's clean message, `sql` on read-only
//! or mistyped tables, CSV of nested columns.

use std::fs;

use crate::create_write::{arbor, fails, ok, s, trips_table};

#[test]
fn test_validate_fails_on_a_directory_that_is_no_table() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let line = fails(&["validate", s(&empty)]);
    assert!(line.contains(s(&empty)), "{line}");
    assert!(line.contains("not a Hudi table"), "{line}");
    // With --json the failure is exit 1 and a JSON error naming the path, never a report.
    let out = arbor(&["validate", s(&empty), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(s(&empty)), "{text}");
    assert!(text.contains("not a Hudi table"), "{text}");
    assert!(!text.contains("differences"), "{text}");
    // A real table still validates.
    let table = trips_table(dir.path(), "cow");
    ok(&["validate", s(&table)]);
}

/// A change of a file's text.
type Edit = Box<dyn Fn(&str) -> String>;

/// `hoodie.properties` of `table` with `edit` applied to its text.
fn damage(table: &std::path::Path, edit: impl Fn(&str) -> String) {
    let p = table.join(".hoodie/hoodie.properties");
    let text = fs::read_to_string(&p).unwrap();
    fs::write(&p, edit(&text)).unwrap();
}

#[test]
fn test_damaged_properties_fail_every_command_naming_path_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let props = table.join(".hoodie/hoodie.properties");
    let good = fs::read_to_string(&props).unwrap();
    let input = crate::create_write::file(dir.path(), "more.csv", "id,city,fare,n\nd,sf,4.5,4\n");
    let cases: Vec<(Edit, &str)> = vec![
        // Truncated in the middle of a line (before the record key fields and checksum).
        (
            Box::new(|t: &str| t[..t.find("hoodie.table.recordkey").unwrap() + 20].to_string()),
            "truncated",
        ),
        (
            Box::new(|t: &str| {
                t.lines()
                    .filter(|l| !l.starts_with("hoodie.table.name="))
                    .map(|l| format!("{l}\n"))
                    .collect()
            }),
            "missing required key hoodie.table.name",
        ),
        (
            Box::new(|t: &str| t.replace("hoodie.table.version=9", "hoodie.table.version=x9")),
            "hoodie.table.version",
        ),
        (
            Box::new(|t: &str| t.replace("hoodie.table.type=COPY_ON_WRITE", "hoodie.table.type=")),
            "missing required key hoodie.table.type",
        ),
        (
            Box::new(|t: &str| {
                t.lines()
                    .map(|l| {
                        if l.starts_with("hoodie.table.checksum=") {
                            "hoodie.table.checksum=12345\n".to_string()
                        } else {
                            format!("{l}\n")
                        }
                    })
                    .collect()
            }),
            "checksum mismatch",
        ),
    ];
    for (edit, expected) in &cases {
        fs::write(&props, &good).unwrap();
        damage(&table, edit);
        for args in [
            vec!["read", s(&table)],
            vec!["validate", s(&table)],
            vec!["timeline", s(&table)],
            vec!["write", s(&table), s(&input), "--op", "upsert"],
            vec![
                "sql",
                "SELECT count(*) FROM t",
                "--table",
                &format!("t={}", s(&table)),
            ],
        ] {
            let line = fails(&args);
            assert!(line.contains(s(&table)), "{args:?}: {line}");
            assert!(
                line.contains(".hoodie/hoodie.properties"),
                "{args:?}: {line}"
            );
            assert!(line.contains(expected), "{args:?}: {expected}: {line}");
        }
        // An intact backup is used in its place, as Hudi does.
        fs::write(table.join(".hoodie/hoodie.properties.backup"), &good).unwrap();
        assert_eq!(crate::create_write::read_jsonl(&table, &[]).len(), 3);
        fs::remove_file(table.join(".hoodie/hoodie.properties.backup")).unwrap();
    }
    // A missing checksum is no damage (tables written by older Hudi may have none).
    fs::write(&props, &good).unwrap();
    damage(&table, |t| {
        t.lines()
            .filter(|l| !l.starts_with("hoodie.table.checksum="))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    assert_eq!(crate::create_write::read_jsonl(&table, &[]).len(), 3);
    ok(&["validate", s(&table)]);
}

/// The requested times of the completed instants `arbor timeline --json` lists.
fn times(table: &std::path::Path) -> Vec<String> {
    crate::create_write::instants(table)
        .iter()
        .map(|i| i["timestamp"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn test_restore_main_ignores_what_a_branch_merely_inherited() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let upd = crate::create_write::file(dir.path(), "u.csv", "id,city,fare,n\na,sf,5.5,4\n");
    ok(&["write", s(&table), s(&upd), "--op", "upsert"]);
    let sp = times(&table).last().unwrap().clone();
    ok(&["savepoint", "create", s(&table), "--instant", &sp]);
    // A clean after the savepoint, which the branch then inherits (it is after the base).
    ok(&["clean", s(&table), "--retain", "1"]);
    ok(&["branch", "create", s(&table), "audit"]);
    // The trap: a stray input column lands in main's schema.
    let stray = crate::create_write::file(
        dir.path(),
        "stray.csv",
        "id,city,fare,n,stray\nb,sf,9.5,5,x\n",
    );
    ok(&["write", s(&table), s(&stray), "--op", "upsert"]);
    assert!(crate::create_write::read_jsonl(&table, &[])[0]
        .get("stray")
        .is_some());
    ok(&["restore", s(&table), "--to", &sp]);
    let rows = crate::create_write::read_jsonl(&table, &[]);
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.get("stray").is_none()), "{rows:?}");
    // The branch still reads its own state.
    assert_eq!(
        crate::create_write::read_jsonl(&table, &["--branch", "audit"]).len(),
        3
    );
}

#[test]
fn test_restore_main_before_a_branch_base_is_refused_naming_the_base() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let sp = times(&table).last().unwrap().clone();
    ok(&["savepoint", "create", s(&table), "--instant", &sp]);
    let upd = crate::create_write::file(dir.path(), "u.csv", "id,city,fare,n\na,sf,5.5,4\n");
    ok(&["write", s(&table), s(&upd), "--op", "upsert"]);
    let base = times(&table).last().unwrap().clone();
    ok(&["branch", "create", s(&table), "audit"]);
    let line = fails(&["restore", s(&table), "--to", &sp]);
    assert!(line.contains("branch audit"), "{line}");
    assert!(line.contains(&format!("base instant {base}")), "{line}");
    assert!(line.contains("drop"), "{line}");
    ok(&["branch", "drop", s(&table), "audit"]);
    ok(&["restore", s(&table), "--to", &sp]);
}

#[test]
fn test_branch_list_names_both_times_and_incremental_takes_either() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let base = crate::create_write::instants(&table)
        .last()
        .unwrap()
        .clone();
    let base_requested = base["timestamp"].as_str().unwrap().to_string();
    let base_completed = base["completion_time"].as_str().unwrap().to_string();
    assert_ne!(base_requested, base_completed);
    ok(&["branch", "create", s(&table), "audit"]);
    let upd = crate::create_write::file(dir.path(), "u.csv", "id,city,fare,n\na,sf,5.5,4\n");
    ok(&[
        "write",
        s(&table),
        s(&upd),
        "--op",
        "upsert",
        "--branch",
        "audit",
    ]);
    // Wide enough for every column whole.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(["branch", "list", s(&table)])
        .env("ARBOR_LOG", "off")
        .env("COLUMNS", "400")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "BASE (REQUESTED)",
        "BASE COMPLETED",
        "HEAD (REQUESTED)",
        "HEAD COMPLETED",
        &base_requested,
        &base_completed,
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["branch", "list", s(&table), "--json"])).unwrap();
    assert_eq!(json[0]["base_instant"], base_requested.as_str());
    assert_eq!(json[0]["base_completion_time"], base_completed.as_str());
    assert!(json[0]["head_completion_time"].is_string(), "{json}");
    // The branch's own changes: the same single row with either time of the base.
    for bound in [&base_requested, &base_completed] {
        let rows =
            crate::create_write::read_jsonl(&table, &["--branch", "audit", "--incremental", bound]);
        assert_eq!(rows.len(), 1, "--incremental {bound}: {rows:?}");
        assert_eq!(rows[0]["id"], "a");
    }
}

/// The parquet files under `dir` (recursively).
fn parquet_files(dir: &std::path::Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .map(|e| e.unwrap().path())
        .map(|p| {
            if p.is_dir() {
                parquet_files(&p)
            } else {
                usize::from(p.extension().is_some_and(|x| x == "parquet"))
            }
        })
        .sum()
}

#[test]
fn test_ttl_says_what_the_clean_needs_and_the_clean_does_that() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let t = s(&table);
    ok(&["ttl", "set", t, "--policy", "count", "--retain", "1"]);
    let text = ok(&["ttl", "run", t]);
    assert!(text.contains("nyc"), "{text}");
    assert!(text.contains("10 latest writes"), "{text}");
    assert!(
        text.contains("once 9 more write(s) have completed"),
        "{text}"
    );
    assert!(text.contains("--retain 1` deletes them now"), "{text}");
    let nyc = table.join("nyc");
    assert_eq!(parquet_files(&nyc), 1);
    // As the message says: the default clean keeps them for 9 more writes ...
    let upd = crate::create_write::file(dir.path(), "u.csv", "id,city,fare,n\na,sf,5.5,4\n");
    for _ in 0..8 {
        ok(&["write", t, s(&upd), "--op", "upsert"]);
    }
    ok(&["clean", t]);
    assert_eq!(parquet_files(&nyc), 1);
    // ... and deletes them after the 9th.
    ok(&["write", t, s(&upd), "--op", "upsert"]);
    ok(&["clean", t]);
    assert_eq!(parquet_files(&nyc), 0);
}

#[test]
fn test_sql_never_creates_a_mistyped_path() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("trpis").join("t");
    let line = fails(&[
        "sql",
        "SELECT count(*) FROM t",
        "--table",
        &format!("t={}", s(&typo)),
    ]);
    assert!(line.contains(s(&typo)), "{line}");
    assert!(line.contains("no such directory"), "{line}");
    assert!(!dir.path().join("trpis").exists());
}

#[test]
fn test_sql_reads_every_version_6_fixture_as_read_does_and_refuses_insert() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("sql on version 6 fixtures") else {
        return;
    };
    let mut checked = 0;
    for zip in arbor_testkit::fixture_zips(&root) {
        let name = arbor_testkit::fixture_name(&root, &zip);
        let (_tmp, base) = arbor_testkit::unzip_table(&zip);
        let props = fs::read_to_string(base.join(".hoodie/hoodie.properties")).unwrap();
        if !props.contains("hoodie.table.version=6") {
            continue;
        }
        let rows = crate::create_write::read_jsonl(&base, &[]).len();
        let spec = format!("t={}", s(&base));
        let out = ok(&[
            "sql",
            "SELECT count(*) AS n FROM t",
            "--table",
            &spec,
            "--format",
            "jsonl",
        ]);
        let got: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(got["n"].as_u64(), Some(rows as u64), "{name}: {out}");
        if rows > 0 {
            let line = fails(&[
                "sql",
                "INSERT INTO t SELECT * FROM t LIMIT 1",
                "--table",
                &spec,
            ]);
            assert!(line.contains("table version 6"), "{name}: {line}");
            assert!(line.contains("arbor upgrade"), "{name}: {line}");
        }
        checked += 1;
    }
    assert_eq!(checked, 8, "the 8 version 6 fixtures");
}

#[test]
fn test_csv_writes_nested_values_as_json_text_in_their_cells() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("CSV of nested columns") else {
        return;
    };
    let zip = arbor_testkit::fixture_zips(&root)
        .into_iter()
        .find(|z| arbor_testkit::fixture_name(&root, z).ends_with("cow/v6_nonpartitioned"))
        .unwrap();
    let (_tmp, base) = arbor_testkit::unzip_table(&zip);
    let order = ["--columns", "id,arrayField,mapField,structField,name"];
    let jsonl = crate::create_write::read_jsonl(&base, &order);
    assert!(jsonl[0]["structField"].is_object(), "{}", jsonl[0]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.csv");
    let mut args = vec!["read", s(&base), "--format", "csv", "--output", s(&out)];
    args.extend_from_slice(&order);
    ok(&args);
    let mut args = vec!["read", s(&base), "--format", "csv"];
    args.extend_from_slice(&order);
    let text = ok(&args);
    assert_eq!(fs::read_to_string(&out).unwrap(), text);
    let mut reader = arrow_csv_rows(&text);
    let header = reader.remove(0);
    assert_eq!(
        header,
        ["id", "arrayField", "mapField", "structField", "name"]
    );
    assert_eq!(reader.len(), jsonl.len());
    for (row, expected) in reader.iter().zip(&jsonl) {
        for (i, col) in header.iter().enumerate().skip(1).take(3) {
            let cell: serde_json::Value = serde_json::from_str(&row[i]).unwrap();
            assert_eq!(&cell, &expected[col.as_str()], "{col}");
        }
    }
}

/// The cells of CSV `text` (RFC 4180 quoting), header first.
fn arrow_csv_rows(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => row.push(std::mem::take(&mut cell)),
            ('\n', false) => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (c, _) => cell.push(c),
        }
    }
    rows
}

#[test]
fn test_write_drop_columns_removes_a_stray_column_for_good() {
    for kind in ["cow", "mor"] {
        let dir = tempfile::tempdir().unwrap();
        let table = trips_table(dir.path(), kind);
        let t = s(&table);
        let stray = crate::create_write::file(
            dir.path(),
            "stray.csv",
            "id,city,fare,n,stray\nb,sf,9.5,5,x\n",
        );
        ok(&["write", t, s(&stray), "--op", "upsert"]);
        let rows = crate::create_write::read_jsonl(&table, &[]);
        assert!(rows.iter().any(|r| r["stray"] == "x"), "{kind}: {rows:?}");
        // Key, partition and ordering columns, and unknown names, are refused.
        let upd = crate::create_write::file(dir.path(), "u.csv", "id,city,fare,n\nc,nyc,7.5,6\n");
        for col in ["id", "city", "n", "nope"] {
            let line = fails(&["write", t, s(&upd), "--op", "upsert", "--drop-columns", col]);
            assert!(line.contains(col), "{kind}: {line}");
        }
        let text = ok(&[
            "write",
            t,
            s(&upd),
            "--op",
            "upsert",
            "--drop-columns",
            "stray",
        ]);
        assert!(text.contains("dropped column \"stray\""), "{kind}: {text}");
        let rows = crate::create_write::read_jsonl(&table, &[]);
        assert_eq!(rows.len(), 3, "{kind}");
        assert!(
            rows.iter().all(|r| r.get("stray").is_none()),
            "{kind}: {rows:?}"
        );
        // The file written with the column still reads (b's row), and later writes and a
        // compaction keep it out.
        assert!(rows.iter().any(|r| r["id"] == "b" && r["fare"] == 9.5));
        let again = crate::create_write::file(dir.path(), "a.csv", "id,city,fare,n\nb,sf,1.0,7\n");
        ok(&["write", t, s(&again), "--op", "upsert"]);
        if kind == "mor" {
            ok(&["compact", t]);
        }
        let rows = crate::create_write::read_jsonl(&table, &[]);
        assert!(rows.iter().all(|r| r.get("stray").is_none()), "{kind}");
        assert!(rows.iter().any(|r| r["id"] == "b" && r["fare"] == 1.0));
        ok(&["validate", t]);
    }
    // A write that would create the table has nothing to drop.
    let dir = tempfile::tempdir().unwrap();
    let input = crate::create_write::file(dir.path(), "t.csv", "id,x\na,1\n");
    let line = fails(&[
        "write",
        s(&dir.path().join("new")),
        s(&input),
        "--type",
        "cow",
        "--key",
        "id",
        "--drop-columns",
        "x",
    ]);
    assert!(line.contains("--drop-columns"), "{line}");
    assert!(!dir.path().join("new").exists());
}
