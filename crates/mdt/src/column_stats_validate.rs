//! Validation of the COLUMN_STATS and PARTITION_STATS partitions against the data files
//! (`arbor validate`): every stored file record is recomputed from its file and must equal
//! it field by field, and must name a file the table has; every partition's stored records
//! must cover (min not above, max not below, same value type) the statistics of its latest
//! file slices recomputed now. A file without stats is not a difference (readers treat it as
//! a candidate; Spark's DELETE commits write none), and a partition record may be looser
//! than the recomputed bound (Spark's are, after a replacecommit). On a table with Lance base
//! files a data partition without any partition record is not a difference either: Java Hudi
//! 1.2 builds the stats partitions of such a table but records no statistics of its base files
//! (and readers do not prune Lance tables by partition stats). A stats
//! partition listed but without file groups is not built and not checked.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_format::hfile::mdt_column_stats::ColumnStatsRecord;
use arbor_fsview::FileSystemView;
use arbor_storage::Storage;

use crate::column_stats::{
    read_column_stats, read_partition_stats, COLUMN_STATS_PARTITION, PARTITION_STATS_PARTITION,
};
use crate::column_stats_compute::{file_ranges, partition_ranges, ColumnRange};
use crate::column_stats_writer::{stats_partition_built, StatsConfig};
use crate::error::Result;
use crate::files::{MetadataTable, NON_PARTITIONED_KEY};
use crate::validate::IndexDiscrepancy;

/// What [`validate_stats`] compared and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsValidation {
    /// The partitions compared with their number of stored records.
    pub checked: Vec<(String, usize)>,
    /// Every disagreement.
    pub discrepancies: Vec<IndexDiscrepancy>,
}

fn differ(index: &str, detail: String) -> IndexDiscrepancy {
    IndexDiscrepancy::Stats {
        index: index.to_string(),
        detail,
    }
}

/// Whether `stored` covers `computed`'s range (module doc).
fn covers(stored: &ColumnStatsRecord, computed: &ColumnRange) -> bool {
    let vt = stored.value_type.as_ref();
    let ok = |s: &Option<_>, c: &Option<_>, bad: Ordering| match (s, c) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(s), Some(c)) => {
            let s: &arbor_format::hfile::mdt_column_stats::StatValue = s;
            s.java_cmp_typed(c, vt).is_some_and(|o| o != bad)
        }
    };
    ok(&stored.min_value, &computed.min, Ordering::Greater)
        && ok(&stored.max_value, &computed.max, Ordering::Less)
        && (computed.value_count == 0 || stored.value_type == computed.value_type)
}

/// Validates the stats partitions the MDT has (`column_stats`, `partition_stats` when `with_*`)
/// of the table at `storage` (rooted at the view of one root) against its files; `view` is the
/// data table's file-system view. Read only; reads every file that has stored stats.
pub async fn validate_stats(
    storage: &Arc<dyn Storage>,
    mdt: &MetadataTable,
    view: &FileSystemView,
    with_column_stats: bool,
    with_partition_stats: bool,
) -> Result<StatsValidation> {
    let mut out = StatsValidation::default();
    // A listed partition without file groups is not built (Java's Lance tables): unchecked.
    let with_column_stats = with_column_stats
        && stats_partition_built(storage.as_ref(), COLUMN_STATS_PARTITION).await?;
    let with_partition_stats = with_partition_stats
        && stats_partition_built(storage.as_ref(), PARTITION_STATS_PARTITION).await?;
    if !with_column_stats && !with_partition_stats {
        return Ok(out);
    }
    let cfg = StatsConfig::load(storage.as_ref()).await?;
    if with_column_stats {
        let listing = mdt.files_listing().await?;
        // File name -> partition ("" when non-partitioned).
        let mut where_is: BTreeMap<&str, &str> = BTreeMap::new();
        for (p, files) in &listing {
            let p = if p == NON_PARTITIONED_KEY {
                ""
            } else {
                p.as_str()
            };
            for f in files.keys() {
                where_is.insert(f.as_str(), p);
            }
        }
        let stored = read_column_stats(storage.as_ref(), mdt).await?;
        out.checked
            .push((COLUMN_STATS_PARTITION.to_string(), stored.len()));
        let mut by_file: BTreeMap<&str, Vec<&ColumnStatsRecord>> = BTreeMap::new();
        for rec in stored.records().values() {
            by_file
                .entry(rec.file_name.as_deref().unwrap_or_default())
                .or_default()
                .push(rec);
        }
        for (file, recs) in by_file {
            let Some(partition) = where_is.get(file) else {
                out.discrepancies.push(differ(
                    COLUMN_STATS_PARTITION,
                    format!("stats of {file}, which the table does not have"),
                ));
                continue;
            };
            let key = if partition.is_empty() {
                file.to_string()
            } else {
                format!("{partition}/{file}")
            };
            // The configured columns, and any other a record names: Java keeps a column's
            // records under the name it had when the file was written (renamed since under
            // schema on read), and such a record is right when the file's column agrees.
            let mut columns = cfg.columns.clone();
            for rec in &recs {
                if let Some(c) = rec.column_name.as_ref().filter(|c| !columns.contains(c)) {
                    columns.push(c.clone());
                }
            }
            let computed: BTreeMap<String, ColumnStatsRecord> =
                file_ranges(storage, &key, &columns, cfg.version)
                    .await?
                    .into_iter()
                    .map(|r| (r.column.clone(), r.to_record(file, false)))
                    .collect();
            for rec in recs {
                let column = rec.column_name.as_deref().unwrap_or_default();
                match computed.get(column) {
                    Some(c) if c == rec => {}
                    Some(c) => out.discrepancies.push(differ(
                        COLUMN_STATS_PARTITION,
                        format!("{key} column {column}: stored {rec:?}, recomputed {c:?}"),
                    )),
                    None => out.discrepancies.push(differ(
                        COLUMN_STATS_PARTITION,
                        format!("{key}: stats of column {column}, which the file does not have"),
                    )),
                }
            }
        }
    }
    if with_partition_stats {
        let lance = arbor_timeline::TableConfig::load(
            storage.as_ref(),
            arbor_timeline::layout::DEFAULT_META_DIR,
        )
        .await?
        .base_file_format()
            == arbor_timeline::config::BaseFileFormat::Lance;
        let stored = read_partition_stats(storage.as_ref(), mdt).await?;
        out.checked
            .push((PARTITION_STATS_PARTITION.to_string(), stored.len()));
        for partition in view.partitions().await?.iter() {
            let mut ranges = Vec::new();
            for slice in view.latest_file_slices(Some(partition), None).await? {
                for key in slice
                    .base_file_path()
                    .into_iter()
                    .chain(slice.log_file_paths())
                {
                    ranges.push(file_ranges(storage, &key, &cfg.columns, cfg.version).await?);
                }
            }
            let have = stored.partition(partition);
            if have.is_empty() && lance {
                // No stats for the partition at all on a Lance table: Java 1.2 records none
                // for partitions of Lance base files, and readers do not use them there.
                continue;
            }
            for computed in partition_ranges(&cfg.columns, ranges.iter().map(Vec::as_slice)) {
                match have.get(&computed.column) {
                    Some(s) if covers(s, &computed) => {}
                    Some(s) => out.discrepancies.push(differ(
                        PARTITION_STATS_PARTITION,
                        format!(
                            "partition {partition:?} column {}: stored {s:?} does not cover recomputed {computed:?}",
                            computed.column
                        ),
                    )),
                    None if computed.value_count > 0 => out.discrepancies.push(differ(
                        PARTITION_STATS_PARTITION,
                        format!("partition {partition:?} column {}: no stats", computed.column),
                    )),
                    None => {}
                }
            }
        }
    }
    out.discrepancies.sort();
    Ok(out)
}
