//! Conformance checks of listings and deletes: key order, paging, `start_after`, directory
//! prefixes, `list_dir` and `delete_batch`.

use crate::error::StorageError;
use crate::storage::{StorageExt, MAX_DELETE_BATCH};

use super::ctx::{b, check, ok, Ctx};

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

pub(super) async fn listing_order_and_paging(ctx: &Ctx) {
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

pub(super) async fn prefix_semantics(ctx: &Ctx) {
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

pub(super) async fn list_dir(ctx: &Ctx) {
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
    // `list_dir_keys` lists the same keys, wherever `list_dir` is asked.
    for p in [
        prefix.clone(),
        format!("{prefix}/x"),
        format!("{prefix}/y"),
        ctx.key("nope"),
    ] {
        let (objects, dirs) = ok(ctx, "list_dir", s.list_dir(&p).await);
        let objects: Vec<String> = objects.into_iter().map(|m| m.key).collect();
        let keys = ok(ctx, "list_dir_keys", s.list_dir_keys(&p).await);
        check!(
            ctx,
            keys == (objects.clone(), dirs.clone()),
            "list_dir_keys({p}) {keys:?}, list_dir {objects:?} {dirs:?}"
        );
    }
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

pub(super) async fn delete_batch(ctx: &Ctx) {
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
