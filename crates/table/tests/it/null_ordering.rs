//! Event-time ordering with null ordering values, on copy-on-write and merge-on-read: a null
//! loses to any value (hudi-rs 0.5.0 sorts nulls lowest; Java maps a null to `Integer(0)`),
//! nulls tie and the newer record wins, within one input batch and against the stored record;
//! update counts (the result and the commit metadata's `numUpdateWrites`) count only records
//! that replaced a stored one; hudi-rs reads the same rows.

use std::sync::Arc;

use arbor_table::{CommitResult, WriteOperation};
use arbor_timeline::avro::{decode_instant, InstantContent};
use arbor_timeline::config::TableType;
use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::Int64Type;

use super::write_support::*;

type NRow = (&'static str, Option<i64>, &'static str);

fn nbatch(rows: &[NRow]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|_| "us"))),
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
        ],
    )
    .unwrap()
}

async fn write(t: &TestTable, op: WriteOperation, rows: &[NRow]) -> CommitResult {
    t.table.write(op, vec![nbatch(rows)]).await.unwrap()
}

/// (id, ts, name) of the snapshot, sorted by id.
async fn snapshot(t: &TestTable) -> (Vec<RecordBatch>, Vec<(String, Option<i64>, String)>) {
    let reader = t.reader().await;
    let batches = reader.snapshot(None).await.unwrap();
    let mut out = Vec::new();
    for b in &batches {
        let id = b.column_by_name("id").unwrap().as_string::<i32>().clone();
        let name = b.column_by_name("name").unwrap().as_string::<i32>().clone();
        let ts = b
            .column_by_name("ts")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        for i in 0..b.num_rows() {
            let t = (!ts.is_null(i)).then(|| ts.value(i));
            out.push((id.value(i).to_string(), t, name.value(i).to_string()));
        }
    }
    out.sort();
    (batches, out)
}

async fn num_update_writes(t: &TestTable, r: &CommitResult) -> i64 {
    let tl = t.timeline().await;
    let inst = tl
        .completed_writes()
        .into_iter()
        .find(|i| i.requested_time == r.instant)
        .unwrap();
    let bytes = tl.read(&inst).await.unwrap();
    let InstantContent::Commit(meta) = decode_instant(&inst, &bytes, "x", false).unwrap() else {
        panic!("not commit metadata");
    };
    meta.write_stats()
        .map(|(_, s)| s.num_update_writes.unwrap_or(0))
        .sum()
}

fn expect(rows: &[(&str, Option<i64>, &str)]) -> Vec<(String, Option<i64>, String)> {
    rows.iter()
        .map(|(a, b, c)| (a.to_string(), *b, c.to_string()))
        .collect()
}

async fn run_null_ordering(table_type: TableType) {
    let t = create(table_type, Layout::None).await;
    write(
        &t,
        WriteOperation::Insert,
        &[
            ("k0", Some(10), "a"),
            ("k1", None, "a"),
            ("k2", Some(5), "a"),
        ],
    )
    .await;
    // k0: a null against a stored 10 is kept out; k1: 3 replaces a stored null; k2: within the
    // batch 7 beats null, then replaces 5; k3: two nulls, the later one is inserted.
    let up = write(
        &t,
        WriteOperation::Upsert,
        &[
            ("k0", None, "late"),
            ("k1", Some(3), "b"),
            ("k2", Some(7), "b"),
            ("k2", None, "late"),
            ("k3", None, "first"),
            ("k3", None, "second"),
        ],
    )
    .await;
    assert_eq!(
        (up.inserted, up.updated, up.skipped_stale),
        (1, 2, 1),
        "{table_type:?}: only records that replaced a stored one are updates"
    );
    assert_eq!(
        num_update_writes(&t, &up).await,
        2,
        "{table_type:?}: numUpdateWrites"
    );
    let (batches, got) = snapshot(&t).await;
    assert_eq!(
        got,
        expect(&[
            ("k0", Some(10), "a"),
            ("k1", Some(3), "b"),
            ("k2", Some(7), "b"),
            ("k3", None, "second"),
        ]),
        "{table_type:?} after the first upsert"
    );
    if let Some(python) = peer_python() {
        arbor_testkit::assert_peer_snapshot_matches(
            &python,
            &t.base,
            t.reader().await.schema(),
            &batches,
            &format!("{table_type:?} null ordering, first upsert"),
        );
    }

    // A null replaces a stored null (tie: the newer wins); a null never replaces 3.
    let second = write(
        &t,
        WriteOperation::Upsert,
        &[("k3", None, "third"), ("k1", None, "late")],
    )
    .await;
    assert_eq!(
        (second.inserted, second.updated, second.skipped_stale),
        (0, 1, 1),
        "{table_type:?} second upsert"
    );
    assert_eq!(num_update_writes(&t, &second).await, 1);
    let (batches, got) = snapshot(&t).await;
    assert_eq!(
        got,
        expect(&[
            ("k0", Some(10), "a"),
            ("k1", Some(3), "b"),
            ("k2", Some(7), "b"),
            ("k3", None, "third"),
        ]),
        "{table_type:?} after the second upsert"
    );
    if let Some(python) = peer_python() {
        arbor_testkit::assert_peer_snapshot_matches(
            &python,
            &t.base,
            t.reader().await.schema(),
            &batches,
            &format!("{table_type:?} null ordering, second upsert"),
        );
    }
}

#[tokio::test]
async fn test_null_ordering_cow_null_loses_and_counts_match_peer() {
    run_null_ordering(TableType::CopyOnWrite).await;
}

#[tokio::test]
async fn test_null_ordering_mor_null_loses_and_counts_match_peer() {
    run_null_ordering(TableType::MergeOnRead).await;
}
