//! The archived (LSM) timeline under `<meta>/timeline/history/` and the archiver.
//!
//! Layout (Java's `LSMTimeline`): parquet data files `<min>_<max>_<level>.parquet` whose rows are
//! `HoodieLSMTimelineInstant` records ([`lsm_file`]), `manifest_<N>` snapshots listing the valid
//! data files and `_version_` naming the current snapshot ([`manifest`]).
//!
//! - [`ArchivedTimeline`]: the archived instants of the current snapshot;
//! - [`TimelineHistory`]: active and archived timeline together, every instant once;
//! - [`Archiver`]: moves old completed instants from the active timeline into the archive,
//!   crash-safely, and compacts the LSM tree.

pub mod archiver;
pub mod history;
pub mod lsm_file;
pub mod manifest;
pub mod reader;

pub use archiver::{metadata_table_meta_dir, ArchivalPolicy, ArchiveOutcome, Archiver};
pub use history::{HistoryInstant, InstantLocation, TimelineHistory};
pub use lsm_file::{read_lsm_file, write_lsm_file, LsmFileName, LsmInstantRow};
pub use manifest::{Manifest, ManifestEntry, Snapshot};
pub use reader::{ArchivedInstant, ArchivedTimeline};
