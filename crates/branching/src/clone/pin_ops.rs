//! The two locked steps on a source's side of a clone: "pin one source under its lock"
//! ([`pin_source`]) and "remove a pin (and release its savepoint when unneeded) under the source
//! lock" ([`unpin_source`]). Creation, `forget`, `prune`, detach and deep clones use them.
//!
//! A pin is a savepoint pair at the pinned instant on the pinned root (the protection every
//! clean, TTL run, archival and restore honours, Java's cleaner included) plus the pin record
//! `.hoodie/.clones/<id>.json` naming the clone. Pinning writes the record first and the
//! savepoint after it, both before the clone is activated (nothing reads through a pin before
//! that), so a crash leaves a record whose savepoint may be missing or unfinished: the retry
//! finishes it, and `prune`/`forget` (removing the record, then whatever savepoint files exist
//! at its instant) leave nothing behind. Unpinning deletes the record first, then the savepoint
//! unless another pin or a tag still names the instant.

use std::sync::Arc;

use arbor_cleaner::savepoint::{
    create_savepoint_locked, delete_savepoint_locked, savepoint_holders,
};
use arbor_cleaner::CleanerError;
use arbor_storage::{Storage, StorageError, StorageExt};
use arbor_table::Table;
use arbor_timeline::layout::{open_location, pin_key, LocationOpener, PinRecord};
use arbor_timeline::{Action, ActiveTimeline};

use super::source::open_root;
use crate::error::{BranchingError, Result};
use crate::pending::blocking_pending;
use crate::roots::put_once;

/// Pins `pin.instant` on root `pin.root` of the table at `source` for clone `pin.clone_id`, in
/// one locked step of that table: the pin record is written create-if-absent (an identical
/// existing record is a resumed pin: fine), then the savepoint pair at the instant is created
/// unless it exists (a tag's or another pin's is shared). The caller activates the clone only
/// after this returned.
///
/// Refused, nothing written: the instant is not a completed write of the root, pending
/// instants could change its snapshot, or a file of its snapshot has already been cleaned (the
/// snapshot can no longer be protected whole: the clone must not be made).
pub(crate) async fn pin_source(
    opener: &dyn LocationOpener,
    source: &str,
    pin: &PinRecord,
) -> Result<()> {
    let storage = open_location(source, opener).await?;
    let table = open_root(&storage, &pin.root).await?;
    let time = pin.instant_time()?;
    let bytes = pin.to_bytes()?;
    table
        .transact(|txn| async move {
            let table = txn.table();
            let view = table.view_storage();
            let tl = ActiveTimeline::load(view.clone(), table.layout().clone()).await?;
            let saved = tl
                .get(&time, Action::Savepoint)
                .is_some_and(|f| f.completed.is_some());
            if saved {
                put_once(table.table_storage(), &pin_key(&pin.clone_id), bytes).await?;
                return Ok(());
            }
            let op = format!("pin {time} of {source} for clone {}", pin.clone_id);
            let blocking = blocking_pending(&tl, Some(&time));
            if !blocking.is_empty() {
                return Err(BranchingError::refused(
                    op,
                    format!(
                        "pending instants could change the snapshot: {}; let them finish \
                         (or roll them back) and clone again",
                        blocking.join(", ")
                    ),
                ));
            }
            put_once(table.table_storage(), &pin_key(&pin.clone_id), bytes).await?;
            let comment = format!("clone {}", pin.clone_id);
            match create_savepoint_locked(table, Some(&time), &comment).await {
                Ok(_) => Ok(()),
                Err(e @ CleanerError::Refused { .. }) => {
                    // Refused before writing any savepoint file: the record goes too.
                    delete_record(table.table_storage(), &pin.clone_id).await?;
                    Err(e.into())
                }
                Err(e) => Err(e.into()),
            }
        })
        .await
}

/// Removes the pin of clone `pin.clone_id` from the table at `source` in one locked step: the
/// record is deleted first (absent is fine: a retry), then the savepoint pair at its instant on
/// its root is released unless another pin or a tag of that root still names the instant.
/// Returns true when the savepoint was released.
pub(crate) async fn unpin_source(
    opener: &dyn LocationOpener,
    source: &str,
    pin: &PinRecord,
) -> Result<bool> {
    let storage = open_location(source, opener).await?;
    unpin_in(&storage, pin).await
}

/// [`unpin_source`] on an opened source table.
pub(crate) async fn unpin_in(storage: &Arc<dyn Storage>, pin: &PinRecord) -> Result<bool> {
    let table = match open_root(storage, &pin.root).await {
        Ok(t) => Some(t),
        // The pinned branch was dropped (only possible with the pin forced away earlier):
        // its savepoint went with it; only the record is left.
        Err(BranchingError::BranchNotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    let Some(table) = table else {
        delete_record(storage, &pin.clone_id).await?;
        return Ok(false);
    };
    let time = pin.instant_time()?;
    table
        .transact(|txn| async move {
            let table: &Table = txn.table();
            delete_record(table.table_storage(), &pin.clone_id).await?;
            if !savepoint_holders(table, &time).await?.is_empty() {
                return Ok(false);
            }
            // Whatever savepoint files exist at the instant, on either timeline (an interrupted
            // pin may have left only some); "no such savepoint" is the only refusal left here.
            match delete_savepoint_locked(table, &time).await {
                Ok(()) => Ok(true),
                Err(CleanerError::Refused { .. }) => Ok(false),
                Err(e) => Err(e.into()),
            }
        })
        .await
}

/// Deletes the pin record of `clone_id` (absent is fine).
async fn delete_record(storage: &Arc<dyn Storage>, clone_id: &str) -> Result<()> {
    match storage.delete(&pin_key(clone_id)).await {
        Ok(()) | Err(StorageError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
