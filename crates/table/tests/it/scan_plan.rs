//! `TableReader::plan` / `execute`: the scan plan apart from its execution; time travel to
//! the future refused.

use arbor_table::read::{PartitionFilter, ReadOptions, ScanPlan};
use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;
use arrow::record_batch::RecordBatch;
use futures::TryStreamExt;

use super::write_support::*;

async fn written(table_type: TableType) -> TestTable {
    let t = create(table_type, Layout::Hive).await;
    t.write(WriteOperation::Insert, &rows(0..30, 1, "a")).await;
    t.write(WriteOperation::Upsert, &rows(10..40, 2, "b")).await;
    t
}

/// Every slice of `plan` executed on its own, concatenated in plan order.
async fn per_slice(plan: &ScanPlan, t: &TestTable) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    for slice in plan.file_slices() {
        let batches: Vec<RecordBatch> = plan
            .execute_slice(t.storage.clone(), slice.clone())
            .try_collect()
            .await
            .unwrap();
        out.extend(batches);
    }
    out
}

#[tokio::test]
async fn test_scan_plan_describes_the_query_and_executes_like_read() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = written(table_type).await;
        let reader = t.reader().await;
        let completed = t.completed().await;
        let queries = [
            ReadOptions::new(),
            ReadOptions::new()
                .columns(["name", "id"])
                .filter(PartitionFilter::eq("region", "eu")),
            ReadOptions::new().as_of(completed[0].requested_time.clone()),
            ReadOptions::new().read_optimized(true),
            ReadOptions::new()
                .incremental(Some(completed[0].completion_time.clone().unwrap()), None),
        ];
        for (i, options) in queries.iter().enumerate() {
            let plan = reader.plan(options).await.unwrap();
            // The plan says what it reads: slices grouped by partition, with their paths.
            let partitions: Vec<&str> = plan
                .partitions()
                .iter()
                .map(|p| p.partition.as_str())
                .collect();
            let mut sorted = partitions.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(
                partitions, sorted,
                "query {i}: one group per partition, ordered"
            );
            assert!(plan.file_slices().count() > 0, "query {i}");
            for p in plan.partitions() {
                for s in &p.slices {
                    assert_eq!(s.partition, p.partition);
                    let path = s
                        .base_file_path()
                        .or_else(|| s.log_file_paths().into_iter().next());
                    assert!(path.unwrap().starts_with(&p.partition), "query {i}");
                }
            }
            assert_eq!(
                plan.output_schema(),
                &reader.output_schema(options).unwrap()
            );
            assert_eq!(plan.as_of(), options.get_as_of());
            assert_eq!(plan.is_read_optimized(), options.is_read_optimized());
            assert_eq!(plan.incremental(), options.get_incremental());
            assert_eq!(plan.predicate(), options.get_partition_filters());
            assert_eq!(plan.batch_size(), options.get_batch_size());
            assert!(plan.merge_mode().is_some());
            assert!(format!("{plan:?}").contains("CommitRule"));
            if i == 1 {
                assert!(plan.partitions().iter().all(|p| p.partition == "region=eu"));
                assert!(plan.work_schema().index_of("_hoodie_record_key").is_ok());
                assert_eq!(plan.projection().len(), 2);
            }
            // Executing the plan, or each slice on its own, is exactly the read.
            let read = reader.read(options.clone()).await.unwrap();
            let executed: Vec<RecordBatch> =
                reader.execute(plan.clone()).try_collect().await.unwrap();
            assert_eq!(executed, read, "{table_type:?} query {i}");
            assert_eq!(per_slice(&plan, &t).await, read, "{table_type:?} query {i}");
        }
    }
}

#[tokio::test]
async fn test_scan_plan_errors_are_the_reads_errors() {
    let t = written(TableType::CopyOnWrite).await;
    let reader = t.reader().await;
    for options in [
        ReadOptions::new().columns(["nope"]),
        ReadOptions::new().filter(PartitionFilter::eq("nope", "x")),
        ReadOptions::new()
            .incremental(None, None)
            .read_optimized(true),
    ] {
        let planned = reader.plan(&options).await.unwrap_err().to_string();
        let read = reader.read(options).await.unwrap_err().to_string();
        assert_eq!(planned, read);
    }
}

/// A time-travel instant after the current time would read the latest state: the library
/// refuses it (`check_as_of`, and `plan`/`read`/`snapshot` themselves), naming the time asked,
/// the current time and the latest commit; the latest commit and now are read.
#[tokio::test]
async fn test_as_of_in_the_future_is_refused_naming_now_and_the_latest_commit() {
    let t = written(TableType::CopyOnWrite).await;
    let reader = t.reader().await;
    let completed = t.completed().await;
    let latest = completed.last().unwrap().requested_time.clone();
    let future = arbor_timeline::InstantTime::parse("99990101000000000").unwrap();
    let err = reader.check_as_of(&future).unwrap_err().to_string();
    for part in [
        "99990101000000000",
        "in the future",
        "it is now",
        latest.as_str(),
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    // Before the first commit stays an error of its own.
    let early = arbor_timeline::InstantTime::parse("20000101000000000").unwrap();
    let err = reader.check_as_of(&early).unwrap_err().to_string();
    assert!(err.contains("before the table's first commit"), "{err}");
    // The read paths refuse it too.
    let err = reader
        .plan(&ReadOptions::new().as_of(future.clone()))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("in the future"), "{err}");
    assert!(reader.snapshot(Some(&future)).await.is_err());
    assert!(reader.read_optimized(Some(&future)).await.is_err());
    // The latest commit, and now, read the latest state.
    let now = arbor_timeline::InstantTime::from_datetime(chrono::Utc::now());
    let all = rows_of(&reader.snapshot(None).await.unwrap());
    assert_eq!(all.len(), 40);
    for ok in [&latest, &now] {
        reader.check_as_of(ok).unwrap();
        assert_eq!(
            rows_of(&reader.snapshot(Some(ok)).await.unwrap()),
            all,
            "{ok}"
        );
    }
}

/// `ReadOptions::file_groups`: only the named file groups are planned and read, as of any
/// state, each as the full plan has it; unknown groups and partitions are left out; an
/// incremental query with file groups is refused.
#[tokio::test]
async fn test_plan_of_chosen_file_groups_reads_exactly_those_slices() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = written(table_type).await;
        let reader = t.reader().await;
        let completed = t.completed().await;
        for as_of in [None, Some(completed[0].requested_time.clone())] {
            let full = reader
                .plan(&ReadOptions::new().as_of_opt(as_of.clone()))
                .await
                .unwrap();
            let all: Vec<_> = full.file_slices().collect();
            assert!(all.len() >= 2, "{table_type:?}");
            // Every other group, plus names that match nothing.
            let mut groups = arbor_table::read::FileGroupSet::new();
            let chosen: Vec<_> = all.iter().step_by(2).collect();
            for s in &chosen {
                groups
                    .entry(s.partition.clone())
                    .or_default()
                    .insert(s.file_id.clone());
            }
            groups
                .entry(chosen[0].partition.clone())
                .or_default()
                .insert("no-such-group-0".to_string());
            groups
                .entry("region=nowhere".to_string())
                .or_default()
                .insert("x-0".to_string());
            let options = ReadOptions::new()
                .as_of_opt(as_of.clone())
                .data_skipping(false)
                .file_groups(groups);
            let plan = reader.plan(&options).await.unwrap();
            let got: Vec<_> = plan.file_slices().cloned().collect();
            let want: Vec<_> = chosen.iter().map(|s| (**s).clone()).collect();
            assert_eq!(got, want, "{table_type:?} as of {as_of:?}");
            // A reader listing one partition at a time plans and reads the same.
            let scoped = arbor_table::read::TableReader::open_view_with(
                t.storage.clone(),
                arbor_table::read::ListingSource::AutoPerPartition,
            )
            .await
            .unwrap();
            let again = scoped.plan(&options).await.unwrap();
            assert_eq!(again.file_slices().cloned().collect::<Vec<_>>(), want);
            let whole = ReadOptions::new().as_of_opt(as_of.clone());
            assert_eq!(
                scoped.read(whole.clone()).await.unwrap(),
                reader.read(whole).await.unwrap(),
                "{table_type:?} as of {as_of:?}: a per-partition listing reads the same"
            );
            let rows: usize = per_slice(&plan, &t)
                .await
                .iter()
                .map(|b| b.num_rows())
                .sum();
            let mut partial = 0;
            for s in &chosen {
                let batches: Vec<RecordBatch> = full
                    .execute_slice(t.storage.clone(), (**s).clone())
                    .try_collect()
                    .await
                    .unwrap();
                partial += batches.iter().map(|b| b.num_rows()).sum::<usize>();
            }
            assert_eq!(rows, partial);
        }
        let err = reader
            .plan(
                &ReadOptions::new()
                    .incremental(None, None)
                    .file_groups(Default::default()),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("file_groups"), "{err}");
    }
}
