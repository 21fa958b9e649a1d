//! Whether the table's record keys are unique, as the record index assumes: it maps each key
//! to one file group, so a second copy of a key elsewhere (which `INSERT`, `BULK_INSERT` and
//! partition `INSERT_OVERWRITE` can write: they do not look keys up) would be skipped.
//!
//! Keys are taken as unique when, in the timeline (active and archived), every completed
//! write after the first one looks keys up or writes no new record (`UPSERT`, `DELETE`, their
//! `_PREPPED` forms, `COMPACT`, `LOG_COMPACT`, `CLUSTER`, `DELETE_PARTITION`, `INDEX`, `ALTER_SCHEMA`) or replaces the
//! whole table (`INSERT_OVERWRITE_TABLE`); the first write may be any insert. A write whose
//! operation cannot be read counts as one that may duplicate keys.

use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::avro::{decode_instant, InstantContent, WriteOperationType};

/// `None` when keys are unique by the rule of the module doc; else why they may not be.
pub(crate) async fn duplicate_risk(history: &TimelineHistory) -> Option<String> {
    let mut writes = history.completed_writes();
    writes.sort_by(|a, b| a.requested_time.cmp(&b.requested_time));
    for (i, instant) in writes.iter().enumerate() {
        let name = format!("{}.{}", instant.requested_time, instant.action);
        let bytes = match history
            .read_completed_content(&instant.requested_time, instant.action)
            .await
        {
            Ok(b) => b,
            Err(e) => return Some(format!("{name}: {e}")),
        };
        let legacy = instant.completion_time.is_none();
        let op = match decode_instant(instant, &bytes, &name, legacy) {
            Ok(InstantContent::Commit(m)) => m.operation_type(),
            Ok(InstantContent::ReplaceCommit(m)) => m.operation_type(),
            Ok(_) => None,
            Err(e) => return Some(format!("{name}: {e}")),
        };
        use WriteOperationType as W;
        let unique = match op {
            Some(
                W::Upsert
                | W::UpsertPrepped
                | W::Delete
                | W::DeletePrepped
                | W::Compact
                | W::LogCompact
                | W::Cluster
                | W::DeletePartition
                | W::InsertOverwriteTable
                | W::Index
                | W::AlterSchema,
            ) => true,
            Some(W::Insert | W::InsertPrepped | W::BulkInsert | W::BulkInsertPrepped) => i == 0,
            _ => false,
        };
        if !unique {
            let op = op.map_or("an unknown operation".to_string(), |o| o.name().to_string());
            return Some(format!(
                "{name} is {op}, which may write a key that already exists elsewhere"
            ));
        }
    }
    None
}
