//! `arbor-mdt`: the Hudi metadata table (a merge-on-read table under `.hoodie/metadata`).
//!
//! Implemented so far (issue 4, first slice): a read-only [`MetadataTable`] that opens the MDT
//! and computes the FILES partition's listing ([`MetadataTable::files_listing`]) the way Hudi
//! does (spec §6). The record index and secondary index are not implemented.

mod error;
mod files;

pub use error::{MdtError, Result};
pub use files::{
    FilesListing, MetadataTable, ALL_PARTITIONS_KEY, FILES_PARTITION, MDT_BASE, NON_PARTITIONED_KEY,
};
