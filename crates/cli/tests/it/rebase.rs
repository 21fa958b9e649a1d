//! `arbor branch rebase` as a user types it: a diverged branch (copy-on-write and
//! merge-on-read, with and without a record index) rebased onto main and then published by
//! fast-forward; a rebase refused on a conflict (the message names the key and both values)
//! that writes nothing, then settled by a strategy; dry runs; the earlier history kept when a
//! tag would be lost; a table with awkward types (diffed, merged and rebased) read back by
//! hudi-rs; a Spark fixture.

use std::path::Path;

use serde_json::Value;

use crate::clone::{awkward, table_of};
use crate::create_write::{fails, ok, read_jsonl, s};
use crate::merge_diff::{diverged, fares, json, pair, table_tree, txn_row, validate, write};

fn publish(table: &Path, branch: &str) {
    let out = ok(&["branch", "publish", s(table), branch, "--drop"]);
    assert!(out.contains("published"), "{out}");
}

#[test]
fn test_rebase_then_fast_forward_publish_on_cow_and_mor_with_and_without_record_index() {
    for (kind, rli) in [("cow", false), ("mor", true), ("cow", true), ("mor", false)] {
        let (_dir, table) = diverged(kind, rli, false);
        let err = fails(&["branch", "publish", s(&table), "dev"]);
        assert!(err.contains("arbor branch rebase"), "{err}");
        let before = table_tree(&table);
        let dry = json(&["branch", "rebase", s(&table), "dev", "--dry-run", "--json"]);
        assert_eq!(dry["dry_run"], true, "{dry}");
        let changes = &dry["changes"];
        assert_eq!(
            (
                &changes["inserted"],
                &changes["updated"],
                &changes["deleted"]
            ),
            (&Value::from(1), &Value::from(1), &Value::from(1)),
            "{kind} rli {rli}: {dry}"
        );
        assert_eq!(table_tree(&table), before, "{kind}: a dry run wrote");
        let out = ok(&["branch", "rebase", s(&table), "dev"]);
        assert!(
            out.contains("branch dev rebased onto main's head")
                && out.contains("1 inserted, 1 updated, 1 deleted"),
            "{out}"
        );
        let want = [pair("a", 10.5), pair("b", 20.5), pair("d", 4.5)];
        assert_eq!(fares(&table, "dev"), want, "{kind} rli {rli}");
        assert_eq!(
            fares(&table, "main"),
            [pair("a", 1.5), pair("b", 20.5), pair("c", 3.5)],
            "{kind}: main unchanged"
        );
        let again = ok(&["branch", "rebase", s(&table), "dev"]);
        assert!(again.contains("already based on main's head"), "{again}");
        let list = json(&["branch", "list", s(&table), "--json"]);
        assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
        ok(&["validate", s(&table), "--branch", "dev"]);
        publish(&table, "dev");
        assert_eq!(fares(&table, "main"), want, "{kind} rli {rli}: published");
        validate(&table);
    }
}

#[test]
fn test_rebase_refused_on_a_conflict_writes_nothing_and_strategies_settle_it() {
    for kind in ["cow", "mor"] {
        let (_dir, table) = diverged(kind, false, true);
        let before = table_tree(&table);
        let err = fails(&["branch", "rebase", s(&table), "dev"]);
        assert!(
            err.contains("rebase dev onto main refused: 1 conflict(s)")
                && err.contains("key a in sf")
                && err.contains("fare=10.5")
                && err.contains("fare=30.5"),
            "{err}"
        );
        assert_eq!(table_tree(&table), before, "{kind}: a refused rebase wrote");
        let dry = ok(&["branch", "rebase", s(&table), "dev", "--dry-run"]);
        assert!(
            dry.contains("1 conflict(s)") && dry.contains("key a"),
            "{dry}"
        );
        assert_eq!(table_tree(&table), before);
        for (strategy, fare_a) in [("target", 30.5), ("ordering", 30.5), ("source", 10.5)] {
            let copy = tempfile::tempdir().unwrap();
            let t = copy.path().join("t");
            arbor_testkit::crash::copy_dir(&table, &t);
            let out = ok(&["branch", "rebase", s(&t), "dev", "--strategy", strategy]);
            assert!(out.contains("settled by --strategy"), "{out}");
            assert_eq!(
                fares(&t, "dev"),
                [pair("a", fare_a), pair("b", 20.5), pair("d", 4.5)],
                "{kind} --strategy {strategy}"
            );
            publish(&t, "dev");
            validate(&t);
        }
    }
}

#[test]
fn test_rebase_keeps_the_earlier_history_of_a_tagged_branch() {
    let (dir, table) = diverged("mor", false, false);
    ok(&["tag", "create", s(&table), "reviewed", "--branch", "dev"]);
    let old = fares(&table, "dev");
    let out = ok(&["branch", "rebase", s(&table), "dev"]);
    assert!(out.contains("on branch dev-pre-rebase"), "{out}");
    let tagged = read_jsonl(&table, &["--branch", "dev-pre-rebase", "--tag", "reviewed"]);
    assert_eq!(crate::create_write::id_fares(&tagged), old);
    // The rebased branch keeps taking writes, then publishes.
    write(dir.path(), &table, "dev", "upsert", "e,la,6.5,50\n");
    publish(&table, "dev");
    assert_eq!(fares(&table, "main").len(), 4);
    ok(&["branch", "drop", s(&table), "dev-pre-rebase"]);
    ok(&["clean", s(&table)]);
    validate(&table);
}

/// A table of awkward types (`clone::table_of`) whose branch `dev` upserted `a2` and inserted
/// `c1` (`n` 30).
fn awkward_with_dev(kind: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let table = table_of(dir.path(), kind);
    ok(&["branch", "create", s(&table), "dev"]);
    let mine = awkward(dir.path(), "mine.parquet", &["a2", "c1"], 30);
    ok(&["write", s(&table), s(&mine), "--branch", "dev"]);
    (dir, table)
}

/// Awkward types (zoned timestamps, decimals, a struct, a list, nulls): the rebased branch
/// published reads the same in arbor and hudi-rs.
#[test]
fn test_rebase_awkward_types_published_reads_in_hudi_rs() {
    for kind in ["cow", "mor"] {
        let (dir, table) = awkward_with_dev(kind);
        let theirs = awkward(dir.path(), "theirs.parquet", &["a3", "c3"], 40);
        ok(&["write", s(&table), s(&theirs)]);
        ok(&["branch", "rebase", s(&table), "dev"]);
        publish(&table, "dev");
        let mut rows = read_jsonl(&table, &[]);
        rows.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        assert_eq!(rows.len(), 8, "{kind}");
        let a2 = rows.iter().find(|r| r["id"] == "a2").unwrap();
        assert_eq!(a2["n"], 30, "{kind}: {a2}");
        let c3 = rows.iter().find(|r| r["id"] == "c3").unwrap();
        assert_eq!(c3["n"], 40, "{kind}: {c3}");
        if let Some(peer) = crate::values::peer_rows(&table) {
            assert_eq!(peer.len(), 8, "{kind}");
            let ids: Vec<&str> = peer.iter().map(|r| r["id"].as_str().unwrap()).collect();
            assert_eq!(ids, ["a1", "a2", "a3", "a4", "a5", "a6", "c1", "c3"]);
            let p2 = peer.iter().find(|r| r["id"] == "a2").unwrap();
            assert_eq!(p2["n"], 30, "{kind}: hudi-rs {p2}");
        }
        validate(&table);
    }
}

/// A Spark-written merge-on-read table with a complex key and a record index: a branch's
/// writes rebased over main's, then published.
#[test]
fn test_rebase_on_spark_fixture_then_publish() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("rebase on a Spark fixture") else {
        return;
    };
    let zip = root.join("sample_table/mor/avro/v9_txns_complex_meta.zip");
    let (tmp, table) = arbor_testkit::unzip_table(&zip);
    let before = read_jsonl(&table, &[]).len();
    ok(&["branch", "create", s(&table), "fix"]);
    let row = txn_row;
    let b = crate::create_write::file(
        tmp.path(),
        "b.jsonl",
        &(row(1700300000099, "9900.00", "TXN-007", "apac")
            + &row(1700300000100, "1.05", "TXN-099", "eu")),
    );
    let m = crate::create_write::file(
        tmp.path(),
        "m.jsonl",
        &row(1700300000101, "2.10", "TXN-098", "eu"),
    );
    ok(&["write", s(&table), s(&b), "--branch", "fix"]);
    ok(&["write", s(&table), s(&m)]);
    ok(&["branch", "rebase", s(&table), "fix"]);
    publish(&table, "fix");
    let after = read_jsonl(&table, &[]);
    assert_eq!(after.len(), before + 2);
    let t7 = after.iter().find(|r| r["txn_id"] == "TXN-007").unwrap();
    assert_eq!(t7["amount"].as_f64(), Some(9900.0), "{t7}");
    validate(&table);
}

/// Awkward types through diff and merge: the diff lists the changed keys with their values
/// (decimals, zoned timestamps, struct and list columns, nulls) in JSON lines; a dry run
/// writes nothing; the merge lands exactly the branch's rows, which hudi-rs reads.
#[test]
fn test_diff_and_merge_awkward_types_read_in_hudi_rs() {
    for kind in ["cow", "mor"] {
        let (_dir, table) = awkward_with_dev(kind);
        let out = ok(&["diff", s(&table), "main", "dev", "--format", "jsonl"]);
        let rows: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let post: Vec<&Value> = rows
            .iter()
            .filter(|r| r["_change_type"] == "update_postimage" || r["_change_type"] == "insert")
            .collect();
        assert_eq!(post.len(), 2, "{kind}: {out}");
        let a2 = post.iter().find(|r| r["id"] == "a2").unwrap();
        assert_eq!(a2["n"], 30, "{kind}: {a2}");
        assert!(
            a2["point"].is_object() && a2["tags"].is_array(),
            "{kind}: {a2}"
        );
        let before = table_tree(&table);
        let dry = json(&["branch", "merge", s(&table), "dev", "--dry-run", "--json"]);
        assert_eq!(
            (&dry["inserted"], &dry["updated"]),
            (&Value::from(1), &Value::from(1)),
            "{kind}: {dry}"
        );
        assert_eq!(table_tree(&table), before, "{kind}: a dry run wrote");
        ok(&["branch", "merge", s(&table), "dev"]);
        let main = read_jsonl(&table, &[]);
        let dev = read_jsonl(&table, &["--branch", "dev"]);
        let strip = |mut rows: Vec<Value>| {
            for r in rows.iter_mut() {
                if let Some(o) = r.as_object_mut() {
                    o.retain(|k, _| !k.starts_with("_hoodie_"));
                }
            }
            rows.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
            rows
        };
        assert_eq!(
            strip(main),
            strip(dev),
            "{kind}: main after the merge is dev"
        );
        if let Some(peer) = crate::values::peer_rows(&table) {
            assert_eq!(peer.len(), 7, "{kind}");
            let p2 = peer.iter().find(|r| r["id"] == "a2").unwrap();
            assert_eq!(p2["n"], 30, "{kind}: hudi-rs {p2}");
        }
        validate(&table);
    }
}

/// A rebase refused after its staging branch exists (here: `--strategy ordering` on a table
/// without an ordering field) keeps nothing of it and says so as a rebase.
#[test]
fn test_refused_rebase_leaves_no_staging_branch() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let f = |name: &str, body: &str| crate::create_write::file(dir.path(), name, body);
    let first = f("a.csv", "id,city,fare\na,sf,1.5\nb,sf,2.5\n");
    ok(&[
        "write",
        s(&table),
        s(&first),
        "--type",
        "cow",
        "--key",
        "id",
        "--partition-by",
        "city",
    ]);
    ok(&["branch", "create", s(&table), "dev"]);
    ok(&[
        "write",
        s(&table),
        s(&f("b.csv", "id,city,fare\na,sf,10.5\n")),
        "--branch",
        "dev",
    ]);
    ok(&[
        "write",
        s(&table),
        s(&f("m.csv", "id,city,fare\nb,sf,20.5\n")),
    ]);
    let before = table_tree(&table);
    let err = fails(&[
        "branch",
        "rebase",
        s(&table),
        "dev",
        "--strategy",
        "ordering",
    ]);
    assert!(
        err.contains("rebase dev onto main refused") && err.contains("ordering field"),
        "{err}"
    );
    assert_eq!(table_tree(&table), before, "a refused rebase wrote");
    let list = json(&["branch", "list", s(&table), "--json"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    ok(&["branch", "rebase", s(&table), "dev"]);
    assert_eq!(fares(&table, "dev"), [pair("a", 10.5), pair("b", 20.5)]);
}
