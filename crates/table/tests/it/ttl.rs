//! Partition TTL on tables arbor creates (copy-on-write and merge-on-read, hive style and not,
//! one and two partition levels): runs delete exactly the expired partitions as one
//! DELETE_PARTITION replacecommit that arbor, hudi-rs, the MDT and the indexes agree on; dry
//! runs equal runs; caps take the oldest; pending compactions skip only their partition;
//! policies round-trip through hoodie.properties; Java's keys are honoured; inline runs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use arbor_table::ttl::{
    partition_stats, PolicyScope, Retention, TtlPolicy, TtlRunOptions, TtlStrategy,
};
use arbor_table::write::compaction::schedule_compaction;
use arbor_table::{TableError, WriteOperation};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::TableConfig;

use super::ttl_support::{
    assert_delete_partition_commit, assert_table_reads_model, create, event_time, rows, utc, whole,
    Shape, TtlTable,
};

const DAYS: [&str; 5] = [
    "2024-01-01",
    "2024-01-02",
    "2024-01-03",
    "2024-01-04",
    "2024-01-05",
];

/// A table with rows in every region and day; merge-on-read tables also get an update of
/// some days (log files).
async fn populated(shape: Shape) -> TtlTable {
    let mut t = create(shape).await;
    let mut all = Vec::new();
    for r in t.regions() {
        for d in DAYS {
            all.extend(rows(r, d, 3, 1));
        }
    }
    t.write(WriteOperation::Insert, &all).await;
    let mut update = rows(t.regions()[0], DAYS[1], 2, 2);
    update.extend(rows(t.regions()[0], DAYS[4], 1, 2));
    t.write(WriteOperation::Upsert, &update).await;
    t
}

async fn set_props(t: &TtlTable, pairs: &[(&str, &str)]) {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    TableConfig::update(t.storage.as_ref(), DEFAULT_META_DIR, move |c| {
        for (k, v) in &pairs {
            c.set(k, v.clone())?;
        }
        Ok(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_ttl_event_time_run_deletes_expired_partitions_for_every_layout() {
    for shape in Shape::all() {
        let label = format!("{shape:?}");
        let mut t = populated(shape).await;
        t.table
            .set_ttl_policy(event_time("2d", whole()))
            .await
            .unwrap();
        // 01-02 + 2d < 01-05T00:00Z; 01-03 + 2d == now is not expired (strictly before).
        let now = utc("2024-01-05T00:00:00Z");
        let options = TtlRunOptions {
            now: Some(now),
            dry_run: true,
            ..Default::default()
        };
        let dry = t.table.run_ttl(&options).await.unwrap();
        assert!(dry.commit.is_none(), "{label}");
        let mut want: Vec<String> = Vec::new();
        for r in t.regions() {
            want.push(t.partition(r, DAYS[0]));
            want.push(t.partition(r, DAYS[1]));
        }
        let mut got = dry.plan.expired_partitions();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{label}");
        assert_eq!(
            dry.plan.partitions,
            t.regions().len() * DAYS.len(),
            "{label}"
        );
        assert!(
            dry.plan.skipped.is_empty(),
            "{label}: {:?}",
            dry.plan.skipped
        );
        let before_instants = t.timeline().await.instants().len();
        assert_eq!(
            t.timeline().await.instants().len(),
            before_instants,
            "{label}: a dry run writes nothing"
        );

        let groups: BTreeMap<String, BTreeSet<String>> = t
            .file_groups()
            .await
            .into_iter()
            .filter(|(p, _)| want.contains(p))
            .collect();
        assert_eq!(groups.len(), want.len(), "{label}");
        let run = t
            .table
            .run_ttl(&TtlRunOptions {
                now: Some(now),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            run.plan, dry.plan,
            "{label}: the dry run names what the run deletes"
        );
        let commit = run.commit.expect("a commit");
        assert_eq!(
            commit.file_groups_replaced,
            groups.values().map(BTreeSet::len).sum::<usize>(),
            "{label}"
        );
        assert_delete_partition_commit(&t, &commit.instant, &groups).await;
        t.drop_partitions(&want);
        assert_table_reads_model(&t, &format!("{label}: TTL run")).await;

        // Nothing left to expire at that time: no instant.
        let n = t.timeline().await.instants().len();
        let again = t
            .table
            .run_ttl(&TtlRunOptions {
                now: Some(now),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(
            again.commit.is_none() && again.plan.expired.is_empty(),
            "{label}"
        );
        assert_eq!(t.timeline().await.instants().len(), n, "{label}");
        assert_eq!(again.plan.partitions, t.regions().len() * 3, "{label}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_ttl_count_by_region_keeps_the_newest_per_group() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let shape = Shape {
            table_type,
            hive: table_type == TableType::CopyOnWrite,
            levels: 2,
        };
        let mut t = populated(shape).await;
        // eu keeps 2 days by the default; us keeps 4 by its explicit policy.
        let count = |n: &str, scope| TtlPolicy {
            strategy: TtlStrategy::Count,
            retain: Retention::parse(TtlStrategy::Count, n).unwrap(),
            scope,
            time_field: None,
            format: None,
        };
        t.table
            .set_ttl_policy(count(
                "2",
                PolicyScope::Default {
                    fields: vec!["region".into()],
                },
            ))
            .await
            .unwrap();
        let set = t
            .table
            .set_ttl_policy(count("4", PolicyScope::Spec("region=us/".into())))
            .await
            .unwrap();
        assert_eq!(set.explicit[0].scope, PolicyScope::Spec("region=us".into()));
        let run = t.table.run_ttl(&TtlRunOptions::default()).await.unwrap();
        let mut got = run.plan.expired_partitions();
        got.sort();
        let mut want = vec![
            t.partition("eu", DAYS[0]),
            t.partition("eu", DAYS[1]),
            t.partition("eu", DAYS[2]),
            t.partition("us", DAYS[0]),
        ];
        want.sort();
        assert_eq!(got, want, "{shape:?}");
        assert!(run.commit.is_some());
        t.drop_partitions(&want);
        assert_table_reads_model(&t, &format!("{shape:?}: count")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_ttl_cap_deletes_the_oldest_first_and_the_next_run_the_rest() {
    let shape = Shape {
        table_type: TableType::CopyOnWrite,
        hive: false,
        levels: 1,
    };
    let mut t = populated(shape).await;
    t.table
        .set_ttl_policy(event_time("1d", whole()))
        .await
        .unwrap();
    let now = utc("2024-01-10T00:00:00Z");
    let capped = TtlRunOptions {
        now: Some(now),
        max_partitions: Some(2),
        ..Default::default()
    };
    let run = t.table.run_ttl(&capped).await.unwrap();
    assert_eq!(run.plan.expired_partitions(), vec![DAYS[0], DAYS[1]]);
    let left: Vec<&str> = run
        .plan
        .capped
        .iter()
        .map(|e| e.partition.as_str())
        .collect();
    assert_eq!(left, vec![DAYS[2], DAYS[3], DAYS[4]]);
    t.drop_partitions(&run.plan.expired_partitions());
    assert_table_reads_model(&t, "capped run").await;
    // The table's max.delete.partitions applies when the run sets no cap.
    set_props(
        &t,
        &[("hoodie.partition.ttl.strategy.max.delete.partitions", "1")],
    )
    .await;
    let run = t
        .table
        .run_ttl(&TtlRunOptions {
            now: Some(now),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(run.plan.expired_partitions(), vec![DAYS[2]]);
    assert_eq!(run.plan.capped.len(), 2);
    assert!(t
        .table
        .run_ttl(&TtlRunOptions {
            max_partitions: Some(0),
            ..Default::default()
        })
        .await
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_ttl_pending_compaction_skips_only_its_partition() {
    let shape = Shape {
        table_type: TableType::MergeOnRead,
        hive: true,
        levels: 1,
    };
    let mut t = create(shape).await;
    let mut all = Vec::new();
    for d in DAYS {
        all.extend(rows("eu", d, 2, 1));
    }
    t.write(WriteOperation::Insert, &all).await;
    // Only 01-02 gets log files, so only its file group is planned for compaction.
    t.write(WriteOperation::Upsert, &rows("eu", DAYS[1], 1, 5))
        .await;
    let planned = schedule_compaction(
        t.table.view_storage(),
        t.table.layout(),
        t.table.generator(),
    )
    .await
    .unwrap();
    assert!(planned.is_some());
    t.table
        .set_ttl_policy(event_time("1d", whole()))
        .await
        .unwrap();
    let run = t
        .table
        .run_ttl(&TtlRunOptions {
            now: Some(utc("2024-01-04T00:00:01Z")),
            ..Default::default()
        })
        .await
        .unwrap();
    let p = t.partition("eu", DAYS[1]);
    assert_eq!(
        run.plan.expired_partitions(),
        vec![t.partition("eu", DAYS[0]), t.partition("eu", DAYS[2])]
    );
    assert_eq!(run.plan.skipped.len(), 1, "{:?}", run.plan.skipped);
    assert_eq!(run.plan.skipped[0].partition, p);
    assert!(
        run.plan.skipped[0].reason.starts_with("pending compaction"),
        "{:?}",
        run.plan.skipped
    );
    t.drop_partitions(&run.plan.expired_partitions());
    let r = arbor_table::read::TableReader::open(t.storage.clone())
        .await
        .unwrap();
    let got = super::ttl_support::rows_of(&r.snapshot(None).await.unwrap());
    assert_eq!(got, t.expected());
}

#[tokio::test]
async fn test_ttl_policies_round_trip_through_hoodie_properties() {
    let shape = Shape {
        table_type: TableType::CopyOnWrite,
        hive: true,
        levels: 2,
    };
    let t = create(shape).await;
    assert!(t.table.ttl_policies().unwrap().is_empty());
    let size = TtlPolicy {
        strategy: TtlStrategy::Size,
        retain: Retention::parse(TtlStrategy::Size, "100GiB").unwrap(),
        scope: PolicyScope::Spec("region=eu".into()),
        time_field: None,
        format: None,
    };
    let time = TtlPolicy {
        strategy: TtlStrategy::Time,
        retain: Retention::parse(TtlStrategy::Time, "12h").unwrap(),
        scope: PolicyScope::Default {
            fields: vec!["region".into()],
        },
        time_field: None,
        format: None,
    };
    t.table.set_ttl_policy(size.clone()).await.unwrap();
    let set = t.table.set_ttl_policy(time.clone()).await.unwrap();
    assert_eq!(set.default.as_ref(), Some(&time));
    assert_eq!(set.explicit, vec![size.clone()]);
    let reopened = t.reopen().await;
    assert_eq!(reopened.ttl_policies().unwrap(), set);
    let text = std::fs::read_to_string(t.base.join(".hoodie/hoodie.properties")).unwrap();
    assert!(
        text.contains("hoodie.partition.ttl.management.default.policy=KEEP_BY_TIME"),
        "{text}"
    );
    assert!(text.contains("KEEP_BY_SIZE"), "{text}");

    // Replacing a scope's policy keeps one per scope.
    let smaller = TtlPolicy {
        retain: Retention::Bytes(1024),
        ..size.clone()
    };
    let set = t.table.set_ttl_policy(smaller.clone()).await.unwrap();
    assert_eq!(set.explicit, vec![smaller]);

    // Invalid policies and absent unsets change nothing.
    let props = || std::fs::read(t.base.join(".hoodie/hoodie.properties")).unwrap();
    let before = props();
    let bad = [
        TtlPolicy {
            scope: PolicyScope::Spec("city=x".into()),
            ..size.clone()
        },
        TtlPolicy {
            scope: PolicyScope::Default {
                fields: vec!["dt".into()],
            },
            ..time.clone()
        },
        TtlPolicy {
            scope: PolicyScope::Default {
                fields: vec!["region".into(), "dt".into()],
            },
            ..size.clone()
        },
        TtlPolicy {
            strategy: TtlStrategy::EventTime,
            ..time.clone()
        },
        TtlPolicy {
            retain: Retention::Count(3),
            ..time.clone()
        },
    ];
    for p in bad {
        assert!(t.table.set_ttl_policy(p.clone()).await.is_err(), "{p}");
    }
    assert!(t.table.unset_ttl_policy(Some("region=us")).await.is_err());
    assert_eq!(props(), before);

    let set = t.table.unset_ttl_policy(Some("region=eu/")).await.unwrap();
    assert!(set.explicit.is_empty());
    let set = t.table.unset_ttl_policy(None).await.unwrap();
    assert!(set.is_empty());
    assert!(t.table.unset_ttl_policy(None).await.is_err());
    assert!(t.reopen().await.ttl_policies().unwrap().is_empty());
    let text = std::fs::read_to_string(t.base.join(".hoodie/hoodie.properties")).unwrap();
    assert!(!text.contains("hoodie.partition.ttl"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_ttl_time_and_java_keys_expire_by_newest_base_instant() {
    let shape = Shape {
        table_type: TableType::MergeOnRead,
        hive: false,
        levels: 1,
    };
    let mut t = create(shape).await;
    let a = t
        .write(WriteOperation::Insert, &rows("eu", DAYS[0], 2, 1))
        .await;
    let b = t
        .write(WriteOperation::Insert, &rows("eu", DAYS[1], 2, 1))
        .await;
    // A log-only update of 01-01 does not extend its life (the newest base instant counts).
    let u = t
        .write(WriteOperation::Upsert, &rows("eu", DAYS[0], 1, 9))
        .await;
    let reader = arbor_table::read::TableReader::open(t.storage.clone())
        .await
        .unwrap();
    let stats = partition_stats(reader.view(), &t.storage, true)
        .await
        .unwrap();
    assert_eq!(stats[0].partition, DAYS[0]);
    assert_eq!(stats[0].last_modified.as_ref(), Some(&a.instant));
    assert_eq!(stats[0].created.as_ref(), Some(&a.instant));
    assert!(stats[0].size_bytes > 0 && stats[0].file_groups == 1);
    assert!(u.instant > b.instant);

    // Java: KEEP_BY_TIME, 1 day, over the whole table. `now` is just past a's day.
    set_props(&t, &[("hoodie.partition.ttl.strategy.days.retain", "1")]).await;
    let policies = t.reopen().await.ttl_policies().unwrap();
    assert_eq!(
        policies.default.as_ref().unwrap().to_string(),
        "default: time 1d"
    );
    let now = a.instant.to_datetime().unwrap()
        + chrono::Duration::days(1)
        + chrono::Duration::milliseconds(1);
    assert!(b.instant.to_datetime().unwrap() + chrono::Duration::days(1) >= now);
    let run = t
        .table
        .run_ttl(&TtlRunOptions {
            now: Some(now),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(run.plan.expired_partitions(), vec![DAYS[0]]);
    assert!(run.plan.expired[0].reason.starts_with("last modified"));
    t.drop_partitions(&run.plan.expired_partitions());
    assert_table_reads_model(&t, "java KEEP_BY_TIME").await;

    // Java: KEEP_BY_CREATION_TIME over a selected partition only.
    let c = t
        .write(WriteOperation::Insert, &rows("eu", DAYS[2], 1, 1))
        .await;
    set_props(
        &t,
        &[
            (
                "hoodie.partition.ttl.management.strategy.type",
                "KEEP_BY_CREATION_TIME",
            ),
            ("hoodie.partition.ttl.strategy.partition.selected", DAYS[2]),
        ],
    )
    .await;
    let far = c.instant.to_datetime().unwrap() + chrono::Duration::days(30);
    let run = t
        .table
        .run_ttl(&TtlRunOptions {
            now: Some(far),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(run.plan.expired_partitions(), vec![DAYS[2]]);
    assert!(run.plan.expired[0].reason.starts_with("created"));
    t.drop_partitions(&run.plan.expired_partitions());
    assert_table_reads_model(&t, "java KEEP_BY_CREATION_TIME").await;
    // Setting a policy with arbor moves Java's into the RFC keys.
    let set = t
        .table
        .set_ttl_policy(event_time("400d", whole()))
        .await
        .unwrap();
    assert_eq!(set.explicit.len(), 1);
    let text = std::fs::read_to_string(t.base.join(".hoodie/hoodie.properties")).unwrap();
    assert!(!text.contains("days.retain"), "{text}");
    assert_eq!(t.reopen().await.ttl_policies().unwrap(), set);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_ttl_inline_runs_after_a_write_and_reports_its_failure() {
    let shape = Shape {
        table_type: TableType::CopyOnWrite,
        hive: true,
        levels: 1,
    };
    let mut t = create(shape).await;
    t.table
        .set_ttl_policy(TtlPolicy {
            strategy: TtlStrategy::Count,
            retain: Retention::Count(2),
            scope: whole(),
            time_field: None,
            format: None,
        })
        .await
        .unwrap();
    for d in &DAYS[..3] {
        t.write(WriteOperation::Insert, &rows("eu", d, 1, 1)).await;
    }
    // Not inline: three days stay.
    assert_eq!(t.file_groups().await.len(), 3);
    set_props(&t, &[("hoodie.partition.ttl.inline", "true")]).await;
    t.write(WriteOperation::Insert, &rows("eu", DAYS[3], 1, 1))
        .await;
    let left: Vec<String> = t.file_groups().await.into_keys().collect();
    assert_eq!(
        left,
        vec![t.partition("eu", DAYS[2]), t.partition("eu", DAYS[3])]
    );
    let doomed = vec![t.partition("eu", DAYS[0]), t.partition("eu", DAYS[1])];
    t.drop_partitions(&doomed);
    assert_table_reads_model(&t, "inline TTL").await;

    // A TTL failure after the commit says the write committed; its rows are there.
    set_props(&t, &[("hoodie.partition.ttl.policies", "{not json")]).await;
    let more = rows("eu", DAYS[4], 1, 1);
    let e = t
        .table
        .write(
            WriteOperation::Insert,
            vec![super::ttl_support::batch(&more)],
        )
        .await
        .unwrap_err();
    assert!(matches!(e, TableError::InlineTtl { .. }), "{e}");
    assert!(e.to_string().contains("committed"), "{e}");
    for r in &more {
        t.model.insert(r.0.clone(), r.clone());
    }
    let reader = arbor_table::read::TableReader::open(t.storage.clone())
        .await
        .unwrap();
    let got = super::ttl_support::rows_of(&reader.snapshot(None).await.unwrap());
    assert_eq!(got, t.expected());
    let _ = Duration::ZERO;
}

/// Planning with the MDT lists no data partition (FILES answers), and reads partition markers
/// by key (GET) only when a creation-time policy applies; the same table planned from a
/// directory listing gives the same statistics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_ttl_planning_with_the_mdt_lists_no_data_partition() {
    use arbor_storage::{FaultInjectingStorage, OpKind, Storage};
    use std::sync::Arc;
    let shape = Shape {
        table_type: TableType::MergeOnRead,
        hive: true,
        levels: 2,
    };
    let t = populated(shape).await;
    t.table
        .set_ttl_policy(TtlPolicy {
            strategy: TtlStrategy::CreationTime,
            retain: Retention::parse(TtlStrategy::CreationTime, "1d").unwrap(),
            scope: whole(),
            time_field: None,
            format: None,
        })
        .await
        .unwrap();
    let faulty = Arc::new(FaultInjectingStorage::new(t.storage.clone()));
    let table = arbor_table::Table::open(faulty.clone() as Arc<dyn Storage>)
        .await
        .unwrap();
    faulty.reset();
    let plan = table
        .run_ttl(&TtlRunOptions {
            dry_run: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .plan;
    assert_eq!(plan.partitions, 10);
    let ops = faulty.ops();
    let data_lists: Vec<_> = ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::List | OpKind::ListDir))
        .filter(|o| !o.key.starts_with(".hoodie"))
        .collect();
    assert!(
        data_lists.is_empty(),
        "data partitions listed: {data_lists:?}"
    );
    let markers = ops
        .iter()
        .filter(|o| o.kind == OpKind::Get && o.key.ends_with(".hoodie_partition_metadata"))
        .count();
    assert_eq!(markers, 10, "one GET per partition marker");
    assert!(
        ops.iter().all(|o| !o.kind.is_write()),
        "a dry run writes nothing"
    );

    let by_mdt = arbor_table::read::TableReader::open(t.storage.clone())
        .await
        .unwrap();
    let by_listing = arbor_table::read::TableReader::open_with(
        t.storage.clone(),
        arbor_table::ListingSource::Storage,
    )
    .await
    .unwrap();
    let a = partition_stats(by_mdt.view(), &t.storage, true)
        .await
        .unwrap();
    let b = partition_stats(by_listing.view(), &t.storage, true)
        .await
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 10);
}

/// Figures, not a check (`cargo test -p arbor-table --test it ttl_planning_figures --
/// --ignored --nocapture`; `ARBOR_TTL_BENCH_PARTITIONS`, default 10000): planning a TTL run
/// over that many partitions through the MDT (no data-partition LIST) against planning from a
/// directory listing, on the same table in the same run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn ttl_planning_figures() {
    use arbor_table::ttl::{evaluate, TtlPolicies};
    let n: usize = std::env::var("ARBOR_TTL_BENCH_PARTITIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let shape = Shape {
        table_type: TableType::CopyOnWrite,
        hive: true,
        levels: 1,
    };
    let mut t = create(shape).await;
    let start = chrono::NaiveDate::from_ymd_opt(2000, 1, 1).unwrap();
    let all: Vec<_> = (0..n)
        .map(|i| {
            let d = (start + chrono::Duration::days(i as i64))
                .format("%Y-%m-%d")
                .to_string();
            (format!("k{i}"), "eu".to_string(), d, 1i64)
        })
        .collect();
    let w = std::time::Instant::now();
    t.write(WriteOperation::BulkInsert, &all).await;
    println!("wrote {n} partitions in {:.1?}", w.elapsed());
    t.table
        .set_ttl_policy(event_time("3650d", whole()))
        .await
        .unwrap();
    let policies: TtlPolicies = t.reopen().await.ttl_policies().unwrap();
    let fields = vec!["dt".to_string()];
    let now = utc("2030-01-01T00:00:00Z");
    for source in [
        arbor_table::ListingSource::MetadataTable,
        arbor_table::ListingSource::Storage,
    ] {
        let started = std::time::Instant::now();
        let reader = arbor_table::read::TableReader::open_with(t.storage.clone(), source)
            .await
            .unwrap();
        let stats = partition_stats(reader.view(), &t.storage, false)
            .await
            .unwrap();
        let plan = evaluate(&policies, &fields, &stats, now, None).unwrap();
        println!(
            "planning over {} partitions from {source:?}: {:.1?} ({} expire)",
            stats.len(),
            started.elapsed(),
            plan.expired.len()
        );
        assert_eq!(stats.len(), n);
    }
}
