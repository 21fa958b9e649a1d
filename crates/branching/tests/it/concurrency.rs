//! Concurrency across processes: worker processes write on main, write on their own branch, tag
//! and publish on one table at once, through the table lock (the default object-store lock, and
//! the PostgreSQL lock provider when a database is available).
//!
//! The test binary re-executes itself: each worker is [`test_concurrency_worker_process`] run
//! with `--exact ... --ignored` and [`WORKER_ENV`] set (without it that test returns at once, so
//! a plain `--ignored` run is harmless). A worker prints one [`EVENT`] line of JSON per
//! operation that succeeded (and per refused publication); the parent then checks:
//! - every reported publication number is distinct, every reported publication is complete
//!   (`_SUCCESS`, `hoodie.properties`, loadable timelines) and no completed publication went
//!   unreported; main resolves to the last one and reads;
//! - no commit is lost: every write a worker saw succeed on main is in the final main's timeline
//!   (active or archived) and its rows in main's snapshot (a publication only fast-forwards, so
//!   it must carry every write main had); every branch write of a published branch generation
//!   before its publication is in main as well; every write of a branch's current generation is
//!   in that branch; tags likewise;
//! - instant times are unique, and the metadata tables of main and the branches agree with
//!   storage.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use arbor_branching::{
    create_branch, create_tag, drop_branch, list_tags, open_branch, publish, BranchSource,
    BranchingError, TagFilter,
};
use arbor_storage::{
    Lease, LockProvider, LockResult, ObjectStoreStorage, PostgresLockProvider, Storage, StorageExt,
};
use arbor_table::read::TableReader;
use arbor_table::{Table, TableError, WriteOperation};
use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::config::TableType;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::metaroot::SUCCESS_FILE;
use arbor_timeline::{resolve_main, MetaRoot, TableConfig, TableLayout};
use serde_json::{json, Value};

use arbor_testkit_tables::{batch, create, rows_of, Row};

/// The environment variable that makes [`test_concurrency_worker_process`] a worker: JSON
/// `{"table": path, "worker": id, "ops": n, "pg": null | {"conn": .., "prefix": ..}}`.
const WORKER_ENV: &str = "ARBOR_BRANCHING_CONCURRENCY_WORKER";
/// The worker test's name as `--exact` wants it.
const WORKER_TEST: &str = "concurrency::test_concurrency_worker_process";
/// The prefix of a worker's event lines on stdout (the harness prints other lines too).
const EVENT: &str = "ARBOR-EVENT ";

// ---------------------------------------------------------------------------------------------
// Locks

/// A lock provider that prefixes every lock name, so this test's table lock in a shared
/// PostgreSQL database is its own (the table lock is always named `table_lock`).
#[derive(Debug)]
struct Namespaced {
    inner: Arc<dyn LockProvider>,
    prefix: String,
}

#[async_trait::async_trait]
impl LockProvider for Namespaced {
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease> {
        self.inner
            .acquire(&format!("{}{lock}", self.prefix), lease, timeout)
            .await
    }

    async fn renew(&self, held: &Lease, lease: Duration) -> LockResult<Lease> {
        self.inner.renew(held, lease).await
    }

    async fn release(&self, held: &Lease) -> LockResult<()> {
        self.inner.release(held).await
    }
}

/// The PostgreSQL connection string of `ARBOR_TEST_PG_URL`; `None` after a visible skip line
/// outside CI, a failure under CI.
fn pg_conn_or_skip() -> Option<String> {
    match std::env::var("ARBOR_TEST_PG_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            arbor_testkit::skip(
                "SKIPPED: branching concurrency with the PostgreSQL lock: ARBOR_TEST_PG_URL is not set",
            );
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The worker process

/// A small deterministic generator (xorshift64*), seeded per worker.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

struct Worker {
    id: u64,
    storage: Arc<dyn Storage>,
    lock: Option<Arc<dyn LockProvider>>,
    main: Table,
    branch_name: String,
    branch: Option<Table>,
    generation: u64,
    seq: u64,
}

fn emit(event: Value) {
    println!("{EVENT}{event}");
}

fn is_main_moved(e: &BranchingError) -> bool {
    matches!(e, BranchingError::Table(TableError::MainMoved { .. }))
}

impl Worker {
    fn with_lock(&self, t: Table) -> Table {
        match &self.lock {
            Some(l) => t.with_lock_provider(l.clone()),
            None => t,
        }
    }

    async fn reopen_main(&mut self) {
        self.main = self.with_lock(Table::open(self.storage.clone()).await.unwrap());
    }

    /// Rows with keys no other commit uses: `w<id>-<seq>-<i>`, two regions.
    fn next_rows(&mut self, tag: &str) -> Vec<Row> {
        self.seq += 1;
        (0..3)
            .map(|i| {
                (
                    format!("w{}-{:04}-{i}", self.id, self.seq),
                    if i % 2 == 0 { "us" } else { "eu" }.to_string(),
                    self.seq as i64,
                    format!("{tag}{}", self.seq),
                )
            })
            .collect()
    }

    async fn write_main(&mut self) {
        let rows = self.next_rows("m");
        let keys: Vec<&String> = rows.iter().map(|r| &r.0).collect();
        for _ in 0..50 {
            match self
                .main
                .write(WriteOperation::Upsert, vec![batch(&rows)])
                .await
            {
                Ok(r) => {
                    emit(
                        json!({"ev": "main_commit", "w": self.id, "instant": r.instant.to_string(), "keys": keys}),
                    );
                    return;
                }
                Err(TableError::MainMoved { .. }) | Err(TableError::CommitConflict { .. }) => {
                    self.reopen_main().await;
                }
                Err(e) => panic!("worker {}: write on main: {e}", self.id),
            }
        }
        panic!("worker {}: write on main kept failing", self.id);
    }

    /// Creates this worker's branch from main's head (dropping the old one first), retrying
    /// while main moves or has pending writes. Leaves `branch` `None` if that never works.
    async fn recreate_branch(&mut self) {
        for attempt in 0..20u64 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
            }
            if self.branch.is_some() {
                match drop_branch(&self.main, &self.branch_name).await {
                    Ok(()) => self.branch = None,
                    Err(e) if is_main_moved(&e) => {
                        self.reopen_main().await;
                        continue;
                    }
                    Err(e) => panic!("worker {}: drop branch: {e}", self.id),
                }
            }
            match create_branch(&self.main, &self.branch_name, BranchSource::MainHead).await {
                Ok(info) => {
                    self.generation += 1;
                    let b = open_branch(self.storage.clone(), &self.branch_name)
                        .await
                        .unwrap();
                    self.branch = Some(self.with_lock(b));
                    emit(
                        json!({"ev": "branch_created", "w": self.id, "branch": self.branch_name,
                        "gen": self.generation, "base": info.base_instant}),
                    );
                    return;
                }
                Err(e) if is_main_moved(&e) => self.reopen_main().await,
                // Main has a pending write of another worker: wait for it.
                Err(BranchingError::Refused { .. }) => {}
                Err(e) => panic!("worker {}: create branch: {e}", self.id),
            }
        }
        emit(json!({"ev": "branch_unavailable", "w": self.id}));
    }

    async fn write_branch(&mut self) {
        if self.branch.is_none() {
            self.recreate_branch().await;
        }
        let rows = self.next_rows("b");
        let keys: Vec<&String> = rows.iter().map(|r| &r.0).collect();
        let Some(b) = &self.branch else { return };
        let r = b
            .write(WriteOperation::Upsert, vec![batch(&rows)])
            .await
            .unwrap_or_else(|e| panic!("worker {}: write on branch: {e}", self.id));
        emit(
            json!({"ev": "branch_commit", "w": self.id, "branch": self.branch_name,
            "gen": self.generation, "instant": r.instant.to_string(), "keys": keys}),
        );
    }

    async fn tag(&mut self, on_main: bool) {
        self.seq += 1;
        let name = format!("w{}-t{}", self.id, self.seq);
        let result = if on_main {
            create_tag(&self.main, &name, None, None).await
        } else {
            let Some(b) = &self.branch else { return };
            create_tag(b, &name, None, None).await
        };
        match result {
            Ok(t) => emit(
                json!({"ev": "tag", "w": self.id, "main": on_main, "gen": self.generation,
                "name": t.name, "instant": t.instant}),
            ),
            Err(e) if is_main_moved(&e) => self.reopen_main().await,
            // The instant already has a tag, or a pending write is in the way.
            Err(BranchingError::Refused { .. }) => {}
            Err(e) => panic!("worker {}: create tag {name}: {e}", self.id),
        }
    }

    /// Publishes the branch (with a fresh write on it); on divergence or refusal recreates
    /// the branch and tries again, a few times.
    async fn publish(&mut self) {
        for _ in 0..3 {
            self.write_branch().await;
            let Some(b) = &self.branch else { return };
            match publish(b).await {
                Ok(out) => {
                    emit(
                        json!({"ev": "publish", "w": self.id, "branch": self.branch_name,
                        "gen": self.generation, "n": out.publication,
                        "head": out.head.map(|h| h.to_string())}),
                    );
                    return;
                }
                Err(e @ (BranchingError::Divergent { .. } | BranchingError::Refused { .. })) => {
                    emit(
                        json!({"ev": "publish_refused", "w": self.id, "gen": self.generation,
                        "reason": e.to_string()}),
                    );
                    self.recreate_branch().await;
                }
                Err(e) => panic!("worker {}: publish: {e}", self.id),
            }
        }
    }
}

async fn worker(spec: Value) {
    let id = spec["worker"].as_u64().unwrap();
    let ops = spec["ops"].as_u64().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(
        ObjectStoreStorage::local(std::path::Path::new(spec["table"].as_str().unwrap())).unwrap(),
    );
    let lock: Option<Arc<dyn LockProvider>> = match spec["pg"].as_object() {
        Some(pg) => Some(Arc::new(Namespaced {
            inner: Arc::new(
                PostgresLockProvider::connect(pg["conn"].as_str().unwrap())
                    .await
                    .unwrap(),
            ),
            prefix: pg["prefix"].as_str().unwrap().to_string(),
        })),
        None => None,
    };
    let main = Table::open(storage.clone()).await.unwrap();
    let mut w = Worker {
        id,
        storage,
        main: match &lock {
            Some(l) => main.with_lock_provider(l.clone()),
            None => main,
        },
        lock,
        branch_name: format!("w{id}"),
        branch: None,
        generation: 0,
        seq: 0,
    };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (id + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    w.recreate_branch().await;
    for _ in 0..ops {
        match rng.below(100) {
            0..=34 => w.write_main().await,
            35..=62 => w.write_branch().await,
            63..=67 => w.tag(true).await,
            68..=74 => w.tag(false).await,
            _ => w.publish().await,
        }
    }
    emit(json!({"ev": "done", "w": id}));
}

/// One worker of the concurrency tests (see the module doc); does nothing unless spawned by
/// them with [`WORKER_ENV`] set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process of the concurrency tests; returns at once unless spawned by them"]
async fn test_concurrency_worker_process() {
    let Ok(spec) = std::env::var(WORKER_ENV) else {
        return;
    };
    worker(serde_json::from_str(&spec).unwrap()).await;
}

// ---------------------------------------------------------------------------------------------
// The parent

/// Runs `workers` worker processes of `ops` operations each on a new table of `table_type`
/// (with the PostgreSQL lock at `pg` when given) and checks the outcome; see the module doc.
async fn run_and_check(table_type: TableType, workers: u64, ops: u64, pg: Option<&str>) {
    let t = create(table_type, true).await;
    // Main has a write to branch from and tag.
    t.write(
        WriteOperation::Upsert,
        &arbor_testkit_tables::rows(0..4, 0, "init"),
    )
    .await;
    let pg = pg.map(
        |conn| json!({"conn": conn, "prefix": format!("conc-{}-", uuid::Uuid::new_v4().simple())}),
    );
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..workers)
        .map(|id| {
            let spec =
                json!({"table": t.base.to_string_lossy(), "worker": id, "ops": ops, "pg": pg});
            Command::new(&exe)
                .args(["--exact", WORKER_TEST, "--nocapture", "--ignored"])
                .env(WORKER_ENV, spec.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut events: Vec<Value> = Vec::new();
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "worker failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let mine: Vec<Value> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix(EVENT))
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            mine.last().map(|e| e["ev"].clone()),
            Some(json!("done")),
            "a worker did not finish:\n{stdout}"
        );
        events.extend(mine);
    }
    let dir = t.base.parent().unwrap().to_path_buf();
    let lines: Vec<String> = events.iter().map(Value::to_string).collect();
    std::fs::write(dir.join("events.jsonl"), lines.join("\n")).unwrap();
    let _keep = KeepOnPanic(dir);
    check(&t.storage, &events).await;
}

/// Moves the table's directory (with the workers' `events.jsonl`) aside when the test fails,
/// so the failure can be examined.
struct KeepOnPanic(std::path::PathBuf);

impl Drop for KeepOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let kept = std::env::temp_dir().join(format!(
                "arbor-branching-concurrency-{}",
                uuid::Uuid::new_v4().simple()
            ));
            if std::fs::rename(&self.0, &kept).is_ok() {
                eprintln!("the failed table and events are kept in {}", kept.display());
            }
        }
    }
}

/// The keys of `rows`.
fn keys_of(rows: &[Row]) -> BTreeSet<String> {
    rows.iter().map(|r| r.0.clone()).collect()
}

/// The completed writes (requested times) of `root`'s timeline, active and archived.
async fn writes_of(storage: &Arc<dyn Storage>, root: &MetaRoot) -> BTreeSet<String> {
    let view = root.view(storage.clone());
    let config = TableConfig::load(view.as_ref(), DEFAULT_META_DIR)
        .await
        .unwrap();
    let layout = TableLayout::from_config(DEFAULT_META_DIR, &config).unwrap();
    TimelineHistory::load(view, layout)
        .await
        .unwrap_or_else(|e| panic!("timeline of {root}: {e}"))
        .completed_writes()
        .into_iter()
        .map(|i| i.requested_time.to_string())
        .collect()
}

fn of<'a>(events: &'a [Value], ev: &'static str) -> impl Iterator<Item = &'a Value> {
    events.iter().filter(move |e| e["ev"] == ev)
}

async fn check(storage: &Arc<dyn Storage>, events: &[Value]) {
    let of = |ev: &'static str| of(events, ev);
    let mut summary: BTreeMap<&str, usize> = BTreeMap::new();
    for e in events {
        *summary.entry(e["ev"].as_str().unwrap()).or_default() += 1;
    }
    eprintln!("concurrency outcome: {summary:?}");
    let main_commits: Vec<&Value> = of("main_commit").collect();
    let publications: Vec<&Value> = of("publish").collect();
    assert!(!main_commits.is_empty(), "no write on main succeeded");
    assert!(
        !publications.is_empty(),
        "no publication succeeded; the test exercised nothing: {:?}",
        of("publish_refused").collect::<Vec<_>>()
    );

    // Instant times are unique across workers and roots.
    let mut instants = BTreeSet::new();
    for e in of("main_commit").chain(of("branch_commit")) {
        assert!(
            instants.insert(e["instant"].as_str().unwrap()),
            "instant reused: {e}"
        );
    }

    // Publications: distinct numbers, each complete, none unreported.
    let reported: BTreeSet<u64> = publications
        .iter()
        .map(|e| e["n"].as_u64().unwrap())
        .collect();
    assert_eq!(
        reported.len(),
        publications.len(),
        "two publications got the same number: {publications:?}"
    );
    let mut completed = BTreeSet::new();
    let (_, dirs) = storage
        .list_dir(".hoodie/branches/publications")
        .await
        .unwrap();
    for d in dirs {
        let name = d
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap()
            .to_string();
        let n: u64 = name.strip_prefix('p').unwrap().parse().unwrap();
        let root = MetaRoot::Publication(n);
        if !storage
            .exists(&format!("{}/{SUCCESS_FILE}", root.data_meta_dir()))
            .await
            .unwrap()
        {
            continue;
        }
        assert!(storage
            .exists(&format!("{}/hoodie.properties", root.data_meta_dir()))
            .await
            .unwrap());
        assert!(!writes_of(storage, &root).await.is_empty(), "{root}");
        completed.insert(n);
    }
    assert_eq!(
        completed, reported,
        "completed publications and reported ones differ"
    );
    let main = resolve_main(storage.as_ref()).await.unwrap();
    assert_eq!(main, MetaRoot::Publication(*reported.last().unwrap()));
    Table::open(storage.clone()).await.unwrap();
    let main_rows = keys_of(&rows_of(
        &TableReader::open(storage.clone())
            .await
            .unwrap()
            .snapshot(None)
            .await
            .unwrap(),
    ));
    let main_writes = writes_of(storage, &main).await;
    let main_tags: BTreeSet<String> = list_tags(storage, None, TagFilter::All)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();

    // Nothing main had is lost: every write seen succeeding on main, every branch write and
    // tag published with its branch, every tag made on main.
    let must_be_in_main = |e: &Value| {
        let instant = e["instant"].as_str().unwrap();
        assert!(
            main_writes.contains(instant),
            "lost from main's timeline: {e}"
        );
        for k in e["keys"].as_array().unwrap() {
            assert!(
                main_rows.contains(k.as_str().unwrap()),
                "row lost from main: {e}"
            );
        }
    };
    for e in &main_commits {
        must_be_in_main(e);
    }
    for e in of("tag").filter(|e| e["main"] == true) {
        assert!(
            main_tags.contains(e["name"].as_str().unwrap()),
            "tag lost from main: {e}"
        );
    }
    // Per worker, in event order: branch writes and tags of a generation before its
    // publication were published.
    let mut per_worker: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    for e in events {
        per_worker
            .entry(e["w"].as_u64().unwrap())
            .or_default()
            .push(e);
    }
    for (w, evs) in &per_worker {
        let mut pending: Vec<&Value> = Vec::new();
        let mut last_gen = 0;
        for e in evs {
            match e["ev"].as_str().unwrap() {
                "branch_created" => {
                    pending.clear();
                    last_gen = e["gen"].as_u64().unwrap();
                }
                "branch_commit" | "tag" if e["main"] != true => pending.push(e),
                "publish" => {
                    for p in pending.drain(..) {
                        if p["ev"] == "tag" {
                            assert!(
                                main_tags.contains(p["name"].as_str().unwrap()),
                                "published tag lost: {p}"
                            );
                        } else {
                            must_be_in_main(p);
                        }
                    }
                }
                _ => {}
            }
        }
        // The branch's current generation holds all its writes and tags.
        if last_gen == 0 {
            continue;
        }
        let name = format!("w{w}");
        let root = MetaRoot::Branch(name.clone());
        let writes = writes_of(storage, &root).await;
        let rows = keys_of(&rows_of(
            &arbor_branching::open_reader(storage.clone(), Some(&name))
                .await
                .unwrap()
                .snapshot(None)
                .await
                .unwrap(),
        ));
        let tags: BTreeSet<String> = list_tags(storage, Some(&name), TagFilter::All)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        for e in evs.iter().filter(|e| e["gen"].as_u64() == Some(last_gen)) {
            match e["ev"].as_str().unwrap() {
                "branch_commit" => {
                    assert!(
                        writes.contains(e["instant"].as_str().unwrap()),
                        "lost from {name}: {e}"
                    );
                    for k in e["keys"].as_array().unwrap() {
                        assert!(
                            rows.contains(k.as_str().unwrap()),
                            "row lost from {name}: {e}"
                        );
                    }
                }
                "tag" if e["main"] != true => {
                    assert!(
                        tags.contains(e["name"].as_str().unwrap()),
                        "tag lost from {name}: {e}"
                    )
                }
                _ => {}
            }
        }
        let report = arbor_branching::validate(storage, Some(&name))
            .await
            .unwrap();
        assert!(
            report.discrepancies.is_empty(),
            "{name}: {:?}",
            report.discrepancies
        );
    }
    let report = arbor_branching::validate(storage, None).await.unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "main: {:?}",
        report.discrepancies
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_publish_tag_write_three_processes_object_store_lock_nothing_lost() {
    run_and_check(TableType::CopyOnWrite, 3, 12, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_publish_tag_write_two_processes_postgres_lock_nothing_lost() {
    let Some(conn) = pg_conn_or_skip() else {
        return;
    };
    run_and_check(TableType::MergeOnRead, 2, 12, Some(&conn)).await;
}
