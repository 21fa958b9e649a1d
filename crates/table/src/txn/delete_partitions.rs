//! Deleting whole partitions ([`crate::Table::delete_partitions`]): a `delete_partition`
//! replacecommit replacing every file group of the partitions.

use std::collections::{BTreeMap, BTreeSet};

use arbor_mdt::index_writer::RecordIndexDelta;
use arbor_timeline::avro::{encode_instant_for, InstantContent, WriteOperationType};
use arbor_timeline::{Action, ActiveTimeline, Instant, InstantTime, State};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;

use super::context::{invalid, Table};
use super::prepared::{abort, begin_instant, commit, PreparedWrite};
use crate::error::{Result, TableError};
use crate::read::TableReader;
use crate::write::commit::{self, Heartbeat};
use crate::write::options::CommitResult;
use crate::write::planner::{Input, WritePlan};
use crate::write::record_index::{has_record_index, replaced_keys};
use crate::write::secondary_index;

/// Deletes whole partitions (a `delete_partition` replacecommit): every file group of the
/// partitions is replaced, no file is written, `extraMetadata.schema` is recorded. Fails
/// with `InvalidInput` for an empty list; partitions without file groups are accepted.
pub(crate) async fn delete_partitions(
    table: &Table,
    partitions: &[String],
) -> Result<CommitResult> {
    let prepared = prepare_delete_partitions(table, partitions).await?;
    commit(table, prepared).await
}

/// Checks the partitions of a delete: at least one, each a valid partition path.
pub(crate) fn check_partitions(partitions: &[String]) -> Result<()> {
    if partitions.is_empty() {
        return Err(invalid(None, "no partitions to delete"));
    }
    for p in partitions {
        arbor_fsview::listing::validate_partition(p).map_err(|e| TableError::InvalidInput {
            column: None,
            row: None,
            reason: format!("partition {p:?}: {e}"),
        })?;
    }
    Ok(())
}

/// The body of a delete of `partitions` (checked with [`check_partitions`]) whose
/// `replacecommit` instant `begun` an earlier locked step started
/// ([`crate::txn::Transaction::start_instant`] with `DELETE_PARTITION`): prepared as
/// [`prepare_delete_with`] says, then committed ([`commit`]: conflict check, MDT, commit
/// point). On an error before the commit point the instant is removed.
pub(crate) async fn delete_partitions_with(
    table: &Table,
    partitions: &[String],
    begun: (ActiveTimeline, Instant, Heartbeat),
) -> Result<CommitResult> {
    let prepared = prepare_delete_with(table, partitions, begun).await?;
    commit(table, prepared).await
}

/// Phase one of a delete of `partitions` as [`crate::Table::prepare_delete_partitions`]
/// documents: starts the `DELETE_PARTITION` replacecommit and prepares it.
pub(crate) async fn prepare_delete_partitions(
    table: &Table,
    partitions: &[String],
) -> Result<PreparedWrite> {
    check_partitions(partitions)?;
    let begun = begin_instant(
        table,
        Action::ReplaceCommit,
        WriteOperationType::DeletePartition,
    )
    .await?;
    prepare_delete_with(table, partitions, begun).await
}

/// Without the lock, names every file group of the partitions' latest slices, records the
/// index deltas and moves the instant `begun` to inflight. On an error the instant is
/// removed.
async fn prepare_delete_with(
    table: &Table,
    partitions: &[String],
    begun: (ActiveTimeline, Instant, Heartbeat),
) -> Result<PreparedWrite> {
    let ctx = &table.ctx;
    let op = WriteOperationType::DeletePartition;
    let (mut tl, requested, heartbeat) = begun;
    let prepared = async {
        let reader = TableReader::open_view(ctx.storage.clone()).await?;
        let planned_against: BTreeSet<InstantTime> = reader
            .view()
            .index()
            .completed_writes()
            .map(|i| i.requested_time.clone())
            .collect();
        let mut replaced: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut touched = BTreeSet::new();
        for p in partitions {
            let slices = reader
                .view()
                .latest_file_slices(Some(p), None)
                .await
                .map_err(TableError::from_fsview)?;
            let ids: Vec<String> = slices.into_iter().map(|s| s.file_id).collect();
            for id in &ids {
                touched.insert((p.clone(), id.clone()));
            }
            if !ids.is_empty() {
                replaced.insert(p.clone(), ids);
            }
        }
        let metadata = commit::commit_metadata(op, &ctx.schema.avro_json, &[]);
        let index_delta = if has_record_index(reader.config()) {
            let mut d = RecordIndexDelta::default();
            for (p, ids) in &replaced {
                d.deletes
                    .extend(replaced_keys(&ctx.storage, &reader, p, ids).await?);
            }
            Some(d)
        } else {
            None
        };
        let si_defs =
            secondary_index::secondary_indexes(ctx.storage.as_ref(), reader.config()).await?;
        let plan = WritePlan {
            replaced: replaced.clone(),
            ..WritePlan::default()
        };
        let no_input = Input {
            batch: RecordBatch::new_empty(ctx.schema.arrow.clone()),
            keys: Vec::new(),
        };
        let secondary_deltas = Some(
            secondary_index::deltas_of(&ctx.storage, &reader, &no_input, &plan, &si_defs, None)
                .await?,
        );
        let inflight_instant = requested.with_state(State::Inflight);
        let bytes = encode_instant_for(
            &inflight_instant,
            &InstantContent::Commit(Box::new(metadata.clone())),
        )?;
        commit::check_still_requested(&ctx.storage, &ctx.layout, &requested).await?;
        let inflight = tl
            .transition_to_inflight(&requested, Bytes::from(bytes))
            .await?;
        Ok::<_, TableError>(PreparedWrite {
            inflight,
            heartbeat: heartbeat.clone(),
            operation: op,
            metadata,
            replaced: Some(replaced),
            planned_against,
            touched,
            inserted: 0,
            updated: 0,
            deleted: 0,
            skipped_stale: 0,
            index_delta,
            secondary_deltas,
            schema_changes: Vec::new(),
        })
    }
    .await;
    match prepared {
        Ok(p) => Ok(p),
        Err(e) => {
            let latest = tl
                .get(&requested.requested_time, Action::ReplaceCommit)
                .and_then(|f| f.latest().cloned())
                .unwrap_or(requested);
            heartbeat.stop().await;
            abort(table, &latest).await;
            Err(e)
        }
    }
}
