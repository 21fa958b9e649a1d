//! Batches shaped to the schema a plan declared.

use arrow::array::{new_null_array, RecordBatch, RecordBatchOptions};
use arrow::compute::CastOptions;
use arrow::datatypes::SchemaRef;
use datafusion::common::{exec_err, Result};

const STRICT: CastOptions<'static> = CastOptions {
    safe: false,
    format_options: arrow::util::display::FormatOptions::new(),
};

/// `batch` with `target`'s columns in `target`'s order: matched by name, cast where the type
/// differs (a table whose schema widened since the plan was made), null where the batch lacks
/// a nullable column; the row count is kept (also for zero columns). A missing non-nullable
/// column or a cast that fails is an error naming the column.
pub fn conform_to(batch: &RecordBatch, target: &SchemaRef) -> Result<RecordBatch> {
    if batch.schema_ref() == target {
        return Ok(batch.clone());
    }
    let rows = batch.num_rows();
    let mut columns = Vec::with_capacity(target.fields().len());
    for field in target.fields() {
        let column = match batch.column_by_name(field.name()) {
            Some(c) if c.data_type() == field.data_type() => c.clone(),
            // A value that does not fit is an error, never a null.
            Some(c) => match arrow::compute::cast_with_options(c, field.data_type(), &STRICT) {
                Ok(c) => c,
                Err(e) => {
                    return exec_err!(
                        "column {}: cannot read {} as {}: {e}",
                        field.name(),
                        c.data_type(),
                        field.data_type()
                    )
                }
            },
            None if field.is_nullable() => new_null_array(field.data_type(), rows),
            None => return exec_err!("column {} is missing from the rows read", field.name()),
        };
        columns.push(column);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(
        target.clone(),
        columns,
        &options,
    )?)
}
