//! Validation of the FILES partition against a directory listing (`arbor validate`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use arbor_fsview::{parse_data_file_name, FileSystemView, PartitionListing, StorageListing};
use arbor_storage::Storage;

use crate::error::Result;
use crate::files::FilesListing;

/// One way the FILES partition disagrees with storage.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum FilesDiscrepancy {
    /// A committed data file is on storage but the FILES partition does not list it (readers
    /// that list through the MDT would miss its rows).
    MissingFromMdt {
        /// The data partition (`""` for non-partitioned).
        partition: String,
        /// The file name.
        file: String,
    },
    /// The FILES partition lists a committed data file that storage does not have (readers
    /// that list through the MDT would fail opening it).
    MissingFromStorage {
        /// The data partition.
        partition: String,
        /// The file name.
        file: String,
    },
    /// Both have the file, with different sizes.
    SizeMismatch {
        /// The data partition.
        partition: String,
        /// The file name.
        file: String,
        /// Size the FILES partition records.
        mdt: u64,
        /// Size on storage.
        storage: u64,
    },
}

impl fmt::Display for FilesDiscrepancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |p: &str, n: &str| {
            if p.is_empty() {
                n.to_string()
            } else {
                format!("{p}/{n}")
            }
        };
        match self {
            FilesDiscrepancy::MissingFromMdt { partition, file } => {
                write!(
                    f,
                    "files: {} is committed on storage but missing from the metadata table",
                    at(partition, file)
                )
            }
            FilesDiscrepancy::MissingFromStorage { partition, file } => {
                write!(
                    f,
                    "files: {} is listed by the metadata table but missing from storage",
                    at(partition, file)
                )
            }
            FilesDiscrepancy::SizeMismatch {
                partition,
                file,
                mdt,
                storage,
            } => write!(
                f,
                "files: {} has size {mdt} in the metadata table but {storage} on storage",
                at(partition, file)
            ),
        }
    }
}

/// The committed data files of `listing` (a partition -> name -> size map), as judged by the
/// data table's timeline in `view`: names that are not data files and files of instants that
/// are not committed are dropped.
fn committed(view: &FileSystemView, listing: &FilesListing) -> FilesListing {
    let mut out = FilesListing::new();
    for (partition, files) in listing {
        let kept: BTreeMap<String, u64> = files
            .iter()
            .filter(|(name, size)| {
                matches!(parse_data_file_name(name, **size), Ok(Some(f)) if view.is_committed(f.instant_time()))
            })
            .map(|(n, s)| (n.clone(), *s))
            .collect();
        out.insert(partition.clone(), kept);
    }
    out
}

/// Lists every partition of the data table through `storage` (directory listing).
pub async fn storage_listing(storage: Arc<dyn Storage>) -> Result<FilesListing> {
    let listing = StorageListing::new(storage);
    let mut out = FilesListing::new();
    for p in listing.list_partitions().await? {
        let files = listing.list_files(&p).await?;
        out.insert(p, files.into_iter().map(|f| (f.name, f.size)).collect());
    }
    Ok(out)
}

/// Compares the FILES listing `mdt` with the directory listing `storage`, both restricted to
/// committed data files of the timeline in `view`. Returns the discrepancies, sorted; empty
/// when they agree.
pub fn compare_files(
    view: &FileSystemView,
    mdt: &FilesListing,
    storage: &FilesListing,
) -> Vec<FilesDiscrepancy> {
    let mdt = committed(view, mdt);
    let storage = committed(view, storage);
    let partitions: BTreeSet<&String> = mdt.keys().chain(storage.keys()).collect();
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    for p in partitions {
        let m = mdt.get(p).unwrap_or(&empty);
        let s = storage.get(p).unwrap_or(&empty);
        for (name, size) in s {
            match m.get(name) {
                None => out.push(FilesDiscrepancy::MissingFromMdt {
                    partition: p.clone(),
                    file: name.clone(),
                }),
                Some(ms) if ms != size => out.push(FilesDiscrepancy::SizeMismatch {
                    partition: p.clone(),
                    file: name.clone(),
                    mdt: *ms,
                    storage: *size,
                }),
                Some(_) => {}
            }
        }
        for name in m.keys() {
            if !s.contains_key(name) {
                out.push(FilesDiscrepancy::MissingFromStorage {
                    partition: p.clone(),
                    file: name.clone(),
                });
            }
        }
    }
    out.sort();
    out
}

/// What [`validate_table`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidationReport {
    /// False when the table has no metadata table (nothing was compared).
    pub has_metadata_table: bool,
    /// Data partitions compared.
    pub partitions: usize,
    /// Committed data files on storage.
    pub storage_files: usize,
    /// Committed data files the FILES partition lists.
    pub mdt_files: usize,
    /// Every disagreement, sorted.
    pub discrepancies: Vec<FilesDiscrepancy>,
}

/// Validates the metadata table of the table rooted at `storage` (main): the FILES partition,
/// read as a reader would (valid instants only), against a directory listing, both restricted
/// to files of committed instants. Read only.
pub async fn validate_table(storage: Arc<dyn Storage>) -> Result<ValidationReport> {
    let Some(mdt) = crate::MetadataTable::open(storage.clone()).await? else {
        return Ok(ValidationReport::default());
    };
    let view = FileSystemView::open(storage.clone()).await?;
    let from_mdt = mdt.files_listing().await?;
    let from_storage = storage_listing(storage).await?;
    let discrepancies = compare_files(&view, &from_mdt, &from_storage);
    let count = |l: &FilesListing| committed(&view, l).values().map(BTreeMap::len).sum();
    let partitions = committed(&view, &from_storage)
        .into_iter()
        .filter(|(_, f)| !f.is_empty())
        .count();
    Ok(ValidationReport {
        has_metadata_table: true,
        partitions,
        storage_files: count(&from_storage),
        mdt_files: count(&from_mdt),
        discrepancies,
    })
}
