//! `arbor cluster <table>`: rewrite small file slices as sorted file groups of the target size
//! (Hudi's clustering: a `clustering` instant completed as a `CLUSTER` replacecommit), run the
//! clustering plans another writer left pending, or roll them back.

use std::path::Path;

use arbor_storage::StorageOptions;
use arbor_table::cluster::{ClusterOptions, ClusterOutcome, Layout};
use arbor_table::ttl::values::parse_size;
use arbor_table::{Table, TableError};
use clap::Args;
use serde_json::{json, Value};

use crate::context::{label, open_table_on, Progress, MAIN};
use crate::error::{CliError, CliResult};
use crate::output::{human_bytes, print_json, print_table, print_text};

/// Arguments of `arbor cluster`.
#[derive(Debug, Args)]
#[command(
    after_help = "Plans as Hudi's size-based strategy does: per partition, the latest \
    file slices whose base file is under --small-file-limit, largest first, in groups of at \
    most --max-bytes; each group's rows are sorted (--sort-by, --layout) and written as new \
    file groups of --target-file-size; records keep their commit times. Defaults come from the \
    table's hoodie.clustering.plan.strategy.* and hoodie.layout.optimize.strategy keys, then \
    arbor's (128MiB files, 100MiB small-file limit, 2GiB groups). Plans pending from another \
    writer are left alone unless --pending runs them or --rollback-pending removes them.\n\n\
    Examples:\n  \
    arbor cluster ./trips --sort-by city,ts                     # linear sort\n  \
    arbor cluster ./trips --sort-by lat,lon --layout hilbert --dry-run\n  \
    arbor cluster ./trips --partition dt=2026-12-01 --target-file-size 256MiB\n  \
    arbor cluster ./trips --pending                             # run Spark's scheduled plans"
)]
pub struct ClusterArgs {
    /// The table's base path or URL.
    pub table: String,
    /// Only these partitions (repeatable; default: every partition).
    #[arg(long = "partition", value_name = "P")]
    pub partitions: Vec<String>,
    /// Sort columns, comma-separated (default: the table's
    /// hoodie.clustering.plan.strategy.sort.columns; none: files are only packed).
    #[arg(long, value_name = "C1,C2")]
    pub sort_by: Option<String>,
    /// How rows are ordered by the sort columns: linear, z-order or hilbert.
    #[arg(long, value_name = "LAYOUT")]
    pub layout: Option<String>,
    /// Size of the files written (e.g. 128MiB).
    #[arg(long, value_name = "SIZE")]
    pub target_file_size: Option<String>,
    /// Only file slices whose base file is smaller than this are rewritten (e.g. 100MiB).
    #[arg(long, value_name = "SIZE")]
    pub small_file_limit: Option<String>,
    /// Input bytes of one clustering group: a group's rows are sorted together (e.g. 2GiB).
    #[arg(long, value_name = "SIZE")]
    pub max_bytes: Option<String>,
    /// Memory a group's sort holds before spilling sorted runs to temporary files (e.g.
    /// 256MiB).
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,
    /// Print what would be clustered; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Run the clustering plans pending on the table (scheduled by another writer, or left by
    /// a killed run) instead of planning a new one.
    #[arg(long, conflicts_with_all = ["rollback_pending", "dry_run"])]
    pub pending: bool,
    /// Roll back the pending clustering plans (their file groups take updates again).
    #[arg(long, conflicts_with = "dry_run")]
    pub rollback_pending: bool,
    /// The branch to cluster (main, or a working branch).
    #[arg(long, value_name = "B", default_value = MAIN)]
    pub branch: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn size(flag: &str, text: &str) -> CliResult<u64> {
    parse_size(text).map_err(|e| CliError::Usage(format!("{flag} {text:?}: {e}")))
}

/// The options: the table's configuration, then the flags.
fn options_of(args: &ClusterArgs, table: &Table) -> CliResult<ClusterOptions> {
    let mut o =
        ClusterOptions::from_config(table.config()).map_err(|e| CliError::at(&args.table, e))?;
    o.partitions = args.partitions.clone();
    if let Some(s) = &args.sort_by {
        o.sort_by = s
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect();
        if o.sort_by.is_empty() {
            return Err(CliError::Usage(format!("--sort-by {s:?}: no column names")));
        }
    }
    if let Some(l) = &args.layout {
        o.layout = l
            .parse::<Layout>()
            .map_err(|e| CliError::Usage(format!("--layout: {e}")))?;
    }
    if let Some(s) = &args.target_file_size {
        o.target_file_size = size("--target-file-size", s)?;
    }
    if let Some(s) = &args.small_file_limit {
        o.small_file_limit = size("--small-file-limit", s)?;
    }
    if let Some(s) = &args.max_bytes {
        o.max_bytes_per_group = size("--max-bytes", s)?;
    }
    if let Some(s) = &args.memory {
        o.memory_budget = usize::try_from(size("--memory", s)?).unwrap_or(usize::MAX);
    }
    o.base_uri = Some(base_uri(&args.table));
    o.validate().map_err(|e| CliError::Usage(strip(e)))?;
    Ok(o)
}

fn strip(e: TableError) -> String {
    match e {
        TableError::InvalidInput { reason, .. } => reason,
        other => other.to_string(),
    }
}

/// The table's URI as Java names files in a plan: `file:/abs/path` for a local table.
fn base_uri(location: &str) -> String {
    if location.contains("://") {
        return location.trim_end_matches('/').to_string();
    }
    let path = Path::new(location);
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    format!("file:{}", abs.display())
}

fn group_json(o: &ClusterOutcome) -> Value {
    json!({
        "instant": o.instant.as_ref().map(|t| t.to_string()),
        "completion_time": o.completion_time.as_ref().map(|t| t.to_string()),
        "dry_run": o.dry_run,
        "groups": o.groups.iter().map(|g| json!({
            "partition": g.partition,
            "input_file_groups": g.input_file_groups,
            "input_bytes": g.input_bytes,
            "output_file_groups": g.output_file_groups,
            "output_bytes": g.output_bytes,
            "rows": g.rows,
            "spilled_runs": g.spilled_runs,
        })).collect::<Vec<_>>(),
    })
}

fn print_groups(o: &ClusterOutcome) -> CliResult<()> {
    let rows = o
        .groups
        .iter()
        .map(|g| {
            let mut r = vec![
                if g.partition.is_empty() {
                    "(none)".to_string()
                } else {
                    g.partition.clone()
                },
                g.input_file_groups.len().to_string(),
                human_bytes(g.input_bytes),
            ];
            if !o.dry_run {
                r.push(g.output_file_groups.len().to_string());
                r.push(human_bytes(g.output_bytes));
                r.push(g.rows.to_string());
            }
            r
        })
        .collect();
    if o.dry_run {
        print_table(&["PARTITION", "FILE GROUPS", "SIZE"], rows)
    } else {
        print_table(
            &[
                "PARTITION",
                "FILE GROUPS IN",
                "SIZE IN",
                "FILE GROUPS OUT",
                "SIZE OUT",
                "ROWS",
            ],
            rows,
        )
    }
}

fn summary(at: &str, o: &ClusterOutcome) -> String {
    let groups_in: usize = o.groups.iter().map(|g| g.input_file_groups.len()).sum();
    let groups_out: usize = o.groups.iter().map(|g| g.output_file_groups.len()).sum();
    let bytes: u64 = o.groups.iter().map(|g| g.input_bytes).sum();
    let partitions = o
        .groups
        .iter()
        .map(|g| g.partition.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    match (&o.instant, o.dry_run) {
        (_, true) => format!(
            "{at}: would cluster {groups_in} file group(s) ({}) of {partitions} partition(s) \
             in {} group(s); nothing written (dry run)",
            human_bytes(bytes),
            o.groups.len()
        ),
        (Some(t), false) => format!(
            "{at}: clustered {groups_in} file group(s) ({}) into {groups_out} as replacecommit \
             {t}",
            human_bytes(bytes)
        ),
        (None, false) => format!("{at}: nothing to cluster"),
    }
}

/// Runs the command.
pub async fn run(args: ClusterArgs, options: &StorageOptions) -> CliResult<()> {
    let table = open_table_on(&args.table, options, &args.branch).await?;
    let at = label(&args.table, &args.branch);
    let on = |e: TableError| CliError::at(&args.table, e);
    if args.rollback_pending {
        let progress = Progress::start(&format!("{at}: rolling back pending clustering"));
        let done = table.rollback_pending_clustering().await.map_err(on)?;
        progress.finish();
        if args.json {
            return print_json(&json!({
                "table": args.table, "branch": args.branch,
                "rolled_back": done.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
            }));
        }
        return print_text(&match done.len() {
            0 => format!("{at}: no clustering plan is pending"),
            _ => format!(
                "{at}: rolled back {} pending clustering plan(s): {}",
                done.len(),
                done.iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    if args.pending {
        let progress = Progress::start(&format!("{at}: running pending clustering"));
        let done = table.run_pending_clustering().await.map_err(on)?;
        progress.finish();
        if args.json {
            return print_json(&json!({
                "table": args.table, "branch": args.branch,
                "clusterings": done.iter().map(group_json).collect::<Vec<_>>(),
            }));
        }
        if done.is_empty() {
            return print_text(&format!("{at}: no clustering plan is pending"));
        }
        for o in &done {
            print_groups(o)?;
            print_text(&summary(&at, o))?;
        }
        return Ok(());
    }
    let opts = options_of(&args, &table)?;
    let progress = Progress::start(&format!(
        "{at}: {}",
        if args.dry_run {
            "planning clustering"
        } else {
            "clustering"
        }
    ));
    let outcome = if args.dry_run {
        table.plan_clustering(&opts).await
    } else {
        table.cluster(&opts).await
    }
    .map_err(on)?;
    let pending = table.pending_clustering().await.map_err(on)?;
    progress.finish();
    let left: Vec<String> = pending
        .iter()
        .filter(|p| Some(&p.instant) != outcome.instant.as_ref())
        .map(|p| p.instant.to_string())
        .collect();
    if args.json {
        let mut v = group_json(&outcome);
        if let Value::Object(m) = &mut v {
            m.insert("table".into(), json!(args.table));
            m.insert("branch".into(), json!(args.branch));
            m.insert("sort_by".into(), json!(opts.sort_by));
            m.insert("layout".into(), json!(opts.layout.name()));
            m.insert("pending_left".into(), json!(left));
        }
        return print_json(&v);
    }
    if !outcome.groups.is_empty() {
        print_groups(&outcome)?;
    }
    print_text(&summary(&at, &outcome))?;
    if !left.is_empty() {
        print_text(&format!(
            "{at}: {} clustering plan(s) pending from before ({}): their file groups refuse \
             updates until `arbor cluster --pending` runs them or `--rollback-pending` removes them",
            left.len(),
            left.join(", ")
        ))?;
    }
    Ok(())
}
