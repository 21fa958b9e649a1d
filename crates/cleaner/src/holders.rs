//! [`holders_of_partitions`]: which refs keep files of given partitions (the TTL dry run's
//! "kept by" column), judged as a clean of the table's root judges them.

use std::collections::{BTreeMap, BTreeSet};

use arbor_table::read::TableReader;
use arbor_table::Table;
use chrono::Utc;

use crate::error::Result;
use crate::partitions::partition_of;
use crate::protection::{
    completed_savepoints, savepoint_keys, PendingProtection, ProtectionContext, ProtectionSource,
};
use crate::roots::{live_roots, needed_by, own_retention, retained_by, OwnRetention};
use crate::savepoint::{branches_based_at, root_label, tags_naming};
use arbor_timeline::metaroot::MAIN;

/// For each of `partitions` (in the order given; duplicates merged), the names of the
/// protection sources that keep at least one file of it, in this order:
/// - each completed savepoint of the table's root: `tag <name>` for every tag naming its
///   instant (tags are paired savepoints), `branch <name>` for every working branch based at
///   it (its base pin), else `savepoint <instant>`;
/// - `pending instants` (inputs of pending compactions and clustering);
/// - `retention (<policy>)`: what the root's own clean policy keeps (the policy of its last
///   clean, Hudi's default `KEEP_LATEST_COMMITS 10` when it never cleaned: see
///   [`own_retention`]); the latest snapshot is always part of it, so a live partition is
///   always kept by it;
/// - each other live root (`main (root)`, `branch <name>`, ...) that needs a file of it by its
///   own history (its savepoints and tags, pending services and own retention).
///
/// An empty list means no source keeps any file of the partition: a clean with a policy at
/// least as short as the root's own deletes them all (and removes the partition when it was
/// deleted, [`crate::partitions`]). A write pending on any root only delays the removal of a
/// partition's directory, not of its files, and is not listed. Read only: no lock is taken,
/// nothing is written. Fails if a timeline, savepoint or the listing cannot be read.
pub async fn holders_of_partitions(
    table: &Table,
    partitions: &[String],
) -> Result<BTreeMap<String, Vec<String>>> {
    let storage = table.view_storage();
    let reader = TableReader::open_view(storage.clone()).await?;
    let ctx = ProtectionContext {
        storage,
        view: reader.view(),
        now: Utc::now(),
    };
    let wanted: BTreeSet<&str> = partitions.iter().map(String::as_str).collect();
    let mut out: BTreeMap<String, Vec<String>> =
        partitions.iter().map(|p| (p.clone(), Vec::new())).collect();
    let mut note = |name: &str, keys: &BTreeSet<String>| {
        let hit: BTreeSet<&str> = keys
            .iter()
            .map(|k| partition_of(k))
            .filter(|p| wanted.contains(p))
            .collect();
        for p in hit {
            if let Some(names) = out.get_mut(p) {
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
        }
    };
    for sp in completed_savepoints(&ctx) {
        let keys = savepoint_keys(&ctx, &sp).await?;
        let tags = tags_naming(storage, &sp.requested_time).await?;
        // A branch's base pin is the branch's hold (named as the branch).
        let branches = if root_label(table.root()) == MAIN {
            branches_based_at(table.table_storage(), &sp.requested_time).await?
        } else {
            Vec::new()
        };
        if tags.is_empty() && branches.is_empty() {
            note(&format!("savepoint {}", sp.requested_time), &keys);
        }
        for tag in tags {
            note(&format!("tag {tag}"), &keys);
        }
        for b in branches {
            note(&format!("branch {b}"), &keys);
        }
    }
    note(
        "pending instants",
        &PendingProtection.protected(&ctx).await?,
    );
    let retention = match own_retention(&ctx).await? {
        OwnRetention::Policy(p) => format!("retention ({p})"),
        OwnRetention::Since(t) => format!("retention (since {t})"),
        OwnRetention::Everything => "retention (every committed file)".to_string(),
    };
    note(&retention, &retained_by(&ctx).await?);
    let table_storage = table.table_storage();
    for root in live_roots(table_storage).await? {
        if root != *table.root() {
            let keys = needed_by(table_storage, &root, ctx.now).await?;
            note(&root.to_string(), &keys);
        }
    }
    Ok(out)
}
