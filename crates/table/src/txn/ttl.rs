//! Partition TTL as a state change ([`crate::Table::run_ttl`], [`crate::Table::set_ttl_policy`],
//! [`crate::Table::unset_ttl_policy`]); the rules are in [`crate::ttl`].
//!
//! A run is two locked steps, like every write: (1) *begin*: read the policies from the
//! root's `hoodie.properties`, the partition statistics from the file-system view (MDT FILES
//! when present), evaluate, and, when something expired, start the `DELETE_PARTITION`
//! replacecommit; (2) the delete's body ([`super::delete_partitions::delete_partitions_with`])
//! and its commit (*resume*: conflict check, MDT deltacommit, commit point). A crash anywhere
//! leaves a requested or inflight replacecommit the next writer rolls back, or the completed
//! one.

use arbor_timeline::avro::WriteOperationType;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{Action, TableConfig};
use chrono::Utc;

use super::context::Table;
use super::delete_partitions::{check_partitions, delete_partitions_with};
use super::transaction::{Entry, Transaction};
use crate::error::{Result, TableError};
use crate::read::TableReader;
use crate::ttl::evaluate::{evaluate, TtlPlan};
use crate::ttl::policy::{PolicyScope, TtlPolicies, TtlPolicy, TtlStrategy};
use crate::ttl::properties;
use crate::ttl::spec::field_names;
use crate::ttl::stats::partition_stats;
use crate::ttl::validate::validate_policy;
use crate::write::options::CommitResult;

/// How a TTL run is made.
#[derive(Debug, Clone, Default)]
pub struct TtlRunOptions {
    /// The evaluation time (default: now).
    pub now: Option<chrono::DateTime<chrono::Utc>>,
    /// Plan only: write nothing (not even the lock) and return the plan the run would execute.
    pub dry_run: bool,
    /// The most partitions this run deletes (default: the table's
    /// `hoodie.partition.ttl.strategy.max.delete.partitions`, else no cap); the oldest go first.
    pub max_partitions: Option<usize>,
}

/// What a TTL run did.
#[derive(Debug, Clone)]
pub struct TtlOutcome {
    /// What the run judged.
    pub plan: TtlPlan,
    /// the DELETE_PARTITION replacecommit (None: dry run or nothing expired)
    pub commit: Option<crate::CommitResult>,
}

/// The policies, statistics and plan of `table`'s root as storage holds them now.
async fn plan(table: &Table, options: &TtlRunOptions) -> Result<TtlPlan> {
    let ctx = &table.ctx;
    let now = options.now.unwrap_or_else(Utc::now);
    let config = TableConfig::load(ctx.storage.as_ref(), DEFAULT_META_DIR).await?;
    let policies = TtlPolicies::from_config(&config)?;
    let cap = options.max_partitions.or(policies.max_partitions);
    let fields = config.partition_fields();
    if policies.is_empty() {
        return evaluate(&policies, &fields, &[], now, cap);
    }
    let reader = TableReader::open_view(ctx.storage.clone()).await?;
    let stats = partition_stats(
        reader.view(),
        &ctx.storage,
        policies.uses(TtlStrategy::CreationTime),
    )
    .await?;
    evaluate(&policies, &fields, &stats, now, cap)
}

/// Runs TTL on `table` (see the module doc). A dry run only plans, without the lock.
pub(crate) async fn run(table: &Table, options: &TtlRunOptions) -> Result<TtlOutcome> {
    if options.max_partitions == Some(0) {
        return Err(TableError::InvalidInput {
            column: None,
            row: None,
            reason: "max partitions must be at least 1".to_string(),
        });
    }
    if options.dry_run {
        return Ok(TtlOutcome {
            plan: Box::pin(plan(table, options)).await?,
            commit: None,
        });
    }
    let (plan, begun) = Transaction::run(table, Entry::Begin, |txn| async move {
        let plan = Box::pin(plan(table, options)).await?;
        if plan.expired.is_empty() {
            return Ok((plan, None));
        }
        check_partitions(&plan.expired_partitions())?;
        let begun = txn
            .start_instant(Action::ReplaceCommit, WriteOperationType::DeletePartition)
            .await?;
        Ok((plan, Some(begun)))
    })
    .await?;
    let Some(begun) = begun else {
        return Ok(TtlOutcome { plan, commit: None });
    };
    let partitions = plan.expired_partitions();
    let commit = Box::pin(delete_partitions_with(table, &partitions, begun)).await?;
    Ok(TtlOutcome {
        plan,
        commit: Some(commit),
    })
}

/// After a successful write's commit: runs TTL when `hoodie.partition.ttl.inline=true` in the
/// root's `hoodie.properties`. Errors are [`TableError::InlineTtl`], naming the committed
/// write.
pub(crate) async fn inline_ttl(table: &Table, written: &CommitResult) -> Result<()> {
    let ctx = &table.ctx;
    let r = async {
        let config = TableConfig::load(ctx.storage.as_ref(), DEFAULT_META_DIR).await?;
        let inline = config
            .get(properties::INLINE)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if !inline {
            return Ok(());
        }
        Box::pin(run(table, &TtlRunOptions::default())).await?;
        Ok::<_, TableError>(())
    }
    .await;
    r.map_err(|e| TableError::InlineTtl {
        instant: written.instant.to_string(),
        reason: e.to_string(),
    })
}

/// Sets `policy` (replacing the policy of the same scope) in the root's `hoodie.properties`,
/// under the lock. Returns the new set.
pub(crate) async fn set_policy(table: &Table, policy: TtlPolicy) -> Result<TtlPolicies> {
    let fields = field_names(&table.ctx.config.partition_fields());
    let policy = validate_policy(&policy, &fields)?;
    change(table, move |set| {
        match &policy.scope {
            PolicyScope::Default { .. } => set.default = Some(policy),
            PolicyScope::Spec(_) => match set.explicit.iter_mut().find(|p| p.scope == policy.scope)
            {
                Some(existing) => *existing = policy,
                None => set.explicit.push(policy),
            },
        }
        Ok(())
    })
    .await
}

/// Removes the default policy (`spec` None) or the explicit policy of `spec`, under the lock.
/// An absent policy is an error. Returns the new set.
pub(crate) async fn unset_policy(table: &Table, spec: Option<&str>) -> Result<TtlPolicies> {
    let fields = field_names(&table.ctx.config.partition_fields());
    let scope = spec
        .map(|s| crate::ttl::spec::PartitionSpec::parse(s, &fields).map(|p| p.normalized()))
        .transpose()?;
    change(table, move |set| {
        let absent = |what: String| TableError::InvalidInput {
            column: None,
            row: None,
            reason: format!("no TTL policy {what} to unset"),
        };
        match &scope {
            None => {
                if set.default.take().is_none() {
                    return Err(absent("for the default".to_string()));
                }
            }
            Some(s) => {
                let before = set.explicit.len();
                set.explicit
                    .retain(|p| p.scope != PolicyScope::Spec(s.clone()));
                if set.explicit.len() == before {
                    return Err(absent(format!("for spec {s:?}")));
                }
            }
        }
        Ok(())
    })
    .await
}

/// Applies `edit` to the root's current policies and writes them, under the lock; nothing is
/// written when `edit` fails.
async fn change<F>(table: &Table, edit: F) -> Result<TtlPolicies>
where
    F: FnOnce(&mut TtlPolicies) -> Result<()>,
{
    let ctx = &table.ctx;
    Transaction::run(table, Entry::Begin, |txn| async move {
        let current = TableConfig::load(ctx.storage.as_ref(), DEFAULT_META_DIR).await?;
        let mut set = TtlPolicies::from_config(&current)?;
        edit(&mut set)?;
        let next = set.clone();
        let written = TableConfig::update(ctx.storage.as_ref(), DEFAULT_META_DIR, |c| {
            properties::write(&next, c).map_err(|e| match e {
                TableError::Timeline(t) => t,
                other => arbor_timeline::TimelineError::InvalidConfig {
                    path: "hoodie.properties".to_string(),
                    key: None,
                    reason: other.to_string(),
                },
            })
        })
        .await?;
        txn.mirror_properties().await?;
        TtlPolicies::from_config(&written)
    })
    .await
}
