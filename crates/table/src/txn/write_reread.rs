//! An upsert or delete of an input that can be read again ([`crate::Table::write_reread`]).
//!
//! The first read validates and keys the input batch by batch. An input within
//! [`held_budget`] is kept and written as [`crate::Table::write`] writes it. A larger one keeps
//! only its keys, by partition (their bytes, no row). Once read, the input is spread over waves
//! of about the budget each ([`plan_waves`]): a partition that fits goes whole to one wave;
//! the keys of a larger one get their routes ([`Router`]: the file group the index finds them
//! in, or the key itself when new) and every row of one route goes to one wave. Each wave is
//! one more read of the input that keeps that wave's rows and writes them as a fragment of one
//! distributed write ([`super::distributed`]); the fragments complete as one commit. Memory is
//! bounded by the keys and one wave's rows (and the file groups it rewrites), not the input.
//!
//! Failure: until the commit point the instant is pending and none of its files is visible; on
//! any error (a bad row, the input reading differently, storage) the write is aborted, its
//! files deleted, and the table reads as before.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::fmt::Display;
use std::sync::Arc;

use arrow::array::BooleanArray;
use arrow::compute::filter_record_batch;
use arrow::record_batch::RecordBatch;
use futures::{Stream, StreamExt};

use super::context::{invalid, Table};
use super::distributed::write_fragment_packing;
use super::fragment::{Fragment, WriteContext};
use super::route::Router;
use super::write::validate_with_schema;
use super::write_stream::stream_error;
use crate::error::{Result, TableError};
use crate::keygen::HoodieKey;
use crate::write::options::{CommitResult, WriteOperation};
use crate::write::record_index::has_record_index;

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
    let started = std::time::Instant::now();
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
    let Some(keyed) = first.keyed else {
        return table.write(operation, first.held).await;
    };
    tracing::debug!(
        rows = first.rows,
        secs = started.elapsed().as_secs_f64(),
        "write in waves: input read for its keys"
    );
    let waves = usize::try_from(first.bytes.div_ceil(budget))
        .unwrap_or(usize::MAX)
        .clamp(2, u32::MAX as usize);
    let Plan {
        wave_of,
        waves,
        split,
    } = plan_waves(table, keyed, budget, waves, first.rows).await?;
    tracing::info!(
        rows = first.rows,
        bytes = first.bytes,
        waves,
        secs = started.elapsed().as_secs_f64(),
        "the input is larger than the write holds: writing it in waves, one read each"
    );
    let transaction = table.begin_write(operation).await?;
    let mut fragments = Vec::new();
    for wave in 0..waves {
        let rows = wave_rows(&mut open, &wave_of, wave, first.rows).await;
        tracing::debug!(
            wave,
            secs = started.elapsed().as_secs_f64(),
            "write in waves: wave read"
        );
        let written = match rows {
            Ok(w) if w.rows.is_empty() => continue,
            Ok(w) => {
                // A wave of whole partitions alone writes them: it may pack new keys into
                // their small file groups, as `Table::write` does.
                let pack = !split.contains(&wave);
                write_wave(table, transaction.context(), (wave, pack), w).await
            }
            Err(e) => Err(e),
        };
        match written {
            Ok(f) => {
                tracing::debug!(
                    wave,
                    secs = started.elapsed().as_secs_f64(),
                    "write in waves: wave written"
                );
                fragments.push(f);
            }
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
    keyed: Option<Keyed>,
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
        if let Some(keyed) = self.keyed.as_mut() {
            keyed.add(keys_of(table, &batch, first_row)?, first_row, bytes);
            return Ok(());
        }
        if !in_waves || self.held_bytes.saturating_add(bytes) <= budget {
            self.held_bytes += bytes;
            self.held.push(batch);
            return Ok(());
        }
        // Over the budget: from here on only keys are kept.
        let mut keyed = Keyed::default();
        let mut at = 0usize;
        for held in std::mem::take(&mut self.held) {
            let held_bytes = held.get_array_memory_size() as u64;
            keyed.add(keys_of(table, &held, at)?, at, held_bytes);
            at += held.num_rows();
        }
        keyed.add(keys_of(table, &batch, first_row)?, first_row, bytes);
        self.held_bytes = 0;
        self.keyed = Some(keyed);
        Ok(())
    }
}

/// The record keys of the input rows, by partition.
#[derive(Default)]
struct Keyed {
    ids: foldhash::HashMap<Arc<str>, usize>,
    partitions: Vec<PartitionKeys>,
}

/// The input rows of one partition and their record keys.
struct PartitionKeys {
    path: Arc<str>,
    rows: Vec<usize>,
    /// The keys' bytes, one after the other; `ends` says where each ends.
    data: Vec<u8>,
    ends: Vec<usize>,
    /// The input bytes of these rows (their batches' bytes per row).
    bytes: u64,
}

impl Keyed {
    /// Adds `keys`, those of the input rows from `first_row` on, which came in a batch of
    /// `bytes` bytes.
    fn add(&mut self, keys: Vec<HoodieKey>, first_row: usize, bytes: u64) {
        let per_row = bytes / (keys.len().max(1) as u64);
        let mut last: Option<(Arc<str>, usize)> = None;
        for (i, key) in keys.into_iter().enumerate() {
            let id = match &last {
                Some((path, id)) if Arc::ptr_eq(path, &key.partition_path) => *id,
                _ => {
                    let next = self.partitions.len();
                    let id = *self.ids.entry(key.partition_path.clone()).or_insert(next);
                    if id == next {
                        self.partitions.push(PartitionKeys {
                            path: key.partition_path.clone(),
                            rows: Vec::new(),
                            data: Vec::new(),
                            ends: Vec::new(),
                            bytes: 0,
                        });
                    }
                    last = Some((key.partition_path.clone(), id));
                    id
                }
            };
            if let Some(p) = self.partitions.get_mut(id) {
                p.rows.push(first_row + i);
                p.data.extend_from_slice(key.record_key.as_bytes());
                p.ends.push(p.data.len());
                p.bytes += per_row;
            }
        }
    }
}

impl PartitionKeys {
    /// The record keys, in row order.
    fn keys(&self) -> Vec<String> {
        let mut start = 0usize;
        self.ends
            .iter()
            .map(|&end| {
                let key = self
                    .data
                    .get(start..end)
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default();
                start = end;
                key
            })
            .collect()
    }
}

/// What one wave takes whole: a partition, or the rows of one route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Unit {
    Partition(usize),
    Route(u64),
}

/// How the input is spread over waves.
struct Plan {
    /// The wave of each input row.
    wave_of: Vec<u32>,
    /// The number of waves.
    waves: usize,
    /// The waves holding rows of a partition split over several waves.
    split: BTreeSet<usize>,
}

/// The wave of each input row and the number of waves (at most `waves`). A partition whose
/// rows fit in one wave goes whole to one wave, so it is looked up once, by its wave's write.
/// Other partitions (all of them on a table with a global record index, where a key may be
/// stored in another partition) are split by route ([`Router`]): every row of one file group,
/// or of one new key, in one wave. Units go, largest first, to the wave with the fewest bytes.
async fn plan_waves(
    table: &Table,
    keyed: Keyed,
    budget: u64,
    waves: usize,
    rows: usize,
) -> Result<Plan> {
    let global = has_record_index(&table.ctx.config);
    let split: Vec<usize> = keyed
        .partitions
        .iter()
        .enumerate()
        .filter(|(_, p)| global || p.bytes > budget)
        .map(|(id, _)| id)
        .collect();
    let mut weights: foldhash::HashMap<Unit, u64> = foldhash::HashMap::default();
    let mut routes_of: foldhash::HashMap<usize, Vec<u64>> = foldhash::HashMap::default();
    if !split.is_empty() {
        let paths: Vec<&str> = split
            .iter()
            .filter_map(|&id| keyed.partitions.get(id).map(|p| &*p.path))
            .collect();
        let router = Router::open(table, &paths).await?;
        for &id in &split {
            let Some(p) = keyed.partitions.get(id) else {
                continue;
            };
            let routes = router.routes(&p.path, &p.keys()).await?;
            let per_row = p.bytes / (p.rows.len().max(1) as u64);
            for &r in &routes {
                *weights.entry(Unit::Route(r)).or_default() += per_row.max(1);
            }
            routes_of.insert(id, routes);
        }
    }
    for (id, p) in keyed.partitions.iter().enumerate() {
        if !routes_of.contains_key(&id) {
            weights.insert(Unit::Partition(id), p.bytes.max(1));
        }
    }
    let (wave_of_unit, waves) = spread(weights, waves);
    let split: BTreeSet<usize> = wave_of_unit
        .iter()
        .filter(|(unit, _)| matches!(unit, Unit::Route(_)))
        .map(|(_, &w)| w as usize)
        .collect();
    let mut wave_of = vec![0u32; rows];
    for (id, p) in keyed.partitions.iter().enumerate() {
        let routes = routes_of.get(&id);
        for (i, &row) in p.rows.iter().enumerate() {
            let unit = match routes.and_then(|r| r.get(i)) {
                Some(&r) => Unit::Route(r),
                None => Unit::Partition(id),
            };
            if let (Some(slot), Some(&w)) = (wave_of.get_mut(row), wave_of_unit.get(&unit)) {
                *slot = w;
            }
        }
    }
    Ok(Plan {
        wave_of,
        waves,
        split,
    })
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

/// The wave of each unit and the number of waves (at most `waves`, at most one per unit):
/// units by descending weight, each to the wave with the least weight so far.
fn spread(
    weights: foldhash::HashMap<Unit, u64>,
    waves: usize,
) -> (foldhash::HashMap<Unit, u32>, usize) {
    let waves = waves.min(weights.len()).max(1);
    let mut by_weight: Vec<(Unit, u64)> = weights.into_iter().collect();
    by_weight.sort_unstable_by_key(|&(unit, w)| (Reverse(w), unit));
    let mut loads: BinaryHeap<Reverse<(u64, u32)>> = (0..waves)
        .map(|w| Reverse((0u64, u32::try_from(w).unwrap_or(u32::MAX))))
        .collect();
    let mut wave_of: foldhash::HashMap<Unit, u32> = foldhash::HashMap::default();
    wave_of.reserve(by_weight.len());
    for (unit, w) in by_weight {
        if let Some(Reverse((load, wave))) = loads.pop() {
            wave_of.insert(unit, wave);
            loads.push(Reverse((load.saturating_add(w), wave)));
        }
    }
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
    (wave, pack): (usize, bool),
    rows: WaveRows,
) -> Result<Fragment> {
    let WaveRows { batches, rows } = rows;
    write_fragment_packing(table, context, wave as u64, batches, pack)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_spread_balances_units_over_waves() {
        // A partition of 5 and six routes of 1: 11 over 2 waves, 5 and 6.
        let mut weights = foldhash::HashMap::default();
        weights.insert(Unit::Partition(0), 5);
        for r in 1..=6 {
            weights.insert(Unit::Route(r), 1);
        }
        let (waves, n) = spread(weights.clone(), 2);
        assert_eq!(n, 2);
        let load = |w: u32| -> u64 {
            weights
                .iter()
                .filter(|(u, _)| waves.get(u) == Some(&w))
                .map(|(_, &x)| x)
                .sum()
        };
        let mut loads = [load(0), load(1)];
        loads.sort_unstable();
        assert_eq!(loads, [5, 6]);
        // No more waves than units.
        let mut one = foldhash::HashMap::default();
        one.insert(Unit::Route(3), 3);
        assert_eq!(spread(one, 5).1, 1);
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
