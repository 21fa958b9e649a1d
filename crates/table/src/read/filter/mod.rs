//! Filters: predicates on any column (and on partition fields), evaluated on partition paths
//! before any file of a partition is listed or read (partition pruning, for partition
//! fields), and on the rows read, after the merge of each file slice (every filter on a
//! column). The scan plan also prunes files by statistics and indexes for them
//! (`crate::read::skipping`). Operators: `=`, `!=`, `<`, `<=`, `>`, `>=`, `IN`, `NOT IN`,
//! `IS NULL`, `IS NOT NULL`; several filters all must hold. The text form and its grammar:
//! [`PartitionFilter::parse`].
//!
//! Fields inside struct columns are named by dot path (`rider.rating`): a name is first looked
//! up whole among the columns, then split at its dots. A field under a null struct is null.
//! `IS [NOT] NULL` takes a column of any type (structs and lists included); comparisons take
//! the comparable types below. Statistics prune no file for a field inside a struct (nor for
//! `IS [NOT] NULL` on a struct or list column); the rows are still filtered.
//!
//! Pruning: a partition path is split into one value per partition field. Hive-style paths
//! (`a=1/b=x`) are split at the segments that start with the next field's `name=`, so a value
//! holding `/` (written without `hoodie.datasource.write.partitionpath.urlencode`) stays whole;
//! other paths are split on `/` (a table with one partition field takes the whole path as the
//! value, e.g. `2024/01/31`). With the table's URL-encoding flag each value is percent-decoded.
//! A path that cannot be split unambiguously (plain segments, several fields, more segments
//! than fields) is not pruned. Paths are not values when a key generator formats them
//! (`TimestampBasedKeyGenerator`, `field:TIMESTAMP` of the custom key generator) and for
//! timestamp columns; filters on such fields prune nothing.
//!
//! Rows: every filter on a field that is a column of the read schema is also applied to the
//! rows read (as Spark does when it cannot prune), so the answer is the same whether or not a
//! partition could be pruned; a filter on a field that is not a column (partition columns
//! dropped from the data files: `hoodie.datasource.write.drop.partition.columns`) relies on
//! pruning alone, and a path it cannot split is
//! [`TableError::InvalidInput`](crate::error::TableError::InvalidInput) naming the path. The pseudo field `_hoodie_partition_path`
//! is the raw partition path.
//!
//! Values compare as strings, or typed when the field's column in the read schema is an
//! integer, floating-point, decimal, date or timestamp column (filter values of dates and
//! timestamps in ISO 8601, see [`parse_datetime`](crate::read::parse_datetime); a zone-less time is UTC for a column with
//! a time zone and the wall-clock value for one without). A value that does not parse as the
//! field's type (e.g. `__HIVE_DEFAULT_PARTITION__` for an integer field), and a null, match no
//! comparison (SQL's comparison with null); `IS NULL` on a partition field keeps only the
//! default partition `__HIVE_DEFAULT_PARTITION__` (where Hudi writes null values). Decimals
//! compare exactly at the column's scale, booleans as `false < true`.

pub(crate) mod compiled;
mod grammar;
mod pruner;
mod spec;
pub(crate) mod value;
mod value_set;

pub use pruner::PartitionPruner;
pub use spec::{FilterOp, PartitionFilter};

#[cfg(test)]
mod grammar_tests;
#[cfg(test)]
mod tests;
