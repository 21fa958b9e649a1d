//! `arbor-fsview`: the file-system view of a Hudi table.
//!
//! - [`naming`]: the file model's names: [`BaseFile`], [`LogFile`], parsed and rendered;
//! - [`slice`]: [`FileSlice`] and [`FileGroup`], and the rule that attaches log files to slices
//!   (by completion time for table version 8+, by base instant for version 6);
//! - [`listing`]: the [`PartitionListing`] trait (where file lists come from) and
//!   [`StorageListing`], its directory-listing implementation;
//! - [`visibility`]: what the timeline says about files: the committed rule, replaced file
//!   groups, pending compaction and clustering ([`TimelineIndex`], [`Horizon`]);
//! - [`view`]: [`FileSystemView`]: latest slices as of any instant, incremental ranges, cached
//!   listings refreshed incrementally.
//!
//! The crate never reads or writes file contents; all I/O goes through
//! [`arbor_storage::Storage`] (timeline) and a [`PartitionListing`] (data file names).

mod error;
pub mod listing;
pub mod naming;
pub mod slice;
pub mod view;
pub mod visibility;

pub use error::{FsViewError, Result};
pub use listing::{ListedFile, PartitionListing, StorageListing};
pub use naming::{parse_data_file_name, BaseFile, DataFile, LogFile};
pub use slice::{FileGroup, FileSlice, LogAttachRule};
pub use view::writes::WriteTouch;
pub use view::{FileSystemView, IncrementalSlices, Invalidated, RefreshOutcome};
pub use visibility::{Horizon, PendingCompactionOperation, Replacement, TimelineIndex};
