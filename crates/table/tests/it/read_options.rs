//! `TableReader::read` / `read_stream` with `ReadOptions`: projection, partition filters
//! (pruning before any file is read), batch size and streaming, on tables written by arbor and
//! on Spark-written fixtures.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_storage::{FaultInjectingStorage, ObjectStoreStorage, OpKind, Storage};
use arbor_table::read::{FilterOp, PartitionFilter, ReadOptions, TableReader};
use arbor_table::{ListingSource, TableError, WriteOperation};
use arbor_timeline::config::TableType;
use arrow::array::ArrayRef;
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use futures::TryStreamExt;

use super::write_support::*;

/// Every row as `col=value|...` text, sorted (order-independent comparison).
fn canonical(batches: &[RecordBatch]) -> Vec<String> {
    canonical_where(batches, None, |_| true)
}

/// The canonical rows whose `column` (formatted) satisfies `keep`.
fn canonical_where(
    batches: &[RecordBatch],
    column: Option<&str>,
    keep: impl Fn(&str) -> bool,
) -> Vec<String> {
    let options = FormatOptions::default().with_null("null");
    let mut out = Vec::new();
    for b in batches {
        let schema = b.schema();
        // Formatting zoned timestamps needs chrono-tz; compare them without the zone.
        let columns: Vec<ArrayRef> = b
            .columns()
            .iter()
            .map(|c| match c.data_type() {
                DataType::Timestamp(unit, Some(_)) => {
                    cast(c, &DataType::Timestamp(*unit, None)).unwrap()
                }
                _ => c.clone(),
            })
            .collect();
        let formatters: Vec<_> = columns
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        let filter_col = column.map(|c| schema.index_of(c).unwrap());
        for r in 0..b.num_rows() {
            if let Some(i) = filter_col {
                if !keep(&formatters[i].value(r).to_string()) {
                    continue;
                }
            }
            let cells: Vec<String> = schema
                .fields()
                .iter()
                .zip(&formatters)
                .map(|(f, fm)| format!("{}={}", f.name(), fm.value(r)))
                .collect();
            out.push(cells.join("|"));
        }
    }
    out.sort();
    out
}

fn names(batches: &[RecordBatch]) -> Vec<String> {
    batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

/// A table written by arbor with several file groups per partition.
async fn written(table_type: TableType, layout: Layout) -> TestTable {
    let t = create(table_type, layout).await;
    t.write(WriteOperation::Insert, &rows(0..20, 1, "a")).await;
    t.write(WriteOperation::Insert, &rows(20..40, 1, "b")).await;
    let mut up = rows(0..6, 2, "u");
    up.extend(rows(30..34, 3, "v"));
    t.write(WriteOperation::Upsert, &up).await;
    t.write(WriteOperation::Delete, &rows(10..12, 9, "d")).await;
    t
}

#[tokio::test]
async fn test_read_projection_keeps_requested_order_and_meta_columns() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = written(table_type, Layout::Hive).await;
        let reader = t.reader().await;
        let cols = ["name", "_hoodie_record_key", "id", "_hoodie_commit_time"];
        let got = reader.read(ReadOptions::new().columns(cols)).await.unwrap();
        assert_eq!(names(&got), cols);
        assert_eq!(
            reader
                .output_schema(&ReadOptions::new().columns(cols))
                .unwrap()
                .fields()
                .len(),
            4
        );
        // Same rows as the full read projected afterwards.
        let full = reader.read(ReadOptions::new()).await.unwrap();
        let projected: Vec<RecordBatch> = full
            .iter()
            .map(|b| {
                let idx: Vec<usize> = cols
                    .iter()
                    .map(|c| b.schema().index_of(c).unwrap())
                    .collect();
                b.project(&idx).unwrap()
            })
            .collect();
        assert_eq!(canonical(&got), canonical(&projected), "{table_type:?}");
        assert_eq!(canonical(&got).len(), 38, "{table_type:?}");
    }
}

#[tokio::test]
async fn test_read_unknown_column_is_invalid_input_naming_it() {
    let t = written(TableType::CopyOnWrite, Layout::Hive).await;
    let reader = t.reader().await;
    let err = reader
        .read(ReadOptions::new().columns(["id", "nope"]))
        .await
        .unwrap_err();
    match err {
        TableError::InvalidInput { column, .. } => assert_eq!(column.as_deref(), Some("nope")),
        e => panic!("unexpected error {e}"),
    }
    // A filter on an unknown column (a filter on any column of the table is accepted).
    let err = reader
        .read(ReadOptions::new().filter(PartitionFilter::eq("nope", "x")))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, TableError::InvalidInput { column: Some(c), .. } if c == "nope"),
        "{err}"
    );
}

#[tokio::test]
async fn test_read_partition_filter_equals_filtered_full_read() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        for layout in [Layout::Hive, Layout::Plain] {
            let t = written(table_type, layout).await;
            let reader = t.reader().await;
            let full = reader.read(ReadOptions::new()).await.unwrap();
            for (filter, keep) in [
                (
                    PartitionFilter::eq("region", "eu"),
                    Box::new(|v: &str| v == "eu") as Box<dyn Fn(&str) -> bool>,
                ),
                (
                    PartitionFilter::new("region", FilterOp::Ne, "eu"),
                    Box::new(|v: &str| v != "eu"),
                ),
                (
                    PartitionFilter::new("region", FilterOp::Gt, "f"),
                    Box::new(|v: &str| v > "f"),
                ),
                (
                    PartitionFilter::is_in("region", ["us", "xx"]),
                    Box::new(|v: &str| v == "us"),
                ),
            ] {
                let got = reader
                    .read(ReadOptions::new().filter(filter.clone()))
                    .await
                    .unwrap();
                let want = canonical_where(&full, Some("region"), keep);
                assert!(!want.is_empty());
                assert_eq!(
                    canonical(&got),
                    want,
                    "{table_type:?} {layout:?} {filter:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn test_read_partition_filter_storage_listing_never_reads_pruned_partitions() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = written(table_type, Layout::Hive).await;
        let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
        let reader = TableReader::open_with(faulty.clone(), ListingSource::Storage)
            .await
            .unwrap();
        faulty.reset();
        let got = reader
            .read(
                ReadOptions::new()
                    .filter(PartitionFilter::eq("region", "us"))
                    .columns(["id", "region"]),
            )
            .await
            .unwrap();
        assert!(canonical(&got).iter().all(|r| r.contains("region=us")));
        assert!(!got.is_empty());
        let ops = faulty.ops();
        let reads = |prefix: &str| {
            ops.iter()
                .filter(|o| matches!(o.kind, OpKind::Get | OpKind::GetRange | OpKind::Head))
                .filter(|o| o.key.starts_with(prefix))
                .count()
        };
        assert!(reads("region=us/") > 0, "{ops:?}");
        assert_eq!(reads("region=eu/"), 0, "{table_type:?}: {ops:?}");
        // The file listing of the pruned partition is never asked for either.
        let eu_file_listings = ops
            .iter()
            .filter(|o| o.kind == OpKind::ListDir && o.key.trim_end_matches('/') == "region=eu")
            .count();
        let us_file_listings = ops
            .iter()
            .filter(|o| o.kind == OpKind::ListDir && o.key.trim_end_matches('/') == "region=us")
            .count();
        assert!(eu_file_listings < us_file_listings, "{ops:?}");
    }
}

#[tokio::test]
async fn test_read_partition_filter_with_mdt_never_reads_pruned_partitions_nor_lists_directories() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = written(table_type, Layout::Hive).await;
        let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
        // Counted from before the open: listing happens when the reader opens.
        faulty.reset();
        let reader = TableReader::open(faulty.clone()).await.unwrap();
        let got = reader
            .read(
                ReadOptions::new()
                    .filter(PartitionFilter::eq("region", "us"))
                    .columns(["id", "region"]),
            )
            .await
            .unwrap();
        assert!(canonical(&got).iter().all(|r| r.contains("region=us")));
        assert!(!got.is_empty());
        let ops = faulty.ops();
        let reads = |prefix: &str| {
            ops.iter()
                .filter(|o| matches!(o.kind, OpKind::Get | OpKind::GetRange | OpKind::Head))
                .filter(|o| o.key.starts_with(prefix))
                .count()
        };
        assert!(reads("region=us/") > 0, "{ops:?}");
        assert_eq!(reads("region=eu/"), 0, "{table_type:?}: {ops:?}");
        // The file listing of the pruned partition is never asked for either.
        let eu_file_listings = ops
            .iter()
            .filter(|o| o.kind == OpKind::ListDir && o.key.trim_end_matches('/') == "region=eu")
            .count();
        let us_file_listings = ops
            .iter()
            .filter(|o| o.kind == OpKind::ListDir && o.key.trim_end_matches('/') == "region=us")
            .count();
        assert_eq!(eu_file_listings, 0, "{ops:?}");
        // With the metadata table the reader lists nothing at all: FILES answers.
        let dir_listings = ops
            .iter()
            .filter(|o| matches!(o.kind, OpKind::ListDir | OpKind::List))
            .filter(|o| !o.key.starts_with(".hoodie"))
            .count();
        assert_eq!(dir_listings, 0, "{table_type:?}: {ops:?}");
        let _ = us_file_listings;
    }
}

#[tokio::test]
async fn test_read_stream_yields_same_rows_in_several_batches() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = written(table_type, Layout::Plain).await;
        let reader = t.reader().await;
        let all = reader.read(ReadOptions::new()).await.unwrap();
        let streamed: Vec<RecordBatch> = reader
            .read_stream(ReadOptions::new().batch_size(7))
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert!(streamed.len() > 1);
        assert!(streamed
            .iter()
            .all(|b| b.num_rows() <= 7 && b.num_rows() > 0));
        assert_eq!(canonical(&streamed), canonical(&all));
        // Default batch size: still one batch per slice at least (multi-slice table).
        let n = reader
            .read_stream(ReadOptions::new())
            .await
            .unwrap()
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .len();
        assert!(n > 1, "{table_type:?}: {n} batches");
        // Thin wrappers agree with read().
        assert_eq!(
            canonical(&reader.snapshot(None).await.unwrap()),
            canonical(&all)
        );
    }
}

#[tokio::test]
async fn test_read_incremental_and_read_optimized_with_options() {
    let t = written(TableType::MergeOnRead, Layout::Hive).await;
    let reader = t.reader().await;
    let completed = t.completed().await;
    let first = completed[0].requested_time.clone();
    let first_done = completed[0].completion_time.clone().unwrap();
    let inc_full = reader.incremental(Some(&first_done), None).await.unwrap();
    let inc = reader
        .read(
            ReadOptions::new()
                .incremental(Some(first_done.clone()), None)
                .columns(["id", "region", "ts", "name"])
                .filter(PartitionFilter::eq("region", "eu")),
        )
        .await
        .unwrap();
    let want: Vec<RecordBatch> = inc_full
        .iter()
        .map(|b| {
            let idx: Vec<usize> = ["id", "region", "ts", "name"]
                .iter()
                .map(|c| b.schema().index_of(c).unwrap())
                .collect();
            b.project(&idx).unwrap()
        })
        .collect();
    assert_eq!(
        canonical(&inc),
        canonical_where(&want, Some("region"), |v| v == "eu")
    );
    assert!(!inc.is_empty());
    let ro = reader
        .read(ReadOptions::new().read_optimized(true).as_of(first.clone()))
        .await
        .unwrap();
    assert_eq!(
        canonical(&ro),
        canonical(&reader.read_optimized(Some(&first)).await.unwrap())
    );
    assert_eq!(rows_of(&ro).len(), 20);
    let err = reader
        .read(ReadOptions::new().incremental(None, None).as_of(first))
        .await
        .unwrap_err();
    assert!(matches!(err, TableError::InvalidInput { .. }), "{err}");
}

fn fixture(rel: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    let zip = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures")
        .join(rel);
    if !zip.is_file() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} missing under CI",
            zip.display()
        );
        eprintln!("SKIPPED: fixture {} not found", zip.display());
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut archive = zip::ZipArchive::new(fs::File::open(&zip).unwrap()).unwrap();
    archive.extract(tmp.path()).unwrap();
    let mut stack = vec![tmp.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        if d.join(".hoodie").is_dir() {
            return Some((tmp, d));
        }
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && !p.ends_with("__MACOSX") {
                stack.push(p);
            }
        }
    }
    panic!("no .hoodie in {}", zip.display());
}

async fn fixture_reader(rel: &str) -> Option<(tempfile::TempDir, TableReader)> {
    let (tmp, base) = fixture(rel)?;
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    Some((tmp, TableReader::open(storage).await.unwrap()))
}

#[tokio::test]
async fn test_read_fixture_filters_equal_filtered_full_read() {
    type Case = (
        &'static str,
        Vec<PartitionFilter>,
        &'static str,
        fn(&str) -> bool,
    );
    let cases: Vec<Case> = vec![
        (
            "sample_table/cow/v8_complexkeygen_hivestyle.zip",
            vec![PartitionFilter::eq("byteField", "10")],
            "byteField",
            |v| v == "10",
        ),
        (
            "sample_table/cow/v8_complexkeygen_hivestyle.zip",
            // Compared as numbers (the field is an int column).
            vec![PartitionFilter::new("shortField", FilterOp::Ge, "200")],
            "shortField",
            |v| v.parse::<i64>().unwrap() >= 200,
        ),
        (
            "sample_table/cow/v6_simplekeygen_nonhivestyle.zip",
            vec![PartitionFilter::is_in("byteField", ["10", "30"])],
            "byteField",
            |v| v == "10" || v == "30",
        ),
        (
            "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle.zip",
            vec![PartitionFilter::new("byteField", FilterOp::Lt, "30")],
            "byteField",
            |v| v.parse::<i64>().unwrap() < 30,
        ),
        (
            "sample_table/mor/avro/v9_txns_simple_meta.zip",
            vec![PartitionFilter::eq("region", "apac")],
            "region",
            |v| v == "apac",
        ),
        (
            // TimestampBasedKeyGenerator: the path `2024/01/15/10` is formatted from the value
            // `2024-01-15T10:30:00.000Z`; the filter is on the column's value, not the path.
            "sample_table/cow/v9_timebasedkeygen_nonhivestyle.zip",
            vec![PartitionFilter::eq("ts_str", "2024-01-15T10:30:00.000Z")],
            "ts_str",
            |v| v == "2024-01-15T10:30:00.000Z",
        ),
        (
            "sample_table/cow/v9_timebasedkeygen_epochmillis.zip",
            vec![PartitionFilter::new(
                "ts_millis",
                FilterOp::Gt,
                "1705367700000",
            )],
            "ts_millis",
            |v| v.parse::<i64>().unwrap() > 1_705_367_700_000,
        ),
        (
            "sample_table/mor/avro/v9_timebasedkeygen_nonhivestyle.zip",
            vec![PartitionFilter::new("ts_str", FilterOp::Ge, "2024-01-16")],
            "ts_str",
            |v| v >= "2024-01-16",
        ),
    ];
    for (rel, filters, column, keep) in cases {
        let Some((_tmp, reader)) = fixture_reader(rel).await else {
            return;
        };
        let full = reader.read(ReadOptions::new()).await.unwrap();
        let got = reader
            .read(ReadOptions::new().partition_filters(filters.clone()))
            .await
            .unwrap();
        let want = canonical_where(&full, Some(column), keep);
        assert!(!want.is_empty(), "{rel}");
        assert!(
            want.len() < canonical(&full).len(),
            "{rel}: filter keeps all"
        );
        assert_eq!(canonical(&got), want, "{rel} {filters:?}");

        // Projection pushdown (merged slices too) equals projecting the full read.
        let cols = [column, "_hoodie_record_key"];
        let projected = reader
            .read(
                ReadOptions::new()
                    .partition_filters(filters.clone())
                    .columns(cols),
            )
            .await
            .unwrap();
        assert_eq!(names(&projected), cols);
        let want_proj: Vec<RecordBatch> = full
            .iter()
            .map(|b| {
                let idx: Vec<usize> = cols
                    .iter()
                    .map(|c| b.schema().index_of(c).unwrap())
                    .collect();
                b.project(&idx).unwrap()
            })
            .collect();
        assert_eq!(
            canonical(&projected),
            canonical_where(&want_proj, Some(column), keep),
            "{rel}"
        );
        // Streaming in small batches yields the same rows.
        let streamed: Vec<RecordBatch> = reader
            .read_stream(ReadOptions::new().batch_size(2))
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert!(streamed.len() > 1, "{rel}");
        assert_eq!(canonical(&streamed), canonical(&full), "{rel}");
    }
}
