//! `arbor cluster`: a dry run writes nothing; clustering a Spark fixture (merge-on-read,
//! record index, decimals, timestamps, nested and null columns) keeps every row and value and
//! validates; later writes land; bad flags, unknown columns and partitions are refused with
//! the table unchanged; pending plans are listed and rolled back.

use serde_json::Value;

use crate::create_write::{fails, file, ok, read_jsonl, s, trips_table};
use crate::merge_diff::{table_tree, txn_row, validate};

fn sorted_rows(rows: Vec<Value>) -> Vec<String> {
    let mut out: Vec<String> = rows
        .into_iter()
        .map(|mut r| {
            if let Some(m) = r.as_object_mut() {
                m.remove("_hoodie_file_name");
            }
            r.to_string()
        })
        .collect();
    out.sort();
    out
}

#[test]
fn test_cluster_a_spark_fixture_keeps_every_value_and_takes_writes() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("clustering a Spark fixture") else {
        return;
    };
    let zip = root.join("sample_table/mor/avro/v9_txns_complex_meta.zip");
    let (tmp, table) = arbor_testkit::unzip_table(&zip);
    let before = sorted_rows(read_jsonl(&table, &["--meta"]));
    let tree = table_tree(&table);

    let dry = ok(&["cluster", s(&table), "--sort-by", "amount", "--dry-run"]);
    assert!(
        dry.contains("would cluster") && dry.contains("dry run"),
        "{dry}"
    );
    assert!(table_tree(&table) == tree, "a dry run writes nothing");

    for (args, needle) in [
        (vec!["--sort-by", "nope"], "\"nope\""),
        (vec!["--layout", "spiral"], "spiral"),
        (
            vec!["--sort-by", "amount", "--target-file-size", "lots"],
            "--target-file-size",
        ),
        (
            vec!["--partition", "region=mars", "--sort-by", "amount"],
            "region=mars",
        ),
        (vec!["--layout", "z-order"], "--sort-by"),
    ] {
        let mut a = vec!["cluster", s(&table)];
        a.extend(args);
        let err = fails(&a);
        assert!(err.contains(needle), "{needle}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(table_tree(&table) == tree, "{needle}: the table changed");
    }

    let out: Value = serde_json::from_str(&ok(&[
        "cluster",
        s(&table),
        "--sort-by",
        "txn_ts,amount",
        "--layout",
        "hilbert",
        "--json",
    ]))
    .unwrap();
    let instant = out["instant"].as_str().unwrap().to_string();
    assert_eq!(out["layout"], "hilbert", "{out}");
    assert!(!out["groups"].as_array().unwrap().is_empty(), "{out}");
    assert_eq!(sorted_rows(read_jsonl(&table, &["--meta"])), before);
    validate(&table);
    let timeline = ok(&["timeline", s(&table)]);
    assert!(
        timeline.contains(&instant) && timeline.contains("replacecommit"),
        "{timeline}"
    );

    // A later upsert finds its record in the clustered file group (record index re-pointed).
    let n = read_jsonl(&table, &[]).len();
    let up = file(
        tmp.path(),
        "up.jsonl",
        &txn_row(1700300000200, "12.34", "TXN-007", "apac"),
    );
    ok(&["write", s(&table), s(&up)]);
    let rows = read_jsonl(&table, &[]);
    assert_eq!(rows.len(), n);
    let t7 = rows.iter().find(|r| r["txn_id"] == "TXN-007").unwrap();
    assert_eq!(t7["amount"].as_f64(), Some(12.34), "{t7}");
    validate(&table);
}

#[test]
fn test_cluster_packs_small_files_then_has_nothing_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    for (i, rows) in ["x1,sf,1.5,1\nx2,nyc,2.5,1\n", "x3,sf,3.5,1\nx4,nyc,4.5,1\n"]
        .iter()
        .enumerate()
    {
        let f = file(
            dir.path(),
            &format!("more{i}.csv"),
            &format!("id,city,fare,n\n{rows}"),
        );
        ok(&["write", s(&table), s(&f), "--op", "bulk-insert"]);
    }
    let before = sorted_rows(read_jsonl(&table, &["--meta"]));
    let out = ok(&["cluster", s(&table)]);
    assert!(
        out.contains("clustered") && out.contains("FILE GROUPS IN"),
        "{out}"
    );
    assert_eq!(sorted_rows(read_jsonl(&table, &["--meta"])), before);
    let again = ok(&["cluster", s(&table)]);
    assert!(again.contains("nothing to cluster"), "{again}");
    let pending = ok(&["cluster", s(&table), "--rollback-pending"]);
    assert!(
        pending.contains("no clustering plan is pending"),
        "{pending}"
    );
    let pending = ok(&["cluster", s(&table), "--pending"]);
    assert!(
        pending.contains("no clustering plan is pending"),
        "{pending}"
    );
    validate(&table);
}
