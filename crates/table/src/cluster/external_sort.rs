//! Sorting more rows than fit a memory budget: rows are buffered with their sort keys; when
//! the buffer passes half the budget it is sorted and written to a temporary Arrow IPC file (a
//! run) on a thread of its own while the next buffer fills. The sorted output merges the runs
//! with the rows still buffered, so memory holds the budget plus one small batch per run.
//! Input expected to fit the budget whole is not spilled at all. Equal keys keep their input
//! order (the sort is stable), so with no sort key at all the output is the input.

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

/// Rows per batch of a spilled run: the merge holds one batch of every run, so they are kept
/// small (memory grows with the number of runs by this much per run).
const RUN_BATCH_ROWS: usize = 1024;

const KEY_COLUMN: &str = "__arbor_sort_key";

fn spill_error(what: &str, e: impl std::fmt::Display) -> TableError {
    TableError::Unsupported {
        reason: format!("clustering sort: {what} a temporary run file: {e}"),
    }
}

/// A sort whose buffered rows stay under a memory budget (module doc). A run is sorted and
/// written on a thread of its own while the next one fills, so each holds at most half the
/// budget; unless the input is expected to fit the budget whole (see
/// [`ExternalSort::input_progress`]): then nothing is spilled before the budget is full.
#[derive(Debug)]
pub(crate) struct ExternalSort {
    schema: SchemaRef,
    budget: usize,
    buffered: Vec<(RecordBatch, BinaryArray)>,
    bytes: usize,
    /// Bytes of every row pushed so far.
    pushed: usize,
    /// (input bytes read, input bytes in all).
    progress: Option<(u64, u64)>,
    runs: Vec<File>,
    /// The run being written.
    spilling: Option<std::thread::JoinHandle<Result<File>>>,
}

impl ExternalSort {
    /// An empty sort of rows of `schema`, spilling past `budget` bytes of buffered rows.
    pub(crate) fn new(schema: SchemaRef, budget: usize) -> Self {
        ExternalSort {
            schema,
            budget: budget.max(1),
            buffered: Vec::new(),
            bytes: 0,
            pushed: 0,
            progress: None,
            runs: Vec::new(),
            spilling: None,
        }
    }

    /// Tells how much of the input (in bytes on storage) the rows pushed so far came from:
    /// the rows still to come are expected in the same proportion.
    pub(crate) fn input_progress(&mut self, read: u64, total: u64) {
        self.progress = Some((read, total));
    }

    /// Whether all the input is expected to fit the budget.
    fn expected_to_fit(&self) -> bool {
        match self.progress {
            Some((read, total)) if read > 0 => {
                let expected = self.pushed as f64 * total as f64 / read as f64;
                expected <= self.budget as f64
            }
            _ => false,
        }
    }

    /// Runs spilled so far (the one being written included).
    pub(crate) fn runs(&self) -> usize {
        self.runs.len() + usize::from(self.spilling.is_some())
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
        let bytes = batch.get_array_memory_size() + keys.get_array_memory_size();
        self.bytes += bytes;
        self.pushed += bytes;
        self.buffered.push((batch, keys));
        let limit = if self.runs() == 0 && self.expected_to_fit() {
            self.budget
        } else {
            self.budget / 2
        };
        if self.bytes > limit {
            self.spill()?;
        }
        Ok(())
    }

    /// Starts writing the buffered rows as a run, once the run before is written.
    fn spill(&mut self) -> Result<()> {
        self.join_spilling()?;
        let buffered = std::mem::take(&mut self.buffered);
        self.bytes = 0;
        let schema = self.schema.clone();
        let handle = std::thread::Builder::new()
            .name("arbor-cluster-spill".into())
            .spawn(move || write_run(&schema, &buffered))
            .map_err(|e| spill_error("starting a thread for", e))?;
        self.spilling = Some(handle);
        Ok(())
    }

    fn join_spilling(&mut self) -> Result<()> {
        if let Some(handle) = self.spilling.take() {
            let file = handle
                .join()
                .map_err(|_| spill_error("writing", "the writing thread stopped"))??;
            self.runs.push(file);
        }
        Ok(())
    }

    /// The rows in key order, in batches of up to [`CHUNK_ROWS`] rows. Rows still buffered
    /// are not spilled: they are merged with the runs from memory.
    pub(crate) fn finish(mut self) -> Result<SortedRows> {
        self.join_spilling()?;
        let order = sorted_order(&self.buffered);
        if self.runs.is_empty() {
            return Ok(SortedRows::Memory {
                schema: self.schema,
                buffered: self.buffered,
                order,
                next: 0,
            });
        }
        let mut cursors = Vec::with_capacity(self.runs.len() + 1);
        for file in self.runs {
            let reader = FileReader::try_new(file, None).map_err(|e| spill_error("reading", e))?;
            cursors.push(RunCursor::File {
                reader: Box::new(reader),
                batch: None,
                row: 0,
            });
        }
        if !order.is_empty() {
            // Last: it holds the latest input (ties go to earlier cursors).
            cursors.push(RunCursor::Memory {
                buffered: self.buffered,
                order,
                next: 0,
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

/// `buffered` sorted, written to a new temporary Arrow IPC file with the keys as a last
/// column; the file is rewound for reading.
fn write_run(schema: &SchemaRef, buffered: &[(RecordBatch, BinaryArray)]) -> Result<File> {
    let order = sorted_order(buffered);
    let file = tempfile::tempfile().map_err(|e| spill_error("creating", e))?;
    let mut fields: Vec<Arc<Field>> = schema.fields().iter().cloned().collect();
    fields.push(Arc::new(Field::new(KEY_COLUMN, DataType::Binary, false)));
    let run_schema = Arc::new(Schema::new(fields));
    let mut writer =
        FileWriter::try_new(file, &run_schema).map_err(|e| spill_error("writing", e))?;
    for chunk in order.chunks(CHUNK_ROWS) {
        let batch = gather_in_parallel(&run_schema, buffered, chunk, true)?;
        let mut offset = 0;
        while offset < batch.num_rows() {
            let n = RUN_BATCH_ROWS.min(batch.num_rows() - offset);
            writer
                .write(&batch.slice(offset, n))
                .map_err(|e| spill_error("writing", e))?;
            offset += n;
        }
    }
    writer.finish().map_err(|e| spill_error("writing", e))?;
    let mut file = writer.into_inner().map_err(|e| spill_error("writing", e))?;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| spill_error("rewinding", e))?;
    Ok(file)
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
    let columns = (0..ncols)
        .map(|c| gather_column(sources, picks, Some(c)))
        .chain(with_key.then(|| gather_column(sources, picks, None)))
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(schema.clone(), columns).map_err(gather_error)
}

/// [`gather`] with the columns split between this thread and one more (rows gathered in key
/// order are read at random: the copying is most of the work of a sort).
fn gather_in_parallel(
    schema: &SchemaRef,
    sources: &[(RecordBatch, BinaryArray)],
    picks: &[(usize, usize)],
    with_key: bool,
) -> Result<RecordBatch> {
    let ncols = sources.first().map_or(0, |(b, _)| b.num_columns()) + usize::from(with_key);
    if ncols < 2 {
        return gather(schema, sources, picks, with_key);
    }
    // Alternate columns between the threads (neighbours are often alike in width); the key
    // column, when asked for, is the last.
    let (mine, theirs): (Vec<usize>, Vec<usize>) = (0..ncols).partition(|c| c % 2 == 0);
    let key_column = with_key.then_some(ncols - 1);
    let gather_all = |cols: &[usize]| -> Result<Vec<(usize, ArrayRef)>> {
        cols.iter()
            .map(|&c| {
                let column = (Some(c) != key_column).then_some(c);
                gather_column(sources, picks, column).map(|a| (c, a))
            })
            .collect()
    };
    let (a, b) = std::thread::scope(|scope| {
        let other = std::thread::Builder::new()
            .name("arbor-cluster-gather".into())
            .spawn_scoped(scope, || gather_all(&theirs));
        let a = gather_all(&mine);
        let b = match other {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| Err(gather_error("a gathering thread stopped"))),
            // No thread to be had: gather those columns here.
            Err(_) => gather_all(&theirs),
        };
        (a, b)
    });
    let mut columns: Vec<(usize, ArrayRef)> = a?;
    columns.extend(b?);
    columns.sort_by_key(|(c, _)| *c);
    RecordBatch::try_new(
        schema.clone(),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .map_err(gather_error)
}

/// Column `column` (the key column when `None`) of the rows `picks` of `sources`.
fn gather_column(
    sources: &[(RecordBatch, BinaryArray)],
    picks: &[(usize, usize)],
    column: Option<usize>,
) -> Result<ArrayRef> {
    let arrays: Vec<&dyn Array> = match column {
        Some(c) => sources
            .iter()
            .filter_map(|(b, _)| b.columns().get(c).map(|a| a.as_ref()))
            .collect(),
        None => sources.iter().map(|(_, k)| k as &dyn Array).collect(),
    };
    arrow::compute::interleave(&arrays, picks).map_err(gather_error)
}

fn gather_error(e: impl std::fmt::Display) -> TableError {
    TableError::Unsupported {
        reason: format!("clustering sort: gathering rows: {e}"),
    }
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
                gather_in_parallel(schema, buffered, picks, false).map(Some)
            }
            SortedRows::Merge(m) => m.next_batch(),
        }
    }
}

/// One sorted run being merged.
#[derive(Debug)]
enum RunCursor {
    /// A spilled run, read batch by batch.
    File {
        reader: Box<FileReader<File>>,
        batch: Option<(RecordBatch, BinaryArray)>,
        row: usize,
    },
    /// The rows still buffered when the sort finished, in key order.
    Memory {
        buffered: Vec<(RecordBatch, BinaryArray)>,
        order: Vec<(usize, usize)>,
        next: usize,
    },
}

impl RunCursor {
    /// The key of the current row, `None` at the end (a file cursor must have been advanced).
    fn key(&self) -> Option<&[u8]> {
        match self {
            RunCursor::File {
                batch: Some((b, k)),
                row,
                ..
            } if *row < b.num_rows() => Some(k.value(*row)),
            RunCursor::File { .. } => None,
            RunCursor::Memory {
                buffered,
                order,
                next,
            } => {
                let (b, r) = *order.get(*next)?;
                buffered.get(b).map(|(_, k)| k.value(r))
            }
        }
    }
}

/// A cursor's next row in the merge heap, ordered as its key (then by cursor, which keeps
/// the sort stable: earlier runs hold earlier input). The key is held as its first 16 bytes
/// and the rest (allocated only for keys longer than 16 bytes), then its length: comparing
/// these three compares the keys.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Head {
    prefix: u128,
    tail: Vec<u8>,
    len: usize,
    cursor: usize,
}

impl Head {
    fn new(key: &[u8], cursor: usize) -> Self {
        Head {
            prefix: prefix(key),
            tail: key.get(16..).map(<[u8]>::to_vec).unwrap_or_default(),
            len: key.len(),
            cursor,
        }
    }
}

/// A k-way merge of sorted runs.
#[derive(Debug)]
pub(crate) struct Merge {
    schema: SchemaRef,
    cursors: Vec<RunCursor>,
    /// The current row of each live cursor.
    heap: BinaryHeap<Reverse<Head>>,
}

/// Splits a spilled batch into its rows and keys.
fn split_run_batch(b: RecordBatch) -> Result<(RecordBatch, BinaryArray)> {
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
    Ok((data, key))
}

impl Merge {
    /// Queues cursor `i`'s current row, loading a file cursor's next batch when its current
    /// one is used up.
    fn advance(&mut self, i: usize) -> Result<()> {
        let Some(c) = self.cursors.get_mut(i) else {
            return Ok(());
        };
        if let RunCursor::File { reader, batch, row } = c {
            while batch.as_ref().is_none_or(|(b, _)| *row >= b.num_rows()) {
                match reader.next() {
                    None => {
                        *batch = None;
                        return Ok(());
                    }
                    Some(b) => {
                        *batch = Some(split_run_batch(b.map_err(|e| spill_error("reading", e))?)?);
                        *row = 0;
                    }
                }
            }
        }
        if let Some(key) = c.key() {
            self.heap.push(Reverse(Head::new(key, i)));
        }
        Ok(())
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        // Sources of this output batch: the file cursors' batches as they were when picked,
        // and the buffered batches the memory cursor picked from.
        let mut sources: Vec<(RecordBatch, BinaryArray)> = Vec::new();
        let mut file_source: Vec<Option<usize>> = vec![None; self.cursors.len()];
        let mut memory_source: Vec<Option<usize>> = Vec::new();
        let mut picks = Vec::with_capacity(CHUNK_ROWS);
        while picks.len() < CHUNK_ROWS {
            let Some(Reverse(head)) = self.heap.pop() else {
                break;
            };
            let i = head.cursor;
            let Some(c) = self.cursors.get_mut(i) else {
                break;
            };
            match c {
                RunCursor::File {
                    batch: Some(current),
                    row,
                    ..
                } => {
                    let slot = file_source.get_mut(i).ok_or_else(|| no_cursor(i))?;
                    let s = match *slot {
                        Some(s) => s,
                        None => {
                            sources.push(current.clone());
                            *slot = Some(sources.len() - 1);
                            sources.len() - 1
                        }
                    };
                    picks.push((s, *row));
                    *row += 1;
                    if *row >= current.0.num_rows() {
                        // The cursor's next batch is another source.
                        *slot = None;
                    }
                }
                RunCursor::File { batch: None, .. } => return Err(no_cursor(i)),
                RunCursor::Memory {
                    buffered,
                    order,
                    next,
                } => {
                    let (b, r) = *order.get(*next).ok_or_else(|| no_cursor(i))?;
                    if memory_source.len() < buffered.len() {
                        memory_source.resize(buffered.len(), None);
                    }
                    let slot = memory_source.get_mut(b).ok_or_else(|| no_cursor(i))?;
                    let s = match *slot {
                        Some(s) => s,
                        None => {
                            let source = buffered.get(b).ok_or_else(|| no_cursor(i))?;
                            sources.push(source.clone());
                            *slot = Some(sources.len() - 1);
                            sources.len() - 1
                        }
                    };
                    picks.push((s, r));
                    *next += 1;
                }
            }
            self.advance(i)?;
        }
        if picks.is_empty() {
            return Ok(None);
        }
        gather_in_parallel(&self.schema, &sources, &picks, false).map(Some)
    }
}

fn no_cursor(i: usize) -> TableError {
    spill_error("merging", format!("run {i} has no current row"))
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

    /// Keys of every length around the 16-byte prefix, zero bytes included (a shorter key
    /// padded with zeros must still sort before a longer one).
    fn awkward_key(v: i64) -> Vec<u8> {
        let mut k = vec![0u8; (v % 37) as usize];
        if let Some(last) = k.last_mut() {
            *last = (v % 3) as u8;
        }
        k
    }

    #[test]
    fn test_keys_longer_and_shorter_than_the_prefix_merge_in_byte_order() {
        let all: Vec<i64> = (0..20_000).map(|i| (i * 7919) % 20_000).collect();
        let mut expected = all.clone();
        expected.sort_by_key(|v| awkward_key(*v)); // stable
        let schema = input(&[]).0.schema();
        let mut s = ExternalSort::new(schema, 40_000);
        for chunk in all.chunks(500) {
            let (b, _) = input(chunk);
            let mut k = BinaryBuilder::new();
            for v in chunk {
                k.append_value(awkward_key(*v));
            }
            s.push(b, k.finish()).unwrap();
        }
        assert!(s.runs() > 2);
        assert_eq!(drain(s.finish().unwrap()), expected);
    }

    /// Input expected to fit the budget is not spilled before the budget is full; input
    /// expected not to fit is spilled at half of it (the other half fills meanwhile).
    #[test]
    fn test_spills_at_half_the_budget_unless_the_input_is_expected_to_fit() {
        let schema = input(&[]).0.schema();
        let (b, k) = input(&(0..1000).collect::<Vec<_>>());
        let one = b.get_array_memory_size() + k.get_array_memory_size();
        let budget = one * 5 + one / 2;
        for (total_batches, spilled_after_three) in [(5u64, false), (20, true)] {
            let mut s = ExternalSort::new(schema.clone(), budget);
            for i in 1..=3u64 {
                s.input_progress(i, total_batches);
                let (b, k) = input(&(0..1000).collect::<Vec<_>>());
                s.push(b, k).unwrap();
            }
            assert_eq!(s.runs() > 0, spilled_after_three, "{total_batches} batches");
            assert_eq!(drain(s.finish().unwrap()).len(), 3000);
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
