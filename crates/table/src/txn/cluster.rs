//! Clustering as an operation ([`crate::Table::cluster`] and friends): the plan is scheduled
//! in one locked step (`<t>.clustering.requested`, create-if-absent), executed without the
//! lock, and completed through [`super::prepared::commit`] (conflict check against writes
//! completed since the plan, MDT deltacommit, the commit point), as Java's clustering is.
//!
//! A run that fails before its commit point removes its own instant and files (the table is as
//! before). A process killed mid-way leaves the plan pending: its file groups refuse updates
//! (Java's rule) until [`run_pending`] completes it or [`rollback_pending`] removes it. Plans
//! other writers (Spark) scheduled run the same way.

use std::collections::{BTreeMap, BTreeSet};

use arbor_fsview::FileSlice;
use arbor_timeline::avro::{
    decode, encode_instant_for, HoodieCommitMetadata, HoodieRequestedReplaceMetadata,
    InstantContent, WriteOperationType, SCHEMA_KEY,
};
use arbor_timeline::{Action, ActiveTimeline, Instant, InstantTime, State};
use bytes::Bytes;

use super::context::{invalid, refuse_during_restore, Table};
use super::prepared::{self, PreparedWrite};
use super::transaction::{Entry, Transaction};
use crate::cluster::execute::GroupRunner;
use crate::cluster::plan::{self, PlannedGroup};
use crate::cluster::sort_key::SortKeys;
use crate::cluster::{ClusterGroupReport, ClusterOptions, ClusterOutcome, PendingClustering};
use crate::error::{Result, TableError};
use crate::read::TableReader;
use crate::write::commit::{self, Heartbeat};
use crate::write::compaction::data_schema_json;
use crate::write::record_index::has_record_index;
use crate::write::secondary_index;

/// The groups a clustering with `options` would rewrite now, and what they hold. Nothing is
/// written and no lock is taken.
pub(crate) async fn plan_only(table: &Table, options: &ClusterOptions) -> Result<ClusterOutcome> {
    options.validate()?;
    let reader = TableReader::open_view(table.ctx.storage.clone()).await?;
    let groups = plan_groups_of(&reader, options).await?;
    Ok(ClusterOutcome {
        instant: None,
        completion_time: None,
        groups: groups.iter().map(report_of_plan).collect(),
        dry_run: true,
    })
}

/// Schedules a clustering with `options` and runs it; `instant: None` when nothing needs
/// clustering.
pub(crate) async fn cluster(table: &Table, options: &ClusterOptions) -> Result<ClusterOutcome> {
    options.validate()?;
    super::writable::refuse_change_data_capture(&table.ctx.config, "clustering")?;
    let ctx = &table.ctx;
    // Bad sort columns and partitions are refused before the lock is taken.
    plan_groups_of(&TableReader::open_view(ctx.storage.clone()).await?, options).await?;
    let scheduled = Transaction::run(table, Entry::Begin, |txn| async move {
        let mut tl = txn.timeline().await?;
        refuse_during_restore(&tl)?;
        let reader = TableReader::open_view(ctx.storage.clone()).await?;
        let groups = plan_groups_of(&reader, options).await?;
        if groups.is_empty() {
            return Ok(None);
        }
        let time = tl.next_instant_time(&ctx.generator).await?;
        let metadata = plan::requested_metadata(&groups, options, options.base_uri.as_deref());
        let requested = Instant::requested(time.clone(), Action::Clustering);
        let bytes = encode_instant_for(
            &requested,
            &InstantContent::RequestedReplace(Box::new(metadata.clone())),
        )?;
        commit::beat(&ctx.storage, &time).await?;
        let heartbeat = Heartbeat::start(
            ctx.storage.clone(),
            time.clone(),
            ctx.options.heartbeat_timeout,
        );
        let requested = tl
            .create_requested(time, Action::Clustering, Bytes::from(bytes))
            .await?;
        Ok(Some((tl, requested, heartbeat, metadata)))
    })
    .await?;
    let Some((tl, requested, heartbeat, metadata)) = scheduled else {
        return Ok(ClusterOutcome::default());
    };
    let run = execute(table, tl, &requested, &heartbeat, &metadata, options).await;
    match run {
        Ok(prepared) => finish(table, prepared).await,
        Err((e, latest)) => {
            heartbeat.stop().await;
            prepared::abort(table, &latest).await;
            Err(e)
        }
    }
}

/// The clustering plans pending on the table, oldest first.
pub(crate) async fn pending(table: &Table) -> Result<Vec<PendingClustering>> {
    let ctx = &table.ctx;
    let tl = ActiveTimeline::load(ctx.storage.clone(), ctx.layout.clone()).await?;
    let mut out = Vec::new();
    for (time, requested, inflight) in pending_instants(&tl) {
        let metadata = read_plan(&tl, &requested).await?;
        let file_groups = metadata
            .clustering_plan
            .iter()
            .flat_map(|p| p.slices())
            .map(|s| {
                (
                    s.partition_path.clone().unwrap_or_default(),
                    s.file_id.clone().unwrap_or_default(),
                )
            })
            .collect();
        let writer_alive =
            commit::is_alive(&ctx.storage, &time, ctx.options.heartbeat_timeout).await?;
        out.push(PendingClustering {
            instant: time,
            inflight,
            file_groups,
            writer_alive,
        });
    }
    Ok(out)
}

/// Runs every pending clustering plan whose writer is not running (no live heartbeat), oldest
/// first, as its plan says: sort columns and layout from the plan's strategy parameters, else
/// the table's configuration. A plan whose writer is alive is an error naming it.
pub(crate) async fn run_pending(table: &Table) -> Result<Vec<ClusterOutcome>> {
    let ctx = &table.ctx;
    super::writable::refuse_change_data_capture(&ctx.config, "clustering")?;
    let mut out = Vec::new();
    loop {
        let claimed = Transaction::run(table, Entry::Service, |txn| async move {
            let tl = txn.timeline().await?;
            refuse_during_restore(&tl)?;
            let Some((time, requested, _)) = pending_instants(&tl).into_iter().next() else {
                return Ok(None);
            };
            if commit::is_alive(&ctx.storage, &time, ctx.options.heartbeat_timeout).await? {
                return Err(TableError::Unsupported {
                    reason: format!(
                        "clustering {time} is being run by another writer (its heartbeat is \
                         live); wait for it, or run again once its heartbeat lapses"
                    ),
                });
            }
            let metadata = read_plan(&tl, &requested).await?;
            commit::beat(&ctx.storage, &time).await?;
            let heartbeat =
                Heartbeat::start(ctx.storage.clone(), time, ctx.options.heartbeat_timeout);
            Ok(Some((tl, requested, heartbeat, metadata)))
        })
        .await?;
        let Some((tl, requested, heartbeat, metadata)) = claimed else {
            return Ok(out);
        };
        let mut options = ClusterOptions::from_config(&ctx.config)?;
        if let Some(params) = metadata
            .clustering_plan
            .as_ref()
            .and_then(|p| p.strategy.as_ref())
            .and_then(|s| s.strategy_params.as_ref())
        {
            options.apply(|k| params.get(k).cloned())?;
        }
        if options.sort_by.is_empty() {
            options.layout = crate::cluster::Layout::Linear;
        }
        match execute(table, tl, &requested, &heartbeat, &metadata, &options).await {
            Ok(prepared) => out.push(finish(table, prepared).await?),
            Err((e, _)) => {
                // The plan stays pending (another writer's plan is not ours to drop); a rerun
                // removes what this attempt wrote.
                heartbeat.stop().await;
                let _ = commit::stop_heartbeat(&ctx.storage, &requested.requested_time).await;
                return Err(e);
            }
        }
    }
}

/// Rolls back every pending clustering plan whose writer is not running: its files and
/// instant are removed, its file groups take updates again. Returns the rolled-back instants.
pub(crate) async fn rollback_pending(table: &Table) -> Result<Vec<InstantTime>> {
    let ctx = &table.ctx;
    Transaction::run(table, Entry::Service, |txn| async move {
        let tl = txn.timeline().await?;
        let mut done = Vec::new();
        for (time, requested, inflight) in pending_instants(&tl) {
            if commit::is_alive(&ctx.storage, &time, ctx.options.heartbeat_timeout).await? {
                return Err(TableError::Unsupported {
                    reason: format!(
                        "clustering {time} is being run by another writer (its heartbeat is \
                         live); nothing was rolled back after it"
                    ),
                });
            }
            let latest = if inflight {
                requested.with_state(State::Inflight)
            } else {
                requested
            };
            txn.rollback_instant(&latest).await?;
            let _ = commit::stop_heartbeat(&ctx.storage, &time).await;
            done.push(time);
        }
        Ok(done)
    })
    .await
}

/// `(time, requested, inflight?)` of each pending clustering instant, oldest first.
fn pending_instants(tl: &ActiveTimeline) -> Vec<(InstantTime, Instant, bool)> {
    let mut out: BTreeMap<InstantTime, (Instant, bool)> = BTreeMap::new();
    for i in tl.filter(&[Action::Clustering], &[State::Requested, State::Inflight]) {
        let Some(files) = tl.get(&i.requested_time, Action::Clustering) else {
            continue;
        };
        if files.completed.is_some() {
            continue;
        }
        if let Some(r) = &files.requested {
            out.insert(
                i.requested_time.clone(),
                (r.clone(), files.inflight.is_some()),
            );
        }
    }
    out.into_iter().map(|(t, (r, f))| (t, r, f)).collect()
}

async fn read_plan(
    tl: &ActiveTimeline,
    requested: &Instant,
) -> Result<HoodieRequestedReplaceMetadata> {
    let key = tl.key_of(requested)?;
    let m: HoodieRequestedReplaceMetadata = decode(&tl.read(requested).await?, &key)?;
    if m.clustering_plan.is_none() {
        return Err(TableError::Corrupt {
            path: key,
            reason: "a pending clustering instant without a clustering plan".into(),
        });
    }
    Ok(m)
}

/// The planned groups of `options` on the state `reader` sees.
async fn plan_groups_of(
    reader: &TableReader,
    options: &ClusterOptions,
) -> Result<Vec<PlannedGroup>> {
    // Unknown sort columns are refused before anything is planned.
    SortKeys::new(reader.schema(), &options.sort_by, options.layout)?;
    let view = reader.view();
    let all = view.partitions().await.map_err(TableError::from_fsview)?;
    let partitions: Vec<String> = if options.partitions.is_empty() {
        all.to_vec()
    } else {
        for p in &options.partitions {
            if !all.contains(p) {
                let known: Vec<&str> = all.iter().take(10).map(String::as_str).collect();
                return Err(invalid(
                    None,
                    format!(
                        "partition {p:?} is not a partition of the table ({} partitions{}{})",
                        all.len(),
                        if known.is_empty() { "" } else { ", e.g. " },
                        known.join(", ")
                    ),
                ));
            }
        }
        options.partitions.clone()
    };
    let mut slices: BTreeMap<String, Vec<FileSlice>> = BTreeMap::new();
    for p in partitions {
        let latest = view
            .latest_file_slices(Some(&p), None)
            .await
            .map_err(TableError::from_fsview)?;
        slices.insert(p, latest.into_iter().collect());
    }
    let busy = crate::write::compaction::busy_file_groups(view);
    Ok(plan::plan_groups(&slices, &busy, options))
}

fn report_of_plan(g: &PlannedGroup) -> ClusterGroupReport {
    ClusterGroupReport {
        partition: g.partition.clone(),
        input_file_groups: g.slices.iter().map(|s| s.file_id.clone()).collect(),
        input_bytes: g.bytes(),
        ..ClusterGroupReport::default()
    }
}

type Failed = (TableError, Instant);

/// Moves the plan `requested` to inflight (removing what an earlier attempt wrote), runs its
/// groups and prepares the commit. On an error: the error and the instant's latest state.
async fn execute(
    table: &Table,
    mut tl: ActiveTimeline,
    requested: &Instant,
    heartbeat: &Heartbeat,
    metadata: &HoodieRequestedReplaceMetadata,
    options: &ClusterOptions,
) -> std::result::Result<(PreparedWrite, Vec<ClusterGroupReport>), Failed> {
    let ctx = &table.ctx;
    let time = requested.requested_time.clone();
    let inflight_now = tl
        .get(&time, Action::Clustering)
        .is_some_and(|f| f.inflight.is_some());
    let plan = metadata.clustering_plan.clone().unwrap_or_default();
    let groups: Vec<_> = plan.input_groups.clone().unwrap_or_default();
    let inflight = if inflight_now {
        let partitions: BTreeSet<String> = plan
            .slices()
            .map(|s| s.partition_path.clone().unwrap_or_default())
            .collect();
        crate::write::rollback::delete_files_written_by(&table.ctx.storage, &partitions, &time)
            .await
            .map_err(|e| (e, requested.with_state(State::Inflight)))?;
        requested.with_state(State::Inflight)
    } else {
        tl.transition_to_inflight(requested, Bytes::new())
            .await
            .map_err(|e| (e.into(), requested.clone()))?
    };
    let result = async {
        let reader = std::sync::Arc::new(TableReader::open_view(ctx.storage.clone()).await?);
        let schema_json = data_schema_json(&reader).await?;
        let avro_schema =
            arbor_format::base::BaseFileWriter::avro_schema_with_meta_fields(&schema_json)?;
        let indexed = has_record_index(reader.config());
        let runner = GroupRunner {
            storage: &ctx.storage,
            reader: &reader,
            instant: &time,
            avro_schema: &avro_schema,
            options,
            collect_keys: indexed,
        };
        let mut commit_meta = HoodieCommitMetadata {
            partition_to_write_stats: Some(BTreeMap::new()),
            compacted: Some(false),
            version: Some(1),
            ..HoodieCommitMetadata::default()
        };
        let mut replaced: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut touched = BTreeSet::new();
        let mut delta = arbor_mdt::index_writer::RecordIndexDelta::default();
        let millis = arbor_mdt::index_writer::instant_millis(&time);
        let mut reports = Vec::new();
        for (index, group) in groups.iter().enumerate() {
            let slices = runner.slices_of(index, group).await?;
            let out = runner.run(index, &slices).await?;
            for s in &slices {
                replaced
                    .entry(s.partition.clone())
                    .or_default()
                    .push(s.file_id.clone());
                touched.insert((s.partition.clone(), s.file_id.clone()));
            }
            let mut report = ClusterGroupReport {
                partition: out.partition.clone(),
                input_file_groups: slices.iter().map(|s| s.file_id.clone()).collect(),
                input_bytes: out.input_bytes,
                rows: out.rows,
                spilled_runs: out.spilled_runs,
                ..ClusterGroupReport::default()
            };
            for stat in out.stats {
                let id = stat.file_id.clone().unwrap_or_default();
                touched.insert((out.partition.clone(), id.clone()));
                report.output_file_groups.push(id);
                report.output_bytes +=
                    u64::try_from(stat.file_size_in_bytes.unwrap_or(0)).unwrap_or(0);
                commit_meta.add_write_stat(out.partition.clone(), stat);
            }
            for (key, file_id) in out.keys {
                delta.upserts.insert(
                    key,
                    arbor_format::hfile::mdt_index::RecordLocation {
                        partition: out.partition.clone(),
                        file_id,
                        instant_time_millis: millis,
                    },
                );
            }
            reports.push(report);
        }
        commit_meta.insert_extra(SCHEMA_KEY, &schema_json);
        commit_meta.set_operation_type(WriteOperationType::Cluster);
        // The writes the plan saw: completed before it was scheduled.
        let planned_against: BTreeSet<InstantTime> = tl
            .completed()
            .into_iter()
            .filter(|i| i.completion_time.as_ref().unwrap_or(&i.requested_time) < &time)
            .map(|i| i.requested_time)
            .collect();
        let secondary = secondary_index::unchanged(ctx.storage.as_ref(), reader.config()).await?;
        Ok::<_, TableError>((
            PreparedWrite {
                inflight: inflight.clone(),
                heartbeat: heartbeat.clone(),
                operation: WriteOperationType::Cluster,
                metadata: commit_meta,
                replaced: Some(replaced),
                planned_against,
                touched,
                inserted: 0,
                updated: 0,
                deleted: 0,
                skipped_stale: 0,
                index_delta: indexed.then_some(delta),
                secondary_deltas: Some(secondary),
                schema_changes: Vec::new(),
            },
            reports,
        ))
    }
    .await;
    result.map_err(|e| (e, inflight))
}

/// Completes a prepared clustering.
async fn finish(
    table: &Table,
    (prepared, groups): (PreparedWrite, Vec<ClusterGroupReport>),
) -> Result<ClusterOutcome> {
    let result = prepared::commit(table, prepared).await?;
    Ok(ClusterOutcome {
        instant: Some(result.instant),
        completion_time: Some(result.completion_time),
        groups,
        dry_run: false,
    })
}
