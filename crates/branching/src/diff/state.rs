//! Reading the records of chosen file groups of one state (a root as of a completed write),
//! partition by partition, and shaping them to one schema.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_format::meta;
use arbor_storage::Storage;
use arbor_table::read::{ReadOptions, ScanPlan, TableReader};
use arbor_timeline::InstantTime;
use arrow::array::{new_null_array, Array, ArrayRef, RecordBatch, StringArray};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use futures::{StreamExt, TryStreamExt};

use crate::error::{BranchingError, Result};

/// How many file slices a state reads at once.
const SLICES_IN_FLIGHT: usize = 8;

/// File ids per partition.
pub(crate) type Groups = BTreeMap<String, BTreeSet<String>>;

/// One state, planned over the partitions a diff reads: its plan (`None` for an empty
/// state or no partition) and the storage its slices are read through.
#[derive(Clone)]
pub(crate) struct StateScan {
    plan: Option<ScanPlan>,
    storage: Arc<dyn Storage>,
    schema: SchemaRef,
    label: String,
}

impl StateScan {
    /// Plans the state of `reader` as of `instant` (`None`: empty) over the file groups of
    /// `groups` (only their slices are planned).
    pub async fn plan(
        reader: &TableReader,
        instant: Option<&InstantTime>,
        groups: &Groups,
        label: &str,
    ) -> Result<StateScan> {
        let storage = reader.storage().clone();
        let plan = match instant {
            Some(t) if !groups.is_empty() => {
                let options = ReadOptions::new()
                    .as_of(t.clone())
                    .data_skipping(false)
                    .file_groups(groups.clone());
                Some(reader.plan(&options).await?)
            }
            _ => None,
        };
        let schema = match &plan {
            Some(p) => p.output_schema().clone(),
            None => reader.schema().clone(),
        };
        Ok(StateScan {
            plan,
            storage,
            schema,
            label: label.to_string(),
        })
    }

    /// The schema of the records read (meta columns included).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The records of `file_ids` in `partition` (their latest slices in this state), in one
    /// batch of [`StateScan::schema`].
    pub async fn read(&self, partition: &str, file_ids: &BTreeSet<String>) -> Result<RecordBatch> {
        let mut batches: Vec<RecordBatch> = Vec::new();
        if let Some(plan) = &self.plan {
            let slices: Vec<_> = plan
                .partitions()
                .iter()
                .filter(|p| p.partition == partition)
                .flat_map(|scan| scan.slices.iter())
                .filter(|s| file_ids.contains(&s.file_id))
                .cloned()
                .collect();
            // Several slices in flight on the runtime's threads (each is a few small reads
            // and a decode), results in plan order.
            let mut read = futures::stream::iter(slices)
                .map(|slice| {
                    let reading = plan
                        .execute_slice(self.storage.clone(), slice)
                        .try_collect::<Vec<RecordBatch>>();
                    tokio::spawn(reading)
                })
                .buffered(SLICES_IN_FLIGHT);
            while let Some(joined) = read.next().await {
                let mut part = joined.map_err(|e| BranchingError::Invalid {
                    path: self.label.clone(),
                    reason: format!("a file slice's read stopped: {e}"),
                })??;
                batches.append(&mut part);
            }
        }
        concat_batches(&self.schema, &batches).map_err(|e| arrow_error(&self.label, e))
    }
}

/// An Arrow error while shaping the rows of `label`.
pub(crate) fn arrow_error(label: &str, e: arrow::error::ArrowError) -> BranchingError {
    BranchingError::Invalid {
        path: label.to_string(),
        reason: e.to_string(),
    }
}

/// True for the meta columns a diff does not compare (commit time, sequence number, file
/// name, operation) and the two it keys by (record key, partition path).
fn is_meta(name: &str) -> bool {
    meta::META_COLUMNS.contains(&name) || name == meta::OPERATION
}

/// The data columns of `schema` (no meta column).
pub(crate) fn data_fields(schema: &Schema) -> Vec<Arc<Field>> {
    schema
        .fields()
        .iter()
        .filter(|f| !is_meta(f.name()))
        .cloned()
        .collect()
}

/// True when every value of `from` is a value of `to` (Hudi's type promotions: wider
/// integers, integers to floating point, float to double, wider decimals at the same scale).
fn widens(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    match (from, to) {
        (Int8, Int16 | Int32 | Int64) | (Int16, Int32 | Int64) | (Int32, Int64) => true,
        (Int8 | Int16 | Int32, Float64) | (Int8 | Int16, Float32) => true,
        (Float32, Float64) => true,
        (Decimal128(p1, s1), Decimal128(p2, s2)) => s1 == s2 && p2 >= p1,
        _ => false,
    }
}

/// One schema both states' data columns fit, `later`'s order first then columns only
/// `earlier` has: a column of two types takes the wider one when one widens to the other.
/// Any other difference of type is [`BranchingError::Refused`] naming the column and both
/// types (`what`: the operation, for the message).
pub(crate) fn unify(earlier: &Schema, later: &Schema, what: &str) -> Result<SchemaRef> {
    let mut fields: Vec<Arc<Field>> = Vec::new();
    let old = data_fields(earlier);
    for f in data_fields(later) {
        match old.iter().find(|o| o.name() == f.name()) {
            Some(o) if o.data_type() == f.data_type() || widens(o.data_type(), f.data_type()) => {
                fields.push(Arc::new(f.as_ref().clone().with_nullable(true)));
            }
            Some(o) if widens(f.data_type(), o.data_type()) => {
                fields.push(Arc::new(o.as_ref().clone().with_nullable(true)));
            }
            Some(o) => {
                return Err(BranchingError::refused(
                    what,
                    format!(
                        "column {} is {} on one side and {} on the other (not a widening)",
                        f.name(),
                        o.data_type(),
                        f.data_type()
                    ),
                ))
            }
            None => fields.push(Arc::new(f.as_ref().clone().with_nullable(true))),
        }
    }
    for o in old {
        if !fields.iter().any(|f| f.name() == o.name()) {
            fields.push(Arc::new(o.as_ref().clone().with_nullable(true)));
        }
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// The data columns of `batch` shaped to `schema`: columns it lacks are null, narrower
/// types are widened (exactly: [`unify`] admits only widenings).
pub(crate) fn conform(batch: &RecordBatch, schema: &SchemaRef, label: &str) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(c) if c.data_type() == f.data_type() => Ok(c.clone()),
            Some(c) => cast(c, f.data_type()).map_err(|e| arrow_error(label, e)),
            None => Ok(new_null_array(f.data_type(), rows)),
        })
        .collect::<Result<_>>()?;
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(|e| arrow_error(label, e))
}

/// The record keys of `batch` (its `_hoodie_record_key` column as text).
pub(crate) fn record_keys(batch: &RecordBatch, label: &str) -> Result<Vec<String>> {
    let column = batch.column_by_name(meta::RECORD_KEY).ok_or_else(|| {
        BranchingError::refused(
            format!("diff of {label}"),
            "the table does not store record keys (hoodie.populate.meta.fields=false)",
        )
    })?;
    let text = cast(column, &DataType::Utf8).map_err(|e| arrow_error(label, e))?;
    let strings =
        text.as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| BranchingError::Invalid {
                path: label.to_string(),
                reason: "record keys are not text".into(),
            })?;
    let mut out = Vec::with_capacity(strings.len());
    for i in 0..strings.len() {
        if strings.is_null(i) {
            return Err(BranchingError::Invalid {
                path: label.to_string(),
                reason: format!("row {i} has no record key"),
            });
        }
        out.push(strings.value(i).to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_unify_widens_adds_and_refuses() {
        let a = Schema::new(vec![
            Field::new(meta::RECORD_KEY, DataType::Utf8, true),
            Field::new("id", DataType::Int32, false),
            Field::new("old", DataType::Utf8, true),
        ]);
        let b = Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("new", DataType::Float64, true),
        ]);
        let u = unify(&a, &b, "diff").unwrap();
        let names: Vec<&str> = u.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "new", "old"]);
        assert_eq!(u.field(0).data_type(), &DataType::Int64);
        // The other way round keeps the wider type too.
        let u = unify(&b, &a, "diff").unwrap();
        assert_eq!(u.field(0).data_type(), &DataType::Int64);
        let c = Schema::new(vec![Field::new("id", DataType::Utf8, true)]);
        let e = unify(&a, &c, "diff").unwrap_err().to_string();
        assert!(e.contains("column id is Int32"), "{e}");
    }
}
