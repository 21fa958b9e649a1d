//! [`RecordIndex`]: the metadata table's RECORD_INDEX partition as an [`Index`], and the
//! global-key handling it enables ([`KeyMove`], defined with the write options).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use arbor_mdt::index_writer::{instant_millis, RecordIndexDelta, RECORD_INDEX};
use arbor_mdt::record_index::lookup_record_index;
use arbor_mdt::MetadataTable;
use arbor_storage::Storage;
use arbor_timeline::{InstantTime, TableConfig};
use async_trait::async_trait;

use super::index::{Index, RecordLocation, SimpleIndex};
pub use super::options::KeyMove;
use super::planner::WritePlan;
use crate::error::Result;
use crate::keygen::HoodieKey;
use crate::read::TableReader;

/// True when the table lists the record index in `hoodie.table.metadata.partitions`.
pub fn has_record_index(config: &TableConfig) -> bool {
    config
        .metadata_partitions()
        .iter()
        .any(|p| p == RECORD_INDEX)
}

/// The record index of a table state: key lookups read only the MDT file groups the keys hash
/// to (the cost depends on the number of keys asked, not on the table's size).
///
/// The index is global (a key exists in at most one partition); [`Index::locate`] answers for
/// one partition by leaving out keys that live elsewhere.
///
/// Answers are cached per key for the life of the handle (it answers for one table state), so
/// the planner's per-partition lookups after a global routing lookup read nothing again.
#[derive(Debug)]
pub struct RecordIndex {
    storage: Arc<dyn Storage>,
    mdt: MetadataTable,
    reader: Arc<TableReader>,
    cache: std::sync::Mutex<HashMap<String, Option<RecordLocation>>>,
}

impl RecordIndex {
    /// The record index of the state `reader` was opened at; `None` when the table has no
    /// record index or no metadata table.
    pub async fn open(storage: Arc<dyn Storage>, reader: Arc<TableReader>) -> Result<Option<Self>> {
        if !has_record_index(reader.config()) {
            return Ok(None);
        }
        // Active MDT timeline only: a write's cost must not grow with the MDT's history
        // (`MetadataTable::open_active_with` says why the answers are the same).
        let Some(mdt) =
            MetadataTable::open_active_with(storage.clone(), reader.view().history().active())
                .await?
        else {
            return Ok(None);
        };
        Ok(Some(RecordIndex {
            storage,
            mdt,
            reader,
            cache: std::sync::Mutex::new(HashMap::new()),
        }))
    }

    /// The current location of each of `keys` that exists, in any partition.
    pub async fn locate_global(&self, keys: &[String]) -> Result<HashMap<String, RecordLocation>> {
        let mut out = HashMap::with_capacity(keys.len());
        let mut missing: Vec<String> = Vec::new();
        {
            let cache = match self.cache.lock() {
                Ok(c) => c,
                Err(poisoned) => poisoned.into_inner(),
            };
            for k in keys {
                match cache.get(k) {
                    Some(Some(loc)) => {
                        out.insert(k.clone(), loc.clone());
                    }
                    Some(None) => {}
                    None => missing.push(k.clone()),
                }
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let found = self.lookup(&missing).await?;
        let mut cache = match self.cache.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        for k in missing {
            let loc = found.get(&k).cloned();
            if let Some(l) = &loc {
                out.insert(k.clone(), l.clone());
            }
            cache.insert(k, loc);
        }
        Ok(out)
    }

    /// Reads the locations of `keys` from the record index (no cache).
    async fn lookup(&self, keys: &[String]) -> Result<HashMap<String, RecordLocation>> {
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let found = lookup_record_index(self.storage.as_ref(), &self.mdt, &refs).await?;
        let partitions: BTreeSet<&str> = found
            .values()
            .map(|e| e.location.partition.as_str())
            .collect();
        let mut bases: HashMap<(String, String), InstantTime> = HashMap::new();
        for p in partitions {
            for s in self
                .reader
                .view()
                .latest_file_slices(Some(p), None)
                .await
                .map_err(crate::TableError::from_fsview)?
            {
                bases.insert((s.partition.clone(), s.file_id.clone()), s.base_instant);
            }
        }
        let mut out = HashMap::with_capacity(found.len());
        for (key, entry) in found {
            let at = (
                entry.location.partition.clone(),
                entry.location.file_id.clone(),
            );
            // An entry naming a group without a latest slice (replaced) is not a live record.
            if let Some(base) = bases.get(&at) {
                out.insert(
                    key,
                    RecordLocation {
                        partition: at.0,
                        file_id: at.1,
                        base_instant: base.clone(),
                    },
                );
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl Index for RecordIndex {
    async fn locate(
        &self,
        partition: &str,
        keys: &[String],
    ) -> Result<HashMap<String, RecordLocation>> {
        Ok(self
            .locate_global(keys)
            .await?
            .into_iter()
            .filter(|(_, l)| l.partition == partition)
            .collect())
    }
}

/// The record-index change of a planned write at instant `time`: inserted keys get their new
/// group, deleted keys are removed, and every key of a replaced file group (insert overwrite,
/// delete partition) is removed unless the write re-inserts it.
pub async fn delta_of(
    storage: &Arc<dyn Storage>,
    reader: &TableReader,
    keys: &[HoodieKey],
    plan: &WritePlan,
    time: &InstantTime,
) -> Result<RecordIndexDelta> {
    let millis = instant_millis(time);
    let mut delta = RecordIndexDelta::default();
    for g in &plan.groups {
        for &r in &g.deletes {
            if let Some(k) = keys.get(r) {
                delta.deletes.insert(k.record_key.clone());
            }
        }
    }
    for (partition, ids) in &plan.replaced {
        delta
            .deletes
            .extend(replaced_keys(storage, reader, partition, ids).await?);
    }
    for g in &plan.groups {
        for &r in &g.inserts {
            if let Some(k) = keys.get(r) {
                delta.upserts.insert(
                    k.record_key.clone(),
                    arbor_format::hfile::mdt_index::RecordLocation {
                        partition: g.partition.clone(),
                        file_id: g.file_id.clone(),
                        instant_time_millis: millis,
                    },
                );
            }
        }
    }
    Ok(delta)
}

/// The record keys of the latest slices of file groups `ids` of `partition`.
pub async fn replaced_keys(
    storage: &Arc<dyn Storage>,
    reader: &TableReader,
    partition: &str,
    ids: &[String],
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for slice in reader
        .view()
        .latest_file_slices(Some(partition), None)
        .await
        .map_err(crate::TableError::from_fsview)?
    {
        if ids.contains(&slice.file_id) {
            out.extend(SimpleIndex::slice_keys(storage, reader, &slice).await?);
        }
    }
    Ok(out)
}

/// Routes the rows of an upsert or delete whose key the record index finds in another
/// partition than the row's: deletes and [`KeyMove::UpdateInPlace`] upserts are redirected to
/// the key's current partition; with [`KeyMove::DeleteAndInsert`] a copy of the row is appended
/// that deletes the key from its current file group (returned as forced deletes `(row,
/// partition, file id)` for the planner) while the row itself is inserted where it says.
/// `None` when no key moved.
pub async fn route_moved_keys(
    index: &RecordIndex,
    input: &super::planner::Input,
    operation: super::options::WriteOperation,
    key_move: KeyMove,
    delete_rows: Option<&std::collections::BTreeSet<usize>>,
) -> Result<Option<(super::planner::Input, Vec<(usize, String, String)>)>> {
    use super::options::WriteOperation as Op;
    if !matches!(operation, Op::Upsert | Op::Delete) {
        return Ok(None);
    }
    let keys: Vec<String> = input.keys.iter().map(|k| k.record_key.clone()).collect();
    let located = index.locate_global(&keys).await?;
    let mut keys_out = input.keys.clone();
    let mut copies: Vec<u32> = Vec::new();
    let mut forced = Vec::new();
    let mut moved = false;
    for (row, key) in input.keys.iter().enumerate() {
        let Some(loc) = located.get(&key.record_key) else {
            continue;
        };
        if *loc.partition == *key.partition_path {
            continue;
        }
        moved = true;
        let deleting = operation == Op::Delete || delete_rows.is_some_and(|d| d.contains(&row));
        match (deleting, key_move) {
            (true, _) | (_, KeyMove::UpdateInPlace) => {
                if let Some(k) = keys_out.get_mut(row) {
                    k.partition_path = Arc::from(loc.partition.as_str());
                }
            }
            (false, KeyMove::DeleteAndInsert) => {
                let new_row = input.keys.len() + copies.len();
                copies.push(u32::try_from(row).unwrap_or(u32::MAX));
                keys_out.push(HoodieKey {
                    record_key: key.record_key.clone(),
                    partition_path: Arc::from(loc.partition.as_str()),
                });
                forced.push((new_row, loc.partition.clone(), loc.file_id.clone()));
            }
        }
    }
    if !moved {
        return Ok(None);
    }
    let batch = if copies.is_empty() {
        input.batch.clone()
    } else {
        let indices = arrow::array::UInt32Array::from(copies);
        let extra = arrow::compute::take_record_batch(&input.batch, &indices).map_err(arrow_err)?;
        arrow::compute::concat_batches(&input.batch.schema(), [&input.batch, &extra])
            .map_err(arrow_err)?
    };
    Ok(Some((
        super::planner::Input {
            batch,
            keys: keys_out,
        },
        forced,
    )))
}

fn arrow_err(e: arrow::error::ArrowError) -> crate::TableError {
    crate::TableError::Format(arbor_format::FormatError::Arrow {
        path: "input rows of moved keys".to_string(),
        reason: e.to_string(),
    })
}
