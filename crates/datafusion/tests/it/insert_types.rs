//! `INSERT INTO` converts values exactly: dates, timestamps and decimals that fit are stored as
//! written; what DataFusion's casts would round or truncate fails naming the column.

use std::sync::Arc;

use arbor_datafusion::ArborTableOptions;
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, Table};
use arbor_timeline::config::TableType;
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

use crate::support::{register, rows, session, sql, sql_err};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_insert_dates_timestamps_decimals_exactly_or_fails_naming_the_column() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    std::fs::create_dir_all(&base).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    Table::create(
        storage.clone(),
        CreateOptions {
            name: "t".into(),
            table_type: TableType::MergeOnRead,
            record_key_fields: vec!["id".into()],
            partition_fields: vec!["region".into()],
            hive_style_partitioning: true,
            ordering_field: None,
            merge_mode: None,
            schema: Arc::new(Schema::new(vec![
                Field::new("id", DataType::Utf8, false),
                Field::new("region", DataType::Utf8, true),
                Field::new("d", DataType::Date32, true),
                Field::new(
                    "ts",
                    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                    true,
                ),
                Field::new("amount", DataType::Decimal128(12, 2), true),
            ])),
            metadata_table: true,
            table_version: Default::default(),
            base_format: Default::default(),
        },
    )
    .await
    .unwrap();
    let ctx = session();
    register(&ctx, "t", &base.to_string_lossy(), ArborTableOptions::new()).await;
    sql(
        &ctx,
        "INSERT INTO t (id, region, d, ts, amount) VALUES \
         ('a', 'eu', DATE '2024-01-15', TIMESTAMP '2024-01-01T10:00:00.123456Z', 12.34), \
         ('b', ' eu', '2024-02-29', '2024-03-01 00:00:00', -0.5), \
         ('c', NULL, NULL, NULL, NULL)",
    )
    .await;
    let got = rows(&sql(&ctx, "SELECT id, region, d, ts, amount FROM t").await);
    assert_eq!(
        got,
        [
            "a|eu|2024-01-15|2024-01-01T10:00:00.123456Z|12.34",
            "b| eu|2024-02-29|2024-03-01T00:00:00Z|-0.50",
            "c|NULL|NULL|NULL|NULL",
        ]
    );
    // Filters on a string with a blank and on the default (null) partition are exact.
    assert_eq!(
        rows(&sql(&ctx, "SELECT id FROM t WHERE region = ' eu'").await),
        ["b"]
    );
    assert_eq!(
        rows(&sql(&ctx, "SELECT id FROM t WHERE region = 'eu'").await),
        ["a"]
    );
    assert_eq!(
        rows(&sql(&ctx, "SELECT id FROM t WHERE region IS NULL").await),
        ["c"]
    );
    let writes = || async {
        TableReader::open(storage.clone())
            .await
            .unwrap()
            .view()
            .history()
            .completed_writes()
            .len()
    };
    let before = writes().await;
    for (values, column) in [
        ("('x', 'eu', NULL, NULL, 12.345)", "amount"),
        ("('x', 'eu', '2024-01-01T10:00:00', NULL, NULL)", "d"),
        (
            "('x', 'eu', NULL, TIMESTAMP '2024-01-01T00:00:00.123456789Z', NULL)",
            "ts",
        ),
        ("('x', 'eu', NULL, NULL, 'abc')", "amount"),
    ] {
        let e = sql_err(
            &ctx,
            &format!("INSERT INTO t (id, region, d, ts, amount) VALUES {values}"),
        )
        .await;
        assert!(e.contains(column), "{values}: {e}");
    }
    assert_eq!(writes().await, before, "refused inserts commit nothing");
}
