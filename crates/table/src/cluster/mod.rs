//! Clustering ([`crate::Table::cluster`]): rewriting the small file slices of a partition as
//! fewer, larger file groups whose rows are ordered by sort columns (linearly, or along a
//! Z-order or Hilbert curve), as Hudi's clustering does, so that data skipping has ranges to
//! skip on and small files stop piling up.
//!
//! An instant goes through Java's states: `<t>.clustering.requested` holding the plan
//! ([`plan`]), `<t>.clustering.inflight` (empty), then `<t>_<c>.replacecommit` with operation
//! `CLUSTER`, the new files' write stats and the replaced file groups. The metadata table
//! records the new files (and their column stats) in the same instant, the record index
//! re-points every key to its new file group, and secondary indexes are unchanged (records
//! keep their values). Until the replacecommit exists readers see the old file groups; after,
//! the new ones; branches, tags and savepoints keep the replaced files as they keep any.
//!
//! While a plan is pending, writes that update or delete records of its file groups are
//! refused (Java's default `SparkRejectUpdateStrategy`) and inserts are not packed into them.

pub(crate) mod curve;
pub(crate) mod encoder;
pub(crate) mod execute;
pub(crate) mod external_sort;
pub mod options;
pub mod plan;
pub(crate) mod sort_key;

pub use options::{ClusterOptions, Layout};

use arbor_timeline::InstantTime;

/// One clustering group, as planned or run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterGroupReport {
    /// The partition path (`""` when non-partitioned).
    pub partition: String,
    /// The file groups rewritten.
    pub input_file_groups: Vec<String>,
    /// Their bytes (base and log files).
    pub input_bytes: u64,
    /// The file groups written (empty for a dry run).
    pub output_file_groups: Vec<String>,
    /// Their bytes.
    pub output_bytes: u64,
    /// Rows rewritten (0 for a dry run).
    pub rows: u64,
    /// Sorted runs spilled to temporary files (0 when the group's rows fit the budget).
    pub spilled_runs: usize,
}

/// What one clustering did, or would do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterOutcome {
    /// The clustering instant; `None` when nothing needed clustering or for a dry run.
    pub instant: Option<InstantTime>,
    /// Its completion time (the `replacecommit`).
    pub completion_time: Option<InstantTime>,
    /// The groups, in plan order.
    pub groups: Vec<ClusterGroupReport>,
    /// True when nothing was written.
    pub dry_run: bool,
}

/// A clustering plan pending on the table (scheduled, not completed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingClustering {
    /// The clustering instant.
    pub instant: InstantTime,
    /// True when it is inflight (its execution started).
    pub inflight: bool,
    /// The `(partition, file id)` of every file group it rewrites.
    pub file_groups: Vec<(String, String)>,
    /// True when its writer's heartbeat is live (a writer may be running it now).
    pub writer_alive: bool,
}
