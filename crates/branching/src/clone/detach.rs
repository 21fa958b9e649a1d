//! Detaching a clone: making it self-contained, then releasing its pins (`docs/clones.md`).
//!
//! The order, every prefix safe:
//! 1. the clone's descriptor must be `Active` (`Detached`: only steps 3 and 5 are left; `Creating`:
//!    refused, the creation must finish first);
//! 2. every file the clone still reads from a source (`detach_files`) is copied into
//!    its own location (`copy_files`: server-side where the backend allows); files
//!    already there with the source's size are skipped, so a rerun resumes. A listed file its
//!    source no longer holds is an error ([`BranchingError::DetachMissing`]) when a snapshot
//!    the clone keeps reads it, else it was released by the source's clean and is counted;
//! 3. the guard against Hudi readers unaware of clones is removed from the clone's root
//!    `hoodie.properties` (`arbor_timeline::layout::clone_guard`): the clone's own location
//!    now holds every file it reads, so those readers read it whole;
//! 4. the descriptor is swapped `Active` -> `Detached` (compare-and-swap): from here every
//!    reader, hudi-rs included, reads the clone from its own location alone;
//! 5. the clone's pins are removed from every source (`detach_pins`, with `pin_ops`).
//!
//! Until step 4 the clone is an intact shallow clone (it only gained copies of files it reads
//! from its sources, which the rule still reads from the sources, and lost the guard once
//! those copies made it readable without them); the sources keep their pins until step 5.

use std::sync::Arc;

use arbor_storage::{Storage, StorageError};
use arbor_timeline::layout::paths::PARTITION_MARKER;
use arbor_timeline::layout::{
    normalize_location, unguard_location, CloneDescriptor, CloneState, ClonedStorage, Home,
    LocationOpener,
};
use arbor_timeline::TimelineError;

use super::copy_files::{head_size, FileCopier};
use super::detach_files::{markers, referenced_files};
use super::detach_pins::remove_pins;
use super::types::DetachOutcome;
use crate::error::{BranchingError, Result};

/// Makes the clone at `clone` (a location) self-contained and removes its pins from its
/// sources (see the module doc for the order).
///
/// Guarantees: on success the clone's descriptor is `Detached`, its own location holds every
/// file a live root of it lists or a snapshot it keeps reads, and no source holds a pin of it
/// (nor the savepoints only its pins held). On any failure the clone reads as before (a shallow
/// clone, or detached once step 3 is done) and the sources as before (their pins at most
/// removed); running it again completes it. A clone already detached only has leftover pins
/// removed ([`DetachOutcome::already_detached`]).
///
/// Errors: a location that is not a clone (`Refused`), a clone still being created (`Refused`:
/// finish the `arbor clone` first), a file a kept snapshot reads missing from its source
/// ([`BranchingError::DetachMissing`]), a source that cannot be opened, storage failures.
pub async fn detach_clone(opener: &dyn LocationOpener, clone: &str) -> Result<DetachOutcome> {
    let location = normalize_location(clone)?;
    let own = opener.open(&location)?;
    detach_at(opener, &location, own).await
}

/// [`detach_clone`] on the clone at normalized `location` whose own (raw) storage is `own`.
pub(crate) async fn detach_at(
    opener: &dyn LocationOpener,
    location: &str,
    own: Arc<dyn Storage>,
) -> Result<DetachOutcome> {
    let operation = || format!("detach {location}");
    let Some((descriptor, version)) = CloneDescriptor::load(own.as_ref()).await? else {
        return Err(BranchingError::refused(
            operation(),
            "the location is not a clone (it holds no .hoodie/clone.json)",
        ));
    };
    let mut out = DetachOutcome {
        id: descriptor.id.clone(),
        ..DetachOutcome::default()
    };
    match descriptor.state {
        CloneState::Creating => {
            return Err(BranchingError::refused(
                operation(),
                format!(
                    "clone {} is still being created: run the same `arbor clone` again to \
                     finish it, then detach",
                    descriptor.id
                ),
            ))
        }
        CloneState::Detached => {
            out.already_detached = true;
            unguard_location(own.as_ref()).await?;
            out.pins_removed = remove_pins(opener, location, &descriptor).await?;
            return Ok(out);
        }
        CloneState::Active => {}
    }
    copy_referenced(opener, location, own.clone(), &descriptor, &mut out).await?;
    unguard_location(own.as_ref()).await?;
    let mut detached = descriptor.clone();
    detached.state = CloneState::Detached;
    match detached.replace(own.as_ref(), &version).await {
        Ok(_) => {}
        Err(TimelineError::Storage(StorageError::PreconditionFailed { .. })) => {
            // Changed since it was read: fine only when a concurrent detach finished first.
            let now = CloneDescriptor::load(own.as_ref()).await?;
            if !now.is_some_and(|(d, _)| d.id == descriptor.id && d.state == CloneState::Detached) {
                return Err(BranchingError::refused(
                    operation(),
                    format!(
                        "{} changed while the files were copied: run the detach again",
                        arbor_timeline::layout::CLONE_FILE
                    ),
                ));
            }
        }
        Err(e) => return Err(e.into()),
    }
    out.pins_removed = remove_pins(opener, location, &descriptor).await?;
    Ok(out)
}

/// Detach step 2: copies every file the active clone `descriptor` still reads from a source
/// into `own`, counting into `out`.
async fn copy_referenced(
    opener: &dyn LocationOpener,
    location: &str,
    own: Arc<dyn Storage>,
    descriptor: &CloneDescriptor,
    out: &mut DetachOutcome,
) -> Result<()> {
    let mut sources = Vec::with_capacity(descriptor.sources.len());
    let mut copiers = Vec::with_capacity(descriptor.sources.len());
    for s in &descriptor.sources {
        let storage = opener
            .open(&s.location)
            .map_err(|e| TimelineError::CloneSource {
                location: s.location.clone(),
                reason: e.to_string(),
            })?;
        copiers.push(FileCopier::new(
            opener,
            &s.location,
            storage.clone(),
            location,
            own.clone(),
        ));
        sources.push((s.clone(), storage));
    }
    let cloned = ClonedStorage::new(own.clone(), sources)?;
    let files = referenced_files(&cloned).await?;
    let ctx = CopyCtx {
        own: own.as_ref(),
        cloned: &cloned,
        copiers: &copiers,
        location,
        descriptor,
    };
    for key in &files.data {
        if !ctx.copy_one(key, out).await? && files.kept.contains(key) {
            return Err(ctx.missing(key));
        }
    }
    for key in &files.mdt {
        // Listed a moment ago: gone only when the source's metadata-table clean removed it.
        ctx.copy_one(key, out).await?;
    }
    for partition in &files.partitions {
        copy_markers(own.as_ref(), &copiers, partition, out).await?;
    }
    Ok(())
}

/// Makes the clone's own location hold the partition marker of `partition` when only a source
/// has one: the plain `.hoodie_partition_metadata` is looked up by key (no listing); the
/// base-format variants (`.hoodie_partition_metadata.parquet`, ...) by listing the partition,
/// only when no location holds the plain one.
async fn copy_markers(
    own: &dyn Storage,
    copiers: &[FileCopier],
    partition: &str,
    out: &mut DetachOutcome,
) -> Result<()> {
    let plain = arbor_fsview::slice::join(partition, PARTITION_MARKER);
    if head_size(own, &plain).await?.is_some() {
        return Ok(());
    }
    for copier in copiers {
        if let Some(size) = copier.source_size(&plain).await? {
            out.bytes_copied += copier.copy(&plain, size).await?;
            out.files_copied += 1;
            out.server_side_copy |= copier.server_side();
            return Ok(());
        }
    }
    if !markers(own, partition).await?.is_empty() {
        return Ok(());
    }
    for copier in copiers {
        let keys = markers(copier.source_storage(), partition).await?;
        if keys.is_empty() {
            continue;
        }
        for key in keys {
            if let Some(size) = copier.source_size(&key).await? {
                out.bytes_copied += copier.copy(&key, size).await?;
                out.files_copied += 1;
                out.server_side_copy |= copier.server_side();
            }
        }
        break;
    }
    Ok(())
}

/// What copying one key needs.
struct CopyCtx<'a> {
    own: &'a dyn Storage,
    cloned: &'a ClonedStorage,
    copiers: &'a [FileCopier],
    location: &'a str,
    descriptor: &'a CloneDescriptor,
}

impl CopyCtx<'_> {
    /// Makes the clone's own location hold `key` from the source the rule names (searched
    /// keys: the nearest source holding it). Returns false when no candidate source holds it
    /// (and the clone's own location does not either): released, counted in `out`.
    async fn copy_one(&self, key: &str, out: &mut DetachOutcome) -> Result<bool> {
        let candidates: Vec<&FileCopier> = match self.cloned.home(key) {
            Home::Own => return Ok(true),
            Home::Source(i) => self.copiers.get(i).into_iter().collect(),
            Home::Search => self.copiers.iter().collect(),
        };
        let own_size = head_size(self.own, key).await?;
        for copier in candidates {
            let Some(size) = copier.source_size(key).await? else {
                continue;
            };
            if own_size == Some(size) {
                return Ok(true);
            }
            out.bytes_copied += copier.copy(key, size).await?;
            out.files_copied += 1;
            out.server_side_copy |= copier.server_side();
            return Ok(true);
        }
        if own_size.is_some() {
            // Copied by an earlier run, released by the source since.
            return Ok(true);
        }
        out.files_released += 1;
        Ok(false)
    }

    fn missing(&self, key: &str) -> BranchingError {
        let source_location = match self.cloned.home(key) {
            Home::Source(i) => self.descriptor.sources.get(i),
            _ => self.descriptor.sources.first(),
        }
        .map(|s| s.location.clone())
        .unwrap_or_default();
        BranchingError::DetachMissing {
            location: self.location.to_string(),
            key: key.to_string(),
            source_location,
        }
    }
}
