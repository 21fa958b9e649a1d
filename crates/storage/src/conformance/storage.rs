//! The conformance suite of [`Storage`].

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Barrier;

use crate::error::StorageError;
use crate::storage::{Storage, StorageExt, Version, MAX_DELETE_BATCH};

/// Concurrent `put_if_absent` calls per round of the create race.
const CREATE_RACERS: usize = 32;
/// Rounds of the create race (a fresh key each).
const CREATE_ROUNDS: usize = 20;
/// Concurrent `put_if_match` calls per round of the compare-and-swap race.
const CAS_RACERS: usize = 16;
/// Rounds of the compare-and-swap race.
const CAS_ROUNDS: usize = 5;

/// Checks `store` against the [`Storage`] contract, panicking with the backend's name and the
/// broken property on the first violation.
///
/// Everything happens under a fresh `conformance-<uuid>/` prefix (removed at the end), so the
/// suite can run against a shared bucket, also concurrently with itself. It spawns tokio tasks
/// for its races: run it on a multi-threaded runtime
/// (`#[tokio::test(flavor = "multi_thread")]`) to get real parallelism.
///
/// Covered: put/get/head round trips (bytes, size, version), empty and 1 MiB objects, `NotFound`
/// for missing keys, `get_range` (inner, truncated, at/after the end, reversed), overwrite,
/// `put_if_absent` and `put_if_match` semantics (including on a missing key, which is
/// `PreconditionFailed`), distinct versions for distinct same-size writes and across delete +
/// re-create, keys with spaces, `%`, `=`, `#`, `+` and non-ASCII characters, listing order across
/// nested keys, paging with small pages and `start_after`, directory-prefix semantics, `list_dir`,
/// `delete_batch` (missing keys, the size limit, invalid keys), `copy`, rejection of invalid keys
/// by every operation, and two races: 32 concurrent `put_if_absent` on one key (one winner whose
/// bytes are stored, 20 rounds) and 16 concurrent `put_if_match` from one version (one winner).
pub async fn run_storage_suite(store: Arc<dyn Storage>) {
    let ctx = Ctx {
        name: store.to_string(),
        base: format!("conformance-{}", uuid::Uuid::new_v4().simple()),
        s: store,
    };
    round_trips(&ctx).await;
    missing_keys(&ctx).await;
    get_range(&ctx).await;
    overwrite(&ctx).await;
    put_if_absent(&ctx).await;
    put_if_match(&ctx).await;
    versions_are_unique(&ctx).await;
    special_keys(&ctx).await;
    listing_order_and_paging(&ctx).await;
    prefix_semantics(&ctx).await;
    list_dir(&ctx).await;
    delete_batch(&ctx).await;
    copy(&ctx).await;
    invalid_keys(&ctx).await;
    race_put_if_absent(&ctx).await;
    race_put_if_match(&ctx).await;
    cleanup(&ctx).await;
}

struct Ctx {
    s: Arc<dyn Storage>,
    name: String,
    base: String,
}

impl Ctx {
    fn key(&self, rel: &str) -> String {
        format!("{}/{rel}", self.base)
    }
}

/// Panics naming the backend and the property.
macro_rules! check {
    ($ctx:expr, $cond:expr, $($fmt:tt)+) => {
        if !$cond {
            panic!("[{}] {}", $ctx.name, format!($($fmt)+));
        }
    };
}

/// Unwraps a result, panicking with the backend, the step and the error.
fn ok<T>(ctx: &Ctx, what: &str, r: crate::Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("[{}] {what} failed: {e}", ctx.name),
    }
}

fn b(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

async fn round_trips(ctx: &Ctx) {
    let s = &ctx.s;
    let k = ctx.key("rt/one.bin");
    let v = ok(ctx, "put", s.put(&k, b("hello world")).await);
    let (data, meta) = ok(ctx, "get", s.get(&k).await);
    check!(ctx, data == b("hello world"), "get returned {data:?}");
    check!(ctx, meta.size == 11, "get meta size {}", meta.size);
    check!(ctx, meta.key == k, "get meta key {}", meta.key);
    check!(
        ctx,
        meta.version == v,
        "get version {:?} != put version {v:?}",
        meta.version
    );
    let head = ok(ctx, "head", s.head(&k).await);
    check!(ctx, head.size == 11, "head size {}", head.size);
    check!(ctx, head.key == k, "head key {}", head.key);
    check!(
        ctx,
        head.version == v,
        "head version {:?} != put version {v:?}",
        head.version
    );
    check!(
        ctx,
        v.e_tag.is_some() || v.version.is_some(),
        "put returned an empty version"
    );

    let empty = ctx.key("rt/empty");
    ok(ctx, "put empty", s.put(&empty, Bytes::new()).await);
    let (data, meta) = ok(ctx, "get empty", s.get(&empty).await);
    check!(
        ctx,
        data.is_empty() && meta.size == 0,
        "empty object read back as {} bytes",
        data.len()
    );

    let big: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect();
    let bigk = ctx.key("rt/big");
    ok(
        ctx,
        "put 1 MiB",
        s.put(&bigk, Bytes::from(big.clone())).await,
    );
    let (data, _) = ok(ctx, "get 1 MiB", s.get(&bigk).await);
    check!(
        ctx,
        data.as_ref() == big.as_slice(),
        "1 MiB object corrupted"
    );
    let mid = ok(
        ctx,
        "get_range 1 MiB",
        s.get_range(&bigk, 500_000..500_100).await,
    );
    check!(
        ctx,
        mid.as_ref() == &big[500_000..500_100],
        "get_range of a 1 MiB object is wrong"
    );
    check!(
        ctx,
        ok(ctx, "exists", s.exists(&k).await),
        "exists() false for an object"
    );
}

fn is_not_found<T>(r: &crate::Result<T>) -> bool {
    matches!(r, Err(StorageError::NotFound { .. }))
}

async fn missing_keys(ctx: &Ctx) {
    let s = &ctx.s;
    let k = ctx.key("missing/nothing");
    check!(
        ctx,
        is_not_found(&s.get(&k).await),
        "get of a missing key is not NotFound"
    );
    check!(
        ctx,
        is_not_found(&s.head(&k).await),
        "head of a missing key is not NotFound"
    );
    check!(
        ctx,
        is_not_found(&s.get_range(&k, 0..1).await),
        "get_range of a missing key is not NotFound"
    );
    check!(
        ctx,
        is_not_found(&s.copy(&k, &ctx.key("missing/to")).await),
        "copy from a missing key is not NotFound"
    );
    // Below an object: a missing key too (a local file system sees a file as a directory).
    ok(ctx, "put", s.put(&ctx.key("missing/file"), b("f")).await);
    let below = ctx.key("missing/file/child");
    check!(
        ctx,
        is_not_found(&s.get(&below).await),
        "get below an object is not NotFound"
    );
    check!(
        ctx,
        is_not_found(&s.head(&below).await),
        "head below an object is not NotFound"
    );
    check!(
        ctx,
        is_not_found(&s.get_range(&below, 0..1).await),
        "get_range below an object is not NotFound"
    );
    let page = ok(
        ctx,
        "list below an object",
        s.list_page(&below, None, 10).await,
    );
    check!(
        ctx,
        page.objects.is_empty(),
        "listing below an object found {:?}",
        page.objects
    );
    check!(
        ctx,
        is_not_found(&s.copy(&below, &ctx.key("missing/to")).await),
        "copy from below an object is not NotFound"
    );
    ok(ctx, "delete below an object", s.delete(&below).await);
    if let Err(StorageError::NotFound { path }) = s.get(&k).await {
        check!(ctx, path == k, "NotFound names {path:?}, not the key {k:?}");
    }
    check!(
        ctx,
        !ok(ctx, "exists", s.exists(&k).await),
        "exists() true for a missing key"
    );
    check!(
        ctx,
        ok(ctx, "get_opt", s.get_opt(&k).await).is_none(),
        "get_opt found a missing key"
    );
}

async fn get_range(ctx: &Ctx) {
    let s = &ctx.s;
    let k = ctx.key("range/ten");
    ok(ctx, "put", s.put(&k, b("0123456789")).await);
    let r = ok(ctx, "get_range 2..5", s.get_range(&k, 2..5).await);
    check!(ctx, r == b("234"), "get_range 2..5 = {r:?}");
    let r = ok(ctx, "get_range 0..10", s.get_range(&k, 0..10).await);
    check!(ctx, r == b("0123456789"), "get_range 0..10 = {r:?}");
    let r = ok(ctx, "get_range 7..100", s.get_range(&k, 7..100).await);
    check!(
        ctx,
        r == b("789"),
        "get_range past the end is not truncated: {r:?}"
    );
    let r = ok(ctx, "get_range 4..4", s.get_range(&k, 4..4).await);
    check!(ctx, r.is_empty(), "empty range returned {r:?}");
    let r = ok(ctx, "get_range 10..20", s.get_range(&k, 10..20).await);
    check!(
        ctx,
        r.is_empty(),
        "range starting at the end returned {r:?}"
    );
    let r = s.get_range(&k, 11..20).await;
    check!(
        ctx,
        matches!(r, Err(StorageError::InvalidArgument { .. })),
        "range starting past the end: {r:?}"
    );
    #[allow(clippy::reversed_empty_ranges)]
    let r = s.get_range(&k, 5..2).await;
    check!(
        ctx,
        matches!(r, Err(StorageError::InvalidArgument { .. })),
        "reversed range: {r:?}"
    );
}

async fn overwrite(ctx: &Ctx) {
    let s = &ctx.s;
    let k = ctx.key("ow/k");
    let v1 = ok(ctx, "put 1", s.put(&k, b("first")).await);
    let v2 = ok(ctx, "put 2", s.put(&k, b("second!")).await);
    check!(ctx, v1 != v2, "overwrite kept the version {v1:?}");
    let (data, meta) = ok(ctx, "get", s.get(&k).await);
    check!(ctx, data == b("second!"), "overwrite not visible: {data:?}");
    check!(
        ctx,
        meta.size == 7 && meta.version == v2,
        "overwrite metadata {meta:?}"
    );
}

async fn put_if_absent(ctx: &Ctx) {
    let s = &ctx.s;
    let k = ctx.key("pia/k");
    let v = ok(
        ctx,
        "put_if_absent new",
        s.put_if_absent(&k, b("one")).await,
    );
    let head = ok(ctx, "head", s.head(&k).await);
    check!(
        ctx,
        head.version == v,
        "put_if_absent version {v:?} != head {:?}",
        head.version
    );
    let r = s.put_if_absent(&k, b("two")).await;
    check!(
        ctx,
        matches!(&r, Err(StorageError::AlreadyExists { path }) if *path == k),
        "put_if_absent on an existing key: {r:?}"
    );
    let (data, meta) = ok(ctx, "get", s.get(&k).await);
    check!(
        ctx,
        data == b("one"),
        "a failed put_if_absent changed the content to {data:?}"
    );
    check!(
        ctx,
        meta.version == v,
        "a failed put_if_absent changed the version"
    );
    // Also in a directory that does not exist yet.
    ok(
        ctx,
        "put_if_absent nested",
        s.put_if_absent(&ctx.key("pia/new/dir/k"), b("x")).await,
    );
}

async fn put_if_match(ctx: &Ctx) {
    let s = &ctx.s;
    let k = ctx.key("pim/k");
    let v1 = ok(ctx, "put", s.put(&k, b("v1")).await);
    let v2 = ok(
        ctx,
        "put_if_match current",
        s.put_if_match(&k, b("v2"), &v1).await,
    );
    check!(ctx, v2 != v1, "put_if_match returned the old version");
    let (data, meta) = ok(ctx, "get", s.get(&k).await);
    check!(
        ctx,
        data == b("v2") && meta.version == v2,
        "put_if_match result {data:?} {meta:?}"
    );
    let r = s.put_if_match(&k, b("v3"), &v1).await;
    check!(
        ctx,
        matches!(&r, Err(StorageError::PreconditionFailed { path }) if *path == k),
        "put_if_match with a stale version: {r:?}"
    );
    let (data, _) = ok(ctx, "get", s.get(&k).await);
    check!(
        ctx,
        data == b("v2"),
        "a failed put_if_match changed the content to {data:?}"
    );
    let r = s.put_if_match(&k, b("v3"), &Version::default()).await;
    check!(
        ctx,
        matches!(r, Err(StorageError::PreconditionFailed { .. })),
        "put_if_match with an empty version: {r:?}"
    );
    let missing = ctx.key("pim/missing");
    let r = s.put_if_match(&missing, b("x"), &v2).await;
    check!(
        ctx,
        matches!(r, Err(StorageError::PreconditionFailed { .. })),
        "put_if_match on a missing key must be PreconditionFailed: {r:?}"
    );
    check!(
        ctx,
        !ok(ctx, "exists", s.exists(&missing).await),
        "put_if_match created a key"
    );
}

async fn versions_are_unique(ctx: &Ctx) {
    // Writes of the same size but different bytes, in quick succession, must all get distinct
    // versions, or a stale compare-and-swap could succeed (ABA).
    let s = &ctx.s;
    let k = ctx.key("ver/k");
    let mut seen = HashSet::new();
    let first = ok(ctx, "put_if_absent", s.put_if_absent(&k, b("w-00")).await);
    seen.insert(first.clone());
    let mut current = first.clone();
    for i in 1..20 {
        let data = b(&format!("w-{i:02}"));
        current = match i % 4 {
            0 => ok(ctx, "put", s.put(&k, data).await),
            1 | 2 => ok(
                ctx,
                "put_if_match",
                s.put_if_match(&k, data, &current).await,
            ),
            _ => {
                ok(ctx, "delete", s.delete(&k).await);
                ok(ctx, "put_if_absent", s.put_if_absent(&k, data).await)
            }
        };
        check!(
            ctx,
            seen.insert(current.clone()),
            "version {current:?} repeated at write {i}"
        );
    }
    let r = s.put_if_match(&k, b("late"), &first).await;
    check!(
        ctx,
        matches!(r, Err(StorageError::PreconditionFailed { .. })),
        "a stale version matched after 20 writes: {r:?}"
    );
}

async fn special_keys(ctx: &Ctx) {
    let s = &ctx.s;
    let rels = [
        "special/sp ace/a b.txt",
        "special/pct/%41%2F.txt",
        "special/eq/k=v/x",
        "special/uni/ü€.txt",
        "special/hash/a#b",
        "special/plus/a+b&c",
    ];
    let mut keys: Vec<String> = rels.iter().map(|r| ctx.key(r)).collect();
    for k in &keys {
        ok(ctx, &format!("put {k:?}"), s.put(k, b(k)).await);
        let (data, meta) = ok(ctx, &format!("get {k:?}"), s.get(k).await);
        check!(
            ctx,
            data == b(k) && meta.key == *k,
            "key {k:?} read back as {:?}",
            meta.key
        );
    }
    keys.sort();
    let listed: Vec<String> = ok(ctx, "list special", s.list_all(&ctx.key("special")).await)
        .into_iter()
        .map(|m| m.key)
        .collect();
    check!(
        ctx,
        listed == keys,
        "special keys listed as {listed:?}, expected {keys:?}"
    );
}

/// The keys of the listing tests, relative to `<base>/list/`. Includes `x/sub-a` and `x/sub/3`
/// (`-` sorts before `/`), `x-y` and `x.txt` before the directory `x/`, and `x0` after it.
const LIST_KEYS: [&str; 12] = [
    "Z",
    "a.txt",
    "b/c/d/e.txt",
    "x-y",
    "x.txt",
    "x/1",
    "x/2",
    "x/sub-a",
    "x/sub/3",
    "x0",
    "y",
    "ü",
];

async fn listing_order_and_paging(ctx: &Ctx) {
    let s = &ctx.s;
    let prefix = ctx.key("list");
    let mut expected: Vec<String> = LIST_KEYS.iter().map(|r| format!("{prefix}/{r}")).collect();
    // Write in a scrambled order.
    for k in expected.iter().rev() {
        ok(ctx, "put", s.put(k, b(k)).await);
    }
    expected.sort();
    let page = ok(ctx, "list_page", s.list_page(&prefix, None, 1000).await);
    let got: Vec<String> = page.objects.iter().map(|m| m.key.clone()).collect();
    check!(
        ctx,
        got == expected,
        "listing order {got:?}, expected {expected:?}"
    );
    check!(
        ctx,
        page.next.is_none(),
        "a complete listing has next = {:?}",
        page.next
    );
    for m in &page.objects {
        check!(
            ctx,
            m.size == m.key.len() as u64,
            "listed size of {} is {}",
            m.key,
            m.size
        );
        let head = ok(ctx, "head", s.head(&m.key).await);
        check!(
            ctx,
            head.version == m.version,
            "listed version of {} differs from head",
            m.key
        );
    }
    for max in [1, 2, 3, 5, 11, 12] {
        let mut all = Vec::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            let page = ok(
                ctx,
                "list_page",
                s.list_page(&prefix, after.as_deref(), max).await,
            );
            pages += 1;
            check!(ctx, pages <= 100, "paging with max_keys={max} does not end");
            check!(
                ctx,
                page.objects.len() <= max,
                "page of {} > max_keys {max}",
                page.objects.len()
            );
            all.extend(page.objects.into_iter().map(|m| m.key));
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        check!(
            ctx,
            all == expected,
            "paging with max_keys={max} gave {all:?}"
        );
    }
    // start_after that is not a key, and one inside a sub-tree.
    for after in ["x/sub", "x/sub/3", "x", "x/1", "a", "b/c", "Z", "zz", "~"] {
        let after_key = format!("{prefix}/{after}");
        let page = ok(
            ctx,
            "list_page",
            s.list_page(&prefix, Some(&after_key), 1000).await,
        );
        let got: Vec<String> = page.objects.into_iter().map(|m| m.key).collect();
        let want: Vec<String> = expected
            .iter()
            .filter(|k| **k > after_key)
            .cloned()
            .collect();
        check!(
            ctx,
            got == want,
            "start_after {after:?}: got {got:?}, want {want:?}"
        );
    }
    let r = s.list_page(&prefix, None, 0).await;
    check!(
        ctx,
        matches!(r, Err(StorageError::InvalidArgument { .. })),
        "max_keys 0: {r:?}"
    );
    // The root listing is in order too (the store may hold other data: look at one page).
    let root = ok(ctx, "list root", s.list_page("", None, 50).await);
    check!(
        ctx,
        root.objects.windows(2).all(|w| w[0].key < w[1].key),
        "root listing out of order"
    );
    let all = ok(ctx, "list_all", s.list_all(&prefix).await);
    check!(
        ctx,
        all.len() == expected.len(),
        "list_all found {} keys",
        all.len()
    );
    let missing = ok(
        ctx,
        "list missing",
        s.list_page(&ctx.key("nope"), None, 10).await,
    );
    check!(
        ctx,
        missing.objects.is_empty() && missing.next.is_none(),
        "listing a missing prefix"
    );
}

async fn prefix_semantics(ctx: &Ctx) {
    let s = &ctx.s;
    for r in ["pfx/ab/1", "pfx/abc/2", "pfx/ab-c", "pfx/ab0"] {
        ok(ctx, "put", s.put(&ctx.key(r), b(r)).await);
    }
    let got: Vec<String> = ok(
        ctx,
        "list",
        s.list_page(&ctx.key("pfx/ab"), None, 100).await,
    )
    .objects
    .into_iter()
    .map(|m| m.key)
    .collect();
    check!(
        ctx,
        got == [ctx.key("pfx/ab/1")],
        "prefix a/b must list a/b/... only, got {got:?}"
    );
    // An object's own key is not a directory prefix of itself.
    let got = ok(
        ctx,
        "list",
        s.list_page(&ctx.key("pfx/ab-c"), None, 100).await,
    );
    check!(
        ctx,
        got.objects.is_empty(),
        "listing an object key as prefix gave {:?}",
        got.objects
    );
}

async fn list_dir(ctx: &Ctx) {
    let s = &ctx.s;
    // Uses the keys of `listing_order_and_paging`.
    let prefix = ctx.key("list");
    let (objects, dirs) = ok(ctx, "list_dir", s.list_dir(&prefix).await);
    let objects: Vec<String> = objects.into_iter().map(|m| m.key).collect();
    let want: Vec<String> = ["Z", "a.txt", "x-y", "x.txt", "x0", "y", "ü"]
        .iter()
        .map(|r| format!("{prefix}/{r}"))
        .collect();
    check!(
        ctx,
        objects == want,
        "list_dir objects {objects:?}, expected {want:?}"
    );
    let want_dirs = [format!("{prefix}/b"), format!("{prefix}/x")];
    check!(
        ctx,
        dirs == want_dirs,
        "list_dir dirs {dirs:?}, expected {want_dirs:?}"
    );
    let (objects, dirs) = ok(ctx, "list_dir x", s.list_dir(&format!("{prefix}/x")).await);
    let objects: Vec<String> = objects.into_iter().map(|m| m.key).collect();
    let want: Vec<String> = ["x/1", "x/2", "x/sub-a"]
        .iter()
        .map(|r| format!("{prefix}/{r}"))
        .collect();
    check!(ctx, objects == want, "list_dir x objects {objects:?}");
    check!(
        ctx,
        dirs == [format!("{prefix}/x/sub")],
        "list_dir x dirs {dirs:?}"
    );
    let (objects, dirs) = ok(ctx, "list_dir missing", s.list_dir(&ctx.key("nope")).await);
    check!(
        ctx,
        objects.is_empty() && dirs.is_empty(),
        "list_dir of a missing prefix"
    );
    let (objects, dirs) = ok(
        ctx,
        "list_dir object",
        s.list_dir(&format!("{prefix}/y")).await,
    );
    check!(
        ctx,
        objects.is_empty() && dirs.is_empty(),
        "list_dir of an object key"
    );
    let (_, dirs) = ok(ctx, "list_dir root", s.list_dir("").await);
    check!(
        ctx,
        dirs.contains(&ctx.base),
        "list_dir of the root lacks {}",
        ctx.base
    );
    check!(
        ctx,
        dirs.windows(2).all(|w| w[0] < w[1]),
        "root sub-dirs out of order"
    );
}

async fn delete_batch(ctx: &Ctx) {
    let s = &ctx.s;
    let keys: Vec<String> = (0..10).map(|i| ctx.key(&format!("del/k{i:02}"))).collect();
    for k in &keys {
        ok(ctx, "put", s.put(k, b(k)).await);
    }
    // More than the limit: rejected, nothing deleted.
    let mut too_many: Vec<String> = (0..MAX_DELETE_BATCH)
        .map(|i| ctx.key(&format!("del/none{i}")))
        .collect();
    too_many.push(keys[0].clone());
    let r = s.delete_batch(&too_many).await;
    check!(
        ctx,
        matches!(r, Err(StorageError::InvalidArgument { .. })),
        "delete_batch of {} keys: {:?}",
        too_many.len(),
        r.map(|v| v.len())
    );
    check!(
        ctx,
        ok(ctx, "exists", s.exists(&keys[0]).await),
        "a rejected batch deleted a key"
    );
    // An invalid key: rejected, nothing deleted.
    let r = s.delete_batch(&[keys[0].clone(), "../x".to_string()]).await;
    check!(
        ctx,
        matches!(r, Err(StorageError::InvalidKey { .. })),
        "batch with an invalid key"
    );
    check!(
        ctx,
        ok(ctx, "exists", s.exists(&keys[0]).await),
        "a rejected batch deleted a key"
    );
    // Existing and missing keys.
    let mut batch: Vec<String> = keys[..5].to_vec();
    batch.extend((0..5).map(|i| ctx.key(&format!("del/missing{i}"))));
    let res = ok(ctx, "delete_batch", s.delete_batch(&batch).await);
    check!(
        ctx,
        res.len() == batch.len(),
        "delete_batch returned {} results",
        res.len()
    );
    for (k, r) in batch.iter().zip(&res) {
        check!(ctx, r.is_ok(), "deleting {k}: {r:?}");
        check!(
            ctx,
            !ok(ctx, "exists", s.exists(k).await),
            "{k} still exists after delete"
        );
    }
    // Exactly the limit.
    let mut full: Vec<String> = keys[5..].to_vec();
    full.extend((0..MAX_DELETE_BATCH - full.len()).map(|i| ctx.key(&format!("del/m{i}"))));
    let res = ok(ctx, "delete_batch 1000", s.delete_batch(&full).await);
    check!(
        ctx,
        res.len() == MAX_DELETE_BATCH && res.iter().all(|r| r.is_ok()),
        "1000-key batch"
    );
    let left = ok(ctx, "list", s.list_all(&ctx.key("del")).await);
    check!(ctx, left.is_empty(), "keys left after deleting: {left:?}");
    let (_, dirs) = ok(ctx, "list_dir", s.list_dir(&ctx.base).await);
    check!(
        ctx,
        !dirs.contains(&ctx.key("del")),
        "the directory of deleted objects is still listed: {dirs:?}"
    );
    check!(
        ctx,
        ok(ctx, "empty batch", s.delete_batch(&[]).await).is_empty(),
        "empty batch"
    );
    ok(ctx, "delete missing", s.delete(&ctx.key("del/never")).await);
}

async fn copy(ctx: &Ctx) {
    let s = &ctx.s;
    let a = ctx.key("copy/a");
    let bk = ctx.key("copy/sub/dir/b");
    ok(ctx, "put", s.put(&a, b("source")).await);
    ok(ctx, "copy", s.copy(&a, &bk).await);
    let (data, _) = ok(ctx, "get copy", s.get(&bk).await);
    check!(ctx, data == b("source"), "copy has {data:?}");
    ok(ctx, "put", s.put(&a, b("source 2")).await);
    ok(ctx, "copy over", s.copy(&a, &bk).await);
    let (data, meta) = ok(ctx, "get copy", s.get(&bk).await);
    check!(
        ctx,
        data == b("source 2") && meta.size == 8,
        "copy over an object has {data:?}"
    );
    let (data, _) = ok(ctx, "get source", s.get(&a).await);
    check!(ctx, data == b("source 2"), "copy changed its source");
    // The copy is independent of its source.
    ok(ctx, "put", s.put(&a, b("source 3")).await);
    let (data, _) = ok(ctx, "get copy", s.get(&bk).await);
    check!(
        ctx,
        data == b("source 2"),
        "writing the source changed the copy"
    );
    let v = ok(ctx, "head", s.head(&bk).await).version;
    ok(
        ctx,
        "put_if_match on a copy",
        s.put_if_match(&bk, b("x"), &v).await,
    );
}

async fn invalid_keys(ctx: &Ctx) {
    let s = &ctx.s;
    let good = ctx.key("inv/good");
    ok(ctx, "put", s.put(&good, b("g")).await);
    let v = ok(ctx, "head", s.head(&good).await).version;
    fn invalid<T: std::fmt::Debug>(r: crate::Result<T>) -> Result<(), String> {
        match r {
            Err(StorageError::InvalidKey { .. }) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    }
    for k in ["../x", "/abs", "a//b", "", "a/./b", "a/", "a/../b"] {
        let results = [
            ("get", invalid(s.get(k).await)),
            ("head", invalid(s.head(k).await)),
            ("get_range", invalid(s.get_range(k, 0..1).await)),
            ("put", invalid(s.put(k, b("x")).await)),
            ("put_if_absent", invalid(s.put_if_absent(k, b("x")).await)),
            ("put_if_match", invalid(s.put_if_match(k, b("x"), &v).await)),
            ("copy from", invalid(s.copy(k, &good).await)),
            ("copy to", invalid(s.copy(&good, k).await)),
            (
                "delete_batch",
                invalid(s.delete_batch(&[k.to_string()]).await),
            ),
        ];
        for (op, r) in results {
            if let Err(got) = r {
                panic!(
                    "[{}] {op} with invalid key {k:?} must be InvalidKey, got {got}",
                    ctx.name
                );
            }
        }
        if !k.is_empty() {
            if let Err(got) = invalid(s.list_page(k, None, 10).await) {
                panic!("[{}] list_page with prefix {k:?}: {got}", ctx.name);
            }
            if let Err(got) = invalid(s.list_dir(k).await) {
                panic!("[{}] list_dir with prefix {k:?}: {got}", ctx.name);
            }
            if let Err(got) = invalid(s.list_page("", Some(k), 10).await) {
                panic!("[{}] list_page with start_after {k:?}: {got}", ctx.name);
            }
        }
    }
    let (data, _) = ok(ctx, "get", s.get(&good).await);
    check!(
        ctx,
        data == b("g"),
        "an invalid-key operation changed another key"
    );
}

async fn race_put_if_absent(ctx: &Ctx) {
    for round in 0..CREATE_ROUNDS {
        let key = ctx.key(&format!("race/create-{round}"));
        let barrier = Arc::new(Barrier::new(CREATE_RACERS));
        let mut tasks = Vec::new();
        for i in 0..CREATE_RACERS {
            let (s, key, barrier) = (ctx.s.clone(), key.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                s.put_if_absent(&key, Bytes::from(format!("writer-{i:03}")))
                    .await
            }));
        }
        let mut winners = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            match t.await.expect("racer panicked") {
                Ok(v) => winners.push((i, v)),
                Err(StorageError::AlreadyExists { .. }) => {}
                Err(e) => panic!("[{}] racing put_if_absent failed: {e}", ctx.name),
            }
        }
        check!(
            ctx,
            winners.len() == 1,
            "round {round}: {} of {CREATE_RACERS} concurrent put_if_absent calls won: {:?}",
            winners.len(),
            winners.iter().map(|w| w.0).collect::<Vec<_>>()
        );
        let (winner, version) = &winners[0];
        let (data, meta) = ok(ctx, "get", ctx.s.get(&key).await);
        check!(
            ctx,
            data == b(&format!("writer-{winner:03}")),
            "round {round}: stored {data:?} but writer {winner} won"
        );
        check!(
            ctx,
            meta.version == *version,
            "round {round}: winner's version is not stored"
        );
    }
}

async fn race_put_if_match(ctx: &Ctx) {
    for round in 0..CAS_ROUNDS {
        let key = ctx.key(&format!("race/cas-{round}"));
        let v0 = ok(ctx, "put", ctx.s.put(&key, b("start-000")).await);
        let barrier = Arc::new(Barrier::new(CAS_RACERS));
        let mut tasks = Vec::new();
        for i in 0..CAS_RACERS {
            let (s, key, barrier, v0) = (ctx.s.clone(), key.clone(), barrier.clone(), v0.clone());
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                s.put_if_match(&key, Bytes::from(format!("cas-{i:05}")), &v0)
                    .await
            }));
        }
        let mut winners = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            match t.await.expect("racer panicked") {
                Ok(v) => winners.push((i, v)),
                Err(StorageError::PreconditionFailed { .. }) => {}
                Err(e) => panic!("[{}] racing put_if_match failed: {e}", ctx.name),
            }
        }
        check!(
            ctx,
            winners.len() == 1,
            "round {round}: {} of {CAS_RACERS} concurrent put_if_match calls won: {:?}",
            winners.len(),
            winners.iter().map(|w| w.0).collect::<Vec<_>>()
        );
        let (winner, version) = &winners[0];
        let (data, meta) = ok(ctx, "get", ctx.s.get(&key).await);
        check!(
            ctx,
            data == b(&format!("cas-{winner:05}")) && meta.version == *version,
            "round {round}: stored {data:?} but writer {winner} won"
        );
    }
}

async fn cleanup(ctx: &Ctx) {
    let all = ok(ctx, "list for cleanup", ctx.s.list_all(&ctx.base).await);
    let keys: Vec<String> = all.into_iter().map(|m| m.key).collect();
    for chunk in keys.chunks(MAX_DELETE_BATCH) {
        for r in ok(ctx, "cleanup", ctx.s.delete_batch(chunk).await) {
            ok(ctx, "cleanup", r);
        }
    }
    let left = ok(ctx, "list after cleanup", ctx.s.list_all(&ctx.base).await);
    check!(ctx, left.is_empty(), "cleanup left {} keys", left.len());
}
