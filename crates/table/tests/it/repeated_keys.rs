//! Merge-on-read deletes and updates of a key a base file holds more than once (as Spark SQL
//! `INSERT` writes): the file group is rewritten as a new base file, so every copy is
//! deleted or updated, for arbor and for hudi-rs; other changes still go to log files.

use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;

use super::write_support::*;

fn row(id: u32, ts: i64, name: &str) -> Row {
    (format!("k{id:04}"), "us".into(), ts, name.into())
}

/// The latest slice of the one file group of the table: (base instant, number
/// of log files).
async fn only_slice(t: &TestTable) -> (String, usize) {
    let slices = t
        .reader()
        .await
        .view()
        .latest_file_slices(None, None)
        .await
        .unwrap();
    assert_eq!(slices.len(), 1, "one file group: {slices:?}");
    (
        slices[0].base_instant.to_string(),
        slices[0].log_files.len(),
    )
}

async fn assert_rows(t: &TestTable, want: &[Row], step: &str) {
    let mut want = want.to_vec();
    want.sort();
    let got = rows_of(&t.reader().await.snapshot(None).await.unwrap());
    assert_eq!(got, want, "rows after {step}");
    assert_peer_agrees(t, &[Query::Snapshot], step).await;
    let v = arbor_table::validate_indexes(t.storage.clone())
        .await
        .unwrap();
    assert!(v.discrepancies.is_empty(), "{step}: {:?}", v.discrepancies);
    let files = arbor_mdt::validate::validate_table(t.storage.clone())
        .await
        .unwrap();
    assert!(
        files.discrepancies.is_empty(),
        "{step}: {:?}",
        files.discrepancies
    );
}

#[tokio::test]
async fn test_mor_delete_and_update_of_a_key_stored_twice_change_every_copy() {
    run(Indexes::None).await;
}

/// With a record index alone an upsert reads no base file, so an update of a key stored
/// twice changes the first copy, as Java's writer does; deletes still remove every copy.
#[tokio::test]
async fn test_mor_with_record_index_delete_of_a_key_stored_twice_removes_every_copy() {
    run(Indexes::Record).await;
}

/// With a secondary index (whose upkeep reads updated rows anyway) and stats, kept valid
/// throughout, updates change every copy again.
#[tokio::test]
async fn test_mor_with_secondary_index_update_of_a_key_stored_twice_changes_every_copy() {
    run(Indexes::Secondary).await;
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Indexes {
    None,
    Record,
    Secondary,
}

async fn run(indexes: Indexes) {
    let t = create(TableType::MergeOnRead, Layout::Plain).await;
    // One insert holding k0001 and k0002 twice: a new base file keeps both copies.
    let first = vec![
        row(0, 1, "a0"),
        row(1, 1, "a1"),
        row(1, 1, "a1"),
        row(2, 1, "a2"),
        row(2, 1, "a2"),
        row(3, 1, "a3"),
    ];
    let ins = t.write(WriteOperation::Insert, &first).await;
    if indexes != Indexes::None {
        t.table.create_record_index().await.unwrap();
    }
    if indexes == Indexes::Secondary {
        t.table
            .create_secondary_index("by_name", "name")
            .await
            .unwrap();
        t.table.create_stats_indexes(true, true).await.unwrap();
    }
    assert_rows(&t, &first, "the insert").await;
    assert_eq!(only_slice(&t).await, (ins.instant.to_string(), 0));

    // An update of a key stored once goes to a log file, as always.
    let up = vec![row(3, 2, "b3")];
    t.write(WriteOperation::Upsert, &up).await;
    assert_eq!(only_slice(&t).await, (ins.instant.to_string(), 1));
    let mut want = first[..5].to_vec();
    want.push(row(3, 2, "b3"));
    assert_rows(&t, &want, "an update of a key stored once").await;

    // A delete of k0001: the slice (base and log) is merged into a new base file without
    // either copy.
    let del = t.write(WriteOperation::Delete, &[row(1, 0, "")]).await;
    assert_eq!(del.deleted, 2, "both copies are deleted");
    assert_eq!(only_slice(&t).await, (del.instant.to_string(), 0));
    let want = vec![
        row(0, 1, "a0"),
        row(2, 1, "a2"),
        row(2, 1, "a2"),
        row(3, 2, "b3"),
    ];
    assert_rows(&t, &want, "a delete of a key stored twice").await;

    // An update of k0002 replaces both copies, as on copy-on-write (not with a record index
    // alone).
    let up2 = t.write(WriteOperation::Upsert, &[row(2, 3, "c2")]).await;
    let (want, logs) = if indexes == Indexes::Record {
        assert_eq!(only_slice(&t).await, (del.instant.to_string(), 1));
        let want = vec![
            row(0, 1, "a0"),
            row(2, 1, "a2"),
            row(2, 3, "c2"),
            row(3, 2, "b3"),
        ];
        (want, 1)
    } else {
        assert_eq!(only_slice(&t).await, (up2.instant.to_string(), 0));
        let want = vec![
            row(0, 1, "a0"),
            row(2, 3, "c2"),
            row(2, 3, "c2"),
            row(3, 2, "b3"),
        ];
        (want, 0)
    };
    assert_rows(&t, &want, "an update of a key stored twice").await;

    // A delete of a key stored once still appends a delete block.
    let del2 = t.write(WriteOperation::Delete, &[row(0, 0, "")]).await;
    let (base, _) = only_slice(&t).await;
    assert_eq!(only_slice(&t).await, (base, logs + 1));
    assert_eq!(del2.deleted, 1);
    assert_rows(&t, &want[1..], "a delete of a key stored once").await;
}
