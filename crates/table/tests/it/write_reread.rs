//! Upserts and deletes of an input read again (`Table::write_reread`): an input over the held
//! budget is written in waves, one more read of the input each, as one commit that reads like
//! `Table::write` of the same rows (arbor and hudi-rs), duplicates of a key across batches
//! combined; a small input is written as `Table::write` writes it, read once; a bad key fails
//! on the first read naming its input row; an input that reads differently later, or a bad row
//! found while a wave is written, leaves the table as it was (no file, no completed instant).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arbor_table::{TableError, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use futures::stream;

use super::write_support::{
    assert_peer_agrees, assert_snapshot, batch, create, rows, Layout, Model, Query, Row, TestTable,
};

type Input = stream::Iter<std::vec::IntoIter<Result<RecordBatch, String>>>;

/// An input of `batches` that counts how often it is read.
fn reopened(batches: Vec<RecordBatch>, reads: Arc<AtomicUsize>) -> impl FnMut() -> Input {
    move || {
        reads.fetch_add(1, Ordering::SeqCst);
        stream::iter(batches.clone().into_iter().map(Ok).collect::<Vec<_>>())
    }
}

/// A handle on `t` whose held budget (4 x `stream_memory`) is about a third of `batches`.
fn in_thirds(t: &TestTable, batches: &[RecordBatch]) -> arbor_table::Table {
    let bytes: usize = batches.iter().map(RecordBatch::get_array_memory_size).sum();
    t.table.clone().with_write_options(WriteOptions {
        stream_memory: (bytes / 12).max(1) as u64,
        ..WriteOptions::default()
    })
}

/// Updates of 0..100 (even ones newer, odd ones older than stored), new keys 200..260, and key
/// k0300 twice in different batches (the newer wins), in six batches.
fn upsert_input() -> (Vec<Row>, Vec<RecordBatch>) {
    let mut all: Vec<Row> = rows(0..100, 2, "u")
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            if i % 2 == 1 {
                r.2 = 0;
            }
            r
        })
        .collect();
    all.extend(rows(200..260, 2, "n"));
    all.push(("k0300".into(), "eu".into(), 5, "late".into()));
    all.insert(10, ("k0300".into(), "eu".into(), 4, "early".into()));
    let batches = all.chunks(27).map(batch).collect();
    (all, batches)
}

async fn snapshot_files(t: &TestTable) -> Vec<String> {
    t.listing()
        .await
        .into_iter()
        .filter(|k| !k.starts_with(".hoodie"))
        .collect()
}

#[tokio::test]
async fn test_write_reread_upserts_in_waves_like_write_and_hudi_rs_agrees() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let step = format!("{table_type:?}");
        let (t, twin) = (
            create(table_type, Layout::Hive).await,
            create(table_type, Layout::Hive).await,
        );
        let mut model = Model::default();
        let seed = rows(0..200, 1, "s");
        t.write(WriteOperation::Upsert, &seed).await;
        twin.write(WriteOperation::Upsert, &seed).await;
        model.upsert(&seed);
        let before = t.completed().await.len();
        let (all, batches) = upsert_input();
        // The model applies k0300's rows in input order: the newer comes last either way.
        model.upsert(&all);
        let reads = Arc::new(AtomicUsize::new(0));
        let result = in_thirds(&t, &batches)
            .write_reread(
                WriteOperation::Upsert,
                reopened(batches.clone(), reads.clone()),
            )
            .await
            .unwrap();
        // One read for the keys, then one per wave.
        let reads = reads.load(Ordering::SeqCst);
        assert!(reads >= 3, "{step}: {reads} reads");
        assert_eq!(t.completed().await.len(), before + 1, "{step}: one commit");
        assert_eq!(result.inserted, 61, "{step}");
        assert_snapshot(&t, &model, &format!("{step} in waves")).await;
        // The same rows through Table::write read alike.
        twin.table
            .write(WriteOperation::Upsert, batches)
            .await
            .unwrap();
        assert_snapshot(&twin, &model, &format!("{step} written at once")).await;
        assert_peer_agrees(&t, &[Query::Snapshot], &format!("{step} in waves")).await;
        // The table takes ordinary writes after it.
        let r = rows(0..4, 9, "after");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        assert_snapshot(&t, &model, &format!("{step} after")).await;
    }
}

#[tokio::test]
async fn test_write_reread_keeps_a_partition_that_fits_in_one_wave() {
    // Twelve partitions, each well within a wave: every partition's rows go to one wave.
    let t = create(TableType::CopyOnWrite, Layout::Hive).await;
    let spread = |rows: Vec<Row>| -> Vec<Row> {
        rows.into_iter()
            .enumerate()
            .map(|(i, mut r)| {
                r.1 = format!("r{}", i % 12);
                r
            })
            .collect()
    };
    let mut model = Model::default();
    let seed = spread(rows(0..240, 1, "s"));
    t.write(WriteOperation::Upsert, &seed).await;
    model.upsert(&seed);
    let mut input = spread(rows(0..240, 2, "u"));
    input.extend(spread(rows(300..420, 2, "n")));
    model.upsert(&input);
    let batches: Vec<RecordBatch> = input.chunks(50).map(batch).collect();
    let reads = Arc::new(AtomicUsize::new(0));
    let result = in_thirds(&t, &batches)
        .write_reread(WriteOperation::Upsert, reopened(batches, reads.clone()))
        .await
        .unwrap();
    assert!(reads.load(Ordering::SeqCst) >= 3);
    assert_eq!((result.inserted, result.updated), (120, 240));
    // A wave that alone writes its partitions packs new keys into their small groups, as
    // Table::write does: each partition's one group is rewritten with its updates and inserts.
    assert_eq!(result.files_written, 12);
    assert_snapshot(&t, &model, "partitions whole").await;
    assert_peer_agrees(&t, &[Query::Snapshot], "partitions whole").await;
}

#[tokio::test]
async fn test_write_reread_deletes_in_waves() {
    let t = create(TableType::MergeOnRead, Layout::Plain).await;
    let mut model = Model::default();
    let seed = rows(0..200, 1, "s");
    t.write(WriteOperation::Upsert, &seed).await;
    model.upsert(&seed);
    let gone = rows(0..150, 1, "s");
    model.delete(&gone);
    let batches: Vec<RecordBatch> = gone.chunks(20).map(batch).collect();
    let reads = Arc::new(AtomicUsize::new(0));
    in_thirds(&t, &batches)
        .write_reread(WriteOperation::Delete, reopened(batches, reads.clone()))
        .await
        .unwrap();
    assert!(reads.load(Ordering::SeqCst) >= 3);
    assert_snapshot(&t, &model, "deleted in waves").await;
    assert_peer_agrees(&t, &[Query::Snapshot], "deleted in waves").await;
}

#[tokio::test]
async fn test_write_reread_of_a_small_input_reads_it_once() {
    let t = create(TableType::CopyOnWrite, Layout::Hive).await;
    let mut model = Model::default();
    let (all, batches) = upsert_input();
    model.upsert(&all);
    let reads = Arc::new(AtomicUsize::new(0));
    let result = t
        .table
        .write_reread(WriteOperation::Upsert, reopened(batches, reads.clone()))
        .await
        .unwrap();
    assert_eq!(reads.load(Ordering::SeqCst), 1);
    assert_eq!(result.attempts, 1);
    assert_snapshot(&t, &model, "small input").await;
}

#[tokio::test]
async fn test_write_reread_refuses_a_bad_key_on_the_first_read_naming_its_row() {
    let t = create(TableType::CopyOnWrite, Layout::Hive).await;
    t.write(WriteOperation::Upsert, &rows(0..50, 1, "s")).await;
    let files = snapshot_files(&t).await;
    let (_, mut batches) = upsert_input();
    // Row 3 of the fourth batch (27 rows each): input row 84 has an empty key.
    let nullable = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("region", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let ids: Vec<Option<&str>> = (0..27).map(|i| (i != 3).then_some("kx")).collect();
    batches[3] = RecordBatch::try_new(
        nullable,
        vec![
            Arc::new(StringArray::from(ids)),
            Arc::new(StringArray::from(vec!["eu"; 27])),
            Arc::new(Int64Array::from(vec![1; 27])),
            Arc::new(StringArray::from(vec!["x"; 27])),
        ],
    )
    .unwrap();
    let reads = Arc::new(AtomicUsize::new(0));
    let err = in_thirds(&t, &batches)
        .write_reread(WriteOperation::Upsert, reopened(batches, reads.clone()))
        .await
        .unwrap_err();
    match &err {
        TableError::InvalidInput { row, .. } => assert_eq!(*row, Some(84), "{err}"),
        other => panic!("{other}"),
    }
    assert_eq!(reads.load(Ordering::SeqCst), 1, "nothing read twice");
    assert_eq!(snapshot_files(&t).await, files);
}

#[tokio::test]
async fn test_write_reread_that_reads_differently_leaves_the_table_as_it_was() {
    let t = create(TableType::CopyOnWrite, Layout::Hive).await;
    let mut model = Model::default();
    let seed = rows(0..200, 1, "s");
    t.write(WriteOperation::Upsert, &seed).await;
    model.upsert(&seed);
    let before = t.completed().await.len();
    let files = snapshot_files(&t).await;
    let (_, batches) = upsert_input();
    let handle = in_thirds(&t, &batches);
    // Every read after the first gives one more batch.
    let reads = Arc::new(AtomicUsize::new(0));
    let counter = reads.clone();
    let extra = batch(&rows(500..510, 3, "x"));
    let err = handle
        .write_reread(WriteOperation::Upsert, move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let mut b = batches.clone();
            if n > 0 {
                b.push(extra.clone());
            }
            stream::iter(b.into_iter().map(Ok::<_, String>).collect::<Vec<_>>())
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("the input changed"), "{err}");
    assert_eq!(
        reads.load(Ordering::SeqCst),
        2,
        "the first wave's read finds it"
    );
    assert_eq!(t.completed().await.len(), before);
    assert_eq!(
        snapshot_files(&t).await,
        files,
        "no file of the write is left"
    );
    assert_snapshot(&t, &model, "after the refused write").await;

    // A bad value met while a wave is written (ts as text: keys are fine) rolls back the
    // fragments already written.
    let (_, mut batches) = upsert_input();
    let text_ts = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, true),
        Field::new("ts", DataType::Utf8, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let last = batches.len() - 1;
    let n = batches[last].num_rows();
    batches[last] = RecordBatch::try_new(
        text_ts,
        vec![
            batches[last].column(0).clone(),
            batches[last].column(1).clone(),
            Arc::new(StringArray::from(vec!["not a number"; n])),
            batches[last].column(3).clone(),
        ],
    )
    .unwrap();
    let reads = Arc::new(AtomicUsize::new(0));
    let err = handle
        .write_reread(WriteOperation::Upsert, reopened(batches, reads.clone()))
        .await
        .unwrap_err();
    assert!(matches!(err, TableError::InvalidInput { .. }), "{err}");
    assert!(reads.load(Ordering::SeqCst) >= 2);
    assert_eq!(t.completed().await.len(), before);
    assert_eq!(
        snapshot_files(&t).await,
        files,
        "no file of the write is left"
    );
    assert_snapshot(&t, &model, "after the bad wave").await;
}

#[tokio::test]
async fn test_write_reread_in_waves_keeps_the_record_index_exact() {
    // With a global record index every key is routed to where it is stored.
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let step = format!("{table_type:?} with a record index");
        let t = create(table_type, Layout::Hive).await;
        let mut model = Model::default();
        let seed = rows(0..200, 1, "s");
        t.write(WriteOperation::Upsert, &seed).await;
        model.upsert(&seed);
        t.table.create_record_index().await.unwrap();
        let (all, batches) = upsert_input();
        model.upsert(&all);
        let reads = Arc::new(AtomicUsize::new(0));
        in_thirds(&t, &batches)
            .write_reread(WriteOperation::Upsert, reopened(batches, reads.clone()))
            .await
            .unwrap();
        assert!(reads.load(Ordering::SeqCst) >= 3, "{step}");
        assert_snapshot(&t, &model, &step).await;
        let report = arbor_mdt::validate::validate_table(t.storage.clone())
            .await
            .unwrap();
        assert!(
            report.discrepancies.is_empty(),
            "{step}: {:?}",
            report.discrepancies
        );
        // A key written again in waves is found where the index says.
        let r = rows(250..255, 9, "again");
        model.upsert(&r);
        let batches = vec![batch(&r[..2]), batch(&r[2..])];
        in_thirds(&t, &batches)
            .write_reread(WriteOperation::Upsert, reopened(batches, Arc::default()))
            .await
            .unwrap();
        assert_snapshot(&t, &model, &format!("{step}, again")).await;
    }
}
