//! `arbor maintain <table>`: run every table service that is due, in a safe order, each as its
//! own instant (`arbor_branching::maintain`); safe to run from cron.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_branching::maintain::{MaintainOptions, MaintenanceReport, Status};
use arbor_storage::StorageOptions;
use arbor_timeline::layout::RegistryOpener;
use clap::Args;
use serde_json::{json, Value};

use crate::context::{branching_error, label, open_table_on, Progress, MAIN};
use crate::error::{CliError, CliResult};
use crate::output::{human_bytes, print_json, print_table, print_text};

/// Arguments of `arbor maintain`.
#[derive(Debug, Args)]
#[command(
    after_help = "Decides from the table's configuration (hoodie.properties, then \
    --set) what is due and runs it, in this order: compaction (merge-on-read: \
    hoodie.compact.inline.max.delta.commits delta commits, default 5, or a pending plan), \
    clustering (when hoodie.clustering.inline or hoodie.clustering.async.enabled is true: \
    hoodie.clustering.inline.max.commits commits, default 4), partition TTL (the table's \
    policies), expired tags, pins of clones that are gone, clean (hoodie.clean.policy and its \
    retained count; Hudi's defaults), archival (past hoodie.keep.max.commits, default 30). \
    Each service is its own instant under the table lock; a second run right after finds \
    nothing due.\n\n\
    Examples:\n  \
    arbor maintain ./trips --dry-run\n  \
    arbor maintain ./trips --set hoodie.clean.commits.retained=5\n  \
    arbor maintain ./trips --all-branches --json"
)]
pub struct MaintainArgs {
    /// The table's base path or URL.
    pub table: String,
    /// Print what is due; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// A setting for this run, over the table's (repeatable), e.g.
    /// hoodie.clean.commits.retained=5.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The branch to maintain (main, or a working branch).
    #[arg(long, value_name = "B", default_value = MAIN, conflicts_with = "all_branches")]
    pub branch: String,
    /// Maintain main and every working branch, in turn.
    #[arg(long)]
    pub all_branches: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn settings(args: &MaintainArgs) -> CliResult<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for kv in &args.set {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(CliError::Usage(format!("--set {kv:?}: expected KEY=VALUE")));
        };
        let k = k.trim();
        if !k.starts_with("hoodie.") {
            return Err(CliError::Usage(format!(
                "--set {kv:?}: only hoodie.* settings are read"
            )));
        }
        out.insert(k.to_string(), v.trim().to_string());
    }
    Ok(out)
}

fn report_json(branch: &str, r: &MaintenanceReport) -> Value {
    json!({
        "branch": branch,
        "dry_run": r.dry_run,
        "services": r.services.iter().map(|s| json!({
            "service": s.service.name(),
            "status": s.status.name(),
            "reason": s.reason,
            "done": s.done,
            "bytes_freed": s.bytes_freed,
        })).collect::<Vec<_>>(),
    })
}

fn print_report(at: &str, r: &MaintenanceReport) -> CliResult<()> {
    print_table(
        &["SERVICE", "STATUS", "WHY", "DONE", "FREED"],
        r.services
            .iter()
            .map(|s| {
                vec![
                    s.service.name().to_string(),
                    s.status.name().to_string(),
                    s.reason.clone(),
                    s.done.join(", "),
                    if s.bytes_freed > 0 {
                        human_bytes(s.bytes_freed)
                    } else {
                        String::new()
                    },
                ]
            })
            .collect(),
    )?;
    let busy = |st: Status| r.services.iter().filter(|s| s.status == st).count();
    print_text(&if r.dry_run {
        format!(
            "{at}: {} service(s) due; nothing written (dry run)",
            busy(Status::Due)
        )
    } else {
        match busy(Status::Ran) {
            0 => format!("{at}: nothing was due"),
            n => format!("{at}: ran {n} service(s)"),
        }
    })
}

/// Runs the command.
pub async fn run(args: MaintainArgs, options: &StorageOptions) -> CliResult<()> {
    let settings = settings(&args)?;
    let branches: Vec<String> = if args.all_branches {
        let main = open_table_on(&args.table, options, MAIN).await?;
        let mut names = vec![MAIN.to_string()];
        for b in arbor_branching::list_branches(main.view_storage())
            .await
            .map_err(|e| branching_error(&args.table, e))?
        {
            names.push(b.info.name);
        }
        names
    } else {
        vec![args.branch.clone()]
    };
    let mut reports = Vec::new();
    for branch in &branches {
        let table = open_table_on(&args.table, options, branch).await?;
        let at = label(&args.table, branch);
        let progress = Progress::start(&format!(
            "{at}: {}",
            if args.dry_run {
                "judging what is due"
            } else {
                "running what is due"
            }
        ));
        let opts = MaintainOptions {
            dry_run: args.dry_run,
            now: None,
            pins: Some((
                Arc::new(RegistryOpener::new(options.clone())),
                args.table.clone(),
            )),
            settings: settings.clone(),
        };
        let report = arbor_branching::maintain(&table, &opts)
            .await
            .map_err(|e| branching_error(&args.table, e))?;
        progress.finish();
        if !args.json {
            print_report(&at, &report)?;
        }
        reports.push((branch.clone(), report));
    }
    if args.json {
        let all: Vec<Value> = reports.iter().map(|(b, r)| report_json(b, r)).collect();
        return print_json(&json!({ "table": args.table, "runs": all }));
    }
    Ok(())
}
