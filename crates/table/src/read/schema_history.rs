//! Columns renamed under Spark's schema on read (`hoodie.schema.on.read.enable`).
//!
//! With schema on read, Java gives every column an id and keeps each schema version in
//! `.hoodie/.schema/<instant>_<completion>.schemacommit` (JSON: `{"schemas": [{"version_id",
//! "fields": [{"id", "name", "type"}]}]}`, every version in the latest file). `ALTER TABLE
//! RENAME COLUMN` then changes only the schema: files written before keep the old name, and
//! Java reads them by id. arbor matches columns by name, so it would read such a column of an
//! older file as null: until it maps ids, it refuses to read or write a table with a renamed
//! column, naming the rename.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_storage::Storage;
use serde_json::Value;

use crate::error::{Result, TableError};

/// The directory of Java's schema history.
const SCHEMA_DIR: &str = ".hoodie/.schema";

/// One column whose name changed between schema versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rename {
    /// The name in the oldest version that has the column (dotted for nested fields).
    pub from: String,
    /// The name in the latest version.
    pub to: String,
}

/// The renamed columns the table's schema history records (empty without a history).
pub(crate) async fn renamed_columns(storage: &dyn Storage) -> Result<Vec<Rename>> {
    let (objects, _) = storage.list_dir(SCHEMA_DIR).await?;
    let latest = objects
        .iter()
        .map(|o| o.key.rsplit('/').next().unwrap_or(&o.key).to_string())
        .filter(|name| is_completed_schema_commit(name))
        .max();
    let Some(name) = latest else {
        return Ok(Vec::new());
    };
    let key = format!("{SCHEMA_DIR}/{name}");
    let (bytes, _) = storage.get(&key).await?;
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| TableError::Corrupt {
        path: key.clone(),
        reason: format!("not a schema history: {e}"),
    })?;
    Ok(renames_in(&doc))
}

/// `<digits>_<digits>.schemacommit`: a completed schema commit.
fn is_completed_schema_commit(name: &str) -> bool {
    name.strip_suffix(".schemacommit")
        .and_then(|stem| stem.split_once('_'))
        .is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        })
}

/// The renames across the versions of a schema history document.
fn renames_in(doc: &Value) -> Vec<Rename> {
    // id -> (version, dotted name), every version.
    let mut names: BTreeMap<i64, Vec<(i64, String)>> = BTreeMap::new();
    let versions = doc
        .get("schemas")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for schema in versions {
        let version = schema
            .get("version_id")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        collect_fields(schema, "", version, &mut names);
    }
    let mut out = Vec::new();
    for mut seen in names.into_values() {
        seen.sort();
        let (Some(first), Some(last)) = (seen.first(), seen.last()) else {
            continue;
        };
        if seen.iter().any(|(_, n)| *n != last.1) {
            out.push(Rename {
                from: first.1.clone(),
                to: last.1.clone(),
            });
        }
    }
    out.sort_by(|a, b| a.to.cmp(&b.to));
    out
}

fn collect_fields(
    record: &Value,
    prefix: &str,
    version: i64,
    out: &mut BTreeMap<i64, Vec<(i64, String)>>,
) {
    let fields = record
        .get("fields")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for f in fields {
        let (Some(id), Some(name)) = (
            f.get("id").and_then(Value::as_i64),
            f.get("name").and_then(Value::as_str),
        ) else {
            continue;
        };
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        if let Some(nested) = f.get("type").filter(|t| t.is_object()) {
            collect_fields(nested, &path, version, out);
        }
        out.entry(id).or_default().push((version, path));
    }
}

/// `Err(Unsupported)` naming the renames when the table has renamed columns; `what` is the
/// refused operation ("reading", "writing").
pub(crate) async fn refuse_renamed_columns(storage: &dyn Storage, what: &str) -> Result<()> {
    match refusal(storage, what).await? {
        Some(reason) => Err(TableError::Unsupported {
            reason: reason.to_string(),
        }),
        None => Ok(()),
    }
}

/// The refusal text of [`refuse_renamed_columns`], `None` when no column was renamed.
pub(crate) async fn refusal(storage: &dyn Storage, what: &str) -> Result<Option<Arc<str>>> {
    let renames = renamed_columns(storage).await?;
    if renames.is_empty() {
        return Ok(None);
    }
    let shown: Vec<String> = renames
        .iter()
        .map(|r| format!("{} -> {}", r.from, r.to))
        .collect();
    Ok(Some(Arc::from(format!(
        "{what} a table whose columns were renamed under Spark's schema on read ({}; \
             {SCHEMA_DIR}): files written before the rename keep the old name, and arbor, which \
             matches columns by name, would read them as null; use Spark with \
             hoodie.schema.on.read.enable=true",
        shown.join(", ")
    ))))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn test_a_rename_between_versions_is_found_with_nested_fields() {
        let doc: Value = serde_json::from_str(
            r#"{"schemas":[
              {"version_id":20261206012708948,"fields":[
                {"id":5,"name":"id","type":"string"},
                {"id":7,"name":"amount","type":"double"},
                {"id":9,"name":"addr","type":{"type":"record","fields":[{"id":10,"name":"zip5","type":"string"}]}}]},
              {"version_id":0,"fields":[
                {"id":5,"name":"id","type":"string"},
                {"id":7,"name":"fare","type":"double"},
                {"id":9,"name":"addr","type":{"type":"record","fields":[{"id":10,"name":"zip","type":"string"}]}}]}
            ]}"#,
        )
        .unwrap();
        assert_eq!(
            renames_in(&doc),
            vec![
                Rename {
                    from: "addr.zip".into(),
                    to: "addr.zip5".into()
                },
                Rename {
                    from: "fare".into(),
                    to: "amount".into()
                },
            ]
        );
    }

    #[test]
    fn test_added_columns_and_type_changes_are_not_renames() {
        let doc: Value = serde_json::from_str(
            r#"{"schemas":[
              {"version_id":2,"fields":[{"id":1,"name":"v","type":"long"},{"id":2,"name":"note","type":"string"}]},
              {"version_id":0,"fields":[{"id":1,"name":"v","type":"int"}]}
            ]}"#,
        )
        .unwrap();
        assert!(renames_in(&doc).is_empty());
        assert!(is_completed_schema_commit(
            "20261206012708948_20261206012709016.schemacommit"
        ));
        assert!(!is_completed_schema_commit(
            "20261206012708948.schemacommit.inflight"
        ));
        assert!(!is_completed_schema_commit(
            "20261206012708948.schemacommit.requested"
        ));
    }
}
