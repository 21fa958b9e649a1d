//! `TableReader::read_stream` / `ScanPlan::execute` with several slices in flight: the batches
//! equal a sequential, collected read (COW and MOR, projections and filters, time travel,
//! read-optimized and incremental queries, small batches), and the stream is lazy.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_storage::{FaultInjectingStorage, ObjectStoreStorage, OpKind, Storage};
use arbor_table::read::{PartitionFilter, ReadOptions, TableReader};
use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;
use arrow::record_batch::RecordBatch;
use futures::{StreamExt, TryStreamExt};

use super::write_support::*;

/// A table with several file groups per partition and, for MOR, log files with updates and
/// deletes on top of them.
async fn written(table_type: TableType) -> TestTable {
    let t = create(table_type, Layout::Hive).await;
    for i in 0..4u32 {
        t.write(
            WriteOperation::BulkInsert,
            &rows(i * 40..(i + 1) * 40, 1, "a"),
        )
        .await;
    }
    t.write(WriteOperation::Upsert, &rows(10..70, 2, "b")).await;
    t.write(WriteOperation::Delete, &rows(100..110, 3, "d"))
        .await;
    t.write(WriteOperation::Upsert, &rows(60..90, 4, "c")).await;
    t
}

fn queries(t: &[arbor_timeline::Instant]) -> Vec<ReadOptions> {
    vec![
        ReadOptions::new(),
        ReadOptions::new().batch_size(7),
        ReadOptions::new()
            .columns(["name", "id"])
            .filter(PartitionFilter::eq("region", "eu")),
        ReadOptions::new().filter(PartitionFilter::parse("ts >= 2").unwrap()),
        ReadOptions::new().as_of(t[4].requested_time.clone()),
        ReadOptions::new().read_optimized(true),
        ReadOptions::new().incremental(Some(t[3].completion_time.clone().unwrap()), None),
    ]
}

async fn collect(reader: &TableReader, options: ReadOptions) -> Vec<RecordBatch> {
    reader
        .read_stream(options)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_read_stream_parallel_equals_sequential_read() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = written(table_type).await;
        let reader = t.reader().await;
        let completed = t.completed().await;
        for (i, options) in queries(&completed).into_iter().enumerate() {
            let what = format!("{table_type:?} query {i}");
            let sequential = reader.read(options.clone().parallelism(1)).await.unwrap();
            assert!(
                sequential.iter().map(RecordBatch::num_rows).sum::<usize>() > 0,
                "{what}"
            );
            for n in [2, 4, 16] {
                let parallel = collect(&reader, options.clone().parallelism(n)).await;
                assert_eq!(parallel, sequential, "{what}, parallelism {n}");
            }
            // Partition by partition, as the CLI streams: the same batches.
            let plan = reader.plan(&options.clone().parallelism(4)).await.unwrap();
            assert_eq!(plan.parallelism(), 4);
            let mut by_partition = Vec::new();
            for p in 0..plan.partitions().len() {
                let batches: Vec<RecordBatch> = plan
                    .execute_partition(t.storage.clone(), p)
                    .try_collect()
                    .await
                    .unwrap();
                by_partition.extend(batches);
            }
            assert_eq!(by_partition, sequential, "{what}, per partition");
            let past_end: Vec<RecordBatch> = plan
                .execute_partition(t.storage.clone(), plan.partitions().len())
                .try_collect()
                .await
                .unwrap();
            assert!(past_end.is_empty(), "{what}");
        }
        // The MOR table really merges in parallel: several slices with log files.
        if table_type == TableType::MergeOnRead {
            let plan = reader.plan(&ReadOptions::new()).await.unwrap();
            let with_logs = plan
                .file_slices()
                .filter(|s| !s.log_files.is_empty())
                .count();
            assert!(with_logs >= 2, "{with_logs} slices with log files");
        }
    }
}

#[test]
fn test_read_stream_without_runtime_reads_sequentially_the_same_batches() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (t, expected) = rt.block_on(async {
        let t = written(TableType::MergeOnRead).await;
        let expected = t.reader().await.read(ReadOptions::new()).await.unwrap();
        (t, expected)
    });
    let storage = t.storage.clone();
    let stream = rt.block_on(async {
        TableReader::open(storage)
            .await
            .unwrap()
            .read_stream(ReadOptions::new().parallelism(4))
            .await
            .unwrap()
    });
    // Polled outside any tokio runtime (the local storage needs none for reads): slices are
    // read one at a time in the polling thread.
    let got: Vec<RecordBatch> = std::thread::spawn(move || {
        futures::executor::block_on(stream.try_collect::<Vec<RecordBatch>>())
    })
    .join()
    .unwrap()
    .unwrap();
    assert_eq!(got, expected);
}

/// The base files read so far (GETs and ranged GETs of parquet files).
fn parquet_files_read(counter: &FaultInjectingStorage) -> BTreeSet<String> {
    counter
        .ops()
        .into_iter()
        .filter(|o| matches!(o.kind, OpKind::Get | OpKind::GetRange | OpKind::Head))
        .filter(|o| o.key.ends_with(".parquet"))
        .map(|o| o.key)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_read_stream_reads_only_the_slices_in_flight() {
    let t = written(TableType::CopyOnWrite).await;
    let counter = Arc::new(FaultInjectingStorage::new(Arc::new(
        ObjectStoreStorage::local(&t.base).unwrap(),
    )));
    let storage: Arc<dyn Storage> = counter.clone();
    let reader = TableReader::open(storage).await.unwrap();
    let slices = reader
        .plan(&ReadOptions::new())
        .await
        .unwrap()
        .file_slices()
        .count();
    assert!(slices >= 6, "{slices} slices");
    for parallelism in [1usize, 2] {
        counter.reset();
        let mut stream = reader
            .read_stream(ReadOptions::new().parallelism(parallelism).batch_size(1))
            .await
            .unwrap();
        assert!(
            parquet_files_read(&counter).is_empty(),
            "nothing is read before the stream is polled"
        );
        let first = stream.next().await.unwrap().unwrap();
        assert_eq!(first.num_rows(), 1);
        // Give the slices started ahead every chance to run.
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let touched = parquet_files_read(&counter).len();
        assert!(
            touched <= parallelism + 1 && touched < slices,
            "parallelism {parallelism}: {touched} of {slices} base files read after one batch"
        );
        drop(stream);
    }
}
