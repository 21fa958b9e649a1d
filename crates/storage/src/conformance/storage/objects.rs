//! Conformance checks of single-object operations: round trips, missing keys, ranges,
//! overwrite, the conditional writes, versions, special and invalid keys, copy.

use std::collections::HashSet;

use bytes::Bytes;

use crate::error::StorageError;
use crate::storage::{StorageExt, Version};

use super::ctx::{b, check, is_not_found, ok, Ctx};

pub(super) async fn round_trips(ctx: &Ctx) {
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

pub(super) async fn missing_keys(ctx: &Ctx) {
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

pub(super) async fn get_range(ctx: &Ctx) {
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

pub(super) async fn overwrite(ctx: &Ctx) {
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

pub(super) async fn put_if_absent(ctx: &Ctx) {
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

pub(super) async fn put_if_match(ctx: &Ctx) {
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

pub(super) async fn versions_are_unique(ctx: &Ctx) {
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

pub(super) async fn special_keys(ctx: &Ctx) {
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

pub(super) async fn copy(ctx: &Ctx) {
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

pub(super) async fn invalid_keys(ctx: &Ctx) {
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
