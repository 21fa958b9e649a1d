//! [`MetadataTable`]: opening the MDT and merging its FILES partition (spec §6.1–6.3, 6.5, 6.6).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use apache_avro::Schema;
use arbor_format::hfile::mdt::{decode_files_record, metadata_record_schema, FilesEntry};
use arbor_format::hfile::{HFileRangedReader, HFileReader};
use arbor_format::log::reader::ReadMode;
use arbor_format::log::{read_log_bytes, BlockType};
use arbor_fsview::{FileSlice, FileSystemView, ListedFile, PartitionListing};
use arbor_storage::{Storage, StorageExt};
use arbor_timeline::archive::{ArchivedTimeline, TimelineHistory};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{ActiveTimeline, InstantTime, TableConfig, TableLayout};
use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{MdtError, Result};
use crate::validity::valid_instants;

use arbor_timeline::layout::paths::properties_key;
/// The MDT's base directory and its own meta directory, relative to the data table base (the
/// table layout's, `arbor_timeline::layout::paths`).
pub use arbor_timeline::layout::paths::{MDT_BASE, MDT_META_DIR};
/// The MDT partition holding file listings.
pub const FILES_PARTITION: &str = "files";
/// Record key of the partition list in the `files` partition.
pub const ALL_PARTITIONS_KEY: &str = "__all_partitions__";
/// Record key Hudi uses for the partition of a non-partitioned table.
pub const NON_PARTITIONED_KEY: &str = ".";

/// Data partition (`""` for non-partitioned) -> file name -> size in bytes.
pub type FilesListing = BTreeMap<String, BTreeMap<String, u64>>;

/// A [`PartitionListing`] of the MDT's own partitions: lists `<MDT_BASE>/<partition>` of a
/// storage rooted at the data table base.
#[derive(Debug)]
struct MdtDirListing {
    storage: Arc<dyn Storage>,
}

#[async_trait]
impl PartitionListing for MdtDirListing {
    async fn list_partitions(&self) -> arbor_fsview::Result<Vec<String>> {
        let (_objects, dirs) = self.storage.list_dir(MDT_BASE).await?;
        Ok(dirs
            .iter()
            .filter_map(|d| d.rsplit('/').next())
            .filter(|n| !n.starts_with('.'))
            .map(str::to_string)
            .collect())
    }

    async fn list_files(&self, partition: &str) -> arbor_fsview::Result<Vec<ListedFile>> {
        let (objects, _dirs) = self
            .storage
            .list_dir(&format!("{MDT_BASE}/{partition}"))
            .await?;
        Ok(objects
            .into_iter()
            .map(|o| ListedFile {
                name: o.key.rsplit('/').next().unwrap_or(&o.key).to_string(),
                size: o.size,
            })
            .collect())
    }
}

/// A read-only handle on a table's metadata table (MDT).
///
/// Guarantees: the MDT timeline is loaded once, at [`MetadataTable::open`]; every query reads
/// the files of the MDT's latest committed file slices as of that load.
#[derive(Debug)]
pub struct MetadataTable {
    storage: Arc<dyn Storage>,
    view: FileSystemView,
    valid: BTreeSet<InstantTime>,
}

fn format_err(path: &str) -> impl FnOnce(arbor_format::FormatError) -> MdtError + '_ {
    move |source| MdtError::Format {
        path: path.to_string(),
        source,
    }
}

impl MetadataTable {
    /// Opens the MDT of the table whose base is the root of `storage` (main: the data timeline
    /// is the one of `.hoodie/hoodie.properties`). Returns `None` when
    /// `.hoodie/metadata/.hoodie/hoodie.properties` does not exist. Fails if the MDT config or
    /// either timeline cannot be loaded.
    pub async fn open(storage: Arc<dyn Storage>) -> Result<Option<Self>> {
        if !storage.exists(&properties_key(MDT_META_DIR)).await? {
            return Ok(None);
        }
        let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
        let data = ActiveTimeline::load(storage.clone(), layout).await?;
        Self::open_with(storage, &data).await
    }

    /// [`MetadataTable::open`] reading only the MDT's active timeline
    /// ([`MetadataTable::open_active_with`]): what writers use on every commit.
    pub async fn open_active(storage: Arc<dyn Storage>) -> Result<Option<Self>> {
        if !storage.exists(&properties_key(MDT_META_DIR)).await? {
            return Ok(None);
        }
        let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
        let data = ActiveTimeline::load(storage.clone(), layout).await?;
        Self::open_active_with(storage, &data).await
    }

    /// Opens the MDT with `data` as the data table's active timeline, which decides which MDT
    /// log blocks are valid ([`crate::validity`]). Returns `None` when the MDT has no
    /// `hoodie.properties`.
    pub async fn open_with(
        storage: Arc<dyn Storage>,
        data: &ActiveTimeline,
    ) -> Result<Option<Self>> {
        Self::open_timeline(storage, data, true).await
    }

    /// [`MetadataTable::open_with`] reading only the MDT's **active** timeline, never its
    /// archived one, so the cost of opening does not grow with the MDT's history (what a
    /// data-table write uses).
    ///
    /// Every answer about the latest file slices equals [`MetadataTable::open_with`]'s: the
    /// MDT archiver never archives the latest MDT compaction nor anything after it
    /// (`arbor-table`'s `mdt_sync::archive_mdt`, Java's rule), so the base file and every log
    /// file of each latest slice belong to active instants or sort below the active
    /// timeline's archival boundary (committed by the boundary rule of
    /// [`arbor_fsview::visibility`]); the MDT has no replacecommits whose replacements an
    /// archived instant could hold.
    pub async fn open_active_with(
        storage: Arc<dyn Storage>,
        data: &ActiveTimeline,
    ) -> Result<Option<Self>> {
        Self::open_timeline(storage, data, false).await
    }

    async fn open_timeline(
        storage: Arc<dyn Storage>,
        data: &ActiveTimeline,
        archived: bool,
    ) -> Result<Option<Self>> {
        let meta_dir = MDT_META_DIR;
        if !storage.exists(&properties_key(meta_dir)).await? {
            return Ok(None);
        }
        let config = TableConfig::load(storage.as_ref(), meta_dir).await?;
        let layout = TableLayout::from_config(meta_dir, &config)?;
        let listing = Arc::new(MdtDirListing {
            storage: storage.clone(),
        });
        let view = if archived {
            FileSystemView::load(storage.clone(), layout, listing).await?
        } else {
            let active = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
            let history = TimelineHistory::from_parts(active, ArchivedTimeline::default());
            FileSystemView::from_history(storage.clone(), layout, history, listing).await?
        };
        let valid = valid_instants(data, view.history().active()).await?;
        Ok(Some(MetadataTable {
            storage,
            view,
            valid,
        }))
    }

    /// The instant times whose MDT log blocks are used ([`crate::validity`]).
    pub fn valid_instants(&self) -> &BTreeSet<InstantTime> {
        &self.valid
    }

    /// The file-system view of the MDT itself (its partitions are `files`, `column_stats`, ...).
    pub fn view(&self) -> &FileSystemView {
        &self.view
    }

    /// The latest committed file slices of the MDT's `files` partition.
    pub async fn files_slices(&self) -> Result<Vec<FileSlice>> {
        Ok(self
            .view
            .latest_file_slices(Some(FILES_PARTITION), None)
            .await?)
    }

    /// Every record of the `files` partition merged as Hudi merges them (hudi-rs 0.5.0
    /// `FilesPartitionMerger`): per file slice, the base HFile's records, then the records of
    /// the `HFILE_DATA` log blocks in log-file and block order, keeping only blocks whose
    /// `INSTANT_TIME` is committed on the MDT timeline. For each later entry: `isDeleted` removes
    /// a live entry (or replaces a tombstone), otherwise the entry is kept with the larger size.
    /// Keys are the raw record keys (`__all_partitions__`, `.`, partition paths); tombstones are
    /// kept in the result.
    pub async fn merged_files_records(
        &self,
    ) -> Result<BTreeMap<String, BTreeMap<String, FilesEntry>>> {
        self.merged_records(None).await
    }

    /// [`MetadataTable::merged_files_records`] of the record keys `wanted` only: the base
    /// HFile is read with ranged reads of the blocks those keys fall in
    /// ([`HFileRangedReader`]), never whole; the log files (bounded by the MDT compaction
    /// cadence) are read whole and only their entries of `wanted` are merged. Each key's
    /// records are merged exactly as the full merge merges them (the merge is per key), so
    /// the answer equals the full answer restricted to `wanted`.
    pub async fn merged_files_records_of(
        &self,
        wanted: &BTreeSet<String>,
    ) -> Result<BTreeMap<String, BTreeMap<String, FilesEntry>>> {
        self.merged_records(Some(wanted)).await
    }

    async fn merged_records(
        &self,
        wanted: Option<&BTreeSet<String>>,
    ) -> Result<BTreeMap<String, BTreeMap<String, FilesEntry>>> {
        let mut merged: BTreeMap<String, BTreeMap<String, FilesEntry>> = BTreeMap::new();
        for slice in self.files_slices().await? {
            if let (Some(base), Some(base_file)) = (slice.base_file_path(), &slice.base_file) {
                let key = format!("{MDT_BASE}/{base}");
                match wanted {
                    None => {
                        let (bytes, _) = self.storage.get(&key).await?;
                        self.merge_hfile(bytes, None, &key, None, &mut merged)?;
                    }
                    Some(wanted) => {
                        self.merge_hfile_keys(&key, base_file.size, wanted, &mut merged)
                            .await?;
                    }
                }
            }
            for log in slice.log_file_paths() {
                let key = format!("{MDT_BASE}/{log}");
                let (bytes, _) = self.storage.get(&key).await?;
                let contents =
                    read_log_bytes(&bytes, &key, ReadMode::Lenient).map_err(format_err(&key))?;
                for region in &contents.corrupt {
                    tracing::warn!(path = %key, offset = region.offset, reason = %region.reason,
                        "skipping corrupt region of an MDT log file");
                }
                for block in &contents.blocks {
                    if block.block_type != BlockType::HfileData {
                        continue;
                    }
                    let Some(instant) = block.instant_time() else {
                        return Err(MdtError::Invalid {
                            path: key.clone(),
                            reason: format!(
                                "HFILE_DATA block at offset {} has no INSTANT_TIME",
                                block.offset
                            ),
                        });
                    };
                    let instant = InstantTime::parse(instant)?;
                    if !self.valid.contains(&instant) {
                        tracing::debug!(path = %key, %instant, "skipping block of an invalid MDT instant");
                        continue;
                    }
                    let schema = block.schema_json().map(str::to_string);
                    self.merge_hfile(block.content.clone(), schema, &key, wanted, &mut merged)?;
                }
            }
        }
        Ok(merged)
    }

    /// The FILES listing: data partition (`""` for non-partitioned) -> live file name -> size.
    /// Partitions are those with a per-partition record (`__all_partitions__` is not a
    /// partition); deleted entries are left out, and so are partitions that
    /// `__all_partitions__` marks deleted, and partitions without a live file that
    /// `__all_partitions__` (when the MDT has one) does not list: a clean that removed a
    /// deleted partition marks it deleted there, which Hudi's merge turns into the partition's
    /// absence from the list (Java's `getAllPartitionPaths` reads only that list). A partition
    /// with live files is always listed.
    pub async fn files_listing(&self) -> Result<FilesListing> {
        let merged = self.merged_files_records().await?;
        Ok(listing_of(&merged))
    }

    /// [`MetadataTable::files_listing`] restricted to the data partitions `partitions`
    /// (`""` for non-partitioned): reads only their records and `__all_partitions__`
    /// ([`MetadataTable::merged_files_records_of`]), so its cost does not grow with the
    /// number of partitions or files of the table. A partition the full listing leaves out is
    /// absent here too.
    pub async fn files_listing_of(&self, partitions: &[&str]) -> Result<FilesListing> {
        let mut wanted: BTreeSet<String> = partitions
            .iter()
            .map(|p| {
                if p.is_empty() {
                    NON_PARTITIONED_KEY.to_string()
                } else {
                    (*p).to_string()
                }
            })
            .collect();
        wanted.insert(ALL_PARTITIONS_KEY.to_string());
        let merged = self.merged_files_records_of(&wanted).await?;
        Ok(listing_of(&merged))
    }

    /// Merges the records of `wanted` in the HFile at `key` (`size` bytes; 0: unknown, asked
    /// with a HEAD) into `merged`, reading only the blocks they fall in.
    async fn merge_hfile_keys(
        &self,
        key: &str,
        size: u64,
        wanted: &BTreeSet<String>,
        merged: &mut BTreeMap<String, BTreeMap<String, FilesEntry>>,
    ) -> Result<()> {
        let size = match size {
            0 => self.storage.head(key).await?.size,
            n => n,
        };
        let reader = HFileRangedReader::open(self.storage.as_ref(), key, size)
            .await
            .map_err(format_err(key))?;
        let parsed;
        let schema: &Schema = match reader.file_info_str("schema") {
            Some(j) => {
                parsed = Schema::parse_str(j).map_err(|e| MdtError::Invalid {
                    path: key.to_string(),
                    reason: format!("writer schema cannot be parsed: {e}"),
                })?;
                &parsed
            }
            None => metadata_record_schema().map_err(format_err(key))?,
        };
        let keys: Vec<&[u8]> = wanted.iter().map(|k| k.as_bytes()).collect();
        for (k, value) in reader.get_many(&keys).await.map_err(format_err(key))? {
            let k = String::from_utf8(k.to_vec()).map_err(|_| MdtError::Invalid {
                path: key.to_string(),
                reason: "record key is not UTF-8".to_string(),
            })?;
            let record = decode_files_record(&value, schema, key).map_err(format_err(key))?;
            merge_entries(merged.entry(k).or_default(), record.files);
        }
        Ok(())
    }

    fn merge_hfile(
        &self,
        bytes: Bytes,
        schema_json: Option<String>,
        path: &str,
        wanted: Option<&BTreeSet<String>>,
        merged: &mut BTreeMap<String, BTreeMap<String, FilesEntry>>,
    ) -> Result<()> {
        let reader = HFileReader::open(bytes, path).map_err(format_err(path))?;
        let json = schema_json.or_else(|| reader.file_info_str("schema").map(str::to_string));
        let parsed;
        let schema: &Schema = match json {
            Some(j) => {
                parsed = Schema::parse_str(&j).map_err(|e| MdtError::Invalid {
                    path: path.to_string(),
                    reason: format!("writer schema cannot be parsed: {e}"),
                })?;
                &parsed
            }
            None => metadata_record_schema().map_err(format_err(path))?,
        };
        for (key, value) in reader.entries().map_err(format_err(path))? {
            let key = String::from_utf8(key.to_vec()).map_err(|_| MdtError::Invalid {
                path: path.to_string(),
                reason: "record key is not UTF-8".to_string(),
            })?;
            if wanted.is_some_and(|w| !w.contains(&key)) {
                continue;
            }
            let record = decode_files_record(&value, schema, path).map_err(format_err(path))?;
            merge_entries(merged.entry(key).or_default(), record.files);
        }
        Ok(())
    }
}

/// The FILES listing of merged records (the rule of [`MetadataTable::files_listing`]).
fn listing_of(merged: &BTreeMap<String, BTreeMap<String, FilesEntry>>) -> FilesListing {
    let all = merged.get(ALL_PARTITIONS_KEY);
    let mut out = FilesListing::new();
    for (key, files) in merged {
        if key == ALL_PARTITIONS_KEY {
            continue;
        }
        let listed = all.map(|m| m.get(key).map(|e| !e.is_deleted));
        if listed == Some(Some(false)) {
            continue;
        }
        let partition = if key == NON_PARTITIONED_KEY {
            ""
        } else {
            key.as_str()
        };
        let live: BTreeMap<String, u64> = files
            .iter()
            .filter(|(_, e)| !e.is_deleted)
            .map(|(name, e)| (name.clone(), u64::try_from(e.size).unwrap_or(0)))
            .collect();
        if live.is_empty() && listed == Some(None) {
            continue;
        }
        out.insert(partition.to_string(), live);
    }
    out
}

/// Merges a newer record's entries into `existing` (hudi-rs 0.5.0 / Java
/// `HoodieMetadataPayload` rule): a deletion removes a live entry and replaces a tombstone; a
/// live entry keeps the larger size; a new name is inserted as is (live or tombstone).
fn merge_entries(existing: &mut BTreeMap<String, FilesEntry>, newer: BTreeMap<String, FilesEntry>) {
    // The first record of a key (a base file's, usually the largest) is taken whole: merging
    // into nothing keeps every entry as it is, deletions included.
    if existing.is_empty() {
        *existing = newer;
        return;
    }
    for (name, new) in newer {
        match existing.get(&name) {
            Some(old) if new.is_deleted && !old.is_deleted => {
                existing.remove(&name);
            }
            Some(old) if !new.is_deleted => {
                let size = old.size.max(new.size);
                existing.insert(
                    name,
                    FilesEntry {
                        size,
                        is_deleted: false,
                    },
                );
            }
            _ => {
                existing.insert(name, new);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(size: i64, is_deleted: bool) -> FilesEntry {
        FilesEntry { size, is_deleted }
    }

    fn map(entries: &[(&str, FilesEntry)]) -> BTreeMap<String, FilesEntry> {
        entries.iter().map(|(n, e)| (n.to_string(), *e)).collect()
    }

    #[test]
    fn test_merge_entries_delete_removes_live_entry() {
        let mut existing = map(&[("a", entry(10, false)), ("b", entry(5, false))]);
        merge_entries(&mut existing, map(&[("a", entry(0, true))]));
        assert_eq!(existing, map(&[("b", entry(5, false))]));
    }

    #[test]
    fn test_merge_entries_live_entry_keeps_larger_size() {
        let mut existing = map(&[("a", entry(10, false)), ("b", entry(5, false))]);
        merge_entries(
            &mut existing,
            map(&[("a", entry(7, false)), ("b", entry(9, false))]),
        );
        assert_eq!(
            existing,
            map(&[("a", entry(10, false)), ("b", entry(9, false))])
        );
    }

    #[test]
    fn test_merge_entries_new_tombstone_is_kept_then_revived() {
        let mut existing = BTreeMap::new();
        merge_entries(&mut existing, map(&[("a", entry(0, true))]));
        assert_eq!(existing, map(&[("a", entry(0, true))]));
        merge_entries(&mut existing, map(&[("a", entry(3, false))]));
        assert_eq!(existing, map(&[("a", entry(3, false))]));
    }
}
