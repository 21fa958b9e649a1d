//! The rows of `arbor read` as they arrive: one partition of the scan at a time, sorted by
//! partition path then record key, projected to the shown columns, so that the output is
//! written while the table is read and memory holds one partition (not the table).
//!
//! The order is exactly the whole-table sort's: the scan's partitions come in path order and
//! every row of a partition carries that partition's path in `_hoodie_partition_path` (Hudi's
//! writers set it so), so sorting each partition and concatenating is sorting the table. Ties
//! (equal path and key) keep the scan's order. A row whose `_hoodie_partition_path` is not its
//! partition's path is reported once (a warning): its partition is still sorted by the two
//! columns, but the rows of two partitions are not merged. A non-partitioned table is one
//! partition, so it is collected whole before it is sorted (as is a scan with a record key but
//! no partition path column); a table without the meta columns has nothing to sort by and
//! streams batch by batch in scan order.

use std::sync::Arc;

use arbor_format::meta;
use arbor_storage::Storage;
use arbor_table::read::ScanPlan;
use arrow::array::{AsArray, RecordBatch, UInt32Array};
use arrow::compute::kernels::sort::LexicographicalComparator;
use arrow::compute::{cast, take_record_batch, SortColumn};
use arrow::datatypes::{DataType, SchemaRef};
use futures::stream::BoxStream;
use futures::TryStreamExt;

use crate::error::{CliError, CliResult};
use crate::input::concat;

/// Sorted, projected batches of a scan, pulled with [`SortedRows::next`].
pub struct SortedRows {
    plan: ScanPlan,
    storage: Arc<dyn Storage>,
    /// The scan's batch schema (shown columns first, then the sort keys).
    schema: SchemaRef,
    /// Indices of the shown columns.
    projection: Vec<usize>,
    /// Whether the rows are sorted (the schema has a sort key).
    sorts: bool,
    /// Sorted without a partition path column: the whole scan is one run.
    whole: bool,
    /// The next partition to read (sorted mode).
    next_partition: usize,
    /// The whole scan (unsorted mode), once started.
    unsorted: Option<BoxStream<'static, arbor_table::Result<RecordBatch>>>,
    done: bool,
    warned: bool,
    table: String,
}

impl SortedRows {
    /// Rows of `plan` read through `storage`, shown as the first `shown` columns of the plan's
    /// output schema. `table` names the table in errors.
    pub fn new(plan: ScanPlan, storage: Arc<dyn Storage>, shown: usize, table: &str) -> Self {
        let schema = plan.output_schema().clone();
        let sorts = [meta::PARTITION_PATH, meta::RECORD_KEY]
            .iter()
            .any(|k| schema.index_of(k).is_ok());
        let whole = sorts && schema.index_of(meta::PARTITION_PATH).is_err();
        SortedRows {
            plan,
            storage,
            projection: (0..shown.min(schema.fields().len())).collect(),
            schema,
            sorts,
            whole,
            next_partition: 0,
            unsorted: None,
            done: false,
            warned: false,
            table: table.to_string(),
        }
    }

    /// The schema of the batches [`SortedRows::next`] returns.
    pub fn schema(&self) -> CliResult<SchemaRef> {
        self.schema
            .project(&self.projection)
            .map(Arc::new)
            .map_err(|e| CliError::Output(e.to_string()))
    }

    /// The next non-empty batch, `None` at the end.
    pub async fn next(&mut self) -> CliResult<Option<RecordBatch>> {
        loop {
            let Some(batch) = self.next_unprojected().await? else {
                return Ok(None);
            };
            if batch.num_rows() == 0 {
                continue;
            }
            return batch
                .project(&self.projection)
                .map(Some)
                .map_err(|e| CliError::Output(e.to_string()));
        }
    }

    /// Counts the rows left (read, not sorted nor kept).
    pub async fn count_rest(&mut self) -> CliResult<usize> {
        let at = |e: arbor_table::TableError| CliError::at(&self.table, e);
        let mut n = 0;
        if !self.sorts || self.whole {
            while let Some(b) = self.next_unprojected().await? {
                n += b.num_rows();
            }
            return Ok(n);
        }
        while !self.done && self.next_partition < self.plan.partitions().len() {
            let mut s = self
                .plan
                .execute_partition(self.storage.clone(), self.next_partition);
            self.next_partition += 1;
            while let Some(b) = s.try_next().await.map_err(at)? {
                n += b.num_rows();
            }
        }
        self.done = true;
        Ok(n)
    }

    async fn next_unprojected(&mut self) -> CliResult<Option<RecordBatch>> {
        if self.done {
            return Ok(None);
        }
        let at = |e: arbor_table::TableError| CliError::at(&self.table, e);
        if !self.sorts {
            let storage = self.storage.clone();
            let plan = &self.plan;
            let s = self
                .unsorted
                .get_or_insert_with(|| plan.clone().execute(storage));
            let next = s.try_next().await.map_err(at)?;
            self.done = next.is_none();
            return Ok(next);
        }
        if self.whole {
            let batches: Vec<RecordBatch> = self
                .plan
                .clone()
                .execute(self.storage.clone())
                .try_collect()
                .await
                .map_err(at)?;
            self.done = true;
            return sorted(concat(&self.schema, &batches)?).map(Some);
        }
        let Some(partition) = self
            .plan
            .partitions()
            .get(self.next_partition)
            .map(|p| p.partition.clone())
        else {
            self.done = true;
            return Ok(None);
        };
        let batches: Vec<RecordBatch> = self
            .plan
            .execute_partition(self.storage.clone(), self.next_partition)
            .try_collect()
            .await
            .map_err(at)?;
        self.next_partition += 1;
        let all = concat(&self.schema, &batches)?;
        drop(batches);
        self.check_partition_values(&all, &partition)?;
        sorted(all).map(Some)
    }

    /// Warns (once) when rows of `partition` carry another `_hoodie_partition_path`.
    fn check_partition_values(&mut self, batch: &RecordBatch, partition: &str) -> CliResult<()> {
        if self.warned {
            return Ok(());
        }
        let Some(col) = batch.column_by_name(meta::PARTITION_PATH) else {
            return Ok(());
        };
        let col = cast(col, &DataType::Utf8).map_err(|e| CliError::Output(e.to_string()))?;
        let stray = col
            .as_string::<i32>()
            .iter()
            .find(|v| *v != Some(partition))
            .map(|v| v.map(str::to_string));
        if let Some(value) = stray {
            self.warned = true;
            tracing::warn!(
                table = %self.table,
                partition,
                value = ?value,
                "rows of a partition carry another _hoodie_partition_path; rows are sorted \
                 within each partition"
            );
        }
        Ok(())
    }
}

/// `batch` sorted by partition path then record key (whichever it has), ties in input order.
pub fn sorted(batch: RecordBatch) -> CliResult<RecordBatch> {
    let keys: Vec<SortColumn> = [meta::PARTITION_PATH, meta::RECORD_KEY]
        .iter()
        .filter_map(|name| batch.column_by_name(name))
        .map(|c| SortColumn {
            values: c.clone(),
            options: None,
        })
        .collect();
    if keys.is_empty() || batch.num_rows() < 2 {
        return Ok(batch);
    }
    let err = |e: arrow::error::ArrowError| CliError::Output(e.to_string());
    let cmp = LexicographicalComparator::try_new(&keys).map_err(err)?;
    let rows = u32::try_from(batch.num_rows())
        .map_err(|_| CliError::Output("more than 2^32 rows in one partition".into()))?;
    let mut indices: Vec<u32> = (0..rows).collect();
    // Stable: equal keys keep the scan's order.
    indices.sort_by(|a, b| cmp.compare(*a as usize, *b as usize));
    take_record_batch(&batch, &UInt32Array::from(indices)).map_err(err)
}

#[async_trait::async_trait]
impl crate::emit::RowSource for SortedRows {
    async fn next(&mut self) -> CliResult<Option<RecordBatch>> {
        SortedRows::next(self).await
    }

    async fn count_rest(&mut self) -> CliResult<usize> {
        SortedRows::count_rest(self).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{Field, Int64Type, Schema};

    #[test]
    fn test_sorted_by_path_then_key_ties_keep_input_order() {
        let schema = Arc::new(Schema::new(vec![
            Field::new(meta::PARTITION_PATH, DataType::Utf8, true),
            Field::new(meta::RECORD_KEY, DataType::Utf8, true),
            Field::new("n", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["b", "a", "a", "a", "b"])),
                Arc::new(StringArray::from(vec!["1", "2", "1", "2", "0"])),
                Arc::new(Int64Array::from(vec![0, 1, 2, 3, 4])),
            ],
        )
        .unwrap();
        let out = sorted(batch).unwrap();
        let n: Vec<i64> = out.column(2).as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(n, vec![2, 1, 3, 4, 0]);
    }
}
