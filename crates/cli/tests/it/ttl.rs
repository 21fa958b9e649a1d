//! `arbor ttl set|unset|show|run`: policies kept in `hoodie.properties`, runs that delete the
//! expired partitions (hudi-rs reads what arbor reads), tags that keep their files until they
//! are dropped, dry runs that name exactly what the run deletes, and bad input refused with the
//! table unchanged; on arbor's tables and on copies of Spark's.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::create_write::{fails, file, ok, read_jsonl, s, tree};

/// The data rows hudi-rs reads (meta columns dropped), sorted by `id_col`; `None` when the
/// peer is absent (skipped visibly).
fn peer_rows(table: &Path, id_col: &str) -> Option<Vec<Value>> {
    let python = arbor_testkit::peer_python_or_skip("TTL checks against hudi-rs")?;
    let script = r#"
import json, sys
import pyarrow as pa
from hudi import HudiReadOptions, HudiTable
t = pa.Table.from_batches(HudiTable(sys.argv[1]).read(HudiReadOptions()))
rows = [{k: v for k, v in r.items() if not k.startswith("_hoodie_")} for r in t.to_pylist()]
rows.sort(key=lambda r: str(r[sys.argv[2]]))
print(json.dumps(rows, default=str))
"#;
    let out = std::process::Command::new(python)
        .args(["-c", script])
        .arg(table)
        .arg(id_col)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hudi-rs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// The values of `col` in arbor's rows, sorted.
fn column(table: &Path, col: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["--columns", col];
    args.extend_from_slice(extra);
    let mut v: Vec<String> = read_jsonl(table, &args)
        .iter()
        .map(|r| r[col].as_str().map_or(r[col].to_string(), str::to_string))
        .collect();
    v.sort();
    v
}

/// hudi-rs's values of `col`, sorted (`None`: no peer).
fn peer_column(table: &Path, col: &str) -> Option<Vec<String>> {
    let rows = peer_rows(table, col)?;
    let mut v: Vec<String> = rows
        .iter()
        .map(|r| r[col].as_str().map_or(r[col].to_string(), str::to_string))
        .collect();
    v.sort();
    Some(v)
}

/// [`tree`] without the lock objects (a refused change may take and release the table lock).
fn state(dir: &Path) -> Vec<(String, Vec<u8>)> {
    tree(dir)
        .into_iter()
        .filter(|(p, _)| !p.contains("/.hoodie/.locks/"))
        .collect()
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap()
}

fn partitions_of(v: &Value, what: &str) -> Vec<String> {
    v[what]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["partition"].as_str().unwrap().to_string())
        .collect()
}

/// A table of 8 rows, 2 per day of `dt` 2024-01-01..04, hive-style, keyed by `id`.
fn daily_table(dir: &Path, kind: &str) -> PathBuf {
    let table = dir.join(format!("events-{kind}"));
    let mut text = String::new();
    for (i, id) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().enumerate() {
        text.push_str(&format!(
            "{{\"id\":\"{id}\",\"dt\":\"2024-01-0{}\",\"v\":{i}}}\n",
            i / 2 + 1
        ));
    }
    let rows = file(dir, &format!("rows-{kind}.jsonl"), &text);
    ok(&[
        "write",
        s(&table),
        s(&rows),
        "--type",
        kind,
        "--key",
        "id",
        "--partition-by",
        "dt",
        "--hive-style",
    ]);
    table
}

#[test]
fn test_ttl_event_time_run_deletes_expired_partitions_tag_keeps_files_until_dropped() {
    for kind in ["cow", "mor"] {
        let dir = tempfile::tempdir().unwrap();
        let table = daily_table(dir.path(), kind);
        let t = s(&table);
        let out = ok(&[
            "ttl",
            "set",
            t,
            "--policy",
            "event-time",
            "--retain",
            "30d",
            "--time-field",
            "dt",
            "--format",
            "yyyy-MM-dd",
        ]);
        assert!(out.contains("TTL policy set"), "{out}");
        let shown = json(&ok(&["ttl", "show", t, "--json"]));
        let p = &shown["policies"][0];
        assert_eq!(p["policy"], "event-time", "{shown}");
        assert_eq!(p["retain"], "30d", "{shown}");
        assert_eq!(p["time_field"], "dt", "{shown}");
        let text = ok(&["ttl", "show", t]);
        assert!(
            text.contains("event-time") && text.contains("30d"),
            "{text}"
        );

        ok(&["tag", "create", t, "before"]);
        let now = "2024-02-01T12:00:00Z";
        let before = tree(&table);
        let dry = json(&ok(&["ttl", "run", t, "--dry-run", "--now", now, "--json"]));
        assert_eq!(tree(&table), before, "a dry run changes nothing");
        let expired = vec!["dt=2024-01-01".to_string(), "dt=2024-01-02".to_string()];
        assert_eq!(partitions_of(&dry, "expired"), expired, "{dry}");
        for e in dry["expired"].as_array().unwrap() {
            assert!(
                !e["kept_by"].as_array().unwrap().is_empty(),
                "the tag keeps the files of {e}"
            );
        }
        let text = ok(&["ttl", "run", t, "--dry-run", "--now", now]);
        assert!(
            text.contains("would delete") && text.contains("dt=2024-01-01"),
            "{text}"
        );
        assert!(
            text.contains("its files stay") && text.contains("tag before"),
            "{text}"
        );

        let run = json(&ok(&["ttl", "run", t, "--now", now, "--json"]));
        assert_eq!(
            partitions_of(&run, "expired"),
            expired,
            "the run does what the dry run said"
        );
        assert!(run["instant"].is_string(), "{run}");
        let left = vec!["e", "f", "g", "h"];
        assert_eq!(column(&table, "id", &[]), left, "{kind}");
        if let Some(peer) = peer_column(&table, "id") {
            assert_eq!(peer, left, "{kind}: hudi-rs after the run");
        }
        let all = vec!["a", "b", "c", "d", "e", "f", "g", "h"];
        assert_eq!(column(&table, "id", &["--tag", "before"]), all);

        // Nothing more expires at the same time: a second run deletes nothing.
        let again = json(&ok(&["ttl", "run", t, "--now", now, "--json"]));
        assert!(partitions_of(&again, "expired").is_empty(), "{again}");
        assert!(again["instant"].is_null(), "{again}");

        // The tag keeps the deleted partitions' files through a clean ...
        ok(&["clean", t, "--policy", "commits", "--retain", "1"]);
        assert_eq!(column(&table, "id", &["--tag", "before"]), all);
        assert!(table.join("dt=2024-01-01").is_dir());
        // ... and once it is dropped the next clean reclaims them, directories included.
        ok(&["tag", "drop", t, "before"]);
        let cleaned = ok(&["clean", t, "--policy", "commits", "--retain", "1"]);
        assert!(
            cleaned.contains(
                "removed deleted partition(s) nothing keeps: dt=2024-01-01, dt=2024-01-02"
            ),
            "{cleaned}"
        );
        assert!(
            !table.join("dt=2024-01-01").exists(),
            "{kind}: partition directory removed"
        );
        assert!(!table.join("dt=2024-01-02").exists());
        assert_eq!(column(&table, "id", &[]), left);
        if let Some(peer) = peer_column(&table, "id") {
            assert_eq!(peer, left, "{kind}: hudi-rs after the clean");
        }
        ok(&["validate", t]);
    }
}

#[test]
fn test_ttl_count_per_group_and_cap_take_the_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let mut text = String::new();
    let mut n = 0;
    for region in ["eu", "us"] {
        for day in 1..=4 {
            n += 1;
            text.push_str(&format!(
                "{{\"id\":\"k{n:02}\",\"region\":\"{region}\",\"dt\":\"2024010{day}\"}}\n"
            ));
        }
    }
    let rows = file(dir.path(), "rows.jsonl", &text);
    ok(&[
        "write",
        s(&table),
        s(&rows),
        "--type",
        "mor",
        "--key",
        "id",
        "--partition-by",
        "region,dt",
    ]);
    let t = s(&table);
    ok(&[
        "ttl", "set", t, "--policy", "count", "--retain", "2", "--fields", "region",
    ]);
    // us keeps 3 days by an explicit policy.
    ok(&[
        "ttl",
        "set",
        t,
        "--policy",
        "count",
        "--retain",
        "3",
        "--spec",
        "region=us",
    ]);
    let dry = json(&ok(&["ttl", "run", t, "--dry-run", "--json"]));
    let mut all = partitions_of(&dry, "expired");
    all.sort();
    assert_eq!(all, ["eu/20240101", "eu/20240102", "us/20240101"], "{dry}");
    // Capped at 2: the oldest go first, the rest wait.
    let run = json(&ok(&["ttl", "run", t, "--max-partitions", "2", "--json"]));
    assert_eq!(partitions_of(&run, "expired").len(), 2, "{run}");
    assert_eq!(partitions_of(&run, "capped").len(), 1, "{run}");
    let run = json(&ok(&["ttl", "run", t, "--json"]));
    assert_eq!(partitions_of(&run, "expired").len(), 1, "{run}");
    let want: Vec<String> = ["k03", "k04", "k06", "k07", "k08"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(column(&table, "id", &[]), want);
    if let Some(peer) = peer_column(&table, "id") {
        assert_eq!(peer, want, "hudi-rs after the runs");
    }
    // Unset the explicit policy: us now keeps 2 like every region.
    ok(&["ttl", "unset", t, "--spec", "region=us"]);
    let run = json(&ok(&["ttl", "run", t, "--json"]));
    assert_eq!(partitions_of(&run, "expired"), ["us/20240102"], "{run}");
    ok(&["validate", t]);
}

#[test]
fn test_ttl_bad_input_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let table = daily_table(dir.path(), "cow");
    let t = s(&table);
    let before = state(&table);
    for (args, says) in [
        (vec!["--policy", "bogus", "--retain", "1"], "--policy"),
        (vec!["--policy", "time", "--retain", "30x"], "--retain"),
        (vec!["--policy", "count", "--retain", "ten"], "--retain"),
        (
            vec!["--policy", "size", "--retain", "12 parsecs"],
            "--retain",
        ),
        (
            vec![
                "--policy",
                "event-time",
                "--retain",
                "1d",
                "--time-field",
                "nope",
                "--format",
                "yyyy-MM-dd",
            ],
            "nope",
        ),
        (vec!["--policy", "event-time", "--retain", "1d"], "time"),
        (
            vec!["--policy", "time", "--retain", "1d", "--spec", "region=eu"],
            "region",
        ),
        (
            vec!["--policy", "count", "--retain", "1", "--fields", "dt"],
            "dt",
        ),
    ] {
        let mut full = vec!["ttl", "set", t];
        full.extend(args.iter().copied());
        let e = fails(&full);
        assert!(e.contains(says), "{full:?}: {e}");
    }
    let e = fails(&["ttl", "unset", t]);
    assert!(e.contains("TTL") || e.contains("policy"), "{e}");
    let e = fails(&["ttl", "run", t, "--now", "next tuesday"]);
    assert!(e.contains("--now"), "{e}");
    let e = fails(&["ttl", "run", t, "--max-partitions", "0"]);
    assert!(e.contains("--max-partitions"), "{e}");
    assert_eq!(state(&table), before, "nothing changed");
    // Without a policy a run deletes nothing and says so.
    let out = ok(&["ttl", "run", t]);
    assert!(
        out.contains("nothing to delete") || out.contains("no TTL"),
        "{out}"
    );
}

#[test]
fn test_ttl_on_spark_fixtures_event_time_and_count() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("TTL on Spark-written tables") else {
        return;
    };
    // Partition field ts_str holds `yyyy/MM/dd/HH` (one field, four directory levels).
    for kind in ["cow", "mor/avro"] {
        let zip = root.join(format!(
            "sample_table/{kind}/v9_timebasedkeygen_nonhivestyle.zip"
        ));
        let (_tmp, table) = arbor_testkit::unzip_table(&zip);
        let t = s(&table);
        let before: Vec<String> = column(&table, "txn_id", &[]);
        ok(&[
            "ttl",
            "set",
            t,
            "--policy",
            "event-time",
            "--retain",
            "1d",
            "--time-field",
            "ts_str",
            "--format",
            "yyyy/MM/dd/HH",
        ]);
        let run = json(&ok(&[
            "ttl",
            "run",
            t,
            "--now",
            "2024-01-17T00:00:00Z",
            "--json",
        ]));
        // Every hour of 2024-01-15 (+ 1 day is before the 17th), none of the 16th (+ 1 day
        // is at or after it: not strictly before).
        let expired = partitions_of(&run, "expired");
        assert!(expired.len() >= 2, "{kind}: {run}");
        assert!(
            expired.iter().all(|p| p.starts_with("2024/01/15/")),
            "{kind}: {run}"
        );
        assert!(
            expired.contains(&"2024/01/15/10".to_string()),
            "{kind}: {run}"
        );
        let after = column(&table, "txn_id", &[]);
        assert!(after.len() < before.len(), "{kind}: {after:?}");
        if let Some(peer) = peer_column(&table, "txn_id") {
            assert_eq!(peer, after, "{kind}: hudi-rs after the run");
        }
        ok(&["clean", t, "--policy", "commits", "--retain", "1"]);
        if let Some(peer) = peer_column(&table, "txn_id") {
            assert_eq!(peer, after, "{kind}: hudi-rs after the clean");
        }
        ok(&["validate", t]);
    }
    // region us, eu, apac: keep the 2 greatest values (us, eu).
    let zip = root.join("sample_table/cow/v9_txns_simple_meta.zip");
    let (_tmp, table) = arbor_testkit::unzip_table(&zip);
    let t = s(&table);
    ok(&["ttl", "set", t, "--policy", "count", "--retain", "2"]);
    let run = json(&ok(&["ttl", "run", t, "--json"]));
    assert_eq!(partitions_of(&run, "expired"), ["region=apac"], "{run}");
    let regions = column(&table, "region", &[]);
    assert!(regions.iter().all(|r| r != "apac"), "{regions:?}");
    if let Some(peer) = peer_column(&table, "txn_id") {
        assert_eq!(peer, column(&table, "txn_id", &[]), "hudi-rs after the run");
    }
    ok(&["validate", t]);
}

#[test]
fn test_ttl_on_a_branch_changes_only_the_branch() {
    let dir = tempfile::tempdir().unwrap();
    let table = daily_table(dir.path(), "cow");
    let t = s(&table);
    ok(&["branch", "create", t, "trial"]);
    ok(&[
        "ttl", "set", t, "--branch", "trial", "--policy", "count", "--retain", "1",
    ]);
    let main_policies = json(&ok(&["ttl", "show", t, "--json"]));
    assert!(
        main_policies["policies"].as_array().unwrap().is_empty(),
        "main has no policy: {main_policies}"
    );
    let run = json(&ok(&["ttl", "run", t, "--branch", "trial", "--json"]));
    assert_eq!(partitions_of(&run, "expired").len(), 3, "{run}");
    assert_eq!(column(&table, "id", &["--branch", "trial"]), ["g", "h"]);
    let all = vec!["a", "b", "c", "d", "e", "f", "g", "h"];
    assert_eq!(column(&table, "id", &[]), all, "main is unchanged");
    if let Some(peer) = peer_column(&table, "id") {
        assert_eq!(peer, all, "hudi-rs reads main");
    }
    // Main's own run finds no policy and deletes nothing.
    let out = json(&ok(&["ttl", "run", t, "--json"]));
    assert!(partitions_of(&out, "expired").is_empty(), "{out}");
    ok(&["validate", t, "--branch", "trial"]);
}
