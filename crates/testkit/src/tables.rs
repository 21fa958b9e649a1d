//! The small table most integration tests write: `(id, region, ts, name)` rows (`id` key,
//! `region` partition, `ts` ordering), their Arrow schema and batches, canonical (sorted) rows
//! of what a read returned, and an in-memory model of the table under event-time ordering.
//!
//! Only Arrow and std here: the table handles themselves (`TestTable`, creation, reads) stay in
//! each crate's `tests/it/support.rs`, because arbor-testkit is a dev-dependency of arbor-table
//! and so cannot depend on it without two copies of its types.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};

/// `(id, region, ts, name)`.
pub type Row = (String, String, i64, String);

/// The Arrow schema of [`Row`]: `id`, `region`, `ts` non-null, `name` nullable.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]))
}

/// One batch of `rows` in [`schema`].
pub fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.0.clone()),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.1.clone()),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.3.clone()),
            )),
        ],
    )
    .unwrap()
}

/// Rows `k<i>` for `ids`, region `us` for even ids and `eu` for odd, all with `ts` and name
/// `<tag><i>`.
pub fn rows(ids: std::ops::Range<u32>, ts: i64, tag: &str) -> Vec<Row> {
    ids.map(|i| {
        let region = if i % 2 == 0 { "us" } else { "eu" };
        (
            format!("k{i:04}"),
            region.to_string(),
            ts,
            format!("{tag}{i}"),
        )
    })
    .collect()
}

/// The data rows of batches, sorted by id.
pub fn rows_of(batches: &[RecordBatch]) -> Vec<Row> {
    let mut out = Vec::new();
    for b in batches {
        let s = |n: &str| b.column_by_name(n).unwrap().as_string::<i32>().clone();
        let (id, region, name) = (s("id"), s("region"), s("name"));
        let ts = b
            .column_by_name("ts")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        for i in 0..b.num_rows() {
            out.push((
                id.value(i).to_string(),
                region.value(i).to_string(),
                ts.value(i),
                if name.is_null(i) {
                    String::new()
                } else {
                    name.value(i).to_string()
                },
            ));
        }
    }
    out.sort();
    out
}

/// An in-memory model: id -> row, event-time ordering.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// The live rows by id.
    pub rows: BTreeMap<String, Row>,
}

impl Model {
    /// Applies an upsert: a row replaces the stored one unless that has a larger `ts`.
    pub fn upsert(&mut self, rows: &[Row]) {
        for r in rows {
            match self.rows.get(&r.0) {
                Some(old) if old.2 > r.2 => {}
                _ => {
                    self.rows.insert(r.0.clone(), r.clone());
                }
            }
        }
    }

    /// Deletes the rows' ids.
    pub fn delete(&mut self, rows: &[Row]) {
        for r in rows {
            self.rows.remove(&r.0);
        }
    }

    /// The live rows, sorted by id.
    pub fn sorted(&self) -> Vec<Row> {
        self.rows.values().cloned().collect()
    }
}
