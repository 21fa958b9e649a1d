//! `INSERT INTO` writes one commit per statement on main or a branch through the write path;
//! hudi-rs reads the result identically (on a branch, once published); read-only refs and bad
//! rows are refused with the table unchanged.

use std::sync::Arc;

use arbor_branching::{create_branch, create_tag, publish, BranchSource};
use arbor_datafusion::{ArborTableOptions, ArborTableProvider};
use arbor_table::read::TableReader;
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, rows as test_rows, Row};
use arbor_timeline::config::TableType;

use crate::support::{register, rows, session, sql, sql_err};

const COLUMNS: &str = "(id, region, ts, name)";

async fn table_rows(t: &arbor_testkit_tables::TestTable, branch: Option<&str>) -> Vec<Row> {
    t.read_branch(branch, None).await
}

async fn completed_writes(t: &arbor_testkit_tables::TestTable) -> usize {
    let reader = TableReader::open(t.storage.clone()).await.unwrap();
    reader.view().history().completed_writes().len()
}

async fn check_insert_on_main(table_type: TableType) {
    let t = create(table_type, true).await;
    t.write(WriteOperation::Insert, &test_rows(0..10, 1, "a"))
        .await;
    let location = t.base.to_string_lossy().to_string();
    let ctx = session();
    register(&ctx, "t", &location, ArborTableOptions::new()).await;
    let before = completed_writes(&t).await;
    // A new key and an update of an existing one, in one statement: one commit, upserted.
    let out = sql(
        &ctx,
        &format!(
            "INSERT INTO t {COLUMNS} VALUES ('k0100', 'us', 5, 'new'), ('k0003', 'eu', 5, 'upd')"
        ),
    )
    .await;
    assert_eq!(rows(&out), vec!["2"]);
    assert_eq!(completed_writes(&t).await, before + 1);
    let now = table_rows(&t, None).await;
    assert_eq!(now.len(), 11, "{table_type:?}");
    assert!(now.contains(&("k0003".into(), "eu".into(), 5, "upd".into())));
    assert!(now.contains(&("k0100".into(), "us".into(), 5, "new".into())));
    // The same provider sees its own write; INSERT ... SELECT from another table works.
    assert_eq!(rows(&sql(&ctx, "SELECT count(*) FROM t").await), vec!["11"]);
    sql(
        &ctx,
        "CREATE TABLE src AS VALUES ('k0200', 'eu', CAST(6 AS BIGINT), 'sel')",
    )
    .await;
    sql(
        &ctx,
        &format!("INSERT INTO t {COLUMNS} SELECT column1, column2, column3, column4 FROM src"),
    )
    .await;
    assert_eq!(table_rows(&t, None).await.len(), 12);
    t.assert_valid("after SQL inserts").await;
    t.assert_peer_agrees(
        "INSERT INTO peer check",
        &format!("{table_type:?} INSERT INTO main"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_insert_into_main_cow_read_identically_by_hudi_rs() {
    check_insert_on_main(TableType::CopyOnWrite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_insert_into_main_mor_read_identically_by_hudi_rs() {
    check_insert_on_main(TableType::MergeOnRead).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_insert_into_branch_leaves_main_and_publishes_to_hudi_rs() {
    let t = create(TableType::MergeOnRead, true).await;
    t.write(WriteOperation::Insert, &test_rows(0..10, 1, "a"))
        .await;
    create_branch(&t.table, "audit", BranchSource::MainHead)
        .await
        .unwrap();
    let location = t.base.to_string_lossy().to_string();
    let ctx = session();
    sql(
        &ctx,
        &format!("CREATE EXTERNAL TABLE audit STORED AS HUDI LOCATION '{location}' OPTIONS ('branch' 'audit')"),
    )
    .await;
    let main_before = table_rows(&t, None).await;
    sql(
        &ctx,
        &format!("INSERT INTO audit {COLUMNS} VALUES ('k0500', 'us', 9, 'branch')"),
    )
    .await;
    assert_eq!(table_rows(&t, None).await, main_before, "main unchanged");
    let on_branch = table_rows(&t, Some("audit")).await;
    assert_eq!(on_branch.len(), 11);
    assert_eq!(
        rows(&sql(&ctx, "SELECT name FROM audit WHERE id = 'k0500'").await),
        vec!["branch"]
    );
    t.assert_branch_valid("audit", "after SQL insert on the branch")
        .await;
    publish(&t.branch("audit").await).await.unwrap();
    assert_eq!(table_rows(&t, None).await, on_branch);
    t.assert_peer_agrees("INSERT INTO peer check", "branch INSERT INTO, published")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_insert_refused_on_read_only_refs_and_bad_rows_leaves_table_unchanged() {
    let t = create(TableType::CopyOnWrite, true).await;
    let w1 = t
        .write(WriteOperation::Insert, &test_rows(0..4, 1, "a"))
        .await;
    create_tag(&t.table, "v1", None, None).await.unwrap();
    let location = t.base.to_string_lossy().to_string();
    let ctx = session();
    register(
        &ctx,
        "tagged",
        &location,
        ArborTableOptions::new().tag("v1"),
    )
    .await;
    register(
        &ctx,
        "asof",
        &location,
        ArborTableOptions::new().as_of(w1.to_string()),
    )
    .await;
    register(&ctx, "t", &location, ArborTableOptions::new()).await;
    let before = table_rows(&t, None).await;
    let writes = completed_writes(&t).await;
    let values = "VALUES ('k0100', 'us', 5, 'x')";
    let e = sql_err(&ctx, &format!("INSERT INTO tagged {COLUMNS} {values}")).await;
    assert!(e.contains("cannot write") && e.contains("tag"), "{e}");
    let e = sql_err(&ctx, &format!("INSERT INTO asof {COLUMNS} {values}")).await;
    assert!(e.contains("cannot write") && e.contains("as of"), "{e}");
    // A meta column with a value.
    let e = sql_err(
        &ctx,
        "INSERT INTO t (_hoodie_commit_time, id, region, ts, name) VALUES ('1', 'k0101', 'us', 5, 'x')",
    )
    .await;
    assert!(
        e.contains("_hoodie_commit_time") && e.contains("meta column"),
        "{e}"
    );
    // An empty record key in the second row: arbor's validation names the key column.
    let e = sql_err(
        &ctx,
        &format!("INSERT INTO t {COLUMNS} VALUES ('k0102', 'us', 5, 'x'), ('', 'us', 6, 'y')"),
    )
    .await;
    assert!(e.contains("id") && e.contains("key"), "{e}");
    // Values DataFusion's casts would round or truncate are refused, naming the column.
    let e = sql_err(
        &ctx,
        &format!("INSERT INTO t {COLUMNS} VALUES ('k0104', 'us', 12.7, 'x')"),
    )
    .await;
    assert!(e.contains("ts") && e.contains("12.7"), "{e}");
    sql(
        &ctx,
        "CREATE TABLE floats AS VALUES (CAST(1.0 AS DOUBLE)), (CAST(2.5 AS DOUBLE))",
    )
    .await;
    let e = sql_err(
        &ctx,
        &format!("INSERT INTO t {COLUMNS} SELECT 'k0105', 'us', column1, 'x' FROM floats"),
    )
    .await;
    assert!(e.contains("ts") && e.contains("2.5"), "{e}");
    // A session without arbor's exact casts cannot insert at all.
    let plain = datafusion::prelude::SessionContext::new();
    let provider = ArborTableProvider::try_new(&location, ArborTableOptions::new())
        .await
        .unwrap();
    plain.register_table("t", Arc::new(provider)).unwrap();
    let e = sql_err(&plain, &format!("INSERT INTO t {COLUMNS} {values}")).await;
    assert!(e.contains("register_arbor"), "{e}");
    assert_eq!(table_rows(&t, None).await, before);
    assert_eq!(completed_writes(&t).await, writes);
    // An exact conversion is fine: an integer-valued float.
    sql(&ctx, &format!("INSERT INTO t {COLUMNS} SELECT 'k0106', 'us', column1, 'x' FROM floats WHERE column1 = 1.0")).await;
    assert_eq!(table_rows(&t, None).await.len(), before.len() + 1);
    let writes = completed_writes(&t).await;
    // An INSERT of no rows writes nothing and says 0.
    sql(
        &ctx,
        "CREATE TABLE empty_src (id VARCHAR, region VARCHAR, ts BIGINT, name VARCHAR)",
    )
    .await;
    let out = sql(
        &ctx,
        &format!("INSERT INTO t {COLUMNS} SELECT * FROM empty_src"),
    )
    .await;
    assert_eq!(rows(&out), vec!["0"]);
    assert_eq!(completed_writes(&t).await, writes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_bulk_insert_streams_the_plan_output_as_one_commit() {
    // With `write_operation` bulk_insert the sink streams the plan's batches into
    // `Table::write_stream`: many batches land as one commit; a bad row in a later batch fails
    // the statement and leaves the table unchanged; no rows write nothing.
    let t = create(TableType::CopyOnWrite, true).await;
    t.write(WriteOperation::Insert, &test_rows(0..10, 1, "a"))
        .await;
    let location = t.base.to_string_lossy().to_string();
    let ctx = session();
    sql(&ctx, "SET datafusion.execution.batch_size = 7").await;
    register(
        &ctx,
        "t",
        &location,
        ArborTableOptions::new().write_operation(WriteOperation::BulkInsert),
    )
    .await;
    let before = completed_writes(&t).await;
    sql(
        &ctx,
        "CREATE TABLE many AS SELECT 'k' || lpad(CAST(value AS VARCHAR), 4, '0') AS id, \
         'us' AS region, CAST(value AS BIGINT) AS ts, 'bulk' AS name \
         FROM generate_series(1000, 1099)",
    )
    .await;
    let out = sql(&ctx, &format!("INSERT INTO t {COLUMNS} SELECT * FROM many")).await;
    assert_eq!(rows(&out), vec!["100"]);
    assert_eq!(completed_writes(&t).await, before + 1);
    assert_eq!(table_rows(&t, None).await.len(), 110);

    // An empty key (refused by validation) in the last rows: nothing of the statement lands.
    let e = sql_err(
        &ctx,
        &format!(
            "INSERT INTO t {COLUMNS} SELECT id, region, ts, name FROM many \
             UNION ALL SELECT '', 'us', 1, 'bad'"
        ),
    )
    .await;
    assert!(e.contains(&location), "{e}");
    // The streamed write names the batch at fault.
    assert!(e.contains("input batch"), "{e}");
    assert_eq!(completed_writes(&t).await, before + 1);
    assert_eq!(table_rows(&t, None).await.len(), 110);
    let out = sql(
        &ctx,
        &format!("INSERT INTO t {COLUMNS} SELECT * FROM many WHERE ts < 0"),
    )
    .await;
    assert_eq!(rows(&out), vec!["0"]);
    t.assert_valid("after streamed SQL bulk inserts").await;
    t.assert_peer_agrees("streamed SQL bulk insert", "streamed SQL bulk insert")
        .await;
}
