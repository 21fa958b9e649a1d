//! `arbor index create|lookup|list` and `arbor validate` over the indexes.

use std::fs;

use serde_json::Value;

use super::create_write::{fails, file, ok, s, trips_table};

#[test]
fn test_index_create_secondary_then_lookup_list_and_validate() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let out = ok(&[
        "index",
        "create",
        s(&table),
        "--secondary",
        "city",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["index"], "secondary_index_city");
    assert_eq!(v["entries"], 3);
    ok(&["index", "create", s(&table), "--record-index"]);

    let found: Value = serde_json::from_str(&ok(&[
        "index",
        "lookup",
        s(&table),
        "--index",
        "city",
        "sf",
        "--json",
    ]))
    .unwrap();
    let keys: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["a", "b"]);
    assert_eq!(found[0]["partition"], "sf");

    // An upsert adding d in nyc: the index follows the write.
    let input = file(dir.path(), "up.csv", "id,city,fare,n\nd,nyc,9.5,4\n");
    ok(&["write", s(&table), s(&input), "--op", "upsert"]);
    let text = ok(&["index", "lookup", s(&table), "--index", "city", "nyc"]);
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.contains("d\tnyc/"), "{text}");

    let list = ok(&["index", "list", s(&table)]);
    assert!(
        list.contains("secondary_index_city\tsecondary_index\tcity"),
        "{list}"
    );
    assert!(list.contains("record_index"), "{list}");
    let v: Value = serde_json::from_str(&ok(&["validate", s(&table), "--json"])).unwrap();
    assert_eq!(v["differences"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["indexes"].as_array().unwrap().len(), 2, "{v}");

    // Errors: unknown column, duplicate, unknown index, nothing to create.
    let e = fails(&["index", "create", s(&table), "--secondary", "nope"]);
    assert!(e.contains("nope"), "{e}");
    fails(&["index", "create", s(&table), "--secondary", "city"]);
    let e = fails(&["index", "lookup", s(&table), "--index", "zzz", "x"]);
    assert!(e.contains("secondary_index_zzz"), "{e}");
    fails(&["index", "create", s(&table)]);

    // A planted discrepancy: drop the index's largest base file; validate exits 1.
    let si = table.join(".hoodie/metadata/secondary_index_city");
    let victim = fs::read_dir(&si)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "hfile"))
        .max_by_key(|p| fs::metadata(p).unwrap().len())
        .unwrap();
    fs::remove_file(victim).unwrap();
    let out = super::create_write::arbor(&["validate", s(&table)]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("secondary_index_city: value"), "{stdout}");
}

/// `arbor index create --column-stats --partition-stats` on an existing table: later writes
/// keep them in step (validate finds nothing); a removed partition-stats base file is
/// reported and validate exits 1.
#[test]
fn test_index_create_column_and_partition_stats_then_validate() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "mor");
    let v: Value = serde_json::from_str(&ok(&[
        "index",
        "create",
        s(&table),
        "--column-stats",
        "--partition-stats",
        "--json",
    ]))
    .unwrap();
    assert_eq!(v["index"], "column_stats,partition_stats");
    assert!(v["entries"].as_u64().unwrap() > 0, "{v}");
    fails(&["index", "create", s(&table), "--column-stats"]);
    let input = file(dir.path(), "up.csv", "id,city,fare,n\nd,nyc,9.5,4\n");
    ok(&["write", s(&table), s(&input), "--op", "upsert"]);
    let list = ok(&["index", "list", s(&table)]);
    assert!(
        list.contains("column_stats\tcolumn_stats\t_hoodie_commit_time"),
        "{list}"
    );
    assert!(list.contains("partition_stats\tpartition_stats"), "{list}");
    let v: Value = serde_json::from_str(&ok(&["validate", s(&table), "--json"])).unwrap();
    assert_eq!(v["differences"].as_array().unwrap().len(), 0, "{v}");
    let ps = table.join(".hoodie/metadata/partition_stats");
    for e in fs::read_dir(&ps).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "hfile") {
            fs::remove_file(p).unwrap();
        }
    }
    // The log the upsert wrote still covers nyc; sf loses its stats.
    let out = super::create_write::arbor(&["validate", s(&table)]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("partition_stats"), "{text}");
}
