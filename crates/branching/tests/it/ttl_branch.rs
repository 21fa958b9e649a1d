//! Partition TTL on a working branch: the policy and the run land only in the branch's
//! metadata; main keeps every partition and no policy, for arbor and for hudi-rs.

use arbor_branching::{create_branch, BranchSource};
use arbor_table::ttl::{PolicyScope, Retention, TtlPolicy, TtlRunOptions, TtlStrategy};
use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;

use arbor_testkit_tables::{create, rows, Model};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_ttl_on_a_branch_deletes_only_on_that_branch() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let mut model = Model::default();
        let r = rows(0..10, 1, "a");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        create_branch(&t.table, "trim", BranchSource::MainHead)
            .await
            .unwrap();
        let b = t.branch("trim").await;
        // Keep one region: `us` is greater than `eu`, so `region=eu` expires.
        b.set_ttl_policy(TtlPolicy {
            strategy: TtlStrategy::Count,
            retain: Retention::Count(1),
            scope: PolicyScope::Default { fields: vec![] },
            time_field: None,
            format: None,
        })
        .await
        .unwrap();
        let out = b.run_ttl(&TtlRunOptions::default()).await.unwrap();
        assert_eq!(out.plan.expired_partitions(), vec!["region=eu"], "{tt:?}");
        assert!(out.commit.is_some());

        let mut branch_model = model.clone();
        branch_model.rows.retain(|_, row| row.1 != "eu");
        assert_eq!(
            t.read_branch(Some("trim"), None).await,
            branch_model.sorted(),
            "{tt:?}"
        );
        t.assert_branch_valid("trim", "after TTL on the branch")
            .await;
        // Main: every row, no policy, no run.
        assert_eq!(t.read(None).await, model.sorted(), "{tt:?}");
        assert!(t.table.ttl_policies().unwrap().is_empty());
        let main = arbor_table::Table::open(t.storage.clone()).await.unwrap();
        assert!(main.ttl_policies().unwrap().is_empty());
        let dry = main
            .run_ttl(&TtlRunOptions {
                dry_run: true,
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(dry.plan.expired.is_empty());
        t.assert_valid("main after TTL on the branch").await;
        t.assert_peer_agrees("branching peer check", "main after TTL on a branch")
            .await;
    }
}
