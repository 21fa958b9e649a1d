//! Model-based property test of partition TTL with savepoints (what tags are made of) and
//! cleaning: random sequences of writes into daily partitions, savepoints, savepoint
//! deletions, policy changes, TTL runs at random `now` values and cleans, checked after every
//! step against an in-memory model.
//!
//! After every step:
//! - the latest snapshot reads exactly the model's rows;
//! - every savepointed instant reads (time travel) exactly the model's snapshot at it, through
//!   TTL runs and cleans;
//! - the metadata table agrees with storage.
//!
//! For every TTL run the dry run at the same `now` names exactly the partitions the run then
//! deletes, and those are exactly the ones the model's policy expires. The final table is read
//! by hudi-rs in the peer variant.

use std::collections::{BTreeMap, BTreeSet};

use arbor_cleaner::{clean, create_savepoint, delete_savepoint, CleanOptions, CleanPolicy};
use arbor_table::ttl::{PolicyScope, Retention, TtlPolicy, TtlRunOptions, TtlStrategy};
use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;
use arbor_timeline::InstantTime;
use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use proptest::prelude::*;

use arbor_testkit_tables::{Row, TestTable};

/// Partition values: days 2024-01-01 .. 2024-01-06 (the `region` column of the test table).
const DAYS: u32 = 6;

fn day(d: u32) -> String {
    format!("2024-01-{:02}", d + 1)
}

fn midnight(d: u32) -> DateTime<Utc> {
    let date = NaiveDate::from_ymd_opt(2024, 1, d + 1).unwrap();
    Utc.from_utc_datetime(&date.and_hms_opt(0, 0, 0).unwrap())
}

/// A TTL policy the model can judge.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Policy {
    /// event-time on the day, retain `days`.
    EventTime { days: u32 },
    /// Keep the `n` greatest days.
    Count { n: u64 },
    /// time (newest base file) with 1 day of retention.
    Time,
}

impl Policy {
    fn ttl(self) -> TtlPolicy {
        let scope = PolicyScope::Default { fields: Vec::new() };
        match self {
            Policy::EventTime { days } => TtlPolicy {
                strategy: TtlStrategy::EventTime,
                retain: Retention::Duration(std::time::Duration::from_secs(
                    u64::from(days) * 86_400,
                )),
                scope,
                time_field: Some("region".into()),
                format: Some("yyyy-MM-dd".into()),
            },
            Policy::Count { n } => TtlPolicy {
                strategy: TtlStrategy::Count,
                retain: Retention::Count(n),
                scope,
                time_field: None,
                format: None,
            },
            Policy::Time => TtlPolicy {
                strategy: TtlStrategy::Time,
                retain: Retention::Duration(std::time::Duration::from_secs(86_400)),
                scope,
                time_field: None,
                format: None,
            },
        }
    }
}

/// When a TTL run evaluates its policy.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Now {
    /// Noon of day `d` (2024-01-01 + d): what event-time policies are judged at.
    Day(u32),
    /// The wall clock, plus `days`: 0 expires nothing by `time` (every write is from today),
    /// 2 expires every partition.
    Clock { days: i64 },
}

#[derive(Debug, Clone)]
enum Op {
    /// Upsert one new row into each day of the mask.
    Write { days: u8 },
    /// Savepoint the latest completed write.
    Savepoint,
    /// Delete the `pick`-th savepoint (modulo their number; nothing with none).
    DeleteSavepoint { pick: usize },
    /// Set the default policy.
    SetPolicy(Policy),
    /// Dry run, then run, at `now`.
    Run(Now),
    /// Clean, keeping the latest commit.
    Clean,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1u8..64).prop_map(|days| Op::Write { days }),
        2 => Just(Op::Savepoint),
        1 => (0usize..3).prop_map(|pick| Op::DeleteSavepoint { pick }),
        2 => prop_oneof![
            (1u32..5).prop_map(|days| Policy::EventTime { days }),
            (1u64..5).prop_map(|n| Policy::Count { n }),
            Just(Policy::Time),
        ]
        .prop_map(Op::SetPolicy),
        4 => prop_oneof![
            (0u32..10).prop_map(Now::Day),
            prop_oneof![Just(0i64), Just(2i64)].prop_map(|days| Now::Clock { days }),
        ]
        .prop_map(Op::Run),
        2 => Just(Op::Clean),
    ]
}

#[derive(Debug, Default)]
struct Model {
    /// id -> row.
    rows: BTreeMap<String, Row>,
    /// Days that have a partition now (written since they were last deleted).
    live: BTreeSet<u32>,
    /// Savepointed instants and the rows as of each.
    savepoints: BTreeMap<InstantTime, Vec<Row>>,
    /// The rows as of the latest completed write.
    latest: Option<InstantTime>,
    policy: Option<Policy>,
    next_id: u32,
}

impl Model {
    fn rows(&self) -> Vec<Row> {
        self.rows.values().cloned().collect()
    }

    /// The days the policy expires at `now`.
    fn expired(&self, now: Now) -> BTreeSet<u32> {
        let at = match now {
            Now::Day(d) => midnight(d) + Duration::hours(12),
            Now::Clock { days } => Utc::now() + Duration::days(days),
        };
        match self.policy {
            None => BTreeSet::new(),
            Some(Policy::EventTime { days }) => self
                .live
                .iter()
                .copied()
                .filter(|&d| midnight(d) + Duration::days(i64::from(days)) < at)
                .collect(),
            Some(Policy::Count { n }) => {
                let keep = usize::try_from(n).unwrap();
                let n_live = self.live.len();
                self.live
                    .iter()
                    .copied()
                    .take(n_live.saturating_sub(keep))
                    .collect()
            }
            // Every write happened today: a day of retention expires all at +2 days, none now.
            Some(Policy::Time) => match now {
                Now::Clock { days } if days >= 2 => self.live.clone(),
                Now::Clock { .. } => BTreeSet::new(),
                // Noon of a day in January 2024 is long before any write.
                Now::Day(_) => BTreeSet::new(),
            },
        }
    }
}

struct Run {
    t: TestTable,
    model: Model,
    step: usize,
}

impl Run {
    async fn check(&self, what: &str) {
        let ctx = format!("step {} ({what})", self.step);
        assert_eq!(self.t.read(None).await, self.model.rows(), "{ctx}: latest");
        for (sp, rows) in &self.model.savepoints {
            assert_eq!(&self.t.read(Some(sp)).await, rows, "{ctx}: savepoint {sp}");
        }
        self.t.assert_valid(&ctx).await;
    }

    async fn apply(&mut self, op: &Op) {
        self.step += 1;
        match op {
            Op::Write { days } => {
                let mut rows = Vec::new();
                for d in (0..DAYS).filter(|d| days & (1 << d) != 0) {
                    self.model.next_id += 1;
                    let id = format!("k{:04}", self.model.next_id);
                    let row: Row = (
                        id.clone(),
                        day(d),
                        i64::from(self.model.next_id),
                        format!("n{d}"),
                    );
                    self.model.rows.insert(id, row.clone());
                    self.model.live.insert(d);
                    rows.push(row);
                }
                let instant = self.t.write(WriteOperation::Upsert, &rows).await;
                self.model.latest = Some(instant);
            }
            Op::Savepoint => {
                let Some(latest) = self.model.latest.clone() else {
                    return;
                };
                if self.model.savepoints.contains_key(&latest) {
                    return;
                }
                create_savepoint(&self.t.table, None, "ttl model")
                    .await
                    .unwrap();
                self.model.savepoints.insert(latest, self.model.rows());
            }
            Op::DeleteSavepoint { pick } => {
                let Some(sp) = self
                    .model
                    .savepoints
                    .keys()
                    .nth(pick % self.model.savepoints.len().max(1))
                    .cloned()
                else {
                    return;
                };
                delete_savepoint(&self.t.table, &sp).await.unwrap();
                self.model.savepoints.remove(&sp);
            }
            Op::SetPolicy(p) => {
                self.t.table.set_ttl_policy(p.ttl()).await.unwrap();
                // The handle's config is what later runs read: reopen it as a user would.
                self.t.table = self
                    .t
                    .table
                    .reopen_at(self.t.table.root().clone())
                    .await
                    .unwrap();
                self.model.policy = Some(*p);
            }
            Op::Run(now) => {
                let at = match now {
                    Now::Day(d) => midnight(*d) + Duration::hours(12),
                    Now::Clock { days } => Utc::now() + Duration::days(*days),
                };
                let options = |dry_run| TtlRunOptions {
                    now: Some(at),
                    dry_run,
                    max_partitions: None,
                };
                let want: BTreeSet<String> = self
                    .model
                    .expired(*now)
                    .into_iter()
                    .map(|d| format!("region={}", day(d)))
                    .collect();
                let dry = self.t.table.run_ttl(&options(true)).await.unwrap();
                let planned: BTreeSet<String> = dry
                    .plan
                    .expired
                    .iter()
                    .map(|e| e.partition.clone())
                    .collect();
                assert_eq!(
                    planned, want,
                    "step {}: dry run {now:?} of {:?}",
                    self.step, self.model.policy
                );
                assert!(dry.commit.is_none());
                let run = self.t.table.run_ttl(&options(false)).await.unwrap();
                let deleted: BTreeSet<String> = run
                    .plan
                    .expired
                    .iter()
                    .map(|e| e.partition.clone())
                    .collect();
                assert_eq!(
                    deleted, want,
                    "step {}: the run deletes what the dry run said",
                    self.step
                );
                assert_eq!(run.commit.is_some(), !want.is_empty());
                if let Some(c) = run.commit {
                    self.model.latest = Some(c.instant);
                }
                for d in self.model.expired(*now) {
                    self.model.live.remove(&d);
                    self.model.rows.retain(|_, r| r.1 != day(d));
                }
            }
            Op::Clean => {
                clean(
                    &self.t.table,
                    &CleanOptions {
                        policy: CleanPolicy::KeepLatestCommits(1),
                        ..CleanOptions::default()
                    },
                )
                .await
                .unwrap();
            }
        }
        self.check(&format!("{op:?}")).await;
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn case() -> impl Strategy<Value = (TableType, Vec<Op>)> {
    (
        prop_oneof![Just(TableType::CopyOnWrite), Just(TableType::MergeOnRead)],
        proptest::collection::vec(op(), 4..12),
    )
}

async fn run_case(table_type: TableType, ops: &[Op]) -> TestTable {
    let t = arbor_testkit_tables::create(table_type, true).await;
    let mut run = Run {
        t,
        model: Model::default(),
        step: 0,
    };
    for op in ops {
        run.apply(op).await;
    }
    run.t
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(40),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn test_ttl_model_random_histories_read_as_the_model((table_type, ops) in case()) {
        runtime().block_on(async {
            run_case(table_type, &ops).await;
        });
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 4,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn test_ttl_model_peer_reads_final_table((table_type, ops) in case()) {
        runtime().block_on(async {
            let t = run_case(table_type, &ops).await;
            t.assert_peer_agrees("TTL model peer check", &format!("{ops:?}")).await;
        });
    }
}
