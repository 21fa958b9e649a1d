//! Tables with Lance base files (`--base-format lance`, Hudi 1.2) through the CLI as a user
//! drives them: created from CSV, upserted from JSON lines and SQL, deleted by keys, compacted (MOR)
//! or clustered (COW), tagged, branched and published, cleaned, TTL'd and cloned; after every step
//! arbor's rows equal a model and hudi-rs reads the same rows.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::create_write::{fails, file, ok, read_jsonl, s};
use super::values::peer_rows;

/// `id -> (city, fare)` of arbor's rows.
fn rows_of(table: &Path, extra: &[&str]) -> BTreeMap<String, (String, f64)> {
    read_jsonl(table, extra)
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                (
                    r["city"].as_str().unwrap().to_string(),
                    r["fare"].as_f64().unwrap(),
                ),
            )
        })
        .collect()
}

/// Arbor's rows equal `want`, and so do hudi-rs's (when the peer is there).
fn check(table: &Path, want: &BTreeMap<String, (String, f64)>, step: &str) {
    assert_eq!(&rows_of(table, &[]), want, "{step}: arbor");
    if let Some(peer) = peer_rows(table) {
        let got: BTreeMap<String, (String, f64)> = peer
            .iter()
            .map(|r: &Value| {
                (
                    r["id"].as_str().unwrap().to_string(),
                    (
                        r["city"].as_str().unwrap().to_string(),
                        r["fare"].as_f64().unwrap(),
                    ),
                )
            })
            .collect();
        assert_eq!(&got, want, "{step}: hudi-rs");
    }
}

fn lance_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if !p.ends_with(".hoodie") {
                    stack.push(p);
                }
            } else {
                out.push(p.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
    }
    out.retain(|n| n.ends_with(".lance") || n.ends_with(".parquet"));
    out
}

fn walk(kind: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let t = dir.join(format!("trips_{kind}"));
    let csv = file(
        dir,
        "in.csv",
        "id,city,fare,ts\na,sf,1.5,1\nb,nyc,2.5,1\nc,sf,3.5,1\nd,la,4.5,1\ne,nyc,5.5,1\n",
    );
    ok(&[
        "create",
        s(&t),
        "--type",
        kind,
        "--key",
        "id",
        "--partition-by",
        "city",
        "--ordering",
        "ts",
        "--base-format",
        "lance",
        "--schema-from",
        s(&csv),
    ]);
    let props = std::fs::read_to_string(t.join(".hoodie/hoodie.properties")).unwrap();
    assert!(
        props.contains("hoodie.table.base.file.format=LANCE"),
        "{props}"
    );
    ok(&["write", s(&t), s(&csv), "--op", "insert"]);
    let mut want: BTreeMap<String, (String, f64)> = [
        ("a", "sf", 1.5),
        ("b", "nyc", 2.5),
        ("c", "sf", 3.5),
        ("d", "la", 4.5),
        ("e", "nyc", 5.5),
    ]
    .iter()
    .map(|(i, c, f)| (i.to_string(), (c.to_string(), *f)))
    .collect();
    check(&t, &want, "insert");
    let files = lance_files(&t);
    assert!(
        !files.is_empty() && files.iter().all(|f| f.ends_with(".lance")),
        "{files:?}"
    );

    let up = file(
        dir,
        "up.jsonl",
        "{\"id\":\"a\",\"city\":\"sf\",\"fare\":10.25,\"ts\":2}\n{\"id\":\"f\",\"city\":\"la\",\"fare\":6.5,\"ts\":2}\n",
    );
    ok(&["write", s(&t), s(&up), "--op", "upsert"]);
    want.insert("a".into(), ("sf".into(), 10.25));
    want.insert("f".into(), ("la".into(), 6.5));
    check(&t, &want, "upsert");

    // SQL: an INSERT INTO and an aggregate through DataFusion.
    let table_arg = format!("t={}", s(&t));
    ok(&[
        "sql",
        "INSERT INTO t (id, city, fare, ts) VALUES ('i', 'nyc', 9.75, 2)",
        "--table",
        &table_arg,
    ]);
    want.insert("i".into(), ("nyc".into(), 9.75));
    check(&t, &want, "sql insert");
    let sum = ok(&[
        "sql",
        "SELECT count(*) AS n FROM t WHERE city = 'nyc'",
        "--table",
        &table_arg,
        "--format",
        "jsonl",
    ]);
    let n = want.values().filter(|(c, _)| c == "nyc").count();
    assert!(sum.contains(&format!("\"n\":{n}")), "{sum}");

    let del = file(dir, "del.csv", "id,city,fare,ts\nb,nyc,0,3\n");
    ok(&["write", s(&t), s(&del), "--op", "delete"]);
    want.remove("b");
    check(&t, &want, "delete");
    assert_eq!(
        rows_of(&t, &["--where", "fare > 5"]).len(),
        want.values().filter(|(_, f)| *f > 5.0).count()
    );

    if kind == "mor" {
        ok(&["compact", s(&t)]);
        check(&t, &want, "compaction");
    } else {
        // Clustering rewrites the small slices as sorted Lance files.
        ok(&["cluster", s(&t), "--sort-by", "fare"]);
        check(&t, &want, "clustering");
        let files = lance_files(&t);
        assert!(files.iter().all(|f| f.ends_with(".lance")), "{files:?}");
    }
    ok(&["tag", "create", s(&t), "v1"]);
    let at_v1 = want.clone();
    ok(&["branch", "create", s(&t), "exp"]);
    let br = file(dir, "br.csv", "id,city,fare,ts\ng,sf,7.5,4\n");
    ok(&["write", s(&t), s(&br), "--op", "upsert", "--branch", "exp"]);
    check(&t, &want, "branch write leaves main");
    ok(&["branch", "publish", s(&t), "exp"]);
    want.insert("g".into(), ("sf".into(), 7.5));
    check(&t, &want, "publish");
    ok(&["clean", s(&t), "--policy", "commits", "--retain", "1"]);
    check(&t, &want, "clean");
    assert_eq!(rows_of(&t, &["--tag", "v1"]), at_v1, "tag after clean");

    ok(&["ttl", "set", s(&t), "--policy", "count", "--retain", "2"]);
    ok(&["ttl", "run", s(&t)]);
    // The two greatest city values stay (sf, nyc); la goes.
    want.retain(|_, (c, _)| c != "la");
    check(&t, &want, "ttl");
    ok(&["validate", s(&t)]);

    let deep = dir.join("deep");
    ok(&["clone", s(&t), s(&deep), "--deep"]);
    check(&deep, &want, "deep clone");
    let shallow = dir.join("shallow");
    ok(&["clone", s(&t), s(&shallow)]);
    let cw = file(dir, "cw.csv", "id,city,fare,ts\nh,nyc,8.5,5\n");
    ok(&["write", s(&shallow), s(&cw), "--op", "upsert"]);
    let mut cloned = want.clone();
    cloned.insert("h".into(), ("nyc".into(), 8.5));
    assert_eq!(rows_of(&shallow, &[]), cloned, "shallow clone write");
    check(&t, &want, "source after clone write");
    ok(&["clone", "detach", s(&shallow)]);
    check(&shallow, &cloned, "detached clone");
}

#[test]
fn test_lance_cow_through_every_command_arbor_and_hudi_rs_agree() {
    walk("cow");
}

#[test]
fn test_lance_mor_through_every_command_arbor_and_hudi_rs_agree() {
    walk("mor");
}

#[test]
fn test_base_format_lance_refused_at_version_8_and_mismatch_on_existing_table() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = file(tmp.path(), "in.csv", "id,fare\na,1.5\n");
    let t = tmp.path().join("t");
    let before = super::create_write::tree(tmp.path());
    let e = fails(&[
        "create",
        s(&t),
        "--type",
        "cow",
        "--key",
        "id",
        "--base-format",
        "lance",
        "--table-version",
        "8",
        "--schema-from",
        s(&csv),
    ]);
    assert!(e.contains("version 9"), "{e}");
    assert_eq!(super::create_write::tree(tmp.path()), before);
    ok(&["write", s(&t), s(&csv), "--type", "cow", "--key", "id"]);
    let e = fails(&["write", s(&t), s(&csv), "--base-format", "lance"]);
    assert!(
        e.contains("base file format") && e.contains("PARQUET"),
        "{e}"
    );
}
