//! The rows of `arbor read` as they arrive: one partition of the scan at a time, sorted by
//! record key, projected to the shown columns, so that the output is written while the table is
//! read and memory holds a few partitions (not the table).
//!
//! The order is exactly the whole-table sort by partition path then record key: the scan's
//! partitions come in path order, so sorting each partition by key and concatenating is
//! sorting the table. The partition path column is not read for that (it would be compared
//! row by row to say what the partition already says); when the output shows it, it also
//! sorts the rows of its partition, and a row whose `_hoodie_partition_path` is not its
//! partition's path is reported once (a warning). Ties keep the scan's order. A table without
//! the meta columns has nothing to sort by and streams batch by batch in scan order.

use std::collections::VecDeque;
use std::sync::Arc;

use arbor_format::meta;
use arbor_storage::Storage;
use arbor_table::read::ScanPlan;
use arrow::array::{Array, AsArray, RecordBatch, UInt32Array};
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
    /// The next partition to read (sorted mode).
    next_partition: usize,
    /// Partitions `next_partition..` being read (sorted mode; `next_partition` counts one only
    /// once it is taken): `ahead` of them are read while the one before them is sorted and
    /// written, so memory holds at most `ahead + 1` partitions.
    prefetched: VecDeque<tokio::task::JoinHandle<arbor_table::Result<Vec<RecordBatch>>>>,
    /// How many partitions are read ahead: one per core, so that reading (the most of the
    /// work) keeps every core busy while the output is written.
    ahead: usize,
    /// Shown batches of a partition whose rows came in order, returned one by one.
    pending: VecDeque<RecordBatch>,
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
        SortedRows {
            plan,
            storage,
            projection: (0..shown.min(schema.fields().len())).collect(),
            schema,
            sorts,
            next_partition: 0,
            prefetched: VecDeque::new(),
            ahead: std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 4)),
            pending: VecDeque::new(),
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
            return Ok(Some(batch));
        }
    }

    /// The batch's shown columns.
    fn project(&self, batch: &RecordBatch) -> CliResult<RecordBatch> {
        batch
            .project(&self.projection)
            .map_err(|e| CliError::Output(e.to_string()))
    }

    /// Starts reading partition `index` on the runtime; `None` past the last partition.
    fn spawn_partition(
        &self,
        index: usize,
    ) -> Option<tokio::task::JoinHandle<arbor_table::Result<Vec<RecordBatch>>>> {
        (index < self.plan.partitions().len()).then(|| {
            let stream = self.plan.execute_partition(self.storage.clone(), index);
            tokio::spawn(stream.try_collect())
        })
    }

    /// The batches of partition `next_partition` (prefetched or read now), keeping the reads
    /// of the partitions after it in flight; `None` past the last partition.
    async fn next_partition_batches(&mut self) -> CliResult<Option<Vec<RecordBatch>>> {
        if self.prefetched.is_empty() {
            self.prefetched
                .extend(self.spawn_partition(self.next_partition));
        }
        let Some(handle) = self.prefetched.pop_front() else {
            return Ok(None);
        };
        self.next_partition += 1;
        while self.prefetched.len() < self.ahead {
            let Some(next) = self.spawn_partition(self.next_partition + self.prefetched.len())
            else {
                break;
            };
            self.prefetched.push_back(next);
        }
        let batches = handle
            .await
            .map_err(|e| CliError::Output(format!("reading a partition of {}: {e}", self.table)))?
            .map_err(|e| CliError::at(&self.table, e))?;
        Ok(Some(batches))
    }

    /// Counts the rows left (read, not sorted nor kept).
    pub async fn count_rest(&mut self) -> CliResult<usize> {
        let at = |e: arbor_table::TableError| CliError::at(&self.table, e);
        let mut n: usize = self.pending.drain(..).map(|b| b.num_rows()).sum();
        if !self.sorts {
            while let Some(b) = self.next_unprojected().await? {
                n += b.num_rows();
            }
            return Ok(n);
        }
        while let Some(handle) = self.prefetched.pop_front() {
            let batches = handle
                .await
                .map_err(|e| {
                    CliError::Output(format!("reading a partition of {}: {e}", self.table))
                })?
                .map_err(at)?;
            n += batches.iter().map(RecordBatch::num_rows).sum::<usize>();
            // The first prefetched partition is `next_partition`, the others follow it.
            self.next_partition += 1;
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
        if let Some(b) = self.pending.pop_front() {
            return Ok(Some(b));
        }
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
            return next.map(|b| self.project(&b)).transpose();
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
        let Some(batches) = self.next_partition_batches().await? else {
            self.done = true;
            return Ok(None);
        };
        for b in &batches {
            self.check_partition_values(b, &partition)?;
        }
        // Rows that came in order (the usual case) are shown batch by batch, not copied.
        if batches_in_order(&batches) {
            for b in &batches {
                if b.num_rows() > 0 {
                    self.pending.push_back(self.project(b)?);
                }
            }
            return match self.pending.pop_front() {
                Some(b) => Ok(Some(b)),
                None => self
                    .project(&RecordBatch::new_empty(self.schema.clone()))
                    .map(Some),
            };
        }
        let all = concat(&self.schema, &batches)?;
        drop(batches);
        self.sorted_shown(&all).map(Some)
    }

    /// The shown columns of `batch`, its rows sorted by partition path then record key.
    fn sorted_shown(&self, batch: &RecordBatch) -> CliResult<RecordBatch> {
        let shown = self.project(batch)?;
        match sort_indices(batch)? {
            None => Ok(shown),
            Some(indices) => {
                take_record_batch(&shown, &indices).map_err(|e| CliError::Output(e.to_string()))
            }
        }
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

impl Drop for SortedRows {
    fn drop(&mut self) {
        for handle in self.prefetched.drain(..) {
            handle.abort();
        }
    }
}

/// `batch` sorted by partition path then record key (whichever it has), ties in input order.
#[cfg(test)]
fn sorted(batch: RecordBatch) -> CliResult<RecordBatch> {
    match sort_indices(&batch)? {
        None => Ok(batch),
        Some(indices) => {
            take_record_batch(&batch, &indices).map_err(|e| CliError::Output(e.to_string()))
        }
    }
}

/// The order of string keys `keys` (`rows` of them; nulls first), ties in input order; `None`
/// when they are in order already.
///
/// Keys are compared by eight bytes after the prefix all keys share (as a big-endian integer,
/// shorter keys padded with zero bytes), and only where those are equal by the whole keys:
/// record keys usually share a long prefix (`key-000...`, `2024-01-...`) and differ within the
/// next few bytes, so almost every comparison is one of two integers.
fn sort_keys(keys: &arrow::array::StringArray, rows: u32) -> Option<UInt32Array> {
    let key_of = |i: u32| keys.is_valid(i as usize).then(|| keys.value(i as usize));
    if (1..rows).all(|i| key_of(i - 1) <= key_of(i)) {
        return None;
    }
    let (mut nulls, mut present): (Vec<u32>, Vec<u32>) =
        (0..rows).partition(|i| key_of(*i).is_none());
    let value = |i: u32| keys.value(i as usize).as_bytes();
    // The prefix all keys share is the one the least and the greatest share.
    let (mut least, mut greatest): (&[u8], &[u8]) = match present.first() {
        Some(&i) => (value(i), value(i)),
        None => (&[], &[]),
    };
    for &i in &present {
        let v = value(i);
        if v < least {
            least = v;
        }
        if v > greatest {
            greatest = v;
        }
    }
    let shared = least
        .iter()
        .zip(greatest)
        .take_while(|(a, b)| a == b)
        .count();
    let head = |i: u32| -> u64 {
        let mut bytes = [0u8; 8];
        if let Some(rest) = value(i).get(shared..) {
            let n = rest.len().min(8);
            if let (Some(dst), Some(src)) = (bytes.get_mut(..n), rest.get(..n)) {
                dst.copy_from_slice(src);
            }
        }
        u64::from_be_bytes(bytes)
    };
    let mut order: Vec<(u64, u32)> = present.drain(..).map(|i| (head(i), i)).collect();
    // The index breaks the last ties, so the unstable sort keeps the input order of equal keys.
    order.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| value(a.1).cmp(value(b.1)))
            .then(a.1.cmp(&b.1))
    });
    nulls.extend(order.into_iter().map(|(_, i)| i));
    Some(UInt32Array::from(nulls))
}

/// Whether the rows of `batches`, one after the other, are in the order [`sort_indices`] gives:
/// one partition path (or none) and string record keys in order. `false` when that cannot be
/// told cheaply (several paths, keys of another type), so that the caller sorts.
fn batches_in_order(batches: &[RecordBatch]) -> bool {
    let mut path: Option<&str> = None;
    let mut last: Option<Option<&str>> = None;
    for batch in batches {
        if let Some(p) = batch.column_by_name(meta::PARTITION_PATH) {
            let Some(p) = p.as_string_opt::<i32>() else {
                return false;
            };
            if p.null_count() > 0 {
                return false;
            }
            for v in p.iter().flatten() {
                match path {
                    None => path = Some(v),
                    Some(first) if first != v => return false,
                    Some(_) => {}
                }
            }
        }
        let Some(keys) = batch
            .column_by_name(meta::RECORD_KEY)
            .and_then(|k| k.as_string_opt::<i32>())
        else {
            return false;
        };
        for key in keys.iter() {
            if last.is_some_and(|l| l > key) {
                return false;
            }
            last = Some(key);
        }
    }
    true
}

/// The order of `batch`'s rows by partition path then record key (whichever it has; nulls
/// first), ties in input order; `None` when the rows are in that order already.
fn sort_indices(batch: &RecordBatch) -> CliResult<Option<UInt32Array>> {
    let rows = u32::try_from(batch.num_rows())
        .map_err(|_| CliError::Output("more than 2^32 rows in one partition".into()))?;
    if rows < 2 {
        return Ok(None);
    }
    let path = batch.column_by_name(meta::PARTITION_PATH);
    let key = batch.column_by_name(meta::RECORD_KEY);
    // The common case: one partition path (or none) and string keys; sorted by key alone,
    // comparing the key bytes directly.
    let one_path = path.is_none_or(|p| {
        p.as_string_opt::<i32>()
            .is_some_and(|p| p.null_count() == 0 && (1..p.len()).all(|i| p.value(i) == p.value(0)))
    });
    if let (true, Some(keys)) = (one_path, key.and_then(|k| k.as_string_opt::<i32>())) {
        return Ok(sort_keys(keys, rows));
    }
    let keys: Vec<SortColumn> = [path, key]
        .into_iter()
        .flatten()
        .map(|c| SortColumn {
            values: c.clone(),
            options: None,
        })
        .collect();
    if keys.is_empty() {
        return Ok(None);
    }
    let err = |e: arrow::error::ArrowError| CliError::Output(e.to_string());
    let cmp = LexicographicalComparator::try_new(&keys).map_err(err)?;
    let rows_usize = batch.num_rows();
    if (1..rows_usize).all(|i| cmp.compare(i - 1, i) != std::cmp::Ordering::Greater) {
        return Ok(None);
    }
    let mut indices: Vec<u32> = (0..rows).collect();
    // Stable: equal keys keep the scan's order.
    indices.sort_by(|a, b| cmp.compare(*a as usize, *b as usize));
    Ok(Some(UInt32Array::from(indices)))
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

    fn keyed(paths: Vec<Option<&str>>, keys: Vec<Option<&str>>) -> RecordBatch {
        let n = keys.len() as i64;
        let schema = Arc::new(Schema::new(vec![
            Field::new(meta::PARTITION_PATH, DataType::Utf8, true),
            Field::new(meta::RECORD_KEY, DataType::Utf8, true),
            Field::new("n", DataType::Int64, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(paths)),
                Arc::new(StringArray::from(keys)),
                Arc::new(Int64Array::from((0..n).collect::<Vec<_>>())),
            ],
        )
        .unwrap()
    }

    /// The order the general comparator gives (stable, nulls first).
    fn by_comparator(batch: &RecordBatch) -> Vec<i64> {
        let keys: Vec<SortColumn> = [meta::PARTITION_PATH, meta::RECORD_KEY]
            .iter()
            .map(|c| SortColumn {
                values: batch.column_by_name(c).unwrap().clone(),
                options: None,
            })
            .collect();
        let cmp = LexicographicalComparator::try_new(&keys).unwrap();
        let mut idx: Vec<usize> = (0..batch.num_rows()).collect();
        idx.sort_by(|a, b| cmp.compare(*a, *b));
        idx.into_iter().map(|i| i as i64).collect()
    }

    #[test]
    fn test_sorting_keys_of_every_shape_equals_the_general_comparator() {
        let shapes: Vec<Vec<Option<&str>>> = vec![
            vec![
                Some("k10"),
                Some("k1"),
                Some("k"),
                Some("k100"),
                Some("k1"),
                None,
                Some("k0"),
            ],
            vec![
                Some("a\u{0}"),
                Some("a"),
                Some("a\u{0}\u{0}"),
                Some(""),
                Some("a"),
                None,
                None,
            ],
            vec![
                Some("2024-01-01T00:00:00.000001"),
                Some("2024-01-01T00:00:00.000000"),
                Some("2024-01-01T00:00:00.0000001"),
                Some("2024-01-01T00:00:00"),
            ],
            vec![
                Some("é"),
                Some("e"),
                Some("z"),
                Some("ée"),
                Some("\u{10FFFF}"),
            ],
            vec![None, None],
            vec![Some("same"), Some("same"), Some("same")],
        ];
        for keys in shapes {
            let batch = keyed(vec![Some("p"); keys.len()], keys.clone());
            let out = sorted(batch.clone()).unwrap();
            let n: Vec<i64> = out.column(2).as_primitive::<Int64Type>().values().to_vec();
            assert_eq!(n, by_comparator(&batch), "{keys:?}");
        }
    }

    #[test]
    fn test_sorting_one_partition_by_key_equals_the_general_comparator() {
        // Keys with duplicates and nulls, in a scrambled order.
        let keys: Vec<Option<String>> = (0..500u64)
            .map(|i| {
                let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
                (h % 11 != 0).then(|| format!("k{}", h % 97))
            })
            .collect();
        let keys: Vec<Option<&str>> = keys.iter().map(|k| k.as_deref()).collect();
        for paths in [vec![Some("p=1"); keys.len()], {
            let mut v = vec![Some("p=1"); keys.len()];
            v[7] = Some("p=0");
            v[9] = None;
            v
        }] {
            let batch = keyed(paths, keys.clone());
            let out = sorted(batch.clone()).unwrap();
            let n: Vec<i64> = out.column(2).as_primitive::<Int64Type>().values().to_vec();
            assert_eq!(n, by_comparator(&batch));
            // Sorted rows are recognised as such: no order to apply.
            assert!(sort_indices(&out).unwrap().is_none());
        }
    }
}
