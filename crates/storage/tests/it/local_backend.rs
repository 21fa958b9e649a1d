//! The local backend's own guarantees: compare-and-swap across processes that share nothing but
//! the table directory (different `TMPDIR`s), across storages with different roots, bounded
//! waits behind a stopped lock holder, and no stray files.
//!
//! Child processes are this test binary run again with [`ROLE_ENV`] naming their role; the
//! test function they run checks the variable first and plays the role instead of the test.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arbor_storage::{ObjectStoreStorage, Storage, StorageError, StorageExt};
use bytes::Bytes;

/// The role of a child process (see the module doc); unset in the test process itself.
const ROLE_ENV: &str = "ARBOR_IT_LOCAL_ROLE";
/// The storage root a child works in.
const DIR_ENV: &str = "ARBOR_IT_LOCAL_DIR";

/// Every regular file below `dir` (relative paths, sorted).
fn files_below(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Runs test `test` of this binary again as a child playing `role` in storage root `dir`.
fn spawn_child(test: &str, role: &str, dir: &Path, envs: &[(&str, &Path)]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--test-threads=1", "--nocapture"])
        .env(ROLE_ENV, role)
        .env(DIR_ENV, dir);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

/// Waits for `child` to exit, at most `limit`; kills it (and fails) when it does not.
fn wait_bounded(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child process {} still running after {limit:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// Compare-and-swap across processes with different temp directories.

/// Increments per counter process.
const COUNTER_INCREMENTS: u64 = 60;
/// Counter processes, each with a `TMPDIR` of its own.
const COUNTER_PROCESSES: u64 = 4;

/// Increments the counter at `key` `times` times with get + put_if_match retries; returns the
/// number of lost races.
async fn increment(s: &dyn Storage, key: &str, times: u64) -> u64 {
    let mut conflicts = 0;
    for _ in 0..times {
        loop {
            let (data, meta) = s.get(key).await.unwrap();
            let n: u64 = std::str::from_utf8(&data).unwrap().parse().unwrap();
            // Same-size values (zero padded), so the local ETag cannot tell them apart by size.
            let next = Bytes::from(format!("{:08}", n + 1));
            match s.put_if_match(key, next, &meta.version).await {
                Ok(_) => break,
                Err(StorageError::PreconditionFailed { .. }) => conflicts += 1,
                Err(e) => panic!("put_if_match failed: {e}"),
            }
        }
    }
    conflicts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_local_cas_counter_processes_with_different_tmpdirs_no_lost_update() {
    const TEST: &str =
        "local_backend::test_local_cas_counter_processes_with_different_tmpdirs_no_lost_update";
    if std::env::var(ROLE_ENV).as_deref() == Ok("counter") {
        let dir = std::env::var(DIR_ENV).unwrap();
        let s = ObjectStoreStorage::local(Path::new(&dir)).unwrap();
        let conflicts = increment(&s, "t/.hoodie/counter", COUNTER_INCREMENTS).await;
        println!("conflicts: {conflicts}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = ObjectStoreStorage::local(dir.path()).unwrap();
    s.put("t/.hoodie/counter", Bytes::from(format!("{:08}", 0)))
        .await
        .unwrap();
    // Each writer sees a different temporary directory (systemd's PrivateTmp, cron jobs): they
    // share nothing but the table directory.
    let tmpdirs: Vec<_> = (0..COUNTER_PROCESSES)
        .map(|_| tempfile::tempdir().unwrap())
        .collect();
    let mut children: Vec<Child> = tmpdirs
        .iter()
        .map(|tmp| {
            spawn_child(TEST, "counter", dir.path(), &[("TMPDIR", tmp.path())])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in &mut children {
        let status = tokio::task::block_in_place(|| wait_bounded(c, Duration::from_secs(120)));
        assert!(status.success(), "counter process failed: {status}");
    }
    let (data, _) = s.get("t/.hoodie/counter").await.unwrap();
    assert_eq!(
        std::str::from_utf8(&data).unwrap(),
        format!("{:08}", COUNTER_INCREMENTS * COUNTER_PROCESSES),
        "lost updates across processes"
    );
    assert_eq!(files_below(dir.path()), ["t/.hoodie/counter"]);
    // Nothing was left in the writers' temporary directories either.
    for tmp in &tmpdirs {
        assert_eq!(files_below(tmp.path()), Vec::<String>::new());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn test_local_cas_race_across_different_roots() {
    // One file reached through storages rooted at different directories must still be guarded
    // by one lock (the lock lives next to the file, not with the storage root).
    let dir = tempfile::tempdir().unwrap();
    let outer = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
    let inner = Arc::new(ObjectStoreStorage::local(&dir.path().join("t/.hoodie")).unwrap());
    for round in 0..10 {
        let key = format!("state-{round}");
        let v0 = inner
            .put(&key, Bytes::from_static(b"start-00"))
            .await
            .unwrap();
        let barrier = Arc::new(tokio::sync::Barrier::new(16));
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let (outer, inner, key, v0, barrier) = (
                    outer.clone(),
                    inner.clone(),
                    key.clone(),
                    v0.clone(),
                    barrier.clone(),
                );
                tokio::spawn(async move {
                    barrier.wait().await;
                    let data = Bytes::from(format!("cas-{i:04}"));
                    if i % 2 == 0 {
                        inner.put_if_match(&key, data, &v0).await
                    } else {
                        outer
                            .put_if_match(&format!("t/.hoodie/{key}"), data, &v0)
                            .await
                    }
                })
            })
            .collect();
        let mut winners = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(_) => winners += 1,
                Err(e) => assert!(e.is_conflict(), "{e}"),
            }
        }
        assert_eq!(winners, 1, "round {round}");
    }
}

#[tokio::test]
async fn test_local_rejects_staging_and_lock_file_keys() {
    let dir = tempfile::tempdir().unwrap();
    let s = ObjectStoreStorage::local(dir.path()).unwrap();
    for key in ["a/b#123", "a/.arbor-lock-0123456789abcdef"] {
        let err = s.put(key, Bytes::new()).await.unwrap_err();
        assert!(
            matches!(err, StorageError::InvalidKey { .. }),
            "{key}: {err}"
        );
        let err = s.get(key).await.unwrap_err();
        assert!(
            matches!(err, StorageError::InvalidKey { .. }),
            "{key}: {err}"
        );
    }
    s.put("a/b#x1", Bytes::new()).await.unwrap();
    s.put("a/.arbor-lock-x", Bytes::new()).await.unwrap();
    s.put("a/.arbor.lock", Bytes::new()).await.unwrap();
    let (objects, _) = s.list_dir("a").await.unwrap();
    let keys: Vec<_> = objects.iter().map(|m| m.key.as_str()).collect();
    assert_eq!(keys, ["a/.arbor-lock-x", "a/.arbor.lock", "a/b#x1"]);
}

// ---------------------------------------------------------------------------------------------
// A stopped lock holder.

/// The file whose existence tells a `cas-loop` child to stop.
#[cfg(target_os = "linux")]
const STOP_ENV: &str = "ARBOR_IT_LOCAL_STOP";

/// A child process that is killed if it still runs when the test ends (on failure).
#[cfg(target_os = "linux")]
struct ChildGuard(Child);

#[cfg(target_os = "linux")]
impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // Still running: the test failed. `SIGKILL` ends a stopped process too.
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Sends `SIGSTOP`, `SIGCONT` ... (`sig` without the `SIG`) to `child` with `kill(1)`.
#[cfg(target_os = "linux")]
fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([format!("-{sig}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{sig} {} failed", child.id());
}

/// Stops `child` and waits until the kernel reports it stopped.
#[cfg(target_os = "linux")]
fn stop(child: &Child) {
    signal(child, "STOP");
    let stat = format!("/proc/{}/stat", child.id());
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(&stat).unwrap();
        // `pid (comm) state ...`; comm may contain spaces and parentheses.
        let state = text.rsplit_once(')').unwrap().1.trim_start().chars().next();
        if matches!(state, Some('T' | 't')) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "not stopped: {text}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The lock file in `dir` that another process holds (locked), if any.
#[cfg(target_os = "linux")]
fn held_lock_file(dir: &Path) -> Option<std::path::PathBuf> {
    use fs4::fs_std::FileExt;
    for e in std::fs::read_dir(dir).ok()? {
        let path = e.ok()?.path();
        let is_lock = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(".arbor-lock-"));
        if !is_lock {
            continue;
        }
        // Opened but not locked yet, or removed meanwhile: not held.
        let Ok(f) = std::fs::File::open(&path) else {
            continue;
        };
        if !FileExt::try_lock_exclusive(&f).unwrap() {
            return Some(path);
        }
    }
    None
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_local_stopped_holder_blocks_only_its_key_and_waits_are_bounded() {
    const TEST: &str =
        "local_backend::test_local_stopped_holder_blocks_only_its_key_and_waits_are_bounded";
    const KEY: &str = "t/.hoodie/lock";
    if std::env::var(ROLE_ENV).as_deref() == Ok("cas-loop") {
        // Compare-and-swap KEY in a tight loop until told to stop.
        let dir = std::env::var(DIR_ENV).unwrap();
        let stop_file = std::env::var(STOP_ENV).unwrap();
        let s = ObjectStoreStorage::local(Path::new(&dir)).unwrap();
        while !Path::new(&stop_file).exists() {
            let (data, meta) = s.get(KEY).await.unwrap();
            let n: u64 = std::str::from_utf8(&data).unwrap().parse().unwrap();
            match s
                .put_if_match(KEY, Bytes::from(format!("{:08}", n + 1)), &meta.version)
                .await
            {
                Ok(_) | Err(StorageError::PreconditionFailed { .. }) => {}
                Err(e) => panic!("put_if_match failed: {e}"),
            }
        }
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let other_root = tempfile::tempdir().unwrap();
    let control = tempfile::tempdir().unwrap();
    let stop_file = control.path().join("stop");
    let short = Duration::from_millis(500);
    let s = ObjectStoreStorage::local(root.path()).unwrap();
    let v0 = s.put(KEY, Bytes::from(format!("{:08}", 0))).await.unwrap();
    let child = ChildGuard(
        spawn_child(TEST, "cas-loop", root.path(), &[(STOP_ENV, &stop_file)])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // Stop the child at random moments until it is stopped holding KEY's lock.
    // (Canonical, as the storage reports lock files.)
    let lock_dir = std::fs::canonicalize(root.path())
        .unwrap()
        .join("t/.hoodie");
    let start = Instant::now();
    let held = tokio::task::block_in_place(|| loop {
        stop(&child.0);
        if let Some(lock_file) = held_lock_file(&lock_dir) {
            return lock_file;
        }
        signal(&child.0, "CONT");
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never caught the child holding the lock"
        );
        std::thread::sleep(Duration::from_micros(
            300 + u64::from(start.elapsed().subsec_nanos() % 3000),
        ));
    });

    // Another storage root, and another key of the same directory: not blocked at all.
    let other = ObjectStoreStorage::local(other_root.path())
        .unwrap()
        .with_local_lock_timeout(short);
    let t = Instant::now();
    let v = other.put(KEY, Bytes::from_static(b"a")).await.unwrap();
    other
        .put_if_match(KEY, Bytes::from_static(b"b"), &v)
        .await
        .unwrap();
    other.delete(KEY).await.unwrap();
    let s_short = s.clone().with_local_lock_timeout(short);
    s_short
        .put("t/.hoodie/other", Bytes::from_static(b"o"))
        .await
        .unwrap();
    // (Each would have failed with a lock timeout after `short` had it waited for the holder;
    // the bound on the total only allows for a slow disk.)
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "unrelated writes took {:?}",
        t.elapsed()
    );
    // Reading the held key does not wait either.
    s.get(KEY).await.unwrap();

    // The same key: a bounded wait, then an error naming the lock file.
    let t = Instant::now();
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        s_short.put_if_match(KEY, Bytes::from_static(b"x"), &v0),
    )
    .await
    .expect("the wait for a stopped holder is not bounded")
    .unwrap_err();
    let elapsed = t.elapsed();
    match &err {
        StorageError::LockTimeout {
            operation,
            path,
            lock_file,
            waited,
        } => {
            assert_eq!((*operation, path.as_str()), ("put_if_match", KEY));
            assert_eq!(lock_file, &held);
            assert!(*waited >= short, "{waited:?}");
        }
        other => panic!("expected a lock timeout, got {other}"),
    }
    assert!(
        elapsed >= short && elapsed < short + Duration::from_secs(3),
        "{elapsed:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&held.display().to_string()) && message.contains("stopped"),
        "{message}"
    );

    // Resumed, the holder finishes and the key is writable again.
    signal(&child.0, "CONT");
    std::fs::write(&stop_file, b"").unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        s.put(KEY, Bytes::from(format!("{:08}", 0))),
    )
    .await
    .expect("the key stayed blocked after SIGCONT")
    .unwrap();
    let mut child = child;
    let status =
        tokio::task::block_in_place(|| wait_bounded(&mut child.0, Duration::from_secs(30)));
    assert!(status.success(), "cas-loop process failed: {status}");
    assert_eq!(
        files_below(root.path()),
        ["t/.hoodie/lock", "t/.hoodie/other"],
        "lock files left behind"
    );
}
