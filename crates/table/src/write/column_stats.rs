//! Creating the `column_stats` and `partition_stats` MDT partitions of an existing table
//! (`arbor index create --column-stats / --partition-stats`); every later write keeps them in
//! step through [`arbor_mdt::MdtWriter::commit`].
//!
//! Crash safety (as for secondary indexes): the `index.json` definition is written first (it
//! is inert until the partition is listed), then the partition with its own MDT
//! initialisation instant (not read by anyone while the data table does not list it), then
//! `hoodie.table.metadata.partitions`; a crash before the last step leaves the table as it
//! was, and a retry starts the partition over.

use std::sync::Arc;

use arbor_mdt::column_stats::{COLUMN_STATS_PARTITION, PARTITION_STATS_PARTITION};
use arbor_mdt::column_stats_writer::{
    column_stats_definition, compute_all, default_columns, StatsConfig,
    DEFAULT_COLUMN_STATS_GROUPS, DEFAULT_PARTITION_STATS_GROUPS, INDEX_TYPE_COLUMN_STATS,
};
use arbor_mdt::secondary_index::IndexDefinitions;
use arbor_mdt::secondary_index_writer::save_index_definition;
use arbor_storage::Storage;
use arbor_timeline::config::keys;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{ActiveTimeline, InstantTimeGenerator, TableConfig, TableLayout};

use crate::error::{Result, TableError};
use crate::read::TableReader;

/// The key of `index.json`'s location in `hoodie.properties`.
const INDEX_DEFS_PATH_KEY: &str = "hoodie.table.index.defs.path";

/// Which stats partitions to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatsIndexes {
    /// Create `column_stats`.
    pub column_stats: bool,
    /// Create `partition_stats`.
    pub partition_stats: bool,
}

/// Creates the requested stats partitions (module doc) from the latest file slices of every
/// partition, with the columns of an existing `column_stats` definition or Java's default
/// rule. Returns the number of records written. Errors: `Unsupported` without a metadata
/// table, with pending instants, when a requested partition exists, or for partition stats
/// on a non-partitioned table; `InvalidInput` when nothing is requested.
pub async fn init_stats_indexes(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
    which: StatsIndexes,
) -> Result<usize> {
    if !which.column_stats && !which.partition_stats {
        return Err(TableError::InvalidInput {
            column: None,
            row: None,
            reason: "choose --column-stats, --partition-stats or both".to_string(),
        });
    }
    let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
    if which.partition_stats && config.partition_fields().is_empty() {
        // Java keeps no partition stats for non-partitioned tables.
        return Err(TableError::Unsupported {
            reason: "partition stats on a non-partitioned table (Hudi keeps none); use \
                     --column-stats"
                .to_string(),
        });
    }
    let listed = config.metadata_partitions();
    let wanted: Vec<&str> = [
        (which.column_stats, COLUMN_STATS_PARTITION),
        (which.partition_stats, PARTITION_STATS_PARTITION),
    ]
    .into_iter()
    .filter(|(w, _)| *w)
    .map(|(_, p)| p)
    .collect();
    if let Some(p) = wanted.iter().find(|p| listed.iter().any(|l| l == *p)) {
        return Err(TableError::Unsupported {
            reason: format!("the table already has {p}"),
        });
    }
    let Some(writer) = super::mdt_sync::writer_if_enabled(storage).await? else {
        return Err(TableError::Unsupported {
            reason: "column and partition stats live in the metadata table; create it first \
                     (arbor mdt init)"
                .to_string(),
        });
    };
    let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    if let Some(p) = tl.pending().first() {
        return Err(TableError::Unsupported {
            reason: format!(
                "the table has pending instants (first: {p}); finish or roll them back before \
                 creating column or partition stats"
            ),
        });
    }
    let has_def = IndexDefinitions::load(storage.as_ref())
        .await?
        .is_some_and(|d| d.definitions.contains_key(INDEX_TYPE_COLUMN_STATS));
    if which.column_stats && !has_def {
        let columns = default_columns(&config)?;
        let def = column_stats_definition(&columns, config.version().code());
        save_index_definition(storage.as_ref(), &def).await?;
    }
    let cfg = StatsConfig::load(storage.as_ref()).await?;
    let reader = TableReader::open_view(storage.clone()).await?;
    let partitions = reader
        .view()
        .partitions()
        .await
        .map_err(TableError::from_fsview)?;
    let all = compute_all(storage, &cfg, &partitions).await?;
    let mut written = 0;
    if which.column_stats {
        writer
            .init_stats_partition(
                COLUMN_STATS_PARTITION,
                &all.column_stats,
                DEFAULT_COLUMN_STATS_GROUPS,
                cfg.schema_json,
                generator,
            )
            .await?;
        written += all.column_stats.len();
    }
    if which.partition_stats {
        writer
            .init_stats_partition(
                PARTITION_STATS_PARTITION,
                &all.partition_stats,
                DEFAULT_PARTITION_STATS_GROUPS,
                cfg.schema_json,
                generator,
            )
            .await?;
        written += all.partition_stats.len();
    }
    let mut listed = listed;
    listed.extend(wanted.iter().map(|p| p.to_string()));
    listed.sort();
    TableConfig::update(storage.as_ref(), DEFAULT_META_DIR, |c| {
        c.set(
            INDEX_DEFS_PATH_KEY,
            arbor_mdt::secondary_index::INDEX_DEFS_PATH,
        )?;
        c.set(keys::METADATA_PARTITIONS, listed.join(","))
    })
    .await?;
    Ok(written)
}
