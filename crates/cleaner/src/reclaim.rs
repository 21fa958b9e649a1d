//! Reclaiming data files nothing references: the files a dropped branch wrote (recorded at the
//! drop, deleted by the next clean) and orphans (`arbor clean --orphans`).
//!
//! # What "referenced" means
//! A data file under the table base is referenced when
//! - some live root (main, every working branch; [`live_roots`]) lists it as committed (through
//!   its metadata table, or its directories), any version it still lists, so everything its
//!   savepoints, tags, clone pins and retention keep; or
//! - its instant time (from its name) is the requested time of any instant on any live root's
//!   timeline, active or archived, in any state: the files of pending writes and table
//!   services, and (conservatively) files of completed instants a listing left out.
//!
//! Everything else was written by an instant no live root knows: a dropped branch's writes, a
//! writer that died before any instant recorded it, leftovers of interrupted deletions. Such a
//! file changes no read of any root, so deleting it needs no timeline record, and every prefix
//! of the deletions leaves every root reading exactly what it read.
//!
//! # Safety against writers
//! Reclaiming runs under the table lock. arbor writers (and Java writers sharing the lock)
//! create their requested instant under the lock before writing any file, so every file of a
//! running write carries a referenced instant. For writers that do not share the lock, orphans
//! are only deleted when older than a minimum age (`--older-than`, default one hour). Files of
//! a table nested inside the base directory (any directory holding `.hoodie/hoodie.properties`)
//! and everything under `.hoodie/` are never considered.
//!
//! # Dropped branches
//! `drop_branch` records the keys the branch listed in a ledger under [`DROPPED_DIR`] before it
//! removes anything; every clean (any root) then deletes the ledger's keys nothing references
//! (no minimum age: the branch is gone) and removes the ledger. A key another root references
//! (an inherited file, a published one) stays: that root's own clean decides about it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_fsview::naming::PARTITION_METADATA_PREFIX;
use arbor_fsview::parse_data_file_name;
use arbor_storage::{ObjectMeta, Storage, StorageError, StorageExt, MAX_DELETE_BATCH};
use arbor_table::read::TableReader;
use arbor_timeline::layout::branches::live_roots;
use arbor_timeline::InstantTime;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{CleanerError, Result};
use crate::protection::committed_files;

/// Where the ledgers of dropped branches live (table-level, beside the lock and commit state).
pub const DROPPED_DIR: &str = ".hoodie/.dropped";

/// The default minimum age of an orphan `arbor clean --orphans` deletes.
pub const DEFAULT_ORPHAN_MIN_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// One data file nothing references.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnreferencedFile {
    /// Its key relative to the table base (`partition/name`).
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its last modification time.
    pub last_modified: DateTime<Utc>,
}

/// What a reclaim did (or, for a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReclaimOutcome {
    /// The files deleted (or to delete), by key.
    pub files: Vec<UnreferencedFile>,
    /// Ledgers of dropped branches processed (and removed unless a dry run).
    pub ledgers: usize,
    /// Files younger than the minimum age that would otherwise be deleted (left for later).
    pub too_young: usize,
}

impl ReclaimOutcome {
    /// Bytes of [`ReclaimOutcome::files`].
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// A dropped branch's record: the keys its root listed when it was dropped.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DroppedLedger {
    /// The branch's name.
    pub branch: String,
    /// The branch's id (never reused).
    pub branch_id: String,
    /// When it was dropped.
    pub dropped_at: String,
    /// Every data file key the branch listed.
    pub files: Vec<String>,
}

/// What the live roots reference (module doc).
#[derive(Debug, Clone, Default)]
pub struct References {
    /// Keys listed as committed by some live root.
    pub listed: BTreeSet<String>,
    /// Requested times of every instant on some live root's timeline (any state).
    pub instants: BTreeSet<InstantTime>,
    /// Partitions some live root lists.
    pub partitions: BTreeSet<String>,
    /// True when some live root has a pending instant.
    pub pending: bool,
}

impl References {
    /// True when `key` (a data file, `partition/name`) is referenced.
    pub fn references(&self, key: &str) -> bool {
        if self.listed.contains(key) {
            return true;
        }
        let name = key.rsplit('/').next().unwrap_or(key);
        match parse_data_file_name(name, 0) {
            Ok(Some(d)) => self.instants.contains(d.instant_time()),
            // Not a data file name: never ours to delete.
            _ => true,
        }
    }
}

/// Everything the live roots of the table whose own storage is `storage` reference.
pub async fn references(storage: &Arc<dyn Storage>) -> Result<References> {
    let mut out = References::default();
    for root in live_roots(storage).await? {
        let view = root.view(storage.clone());
        let reader = TableReader::open_view(view).await?;
        out.listed
            .extend(committed_files(reader.view()).await?.into_keys());
        out.partitions
            .extend(reader.view().partitions().await?.iter().cloned());
        out.pending |= !reader.view().history().active().pending().is_empty();
        out.instants.extend(
            reader
                .view()
                .history()
                .instants()
                .map(|h| h.instant.requested_time.clone()),
        );
    }
    Ok(out)
}

/// The key of the ledger of dropped branch `branch_id`.
pub fn ledger_key(branch_id: &str) -> String {
    format!("{DROPPED_DIR}/{branch_id}.json")
}

/// Records the files a branch's root lists before the branch is dropped (the drop calls it
/// under the table lock, before removing anything; a retried drop overwrites it). `view` is the
/// branch's view storage.
pub async fn record_dropped(
    table_storage: &Arc<dyn Storage>,
    view: Arc<dyn Storage>,
    branch: &str,
    branch_id: &str,
) -> Result<usize> {
    let reader = TableReader::open_view(view).await?;
    let files: Vec<String> = committed_files(reader.view()).await?.into_keys().collect();
    let ledger = DroppedLedger {
        branch: branch.to_string(),
        branch_id: branch_id.to_string(),
        dropped_at: Utc::now().to_rfc3339(),
        files,
    };
    let count = ledger.files.len();
    let bytes = serde_json::to_vec(&ledger).map_err(|e| CleanerError::Corrupt {
        path: ledger_key(branch_id),
        reason: format!("cannot encode the ledger: {e}"),
    })?;
    table_storage
        .put(&ledger_key(branch_id), Bytes::from(bytes))
        .await?;
    Ok(count)
}

/// The ledgers of dropped branches, with their keys.
async fn ledgers(table_storage: &Arc<dyn Storage>) -> Result<Vec<(String, DroppedLedger)>> {
    let mut out = Vec::new();
    for meta in table_storage.list_all(DROPPED_DIR).await? {
        if !meta.key.ends_with(".json") {
            continue;
        }
        let Some((bytes, _)) = table_storage.get_opt(&meta.key).await? else {
            continue;
        };
        let ledger: DroppedLedger =
            serde_json::from_slice(&bytes).map_err(|e| CleanerError::Corrupt {
                path: meta.key.clone(),
                reason: format!("not a dropped-branch ledger: {e}"),
            })?;
        out.push((meta.key, ledger));
    }
    Ok(out)
}

/// Deletes (unless `dry_run`) the files of dropped branches' ledgers that nothing references,
/// then the ledgers. The caller holds the table lock. Keys that are already gone are skipped.
pub async fn reclaim_dropped(
    table_storage: &Arc<dyn Storage>,
    dry_run: bool,
) -> Result<ReclaimOutcome> {
    let found = ledgers(table_storage).await?;
    let mut outcome = ReclaimOutcome::default();
    if found.is_empty() {
        return Ok(outcome);
    }
    let refs = references(table_storage).await?;
    let mut seen = BTreeSet::new();
    for (_, ledger) in &found {
        for key in &ledger.files {
            if refs.references(key) || !seen.insert(key.clone()) {
                continue;
            }
            if let Some(meta) = head_opt(table_storage, key).await? {
                outcome.files.push(unreferenced(&meta));
            }
        }
    }
    outcome.ledgers = found.len();
    if dry_run {
        return Ok(outcome);
    }
    delete_files(table_storage, &outcome.files).await?;
    remove_emptied_partitions(table_storage, &refs, &outcome.files).await?;
    let keys: Vec<String> = found.into_iter().map(|(k, _)| k).collect();
    table_storage.delete_all(&keys).await?;
    tracing::info!(
        files = outcome.files.len(),
        bytes = outcome.bytes(),
        ledgers = outcome.ledgers,
        "reclaimed the files of dropped branches"
    );
    Ok(outcome)
}

/// The object's metadata, `None` when it is gone.
async fn head_opt(storage: &Arc<dyn Storage>, key: &str) -> Result<Option<ObjectMeta>> {
    match storage.head(key).await {
        Ok(m) => Ok(Some(m)),
        Err(StorageError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn unreferenced(meta: &ObjectMeta) -> UnreferencedFile {
    UnreferencedFile {
        key: meta.key.clone(),
        size: meta.size,
        last_modified: meta.last_modified,
    }
}

async fn delete_files(storage: &Arc<dyn Storage>, files: &[UnreferencedFile]) -> Result<()> {
    let keys: Vec<String> = files.iter().map(|f| f.key.clone()).collect();
    for chunk in keys.chunks(MAX_DELETE_BATCH) {
        storage.delete_all(chunk).await?;
    }
    Ok(())
}

/// Removes the partition markers of the partitions of `deleted` that no live root lists and
/// that hold nothing but markers now (a partition only a dropped branch wrote). Skipped while
/// any root has a pending instant: its writer may be creating that partition.
async fn remove_emptied_partitions(
    storage: &Arc<dyn Storage>,
    refs: &References,
    deleted: &[UnreferencedFile],
) -> Result<()> {
    if refs.pending {
        return Ok(());
    }
    let partitions: BTreeSet<&str> = deleted
        .iter()
        .filter_map(|f| f.key.rsplit_once('/').map(|(p, _)| p))
        .filter(|p| !refs.partitions.contains(*p))
        .collect();
    for p in partitions {
        let (objects, dirs) = storage.list_dir(p).await?;
        let only_markers = dirs.is_empty()
            && objects.iter().all(|o| {
                o.key
                    .rsplit('/')
                    .next()
                    .is_some_and(|n| n.starts_with(PARTITION_METADATA_PREFIX))
            });
        if only_markers && !objects.is_empty() {
            let keys: Vec<String> = objects.into_iter().map(|o| o.key).collect();
            storage.delete_all(&keys).await?;
        }
    }
    Ok(())
}

/// The bases of tables nested inside this one (`dir/` for every `dir/.hoodie/hoodie.properties`
/// below the base): their files are never considered.
fn nested_bases(listing: &[ObjectMeta]) -> Vec<String> {
    listing
        .iter()
        .filter_map(|m| m.key.strip_suffix(".hoodie/hoodie.properties"))
        .filter(|base| !base.is_empty())
        .map(str::to_string)
        .collect()
}

/// Every data file under the table base that nothing references (module doc), with the number
/// of such files younger than `min_age` (left out). Lists the whole table once.
pub async fn find_orphans(
    table_storage: &Arc<dyn Storage>,
    min_age: std::time::Duration,
    now: DateTime<Utc>,
) -> Result<(Vec<UnreferencedFile>, usize)> {
    let refs = references(table_storage).await?;
    let listing = table_storage.list_all("").await?;
    let nested = nested_bases(&listing);
    let min_age = chrono::Duration::from_std(min_age).unwrap_or(chrono::Duration::MAX);
    let mut out = Vec::new();
    let mut young = 0;
    for meta in &listing {
        let key = meta.key.as_str();
        if key.starts_with(".hoodie/")
            || key.contains("/.hoodie/")
            || nested.iter().any(|b| key.starts_with(b.as_str()))
        {
            continue;
        }
        let name = key.rsplit('/').next().unwrap_or(key);
        if !matches!(parse_data_file_name(name, meta.size), Ok(Some(_))) || refs.references(key) {
            continue;
        }
        if now.signed_duration_since(meta.last_modified) < min_age {
            young += 1;
            continue;
        }
        out.push(unreferenced(meta));
    }
    Ok((out, young))
}

/// Deletes (unless `dry_run`) every orphan older than `min_age` ([`find_orphans`]); dropped
/// branches' ledgers are processed too. The caller holds the table lock.
pub async fn reclaim_orphans(
    table_storage: &Arc<dyn Storage>,
    min_age: std::time::Duration,
    dry_run: bool,
) -> Result<ReclaimOutcome> {
    let (files, too_young) = find_orphans(table_storage, min_age, Utc::now()).await?;
    let dropped = ledgers(table_storage).await?;
    let outcome = ReclaimOutcome {
        files,
        ledgers: dropped.len(),
        too_young,
    };
    if dry_run {
        return Ok(outcome);
    }
    delete_files(table_storage, &outcome.files).await?;
    let refs = references(table_storage).await?;
    remove_emptied_partitions(table_storage, &refs, &outcome.files).await?;
    // The ledgers' unreferenced files are orphans of any age: reclaim them too.
    let ledger_part = reclaim_dropped(table_storage, false).await?;
    let mut merged: BTreeMap<String, UnreferencedFile> = outcome
        .files
        .into_iter()
        .map(|f| (f.key.clone(), f))
        .collect();
    for f in ledger_part.files {
        merged.entry(f.key.clone()).or_insert(f);
    }
    Ok(ReclaimOutcome {
        files: merged.into_values().collect(),
        ledgers: outcome.ledgers,
        too_young: outcome.too_young,
    })
}

/// [`reclaim_orphans`] under the table lock of `table` (any root's handle: orphans are
/// table-wide).
pub async fn clean_orphans(
    table: &arbor_table::Table,
    min_age: std::time::Duration,
    dry_run: bool,
) -> Result<ReclaimOutcome> {
    let storage = table.table_storage().clone();
    table
        .with_table_lock(async move { reclaim_orphans(&storage, min_age, dry_run).await })
        .await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_references_by_listing_or_instant_and_never_a_foreign_name() {
        let mut refs = References::default();
        refs.listed.insert(
            "p/0b3d0a3c-1111-4000-8000-000000000001-0_0-1-0_20260101000000000.parquet".into(),
        );
        refs.instants
            .insert(InstantTime::parse("20260102000000000").unwrap());
        assert!(refs.references(
            "p/0b3d0a3c-1111-4000-8000-000000000001-0_0-1-0_20260101000000000.parquet"
        ));
        assert!(refs.references(
            "p/0b3d0a3c-2222-4000-8000-000000000001-0_0-1-0_20260102000000000.parquet"
        ));
        assert!(!refs.references(
            "p/0b3d0a3c-3333-4000-8000-000000000001-0_0-1-0_20260103000000000.parquet"
        ));
        assert!(refs.references("p/.hoodie_partition_metadata"));
        assert!(refs.references("p/notes.txt"));
    }

    #[test]
    fn test_nested_bases_are_found_below_the_base_only() {
        let meta = |key: &str| ObjectMeta {
            key: key.to_string(),
            size: 1,
            last_modified: Utc::now(),
            version: Default::default(),
        };
        let listing = vec![
            meta(".hoodie/hoodie.properties"),
            meta("inner/t/.hoodie/hoodie.properties"),
            meta("p/a.parquet"),
        ];
        assert_eq!(nested_bases(&listing), vec!["inner/t/".to_string()]);
    }
}
