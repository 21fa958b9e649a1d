//! Helpers of the detach and deep-clone tests: locations in one temporary directory opened
//! through the registry (so two local locations share a root and copies are server-side), or
//! through a fixed map (fault-injecting storages, no shared root), shallow clones made with
//! `clone_table`, reads of a location as arbor sees it, and the self-containment checks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_branching::clone::{clone_table, CloneAt, CloneOutcome, CloneRequest};
use arbor_mdt::validate::{validate_table, FilesDiscrepancy};
use arbor_storage::{ObjectStoreStorage, Storage, StorageError, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::{Table, WriteOperation};
use arbor_testkit_tables::{batch, rows_of, Row};
use arbor_timeline::layout::{
    live_roots, open_location, CloneDescriptor, CloneState, LocationOpener, PinRecord,
    RegistryOpener,
};
use arrow::array::RecordBatch;

/// A local directory as a storage.
pub fn local(base: &Path) -> Arc<dyn Storage> {
    std::fs::create_dir_all(base).unwrap();
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

/// The location string of a directory (canonical, as `normalize_location` records it).
pub fn loc(dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    dir.canonicalize().unwrap().to_string_lossy().into_owned()
}

/// The registry opener (local paths, and S3 with the options given).
pub fn registry() -> RegistryOpener {
    RegistryOpener::default()
}

/// An opener over fixed storages by location; every other location fails to open (so no copy
/// is server-side).
#[derive(Debug, Default)]
pub struct MapOpener(pub Vec<(String, Arc<dyn Storage>)>);

impl LocationOpener for MapOpener {
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

/// A shallow clone of main of `source` at `at` into `target`.
pub async fn shallow(
    opener: &dyn LocationOpener,
    source: &str,
    target: &str,
    at: CloneAt,
) -> CloneOutcome {
    clone_table(
        opener,
        &CloneRequest {
            source: source.to_string(),
            target: target.to_string(),
            at,
            tag_branch: None,
            deep: false,
        },
    )
    .await
    .unwrap()
}

/// The table at `location` (a clone or not) as arbor opens it.
pub async fn open(opener: &dyn LocationOpener, location: &str) -> Arc<dyn Storage> {
    open_location(location, opener).await.unwrap()
}

/// Main's write handle of the table at `location`.
pub async fn table(opener: &dyn LocationOpener, location: &str) -> Table {
    Table::open(open(opener, location).await).await.unwrap()
}

/// Main's latest rows of the table at `location`, sorted.
pub async fn read(opener: &dyn LocationOpener, location: &str) -> Vec<Row> {
    read_storage(open(opener, location).await).await
}

/// Main's latest rows of the table in `storage`, sorted.
pub async fn read_storage(storage: Arc<dyn Storage>) -> Vec<Row> {
    rows_of(&snapshot(storage).await)
}

/// Main's latest snapshot of the table in `storage`.
pub async fn snapshot(storage: Arc<dyn Storage>) -> Vec<RecordBatch> {
    let reader = TableReader::open(storage).await.unwrap();
    reader.snapshot(None).await.unwrap()
}

/// Writes `rows` on main of the table at `location`.
pub async fn write(opener: &dyn LocationOpener, location: &str, op: WriteOperation, r: &[Row]) {
    table(opener, location)
        .await
        .write(op, vec![batch(r)])
        .await
        .unwrap();
}

/// The descriptor at `location` (raw storage).
pub async fn descriptor(opener: &dyn LocationOpener, location: &str) -> CloneDescriptor {
    let own = opener.open(location).unwrap();
    CloneDescriptor::load(own.as_ref())
        .await
        .unwrap()
        .unwrap()
        .0
}

/// The pins of the table at `location`.
pub async fn pins(opener: &dyn LocationOpener, location: &str) -> Vec<PinRecord> {
    let own = opener.open(location).unwrap();
    PinRecord::list(own.as_ref()).await.unwrap()
}

/// Asserts the clone at `location` is detached and self-contained: its descriptor says
/// `Detached`; opened as a plain table on its own directory alone (no opener, no sources) it
/// reads `expected`; every root's metadata table agrees with that storage (no file it lists is
/// missing); every file of every root's latest snapshot is there.
pub async fn assert_self_contained(
    opener: &dyn LocationOpener,
    location: &str,
    expected: &[Row],
    step: &str,
) {
    assert_eq!(
        descriptor(opener, location).await.state,
        CloneState::Detached,
        "{step}"
    );
    let own = opener.open(location).unwrap();
    assert_eq!(
        read_storage(own.clone()).await,
        expected,
        "{step}: own read"
    );
    for root in live_roots(&own).await.unwrap() {
        let view = root.view(own.clone());
        let report = validate_table(view.clone()).await.unwrap();
        let missing: Vec<&FilesDiscrepancy> = report
            .discrepancies
            .iter()
            .filter(|d| matches!(d, FilesDiscrepancy::MissingFromStorage { .. }))
            .collect();
        assert!(missing.is_empty(), "{step}: {root:?} misses {missing:?}");
        let reader = TableReader::open_view(view).await.unwrap();
        let slices = reader.view().latest_file_slices(None, None).await.unwrap();
        for s in slices {
            for key in s.base_file_path().into_iter().chain(s.log_file_paths()) {
                assert!(own.exists(&key).await.unwrap(), "{step}: {key} missing");
            }
        }
    }
    let mdt: BTreeSet<String> = own
        .list_all(".hoodie/metadata")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.key)
        .collect();
    assert!(
        mdt.iter().any(|k| k.starts_with(".hoodie/metadata/files/")),
        "{step}: no FILES partition file in the clone itself"
    );
}

/// hudi-rs reads the table in directory `dir` with the same rows as arbor reads it from
/// `storage` (skipped visibly without the peer outside CI).
pub async fn assert_peer_reads(storage: Arc<dyn Storage>, dir: &Path, step: &str) {
    let Some(python) = arbor_testkit::peer_python_or_skip("clone detach peer check") else {
        return;
    };
    let reader = TableReader::open(storage).await.unwrap();
    let ours = reader.snapshot(None).await.unwrap();
    arbor_testkit::assert_peer_snapshot_matches(&python, dir, reader.schema(), &ours, step);
}

/// Data files (parquet and log files) in directory `dir`.
pub fn data_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                if name != ".hoodie" {
                    stack.push(p);
                }
            } else if name.ends_with(".parquet") || name.contains(".log.") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A shallow clone made by hand (no pins, no retention record): every metadata object of the
/// table at `source` copied into `target` (raw storages), and an `Active` descriptor at the
/// source's latest instant (its sources after it when the source is a clone itself); with
/// `pin`, a savepoint pair at that instant and a pin record on the source. For testing detach
/// apart from `clone_table`.
pub async fn hand_clone(
    opener: &dyn LocationOpener,
    source: &str,
    target: &str,
    pin: bool,
) -> String {
    use arbor_timeline::layout::clone_rule::is_shared_file;
    use arbor_timeline::layout::{CloneSource, CLONE_FILE};
    let (s, t) = (opener.open(source).unwrap(), opener.open(target).unwrap());
    let mut latest = String::new();
    for m in s.list_all(".hoodie").await.unwrap() {
        let k = &m.key;
        if is_shared_file(k)
            || k.starts_with(".hoodie/.locks")
            || k.starts_with(".hoodie/.heartbeat")
            || k.starts_with(".hoodie/.clones")
            || k == CLONE_FILE
        {
            continue;
        }
        if let Some(name) = k.strip_prefix(".hoodie/timeline/") {
            if !name.contains('/') {
                latest = latest.max(name.get(..17).unwrap_or_default().to_string());
            }
        }
        t.put(k, s.get(k).await.unwrap().0).await.unwrap();
    }
    let mut sources = vec![CloneSource {
        location: source.to_string(),
        instant: latest,
        root: "main".to_string(),
        reference: "main".to_string(),
    }];
    if let Some((d, _)) = CloneDescriptor::load(s.as_ref()).await.unwrap() {
        sources.extend(d.sources);
    }
    let id = format!("hand-{}", uuid_like(target));
    let instant = sources[0].instant.clone();
    CloneDescriptor {
        id: id.clone(),
        state: CloneState::Active,
        deep: false,
        created: "2026-12-02T00:00:00Z".to_string(),
        sources,
    }
    .create(t.as_ref())
    .await
    .unwrap();
    if pin {
        let source_table = table(opener, source).await;
        let time = arbor_timeline::InstantTime::parse(&instant).unwrap();
        arbor_cleaner::create_savepoint(&source_table, Some(&time), "clone")
            .await
            .unwrap();
        let record = PinRecord {
            clone_id: id.clone(),
            location: target.to_string(),
            instant,
            root: "main".to_string(),
            reference: "main".to_string(),
            created: "2026-12-02T00:00:00Z".to_string(),
        };
        s.put(
            &arbor_timeline::layout::pin_key(&id),
            record.to_bytes().unwrap(),
        )
        .await
        .unwrap();
    }
    id
}

/// The savepoint instant files (data and metadata-table timelines) of the table in `storage`.
pub async fn savepoint_files(storage: &dyn Storage) -> Vec<String> {
    storage
        .list_all(".hoodie")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.key)
        .filter(|k| k.contains(".savepoint"))
        .collect()
}

fn uuid_like(s: &str) -> String {
    s.bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
        .to_string()
}

/// The source's location name in crash sweeps.
pub const SRC: &str = "/sweep/src";
/// The clone's location name in crash sweeps.
pub const CLONE: &str = "/sweep/clone";

/// The default table lock's state object.
pub const TABLE_LOCK_KEY: &str = ".hoodie/.locks/table_lock.json";

/// Lets a lease a crashed process left lapse (expiry moved into the past, token kept).
pub async fn lapse_stale_lease(storage: &Arc<dyn Storage>) {
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

/// Which storage a crash sweep crashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The source's.
    Source,
    /// The clone's.
    Clone,
}

/// An opener of [`SRC`] and [`CLONE`] over `dir/src` and `dir/clone`.
pub fn opener_over(dir: &Path) -> MapOpener {
    MapOpener(vec![
        (SRC.to_string(), local(&dir.join("src"))),
        (CLONE.to_string(), local(&dir.join("clone"))),
    ])
}

