//! Merges that carry whole partitions the source deleted or overwrote: the target receives
//! Hudi's own `delete_partition` / `insert_overwrite` replacecommit when that is all it
//! receives (readers, hudi-rs and the metadata table agree; a second merge finds nothing new),
//! and changes by key in the one upsert commit when other changes come with them.

use arbor_branching::{create_branch, merge, BranchSource, MergeOptions, MergeStrategy, RefSpec};
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, rows, Row, TestTable};
use arbor_timeline::avro::WriteOperationType;
use arbor_timeline::config::TableType;
use arbor_timeline::Action;

/// Main `k0..k6` (even keys in `region=us`, odd in `region=eu`), branch `dev` cut from it,
/// `dev` deletes `region=eu`, main updates k2.
async fn dropped_on_dev(table_type: TableType) -> TestTable {
    let (t, dev) = with_dev(table_type).await;
    dev.delete_partitions(&["region=eu".to_string()])
        .await
        .unwrap();
    t.write(WriteOperation::Upsert, &rows(2..3, 9, "main"))
        .await;
    t
}

/// Main `k0..k6` (record index on) and branch `dev` cut from it, with `dev`'s handle.
async fn with_dev(table_type: TableType) -> (TestTable, arbor_table::Table) {
    let t = create(table_type, true).await;
    t.write(WriteOperation::Upsert, &rows(0..6, 5, "a")).await;
    create_branch(&t.table, "dev", BranchSource::MainHead)
        .await
        .unwrap();
    let dev = t.branch("dev").await;
    (t, dev)
}

fn us_rows_after_main() -> Vec<Row> {
    let mut want: Vec<Row> = rows(0..6, 5, "a")
        .into_iter()
        .filter(|r| r.1 == "us" && r.0 != "k0002")
        .chain(rows(2..3, 9, "main"))
        .collect();
    want.sort();
    want
}

fn fail() -> MergeOptions {
    MergeOptions::new(MergeStrategy::Fail)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_merge_of_a_partition_deleted_on_the_branch_is_a_delete_partition() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = dropped_on_dev(table_type).await;
        let dev = RefSpec::Branch("dev".into());
        let dry = merge(&t.table, &dev, &fail().with_dry_run(true))
            .await
            .unwrap();
        assert_eq!(
            (dry.deletes, dry.commit.is_none()),
            (3, true),
            "{table_type:?}"
        );
        let out = merge(&t.table, &dev, &fail()).await.unwrap();
        let commit = out.commit.expect("a commit");
        assert_eq!(
            (commit.action, commit.operation, out.deletes),
            (
                Action::ReplaceCommit,
                WriteOperationType::DeletePartition,
                3
            ),
            "{table_type:?}"
        );
        assert_eq!(t.read(None).await, us_rows_after_main(), "{table_type:?}");
        t.assert_valid("after the merge").await;
        t.assert_peer_agrees("merge peer check", "after a merged delete_partition")
            .await;
        // The commit records the merge: the next merge starts after it and finds nothing.
        let again = merge(&t.table, &dev, &fail()).await.unwrap();
        assert!(again.commit.is_none(), "{table_type:?}: {again:?}");
        assert_eq!((again.inserts, again.updates, again.deletes), (0, 0, 0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_merge_of_a_deleted_partition_with_other_changes_is_one_upsert() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = dropped_on_dev(table_type).await;
        let dev_table = t.branch("dev").await;
        t.write_on(&dev_table, WriteOperation::Upsert, &rows(4..5, 8, "dev"))
            .await;
        let out = merge(&t.table, &RefSpec::Branch("dev".into()), &fail())
            .await
            .unwrap();
        let commit = out.commit.expect("a commit");
        let upsert_action = match table_type {
            TableType::CopyOnWrite => Action::Commit,
            TableType::MergeOnRead => Action::DeltaCommit,
        };
        assert_eq!(
            (commit.action, commit.operation),
            (upsert_action, WriteOperationType::Upsert),
            "{table_type:?}"
        );
        assert_eq!((out.updates, out.deletes), (1, 3), "{table_type:?}");
        let mut want: Vec<Row> = us_rows_after_main()
            .into_iter()
            .filter(|r| r.0 != "k0004")
            .chain(rows(4..5, 8, "dev"))
            .collect();
        want.sort();
        assert_eq!(t.read(None).await, want, "{table_type:?}");
        t.assert_valid("after the merge").await;
        t.assert_peer_agrees("merge peer check", "after a merge with a dropped partition")
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_merge_of_a_partition_overwritten_on_the_branch_is_an_insert_overwrite() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let (t, dev) = with_dev(table_type).await;
        // region=eu becomes: k1 changed, k3 as it was, k5 gone, k7 new.
        let mut eu: Vec<Row> = rows(1..2, 6, "dev");
        eu.extend(rows(3..4, 5, "a"));
        eu.extend(rows(7..8, 6, "dev"));
        t.write_on(&dev, WriteOperation::InsertOverwrite, &eu).await;
        t.write(WriteOperation::Upsert, &rows(2..3, 9, "main"))
            .await;
        let out = merge(&t.table, &RefSpec::Branch("dev".into()), &fail())
            .await
            .unwrap();
        let commit = out.commit.expect("a commit");
        assert_eq!(
            (commit.action, commit.operation),
            (Action::ReplaceCommit, WriteOperationType::InsertOverwrite),
            "{table_type:?}"
        );
        assert_eq!(
            (out.inserts, out.updates, out.deletes),
            (1, 1, 1),
            "{table_type:?}"
        );
        let mut want = us_rows_after_main();
        want.extend(eu.iter().cloned());
        want.sort();
        assert_eq!(t.read(None).await, want, "{table_type:?}");
        t.assert_valid("after the merge").await;
        t.assert_peer_agrees("merge peer check", "after a merged insert_overwrite")
            .await;
        let again = merge(&t.table, &RefSpec::Branch("dev".into()), &fail())
            .await
            .unwrap();
        assert!(again.commit.is_none(), "{table_type:?}: {again:?}");
    }
}
