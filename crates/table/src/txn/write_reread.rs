//! An upsert or delete of an input that can be read again ([`crate::Table::write_reread`]).
//!
//! The first read validates and keys the input batch by batch. An input within
//! [`held_budget`] is kept and written as [`crate::Table::write`] writes it. A larger one keeps
//! only its keys: once read, each key gets its route ([`super::route::route_keys`]: the file
//! group the index finds it in, or the key itself when new), the routes are spread over waves
//! of at most about the budget each (every row of one route in one wave), and each wave is one
//! more read of the input that keeps that wave's rows and writes them as a fragment of one
//! distributed write ([`super::distributed`]); the fragments complete as one commit. Memory is
//! bounded by the keys and one wave's rows (and the file groups it rewrites), not the input.
//!
//! Failure: until the commit point the instant is pending and none of its files is visible; on
//! any error (a bad row, the input reading differently, storage) the write is aborted, its
//! files deleted, and the table reads as before.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::fmt::Display;

use arrow::array::BooleanArray;
use arrow::compute::filter_record_batch;
use arrow::record_batch::RecordBatch;
use futures::{Stream, StreamExt};

use super::context::{invalid, Table};
use super::fragment::{Fragment, WriteContext};
use super::route::route_keys;
use super::write::validate_with_schema;
use crate::error::{Result, TableError};
use crate::keygen::HoodieKey;
use crate::write::options::{CommitResult, WriteOperation};

/// The input bytes (Arrow's in-memory size) a write holds before it writes in waves, and the
/// size of each wave: four times `WriteOptions::stream_memory` (384 MiB by default).
pub(crate) fn held_budget(table: &Table) -> u64 {
    table.ctx.options.stream_memory.saturating_mul(4).max(1)
}

/// [`crate::Table::write_reread`].
pub(crate) async fn write_reread<F, S, E>(
    table: &Table,
    operation: WriteOperation,
    mut open: F,
) -> Result<CommitResult>
where
    F: FnMut() -> S,
    S: Stream<Item = std::result::Result<RecordBatch, E>> + Unpin,
    E: Display,
{
    let in_waves = matches!(operation, WriteOperation::Upsert | WriteOperation::Delete)
        && table.ctx.options.drop_columns.is_empty();
    let budget = held_budget(table);
    let mut first = FirstRead::default();
    let mut input = open();
    let mut batch_number = 0usize;
    while let Some(item) = input.next().await {
        let batch = item.map_err(|e| stream_error(batch_number, e))?;
        batch_number += 1;
        first.add(table, batch, in_waves, budget)?;
    }
    drop(input);
    if first.rows == 0 {
        return Err(invalid(None, "the input has no rows"));
    }
    let Some(keys) = first.keys else {
        return table.write(operation, first.held).await;
    };
    let routes = route_keys(table, &keys).await?;
    drop(keys);
    let waves = usize::try_from(first.bytes.div_ceil(budget))
        .unwrap_or(usize::MAX)
        .clamp(2, u32::MAX as usize);
    let (wave_of, waves) = spread(&routes, waves);
    drop(routes);
    tracing::info!(
        rows = first.rows,
        bytes = first.bytes,
        waves,
        "the input is larger than the write holds: writing it in waves, one read each"
    );
    let transaction = table.begin_write(operation).await?;
    let mut fragments = Vec::new();
    for wave in 0..waves {
        let rows = wave_rows(&mut open, &wave_of, wave, first.rows).await;
        let written = match rows {
            Ok(w) if w.rows.is_empty() => continue,
            Ok(w) => write_wave(table, transaction.context(), wave, w).await,
            Err(e) => Err(e),
        };
        match written {
            Ok(f) => fragments.push(f),
            Err(e) => {
                table.abort_write(transaction).await;
                return Err(e);
            }
        }
    }
    table.commit_fragments(transaction, fragments).await
}

/// What the first read keeps: the batches while they fit the budget, then only the keys.
#[derive(Default)]
struct FirstRead {
    held: Vec<RecordBatch>,
    held_bytes: u64,
    keys: Option<Vec<HoodieKey>>,
    rows: usize,
    bytes: u64,
}

impl FirstRead {
    fn add(
        &mut self,
        table: &Table,
        batch: RecordBatch,
        in_waves: bool,
        budget: u64,
    ) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let first_row = self.rows;
        let bytes = batch.get_array_memory_size() as u64;
        self.rows += batch.num_rows();
        self.bytes = self.bytes.saturating_add(bytes);
        if let Some(keys) = self.keys.as_mut() {
            keys.extend(keys_of(table, &batch, first_row)?);
            return Ok(());
        }
        if !in_waves || self.held_bytes.saturating_add(bytes) <= budget {
            self.held_bytes += bytes;
            self.held.push(batch);
            return Ok(());
        }
        // Over the budget: from here on only keys are kept.
        let mut keys = Vec::new();
        let mut at = 0usize;
        for held in std::mem::take(&mut self.held) {
            keys.extend(keys_of(table, &held, at)?);
            at += held.num_rows();
        }
        keys.extend(keys_of(table, &batch, first_row)?);
        self.held_bytes = 0;
        self.keys = Some(keys);
        Ok(())
    }
}

/// The record key and partition path of each row of `batch` (whose first row is input row
/// `first_row`), validated as a delete validates them: only the key and partition columns.
fn keys_of(table: &Table, batch: &RecordBatch, first_row: usize) -> Result<Vec<HoodieKey>> {
    let config = &table.ctx.config;
    let top = |c: String| c.split('.').next().unwrap_or(&c).to_string();
    let needed: BTreeSet<String> = config
        .record_key_fields()
        .into_iter()
        .chain(config.partition_fields())
        .map(top)
        .collect();
    let schema = batch.schema();
    let mut columns = Vec::new();
    for name in &needed {
        match schema.index_of(name) {
            Ok(i) => columns.push(i),
            Err(_) => {
                return Err(invalid(
                    Some(name),
                    "the input has no such column (a record key or partition column)",
                ))
            }
        }
    }
    let projected = batch
        .project(&columns)
        .map_err(|e| invalid(None, e.to_string()))?;
    validate_with_schema(table, WriteOperation::Delete, &[projected])
        .map(|v| v.input.keys)
        .map_err(|e| at_rows(e, |r| Some(r + first_row)))
}

/// `e` with the row it names mapped through `map` (an input row's number for a row of a part
/// of the input).
fn at_rows(e: TableError, map: impl Fn(usize) -> Option<usize>) -> TableError {
    match e {
        TableError::InvalidInput {
            column,
            row: Some(r),
            reason,
        } => TableError::InvalidInput {
            column,
            row: map(r).or(Some(r)),
            reason,
        },
        other => other,
    }
}

/// The wave of each row and the number of waves (at most `waves`, at most one per route):
/// every row of one route in one wave, the waves' row counts balanced (routes by descending
/// count, each to the wave with the fewest rows so far).
fn spread(routes: &[u64], waves: usize) -> (Vec<u32>, usize) {
    let mut counts: HashMap<u64, usize> = HashMap::new();
    for &r in routes {
        *counts.entry(r).or_default() += 1;
    }
    let waves = waves.min(counts.len()).max(1);
    let mut by_count: Vec<(u64, usize)> = counts.into_iter().collect();
    by_count.sort_unstable_by_key(|&(route, n)| (Reverse(n), route));
    let mut loads: BinaryHeap<Reverse<(usize, u32)>> = (0..waves)
        .map(|w| Reverse((0usize, u32::try_from(w).unwrap_or(u32::MAX))))
        .collect();
    let mut wave_of_route: HashMap<u64, u32> = HashMap::with_capacity(by_count.len());
    for (route, n) in by_count {
        if let Some(Reverse((load, wave))) = loads.pop() {
            wave_of_route.insert(route, wave);
            loads.push(Reverse((load + n, wave)));
        }
    }
    let wave_of = routes
        .iter()
        .map(|r| wave_of_route.get(r).copied().unwrap_or(0))
        .collect();
    (wave_of, waves)
}

/// One wave's rows and, for each, its row number in the input.
struct WaveRows {
    batches: Vec<RecordBatch>,
    rows: Vec<usize>,
}

/// Reads the input again and keeps the rows of `wave`; the input must have `expected` rows, as
/// it had on the first read.
async fn wave_rows<F, S, E>(
    open: &mut F,
    wave_of: &[u32],
    wave: usize,
    expected: usize,
) -> Result<WaveRows>
where
    F: FnMut() -> S,
    S: Stream<Item = std::result::Result<RecordBatch, E>> + Unpin,
    E: Display,
{
    let wave = u32::try_from(wave).unwrap_or(u32::MAX);
    let mut input = open();
    let (mut batches, mut rows) = (Vec::new(), Vec::new());
    let (mut at, mut batch_number) = (0usize, 0usize);
    while let Some(item) = input.next().await {
        let batch = item.map_err(|e| stream_error(batch_number, e))?;
        batch_number += 1;
        let n = batch.num_rows();
        let Some(waves) = wave_of.get(at..at + n) else {
            return Err(changed(expected, at + n));
        };
        let keep: Vec<bool> = waves.iter().map(|&w| w == wave).collect();
        rows.extend((at..at + n).zip(&keep).filter(|(_, &k)| k).map(|(r, _)| r));
        at += n;
        if keep.iter().any(|&k| k) {
            let kept = filter_record_batch(&batch, &BooleanArray::from(keep))
                .map_err(|e| invalid(None, e.to_string()))?;
            batches.push(kept);
        }
    }
    if at != expected {
        return Err(changed(expected, at));
    }
    Ok(WaveRows { batches, rows })
}

/// Writes one wave's rows as fragment `wave` of the write; errors name input rows.
async fn write_wave(
    table: &Table,
    context: &WriteContext,
    wave: usize,
    rows: WaveRows,
) -> Result<Fragment> {
    let WaveRows { batches, rows } = rows;
    table
        .write_fragment(context, wave as u64, batches)
        .await
        .map_err(|e| at_rows(e, |r| rows.get(r).copied()))
}

fn changed(first: usize, now: usize) -> TableError {
    invalid(
        None,
        format!(
            "the input changed while it was written: it had {first} rows when first read, \
             {now} or more on a later read (a write this large reads its input once per wave)"
        ),
    )
}

fn stream_error(batch: usize, e: impl Display) -> TableError {
    TableError::InvalidInput {
        column: None,
        row: None,
        reason: format!("reading input batch {batch}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_spread_keeps_a_route_in_one_wave_and_balances_rows() {
        // Route 7 has 5 rows, 1..=6 one row each: 11 rows over 2 waves.
        let routes = [7, 1, 7, 2, 3, 7, 4, 5, 7, 6, 7];
        let (waves, n) = spread(&routes, 2);
        assert_eq!(n, 2);
        // No more waves than routes.
        assert_eq!(spread(&[3, 3, 3], 5), (vec![0, 0, 0], 1));
        let of_7: BTreeSet<u32> = routes
            .iter()
            .zip(&waves)
            .filter(|(&r, _)| r == 7)
            .map(|(_, &w)| w)
            .collect();
        assert_eq!(of_7.len(), 1);
        let in_wave = |w: u32| waves.iter().filter(|&&x| x == w).count();
        assert_eq!((in_wave(0), in_wave(1)), (5, 6));
    }

    #[test]
    fn test_errors_name_the_input_row() {
        let e = TableError::InvalidInput {
            column: Some("x".into()),
            row: Some(1),
            reason: "bad".into(),
        };
        let rows = [4usize, 9, 12];
        match at_rows(e, |r| rows.get(r).copied()) {
            TableError::InvalidInput { row, .. } => assert_eq!(row, Some(9)),
            other => panic!("{other:?}"),
        }
    }
}
