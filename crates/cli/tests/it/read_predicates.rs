//! `arbor read --where` on any column (typed values, IS [NOT] NULL, repeated filters ANDed),
//! files skipped by a secondary index, `--explain`, usage errors naming column and value, and
//! `IN` lists of thousands of values.

use std::path::{Path, PathBuf};

use crate::create_write::{fails, file, ok, read_jsonl, s};

const ROWS: &str = "id,region,city,n,fare\n\
    a,us,sf,1,1.5\n\
    b,us,nyc,2,\n\
    c,eu,paris,3,3.25\n\
    d,eu,nyc,4,10\n\
    e,us,la,5,7.5\n";

/// A table partitioned by region (not by city) with a secondary index on city and the
/// record index.
fn indexed_table(dir: &Path) -> PathBuf {
    let input = file(dir, "rows.csv", ROWS);
    let table = dir.join("t");
    ok(&[
        "write",
        s(&table),
        s(&input),
        "--op",
        "insert",
        "--type",
        "cow",
        "--key",
        "id",
        "--partition-by",
        "region",
        "--ordering",
        "n",
    ]);
    ok(&["index", "create", s(&table), "--record-index"]);
    ok(&["index", "create", s(&table), "--secondary", "city"]);
    table
}

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

#[test]
fn test_read_where_any_column_typed_and_anded() {
    let dir = tempfile::tempdir().unwrap();
    let table = indexed_table(dir.path());
    assert_eq!(ids_where(&table, &["city=nyc"]), ["b", "d"]);
    assert_eq!(ids_where(&table, &["n>=3"]), ["c", "d", "e"]);
    assert_eq!(ids_where(&table, &["n>=3", "region=us"]), ["e"]);
    assert_eq!(ids_where(&table, &["fare < 5"]), ["a", "c"]);
    assert_eq!(
        ids_where(&table, &["fare != 10"]),
        ["a", "c", "e"],
        "null is not != 10"
    );
    assert_eq!(ids_where(&table, &["fare IS NULL"]), ["b"]);
    assert_eq!(
        ids_where(&table, &["fare is not null", "city IN (nyc, la)"]),
        ["d", "e"]
    );
    // Today's syntax on a partition field is unchanged.
    assert_eq!(ids_where(&table, &["region=eu"]), ["c", "d"]);
}

#[test]
fn test_read_where_secondary_index_skips_files_and_explain_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let table = indexed_table(dir.path());
    let text = ok(&["read", s(&table), "--where", "city=paris", "--explain"]);
    assert!(
        text.contains("partitions: 2 considered, 0 skipped by partition values"),
        "{text}"
    );
    assert!(
        text.contains("file slices: 2 considered, 0 skipped by column stats, 0 skipped by record index, 1 skipped by secondary index, 1 to read"),
        "{text}"
    );
    let text = ok(&["read", s(&table), "--where", "region=us", "--explain"]);
    assert!(text.contains("1 skipped by partition values"), "{text}");
    let text = ok(&["read", s(&table), "--where", "id=c", "--explain"]);
    assert!(text.contains("1 skipped by record index"), "{text}");
    // --explain reads no rows.
    assert!(!text.contains("paris"), "{text}");
}

#[test]
fn test_read_where_bad_column_or_value_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let table = indexed_table(dir.path());
    let line = fails(&["read", s(&table), "--where", "nope=1"]);
    assert!(line.contains("unknown column \"nope\""), "{line}");
    let line = fails(&["read", s(&table), "--where", "n=abc"]);
    assert!(line.contains("\"abc\"") && line.contains("\"n\""), "{line}");
    let line = fails(&["read", s(&table), "--where", "fare>cheap"]);
    assert!(
        line.contains("\"cheap\"") && line.contains("fare"),
        "{line}"
    );
    let line = fails(&["read", s(&table), "--where", "fare"]);
    assert!(
        line.contains("expected an operator") && line.contains("at character 5"),
        "{line}"
    );
}

#[test]
fn test_read_where_fixture_columns_with_stats() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("--where on a fixture with stats") else {
        return;
    };
    let zip = root.join("sample_table/cow/v9_txns_simple_meta.zip");
    let (_tmp, table) = arbor_testkit::unzip_table(&zip);
    let text = ok(&["read", s(&table), "--where", "amount>=1000", "--explain"]);
    assert!(text.contains("1 skipped by partition stats"), "{text}");
    assert!(text.contains("1 skipped by column stats"), "{text}");
    let out = ok(&[
        "read",
        s(&table),
        "--where",
        "amount>=1000",
        "--columns",
        "txn_id,amount",
        "--format",
        "csv",
    ]);
    let all = ok(&[
        "read",
        s(&table),
        "--columns",
        "txn_id,amount",
        "--format",
        "csv",
    ]);
    let want: Vec<&str> = all
        .lines()
        .skip(1)
        .filter(|l| l.rsplit(',').next().unwrap().parse::<f64>().unwrap() >= 1000.0)
        .collect();
    let got: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(got, want);
    assert!(!got.is_empty());
}

/// `--where "FIELD IN (...)"` with thousands of values, most absent: exactly the rows whose
/// value is listed (typed for numbers, exact for strings, nulls never), on a key, an indexed
/// column, a number column and the partition column.
#[test]
fn test_read_where_in_with_thousands_of_values() {
    let dir = tempfile::tempdir().unwrap();
    let table = indexed_table(dir.path());
    let list = |present: &[&str], absent: &dyn Fn(usize) -> String| {
        let mut values: Vec<String> = (0..3000).map(absent).collect();
        values.splice(1500..1500, present.iter().map(|v| v.to_string()));
        values.join(",")
    };
    let ids = list(&["e", "b"], &|i| format!("x{i}"));
    assert_eq!(ids_where(&table, &[&format!("id IN ({ids})")]), ["b", "e"]);
    let cities = list(&["nyc"], &|i| format!("nyc{i}"));
    assert_eq!(
        ids_where(&table, &[&format!("city in ({cities})")]),
        ["b", "d"]
    );
    let ns = list(&["+3", "05"], &|i| (i + 100).to_string());
    assert_eq!(ids_where(&table, &[&format!("n IN {ns}")]), ["c", "e"]);
    // fare is null for b: a null is in no list.
    let fares = list(&["1.5", "10.0"], &|i| format!("{i}.125"));
    assert_eq!(
        ids_where(&table, &[&format!("fare IN ({fares})")]),
        ["a", "d"]
    );
    let regions = list(&["eu"], &|i| format!("r{i}"));
    assert_eq!(
        ids_where(&table, &[&format!("region IN ({regions})")]),
        ["c", "d"]
    );
}
