//! Model-based property test of branches and tags: random short histories over main and two
//! working branches (`b1`, `b2`) of writes, tag creation / drop / expiry, branch creation (from
//! main's head and from a tag on main), publication (fast-forward or divergent), branch drops,
//! merge-on-read compactions and cleans (random policy, with or without archival), checked
//! after every step against an in-memory model.
//!
//! The model ([`State`]) knows, per live root: its rows, its completed data writes (all of
//! them, and the logical ones: writes that are not table services), its tags (instant, rows at
//! the tag instant, whether they expire and whether their expiry has passed) and, for a
//! branch, its base instant. Publication follows `src/publish.rs`: expired tags of main and of
//! the branch are processed first (even when the publication is then refused); it is
//! divergent iff main has a logical write after the branch's base that the branch does not
//! have; otherwise it is refused iff one of main's (unexpired) tags is neither on the branch
//! with the same name and instant nor at a completed write of the branch's history (main's
//! savepoints are exactly its tags' instants here, so the savepoint condition follows);
//! otherwise main becomes a copy of the branch plus main's tags carried over. Several tags may
//! name one instant.
//!
//! After every step ([`Run::check`]):
//! - main resolves to the root or the model's latest publication, and the working branches are
//!   the model's;
//! - every root (the root metadata, main, every live branch) has its data table and its
//!   metadata table at the version the table was created at (8 or 9, drawn per case; version-9
//!   tables carry column and partition stats, which must equal a recomputation from the files
//!   on every root after every step);
//! - main and every live branch read (latest snapshot) exactly the model's rows;
//! - every root's tags (names and instants, expired ones included) are the model's, every
//!   unexpired tag reads (through `tag_reader`) exactly the rows it was created with, and an
//!   expired one serves no reads;
//! - every file of every live root's latest snapshot and of every unexpired tag's snapshot
//!   exists in storage;
//! - `arbor_branching::validate` is clean for every live root (the two regression tests at
//!   the end pin the cases this test found: files released by the clean of a root that is no
//!   longer live, see `State::retired`).
//!
//! A step that changed neither storage (objects and versions) nor the model is not checked
//! again. Publication and refusals are also checked as they happen: the outcome kind and the
//! instants `Divergent` names must be the model's, and a refused publication (without expired
//! tags to process) must leave storage exactly as it was.
//!
//! `test_model_random_branch_histories_read_as_the_model` runs 150 cases in every CI run, each
//! run drawing new histories (`PROPTEST_CASES` overrides; 300 cases took 139 s in a debug build,
//! the longest test of the workspace) on in-memory storage, copy-on-write and
//! merge-on-read, table versions 9 and 8, metadata table on; `ARBOR_MODEL_LOG=1` prints every history it ran.
//!
//! Passage of time is simulated as `basics.rs` does: tags that expire are created with an
//! expiry a day ahead; [`Op::TimePasses`] rewrites every such tag definition (on every root)
//! with an expiry in the past.
//!
//! `test_model_check_detects_wrong_models` shows the check can fail: it runs one fixed
//! history, then checks the real table against deliberately wrong models (and against a table
//! missing a protected file) and asserts every discrepancy is reported.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_branching::{
    clean, create_branch, create_tag, drop_branch, drop_tag, expire_tags, list_branches, list_tags,
    open_branch, open_reader, publish, select_root, tag_reader, validate, BranchSource,
    BranchingError, TagFilter,
};
use arbor_cleaner::protection::snapshot_keys;
use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_fsview::Horizon;
use arbor_storage::{ObjectStoreStorage, Storage, StorageExt};
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_timeline::config::{RecordMergeMode, TableType, TableVersion};
use arbor_timeline::{resolve_main, InstantTime, MetaRoot, TableConfig};
use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use proptest::prelude::*;

use arbor_testkit_tables::{batch, rows_of, schema, Row};

/// Keys `k0000`..`k0007`: even ids in partition `us`, odd in `eu`.
const KEYS: u32 = 8;
/// Tag names drawn from (so that names collide).
const TAG_NAMES: [&str; 3] = ["v0", "v1", "v2"];
/// The working branches.
const BRANCHES: [&str; 2] = ["b1", "b2"];

/// The root an operation targets. A branch that is not live falls back to the other live
/// branch, then to main (so that short histories do something with their branches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum On {
    Main,
    B1,
    B2,
}

/// One step of a history.
#[derive(Debug, Clone)]
enum Op {
    /// Upsert the keys of the bit mask (name and `ts` from the step number).
    Upsert { on: On, keys: u8 },
    /// Delete the keys of the bit mask (present or not).
    Delete { on: On, keys: u8 },
    /// Tag the root's latest completed write, expiring a day ahead or never.
    CreateTag { on: On, name: usize, expiring: bool },
    /// Drop the `pick`-th tag of the root (modulo their number, expired ones included); with
    /// none, a drop with `if_exists` of an absent tag.
    DropTag { on: On, pick: usize },
    /// `expire_tags` on the root.
    ExpireTags { on: On },
    /// Every tag that expires (every root) reaches its expiry.
    TimePasses,
    /// Create branch `BRANCHES[b]` (the other name when it is taken; refused when both are)
    /// from main's head, or from the `pick`-th tag of main (modulo their number, expired ones
    /// included; from the head when main has no tags).
    CreateBranch { b: usize, from_tag: Option<usize> },
    /// Publish branch `BRANCHES[b]` (or the other live one; nothing without live branches).
    Publish { b: usize },
    /// Drop branch `BRANCHES[b]` (or the other live one; not found without live branches).
    DropBranch { b: usize },
    /// Merge-on-read: run a compaction on the root (nothing on copy-on-write).
    Compact { on: On },
    /// `arbor_branching::clean` of the root.
    Clean {
        on: On,
        policy: CleanPolicy,
        archive: bool,
    },
}

fn on() -> impl Strategy<Value = On> {
    prop_oneof![2 => Just(On::Main), 2 => Just(On::B1), 1 => Just(On::B2)]
}

fn policy() -> impl Strategy<Value = CleanPolicy> {
    prop_oneof![
        (1usize..3).prop_map(CleanPolicy::KeepLatestCommits),
        (1usize..2).prop_map(CleanPolicy::KeepLatestFileVersions),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (on(), 1u8..=255).prop_map(|(on, keys)| Op::Upsert { on, keys }),
        2 => (on(), 1u8..=255).prop_map(|(on, keys)| Op::Delete { on, keys }),
        3 => (on(), 0..TAG_NAMES.len(), any::<bool>())
            .prop_map(|(on, name, expiring)| Op::CreateTag { on, name, expiring }),
        1 => (on(), 0usize..4).prop_map(|(on, pick)| Op::DropTag { on, pick }),
        1 => on().prop_map(|on| Op::ExpireTags { on }),
        1 => Just(Op::TimePasses),
        5 => (0..BRANCHES.len(), prop_oneof![Just(None), (0usize..4).prop_map(Some)])
            .prop_map(|(b, from_tag)| Op::CreateBranch { b, from_tag }),
        4 => (0..BRANCHES.len()).prop_map(|b| Op::Publish { b }),
        1 => (0..BRANCHES.len()).prop_map(|b| Op::DropBranch { b }),
        1 => on().prop_map(|on| Op::Compact { on }),
        2 => (on(), policy(), any::<bool>())
            .prop_map(|(on, policy, archive)| Op::Clean { on, policy, archive }),
    ]
}

/// The steps every history starts with (checked once, at their end): an upsert of every key
/// on main, then (randomly) an upsert of some keys on main, so that cleans find superseded
/// files, a tag on main (expiring or not), and the creation of `b1` from main's head, so that
/// the short random part does something with branches and tags more often.
fn prelude() -> impl Strategy<Value = Vec<Op>> {
    (
        prop_oneof![Just(None), (1u8..=255).prop_map(Some)],
        prop_oneof![Just(None), any::<bool>().prop_map(Some)],
        prop_oneof![3 => Just(true), 1 => Just(false)],
    )
        .prop_map(|(second, tag, b1)| {
            let mut ops = vec![Op::Upsert {
                on: On::Main,
                keys: 0xff,
            }];
            ops.extend(second.map(|keys| Op::Upsert { on: On::Main, keys }));
            ops.extend(tag.map(|expiring| Op::CreateTag {
                on: On::Main,
                name: 0,
                expiring,
            }));
            if b1 {
                ops.push(Op::CreateBranch {
                    b: 0,
                    from_tag: None,
                });
            }
            ops
        })
}

/// A case: table type and version, prelude, the random steps.
fn case(
    len: std::ops::Range<usize>,
) -> impl Strategy<Value = ((TableType, TableVersion), Vec<Op>, Vec<Op>)> {
    (
        (
            prop_oneof![Just(TableType::CopyOnWrite), Just(TableType::MergeOnRead)],
            prop_oneof![Just(TableVersion::Nine), Just(TableVersion::Eight)],
        ),
        prelude(),
        proptest::collection::vec(op(), len),
    )
}

/// A tag as the model knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TagM {
    /// The tagged instant.
    instant: InstantTime,
    /// The root's rows as of that instant.
    rows: Vec<Row>,
    /// Created with an expiry (a day ahead).
    expiring: bool,
    /// Its expiry has passed (only tags that expire).
    expired: bool,
}

/// One root (main or a working branch) as the model knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RootM {
    /// Its rows (id -> row).
    rows: BTreeMap<String, Row>,
    /// Its completed data writes (requested times), compactions included.
    writes: BTreeSet<InstantTime>,
    /// Its logical writes (upserts and deletes; not compactions).
    logical: BTreeSet<InstantTime>,
    /// Its tag definitions by name, expired ones included until processed.
    tags: BTreeMap<String, TagM>,
    /// A branch's base instant (`None` for main).
    base: Option<InstantTime>,
    /// `(partition, file)` of every file the completed cleans in its timeline deleted (its
    /// own, and those it inherited at creation or publication).
    cleaned: BTreeSet<(String, String)>,
}

impl RootM {
    fn sorted(&self) -> Vec<Row> {
        self.rows.values().cloned().collect()
    }

    /// Expired tags are removed (with their savepoints); returns their names (sorted).
    fn expire(&mut self) -> Vec<String> {
        let gone: Vec<String> = self
            .tags
            .iter()
            .filter(|(_, t)| t.expired)
            .map(|(n, _)| n.clone())
            .collect();
        for n in &gone {
            self.tags.remove(n);
        }
        gone
    }

    fn latest(&self) -> Option<&InstantTime> {
        self.writes.iter().next_back()
    }
}

/// What a publication must do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    /// Fast-forward: main becomes the branch.
    Published,
    /// `Divergent` with these lists.
    Divergent {
        missing_on_branch: Vec<String>,
        branch_only: Vec<String>,
    },
    /// Refused: main's tag of this name is neither on the branch nor at an instant of the
    /// branch's history (or the branch has another tag of that name).
    TagMissing(String),
    /// Refused: main pins this other branch's base at an instant the branch does not have.
    BasePinned(String),
}

/// The whole table as the model knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct State {
    main: RootM,
    branches: BTreeMap<String, RootM>,
    /// Publications made (main is `p<publications>`, or the root when 0).
    publications: u64,
    /// Files deleted by the cleans of roots that are no longer live (main before a
    /// publication, dropped branches); a root that still lists them no longer retains them, and
    /// `validate` must not report them (regression:
    /// `test_validate_after_publication_excuses_files_the_old_main_cleaned`).
    retired: BTreeSet<(String, String)>,
}

impl State {
    fn root(&self, branch: Option<&str>) -> &RootM {
        match branch {
            None => &self.main,
            Some(b) => &self.branches[b],
        }
    }

    fn root_mut(&mut self, branch: Option<&str>) -> &mut RootM {
        match branch {
            None => &mut self.main,
            Some(b) => self.branches.get_mut(b).unwrap(),
        }
    }

    /// The live roots: main (`None`) then the branches.
    fn roots(&self) -> Vec<Option<String>> {
        std::iter::once(None)
            .chain(self.branches.keys().cloned().map(Some))
            .collect()
    }

    /// `publish` of `branch` as `src/publish.rs` decides it, with its side effects on the
    /// model (expired tags processed on main and the branch; on success main := branch).
    fn publish(&mut self, branch: &str) -> Expect {
        self.main.expire();
        self.branches.get_mut(branch).unwrap().expire();
        let b = &self.branches[branch];
        let base = b.base.as_ref();
        let after = |t: &&InstantTime| base.is_none_or(|base| *t > base);
        let missing_on_branch: Vec<String> = self
            .main
            .logical
            .iter()
            .filter(after)
            .filter(|t| !b.writes.contains(*t))
            .map(ToString::to_string)
            .collect();
        if !missing_on_branch.is_empty() {
            let branch_only = b
                .logical
                .iter()
                .filter(after)
                .filter(|t| !self.main.writes.contains(*t))
                .map(ToString::to_string)
                .collect();
            return Expect::Divergent {
                missing_on_branch,
                branch_only,
            };
        }
        // Main's tags on the branch are published with it; the others are carried over when
        // their instant is in the branch's history, else they block.
        let mut carried = BTreeMap::new();
        for (name, tag) in &self.main.tags {
            match b.tags.get(name) {
                Some(t) if t.instant == tag.instant => {}
                Some(_) => return Expect::TagMissing(name.clone()),
                None if b.writes.contains(&tag.instant) => {
                    carried.insert(name.clone(), tag.clone());
                }
                None => return Expect::TagMissing(name.clone()),
            }
        }
        // Main pins every other branch's base with a savepoint: one outside the branch's
        // history blocks (publication would unpin it).
        for (other, root) in &self.branches {
            if other == branch {
                continue;
            }
            if let Some(base) = &root.base {
                if self.main.writes.contains(base) && !b.writes.contains(base) {
                    return Expect::BasePinned(other.clone());
                }
            }
        }
        let mut published = RootM {
            base: None,
            ..b.clone()
        };
        published.tags.extend(carried);
        let old = std::mem::replace(&mut self.main, published);
        self.retired.extend(old.cleaned);
        self.publications += 1;
        Expect::Published
    }
}

/// A table under test and its model.
struct Run {
    storage: Arc<dyn Storage>,
    table_type: TableType,
    /// The version the table is created at; every root (data side and MDT) must keep it.
    version: TableVersion,
    /// A handle of main (reopened after publications).
    main: Table,
    /// Handles of the live branches.
    handles: BTreeMap<String, Table>,
    model: State,
    step: usize,
    /// What the steps did (for failure messages).
    log: Vec<String>,
    /// Storage and model at the last check that passed.
    checked: Option<(Vec<(String, String)>, State)>,
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

fn label(branch: Option<&str>) -> &str {
    branch.unwrap_or("main")
}

/// The key of tag `name`'s definition as every root's view sees it.
fn tag_key(name: &str) -> String {
    format!("{}/{name}.json", arbor_timeline::metaroot::TAGS_DIR)
}

/// Every object in storage with its version, except locks and heartbeats: what a refused
/// publication must leave as it was, and what tells [`Run::check_or_panic`] that nothing
/// changed.
async fn listing(storage: &Arc<dyn Storage>) -> Vec<(String, String)> {
    let mut keys: Vec<(String, String)> = storage
        .list_all("")
        .await
        .unwrap()
        .into_iter()
        .filter(|o| !o.key.starts_with(".hoodie/.locks") && !o.key.contains(".heartbeat"))
        .map(|o| (o.key, format!("{} {:?}", o.size, o.version)))
        .collect();
    keys.sort();
    keys
}

/// Returns `Err(message)` from the enclosing function when `cond` does not hold.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

impl Run {
    async fn new(table_type: TableType) -> Run {
        Run::new_at(table_type, TableVersion::default()).await
    }

    async fn new_at(table_type: TableType, version: TableVersion) -> Run {
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        let main = Table::create(
            storage.clone(),
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
                table_version: version,
                base_format: Default::default(),
            },
        )
        .await
        .unwrap();
        if version == TableVersion::Nine {
            // Version 9 is what Spark 1.1 writes, with column and partition stats on: every
            // step must keep them in step on every root.
            main.create_stats_indexes(true, true).await.unwrap();
        }
        Run {
            storage,
            table_type,
            version,
            main,
            handles: BTreeMap::new(),
            model: State::default(),
            step: 0,
            log: Vec::new(),
            checked: None,
        }
    }

    /// The root `on` resolves to (`None`: main).
    fn resolve(&self, on: On) -> Option<String> {
        let order: &[&str] = match on {
            On::Main => return None,
            On::B1 => &["b1", "b2"],
            On::B2 => &["b2", "b1"],
        };
        order
            .iter()
            .find(|b| self.model.branches.contains_key(**b))
            .map(|b| (*b).to_string())
    }

    fn handle(&self, branch: Option<&str>) -> &Table {
        match branch {
            None => &self.main,
            Some(b) => &self.handles[b],
        }
    }

    async fn apply(&mut self, op: &Op) -> String {
        self.step += 1;
        let step = self.step;
        match op {
            Op::Upsert { on, keys } | Op::Delete { on, keys } => {
                let branch = self.resolve(*on);
                let b = branch.as_deref();
                let rows: Vec<Row> = keys_of(*keys).map(|i| row(i, step)).collect();
                let upsert = matches!(op, Op::Upsert { .. });
                let (kind, data) = if upsert {
                    (WriteOperation::Upsert, batch(&rows))
                } else {
                    (WriteOperation::Delete, delete_batch(&rows))
                };
                let t = self
                    .handle(b)
                    .write(kind, vec![data])
                    .await
                    .unwrap()
                    .instant;
                let m = self.model.root_mut(b);
                for r in rows {
                    if upsert {
                        m.rows.insert(r.0.clone(), r);
                    } else {
                        m.rows.remove(&r.0);
                    }
                }
                m.writes.insert(t.clone());
                m.logical.insert(t.clone());
                format!(
                    "{} on {}: {t}",
                    if upsert { "upsert" } else { "delete" },
                    label(b)
                )
            }
            Op::CreateTag { on, name, expiring } => {
                let branch = self.resolve(*on);
                let b = branch.as_deref();
                let name = TAG_NAMES[*name];
                let expires = expiring.then(|| chrono::Utc::now() + chrono::Duration::days(1));
                let got = create_tag(self.handle(b), name, None, expires).await;
                let m = self.model.root_mut(b);
                m.expire();
                let latest = m.latest().cloned().unwrap();
                let refused = m.tags.contains_key(name);
                match got {
                    Ok(info) => {
                        assert!(
                            !refused,
                            "tag {name} on {}: accepted, model {m:?}",
                            label(b)
                        );
                        assert_eq!(info.instant, latest.as_str(), "tag {name} on {}", label(b));
                        let rows = m.sorted();
                        m.tags.insert(
                            name.to_string(),
                            TagM {
                                instant: latest.clone(),
                                rows,
                                expiring: *expiring,
                                expired: false,
                            },
                        );
                        format!("create tag {name} on {} at {latest}", label(b))
                    }
                    Err(e) => {
                        assert!(
                            refused && matches!(e, BranchingError::Refused { .. }),
                            "tag {name} on {}: {e}; model {m:?}",
                            label(b)
                        );
                        format!("create tag {name} on {}: refused", label(b))
                    }
                }
            }
            Op::DropTag { on, pick } => {
                let branch = self.resolve(*on);
                let b = branch.as_deref();
                let names: Vec<String> = self.model.root(b).tags.keys().cloned().collect();
                if names.is_empty() {
                    let dropped = drop_tag(self.handle(b), "absent", false, true)
                        .await
                        .unwrap();
                    assert!(!dropped);
                    return format!("drop absent tag on {}", label(b));
                }
                let name = &names[pick % names.len()];
                assert!(drop_tag(self.handle(b), name, false, false).await.unwrap());
                self.model.root_mut(b).tags.remove(name);
                format!("drop tag {name} on {}", label(b))
            }
            Op::ExpireTags { on } => {
                let branch = self.resolve(*on);
                let b = branch.as_deref();
                let got = expire_tags(self.handle(b)).await.unwrap();
                let want = self.model.root_mut(b).expire();
                assert_eq!(got, want, "expire tags on {}", label(b));
                format!("expire tags on {}: {got:?}", label(b))
            }
            Op::TimePasses => {
                let past = chrono::Utc::now() - chrono::Duration::seconds(1);
                let mut done = Vec::new();
                for branch in self.model.roots() {
                    let b = branch.as_deref();
                    let view = select_root(&self.storage, b)
                        .await
                        .unwrap()
                        .view(self.storage.clone());
                    for (name, tag) in &mut self.model.root_mut(b).tags {
                        if !tag.expiring || tag.expired {
                            continue;
                        }
                        let key = tag_key(name);
                        let (bytes, _) = view.get_opt(&key).await.unwrap().unwrap();
                        let mut doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                        doc["expiresAt"] = serde_json::json!(past.to_rfc3339());
                        view.put(&key, serde_json::to_vec(&doc).unwrap().into())
                            .await
                            .unwrap();
                        tag.expired = true;
                        done.push(format!("{}:{name}", label(b)));
                    }
                }
                format!("time passes: expired {done:?}")
            }
            Op::CreateBranch { b, from_tag } => {
                // The other name when this one is taken (refused only when both are).
                let name = [BRANCHES[*b], BRANCHES[1 - *b]]
                    .into_iter()
                    .find(|n| !self.model.branches.contains_key(*n))
                    .unwrap_or(BRANCHES[*b]);
                let main_tags: Vec<(String, TagM)> = self
                    .model
                    .main
                    .tags
                    .iter()
                    .map(|(n, t)| (n.clone(), t.clone()))
                    .collect();
                let tag = from_tag
                    .filter(|_| !main_tags.is_empty())
                    .map(|p| main_tags[p % main_tags.len()].clone());
                let source = match &tag {
                    Some((n, _)) => BranchSource::Tag(n),
                    None => BranchSource::MainHead,
                };
                let got = create_branch(&self.main, name, source).await;
                let what = format!("create branch {name} from {source:?}");
                if self.model.branches.contains_key(name) {
                    let e = got.unwrap_err();
                    assert!(matches!(e, BranchingError::Refused { .. }), "{what}: {e}");
                    return format!("{what}: refused (exists)");
                }
                let main = &self.model.main;
                let new = match &tag {
                    Some((n, t)) if t.expired => {
                        let e = got.unwrap_err();
                        assert!(
                            matches!(e, BranchingError::TagNotFound { .. }),
                            "{what}: {e}"
                        );
                        return format!("{what}: refused (tag {n} expired)");
                    }
                    Some((n, t)) => {
                        let info = got.unwrap();
                        assert_eq!(info.base_instant.as_deref(), Some(t.instant.as_str()));
                        assert_eq!(info.from_tag.as_deref(), Some(n.as_str()));
                        RootM {
                            rows: t.rows.iter().map(|r| (r.0.clone(), r.clone())).collect(),
                            writes: main.writes.range(..=t.instant.clone()).cloned().collect(),
                            logical: main.logical.range(..=t.instant.clone()).cloned().collect(),
                            tags: BTreeMap::from([(n.clone(), t.clone())]),
                            base: Some(t.instant.clone()),
                            cleaned: main.cleaned.clone(),
                        }
                    }
                    None => {
                        let info = got.unwrap();
                        let base = main.latest().cloned();
                        assert_eq!(
                            info.base_instant.as_deref(),
                            base.as_ref().map(InstantTime::as_str)
                        );
                        RootM {
                            tags: main
                                .tags
                                .iter()
                                .filter(|(_, t)| !t.expired)
                                .map(|(n, t)| (n.clone(), t.clone()))
                                .collect(),
                            base,
                            ..main.clone()
                        }
                    }
                };
                self.model.branches.insert(name.to_string(), new);
                self.handles.insert(
                    name.to_string(),
                    open_branch(self.storage.clone(), name).await.unwrap(),
                );
                what
            }
            Op::Publish { b } => {
                let Some(name) = self.resolve(if *b == 0 { On::B1 } else { On::B2 }) else {
                    return "publish: no live branch".to_string();
                };
                let before = listing(&self.storage).await;
                let quiet = self.model.main.tags.values().all(|t| !t.expired)
                    && self.model.branches[&name].tags.values().all(|t| !t.expired);
                let expect = self.model.publish(&name);
                let got = publish(&self.handles[&name]).await;
                let what = format!("publish {name}");
                match (&expect, got) {
                    (Expect::Published, Ok(out)) => {
                        assert_eq!(out.publication, self.model.publications, "{what}");
                        self.main = Table::open(self.storage.clone()).await.unwrap();
                        format!("{what}: p{}", out.publication)
                    }
                    (
                        Expect::Divergent {
                            missing_on_branch,
                            branch_only,
                        },
                        Err(BranchingError::Divergent {
                            missing_on_branch: m,
                            branch_only: o,
                            ..
                        }),
                    ) => {
                        assert_eq!((&m, &o), (missing_on_branch, branch_only), "{what}");
                        if quiet {
                            assert_eq!(listing(&self.storage).await, before, "{what}: changed");
                        }
                        format!("{what}: divergent (missing {m:?}, branch only {o:?})")
                    }
                    (Expect::TagMissing(tag), Err(BranchingError::Refused { reason, .. })) => {
                        assert!(reason.contains(tag.as_str()), "{what}: {reason}");
                        if quiet {
                            assert_eq!(listing(&self.storage).await, before, "{what}: changed");
                        }
                        format!("{what}: refused (main's tag {tag})")
                    }
                    (Expect::BasePinned(other), Err(BranchingError::Refused { reason, .. })) => {
                        assert!(
                            reason.contains(&format!("pins the base of branch {other}")),
                            "{what}: {reason}"
                        );
                        if quiet {
                            assert_eq!(listing(&self.storage).await, before, "{what}: changed");
                        }
                        format!("{what}: refused (branch {other}'s base pinned)")
                    }
                    (expect, got) => panic!("{what}: expected {expect:?}, got {got:?}"),
                }
            }
            Op::DropBranch { b } => {
                // The other live branch when this one is not (not found only without any).
                let name = [BRANCHES[*b], BRANCHES[1 - *b]]
                    .into_iter()
                    .find(|n| self.model.branches.contains_key(*n))
                    .unwrap_or(BRANCHES[*b]);
                let got = drop_branch(&self.main, name).await;
                if let Some(gone) = self.model.branches.remove(name) {
                    got.unwrap();
                    self.model.retired.extend(gone.cleaned);
                    self.handles.remove(name);
                    format!("drop branch {name}")
                } else {
                    let e = got.unwrap_err();
                    assert!(
                        matches!(e, BranchingError::BranchNotFound { .. }),
                        "drop {name}: {e}"
                    );
                    format!("drop branch {name}: not found")
                }
            }
            Op::Compact { on } => {
                let branch = self.resolve(*on);
                let b = branch.as_deref();
                if self.table_type != TableType::MergeOnRead {
                    return "compact: copy-on-write".to_string();
                }
                let done = self.handle(b).compact().await.unwrap();
                let m = self.model.root_mut(b);
                let ts: Vec<String> = done.iter().map(|c| c.instant.to_string()).collect();
                m.writes.extend(done.into_iter().map(|c| c.instant));
                format!("compact {}: {ts:?}", label(b))
            }
            Op::Clean {
                on,
                policy,
                archive,
            } => {
                let branch = self.resolve(*on);
                let b = branch.as_deref();
                let out = clean(
                    self.handle(b),
                    CleanOptions {
                        policy: *policy,
                        archive: *archive,
                        ..CleanOptions::default()
                    },
                )
                .await
                .unwrap();
                self.model.root_mut(b).cleaned.extend(
                    out.plan
                        .iter()
                        .flat_map(|(p, files)| files.iter().map(|f| (p.clone(), f.clone()))),
                );
                format!(
                    "clean {} {policy:?} archive {archive}: deleted {}, archived {}",
                    label(b),
                    out.deleted,
                    out.archived
                )
            }
        }
    }

    /// The checks of the module doc, against `self.model`: `Err` names the first
    /// discrepancy.
    async fn check(&self) -> Result<(), String> {
        let m = &self.model;
        let main_root = resolve_main(self.storage.as_ref()).await.unwrap();
        let want_root = match m.publications {
            0 => MetaRoot::Root,
            n => MetaRoot::Publication(n),
        };
        ensure!(
            main_root == want_root,
            "main is {main_root:?}, model {want_root:?}"
        );
        // Every state change keeps every root's data table and MDT at the table's version.
        for root in std::iter::once(main_root.clone())
            .chain(std::iter::once(MetaRoot::Root))
            .chain(
                self.model
                    .branches
                    .keys()
                    .map(|b| MetaRoot::Branch(b.clone())),
            )
        {
            let view = root.view(self.storage.clone());
            for dir in [".hoodie", ".hoodie/metadata/.hoodie"] {
                let v = TableConfig::load(view.as_ref(), dir)
                    .await
                    .unwrap()
                    .version();
                ensure!(
                    v == self.version,
                    "{root:?} {dir} is version {v}, the table {}",
                    self.version
                );
            }
        }
        let names: Vec<String> = list_branches(&self.storage)
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.info.name)
            .collect();
        let want: Vec<String> = m.branches.keys().cloned().collect();
        ensure!(names == want, "branches {names:?}, model {want:?}");
        let present: BTreeSet<String> = self
            .storage
            .list_all("")
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect();
        for branch in m.roots() {
            let b = branch.as_deref();
            let l = label(b);
            let root = m.root(b);

            // Tag definitions, expired ones included, then the unexpired ones.
            let tags: BTreeMap<String, String> = list_tags(&self.storage, b, TagFilter::All)
                .await
                .unwrap()
                .into_iter()
                .map(|t| (t.name, t.instant))
                .collect();
            let want: BTreeMap<String, String> = root
                .tags
                .iter()
                .map(|(n, t)| (n.clone(), t.instant.to_string()))
                .collect();
            ensure!(tags == want, "{l}: tags {tags:?}, model {want:?}");
            let unexpired: Vec<String> = list_tags(&self.storage, b, TagFilter::Unexpired)
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.name)
                .collect();
            let want: Vec<String> = root
                .tags
                .iter()
                .filter(|(_, t)| !t.expired)
                .map(|(n, _)| n.clone())
                .collect();
            ensure!(
                unexpired == want,
                "{l}: unexpired tags {unexpired:?}, model {want:?}"
            );

            // Every file the latest snapshot and the unexpired tags' snapshots need exists.
            let reader = open_reader(self.storage.clone(), b).await.unwrap();
            let mut protected = snapshot_keys(reader.view(), &Horizon::Latest)
                .await
                .unwrap();
            let mut tag_readers = Vec::new();
            for (name, tag) in &root.tags {
                let got = tag_reader(self.storage.clone(), b, name).await;
                if tag.expired {
                    ensure!(
                        matches!(got, Err(BranchingError::TagNotFound { .. })),
                        "{l}: expired tag {name} serves reads"
                    );
                    continue;
                }
                let (tag_reader, instant) = got.unwrap();
                ensure!(
                    instant == tag.instant,
                    "{l}: tag {name} at {instant}, model {}",
                    tag.instant
                );
                protected.extend(
                    snapshot_keys(tag_reader.view(), &Horizon::AsOf(instant.clone()))
                        .await
                        .unwrap(),
                );
                tag_readers.push((name, tag, tag_reader, instant));
            }
            let missing: Vec<&String> = protected.difference(&present).collect();
            ensure!(
                missing.is_empty(),
                "{l}: files its snapshot or tags need are missing: {missing:?}"
            );

            // Rows: the latest snapshot, then each unexpired tag as of its instant.
            let got = rows_of(
                &reader
                    .snapshot(None)
                    .await
                    .map_err(|e| format!("{l}: reading: {e}"))?,
            );
            ensure!(
                got == root.sorted(),
                "{l}: rows {got:?}, model {:?}",
                root.sorted()
            );
            for (name, tag, reader, instant) in tag_readers {
                let rows = rows_of(
                    &reader
                        .snapshot(Some(&instant))
                        .await
                        .map_err(|e| format!("{l}: reading tag {name}: {e}"))?,
                );
                ensure!(
                    rows == tag.rows,
                    "{l}: tag {name} rows {rows:?}, model {:?}",
                    tag.rows
                );
            }

            let report = validate(&self.storage, b).await.unwrap();
            ensure!(
                report.discrepancies.is_empty(),
                "{l}: metadata table vs storage: {:?}",
                report.discrepancies
            );
            // The record, secondary, column and partition stats indexes of this root equal
            // a recomputation from its files (version-9 cases keep column and partition stats).
            let root_storage = select_root(&self.storage, b)
                .await
                .unwrap()
                .view(self.storage.clone());
            match arbor_table::validate_indexes(root_storage).await {
                Ok(indexes) => ensure!(
                    indexes.discrepancies.is_empty(),
                    "{l}: indexes vs data: {:?}",
                    indexes.discrepancies
                ),
                // A superseded file another root's clean released (which `validate` excuses
                // above) keeps its column-stats record in this root: `validate_indexes` is not
                // branch-aware and cannot recompute it. Any other failure is one.
                Err(e) => {
                    let text = format!("{e:?}");
                    let released = text.contains("NotFound")
                        && !protected.iter().any(|k| text.contains(k.as_str()));
                    ensure!(released, "{l}: validating indexes: {e}");
                }
            }
        }
        Ok(())
    }

    /// [`Run::check`], skipped when neither storage (every object and its version) nor the
    /// model changed since the last check (refusals and no-ops): the check reads only those
    /// (and the clock, which only decides expiry, a day away or past).
    async fn check_or_panic(&mut self) {
        let now = (listing(&self.storage).await, self.model.clone());
        if self.checked.as_ref() == Some(&now) {
            return;
        }
        if let Err(e) = self.check().await {
            panic!("{e}\nhistory:\n  {}", self.log.join("\n  "));
        }
        self.checked = Some(now);
    }

    /// Runs `prelude` (checked at its end), then `ops`, checking after every step.
    async fn run(&mut self, prelude: &[Op], ops: &[Op]) {
        for op in prelude {
            let what = self.apply(op).await;
            self.log.push(format!("{op:?} => {what}"));
        }
        self.check_or_panic().await;
        for op in ops {
            let what = self.apply(op).await;
            self.log.push(format!("{op:?} => {what}"));
            self.check_or_panic().await;
        }
        if std::env::var("ARBOR_MODEL_LOG").is_ok() {
            eprintln!(
                "CASE {:?} v{}\n  {}",
                self.table_type,
                self.version,
                self.log.join("\n  ")
            );
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
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(150),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn test_model_random_branch_histories_read_as_the_model(
        ((table_type, version), prelude, ops) in case(3..8)
    ) {
        runtime().block_on(async {
            let mut run = Run::new_at(table_type, version).await;
            run.run(&prelude, &ops).await;
        });
    }
}

/// One fixed history the model gets right, then deliberately wrong models: each must be
/// reported by [`Run::check`].
#[tokio::test]
async fn test_model_check_detects_wrong_models() {
    // Copy-on-write: main's upsert after the tag rewrites both file groups, so the tag's
    // snapshot has files of its own.
    let mut run = Run::new(TableType::CopyOnWrite).await;
    let initial = Op::Upsert {
        on: On::Main,
        keys: 0xff,
    };
    run.run(
        &[initial],
        &[
            Op::CreateTag {
                on: On::Main,
                name: 0,
                expiring: false,
            },
            Op::CreateBranch {
                b: 0,
                from_tag: None,
            },
            Op::Upsert {
                on: On::Main,
                keys: 0b11,
            },
            Op::Upsert {
                on: On::B1,
                keys: 0b1100,
            },
            Op::Publish { b: 0 },
        ],
    )
    .await;
    assert!(run.log[5].contains("divergent"), "{:?}", run.log);
    run.check().await.unwrap();
    let right = run.model.clone();

    let mut wrong: Vec<(&str, State)> = Vec::new();
    let mut m = right.clone();
    m.branches.get_mut("b1").unwrap().rows.remove("k0002");
    wrong.push(("b1: rows", m));
    // A model with the wrong publication rule (main := branch although main wrote after the
    // base) disagrees with the table.
    let mut m = right.clone();
    m.main = RootM {
        base: None,
        ..m.branches["b1"].clone()
    };
    m.publications = 1;
    wrong.push(("main is", m));
    let mut m = right.clone();
    m.main.rows = m.branches["b1"].rows.clone();
    wrong.push(("main: rows", m));
    let mut m = right.clone();
    m.main.tags.get_mut("v0").unwrap().rows.pop();
    wrong.push(("main: tag v0 rows", m));
    let mut m = right.clone();
    m.branches.get_mut("b1").unwrap().tags.clear();
    wrong.push(("b1: tags", m));
    let mut m = right.clone();
    m.main.tags.get_mut("v0").unwrap().expired = true;
    wrong.push(("main: unexpired tags", m));
    let mut m = right.clone();
    m.branches.remove("b1");
    wrong.push(("branches", m));
    for (want, model) in wrong {
        run.model = model;
        let err = run.check().await.unwrap_err();
        assert!(err.contains(want), "expected {want:?}, got {err}");
    }

    // A file the tag's snapshot needs goes missing: reported.
    run.model = right;
    let reader = open_reader(run.storage.clone(), None).await.unwrap();
    let t = run.model.main.tags["v0"].instant.clone();
    let tagged = snapshot_keys(reader.view(), &Horizon::AsOf(t))
        .await
        .unwrap();
    let latest = snapshot_keys(reader.view(), &Horizon::Latest)
        .await
        .unwrap();
    let only_tag = tagged
        .difference(&latest)
        .next()
        .expect("a file only the tag needs");
    run.storage.delete(only_tag).await.unwrap();
    let err = run.check().await.unwrap_err();
    assert!(
        err.contains("main: files its snapshot or tags need are missing"),
        "{err}"
    );
}

/// `validate` excuses files another live root's clean released, but not those a clean of a
/// root that is no longer live released. Here `b1` cleans its own superseded files (so its
/// last clean bounds what it retains), then main's clean deletes main's first version, which
/// `b1` no longer needs but still lists; after `b1` publishes, main (`p1`) lists files that
/// only the old main root's clean deleted, and `validate(main)` reports them as
/// `MissingFromStorage` although every read is correct.
#[tokio::test]
async fn test_validate_after_publication_excuses_files_the_old_main_cleaned() {
    let mut run = Run::new(TableType::CopyOnWrite).await;
    let keep_one = CleanPolicy::KeepLatestCommits(1);
    run.run(
        &[
            Op::Upsert {
                on: On::Main,
                keys: 0xff,
            },
            Op::Upsert {
                on: On::Main,
                keys: 0xff,
            },
            Op::CreateBranch {
                b: 0,
                from_tag: None,
            },
        ],
        &[
            Op::Upsert {
                on: On::B1,
                keys: 0xff,
            },
            Op::Upsert {
                on: On::B1,
                keys: 0xff,
            },
            Op::Clean {
                on: On::B1,
                policy: keep_one,
                archive: false,
            },
            Op::Clean {
                on: On::Main,
                policy: keep_one,
                archive: false,
            },
            Op::Publish { b: 0 },
        ],
    )
    .await;
    assert_eq!(run.model.publications, 1, "{:?}", run.log);
    assert!(!run.model.retired.is_empty(), "{:?}", run.log);
}

/// The same with a drop: main's clean bounds what main retains, `b1`'s clean then deletes
/// main's first version (superseded on both), which main still lists; once `b1` is dropped,
/// `validate(main)` reports those files as `MissingFromStorage`.
#[tokio::test]
async fn test_validate_after_drop_branch_excuses_files_the_branch_cleaned() {
    let mut run = Run::new(TableType::CopyOnWrite).await;
    let keep_one = CleanPolicy::KeepLatestCommits(1);
    run.run(
        &[
            Op::Upsert {
                on: On::Main,
                keys: 0xff,
            },
            Op::Upsert {
                on: On::Main,
                keys: 0xff,
            },
            Op::CreateBranch {
                b: 0,
                from_tag: None,
            },
        ],
        &[
            Op::Upsert {
                on: On::Main,
                keys: 0xff,
            },
            Op::Upsert {
                on: On::Main,
                keys: 0xff,
            },
            Op::Clean {
                on: On::Main,
                policy: keep_one,
                archive: false,
            },
            Op::Clean {
                on: On::B1,
                policy: keep_one,
                archive: false,
            },
            Op::DropBranch { b: 0 },
        ],
    )
    .await;
    assert!(!run.model.retired.is_empty(), "{:?}", run.log);
}

/// Found by the random model: `b1` forks, main compacts (no logical write, so `b1` may still
/// publish), `b2` forks at the compaction, whose savepoint on main pins `b2`'s base. Publishing
/// `b1`, which lacks the compaction, would drop that pin from main's timeline: refused, naming
/// `b2`, and nothing changes; once `b2` is dropped, `b1` publishes.
#[tokio::test]
async fn test_publication_refuses_to_unpin_another_branchs_base() {
    let mut run = Run::new_at(TableType::MergeOnRead, TableVersion::Nine).await;
    run.run(
        &[
            Op::Upsert {
                on: On::Main,
                keys: 0xff,
            },
            Op::Upsert {
                on: On::Main,
                keys: 1,
            },
            Op::CreateBranch {
                b: 0,
                from_tag: None,
            },
        ],
        &[
            Op::Compact { on: On::Main },
            Op::CreateBranch {
                b: 1,
                from_tag: None,
            },
            Op::Publish { b: 0 },
            Op::DropBranch { b: 1 },
            Op::Publish { b: 0 },
        ],
    )
    .await;
    let log = run.log.join("\n");
    assert!(log.contains("refused (branch b2's base pinned)"), "{log}");
    assert_eq!(run.model.publications, 1, "{log}");
}
