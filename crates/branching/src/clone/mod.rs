//! Shallow and deep clones (the Lance design on Hudi; `docs/clones.md`).
//!
//! A shallow clone is a new table at another location whose metadata is a source's at one
//! instant and whose files it did not write are read from the source
//! (`arbor_timeline::layout::ClonedStorage`). The source pins what the clone references with a
//! savepoint pair and a pin record (`.hoodie/.clones/<id>.json`), so every clean, TTL run,
//! archival and restore of the source (and Java's cleaner) keeps it.
//!
//! - [`clone_table`] ([`create`]): shallow or deep clone of a root at a tag, an instant or a
//!   branch head;
//! - [`list_pins`], [`forget_pin`], [`prune_pins`] ([`pins`]): the source's side;
//! - [`detach_clone`] ([`detach`]): make a clone self-contained and release its pins;
//! - [`deep`]: the last step of a deep clone (the clone detached right after activation).
//!
//! Building blocks (crate-private): `source` ("open source + resolve instant"), `pin_ops` ("pin
//! one source under its lock", "remove a pin and release its savepoint when unneeded, under the
//! source lock"), `copy_meta` (the clone's metadata); for detach and deep clones `copy_files`
//! (the file copy, server-side under a shared root), `detach_files` (the files a clone still
//! reads from its sources) and `detach_pins` (removing a detached clone's pins).

mod copy_files;
mod copy_meta;
pub mod create;
pub mod deep;
pub mod detach;
mod detach_files;
mod detach_pins;
pub(crate) mod pin_ops;
pub mod pins;
pub(crate) mod source;
pub mod types;

pub use create::clone_table;
pub use detach::detach_clone;
pub use pins::{abandoned_pins, forget_pin, list_pins, prune_pins};
pub use types::{CloneAt, CloneOutcome, CloneRequest, DetachOutcome, PruneOutcome};
