//! [`ArborSink`]: the rows of one `INSERT INTO` statement written as one commit; a bulk insert
//! the table streams is written batch by batch as the plan produces them.

use std::fmt;
use std::sync::Arc;

use arbor_format::meta::is_meta_column;
use arbor_table::{Table, WriteOperation};
use arrow::array::{Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::common::Result as DfResult;
use datafusion::datasource::sink::DataSink;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use futures::{StreamExt, TryStreamExt};

use crate::error::{ArborSqlError, Result};

/// Writes every row of its input as one commit of `table` (main or a branch) with `operation`
/// ([`Table::write`]: validated, converted exactly, committed under the table lock, retried on
/// a lost race). The `_hoodie_*` meta columns of the input must be null (arbor fills them);
/// they are dropped before the write. An empty input writes nothing and counts 0 rows.
#[derive(Debug)]
pub struct ArborSink {
    location: String,
    table: Table,
    operation: WriteOperation,
    schema: SchemaRef,
}

impl ArborSink {
    /// The sink writing `table` (opened at `location`) with `operation`; `schema` is the
    /// provider's (the input's columns).
    pub fn new(
        location: String,
        table: Table,
        operation: WriteOperation,
        schema: SchemaRef,
    ) -> Self {
        ArborSink {
            location,
            table,
            operation,
            schema,
        }
    }

    /// The input's data columns: meta columns dropped once checked to be null.
    fn data_columns(&self, batch: &RecordBatch, first_row: usize) -> Result<RecordBatch> {
        let schema = batch.schema();
        let mut keep = Vec::with_capacity(schema.fields().len());
        for (i, field) in schema.fields().iter().enumerate() {
            if !is_meta_column(field.name()) {
                keep.push(i);
                continue;
            }
            let column = batch.column(i);
            if column.null_count() != column.len() {
                let row = (0..column.len()).find(|r| column.is_valid(*r)).unwrap_or(0);
                return Err(ArborSqlError::InvalidInsert {
                    location: self.location.clone(),
                    reason: format!(
                        "column {} (row {}) is a Hudi meta column that arbor fills; insert \
                         NULL or leave it out of the column list",
                        field.name(),
                        first_row + row
                    ),
                });
            }
        }
        batch
            .project(&keep)
            .map_err(|e| ArborSqlError::InvalidInsert {
                location: self.location.clone(),
                reason: e.to_string(),
            })
    }
}

impl ArborSink {
    /// A bulk insert the table streams ([`Table::write_stream`]): batches are checked and
    /// written as the plan produces them, never collected. An empty input writes nothing.
    async fn write_streamed(&self, mut data: SendableRecordBatchStream) -> DfResult<u64> {
        let first = loop {
            match data.try_next().await? {
                None => return Ok(0),
                Some(b) if b.num_rows() == 0 => continue,
                Some(b) => break b,
            }
        };
        let mut first_row = 0usize;
        let batches = futures::stream::once(async { Ok(first) })
            .chain(data)
            .try_filter(|b| futures::future::ready(b.num_rows() > 0))
            .map_err(|e| e.to_string())
            .and_then(|b| {
                let checked = self.data_columns(&b, first_row).map_err(|e| e.to_string());
                first_row += b.num_rows();
                futures::future::ready(checked)
            });
        let result = self
            .table
            .write_stream(self.operation, Box::pin(batches))
            .await
            .map_err(|e| ArborSqlError::table(&self.location, e))?;
        Ok(result.inserted)
    }
}

impl DisplayAs for ArborSink {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "ArborSink: table={}, root={}, operation={:?}",
                self.location,
                self.table.root(),
                self.operation
            ),
            DisplayFormatType::TreeRender => write!(f, "operation={:?}", self.operation),
        }
    }
}

#[async_trait]
impl DataSink for ArborSink {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(
        &self,
        data: SendableRecordBatchStream,
        _context: &Arc<TaskContext>,
    ) -> DfResult<u64> {
        if self.operation == WriteOperation::BulkInsert
            && self
                .table
                .streams(self.operation)
                .await
                .map_err(|e| ArborSqlError::table(&self.location, e))?
        {
            return self.write_streamed(data).await;
        }
        let input: Vec<RecordBatch> = data.try_collect().await?;
        let mut batches = Vec::with_capacity(input.len());
        let mut rows = 0_usize;
        for b in &input {
            if b.num_rows() == 0 {
                continue;
            }
            batches.push(self.data_columns(b, rows)?);
            rows += b.num_rows();
        }
        if rows == 0 {
            return Ok(0);
        }
        drop(input);
        self.table
            .write(self.operation, batches)
            .await
            .map_err(|e| ArborSqlError::table(&self.location, e))?;
        Ok(u64::try_from(rows).unwrap_or(u64::MAX))
    }
}
