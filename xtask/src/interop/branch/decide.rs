//! Deciding that readings agree: row counts, data digests and, between table reads, meta
//! columns and schemas.

use std::collections::HashMap;

use serde_json::Value;

use super::record::Reading;
use crate::interop::report::Digest;

fn short(d: &Digest) -> String {
    let sha: String = d.data_sha256.chars().take(10).collect();
    format!("{} rows, data_sha256 {sha}", d.row_count)
}

/// Every reading agrees with the first: row count and `data_sha256`, and for two readings of
/// the table also `rows_sha256` and the schema. `Err` names every disagreement by label.
pub(super) fn decide_same(
    readings: &[Reading],
    ids: &[Result<usize, String>],
    answers: &HashMap<usize, Result<Value, String>>,
) -> Result<(), String> {
    let mut digests = Vec::new();
    let mut problems = Vec::new();
    for (r, id) in readings.iter().zip(ids) {
        let digest = id
            .clone()
            .and_then(|i| {
                answers
                    .get(&i)
                    .cloned()
                    .unwrap_or_else(|| Err("no answer from peer_digest.py".to_string()))
            })
            .and_then(|v| Digest::parse(&v));
        match digest {
            Ok(d) => digests.push((r, d)),
            Err(e) => problems.push(format!("{}: {e}", r.label)),
        }
    }
    if digests.len() != readings.len() || readings.len() < 2 {
        if problems.is_empty() {
            problems.push("fewer than two readings to compare".to_string());
        }
        return Err(problems.join("; "));
    }
    let mut it = digests.iter();
    let Some((first, d0)) = it.next() else {
        return Err("nothing to compare".to_string());
    };
    for (r, d) in it {
        if d.row_count != d0.row_count || d.data_sha256 != d0.data_sha256 {
            problems.push(format!(
                "{} ≠ {} ({} vs {})",
                r.label,
                first.label,
                short(d),
                short(d0)
            ));
        } else if r.meta && first.meta && d.rows_sha256 != d0.rows_sha256 {
            let s = |x: &str| x.chars().take(10).collect::<String>();
            problems.push(format!(
                "meta columns {} ≠ {} (rows_sha256 {} vs {})",
                r.label,
                first.label,
                s(&d.rows_sha256),
                s(&d0.rows_sha256)
            ));
        }
        if r.meta && first.meta && d.schema != d0.schema {
            problems.push(format!(
                "schema {} ≠ {} ({:?} vs {:?})",
                r.label, first.label, d.schema, d0.schema
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use serde_json::json;

    use super::*;

    fn digest(rows: u64, sha: &str, rows_sha: &str) -> Value {
        json!({
            "row_count": rows, "data_sha256": sha, "rows_sha256": rows_sha,
            "schema": [["id", "string", false]]
        })
    }

    fn readings(labels: &[(&str, bool)]) -> Vec<Reading> {
        labels
            .iter()
            .map(|(l, meta)| Reading {
                label: l.to_string(),
                request: Ok(Value::Null),
                meta: *meta,
            })
            .collect()
    }

    #[test]
    fn test_decide_same_all_agree_ok() {
        let r = readings(&[("a", true), ("b", true), ("m", false)]);
        let answers = HashMap::from([
            (0, Ok(digest(3, "x", "r"))),
            (1, Ok(digest(3, "x", "r"))),
            (2, Ok(digest(3, "x", "model-rows"))),
        ]);
        assert_eq!(decide_same(&r, &[Ok(0), Ok(1), Ok(2)], &answers), Ok(()));
    }

    #[test]
    fn test_decide_same_rows_differ_names_both_labels() {
        let r = readings(&[("hudi-rs main", true), ("arbor main", true)]);
        let answers = HashMap::from([(0, Ok(digest(3, "x", "r"))), (1, Ok(digest(2, "y", "r")))]);
        let e = decide_same(&r, &[Ok(0), Ok(1)], &answers).unwrap_err();
        assert!(
            e.starts_with("arbor main ≠ hudi-rs main (2 rows, data_sha256 y vs 3 rows"),
            "{e}"
        );
    }

    #[test]
    fn test_decide_same_meta_columns_differ_only_between_table_reads() {
        let r = readings(&[("a", true), ("b", true)]);
        let answers = HashMap::from([(0, Ok(digest(3, "x", "r1"))), (1, Ok(digest(3, "x", "r2")))]);
        let e = decide_same(&r, &[Ok(0), Ok(1)], &answers).unwrap_err();
        assert!(e.starts_with("meta columns b ≠ a"), "{e}");
        let r = readings(&[("a", true), ("m", false)]);
        assert_eq!(decide_same(&r, &[Ok(0), Ok(1)], &answers), Ok(()));
    }

    #[test]
    fn test_decide_same_missing_answer_error() {
        let r = readings(&[("a", true), ("b", true)]);
        let answers = HashMap::from([(0, Ok(digest(3, "x", "r")))]);
        let e = decide_same(&r, &[Ok(0), Err("no view".to_string())], &answers).unwrap_err();
        assert_eq!(e, "b: no view");
        let e = decide_same(&r, &[Ok(0), Ok(1)], &answers).unwrap_err();
        assert_eq!(e, "b: no answer from peer_digest.py");
    }
}
