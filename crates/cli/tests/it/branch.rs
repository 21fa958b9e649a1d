//! `arbor branch` and `arbor tag`, and `--branch` / `--tag` on the other commands: branch
//! round trips (create, write, list, publish, drop), divergent publication, tags (create, list,
//! read, drop, expire), cleaning a branch without touching what main reads, and refusals
//! (hostile names, missing branches) that print one line and change nothing.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::create_write::{
    arbor, fails, file, id_fares, instants, ok, read_jsonl, s, tree, trips_table,
};

/// The table's files and bytes, without the lock directory (taking the table lock may leave
/// lock files behind even when nothing else changes).
fn table_tree(table: &Path) -> Vec<(String, Vec<u8>)> {
    let locks = table.join(".hoodie").join(".locks");
    let locks = locks.to_str().unwrap().to_string();
    tree(table)
        .into_iter()
        .filter(|(p, _)| !p.starts_with(&locks))
        .collect()
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).unwrap()
}

/// Upserts `id` with `fare` (partition `city`) on `branch`; returns the instant.
fn upsert_on(dir: &Path, table: &Path, branch: &str, id: &str, city: &str, fare: f64) -> String {
    let input = file(
        dir,
        &format!("upsert-{branch}-{id}.csv"),
        &format!("id,city,fare,n\n{id},{city},{fare},100\n"),
    );
    let report = json(&["write", s(table), s(&input), "--branch", branch, "--json"]);
    assert_eq!(report["branch"], branch);
    report["instant"].as_str().unwrap().to_string()
}

/// `(id, fare)` rows of `branch`.
fn rows_on(table: &Path, branch: &str) -> Vec<(String, f64)> {
    id_fares(&read_jsonl(table, &["--branch", branch]))
}

fn branches(table: &Path) -> Vec<Value> {
    json(&["branch", "list", s(table), "--json"])
        .as_array()
        .unwrap()
        .clone()
}

fn tags(table: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["tag", "list", s(table), "--json"];
    args.extend_from_slice(extra);
    json(&args).as_array().unwrap().clone()
}

fn write_times(table: &Path, branch: &str) -> Vec<String> {
    serde_json::from_str::<Value>(&ok(&["timeline", s(table), "--branch", branch, "--json"]))
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["timestamp"].as_str().unwrap().to_string())
        .collect()
}

fn pair(id: &str, fare: f64) -> (String, f64) {
    (id.to_string(), fare)
}

/// A table with [`crate::create_write::TRIPS`] in a fresh directory.
fn setup(kind: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), kind);
    (dir, table)
}

#[test]
fn test_branch_create_write_publish_drop_round_trip() {
    for kind in ["cow", "mor"] {
        let (dir, table) = setup(kind);
        let base = instants(&table)[0]["timestamp"]
            .as_str()
            .unwrap()
            .to_string();
        let main_rows = rows_on(&table, "main");

        let out = ok(&["branch", "create", s(&table), "audit"]);
        assert!(out.contains("branch audit created"), "{out}");
        assert!(out.contains(&base), "{out}");
        let list = branches(&table);
        assert_eq!(list.len(), 1, "{kind}");
        assert_eq!(list[0]["name"], "audit");
        assert_eq!(list[0]["base_instant"], base.as_str());
        assert_eq!(list[0]["head_instant"], base.as_str());
        assert_eq!(list[0]["pending"], 0);
        assert!(list[0]["from_tag"].is_null());

        // A write on the branch: main is unchanged, the branch has it.
        let w = upsert_on(dir.path(), &table, "audit", "a", "sf", 9.5);
        assert_eq!(rows_on(&table, "main"), main_rows, "{kind}");
        assert_eq!(
            rows_on(&table, "audit"),
            [pair("a", 9.5), pair("b", 2.5), pair("c", 3.5)],
            "{kind}"
        );
        assert_eq!(write_times(&table, "main"), vec![base.clone()], "{kind}");
        assert_eq!(write_times(&table, "audit"), [base.clone(), w.clone()]);
        let text = ok(&["branch", "list", s(&table)]);
        for needle in [
            "NAME",
            "BASE (REQUESTED)",
            "HEAD (REQUESTED)",
            "audit",
            &base,
            &w,
        ] {
            assert!(text.contains(needle), "{kind}: {needle} missing:\n{text}");
        }
        assert_eq!(branches(&table)[0]["head_instant"], w.as_str());
        let files = json(&["files", s(&table), "--branch", "audit", "--json"]);
        assert!(!files.as_array().unwrap().is_empty());
        ok(&["validate", s(&table), "--branch", "audit"]);

        // Publication: main fast-forwards to the branch.
        let published = json(&["branch", "publish", s(&table), "audit", "--json"]);
        assert_eq!(published["publication"], 1, "{kind}");
        assert_eq!(published["head"], w.as_str());
        assert_eq!(published["legacy_readers_follow"], true, "{kind}");
        // The root properties lead branch-unaware readers to the publication's timelines.
        for props in [".hoodie", ".hoodie/metadata/.hoodie"] {
            let text = std::fs::read_to_string(
                std::path::Path::new(&table)
                    .join(props)
                    .join("hoodie.properties"),
            )
            .unwrap();
            assert!(
                text.contains("hoodie.timeline.path=branches/publications/p1/timeline"),
                "{kind} {props}: {text}"
            );
        }
        assert_eq!(rows_on(&table, "main"), rows_on(&table, "audit"), "{kind}");
        assert_eq!(write_times(&table, "main"), [base.clone(), w.clone()]);
        ok(&["validate", s(&table)]);
        // Main keeps taking writes after the publication.
        upsert_on(dir.path(), &table, "main", "b", "sf", 4.0);
        assert_eq!(
            rows_on(&table, "main"),
            [pair("a", 9.5), pair("b", 4.0), pair("c", 3.5)],
            "{kind}"
        );

        let out = ok(&["branch", "drop", s(&table), "audit"]);
        assert!(out.contains("branch audit dropped"), "{out}");
        assert!(branches(&table).is_empty());
        assert!(ok(&["branch", "list", s(&table)]).contains("no branches"));
        let err = fails(&["read", s(&table), "--branch", "audit"]);
        assert!(err.contains("branch audit does not exist"), "{err}");
        let err = fails(&["branch", "drop", s(&table), "audit"]);
        assert!(err.contains("branch audit does not exist"), "{err}");
        assert_eq!(
            rows_on(&table, "main"),
            [pair("a", 9.5), pair("b", 4.0), pair("c", 3.5)],
            "{kind}: dropping the branch leaves main alone"
        );
    }
}

#[test]
fn test_branch_publish_text_says_branch_unaware_readers_follow() {
    let (dir, table) = setup("cow");
    ok(&["branch", "create", s(&table), "audit"]);
    upsert_on(dir.path(), &table, "audit", "a", "sf", 9.5);
    let out = ok(&["branch", "publish", s(&table), "audit"]);
    assert!(out.contains("published as publication p1"), "{out}");
    assert!(
        out.contains("readers that know nothing of branches (hudi-rs, Spark) read it"),
        "{out}"
    );
    assert!(!out.contains("warning"), "{out}");
}

/// `branch publish --drop`: main fast-forwards to the branch, then the branch is gone (list,
/// read); a refused (divergent) publication with `--drop` keeps the branch.
#[test]
fn test_branch_publish_drop_publishes_then_drops_and_a_refusal_keeps_the_branch() {
    let (dir, table) = setup("cow");
    ok(&["branch", "create", s(&table), "audit"]);
    let w = upsert_on(dir.path(), &table, "audit", "a", "sf", 9.5);
    let branch_rows = rows_on(&table, "audit");
    let published = json(&["branch", "publish", s(&table), "audit", "--drop", "--json"]);
    assert_eq!(published["publication"], 1);
    assert_eq!(published["head"], w.as_str());
    assert_eq!(published["dropped"], true);
    assert_eq!(rows_on(&table, "main"), branch_rows);
    assert!(branches(&table).is_empty());
    let err = fails(&["read", s(&table), "--branch", "audit"]);
    assert!(err.contains("branch audit does not exist"), "{err}");
    assert!(!table.join(".hoodie/branches/audit").exists());
    assert!(!table
        .join(".hoodie/metadata/.hoodie/branches/audit")
        .exists());
    ok(&["validate", s(&table)]);

    // Text output says so; a divergent publication with --drop changes nothing.
    ok(&["branch", "create", s(&table), "fix"]);
    upsert_on(dir.path(), &table, "fix", "c", "sf", 1.0);
    let out = ok(&["branch", "publish", s(&table), "fix", "--drop"]);
    assert!(out.contains("published as publication p2"), "{out}");
    assert!(out.contains("branch fix dropped"), "{out}");
    assert!(branches(&table).is_empty());

    ok(&["branch", "create", s(&table), "late"]);
    upsert_on(dir.path(), &table, "main", "b", "sf", 7.0);
    upsert_on(dir.path(), &table, "late", "a", "sf", 8.0);
    let before = table_tree(&table);
    let err = fails(&["branch", "publish", s(&table), "late", "--drop"]);
    assert!(err.contains("publish late refused"), "{err}");
    assert_eq!(
        table_tree(&table),
        before,
        "a refused publication changes nothing"
    );
    assert_eq!(branches(&table).len(), 1);
}

#[test]
fn test_branch_publish_divergent_exits_1_and_names_mains_instant() {
    let (dir, table) = setup("cow");
    ok(&["branch", "create", s(&table), "audit"]);
    let on_main = upsert_on(dir.path(), &table, "main", "b", "sf", 7.0);
    let on_branch = upsert_on(dir.path(), &table, "audit", "a", "sf", 8.0);
    let main_rows = rows_on(&table, "main");
    let main_times = write_times(&table, "main");
    let err = fails(&["branch", "publish", s(&table), "audit"]);
    assert!(err.contains("publish audit refused"), "{err}");
    assert!(err.contains(&on_main), "main's instant missing: {err}");
    assert!(
        err.contains(&on_branch),
        "the branch's instant missing: {err}"
    );
    assert!(err.contains("fast-forward"), "{err}");
    assert_eq!(rows_on(&table, "main"), main_rows);
    assert_eq!(write_times(&table, "main"), main_times);
    assert!(
        !table.join(".hoodie/branches/publications").exists(),
        "a refused publication reserves nothing"
    );
    // The branch is still there and writable.
    assert_eq!(branches(&table)[0]["head_instant"], on_branch.as_str());
}

#[test]
fn test_tag_create_list_read_drop_round_trip() {
    let (dir, table) = setup("cow");
    let t1 = instants(&table)[0]["timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    let before = rows_on(&table, "main");
    let created = json(&["tag", "create", s(&table), "v1", "--json"]);
    assert_eq!(created["tag"]["instant"], t1.as_str());
    assert!(created["tag"]["expires_at"].is_null());
    let t2 = upsert_on(dir.path(), &table, "main", "a", "sf", 5.0);
    assert_ne!(rows_on(&table, "main"), before);

    // Reads as of the tag; the timeline and files as of the tag.
    assert_eq!(
        id_fares(&read_jsonl(&table, &["--tag", "v1"])),
        before,
        "read --tag shows the tagged state"
    );
    let upto: Vec<Value> =
        serde_json::from_str(&ok(&["timeline", s(&table), "--tag", "v1", "--json"])).unwrap();
    assert_eq!(upto.len(), 1);
    assert_eq!(upto[0]["timestamp"], t1.as_str());
    let files = json(&["files", s(&table), "--tag", "v1", "--json"]);
    assert!(files
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["base_instant"] == t1.as_str()));
    // --tag and --as-of conflict (a usage error from the argument parser).
    let out = arbor(&["read", s(&table), "--tag", "v1", "--as-of", &t1]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--as-of"));

    // Listing: name, instant, created, expires.
    let list = tags(&table, &[]);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["name"], "v1");
    assert_eq!(list[0]["instant"], t1.as_str());
    let text = ok(&["tag", "list", s(&table)]);
    for needle in ["NAME", "INSTANT", "CREATED", "EXPIRES", "v1", &t1, "never"] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }

    // A tag with an expiry; a second tag at the same instant shares its savepoint.
    let v2 = json(&[
        "tag",
        "create",
        s(&table),
        "v2",
        "--expires-in",
        "7d",
        "--json",
    ]);
    assert_eq!(v2["tag"]["instant"], t2.as_str());
    assert!(v2["tag"]["expires_at"].is_string());
    let v3 = json(&["tag", "create", s(&table), "v3", "--json"]);
    assert_eq!(v3["tag"]["instant"], t2.as_str());
    ok(&["tag", "drop", s(&table), "v3"]);
    let sps = json(&["savepoint", "list", s(&table), "--json"]);
    assert!(
        sps.as_array()
            .unwrap()
            .iter()
            .any(|sp| sp["instant"] == t2.as_str()),
        "dropping v3 must keep the savepoint v2 still needs: {sps}"
    );
    let err = fails(&["tag", "create", s(&table), "v3", "--expires-in", "7 days"]);
    assert!(err.contains("--expires-in"), "{err}");

    // The tag's savepoint cannot be deleted while the tag names it.
    let sps = json(&["savepoint", "list", s(&table), "--json"]);
    assert!(sps
        .as_array()
        .unwrap()
        .iter()
        .any(|sp| sp["instant"] == t1.as_str()));
    fails(&["savepoint", "delete", s(&table), &t1]);

    // Drop keeps the savepoint with --retain-savepoint, deletes it by default.
    let out = ok(&["tag", "drop", s(&table), "v2", "--retain-savepoint"]);
    assert!(out.contains("tag v2 dropped"), "{out}");
    let sps = json(&["savepoint", "list", s(&table), "--json"]);
    assert!(sps
        .as_array()
        .unwrap()
        .iter()
        .any(|sp| sp["instant"] == t2.as_str()));
    ok(&["tag", "drop", s(&table), "v1"]);
    let sps = json(&["savepoint", "list", s(&table), "--json"]);
    assert!(!sps
        .as_array()
        .unwrap()
        .iter()
        .any(|sp| sp["instant"] == t1.as_str()));
    assert!(tags(&table, &["--all"]).is_empty());
    let err = fails(&["read", s(&table), "--tag", "v1"]);
    assert!(err.contains("tag v1 on main: no such tag"), "{err}");
    let err = fails(&["tag", "drop", s(&table), "v1"]);
    assert!(err.contains("no such tag"), "{err}");
    let out = ok(&["tag", "drop", s(&table), "v1", "--if-exists"]);
    assert!(out.contains("nothing to do"), "{out}");
}

#[test]
fn test_tag_expire_removes_expired_tags_and_their_savepoints() {
    let (_dir, table) = setup("cow");
    let t1 = instants(&table)[0]["timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    ok(&["tag", "create", s(&table), "soon", "--expires-in", "1s"]);
    assert_eq!(tags(&table, &[]).len(), 1);
    // Wait until the expiry has certainly passed (a wall-clock wait, not a timing assertion).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(tags(&table, &[]).is_empty(), "expired tags are not listed");
    let all = tags(&table, &["--all"]);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["expired"], true);
    let text = ok(&["tag", "list", s(&table), "--all"]);
    assert!(text.contains("expired"), "{text}");
    let err = fails(&["read", s(&table), "--tag", "soon"]);
    assert!(err.contains("expired"), "{err}");

    let out = json(&["tag", "expire", s(&table), "--json"]);
    assert_eq!(out["expired"], serde_json::json!(["soon"]));
    assert!(tags(&table, &["--all"]).is_empty());
    let sps = json(&["savepoint", "list", s(&table), "--json"]);
    assert!(sps.as_array().unwrap().is_empty(), "{sps}");
    assert!(ok(&["tag", "expire", s(&table)]).contains("no expired tags"));
    // The instant is free again.
    let again = json(&["tag", "create", s(&table), "soon", "--json"]);
    assert_eq!(again["tag"]["instant"], t1.as_str());
}

#[test]
fn test_tag_on_branch_and_branch_from_tag() {
    let (dir, table) = setup("cow");
    let before = rows_on(&table, "main");
    ok(&["tag", "create", s(&table), "v1"]);
    upsert_on(dir.path(), &table, "main", "c", "nyc", 30.0);

    // A branch from the tag starts at the tagged state.
    let out = ok(&["branch", "create", s(&table), "replay", "--from-tag", "v1"]);
    assert!(out.contains("from tag v1 on main"), "{out}");
    let list = branches(&table);
    assert_eq!(list[0]["from_tag"], "v1");
    assert_eq!(rows_on(&table, "replay"), before);
    let text = ok(&["branch", "list", s(&table)]);
    assert!(text.contains("FROM TAG") && text.contains("v1"), "{text}");

    // Tags belong to one branch.
    let w = upsert_on(dir.path(), &table, "replay", "a", "sf", 11.0);
    let t = json(&[
        "tag",
        "create",
        s(&table),
        "fix",
        "--branch",
        "replay",
        "--json",
    ]);
    assert_eq!(t["tag"]["instant"], w.as_str());
    let on_branch: Vec<String> = tags(&table, &["--branch", "replay"])
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(on_branch.contains(&"fix".to_string()), "{on_branch:?}");
    assert!(!tags(&table, &[]).iter().any(|t| t["name"] == "fix"));
    let err = fails(&["read", s(&table), "--tag", "fix"]);
    assert!(err.contains("tag fix on main"), "{err}");
    assert_eq!(
        id_fares(&read_jsonl(&table, &["--branch", "replay", "--tag", "fix"])),
        rows_on(&table, "replay")
    );
    let err = fails(&["tag", "create", s(&table), "x", "--branch", "nope"]);
    assert!(err.contains("branch nope does not exist"), "{err}");
}

#[test]
fn test_clean_on_branch_keeps_the_files_main_reads() {
    let (dir, table) = setup("cow");
    ok(&["branch", "create", s(&table), "audit"]);
    for round in 1..=3 {
        upsert_on(dir.path(), &table, "audit", "a", "sf", f64::from(round));
    }
    let main_rows = rows_on(&table, "main");
    let branch_rows = rows_on(&table, "audit");
    // One version per file group on the branch would delete main's slice of sf: it is kept.
    let cleaned = json(&[
        "clean",
        s(&table),
        "--branch",
        "audit",
        "--policy",
        "versions",
        "--retain",
        "1",
        "--json",
    ]);
    assert_eq!(cleaned["branch"], "audit");
    let main_files = json(&["files", s(&table), "--json", "--long"]);
    for slice in main_files.as_array().unwrap() {
        let name = slice["base_file"]["name"].as_str().unwrap();
        let partition = slice["partition"].as_str().unwrap();
        assert!(
            table.join(partition).join(name).exists(),
            "main's file {partition}/{name} was cleaned"
        );
    }
    assert!(
        cleaned["deleted"].as_u64().unwrap() > 0,
        "the branch's own superseded versions are cleanable: {cleaned}"
    );
    assert_eq!(rows_on(&table, "main"), main_rows);
    assert_eq!(rows_on(&table, "audit"), branch_rows);
    ok(&["validate", s(&table)]);
    ok(&["validate", s(&table), "--branch", "audit"]);
}

#[test]
fn test_savepoint_and_restore_on_branch_leave_main_alone() {
    let (dir, table) = setup("cow");
    ok(&["branch", "create", s(&table), "audit"]);
    let w1 = upsert_on(dir.path(), &table, "audit", "a", "sf", 1.0);
    let at_w1 = rows_on(&table, "audit");
    ok(&[
        "savepoint",
        "create",
        s(&table),
        "--branch",
        "audit",
        "--instant",
        &w1,
    ]);
    let sps = json(&[
        "savepoint",
        "list",
        s(&table),
        "--branch",
        "audit",
        "--json",
    ]);
    assert_eq!(sps.as_array().unwrap().len(), 1);
    // Main holds only the savepoint that pins the branch's base (a real Hudi savepoint, which
    // Java's cleaner honours), never the branch's own.
    let on_main = json(&["savepoint", "list", s(&table), "--json"]);
    let on_main = on_main.as_array().unwrap();
    assert_eq!(on_main.len(), 1, "{on_main:?}");
    assert_eq!(on_main[0]["comment"], "branch audit base", "{on_main:?}");
    upsert_on(dir.path(), &table, "audit", "a", "sf", 2.0);
    let main_rows = rows_on(&table, "main");
    let out = json(&[
        "restore",
        s(&table),
        "--branch",
        "audit",
        "--to",
        &w1,
        "--json",
    ]);
    assert_eq!(out["branch"], "audit");
    assert_eq!(rows_on(&table, "audit"), at_w1);
    assert_eq!(rows_on(&table, "main"), main_rows);
    ok(&["validate", s(&table), "--branch", "audit"]);
    let archived = ok(&["archive", s(&table), "--branch", "audit"]);
    assert!(archived.contains("(branch audit)"), "{archived}");
}

#[test]
fn test_hostile_names_are_refused_and_change_nothing() {
    let (dir, table) = setup("cow");
    ok(&["branch", "create", s(&table), "audit"]);
    ok(&["tag", "create", s(&table), "v1"]);
    let input = file(dir.path(), "x.csv", "id,city,fare,n\na,sf,1.0,9\n");
    let before = table_tree(&table);
    for name in ["../x", "a/b", "..", ".hidden", "a b"] {
        for args in [
            vec!["branch", "create", s(&table), name],
            vec!["branch", "drop", s(&table), name],
            vec!["branch", "publish", s(&table), name],
            vec!["read", s(&table), "--branch", name],
            vec!["write", s(&table), s(&input), "--branch", name],
            vec!["clean", s(&table), "--branch", name],
            vec!["timeline", s(&table), "--branch", name],
            vec!["tag", "list", s(&table), "--branch", name],
        ] {
            let err = fails(&args);
            assert!(
                err.contains("invalid branch name"),
                "{args:?}: not a clear error: {err}"
            );
        }
        for args in [
            vec!["tag", "create", s(&table), name],
            vec!["tag", "drop", s(&table), name],
        ] {
            let err = fails(&args);
            assert!(err.contains("invalid tag name"), "{args:?}: {err}");
        }
        let err = fails(&["read", s(&table), "--tag", name]);
        assert!(err.contains("not a valid tag name"), "{err}");
    }
    for reserved in ["main", "publications"] {
        let err = fails(&["branch", "create", s(&table), reserved]);
        assert!(err.contains("reserved"), "{err}");
    }
    assert_eq!(before, table_tree(&table), "a refusal changed the table");
    assert!(!dir.path().join("x").exists());
}

#[test]
fn test_missing_branch_is_an_error_and_never_created() {
    let (dir, table) = setup("cow");
    let input = file(dir.path(), "x.csv", "id,city,fare,n\na,sf,1.0,9\n");
    let before = table_tree(&table);
    for args in [
        vec!["read", s(&table), "--branch", "missing"],
        vec!["write", s(&table), s(&input), "--branch", "missing"],
        vec!["files", s(&table), "--branch", "missing"],
        vec!["timeline", s(&table), "--branch", "missing"],
        vec!["validate", s(&table), "--branch", "missing"],
        vec!["clean", s(&table), "--branch", "missing"],
        vec!["savepoint", "list", s(&table), "--branch", "missing"],
        vec!["branch", "publish", s(&table), "missing"],
        vec!["branch", "drop", s(&table), "missing"],
    ] {
        let err = fails(&args);
        assert!(
            err.contains("branch missing does not exist"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(before, table_tree(&table));
    assert!(!table.join(".hoodie/branches/missing").exists());

    // A new table is created on main only.
    let fresh = dir.path().join("fresh");
    let err = fails(&[
        "write",
        s(&fresh),
        s(&input),
        "--branch",
        "audit",
        "--type",
        "cow",
        "--key",
        "id",
    ]);
    assert!(err.contains("created on main only"), "{err}");
    assert!(!fresh.exists());
}

/// Branch and tag names are Unicode NFC: `--branch`, `--tag`, `branch create|drop|publish` and
/// `tag create|drop` take either spelling of `café` (precomposed U+00E9, or `e` + U+0301) for
/// one branch or tag, stored and listed under the precomposed (NFC) form.
#[test]
fn test_branch_and_tag_names_spelled_two_ways_are_one() {
    const NFC: &str = "caf\u{e9}";
    const NFD: &str = "cafe\u{301}";
    let (dir, table) = setup("cow");
    let created = json(&["branch", "create", s(&table), NFD, "--json"]);
    assert_eq!(created["branch"], NFC);
    let err = fails(&["branch", "create", s(&table), NFC]);
    assert!(err.contains("exists"), "{err}");
    upsert_on(dir.path(), &table, NFC, "a", "sf", 9.5);
    assert_eq!(rows_on(&table, NFD), rows_on(&table, NFC));
    assert!(rows_on(&table, NFD).contains(&pair("a", 9.5)));
    let list = branches(&table);
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["name"], NFC);

    let tag = json(&["tag", "create", s(&table), NFD, "--branch", NFD, "--json"]);
    assert_eq!(tag["tag"]["name"], NFC);
    let err = fails(&["tag", "create", s(&table), NFC, "--branch", NFC]);
    assert!(err.contains("exists"), "{err}");
    let listed = tags(&table, &["--branch", NFC]);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let at_tag = id_fares(&read_jsonl(&table, &["--branch", NFC, "--tag", NFD]));
    assert_eq!(at_tag, rows_on(&table, NFC));
    ok(&["tag", "drop", s(&table), NFC, "--branch", NFD]);
    assert!(tags(&table, &["--branch", NFC]).is_empty());

    let published = json(&["branch", "publish", s(&table), NFD, "--json"]);
    assert_eq!(published["publication"], 1);
    ok(&["branch", "drop", s(&table), NFC]);
    assert!(branches(&table).is_empty());
    assert!(!table.join(".hoodie/branches").join(NFC).exists());
}
