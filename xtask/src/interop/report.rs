//! Deciding each check from its three digests, and printing the matrix.

use std::collections::HashMap;

use serde_json::Value;

use super::check::{Check, Kind};

/// The `_hoodie_*` meta columns, which the model does not have.
const META: [&str; 5] = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
];

/// What `peer_digest.py` says about one set of rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Digest {
    pub row_count: u64,
    pub data_sha256: String,
    /// The digest of whole rows, meta columns included.
    pub rows_sha256: String,
    /// `(name, arrow type)` per column.
    pub schema: Vec<(String, String)>,
}

impl Digest {
    /// Reads the keys `row_count`, `data_sha256`, `schema` of an answer.
    pub fn parse(v: &Value) -> Result<Digest, String> {
        let bad = || format!("malformed digest: {v}");
        let row_count = v.get("row_count").and_then(Value::as_u64).ok_or_else(bad)?;
        let data_sha256 = v
            .get("data_sha256")
            .and_then(Value::as_str)
            .ok_or_else(bad)?
            .to_string();
        let rows_sha256 = v
            .get("rows_sha256")
            .and_then(Value::as_str)
            .ok_or_else(bad)?
            .to_string();
        let mut schema = Vec::new();
        for col in v.get("schema").and_then(Value::as_array).ok_or_else(bad)? {
            let name = col.get(0).and_then(Value::as_str).ok_or_else(bad)?;
            let ty = col.get(1).and_then(Value::as_str).ok_or_else(bad)?;
            schema.push((name.to_string(), ty.to_string()));
        }
        Ok(Digest {
            row_count,
            data_sha256,
            rows_sha256,
            schema,
        })
    }

    fn short(&self) -> String {
        let sha: String = self.data_sha256.chars().take(10).collect();
        format!("{} rows, data_sha256 {sha}", self.row_count)
    }

    fn data_columns(&self) -> Vec<(String, String)> {
        self.schema
            .iter()
            .filter(|(n, _)| !META.contains(&n.as_str()))
            .cloned()
            .collect()
    }
}

/// The first difference of two schemas, in words.
fn schema_difference(a: &[(String, String)], b: &[(String, String)]) -> Option<String> {
    let show = |c: Option<&(String, String)>| match c {
        Some((n, t)) => format!("{n}: {t}"),
        None => "(no column)".to_string(),
    };
    (0..a.len().max(b.len())).find_map(|i| {
        let (x, y) = (a.get(i), b.get(i));
        (x != y).then(|| format!("column {i}: {} vs {}", show(x), show(y)))
    })
}

/// Compares arbor's, hudi-rs' and the model's digests: equal row counts and `data_sha256` for
/// all three, arbor's columns (names and types) equal to hudi-rs', and arbor's data columns
/// equal to the model's. `Err` names every disagreement.
pub fn compare(arbor: &Digest, peer: &Digest, model: &Digest) -> Result<(), String> {
    let mut problems = Vec::new();
    let same =
        |x: &Digest, y: &Digest| x.row_count == y.row_count && x.data_sha256 == y.data_sha256;
    for (xn, x, yn, y) in [
        ("arbor", arbor, "peer", peer),
        ("arbor", arbor, "model", model),
        ("peer", peer, "model", model),
    ] {
        if !same(x, y) {
            problems.push(format!("{xn}≠{yn} ({} vs {})", x.short(), y.short()));
        }
    }
    // Both readers read the same files, so even the meta columns (commit time, sequence
    // number, record key, partition path, file name) must agree.
    if same(arbor, peer) && arbor.rows_sha256 != peer.rows_sha256 {
        let short = |s: &str| s.chars().take(10).collect::<String>();
        problems.push(format!(
            "meta columns arbor≠peer (rows_sha256 {} vs {})",
            short(&arbor.rows_sha256),
            short(&peer.rows_sha256)
        ));
    }
    if let Some(d) = schema_difference(&arbor.schema, &peer.schema) {
        problems.push(format!("schema arbor≠peer at {d}"));
    }
    if let Some(d) = schema_difference(&arbor.data_columns(), &model.schema) {
        problems.push(format!("data schema arbor≠model at {d}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// The verdict of one check: `Ok(rows)` (rows when it compared rows) or `Err(why)`.
pub fn decide(
    check: &Check,
    answers: &HashMap<usize, Result<Value, String>>,
    slices: &HashMap<usize, Result<Vec<String>, String>>,
    ids: &CheckIds,
) -> Result<Option<u64>, String> {
    match &check.kind {
        Kind::Local(r) => r.clone().map(|()| None),
        Kind::Hidden(hidden) => {
            let hidden = hidden.as_ref().map_err(Clone::clone)?;
            let planned = |name: &str, id: Option<usize>| {
                id.and_then(|i| slices.get(&i))
                    .ok_or_else(|| format!("{name}: no file slices from hudi-rs"))?
                    .as_ref()
                    .map_err(|e| format!("{name}: {e}"))
            };
            let original = planned("original", ids.original_slices)?;
            let copy = planned("copy", ids.copy_slices)?;
            super::metadata::decide_hidden(hidden, original, copy).map(|()| None)
        }
        Kind::Rows { .. } => {
            let side = |name: &str, id: Option<usize>, pending: &Option<String>| {
                if let Some(e) = pending {
                    return Err(format!("{name}: {e}"));
                }
                let answer = id
                    .and_then(|i| answers.get(&i))
                    .ok_or_else(|| format!("{name}: no answer from peer_digest.py"))?;
                let v = answer.as_ref().map_err(|e| format!("{name}: {e}"))?;
                Digest::parse(v).map_err(|e| format!("{name}: {e}"))
            };
            let a = side("arbor", ids.arbor, &ids.arbor_error);
            let p = side("peer", ids.peer, &ids.peer_error);
            let m = side("model", ids.model, &ids.model_error);
            match (a, p, m) {
                (Ok(a), Ok(p), Ok(m)) => compare(&a, &p, &m).map(|()| Some(a.row_count)),
                (a, p, m) => Err([a.err(), p.err(), m.err()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join("; ")),
            }
        }
    }
}

/// Which request (index in the batch) answers each side of a check, or why a side has none.
#[derive(Debug, Default, Clone)]
pub struct CheckIds {
    pub arbor: Option<usize>,
    pub peer: Option<usize>,
    pub model: Option<usize>,
    pub arbor_error: Option<String>,
    pub peer_error: Option<String>,
    pub model_error: Option<String>,
    /// The file-slice requests of a hidden-instant proof: the original table, the copy.
    pub original_slices: Option<usize>,
    pub copy_slices: Option<usize>,
}

/// Prints the matrix (one line per scenario instant, one cell per query) and the details of
/// every failure; returns `(passed, failed)`.
pub fn print(checks: &[Check], verdicts: &[Result<Option<u64>, String>]) -> (usize, usize) {
    let mut passed = 0;
    let mut failed = Vec::new();
    let mut lines: Vec<(String, String, String, Vec<String>)> = Vec::new();
    for (c, v) in checks.iter().zip(verdicts) {
        let cell = match v {
            Ok(Some(rows)) => format!("{}:ok({rows})", c.query),
            Ok(None) => format!("{}:ok", c.query),
            Err(_) => format!("{}:FAIL", c.query),
        };
        match v {
            Ok(_) => passed += 1,
            Err(e) => failed.push(format!(
                "FAIL {} {} {} {}: {e}",
                c.scenario, c.position, c.instant, c.query
            )),
        }
        match lines.last_mut() {
            Some((s, p, _, cells)) if *s == c.scenario && *p == c.position => cells.push(cell),
            _ => lines.push((
                c.scenario.clone(),
                c.position.clone(),
                c.instant.clone(),
                vec![cell],
            )),
        }
    }
    println!(
        "{:<20} {:<26} {:<17}  checks (query:ok(rows) = arbor, hudi-rs and model agree; mdt: validate_table; hidden: hudi-rs lists through FILES)",
        "scenario", "instant", "requested"
    );
    for (s, p, i, cells) in &lines {
        println!("{s:<20} {p:<26} {i:<17}  {}", cells.join("  "));
    }
    for f in &failed {
        println!("{f}");
    }
    (passed, failed.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(rows: u64, sha: &str, cols: &[(&str, &str)]) -> Digest {
        Digest {
            row_count: rows,
            data_sha256: sha.to_string(),
            rows_sha256: format!("{sha}-rows"),
            schema: cols
                .iter()
                .map(|(n, t)| (n.to_string(), t.to_string()))
                .collect(),
        }
    }

    const ARBOR_COLS: [(&str, &str); 2] = [("_hoodie_commit_time", "string"), ("id", "string")];

    #[test]
    fn test_compare_all_agree_ok() {
        let a = d(3, "abc", &ARBOR_COLS);
        let m = d(3, "abc", &[("id", "string")]);
        assert_eq!(compare(&a, &a.clone(), &m), Ok(()));
    }

    #[test]
    fn test_compare_peer_rows_differ_names_pairs() {
        let a = d(3, "abc", &ARBOR_COLS);
        let p = d(2, "abd", &ARBOR_COLS);
        let m = d(3, "abc", &[("id", "string")]);
        let e = compare(&a, &p, &m).err().unwrap_or_default();
        assert!(e.contains("arbor≠peer"), "{e}");
        assert!(e.contains("peer≠model"), "{e}");
        assert!(!e.contains("arbor≠model"), "{e}");
    }

    #[test]
    fn test_compare_type_differs_schema_error() {
        let a = d(3, "abc", &ARBOR_COLS);
        let p = d(
            3,
            "abc",
            &[("_hoodie_commit_time", "string"), ("id", "large_string")],
        );
        let m = d(3, "abc", &[("id", "string")]);
        let e = compare(&a, &p, &m).err().unwrap_or_default();
        assert!(
            e.contains("schema arbor≠peer at column 1: id: string vs id: large_string"),
            "{e}"
        );
    }

    #[test]
    fn test_compare_model_column_missing_data_schema_error() {
        let a = d(3, "abc", &ARBOR_COLS);
        let m = d(3, "abc", &[("id", "string"), ("x", "int64")]);
        let e = compare(&a, &a.clone(), &m).err().unwrap_or_default();
        assert!(e.contains("data schema arbor≠model at column 1"), "{e}");
    }

    #[test]
    fn test_compare_meta_columns_differ_error() {
        let a = d(3, "abc", &ARBOR_COLS);
        let mut p = a.clone();
        p.rows_sha256 = "other".to_string();
        let m = d(3, "abc", &[("id", "string")]);
        let e = compare(&a, &p, &m).err().unwrap_or_default();
        assert!(e.starts_with("meta columns arbor≠peer"), "{e}");
    }

    #[test]
    fn test_digest_parse_missing_key_error() {
        let v: Value = serde_json::json!({"row_count": 1, "schema": []});
        assert!(Digest::parse(&v).is_err());
        let v: Value = serde_json::json!({
            "row_count": 1, "data_sha256": "x", "rows_sha256": "x-rows",
            "schema": [["a", "int64", true]]
        });
        assert_eq!(Digest::parse(&v), Ok(d(1, "x", &[("a", "int64")])));
    }
}
