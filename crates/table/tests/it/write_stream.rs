//! The streamed bulk insert (`Table::write_stream`): the rows of many batches land as one
//! commit that reads like `Table::write` of the same rows (arbor, both listing sources, and
//! hudi-rs); files roll at `max_file_size`; a tiny memory bound on several encoder threads
//! closes files early and keeps every row; a bad batch or a failing stream leaves the table as
//! it was (no file, no completed instant) and the next write works; operations and tables it
//! cannot stream are refused before anything is written.

use arbor_mdt::validate::validate_table;
use arbor_table::{Table, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arrow::record_batch::RecordBatch;
use futures::stream;

use super::write_support::{
    assert_peer_agrees, assert_snapshot, batch, create, rows, Layout, Model, Query,
};

fn ok_batches(
    batches: Vec<RecordBatch>,
) -> impl futures::Stream<Item = Result<RecordBatch, String>> + Unpin {
    stream::iter(batches.into_iter().map(Ok))
}

fn base_files(listing: &[String]) -> Vec<&String> {
    listing
        .iter()
        .filter(|k| !k.starts_with(".hoodie") && k.ends_with(".parquet"))
        .collect()
}

#[tokio::test]
async fn test_write_stream_bulk_insert_reads_like_write_and_hudi_rs_agrees() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, Layout::Hive).await;
        let mut model = Model::default();
        let mut batches = Vec::new();
        for i in 0..6u32 {
            let r = rows(i * 10..i * 10 + 10, i64::from(i), "s");
            model.upsert(&r);
            batches.push(batch(&r));
        }
        // An empty batch is skipped.
        batches.insert(2, batch(&[]));
        let result = t
            .table
            .write_stream(WriteOperation::BulkInsert, ok_batches(batches))
            .await
            .unwrap();
        assert_eq!(result.inserted, 60, "{table_type:?}");
        // One file group per partition: the default maximum size is far away.
        assert_eq!(result.files_written, 2, "{table_type:?}");
        assert_eq!(base_files(&t.listing().await).len(), 2);
        assert_snapshot(&t, &model, &format!("{table_type:?} streamed")).await;
        let report = validate_table(t.storage.clone()).await.unwrap();
        assert!(
            report.discrepancies.is_empty(),
            "{:?}",
            report.discrepancies
        );
        // The table takes ordinary writes after it.
        let r = rows(5..8, 100, "u");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        assert_snapshot(&t, &model, &format!("{table_type:?} after upsert")).await;
        assert_peer_agrees(&t, &[Query::Snapshot], &format!("{table_type:?} streamed")).await;
    }
}

#[tokio::test]
async fn test_write_stream_rolls_files_at_max_file_size() {
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    let small = t.table.clone().with_write_options(WriteOptions {
        max_file_size: 1,
        ..WriteOptions::default()
    });
    let mut model = Model::default();
    let mut batches = Vec::new();
    for i in 0..4u32 {
        let r = rows(i * 6..i * 6 + 6, 1, "r");
        model.upsert(&r);
        batches.push(batch(&r));
    }
    let result = small
        .write_stream(WriteOperation::BulkInsert, ok_batches(batches))
        .await
        .unwrap();
    // Every batch's rows of each partition closed a file: 4 batches x 2 partitions.
    assert_eq!(result.files_written, 8);
    assert_eq!(base_files(&t.listing().await).len(), 8);
    assert_snapshot(&t, &model, "rolled files").await;
    assert_peer_agrees(&t, &[Query::Snapshot], "rolled files").await;
}

#[tokio::test]
async fn test_write_stream_within_a_tiny_memory_bound_on_several_threads_keeps_every_row() {
    // Files close early to stay within `stream_memory` (here one byte: every file that has
    // encoded rows is over it), on three encoder threads; however the closes fall, every row
    // is written once, in files readers agree on.
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, Layout::Hive).await;
        let bounded = t.table.clone().with_write_options(WriteOptions {
            stream_memory: 1,
            parallelism: std::num::NonZeroUsize::new(3).unwrap(),
            ..WriteOptions::default()
        });
        let mut model = Model::default();
        let mut batches = Vec::new();
        for i in 0..8u32 {
            let r = rows(i * 25..i * 25 + 25, i64::from(i), "m");
            model.upsert(&r);
            batches.push(batch(&r));
        }
        let result = bounded
            .write_stream(WriteOperation::BulkInsert, ok_batches(batches))
            .await
            .unwrap();
        assert_eq!(result.inserted, 200, "{table_type:?}");
        assert!(result.files_written >= 2, "{}", result.files_written);
        assert_eq!(
            base_files(&t.listing().await).len(),
            result.files_written,
            "{table_type:?}"
        );
        assert_snapshot(&t, &model, &format!("{table_type:?} bounded")).await;
        let report = validate_table(t.storage.clone()).await.unwrap();
        assert!(
            report.discrepancies.is_empty(),
            "{:?}",
            report.discrepancies
        );
        assert_peer_agrees(&t, &[Query::Snapshot], &format!("{table_type:?} bounded")).await;
    }
}

#[tokio::test]
async fn test_write_stream_bad_batch_or_stream_error_leaves_the_table_unchanged() {
    let t = create(TableType::MergeOnRead, Layout::Hive).await;
    let mut model = Model::default();
    let r = rows(0..4, 1, "a");
    t.write(WriteOperation::Insert, &r).await;
    model.upsert(&r);
    let before = t.listing().await;
    let completed = t.completed().await.len();

    // A batch whose key column is missing, after good ones whose files were stored.
    let other = RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("region", arrow::datatypes::DataType::Utf8, true),
        ])),
        vec![std::sync::Arc::new(arrow::array::StringArray::from(vec![
            "us",
        ]))],
    )
    .unwrap();
    let tiny = t.table.clone().with_write_options(WriteOptions {
        max_file_size: 1,
        ..WriteOptions::default()
    });
    let err = tiny
        .write_stream(
            WriteOperation::BulkInsert,
            ok_batches(vec![
                batch(&rows(10..20, 2, "b")),
                batch(&rows(20..30, 2, "b")),
                other,
            ]),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("input batch 2"), "{err}");
    // The stream's own error, after a good batch.
    let failing = stream::iter(vec![
        Ok(batch(&rows(40..50, 3, "c"))),
        Err("the source went away".to_string()),
    ]);
    let err = tiny
        .write_stream(WriteOperation::BulkInsert, failing)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("the source went away"), "{err}");
    assert!(err.to_string().contains("batch 1"), "{err}");
    // Nothing of either attempt is readable or left behind but their rollbacks.
    assert_snapshot(&t, &model, "after failed streams").await;
    assert_eq!(t.completed().await.len(), completed);
    let after = t.listing().await;
    assert_eq!(
        base_files(&after),
        base_files(&before),
        "no data file is left"
    );
    let timeline = t.timeline().await;
    assert!(timeline.pending().is_empty(), "{:?}", timeline.pending());
    let report = validate_table(t.storage.clone()).await.unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "{:?}",
        report.discrepancies
    );
    let r = rows(60..62, 4, "d");
    t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    assert_snapshot(&t, &model, "next write").await;
}

#[tokio::test]
async fn test_write_stream_refuses_other_operations_empty_input_and_indexed_tables() {
    let t = create(TableType::CopyOnWrite, Layout::Hive).await;
    let before = t.listing().await;
    for op in [
        WriteOperation::Upsert,
        WriteOperation::Insert,
        WriteOperation::Delete,
    ] {
        let err = t
            .table
            .write_stream(op, ok_batches(vec![batch(&rows(0..2, 1, "x"))]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("bulk insert"), "{op:?}: {err}");
    }
    let err = t
        .table
        .write_stream(WriteOperation::BulkInsert, ok_batches(vec![batch(&[])]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no rows"), "{err}");
    assert_eq!(t.listing().await, before, "refusals write nothing");

    t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    t.table.create_record_index().await.unwrap();
    let indexed = Table::open(t.storage.clone()).await.unwrap();
    let before = t.listing().await;
    let err = indexed
        .write_stream(
            WriteOperation::BulkInsert,
            ok_batches(vec![batch(&rows(10..12, 2, "b"))]),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("record index"), "{err}");
    assert_eq!(t.listing().await, before);
}
