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
    let ctx = &table.ctx;
    let mut rows_by_partition: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (row, key) in keys.iter().enumerate() {
        rows_by_partition
            .entry(&key.partition_path)
            .or_default()
            .push(row);
    }
    let partitions: Vec<&str> = rows_by_partition.keys().copied().collect();
    let reader = Arc::new(TableReader::open_for_write(ctx.storage.clone(), &partitions).await?);
    let mut routes = vec![0u64; keys.len()];
    let new_key = |partition: &str, key: &str| hash(&[partition, "\u{0}new", key]);
    if let Some(rli) = RecordIndex::open(ctx.storage.clone(), reader.clone()).await? {
        // A global index: a key is routed to wherever it is stored, in any partition.
        let wanted: Vec<String> = keys.iter().map(|k| k.record_key.clone()).collect();
        let found = rli.locate_global(&wanted).await?;
        for (route, key) in routes.iter_mut().zip(keys) {
            *route = match found.get(&key.record_key) {
                Some(at) => hash(&[&at.partition, &at.file_id]),
                None => new_key(&key.partition_path, &key.record_key),
            };
        }
        return Ok(routes);
    }
    let index = SimpleIndex::new(ctx.storage.clone(), reader.clone())
        .with_parallelism(ctx.options.parallelism);
    for (partition, rows) in rows_by_partition {
        let wanted: Vec<String> = rows
            .iter()
            .filter_map(|&r| keys.get(r).map(|k| k.record_key.clone()))
            .collect();
        let found: HashMap<String, _> = index.locate(partition, &wanted).await?;
        for (&row, key) in rows.iter().zip(&wanted) {
            if let Some(route) = routes.get_mut(row) {
                *route = match found.get(key) {
                    Some(at) => hash(&[partition, &at.file_id]),
                    None => new_key(partition, key),
                };
            }
        }
    }
    Ok(routes)
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
