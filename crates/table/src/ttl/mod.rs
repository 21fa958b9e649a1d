//! Partition TTL (RFC-65): policies that delete whole partitions once they expire.
//!
//! # The model
//!
//! A table has at most one **default policy** and any number of **explicit policies**
//! ([`TtlPolicies`], stored in `hoodie.properties`: [`properties`] has the keys). An explicit
//! policy governs the partitions its spec matches (`region=eu`, or `region=eu/dt=2024-01-02`;
//! see [`spec`]); every other partition is governed by the default policy, if any. When two
//! explicit specs match one partition, the one fixing more fields wins; between specs fixing as
//! many fields, the one stored first wins. A partition no policy governs is never judged.
//!
//! Partitions are judged in **groups**: a default policy's `fields` (leading partition
//! fields, e.g. `region`) make one group per distinct value (no fields: the whole table is one
//! group); an explicit policy's partitions are one group. Inside a group, partitions are
//! ordered by their values of the fields below the group, field by field: numerically at a
//! level where every value of the group is an integer, else by the (URL-decoded) text; the
//! partition path breaks ties.
//!
//! # What each policy means
//!
//! - `time` (Java's `KEEP_BY_TIME`): a partition expires when the newest **base instant** of
//!   its latest file slices plus the retention is strictly before the evaluation time. As in
//!   Java, a merge-on-read log-only update (a deltacommit adding log files) does not extend a
//!   partition's life: only a new base file (insert, compaction, clustering, COW rewrite) does.
//! - `creation-time` (Java's `KEEP_BY_CREATION_TIME`): the `commitTime` of the partition's
//!   `.hoodie_partition_metadata` plus the retention is strictly before the evaluation time; a
//!   partition whose marker has no valid `commitTime` is skipped.
//! - `event-time`: the value of partition field `time_field` (and of the fields after it when
//!   the pattern has `/`s, such as `yyyy/MM/dd` over `year/month/day`), parsed with the
//!   Java-style `format` ([`pattern`]) as the **start** of the period it names (a `yyyy-MM-dd`
//!   partition `2024-01-02` with 30d expires when 2024-01-02T00:00Z + 30d is before now); a
//!   value that does not parse is skipped, named with the pattern, never deleted.
//! - `count` N: each group keeps its N partitions with the greatest values; the rest expire.
//! - `size` N bytes: each group keeps its partitions with the greatest values while their
//!   cumulative latest-slice size (base and log files) fits in N; that partition, and every
//!   smaller one, expires (a prefix is kept, never a knapsack fill).
//!
//! Times are UTC: instant times are read as UTC ([`arbor_timeline::InstantTime::to_datetime`];
//! arbor writes UTC timelines; a table with `hoodie.table.timeline.timezone=LOCAL` written by
//! Java in another zone is judged as if its instants were UTC). Durations are exact (a day is
//! 24 hours; [`values`]).
//!
//! A partition touched by a pending compaction or clustering is always skipped and named (it
//! still holds its place in a count or size ranking); the other partitions proceed (Java
//! skips the whole run). Partitions whose file groups were all replaced already are not
//! examined.
//!
//! # The run
//!
//! [`crate::Table::run_ttl`] evaluates the policies under the table lock and deletes the
//! expired partitions as one `replacecommit` with operation `DELETE_PARTITION` naming every
//! file group of them (as Java writes it), through the same code as
//! [`crate::Table::delete_partitions`], the metadata table updated in the same instant. A cap
//! (`max_partitions`, else `hoodie.partition.ttl.strategy.max.delete.partitions`; unset: no cap)
//! deletes the oldest first (ordered by the policy's time; for count and size by the last
//! modified instant; then by path) where Java cuts arbitrarily. With nothing expired no instant
//! is written. A dry run writes nothing (not even the lock) and returns the plan the run would
//! execute at that time. The cleaner later deletes the files and the directories.
//!
//! With `hoodie.partition.ttl.inline=true`, every successful [`crate::Table::write`] /
//! [`crate::Table::commit`] runs TTL afterwards; a failure of that run is returned as
//! [`crate::TableError::InlineTtl`], which says the write committed.
//!
//! # Java compatibility
//!
//! Java's write-config keys in `hoodie.properties` (`days.retain`, `strategy.type`,
//! `strategy.class`, `partition.selected`, `max.delete.partitions`, `inline`) are honoured
//! as the same policies; `partition.selected` paths match by value, so they need not match the
//! on-disk path byte for byte. Setting a policy with arbor rewrites them in RFC keys.

pub mod evaluate;
pub mod pattern;
pub mod policy;
pub mod properties;
pub mod spec;
pub mod stats;
pub mod validate;
pub mod values;

pub use crate::txn::ttl::{TtlOutcome, TtlRunOptions};
pub use evaluate::{evaluate, Expired, Skipped, TtlPlan};
pub use pattern::DatePattern;
pub use policy::{PolicyScope, Retention, TtlPolicies, TtlPolicy, TtlStrategy};
pub use spec::PartitionSpec;
pub use stats::{partition_stats, PartitionStat};
pub use validate::validate_policy;
