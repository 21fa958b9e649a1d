//! `maintain`: on a merge-on-read table with a due compaction, a due clean, an expired tag and
//! a TTL policy, each runs once, in order, the dry run said so first, and a second run finds
//! nothing due; clustering when the table asks for it; a bad setting is refused before
//! anything runs.

use std::collections::BTreeMap;

use arbor_branching::maintain::{maintain, MaintainOptions, MaintenanceReport, Service, Status};
use arbor_branching::{create_tag, list_tags, TagFilter};
use arbor_table::ttl::{PolicyScope, Retention, TtlPolicy, TtlStrategy};
use arbor_table::{WriteOperation, WriteOptions};
use arbor_testkit_tables::{batch, create, rows, Model};
use arbor_timeline::config::TableType;

fn statuses(r: &MaintenanceReport) -> Vec<(Service, Status)> {
    r.services.iter().map(|s| (s.service, s.status)).collect()
}

fn options(dry_run: bool, settings: &[(&str, &str)]) -> MaintainOptions {
    MaintainOptions {
        dry_run,
        settings: settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        ..MaintainOptions::default()
    }
}

#[tokio::test]
async fn test_maintain_runs_each_due_service_once_in_order_and_then_nothing() {
    let t = create(TableType::MergeOnRead, true).await;
    let mut model = Model::default();
    let r = rows(0..20, 1, "a");
    t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    for ts in 2..8 {
        let r = rows(0..4, ts, "u");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
    }
    // Keep one region: `us` is greater than `eu`, so `region=eu` expires.
    t.table
        .set_ttl_policy(TtlPolicy {
            strategy: TtlStrategy::Count,
            retain: Retention::Count(1),
            scope: PolicyScope::Default { fields: vec![] },
            time_field: None,
            format: None,
        })
        .await
        .unwrap();
    let soon = chrono::Utc::now() + chrono::Duration::milliseconds(300);
    create_tag(&t.table, "short", None, Some(soon))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let settings = [("hoodie.clean.commits.retained", "1")];

    let listing = t.listing().await;
    let dry = maintain(&t.table, &options(true, &settings)).await.unwrap();
    assert!(dry.dry_run);
    assert_eq!(t.listing().await, listing, "a dry run writes nothing");
    let due: Vec<Service> = dry
        .services
        .iter()
        .filter(|s| s.status == Status::Due)
        .map(|s| s.service)
        .collect();
    assert_eq!(
        due,
        vec![
            Service::Compaction,
            Service::Ttl,
            Service::ExpiredTags,
            Service::Clean
        ],
        "{dry:#?}"
    );

    let run = maintain(&t.table, &options(false, &settings))
        .await
        .unwrap();
    let ran: Vec<Service> = run
        .services
        .iter()
        .filter(|s| s.status == Status::Ran)
        .map(|s| s.service)
        .collect();
    assert_eq!(ran, due, "the dry run matches the run: {run:#?}");
    for s in run.services.iter().filter(|s| s.status == Status::Ran) {
        assert_eq!(s.done.len(), 1, "{s:?}");
    }
    let clean = run
        .services
        .iter()
        .find(|s| s.service == Service::Clean)
        .unwrap();
    assert!(clean.bytes_freed > 0, "{clean:?}");
    // Each ran in order, as its own instant: compaction < TTL < clean.
    let instant =
        |svc: Service| run.services.iter().find(|s| s.service == svc).unwrap().done[0].clone();
    assert!(instant(Service::Compaction) < instant(Service::Ttl));
    assert!(instant(Service::Ttl) < instant(Service::Clean));
    assert!(list_tags(&t.storage, None, TagFilter::All)
        .await
        .unwrap()
        .is_empty());
    model.rows.retain(|_, row| row.1 != "eu");
    assert_eq!(t.read(None).await, model.sorted());
    t.assert_valid("after maintain").await;
    t.assert_peer_agrees("maintain peer check", "after maintain")
        .await;

    let again = maintain(&t.table, &options(false, &settings))
        .await
        .unwrap();
    assert!(
        again
            .services
            .iter()
            .all(|s| matches!(s.status, Status::NotDue | Status::Skipped)),
        "{again:#?}"
    );
    let dry_again = maintain(&t.table, &options(true, &settings)).await.unwrap();
    assert_eq!(statuses(&dry_again), statuses(&again));
}

#[tokio::test]
async fn test_maintain_clusters_when_the_table_asks_for_it() {
    let t = create(TableType::CopyOnWrite, true).await;
    let small = t.table.clone().with_write_options(WriteOptions {
        small_file_limit: 0,
        ..WriteOptions::default()
    });
    for c in 0..3u32 {
        small
            .write(
                WriteOperation::Insert,
                vec![batch(&rows(c * 10..c * 10 + 10, 1, "a"))],
            )
            .await
            .unwrap();
    }
    let before = t.read(None).await;
    let off = maintain(&t.table, &options(true, &[])).await.unwrap();
    let clustering = |r: &MaintenanceReport| {
        r.services
            .iter()
            .find(|s| s.service == Service::Clustering)
            .unwrap()
            .status
    };
    assert_eq!(clustering(&off), Status::Skipped, "{off:#?}");
    let settings = [
        ("hoodie.clustering.inline", "true"),
        ("hoodie.clustering.inline.max.commits", "2"),
        ("hoodie.clustering.plan.strategy.sort.columns", "ts"),
    ];
    let run = maintain(&t.table, &options(false, &settings))
        .await
        .unwrap();
    assert_eq!(clustering(&run), Status::Ran, "{run:#?}");
    assert_eq!(t.read(None).await, before);
    let again = maintain(&t.table, &options(false, &settings))
        .await
        .unwrap();
    assert_eq!(clustering(&again), Status::NotDue, "{again:#?}");
    t.assert_valid("after clustering by maintain").await;
}

#[tokio::test]
async fn test_maintain_refuses_a_bad_clean_policy_naming_it() {
    let t = create(TableType::CopyOnWrite, true).await;
    t.write(WriteOperation::Upsert, &rows(0..4, 1, "a")).await;
    let listing = t.listing().await;
    let e = maintain(
        &t.table,
        &options(false, &[("hoodie.clean.policy", "KEEP_NOTHING")]),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("KEEP_NOTHING"), "{e}");
    assert_eq!(t.listing().await, listing);
}

#[tokio::test]
async fn test_maintain_log_compacts_when_the_table_enables_it() {
    let t = create(TableType::MergeOnRead, true).await;
    t.write(WriteOperation::Upsert, &rows(0..8, 1, "a")).await;
    for ts in 2..5 {
        t.write(WriteOperation::Upsert, &rows(0..2, ts, "u")).await;
    }
    let before = t.read(None).await;
    let status = |r: &MaintenanceReport| {
        r.services
            .iter()
            .find(|s| s.service == Service::LogCompaction)
            .unwrap()
            .status
    };
    let off = maintain(&t.table, &options(true, &[])).await.unwrap();
    assert_eq!(status(&off), Status::Skipped);
    let on = [
        ("hoodie.log.compaction.enable", "true"),
        ("hoodie.log.compaction.blocks.threshold", "3"),
    ];
    let dry = maintain(&t.table, &options(true, &on)).await.unwrap();
    assert_eq!(status(&dry), Status::Due, "{dry:#?}");
    let run = maintain(&t.table, &options(false, &on)).await.unwrap();
    assert_eq!(status(&run), Status::Ran, "{run:#?}");
    assert_eq!(t.read(None).await, before);
    let again = maintain(&t.table, &options(false, &on)).await.unwrap();
    assert_eq!(status(&again), Status::NotDue, "{again:#?}");
    t.assert_valid("after log compaction by maintain").await;
}
