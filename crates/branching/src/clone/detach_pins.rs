//! Removing a detached clone's pins from its sources (detach step 4).
//!
//! For each source the descriptor lists, under that source table's lock (the table of the
//! pin's root): the pin's savepoint pair is released unless another pin or a tag of that root
//! names the same instant, then the pin record is deleted. The savepoint goes first so that a
//! crash in between leaves the pin record, which the rerun finds and finishes (the clone no
//! longer reads the source's files, so the savepoint's loss is harmless); a pin record is
//! never deleted while it is the only trace of a savepoint it holds.

use std::sync::Arc;

use arbor_cleaner::savepoint::{delete_savepoint_locked, tags_naming};
use arbor_storage::{Storage, StorageExt};
use arbor_table::Table;
use arbor_timeline::layout::paths::{properties_key, MDT_META_DIR};
use arbor_timeline::layout::{open_location, pin_key, CloneDescriptor, LocationOpener, PinRecord};
use arbor_timeline::{Action, ActiveTimeline, InstantTime, TableConfig, TableLayout};

use crate::error::{BranchingError, Result};
use crate::roots::open_table;

/// Removes clone `descriptor`'s pin from every source it lists (see the module doc). Returns
/// the pins removed (none for a source that holds none any more).
pub(crate) async fn remove_pins(
    opener: &dyn LocationOpener,
    descriptor: &CloneDescriptor,
) -> Result<Vec<PinRecord>> {
    let mut out = Vec::new();
    for source in &descriptor.sources {
        let storage = open_location(&source.location, opener).await?;
        if let Some(pin) = remove_pin(storage, &descriptor.id).await? {
            out.push(pin);
        }
    }
    Ok(out)
}

/// Removes the pin of clone `id` from the table at `storage` (any table, a clone itself
/// included), with its savepoint pair unless another pin or a tag names its instant. `None`
/// when the table holds no such pin.
pub(crate) async fn remove_pin(storage: Arc<dyn Storage>, id: &str) -> Result<Option<PinRecord>> {
    let key = pin_key(id);
    let Some((bytes, _)) = storage.get_opt(&key).await? else {
        return Ok(None);
    };
    let pin = PinRecord::from_bytes(&key, &bytes)?;
    let table = match open_table(storage.clone(), Some(&pin.root)).await {
        Ok(t) => t,
        // The pinned branch is gone (dropped outside arbor's checks): nothing holds a
        // savepoint there any more; the record alone remains.
        Err(BranchingError::BranchNotFound { .. }) => {
            storage.delete(&key).await?;
            return Ok(Some(pin));
        }
        Err(e) => return Err(e),
    };
    table
        .with_table_lock(remove_locked(&table, &storage, id))
        .await
}

async fn remove_locked(
    table: &Table,
    storage: &Arc<dyn Storage>,
    id: &str,
) -> Result<Option<PinRecord>> {
    let key = pin_key(id);
    let Some((bytes, _)) = storage.get_opt(&key).await? else {
        return Ok(None);
    };
    let pin = PinRecord::from_bytes(&key, &bytes)?;
    let instant = pin.instant_time()?;
    let others = PinRecord::list(storage.as_ref())
        .await?
        .into_iter()
        .any(|p| p.clone_id != pin.clone_id && p.root == pin.root && p.instant == pin.instant);
    let view = table.view_storage();
    if !others
        && tags_naming(view, &instant).await?.is_empty()
        && has_savepoint(table, &instant).await?
    {
        delete_savepoint_locked(table, &instant).await?;
    }
    storage.delete(&key).await?;
    Ok(Some(pin))
}

/// True when the data or the metadata table timeline of `table`'s root holds a savepoint at
/// `instant` (either side: an interrupted release may have removed one side only).
async fn has_savepoint(table: &Table, instant: &InstantTime) -> Result<bool> {
    let view = table.view_storage();
    let mut layouts = vec![table.layout().clone()];
    if view.exists(&properties_key(MDT_META_DIR)).await? {
        let config = TableConfig::load(view.as_ref(), MDT_META_DIR).await?;
        layouts.push(TableLayout::from_config(MDT_META_DIR, &config)?);
    }
    for layout in layouts {
        let tl = ActiveTimeline::load(view.clone(), layout).await?;
        if tl.get(instant, Action::Savepoint).is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}
