//! Arrow data across the boundary: any object with `__arrow_c_stream__` (pyarrow tables and
//! readers, polars and pandas data frames) in, pyarrow tables and record-batch readers out.
//! String and binary view and large types (polars and pandas produce them) become the plain
//! types arbor stores, losslessly.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow_array::ffi_stream::ArrowArrayStreamReader;
use arrow_array::RecordBatchReader;
use arrow_schema::ArrowError;
use futures::stream::BoxStream;
use futures::StreamExt;

use crate::errors::bad_argument;

/// The plain type arbor stores for `t`: `Utf8View`/`LargeUtf8` as `Utf8`, `BinaryView`/
/// `LargeBinary` as `Binary`, inside lists, structs and maps too.
fn plain(t: &DataType) -> DataType {
    match t {
        DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
        DataType::BinaryView | DataType::LargeBinary => DataType::Binary,
        DataType::List(f) | DataType::LargeList(f) | DataType::ListView(f) => {
            DataType::List(Arc::new(plain_field(f)))
        }
        DataType::Struct(fields) => {
            DataType::Struct(fields.iter().map(|f| plain_field(f)).collect())
        }
        DataType::Map(f, sorted) => DataType::Map(Arc::new(plain_field(f)), *sorted),
        other => other.clone(),
    }
}

fn plain_field(f: &Field) -> Field {
    f.clone().with_data_type(plain(f.data_type()))
}

/// `schema` with plain types.
pub fn plain_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .map(|f| plain_field(f))
            .collect::<Vec<Field>>(),
        schema.metadata().clone(),
    ))
}

/// `batch` cast to `schema` (its plain form).
fn plain_batch(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c.clone())
            } else {
                cast(c, f.data_type())
            }
        })
        .collect::<Result<_, _>>()?;
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
}

/// Every batch of an imported stream, in plain types, with their schema.
pub fn collect_input(
    reader: ArrowArrayStreamReader,
) -> pyo3::PyResult<(SchemaRef, Vec<RecordBatch>)> {
    let schema = plain_schema(&reader.schema());
    let mut batches = Vec::new();
    for (i, b) in reader.enumerate() {
        let b = b.map_err(|e| bad_argument("data", format!("batch {i}: {e}")))?;
        batches.push(plain_batch(&b, &schema).map_err(|e| bad_argument("data", e))?);
    }
    Ok((schema, batches))
}

/// The batches of an imported stream one at a time, in plain types (a streamed write's
/// input: nothing is collected). Errors name the batch.
pub fn plain_batches(
    reader: ArrowArrayStreamReader,
) -> impl Iterator<Item = Result<RecordBatch, String>> + Unpin {
    let schema = plain_schema(&reader.schema());
    reader.enumerate().map(move |(i, b)| {
        b.and_then(|b| plain_batch(&b, &schema))
            .map_err(|e| format!("batch {i}: {e}"))
    })
}

/// A stream of batches read as a blocking `RecordBatchReader` (one batch per `next`, on the
/// package's runtime), for `pyarrow.RecordBatchReader`.
pub struct StreamReader {
    pub schema: SchemaRef,
    pub stream: BoxStream<'static, Result<RecordBatch, String>>,
}

impl Iterator for StreamReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = crate::runtime::block_on(self.stream.next());
        match next {
            Ok(Some(Ok(b))) => Some(Ok(b)),
            Ok(Some(Err(e))) => Some(Err(ArrowError::ExternalError(e.into()))),
            Ok(None) => None,
            Err(e) => Some(Err(ArrowError::ExternalError(Box::new(e)))),
        }
    }
}

impl RecordBatchReader for StreamReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}
