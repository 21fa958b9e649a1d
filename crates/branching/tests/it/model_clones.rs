//! Model-based property test of shallow clones: random short histories over a source table,
//! its working branch `b`, two shallow clones (`c1` from the source's tag `t1`, `c2` from the
//! source's main head or from branch `b`) and, when the history makes it, `c3`, a clone of
//! `c1`'s head (a clone of a clone, or of a detached clone). Steps: writes (upserts and deletes)
//! on every side, merge-on-read compactions, cleans (the hardest policies, with or without
//! archival) and partition-TTL runs (a count policy that expires `region=eu`) on every side, tag
//! creation and drop on every side (dropping the source's `t1`, which `c1` was cloned from,
//! included), detach of a clone.
//!
//! The model ([`Side`]) knows, per table root: its rows and its tags (the rows at each tag). A
//! clone starts with the rows of its source's snapshot and no tags; every side changes only by
//! its own steps (a source's writes, cleans, TTL runs and tag drops never change a clone, and a
//! clone's never change its sources).
//!
//! After every step ([`Run::check`]) every live side (source main, `b`, every clone's main)
//! reads exactly the model's rows, its tags are the model's and each reads exactly the rows it
//! was created with (`tag_reader`), and `arbor_branching::validate` reports no discrepancy.
//! A step on a clone (other than detach) must leave every other location's objects exactly as
//! they were: a clone never writes or deletes in a source (locks and heartbeats aside).
//!
//! Storage: one in-memory storage per location (`mem://src`, `mem://c1`, ...) behind a fixed
//! opener, so detach copies by get + put. Copy-on-write and merge-on-read, table version 9,
//! metadata table on. `test_model_clones_random_histories_read_as_the_model` runs
//! `ARBOR_CLONE_MODEL_CASES` cases (default 20: about 90 s in a debug build on a loaded 2-core
//! machine, 4 to 5 s a case; the branch model's `PROPTEST_CASES` does not apply here, so CI's
//! cost stays bounded).
//! `ARBOR_MODEL_LOG=1` prints every history. `test_model_clones_check_detects_wrong_models`
//! shows the check can fail.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_branching::clone::{clone_table, detach_clone, CloneAt, CloneRequest};
use arbor_branching::{
    clean, create_branch, create_tag, drop_tag, list_tags, open_reader, open_table, tag_reader,
    validate, BranchSource, BranchingError, TagFilter,
};
use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_storage::{ObjectStoreStorage, Storage, StorageError, StorageExt};
use arbor_table::ttl::{PolicyScope, Retention, TtlPolicy, TtlRunOptions, TtlStrategy};
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_timeline::config::{RecordMergeMode, TableType, TableVersion};
use arbor_timeline::layout::{open_location, LocationOpener};
use proptest::prelude::*;

use arbor_testkit_tables::{batch, rows_of, schema, Row};

/// Keys `k0000`..`k0007`: even ids in partition `us`, odd in `eu`.
const KEYS: u32 = 8;
/// Tag names drawn from (so that names collide; `t1` is the one `c1` is cloned from).
const TAG_NAMES: [&str; 2] = ["t1", "t2"];
/// The source's working branch.
const BRANCH: &str = "b";

/// The sides, by index: the source's main and branch, then the clones.
const SRC: usize = 0;
const B: usize = 1;
const C1: usize = 2;
const C2: usize = 3;
const C3: usize = 4;
const NAMES: [&str; 5] = ["src", "b", "c1", "c2", "c3"];
const LOCATIONS: [&str; 4] = ["mem://src", "mem://c1", "mem://c2", "mem://c3"];

/// One step of a history (`on`: a side index; a side that is not live falls back to `c1`).
#[derive(Debug, Clone)]
enum Op {
    /// Upsert (or delete) the keys of the bit mask.
    Write { on: usize, keys: u8, delete: bool },
    /// Merge-on-read: compact (nothing on copy-on-write).
    Compact { on: usize },
    /// `arbor_branching::clean`.
    Clean {
        on: usize,
        policy: CleanPolicy,
        archive: bool,
    },
    /// A partition-TTL run keeping the greatest partition (`us`), then nothing else.
    Ttl { on: usize },
    /// Tag the side's latest write (refused when the name is taken).
    CreateTag { on: usize, name: usize },
    /// Drop the `pick`-th tag of the side (nothing without tags).
    DropTag { on: usize, pick: usize },
    /// Detach clone `C1 + clone` (a second detach only finishes leftovers).
    Detach { clone: usize },
    /// Clone `c1`'s main head into `c3` (once).
    CloneOfClone,
}

fn side() -> impl Strategy<Value = usize> {
    prop_oneof![2 => Just(SRC), 1 => Just(B), 2 => Just(C1), 2 => Just(C2), 1 => Just(C3)]
}

fn policy() -> impl Strategy<Value = CleanPolicy> {
    prop_oneof![
        Just(CleanPolicy::KeepLatestCommits(1)),
        Just(CleanPolicy::KeepLatestFileVersions(1)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        7 => (side(), 1u8..=255, prop_oneof![3 => Just(false), 1 => Just(true)])
            .prop_map(|(on, keys, delete)| Op::Write { on, keys, delete }),
        1 => side().prop_map(|on| Op::Compact { on }),
        4 => (side(), policy(), any::<bool>())
            .prop_map(|(on, policy, archive)| Op::Clean { on, policy, archive }),
        2 => side().prop_map(|on| Op::Ttl { on }),
        2 => (side(), 0..TAG_NAMES.len()).prop_map(|(on, name)| Op::CreateTag { on, name }),
        2 => (side(), 0usize..3).prop_map(|(on, pick)| Op::DropTag { on, pick }),
        2 => (0usize..3).prop_map(|clone| Op::Detach { clone }),
        2 => Just(Op::CloneOfClone),
    ]
}

/// A case: table type, whether `c2` is cloned from branch `b` (else from main's head), the
/// keys of the prelude's second source write, the random steps.
fn case(len: std::ops::Range<usize>) -> impl Strategy<Value = (TableType, bool, u8, Vec<Op>)> {
    (
        prop_oneof![Just(TableType::CopyOnWrite), Just(TableType::MergeOnRead)],
        any::<bool>(),
        1u8..=255,
        proptest::collection::vec(op(), len),
    )
}

/// One side as the model knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Side {
    /// False until created (`c3`).
    live: bool,
    /// Its rows (id -> row).
    rows: BTreeMap<String, Row>,
    /// Its tags: name -> rows at the tag.
    tags: BTreeMap<String, Vec<Row>>,
    /// A clone that was detached.
    detached: bool,
}

impl Side {
    fn sorted(&self) -> Vec<Row> {
        self.rows.values().cloned().collect()
    }
}

/// Fixed in-memory storages by location.
#[derive(Debug)]
struct Opener(Vec<(String, Arc<dyn Storage>)>);

impl LocationOpener for Opener {
    fn open(&self, location: &str) -> arbor_storage::Result<Arc<dyn Storage>> {
        self.0
            .iter()
            .find(|(l, _)| l == location)
            .map(|(_, s)| s.clone())
            .ok_or_else(|| StorageError::NotFound {
                path: location.to_string(),
            })
    }
}

/// A history under test and its model.
struct Run {
    opener: Opener,
    table_type: TableType,
    sides: [Side; 5],
    step: usize,
    log: Vec<String>,
}

/// Returns `Err(message)` from the enclosing function when `cond` does not hold.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
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

/// The location a side's table lives at, and its branch.
fn place(side: usize) -> (&'static str, Option<&'static str>) {
    match side {
        SRC => (LOCATIONS[0], None),
        B => (LOCATIONS[0], Some(BRANCH)),
        other => (LOCATIONS[other - 1], None),
    }
}

fn keep_us() -> TtlPolicy {
    TtlPolicy {
        strategy: TtlStrategy::Count,
        retain: Retention::Count(1),
        scope: PolicyScope::Default { fields: vec![] },
        time_field: None,
        format: None,
    }
}

impl Run {
    async fn new(table_type: TableType) -> Run {
        let opener = Opener(
            LOCATIONS
                .iter()
                .map(|l| {
                    let s: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
                    (l.to_string(), s)
                })
                .collect(),
        );
        Table::create(
            opener.open(LOCATIONS[0]).unwrap(),
            CreateOptions {
                name: "t".into(),
                table_type,
                record_key_fields: vec!["id".into()],
                partition_fields: vec!["region".into()],
                hive_style_partitioning: true,
                ordering_field: Some("ts".into()),
                merge_mode: Some(RecordMergeMode::EventTimeOrdering),
                schema: schema(),
                metadata_table: true,
                table_version: TableVersion::Nine,
                base_format: Default::default(),
            },
        )
        .await
        .unwrap();
        let mut sides: [Side; 5] = Default::default();
        sides[SRC].live = true;
        Run {
            opener,
            table_type,
            sides,
            step: 0,
            log: Vec::new(),
        }
    }

    /// The side `on` resolves to (a side that is not live: `c1`).
    fn resolve(&self, on: usize) -> usize {
        if self.sides.get(on).is_some_and(|s| s.live) {
            on
        } else {
            C1
        }
    }

    /// A write handle of side `s`, opened as every caller opens a location.
    async fn handle(&self, s: usize) -> Table {
        let (loc, branch) = place(s);
        let storage = open_location(loc, &self.opener).await.unwrap();
        open_table(storage, branch).await.unwrap()
    }

    /// Every object of every location but `except`'s, with its version (locks and
    /// heartbeats aside).
    async fn others(&self, except: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (loc, storage) in &self.opener.0 {
            if loc == except {
                continue;
            }
            for o in storage.list_all("").await.unwrap() {
                if o.key.starts_with(".hoodie/.locks") || o.key.contains(".heartbeat") {
                    continue;
                }
                out.push((
                    format!("{loc}/{}", o.key),
                    format!("{} {:?}", o.size, o.version),
                ));
            }
        }
        out.sort();
        out
    }

    async fn clone_into(&mut self, target: usize, from: usize, at: CloneAt) -> String {
        let (source, branch) = place(from);
        let (to, _) = place(target);
        let at = match (at, branch) {
            (CloneAt::Main, Some(b)) => CloneAt::Branch(b.to_string()),
            (at, _) => at,
        };
        let out = clone_table(
            &self.opener,
            &CloneRequest {
                source: source.to_string(),
                target: to.to_string(),
                at: at.clone(),
                tag_branch: None,
                deep: false,
            },
        )
        .await
        .unwrap();
        let rows = match &at {
            CloneAt::Tag(t) => self.sides[from].tags[t.as_str()].clone(),
            _ => self.sides[from].sorted(),
        };
        self.sides[target] = Side {
            live: true,
            rows: rows.into_iter().map(|r| (r.0.clone(), r)).collect(),
            tags: BTreeMap::new(),
            detached: false,
        };
        format!(
            "clone {} {at:?} into {}: at {}",
            NAMES[from], NAMES[target], out.instant
        )
    }

    /// The prelude: two source writes, tag `t1`, a third write, branch `b` with one write,
    /// `c1` from `t1`, `c2` from main's head or from `b`.
    async fn prelude(&mut self, c2_from_branch: bool, second: u8) {
        for keys in [0xff, second] {
            let what = self
                .apply(&Op::Write {
                    on: SRC,
                    keys,
                    delete: false,
                })
                .await;
            self.log.push(what);
        }
        let what = self.apply(&Op::CreateTag { on: SRC, name: 0 }).await;
        self.log.push(what);
        let what = self
            .apply(&Op::Write {
                on: SRC,
                keys: !second | 1,
                delete: false,
            })
            .await;
        self.log.push(what);
        create_branch(&self.handle(SRC).await, BRANCH, BranchSource::MainHead)
            .await
            .unwrap();
        self.sides[B] = Side {
            live: true,
            ..self.sides[SRC].clone()
        };
        self.log.push("create branch b".to_string());
        let what = self
            .apply(&Op::Write {
                on: B,
                keys: second.rotate_left(3),
                delete: false,
            })
            .await;
        self.log.push(what);
        let what = self
            .clone_into(C1, SRC, CloneAt::Tag(TAG_NAMES[0].to_string()))
            .await;
        self.log.push(what);
        let from = if c2_from_branch { B } else { SRC };
        let what = self.clone_into(C2, from, CloneAt::Main).await;
        self.log.push(what);
    }

    async fn apply(&mut self, op: &Op) -> String {
        self.step += 1;
        let step = self.step;
        match op {
            Op::Write { on, keys, delete } => {
                let s = self.resolve(*on);
                let rows: Vec<Row> = (0..KEYS)
                    .filter(|i| keys & (1 << i) != 0)
                    .map(|i| row(i, step))
                    .collect();
                let kind = if *delete {
                    WriteOperation::Delete
                } else {
                    WriteOperation::Upsert
                };
                let t = self
                    .handle(s)
                    .await
                    .write(kind, vec![batch(&rows)])
                    .await
                    .unwrap()
                    .instant;
                let m = &mut self.sides[s];
                for r in rows {
                    if *delete {
                        m.rows.remove(&r.0);
                    } else {
                        m.rows.insert(r.0.clone(), r);
                    }
                }
                format!(
                    "{} {}: {t}",
                    if *delete { "delete" } else { "upsert" },
                    NAMES[s]
                )
            }
            Op::Compact { on } => {
                let s = self.resolve(*on);
                if self.table_type != TableType::MergeOnRead {
                    return "compact: copy-on-write".to_string();
                }
                let done = self.handle(s).await.compact().await.unwrap();
                format!("compact {}: {}", NAMES[s], done.len())
            }
            Op::Clean {
                on,
                policy,
                archive,
            } => {
                let s = self.resolve(*on);
                let out = clean(
                    &self.handle(s).await,
                    CleanOptions {
                        policy: *policy,
                        archive: *archive,
                        ..CleanOptions::default()
                    },
                )
                .await
                .unwrap();
                format!(
                    "clean {} {policy:?} archive {archive}: deleted {}",
                    NAMES[s], out.deleted
                )
            }
            Op::Ttl { on } => {
                let s = self.resolve(*on);
                let t = self.handle(s).await;
                t.set_ttl_policy(keep_us()).await.unwrap();
                let out = self
                    .handle(s)
                    .await
                    .run_ttl(&TtlRunOptions::default())
                    .await
                    .unwrap();
                let expired = out.plan.expired_partitions();
                assert!(
                    expired.iter().all(|p| p == "region=eu"),
                    "ttl {}: expired {expired:?}",
                    NAMES[s]
                );
                let m = &mut self.sides[s];
                let has = |r: &str| m.rows.values().any(|row| row.1 == r);
                if has("us") && has("eu") {
                    assert_eq!(expired, vec!["region=eu"], "ttl {}", NAMES[s]);
                }
                for p in &expired {
                    m.rows.retain(|_, row| format!("region={}", row.1) != *p);
                }
                format!("ttl {}: expired {expired:?}", NAMES[s])
            }
            Op::CreateTag { on, name } => {
                let s = self.resolve(*on);
                let name = TAG_NAMES[*name];
                let got = create_tag(&self.handle(s).await, name, None, None).await;
                let m = &mut self.sides[s];
                if m.tags.contains_key(name) {
                    let e = got.unwrap_err();
                    assert!(matches!(e, BranchingError::Refused { .. }), "{e}");
                    return format!("tag {name} on {}: refused", NAMES[s]);
                }
                let info = got.unwrap();
                m.tags
                    .insert(name.to_string(), m.rows.values().cloned().collect());
                format!("tag {name} on {} at {}", NAMES[s], info.instant)
            }
            Op::DropTag { on, pick } => {
                let s = self.resolve(*on);
                let names: Vec<String> = self.sides[s].tags.keys().cloned().collect();
                let Some(name) = names.get(pick % names.len().max(1)) else {
                    return format!("drop tag on {}: none", NAMES[s]);
                };
                assert!(drop_tag(&self.handle(s).await, name, false, false)
                    .await
                    .unwrap());
                self.sides[s].tags.remove(name);
                format!("drop tag {name} on {}", NAMES[s])
            }
            Op::Detach { clone } => {
                let s = self.resolve(C1 + clone % 3);
                let (loc, _) = place(s);
                let out = detach_clone(&self.opener, loc).await.unwrap();
                assert_eq!(out.already_detached, self.sides[s].detached, "{out:?}");
                self.sides[s].detached = true;
                format!(
                    "detach {}: copied {}, released {}, pins removed {}",
                    NAMES[s],
                    out.files_copied,
                    out.files_released,
                    out.pins_removed.len()
                )
            }
            Op::CloneOfClone => {
                if self.sides[C3].live {
                    return "clone of a clone: done already".to_string();
                }
                self.clone_into(C3, C1, CloneAt::Main).await
            }
        }
    }

    /// The checks of the module doc: `Err` names the first discrepancy.
    async fn check(&self) -> Result<(), String> {
        for (s, side) in self.sides.iter().enumerate() {
            if !side.live {
                continue;
            }
            let l = NAMES[s];
            let (loc, branch) = place(s);
            let storage = open_location(loc, &self.opener)
                .await
                .map_err(|e| format!("{l}: opening: {e}"))?;
            let reader = open_reader(storage.clone(), branch).await.unwrap();
            let got = rows_of(
                &reader
                    .snapshot(None)
                    .await
                    .map_err(|e| format!("{l}: reading: {e}"))?,
            );
            ensure!(
                got == side.sorted(),
                "{l}: rows {got:?}, model {:?}",
                side.sorted()
            );
            let tags: Vec<String> = list_tags(&storage, branch, TagFilter::All)
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.name)
                .collect();
            let want: Vec<String> = side.tags.keys().cloned().collect();
            ensure!(tags == want, "{l}: tags {tags:?}, model {want:?}");
            for (name, rows) in &side.tags {
                let (reader, at) = tag_reader(storage.clone(), branch, name)
                    .await
                    .map_err(|e| format!("{l}: tag {name}: {e}"))?;
                let got = rows_of(
                    &reader
                        .snapshot(Some(&at))
                        .await
                        .map_err(|e| format!("{l}: reading tag {name}: {e}"))?,
                );
                ensure!(got == *rows, "{l}: tag {name} rows {got:?}, model {rows:?}");
            }
            let report = validate(&storage, branch)
                .await
                .map_err(|e| format!("{l}: validate: {e}"))?;
            ensure!(
                report.discrepancies.is_empty(),
                "{l}: metadata table vs storage: {:?}",
                report.discrepancies
            );
        }
        Ok(())
    }

    async fn check_or_panic(&self) {
        if let Err(e) = self.check().await {
            panic!("{e}\nhistory:\n  {}", self.log.join("\n  "));
        }
    }

    /// Runs the prelude (checked at its end), then `ops`, checking after every step; a step on
    /// a clone (but detach) must leave every other location as it was.
    async fn run(&mut self, c2_from_branch: bool, second: u8, ops: &[Op]) {
        self.prelude(c2_from_branch, second).await;
        self.check_or_panic().await;
        for op in ops {
            let on_clone = match op {
                Op::Write { on, .. }
                | Op::Compact { on }
                | Op::Clean { on, .. }
                | Op::Ttl { on }
                | Op::CreateTag { on, .. }
                | Op::DropTag { on, .. } => Some(self.resolve(*on)).filter(|s| *s >= C1),
                Op::Detach { .. } | Op::CloneOfClone => None,
            };
            let before = match on_clone {
                Some(s) => Some(self.others(place(s).0).await),
                None => None,
            };
            let what = self.apply(op).await;
            self.log.push(format!("{op:?} => {what}"));
            if let (Some(s), Some(before)) = (on_clone, before) {
                let after = self.others(place(s).0).await;
                if after != before {
                    panic!(
                        "{} changed another location\nhistory:\n  {}",
                        NAMES[s],
                        self.log.join("\n  ")
                    );
                }
            }
            self.check_or_panic().await;
        }
        if std::env::var("ARBOR_MODEL_LOG").is_ok() {
            eprintln!("CASE {:?}\n  {}", self.table_type, self.log.join("\n  "));
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
        cases: std::env::var("ARBOR_CLONE_MODEL_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(20),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn test_model_clones_random_histories_read_as_the_model(
        (table_type, c2_from_branch, second, ops) in case(4..12)
    ) {
        runtime().block_on(async {
            let mut run = Run::new(table_type).await;
            run.run(c2_from_branch, second, &ops).await;
        });
    }
}

/// One fixed history (every kind of step, on every side), then deliberately wrong models:
/// each must be reported by [`Run::check`].
#[tokio::test]
async fn test_model_clones_check_detects_wrong_models() {
    let mut run = Run::new(TableType::MergeOnRead).await;
    let clean = |on| Op::Clean {
        on,
        policy: CleanPolicy::KeepLatestFileVersions(1),
        archive: true,
    };
    run.run(
        false,
        0b1111,
        &[
            Op::DropTag { on: SRC, pick: 0 },
            clean(SRC),
            Op::Write {
                on: C1,
                keys: 0b11,
                delete: false,
            },
            Op::Ttl { on: C2 },
            clean(C2),
            Op::CloneOfClone,
            Op::Write {
                on: C3,
                keys: 0b100,
                delete: true,
            },
            Op::Detach { clone: 0 },
            clean(SRC),
            Op::CreateTag { on: C3, name: 1 },
            Op::Compact { on: C1 },
        ],
    )
    .await;
    assert!(
        run.sides[C3].live && run.sides[C1].detached,
        "{:?}",
        run.log
    );
    run.check().await.unwrap();
    let right = run.sides.clone();
    let mut wrong: Vec<(&str, [Side; 5])> = Vec::new();
    let mut m = right.clone();
    m[C1].rows = m[SRC].rows.clone();
    wrong.push(("c1: rows", m));
    let mut m = right.clone();
    m[C2].rows.retain(|_, r| r.1 != "us");
    wrong.push(("c2: rows", m));
    let mut m = right.clone();
    m[C3].tags.get_mut("t2").unwrap().pop();
    wrong.push(("c3: tag t2 rows", m));
    let mut m = right.clone();
    m[SRC].tags.insert("t1".to_string(), Vec::new());
    wrong.push(("src: tags", m));
    let mut m = right.clone();
    m[B].rows.clear();
    wrong.push(("b: rows", m));
    for (want, sides) in wrong {
        run.sides = sides;
        let err = run.check().await.unwrap_err();
        assert!(err.contains(want), "expected {want:?}, got {err}");
    }
}
