//! `arbor read --where` on every partition layout: multi-level plain and hive-style paths,
//! values holding `/` with and without URL encoding, date and timestamp partition columns, and
//! Spark's timestamp-based key generator (fixture); the predicate grammar (quoted values, `==`,
//! `IN (...)`, struct columns and nested fields by dot path, malformed predicates).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, Date32Array, StringArray, TimestampMicrosecondArray};

use crate::create_write::{fails, file, ok, read_jsonl, s, trips_table};
use crate::read_output::parquet_file;

/// The sorted ids `arbor read --where ...` returns.
fn ids_where(table: &Path, filters: &[&str]) -> Vec<String> {
    let mut args: Vec<&str> = Vec::new();
    for f in filters {
        args.push("--where");
        args.push(f);
    }
    let mut ids: Vec<String> = read_jsonl(table, &args)
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

const ROWS: &str = "id,region,city,n\n\
    a,us,sf,1\n\
    b,us,nyc,2\n\
    c,eu,paris,3\n\
    d,eu,a/b,4\n\
    e,us,a/b,5\n";

/// A table partitioned by (region, city) holding [`ROWS`]; `urlencode` sets
/// `hoodie.datasource.write.partitionpath.urlencode` before the first write.
fn two_level(dir: &Path, hive: bool, urlencode: bool) -> PathBuf {
    let input = file(dir, "rows.csv", ROWS);
    let table = dir.join("t");
    let mut args = vec![
        "create",
        s(&table),
        "--type",
        "cow",
        "--key",
        "id",
        "--partition-by",
        "region,city",
        "--schema-from",
        s(&input),
    ];
    if hive {
        args.push("--hive-style");
    }
    ok(&args);
    if urlencode {
        let props = table.join(".hoodie/hoodie.properties");
        let mut text = fs::read_to_string(&props).unwrap();
        text.push_str("hoodie.datasource.write.partitionpath.urlencode=true\n");
        fs::write(&props, text).unwrap();
    }
    ok(&["write", s(&table), s(&input)]);
    table
}

fn partitions(table: &Path) -> Vec<String> {
    let files: serde_json::Value =
        serde_json::from_str(&ok(&["files", s(table), "--json"])).unwrap();
    let mut p: Vec<String> = files
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["partition"].as_str().unwrap().to_string())
        .collect();
    p.sort();
    p.dedup();
    p
}

/// The same filters answer the same on every two-level layout.
fn check_two_level(table: &Path) {
    assert_eq!(ids_where(table, &["city=sf"]), ["a"]);
    assert_eq!(ids_where(table, &["region=eu"]), ["c", "d"]);
    assert_eq!(ids_where(table, &["city=a/b"]), ["d", "e"]);
    assert_eq!(ids_where(table, &["city=a/b", "region=us"]), ["e"]);
    assert_eq!(ids_where(table, &["city!=a/b", "region=us"]), ["a", "b"]);
    assert_eq!(ids_where(table, &["city IN sf,paris"]), ["a", "c"]);
    assert_eq!(ids_where(table, &["city=a"]), Vec::<String>::new());
    // The filtered column need not be output.
    let rows = read_jsonl(table, &["--where", "city=a/b", "--columns", "id"]);
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter().all(|r| r.as_object().unwrap().len() == 1),
        "{rows:?}"
    );
}

#[test]
fn test_read_where_two_level_plain_with_slash_values() {
    let dir = tempfile::tempdir().unwrap();
    let table = two_level(dir.path(), false, false);
    assert!(
        partitions(&table).contains(&"us/a/b".to_string()),
        "{:?}",
        partitions(&table)
    );
    check_two_level(&table);
}

#[test]
fn test_read_where_two_level_hive_style_with_slash_values_not_url_encoded() {
    let dir = tempfile::tempdir().unwrap();
    let table = two_level(dir.path(), true, false);
    assert!(
        partitions(&table).contains(&"region=us/city=a/b".to_string()),
        "{:?}",
        partitions(&table)
    );
    check_two_level(&table);
    // Pruning by the path alone (the pseudo column) still sees the raw path.
    let rows = read_jsonl(
        &table,
        &["--where", "_hoodie_partition_path=region=eu/city=a/b"],
    );
    assert_eq!(rows.len(), 1);
}

#[test]
fn test_read_where_two_level_hive_style_url_encoded() {
    let dir = tempfile::tempdir().unwrap();
    let table = two_level(dir.path(), true, true);
    assert!(
        partitions(&table).contains(&"region=us/city=a%2Fb".to_string()),
        "{:?}",
        partitions(&table)
    );
    check_two_level(&table);
}

#[test]
fn test_read_where_two_level_plain_url_encoded() {
    let dir = tempfile::tempdir().unwrap();
    let table = two_level(dir.path(), false, true);
    assert!(partitions(&table).contains(&"us/a%2Fb".to_string()));
    check_two_level(&table);
}

#[test]
fn test_read_where_date_and_timestamp_partition_columns() {
    let dir = tempfile::tempdir().unwrap();
    // 2024-01-01, 2024-01-02, 2024-01-03 and 10:30 UTC on each.
    let days = [19723, 19724, 19725];
    let micros: Vec<i64> = days
        .iter()
        .map(|d| i64::from(*d) * 86_400_000_000 + 37_800_000_000)
        .collect();
    let input = parquet_file(
        dir.path(),
        "typed.parquet",
        vec![
            (
                "id",
                Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef,
            ),
            ("day", Arc::new(Date32Array::from(days.to_vec()))),
            (
                "at",
                Arc::new(TimestampMicrosecondArray::from(micros).with_timezone("UTC")),
            ),
        ],
    );
    for (field, hive) in [("day", false), ("day", true), ("at", false), ("at", true)] {
        let table = dir.path().join(format!("t_{field}_{hive}"));
        let mut args = vec![
            "write",
            s(&table),
            s(&input),
            "--type",
            "cow",
            "--key",
            "id",
            "--partition-by",
            field,
        ];
        if hive {
            args.push("--hive-style");
        }
        ok(&args);
        let (eq, ge, lt) = match field {
            "day" => ("day=2024-01-02", "day>=2024-01-02", "day<2024-01-02"),
            _ => (
                "at=2024-01-02T10:30:00Z",
                "at>=2024-01-02 10:30:00",
                "at<2024-01-02T11:30:00+01:00",
            ),
        };
        assert_eq!(ids_where(&table, &[eq]), ["b"], "{field} hive={hive}");
        assert_eq!(ids_where(&table, &[ge]), ["b", "c"], "{field} hive={hive}");
        assert_eq!(ids_where(&table, &[lt]), ["a"], "{field} hive={hive}");
        // The table format filters the same way.
        let text = ok(&["read", s(&table), "--where", eq]);
        assert!(text.contains("1 rows"), "{text}");
    }
}

#[test]
fn test_read_where_fixture_timestamp_based_key_generator() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("--where on timestamp-based keygen")
    else {
        return;
    };
    let zip = root.join("sample_table/cow/v9_timebasedkeygen_nonhivestyle.zip");
    let (_tmp, table) = arbor_testkit::unzip_table(&zip);
    let rows = read_jsonl(&table, &["--where", "ts_str=2024-01-15T10:30:00.000Z"]);
    assert!(!rows.is_empty());
    assert!(rows
        .iter()
        .all(|r| r["ts_str"] == "2024-01-15T10:30:00.000Z"));
    let all = read_jsonl(&table, &[]);
    let want = all
        .iter()
        .filter(|r| r["ts_str"] == "2024-01-15T10:30:00.000Z")
        .count();
    assert_eq!(rows.len(), want);
}

/// SQL-style quotes, `==`, `<>` and `IN (...)` with quoted values.
#[test]
fn test_read_where_sql_quoting_and_operators() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    assert_eq!(ids_where(&table, &["city='sf'"]), ["a", "b"]);
    assert_eq!(ids_where(&table, &["city = 'sf'"]), ["a", "b"]);
    assert_eq!(ids_where(&table, &["city = \"sf\""]), ["a", "b"]);
    assert_eq!(ids_where(&table, &["city == sf"]), ["a", "b"]);
    assert_eq!(ids_where(&table, &["city==sf"]), ["a", "b"]);
    assert_eq!(ids_where(&table, &["city <> 'sf'"]), ["c"]);
    assert_eq!(ids_where(&table, &["id IN ('a','b')"]), ["a", "b"]);
    assert_eq!(ids_where(&table, &["id in ( 'a' , 'c' )"]), ["a", "c"]);
    assert_eq!(ids_where(&table, &["id NOT IN ('a')"]), ["b", "c"]);
    assert_eq!(ids_where(&table, &["fare > '2'", "n <= 2"]), ["b"]);
    assert_eq!(ids_where(&table, &["`fare` >= 3.5"]), ["c"]);
}

/// A table with a struct column `rider` (a null rider for `b`, a null rating for `e`).
fn riders_table(dir: &Path, kind: &str) -> PathBuf {
    let input = file(
        dir,
        "riders.jsonl",
        "{\"id\":\"a\",\"city\":\"sf\",\"rider\":{\"name\":\"ann\",\"rating\":4.5}}\n\
         {\"id\":\"b\",\"city\":\"sf\",\"rider\":null}\n\
         {\"id\":\"c\",\"city\":\"nyc\",\"rider\":{\"name\":\"cy\",\"rating\":3.0}}\n\
         {\"id\":\"d\",\"city\":\"nyc\",\"rider\":{\"name\":\"O'Brien\",\"rating\":4.9}}\n\
         {\"id\":\"e\",\"city\":\"nyc\",\"rider\":{\"name\":\"eve\",\"rating\":null}}\n",
    );
    let table = dir.join(format!("riders_{kind}"));
    ok(&[
        "write",
        s(&table),
        s(&input),
        "--op",
        "insert",
        "--type",
        kind,
        "--key",
        "id",
        "--partition-by",
        "city",
    ]);
    table
}

/// `IS [NOT] NULL` on a struct column and comparisons on its fields by dot path; the struct
/// is read for the filter even when it is not output.
#[test]
fn test_read_where_struct_columns_and_nested_fields() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["cow", "mor"] {
        let table = riders_table(dir.path(), kind);
        assert_eq!(
            ids_where(&table, &["rider IS NOT NULL"]),
            ["a", "c", "d", "e"]
        );
        assert_eq!(ids_where(&table, &["rider is null"]), ["b"]);
        assert_eq!(ids_where(&table, &["rider.rating > 4"]), ["a", "d"]);
        assert_eq!(ids_where(&table, &["rider.rating <= 4.5"]), ["a", "c"]);
        assert_eq!(ids_where(&table, &["rider.name = 'O''Brien'"]), ["d"]);
        assert_eq!(
            ids_where(&table, &["rider.name IN ('ann', 'eve')"]),
            ["a", "e"]
        );
        assert_eq!(
            ids_where(&table, &["rider.rating IS NULL"]),
            ["b", "e"],
            "a null rider has a null rating"
        );
        assert_eq!(
            ids_where(&table, &["rider.rating > 4", "city = nyc"]),
            ["d"],
            "{kind}"
        );
        let rows = read_jsonl(&table, &["--where", "rider.rating > 4", "--columns", "id"]);
        assert_eq!(rows.len(), 2);
        assert!(
            rows.iter().all(|r| r.as_object().unwrap().len() == 1),
            "{rows:?}"
        );
    }
    // Statistics do not prune by nested fields, and the answer stays the same with them.
    let table = dir.path().join("riders_mor");
    ok(&[
        "index",
        "create",
        s(&table),
        "--column-stats",
        "--partition-stats",
    ]);
    assert_eq!(ids_where(&table, &["rider.rating > 4"]), ["a", "d"]);
    assert_eq!(ids_where(&table, &["rider IS NULL"]), ["b"]);
}

/// A malformed predicate fails with exit 1, one line quoting it and naming the position; so
/// does a missing struct field or a value of the wrong type.
#[test]
fn test_read_where_errors_name_the_position_or_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let table = riders_table(dir.path(), "cow");
    let read = |w: &str| fails(&["read", s(&table), "--where", w]);
    for (w, says) in [
        ("city = 'austin", "unterminated quote at character 8"),
        ("city === a", "unknown operator \"===\" "),
        ("city IN ('a' 'b')", "expected ',' or ')' at character 14"),
        ("city IS NULLX", "at character 9"),
        ("rider. = 1", "at character 7"),
        ("city", "at character 5"),
        ("", "empty filter"),
    ] {
        let line = read(w);
        assert!(line.contains(says), "{w:?}: {line}");
        assert!(line.contains("--where"), "{w:?}: {line}");
    }
    let line = read("rider.nope = 1");
    assert!(
        line.contains("struct \"rider\" has no field \"nope\""),
        "{line}"
    );
    let line = read("rider.rating > high");
    assert!(line.contains("\"high\""), "{line}");
    let line = read("nope IS NULL");
    assert!(line.contains("unknown column \"nope\""), "{line}");
    let line = read("rider > 1");
    assert!(
        line.contains("cannot be filtered by a comparison"),
        "{line}"
    );
}
