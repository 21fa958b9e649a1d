//! Property: on a merge-on-read table with awkward types (timestamps with and without zone,
//! decimals, nulls, strings) and with column stats, partition stats and the record index,
//! random conjunctions of predicates return exactly the rows of an unpruned read filtered by
//! Arrow's kernels, and the same rows as a read with data skipping switched off.

use std::sync::Arc;

use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::{FilterOp, PartitionFilter, ReadOptions, TableReader};
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_timeline::config::{RecordMergeMode, TableType};
use arrow::array::{
    Array, ArrayRef, Decimal128Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::data_skipping::{reference, render, row_lines, unpruned};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
        Field::new(
            "at_utc",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new(
            "at_local",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            true,
        ),
        Field::new("amount", DataType::Decimal128(12, 3), true),
        Field::new("note", DataType::Utf8, true),
    ]))
}

/// Rows `ids` written at ordering value `ts`; values vary with the id and `ts`, every fifth
/// value is null.
fn batch(ids: std::ops::Range<i64>, ts: i64) -> RecordBatch {
    let n = |i: i64| (i * 7 + ts) % 5 != 0;
    let ids: Vec<i64> = ids.collect();
    let col = |f: &dyn Fn(i64) -> Option<i64>| ids.iter().map(|&i| f(i)).collect::<Vec<_>>();
    let base = 1_705_314_600_000_000i64; // 2024-01-15T10:30:00Z
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            ids.iter().map(|i| format!("k{i:03}")),
        )),
        Arc::new(StringArray::from_iter_values(
            ids.iter().map(|i| ["us", "eu", "apac"][(i % 3) as usize]),
        )),
        Arc::new(Int64Array::from(vec![ts; ids.len()])),
        Arc::new(
            TimestampMicrosecondArray::from(col(&|i| {
                n(i).then_some(base + (i * 3_600 + ts * 60) * 1_000_000)
            }))
            .with_timezone("UTC"),
        ),
        Arc::new(TimestampMicrosecondArray::from(col(&|i| {
            n(i + 1).then_some(base + (i * 86_400 - ts) * 1_000_000 + 123)
        }))),
        Arc::new(
            Decimal128Array::from(
                col(&|i| n(i + 2).then_some((i - 20) * 12_345 + ts))
                    .into_iter()
                    .map(|v| v.map(i128::from))
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(12, 3)
            .unwrap(),
        ),
        Arc::new(StringArray::from(
            ids.iter()
                .map(|&i| n(i + 3).then(|| format!("note-{}", (i * 13 + ts) % 17)))
                .collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(schema(), cols).unwrap()
}

/// Filter values per column: every value the table holds, and a few outside it.
fn pools(all: &RecordBatch) -> Vec<(String, Vec<String>)> {
    let extras: &[(&str, &[&str])] = &[
        ("id", &["k999", "a"]),
        ("region", &["zz", "apac"]),
        (
            "at_utc",
            &["1970-01-01T00:00:00Z", "2100-01-01T00:00:00+02:00"],
        ),
        ("at_local", &["1970-01-01T00:00:00", "2100-01-01 00:00:00"]),
        ("amount", &["-1000000", "0", "1000000.5"]),
        ("note", &["", "zzz"]),
        ("ts", &["0", "99"]),
    ];
    extras
        .iter()
        .map(|(name, extra)| {
            let column = all.column_by_name(name).unwrap();
            let mut values: Vec<String> = (0..column.len())
                .filter(|&i| column.is_valid(i))
                .map(|i| render(column, i))
                .collect();
            values.extend(extra.iter().map(|v| v.to_string()));
            values.sort();
            values.dedup();
            (name.to_string(), values)
        })
        .collect()
}

fn op_of(i: u8) -> FilterOp {
    [
        FilterOp::Eq,
        FilterOp::Ne,
        FilterOp::Lt,
        FilterOp::Le,
        FilterOp::Gt,
        FilterOp::Ge,
        FilterOp::In,
        FilterOp::IsNull,
        FilterOp::IsNotNull,
    ][usize::from(i) % 9]
}

#[test]
fn test_random_predicates_pruned_equal_unpruned_on_awkward_types() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(tmp.path()).unwrap());
    let (reader, all) = rt.block_on(async {
        let table = Table::create(
            storage.clone(),
            CreateOptions {
                name: "awkward".into(),
                table_type: TableType::MergeOnRead,
                record_key_fields: vec!["id".into()],
                partition_fields: vec!["region".into()],
                hive_style_partitioning: true,
                ordering_field: Some("ts".into()),
                merge_mode: Some(RecordMergeMode::EventTimeOrdering),
                schema: schema(),
                metadata_table: true,
                table_version: Default::default(),
                base_format: Default::default(),
            },
        )
        .await
        .unwrap();
        table
            .write(WriteOperation::Insert, vec![batch(0..60, 1)])
            .await
            .unwrap();
        table.create_record_index().await.unwrap();
        table.create_stats_indexes(true, true).await.unwrap();
        table
            .write(WriteOperation::Upsert, vec![batch(30..90, 2)])
            .await
            .unwrap();
        table
            .write(WriteOperation::Delete, vec![batch(0..10, 3)])
            .await
            .unwrap();
        let reader = TableReader::open(storage.clone()).await.unwrap();
        let all = unpruned(&reader).await;
        (reader, all)
    });
    assert_eq!(all.num_rows(), 80);
    let pools = pools(&all);
    let pick = (
        0..pools.len(),
        any::<u8>(),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
    );
    let strategy = prop::collection::vec(pick, 1..=3);
    let mut runner = TestRunner::new(Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    });
    let skipped = std::cell::Cell::new(0usize);
    runner
        .run(&strategy, |picks| {
            let filters: Vec<PartitionFilter> = picks
                .iter()
                .map(|(c, op, a, b)| {
                    let (name, values) = &pools[*c];
                    let (a, b) = (a.get(values).clone(), b.get(values).clone());
                    match op_of(*op) {
                        FilterOp::In => PartitionFilter::is_in(name, [a, b]),
                        FilterOp::IsNull => PartitionFilter::is_null(name),
                        FilterOp::IsNotNull => PartitionFilter::is_not_null(name),
                        op => PartitionFilter::new(name, op, a),
                    }
                })
                .collect();
            let options = ReadOptions::new().partition_filters(filters.clone());
            let (got, plain, report) = rt.block_on(async {
                let plan = reader.plan(&options).await.unwrap();
                let report = plan.pruning().clone();
                let got = reader.read(options.clone()).await.unwrap();
                let plain = reader
                    .read(options.clone().data_skipping(false))
                    .await
                    .unwrap();
                (got, plain, report)
            });
            skipped.set(
                skipped.get() + report.files_considered - report.files_read()
                    + report.partitions_skipped_by_stats,
            );
            let mut want = all.clone();
            for f in &filters {
                want = reference(&want, f);
            }
            prop_assert_eq!(
                row_lines(&got),
                row_lines(&[want]),
                "{:?} ({})",
                filters,
                report
            );
            prop_assert_eq!(row_lines(&got), row_lines(&plain), "{:?}", filters);
            Ok(())
        })
        .unwrap();
    eprintln!("{} partitions/slices skipped over the cases", skipped.get());
    assert!(skipped.get() > 0, "the statistics never skipped anything");
}
