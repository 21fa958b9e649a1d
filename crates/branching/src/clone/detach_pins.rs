//! Removing a detached clone's pins from its sources (detach step 4), with `pin_ops`'
//! building block: under each source table's lock, the pin record is deleted, then the
//! savepoint pair at its instant is released unless another pin or a tag of that root names
//! it.
//!
//! The pin to remove is rebuilt from the clone's descriptor (its id, and each source's root and
//! instant), not only read from the source: a crash between the record's deletion and the
//! savepoint's release leaves no record, and the rerun must still release the savepoint.

use arbor_storage::StorageExt;
use arbor_timeline::layout::{
    open_location, pin_key, CloneDescriptor, CloneSource, LocationOpener, PinRecord,
};

use super::pin_ops::unpin_in;
use crate::error::Result;

/// Removes clone `descriptor`'s pin from every source it lists, and the savepoint pairs only
/// those pins held. Returns the pin records removed (none for a source that holds none any
/// more: an earlier run removed it).
pub(crate) async fn remove_pins(
    opener: &dyn LocationOpener,
    location: &str,
    descriptor: &CloneDescriptor,
) -> Result<Vec<PinRecord>> {
    let mut out = Vec::new();
    for source in &descriptor.sources {
        let storage = open_location(&source.location, opener).await?;
        let key = pin_key(&descriptor.id);
        let record = match storage.get_opt(&key).await? {
            Some((bytes, _)) => Some(PinRecord::from_bytes(&key, &bytes)?),
            None => None,
        };
        let pin = record
            .clone()
            .unwrap_or_else(|| rebuilt(location, &descriptor.id, source));
        unpin_in(&storage, &pin).await?;
        out.extend(record);
    }
    Ok(out)
}

/// The pin clone `id` at `location` holds on `source`, as creation wrote it (but `created`).
fn rebuilt(location: &str, id: &str, source: &CloneSource) -> PinRecord {
    PinRecord {
        clone_id: id.to_string(),
        location: location.to_string(),
        instant: source.instant.clone(),
        root: source.root.clone(),
        reference: source.reference.clone(),
        created: String::new(),
    }
}
