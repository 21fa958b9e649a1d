//! One command for a table's services ([`maintain`], `arbor maintain`): decides from the
//! table's own configuration what is due and runs it, each service as its own operation (its
//! own instant, under the table lock), in an order where each step helps the next:
//!
//! 1. **compaction** (merge-on-read): pending compactions, or `hoodie.compact.inline.max.delta.commits`
//!    (default 5) delta commits since the last compaction;
//!    then **log compaction** when the table enables it (`hoodie.log.compaction.enable`):
//!    slices with `hoodie.log.compaction.blocks.threshold` (default 5) log files;
//! 2. **clustering**, when the table asks for it (`hoodie.clustering.inline` or
//!    `hoodie.clustering.async.enabled`): `hoodie.clustering.inline.max.commits` (default 4)
//!    commits since the last clustering, and small files to cluster;
//! 3. **TTL**: the table's partition TTL policies, when a partition expired;
//! 4. **expired tags**: their savepoints go, so the clean can free what only they kept;
//! 5. **abandoned clone pins** (when the caller can open other locations): pins whose clone is
//!    gone;
//! 6. **clean** by the table's policy (`hoodie.clean.policy` / `hoodie.cleaner.policy` and its
//!    retained count; Hudi's defaults), when it would delete something;
//! 7. **archival**, when more completed commits are active than `hoodie.keep.max.commits`
//!    (default 30).
//!
//! A dry run evaluates the same conditions and writes nothing. A second run right after a run
//! finds nothing due. Errors stop the run and name the service; services that ran stay done.

mod config;

use std::sync::Arc;

use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_storage::Storage;
use arbor_table::cluster::ClusterOptions;
use arbor_table::ttl::TtlRunOptions;
use arbor_table::Table;
use arbor_timeline::layout::LocationOpener;
use arbor_timeline::{Action, ActiveTimeline};
use chrono::{DateTime, Utc};
use futures::StreamExt;

use crate::error::{BranchingError, Result};
use crate::tag::{list_tags_at, TagFilter};

pub use config::{clean_policy_from_config, ServiceConfig, Settings};

/// The services [`maintain`] runs, in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Service {
    /// Compaction of merge-on-read file groups.
    Compaction,
    /// Log compaction of merge-on-read slices with many log files.
    LogCompaction,
    /// Clustering of small files.
    Clustering,
    /// Partition TTL.
    Ttl,
    /// Removal of expired tags.
    ExpiredTags,
    /// Removal of pins whose clone is gone.
    ClonePins,
    /// Clean by the table's policy.
    Clean,
    /// Archival of the active timeline.
    Archive,
}

impl Service {
    /// The name printed and used in JSON (`compaction`, `clustering`, `ttl`, `expired-tags`,
    /// `clone-pins`, `clean`, `archive`).
    pub fn name(self) -> &'static str {
        match self {
            Service::Compaction => "compaction",
            Service::LogCompaction => "log-compaction",
            Service::Clustering => "clustering",
            Service::Ttl => "ttl",
            Service::ExpiredTags => "expired-tags",
            Service::ClonePins => "clone-pins",
            Service::Clean => "clean",
            Service::Archive => "archive",
        }
    }
}

/// What happened to one service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It was due and ran.
    Ran,
    /// It is due (a dry run).
    Due,
    /// Nothing to do now.
    NotDue,
    /// Not configured or not applicable to this table.
    Skipped,
}

impl Status {
    /// `ran`, `due`, `not-due`, `skipped`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ran => "ran",
            Status::Due => "due",
            Status::NotDue => "not-due",
            Status::Skipped => "skipped",
        }
    }
}

/// One service's line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceReport {
    /// The service.
    pub service: Service,
    /// Ran, due, not due or skipped.
    pub status: Status,
    /// Why (the condition and its figures).
    pub reason: String,
    /// Instants it completed (or, for tags and pins, the names removed).
    pub done: Vec<String>,
    /// Bytes of data files it deleted (clean; for a dry run: would delete).
    pub bytes_freed: u64,
}

/// The report of a [`maintain`] run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaintenanceReport {
    /// Whether it was a dry run.
    pub dry_run: bool,
    /// One line per service, in run order.
    pub services: Vec<ServiceReport>,
}

/// How [`maintain`] runs.
#[derive(Clone, Default)]
pub struct MaintainOptions {
    /// Evaluate and report; write nothing.
    pub dry_run: bool,
    /// The time TTL policies are judged at (default: now; tags expire by the real time).
    pub now: Option<DateTime<Utc>>,
    /// For abandoned clone pins: how to open other locations, and this table's location.
    pub pins: Option<(Arc<dyn LocationOpener>, String)>,
    /// Settings for this run (`hoodie.clean.commits.retained`, ...), over the table's own.
    pub settings: std::collections::BTreeMap<String, String>,
}

impl std::fmt::Debug for MaintainOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaintainOptions")
            .field("dry_run", &self.dry_run)
            .field("now", &self.now)
            .field("pins", &self.pins.as_ref().map(|(_, l)| l))
            .field("settings", &self.settings)
            .finish()
    }
}

fn line(service: Service, status: Status, reason: impl Into<String>) -> ServiceReport {
    ServiceReport {
        service,
        status,
        reason: reason.into(),
        done: Vec::new(),
        bytes_freed: 0,
    }
}

fn failed(service: Service, e: impl std::fmt::Display) -> BranchingError {
    BranchingError::Service {
        service: service.name().to_string(),
        reason: e.to_string(),
    }
}

/// Runs (or, with `dry_run`, evaluates) every due service of `table`'s root (module doc).
pub async fn maintain(table: &Table, options: &MaintainOptions) -> Result<MaintenanceReport> {
    let dry = options.dry_run;
    let ran = if dry { Status::Due } else { Status::Ran };
    let now = options.now.unwrap_or_else(Utc::now);
    let mut services = Vec::new();

    // 1. Compaction.
    // The properties as storage holds them now (a handle's copy may predate a TTL policy).
    let config = arbor_timeline::TableConfig::load(
        table.view_storage().as_ref(),
        arbor_timeline::layout::DEFAULT_META_DIR,
    )
    .await?;
    let settings = Settings {
        overrides: &options.settings,
        config: &config,
    };
    let cfg = ServiceConfig::of(&settings);
    // Settings that do not parse are refused before any service runs.
    let policy = clean_policy_from_config(&settings).map_err(|e| failed(Service::Clean, e))?;
    let mut cluster_options =
        ClusterOptions::from_config(&config).map_err(|e| failed(Service::Clustering, e))?;
    cluster_options
        .apply(|k| settings.get(k))
        .map_err(|e| failed(Service::Clustering, e))?;
    let tl = timeline(table).await?;
    services.push(
        if config.table_type() != arbor_timeline::config::TableType::MergeOnRead {
            line(
                Service::Compaction,
                Status::Skipped,
                "copy-on-write: nothing to compact",
            )
        } else {
            let pending = tl
                .filter(
                    &[Action::Compaction],
                    &[
                        arbor_timeline::State::Requested,
                        arbor_timeline::State::Inflight,
                    ],
                )
                .len();
            let since = config::delta_commits_since_compaction(&tl);
            let reason = format!(
                "{since} delta commit(s) since the last compaction (due at {}), {pending} pending",
                cfg.compact_every
            );
            if pending == 0 && since < cfg.compact_every {
                line(Service::Compaction, Status::NotDue, reason)
            } else if dry {
                line(Service::Compaction, ran, reason)
            } else {
                let out = table
                    .compact()
                    .await
                    .map_err(|e| failed(Service::Compaction, e))?;
                let mut l = line(Service::Compaction, ran, reason);
                l.done = out.iter().map(|r| r.instant.to_string()).collect();
                l
            }
        },
    );

    // 1b. Log compaction.
    let mor = config.table_type() == arbor_timeline::config::TableType::MergeOnRead;
    services.push(if !mor || !cfg.log_compaction_enabled {
        line(
            Service::LogCompaction,
            Status::Skipped,
            if mor {
                "not asked for (hoodie.log.compaction.enable)"
            } else {
                "copy-on-write: no log files"
            },
        )
    } else {
        let n = cfg.log_compaction_threshold;
        let plan = arbor_table::write::log_compaction::plan_log_compaction(
            table.view_storage(),
            table.layout(),
            n,
        )
        .await
        .map_err(|e| failed(Service::LogCompaction, e))?;
        let slices = plan
            .as_ref()
            .and_then(|p| p.operations.as_ref())
            .map_or(0, Vec::len);
        let reason = format!("{slices} slice(s) with at least {n} log files");
        if slices == 0 {
            line(Service::LogCompaction, Status::NotDue, reason)
        } else if dry {
            line(Service::LogCompaction, ran, reason)
        } else {
            let out = table
                .log_compact(Some(n))
                .await
                .map_err(|e| failed(Service::LogCompaction, e))?;
            let mut l = line(Service::LogCompaction, ran, reason);
            l.done = out.iter().map(|r| r.instant.to_string()).collect();
            l
        }
    });

    // 2. Clustering.
    services.push(if !cfg.clustering_enabled {
        line(
            Service::Clustering,
            Status::Skipped,
            "not asked for (hoodie.clustering.inline or hoodie.clustering.async.enabled)",
        )
    } else {
        let tl = timeline(table).await?;
        let since = config::commits_since_clustering(&tl);
        let options = &cluster_options;
        let reason = format!(
            "{since} commit(s) since the last clustering (due at {})",
            cfg.cluster_every
        );
        if since < cfg.cluster_every {
            line(Service::Clustering, Status::NotDue, reason)
        } else {
            let plan = table
                .plan_clustering(options)
                .await
                .map_err(|e| failed(Service::Clustering, e))?;
            if plan.groups.is_empty() {
                line(
                    Service::Clustering,
                    Status::NotDue,
                    format!("{reason}; no small files"),
                )
            } else if dry {
                line(
                    Service::Clustering,
                    ran,
                    format!("{reason}; {} group(s)", plan.groups.len()),
                )
            } else {
                let out = table
                    .cluster(options)
                    .await
                    .map_err(|e| failed(Service::Clustering, e))?;
                let mut l = line(Service::Clustering, ran, reason);
                l.done = out.instant.iter().map(|t| t.to_string()).collect();
                l
            }
        }
    });

    // 3. TTL.
    let policies =
        arbor_table::ttl::TtlPolicies::from_config(&config).map_err(|e| failed(Service::Ttl, e))?;
    services.push(if policies.is_empty() {
        line(Service::Ttl, Status::Skipped, "no TTL policy")
    } else {
        let judged = table
            .run_ttl(&TtlRunOptions {
                now: Some(now),
                dry_run: true,
                max_partitions: None,
            })
            .await
            .map_err(|e| failed(Service::Ttl, e))?;
        let expired = judged.plan.expired_partitions();
        let reason = format!("{} partition(s) expired", expired.len());
        if expired.is_empty() {
            line(Service::Ttl, Status::NotDue, reason)
        } else if dry {
            line(Service::Ttl, ran, reason)
        } else {
            let out = table
                .run_ttl(&TtlRunOptions {
                    now: Some(now),
                    dry_run: false,
                    max_partitions: None,
                })
                .await
                .map_err(|e| failed(Service::Ttl, e))?;
            let mut l = line(Service::Ttl, ran, reason);
            l.done = out.commit.iter().map(|c| c.instant.to_string()).collect();
            l
        }
    });

    // 4. Expired tags (judged at the real time, as every tag check is).
    let wall = Utc::now();
    let expired: Vec<String> = list_tags_at(table.view_storage(), TagFilter::All)
        .await?
        .into_iter()
        .filter(|t| t.is_expired(wall))
        .map(|t| t.name)
        .collect();
    services.push(if expired.is_empty() {
        line(Service::ExpiredTags, Status::NotDue, "no tag has expired")
    } else {
        let reason = format!("{} tag(s) expired: {}", expired.len(), expired.join(", "));
        let mut l = line(Service::ExpiredTags, ran, reason);
        if !dry {
            l.done = crate::tag::expire_tags(table).await?;
        }
        l
    });

    // 5. Abandoned clone pins.
    services.push(match &options.pins {
        None => line(
            Service::ClonePins,
            Status::Skipped,
            "other locations cannot be opened here",
        ),
        Some((opener, location)) => {
            let found = crate::clone::abandoned_pins(opener.as_ref(), location).await?;
            if found.removed.is_empty() {
                line(
                    Service::ClonePins,
                    Status::NotDue,
                    format!("{} pin(s), every clone alive", found.kept.len()),
                )
            } else {
                let names: Vec<String> = found.removed.iter().map(|p| p.clone_id.clone()).collect();
                if !dry {
                    crate::clone::prune_pins(opener.as_ref(), location).await?;
                }
                let mut l = line(
                    Service::ClonePins,
                    ran,
                    format!("{} pin(s) of clones that are gone", names.len()),
                );
                l.done = names;
                l
            }
        }
    });

    // 6. Clean.
    let planned = crate::protect::clean(table, clean_options(policy, true)).await?;
    let bytes = planned_bytes(table.view_storage(), &planned.plan).await;
    let files = planned.planned() + planned.reclaimed.files.len();
    let reason = format!(
        "{policy}: {files} file(s), {} partition(s) to remove",
        planned.partitions_deleted.len()
    );
    // A dry run cannot see what the services due above will leave to clean.
    let freeing: Vec<&str> = services
        .iter()
        .filter(|s| s.status == Status::Due)
        .map(|s| s.service.name())
        .collect();
    services.push(if files == 0 && planned.partitions_deleted.is_empty() {
        if dry && !freeing.is_empty() {
            line(
                Service::Clean,
                Status::Due,
                format!(
                    "{reason} now; the {} due above will leave files to clean",
                    freeing.join(", ")
                ),
            )
        } else {
            line(Service::Clean, Status::NotDue, reason)
        }
    } else {
        let mut l = line(Service::Clean, ran, reason);
        l.bytes_freed = bytes;
        if !dry {
            let out = crate::protect::clean(table, clean_options(policy, false)).await?;
            l.done = out.instant.iter().map(|t| t.to_string()).collect();
        }
        l
    });

    // 7. Archival.
    let tl = timeline(table).await?;
    let active = tl
        .completed()
        .into_iter()
        .filter(|i| {
            matches!(
                i.action,
                Action::Commit | Action::DeltaCommit | Action::ReplaceCommit
            )
        })
        .count();
    let reason = format!(
        "{active} completed commit(s) active (archived past {})",
        cfg.keep_max_commits
    );
    services.push(if active <= cfg.keep_max_commits {
        line(Service::Archive, Status::NotDue, reason)
    } else if dry {
        line(Service::Archive, ran, reason)
    } else {
        let archived = arbor_cleaner::archive(table)
            .await
            .map_err(|e| failed(Service::Archive, e))?;
        let n = archived.data;
        if n == 0 {
            line(
                Service::Archive,
                Status::NotDue,
                format!("{reason}; savepoints or the clean's retention hold the oldest"),
            )
        } else {
            let mut l = line(Service::Archive, ran, format!("{reason}; {n} archived"));
            l.done = vec![format!("{n} instant(s)")];
            l
        }
    });
    Ok(MaintenanceReport {
        dry_run: dry,
        services,
    })
}

async fn timeline(table: &Table) -> Result<ActiveTimeline> {
    Ok(ActiveTimeline::load(table.view_storage().clone(), table.layout().clone()).await?)
}

fn clean_options(policy: CleanPolicy, dry_run: bool) -> CleanOptions {
    CleanOptions {
        policy,
        dry_run,
        archive: false,
        ..CleanOptions::default()
    }
}

/// Bytes of the files a clean plan names (files already gone count 0).
async fn planned_bytes(storage: &Arc<dyn Storage>, plan: &arbor_cleaner::CleanPlan) -> u64 {
    let keys: Vec<String> = plan
        .iter()
        .flat_map(|(p, files)| {
            files.iter().map(move |f| {
                if p.is_empty() {
                    f.clone()
                } else {
                    format!("{p}/{f}")
                }
            })
        })
        .collect();
    futures::stream::iter(keys)
        .map(|k| async move { storage.head(&k).await.map(|m| m.size).unwrap_or(0) })
        .buffer_unordered(16)
        .fold(0u64, |a, b| async move { a + b })
        .await
}
