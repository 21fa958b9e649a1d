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
/// are not completed writes of this timeline (active or archived) are dropped. Membership is
/// strict (no archival-boundary rule): data files are shared by every branch of a table, and
/// an instant older than this timeline's active start is no proof that the file is this
/// timeline's (RFC-116).
fn committed(view: &FileSystemView, listing: &FilesListing) -> FilesListing {
    let mut out = FilesListing::new();
    for (partition, files) in listing {
        let kept: BTreeMap<String, u64> = files
            .iter()
            .filter(|(name, size)| {
                matches!(
                    parse_data_file_name(name, **size),
                    Ok(Some(f)) if view.index().completed_write(f.instant_time()).is_some()
                )
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

/// Validates the metadata table of the table rooted at `storage` (main, resolved as
/// `arbor_timeline::resolve_main` says; or the one root a view shows): the FILES partition,
/// read as a reader would (valid instants only), against a directory listing, both restricted
/// to files of committed instants. Read only.
pub async fn validate_table(storage: Arc<dyn Storage>) -> Result<ValidationReport> {
    let storage = arbor_timeline::resolve_main(storage.as_ref())
        .await?
        .view(storage);
    let Some(mdt) = crate::MetadataTable::open(storage.clone()).await? else {
        return Ok(ValidationReport::default());
    };
    let view = FileSystemView::open(storage.clone()).await?;
    let from_mdt = mdt.files_listing().await?;
    let mut from_storage = storage_listing(storage.clone()).await?;
    add_stored_elsewhere(&storage, &committed(&view, &from_mdt), &mut from_storage).await?;
    // A clean that stopped part-way has deleted files its (not yet valid) MDT deltacommit
    // removes: those are being deleted, not missing.
    let cleaning = pending_clean_files(view.history().active()).await?;
    let discrepancies: Vec<FilesDiscrepancy> = compare_files(&view, &from_mdt, &from_storage)
        .into_iter()
        .filter(|d| match d {
            FilesDiscrepancy::MissingFromStorage { partition, file } => {
                !cleaning.contains(&(partition.clone(), file.clone()))
            }
            _ => true,
        })
        .collect();
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

/// Adds to `listed` every file of `mdt` that the directory listing did not show but a `head`
/// through `storage` finds, with its stored size. A shallow clone's storage
/// (`arbor_timeline::layout::ClonedStorage`) lists only the clone's own data files, while its
/// FILES partition also lists the files it references in its sources; reads (and so this
/// `head`) resolve those where they live. On any other table a file missing from the listing
/// is missing from storage, and the `head` finds nothing.
async fn add_stored_elsewhere(
    storage: &Arc<dyn Storage>,
    mdt: &FilesListing,
    listed: &mut FilesListing,
) -> Result<()> {
    for (partition, files) in mdt {
        for name in files.keys() {
            if listed.get(partition).is_some_and(|l| l.contains_key(name)) {
                continue;
            }
            match storage
                .head(&arbor_fsview::slice::join(partition, name))
                .await
            {
                Ok(meta) => {
                    listed
                        .entry(partition.clone())
                        .or_default()
                        .insert(name.clone(), meta.size);
                }
                Err(arbor_storage::StorageError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

/// `(partition, file name)` of every file the plans of pending cleans delete.
async fn pending_clean_files(
    tl: &arbor_timeline::ActiveTimeline,
) -> Result<BTreeSet<(String, String)>> {
    use arbor_timeline::avro::{decode, HoodieCleanerPlan};
    use arbor_timeline::{Action, State};
    let mut out = BTreeSet::new();
    for pending in tl.filter(&[Action::Clean], &[State::Requested, State::Inflight]) {
        let requested = pending.with_state(State::Requested);
        let key = tl.key_of(&requested)?;
        let plan: HoodieCleanerPlan = decode(&tl.read(&requested).await?, &key)?;
        for (partition, files) in plan.file_paths_to_be_deleted_per_partition.iter().flatten() {
            for f in files {
                if let Some(p) = &f.file_path {
                    let name = p.rsplit('/').next().unwrap_or(p);
                    out.insert((partition.clone(), name.to_string()));
                }
            }
        }
    }
    Ok(out)
}

/// One way the record index or a secondary index disagrees with the data (found by comparing
/// the index with the latest file slices of the data table; see `arbor_table`'s
/// `validate_indexes`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum IndexDiscrepancy {
    /// A live record key is not in the record index.
    RecordKeyMissing {
        /// The record key.
        key: String,
        /// Its data partition.
        partition: String,
        /// Its file group.
        file_id: String,
    },
    /// The record index maps a key that no latest slice holds.
    RecordKeyExtra {
        /// The record key.
        key: String,
        /// The partition the index names.
        partition: String,
        /// The file group the index names.
        file_id: String,
    },
    /// The record index names another partition or file group than the one holding the key.
    RecordKeyMisplaced {
        /// The record key.
        key: String,
        /// Where the data holds it (`partition/fileId`).
        data: String,
        /// Where the index says it is (`partition/fileId`).
        index: String,
    },
    /// A (value, key) pair of the data is not in the secondary index.
    SecondaryEntryMissing {
        /// The index name (MDT partition).
        index: String,
        /// The column value (`None` = null).
        value: Option<String>,
        /// The record key.
        key: String,
    },
    /// The secondary index holds a (value, key) pair the data does not have.
    SecondaryEntryExtra {
        /// The index name (MDT partition).
        index: String,
        /// The column value (`None` = null).
        value: Option<String>,
        /// The record key.
        key: String,
    },
    /// A `column_stats` / `partition_stats` record disagrees with the statistics recomputed
    /// from the files ([`crate::column_stats_validate`]).
    Stats {
        /// The MDT partition (`column_stats` or `partition_stats`).
        index: String,
        /// What differs: the file or partition, the column, stored and recomputed values.
        detail: String,
    },
}

impl fmt::Display for IndexDiscrepancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = |v: &Option<String>| {
            v.as_deref()
                .map_or("null".to_string(), |s| format!("{s:?}"))
        };
        match self {
            IndexDiscrepancy::RecordKeyMissing { key, partition, file_id } => write!(
                f,
                "record_index: key {key:?} (in {partition}/{file_id}) is missing from the index"
            ),
            IndexDiscrepancy::RecordKeyExtra { key, partition, file_id } => write!(
                f,
                "record_index: key {key:?} is indexed at {partition}/{file_id} but no latest file slice holds it"
            ),
            IndexDiscrepancy::RecordKeyMisplaced { key, data, index } => write!(
                f,
                "record_index: key {key:?} is in {data} but the index says {index}"
            ),
            IndexDiscrepancy::SecondaryEntryMissing { index, value, key } => write!(
                f,
                "{index}: value {} of key {key:?} is missing from the index",
                v(value)
            ),
            IndexDiscrepancy::SecondaryEntryExtra { index, value, key } => write!(
                f,
                "{index}: the index maps value {} to key {key:?}, which the data does not have",
                v(value)
            ),
            IndexDiscrepancy::Stats { index, detail } => write!(f, "{index}: {detail}"),
        }
    }
}

/// Compares the record index (`index`: key -> (partition, file id)) with the data (`data`:
/// the same map built from the latest file slices). Returns the discrepancies, sorted.
pub fn compare_record_index(
    data: &BTreeMap<String, (String, String)>,
    index: &BTreeMap<String, (String, String)>,
) -> Vec<IndexDiscrepancy> {
    let mut out = Vec::new();
    for (key, (p, f)) in data {
        match index.get(key) {
            None => out.push(IndexDiscrepancy::RecordKeyMissing {
                key: key.clone(),
                partition: p.clone(),
                file_id: f.clone(),
            }),
            Some((ip, jf)) if ip != p || jf != f => {
                out.push(IndexDiscrepancy::RecordKeyMisplaced {
                    key: key.clone(),
                    data: format!("{p}/{f}"),
                    index: format!("{ip}/{jf}"),
                })
            }
            Some(_) => {}
        }
    }
    for (key, (p, f)) in index {
        if !data.contains_key(key) {
            out.push(IndexDiscrepancy::RecordKeyExtra {
                key: key.clone(),
                partition: p.clone(),
                file_id: f.clone(),
            });
        }
    }
    out.sort();
    out
}

/// Compares secondary index `name`'s content (`index`) with the (value, key) pairs of the data
/// (`data`). Returns the discrepancies, sorted.
pub fn compare_secondary_index(
    name: &str,
    data: &crate::SecondaryIndex,
    index: &crate::SecondaryIndex,
) -> Vec<IndexDiscrepancy> {
    let pairs = |m: &crate::SecondaryIndex| -> BTreeSet<(Option<String>, String)> {
        m.iter()
            .flat_map(|(v, keys)| keys.iter().map(move |k| (v.clone(), k.clone())))
            .collect()
    };
    let (d, i) = (pairs(data), pairs(index));
    let mut out: Vec<IndexDiscrepancy> = d
        .difference(&i)
        .map(|(value, key)| IndexDiscrepancy::SecondaryEntryMissing {
            index: name.to_string(),
            value: value.clone(),
            key: key.clone(),
        })
        .chain(
            i.difference(&d)
                .map(|(value, key)| IndexDiscrepancy::SecondaryEntryExtra {
                    index: name.to_string(),
                    value: value.clone(),
                    key: key.clone(),
                }),
        )
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod index_tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn test_compare_record_index_reports_missing_extra_and_misplaced() {
        let at = |p: &str, f: &str| (p.to_string(), f.to_string());
        let data = BTreeMap::from([
            ("a".to_string(), at("p", "f1")),
            ("b".to_string(), at("p", "f1")),
        ]);
        let index = BTreeMap::from([
            ("b".to_string(), at("p", "f2")),
            ("c".to_string(), at("p", "f1")),
        ]);
        let d = compare_record_index(&data, &index);
        assert_eq!(d.len(), 3);
        assert!(matches!(d[0], IndexDiscrepancy::RecordKeyMissing { .. }));
        assert!(d.iter().any(|x| x.to_string().contains("index says p/f2")));
        assert!(compare_record_index(&data, &data).is_empty());
    }

    #[test]
    fn test_compare_secondary_index_reports_both_directions() {
        let mut data = crate::SecondaryIndex::new();
        data.entry(Some("x".into()))
            .or_default()
            .insert("k1".into());
        let mut index = crate::SecondaryIndex::new();
        index.entry(None).or_default().insert("k1".into());
        let d = compare_secondary_index("secondary_index_c", &data, &index);
        assert_eq!(d.len(), 2);
        assert!(d[0].to_string().contains("missing"), "{}", d[0]);
        assert!(d[1].to_string().contains("value null"), "{}", d[1]);
    }
}
