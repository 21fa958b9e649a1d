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

    let mut take: Vec<(usize, usize)> = Vec::new();
    for (b, cols) in columns.iter().enumerate().take(base_batches) {
        for row in 0..cols.keys.len() {
            let log_rec = if cols.keys.is_null(row) || buffer.is_empty() {
                None
            } else {
                buffer.remove(cols.keys.value(row))
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
    }
    let mut rest: Vec<(usize, usize)> = buffer
        .into_values()
        .filter(|b| !b.is_delete)
        .filter_map(|b| b.row)
        .collect();
    rest.sort_unstable();
    take.extend(rest);
    let merged = (0..schema.fields().len())
        .map(|i| {
            let column: Vec<&dyn Array> = batches
                .iter()
                .filter_map(|b| b.columns().get(i).map(|c| c.as_ref()))
                .collect();
            interleave(&column, &take)
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .and_then(|columns| {
            RecordBatch::try_new_with_options(
                schema.clone(),
                columns,
                &RecordBatchOptions::new().with_row_count(Some(take.len())),
            )
        })
        .map_err(arrow_err)?;
    Ok(Some(merged))
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
}
