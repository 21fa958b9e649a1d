//! Model-based property test of `arbor_branching::merge` (and `diff`): random histories on main
//! and a working branch `dev` (upserts with random ordering values, deletes, partition
//! deletes, merge-on-read compactions, cleans keeping one commit, so every state a later merge
//! compares from must be kept by the cleaner's merge-base protection) interleaved with merges
//! in both directions (`dev` into main, main into `dev`) under a random strategy, some as dry
//! runs, and rebases of `dev` onto main, checked against a record-level three-way-merge model
//! (a rebase is the model's merge of `dev` into main, given to `dev`; both directions then
//! compare from main's rows).
//!
//! The model keeps each root's rows and, per merge direction, the pair of states the next
//! merge compares against (the source's and the target's rows when they last merged, the
//! branch's base before that) and the partitions each root deleted since. A merge in the model
//! ([`Model::merge`]):
//! - a key changed on one side only (its record differs from that side's since-state) takes the
//!   source's record when the source changed it;
//! - a key changed on both sides to different outcomes is a conflict: `fail` refuses, `source`
//!   and `target` take one side, `ordering` takes the record with the greater `ts` (ties: the
//!   source; a delete carries its deleted record's `ts`);
//! - a partition one side deleted while the other changed keys in it is a conflict; `source`
//!   then undoes the target's changes there, `target` drops the source's;
//! - a commit happens when anything is applied, and only then do the since-states move.
//!
//! After every step: main and `dev` read the model's rows; `arbor_branching::validate` is clean
//! on both; each merge's outcome (conflict count, whether it committed) and each refusal are
//! the model's; a refused merge or a dry run leaves main as it was; `diff main dev` lists
//! exactly the keys whose rows differ. At the end of each case hudi-rs reads main with the
//! same rows (skipped visibly without the peer outside CI).
//!
//! 40 cases per run (new histories each run; `PROPTEST_CASES` overrides), copy-on-write and
//! merge-on-read, with and without a record index and a secondary index.

use std::collections::{BTreeMap, BTreeSet};

use arbor_branching::diff::{ChangeKind, CHANGE_TYPE};
use arbor_branching::select_root;
use arbor_branching::{
    clean, create_branch, diff, merge, rebase, validate, BranchSource, BranchingError,
    MergeOptions, MergeStrategy, RefSpec,
};
use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_table::validate_indexes;
use arbor_table::{Table, WriteOperation};
use arbor_testkit_tables::{create, Row, TestTable};
use arbor_timeline::config::TableType;
use arrow::array::AsArray;
use futures::TryStreamExt;
use proptest::prelude::*;

/// Keys `k0`..`k5`: even in `us`, odd in `eu`.
const KEYS: u8 = 6;
const REGIONS: [&str; 2] = ["us", "eu"];

fn region_of(k: u8) -> &'static str {
    if k % 2 == 0 {
        "us"
    } else {
        "eu"
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum On {
    Main,
    Dev,
}

#[derive(Debug, Clone)]
enum Op {
    Upsert {
        on: On,
        keys: u8,
        ts: i64,
    },
    Delete {
        on: On,
        keys: u8,
    },
    DeletePartition {
        on: On,
        region: usize,
    },
    /// `insert_overwrite` of one region with the keys of `keys` that fall in it.
    Overwrite {
        on: On,
        region: usize,
        keys: u8,
        ts: i64,
    },
    Compact {
        on: On,
    },
    /// Clustering of every small file slice, sorted by `ts` (rows unchanged).
    Cluster {
        on: On,
    },
    Clean {
        on: On,
    },
    Merge {
        into_dev: bool,
        strategy: MergeStrategy,
        dry_run: bool,
    },
    Rebase {
        strategy: MergeStrategy,
    },
}

fn on() -> impl Strategy<Value = On> {
    prop_oneof![Just(On::Main), Just(On::Dev)]
}

fn op() -> impl Strategy<Value = Op> {
    let strategy = prop_oneof![
        Just(MergeStrategy::Fail),
        Just(MergeStrategy::Source),
        Just(MergeStrategy::Target),
        Just(MergeStrategy::Ordering),
    ];
    prop_oneof![
        5 => (on(), 1u8..64, 0i64..8).prop_map(|(on, keys, ts)| Op::Upsert { on, keys, ts }),
        2 => (on(), 1u8..64).prop_map(|(on, keys)| Op::Delete { on, keys }),
        1 => (on(), 0usize..2).prop_map(|(on, region)| Op::DeletePartition { on, region }),
        1 => (on(), 0usize..2, 1u8..=255, 0i64..8)
            .prop_map(|(on, region, keys, ts)| Op::Overwrite { on, region, keys, ts }),
        1 => on().prop_map(|on| Op::Compact { on }),
        1 => on().prop_map(|on| Op::Cluster { on }),
        1 => on().prop_map(|on| Op::Clean { on }),
        3 => (any::<bool>(), strategy.clone(), prop::bool::weighted(0.2))
            .prop_map(|(into_dev, strategy, dry_run)| Op::Merge { into_dev, strategy, dry_run }),
        1 => strategy.prop_map(|strategy| Op::Rebase { strategy }),
    ]
}

type Rows = BTreeMap<String, Row>;

/// What each merge direction compares against.
#[derive(Debug, Clone)]
struct Since {
    source: Rows,
    target: Rows,
    /// Partition-delete events (their step) of each side at the since-point.
    source_step: usize,
    target_step: usize,
}

#[derive(Debug, Clone)]
struct Model {
    main: Rows,
    dev: Rows,
    /// `(step, region)` of every partition delete or overwrite, per root.
    main_deletes: Vec<(usize, String)>,
    dev_deletes: Vec<(usize, String)>,
    /// `[dev into main, main into dev]`.
    since: [Since; 2],
}

/// What a merge does in the model.
#[derive(Debug, PartialEq, Eq)]
struct Expected {
    conflicts: usize,
    result: Rows,
    commits: bool,
}

impl Model {
    fn rows(&self, on: On) -> &Rows {
        match on {
            On::Main => &self.main,
            On::Dev => &self.dev,
        }
    }

    fn rows_mut(&mut self, on: On) -> &mut Rows {
        match on {
            On::Main => &mut self.main,
            On::Dev => &mut self.dev,
        }
    }

    fn deletes(&self, on: On) -> &Vec<(usize, String)> {
        match on {
            On::Main => &self.main_deletes,
            On::Dev => &self.dev_deletes,
        }
    }

    fn merge(&self, into_dev: bool, strategy: MergeStrategy) -> Expected {
        let (src, tgt) = if into_dev {
            (On::Main, On::Dev)
        } else {
            (On::Dev, On::Main)
        };
        let since = &self.since[usize::from(into_dev)];
        let (s_now, t_now) = (self.rows(src), self.rows(tgt));
        let over = |on: On, step: usize| -> BTreeSet<String> {
            self.deletes(on)
                .iter()
                .filter(|(s, _)| *s > step)
                .map(|(_, r)| r.clone())
                .collect()
        };
        let s_over = over(src, since.source_step);
        let t_over = over(tgt, since.target_step);
        let keys: BTreeSet<&String> = since
            .source
            .keys()
            .chain(s_now.keys())
            .chain(since.target.keys())
            .chain(t_now.keys())
            .collect();
        let changed = |before: &Rows, now: &Rows, k: &String| before.get(k) != now.get(k);
        let region = |k: &String| -> String {
            let n: u8 = k.trim_start_matches('k').parse().unwrap();
            format!("region={}", region_of(n))
        };
        let s_changed: BTreeSet<&String> = keys
            .iter()
            .copied()
            .filter(|k| changed(&since.source, s_now, k))
            .collect();
        let t_changed: BTreeSet<&String> = keys
            .iter()
            .copied()
            .filter(|k| changed(&since.target, t_now, k))
            .collect();
        let mut conflicts = 0;
        for r in REGIONS {
            let p = format!("region={r}");
            let s_in = s_changed.iter().any(|k| region(k) == p);
            let t_in = t_changed.iter().any(|k| region(k) == p);
            if (s_over.contains(&p) && t_in) || (t_over.contains(&p) && s_in) {
                conflicts += 1;
            }
        }
        let mut result = t_now.clone();
        let mut commits = false;
        for k in &s_changed {
            let dropped = strategy == MergeStrategy::Target && t_over.contains(&region(k));
            let wins = if t_changed.contains(k) {
                if s_now.get(*k) == t_now.get(*k) {
                    continue;
                }
                conflicts += 1;
                match strategy {
                    MergeStrategy::Source => true,
                    MergeStrategy::Target | MergeStrategy::Fail => false,
                    MergeStrategy::Ordering => {
                        let ts = |now: &Rows, before: &Rows| {
                            now.get(*k).or_else(|| before.get(*k)).map(|r| r.2)
                        };
                        ts(s_now, &since.source) >= ts(t_now, &since.target)
                    }
                }
            } else {
                true
            };
            if wins && !dropped {
                commits = true;
                match s_now.get(*k) {
                    Some(r) => result.insert((*k).clone(), r.clone()),
                    None => result.remove(*k),
                };
            }
        }
        if strategy == MergeStrategy::Source {
            for k in &t_changed {
                if s_changed.contains(k) || !s_over.contains(&region(k)) {
                    continue;
                }
                commits = true;
                match since.target.get(*k) {
                    Some(r) => result.insert((*k).clone(), r.clone()),
                    None => result.remove(*k),
                };
            }
        }
        Expected {
            conflicts,
            result,
            commits,
        }
    }
}

fn rows_for(keys: u8, ts: i64, step: usize) -> Vec<Row> {
    (0..KEYS)
        .filter(|k| keys & (1 << k) != 0)
        .map(|k| {
            (
                format!("k{k}"),
                region_of(k).to_string(),
                ts,
                format!("s{step}"),
            )
        })
        .collect()
}

/// The model's upsert: a row replaces the stored one unless that has a greater `ts`.
fn upsert(rows: &mut Rows, new: &[Row]) {
    for r in new {
        match rows.get(&r.0) {
            Some(old) if old.2 > r.2 => {}
            _ => {
                rows.insert(r.0.clone(), r.clone());
            }
        }
    }
}

struct Run {
    t: TestTable,
    dev: Table,
    model: Model,
    table_type: TableType,
    log: Vec<String>,
}

impl Run {
    fn handle(&self, on: On) -> &Table {
        match on {
            On::Main => &self.t.table,
            On::Dev => &self.dev,
        }
    }

    async fn read(&self, on: On) -> Rows {
        let branch = match on {
            On::Main => None,
            On::Dev => Some("dev"),
        };
        self.t
            .read_branch(branch, None)
            .await
            .into_iter()
            .map(|r| (r.0.clone(), r))
            .collect()
    }

    async fn check(&self, step: &str) {
        let ctx = format!("{step}\nhistory: {:#?}", self.log);
        assert_eq!(self.read(On::Main).await, self.model.main, "main: {ctx}");
        assert_eq!(self.read(On::Dev).await, self.model.dev, "dev: {ctx}");
        for b in [None, Some("dev")] {
            let report = validate(&self.t.storage, b).await.unwrap();
            assert!(
                report.discrepancies.is_empty(),
                "validate {b:?}: {:?}\n{ctx}",
                report.discrepancies
            );
            // The record index against the data.
            let root = select_root(&self.t.storage, b).await.unwrap();
            let indexes = validate_indexes(root.view(self.t.storage.clone()))
                .await
                .unwrap();
            assert!(
                indexes.discrepancies.is_empty(),
                "indexes {b:?}: {:?}\n{ctx}",
                indexes.discrepancies
            );
        }
        // diff main dev lists exactly the keys whose rows differ.
        let planned = diff(
            &self.t.storage,
            &RefSpec::Main,
            &RefSpec::Branch("dev".into()),
        )
        .await
        .unwrap();
        let batches: Vec<_> = planned.changes(true).try_collect().await.unwrap();
        let mut listed = BTreeMap::new();
        for b in &batches {
            let kinds = b.column_by_name(CHANGE_TYPE).unwrap().as_string::<i32>();
            let keys = b.column(2).as_string::<i32>();
            for i in 0..b.num_rows() {
                let kind = match kinds.value(i) {
                    "insert" => ChangeKind::Insert,
                    "delete" => ChangeKind::Delete,
                    _ => ChangeKind::Update,
                };
                listed.insert(keys.value(i).to_string(), kind);
            }
        }
        let mut expected = BTreeMap::new();
        let all: BTreeSet<&String> = self
            .model
            .main
            .keys()
            .chain(self.model.dev.keys())
            .collect();
        for k in all {
            let kind = match (self.model.main.get(k), self.model.dev.get(k)) {
                (None, Some(_)) => ChangeKind::Insert,
                (Some(_), None) => ChangeKind::Delete,
                (Some(a), Some(b)) if a != b => ChangeKind::Update,
                _ => continue,
            };
            expected.insert(k.clone(), kind);
        }
        assert_eq!(listed, expected, "diff main dev: {ctx}");
    }

    async fn apply(&mut self, step: usize, op: &Op) {
        match op {
            Op::Upsert { on, keys, ts } => {
                let rows = rows_for(*keys, *ts, step);
                self.t
                    .write_on(self.handle(*on), WriteOperation::Upsert, &rows)
                    .await;
                upsert(self.model.rows_mut(*on), &rows);
            }
            Op::Delete { on, keys } => {
                let rows = rows_for(*keys, 0, step);
                self.t
                    .write_on(self.handle(*on), WriteOperation::Delete, &rows)
                    .await;
                for r in rows {
                    self.model.rows_mut(*on).remove(&r.0);
                }
            }
            Op::DeletePartition { on, region } => {
                let r = REGIONS[*region];
                // Only a partition that holds rows (so it has file groups to replace).
                if !self.model.rows(*on).values().any(|row| row.1 == r) {
                    return;
                }
                let p = format!("region={r}");
                self.handle(*on)
                    .delete_partitions(std::slice::from_ref(&p))
                    .await
                    .unwrap();
                self.model.rows_mut(*on).retain(|_, row| row.1 != r);
                match on {
                    On::Main => self.model.main_deletes.push((step, p)),
                    On::Dev => self.model.dev_deletes.push((step, p)),
                }
            }
            Op::Overwrite {
                on,
                region,
                keys,
                ts,
            } => {
                let r = REGIONS[*region];
                let rows: Vec<Row> = rows_for(*keys, *ts, step)
                    .into_iter()
                    .filter(|row| row.1 == r)
                    .collect();
                if rows.is_empty() {
                    return;
                }
                self.t
                    .write_on(self.handle(*on), WriteOperation::InsertOverwrite, &rows)
                    .await;
                let model = self.model.rows_mut(*on);
                model.retain(|_, row| row.1 != r);
                for row in rows {
                    model.insert(row.0.clone(), row);
                }
                let p = format!("region={r}");
                match on {
                    On::Main => self.model.main_deletes.push((step, p)),
                    On::Dev => self.model.dev_deletes.push((step, p)),
                }
            }
            Op::Compact { on } => {
                if self.table_type == TableType::MergeOnRead {
                    self.handle(*on).compact().await.unwrap();
                }
            }
            Op::Cluster { on } => {
                let options = arbor_table::cluster::ClusterOptions {
                    sort_by: vec!["ts".to_string()],
                    ..Default::default()
                };
                self.handle(*on).cluster(&options).await.unwrap();
            }
            Op::Clean { on } => {
                clean(
                    self.handle(*on),
                    CleanOptions {
                        policy: CleanPolicy::KeepLatestCommits(1),
                        ..CleanOptions::default()
                    },
                )
                .await
                .unwrap();
            }
            Op::Merge {
                into_dev,
                strategy,
                dry_run,
            } => {
                let expected = self.model.merge(*into_dev, *strategy);
                let (target, source) = if *into_dev {
                    (&self.dev, RefSpec::Main)
                } else {
                    (&self.t.table, RefSpec::Branch("dev".into()))
                };
                let before = self.t.listing().await;
                let options = MergeOptions::new(*strategy).with_dry_run(*dry_run);
                let got = merge(target, &source, &options).await;
                let ctx = format!("step {step} {op:?}: expected {expected:?}\n{:#?}", self.log);
                if *strategy == MergeStrategy::Fail && expected.conflicts > 0 && !dry_run {
                    match got {
                        Err(BranchingError::MergeConflicts(r)) => {
                            assert_eq!(r.count, expected.conflicts, "{ctx}")
                        }
                        other => panic!("expected a refusal, got {other:?}\n{ctx}"),
                    }
                    assert_eq!(
                        self.t.listing().await,
                        before,
                        "a refused merge wrote: {ctx}"
                    );
                    return;
                }
                let outcome = got.unwrap_or_else(|e| panic!("{e}\n{ctx}"));
                assert_eq!(outcome.conflict_count, expected.conflicts, "{ctx}");
                if *dry_run {
                    assert!(outcome.commit.is_none(), "{ctx}");
                    assert_eq!(self.t.listing().await, before, "a dry run wrote: {ctx}");
                    return;
                }
                assert_eq!(outcome.commit.is_some(), expected.commits, "{ctx}");
                if expected.commits {
                    let (src, tgt) = if *into_dev {
                        (On::Main, On::Dev)
                    } else {
                        (On::Dev, On::Main)
                    };
                    *self.model.rows_mut(tgt) = expected.result;
                    self.model.since[usize::from(*into_dev)] = Since {
                        source: self.model.rows(src).clone(),
                        target: self.model.rows(tgt).clone(),
                        source_step: step,
                        target_step: step,
                    };
                }
            }
            Op::Rebase { strategy } => self.rebase(step, op, *strategy).await,
        }
    }

    /// A rebase of `dev` onto main is, in the model, the merge of `dev` into main applied to
    /// `dev` instead (main unchanged); afterwards both directions compare from main's rows.
    async fn rebase(&mut self, step: usize, op: &Op, strategy: MergeStrategy) {
        let expected = self.model.merge(false, strategy);
        let before = self.t.listing().await;
        let got = rebase(&self.t.table, "dev", &MergeOptions::new(strategy)).await;
        let ctx = format!("step {step} {op:?}: expected {expected:?}\n{:#?}", self.log);
        if let Ok(out) = &got {
            if out.up_to_date {
                // Main has not moved since dev's base: merging dev into main gives dev.
                assert_eq!(expected.conflicts, 0, "{ctx}");
                assert_eq!(expected.result, self.model.dev, "{ctx}");
                assert_eq!(
                    self.t.listing().await,
                    before,
                    "an up-to-date rebase wrote: {ctx}"
                );
                return;
            }
        }
        if strategy == MergeStrategy::Fail && expected.conflicts > 0 {
            match got {
                Err(BranchingError::MergeConflicts(r)) => {
                    assert_eq!(r.count, expected.conflicts, "{ctx}")
                }
                other => panic!("expected a refusal, got {other:?}\n{ctx}"),
            }
            assert_eq!(
                self.t.listing().await,
                before,
                "a refused rebase wrote: {ctx}"
            );
            return;
        }
        let out = got.unwrap_or_else(|e| panic!("{e}\n{ctx}"));
        let changes = out
            .changes
            .as_ref()
            .expect("a rebase that was not up to date");
        assert_eq!(changes.conflict_count, expected.conflicts, "{ctx}");
        assert_eq!(out.kept, None, "{ctx}");
        self.dev = self.t.branch("dev").await;
        self.model.dev = expected.result;
        let base = Since {
            source: self.model.main.clone(),
            target: self.model.main.clone(),
            source_step: step,
            target_step: step,
        };
        self.model.since = [base.clone(), base];
    }
}

/// A table of `table_type` (with a record index and a secondary index when `record_index`)
/// holding six keys on main, branch `dev` cut from it, and the model of both.
async fn start(table_type: TableType, record_index: bool) -> Run {
    let t = create(table_type, true).await;
    if record_index {
        t.table.create_record_index().await.unwrap();
        t.table
            .create_secondary_index("by_name", "name")
            .await
            .unwrap();
    }
    let first = rows_for(0b11_1111, 1, 0);
    t.write(WriteOperation::Upsert, &first).await;
    create_branch(&t.table, "dev", BranchSource::MainHead)
        .await
        .unwrap();
    let dev = t.branch("dev").await;
    let rows: Rows = first.iter().map(|r| (r.0.clone(), r.clone())).collect();
    let since = Since {
        source: rows.clone(),
        target: rows.clone(),
        source_step: 0,
        target_step: 0,
    };
    Run {
        t,
        dev,
        model: Model {
            main: rows.clone(),
            dev: rows,
            main_deletes: Vec::new(),
            dev_deletes: Vec::new(),
            since: [since.clone(), since],
        },
        table_type,
        log: vec![format!("{table_type:?}, record index {record_index}")],
    }
}

async fn run_case(table_type: TableType, record_index: bool, ops: Vec<Op>) {
    let mut run = start(table_type, record_index).await;
    for (i, op) in ops.iter().enumerate() {
        let step = i + 1;
        run.log.push(format!("{step}: {op:?}"));
        run.apply(step, op).await;
        run.check(&format!("after step {step} {op:?}")).await;
    }
    run.t
        .assert_peer_agrees("merge model peer check", "merge model")
        .await;
}

fn table_type() -> impl Strategy<Value = TableType> {
    prop_oneof![Just(TableType::CopyOnWrite), Just(TableType::MergeOnRead)]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(40),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn test_merge_model_random_histories_merge_as_the_model(
        table_type in table_type(),
        record_index in any::<bool>(),
        ops in prop::collection::vec(op(), 1..9),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run_case(table_type, record_index, ops));
    }
}

/// The check fails on a wrong model: a merge whose model result is altered is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_merge_model_check_detects_a_wrong_model() {
    let ops = vec![
        Op::Upsert {
            on: On::Dev,
            keys: 0b1,
            ts: 5,
        },
        Op::Merge {
            into_dev: false,
            strategy: MergeStrategy::Fail,
            dry_run: false,
        },
    ];
    run_case(TableType::CopyOnWrite, false, ops.clone()).await;
    let wrong = tokio::spawn(async move {
        let mut run = start(TableType::CopyOnWrite, false).await;
        for (i, op) in ops.iter().enumerate() {
            run.apply(i + 1, op).await;
        }
        // The model forgets what the merge applied.
        run.model.main.remove("k0");
        run.check("wrong model").await;
    })
    .await;
    assert!(wrong.is_err(), "a wrong model passed the check");
}
