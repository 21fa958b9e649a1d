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
use arbor_timeline::Instant;

/// The operation of a completed write (`Ok(None)`: its metadata names none), or why it
/// cannot be read.
async fn operation_of(
    history: &TimelineHistory,
    instant: &Instant,
) -> Result<Option<WriteOperationType>, String> {
    let name = format!("{}.{}", instant.requested_time, instant.action);
    let bytes = history
        .read_completed_content(&instant.requested_time, instant.action)
        .await
        .map_err(|e| format!("{name}: {e}"))?;
    let legacy = instant.completion_time.is_none();
    match decode_instant(instant, &bytes, &name, legacy) {
        Ok(InstantContent::Commit(m)) => Ok(m.operation_type()),
        Ok(InstantContent::ReplaceCommit(m)) => Ok(m.operation_type()),
        Ok(_) => Ok(None),
        Err(e) => Err(format!("{name}: {e}")),
    }
}

fn describe(instant: &Instant, op: Option<WriteOperationType>, what: &str) -> String {
    let op = op.map_or("an unknown operation".to_string(), |o| o.name().to_string());
    format!(
        "{}.{} is {op}, which may write a key {what}",
        instant.requested_time, instant.action
    )
}

/// `None` when keys are unique by the rule of the module doc; else why they may not be.
pub(crate) async fn duplicate_risk(history: &TimelineHistory) -> Option<String> {
    let mut writes = history.completed_writes();
    writes.sort_by(|a, b| a.requested_time.cmp(&b.requested_time));
    for (i, instant) in writes.iter().enumerate() {
        let op = match operation_of(history, instant).await {
            Ok(op) => op,
            Err(why) => return Some(why),
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
            return Some(describe(instant, op, "that already exists elsewhere"));
        }
    }
    None
}

/// `None` when no file can hold a key twice: every completed write looks keys up and
/// combines the input by key (`UPSERT`, `DELETE`, their `_PREPPED` forms) or writes no new
/// record (`COMPACT`, `LOG_COMPACT`, `CLUSTER`, `DELETE_PARTITION`, `INDEX`,
/// `ALTER_SCHEMA`). Unlike [`duplicate_risk`], the first write counts too: an insert keeps
/// every input row, repeated keys included. Stops at the first other write (usually the
/// first one), so it reads few instants.
pub(crate) async fn repeat_risk(history: &TimelineHistory) -> Option<String> {
    let mut writes = history.completed_writes();
    writes.sort_by(|a, b| a.requested_time.cmp(&b.requested_time));
    for instant in &writes {
        let op = match operation_of(history, instant).await {
            Ok(op) => op,
            Err(why) => return Some(why),
        };
        use WriteOperationType as W;
        let combines = matches!(
            op,
            Some(
                W::Upsert
                    | W::UpsertPrepped
                    | W::Delete
                    | W::DeletePrepped
                    | W::Compact
                    | W::LogCompact
                    | W::Cluster
                    | W::DeletePartition
                    | W::Index
                    | W::AlterSchema,
            )
        );
        if !combines {
            return Some(describe(instant, op, "twice in one file"));
        }
    }
    None
}
