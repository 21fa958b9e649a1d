//! Crash sweeps of the branching operations: `create_branch` (from main's head and from a tag),
//! `create_tag`, `drop_tag`, `publish` (a first publication, and a second one after an earlier
//! publication) and `drop_branch` are "crashed" before each of their storage operations in turn
//! ([`FaultMode::CrashAt`]: from the N-th operation on every operation fails, reads included; a
//! batch delete hit by the crash deletes half of its keys first).
//!
//! The crashing process uses the default object-store table lock (`.hoodie/.locks/`), so taking
//! and releasing the lock are crash points too. A crash while holding it leaves a held lease
//! (120 s); the restarted process is checked once that lease has lapsed, which the sweep
//! simulates by rewriting the lease's expiry into the past ([`lapse_stale_lease`]), keeping its
//! fencing token. The restarted process then uses the same default lock.
//!
//! After each crash, a restarted process (fresh handles over the same directory) must find:
//! - main resolvable (`resolve_main` never errors), opening for writes and reads, and reading
//!   exactly the rows before or the rows after the operation; main's tags, savepoints and
//!   pending instants as before or as after (a tag operation may leave a plain savepoint:
//!   creation writes savepoints before the tag definition, dropping removes the definition first);
//! - every working branch `list_branches` shows readable and as before or as after; a branch
//!   not shown cannot be read (`BranchNotFound`);
//! - `arbor_branching::validate` clean for main and for every branch;
//!
//! and the retry of the same operation must succeed (a branch or tag found complete is refused
//! as existing; `drop_tag` retries with `if_exists`; `drop_branch` reports `BranchNotFound`
//! only when the crashed drop had removed everything), leaving the state of the fault-free run
//! (a crashed `drop_tag` that removed the definition leaves its savepoints, which the retry with
//! `if_exists` does not remove, as RFC-116 section 3 says; `delete_savepoint` then removes them);
//! then the branch made (or the name freed) is fully usable: a write on it succeeds and reads
//! back, and it validates. A retried publication always succeeds with a number greater than any
//! `p<N>` a crash left half-made.
//!
//! A crash before a read leaves the storage a crash before the next write leaves: a storage
//! state (every file's path and bytes, locks and heartbeats excepted) already checked is not
//! checked again. To keep the sweeps within about a minute in debug builds:
//! - every crash point of every operation is run, except in the second publication sweep
//!   (`p2` over `p1`, about 90 points), which runs its first 40 and last 4 points and every
//!   second point of the metadata copy in between (the first publication sweep runs them all);
//! - the usability check after the retry (a write on the branch made, on main after a
//!   publication) runs on every state the crash left as after, and on every third (branch
//!   creation) or sixth (publication) other distinct state; every other check runs on every
//!   distinct state.
//!
//! The two publication sweeps also read every distinct crashed state, and the state after each
//! retry, with hudi-rs at the table path itself (a reader that knows nothing of branches and
//! follows only the root `hoodie.properties`): it must read exactly main before or main after
//! the publication, the old main whenever arbor's main has not moved, and the new main after
//! every retry ([`PeerSweep`]; one `peer_digest.py --batch` run per sweep).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use arbor_branching::tag::list_tags_at;
use arbor_branching::{
    create_branch, create_tag, drop_branch, drop_tag, list_branches, open_branch, open_reader,
    publish, tag_reader, BranchSource, BranchingError, TagFilter,
};
use arbor_mdt::MDT_META_DIR;
use arbor_storage::{FaultInjectingStorage, FaultMode, ObjectStoreStorage, Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::{Table, WriteOperation};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::metaroot::parse_publication_id;
use arbor_timeline::{
    resolve_main, Action, ActiveTimeline, InstantTime, MetaRoot, State, TableConfig, TableLayout,
};
use arrow::array::RecordBatch;

use arbor_testkit::crash::{copy_dir, fingerprint};
use arbor_testkit_tables::{batch, create, rows, rows_of, Model, Row, TestTable};

fn local(base: &Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

/// The default table lock's state object.
const TABLE_LOCK_KEY: &str = ".hoodie/.locks/table_lock.json";

/// Lets the lease a crashed process left on the table lock lapse: its expiry is moved into the
/// past (owner and fencing token kept), as if its 120 s had passed. Returns whether a lease was
/// held.
async fn lapse_stale_lease(storage: &Arc<dyn Storage>) -> bool {
    let Some((bytes, _)) = storage.get_opt(TABLE_LOCK_KEY).await.unwrap() else {
        return false;
    };
    let mut state: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    if state["owner"].is_null() {
        return false;
    }
    let past = chrono::Utc::now() - chrono::Duration::seconds(1);
    state["expires_at"] = serde_json::json!(past);
    storage
        .put(TABLE_LOCK_KEY, serde_json::to_vec(&state).unwrap().into())
        .await
        .unwrap();
    true
}

/// The operation a sweep crashes.
#[derive(Debug, Clone)]
enum Op {
    CreateBranch {
        name: &'static str,
        from_tag: Option<&'static str>,
    },
    /// A tag on main.
    CreateTag {
        name: &'static str,
        instant: InstantTime,
    },
    /// A tag on main (dropped with its savepoints).
    DropTag {
        name: &'static str,
        instant: InstantTime,
    },
    Publish {
        branch: &'static str,
    },
    DropBranch {
        name: &'static str,
    },
}

/// The handle the operation runs on: the branch for a publication, main otherwise.
async fn handle(storage: &Arc<dyn Storage>, op: &Op) -> Table {
    match op {
        Op::Publish { branch } => open_branch(storage.clone(), branch).await.unwrap(),
        _ => Table::open(storage.clone()).await.unwrap(),
    }
}

/// What a run reports: the publication number for a publication, whether a tag was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Done {
    Unit,
    Published(u64),
    Dropped(bool),
}

async fn run(table: &Table, op: &Op, retry: bool) -> Result<Done, BranchingError> {
    match op {
        Op::CreateBranch { name, from_tag } => {
            let source = from_tag.map_or(BranchSource::MainHead, BranchSource::Tag);
            create_branch(table, name, source).await.map(|_| Done::Unit)
        }
        Op::CreateTag { name, instant } => create_tag(table, name, Some(instant), None)
            .await
            .map(|_| Done::Unit),
        Op::DropTag { name, .. } => drop_tag(table, name, false, retry).await.map(Done::Dropped),
        Op::Publish { .. } => publish(table).await.map(|o| Done::Published(o.publication)),
        Op::DropBranch { name } => drop_branch(table, name).await.map(|_| Done::Unit),
    }
}

/// What a restarted process sees of one root (main or a working branch).
#[derive(Debug, Clone, PartialEq, Eq)]
struct RootState {
    /// The latest snapshot's rows.
    rows: Vec<Row>,
    /// Tag definitions: (name, instant).
    tags: Vec<(String, String)>,
    /// Completed savepoints: `data <time>` and `mdt <time>`.
    savepoints: Vec<String>,
    /// Pending instants of the data and MDT timelines.
    pending: Vec<String>,
}

/// A working branch as `list_branches` shows it (its id and creation time excepted).
#[derive(Debug, Clone, PartialEq, Eq)]
struct BranchState {
    base: Option<String>,
    from_tag: Option<String>,
    head: Option<InstantTime>,
    root: RootState,
}

/// What a restarted process sees of the table (the publication number excepted).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Observed {
    main: RootState,
    branches: BTreeMap<String, BranchState>,
}

/// The data and MDT timelines of the root `view` shows.
async fn timelines(view: &Arc<dyn Storage>) -> Vec<(&'static str, ActiveTimeline)> {
    let mut out = Vec::new();
    for (side, dir) in [("data", DEFAULT_META_DIR), ("mdt", MDT_META_DIR)] {
        if side == "mdt"
            && !view
                .exists(&format!("{dir}/hoodie.properties"))
                .await
                .unwrap()
        {
            continue;
        }
        let config = TableConfig::load(view.as_ref(), dir).await.unwrap();
        let layout = TableLayout::from_config(dir, &config).unwrap();
        out.push((
            side,
            ActiveTimeline::load(view.clone(), layout).await.unwrap(),
        ));
    }
    out
}

async fn observe_root(storage: &Arc<dyn Storage>, root: &MetaRoot, rows: Vec<Row>) -> RootState {
    let view = root.view(storage.clone());
    let tags = list_tags_at(&view, TagFilter::All)
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.name, t.instant))
        .collect();
    let mut savepoints = Vec::new();
    let mut pending = Vec::new();
    for (side, tl) in timelines(&view).await {
        savepoints.extend(
            tl.filter(&[Action::Savepoint], &[State::Completed])
                .iter()
                .map(|i| format!("{side} {}", i.requested_time)),
        );
        pending.extend(tl.pending().iter().map(|i| format!("{side} {i}")));
    }
    RootState {
        rows,
        tags,
        savepoints,
        pending,
    }
}

/// Everything a restarted process sees; fails when main cannot be resolved, opened or read, or
/// a listed branch cannot be read.
async fn observe(storage: &Arc<dyn Storage>, label: &str) -> Observed {
    let main = resolve_main(storage.as_ref())
        .await
        .unwrap_or_else(|e| panic!("{label}: resolve_main: {e}"));
    Table::open(storage.clone())
        .await
        .unwrap_or_else(|e| panic!("{label}: Table::open: {e}"));
    let reader = TableReader::open(storage.clone())
        .await
        .unwrap_or_else(|e| panic!("{label}: TableReader::open: {e}"));
    let main_rows = rows_of(&reader.snapshot(None).await.unwrap());
    let main = observe_root(storage, &main, main_rows).await;
    let mut branches = BTreeMap::new();
    for status in list_branches(storage)
        .await
        .unwrap_or_else(|e| panic!("{label}: list_branches: {e}"))
    {
        let name = status.info.name.clone();
        let reader = open_reader(storage.clone(), Some(&name))
            .await
            .unwrap_or_else(|e| panic!("{label}: listed branch {name} cannot be opened: {e}"));
        let rows = rows_of(&reader.snapshot(None).await.unwrap());
        let root = observe_root(storage, &MetaRoot::Branch(name.clone()), rows).await;
        branches.insert(
            name,
            BranchState {
                base: status.info.base_instant,
                from_tag: status.info.from_tag,
                head: status.head,
                root,
            },
        );
    }
    Observed { main, branches }
}

/// `arbor_branching::validate` finds nothing on main and on every branch in `got`.
async fn assert_all_valid(storage: &Arc<dyn Storage>, got: &Observed, label: &str) {
    let report = arbor_branching::validate(storage, None).await.unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "{label}: main: {:?}",
        report.discrepancies
    );
    for b in got.branches.keys() {
        let report = arbor_branching::validate(storage, Some(b)).await.unwrap();
        assert!(
            report.discrepancies.is_empty(),
            "{label}: branch {b}: {:?}",
            report.discrepancies
        );
    }
}

/// Every `p<N>` directory (finished or not) on the data and MDT sides.
async fn publication_ids(storage: &Arc<dyn Storage>) -> Vec<u64> {
    let mut out = Vec::new();
    for base in [
        ".hoodie/branches/publications".to_string(),
        format!("{MDT_META_DIR}/branches/publications"),
    ] {
        let (_, dirs) = storage.list_dir(&base).await.unwrap();
        out.extend(
            dirs.iter()
                .filter_map(|d| d.rsplit('/').next())
                .filter_map(parse_publication_id),
        );
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The objects left in the metadata directories of branch `name` (both sides).
async fn branch_leftovers(storage: &Arc<dyn Storage>, name: &str) -> Vec<String> {
    let root = MetaRoot::Branch(name.to_string());
    let mut out = Vec::new();
    for dir in [root.data_meta_dir(), root.mdt_meta_dir()] {
        out.extend(
            storage
                .list_all(&dir)
                .await
                .unwrap()
                .into_iter()
                .map(|o| o.key),
        );
    }
    out
}

/// Which side of the operation a crashed table is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Before,
    After,
}

/// Classifies `got` as `before` or `after`. A tag operation may stop between its savepoints and
/// its definition (creation writes the savepoints first, dropping removes the definition first):
/// main's savepoints and pending instants are then compared only at other instants than the
/// tag's, and the side is the one whose tag definitions main has.
fn classify(got: &Observed, before: &Observed, after: &Observed, op: &Op) -> Option<Outcome> {
    if got == before {
        return Some(Outcome::Before);
    }
    if got == after {
        return Some(Outcome::After);
    }
    // A branch creation pins its base on main before the branch exists, and a drop releases
    // the pin after the branch is gone: main's savepoints that differ between before and after
    // may be either way.
    let branch_pins: Vec<String> = before
        .main
        .savepoints
        .iter()
        .filter(|s| !after.main.savepoints.contains(*s))
        .chain(
            after
                .main
                .savepoints
                .iter()
                .filter(|s| !before.main.savepoints.contains(*s)),
        )
        .filter_map(|s| s.split(' ').nth(1).map(str::to_string))
        .collect();
    let instants: Vec<String> = match op {
        Op::CreateTag { instant, .. } | Op::DropTag { instant, .. } => {
            vec![instant.to_string()]
        }
        Op::CreateBranch { .. } | Op::DropBranch { .. } => branch_pins,
        _ => return None,
    };
    let mask = |o: &Observed| {
        let mut o = o.clone();
        for instant in &instants {
            o.main.savepoints.retain(|s| !s.ends_with(instant.as_str()));
            o.main.pending.retain(|p| !p.contains(instant.as_str()));
        }
        o
    };
    let got = mask(got);
    if got == mask(before) {
        Some(Outcome::Before)
    } else if got == mask(after) {
        Some(Outcome::After)
    } else {
        None
    }
}

/// One operation to crash, on a prepared table.
struct Scenario {
    label: &'static str,
    template: TestTable,
    op: Op,
    /// The latest rows of roots after the operation: main (`None`) or a working branch.
    rows_after: Vec<(Option<&'static str>, Vec<Row>)>,
    /// The usability check after the retry (a write on what the operation made) runs on every
    /// crash point that left the table as after, and on every `usable_every`-th distinct state
    /// (1: all); the other checks run on every distinct state.
    usable_every: usize,
    /// The crash points run.
    sampling: Sampling,
    /// hudi-rs (a reader that knows nothing of branches) reads the table path itself at every
    /// distinct crashed state and after every retry ([`PeerSweep`]).
    peer: bool,
}

/// What hudi-rs is asked at the end of a sweep (one `peer_digest.py --batch` run): the table
/// path of copies of every distinct crashed state (before its retry) and of the state after the
/// retry, and arbor's reads of main before and after the operation.
struct PeerSweep {
    python: std::path::PathBuf,
    dir: tempfile::TempDir,
    /// `(id, arbor's outcome, after the retry)` of every copied state.
    states: Vec<(String, Outcome, bool)>,
}

impl PeerSweep {
    fn new(s: &Scenario) -> Option<PeerSweep> {
        if !s.peer {
            return None;
        }
        let python = arbor_testkit::peer_python_or_skip("crash sweep with hudi-rs")?;
        Some(PeerSweep {
            python,
            dir: tempfile::tempdir().unwrap(),
            states: Vec::new(),
        })
    }

    /// Keeps a copy of the table at `base` as state `id`.
    fn keep(&mut self, base: &Path, id: String, outcome: Outcome, retried: bool) {
        copy_dir(base, &self.dir.path().join(&id));
        self.states.push((id, outcome, retried));
    }

    /// hudi-rs reads every kept copy as main before (`before`, arbor's batches of the template)
    /// or after (`after`, the fault-free run's) the operation, never anything else: the old
    /// main while arbor's main has not moved, the new main after every retry, and each at
    /// least once. Returns how many crashed states hudi-rs read as before while arbor's main
    /// had already moved (the window between `_SUCCESS` and the root repoint).
    async fn check(self, before: Vec<RecordBatch>, after: Vec<RecordBatch>, label: &str) -> usize {
        let write = |name: &str, batches: &[RecordBatch]| {
            let path = self.dir.path().join(name);
            arbor_testkit::write_arrow_ipc(&path, &batches[0].schema(), batches);
            serde_json::json!({"id": name, "arrow": path})
        };
        let mut requests = vec![write("before.arrow", &before), write("after.arrow", &after)];
        for (id, _, _) in &self.states {
            requests.push(serde_json::json!({"id": id, "table": self.dir.path().join(id)}));
        }
        let docs = arbor_testkit::peer_digest_batch(&self.python, &requests);
        let digest = |id: &str| {
            let d = &docs[id];
            assert!(d.get("error").is_none(), "{label}: hudi-rs on {id}: {d}");
            (d["row_count"].clone(), d["data_sha256"].clone())
        };
        let (old, new) = (digest("before.arrow"), digest("after.arrow"));
        assert_ne!(old, new, "{label}: the operation must change what is read");
        let (mut seen_old, mut seen_new, mut lagging) = (false, false, 0);
        for (id, arbor, retried) in &self.states {
            let got = digest(id);
            let is_old = got == old;
            assert!(
                is_old || got == new,
                "{label}: hudi-rs reads {id} (arbor: {arbor:?}) as neither the old nor the new main: {got:?}"
            );
            if *retried || *arbor == Outcome::Before {
                let want = if *retried {
                    Outcome::After
                } else {
                    Outcome::Before
                };
                assert_eq!(
                    if is_old {
                        Outcome::Before
                    } else {
                        Outcome::After
                    },
                    want,
                    "{label}: hudi-rs on {id} (arbor: {arbor:?}, after the retry: {retried})"
                );
            } else if is_old {
                lagging += 1;
            }
            seen_old |= is_old;
            seen_new |= !is_old;
        }
        assert!(seen_old && seen_new, "{label}: hudi-rs saw only one side");
        lagging
    }
}

#[derive(Debug, Default)]
struct Report {
    crash_points: usize,
    before: usize,
    after: usize,
    /// Crash points that left a storage state an earlier point left.
    repeated: usize,
    /// Crash points after which something was left for an explicit cleanup (a drop_tag whose
    /// retry with `if_exists` found no definition but the savepoints remained).
    leftovers: usize,
    /// Distinct states whose usability was checked after the retry.
    usable_checked: usize,
    /// Crash points not run ([`Sampling`]).
    skipped: usize,
    /// States hudi-rs read ([`PeerSweep`]).
    peer_checked: usize,
    /// Crashed states hudi-rs read as before although arbor's main had moved.
    peer_lagging: usize,
}

/// arbor's latest snapshot of main.
async fn main_batches(storage: &Arc<dyn Storage>) -> Vec<RecordBatch> {
    TableReader::open(storage.clone())
        .await
        .unwrap()
        .snapshot(None)
        .await
        .unwrap()
}

/// Which crash points a sweep runs: the first `head` and the last `tail` operations of the
/// fault-free run, and every `every`-th operation in between (`every: 1`: all of them).
#[derive(Debug, Clone, Copy)]
struct Sampling {
    head: usize,
    every: usize,
    tail: usize,
}

impl Sampling {
    const ALL: Sampling = Sampling {
        head: 0,
        every: 1,
        tail: 1,
    };

    fn runs(&self, n: usize, total_ops: usize) -> bool {
        n < self.head || n + self.tail >= total_ops || (n - self.head) % self.every == 0
    }
}

/// After the retry: checks that whatever the operation made (or freed) is fully usable.
async fn check_usable(storage: &Arc<dyn Storage>, op: &Op, after: &Observed, label: &str) {
    let label = format!("{label} (usable)");
    match op {
        Op::CreateBranch { name, .. } => {
            let b = open_branch(storage.clone(), name).await.unwrap();
            let mut model = Model::default();
            model.upsert(&after.branches[*name].root.rows);
            let w = rows(100..104, 50, "bw");
            b.write(WriteOperation::Upsert, vec![batch(&w)])
                .await
                .unwrap_or_else(|e| panic!("{label}: write on the branch: {e}"));
            model.upsert(&w);
            let reader = open_reader(storage.clone(), Some(name)).await.unwrap();
            assert_eq!(
                rows_of(&reader.snapshot(None).await.unwrap()),
                model.sorted(),
                "{label}: branch rows after a write"
            );
            let got = observe(storage, &label).await;
            assert_eq!(got.main, after.main, "{label}: main changed");
            assert_all_valid(storage, &got, &label).await;
        }
        Op::CreateTag { name, instant } => {
            let (reader, at) = tag_reader(storage.clone(), None, name).await.unwrap();
            assert_eq!(&at, instant, "{label}");
            let main = TableReader::open(storage.clone()).await.unwrap();
            assert_eq!(
                rows_of(&reader.snapshot(Some(&at)).await.unwrap()),
                rows_of(&main.snapshot(Some(instant)).await.unwrap()),
                "{label}: the tag reads main as of its instant"
            );
        }
        Op::DropTag { name, .. } => {
            assert!(
                matches!(
                    tag_reader(storage.clone(), None, name).await,
                    Err(BranchingError::TagNotFound { .. })
                ),
                "{label}: the dropped tag still reads"
            );
        }
        Op::Publish { .. } => {
            // Main keeps working after the publication.
            let main = Table::open(storage.clone()).await.unwrap();
            let mut model = Model::default();
            model.upsert(&after.main.rows);
            let w = rows(200..203, 60, "mw");
            main.write(WriteOperation::Upsert, vec![batch(&w)])
                .await
                .unwrap_or_else(|e| panic!("{label}: write on main: {e}"));
            model.upsert(&w);
            let reader = TableReader::open(storage.clone()).await.unwrap();
            assert_eq!(
                rows_of(&reader.snapshot(None).await.unwrap()),
                model.sorted(),
                "{label}: main after a write"
            );
            let got = observe(storage, &label).await;
            assert_all_valid(storage, &got, &label).await;
        }
        Op::DropBranch { name } => {
            // The name is free again: a new branch of that name works.
            let main = Table::open(storage.clone()).await.unwrap();
            create_branch(&main, name, BranchSource::MainHead)
                .await
                .unwrap_or_else(|e| panic!("{label}: re-creating {name}: {e}"));
            let b = open_branch(storage.clone(), name).await.unwrap();
            let mut model = Model::default();
            model.upsert(&after.main.rows);
            let w = rows(300..302, 70, "nb");
            b.write(WriteOperation::Upsert, vec![batch(&w)])
                .await
                .unwrap_or_else(|e| panic!("{label}: write on the new branch: {e}"));
            model.upsert(&w);
            let reader = open_reader(storage.clone(), Some(name)).await.unwrap();
            assert_eq!(
                rows_of(&reader.snapshot(None).await.unwrap()),
                model.sorted(),
                "{label}: the new branch's rows"
            );
            let got = observe(storage, &label).await;
            assert_all_valid(storage, &got, &label).await;
        }
    }
}

/// Checks a crashed table as a restarted process, retries the operation, and checks the
/// result. Returns the side the crash left.
#[allow(clippy::too_many_arguments)]
async fn check_crashed(
    s: &Scenario,
    storage: &Arc<dyn Storage>,
    base: &Path,
    before: &Observed,
    after: &Observed,
    crashed_ok: bool,
    label: &str,
    report: &mut Report,
    peer: &mut Option<PeerSweep>,
) -> Outcome {
    lapse_stale_lease(storage).await;
    let got = observe(storage, label).await;
    let outcome = classify(&got, before, after, &s.op).unwrap_or_else(|| {
        panic!(
            "{label}: the table is neither as before nor as after:\n got {got:#?}\n before \
             {before:#?}\n after {after:#?}"
        )
    });
    let point = report.crash_points;
    if let Some(p) = peer.as_mut() {
        p.keep(base, format!("crash-{point}"), outcome, false);
    }
    if crashed_ok {
        assert_eq!(
            outcome,
            Outcome::After,
            "{label}: a reported success is lost"
        );
    }
    assert_all_valid(storage, &got, label).await;
    if let Op::CreateBranch { name, .. } = &s.op {
        if !got.branches.contains_key(*name) {
            assert!(
                matches!(
                    open_reader(storage.clone(), Some(name)).await,
                    Err(BranchingError::BranchNotFound { .. })
                ),
                "{label}: an unlisted branch must not be readable"
            );
        }
    }
    if let Op::CreateTag { name, instant } | Op::DropTag { name, instant } = &s.op {
        // A listed tag reads main as of its instant; an unlisted one does not read.
        match tag_reader(storage.clone(), None, name).await {
            Ok((reader, at)) => {
                assert!(
                    got.main
                        .tags
                        .contains(&(name.to_string(), instant.to_string())),
                    "{label}: an unlisted tag reads"
                );
                assert_eq!(&at, instant, "{label}");
                let main = TableReader::open(storage.clone()).await.unwrap();
                assert_eq!(
                    rows_of(&reader.snapshot(Some(&at)).await.unwrap()),
                    rows_of(&main.snapshot(Some(instant)).await.unwrap()),
                    "{label}: the tag reads main as of its instant"
                );
            }
            Err(BranchingError::TagNotFound { .. }) => assert!(
                !got.main.tags.iter().any(|(n, _)| n == name),
                "{label}: a listed tag does not read"
            ),
            Err(e) => panic!("{label}: reading tag {name}: {e}"),
        }
    }
    if let Op::DropBranch { name } = &s.op {
        if !got.branches.contains_key(*name) {
            assert!(
                matches!(
                    open_branch(storage.clone(), name).await,
                    Err(BranchingError::BranchNotFound { .. })
                ),
                "{label}: a dropped branch must not open"
            );
        }
    }

    // The retry.
    let leftover_before_retry = match &s.op {
        Op::DropBranch { name } => branch_leftovers(storage, name).await,
        _ => Vec::new(),
    };
    let ids_before_retry = publication_ids(storage).await;
    let table = handle(storage, &s.op).await;
    let label = format!("{label} (retry)");
    match (&s.op, outcome, run(&table, &s.op, true).await) {
        (_, _, Ok(Done::Published(n))) => {
            assert!(
                ids_before_retry.iter().all(|i| *i < n),
                "{label}: publication {n} despite existing {ids_before_retry:?}"
            );
            assert_eq!(
                resolve_main(storage.as_ref()).await.unwrap(),
                MetaRoot::Publication(n),
                "{label}"
            );
        }
        (_, _, Ok(_)) => {}
        (Op::CreateBranch { .. }, Outcome::After, Err(BranchingError::Refused { reason, .. }))
            if reason.contains("exists") => {}
        (Op::CreateTag { .. }, Outcome::After, Err(BranchingError::Refused { reason, .. }))
            if reason.contains("exists") => {}
        (Op::DropBranch { .. }, Outcome::After, Err(BranchingError::BranchNotFound { .. })) => {
            assert!(
                leftover_before_retry.is_empty(),
                "{label}: BranchNotFound although the crashed drop left {leftover_before_retry:?}"
            );
        }
        (_, _, Err(e)) => panic!("{label}: the retry failed: {e}"),
    }
    drop(table);

    // A drop_tag whose definition was removed before the crash leaves its savepoints: the
    // retry with `if_exists` is a no-op (RFC-116 section 3), `delete_savepoint` removes them.
    if let Op::DropTag { instant, .. } = &s.op {
        let now = observe(storage, &label).await;
        if now
            .main
            .savepoints
            .iter()
            .any(|sp| sp.ends_with(instant.as_str()))
            || now
                .main
                .pending
                .iter()
                .any(|p| p.contains(instant.as_str()))
        {
            let main = Table::open(storage.clone()).await.unwrap();
            arbor_cleaner::delete_savepoint(&main, instant)
                .await
                .unwrap_or_else(|e| panic!("{label}: deleting the leftover savepoint: {e}"));
            report.leftovers += 1;
        }
    }

    let got = observe(storage, &label).await;
    assert_eq!(&got, after, "{label}: final state");
    assert_all_valid(storage, &got, &label).await;
    if let Some(p) = peer.as_mut() {
        p.keep(base, format!("retry-{point}"), Outcome::After, true);
    }
    let distinct = report.crash_points - report.repeated - report.skipped;
    if outcome == Outcome::After || distinct % s.usable_every == 0 {
        check_usable(storage, &s.op, after, &label).await;
        report.usable_checked += 1;
    }
    outcome
}

/// The fault-free run did what the operation does.
fn assert_done(s: &Scenario, before: &Observed, after: &Observed) {
    let label = format!("{}: fault-free run", s.label);
    for (root, rows) in &s.rows_after {
        let got = match root {
            None => &after.main.rows,
            Some(b) => &after.branches[*b].root.rows,
        };
        assert_eq!(got, rows, "{label}: rows of {root:?}");
    }
    match &s.op {
        Op::CreateBranch { name, from_tag } => {
            assert!(!before.branches.contains_key(*name), "{label}");
            let b = &after.branches[*name];
            assert_eq!(b.from_tag.as_deref(), *from_tag, "{label}");
            assert_eq!(b.root.pending, Vec::<String>::new(), "{label}");
        }
        Op::CreateTag { name, instant } => {
            let tag = (name.to_string(), instant.to_string());
            assert!(!before.main.tags.contains(&tag), "{label}");
            assert!(after.main.tags.contains(&tag), "{label}");
            for side in ["data", "mdt"] {
                let sp = format!("{side} {instant}");
                assert!(!before.main.savepoints.contains(&sp), "{label}: {sp}");
                assert!(after.main.savepoints.contains(&sp), "{label}: {sp}");
            }
        }
        Op::DropTag { name, instant } => {
            let tag = (name.to_string(), instant.to_string());
            assert!(before.main.tags.contains(&tag), "{label}");
            assert!(!after.main.tags.contains(&tag), "{label}");
            assert!(
                !after
                    .main
                    .savepoints
                    .iter()
                    .any(|s| s.ends_with(instant.as_str())),
                "{label}"
            );
        }
        Op::Publish { branch } => {
            let b = &after.branches[*branch];
            assert_eq!(after.main.rows, b.root.rows, "{label}");
            assert_eq!(after.main.tags, b.root.tags, "{label}");
            // Main also keeps the base pins of the branches that stand (this one too: publish
            // without drop).
            let bases: Vec<&String> = after
                .branches
                .values()
                .filter_map(|x| x.base.as_ref())
                .collect();
            let pin = |s: &&String| bases.iter().any(|b| s.ends_with(b.as_str()));
            let main_sps: Vec<&String> = after.main.savepoints.iter().filter(|s| !pin(s)).collect();
            let branch_sps: Vec<&String> = b.root.savepoints.iter().filter(|s| !pin(s)).collect();
            assert_eq!(main_sps, branch_sps, "{label}");
            assert_ne!(before.main.rows, after.main.rows, "{label}");
        }
        Op::DropBranch { name } => {
            assert!(before.branches.contains_key(*name), "{label}");
            assert!(!after.branches.contains_key(*name), "{label}");
        }
    }
}

async fn sweep(s: Scenario) -> Report {
    let started = std::time::Instant::now();
    let setup = format!("{}: setup", s.label);
    let before = observe(&s.template.storage, &setup).await;
    assert_all_valid(&s.template.storage, &before, &setup).await;

    // The fault-free run on a copy: the state after, and the number of operations.
    let mut peer = PeerSweep::new(&s);
    let before_batches = main_batches(&s.template.storage).await;
    let (after, total_ops, after_batches) = {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        copy_dir(&s.template.base, &base);
        let storage = local(&base);
        let faulty = Arc::new(FaultInjectingStorage::new(storage.clone()));
        let table = handle(&(faulty.clone() as Arc<dyn Storage>), &s.op).await;
        faulty.reset();
        run(&table, &s.op, false)
            .await
            .unwrap_or_else(|e| panic!("{}: fault-free run: {e}", s.label));
        let ops = faulty.op_count();
        if std::env::var("CRASH_DEBUG").is_ok() {
            for o in faulty.ops() {
                println!("{}: {} {} {}", s.label, o.index, o.kind, o.key);
            }
        }
        let label = format!("{}: fault-free run", s.label);
        assert!(
            !lapse_stale_lease(&storage).await,
            "{label}: the lock is still held"
        );
        let after = observe(&storage, &label).await;
        assert_all_valid(&storage, &after, &label).await;
        let batches = main_batches(&storage).await;
        if let Some(p) = peer.as_mut() {
            p.keep(&base, "fault-free".to_string(), Outcome::After, true);
        }
        (after, ops, batches)
    };
    assert_ne!(
        before, after,
        "{}: the operation must change the table",
        s.label
    );
    assert_done(&s, &before, &after);

    let mut report = Report::default();
    let mut checked: HashSet<u64> = HashSet::new();
    let mut n = 0;
    loop {
        if !s.sampling.runs(n, total_ops) {
            report.skipped += 1;
            report.crash_points += 1;
            n += 1;
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        copy_dir(&s.template.base, &base);
        let faulty = Arc::new(FaultInjectingStorage::new(local(&base)));
        faulty.set_partial_batches(true);
        let crashing = handle(&(faulty.clone() as Arc<dyn Storage>), &s.op).await;
        faulty.reset();
        faulty.set_mode(FaultMode::CrashAt(n));
        let result = run(&crashing, &s.op, false).await;
        drop(crashing);
        let label = format!("{}: crash at operation {n}", s.label);
        if let Err(e) = &result {
            assert!(faulty.has_crashed(), "{label}: failed without a crash: {e}");
        }
        let done = result.is_ok() && faulty.op_count() <= n;
        if !done && !checked.insert(fingerprint(&base)) {
            report.repeated += 1;
            report.crash_points += 1;
            n += 1;
            continue;
        }

        // A restarted process: fresh storage and handles over the same directory.
        let fresh = local(&base);
        let outcome = check_crashed(
            &s,
            &fresh,
            &base,
            &before,
            &after,
            result.is_ok(),
            &label,
            &mut report,
            &mut peer,
        )
        .await;
        match outcome {
            Outcome::Before => report.before += 1,
            Outcome::After => report.after += 1,
        }
        if done {
            // The operation finished before reaching operation n: every point was covered.
            break;
        }
        report.crash_points += 1;
        n += 1;
        assert!(n < 10_000, "{}: the operation never finished", s.label);
    }
    assert_eq!(
        report.crash_points, total_ops,
        "{}: the sweep must crash once before every operation of the fault-free run (or sample it out)",
        s.label
    );
    assert!(
        report.before > 0 && report.after > 0,
        "{}: {report:?}",
        s.label
    );
    let peer_started = std::time::Instant::now();
    let peer_states = peer.as_ref().map_or(0, |p| p.states.len());
    if let Some(p) = peer {
        report.peer_lagging = p.check(before_batches, after_batches, s.label).await;
        report.peer_checked = peer_states;
        println!(
            "{}: hudi-rs read {peer_states} states (the old main at {} crashed states where \
             arbor's main had moved) in {:.1?}",
            s.label,
            report.peer_lagging,
            peer_started.elapsed()
        );
    }
    println!(
        "{}: swept {} crash points ({} distinct states: {} before, {} after, {} needing a \
         savepoint cleanup, {} checked for usability; {} points sampled out), in {:.1?}",
        s.label,
        report.crash_points,
        report.crash_points - report.repeated - report.skipped,
        report.before,
        report.after,
        report.leftovers,
        report.usable_checked,
        report.skipped,
        started.elapsed()
    );
    report
}

/// Main with three writes (upsert, overlapping upsert, delete); returns the instants and the
/// rows as of each.
async fn main_history(t: &TestTable) -> (Vec<InstantTime>, Vec<Vec<Row>>) {
    let mut model = Model::default();
    let mut instants = Vec::new();
    let mut snapshots = Vec::new();
    let r1 = rows(0..12, 1, "a");
    instants.push(t.write(WriteOperation::Upsert, &r1).await);
    model.upsert(&r1);
    snapshots.push(model.sorted());
    let r2 = rows(6..18, 2, "b");
    instants.push(t.write(WriteOperation::Upsert, &r2).await);
    model.upsert(&r2);
    snapshots.push(model.sorted());
    let d = rows(0..2, 3, "");
    instants.push(t.write(WriteOperation::Delete, &d).await);
    model.delete(&d);
    snapshots.push(model.sorted());
    (instants, snapshots)
}

/// Writes an upsert and a delete on `branch`; applies them to `model`.
async fn branch_writes(t: &TestTable, branch: &Table, model: &mut Model) {
    let w = rows(10..24, 5, "br");
    t.write_on(branch, WriteOperation::Upsert, &w).await;
    model.upsert(&w);
    let d = rows(3..5, 6, "");
    t.write_on(branch, WriteOperation::Delete, &d).await;
    model.delete(&d);
}

fn model_of(rows: &[Row]) -> Model {
    let mut m = Model::default();
    m.upsert(rows);
    m
}

#[tokio::test]
async fn test_create_branch_crash_sweep_cow_from_main_head_branch_absent_or_usable_and_retry_succeeds(
) {
    let t = create(TableType::CopyOnWrite, true).await;
    let (instants, snapshots) = main_history(&t).await;
    create_tag(&t.table, "v1", Some(&instants[0]), None)
        .await
        .unwrap();
    let head = snapshots[2].clone();
    sweep(Scenario {
        label: "create_branch from main's head, COW",
        template: t,
        op: Op::CreateBranch {
            name: "b",
            from_tag: None,
        },
        usable_every: 3,
        sampling: Sampling::ALL,
        peer: false,
        rows_after: vec![(None, head.clone()), (Some("b"), head)],
    })
    .await;
}

#[tokio::test]
async fn test_create_branch_crash_sweep_mor_from_tag_branch_absent_or_usable_and_retry_succeeds() {
    let t = create(TableType::MergeOnRead, true).await;
    let (instants, snapshots) = main_history(&t).await;
    create_tag(&t.table, "v2", Some(&instants[1]), None)
        .await
        .unwrap();
    sweep(Scenario {
        label: "create_branch from a tag, MOR",
        template: t,
        op: Op::CreateBranch {
            name: "fix",
            from_tag: Some("v2"),
        },
        usable_every: 3,
        sampling: Sampling::ALL,
        peer: false,
        rows_after: vec![
            (None, snapshots[2].clone()),
            (Some("fix"), snapshots[1].clone()),
        ],
    })
    .await;
}

#[tokio::test]
async fn test_create_tag_crash_sweep_mor_tag_absent_or_complete_and_retry_succeeds() {
    let t = create(TableType::MergeOnRead, true).await;
    let (instants, snapshots) = main_history(&t).await;
    sweep(Scenario {
        label: "create_tag on main, MOR",
        template: t,
        op: Op::CreateTag {
            name: "v2",
            instant: instants[1].clone(),
        },
        usable_every: 1,
        sampling: Sampling::ALL,
        peer: false,
        rows_after: vec![(None, snapshots[2].clone())],
    })
    .await;
}

#[tokio::test]
async fn test_drop_tag_crash_sweep_cow_tag_present_or_gone_and_retry_succeeds() {
    let t = create(TableType::CopyOnWrite, true).await;
    let (instants, snapshots) = main_history(&t).await;
    create_tag(&t.table, "v1", Some(&instants[0]), None)
        .await
        .unwrap();
    sweep(Scenario {
        label: "drop_tag on main, COW",
        template: t,
        op: Op::DropTag {
            name: "v1",
            instant: instants[0].clone(),
        },
        usable_every: 1,
        sampling: Sampling::ALL,
        peer: false,
        rows_after: vec![(None, snapshots[2].clone())],
    })
    .await;
}

#[tokio::test]
async fn test_publish_crash_sweep_cow_first_publication_main_before_or_after_and_retry_succeeds() {
    let t = create(TableType::CopyOnWrite, true).await;
    let (instants, snapshots) = main_history(&t).await;
    create_tag(&t.table, "v1", Some(&instants[0]), None)
        .await
        .unwrap();
    create_branch(&t.table, "audit", BranchSource::MainHead)
        .await
        .unwrap();
    let b = t.branch("audit").await;
    let mut model = model_of(&snapshots[2]);
    branch_writes(&t, &b, &mut model).await;
    // An insert overwrite of partition `eu` (a replacecommit): a legacy reader that took the
    // branch's data timeline with main's old FILES partition would drop the replaced file
    // groups without seeing their replacements (the crash ordering must prevent that mix).
    let w: Vec<Row> = rows(40..50, 7, "ow")
        .into_iter()
        .filter(|r| r.1 == "eu")
        .collect();
    t.write_on(&b, WriteOperation::InsertOverwrite, &w).await;
    model.rows.retain(|_, r| r.1 != "eu");
    model.upsert(&w);
    sweep(Scenario {
        label: "publish (p1), COW",
        template: t,
        op: Op::Publish { branch: "audit" },
        usable_every: 6,
        sampling: Sampling::ALL,
        peer: true,
        rows_after: vec![(None, model.sorted()), (Some("audit"), model.sorted())],
    })
    .await;
}

#[tokio::test]
async fn test_publish_crash_sweep_mor_after_earlier_publication_main_before_or_after_and_retry_succeeds(
) {
    let t = create(TableType::MergeOnRead, true).await;
    let mut model = Model::default();
    let r = rows(0..10, 1, "a");
    t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    create_branch(&t.table, "first", BranchSource::MainHead)
        .await
        .unwrap();
    let first = t.branch("first").await;
    let r = rows(5..15, 2, "f");
    t.write_on(&first, WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    assert_eq!(publish(&first).await.unwrap().publication, 1);
    // Main is p1 now; it gets a write and a tag, then a second branch publishes over it.
    let main = Table::open(t.storage.clone()).await.unwrap();
    let r = rows(15..20, 3, "m");
    let c = t.write_on(&main, WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    create_tag(&main, "m1", Some(&c), None).await.unwrap();
    create_branch(&main, "audit", BranchSource::MainHead)
        .await
        .unwrap();
    let b = t.branch("audit").await;
    branch_writes(&t, &b, &mut model).await;
    let template = TestTable { table: main, ..t };
    sweep(Scenario {
        label: "publish (p2 over p1), MOR",
        template,
        op: Op::Publish { branch: "audit" },
        usable_every: 6,
        // The COW publication sweeps every point; here the checks, the reservation of p2 and
        // the first copy (the first 40 operations) and the last 4 (the last copy, `_SUCCESS`,
        // the lock's release) are all swept, and every second copy in between.
        sampling: Sampling {
            head: 40,
            every: 2,
            tail: 4,
        },
        peer: true,
        rows_after: vec![(None, model.sorted())],
    })
    .await;
}

#[tokio::test]
async fn test_drop_branch_crash_sweep_mor_branch_present_or_gone_and_retry_succeeds() {
    let t = create(TableType::MergeOnRead, true).await;
    let (_, snapshots) = main_history(&t).await;
    create_branch(&t.table, "tmp", BranchSource::MainHead)
        .await
        .unwrap();
    let b = t.branch("tmp").await;
    let mut model = model_of(&snapshots[2]);
    branch_writes(&t, &b, &mut model).await;
    create_tag(&b, "bt", None, None).await.unwrap();
    sweep(Scenario {
        label: "drop_branch with writes and a tag, MOR",
        template: t,
        op: Op::DropBranch { name: "tmp" },
        usable_every: 1,
        sampling: Sampling::ALL,
        peer: false,
        rows_after: vec![(None, snapshots[2].clone())],
    })
    .await;
}
