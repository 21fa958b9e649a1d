//! Routing the rows of a distributed upsert or delete ([`crate::Table::route`]): each row gets
//! a 63-bit route, equal for rows whose key is stored in the same file group (the hash of the
//! partition and file id the table's index finds it in) and, for new keys, for rows of the same
//! key (the hash of the partition and the record key). Shuffling rows by route (Ray's
//! `repartition(keys=...)`, Spark's `repartition`) before writing fragments gives every file
//! group and every key to one fragment, as [`crate::Table::commit_fragments`] requires.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hasher;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;

use super::context::Table;
use super::write::validate_with_schema;
use crate::error::Result;
use crate::keygen::HoodieKey;
use crate::read::TableReader;
use crate::write::index::{Index, SimpleIndex};
use crate::write::options::WriteOperation;
use crate::write::record_index::RecordIndex;

/// [`crate::Table::route`].
pub(crate) async fn route(
    table: &Table,
    operation: WriteOperation,
    batches: &[RecordBatch],
) -> Result<Vec<u64>> {
    let input = validate_with_schema(table, operation, batches)?.input;
    route_keys(table, &input.keys).await
}

/// The route of each of `keys` (as [`route`], for keys already validated).
pub(super) async fn route_keys(table: &Table, keys: &[HoodieKey]) -> Result<Vec<u64>> {
    let mut rows_by_partition: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (row, key) in keys.iter().enumerate() {
        rows_by_partition
            .entry(&key.partition_path)
            .or_default()
            .push(row);
    }
    let partitions: Vec<&str> = rows_by_partition.keys().copied().collect();
    let router = Router::open(table, &partitions).await?;
    let mut routes = vec![0u64; keys.len()];
    for (partition, rows) in rows_by_partition {
        let wanted: Vec<String> = rows
            .iter()
            .filter_map(|&r| keys.get(r).map(|k| k.record_key.clone()))
            .collect();
        let found = router.routes(partition, &wanted).await?;
        for (&row, r) in rows.iter().zip(found) {
            if let Some(route) = routes.get_mut(row) {
                *route = r;
            }
        }
    }
    Ok(routes)
}

/// Routes keys, a partition at a time, against the table's latest state as one index sees it:
/// the record index when the table has one (global: a key is routed to wherever it is stored,
/// in any partition), else the keys of the partition's latest slices.
pub(super) struct Router {
    record_index: Option<RecordIndex>,
    simple: SimpleIndex,
}

impl Router {
    /// A router for keys of `partitions` (the partitions whose slices the simple index reads).
    pub(super) async fn open(table: &Table, partitions: &[&str]) -> Result<Router> {
        let ctx = &table.ctx;
        let reader = Arc::new(TableReader::open_for_write(ctx.storage.clone(), partitions).await?);
        let record_index = RecordIndex::open(ctx.storage.clone(), reader.clone()).await?;
        let simple =
            SimpleIndex::new(ctx.storage.clone(), reader).with_parallelism(ctx.options.parallelism);
        Ok(Router {
            record_index,
            simple,
        })
    }

    /// The route of each of `keys`, keys of input rows of `partition`.
    pub(super) async fn routes(&self, partition: &str, keys: &[String]) -> Result<Vec<u64>> {
        let new_key = |key: &str| hash(&[partition, "\u{0}new", key]);
        if let Some(rli) = &self.record_index {
            let found = rli.locate_global(keys).await?;
            return Ok(keys
                .iter()
                .map(|key| match found.get(key) {
                    Some(at) => hash(&[&at.partition, &at.file_id]),
                    None => new_key(key),
                })
                .collect());
        }
        let found: HashMap<String, _> = self.simple.locate(partition, keys).await?;
        Ok(keys
            .iter()
            .map(|key| match found.get(key) {
                Some(at) => hash(&[partition, &at.file_id]),
                None => new_key(key),
            })
            .collect())
    }
}

/// A 63-bit hash of `parts` (non-negative as a signed 64-bit integer too: Spark's `LongType`,
/// Arrow's `int64`), stable across processes and versions (xxHash64, seed 0).
fn hash(parts: &[&str]) -> u64 {
    let mut h = twox_hash::XxHash64::with_seed(0);
    for p in parts {
        h.write(p.as_bytes());
        h.write(&[0xff]);
    }
    h.finish() & (u64::MAX >> 1)
}
