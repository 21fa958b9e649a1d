//! `arbor diff` and `arbor branch merge` as a user types them: diverged branches on
//! copy-on-write and merge-on-read tables (with and without a record index), every output
//! format of a diff, a merge without conflicts, a merge refused on a conflict (the message
//! names the key and both values), each strategy, dry runs that write nothing, a repeated
//! merge that finds nothing new, refs (tags, instants, `<branch>@<instant>`), and a Spark
//! fixture with complex keys, a record index, decimals, dates and timestamps.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::create_write::{arbor, fails, file, id_fares, ok, read_jsonl, s, tree, trips_table};

pub(crate) fn table_tree(table: &Path) -> Vec<(String, Vec<u8>)> {
    let locks = table.join(".hoodie").join(".locks");
    let locks = locks.to_str().unwrap().to_string();
    tree(table)
        .into_iter()
        .filter(|(p, _)| !p.starts_with(&locks))
        .collect()
}

pub(crate) fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).unwrap()
}

/// Writes CSV `rows` (after the `id,city,fare,n` header) to `branch` with `op`.
pub(crate) fn write(dir: &Path, table: &Path, branch: &str, op: &str, rows: &str) {
    let name = format!("in-{}.csv", rand_name(rows, branch));
    let header = if op == "delete" {
        "id,city\n"
    } else {
        "id,city,fare,n\n"
    };
    let input = file(dir, &name, &format!("{header}{rows}"));
    ok(&["write", s(table), s(&input), "--branch", branch, "--op", op]);
}

fn rand_name(rows: &str, branch: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (rows, branch).hash(&mut h);
    format!("{:x}", h.finish())
}

pub(crate) fn fares(table: &Path, branch: &str) -> Vec<(String, f64)> {
    id_fares(&read_jsonl(table, &["--branch", branch]))
}

pub(crate) fn pair(id: &str, fare: f64) -> (String, f64) {
    (id.to_string(), fare)
}

/// A trips table of `kind` with branch `dev`: dev updated a, inserted d, deleted c; main
/// updated b. With `conflict`, main also updated a (to another fare).
pub(crate) fn diverged(
    kind: &str,
    record_index: bool,
    conflict: bool,
) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), kind);
    if record_index {
        ok(&["index", "create", s(&table), "--record-index"]);
    }
    ok(&["branch", "create", s(&table), "dev"]);
    write(
        dir.path(),
        &table,
        "dev",
        "upsert",
        "a,sf,10.5,10\nd,la,4.5,10\n",
    );
    write(dir.path(), &table, "dev", "delete", "c,nyc\n");
    write(dir.path(), &table, "main", "upsert", "b,sf,20.5,20\n");
    if conflict {
        write(dir.path(), &table, "main", "upsert", "a,sf,30.5,30\n");
    }
    (dir, table)
}

/// One JSON line of the `v9_txns_complex_meta` fixture's schema (account `ACC-E`).
pub(crate) fn txn_row(ts: i64, amount: &str, id: &str, region: &str) -> String {
    format!(
        "{{\"txn_id\":\"{id}\",\"account_id\":\"ACC-E\",\"txn_ts\":{ts},\
         \"txn_datetime\":\"2024-01-16T08:15:00Z\",\"txn_date\":\"2024-01-16\",\
         \"amount\":\"{amount}\",\"currency\":\"USD\",\"txn_type\":\"debit\",\
         \"merchant_name\":null,\"is_international\":true,\"fee_amount\":\"75.00\",\
         \"txn_metadata\":null,\"region\":\"{region}\"}}\n"
    )
}

pub(crate) fn validate(table: &Path) {
    let out = ok(&["validate", s(table)]);
    assert!(out.contains("agrees"), "{out}");
}

#[test]
fn test_diff_lists_changes_in_every_format_and_stat_counts_them() {
    for kind in ["cow", "mor"] {
        let (dir, table) = diverged(kind, false, false);
        // Rows: change type, partition, key, then the data columns.
        let out = ok(&["diff", s(&table), "main", "dev", "--format", "jsonl"]);
        let rows: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let kinds: Vec<(String, String)> = rows
            .iter()
            .map(|r| {
                (
                    r["_hoodie_record_key"].as_str().unwrap().to_string(),
                    r["_change_type"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = [
            ("d", "insert"),
            ("c", "delete"),
            ("a", "update_preimage"),
            ("a", "update_postimage"),
            ("b", "update_preimage"),
            ("b", "update_postimage"),
        ]
        .iter()
        .map(|(k, c)| (k.to_string(), c.to_string()))
        .collect();
        let mut sorted = kinds.clone();
        sorted.sort();
        let mut want_sorted = want.clone();
        want_sorted.sort();
        assert_eq!(sorted, want_sorted, "{kind}: {out}");
        // main -> dev: b's postimage is dev's (the base's) fare, a's is dev's new one.
        let post = |k: &str| {
            rows.iter()
                .find(|r| r["_hoodie_record_key"] == k && r["_change_type"] == "update_postimage")
                .unwrap()["fare"]
                .as_f64()
                .unwrap()
        };
        assert_eq!((post("a"), post("b")), (10.5, 2.5), "{kind}");
        // --keys-only as CSV: three columns.
        let csv = ok(&[
            "diff",
            s(&table),
            "main",
            "dev",
            "--keys-only",
            "--format",
            "csv",
        ]);
        assert_eq!(
            csv.lines().next(),
            Some("_change_type,_hoodie_partition_path,_hoodie_record_key"),
            "{csv}"
        );
        assert_eq!(csv.lines().count(), 7, "{csv}");
        // Parquet to a file.
        let out_file = dir.path().join("changes.parquet");
        ok(&[
            "diff",
            s(&table),
            "main",
            "dev",
            "--format",
            "parquet",
            "--output",
            s(&out_file),
        ]);
        assert!(std::fs::metadata(&out_file).unwrap().len() > 0);
        // --stat counts per partition.
        let stat = json(&["diff", s(&table), "main", "dev", "--stat", "--json"]);
        let parts = stat["partitions"].as_array().unwrap();
        let total = |f: &str| parts.iter().map(|p| p[f].as_u64().unwrap()).sum::<u64>();
        assert_eq!(
            (total("inserted"), total("updated"), total("deleted")),
            (1, 2, 1),
            "{kind}: {stat}"
        );
        assert!(stat["merge_base"].is_string(), "{stat}");
        let text = ok(&["diff", s(&table), "main", "dev", "--stat"]);
        assert!(
            text.contains("1 inserted, 2 updated, 1 deleted"),
            "{kind}: {text}"
        );
        // The same state on both sides: no change.
        let same = ok(&["diff", s(&table), "dev", "dev", "--format", "csv"]);
        assert_eq!(same.lines().count(), 1, "{same}");
    }
}

#[test]
fn test_merge_without_conflicts_applies_one_side_changes_once() {
    for (kind, rli) in [("cow", false), ("mor", true), ("cow", true), ("mor", false)] {
        let (_dir, table) = diverged(kind, rli, false);
        let before = table_tree(&table);
        let dry = json(&["branch", "merge", s(&table), "dev", "--dry-run", "--json"]);
        assert_eq!(
            (&dry["inserted"], &dry["updated"], &dry["deleted"]),
            (&Value::from(1), &Value::from(1), &Value::from(1)),
            "{kind} rli {rli}: {dry}"
        );
        assert!(dry["commit"].is_null());
        assert_eq!(table_tree(&table), before, "{kind}: a dry run wrote");
        let out = ok(&["branch", "merge", s(&table), "dev"]);
        assert!(out.contains("merged dev into main as commit"), "{out}");
        assert_eq!(
            fares(&table, "main"),
            [pair("a", 10.5), pair("b", 20.5), pair("d", 4.5)],
            "{kind} rli {rli}"
        );
        // dev is unchanged and stays writable.
        assert_eq!(
            fares(&table, "dev"),
            [pair("a", 10.5), pair("b", 2.5), pair("d", 4.5)]
        );
        validate(&table);
        let again = ok(&["branch", "merge", s(&table), "dev"]);
        assert!(again.contains("already up to date"), "{again}");
        // Only new changes are carried by the next merge.
        let dir = table.parent().unwrap().to_path_buf();
        write(&dir, &table, "dev", "upsert", "e,sf,5.5,40\n");
        let next = json(&["branch", "merge", s(&table), "dev", "--json"]);
        assert_eq!(next["inserted"], 1, "{next}");
        assert_eq!(next["updated"], 0, "{next}");
        assert_eq!(fares(&table, "main").len(), 4);
        validate(&table);
    }
}

#[test]
fn test_merge_refuses_a_conflict_naming_key_and_values_and_each_strategy_settles_it() {
    for kind in ["cow", "mor"] {
        let (_dir, table) = diverged(kind, false, true);
        let before = table_tree(&table);
        let err = fails(&["branch", "merge", s(&table), "dev"]);
        assert!(err.contains("1 conflict(s)"), "{err}");
        assert!(err.contains("key a in sf"), "{err}");
        assert!(
            err.contains("fare=10.5") && err.contains("fare=30.5"),
            "{err}"
        );
        assert_eq!(table_tree(&table), before, "{kind}: a refused merge wrote");
        let dry = json(&["branch", "merge", s(&table), "dev", "--dry-run", "--json"]);
        assert_eq!(dry["conflict_count"], 1, "{dry}");
        assert_eq!(dry["conflicts"][0]["key"], "a");
        assert_eq!(table_tree(&table), before);
        for (strategy, fare_a) in [("target", 30.5), ("ordering", 30.5), ("source", 10.5)] {
            let copy = tempfile::tempdir().unwrap();
            let t = copy.path().join("t");
            arbor_testkit::crash::copy_dir(&table, &t);
            let out = ok(&["branch", "merge", s(&t), "dev", "--strategy", strategy]);
            assert!(out.contains("1 conflict(s)"), "{out}");
            let rows = fares(&t, "main");
            assert_eq!(
                rows,
                [pair("a", fare_a), pair("b", 20.5), pair("d", 4.5)],
                "{kind} --strategy {strategy}"
            );
            validate(&t);
        }
    }
}

#[test]
fn test_diff_and_merge_take_refs_tags_instants_and_branch_instants() {
    let (dir, table) = diverged("cow", false, false);
    ok(&["tag", "create", s(&table), "v1"]);
    let tl: Value = json(&["timeline", s(&table), "--branch", "dev", "--json"]);
    let first_dev = tl.as_array().unwrap()[1]["timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    write(dir.path(), &table, "main", "upsert", "b,sf,21.5,21\n");
    // tag:v1 is main before that upsert.
    let stat = json(&["diff", s(&table), "tag:v1", "main", "--stat", "--json"]);
    assert_eq!(stat["partitions"][0]["updated"], 1, "{stat}");
    // dev@<its first write>: only a and d changed by then.
    let at = format!("dev@{first_dev}");
    let stat = json(&["diff", s(&table), "main", &at, "--stat", "--json"]);
    assert_eq!(stat["to_instant"], first_dev.as_str(), "{stat}");
    let err = fails(&["diff", s(&table), "main", "nosuch"]);
    assert!(err.contains("nosuch"), "{err}");
    let err = fails(&["diff", s(&table), "main", "dev@yesterday"]);
    assert!(err.contains("ref"), "{err}");
    // Merging a branch into itself is refused.
    let err = fails(&["branch", "merge", s(&table), "dev", "--into", "dev"]);
    assert!(err.contains("itself"), "{err}");
    // Main merged into the branch.
    let out = ok(&["branch", "merge", s(&table), "main", "--into", "dev"]);
    assert!(out.contains("merged main into dev"), "{out}");
    assert_eq!(
        fares(&table, "dev"),
        [pair("a", 10.5), pair("b", 21.5), pair("d", 4.5)]
    );
    let _ = arbor(&["branch", "list", s(&table)]);
}

/// A Spark-written merge-on-read table with a complex key, a record index and decimal, date,
/// timestamp and boolean columns: a branch's update and insert merge into main, a conflict
/// with main's own update is refused by name and settled by the ordering field.
#[test]
fn test_merge_on_spark_fixture_with_complex_keys_and_record_index() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("merge on a Spark fixture") else {
        return;
    };
    let zip = root.join("sample_table/mor/avro/v9_txns_complex_meta.zip");
    let (tmp, table) = arbor_testkit::unzip_table(&zip);
    let before = read_jsonl(&table, &[]);
    ok(&["branch", "create", s(&table), "fix"]);
    let row = txn_row;
    let b = file(
        tmp.path(),
        "b.jsonl",
        &(row(1700300000099, "9900.00", "TXN-007", "apac")
            + &row(1700300000100, "1.05", "TXN-099", "eu")),
    );
    let m = file(
        tmp.path(),
        "m.jsonl",
        &row(1700300000098, "8800.00", "TXN-007", "apac"),
    );
    ok(&["write", s(&table), s(&b), "--branch", "fix"]);
    ok(&["write", s(&table), s(&m)]);
    let stat = json(&["diff", s(&table), "main", "fix", "--stat", "--json"]);
    assert_eq!(stat["partitions"].as_array().unwrap().len(), 2, "{stat}");
    let err = fails(&["branch", "merge", s(&table), "fix"]);
    assert!(
        err.contains("txn_id:TXN-007,account_id:ACC-E")
            && err.contains("amount=9900.00")
            && err.contains("amount=8800.00"),
        "{err}"
    );
    let out = json(&[
        "branch",
        "merge",
        s(&table),
        "fix",
        "--strategy",
        "ordering",
        "--json",
    ]);
    assert_eq!(
        (&out["inserted"], &out["updated"]),
        (&Value::from(1), &Value::from(1))
    );
    let after = read_jsonl(&table, &[]);
    assert_eq!(after.len(), before.len() + 1);
    let t7 = after.iter().find(|r| r["txn_id"] == "TXN-007").unwrap();
    assert_eq!(t7["amount"].as_f64(), Some(9900.0), "{t7}");
    let out = ok(&["validate", s(&table)]);
    assert!(out.contains("agrees"), "{out}");
}

/// `arbor cherry-pick`: one write of `dev` (a delete) lands on main alone, a second pick finds
/// it applied; a write main changed differently is a conflict named by key; a write that is
/// not on the branch, or already on main, is refused by name.
#[test]
fn test_cherry_pick_applies_one_write_once_and_refuses_conflicts_by_key() {
    for kind in ["cow", "mor"] {
        let (dir, table) = diverged(kind, kind == "mor", true);
        let tl: Value = json(&["timeline", s(&table), "--branch", "dev", "--json"]);
        let writes: Vec<String> = tl
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["timestamp"].as_str().unwrap().to_string())
            .collect();
        // [main's first write, dev's upsert of a and d, dev's delete of c]
        assert_eq!(writes.len(), 3, "{tl}");
        let before = table_tree(&table);
        let dry = json(&[
            "cherry-pick",
            s(&table),
            &writes[2],
            "--from",
            "dev",
            "--dry-run",
            "--json",
        ]);
        assert_eq!(dry["deleted"], 1, "{dry}");
        assert_eq!(table_tree(&table), before, "{kind}: a dry run wrote");
        let out = ok(&["cherry-pick", s(&table), &writes[2], "--from", "dev"]);
        assert!(out.contains("cherry-picked dev@"), "{out}");
        assert_eq!(
            fares(&table, "main"),
            [pair("a", 30.5), pair("b", 20.5)],
            "{kind}: only c's delete"
        );
        validate(&table);
        let again = ok(&["cherry-pick", s(&table), &writes[2], "--from", "dev"]);
        assert!(again.contains("already applied"), "{again}");
        // dev's upsert of a conflicts with main's own update of a.
        let err = fails(&["cherry-pick", s(&table), &writes[1], "--from", "dev"]);
        assert!(
            err.contains("key a in sf") && err.contains("fare=10.5") && err.contains("fare=30.5"),
            "{err}"
        );
        let out = ok(&[
            "cherry-pick",
            s(&table),
            &writes[1],
            "--from",
            "dev",
            "--strategy",
            "source",
        ]);
        assert!(out.contains("1 conflict(s)"), "{out}");
        assert_eq!(
            fares(&table, "main"),
            [pair("a", 10.5), pair("b", 20.5), pair("d", 4.5)],
            "{kind}"
        );
        validate(&table);
        // The base write is on main already; a main write is not on dev.
        let err = fails(&["cherry-pick", s(&table), &writes[0], "--from", "dev"]);
        assert!(err.contains("already on main"), "{err}");
        let main_tl: Value = json(&["timeline", s(&table), "--json"]);
        let last_main = main_tl.as_array().unwrap().last().unwrap()["timestamp"]
            .as_str()
            .unwrap()
            .to_string();
        let err = fails(&["cherry-pick", s(&table), &last_main, "--from", "dev"]);
        assert!(err.contains("not a completed write of dev"), "{err}");
        // Main's update of b picked onto dev.
        let main_b = main_tl.as_array().unwrap()[1]["timestamp"]
            .as_str()
            .unwrap()
            .to_string();
        let out = ok(&[
            "cherry-pick",
            s(&table),
            &main_b,
            "--from",
            "main",
            "--branch",
            "dev",
        ]);
        assert!(out.contains("into dev"), "{out}");
        assert_eq!(
            fares(&table, "dev"),
            [pair("a", 10.5), pair("b", 20.5), pair("d", 4.5)],
            "{kind}"
        );
        drop(dir);
    }
}

/// Cleans keep the states a repeated merge compares from (the source as of the instant the
/// last merge carried, the target as of that merge's commit), however aggressive their
/// policy: the next merge carries only the new changes.
#[test]
fn test_repeated_merge_after_aggressive_cleans_carries_the_new_changes() {
    let (dir, table) = diverged("cow", false, false);
    ok(&["branch", "merge", s(&table), "dev"]);
    for i in 1..4 {
        write(
            dir.path(),
            &table,
            "main",
            "upsert",
            &format!("b,sf,{i}.5,{}\n", 100 + i),
        );
        write(
            dir.path(),
            &table,
            "dev",
            "upsert",
            &format!("a,sf,{i}.5,{}\n", 100 + i),
        );
    }
    ok(&["clean", s(&table), "--policy", "commits", "--retain", "1"]);
    ok(&[
        "clean",
        s(&table),
        "--branch",
        "dev",
        "--policy",
        "commits",
        "--retain",
        "1",
    ]);
    let out = json(&["branch", "merge", s(&table), "dev", "--json"]);
    assert_eq!(
        (&out["updated"], &out["conflict_count"]),
        (&Value::from(1), &Value::from(0)),
        "{out}"
    );
    assert_eq!(
        fares(&table, "main"),
        [pair("a", 3.5), pair("b", 3.5), pair("d", 4.5)]
    );
    validate(&table);
}

/// A partition deleted on a branch of a Spark fixture reaches main as Hudi's own
/// `delete_partition` when it is all the merge carries; main's own write elsewhere stays.
#[test]
fn test_merge_of_a_partition_deleted_on_a_branch_of_a_spark_fixture() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("partition merge on a Spark fixture")
    else {
        return;
    };
    let zip = root.join("sample_table/mor/avro/v9_txns_complex_meta.zip");
    let (tmp, table) = arbor_testkit::unzip_table(&zip);
    let before = read_jsonl(&table, &[]);
    ok(&["branch", "create", s(&table), "fix"]);
    ok(&[
        "delete-partition",
        s(&table),
        "region=eu",
        "--branch",
        "fix",
    ]);
    let m = file(
        tmp.path(),
        "m.jsonl",
        &txn_row(1700300000098, "8800.00", "TXN-007", "apac"),
    );
    ok(&["write", s(&table), s(&m)]);
    let eu = before.iter().filter(|r| r["region"] == "eu").count();
    assert!(eu > 0, "the fixture has rows in region=eu");
    let dry = json(&["branch", "merge", s(&table), "fix", "--dry-run", "--json"]);
    assert_eq!(dry["deleted"], Value::from(eu), "{dry}");
    let out = json(&["branch", "merge", s(&table), "fix", "--json"]);
    assert_eq!(
        (&out["operation"], &out["deleted"]),
        (&Value::from("DELETE_PARTITION"), &Value::from(eu)),
        "{out}"
    );
    let after = read_jsonl(&table, &[]);
    assert_eq!(after.len(), before.len() - eu);
    assert!(after.iter().all(|r| r["region"] != "eu"));
    let t7 = after.iter().find(|r| r["txn_id"] == "TXN-007").unwrap();
    assert_eq!(t7["amount"].as_f64(), Some(8800.0), "{t7}");
    validate(&table);
    let again = json(&["branch", "merge", s(&table), "fix", "--json"]);
    assert_eq!(again["up_to_date"], Value::from(true), "{again}");
}
