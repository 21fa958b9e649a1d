//! Merging one file slice: base rows, then log blocks in order (data blocks and delete blocks),
//! with the record-merge semantics of Hudi 1.x (`EVENT_TIME_ORDERING`, `COMMIT_TIME_ORDERING`).

use arbor_format::log::DeleteRecord;
use arbor_format::meta;
use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, StringArray};
use arrow::compute::{concat_batches, interleave};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::ordering::{newer_wins, OrderKey};
use crate::error::{Result, TableError};

/// How records with the same key are merged (`hoodie.record.merge.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeMode {
    /// The record with the greatest ordering value wins; ties go to the later record.
    EventTime,
    /// The latest written record wins.
    CommitTime,
}

/// One part of a slice's log, in log order.
#[derive(Debug, Clone)]
pub enum LogPart {
    /// Rows of a data block, already shaped to the read schema.
    Rows(RecordBatch),
    /// Records of a delete block.
    Deletes(Vec<DeleteRecord>),
}

#[derive(Debug, Clone)]
struct Buffered {
    /// Batch and row of the record; `None` for a delete.
    row: Option<(usize, usize)>,
    order: OrderKey,
    is_delete: bool,
}

impl Buffered {
    fn is_commit_time_delete(&self) -> bool {
        self.is_delete && self.order.is_default()
    }
}

/// Java's `shouldKeepNewerRecord`: a commit-time delete on either side lets the newer record
/// win; otherwise [`newer_wins`] (a null ordering value loses to any other value, ties go to
/// the newer record).
fn keep_newer(old: &Buffered, new: &Buffered) -> bool {
    if new.is_commit_time_delete() || old.is_commit_time_delete() {
        return true;
    }
    newer_wins(&old.order, &new.order)
}

/// Merges a slice. `base` and the rows of `logs` must all have `schema`. Without log parts the
/// base rows are returned as they are (soft-deleted rows dropped).
///
/// The result is the base rows in base order, each replaced by the record that wins the merge
/// for its key (or dropped when that record is a delete), followed by the records of keys the
/// base does not hold, in log order. Only the log records are buffered (by key, borrowing the
/// key strings), and the output is gathered from the input batches without concatenating them
/// first.
pub fn merge_slice(
    schema: &SchemaRef,
    mode: MergeMode,
    ordering_field: Option<&str>,
    base: Vec<RecordBatch>,
    logs: Vec<LogPart>,
    context: &str,
) -> Result<Option<RecordBatch>> {
    let arrow_err = |e: arrow::error::ArrowError| TableError::Unsupported {
        reason: format!("merging {context}: {e}"),
    };
    if logs.is_empty() {
        if base.is_empty() {
            return Ok(None);
        }
        let all = concat_batches(schema, &base).map_err(arrow_err)?;
        return Ok(Some(drop_soft_deleted(all, context)?));
    }
    let merged = merge_parts(schema, mode, ordering_field, base, logs, context, false)?;
    Ok(merged.into_iter().next())
}

/// [`merge_slice`]'s rows as several batches: the rows of each base batch (in its order, each
/// replaced by the record that wins for its key), then the records of keys the base does not
/// hold. A base batch none of whose rows is dropped keeps its record key column (and a column
/// that is that very column) as it is: a replacing record has the same key. Empty batches are
/// left out.
pub(crate) fn merge_slice_batches(
    schema: &SchemaRef,
    mode: MergeMode,
    ordering_field: Option<&str>,
    base: Vec<RecordBatch>,
    logs: Vec<LogPart>,
    context: &str,
) -> Result<Vec<RecordBatch>> {
    if logs.is_empty() {
        return base
            .into_iter()
            .map(|b| drop_soft_deleted(b, context))
            .filter(|b| b.as_ref().map_or(true, |b| b.num_rows() > 0))
            .collect();
    }
    merge_parts(schema, mode, ordering_field, base, logs, context, true)
}

/// Merges base rows with log parts; one batch (`per_batch` false) or one per base batch then
/// one of the new records.
fn merge_parts(
    schema: &SchemaRef,
    mode: MergeMode,
    ordering_field: Option<&str>,
    base: Vec<RecordBatch>,
    logs: Vec<LogPart>,
    context: &str,
    per_batch: bool,
) -> Result<Vec<RecordBatch>> {
    let arrow_err = |e: arrow::error::ArrowError| TableError::Unsupported {
        reason: format!("merging {context}: {e}"),
    };
    let base_batches = base.len();
    let mut batches = base;
    // The log in order: a data block is the index of its batch.
    let mut parts: Vec<Part> = Vec::new();
    for part in logs {
        match part {
            LogPart::Rows(b) => {
                parts.push(Part::Rows(batches.len()));
                batches.push(b);
            }
            LogPart::Deletes(d) => parts.push(Part::Deletes(d)),
        }
    }
    let columns = batches
        .iter()
        .map(|b| BatchColumns::of(b, mode, ordering_field, context))
        .collect::<Result<Vec<_>>>()?;
    let record = |b: usize, row: usize| -> Buffered {
        let cols = columns.get(b);
        Buffered {
            row: Some((b, row)),
            order: cols
                .and_then(|c| c.ordering.as_ref())
                .map_or(OrderKey::Default, |c| OrderKey::from_column(c, row)),
            is_delete: cols.is_some_and(|c| c.is_deleted(row)),
        }
    };

    // The log's records by key, the key strings borrowed from the batches and delete blocks.
    let log_rows: usize = parts
        .iter()
        .map(|p| match p {
            Part::Rows(b) => columns.get(*b).map_or(0, |c| c.keys.len()),
            Part::Deletes(d) => d.len(),
        })
        .sum();
    let mut buffer: foldhash::HashMap<&str, Buffered> =
        foldhash::HashMap::with_capacity_and_hasher(log_rows, Default::default());
    for part in &parts {
        match part {
            Part::Deletes(deletes) => {
                for d in deletes {
                    let Some(key) = d.record_key.as_deref() else {
                        continue;
                    };
                    let del = Buffered {
                        row: None,
                        order: OrderKey::from_delete(d.ordering_value.as_ref()),
                        is_delete: true,
                    };
                    let keep_existing = match (mode, buffer.get(key)) {
                        (MergeMode::CommitTime, _) | (_, None) => false,
                        (MergeMode::EventTime, Some(existing))
                            if existing.is_commit_time_delete() =>
                        {
                            true
                        }
                        (MergeMode::EventTime, Some(existing)) => {
                            !del.order.is_default()
                                && existing.order.compare(&del.order)
                                    == Some(std::cmp::Ordering::Greater)
                        }
                    };
                    if !keep_existing {
                        buffer.insert(key, del);
                    }
                }
            }
            Part::Rows(b) => {
                let Some(keys) = columns.get(*b).map(|c| &c.keys) else {
                    continue;
                };
                for row in 0..keys.len() {
                    if keys.is_null(row) {
                        continue;
                    }
                    let key = keys.value(row);
                    let new = record(*b, row);
                    let replace = match (mode, buffer.get(key)) {
                        (MergeMode::CommitTime, _) | (_, None) => true,
                        (MergeMode::EventTime, Some(existing)) => keep_newer(existing, &new),
                    };
                    if replace {
                        buffer.insert(key, new);
                    }
                }
            }
        }
    }

    let mut index = LogIndex::new(buffer);
    // The rows each base batch gives, and whether it gives one for each of its rows.
    let mut takes: Vec<(Vec<(usize, usize)>, bool)> = Vec::with_capacity(base_batches);
    for (b, cols) in columns.iter().enumerate().take(base_batches) {
        let keys = &cols.keys;
        let mut take: Vec<(usize, usize)> = Vec::with_capacity(keys.len());
        // Base files are usually sorted by key: while they are, the log's keys are found by
        // walking them alongside (a comparison or two a row instead of a hash lookup); the
        // first key out of order sends the rest of the batch to the hash lookup.
        let mut walk = Walk::default();
        for row in 0..keys.len() {
            let log_rec = if index.is_empty() || keys.is_null(row) {
                walk.broken = true;
                None
            } else {
                index.find(&mut walk, keys.value(row))
            };
            let winner = match log_rec {
                None if cols.is_deleted(row) => continue,
                None => Some((b, row)),
                Some(log_rec) => {
                    let log_wins = match mode {
                        MergeMode::CommitTime => true,
                        MergeMode::EventTime => keep_newer(&record(b, row), &log_rec),
                    };
                    match (log_wins, log_rec.is_delete) {
                        (true, true) => None,
                        (true, false) => log_rec.row,
                        (false, _) if cols.is_deleted(row) => None,
                        (false, _) => Some((b, row)),
                    }
                }
            };
            if let Some(at) = winner {
                take.push(at);
            }
        }
        let intact = take.len() == keys.len();
        takes.push((take, intact));
    }
    let mut rest: Vec<(usize, usize)> = index.rest();
    rest.sort_unstable();
    // Columns that are the record key column itself in every batch.
    let key_at = schema.index_of(meta::RECORD_KEY).ok();
    let key_like: Vec<bool> = (0..schema.fields().len())
        .map(|i| {
            key_at.is_some_and(|k| {
                batches
                    .iter()
                    .all(|b| match (b.columns().get(i), b.columns().get(k)) {
                        (Some(c), Some(key)) => std::sync::Arc::ptr_eq(c, key),
                        _ => false,
                    })
            })
        })
        .collect();
    let gather = |take: &[(usize, usize)], intact: Option<usize>| -> Result<RecordBatch> {
        let mut merged: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for i in 0..schema.fields().len() {
            // An intact base batch keeps its key columns: replacing records have its keys.
            let kept = intact
                .filter(|_| key_like.get(i) == Some(&true))
                .and_then(|b| batches.get(b))
                .and_then(|b| b.columns().get(i));
            if let Some(kept) = kept {
                merged.push(kept.clone());
                continue;
            }
            let column: Vec<&ArrayRef> =
                batches.iter().filter_map(|b| b.columns().get(i)).collect();
            // A column that is another column's very arrays (a record key field read once
            // for both, see `stream`) is gathered once.
            let same = (0..i).find(|&j| {
                batches.iter().zip(&column).all(|(b, c)| {
                    b.columns()
                        .get(j)
                        .is_some_and(|other| std::sync::Arc::ptr_eq(other, c))
                })
            });
            if let Some(done) = same.and_then(|j| merged.get(j)) {
                merged.push(done.clone());
                continue;
            }
            let column: Vec<&dyn Array> = column.iter().map(|c| c.as_ref()).collect();
            merged.push(interleave(&column, take).map_err(arrow_err)?);
        }
        RecordBatch::try_new_with_options(
            schema.clone(),
            merged,
            &RecordBatchOptions::new().with_row_count(Some(take.len())),
        )
        .map_err(arrow_err)
    };
    if !per_batch {
        let mut take: Vec<(usize, usize)> =
            Vec::with_capacity(takes.iter().map(|t| t.0.len()).sum::<usize>() + rest.len());
        for (t, _) in takes {
            take.extend(t);
        }
        take.extend(rest);
        return Ok(vec![gather(&take, None)?]);
    }
    let mut out = Vec::with_capacity(takes.len() + 1);
    for (b, (take, intact)) in takes.iter().enumerate() {
        if !take.is_empty() {
            out.push(gather(take, intact.then_some(b))?);
        }
    }
    if !rest.is_empty() {
        out.push(gather(&rest, None)?);
    }
    Ok(out)
}

/// The log's winning record of each key, sorted by key; each is taken by at most one base row
/// (the first with its key).
struct LogIndex<'a> {
    entries: Vec<(&'a str, Option<Buffered>)>,
    /// Positions in `entries` by key, built for the first base batch that is not sorted.
    by_key: Option<foldhash::HashMap<&'a str, usize>>,
}

impl<'a> LogIndex<'a> {
    fn new(buffer: foldhash::HashMap<&'a str, Buffered>) -> Self {
        let mut entries: Vec<(&str, Option<Buffered>)> =
            buffer.into_iter().map(|(k, v)| (k, Some(v))).collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        LogIndex {
            entries,
            by_key: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The record of `key` if no base row took it yet, walking from where `walk` stands while
    /// the keys asked come in order.
    fn find(&mut self, walk: &mut Walk<'a>, key: &'a str) -> Option<Buffered> {
        if !walk.broken {
            match walk.last {
                None => walk.at = self.entries.partition_point(|e| e.0 < key),
                Some(last) if last > key => walk.broken = true,
                Some(_) => {}
            }
            walk.last = Some(key);
        }
        if walk.broken {
            return self.take(key);
        }
        while let Some(e) = self.entries.get_mut(walk.at) {
            match e.0.cmp(key) {
                std::cmp::Ordering::Less => walk.at += 1,
                std::cmp::Ordering::Equal => return e.1.take(),
                std::cmp::Ordering::Greater => return None,
            }
        }
        None
    }

    /// The record of `key` if no base row took it yet.
    fn take(&mut self, key: &str) -> Option<Buffered> {
        let entries = &self.entries;
        let by_key = self.by_key.get_or_insert_with(|| {
            let mut m =
                foldhash::HashMap::with_capacity_and_hasher(entries.len(), Default::default());
            m.extend(entries.iter().enumerate().map(|(i, e)| (e.0, i)));
            m
        });
        let at = *by_key.get(key)?;
        self.entries.get_mut(at).and_then(|e| e.1.take())
    }

    /// Rows of the records no base row took, deletes left out (unordered).
    fn rest(self) -> Vec<(usize, usize)> {
        self.entries
            .into_iter()
            .filter_map(|e| e.1)
            .filter(|b| !b.is_delete)
            .filter_map(|b| b.row)
            .collect()
    }
}

/// Where a walk of base keys in order stands in a [`LogIndex`].
#[derive(Default)]
struct Walk<'a> {
    /// The last key asked.
    last: Option<&'a str>,
    /// The first entry whose key is not less than `last`.
    at: usize,
    /// A key came out of order (or null): lookups go by hash.
    broken: bool,
}

/// One part of the log while merging: a data block (the index of its batch) or a delete block.
enum Part {
    Rows(usize),
    Deletes(Vec<DeleteRecord>),
}

/// The columns the merge reads of one batch.
struct BatchColumns {
    keys: StringArray,
    ordering: Option<ArrayRef>,
    deleted: Option<BooleanArray>,
}

impl BatchColumns {
    fn of(
        batch: &RecordBatch,
        mode: MergeMode,
        ordering_field: Option<&str>,
        context: &str,
    ) -> Result<Self> {
        let keys =
            batch
                .column_by_name(meta::RECORD_KEY)
                .ok_or_else(|| TableError::Unsupported {
                    reason: format!(
                        "merging {context}: rows have no {} column (tables without meta fields \
                     cannot have log files)",
                        meta::RECORD_KEY
                    ),
                })?;
        let keys = string_column(keys, meta::RECORD_KEY, context)?;
        let ordering = match (mode, ordering_field) {
            (MergeMode::EventTime, Some(f)) => batch.column_by_name(f).cloned(),
            _ => None,
        };
        let deleted = batch
            .column_by_name(meta::IS_DELETED)
            .filter(|c| c.data_type() == &DataType::Boolean)
            .map(|c| c.as_boolean().clone());
        Ok(BatchColumns {
            keys,
            ordering,
            deleted,
        })
    }

    fn is_deleted(&self, row: usize) -> bool {
        self.deleted
            .as_ref()
            .is_some_and(|f| f.is_valid(row) && f.value(row))
    }
}

/// Drops rows whose `_hoodie_is_deleted` is true.
fn drop_soft_deleted(batch: RecordBatch, context: &str) -> Result<RecordBatch> {
    let Some(flags) = batch
        .column_by_name(meta::IS_DELETED)
        .filter(|c| c.data_type() == &DataType::Boolean)
    else {
        return Ok(batch);
    };
    let keep: BooleanArray = flags
        .as_boolean()
        .iter()
        .map(|v| Some(v != Some(true)))
        .collect();
    arrow::compute::filter_record_batch(&batch, &keep).map_err(|e| TableError::Unsupported {
        reason: format!("filtering soft deletes of {context}: {e}"),
    })
}

fn string_column(col: &ArrayRef, name: &str, context: &str) -> Result<StringArray> {
    let casted =
        arrow::compute::cast(col, &DataType::Utf8).map_err(|e| TableError::Unsupported {
            reason: format!("merging {context}: column {name} is not a string: {e}"),
        })?;
    Ok(casted.as_string::<i32>().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new(meta::RECORD_KEY, DataType::Utf8, true),
            Field::new("ts", DataType::Int64, true),
            Field::new("v", DataType::Utf8, true),
        ]))
    }

    fn rows(rows: &[(&str, Option<i64>, &str)]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1))),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
            ],
        )
        .unwrap()
    }

    fn merged(
        base: &[(&str, Option<i64>, &str)],
        logs: &[&[(&str, Option<i64>, &str)]],
    ) -> Vec<String> {
        let out = merge_slice(
            &schema(),
            MergeMode::EventTime,
            Some("ts"),
            vec![rows(base)],
            logs.iter().map(|l| LogPart::Rows(rows(l))).collect(),
            "test",
        )
        .unwrap()
        .unwrap();
        let keys = out.column(0).as_string::<i32>();
        let vals = out.column(2).as_string::<i32>();
        let mut got: Vec<String> = (0..out.num_rows())
            .map(|i| format!("{}={}", keys.value(i), vals.value(i)))
            .collect();
        got.sort();
        got
    }

    #[test]
    fn test_merge_slice_null_log_ordering_keeps_base_value() {
        // hudi-rs 0.5.0 `test_merge_records_nulls`: a null ordering value never beats a value.
        let got = merged(
            &[
                ("k1", Some(10), "base"),
                ("k2", None, "base"),
                ("k3", None, "base"),
            ],
            &[&[
                ("k1", None, "log"),
                ("k2", Some(-5), "log"),
                ("k3", None, "log"),
            ]],
        );
        assert_eq!(got, vec!["k1=base", "k2=log", "k3=log"]);
    }

    #[test]
    fn test_merge_slice_null_between_log_blocks_loses() {
        let got = merged(
            &[("k1", Some(1), "base")],
            &[&[("k1", Some(7), "log1")], &[("k1", None, "log2")]],
        );
        assert_eq!(got, vec!["k1=log1"], "a later null log record loses to 7");
        let got = merged(
            &[("k1", Some(1), "base")],
            &[&[("k1", None, "log1")], &[("k1", Some(3), "log2")]],
        );
        assert_eq!(got, vec!["k1=log2"]);
    }

    fn in_order(batch: &RecordBatch) -> Vec<String> {
        let keys = batch.column(0).as_string::<i32>();
        let vals = batch.column(2).as_string::<i32>();
        (0..batch.num_rows())
            .map(|i| format!("{}={}", keys.value(i), vals.value(i)))
            .collect()
    }

    #[test]
    fn test_merge_walks_sorted_base_batches_and_looks_up_the_others_alike() {
        // Batch 1 is sorted (the walk), batch 2 is not (hash lookups), batch 3 repeats a key
        // (only its first row takes the log record); a log key between base keys, one past
        // the end and one before the start are new records; k4 is deleted.
        let base = vec![
            rows(&[
                ("k1", Some(1), "b"),
                ("k3", Some(1), "b"),
                ("k5", Some(1), "b"),
            ]),
            rows(&[
                ("k8", Some(1), "b"),
                ("k6", Some(1), "b"),
                ("k4", Some(1), "b"),
            ]),
            rows(&[("k7", Some(1), "b"), ("k7", Some(1), "b2")]),
        ];
        let logs = || {
            vec![
                LogPart::Rows(rows(&[
                    ("k3", Some(2), "l"),
                    ("k2", Some(2), "new"),
                    ("k6", Some(2), "l"),
                    ("k7", Some(2), "l"),
                    ("k9", Some(2), "new"),
                    ("k0", Some(2), "new"),
                    ("k5", Some(0), "old"),
                ])),
                LogPart::Deletes(vec![DeleteRecord {
                    record_key: Some("k4".into()),
                    partition_path: None,
                    ordering_value: None,
                }]),
            ]
        };
        let one = merge_slice(
            &schema(),
            MergeMode::EventTime,
            Some("ts"),
            base.clone(),
            logs(),
            "t",
        )
        .unwrap()
        .unwrap();
        let want = vec![
            "k1=b", "k3=l", "k5=b", "k8=b", "k6=l", "k7=l", "k7=b2", "k2=new", "k9=new", "k0=new",
        ];
        assert_eq!(in_order(&one), want);
        let batches = merge_slice_batches(
            &schema(),
            MergeMode::EventTime,
            Some("ts"),
            base.clone(),
            logs(),
            "t",
        )
        .unwrap();
        let got: Vec<String> = batches.iter().flat_map(in_order).collect();
        assert_eq!(
            got, want,
            "the batches hold the same rows in the same order"
        );
        assert_eq!(
            batches.len(),
            4,
            "one batch per base batch, then the new records"
        );
        // Batch 1 lost no row: its key column is the base's own; batch 2 lost k4: gathered.
        assert!(Arc::ptr_eq(batches[0].column(0), base[0].column(0)));
        assert!(!Arc::ptr_eq(batches[1].column(0), base[1].column(0)));
    }
}
