//! Arrays and schemas between Lance's arrow (58) and arbor's (59), through the Arrow C data
//! interface: no copy of any buffer, every type both versions know (nested, dictionary,
//! decimal, zoned timestamps), schema and field metadata kept.
//!
//! This file holds the crate's only unsafe code. Both arrow versions define `FFI_ArrowArray`
//! and `FFI_ArrowSchema` as `#[repr(C)]` structs of the Arrow C data interface, whose layout
//! the Arrow specification fixes; a value exported by one version is a valid value of the
//! other's type. Ownership moves with the value: the release callback of the exporter is
//! called exactly once, by the importer's `Drop`.

#![allow(unsafe_code)]

use std::sync::Arc;

use arrow_array::{Array, RecordBatch, StructArray};
use arrow_schema::{Schema, SchemaRef};

use arrow_array_58 as a58;
use arrow_array_58::Array as _;
use arrow_schema_58 as s58;

/// An arrow 58 batch as an arrow 59 batch with the same columns, schema and metadata.
pub(crate) fn batch_to_59(batch: &a58::RecordBatch) -> Result<RecordBatch, String> {
    let schema = schema_to_59(batch.schema().as_ref())?;
    let data = a58::StructArray::from(batch.clone()).into_data();
    let (array, ffi_schema) = a58::ffi::to_ffi(&data).map_err(|e| e.to_string())?;
    // SAFETY: see the module documentation: same `#[repr(C)]` layout in both versions (the
    // sizes are checked by `transmute` at compile time); ownership of the exported array and
    // schema moves into the arrow 59 values, which release them on drop.
    let array: arrow_array::ffi::FFI_ArrowArray = unsafe { std::mem::transmute(array) };
    let ffi_schema: arrow_array::ffi::FFI_ArrowSchema = unsafe { std::mem::transmute(ffi_schema) };
    // SAFETY: `array` and `ffi_schema` were exported together above by arrow 58's `to_ffi`,
    // which produces a valid array of the described type.
    let data =
        unsafe { arrow_array::ffi::from_ffi(array, &ffi_schema) }.map_err(|e| e.to_string())?;
    let columns = StructArray::from(data).columns().to_vec();
    RecordBatch::try_new_with_options(
        Arc::new(schema),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
    .map_err(|e| e.to_string())
}

/// An arrow 59 batch as an arrow 58 batch (for the Lance writer).
pub(crate) fn batch_to_58(batch: &RecordBatch) -> Result<a58::RecordBatch, String> {
    let schema = schema_to_58(batch.schema().as_ref())?;
    let data = StructArray::from(batch.clone()).into_data();
    let (array, ffi_schema) = arrow_array::ffi::to_ffi(&data).map_err(|e| e.to_string())?;
    // SAFETY: as in `batch_to_59`, in the other direction.
    let array: a58::ffi::FFI_ArrowArray = unsafe { std::mem::transmute(array) };
    let ffi_schema: a58::ffi::FFI_ArrowSchema = unsafe { std::mem::transmute(ffi_schema) };
    // SAFETY: exported together above by arrow 59's `to_ffi`.
    let data = unsafe { a58::ffi::from_ffi(array, &ffi_schema) }.map_err(|e| e.to_string())?;
    let columns = a58::StructArray::from(data).columns().to_vec();
    a58::RecordBatch::try_new_with_options(
        Arc::new(schema),
        columns,
        &a58::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
    .map_err(|e| e.to_string())
}

/// An arrow 58 schema as arrow 59 (fields, nullability, field and schema metadata).
pub(crate) fn schema_to_59(schema: &s58::Schema) -> Result<Schema, String> {
    let ffi = s58::ffi::FFI_ArrowSchema::try_from(schema).map_err(|e| e.to_string())?;
    // SAFETY: see the module documentation.
    let ffi: arrow_schema::ffi::FFI_ArrowSchema = unsafe { std::mem::transmute(ffi) };
    let out = Schema::try_from(&ffi).map_err(|e| e.to_string())?;
    Ok(out.with_metadata(schema.metadata().clone()))
}

/// An arrow 59 schema as arrow 58.
pub(crate) fn schema_to_58(schema: &Schema) -> Result<s58::Schema, String> {
    let ffi = arrow_schema::ffi::FFI_ArrowSchema::try_from(schema).map_err(|e| e.to_string())?;
    // SAFETY: see the module documentation.
    let ffi: s58::ffi::FFI_ArrowSchema = unsafe { std::mem::transmute(ffi) };
    let out = s58::Schema::try_from(&ffi).map_err(|e| e.to_string())?;
    Ok(out.with_metadata(schema.metadata().clone()))
}

/// `schema` as a shared arrow 59 schema.
pub(crate) fn schema_ref_to_59(schema: &s58::Schema) -> Result<SchemaRef, String> {
    schema_to_59(schema).map(Arc::new)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use arrow_array::{
        ArrayRef, Decimal128Array, Int64Array, ListArray, StringArray, TimestampMicrosecondArray,
    };
    use arrow_schema::{DataType, Field, TimeUnit};
    use std::collections::HashMap;

    fn sample() -> RecordBatch {
        let list = ListArray::from_iter_primitive::<arrow_array::types::Int32Type, _, _>(vec![
            Some(vec![Some(1), None]),
            None,
            Some(vec![]),
        ]);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![Some("a"), None, Some("c")])),
            Arc::new(Int64Array::from(vec![1, 2, 3])),
            Arc::new(
                TimestampMicrosecondArray::from(vec![Some(1), None, Some(-1)]).with_timezone("UTC"),
            ),
            Arc::new(
                Decimal128Array::from(vec![Some(12345), None, Some(-1)])
                    .with_precision_and_scale(15, 2)
                    .unwrap(),
            ),
            Arc::new(list),
        ];
        let fields: Vec<Field> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                Field::new(format!("c{i}"), c.data_type().clone(), true)
                    .with_metadata(HashMap::from([("k".to_string(), format!("v{i}"))]))
            })
            .collect();
        let schema = Schema::new(fields)
            .with_metadata(HashMap::from([("top".to_string(), "x".to_string())]));
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    }

    #[test]
    fn test_batch_round_trip_keeps_values_types_and_metadata() {
        let batch = sample();
        let back = batch_to_59(&batch_to_58(&batch).unwrap()).unwrap();
        assert_eq!(back, batch);
        assert_eq!(back.schema(), batch.schema());
        assert_eq!(
            back.schema().field(2).data_type(),
            &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        );
    }

    #[test]
    fn test_zero_row_and_zero_column_batches_cross() {
        let batch = sample().slice(0, 0);
        assert_eq!(batch_to_59(&batch_to_58(&batch).unwrap()).unwrap(), batch);
        let empty = RecordBatch::try_new_with_options(
            Arc::new(Schema::empty()),
            vec![],
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(4)),
        )
        .unwrap();
        assert_eq!(
            batch_to_59(&batch_to_58(&empty).unwrap())
                .unwrap()
                .num_rows(),
            4
        );
    }
}
