//! SQL on main, a branch, a tag, an as-of time and an incremental range equals arbor's reader
//! of the same state (what `arbor read --branch/--tag/--as-of/--incremental` prints), through
//! the provider's options and through `CREATE EXTERNAL TABLE ... OPTIONS (...)`.

use arbor_branching::{create_branch, create_tag, BranchSource};
use arbor_datafusion::ArborTableOptions;
use arbor_table::read::TableReader;
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, rows as test_rows};
use arbor_timeline::config::TableType;

use crate::support::{register, rows, session, sql, sql_err};

async fn check_refs(table_type: TableType) {
    let t = create(table_type, true).await;
    let w1 = t
        .write(WriteOperation::Insert, &test_rows(0..20, 1, "a"))
        .await;
    let w2 = t
        .write(WriteOperation::Upsert, &test_rows(10..30, 2, "b"))
        .await;
    create_tag(&t.table, "v1", None, None).await.unwrap();
    let w3 = t
        .write(WriteOperation::Upsert, &test_rows(0..5, 3, "c"))
        .await;
    create_branch(&t.table, "audit", BranchSource::MainHead)
        .await
        .unwrap();
    let audit = t.branch("audit").await;
    t.write_on(&audit, WriteOperation::Upsert, &test_rows(40..45, 4, "d"))
        .await;
    let location = t.base.to_string_lossy().to_string();

    let main = TableReader::open(t.storage.clone()).await.unwrap();
    let branch = arbor_branching::open_reader(t.storage.clone(), Some("audit"))
        .await
        .unwrap();
    let (tag_reader, tag_instant) = arbor_branching::tag_reader(t.storage.clone(), None, "v1")
        .await
        .unwrap();
    assert_eq!(tag_instant, w2);
    let cases = [
        (
            "main",
            ArborTableOptions::new(),
            main.snapshot(None).await.unwrap(),
        ),
        (
            "branch",
            ArborTableOptions::new().branch("audit"),
            branch.snapshot(None).await.unwrap(),
        ),
        (
            "tag",
            ArborTableOptions::new().tag("v1"),
            tag_reader.snapshot(Some(&tag_instant)).await.unwrap(),
        ),
        (
            "as_of",
            ArborTableOptions::new().as_of(w1.to_string()),
            main.snapshot(Some(&w1)).await.unwrap(),
        ),
        (
            "incremental",
            ArborTableOptions::new().incremental(Some(w1.to_string()), None),
            main.incremental(Some(&w1), None).await.unwrap(),
        ),
        (
            "read_optimized",
            ArborTableOptions::new().read_optimized(true),
            main.read_optimized(None).await.unwrap(),
        ),
    ];
    let ctx = session();
    for (name, options, want) in cases {
        register(&ctx, name, &location, options).await;
        let got = sql(&ctx, &format!("SELECT * FROM {name}")).await;
        assert_eq!(rows(&got), rows(&want), "{table_type:?} {name}");
        assert!(!rows(&want).is_empty(), "{table_type:?} {name} reads rows");
    }
    // The branch sees its own write, main does not.
    let n = |b: &[arrow::array::RecordBatch]| rows(b).len();
    assert_eq!(
        n(&sql(&ctx, "SELECT * FROM branch WHERE id >= 'k0040'").await),
        5
    );
    assert_eq!(
        n(&sql(&ctx, "SELECT * FROM main WHERE id >= 'k0040'").await),
        0
    );
    // A projection of the incremental range keeps the range (start bounds completion times:
    // w1 completed after it was requested, so its records are in).
    let commits = rows(&sql(&ctx, "SELECT DISTINCT _hoodie_commit_time FROM incremental").await);
    let direct = main
        .read(
            arbor_table::read::ReadOptions::new()
                .incremental(Some(w1.clone()), None)
                .columns(["_hoodie_commit_time"]),
        )
        .await
        .unwrap();
    let mut want: Vec<String> = rows(&direct);
    want.dedup();
    assert_eq!(commits, want, "{table_type:?}");
    assert!(commits.contains(&w3.to_string()) && commits.contains(&w2.to_string()));
    // The same refs through CREATE EXTERNAL TABLE.
    for (name, opts) in [
        ("c_branch", "'branch' 'audit'"),
        ("c_tag", "'tag' 'v1'"),
        ("c_asof", &format!("'as_of' '{w1}'") as &str),
        ("c_inc", &format!("'incremental_start' '{w1}'")),
    ] {
        sql(
            &ctx,
            &format!("CREATE EXTERNAL TABLE {name} STORED AS HUDI LOCATION '{location}' OPTIONS ({opts})"),
        )
        .await;
    }
    for (created, registered) in [
        ("c_branch", "branch"),
        ("c_tag", "tag"),
        ("c_asof", "as_of"),
        ("c_inc", "incremental"),
    ] {
        assert_eq!(
            rows(&sql(&ctx, &format!("SELECT * FROM {created}")).await),
            rows(&sql(&ctx, &format!("SELECT * FROM {registered}")).await),
            "{table_type:?} {created}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_sql_on_branch_tag_as_of_incremental_equals_arbor_read_cow() {
    check_refs(TableType::CopyOnWrite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_sql_on_branch_tag_as_of_incremental_equals_arbor_read_mor() {
    check_refs(TableType::MergeOnRead).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_bad_options_and_refs_fail_naming_what_is_wrong() {
    let t = create(TableType::CopyOnWrite, true).await;
    let w1 = t
        .write(WriteOperation::Insert, &test_rows(0..4, 1, "a"))
        .await;
    let location = t.base.to_string_lossy().to_string();
    let ctx = session();
    let create = |opts: &str| {
        format!("CREATE EXTERNAL TABLE x STORED AS HUDI LOCATION '{location}' OPTIONS ({opts})")
    };
    let e = sql_err(&ctx, &create("'brnach' 'audit'")).await;
    assert!(e.contains("brnach") && e.contains("accepted"), "{e}");
    let e = sql_err(&ctx, &create("'branch' 'nope'")).await;
    assert!(e.contains("nope"), "{e}");
    let e = sql_err(&ctx, &create("'tag' 'nope'")).await;
    assert!(e.contains("nope"), "{e}");
    let e = sql_err(&ctx, &create("'as_of' 'yesterday'")).await;
    assert!(e.contains("as_of") && e.contains("ISO"), "{e}");
    let e = sql_err(&ctx, &create("'as_of' '20000101000000000'")).await;
    assert!(e.contains("before the table's first commit"), "{e}");
    let e = sql_err(&ctx, &create(&format!("'tag' 'v1', 'as_of' '{w1}'"))).await;
    assert!(e.contains("cannot be combined"), "{e}");
    let e = sql_err(
        &ctx,
        "CREATE EXTERNAL TABLE y STORED AS HUDI LOCATION '/no/such/table'",
    )
    .await;
    assert!(e.contains("/no/such/table"), "{e}");
    let e = sql_err(
        &ctx,
        &format!("CREATE EXTERNAL TABLE z (a INT) STORED AS HUDI LOCATION '{location}'"),
    )
    .await;
    assert!(e.contains("come from the table"), "{e}");
}
