//! [`MdtFilesListing`]: the FILES partition as a [`PartitionListing`], so the data table's
//! file-system view lists through the MDT instead of listing directories.

use std::sync::Arc;

use arbor_fsview::{FsViewError, ListedFile, PartitionListing};
use async_trait::async_trait;

use crate::files::{FilesListing, MetadataTable};

/// A [`PartitionListing`] answered from a FILES listing computed once, when the listing is
/// made ([`MdtFilesListing::load`]). It reflects every MDT deltacommit valid at that moment
/// (spec §6.5), which includes every completed data instant; files of pending data instants may
/// be absent (the view would filter them anyway). No storage LIST call is made while answering.
#[derive(Debug, Clone)]
pub struct MdtFilesListing {
    listing: Arc<FilesListing>,
}

impl MdtFilesListing {
    /// Computes the FILES listing of `mdt`.
    pub async fn load(mdt: &MetadataTable) -> crate::Result<Self> {
        Ok(MdtFilesListing {
            listing: Arc::new(mdt.files_listing().await?),
        })
    }

    /// A listing over an already computed FILES listing.
    pub fn from_listing(listing: FilesListing) -> Self {
        MdtFilesListing {
            listing: Arc::new(listing),
        }
    }

    /// The FILES listing: partition -> file name -> size.
    pub fn files(&self) -> &FilesListing {
        &self.listing
    }
}

#[async_trait]
impl PartitionListing for MdtFilesListing {
    async fn list_partitions(&self) -> Result<Vec<String>, FsViewError> {
        let mut out: Vec<String> = self.listing.keys().cloned().collect();
        if out.is_empty() {
            out.push(String::new());
        }
        Ok(out)
    }

    async fn list_files(&self, partition: &str) -> Result<Vec<ListedFile>, FsViewError> {
        arbor_fsview::listing::validate_partition(partition)?;
        Ok(self
            .listing
            .get(partition)
            .map(|files| {
                files
                    .iter()
                    .map(|(name, size)| ListedFile {
                        name: name.clone(),
                        size: *size,
                    })
                    .collect()
            })
            .unwrap_or_default())
    }
}
