//! `PrefixedStorage`: the conformance suite through a prefix on the memory and local backends,
//! isolation from keys outside the prefix, and rejection of hostile prefixes.

use std::path::Path;
use std::sync::Arc;

use arbor_storage::conformance::run_storage_suite;
use arbor_storage::{ObjectStoreStorage, PrefixedStorage, Storage, StorageError, StorageExt};
use bytes::Bytes;

/// Keys outside the prefix `p` that must survive and never be seen through it: a sibling, a key
/// that starts with the prefix's characters but is not below it, and an object named exactly
/// like the prefix.
const OUTSIDE: [&str; 4] = ["other/x", "prefixfoo/x", "prefix-a", "prefix"];

fn b(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

async fn put_outside(inner: &dyn Storage) {
    for k in OUTSIDE {
        inner.put(k, b(k)).await.unwrap();
    }
}

/// Every key of `s`, sorted.
async fn all_keys(s: &dyn Storage) -> Vec<String> {
    s.list_all("")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.key)
        .collect()
}

/// Every regular file below `dir` (relative, `/`-separated, sorted).
fn files_below(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap();
                let parts: Vec<_> = rel.iter().map(|c| c.to_string_lossy()).collect();
                out.push(parts.join("/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn sorted_outside() -> Vec<String> {
    let mut v: Vec<String> = OUTSIDE.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn test_run_storage_suite_prefixed_memory_passes() {
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    put_outside(inner.as_ref()).await;
    let store = Arc::new(PrefixedStorage::new(inner.clone(), "prefix").unwrap());
    run_storage_suite(store).await;
    // The suite cleaned up below the prefix and touched nothing outside it.
    assert_eq!(all_keys(inner.as_ref()).await, sorted_outside());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn test_run_storage_suite_prefixed_nested_memory_passes() {
    // A two-segment prefix, as for the metadata table, and a prefix on a prefix.
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    inner
        .put(".hoodie/hoodie.properties", b("t"))
        .await
        .unwrap();
    let mdt: Arc<dyn Storage> =
        Arc::new(PrefixedStorage::new(inner.clone(), ".hoodie/metadata").unwrap());
    run_storage_suite(mdt.clone()).await;
    let nested = Arc::new(PrefixedStorage::new(mdt, "files").unwrap());
    assert_eq!(nested.to_string(), "memory:///.hoodie/metadata/files");
    run_storage_suite(nested).await;
    assert_eq!(
        all_keys(inner.as_ref()).await,
        [".hoodie/hoodie.properties"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn test_run_storage_suite_empty_prefix_memory_passes() {
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let store = Arc::new(PrefixedStorage::new(inner.clone(), "").unwrap());
    assert_eq!(store.prefix(), "");
    assert_eq!(store.to_string(), inner.to_string());
    run_storage_suite(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn test_run_storage_suite_prefixed_local_passes() {
    let dir = tempfile::tempdir().unwrap();
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
    put_outside(inner.as_ref()).await;
    let store = Arc::new(PrefixedStorage::new(inner.clone(), ".hoodie/metadata").unwrap());
    run_storage_suite(store).await;
    // No file was left below the prefix (no temporary or lock file either), and the files
    // outside it are untouched.
    assert_eq!(files_below(dir.path()), sorted_outside());
    assert_eq!(all_keys(inner.as_ref()).await, sorted_outside());
}

#[tokio::test]
async fn test_put_prefixed_local_file_is_at_prefix_key_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
    let s = PrefixedStorage::new(inner.clone(), ".hoodie/metadata").unwrap();
    s.put(".hoodie/hoodie.properties", b("mdt")).await.unwrap();
    let on_disk = dir
        .path()
        .join(".hoodie/metadata/.hoodie/hoodie.properties");
    assert_eq!(std::fs::read(on_disk).unwrap(), b"mdt");
    assert_eq!(
        files_below(dir.path()),
        [".hoodie/metadata/.hoodie/hoodie.properties"]
    );
}

#[tokio::test]
async fn test_prefixed_writes_land_under_prefix_and_listings_stay_inside() {
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    put_outside(inner.as_ref()).await;
    let s = PrefixedStorage::new(inner.clone(), "prefix").unwrap();
    assert_eq!(s.prefix(), "prefix");
    assert!(Arc::ptr_eq(s.inner(), &inner));
    assert_eq!(s.to_string(), "memory:///prefix");

    for k in ["a/b", "a/c", "c", "d/e/f"] {
        s.put(k, b(k)).await.unwrap();
    }
    // Written at prefix/key in the inner storage.
    let (data, meta) = inner.get("prefix/a/b").await.unwrap();
    assert_eq!(data, b("a/b"));
    assert_eq!(meta.key, "prefix/a/b");
    // And read back through the wrapper under the caller's key.
    let (data, meta) = s.get("a/b").await.unwrap();
    assert_eq!((data, meta.key.as_str()), (b("a/b"), "a/b"));
    assert_eq!(s.head("d/e/f").await.unwrap().key, "d/e/f");
    // A write to the inner storage below the prefix is visible through the wrapper.
    inner.put("prefix/z", b("z")).await.unwrap();
    assert_eq!(s.get_range("z", 0..1).await.unwrap(), b("z"));

    let want = ["a/b", "a/c", "c", "d/e/f", "z"];
    assert_eq!(all_keys(&s).await, want);
    // Paging with cursors the wrapper returned.
    let mut got = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = s.list_page("", after.as_deref(), 2).await.unwrap();
        assert!(page.objects.len() <= 2);
        got.extend(page.objects.into_iter().map(|m| m.key));
        if let Some(n) = &page.next {
            assert!(!n.starts_with("prefix"), "cursor {n:?} leaks the prefix");
        }
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(got, want);
    let page = s.list_page("a", Some("a/b"), 10).await.unwrap();
    let keys: Vec<_> = page.objects.into_iter().map(|m| m.key).collect();
    assert_eq!(keys, ["a/c"]);

    let (objects, dirs) = s.list_dir("").await.unwrap();
    let objects: Vec<_> = objects.into_iter().map(|m| m.key).collect();
    assert_eq!(objects, ["c", "z"]);
    assert_eq!(dirs, ["a", "d"]);
    let (objects, dirs) = s.list_dir("d").await.unwrap();
    assert!(objects.is_empty());
    assert_eq!(dirs, ["d/e"]);

    // Copy and delete stay inside too.
    s.copy("c", "copied").await.unwrap();
    assert_eq!(inner.get("prefix/copied").await.unwrap().0, b("c"));
    let res = s
        .delete_batch(&["c".to_string(), "copied".to_string(), "x".to_string()])
        .await
        .unwrap();
    assert!(res.iter().all(|r| r.is_ok()));
    assert!(!inner.exists("prefix/c").await.unwrap());

    // Nothing outside the prefix was touched.
    let mut expected: Vec<String> = want
        .iter()
        .filter(|k| **k != "c")
        .map(|k| format!("prefix/{k}"))
        .chain(OUTSIDE.iter().map(|k| k.to_string()))
        .collect();
    expected.sort();
    assert_eq!(all_keys(inner.as_ref()).await, expected);
}

#[tokio::test]
async fn test_prefixed_errors_name_caller_key_and_cas_is_shared_with_inner() {
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let s = PrefixedStorage::new(inner.clone(), "p").unwrap();
    // The object named like the prefix is not reachable through the wrapper.
    inner.put("p", b("outside")).await.unwrap();
    let err = s.get("missing").await.unwrap_err();
    assert!(
        matches!(err, StorageError::NotFound { ref path } if path == "missing"),
        "{err}"
    );
    // put_if_absent races with the inner storage on the same object.
    inner.put_if_absent("p/k", b("inner")).await.unwrap();
    let err = s.put_if_absent("k", b("outer")).await.unwrap_err();
    assert!(
        matches!(err, StorageError::AlreadyExists { ref path } if path == "k"),
        "{err}"
    );
    // A version read through the wrapper is the inner storage's version.
    let v = s.head("k").await.unwrap().version;
    assert_eq!(v, inner.head("p/k").await.unwrap().version);
    let v2 = inner.put_if_match("p/k", b("inner 2"), &v).await.unwrap();
    let err = s.put_if_match("k", b("stale"), &v).await.unwrap_err();
    assert!(
        matches!(err, StorageError::PreconditionFailed { ref path } if path == "k"),
        "{err}"
    );
    s.put_if_match("k", b("outer 2"), &v2).await.unwrap();
    assert_eq!(inner.get("p/k").await.unwrap().0, b("outer 2"));
    // Keys that would escape the prefix are refused before reaching the inner storage.
    for k in ["../p", "../other", "", "/abs"] {
        let err = s.put(k, b("x")).await.unwrap_err();
        assert!(
            matches!(err, StorageError::InvalidKey { ref path, .. } if path == k),
            "{k:?}: {err}"
        );
    }
    assert_eq!(all_keys(inner.as_ref()).await, ["p", "p/k"]);
}

#[test]
fn test_new_hostile_prefix_is_refused() {
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    for p in ["../x", "a//b", "a/../b", "a/./b", "x/..", ".", "a\nb"] {
        match PrefixedStorage::new(inner.clone(), p) {
            Err(StorageError::InvalidKey { path, reason }) => {
                assert_eq!(path, p);
                assert!(reason.contains("prefix"), "{reason}");
            }
            other => panic!("prefix {p:?} accepted: {other:?}"),
        }
    }
}

#[test]
fn test_new_slashes_are_normalised() {
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let s = PrefixedStorage::new(inner.clone(), "/.hoodie/metadata/").unwrap();
    assert_eq!(s.prefix(), ".hoodie/metadata");
    assert_eq!(s.to_string(), "memory:///.hoodie/metadata");
    let id = PrefixedStorage::new(inner, String::from("/")).unwrap();
    assert_eq!(id.prefix(), "");
}
