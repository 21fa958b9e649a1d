//! Model-based property test of savepoints, cleaning and archival: random sequences of writes
//! (copy-on-write and merge-on-read), savepoints, savepoint deletions, cleans with random
//! policies, archivals, compactions and restores, checked after every step against an
//! in-memory model of the committed history.
//!
//! After every step:
//! - the latest snapshot reads exactly the model's rows;
//! - every savepointed instant reads (time travel) exactly the model's snapshot at it;
//! - every instant the cleans kept reads exactly the model's snapshot (see
//!   [`History::clean`]);
//! - every file named by the savepoint, pending and retention protection sources exists;
//! - the metadata table agrees with storage;
//! - the table is still at the version it was created at (9 or 8, drawn per case).
//!
//! `test_model_random_histories_read_as_the_model` runs 250 cases in every CI run, each
//! run drawing new histories (`PROPTEST_CASES` overrides; 500 cases took 61 s)
//! on in-memory storage; `test_model_random_histories_peer_reads_final_table` runs a few cases
//! on the local file system and has hudi-rs read the final table.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_cleaner::protection::ProtectionSource;
use arbor_cleaner::{
    clean, create_savepoint, delete_savepoint, list_savepoints, CleanOptions, CleanPolicy,
    CleanerError, PendingProtection, ProtectionContext, RetentionProtection, SavepointProtection,
};
use arbor_storage::{ObjectStoreStorage, Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_timeline::archive::{ArchivalPolicy, Archiver};
use arbor_timeline::config::{RecordMergeMode, TableType, TableVersion};
use arbor_timeline::{ActiveTimeline, InstantTime, TableConfig};
use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use proptest::prelude::*;

use arbor_testkit_tables::{batch, rows_of, schema, Row, TestTable};

/// Keys `k0000`..`k0007`: even ids in partition `us`, odd in `eu`.
const KEYS: u32 = 8;

/// One step of a history.
#[derive(Debug, Clone)]
enum Op {
    /// Upsert the keys of the bit mask (name and `ts` from the step number).
    Upsert { keys: u8 },
    /// Delete the keys of the bit mask (present or not).
    Delete { keys: u8 },
    /// Savepoint the `back`-th latest completed write (0: the latest).
    Savepoint { back: usize },
    /// Delete the `pick`-th savepoint (modulo their number); with none, a refused deletion.
    DeleteSavepoint { pick: usize },
    /// Clean with a policy.
    Clean(CleanPolicy),
    /// Compact the metadata table's FILES partition, then archive the data timeline with a
    /// small policy (keep 1, start above 2) so that archival happens in short histories.
    Archive,
    /// Merge-on-read: run pending compactions, then schedule and run one (no-op on
    /// copy-on-write).
    Compact,
    /// Merge-on-read: schedule a compaction and leave it pending (no-op on copy-on-write).
    ScheduleCompaction,
    /// Restore to the `pick`-th savepoint (modulo their number; no-op without savepoints).
    Restore { pick: usize },
}

fn policy() -> impl Strategy<Value = CleanPolicy> {
    prop_oneof![
        (1usize..4).prop_map(CleanPolicy::KeepLatestCommits),
        (1usize..3).prop_map(CleanPolicy::KeepLatestFileVersions),
        // Huge: keep everything; 0: keep only the latest snapshot.
        prop_oneof![Just(1_000_000u64), Just(0u64)].prop_map(CleanPolicy::KeepLatestByHours),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u8..=255).prop_map(|keys| Op::Upsert { keys }),
        2 => (1u8..=255).prop_map(|keys| Op::Delete { keys }),
        3 => prop_oneof![3 => Just(0usize), 2 => 1usize..3, 1 => 3usize..8]
            .prop_map(|back| Op::Savepoint { back }),
        1 => (0usize..4).prop_map(|pick| Op::DeleteSavepoint { pick }),
        4 => policy().prop_map(Op::Clean),
        1 => Just(Op::Archive),
        1 => Just(Op::Compact),
        1 => Just(Op::ScheduleCompaction),
        2 => (0usize..4).prop_map(|pick| Op::Restore { pick }),
    ]
}

/// A case: table type and version (9, the default, or 8), metadata table on or off, the steps.
fn case(
    len: std::ops::Range<usize>,
) -> impl Strategy<Value = ((TableType, TableVersion), bool, Vec<Op>)> {
    (
        (
            prop_oneof![Just(TableType::CopyOnWrite), Just(TableType::MergeOnRead)],
            prop_oneof![Just(TableVersion::Nine), Just(TableVersion::Eight)],
        ),
        prop_oneof![4 => Just(true), 1 => Just(false)],
        proptest::collection::vec(op(), len),
    )
}

/// The committed history as the model knows it.
#[derive(Debug, Default)]
struct History {
    /// The table's rows now (id -> row).
    current: BTreeMap<String, Row>,
    /// Rows after each write by requested time (compactions: the rows when scheduled). Time
    /// travel to `t` reads the entry at or before `t`.
    snapshots: BTreeMap<InstantTime, Vec<Row>>,
    /// Completed writes (commits, deltacommits, compactions) in completion order (requested
    /// times): the order the commits policy counts in.
    completed: Vec<InstantTime>,
    /// A scheduled compaction not run yet.
    pending_compaction: Option<InstantTime>,
    /// Savepointed instants.
    savepoints: BTreeSet<InstantTime>,
    /// Instants whose snapshot every clean so far kept (so they must read exactly as the model
    /// says): every write enters; a clean keeps the ones in its retention window or
    /// savepointed at the time (and the latest).
    kept: BTreeSet<InstantTime>,
    /// The last clean's policy (the retention source checked after every step).
    last_policy: Option<CleanPolicy>,
}

impl History {
    fn rows(&self) -> Vec<Row> {
        self.current.values().cloned().collect()
    }

    fn snapshot_at(&self, t: &InstantTime) -> Vec<Row> {
        self.snapshots
            .range(..=t.clone())
            .next_back()
            .map(|(_, r)| r.clone())
            .unwrap_or_default()
    }

    fn latest(&self) -> Option<&InstantTime> {
        self.completed.last()
    }

    /// A write `t` completed with the current rows.
    fn written(&mut self, t: InstantTime) {
        self.snapshots.insert(t.clone(), self.rows());
        self.completed.push(t.clone());
        self.kept.insert(t);
    }

    /// A clean with `policy` ran: an instant stays readable only if the policy's window or a
    /// savepoint holds it (or it is the latest). The window of `KeepLatestCommits(n)` is the
    /// `n` latest completed writes; `KeepLatestByHours` holds every write here (a huge `h`) or
    /// none (`h = 0`); `KeepLatestFileVersions` holds no instant (only the latest snapshot).
    fn clean(&mut self, policy: CleanPolicy) {
        let window: BTreeSet<InstantTime> = match policy {
            CleanPolicy::KeepLatestCommits(n) => {
                self.completed.iter().rev().take(n).cloned().collect()
            }
            CleanPolicy::KeepLatestByHours(h) if h > 0 => self.completed.iter().cloned().collect(),
            _ => BTreeSet::new(),
        };
        let latest = self.latest().cloned();
        self.kept.retain(|t| {
            window.contains(t) || self.savepoints.contains(t) || Some(t) == latest.as_ref()
        });
        self.last_policy = Some(policy);
    }

    /// The table was restored to savepoint `t`: everything requested after `t` is gone.
    fn restore(&mut self, t: &InstantTime) {
        let rows = self.snapshot_at(t);
        self.current = rows.into_iter().map(|r| (r.0.clone(), r)).collect();
        self.snapshots.retain(|s, _| s <= t);
        self.completed.retain(|s| s <= t);
        self.kept.retain(|s| s <= t);
        self.savepoints.retain(|s| s <= t);
        if self.pending_compaction.as_ref().is_some_and(|c| c > t) {
            self.pending_compaction = None;
        }
    }
}

/// A table under test and its model.
struct Run {
    storage: Arc<dyn Storage>,
    table: Table,
    history: History,
    step: usize,
}

fn row(i: u32, step: usize) -> Row {
    let region = if i % 2 == 0 { "us" } else { "eu" };
    (
        format!("k{i:04}"),
        region.to_string(),
        i64::try_from(step).unwrap(),
        format!("s{step}-{i}"),
    )
}

fn keys_of(mask: u8) -> impl Iterator<Item = u32> {
    (0..KEYS).filter(move |i| mask & (1 << i) != 0)
}

/// A delete batch: key and partition columns only.
fn delete_batch(rows: &[Row]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.0.clone()),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.1.clone()),
            )),
        ],
    )
    .unwrap()
}

async fn create_table(
    storage: Arc<dyn Storage>,
    table_type: TableType,
    version: TableVersion,
    mdt: bool,
) -> Table {
    Table::create(
        storage,
        CreateOptions {
            name: "t".into(),
            table_type,
            record_key_fields: vec!["id".into()],
            partition_fields: vec!["region".into()],
            hive_style_partitioning: true,
            ordering_field: Some("ts".into()),
            merge_mode: Some(RecordMergeMode::EventTimeOrdering),
            schema: schema(),
            metadata_table: mdt,
            table_version: version,
            base_format: Default::default(),
        },
    )
    .await
    .unwrap()
}

fn is_refused(e: &CleanerError) -> bool {
    matches!(e, CleanerError::Refused { .. })
}

impl Run {
    fn is_mor(&self) -> bool {
        self.table.config().table_type() == TableType::MergeOnRead
    }

    async fn apply(&mut self, op: &Op) {
        self.step += 1;
        let step = self.step;
        match op {
            Op::Upsert { keys } => {
                let rows: Vec<Row> = keys_of(*keys).map(|i| row(i, step)).collect();
                let t = self
                    .table
                    .write(WriteOperation::Upsert, vec![batch(&rows)])
                    .await
                    .unwrap()
                    .instant;
                for r in rows {
                    self.history.current.insert(r.0.clone(), r);
                }
                self.history.written(t);
            }
            Op::Delete { keys } => {
                let rows: Vec<Row> = keys_of(*keys).map(|i| row(i, step)).collect();
                let t = self
                    .table
                    .write(WriteOperation::Delete, vec![delete_batch(&rows)])
                    .await
                    .unwrap()
                    .instant;
                for r in rows {
                    self.history.current.remove(&r.0);
                }
                self.history.written(t);
            }
            Op::Savepoint { back } => {
                let completed = &self.history.completed;
                let Some(t) = completed
                    .iter()
                    .rev()
                    .nth((*back).min(completed.len().saturating_sub(1)))
                    .cloned()
                else {
                    return;
                };
                let latest = self.history.latest() == Some(&t);
                match create_savepoint(&self.table, Some(&t), "model").await {
                    Ok(info) => {
                        assert_eq!(info.instant, t);
                        assert!(
                            self.history.savepoints.insert(t.clone()),
                            "savepoint {t} created twice"
                        );
                        // Accepted: its snapshot must read as the model says from now on
                        // (checked after the step even if the cleans did not keep it).
                        self.history.kept.insert(t);
                    }
                    Err(e) => {
                        assert!(is_refused(&e), "savepoint {t}: {e}");
                        // Refusals are for instants savepointed already, archived, or whose
                        // snapshot a clean may have touched; never for a fresh latest write.
                        assert!(
                            !latest || self.history.savepoints.contains(&t),
                            "savepoint of the latest write {t} refused: {e}"
                        );
                    }
                }
            }
            Op::DeleteSavepoint { pick } => {
                let sps: Vec<InstantTime> = self.history.savepoints.iter().cloned().collect();
                if sps.is_empty() {
                    if let Some(t) = self.history.latest().cloned() {
                        let e = delete_savepoint(&self.table, &t).await.unwrap_err();
                        assert!(is_refused(&e), "{e}");
                    }
                    return;
                }
                let t = &sps[pick % sps.len()];
                delete_savepoint(&self.table, t).await.unwrap();
                self.history.savepoints.remove(t);
            }
            Op::Clean(policy) => {
                let out = clean(
                    &self.table,
                    &CleanOptions {
                        policy: *policy,
                        ..CleanOptions::default()
                    },
                )
                .await
                .unwrap();
                assert_eq!(out.instant.is_some(), out.planned() > 0, "{out:?}");
                self.history.clean(*policy);
            }
            Op::Archive => self.archive().await,
            Op::Compact => {
                if !self.is_mor() {
                    return;
                }
                for done in self.table.compact().await.unwrap() {
                    let t = done.instant.clone();
                    if self.history.pending_compaction.as_ref() == Some(&t) {
                        self.history.pending_compaction = None;
                        self.history.completed.push(t.clone());
                        self.history.kept.insert(t);
                    } else {
                        self.history.written(t);
                    }
                }
                assert!(self.history.pending_compaction.is_none());
            }
            Op::ScheduleCompaction => {
                if !self.is_mor() || self.history.pending_compaction.is_some() {
                    return;
                }
                let (storage, layout, generator) = (
                    self.table.view_storage(),
                    self.table.layout(),
                    self.table.generator(),
                );
                let scheduled = self
                    .table
                    .with_table_lock(async {
                        arbor_table::write::compaction::schedule_compaction(
                            storage, layout, generator,
                        )
                        .await
                    })
                    .await
                    .unwrap();
                if let Some(t) = scheduled {
                    self.history
                        .snapshots
                        .insert(t.clone(), self.history.rows());
                    self.history.pending_compaction = Some(t);
                }
            }
            Op::Restore { pick } => {
                let sps: Vec<InstantTime> = self.history.savepoints.iter().cloned().collect();
                if sps.is_empty() {
                    return;
                }
                let t = sps[pick % sps.len()].clone();
                let newer: Vec<&InstantTime> = sps.iter().filter(|s| **s > t).collect();
                match arbor_cleaner::restore::restore(&self.table, &t).await {
                    Ok(out) => {
                        assert!(newer.is_empty(), "restore to {t} past savepoints {newer:?}");
                        assert!(out.rolled_back.iter().all(|r| *r > t), "{out:?}");
                        self.history.restore(&t);
                    }
                    Err(e) => {
                        assert!(
                            is_refused(&e) && !newer.is_empty(),
                            "restore to {t} (newer savepoints {newer:?}): {e}"
                        );
                        assert!(e.to_string().contains(newer[0].as_str()), "{e}");
                    }
                }
            }
        }
    }

    /// Op::Archive: the metadata table's FILES partition is compacted first (archival never
    /// passes the metadata table's latest compaction), then the data timeline is archived
    /// keeping one commit, under the table lock.
    async fn archive(&self) {
        let storage = self.table.view_storage();
        let layout = self.table.layout();
        let generator = self.table.generator();
        self.table
            .with_table_lock(async {
                if let Some(writer) = arbor_mdt::MdtWriter::open(storage.clone()).await? {
                    let data = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
                    if let Some(mdt) =
                        arbor_mdt::MetadataTable::open_with(storage.clone(), &data).await?
                    {
                        arbor_mdt::compaction::compact_if_due(&writer, &mdt, 1, generator).await?;
                    }
                }
                Archiver::new(
                    storage.clone(),
                    layout.clone(),
                    ArchivalPolicy {
                        min_commits: 1,
                        max_commits: 2,
                        ..ArchivalPolicy::default()
                    },
                )?
                .run()
                .await?;
                Ok::<_, CleanerError>(())
            })
            .await
            .unwrap();
    }

    /// The checks of the module doc.
    async fn check(&self, what: &str) {
        let h = &self.history;
        // No savepoint, clean, archival, compaction or restore changes the table's version.
        let config = TableConfig::load(self.storage.as_ref(), ".hoodie")
            .await
            .unwrap();
        assert_eq!(
            config.version(),
            self.table.config().version(),
            "{what}: table version"
        );
        let reader = TableReader::open(self.storage.clone()).await.unwrap();
        assert_eq!(
            rows_of(&reader.snapshot(None).await.unwrap()),
            h.rows(),
            "{what}: latest snapshot"
        );
        for t in h.savepoints.union(&h.kept) {
            let got = rows_of(
                &reader
                    .snapshot(Some(t))
                    .await
                    .unwrap_or_else(|e| panic!("{what}: reading as of {t}: {e}")),
            );
            assert_eq!(
                got,
                h.snapshot_at(t),
                "{what}: as of {t} (savepointed: {}, kept: {})",
                h.savepoints.contains(t),
                h.kept.contains(t)
            );
        }
        let listed: BTreeSet<InstantTime> =
            list_savepoints(self.table.view_storage(), self.table.layout())
                .await
                .unwrap()
                .into_iter()
                .map(|s| s.instant)
                .collect();
        assert_eq!(listed, h.savepoints, "{what}: savepoints");

        let ctx = ProtectionContext {
            storage: &self.storage,
            view: reader.view(),
            now: chrono::Utc::now(),
        };
        let present: BTreeSet<String> = self
            .storage
            .list_all("")
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect();
        let sources: Vec<Box<dyn ProtectionSource>> = vec![
            Box::new(SavepointProtection),
            Box::new(PendingProtection),
            Box::new(RetentionProtection {
                policy: h.last_policy.unwrap_or(CleanPolicy::KeepLatestCommits(1)),
            }),
        ];
        for s in &sources {
            let protected = s.protected(&ctx).await.unwrap();
            let missing: Vec<&String> = protected.difference(&present).collect();
            assert!(
                missing.is_empty(),
                "{what}: files protected by {} are missing: {missing:?}",
                s.name()
            );
        }
        let report = arbor_mdt::validate::validate_table(self.storage.clone())
            .await
            .unwrap();
        assert!(
            report.discrepancies.is_empty(),
            "{what}: metadata table vs storage: {:?}",
            report.discrepancies
        );
    }

    /// Runs `ops` after an initial upsert of every key, checking after every step.
    async fn run(&mut self, ops: &[Op]) {
        self.apply(&Op::Upsert { keys: 0xff }).await;
        self.check("initial upsert").await;
        for (i, op) in ops.iter().enumerate() {
            self.apply(op).await;
            self.check(&format!("step {i} {op:?}")).await;
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(250),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn test_model_random_histories_read_as_the_model(
        ((table_type, version), mdt, ops) in case(3..9)
    ) {
        runtime().block_on(async {
            let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
            let table = create_table(storage.clone(), table_type, version, mdt).await;
            let mut run = Run { storage, table, history: History::default(), step: 0 };
            run.run(&ops).await;
        });
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 10,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn test_model_random_histories_peer_reads_final_table(
        ((table_type, version), ops) in case(6..9).prop_map(|(t, _, ops)| (t, ops))
    ) {
        runtime().block_on(async {
            let t: TestTable = arbor_testkit_tables::create_at(table_type, true, version).await;
            let mut run = Run {
                storage: t.storage.clone(),
                table: t.table.clone(),
                history: History::default(),
                step: 0,
            };
            run.run(&ops).await;
            t.assert_peer_agrees("cleaner peer check", &format!("{ops:?}")).await;
        });
    }
}
