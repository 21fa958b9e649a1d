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

/// Rewrites the merge settings of `hoodie.properties` between event-time and commit-time
/// ordering (the three keys arbor writes differently for the two modes).
fn set_merge_mode(t: &TestTable, event_time: bool) {
    let path = t.base.join(".hoodie/hoodie.properties");
    let text = std::fs::read_to_string(&path).unwrap();
    let pairs = [
        (
            "hoodie.record.merge.mode=EVENT_TIME_ORDERING",
            "hoodie.record.merge.mode=COMMIT_TIME_ORDERING",
        ),
        (
            "hoodie.record.merge.strategy.id=eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
            "hoodie.record.merge.strategy.id=ce9acb64-bde0-424c-9b91-f6ebba25356d",
        ),
        (
            "hoodie.compaction.payload.class=org.apache.hudi.common.model.DefaultHoodieRecordPayload",
            "hoodie.compaction.payload.class=org.apache.hudi.common.model.OverwriteWithLatestAvroPayload",
        ),
    ];
    let mut out = text.clone();
    for (i, (ev, ct)) in pairs.into_iter().enumerate() {
        let (from, to) = if event_time { (ct, ev) } else { (ev, ct) };
        // The merge mode is always there; the strategy id and payload class only at table
        // version 8 (version 9 omits them for the built-in modes).
        if i > 0 && !out.contains(from) {
            continue;
        }
        assert!(out.contains(from), "{from} not in {text}");
        out = out.replace(from, to);
    }
    std::fs::write(&path, out).unwrap();
}

/// Upserts `rows` into the MOR table as a writer that does not drop stale records (Java's MOR
/// writers log every update; arbor's event-time writer leaves stale ones out): written under
/// commit-time settings, read back under event-time ones.
async fn log_unconditionally(t: &TestTable, rows: &[NRow]) {
    set_merge_mode(t, false);
    let table = arbor_table::Table::open(t.storage.clone()).await.unwrap();
    let r = table
        .write(WriteOperation::Upsert, vec![nbatch(rows)])
        .await
        .unwrap();
    assert_eq!(r.skipped_stale, 0);
    set_merge_mode(t, true);
}

async fn assert_peer(t: &TestTable, batches: &[RecordBatch], step: &str) {
    if let Some(python) = peer_python() {
        arbor_testkit::assert_peer_snapshot_matches(
            &python,
            &t.base,
            t.reader().await.schema(),
            batches,
            step,
        );
    }
}

#[tokio::test]
async fn test_null_ordering_mor_log_records_merge_like_peer() {
    let t = create(TableType::MergeOnRead, Layout::None).await;
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
    // Log records with null ordering values over base records (base vs log).
    log_unconditionally(
        &t,
        &[
            ("k0", None, "late"),
            ("k1", Some(3), "b"),
            ("k2", None, "late"),
        ],
    )
    .await;
    let (batches, got) = snapshot(&t).await;
    assert_eq!(
        got,
        expect(&[
            ("k0", Some(10), "a"),
            ("k1", Some(3), "b"),
            ("k2", Some(5), "a")
        ]),
        "a null in the log never replaces a base value"
    );
    assert_peer(&t, &batches, "MOR nulls in the first log").await;

    // A second log (log vs log): null after 3 loses; 7 after null beats the base's 5.
    log_unconditionally(&t, &[("k1", None, "late"), ("k2", Some(7), "c")]).await;
    let (batches, got) = snapshot(&t).await;
    assert_eq!(
        got,
        expect(&[
            ("k0", Some(10), "a"),
            ("k1", Some(3), "b"),
            ("k2", Some(7), "c")
        ]),
    );
    assert_peer(&t, &batches, "MOR nulls across two logs").await;

    // Compaction keeps the merged rows.
    t.table.compact().await.unwrap();
    let (batches, got) = snapshot(&t).await;
    assert_eq!(
        got,
        expect(&[
            ("k0", Some(10), "a"),
            ("k1", Some(3), "b"),
            ("k2", Some(7), "c")
        ]),
    );
    assert_peer(&t, &batches, "MOR nulls after compaction").await;
}
