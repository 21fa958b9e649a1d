//! The requests and outcomes of clone operations.

use arbor_timeline::layout::PinRecord;
use arbor_timeline::InstantTime;

/// Which snapshot of a source a clone references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloneAt {
    /// Main's latest completed write.
    Main,
    /// The latest completed write of working branch `.0`.
    Branch(String),
    /// The instant of tag `.0` (of main, or of [`CloneRequest::tag_branch`]).
    Tag(String),
    /// A completed write of main (or of [`CloneRequest::tag_branch`]).
    Instant(InstantTime),
}

/// A clone to make.
#[derive(Debug, Clone)]
pub struct CloneRequest {
    /// The source table's location.
    pub source: String,
    /// The new table's location (empty, or holding an unfinished creation of the same clone).
    pub target: String,
    /// The snapshot to reference.
    pub at: CloneAt,
    /// The working branch whose tag or instant [`CloneAt::Tag`] / [`CloneAt::Instant`] names
    /// (`None`: main).
    pub tag_branch: Option<String>,
    /// Copy the snapshot's files too (a deep clone: self-contained, no pin remains).
    pub deep: bool,
}

/// What [`super::clone_table`] made.
#[derive(Debug, Clone)]
pub struct CloneOutcome {
    /// The clone's id (the name of its pins).
    pub id: String,
    /// The clone's location, normalized.
    pub location: String,
    /// The source's location, normalized.
    pub source: String,
    /// The source root the snapshot belongs to (`main` or a branch).
    pub root: String,
    /// How the snapshot was named (`tag:<t>`, `branch:<b>`, `instant:<i>`, `main`).
    pub reference: String,
    /// The referenced instant (the clone point).
    pub instant: InstantTime,
    /// True for a deep clone.
    pub deep: bool,
    /// True when an unfinished creation of this clone was resumed.
    pub resumed: bool,
    /// Objects written to the clone's metadata.
    pub metadata_objects: usize,
    /// Data files of the cloned snapshot (referenced; copied only by a deep clone).
    pub data_files: usize,
    /// Files copied (deep clone).
    pub files_copied: usize,
    /// Bytes copied (deep clone).
    pub bytes_copied: u64,
    /// True when the copy was server-side.
    pub server_side_copy: bool,
    /// The pins now held on sources for this clone (none after a deep clone).
    pub pins: Vec<PinRecord>,
}

/// What [`super::prune_pins`] did.
#[derive(Debug, Clone, Default)]
pub struct PruneOutcome {
    /// Pins removed: their location no longer holds their clone (or holds it detached).
    pub removed: Vec<PinRecord>,
    /// Pins kept: their clone is alive.
    pub kept: Vec<PinRecord>,
    /// Pins kept because their location could not be read, with the reason.
    pub unreachable: Vec<(PinRecord, String)>,
}

/// What [`super::detach_clone`] did.
#[derive(Debug, Clone, Default)]
pub struct DetachOutcome {
    /// The clone's id.
    pub id: String,
    /// Files copied into the clone's location.
    pub files_copied: usize,
    /// Bytes copied.
    pub bytes_copied: u64,
    /// True when the copy was server-side.
    pub server_side_copy: bool,
    /// Files the clone still listed that its source had already released and no snapshot the
    /// clone keeps reads.
    pub files_released: usize,
    /// The pins removed from sources.
    pub pins_removed: Vec<PinRecord>,
    /// True when the clone was already detached (only leftover pins were removed).
    pub already_detached: bool,
}
