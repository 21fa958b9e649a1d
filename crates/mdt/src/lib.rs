//! `arbor-mdt`: the Hudi metadata table (a merge-on-read table under `.hoodie/metadata`).
//!
//! - [`MetadataTable`] opens the MDT and computes the FILES partition's listing
//!   ([`MetadataTable::files_listing`]) the way Hudi does (spec §6), using only the log blocks
//!   of valid instants ([`validity`]).
//! - [`MdtFilesListing`] serves that listing as an `arbor_fsview::PartitionListing`.
//! - [`MdtWriter`] creates the MDT and records each data instant's file changes as an MDT
//!   deltacommit with the same instant time, completed before the data instant.
//! - [`validate`] compares the FILES partition with a directory listing.
//!
//! The record index and secondary index are not implemented yet.

pub mod compaction;
mod error;
mod files;
mod listing;
pub mod validate;
pub mod validity;
mod writer;

pub use error::{MdtError, Result};
pub use files::{
    FilesListing, MetadataTable, ALL_PARTITIONS_KEY, FILES_PARTITION, MDT_BASE, MDT_META_DIR,
    NON_PARTITIONED_KEY,
};
pub use listing::MdtFilesListing;
pub use writer::{metadata_table_config, FilesDelta, MdtWriter, FILES_FILE_ID};
