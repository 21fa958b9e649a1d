//! `arbor maintain`: the dry run names what is due and writes nothing; the run runs exactly
//! that, reports instants and bytes freed; a second run finds nothing due; `--all-branches`
//! covers every branch; a bad `--set` is a usage error.

use serde_json::Value;

use crate::create_write::{fails, file, ok, s, trips_table};
use crate::merge_diff::{table_tree, validate};

fn statuses(v: &Value) -> Vec<(String, String)> {
    v["runs"][0]["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["service"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn test_maintain_dry_run_then_run_then_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "mor");
    for i in 1..=6 {
        let f = file(
            dir.path(),
            &format!("u{i}.csv"),
            &format!("id,city,fare,n\na,sf,{i}.5,1{i}\nc,nyc,{i}.0,1{i}\n"),
        );
        ok(&["write", s(&table), s(&f)]);
    }
    ok(&["tag", "create", s(&table), "brief", "--expires-in", "1s"]);
    ok(&[
        "ttl",
        "set",
        s(&table),
        "--policy",
        "count",
        "--retain",
        "1",
    ]);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let set = ["--set", "hoodie.clean.commits.retained=1"];
    let tree = table_tree(&table);
    let mut args = vec!["maintain", s(&table), "--dry-run", "--json"];
    args.extend(set);
    let dry: Value = serde_json::from_str(&ok(&args)).unwrap();
    assert!(table_tree(&table) == tree, "a dry run writes nothing");
    let mut args = vec!["maintain", s(&table), "--json"];
    args.extend(set);
    let run: Value = serde_json::from_str(&ok(&args)).unwrap();
    let expected: Vec<(String, String)> = statuses(&dry)
        .into_iter()
        .map(|(svc, st)| (svc, if st == "due" { "ran".to_string() } else { st }))
        .collect();
    assert_eq!(statuses(&run), expected, "{dry}\n{run}");
    for svc in ["compaction", "ttl", "expired-tags", "clean"] {
        assert!(
            statuses(&run).contains(&(svc.to_string(), "ran".to_string())),
            "{svc}: {run}"
        );
    }
    validate(&table);
    let mut args = vec!["maintain", s(&table)];
    args.extend(set);
    let again = ok(&args);
    assert!(again.contains("nothing was due"), "{again}");
    let all = ok(&["maintain", s(&table), "--all-branches", "--dry-run"]);
    assert!(all.contains("SERVICE") && all.contains("dry run"), "{all}");
    let err = fails(&["maintain", s(&table), "--set", "retained"]);
    assert!(err.contains("KEY=VALUE"), "{err}");
}
