//! Columns renamed under Spark's schema on read (`hoodie.schema.on.read.enable`).
//!
//! With schema on read, Java gives every column an id and keeps each schema version in
//! `.hoodie/.schema/<instant>_<completion>.schemacommit` (JSON: `{"schemas": [{"version_id",
//! "fields": [{"id", "name", "type"}]}]}`, every version in the latest file). `ALTER TABLE
//! RENAME COLUMN` then changes only the schema: files written before keep the old name, and
//! Java reads them by id, with the schema version of the file's instant (the greatest version
//! id at or before it, `SerDeHelper.searchSchema`; none: by name).
//!
//! arbor does the same on read ([`RenamedColumns`]): a base file or log block written at an
//! instant gets the names of that instant's version, translated to the latest names before
//! its rows meet the read schema. A column whose latest name is not in that version (added
//! since) reads as null even when the file has a column of that name (a dropped column's
//! name, reused). Renames inside lists and maps are not mapped: reading such a table is
//! refused, naming them. Writing a table with renamed columns is refused too (arbor would
//! have to keep the schema history), naming the rename.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_storage::Storage;
use arrow::array::{Array, ArrayRef, AsArray, StructArray};
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
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
    /// Whether the column is inside a list or a map (not mapped on read).
    pub in_collection: bool,
}

/// One field of one schema version: its path (names from the top) and whether the path
/// goes through a list element or a map value.
#[derive(Debug, Clone)]
struct FieldAt {
    path: Vec<String>,
    in_collection: bool,
}

/// The names one schema version gives the latest schema's columns.
#[derive(Debug, Default)]
pub(crate) struct VersionNames {
    /// Latest top-level name -> the name in this version (`None`: not in this version).
    top: BTreeMap<String, Option<String>>,
    /// Name in this version -> latest name, for the top-level columns in both.
    to_latest: BTreeMap<String, String>,
    /// Struct fields renamed since this version: path in this version -> latest field name.
    nested: BTreeMap<Vec<String>, String>,
}

/// The schema history of a table whose columns were renamed, as needed to read its files.
#[derive(Debug)]
pub(crate) struct RenamedColumns {
    /// Version id -> the names of that version.
    versions: BTreeMap<u64, Arc<VersionNames>>,
    /// The latest (dotted) names of the renamed columns and fields.
    renamed: Vec<String>,
}

impl RenamedColumns {
    /// The names of the version a file or log block written at `instant` has: the greatest
    /// version at or before it; `None` (read by name) before the first version or for an
    /// instant that is not a number.
    pub(crate) fn at(&self, instant: &str) -> Option<&Arc<VersionNames>> {
        let t: u64 = instant.parse().ok()?;
        self.versions.range(..=t).next_back().map(|(_, v)| v)
    }

    /// Whether the (dotted) column `column` was renamed, or is inside a renamed one: Java
    /// keeps its statistics of older files under the old name, so statistics under the
    /// latest name do not cover every file, and data skipping must not use them.
    pub(crate) fn is_renamed(&self, column: &str) -> bool {
        self.renamed.iter().any(|r| {
            column == r
                || column
                    .strip_prefix(r.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
        })
    }
}

impl VersionNames {
    /// The columns to read from a file with `file_schema` for the latest-named columns
    /// `wanted`: the name each has in this version, when the file has it.
    pub(crate) fn file_columns(&self, wanted: &SchemaRef, file_schema: &SchemaRef) -> Vec<String> {
        wanted
            .fields()
            .iter()
            .filter_map(|f| match self.top.get(f.name()) {
                Some(Some(old)) => Some(old.clone()),
                Some(None) => None,
                None => Some(f.name().clone()),
            })
            .filter(|n| file_schema.index_of(n).is_ok())
            .collect()
    }

    /// `batch` (read from a file of this version) with the latest names: renamed columns and
    /// struct fields take their latest name; a column whose name the latest schema gives to
    /// another column (or to one this version lacks) is left out.
    pub(crate) fn to_latest(&self, batch: &RecordBatch, path: &str) -> Result<RecordBatch> {
        let schema = batch.schema();
        let mut fields: Vec<FieldRef> = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        for (field, column) in schema.fields().iter().zip(batch.columns()) {
            let name = match self.to_latest.get(field.name()) {
                Some(latest) => latest.clone(),
                None if self.top.contains_key(field.name()) => continue,
                None => field.name().clone(),
            };
            let mut at = vec![field.name().clone()];
            let (f, c) = self.rename_nested(field, column.clone(), &mut at, path)?;
            fields.push(Arc::new(f.as_ref().clone().with_name(name)));
            columns.push(c);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        RecordBatch::try_new_with_options(
            Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())),
            columns,
            &options,
        )
        .map_err(|e| TableError::Unsupported {
            reason: format!("renaming the columns of {path} to the latest schema: {e}"),
        })
    }

    /// A struct column with its fields renamed (paths in this version's names).
    fn rename_nested(
        &self,
        field: &FieldRef,
        column: ArrayRef,
        at: &mut Vec<String>,
        path: &str,
    ) -> Result<(FieldRef, ArrayRef)> {
        let DataType::Struct(children) = field.data_type() else {
            return Ok((field.clone(), column));
        };
        if !self.nested.keys().any(|k| k.starts_with(at)) {
            return Ok((field.clone(), column));
        }
        let Some(array) = column.as_struct_opt() else {
            return Ok((field.clone(), column));
        };
        let mut new_fields: Vec<FieldRef> = Vec::new();
        let mut new_columns: Vec<ArrayRef> = Vec::new();
        for (child, child_column) in children.iter().zip(array.columns()) {
            at.push(child.name().clone());
            let renamed = self.nested.get(at.as_slice()).cloned();
            let (f, c) = self.rename_nested(child, child_column.clone(), at, path)?;
            at.pop();
            let f = match renamed {
                Some(name) => Arc::new(f.as_ref().clone().with_name(name)),
                None => f,
            };
            new_fields.push(f);
            new_columns.push(c);
        }
        let fields = Fields::from(new_fields);
        let rebuilt = StructArray::try_new(fields.clone(), new_columns, array.nulls().cloned())
            .map_err(|e| TableError::Unsupported {
                reason: format!(
                    "renaming the fields of {} in {path} to the latest schema: {e}",
                    at.join(".")
                ),
            })?;
        let field = Field::new(field.name(), DataType::Struct(fields), field.is_nullable())
            .with_metadata(field.metadata().clone());
        Ok((Arc::new(field), Arc::new(rebuilt)))
    }
}

/// What the table's schema history says about renamed columns.
#[derive(Debug)]
pub(crate) enum History {
    /// No history, or no column renamed: files are read by name.
    ByName,
    /// Renamed columns, mapped per file.
    Renamed(Arc<RenamedColumns>),
    /// Renames arbor cannot map (inside lists or maps): reading is refused with this reason.
    Refused(Arc<str>),
}

impl History {
    /// The mapping (renamed columns) and the refusal (unmappable renames), at most one set.
    pub(crate) fn split(self) -> (Option<Arc<RenamedColumns>>, Option<Arc<str>>) {
        match self {
            History::ByName => (None, None),
            History::Renamed(r) => (Some(r), None),
            History::Refused(why) => (None, Some(why)),
        }
    }
}

/// The latest completed schema commit's document, if the table has a schema history.
async fn latest_history(storage: &dyn Storage) -> Result<Option<Value>> {
    let (objects, _) = storage.list_dir(SCHEMA_DIR).await?;
    let latest = objects
        .iter()
        .map(|o| o.key.rsplit('/').next().unwrap_or(&o.key).to_string())
        .filter(|name| is_completed_schema_commit(name))
        .max();
    let Some(name) = latest else {
        return Ok(None);
    };
    let key = format!("{SCHEMA_DIR}/{name}");
    let (bytes, _) = storage.get(&key).await?;
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| TableError::Corrupt {
        path: key.clone(),
        reason: format!("not a schema history: {e}"),
    })?;
    Ok(Some(doc))
}

/// How files of this table are read given its schema history.
pub(crate) async fn load(storage: &dyn Storage) -> Result<History> {
    let Some(doc) = latest_history(storage).await? else {
        return Ok(History::ByName);
    };
    let versions = versions_in(&doc);
    let renames = renames_in(&versions);
    if renames.is_empty() {
        return Ok(History::ByName);
    }
    let unmapped: Vec<&Rename> = renames.iter().filter(|r| r.in_collection).collect();
    if !unmapped.is_empty() {
        let shown: Vec<String> = unmapped
            .iter()
            .map(|r| format!("{} -> {}", r.from, r.to))
            .collect();
        return Ok(History::Refused(Arc::from(format!(
            "reading a table whose fields inside lists or maps were renamed under Spark's \
             schema on read ({}; {SCHEMA_DIR}): arbor maps renamed columns and struct fields \
             only; use Spark with hoodie.schema.on.read.enable=true",
            shown.join(", ")
        ))));
    }
    let mut renamed = names_by_version(&versions);
    renamed.renamed = renames.into_iter().map(|r| r.to).collect();
    Ok(History::Renamed(Arc::new(renamed)))
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

/// Every version of a schema history document: version id -> field id -> field.
fn versions_in(doc: &Value) -> BTreeMap<u64, BTreeMap<i64, FieldAt>> {
    let mut out = BTreeMap::new();
    let schemas = doc
        .get("schemas")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for schema in schemas {
        let Some(version) = schema.get("version_id").and_then(Value::as_u64) else {
            continue;
        };
        let mut fields = BTreeMap::new();
        collect_record(schema, &[], false, &mut fields);
        out.insert(version, fields);
    }
    out
}

/// The fields of a record type, with their paths under `prefix`.
fn collect_record(
    record: &Value,
    prefix: &[String],
    in_collection: bool,
    out: &mut BTreeMap<i64, FieldAt>,
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
        let mut path = prefix.to_vec();
        path.push(name.to_string());
        if let Some(ty) = f.get("type") {
            collect_type(ty, &path, in_collection, out);
        }
        out.insert(
            id,
            FieldAt {
                path,
                in_collection,
            },
        );
    }
}

/// The fields of a nested type: a record's, or those inside a list element or map value.
fn collect_type(
    ty: &Value,
    path: &[String],
    in_collection: bool,
    out: &mut BTreeMap<i64, FieldAt>,
) {
    match ty.get("type").and_then(Value::as_str) {
        Some("record") => collect_record(ty, path, in_collection, out),
        Some("array") => {
            if let Some(element) = ty.get("element") {
                let mut p = path.to_vec();
                p.push("element".to_string());
                collect_type(element, &p, true, out);
            }
        }
        Some("map") => {
            for part in ["key", "value"] {
                if let Some(inner) = ty.get(part) {
                    let mut p = path.to_vec();
                    p.push(part.to_string());
                    collect_type(inner, &p, true, out);
                }
            }
        }
        _ => {}
    }
}

/// The renames across the versions: fields whose name (last path segment) differs between a
/// version and the latest one.
fn renames_in(versions: &BTreeMap<u64, BTreeMap<i64, FieldAt>>) -> Vec<Rename> {
    let Some((_, latest)) = versions.iter().next_back() else {
        return Vec::new();
    };
    let mut out: BTreeMap<i64, Rename> = BTreeMap::new();
    for fields in versions.values() {
        for (id, at) in fields {
            let Some(now) = latest.get(id) else { continue };
            if at.path.last() != now.path.last() && !out.contains_key(id) {
                out.insert(
                    *id,
                    Rename {
                        from: at.path.join("."),
                        to: now.path.join("."),
                        in_collection: at.in_collection || now.in_collection,
                    },
                );
            }
        }
    }
    let mut out: Vec<Rename> = out.into_values().collect();
    out.sort_by(|a, b| a.to.cmp(&b.to));
    out
}

/// Per version, the names it gives the latest schema's columns.
fn names_by_version(versions: &BTreeMap<u64, BTreeMap<i64, FieldAt>>) -> RenamedColumns {
    let latest = versions
        .iter()
        .next_back()
        .map(|(_, f)| f.clone())
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    for (version, fields) in versions {
        let mut names = VersionNames::default();
        for (id, now) in &latest {
            if now.in_collection {
                continue;
            }
            let then = fields.get(id).filter(|at| !at.in_collection);
            match now.path.as_slice() {
                [top] => {
                    let old = then.and_then(|at| match at.path.as_slice() {
                        [name] => Some(name.clone()),
                        _ => None,
                    });
                    if let Some(old) = &old {
                        names.to_latest.insert(old.clone(), top.clone());
                    }
                    names.top.insert(top.clone(), old);
                }
                [.., leaf] => {
                    if let Some(at) = then {
                        if at.path.last() != Some(leaf) {
                            names.nested.insert(at.path.clone(), leaf.clone());
                        }
                    }
                }
                [] => {}
            }
        }
        out.insert(*version, Arc::new(names));
    }
    RenamedColumns {
        versions: out,
        renamed: Vec::new(),
    }
}

/// `Err(Unsupported)` naming the renames when the table has renamed columns; `what` is the
/// refused operation ("writing").
pub(crate) async fn refuse_renamed_columns(storage: &dyn Storage, what: &str) -> Result<()> {
    let Some(doc) = latest_history(storage).await? else {
        return Ok(());
    };
    let renames = renames_in(&versions_in(&doc));
    if renames.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = renames
        .iter()
        .map(|r| format!("{} -> {}", r.from, r.to))
        .collect();
    Err(TableError::Unsupported {
        reason: format!(
            "{what} a table whose columns were renamed under Spark's schema on read ({}; \
             {SCHEMA_DIR}): arbor reads such a table by column id but does not write its \
             schema history; write it with Spark and hoodie.schema.on.read.enable=true",
            shown.join(", ")
        ),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use arrow::array::{Float64Array, StringArray};

    const HISTORY: &str = r#"{"schemas":[
      {"version_id":20261206012708948,"fields":[
        {"id":5,"name":"id","type":"string"},
        {"id":7,"name":"amount","type":"double"},
        {"id":9,"name":"addr","type":{"type":"record","fields":[{"id":10,"name":"zip5","type":"string"}]}},
        {"id":11,"name":"fare","type":"long"}]},
      {"version_id":0,"fields":[
        {"id":5,"name":"id","type":"string"},
        {"id":7,"name":"fare","type":"double"},
        {"id":9,"name":"addr","type":{"type":"record","fields":[{"id":10,"name":"zip","type":"string"}]}}]}
    ]}"#;

    fn renamed() -> RenamedColumns {
        names_by_version(&versions_in(&serde_json::from_str(HISTORY).unwrap()))
    }

    #[test]
    fn test_a_rename_between_versions_is_found_with_nested_fields() {
        let doc: Value = serde_json::from_str(HISTORY).unwrap();
        let renames = renames_in(&versions_in(&doc));
        let shown: Vec<(String, String)> = renames.into_iter().map(|r| (r.from, r.to)).collect();
        assert_eq!(
            shown,
            vec![
                ("addr.zip".to_string(), "addr.zip5".to_string()),
                ("fare".to_string(), "amount".to_string())
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
        assert!(renames_in(&versions_in(&doc)).is_empty());
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

    #[test]
    fn test_a_rename_inside_a_list_is_marked_unmapped() {
        let doc: Value = serde_json::from_str(
            r#"{"schemas":[
              {"version_id":3,"fields":[{"id":1,"name":"xs","type":{"type":"array","element-id":2,
                "element":{"type":"record","fields":[{"id":3,"name":"b","type":"int"}]},"element_optional":true}}]},
              {"version_id":0,"fields":[{"id":1,"name":"xs","type":{"type":"array","element-id":2,
                "element":{"type":"record","fields":[{"id":3,"name":"a","type":"int"}]},"element_optional":true}}]}
            ]}"#,
        )
        .unwrap();
        let renames = renames_in(&versions_in(&doc));
        assert_eq!(renames.len(), 1);
        assert!(renames[0].in_collection);
        assert_eq!(renames[0].from, "xs.element.a");
    }

    #[test]
    fn test_a_file_takes_the_version_at_or_before_its_instant() {
        let r = renamed();
        let old = r.at("20261206012708947").unwrap();
        assert_eq!(old.to_latest.get("fare"), Some(&"amount".to_string()));
        let new = r.at("20261206012708948").unwrap();
        assert_eq!(new.to_latest.get("amount"), Some(&"amount".to_string()));
        assert!(r.at("not-an-instant").is_none());
    }

    #[test]
    fn test_an_old_file_reads_with_the_latest_names_and_a_reused_name_as_absent() {
        let r = renamed();
        let names = r.at("20261206000000000").unwrap();
        let zip = Arc::new(Field::new("zip", DataType::Utf8, true));
        let addr_type = DataType::Struct(Fields::from(vec![zip.clone()]));
        let file_schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("fare", DataType::Float64, true),
            Field::new("addr", addr_type, true),
        ]));
        let addr = StructArray::new(
            Fields::from(vec![zip]),
            vec![Arc::new(StringArray::from(vec!["94110"])) as ArrayRef],
            None,
        );
        let batch = RecordBatch::try_new(
            file_schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["a"])),
                Arc::new(Float64Array::from(vec![1.5])),
                Arc::new(addr),
            ],
        )
        .unwrap();
        // The latest "fare" (id 11) is not in the old version: it is not read, though the file
        // has a column of that name (the old "fare" is the latest "amount").
        let wanted = Arc::new(Schema::new(vec![
            Field::new("amount", DataType::Float64, true),
            Field::new("fare", DataType::Int64, true),
        ]));
        assert_eq!(names.file_columns(&wanted, &file_schema), vec!["fare"]);
        let out = names.to_latest(&batch, "f.parquet").unwrap();
        let schema = out.schema();
        let shown: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(shown, vec!["id", "amount", "addr"]);
        let amount = out
            .column_by_name("amount")
            .unwrap()
            .as_primitive::<arrow::datatypes::Float64Type>();
        assert_eq!(amount.value(0), 1.5);
        let addr = out.column_by_name("addr").unwrap().as_struct();
        assert_eq!(addr.column_names(), vec!["zip5"]);
    }
}
