//! [`MdtScopedListing`]: the FILES partition as a [`PartitionListing`] that reads only the
//! partitions it is asked about, for writers: a commit's cost must not grow with the number of
//! partitions and files of the table.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_fsview::{FsViewError, ListedFile, PartitionListing};
use async_trait::async_trait;

use crate::files::MetadataTable;
use crate::listing::MdtFilesListing;

/// A [`PartitionListing`] over a metadata table that answers
/// [`list_files`](PartitionListing::list_files) with the FILES records of that one partition
/// (and `__all_partitions__`), read with ranged HFile reads
/// ([`MetadataTable::files_listing_of`]), and
/// [`list_partitions`](PartitionListing::list_partitions) with the whole listing (read once,
/// when first asked: only operations over every partition ask).
///
/// Every answer equals [`MdtFilesListing`]'s over the same [`MetadataTable`]: both apply the
/// same per-key merge and the same partition rule to the same valid log blocks.
#[derive(Debug)]
pub struct MdtScopedListing {
    mdt: Arc<MetadataTable>,
    all: tokio::sync::OnceCell<MdtFilesListing>,
    /// Partitions read ahead by [`MdtScopedListing::prefetch`].
    fetched: std::sync::Mutex<BTreeMap<String, Vec<ListedFile>>>,
}

impl MdtScopedListing {
    /// A listing over `mdt` (nothing is read yet).
    pub fn new(mdt: Arc<MetadataTable>) -> Self {
        MdtScopedListing {
            mdt,
            all: tokio::sync::OnceCell::new(),
            fetched: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// Reads the FILES records of `partitions` in one pass (one ranged open of the base
    /// HFile, one lookup of every key, each log file read once), so that listing each of them
    /// afterwards reads nothing. A partition path that is not valid is left for
    /// [`PartitionListing::list_files`] to refuse.
    pub async fn prefetch(&self, partitions: &[&str]) -> crate::Result<()> {
        let valid: Vec<&str> = partitions
            .iter()
            .copied()
            .filter(|p| arbor_fsview::listing::validate_partition(p).is_ok())
            .collect();
        if valid.is_empty() {
            return Ok(());
        }
        let listing = self.mdt.files_listing_of(&valid).await?;
        let mut fetched = self
            .fetched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for p in valid {
            fetched.insert(p.to_string(), listed(listing.get(p)));
        }
        Ok(())
    }

    /// The metadata table it reads.
    pub fn metadata_table(&self) -> &Arc<MetadataTable> {
        &self.mdt
    }

    async fn whole(&self) -> Result<&MdtFilesListing, FsViewError> {
        self.all
            .get_or_try_init(|| async { MdtFilesListing::load(&self.mdt).await })
            .await
            .map_err(to_fsview(""))
    }
}

fn to_fsview(partition: &str) -> impl FnOnce(crate::MdtError) -> FsViewError + '_ {
    move |e| FsViewError::Listing {
        partition: partition.to_string(),
        source: Box::new(e),
    }
}

#[async_trait]
impl PartitionListing for MdtScopedListing {
    async fn list_partitions(&self) -> Result<Vec<String>, FsViewError> {
        self.whole().await?.list_partitions().await
    }

    async fn prefetch(&self, partitions: &[&str]) -> Result<(), FsViewError> {
        if self.all.get().is_some() {
            return Ok(());
        }
        MdtScopedListing::prefetch(self, partitions)
            .await
            .map_err(to_fsview(partitions.first().copied().unwrap_or_default()))
    }

    async fn list_files(&self, partition: &str) -> Result<Vec<ListedFile>, FsViewError> {
        arbor_fsview::listing::validate_partition(partition)?;
        if let Some(all) = self.all.get() {
            return all.list_files(partition).await;
        }
        let prefetched = self
            .fetched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(partition)
            .cloned();
        if let Some(files) = prefetched {
            return Ok(files);
        }
        let listing = self
            .mdt
            .files_listing_of(&[partition])
            .await
            .map_err(to_fsview(partition))?;
        Ok(listed(listing.get(partition)))
    }
}

fn listed(files: Option<&BTreeMap<String, u64>>) -> Vec<ListedFile> {
    files
        .map(|files| {
            files
                .iter()
                .map(|(name, size)| ListedFile {
                    name: name.clone(),
                    size: *size,
                })
                .collect()
        })
        .unwrap_or_default()
}
