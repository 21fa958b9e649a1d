//! Crash sweep of shallow clone creation: the process "dies" before its k-th write to storage,
//! counted across the source and the target together (k = 0, 1, ... until a run completes);
//! from then on every operation on either location fails, reads included. A crash before a
//! read leaves the storage a crash before the next write leaves, so only writes are crash
//! points.
//!
//! After each crash, a restarted process (fresh handles, the crashed process's table leases
//! lapsed) must find: the source reading exactly as before, valid, with at most the clone's
//! pin; the target either refusing to open (`CloneIncomplete`), or not a clone yet with no
//! metadata at all, or (never, before the run completed) an active clone. Then, on two crash
//! points of three, the retry of the same clone completes (resumed when the crash left a
//! reservation) and the clone reads the snapshot; on the third the creation is abandoned: the
//! target is removed and `prune_pins` removes the pin it left, with its savepoint.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use arbor_branching::clone::{clone_table, list_pins, prune_pins, CloneAt, CloneRequest};
use arbor_cleaner::savepoint::list_savepoints;
use arbor_storage::{ListPage, ObjectMeta, ObjectStoreStorage, Storage, StorageError, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::{Table, WriteOperation};
use arbor_testkit::crash::copy_dir;
use arbor_testkit_tables::{create, rows, rows_of, Row};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::{open_location, LocationOpener, CLONE_FILE};
use arbor_timeline::{InstantTime, TimelineError};
use async_trait::async_trait;
use bytes::Bytes;

const SRC: &str = "/arbor-clone-crash-sweep/source";
const TGT: &str = "/arbor-clone-crash-sweep/target";
const TABLE_LOCK_KEY: &str = ".hoodie/.locks/table_lock.json";

type SResult<T> = std::result::Result<T, StorageError>;

/// The crash point shared by every storage of one process.
#[derive(Debug, Default)]
struct Crash {
    writes: AtomicUsize,
    at: AtomicUsize,
    crashed: AtomicBool,
}

impl Crash {
    fn new(at: usize) -> Arc<Self> {
        let c = Crash::default();
        c.at.store(at, Ordering::SeqCst);
        Arc::new(c)
    }

    fn check(&self, write: bool, op: &'static str, path: &str) -> SResult<()> {
        if write && !self.crashed.load(Ordering::SeqCst) {
            let n = self.writes.fetch_add(1, Ordering::SeqCst);
            if n >= self.at.load(Ordering::SeqCst) {
                self.crashed.store(true, Ordering::SeqCst);
            }
        }
        if self.crashed.load(Ordering::SeqCst) {
            return Err(StorageError::Injected {
                index: self.writes.load(Ordering::SeqCst),
                operation: op,
                path: path.to_string(),
            });
        }
        Ok(())
    }
}

/// A storage that dies with its process ([`Crash`]).
#[derive(Debug)]
struct Crashing {
    inner: Arc<dyn Storage>,
    crash: Arc<Crash>,
}

impl std::fmt::Display for Crashing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "crashing {}", self.inner)
    }
}

#[async_trait]
impl Storage for Crashing {
    async fn get(&self, key: &str) -> SResult<(Bytes, ObjectMeta)> {
        self.crash.check(false, "get", key)?;
        self.inner.get(key).await
    }
    async fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> SResult<Bytes> {
        self.crash.check(false, "get_range", key)?;
        self.inner.get_range(key, range).await
    }
    async fn head(&self, key: &str) -> SResult<ObjectMeta> {
        self.crash.check(false, "head", key)?;
        self.inner.head(key).await
    }
    async fn put(&self, key: &str, data: Bytes) -> SResult<arbor_storage::Version> {
        self.crash.check(true, "put", key)?;
        self.inner.put(key, data).await
    }
    async fn put_if_absent(&self, key: &str, data: Bytes) -> SResult<arbor_storage::Version> {
        self.crash.check(true, "put_if_absent", key)?;
        self.inner.put_if_absent(key, data).await
    }
    async fn put_if_match(
        &self,
        key: &str,
        data: Bytes,
        expected: &arbor_storage::Version,
    ) -> SResult<arbor_storage::Version> {
        self.crash.check(true, "put_if_match", key)?;
        self.inner.put_if_match(key, data, expected).await
    }
    async fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> SResult<ListPage> {
        self.crash.check(false, "list", prefix)?;
        self.inner.list_page(prefix, start_after, max_keys).await
    }
    async fn list_dir(&self, prefix: &str) -> SResult<(Vec<ObjectMeta>, Vec<String>)> {
        self.crash.check(false, "list_dir", prefix)?;
        self.inner.list_dir(prefix).await
    }
    async fn delete_batch(&self, keys: &[String]) -> SResult<Vec<SResult<()>>> {
        self.crash
            .check(true, "delete", keys.first().map_or("", |k| k))?;
        self.inner.delete_batch(keys).await
    }
    async fn copy(&self, from: &str, to: &str) -> SResult<()> {
        self.crash.check(true, "copy", to)?;
        self.inner.copy(from, to).await
    }
}

/// Maps the two locations to local directories, through one process's crash point (or none).
#[derive(Debug)]
struct Opener {
    source: Arc<dyn Storage>,
    target: Arc<dyn Storage>,
}

impl Opener {
    fn new(src: &Path, tgt: &Path, crash: Option<Arc<Crash>>) -> Self {
        let wrap = |dir: &Path| -> Arc<dyn Storage> {
            let local: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir).unwrap());
            match &crash {
                Some(c) => Arc::new(Crashing {
                    inner: local,
                    crash: c.clone(),
                }),
                None => local,
            }
        };
        Opener {
            source: wrap(src),
            target: wrap(tgt),
        }
    }
}

impl LocationOpener for Opener {
    fn open(&self, location: &str) -> SResult<Arc<dyn Storage>> {
        match location {
            SRC => Ok(self.source.clone()),
            TGT => Ok(self.target.clone()),
            other => Err(StorageError::NotFound {
                path: other.to_string(),
            }),
        }
    }
}

/// Lets a lease the crashed process left on the table lock of `storage` lapse.
async fn lapse_stale_lease(storage: &Arc<dyn Storage>) {
    let Some((bytes, _)) = storage.get_opt(TABLE_LOCK_KEY).await.unwrap() else {
        return;
    };
    let mut state: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    if state["owner"].is_null() {
        return;
    }
    state["expires_at"] = serde_json::json!(chrono::Utc::now() - chrono::Duration::seconds(1));
    storage
        .put(TABLE_LOCK_KEY, serde_json::to_vec(&state).unwrap().into())
        .await
        .unwrap();
}

async fn read(storage: Arc<dyn Storage>) -> Vec<Row> {
    let reader = TableReader::open(storage).await.unwrap();
    rows_of(&reader.snapshot(None).await.unwrap())
}

async fn savepoints(storage: &Arc<dyn Storage>) -> Vec<InstantTime> {
    let table = Table::open(storage.clone()).await.unwrap();
    list_savepoints(table.view_storage(), table.layout())
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.instant)
        .collect()
}

fn request() -> CloneRequest {
    CloneRequest {
        source: SRC.to_string(),
        target: TGT.to_string(),
        at: CloneAt::Main,
        tag_branch: None,
        deep: false,
    }
}

#[tokio::test]
async fn test_clone_creation_crash_sweep() {
    let t = create(TableType::MergeOnRead, true).await;
    t.write(WriteOperation::Upsert, &rows(0..10, 1, "a")).await;
    t.write(WriteOperation::Upsert, &rows(5..12, 2, "b")).await;
    let snapshot = t.read(None).await;
    let dir = tempfile::tempdir().unwrap();
    let mut completed = None;
    for k in 0..2000 {
        let src = dir.path().join(format!("s{k}"));
        let tgt = dir.path().join(format!("t{k}"));
        copy_dir(&t.base, &src);
        std::fs::create_dir_all(&tgt).unwrap();
        let crash = Crash::new(k);
        let crashed = Opener::new(&src, &tgt, Some(crash.clone()));
        let result = clone_table(&crashed, &request()).await;
        if !crash.crashed.load(Ordering::SeqCst) {
            let out = result.unwrap();
            assert!(!out.resumed);
            completed = Some(k);
            break;
        }
        assert!(result.is_err(), "k={k}: a crashed run reported success");
        // The restarted process.
        let opener = Opener::new(&src, &tgt, None);
        lapse_stale_lease(&opener.source).await;
        lapse_stale_lease(&opener.target).await;
        assert_eq!(read(opener.source.clone()).await, snapshot, "k={k}: source");
        let report = arbor_mdt::validate::validate_table(opener.source.clone())
            .await
            .unwrap();
        assert!(report.discrepancies.is_empty(), "k={k}: {report:?}");
        let pins = list_pins(&opener, SRC).await.unwrap();
        assert!(pins.len() <= 1, "k={k}: {pins:?}");
        match open_location(TGT, &opener).await {
            Err(TimelineError::CloneIncomplete { .. }) => {}
            Ok(_) => {
                assert!(
                    !opener.target.exists(CLONE_FILE).await.unwrap(),
                    "k={k}: a crashed creation opened as an active clone"
                );
                let meta = opener.target.list_all(".hoodie").await.unwrap();
                assert!(meta.is_empty(), "k={k}: metadata without a descriptor");
                assert!(pins.is_empty(), "k={k}: a pin without a reservation");
            }
            Err(e) => panic!("k={k}: {e}"),
        }
        if k % 3 == 2 {
            // Abandoned: the target removed, the pin pruned with its savepoint.
            std::fs::remove_dir_all(&tgt).unwrap();
            let out = prune_pins(&opener, SRC).await.unwrap();
            assert_eq!(out.removed.len(), pins.len(), "k={k}");
            assert!(list_pins(&opener, SRC).await.unwrap().is_empty(), "k={k}");
            assert!(
                savepoints(&opener.source).await.is_empty(),
                "k={k}: the abandoned pin's savepoint stayed"
            );
            assert_eq!(read(opener.source.clone()).await, snapshot, "k={k}");
        } else {
            let out = clone_table(&opener, &request()).await.unwrap();
            // The reservation is a creation's first write: every later crash left one.
            assert_eq!(out.resumed, k > 0, "k={k}: resumed");
            let cloned = open_location(TGT, &opener).await.unwrap();
            assert_eq!(read(cloned).await, snapshot, "k={k}: clone");
            assert_eq!(list_pins(&opener, SRC).await.unwrap().len(), 1, "k={k}");
            assert_eq!(read(opener.source.clone()).await, snapshot, "k={k}");
        }
        std::fs::remove_dir_all(&src).unwrap();
        let _ = std::fs::remove_dir_all(&tgt);
    }
    let n = completed.expect("the clone never completed");
    eprintln!("clone creation crash sweep: {n} crash points (writes) checked");
    assert!(
        n > 10,
        "only {n} writes: the sweep did not reach the creation"
    );
}
