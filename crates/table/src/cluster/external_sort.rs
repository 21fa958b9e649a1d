//! Sorting more rows than fit a memory budget: rows are buffered with their sort keys; when
//! the buffer passes the budget it is sorted and spilled to a temporary Arrow IPC file (a
//! run); the sorted output merges the runs, so memory holds the budget plus one batch per run.
//! Equal keys keep their input order (the sort is stable), so with no sort key at all the
//! output is the input.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;

use crate::error::{Result, TableError};

/// Rows per output batch.
pub(crate) const CHUNK_ROWS: usize = 8192;

const KEY_COLUMN: &str = "__arbor_sort_key";

fn spill_error(what: &str, e: impl std::fmt::Display) -> TableError {
    TableError::Unsupported {
        reason: format!("clustering sort: {what} a temporary run file: {e}"),
    }
}

/// A sort whose buffered rows stay under a memory budget (module doc).
#[derive(Debug)]
pub(crate) struct ExternalSort {
    schema: SchemaRef,
    budget: usize,
    buffered: Vec<(RecordBatch, BinaryArray)>,
    bytes: usize,
    runs: Vec<File>,
}

impl ExternalSort {
    /// An empty sort of rows of `schema`, spilling past `budget` bytes of buffered rows.
    pub(crate) fn new(schema: SchemaRef, budget: usize) -> Self {
        ExternalSort {
            schema,
            budget: budget.max(1),
            buffered: Vec::new(),
            bytes: 0,
            runs: Vec::new(),
        }
    }

    /// Runs spilled so far.
    pub(crate) fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Adds `batch` with one key per row.
    pub(crate) fn push(&mut self, batch: RecordBatch, keys: BinaryArray) -> Result<()> {
        if keys.len() != batch.num_rows() {
            return Err(TableError::Unsupported {
                reason: format!(
                    "clustering sort: {} keys for {} rows",
                    keys.len(),
                    batch.num_rows()
                ),
            });
        }
        self.bytes += batch.get_array_memory_size() + keys.get_array_memory_size();
        self.buffered.push((batch, keys));
        if self.bytes > self.budget {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        let buffered = std::mem::take(&mut self.buffered);
        self.bytes = 0;
        let order = sorted_order(&buffered);
        let file = tempfile::tempfile().map_err(|e| spill_error("creating", e))?;
        let mut fields: Vec<Arc<Field>> = self.schema.fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new(KEY_COLUMN, DataType::Binary, false)));
        let run_schema = Arc::new(Schema::new(fields));
        let mut writer =
            FileWriter::try_new(file, &run_schema).map_err(|e| spill_error("writing", e))?;
        for chunk in order.chunks(CHUNK_ROWS) {
            let batch = gather(&run_schema, &buffered, chunk, true)?;
            writer
                .write(&batch)
                .map_err(|e| spill_error("writing", e))?;
        }
        writer.finish().map_err(|e| spill_error("writing", e))?;
        let mut file = writer.into_inner().map_err(|e| spill_error("writing", e))?;
        file.seek(SeekFrom::Start(0))
            .map_err(|e| spill_error("rewinding", e))?;
        self.runs.push(file);
        Ok(())
    }

    /// The rows in key order, in batches of up to [`CHUNK_ROWS`] rows.
    pub(crate) fn finish(mut self) -> Result<SortedRows> {
        if self.runs.is_empty() {
            let order = sorted_order(&self.buffered);
            return Ok(SortedRows::Memory {
                schema: self.schema,
                buffered: self.buffered,
                order,
                next: 0,
            });
        }
        if !self.buffered.is_empty() {
            self.spill()?;
        }
        let mut cursors = Vec::with_capacity(self.runs.len());
        for file in self.runs {
            let reader = FileReader::try_new(file, None).map_err(|e| spill_error("reading", e))?;
            cursors.push(RunCursor {
                reader,
                batch: None,
                row: 0,
            });
        }
        let mut merge = Merge {
            schema: self.schema,
            cursors,
            heap: BinaryHeap::new(),
        };
        for i in 0..merge.cursors.len() {
            merge.advance(i)?;
        }
        Ok(SortedRows::Merge(merge))
    }
}

/// The first 16 bytes of `key`, big-endian, zero-padded: comparing two prefixes orders their
/// keys unless they are equal (then the whole keys are compared).
fn prefix(key: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    let n = key.len().min(16);
    if let (Some(dst), Some(src)) = (b.get_mut(..n), key.get(..n)) {
        dst.copy_from_slice(src);
    }
    u128::from_be_bytes(b)
}

/// `(batch, row)` of every buffered row in key order (stable: equal keys keep input order).
fn sorted_order(buffered: &[(RecordBatch, BinaryArray)]) -> Vec<(usize, usize)> {
    let mut order: Vec<(u128, u32, u32)> = buffered
        .iter()
        .enumerate()
        .flat_map(|(b, (batch, keys))| {
            (0..batch.num_rows()).map(move |r| {
                let (b32, r32) = (b as u32, r as u32);
                (prefix(keys.value(r)), b32, r32)
            })
        })
        .collect();
    let key = |b: u32, r: u32| buffered.get(b as usize).map(|(_, k)| k.value(r as usize));
    order.sort_by(|&(ap, ab, ar), &(bp, bb, br)| {
        ap.cmp(&bp).then_with(|| key(ab, ar).cmp(&key(bb, br)))
    });
    order
        .into_iter()
        .map(|(_, b, r)| (b as usize, r as usize))
        .collect()
}

/// The rows `picks` (`(batch, row)`) of `sources` as one batch of `schema` (with the key
/// column last when `with_key`).
fn gather(
    schema: &SchemaRef,
    sources: &[(RecordBatch, BinaryArray)],
    picks: &[(usize, usize)],
    with_key: bool,
) -> Result<RecordBatch> {
    let ncols = sources.first().map_or(0, |(b, _)| b.num_columns());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(ncols + 1);
    let err = |e: arrow::error::ArrowError| TableError::Unsupported {
        reason: format!("clustering sort: gathering rows: {e}"),
    };
    for c in 0..ncols {
        let arrays: Vec<&dyn Array> = sources
            .iter()
            .filter_map(|(b, _)| b.columns().get(c).map(|a| a.as_ref()))
            .collect();
        columns.push(arrow::compute::interleave(&arrays, picks).map_err(err)?);
    }
    if with_key {
        let arrays: Vec<&dyn Array> = sources.iter().map(|(_, k)| k as &dyn Array).collect();
        columns.push(arrow::compute::interleave(&arrays, picks).map_err(err)?);
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(err)
}

/// The sorted rows of an [`ExternalSort`].
#[derive(Debug)]
pub(crate) enum SortedRows {
    /// Everything fit the budget.
    Memory {
        schema: SchemaRef,
        buffered: Vec<(RecordBatch, BinaryArray)>,
        order: Vec<(usize, usize)>,
        next: usize,
    },
    /// Runs merged from their files.
    Merge(Merge),
}

impl SortedRows {
    /// The next batch of sorted rows, `None` at the end.
    pub(crate) fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        match self {
            SortedRows::Memory {
                schema,
                buffered,
                order,
                next,
            } => {
                let Some(picks) = order.get(*next..(*next + CHUNK_ROWS).min(order.len())) else {
                    return Ok(None);
                };
                if picks.is_empty() {
                    return Ok(None);
                }
                *next += picks.len();
                gather(schema, buffered, picks, false).map(Some)
            }
            SortedRows::Merge(m) => m.next_batch(),
        }
    }
}

#[derive(Debug)]
struct RunCursor {
    reader: FileReader<File>,
    batch: Option<(RecordBatch, BinaryArray)>,
    row: usize,
}

/// A k-way merge of sorted runs.
#[derive(Debug)]
pub(crate) struct Merge {
    schema: SchemaRef,
    cursors: Vec<RunCursor>,
    /// The next row of each live cursor: (key, cursor) (cursor order breaks ties, keeping the
    /// sort stable: earlier runs hold earlier input).
    heap: BinaryHeap<Reverse<(Vec<u8>, usize)>>,
}

impl Merge {
    /// Moves cursor `i` to its next row (loading its next batch when needed) and queues it.
    fn advance(&mut self, i: usize) -> Result<()> {
        let Some(c) = self.cursors.get_mut(i) else {
            return Ok(());
        };
        loop {
            if let Some((b, k)) = &c.batch {
                if c.row < b.num_rows() {
                    self.heap.push(Reverse((k.value(c.row).to_vec(), i)));
                    return Ok(());
                }
            }
            match c.reader.next() {
                None => {
                    c.batch = None;
                    return Ok(());
                }
                Some(b) => {
                    let b = b.map_err(|e| spill_error("reading", e))?;
                    let n = b.num_columns();
                    let key = b
                        .columns()
                        .last()
                        .and_then(|c| c.as_any().downcast_ref::<BinaryArray>())
                        .filter(|k| k.len() == b.num_rows())
                        .cloned()
                        .ok_or_else(|| spill_error("reading", "no key column"))?;
                    let data = b
                        .project(&(0..n.saturating_sub(1)).collect::<Vec<_>>())
                        .map_err(|e| spill_error("reading", e))?;
                    c.batch = Some((data, key));
                    c.row = 0;
                }
            }
        }
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        // Sources of this output batch: each cursor's batches as they were when picked.
        let mut sources: Vec<(RecordBatch, BinaryArray)> = Vec::new();
        let mut source_of: Vec<Option<usize>> = vec![None; self.cursors.len()];
        let mut picks = Vec::with_capacity(CHUNK_ROWS);
        while picks.len() < CHUNK_ROWS {
            let Some(Reverse((_, i))) = self.heap.pop() else {
                break;
            };
            let Some(c) = self.cursors.get_mut(i) else {
                break;
            };
            let Some(current) = &c.batch else {
                break;
            };
            let s = match source_of.get(i).copied().flatten() {
                Some(s) => s,
                None => {
                    sources.push(current.clone());
                    let s = sources.len() - 1;
                    if let Some(slot) = source_of.get_mut(i) {
                        *slot = Some(s);
                    }
                    s
                }
            };
            picks.push((s, c.row));
            c.row += 1;
            let exhausted = c.row >= current.0.num_rows();
            if exhausted {
                // The cursor's next batch is another source.
                if let Some(slot) = source_of.get_mut(i) {
                    *slot = None;
                }
            }
            self.advance(i)?;
        }
        if picks.is_empty() {
            return Ok(None);
        }
        gather(&self.schema, &sources, &picks, false).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BinaryBuilder, Int64Array};

    fn input(values: &[i64]) -> (RecordBatch, BinaryArray) {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let b = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(values.to_vec()))])
            .unwrap();
        let mut k = BinaryBuilder::new();
        for v in values {
            // Key: the value divided by 10 (ties keep input order).
            k.append_value(((v / 10) as u64).to_be_bytes());
        }
        (b, k.finish())
    }

    fn drain(mut rows: SortedRows) -> Vec<i64> {
        let mut out = Vec::new();
        while let Some(b) = rows.next_batch().unwrap() {
            assert!(b.num_rows() <= CHUNK_ROWS);
            let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            out.extend(a.values().iter().copied());
        }
        out
    }

    fn expected(all: &[i64]) -> Vec<i64> {
        let mut e = all.to_vec();
        e.sort_by_key(|v| v / 10); // stable
        e
    }

    #[test]
    fn test_sort_in_memory_and_with_spilled_runs_agree_and_are_stable() {
        let all: Vec<i64> = (0..30_000).map(|i| (i * 7919) % 30_000).collect();
        for budget in [usize::MAX, 50_000, 300_000] {
            let schema = input(&[]).0.schema();
            let mut s = ExternalSort::new(schema, budget);
            for chunk in all.chunks(1000) {
                let (b, k) = input(chunk);
                s.push(b, k).unwrap();
            }
            let spilled = s.runs() > 0;
            assert_eq!(spilled, budget != usize::MAX, "budget {budget}");
            assert_eq!(
                drain(s.finish().unwrap()),
                expected(&all),
                "budget {budget}"
            );
        }
    }

    #[test]
    fn test_empty_sort_and_key_count_mismatch() {
        let schema = input(&[]).0.schema();
        let s = ExternalSort::new(schema.clone(), 10);
        assert!(drain(s.finish().unwrap()).is_empty());
        let mut s = ExternalSort::new(schema, 10);
        let (b, _) = input(&[1, 2]);
        let (_, k) = input(&[1]);
        assert!(s.push(b, k).is_err());
    }
}
