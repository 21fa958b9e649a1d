//! [`PruningReport`]: what a scan plan considered and skipped, and why.

use std::fmt;

/// Why a partition or file slice was skipped by a scan plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SkipReason {
    /// The partition path's values rule the filters out.
    PartitionValues,
    /// The metadata table's `partition_stats` prove no row of the partition matches.
    PartitionStats,
    /// The metadata table's `column_stats` prove no row of the slice matches.
    ColumnStats,
    /// The record index places every wanted record key in other file groups.
    RecordIndex,
    /// A secondary index (with the record index) places every matching record elsewhere.
    SecondaryIndex,
}

impl SkipReason {
    /// A short human name (`partition values`, `column stats`, ...).
    pub fn describe(self) -> &'static str {
        match self {
            SkipReason::PartitionValues => "partition values",
            SkipReason::PartitionStats => "partition stats",
            SkipReason::ColumnStats => "column stats",
            SkipReason::RecordIndex => "record index",
            SkipReason::SecondaryIndex => "secondary index",
        }
    }
}

/// How many partitions and file slices a scan plan considered and skipped, by reason.
///
/// Guarantees: `partitions_read() + skipped partitions == partitions_considered` and
/// `files_read() == ScanPlan::file_slices().count()`; a skipped partition's slices are not
/// counted among the files considered (they are never listed). Counts are of the plan as
/// made: nothing else is read to compute them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruningReport {
    /// Partitions of the table the plan looked at (for an incremental query: those holding
    /// slices written in the range).
    pub partitions_considered: usize,
    /// Partitions skipped because their path values rule the filters out.
    pub partitions_skipped_by_values: usize,
    /// Partitions skipped because their partition stats rule the filters out.
    pub partitions_skipped_by_stats: usize,
    /// File slices of the partitions kept.
    pub files_considered: usize,
    /// File slices skipped by column stats.
    pub files_skipped_by_column_stats: usize,
    /// File slices skipped by the record index.
    pub files_skipped_by_record_index: usize,
    /// File slices skipped by a secondary index.
    pub files_skipped_by_secondary_index: usize,
    /// Why a statistic or index that could have applied was not used (missing partition,
    /// time travel, unsupported type, ...), one line each.
    pub notes: Vec<String>,
}

impl PruningReport {
    /// Partitions whose slices are read.
    pub fn partitions_read(&self) -> usize {
        self.partitions_considered
            .saturating_sub(self.partitions_skipped_by_values)
            .saturating_sub(self.partitions_skipped_by_stats)
    }

    /// File slices read.
    pub fn files_read(&self) -> usize {
        self.files_considered
            .saturating_sub(self.files_skipped_by_column_stats)
            .saturating_sub(self.files_skipped_by_record_index)
            .saturating_sub(self.files_skipped_by_secondary_index)
    }

    /// Counts one partition skipped for `reason` (a file reason counts nothing).
    pub(crate) fn skip_partition(&mut self, reason: SkipReason) {
        match reason {
            SkipReason::PartitionValues => self.partitions_skipped_by_values += 1,
            SkipReason::PartitionStats => self.partitions_skipped_by_stats += 1,
            _ => {}
        }
    }

    /// Counts `n` file slices skipped for `reason` (a partition reason counts nothing).
    pub(crate) fn skip_files(&mut self, reason: SkipReason, n: usize) {
        match reason {
            SkipReason::ColumnStats => self.files_skipped_by_column_stats += n,
            SkipReason::RecordIndex => self.files_skipped_by_record_index += n,
            SkipReason::SecondaryIndex => self.files_skipped_by_secondary_index += n,
            _ => {}
        }
    }
}

impl fmt::Display for PruningReport {
    /// `partitions: 3 considered, 1 skipped by partition values, 0 skipped by partition
    /// stats, 2 read; file slices: ...`, then one `note: ...` line per note.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "partitions: {} considered, {} skipped by partition values, {} skipped by \
             partition stats, {} read; file slices: {} considered, {} skipped by column \
             stats, {} skipped by record index, {} skipped by secondary index, {} read",
            self.partitions_considered,
            self.partitions_skipped_by_values,
            self.partitions_skipped_by_stats,
            self.partitions_read(),
            self.files_considered,
            self.files_skipped_by_column_stats,
            self.files_skipped_by_record_index,
            self.files_skipped_by_secondary_index,
            self.files_read()
        )?;
        for note in &self.notes {
            write!(f, "\nnote: {note}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_counts_and_display() {
        let mut r = PruningReport {
            partitions_considered: 3,
            files_considered: 10,
            ..PruningReport::default()
        };
        r.skip_partition(SkipReason::PartitionValues);
        r.skip_partition(SkipReason::ColumnStats);
        r.skip_files(SkipReason::RecordIndex, 7);
        r.skip_files(SkipReason::PartitionStats, 1);
        assert_eq!(r.partitions_read(), 2);
        assert_eq!(r.files_read(), 3);
        r.notes.push("n".into());
        let text = r.to_string();
        assert!(text.contains("1 skipped by partition values"), "{text}");
        assert!(
            text.contains("7 skipped by record index, 0 skipped by secondary index, 3 read"),
            "{text}"
        );
        assert!(text.ends_with("\nnote: n"), "{text}");
    }
}
