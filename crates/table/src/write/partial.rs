//! Partial updates: an upsert that names only some columns keeps the stored values of the
//! others ([`WriteOptions::partial_updates`](crate::WriteOptions::partial_updates)).
//!
//! The missing columns are filled before the write is validated, from the latest snapshot of
//! the rows with the same record key and partition path (new keys get nulls), so the write
//! that follows is an ordinary full-row upsert: merge semantics, indexes and the conflict
//! check apply unchanged. A concurrent write to the same file group is a commit conflict as
//! always, so a value filled from a snapshot that changed meanwhile is never committed.

use std::collections::HashMap;
use std::sync::Arc;

use arbor_format::meta;
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take};
use arrow::datatypes::{Field, Schema};

use crate::error::{Result, TableError};
use crate::keygen::KeyGenerator;
use crate::read::TableReader;
use crate::txn::context::TableContext;

fn invalid(column: Option<&str>, reason: impl Into<String>) -> TableError {
    TableError::InvalidInput {
        column: column.map(str::to_string),
        row: None,
        reason: reason.into(),
    }
}

/// `batches` with every table column they lack, holding the stored value of the row's key
/// (null for keys not in the table). Batches that lack no column are returned as they are.
pub(crate) async fn fill_missing_columns(
    ctx: &TableContext,
    batches: Vec<RecordBatch>,
) -> Result<Vec<RecordBatch>> {
    let Some(first) = batches.first() else {
        return Ok(batches);
    };
    let input_schema = first.schema();
    let missing: Vec<Arc<Field>> = ctx
        .schema
        .arrow
        .fields()
        .iter()
        .filter(|f| input_schema.field_with_name(f.name()).is_err())
        .cloned()
        .collect();
    if missing.is_empty() {
        return Ok(batches);
    }
    let input = concat_batches(&input_schema, &batches)
        .map_err(|e| invalid(None, format!("input batches differ in schema: {e}")))?;
    let keygen = KeyGenerator::from_table_config(&ctx.config)?;
    let keys = keygen.keys(&input)?;

    let reader = TableReader::open_view(ctx.storage.clone()).await?;
    let stored = reader.snapshot(None).await?;
    let stored = concat_batches(reader.schema(), &stored)
        .map_err(|e| invalid(None, format!("cannot assemble the stored rows: {e}")))?;
    let stored_keys: Vec<(String, String)> = match (
        stored.column_by_name(meta::RECORD_KEY),
        stored.column_by_name(meta::PARTITION_PATH),
    ) {
        (Some(k), Some(p)) if k.null_count() == 0 && p.null_count() == 0 => {
            let (k, p) = (k.as_string::<i32>(), p.as_string::<i32>());
            (0..stored.num_rows())
                .map(|i| (k.value(i).to_string(), p.value(i).to_string()))
                .collect()
        }
        _ => keygen
            .keys(&stored)?
            .into_iter()
            .map(|k| (k.record_key, k.partition_path.to_string()))
            .collect(),
    };
    let position: HashMap<&(String, String), u32> = stored_keys
        .iter()
        .enumerate()
        .filter_map(|(i, k)| u32::try_from(i).ok().map(|i| (k, i)))
        .collect();
    let indices = UInt32Array::from(
        keys.iter()
            .map(|k| {
                position
                    .get(&(k.record_key.clone(), k.partition_path.to_string()))
                    .copied()
            })
            .collect::<Vec<_>>(),
    );

    let mut fields: Vec<Arc<Field>> = input_schema.fields().iter().cloned().collect();
    let mut columns: Vec<ArrayRef> = input.columns().to_vec();
    for f in &missing {
        let source = stored.column_by_name(f.name()).ok_or_else(|| {
            invalid(
                Some(f.name()),
                "the stored rows lack this column of the table's schema",
            )
        })?;
        let filled = take(source.as_ref(), &indices, None)
            .map_err(|e| invalid(Some(f.name()), format!("cannot take stored values: {e}")))?;
        fields.push(Arc::new(Field::new(
            f.name(),
            filled.data_type().clone(),
            true,
        )));
        columns.push(filled);
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| invalid(None, e.to_string()))?;
    Ok(vec![batch])
}
