//! The storage conformance suite on every backend and crash sweeps with the fault wrapper (the
//! local backend's own guarantees are in `local_backend`).

use std::path::Path;
use std::sync::Arc;

use arbor_storage::conformance::run_storage_suite;
use arbor_storage::{
    open_storage, FaultInjectingStorage, FaultMode, ObjectStoreStorage, OpKind, Storage,
    StorageError, StorageExt, StorageOptions,
};
use bytes::Bytes;

use crate::support;

/// Every regular file below `dir` (relative paths, sorted).
fn files_below(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn test_conformance_local() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
    run_storage_suite(store).await;
    // The suite deletes what it wrote: no temporary or lock file, and no directory, may be left.
    assert_eq!(files_below(dir.path()), Vec::<String>::new());
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "left in the root: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn test_conformance_local_via_open_storage_file_url() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("table");
    let url = url_of(&root);
    let store = open_storage(&url, &StorageOptions::default()).unwrap();
    assert!(store.to_string().starts_with("file:///"), "{store}");
    run_storage_suite(store).await;
}

fn url_of(p: &Path) -> String {
    format!("file://{}", p.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn test_conformance_memory() {
    run_storage_suite(Arc::new(ObjectStoreStorage::memory())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn test_conformance_s3_moto() {
    let Some(store) = support::s3_storage().await else {
        return;
    };
    run_storage_suite(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_s3_open_storage_url() {
    let Ok(env) = tokio::task::spawn_blocking(support::s3_env).await.unwrap() else {
        // s3_storage() reports the reason (and fails under CI).
        let _ = support::s3_storage().await;
        return;
    };
    let url = format!("s3://{}/url-{}/t", env.bucket, support::uuid_like());
    let s = open_storage(&url, &env.options).unwrap();
    assert_eq!(s.to_string(), url);
    s.put("a/b", Bytes::from_static(b"hi")).await.unwrap();
    assert_eq!(s.get("a/b").await.unwrap().0, Bytes::from_static(b"hi"));
    assert_eq!(s.list_all("").await.unwrap().len(), 1);
    s.delete("a/b").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn test_conformance_through_transparent_fault_wrapper() {
    let dir = tempfile::tempdir().unwrap();
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
    let faulty = Arc::new(FaultInjectingStorage::new(inner));
    run_storage_suite(faulty.clone()).await;
    assert!(faulty.op_count() > 100);
}

// ---------------------------------------------------------------------------------------------
// Crash sweeps with the fault wrapper.

/// A toy commit protocol shaped like a table commit: write a data file, publish a commit marker
/// with create-if-absent, then advance the `latest` pointer with compare-and-swap. Idempotent, so
/// re-running it after any failure finishes the commit.
async fn commit(s: &dyn Storage, id: u32) -> arbor_storage::Result<()> {
    let data_key = format!("data/part-{id:04}.bin");
    s.put(&data_key, Bytes::from(format!("rows of commit {id}")))
        .await?;
    let commit_key = format!("timeline/{id:04}.commit");
    match s
        .put_if_absent(&commit_key, Bytes::from(data_key.clone()))
        .await
    {
        Ok(_) => {}
        Err(e) if e.is_conflict() => {
            let (existing, _) = s.get(&commit_key).await?;
            if existing != data_key.as_bytes() {
                return Err(e);
            }
        }
        Err(e) => return Err(e),
    }
    let me = Bytes::from(format!("{id:04}"));
    loop {
        let res = match s.get_opt("latest").await? {
            None => s.put_if_absent("latest", me.clone()).await,
            Some((cur, meta)) => {
                let cur: u32 = std::str::from_utf8(&cur).unwrap().parse().unwrap();
                if cur >= id {
                    return Ok(());
                }
                s.put_if_match("latest", me.clone(), &meta.version).await
            }
        };
        match res {
            Ok(_) => return Ok(()),
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(e),
        }
    }
}

/// What a restarted process may rely on: every commit marker's data file exists, and `latest`
/// names a published commit.
async fn check_invariants(s: &dyn Storage) {
    for m in s.list_all("timeline").await.unwrap() {
        let (data_key, _) = s.get(&m.key).await.unwrap();
        let data_key = std::str::from_utf8(&data_key).unwrap();
        assert!(
            s.exists(data_key).await.unwrap(),
            "{} points to missing {data_key}",
            m.key
        );
    }
    if let Some((latest, _)) = s.get_opt("latest").await.unwrap() {
        let id = std::str::from_utf8(&latest).unwrap();
        assert!(
            s.exists(&format!("timeline/{id}.commit")).await.unwrap(),
            "latest = {id} is not published"
        );
    }
}

async fn latest(s: &dyn Storage) -> String {
    let (b, _) = s.get("latest").await.unwrap();
    String::from_utf8(b.to_vec()).unwrap()
}

/// Crashes commit 2 at every operation (all, or only writes), checks the invariants on what
/// survives, recovers and checks again. Returns the number of crash points.
async fn crash_sweep(make: &dyn Fn() -> Arc<dyn Storage>, only_writes: bool) -> usize {
    for n in 0..100 {
        let inner = make();
        commit(inner.as_ref(), 1).await.unwrap();
        let faulty = FaultInjectingStorage::new(inner.clone());
        faulty.set_count_only_writes(only_writes);
        faulty.set_mode(FaultMode::CrashAt(n));
        let res = commit(&faulty, 2).await;
        check_invariants(inner.as_ref()).await;
        match res {
            Ok(()) => {
                assert!(!faulty.has_crashed());
                assert_eq!(faulty.op_count(), n, "the sweep skipped an operation");
                assert_eq!(latest(inner.as_ref()).await, "0002");
                return n;
            }
            Err(StorageError::Injected { index, .. }) => {
                assert_eq!(index, n);
                assert!(faulty.has_crashed());
                // Nothing after the crash reached the inner storage.
                assert_eq!(faulty.ops().last().unwrap().index, n);
                // A restarted process finishes the commit.
                commit(inner.as_ref(), 2).await.unwrap();
                check_invariants(inner.as_ref()).await;
                assert_eq!(latest(inner.as_ref()).await, "0002");
            }
            Err(e) => panic!("unexpected error at crash point {n}: {e}"),
        }
    }
    panic!("the crash sweep did not terminate");
}

#[tokio::test]
async fn test_crash_sweep_memory() {
    let make = || Arc::new(ObjectStoreStorage::memory()) as Arc<dyn Storage>;
    // Writes: data put, commit put_if_absent, latest put_if_match.
    assert_eq!(crash_sweep(&make, true).await, 3);
    // All operations: the same plus the read of `latest`.
    assert_eq!(crash_sweep(&make, false).await, 4);
}

#[tokio::test]
async fn test_crash_sweep_local() {
    let dir = tempfile::tempdir().unwrap();
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let make = || {
        let i = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Arc::new(ObjectStoreStorage::local(&dir.path().join(i.to_string())).unwrap())
            as Arc<dyn Storage>
    };
    assert_eq!(crash_sweep(&make, true).await, 3);
}

#[tokio::test]
async fn test_fail_sweeps_are_recovered_by_retrying() {
    // FailAt: the op does nothing and fails once; FailAfter: it happens but reports failure.
    // The idempotent protocol, re-run on the same storage, always completes.
    for fail_after in [false, true] {
        for n in 0..4 {
            let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
            commit(inner.as_ref(), 1).await.unwrap();
            let faulty = FaultInjectingStorage::new(inner.clone());
            faulty.set_mode(if fail_after {
                FaultMode::FailAfter(n)
            } else {
                FaultMode::FailAt(n)
            });
            let first = commit(&faulty, 2).await;
            assert!(
                matches!(first, Err(StorageError::Injected { index, .. }) if index == n),
                "fail_after={fail_after} n={n}: {first:?}"
            );
            check_invariants(inner.as_ref()).await;
            commit(&faulty, 2).await.unwrap();
            check_invariants(inner.as_ref()).await;
            assert_eq!(latest(inner.as_ref()).await, "0002");
            let failed = &faulty.ops()[n];
            assert_eq!(failed.index, n);
            if n == 0 {
                assert_eq!(failed.kind, OpKind::Put);
            }
        }
    }
}
