//! Options and results of the write path.

use arbor_timeline::avro::WriteOperationType;
use arbor_timeline::config::{RecordMergeMode, TableType, TableVersion};
use arbor_timeline::{Action, InstantTime};
use arrow::datatypes::SchemaRef;

pub use arbor_format::base::BaseFormat;

/// What a new table looks like.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// `hoodie.table.name`.
    pub name: String,
    /// Copy-on-write or merge-on-read.
    pub table_type: TableType,
    /// Record key columns (one: SIMPLE key generator; several: COMPLEX).
    pub record_key_fields: Vec<String>,
    /// Partition columns; empty for a non-partitioned table.
    pub partition_fields: Vec<String>,
    /// `field=value` partition directories.
    pub hive_style_partitioning: bool,
    /// The ordering (precombine) column, if any.
    pub ordering_field: Option<String>,
    /// The merge mode; `None`: event-time ordering with an ordering field, else commit time.
    pub merge_mode: Option<RecordMergeMode>,
    /// The data schema (without meta columns).
    pub schema: SchemaRef,
    /// Create the metadata table (FILES partition) with the table; writers then keep it in
    /// step with every commit and readers list files through it. `true` is the default of
    /// `arbor create`.
    pub metadata_table: bool,
    /// The table version to create: 8 or 9 (the default, [`TableVersion::default`]); 6 is
    /// refused. Every later state change keeps the table at this version.
    pub table_version: TableVersion,
    /// The format of the table's base files (`hoodie.table.base.file.format`): parquet (the
    /// default) or Lance (Hudi 1.2; needs table version 9 and the `lance` feature).
    pub base_format: BaseFormat,
}

/// Tuning of writes.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteOptions {
    /// Largest base file to write (bytes, estimated from the input); default 120 MiB.
    pub max_file_size: u64,
    /// Base files smaller than this receive new inserts (small-file packing); default 100 MiB;
    /// 0 disables packing.
    pub small_file_limit: u64,
    /// Merge-on-read: compact inline after this many deltacommits since the last compaction;
    /// `None` never compacts inline.
    pub inline_compact_every: Option<u32>,
    /// How long to wait for the table lock; default 120 s, longer than a lease of the lock
    /// (`commit::LEASE`, 10 s), so that a waiter outlasts a holder that died holding it.
    pub lock_timeout: std::time::Duration,
    /// How far ahead of this machine's clock the table's instant times may run (default 5
    /// minutes, `arbor_timeline::generator::DEFAULT_MAX_AHEAD`): a write that would take an
    /// instant time further ahead (the table's clock was set ahead by a writer with a wrong
    /// clock, or by hand) is refused with `ClockAhead` before anything is written.
    pub max_clock_ahead: std::time::Duration,
    /// A pending write whose writer has not sent a heartbeat for this long is considered failed
    /// and is rolled back by the next writer; default 60 s. `Duration::ZERO` rolls back every
    /// pending write (only safe with a single writer).
    pub heartbeat_timeout: std::time::Duration,
    /// With a record index (global keys): what an upsert does with a key that exists in
    /// another partition than the row's; default update in place.
    pub key_move: KeyMove,
    /// Hudi's schema evolution on write: input columns the table lacks are added (nullable;
    /// older rows read null) and wider input types promote a column when no stored value
    /// changes (`int -> long`, `int -> double`, `float -> double`, wider decimals); default
    /// on. Off, a new column is `InvalidInput` and values of a wider type must fit the
    /// column's type exactly.
    pub schema_evolution: bool,
    /// Top-level columns this write drops from the table schema: the schema it records
    /// (`extraMetadata.schema`) omits them, so readers no longer show them; files written
    /// before keep their values, unread. Input columns of these names are not written. Record
    /// key, partition and ordering columns cannot be dropped, nor meta columns; a name the
    /// table lacks is `InvalidInput`. Default none. (Hudi's equivalent is a write with
    /// `hoodie.datasource.write.schema.allow.auto.evolution.column.drop=true` whose input
    /// lacks the columns.)
    pub drop_columns: Vec<String>,
    /// Partial updates: an upsert whose input lacks some of the table's columns keeps, for
    /// every key already in the table, the stored values of those columns (new keys get
    /// nulls), instead of failing. Costs a snapshot read of the table; default off.
    pub partial_updates: bool,
    /// How [`crate::Table::write`] retries a write that lost a race (a commit conflict, or its
    /// instant rolled back by another writer): each attempt re-plans on the fresh timeline.
    /// Default on ([`RetryPolicy::default`]); [`RetryPolicy::none`] makes one attempt.
    /// [`crate::Table::prepare`] / [`crate::Table::commit`] never retry.
    pub retry: RetryPolicy,
    /// The metadata table cleans its own superseded file slices after its compaction, as
    /// Java's metadata writer does (`arbor_mdt::clean`: retention of 20 MDT commits, never a
    /// file another root, tag, savepoint, clone pin or pending instant needs); default on. Off,
    /// the MDT's file count grows with history (for comparisons only).
    pub mdt_clean: bool,
    /// How many base files a write builds and encodes at once, each on its own thread;
    /// default [`std::thread::available_parallelism`]. The files, their names and the commit
    /// metadata are the same whatever the value (results are taken in plan order).
    pub parallelism: std::num::NonZeroUsize,
    /// Bytes of encoded rows a streamed bulk insert ([`crate::Table::write_stream`]) holds in
    /// its open base files (one per partition the input touches); default 96 MiB. When the
    /// open files reach it, the largest is closed and stored early (it is then smaller than
    /// `max_file_size`), so memory does not grow with the input or the number of partitions.
    pub stream_memory: u64,
}

/// How [`crate::Table::write`] retries a write that lost a race to another writer.
///
/// Retried: [`crate::TableError::CommitConflict`] (another write completed first and changed
/// what this one changed) and [`crate::TableError::InstantRolledBack`] (another writer rolled
/// this one's instant back, e.g. after its heartbeat lapsed). Each failed attempt has already
/// removed its own instant and files before the next one starts; every attempt takes a new
/// instant, re-plans on the freshly loaded timeline and re-reads the index. Any other error
/// ends the write at once. When every attempt lost,
/// [`crate::TableError::RetriesExhausted`] names the attempts and the last error.
///
/// Before attempt `n + 1` (n >= 1) the writer sleeps `min(max_backoff, initial_backoff * 2^(n-1))`,
/// of which, with `jitter`, a uniformly random part of up to half is taken off (so that writers
/// that collided once do not collide again in step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; at least 1 (0 is treated as 1). Default 20.
    pub max_attempts: u32,
    /// The sleep before the second attempt; default 100 ms.
    pub initial_backoff: std::time::Duration,
    /// The longest sleep between two attempts; default 5 s.
    pub max_backoff: std::time::Duration,
    /// Randomise each sleep (between half and all of it); default on.
    pub jitter: bool,
}

impl RetryPolicy {
    /// One attempt, no retry.
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The sleep before attempt `attempt + 1`, after `attempt` (>= 1) failed attempts, given a
    /// random `unit` in `[0, 1)` (ignored without jitter).
    pub fn backoff(&self, attempt: u32, unit: f64) -> std::time::Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let full = self
            .initial_backoff
            .saturating_mul(1u32 << exp)
            .min(self.max_backoff);
        if self.jitter {
            full.mul_f64(1.0 - 0.5 * unit.clamp(0.0, 1.0))
        } else {
            full
        }
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 20,
            initial_backoff: std::time::Duration::from_millis(100),
            max_backoff: std::time::Duration::from_secs(5),
            jitter: true,
        }
    }
}

/// The default [`WriteOptions::parallelism`]: the CPUs available to the process (1 when that
/// is unknown).
pub fn default_parallelism() -> std::num::NonZeroUsize {
    std::thread::available_parallelism().unwrap_or(std::num::NonZeroUsize::MIN)
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            max_file_size: 120 * 1024 * 1024,
            small_file_limit: 100 * 1024 * 1024,
            inline_compact_every: None,
            lock_timeout: std::time::Duration::from_secs(120),
            max_clock_ahead: arbor_timeline::generator::DEFAULT_MAX_AHEAD,
            heartbeat_timeout: std::time::Duration::from_secs(60),
            key_move: KeyMove::default(),
            schema_evolution: true,
            drop_columns: Vec::new(),
            partial_updates: false,
            retry: RetryPolicy::default(),
            mdt_clean: true,
            parallelism: default_parallelism(),
            stream_memory: 96 * 1024 * 1024,
        }
    }
}

/// A write operation on record batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOperation {
    /// Insert records (existing keys are not looked up; duplicates may result).
    Insert,
    /// Insert without small-file packing or index lookups, for large initial loads.
    BulkInsert,
    /// Insert new keys, update existing ones.
    Upsert,
    /// Delete the records whose keys the batches name.
    Delete,
    /// Replace the partitions the batches touch with the batches' records.
    InsertOverwrite,
    /// Replace the whole table with the batches' records.
    InsertOverwriteTable,
}

impl WriteOperation {
    /// The operation type recorded in commit metadata.
    pub fn operation_type(self) -> WriteOperationType {
        match self {
            WriteOperation::Insert => WriteOperationType::Insert,
            WriteOperation::BulkInsert => WriteOperationType::BulkInsert,
            WriteOperation::Upsert => WriteOperationType::Upsert,
            WriteOperation::Delete => WriteOperationType::Delete,
            WriteOperation::InsertOverwrite => WriteOperationType::InsertOverwrite,
            WriteOperation::InsertOverwriteTable => WriteOperationType::InsertOverwriteTable,
        }
    }
}

/// What a completed commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitResult {
    /// The instant (requested) time.
    pub instant: InstantTime,
    /// The completion time.
    pub completion_time: InstantTime,
    /// The completed action (`commit`, `deltacommit`, `replacecommit`).
    pub action: Action,
    /// The operation.
    pub operation: WriteOperationType,
    /// Records inserted.
    pub inserted: u64,
    /// Records updated.
    pub updated: u64,
    /// Records deleted.
    pub deleted: u64,
    /// Data files written (base and log files).
    pub files_written: usize,
    /// File groups replaced (insert overwrite, delete partition).
    pub file_groups_replaced: usize,
    /// Input records not written because they lose to the stored record of their key under
    /// event-time ordering (a smaller ordering value than the current record's, or a null
    /// against a non-null one: `arbor_table::read::newer_wins`); counted neither as inserted
    /// nor as updated (as Java's merge handle, which drops them and counts no update).
    /// Merge-on-read leaves them out of the log; copy-on-write rewrites the stored record
    /// unchanged.
    pub skipped_stale: u64,
    /// How the write changed the table's schema (columns added, types widened); empty when
    /// it did not.
    pub schema_changes: Vec<super::schema::SchemaChange>,
    /// The attempts [`crate::Table::write`] made, this committed one included (1 when it
    /// did not lose a race; always 1 for [`crate::Table::commit`] and table services).
    pub attempts: u32,
}

/// What an upsert does with a key the (global) record index finds in another partition than
/// the input row's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyMove {
    /// Update the record where it is: the row is written to the key's current partition and
    /// file group (Java's default, `hoodie.record.index.update.partition.path=false`).
    #[default]
    UpdateInPlace,
    /// Delete the record from its current partition and insert the row into the new one.
    DeleteAndInsert,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::RetryPolicy;

    #[test]
    fn test_backoff_doubles_up_to_the_cap_and_jitter_takes_at_most_half() {
        let p = RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            jitter: false,
        };
        assert_eq!(p.backoff(1, 0.9), Duration::from_millis(100));
        assert_eq!(p.backoff(2, 0.9), Duration::from_millis(200));
        assert_eq!(p.backoff(3, 0.9), Duration::from_millis(350));
        assert_eq!(p.backoff(60, 0.9), Duration::from_millis(350));
        let j = RetryPolicy { jitter: true, ..p };
        assert_eq!(j.backoff(1, 0.0), Duration::from_millis(100));
        assert_eq!(j.backoff(1, 1.0), Duration::from_millis(50));
        assert_eq!(j.backoff(2, 0.5), Duration::from_millis(150));
    }
}
