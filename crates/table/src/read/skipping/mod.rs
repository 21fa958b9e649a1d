//! Data skipping: what a scan plan leaves unread, and why ([`PruningReport`]).
//!
//! Every filter on a column is applied to the rows read (after the merge of each slice), so
//! skipping changes only what is read, never the answer; each rule below skips a partition or
//! file slice only when it proves no row of it matches:
//! - partition values: the partition path's values (see the filter module);
//! - the record index: key-equality filters (`_hoodie_record_key`, or the record key field of a
//!   single-field key) keep only the file groups the keys live in;
//! - secondary indexes: equality on a string column with a secondary index keeps only the file
//!   groups of the record keys holding the value.
//!
//! Index rules apply to reads of the latest state only, and can be switched off with
//! [`ReadOptions::data_skipping`](crate::read::ReadOptions::data_skipping).

mod index;
mod keys;
mod report;

pub(crate) use index::{prune_by_indexes, GroupId};
pub use report::{PruningReport, SkipReason};
