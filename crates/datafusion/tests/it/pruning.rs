//! Pruning shows in `EXPLAIN ANALYZE`: partitions skipped by their path values, file slices by
//! column stats, parquet row groups by DataFusion; and pruning never changes the rows (the same
//! queries with `data_skipping` off, and against arbor's reader).

use arbor_datafusion::ArborTableOptions;
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, Row};
use arbor_timeline::config::TableType;

use crate::support::{explain_analyze, metric, register, rows, session, sql};

/// 6 regions x 4 bulk inserts: every write adds a file group per region, its `ts` all equal
/// to the write's number (so column stats separate the files).
fn write_rows(write: i64) -> Vec<Row> {
    (0..60)
        .map(|i| {
            (
                format!("w{write}-k{i:03}"),
                format!("r{}", i % 6),
                write,
                format!("n{i}"),
            )
        })
        .collect()
}

async fn check_pruning(table_type: TableType) {
    let t = create(table_type, true).await;
    for w in 1..=4 {
        t.write(WriteOperation::BulkInsert, &write_rows(w)).await;
    }
    t.table.create_stats_indexes(true, true).await.unwrap();
    let location = t.base.to_string_lossy().to_string();
    let ctx = session();
    register(&ctx, "t", &location, ArborTableOptions::new()).await;
    register(
        &ctx,
        "plain",
        &location,
        ArborTableOptions::new().data_skipping(false),
    )
    .await;

    // Partition values: 5 of 6 partitions pruned, exactly.
    let q = "SELECT id, name FROM t WHERE region = 'r2'";
    let plan = explain_analyze(&ctx, q).await;
    assert_eq!(metric(&plan, "partitions_considered"), 6, "{plan}");
    assert_eq!(metric(&plan, "partitions_pruned_by_values"), 5, "{plan}");
    assert_eq!(metric(&plan, "files_considered"), 4, "{plan}");
    let above_scan = &plan[..plan.find("ArborScanExec").unwrap()];
    assert!(
        !above_scan.contains("FilterExec"),
        "a partition filter is exact:\n{plan}"
    );
    assert_eq!(rows(&sql(&ctx, q).await).len(), 40);

    // Column stats: of the 24 slices only write 3's 6 can hold ts = 3.
    let q = "SELECT id FROM t WHERE ts = 3";
    let plan = explain_analyze(&ctx, q).await;
    assert_eq!(metric(&plan, "files_considered"), 24, "{plan}");
    assert_eq!(metric(&plan, "files_pruned_by_column_stats"), 18, "{plan}");
    let pruned = rows(&sql(&ctx, q).await);
    assert_eq!(pruned.len(), 60);
    let plain_plan = explain_analyze(&ctx, "SELECT id FROM plain WHERE ts = 3").await;
    assert_eq!(
        metric(&plain_plan, "files_pruned_by_column_stats"),
        0,
        "{plain_plan}"
    );
    assert_eq!(
        rows(&sql(&ctx, "SELECT id FROM plain WHERE ts = 3").await),
        pruned
    );

    // Both at once, and a filter arbor leaves to DataFusion.
    let q = "SELECT id FROM t WHERE region IN ('r1', 'r4') AND ts >= 2 AND name LIKE 'n1%'";
    let plan = explain_analyze(&ctx, q).await;
    assert_eq!(metric(&plan, "partitions_pruned_by_values"), 4, "{plan}");
    assert_eq!(metric(&plan, "files_pruned_by_column_stats"), 2, "{plan}");
    let plain = q.replace("FROM t", "FROM plain");
    assert_eq!(rows(&sql(&ctx, q).await), rows(&sql(&ctx, &plain).await));

    // The EXPLAIN text says what was pruned before anything runs.
    let explain = sql(&ctx, "EXPLAIN SELECT id FROM t WHERE region = 'r2'").await;
    let text = arrow::util::pretty::pretty_format_batches(&explain)
        .unwrap()
        .to_string();
    assert!(
        text.contains("ArborScanExec") && text.contains("partitions=1/6"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_explain_analyze_shows_partition_and_column_stats_pruning_cow() {
    check_pruning(TableType::CopyOnWrite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_explain_analyze_shows_partition_and_column_stats_pruning_mor() {
    check_pruning(TableType::MergeOnRead).await;
}
