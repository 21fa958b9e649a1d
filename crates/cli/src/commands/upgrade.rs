//! `arbor upgrade <table> [--to 8|9] [--json]`: upgrade a version-6 (Hudi 0.x) or version-8
//! table to version 9 (default) or 8, as Java Hudi's upgrade path does.

use arbor_storage::StorageOptions;
use arbor_table::{TableUpgrade, UpgradeReport};
use clap::Args;

use crate::context::lock::chosen_lock;
use crate::context::open_table_storage;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_text};

/// Arguments of `arbor upgrade`.
#[derive(Debug, Args)]
#[command(
    after_help = "Converts hoodie.properties (table version, timeline layout 2, merge \
    mode, key generator type, ...), rewrites the active timeline in layout 2 (.hoodie/timeline/, \
    completion times from the instant files' modification times, as Java Hudi does) and, for a \
    version-6 table, drops its metadata table (run `arbor mdt init` to rebuild it). Runs under \
    the table lock; stop other writers first. Crash-safe: an interrupted upgrade leaves the \
    table readable at its old or new version, and running the command again completes it. A \
    table already at the target version is left unchanged; downgrades are refused.\n\n\
    --set adds a key-generator setting (hoodie.keygen.*) that Hudi 0.x used at write time but \
    did not keep in hoodie.properties (e.g. hoodie.keygen.timebased.timestamp.type); a \
    setting the table already has is never changed.\n\n\
    Examples:\n  \
    arbor upgrade ./trips\n  \
    arbor upgrade ./events --set hoodie.keygen.timebased.timestamp.type=DATE_STRING\n  \
    arbor upgrade ./trips --to 8 --json"
)]
pub struct UpgradeArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The table version to upgrade to.
    #[arg(long, value_name = "8|9", default_value_t = 9, value_parser = clap::value_parser!(u32).range(8..=9))]
    pub to: u32,
    /// Add a key-generator property (`hoodie.keygen.*`) the table lacks, KEY=VALUE; repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_property)]
    pub set: Vec<(String, String)>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `KEY=VALUE` of `--set`.
fn parse_property(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

/// The text line(s) of a report.
fn describe(table: &str, r: &UpgradeReport) -> String {
    let mut out = if r.upgraded {
        format!(
            "{table}: upgraded from table version {} to {} ({} instant file(s) rewritten in \
             timeline layout 2)",
            r.from, r.to, r.instants_converted
        )
    } else {
        format!(
            "{table}: already at table version {}; nothing to upgrade",
            r.to
        )
    };
    if r.properties_added > 0 {
        out.push_str(&format!(
            "\n{table}: {} key-generator propert{} added to hoodie.properties",
            r.properties_added,
            if r.properties_added == 1 { "y" } else { "ies" }
        ));
    }
    if !r.upgraded && (r.old_files_removed > 0 || r.mdt_removed || r.mdt_version_updated) {
        out.push_str(&format!(
            "\n{table}: finished an interrupted upgrade ({} old instant file(s) removed{}{})",
            r.old_files_removed,
            if r.mdt_removed {
                ", old metadata table removed"
            } else {
                ""
            },
            if r.mdt_version_updated {
                ", metadata table version updated"
            } else {
                ""
            }
        ));
    }
    if r.upgraded && (r.mdt_removed || !r.mdt_partitions_dropped.is_empty()) {
        out.push_str(&format!(
            "\n{table}: the version-6 metadata table ({}) was dropped; run `arbor mdt init \
             {table}` to rebuild it",
            if r.mdt_partitions_dropped.is_empty() {
                "no partitions".to_string()
            } else {
                r.mdt_partitions_dropped.join(",")
            }
        ));
    }
    out
}

/// Runs the command: [`TableUpgrade::run`] under the lock `--lock` or the table's properties
/// choose.
pub async fn run(args: UpgradeArgs, options: &StorageOptions) -> CliResult<()> {
    let storage = open_table_storage(&args.table, options).await?;
    let upgrade = TableUpgrade::open(storage.clone())
        .await
        .map_err(|e| CliError::at(&args.table, e))?;
    let lock = chosen_lock(&args.table, upgrade.config(), &storage, &storage).await?;
    let report = upgrade
        .with_lock_provider(lock)
        .with_properties(args.set.clone())
        .run(args.to)
        .await
        .map_err(|e| CliError::at(&args.table, e))?;
    if args.json {
        return print_json(&serde_json::json!({
            "table": args.table,
            "from": report.from,
            "to": report.to,
            "upgraded": report.upgraded,
            "properties_added": report.properties_added,
            "instants_converted": report.instants_converted,
            "old_files_removed": report.old_files_removed,
            "mdt_partitions_dropped": report.mdt_partitions_dropped,
            "mdt_removed": report.mdt_removed,
            "mdt_version_updated": report.mdt_version_updated,
        }));
    }
    print_text(&describe(&args.table, &report))
}
