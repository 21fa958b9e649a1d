//! The conformance suite of [`Storage`]: [`run_storage_suite`] runs the checks of `objects`
//! (single-object operations and keys), `listing` (order, paging, prefixes, deletes) and `races`
//! (concurrent conditional writes) under one fresh prefix, then removes it.

use std::sync::Arc;

use crate::storage::{Storage, StorageExt, MAX_DELETE_BATCH};

mod ctx;
mod listing;
mod objects;
mod races;

use self::ctx::{check, ok, Ctx};
use self::listing::{delete_batch, list_dir, listing_order_and_paging, prefix_semantics};
use self::objects::{
    copy, get_range, invalid_keys, missing_keys, overwrite, put_if_absent, put_if_match,
    round_trips, special_keys, versions_are_unique,
};
use self::races::{race_put_if_absent, race_put_if_match};

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
