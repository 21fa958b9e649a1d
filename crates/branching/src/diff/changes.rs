//! Comparing two states' records of one partition by record key: which keys were inserted,
//! updated or deleted, and the change rows a diff outputs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arbor_format::meta;
use arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow::compute::interleave;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, Rows, SortField};

use super::state::{arrow_error, conform, record_keys};
use crate::error::{BranchingError, Result};

/// The column holding each change row's kind.
pub const CHANGE_TYPE: &str = "_change_type";

/// How one record key changed between two states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChangeKind {
    /// The key is only in the later state.
    Insert,
    /// The key is in both, with other values.
    Update,
    /// The key is only in the earlier state.
    Delete,
}

/// One changed key: its row in the earlier state (`before`) and in the later one (`after`),
/// indices into [`PartitionChanges::before`] and [`PartitionChanges::after`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyChange {
    pub before: Option<usize>,
    pub after: Option<usize>,
}

impl KeyChange {
    pub fn kind(&self) -> ChangeKind {
        match (self.before, self.after) {
            (None, _) => ChangeKind::Insert,
            (Some(_), None) => ChangeKind::Delete,
            (Some(_), Some(_)) => ChangeKind::Update,
        }
    }
}

/// The records of one partition's compared file groups in both states (data columns shaped to
/// one schema) and the keys that differ, in key order.
pub(crate) struct PartitionChanges {
    pub partition: String,
    pub before: RecordBatch,
    pub after: RecordBatch,
    pub changes: BTreeMap<String, KeyChange>,
    /// Every key read in the earlier state: its row and the file group holding it (`None`
    /// when the records carry no `_hoodie_file_name`).
    pub before_at: Option<HashMap<String, (usize, String)>>,
    /// The same for the later state.
    pub after_at: Option<HashMap<String, (usize, String)>>,
}

/// The file group of each row of `batch` (its `_hoodie_file_name`: a base file's name, or the
/// file id Java and arbor write into log records); `None` when the column is absent.
fn file_groups(batch: &RecordBatch) -> Option<Vec<String>> {
    let column = batch.column_by_name(meta::FILE_NAME)?;
    let text = arrow::compute::cast(column, &DataType::Utf8).ok()?;
    let names = text.as_any().downcast_ref::<StringArray>()?;
    Some(
        (0..names.len())
            .map(|i| {
                let name = names.value(i);
                arbor_fsview::parse_data_file_name(name, 0)
                    .ok()
                    .flatten()
                    .map_or_else(|| name.to_string(), |d| d.file_id().to_string())
            })
            .collect(),
    )
}

/// Key -> (row, file group) of one state's records.
fn located(
    keys: &[String],
    files: Option<Vec<String>>,
) -> Option<HashMap<String, (usize, String)>> {
    files.map(|files| {
        keys.iter()
            .zip(files)
            .enumerate()
            .map(|(row, (k, f))| (k.clone(), (row, f)))
            .collect()
    })
}

/// The row of each key of `keys`, refusing a key stored twice (a diff by key needs unique
/// keys).
fn index_keys(keys: &[String], partition: &str, label: &str) -> Result<HashMap<String, usize>> {
    let mut out = HashMap::with_capacity(keys.len());
    for (row, k) in keys.iter().enumerate() {
        if out.insert(k.clone(), row).is_some() {
            return Err(BranchingError::refused(
                format!("diff of {label}"),
                format!(
                    "record key {k:?} is stored twice in partition {partition:?} (written by \
                     inserts that did not look keys up); a diff by key needs unique keys"
                ),
            ));
        }
    }
    Ok(out)
}

/// Row equality across two batches of one schema, column by column: through the row format
/// where it encodes the type, else by comparing one-row slices.
struct RowEq {
    columns: Vec<ColumnEq>,
}

enum ColumnEq {
    Rows(Rows, Rows),
    Slices(ArrayRef, ArrayRef),
}

impl RowEq {
    fn new(a: &RecordBatch, b: &RecordBatch, label: &str) -> Result<RowEq> {
        let mut columns = Vec::with_capacity(a.num_columns());
        for (ca, cb) in a.columns().iter().zip(b.columns()) {
            let field = SortField::new(ca.data_type().clone());
            let eq = match RowConverter::new(vec![field]) {
                Ok(conv) => ColumnEq::Rows(
                    conv.convert_columns(std::slice::from_ref(ca))
                        .map_err(|e| arrow_error(label, e))?,
                    conv.convert_columns(std::slice::from_ref(cb))
                        .map_err(|e| arrow_error(label, e))?,
                ),
                Err(_) => ColumnEq::Slices(ca.clone(), cb.clone()),
            };
            columns.push(eq);
        }
        Ok(RowEq { columns })
    }

    fn equal(&self, i: usize, j: usize) -> bool {
        self.columns.iter().all(|c| match c {
            ColumnEq::Rows(a, b) => a.row(i) == b.row(j),
            ColumnEq::Slices(a, b) => a.slice(i, 1).to_data() == b.slice(j, 1).to_data(),
        })
    }
}

/// Compares `before` and `after` (records of the same file groups of one partition in two
/// states, with meta columns) by record key, after shaping both to `schema` (data columns).
pub(crate) fn compare(
    partition: &str,
    before: &RecordBatch,
    after: &RecordBatch,
    schema: &SchemaRef,
    label: &str,
) -> Result<PartitionChanges> {
    let before_keys = record_keys(before, label)?;
    let after_keys = record_keys(after, label)?;
    let before_rows = index_keys(&before_keys, partition, label)?;
    index_keys(&after_keys, partition, label)?;
    let before_at = located(&before_keys, file_groups(before));
    let after_at = located(&after_keys, file_groups(after));
    let before = conform(before, schema, label)?;
    let after = conform(after, schema, label)?;
    let eq = RowEq::new(&before, &after, label)?;
    let mut changes = BTreeMap::new();
    for (j, k) in after_keys.iter().enumerate() {
        match before_rows.get(k) {
            Some(&i) if eq.equal(i, j) => {}
            found => {
                changes.insert(
                    k.clone(),
                    KeyChange {
                        before: found.copied(),
                        after: Some(j),
                    },
                );
            }
        }
    }
    let after_set: std::collections::HashSet<&String> = after_keys.iter().collect();
    for (i, k) in before_keys.iter().enumerate() {
        if !after_set.contains(k) {
            changes.insert(
                k.clone(),
                KeyChange {
                    before: Some(i),
                    after: None,
                },
            );
        }
    }
    Ok(PartitionChanges {
        partition: partition.to_string(),
        before,
        after,
        changes,
        before_at,
        after_at,
    })
}

/// The schema of change rows: the change kind, partition path and record key, then the data
/// columns of `data`.
pub(crate) fn change_schema(data: &Schema, keys_only: bool) -> SchemaRef {
    let mut fields = vec![
        Arc::new(Field::new(CHANGE_TYPE, DataType::Utf8, false)),
        Arc::new(Field::new(meta::PARTITION_PATH, DataType::Utf8, false)),
        Arc::new(Field::new(meta::RECORD_KEY, DataType::Utf8, false)),
    ];
    if !keys_only {
        fields.extend(data.fields().iter().cloned());
    }
    Arc::new(Schema::new(fields))
}

impl PartitionChanges {
    /// Counts of inserted, updated and deleted keys.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for ch in self.changes.values() {
            match ch.kind() {
                ChangeKind::Insert => c.0 += 1,
                ChangeKind::Update => c.1 += 1,
                ChangeKind::Delete => c.2 += 1,
            }
        }
        c
    }

    /// The change rows (`schema` from [`change_schema`]): `insert` (the new row), `delete`
    /// (the old row), `update_preimage` then `update_postimage` for an update, in key order.
    pub fn rows(&self, schema: &SchemaRef, keys_only: bool, label: &str) -> Result<RecordBatch> {
        let mut kinds: Vec<&str> = Vec::new();
        let mut keys: Vec<&str> = Vec::new();
        // (batch, row): 0 is `before`, 1 is `after`.
        let mut picks: Vec<(usize, usize)> = Vec::new();
        for (k, ch) in &self.changes {
            if let Some(i) = ch.before {
                kinds.push(if ch.after.is_some() {
                    "update_preimage"
                } else {
                    "delete"
                });
                keys.push(k);
                picks.push((0, i));
            }
            if let Some(j) = ch.after {
                kinds.push(if ch.before.is_some() {
                    "update_postimage"
                } else {
                    "insert"
                });
                keys.push(k);
                picks.push((1, j));
            }
        }
        let n = kinds.len();
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(kinds)),
            Arc::new(StringArray::from(vec![self.partition.as_str(); n])),
            Arc::new(StringArray::from(keys)),
        ];
        if !keys_only {
            for c in 0..self.before.num_columns() {
                let sources: [&dyn Array; 2] = [
                    self.before.column(c).as_ref(),
                    self.after.column(c).as_ref(),
                ];
                columns.push(interleave(&sources, &picks).map_err(|e| arrow_error(label, e))?);
            }
        }
        RecordBatch::try_new(schema.clone(), columns).map_err(|e| arrow_error(label, e))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use arrow::array::Int64Array;

    fn batch(keys: &[&str], values: &[Option<i64>]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new(meta::RECORD_KEY, DataType::Utf8, false),
            Field::new(meta::COMMIT_TIME, DataType::Utf8, false),
            Field::new("v", DataType::Int64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(keys.to_vec())),
                Arc::new(StringArray::from(vec!["1"; keys.len()])),
                Arc::new(Int64Array::from(values.to_vec())),
            ],
        )
        .unwrap()
    }

    #[test]
    fn test_compare_classifies_by_key_and_ignores_meta_columns() {
        let before = batch(&["a", "b", "c", "n"], &[Some(1), Some(2), Some(3), None]);
        let after = batch(&["b", "c", "d", "n"], &[Some(2), Some(30), Some(4), None]);
        let data = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)]));
        let ch = compare("p", &before, &after, &data, "t").unwrap();
        let kinds: Vec<(&str, ChangeKind)> = ch
            .changes
            .iter()
            .map(|(k, c)| (k.as_str(), c.kind()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("a", ChangeKind::Delete),
                ("c", ChangeKind::Update),
                ("d", ChangeKind::Insert)
            ]
        );
        assert_eq!(ch.counts(), (1, 1, 1));
        let schema = change_schema(&data, false);
        let rows = ch.rows(&schema, false, "t").unwrap();
        assert_eq!(rows.num_rows(), 4);
        let kinds = rows
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(kinds.value(1), "update_preimage");
        assert_eq!(kinds.value(2), "update_postimage");
        let v = rows
            .column(3)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!((v.value(1), v.value(2)), (3, 30));
    }

    #[test]
    fn test_compare_refuses_a_key_stored_twice() {
        let before = batch(&["a", "a"], &[Some(1), Some(2)]);
        let after = batch(&["a"], &[Some(1)]);
        let data = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)]));
        let e = compare("p", &before, &after, &data, "t").err().unwrap();
        assert!(e.to_string().contains("stored twice"), "{e}");
    }
}
