//! Data skipping: what a scan plan leaves unread, and why ([`PruningReport`]).
//!
//! Every filter on a column is applied to the rows read (after the merge of each slice), so
//! skipping changes only what is read, never the answer; each rule below skips a partition or
//! file slice only when it proves no row of it matches:
//! - partition values: the partition path's values (see the filter module);
//! - partition stats: a filter the `partition_stats` record of its column in the partition
//!   rules out (before the partition's files are listed);
//! - column stats: a filter ruled out, for one column, by the `column_stats` record of the
//!   slice's base file and of every log file it reads (a file without a record is read);
//!   a merged row's value of a column comes from one of those files, so this holds for
//!   merge-on-read slices and partial updates alike;
//! - the record index: key-equality filters (`_hoodie_record_key`, or the record key field of a
//!   single-field key) keep only the file groups the keys live in, when the timeline shows the
//!   keys unique (no insert after the first write, see `unique_keys`);
//! - secondary indexes: equality on a string column with a secondary index (or `IN` of at
//!   most 8 values) keeps only the file groups of the record keys holding the values.
//!
//! The metadata table is opened with the plan's own data timeline, so its valid records
//! describe the same committed instants as the slices planned. Statistics and indexes describe
//! the latest state: they are used for snapshot (and read-optimized) reads of the latest
//! state only, never for time travel or incremental queries, and can be switched off with
//! [`ReadOptions::data_skipping`](crate::read::ReadOptions::data_skipping). A metadata table
//! whose statistics cannot be read skips nothing (with a warning and a note), so the read
//! still answers.

mod index;
mod keys;
mod report;
mod stats;
pub(crate) mod unique_keys;

use std::sync::Arc;

use arbor_fsview::{FileSlice, FileSystemView};
use arbor_mdt::column_stats::{
    read_column_stats_of, read_partition_stats_of, StatsIndex, COLUMN_STATS_PARTITION,
    PARTITION_STATS_PARTITION,
};
use arbor_mdt::record_index::RECORD_INDEX_PARTITION;
use arbor_mdt::MetadataTable;
use arbor_storage::Storage;
use arbor_timeline::TableConfig;
use arrow::datatypes::SchemaRef;

pub use report::{PruningReport, SkipReason};

use crate::read::filter::compiled::Compiled;
use index::{prune_by_indexes, GroupId};
use stats::may_match;

/// The statistics and indexes one plan skips by, loaded once.
pub(crate) struct Skipper<'a> {
    storage: &'a Arc<dyn Storage>,
    view: &'a FileSystemView,
    config: &'a TableConfig,
    schema: &'a SchemaRef,
    filters: &'a [Compiled],
    mdt: Option<MetadataTable>,
    column_stats: Option<StatsIndex>,
    partition_stats: Option<StatsIndex>,
}

impl<'a> Skipper<'a> {
    /// Opens the metadata table (with `view`'s data timeline) and loads the statistics the
    /// filters can use; notes why one is not used in `report`.
    pub(crate) async fn open(
        storage: &'a Arc<dyn Storage>,
        view: &'a FileSystemView,
        config: &'a TableConfig,
        schema: &'a SchemaRef,
        filters: &'a [Compiled],
        renamed: Option<&super::schema_history::RenamedColumns>,
        report: &mut PruningReport,
    ) -> Skipper<'a> {
        let mut skipper = Skipper {
            storage,
            view,
            config,
            schema,
            filters,
            mdt: None,
            column_stats: None,
            partition_stats: None,
        };
        let partitions = config.metadata_partitions();
        let listed = |p: &str| partitions.iter().any(|x| x == p);
        let wants_stats = filters.iter().any(|f| f.stats_column().is_some());
        let useful = (wants_stats
            && (listed(COLUMN_STATS_PARTITION) || listed(PARTITION_STATS_PARTITION)))
            || listed(RECORD_INDEX_PARTITION);
        if filters.is_empty() || !useful {
            return skipper;
        }
        let mdt = match MetadataTable::open_with(storage.clone(), view.history().active()).await {
            Ok(Some(mdt)) => mdt,
            Ok(None) => {
                report
                    .notes
                    .push("the table lists metadata partitions but has no metadata table".into());
                return skipper;
            }
            Err(e) => {
                tracing::warn!(error = %e, "the metadata table cannot be opened; reading without data skipping");
                report
                    .notes
                    .push(format!("the metadata table cannot be opened: {e}"));
                return skipper;
            }
        };
        // Only the filtered columns' records are read; a renamed column's are not used.
        let mut columns: Vec<&str> = filters.iter().filter_map(Compiled::stats_column).collect();
        columns.sort_unstable();
        columns.dedup();
        if let Some(r) = renamed {
            for c in columns.iter().filter(|c| r.is_renamed(c)) {
                report.notes.push(format!(
                    "column {c} was renamed under schema on read: its statistics do not cover \
                     files written before, so they are not used"
                ));
            }
            columns.retain(|c| !r.is_renamed(c));
        }
        // Java Hudi 1.2 records no statistics of Lance base files, and its partition records
        // of a merge-on-read Lance table cover only the log files: a partition record there
        // may exclude rows its base files hold. So partition stats are not used on Lance
        // tables (column stats are: a file without a record is read).
        let lance = config.base_file_format() == arbor_timeline::config::BaseFileFormat::Lance;
        if wants_stats && listed(PARTITION_STATS_PARTITION) && lance {
            report.notes.push(
                "partition stats are not used on a table with Lance base files (Java Hudi 1.2 \
                 records none of its base files)"
                    .into(),
            );
        }
        if wants_stats && listed(PARTITION_STATS_PARTITION) && !lance {
            match read_partition_stats_of(storage.as_ref(), &mdt, &columns).await {
                Ok(s) => skipper.partition_stats = Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "partition stats cannot be read; not used");
                    report
                        .notes
                        .push(format!("partition stats cannot be read: {e}"));
                }
            }
        }
        if wants_stats && listed(COLUMN_STATS_PARTITION) {
            match read_column_stats_of(storage.as_ref(), &mdt, &columns).await {
                Ok(s) => skipper.column_stats = Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "column stats cannot be read; not used");
                    report
                        .notes
                        .push(format!("column stats cannot be read: {e}"));
                }
            }
        }
        skipper.mdt = Some(mdt);
        skipper
    }

    /// Whether partition stats prove no row of `partition` matches.
    pub(crate) fn partition_ruled_out(&self, partition: &str) -> bool {
        let Some(stats) = &self.partition_stats else {
            return false;
        };
        self.filters.iter().any(|f| {
            f.stats_column()
                .is_some_and(|c| !may_match(stats.partition_column(partition, c), f))
        })
    }

    /// Whether column stats prove no row of `slice` (its base file, and its log files unless
    /// `base_only`) matches.
    fn slice_ruled_out(&self, slice: &FileSlice, base_only: bool) -> bool {
        let Some(stats) = &self.column_stats else {
            return false;
        };
        let mut files: Vec<String> = slice.base_file.iter().map(|b| b.file_name()).collect();
        if !base_only {
            files.extend(slice.log_files.iter().map(|l| l.file_name()));
        }
        if files.is_empty() {
            return false;
        }
        self.filters.iter().any(|f| {
            f.stats_column().is_some_and(|c| {
                files
                    .iter()
                    .all(|file| !may_match(stats.file_column(&slice.partition, file, c), f))
            })
        })
    }

    /// `slices` less those the indexes and column stats prove hold no matching row, counted
    /// in `report`.
    pub(crate) async fn skip_slices(
        &self,
        slices: Vec<FileSlice>,
        base_only: bool,
        report: &mut PruningReport,
    ) -> Vec<FileSlice> {
        let found = match &self.mdt {
            Some(mdt) => {
                match prune_by_indexes(
                    self.storage,
                    mdt,
                    self.view.history(),
                    self.config,
                    self.schema,
                    self.filters,
                )
                .await
                {
                    Ok(found) => found,
                    Err(e) => {
                        tracing::warn!(error = %e, "the indexes cannot be read; not used");
                        report
                            .notes
                            .push(format!("the indexes cannot be read: {e}"));
                        Default::default()
                    }
                }
            }
            None => Default::default(),
        };
        report.notes.extend(found.notes);
        let mut kept = Vec::with_capacity(slices.len());
        for s in slices {
            let id: GroupId = (s.partition.clone(), s.file_id.clone());
            if found
                .by_record_index
                .as_ref()
                .is_some_and(|g| !g.contains(&id))
            {
                report.skip_files(SkipReason::RecordIndex, 1);
            } else if found
                .by_secondary_index
                .as_ref()
                .is_some_and(|g| !g.contains(&id))
            {
                report.skip_files(SkipReason::SecondaryIndex, 1);
            } else if self.slice_ruled_out(&s, base_only) {
                report.skip_files(SkipReason::ColumnStats, 1);
            } else {
                kept.push(s);
            }
        }
        kept
    }
}
