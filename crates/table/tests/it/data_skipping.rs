//! Filters on any column and data skipping, on the Spark-written fixtures that have column
//! stats: every predicate returns exactly the rows of an unpruned read filtered here (by
//! Arrow's own comparison kernels), and the plan's pruning report shows the skips the
//! statistics and indexes prove.

use std::path::Path;
use std::sync::Arc;

use arbor_format::meta;
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::{FilterOp, PartitionFilter, PruningReport, ReadOptions, TableReader};
use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, Scalar, StringArray};
use arrow::compute::kernels::cmp;
use arrow::compute::{concat_batches, filter_record_batch, sort_to_indices};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use futures::TryStreamExt;

use arbor_table::WriteOperation;
use arbor_testkit::{fixture_name, fixture_zips, fixtures_root_or_skip, unzip_table};
use arbor_timeline::config::TableType;

use super::write_support::{create, rows, Layout};

/// Every row of `batches` as one line of its values, sorted.
pub fn row_lines(batches: &[RecordBatch]) -> Vec<String> {
    let opts = FormatOptions::default().with_null("∅");
    let mut out = Vec::new();
    for b in batches {
        let fmts: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).unwrap())
            .collect();
        for row in 0..b.num_rows() {
            let cells: Vec<String> = fmts.iter().map(|f| f.value(row).to_string()).collect();
            out.push(cells.join("\u{1}"));
        }
    }
    out.sort();
    out
}

/// The value of `column` at `row` as a filter value (Arrow's display, which arbor parses).
pub fn render(column: &ArrayRef, row: usize) -> String {
    ArrayFormatter::try_new(column.as_ref(), &FormatOptions::default())
        .unwrap()
        .value(row)
        .to_string()
}

/// The rows of `all` that `f` holds for, by Arrow's kernels: the filter value cast to the
/// column's type, a comparison with null never true.
pub fn reference(all: &RecordBatch, f: &PartitionFilter) -> RecordBatch {
    let column = all.column_by_name(&f.field).unwrap();
    let scalar = |v: &str| -> Scalar<ArrayRef> {
        let text: ArrayRef = Arc::new(StringArray::from(vec![v]));
        Scalar::new(arrow::compute::cast(&text, column.data_type()).unwrap())
    };
    let mask: BooleanArray = match f.op {
        FilterOp::IsNull => arrow::compute::is_null(column).unwrap(),
        FilterOp::IsNotNull => arrow::compute::is_not_null(column).unwrap(),
        FilterOp::In => {
            let mut acc = BooleanArray::from(vec![false; all.num_rows()]);
            for v in &f.values {
                let m = cmp::eq(column, &scalar(v)).unwrap();
                acc = arrow::compute::or_kleene(&acc, &m).unwrap();
            }
            acc
        }
        op => {
            let s = scalar(&f.values[0]);
            match op {
                FilterOp::Eq => cmp::eq(column, &s),
                FilterOp::Ne => cmp::neq(column, &s),
                FilterOp::Lt => cmp::lt(column, &s),
                FilterOp::Le => cmp::lt_eq(column, &s),
                FilterOp::Gt => cmp::gt(column, &s),
                FilterOp::Ge => cmp::gt_eq(column, &s),
                _ => unreachable!(),
            }
            .unwrap()
        }
    };
    // Nulls in the mask (comparisons with null) are not true.
    let mask: BooleanArray = mask.iter().map(|v| Some(v == Some(true))).collect();
    filter_record_batch(all, &mask).unwrap()
}

/// Whether filters compare values of this type.
pub fn filterable(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal128(_, _)
            | DataType::Boolean
            | DataType::Date32
            | DataType::Timestamp(_, _)
            | DataType::Utf8
            | DataType::LargeUtf8
    )
}

/// Predicates on every filterable column of `all`: each operator against the smallest and the
/// largest value, IN of both, IS [NOT] NULL.
pub fn predicates(schema: &SchemaRef, all: &RecordBatch) -> Vec<PartitionFilter> {
    let mut out = Vec::new();
    for field in schema.fields() {
        let name = field.name();
        if !filterable(field.data_type())
            || (meta::is_meta_column(name) && name != meta::RECORD_KEY)
        {
            continue;
        }
        let column = all.column_by_name(name).unwrap();
        out.push(PartitionFilter::is_null(name));
        out.push(PartitionFilter::is_not_null(name));
        let order = sort_to_indices(column, None, None).unwrap();
        let present: Vec<usize> = order
            .values()
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| column.is_valid(i))
            .collect();
        let (Some(&lo), Some(&hi)) = (present.first(), present.last()) else {
            continue;
        };
        for row in [lo, hi] {
            let v = render(column, row);
            for op in [
                FilterOp::Eq,
                FilterOp::Ne,
                FilterOp::Lt,
                FilterOp::Le,
                FilterOp::Gt,
                FilterOp::Ge,
            ] {
                out.push(PartitionFilter::new(name, op, v.clone()));
            }
        }
        out.push(PartitionFilter::is_in(
            name,
            [render(column, lo), render(column, hi)],
        ));
    }
    out
}

fn storage_at(base: &Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

/// Every row of the table, read without filters or skipping, in one batch.
pub async fn unpruned(reader: &TableReader) -> RecordBatch {
    let batches = reader
        .read(ReadOptions::new().data_skipping(false))
        .await
        .unwrap();
    concat_batches(reader.schema(), &batches).unwrap()
}

/// Reads with `filters` and checks the rows against the reference (and against a read without
/// skipping); returns the plan's report.
pub async fn check(
    reader: &TableReader,
    all: &RecordBatch,
    filters: &[PartitionFilter],
    label: &str,
) -> PruningReport {
    let report = check_reference(reader, all, filters, label).await;
    let options = ReadOptions::new().partition_filters(filters.to_vec());
    let got = reader.read(options).await.unwrap();
    // Without skipping, the same rows.
    let plain = reader
        .read(
            ReadOptions::new()
                .partition_filters(filters.to_vec())
                .data_skipping(false),
        )
        .await
        .unwrap();
    assert_eq!(row_lines(&got), row_lines(&plain), "{label}: {filters:?}");
    report
}

/// Reads with `filters` and checks the rows against the reference; returns the plan's report.
pub async fn check_reference(
    reader: &TableReader,
    all: &RecordBatch,
    filters: &[PartitionFilter],
    label: &str,
) -> PruningReport {
    let options = ReadOptions::new().partition_filters(filters.to_vec());
    // The plan that reports is the one executed (a read would plan again, reading the
    // statistics twice).
    let plan = reader.plan(&options).await.unwrap();
    let report = plan.pruning().clone();
    let got: Vec<RecordBatch> = reader.execute(plan).try_collect().await.unwrap();
    let mut want = all.clone();
    for f in filters {
        want = reference(&want, f);
    }
    assert_eq!(
        row_lines(&got),
        row_lines(&[want]),
        "{label}: {filters:?} ({report})"
    );
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_every_predicate_on_fixtures_with_column_stats_returns_the_filtered_rows() {
    let Some(root) = fixtures_root_or_skip("data skipping on fixtures") else {
        return;
    };
    let mut tables = 0;
    let mut skipped_by_stats = 0;
    for zip in fixture_zips(&root) {
        let name = fixture_name(&root, &zip);
        let (_dir, base) = unzip_table(&zip);
        if !base.join(".hoodie/metadata/column_stats").is_dir() {
            continue;
        }
        tables += 1;
        let reader = TableReader::open(storage_at(&base)).await.unwrap();
        let all = unpruned(&reader).await;
        let preds = predicates(reader.schema(), &all);
        assert!(preds.len() > 20, "{name}: {} predicates", preds.len());
        for f in &preds {
            let r = check_reference(&reader, &all, std::slice::from_ref(f), &name).await;
            skipped_by_stats += r.partitions_skipped_by_stats + r.files_skipped_by_column_stats;
        }
        // Two filters are ANDed.
        for pair in preds.chunks(9) {
            if let [a, .., b] = pair {
                check_reference(&reader, &all, &[a.clone(), b.clone()], &name).await;
            }
        }
    }
    eprintln!("{tables} fixtures with column stats; {skipped_by_stats} partitions/slices skipped by stats");
    assert!(tables >= 8, "only {tables} fixtures with column stats");
    assert!(skipped_by_stats > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_stats_and_indexes_skip_on_txns_tables() {
    let Some(root) = fixtures_root_or_skip("data skipping on fixtures") else {
        return;
    };
    for kind in ["cow", "mor/avro"] {
        let zip = root.join(format!("sample_table/{kind}/v9_txns_simple_meta.zip"));
        let (_dir, base) = unzip_table(&zip);
        let reader = TableReader::open(storage_at(&base)).await.unwrap();
        let all = unpruned(&reader).await;
        let label = format!("{kind}/v9_txns_simple_meta");

        // amount >= 1000: partition stats rule one region out, column stats a file.
        let r = check(
            &reader,
            &all,
            &[PartitionFilter::new("amount", FilterOp::Ge, "1000")],
            &label,
        )
        .await;
        assert_eq!(r.partitions_considered, 3, "{label}: {r}");
        assert!(r.partitions_skipped_by_stats >= 1, "{label}: {r}");
        assert!(r.files_skipped_by_column_stats >= 1, "{label}: {r}");
        assert_eq!(r.partitions_skipped_by_values, 0, "{label}: {r}");

        // These tables had a partition INSERT OVERWRITE (keys may repeat across partitions):
        // the record and secondary indexes are not trusted, and say so.
        for f in [
            PartitionFilter::eq("txn_id", "TXN-001"),
            PartitionFilter::eq("merchant_name", "Amazon"),
        ] {
            let r = check(&reader, &all, std::slice::from_ref(&f), &label).await;
            assert_eq!(
                r.files_skipped_by_record_index + r.files_skipped_by_secondary_index,
                0,
                "{label}: {r}"
            );
            assert!(
                r.notes.iter().any(|n| n.contains("keys may be duplicated")),
                "{label}: {r}"
            );
        }

        // Partition values, as before.
        let r = check(
            &reader,
            &all,
            &[PartitionFilter::eq("region", "us")],
            &label,
        )
        .await;
        assert_eq!(r.partitions_skipped_by_values, 2, "{label}: {r}");

        // Without skipping nothing but partition values prunes, and the rows are the same.
        let plan = reader
            .plan(
                &ReadOptions::new()
                    .filter(PartitionFilter::new("amount", FilterOp::Ge, "1000"))
                    .data_skipping(false),
            )
            .await
            .unwrap();
        let r = plan.pruning();
        assert_eq!(
            (
                r.partitions_skipped_by_stats,
                r.files_skipped_by_column_stats
            ),
            (0, 0),
            "{label}: {r}"
        );
        assert_eq!(r.files_read(), r.files_considered);

        // Time travel uses no statistics (they describe the latest state).
        let first = reader.view().history().completed_writes()[0]
            .requested_time
            .clone();
        let plan = reader
            .plan(
                &ReadOptions::new()
                    .as_of(first)
                    .filter(PartitionFilter::eq("txn_id", "TXN-001")),
            )
            .await
            .unwrap();
        assert_eq!(plan.pruning().files_read(), plan.pruning().files_considered);
    }
}

#[tokio::test]
async fn test_bad_filters_name_column_and_value() {
    let Some(root) = fixtures_root_or_skip("data skipping on fixtures") else {
        return;
    };
    let zip = root.join("sample_table/cow/v9_txns_simple_meta.zip");
    let (_dir, base) = unzip_table(&zip);
    let reader = TableReader::open(storage_at(&base)).await.unwrap();
    for (f, words) in [
        (
            PartitionFilter::eq("nope", "1"),
            vec!["nope", "unknown column"],
        ),
        (
            PartitionFilter::eq("amount", "1.005"),
            vec!["amount", "1.005"],
        ),
        (
            PartitionFilter::eq("txn_date", "yesterday"),
            vec!["txn_date", "yesterday"],
        ),
        (
            PartitionFilter::eq("is_international", "maybe"),
            vec!["is_international", "maybe"],
        ),
        (
            PartitionFilter::eq("txn_ts", "12.5"),
            vec!["txn_ts", "12.5"],
        ),
    ] {
        let err = reader
            .plan(&ReadOptions::new().filter(f))
            .await
            .unwrap_err()
            .to_string();
        for w in words {
            assert!(err.contains(w), "{err}");
        }
    }
}

#[tokio::test]
async fn test_record_and_secondary_index_skip_file_groups_when_keys_are_unique() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, Layout::Plain).await;
        // One insert, then upserts of new and existing keys: every key lives in one group.
        t.write(WriteOperation::Insert, &rows(0..20, 1, "a")).await;
        t.table.create_record_index().await.unwrap();
        t.table
            .create_secondary_index("by_name", "name")
            .await
            .unwrap();
        t.write(WriteOperation::Upsert, &rows(20..40, 2, "b")).await;
        t.write(WriteOperation::Upsert, &rows(5..25, 3, "c")).await;
        let reader = t.reader().await;
        let all = unpruned(&reader).await;
        let label = format!("{table_type:?}");
        let considered = reader
            .plan(&ReadOptions::new())
            .await
            .unwrap()
            .file_slices()
            .count();
        assert!(considered >= 2, "{label}: {considered} slices");

        for f in [
            PartitionFilter::eq("id", "k0030"),
            PartitionFilter::eq(meta::RECORD_KEY, "k0007"),
            PartitionFilter::is_in("id", ["k0001", "k0002"]),
        ] {
            let r = check(&reader, &all, std::slice::from_ref(&f), &label).await;
            assert!(r.files_read() <= 2, "{label} {f:?}: {r}");
            assert_eq!(
                r.files_skipped_by_record_index,
                r.files_considered - r.files_read(),
                "{label} {f:?}: {r}"
            );
        }
        let r = check(&reader, &all, &[PartitionFilter::eq("id", "k9999")], &label).await;
        assert_eq!(
            r.files_read(),
            0,
            "{label}: an absent key reads nothing: {r}"
        );

        // name = "c12": the secondary index gives k0012, the record index its group.
        let r = check(&reader, &all, &[PartitionFilter::eq("name", "c12")], &label).await;
        assert_eq!(r.files_read(), 1, "{label}: {r}");
        assert_eq!(
            r.files_skipped_by_secondary_index,
            considered - 1,
            "{label}: {r}"
        );
        // "a12" was overwritten: no row has it, nothing is read.
        let r = check(&reader, &all, &[PartitionFilter::eq("name", "a12")], &label).await;
        assert_eq!(r.files_read(), 0, "{label}: {r}");

        // A second insert may duplicate keys: the indexes are no longer trusted.
        t.write(WriteOperation::Insert, &rows(40..42, 4, "d")).await;
        let reader = t.reader().await;
        let all = unpruned(&reader).await;
        let r = check(&reader, &all, &[PartitionFilter::eq("id", "k0030")], &label).await;
        assert_eq!(r.files_skipped_by_record_index, 0, "{label}: {r}");
        assert!(
            r.notes.iter().any(|n| n.contains("keys may be duplicated")),
            "{label}: {r}"
        );
    }
}
