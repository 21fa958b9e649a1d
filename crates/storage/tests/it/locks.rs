//! The lock providers against the conformance suite, plus provider-specific behaviour: state
//! layout, corrupt state, restarts, separate processes, lost PostgreSQL connections.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arbor_storage::conformance::{run_lock_suite, run_object_lock_recovery_suite};
use arbor_storage::{
    FileLockProvider, InProcessLockProvider, Lease, LockError, LockProvider, LockResult,
    ObjectStoreLockProvider, ObjectStoreStorage, PostgresLockProvider, Storage, StorageExt,
};
use bytes::Bytes;
use chrono::Utc;

use crate::support;

const LONG: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// In-process

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_in_process_lock_suite_passes() {
    let shared = InProcessLockProvider::new();
    run_lock_suite("in-process", || {
        let p = shared.clone();
        async move { Arc::new(p) as Arc<dyn LockProvider> }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// File

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_file_lock_suite_passes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run_lock_suite("file", || {
        let p = FileLockProvider::new(path.clone());
        async move { Arc::new(p) as Arc<dyn LockProvider> }
    })
    .await;
}

/// Environment variables that turn [`test_file_lock_child_process`] into a contender.
const CHILD_DIR: &str = "ARBOR_TEST_LOCK_CHILD_DIR";
const CHILD_ROUNDS: usize = 15;
const CHILDREN: usize = 3;

/// Not a test of its own: the body of one child process of
/// [`test_file_acquire_separate_processes_mutually_exclusive`]. Each critical section does a
/// non-atomic read-increment-write of a counter file and appends its token to a log.
#[tokio::test]
#[ignore = "run as a child process by test_file_acquire_separate_processes_mutually_exclusive"]
async fn test_file_lock_child_process() {
    let Some(dir) = std::env::var_os(CHILD_DIR).map(PathBuf::from) else {
        return;
    };
    let p = FileLockProvider::new(dir.join("locks"));
    let counter = dir.join("counter");
    let log = dir.join("tokens");
    for _ in 0..CHILD_ROUNDS {
        let held = p.acquire("shared", LONG, LONG).await.unwrap();
        let n: usize = std::fs::read_to_string(&counter)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
        std::fs::write(&counter, (n + 1).to_string()).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&log)
            .unwrap();
        writeln!(f, "{}", held.token).unwrap();
        drop(f);
        p.release(&held).await.unwrap();
    }
}

#[tokio::test]
async fn test_file_acquire_separate_processes_mutually_exclusive() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("counter"), "0").unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..CHILDREN)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "locks::test_file_lock_child_process",
                    "--ignored",
                    "--test-threads=1",
                ])
                .env(CHILD_DIR, dir.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        assert!(
            out.status.success(),
            "child process failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let count: usize = std::fs::read_to_string(dir.path().join("counter"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        count,
        CHILDREN * CHILD_ROUNDS,
        "lost updates: critical sections overlapped"
    );
    let tokens: Vec<u64> = std::fs::read_to_string(dir.path().join("tokens"))
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let expected: Vec<u64> = (1..=(CHILDREN * CHILD_ROUNDS) as u64).collect();
    assert_eq!(
        tokens, expected,
        "tokens not handed out in acquisition order"
    );
}

// ---------------------------------------------------------------------------------------------
// Object store

fn object_suite_maker(
    storage: Arc<dyn Storage>,
    prefix: &str,
) -> impl FnMut() -> std::future::Ready<Arc<dyn LockProvider>> {
    let prefix = prefix.to_string();
    move || {
        std::future::ready(
            Arc::new(ObjectStoreLockProvider::new(storage.clone(), &prefix))
                as Arc<dyn LockProvider>,
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_object_store_lock_suite_memory_passes() {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    run_lock_suite("object-store/memory", object_suite_maker(storage, "locks")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_object_store_lock_suite_local_passes() {
    let dir = tempfile::tempdir().unwrap();
    // Each handle gets its own storage on the same directory, as separate processes would.
    let root = dir.path().to_path_buf();
    run_lock_suite("object-store/local", || {
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&root).unwrap());
        let p = ObjectStoreLockProvider::new(storage, "_locks");
        async move { Arc::new(p) as Arc<dyn LockProvider> }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_object_store_lock_suite_s3_passes() {
    let Some(storage) = support::s3_storage().await else {
        return;
    };
    run_lock_suite("object-store/s3", object_suite_maker(storage, "locks")).await;
}

#[tokio::test]
async fn test_object_store_acquire_state_object_layout() {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let p = ObjectStoreLockProvider::new(storage.clone(), "/a/locks/");
    assert_eq!(p.state_key("t"), "a/locks/t.json");
    let held = p.acquire("t", LONG, LONG).await.unwrap();
    let (bytes, _) = storage.get("a/locks/t.json").await.unwrap();
    let state: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(state["owner"], held.owner.as_str());
    assert_eq!(state["token"], held.token);
    p.release(&held).await.unwrap();
    let (bytes, _) = storage.get("a/locks/t.json").await.unwrap();
    let state: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert!(state["owner"].is_null(), "{state}");
    assert_eq!(state["token"], held.token, "token must survive release");
    // A "restarted" process (new provider) continues the token sequence.
    let again = ObjectStoreLockProvider::new(storage, "a/locks");
    let next = again.acquire("t", LONG, LONG).await.unwrap();
    assert_eq!(next.token, held.token + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_object_store_recovery_suite_memory_passes() {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    run_object_lock_recovery_suite("object-store/memory", storage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_object_store_recovery_suite_local_passes() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
    run_object_lock_recovery_suite("object-store/local", storage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_object_store_recovery_suite_s3_passes() {
    let Some(storage) = support::s3_storage().await else {
        return;
    };
    run_object_lock_recovery_suite("object-store/s3", storage).await;
}

#[tokio::test]
async fn test_object_store_acquire_corrupt_state_repaired_after_a_lease() {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    storage
        .put_if_absent("locks/t.json", Bytes::from_static(b"not json"))
        .await
        .unwrap();
    storage
        .put_if_absent("locks/t.fence", Bytes::from_static(b"7"))
        .await
        .unwrap();
    let p = ObjectStoreLockProvider::new(storage.clone(), "locks");
    let err = p.acquire("t", LONG, Duration::ZERO).await.unwrap_err();
    assert!(
        matches!(&err, LockError::Timeout { lock, holder: None, .. } if lock == "t"),
        "{err:?}"
    );
    assert!(err.to_string().contains("holder unknown"), "{err}");
    let held = p
        .acquire("t", Duration::from_millis(100), LONG)
        .await
        .unwrap();
    assert_eq!(
        held.token, 8,
        "the token continues above the high-water mark"
    );
    let (bytes, _) = storage.get("locks/t.fence").await.unwrap();
    let mark: u64 = std::str::from_utf8(&bytes).unwrap().parse().unwrap();
    assert!(mark >= held.token, "mark {mark} below the token handed out");
    // Deleting the state: the next token is still larger.
    p.release(&held).await.unwrap();
    storage.delete("locks/t.json").await.unwrap();
    let next = p.acquire("t", LONG, LONG).await.unwrap();
    assert!(
        next.token > held.token,
        "{} after {}",
        next.token,
        held.token
    );
}

#[tokio::test]
async fn test_object_store_timeout_display_names_holder_token_and_expiry() {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let p = ObjectStoreLockProvider::new(storage, "locks");
    let held = p.acquire("t", LONG, LONG).await.unwrap();
    let err = p.acquire("t", LONG, Duration::ZERO).await.unwrap_err();
    let text = err.to_string();
    let until = held
        .expires_at
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    assert!(
        text.contains(&format!(
            "held by writer {} (token {}) until {until}",
            held.owner, held.token
        )),
        "{text}"
    );
    assert!(!text.contains("Some("), "{text}");
}

#[tokio::test]
async fn test_object_store_release_never_acquired_not_holder() {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let p = ObjectStoreLockProvider::new(storage, "locks");
    let fake = Lease {
        lock: "never".to_string(),
        owner: "x".to_string(),
        token: 1,
        expires_at: Utc::now(),
    };
    assert!(matches!(
        p.release(&fake).await,
        Err(LockError::NotHolder { .. })
    ));
    assert!(matches!(
        p.renew(&fake, LONG).await,
        Err(LockError::NotHolder { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

/// The connection string of the test database: `ARBOR_TEST_PG_URL`, else what
/// `scripts/postgres.sh` prints. `None` (after printing SKIPPED) when it cannot be had outside CI;
/// in CI (env `CI` set) that is a failure.
fn pg_conn_str() -> Option<String> {
    static CONN: OnceLock<Result<String, String>> = OnceLock::new();
    let found = CONN.get_or_init(|| {
        if let Ok(url) = std::env::var("ARBOR_TEST_PG_URL") {
            if !url.trim().is_empty() {
                return Ok(url);
            }
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres.sh");
        let out = Command::new("bash")
            .arg(&script)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} failed ({}): {}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
            .ok_or_else(|| format!("{} printed no connection string", script.display()))
    });
    match found {
        Ok(conn) => Some(conn.clone()),
        Err(reason) if std::env::var_os("CI").is_some() => {
            panic!("PostgreSQL is required in CI: {reason}")
        }
        Err(reason) => {
            // Straight to stderr: the test harness captures `eprintln!` of passing tests.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: PostgreSQL lock tests: {reason}"
            );
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_postgres_lock_suite_passes() {
    let Some(conn) = pg_conn_str() else { return };
    run_lock_suite("postgres", || {
        let conn = conn.clone();
        async move {
            Arc::new(PostgresLockProvider::connect(&conn).await.unwrap()) as Arc<dyn LockProvider>
        }
    })
    .await;
}

#[tokio::test]
async fn test_postgres_renew_after_connection_killed_reconnects() {
    let Some(conn) = pg_conn_str() else { return };
    let app = format!("arbor-reconnect-{}", uuid::Uuid::new_v4().simple());
    let p = PostgresLockProvider::connect(&format!("{conn} application_name={app}"))
        .await
        .unwrap();
    let name = format!("reconnect-{}", uuid::Uuid::new_v4().simple());
    let held = p.acquire(&name, LONG, LONG).await.unwrap();

    let (admin, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let killed = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1",
            &[&app],
        )
        .await
        .unwrap();
    assert_eq!(
        killed.get::<_, i64>(0),
        1,
        "the provider's connection was not found"
    );

    // The first use may still see the dead connection and fail; the next one reconnects.
    let renewed = match p.renew(&held, LONG).await {
        Ok(renewed) => renewed,
        Err(LockError::Backend { lock, .. }) => {
            assert_eq!(lock, name);
            p.renew(&held, LONG).await.unwrap()
        }
        Err(other) => panic!("unexpected error after the connection was killed: {other:?}"),
    };
    assert_eq!(renewed.token, held.token);
    p.release(&renewed).await.unwrap();
}

#[tokio::test]
async fn test_postgres_connect_unreachable_backend_error() {
    let err = PostgresLockProvider::connect(
        "host=127.0.0.1 port=1 user=nobody password=x dbname=none connect_timeout=2",
    )
    .await
    .unwrap_err();
    assert!(matches!(err, LockError::Backend { .. }), "{err:?}");
}

// ---------------------------------------------------------------------------------------------
// The suite itself must catch broken providers.

/// The name rule of the lock contract, for the broken providers below.
fn validate_name(lock: &str) -> LockResult<()> {
    let ok = !lock.is_empty()
        && lock.len() <= 128
        && lock != "."
        && lock != ".."
        && lock
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        // `LockError` is non-exhaustive; any provider's rejection will do.
        Err(LockError::InvalidName {
            lock: lock.to_string(),
            reason: "bad".to_string(),
        })
    }
}

/// Grants every acquisition at once and accepts every renew and release: no mutual exclusion.
#[derive(Debug, Default)]
struct AlwaysGrants {
    tokens: std::sync::atomic::AtomicU64,
}

#[async_trait::async_trait]
impl LockProvider for AlwaysGrants {
    async fn acquire(&self, lock: &str, lease: Duration, _timeout: Duration) -> LockResult<Lease> {
        validate_name(lock)?;
        Ok(Lease {
            lock: lock.to_string(),
            owner: uuid::Uuid::new_v4().to_string(),
            token: self.tokens.fetch_add(1, Ordering::SeqCst) + 1,
            // Clamped like the real providers, so that the suite's `Duration::MAX` lease passes.
            expires_at: Utc::now()
                + chrono::TimeDelta::from_std(lease.min(Duration::from_secs(100 * 365 * 86400)))
                    .unwrap(),
        })
    }
    async fn renew(&self, held: &Lease, _lease: Duration) -> LockResult<Lease> {
        validate_name(&held.lock)?;
        Ok(held.clone())
    }
    async fn release(&self, held: &Lease) -> LockResult<()> {
        validate_name(&held.lock)?;
        Ok(())
    }
}

#[tokio::test]
#[should_panic(expected = "expected NotHolder")]
async fn test_lock_suite_provider_without_exclusion_panics() {
    let broken = Arc::new(AlwaysGrants::default());
    run_lock_suite("always-grants", || {
        let p = broken.clone();
        async move { p as Arc<dyn LockProvider> }
    })
    .await;
}

/// A correct in-process provider, except that one lock (the suite's mutual-exclusion lock) is
/// granted to everyone, with increasing tokens.
#[derive(Debug, Default)]
struct LeaksMutexLock {
    inner: InProcessLockProvider,
    leaked: AlwaysGrants,
}

impl LeaksMutexLock {
    fn leaks(lock: &str) -> bool {
        lock.starts_with("conf-mutex-")
    }
}

#[async_trait::async_trait]
impl LockProvider for LeaksMutexLock {
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease> {
        if Self::leaks(lock) {
            self.leaked.acquire(lock, lease, timeout).await
        } else {
            self.inner.acquire(lock, lease, timeout).await
        }
    }
    async fn renew(&self, held: &Lease, lease: Duration) -> LockResult<Lease> {
        self.inner.renew(held, lease).await
    }
    async fn release(&self, held: &Lease) -> LockResult<()> {
        if Self::leaks(&held.lock) {
            self.leaked.release(held).await
        } else {
            self.inner.release(held).await
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[should_panic(expected = "mutual exclusion broken")]
async fn test_lock_suite_overlapping_holders_panics() {
    let broken = Arc::new(LeaksMutexLock::default());
    run_lock_suite("leaks-mutex", || {
        let p = broken.clone();
        async move { p as Arc<dyn LockProvider> }
    })
    .await;
}
