//! The error type of this crate.

/// Result of a table operation.
pub type Result<T, E = TableError> = std::result::Result<T, E>;

/// Everything table operations can fail with; variants carry the table path, instant, column
/// or row concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// Storage failed.
    #[error(transparent)]
    Storage(#[from] arbor_storage::StorageError),
    /// The timeline or table config failed.
    #[error(transparent)]
    Timeline(#[from] arbor_timeline::TimelineError),
    /// The file-system view failed.
    #[error(transparent)]
    FsView(Box<arbor_fsview::FsViewError>),
    /// Reading or writing file contents failed.
    #[error(transparent)]
    Format(#[from] arbor_format::FormatError),
    /// Reading or writing the metadata table failed.
    #[error(transparent)]
    Mdt(Box<arbor_mdt::MdtError>),
    /// Input data is not acceptable (schema mismatch, null key, ...), naming the column and,
    /// where one is at fault, the row.
    #[error("invalid input{}{}: {reason}",
        column.as_ref().map(|c| format!(" in column {c:?}")).unwrap_or_default(),
        row.map(|r| format!(" at row {r}")).unwrap_or_default())]
    InvalidInput {
        /// The offending column.
        column: Option<String>,
        /// The offending row (0-based, in input order).
        row: Option<usize>,
        /// What is wrong.
        reason: String,
    },
    /// Optimistic concurrency: another instant completed since this one started and changed
    /// file groups this one also changed, or one of the two deletes a partition
    /// (`DELETE_PARTITION`) the other wrote to. This instant's files were rolled back.
    #[error(
        "commit conflict: {}",
        conflict_message(instant, other, file_groups, partitions)
    )]
    CommitConflict {
        /// The instant that lost.
        instant: String,
        /// The instant that completed first.
        other: String,
        /// The file groups both touched (`partition/fileId`, comma separated; may be empty
        /// when `partitions` is not).
        file_groups: String,
        /// The partitions one of the two instants deletes (`DELETE_PARTITION`, e.g. a TTL
        /// run) while the other wrote to them or replaced file groups in them (comma
        /// separated); empty for a conflict over file groups between other writes.
        partitions: String,
    },
    /// A handle opened as main tried to change the table after main moved to other metadata (a
    /// publication completed since it was opened). Nothing was changed; reopen and retry.
    #[error("main moved from {opened} to {now} since this handle was opened; reopen the table and retry")]
    MainMoved {
        /// The metadata the handle was opened at.
        opened: String,
        /// The metadata main resolves to now.
        now: String,
    },
    /// The table lock could not be taken or kept.
    #[error("table lock: {0}")]
    Lock(#[from] arbor_storage::LockError),
    /// At the commit point the writer found it no longer holds the table lock with the fencing
    /// token it was granted (its lease lapsed and another writer may have taken the lock): the
    /// commit was aborted before its completion was written.
    #[error(
        "commit aborted: the table lock (fencing token {token}) was lost before the commit \
         point: {reason}"
    )]
    LockLost {
        /// The fencing token the writer held.
        token: u64,
        /// Why the lease could not be confirmed.
        reason: String,
    },
    /// This writer's instant was rolled back (or is being rolled back) by another writer, e.g.
    /// because its heartbeat lapsed; the instant was not completed and never will be.
    #[error(
        "instant {instant} was rolled back by another writer ({reason}); it was not committed"
    )]
    InstantRolledBack {
        /// The instant that lost ownership.
        instant: String,
        /// What showed it (missing requested file, the rollback instant, expired heartbeat).
        reason: String,
    },
    /// [`crate::Table::write`] lost the race to other writers on every attempt its
    /// [`crate::write::RetryPolicy`] allows (each attempt's instant and files were removed;
    /// nothing of the write is visible). `last` is the error of the last attempt (a
    /// [`TableError::CommitConflict`] or [`TableError::InstantRolledBack`]).
    #[error("write gave up after {attempts} attempts (retry policy max_attempts={attempts}); last attempt: {last}")]
    RetriesExhausted {
        /// The attempts made, the first included.
        attempts: u32,
        /// The last attempt's error.
        last: Box<TableError>,
    },
    /// A file on the timeline holds content that cannot be acted on safely (e.g. a compaction
    /// plan naming an invalid partition path or file id).
    #[error("corrupt {path}: {reason}")]
    Corrupt {
        /// The file's key.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The table's version is one arbor reads but does not write (version 6): every state
    /// change is refused before anything is written, naming the conversion that makes the
    /// table writable. The CLI shows it with the table's path in place of `<path>`.
    #[error(
        "table version {version} (Hudi {release}) is read-only in arbor; run `arbor upgrade <path>` to convert it to version 9"
    )]
    ReadOnlyVersion {
        /// The table's version (`hoodie.table.version`).
        version: u32,
        /// The Hudi release line that writes that version (`0.x`).
        release: &'static str,
    },
    /// A write committed, then the inline partition TTL run after it
    /// (`hoodie.partition.ttl.inline=true`) failed; the write stays committed and the next run
    /// retries the TTL.
    #[error("write {instant} committed; the inline partition TTL run after it failed: {reason}")]
    InlineTtl {
        /// The committed write's instant.
        instant: String,
        /// Why the TTL run failed.
        reason: String,
    },
    /// The table's config does not allow the operation.
    #[error("unsupported for this table: {reason}")]
    Unsupported {
        /// What is unsupported.
        reason: String,
    },
    /// A time-travel read as of an instant whose snapshot a clean has removed files of (it
    /// would silently read an older version or nothing for those file groups).
    #[error(
        "the snapshot as of {instant} is no longer retained: clean {clean} deleted {file}, \
         which it reads; read as of a later instant (or keep snapshots with a tag or savepoint)"
    )]
    SnapshotNotRetained {
        /// The instant asked for.
        instant: String,
        /// The clean that deleted a file of that snapshot.
        clean: String,
        /// The deleted file (partition/name).
        file: String,
    },
}

impl TableError {
    pub(crate) fn from_fsview(e: arbor_fsview::FsViewError) -> Self {
        TableError::FsView(Box::new(e))
    }
}

impl From<arbor_mdt::MdtError> for TableError {
    fn from(e: arbor_mdt::MdtError) -> Self {
        TableError::Mdt(Box::new(e))
    }
}

/// The text of [`TableError::CommitConflict`] after `commit conflict: `.
fn conflict_message(instant: &str, other: &str, file_groups: &str, partitions: &str) -> String {
    if partitions.is_empty() {
        return format!(
            "instant {instant} and instant {other} both changed file groups {file_groups}; \
             {instant} was rolled back"
        );
    }
    let groups = if file_groups.is_empty() {
        String::new()
    } else {
        format!(" (file groups {file_groups})")
    };
    format!(
        "instant {instant} and instant {other} both changed partition {partitions}{groups}: \
         one of them deletes it (DELETE_PARTITION) while the other writes to it; {instant} \
         was rolled back"
    )
}

#[cfg(test)]
mod tests {
    use super::TableError;

    fn conflict(file_groups: &str, partitions: &str) -> String {
        TableError::CommitConflict {
            instant: "2".into(),
            other: "1".into(),
            file_groups: file_groups.into(),
            partitions: partitions.into(),
        }
        .to_string()
    }

    #[test]
    fn test_file_group_conflict_message_is_unchanged() {
        assert_eq!(
            conflict("p/f1,p/f2", ""),
            "commit conflict: instant 2 and instant 1 both changed file groups p/f1,p/f2; 2 was rolled back"
        );
    }

    #[test]
    fn test_partition_conflict_message_names_partition_and_groups() {
        assert_eq!(
            conflict("", "region=eu"),
            "commit conflict: instant 2 and instant 1 both changed partition region=eu: one of \
             them deletes it (DELETE_PARTITION) while the other writes to it; 2 was rolled back"
        );
        assert!(conflict("eu/f1", "eu").contains("partition eu (file groups eu/f1): "));
    }
}
