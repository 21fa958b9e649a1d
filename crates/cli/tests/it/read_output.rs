//! `arbor read` output: the table format fits the terminal (fixed `COLUMNS`), `--wide`, named
//! time zones in every format, jsonl nulls, ISO `--as-of`, and `--as-of` before the first commit
//! or in the future.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{Field, Schema};

use crate::create_write::{fails, file, instants, ok, read_jsonl, s};

/// Runs `arbor` with `COLUMNS` set; asserts success; returns stdout.
pub fn ok_cols(columns: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(args)
        .env("ARBOR_LOG", "off")
        .env("COLUMNS", columns)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "arbor {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Writes `columns` as a parquet file `name` in `dir`.
pub fn parquet_file(dir: &Path, name: &str, columns: Vec<(&str, ArrayRef)>) -> PathBuf {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(
        schema.clone(),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    let path = dir.join(name);
    let mut w =
        parquet::arrow::ArrowWriter::try_new(fs::File::create(&path).unwrap(), schema, None)
            .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    path
}

fn chars(line: &str) -> usize {
    line.chars().count()
}

#[test]
fn test_read_table_fits_100_columns_terminal_and_wide_prints_all() {
    let dir = tempfile::tempdir().unwrap();
    let mut header: Vec<String> = vec!["id".into()];
    header.extend((1..30).map(|i| format!("attribute_{i:02}")));
    let mut text = header.join(",");
    text.push('\n');
    let big = "y".repeat(100_000);
    for r in 0..3 {
        let mut row = vec![format!("k{r}")];
        row.extend((1..30).map(|i| {
            if i == 2 && r == 0 {
                big.clone()
            } else {
                format!("value-{r}-{i}")
            }
        }));
        text.push_str(&row.join(","));
        text.push('\n');
    }
    let input = file(dir.path(), "wide.csv", &text);
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

    let out = ok_cols("100", &["read", s(&table)]);
    let lines: Vec<&str> = out.lines().collect();
    let (footer, body) = lines.split_last().unwrap();
    for l in body {
        assert!(chars(l) <= 100, "line of {} chars: {l}", chars(l));
    }
    assert_eq!(body.len(), 7, "top, header, rule, 3 rows, bottom: {out}");
    // Readable: whole headers and whole short values, not one letter per line.
    assert!(
        body[1].contains("id") && body[1].contains("attribute_01"),
        "{out}"
    );
    assert!(body[3].contains("value-0-1"), "{out}");
    assert!(out.len() < 5_000, "the 100 KB value is not printed whole");
    assert!(footer.starts_with("3 rows; "), "{footer}");
    assert!(
        footer.contains("of 30 columns shown, not shown: "),
        "{footer}"
    );
    assert!(footer.contains("attribute_29"), "{footer}");
    assert!(footer.contains("long values cut"), "{footer}");
    assert!(footer.contains("--wide"), "{footer}");

    // A narrow terminal still keeps one line per row.
    let out = ok_cols("40", &["read", s(&table)]);
    assert!(out.lines().rev().skip(1).all(|l| chars(l) <= 40), "{out}");

    let wide = ok_cols("100", &["read", s(&table), "--wide"]);
    assert!(
        wide.contains(&big),
        "--wide prints the value whole: {} chars, longest line {}",
        wide.len(),
        wide.lines().map(chars).max().unwrap_or(0)
    );
    assert!(wide.contains("attribute_29"), "--wide prints every column");
    assert!(
        wide.lines().last().unwrap() == "3 rows",
        "{}",
        wide.lines().last().unwrap()
    );
}

fn tz_table(dir: &Path) -> PathBuf {
    let micros = [Some(1_705_314_600_000_000i64), None];
    let input = parquet_file(
        dir,
        "tz.parquet",
        vec![
            (
                "id",
                Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef,
            ),
            ("n", Arc::new(Int64Array::from(vec![Some(1), None]))),
            (
                "at_utc",
                Arc::new(TimestampMicrosecondArray::from(micros.to_vec()).with_timezone("UTC")),
            ),
            (
                "at_ny",
                Arc::new(
                    TimestampMicrosecondArray::from(micros.to_vec())
                        .with_timezone("America/New_York"),
                ),
            ),
        ],
    );
    let table = dir.join("t");
    ok(&[
        "write",
        s(&table),
        s(&input),
        "--type",
        "cow",
        "--key",
        "id",
    ]);
    table
}

#[test]
fn test_read_named_time_zones_print_in_every_format_and_jsonl_keeps_nulls() {
    let dir = tempfile::tempdir().unwrap();
    let table = tz_table(dir.path());
    let rows = read_jsonl(&table, &[]);
    assert_eq!(rows.len(), 2);
    let b = rows.iter().find(|r| r["id"] == "b").unwrap();
    let mut keys: Vec<&String> = b.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["at_ny", "at_utc", "id", "n"],
        "nulls are explicit: {b}"
    );
    assert!(
        b["n"].is_null() && b["at_utc"].is_null() && b["at_ny"].is_null(),
        "{b}"
    );
    let a = rows.iter().find(|r| r["id"] == "a").unwrap();
    let utc = a["at_utc"].as_str().unwrap();
    let ny = a["at_ny"].as_str().unwrap();
    assert!(utc.starts_with("2024-01-15T10:30:00"), "{utc}");
    // Whatever zone the write kept, the value prints (no chrono-tz error).
    assert!(ny.starts_with("2024-01-15T"), "{ny}");

    let csv = ok(&["read", s(&table), "--format", "csv"]);
    assert!(csv.contains("2024-01-15T10:30:00"), "{csv}");
    let text = ok_cols("120", &["read", s(&table)]);
    assert!(text.contains("2024-01-15T10:30:00"), "{text}");
    assert!(text.contains("null"), "{text}");
}

#[test]
fn test_read_as_of_iso_times_and_before_first_commit_or_future_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let table = crate::create_write::trips_table(dir.path(), "cow");
    let changes = file(dir.path(), "changes.csv", "id,city,fare,n\na,sf,10.0,5\n");
    ok(&["write", s(&table), s(&changes)]);
    let list = instants(&table);
    let first = list[0]["timestamp"].as_str().unwrap().to_string();
    let second = list[1]["timestamp"].as_str().unwrap().to_string();
    // The first instant as ISO (arbor's timeline is UTC): the old fare.
    let iso = |t: &str, sep: char| {
        format!(
            "{}-{}-{}{sep}{}:{}:{}.{}",
            &t[0..4],
            &t[4..6],
            &t[6..8],
            &t[8..10],
            &t[10..12],
            &t[12..14],
            &t[14..17]
        )
    };
    let fare_a = |extra: &[&str]| {
        read_jsonl(&table, extra)
            .into_iter()
            .find(|r| r["id"] == "a")
            .unwrap()["fare"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(fare_a(&["--as-of", &iso(&first, 'T')]), 1.5);
    assert_eq!(fare_a(&["--as-of", &iso(&first, ' ')]), 1.5);
    assert_eq!(fare_a(&["--as-of", &format!("{}Z", iso(&first, 'T'))]), 1.5);
    assert_eq!(fare_a(&["--as-of", &iso(&second, 'T')]), 10.0);
    // With an offset: the same moment two hours ahead on the clock.
    let t = chrono::NaiveDateTime::parse_from_str(&first, "%Y%m%d%H%M%S%3f").unwrap()
        + chrono::Duration::hours(2);
    let plus2 = t.format("%Y-%m-%dT%H:%M:%S%.3f+02:00").to_string();
    assert_eq!(fare_a(&["--as-of", &plus2]), 1.5);
    // A date: its midnight, before the table existed (unless the test runs at midnight).
    let day = format!("{}-{}-{}", &first[0..4], &first[4..6], &first[6..8]);
    if &first[8..] != "000000000" {
        let err = fails(&["read", s(&table), "--as-of", &day]);
        assert!(err.contains("before the table's first commit"), "{err}");
        assert!(err.contains(&first), "{err}");
    }
    let err = fails(&["read", s(&table), "--as-of", "2000-01-01"]);
    assert!(err.contains("before the table's first commit"), "{err}");
    let err = fails(&["read", s(&table), "--as-of", "20000101000000000"]);
    assert!(err.contains("before the table's first commit"), "{err}");
    let err = fails(&["read", s(&table), "--as-of", "2026-13-45"]);
    assert!(err.contains("ISO"), "{err}");
    // In the future: an error naming the time asked, the current time and the latest commit.
    for future in ["9999-01-01", "99990101000000000"] {
        let err = fails(&["read", s(&table), "--as-of", future]);
        assert!(err.contains("--as-of") && err.contains(future), "{err}");
        assert!(err.contains("99990101000000000"), "{err}");
        assert!(
            err.contains("in the future") && err.contains("it is now"),
            "{err}"
        );
        assert!(err.contains(&second), "{err}");
    }
    // The latest commit, and now, read the latest state.
    assert_eq!(fare_a(&["--as-of", &second]), 10.0);
    let now = chrono::Utc::now().format("%Y%m%d%H%M%S%3f").to_string();
    assert_eq!(fare_a(&["--as-of", &now]), 10.0);
    // `arbor files --as-of` takes the same forms.
    let files: serde_json::Value = serde_json::from_str(&ok(&[
        "files",
        s(&table),
        "--as-of",
        &iso(&first, 'T'),
        "--json",
    ]))
    .unwrap();
    assert_eq!(files.as_array().unwrap().len(), 2, "{files}");
}

/// The other human tables (files, timeline) fit `COLUMNS` too: cells wrap inside their column
/// instead of a line running past the terminal.
#[test]
fn test_files_and_timeline_tables_fit_columns() {
    let dir = tempfile::tempdir().unwrap();
    let table = crate::create_write::trips_table(dir.path(), "cow");
    for cmd in ["files", "timeline"] {
        let wide = ok_cols("400", &[cmd, s(&table)]);
        let widest = wide.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(
            widest > 60,
            "{cmd}: the test needs a table wider than 60: {wide}"
        );
        let narrow = ok_cols("60", &[cmd, s(&table)]);
        for line in narrow
            .lines()
            .filter(|l| l.starts_with(['│', '┌', '└', '╞']))
        {
            assert!(
                line.chars().count() <= 60,
                "{cmd}: {line:?} is wider than 60"
            );
        }
    }
}
