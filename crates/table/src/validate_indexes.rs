//! Validation of the record index and the secondary indexes against the data (`arbor
//! validate`): the data side is read here (it needs the table reader), the comparison is
//! `arbor_mdt::validate`'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_mdt::column_stats::{COLUMN_STATS_PARTITION, PARTITION_STATS_PARTITION};
use arbor_mdt::column_stats_validate::validate_stats;
use arbor_mdt::secondary_index::secondary_index_partition;
use arbor_mdt::validate::{compare_record_index, compare_secondary_index, IndexDiscrepancy};
use arbor_mdt::{read_record_index, read_secondary_index, MetadataTable, SecondaryIndex};
use arbor_storage::Storage;

use crate::error::{Result, TableError};
use crate::read::TableReader;
use crate::write::record_index::has_record_index;
use crate::write::secondary_index::{secondary_indexes, table_entries};
use crate::write::SimpleIndex;

/// What [`validate_indexes`] compared and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexValidation {
    /// The indexes compared (`record_index`, `secondary_index_<name>`), each with the number of
    /// entries the data has for it.
    pub checked: Vec<(String, usize)>,
    /// Every disagreement, sorted per index.
    pub discrepancies: Vec<IndexDiscrepancy>,
}

/// Compares the record index (when the table lists it) with every live key of the latest file
/// slices (its partition and file group; no extra keys), each secondary index the table
/// lists with the (value, key) pairs of its column in the data, and the column and partition
/// stats with the statistics recomputed from the files
/// ([`arbor_mdt::column_stats_validate::validate_stats`]). Reads every latest slice of
/// the table once per index (cost of a full scan of the key and indexed columns). Empty when
/// the table has no metadata table or no index. Read only.
pub async fn validate_indexes(storage: Arc<dyn Storage>) -> Result<IndexValidation> {
    let mut out = IndexValidation::default();
    let reader = TableReader::open_view(storage.clone()).await?;
    let defs = secondary_indexes(storage.as_ref(), reader.config()).await?;
    let rli = has_record_index(reader.config());
    let lists = |p: &str| reader.config().metadata_partitions().iter().any(|m| m == p);
    let (cs, ps) = (
        lists(COLUMN_STATS_PARTITION),
        lists(PARTITION_STATS_PARTITION),
    );
    if defs.is_empty() && !rli && !cs && !ps {
        return Ok(out);
    }
    let Some(mdt) =
        MetadataTable::open_with(storage.clone(), reader.view().history().active()).await?
    else {
        return Ok(out);
    };
    if rli {
        let mut data = BTreeMap::new();
        for p in reader
            .view()
            .partitions()
            .await
            .map_err(TableError::from_fsview)?
            .iter()
        {
            for slice in reader
                .view()
                .latest_file_slices(Some(p), None)
                .await
                .map_err(TableError::from_fsview)?
            {
                for k in SimpleIndex::slice_keys(&storage, &reader, &slice).await? {
                    data.insert(k, (slice.partition.clone(), slice.file_id.clone()));
                }
            }
        }
        let index: BTreeMap<String, (String, String)> = read_record_index(storage.as_ref(), &mdt)
            .await?
            .into_iter()
            .map(|(k, e)| (k, (e.location.partition, e.location.file_id)))
            .collect();
        out.checked.push(("record_index".to_string(), data.len()));
        out.discrepancies
            .extend(compare_record_index(&data, &index));
    }
    for def in defs {
        let partition = secondary_index_partition(&def.index_name);
        let [column] = def.source_fields.as_slice() else {
            continue;
        };
        let mut data = SecondaryIndex::new();
        let entries = table_entries(&storage, &reader, column).await?;
        let count = entries.len();
        for (v, k) in entries {
            data.entry(v).or_default().insert(k);
        }
        let index = read_secondary_index(storage.as_ref(), &mdt, &partition).await?;
        out.checked.push((partition.clone(), count));
        out.discrepancies
            .extend(compare_secondary_index(&partition, &data, &index));
    }
    let stats = validate_stats(&storage, &mdt, reader.view(), cs, ps).await?;
    out.checked.extend(stats.checked);
    out.discrepancies.extend(stats.discrepancies);
    Ok(out)
}
