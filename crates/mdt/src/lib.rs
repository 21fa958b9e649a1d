//! `arbor-mdt`: the Hudi metadata table (a merge-on-read table under `.hoodie/metadata`).
//!
//! - [`MetadataTable`] opens the MDT and computes the FILES partition's listing
//!   ([`MetadataTable::files_listing`]) the way Hudi does (spec §6), using only the log blocks
//!   of valid instants ([`validity`]).
//! - [`MdtFilesListing`] serves that listing as an `arbor_fsview::PartitionListing`.
//! - [`MdtWriter`] creates the MDT and records each data instant's file changes as an MDT
//!   deltacommit with the same instant time, completed before the data instant.
//! - [`validate`] compares the FILES partition with a directory listing.
//! - [`record_index`] and [`secondary_index`] read the RECORD_INDEX and SECONDARY_INDEX
//!   partitions (whole or by key lookup) and `.hoodie/.index_defs/index.json`;
//!   [`index_writer`] writes the RECORD_INDEX partition.
//! - [`column_stats`] reads the COLUMN_STATS and PARTITION_STATS partitions, merged as Hudi
//!   merges them; [`column_stats_compute`] computes them from data files as Hudi does.
//!   [`column_stats_writer`] writes them.
//! - [`compaction`] compacts the FILES partition into a new base HFile.
//! - [`clean`] removes the MDT's own superseded file slices after its compaction, keeping what
//!   any root, tag, savepoint, clone pin or pending instant needs ([`clean_needs`]).

pub mod clean;
pub mod clean_needs;
pub mod column_stats;
pub mod column_stats_compute;
pub mod column_stats_validate;
pub mod column_stats_writer;
pub mod compaction;
mod error;
mod files;
mod files_delta;
pub mod index_writer;
mod listing;
pub mod record_index;
mod scoped_listing;
pub mod secondary_index;
pub mod secondary_index_writer;
pub mod validate;
pub mod validity;
mod writer;

pub use error::{MdtError, Result};
pub use files::{
    FilesListing, MetadataTable, ALL_PARTITIONS_KEY, FILES_PARTITION, MDT_BASE, MDT_META_DIR,
    NON_PARTITIONED_KEY,
};
pub use listing::MdtFilesListing;
pub use record_index::{lookup_record_index, read_record_index, RecordIndexEntry};
pub use scoped_listing::MdtScopedListing;
pub use secondary_index::{
    read_secondary_index, secondary_lookup, IndexDefinition, IndexDefinitions, SecondaryIndex,
};
pub use writer::{metadata_table_config, FilesDelta, MdtWriter, FILES_FILE_ID};
