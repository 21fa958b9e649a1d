//! `arbor archive <table> [--branch B] [--json]`: move a branch's old completed instants to its
//! archived timeline.

use std::collections::BTreeSet;

use arbor_storage::StorageOptions;
use arbor_timeline::summary::{list_instants, InstantSummary, ListScope};
use clap::Args;

use crate::context::{from_cleaner, label, open_table_on};
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_table, print_text};

/// Arguments of `arbor archive`.
#[derive(Debug, Args)]
pub struct ArchiveArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The branch whose timeline to archive (main, or a working branch).
    #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
    pub branch: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `(timestamp, action)` of the instants of the active timeline.
fn active(instants: &[InstantSummary]) -> BTreeSet<(String, String)> {
    instants
        .iter()
        .filter(|i| !i.archived)
        .map(|i| (i.timestamp.clone(), i.action.clone()))
        .collect()
}

/// Runs the command: archives the timeline with the default policy under the table lock (the
/// archiver keeps pending instants, savepoints, uncleaned replacecommits and what the metadata
/// table still needs) and prints the instants archived.
pub async fn run(args: ArchiveArgs, options: &StorageOptions) -> CliResult<()> {
    let table = open_table_on(&args.table, options, &args.branch).await?;
    // The branch's view: its own timeline, and main's as publications moved it.
    let storage = table.view_storage().clone();
    let (archived, metadata): (Vec<InstantSummary>, usize) = table
        .with_table_lock(async {
            let before = list_instants(storage.clone(), ListScope::All).await?;
            let metadata = arbor_cleaner::archive(&table)
                .await
                .map_err(from_cleaner)?
                .metadata;
            let after = list_instants(storage.clone(), ListScope::All).await?;
            let was_active = active(&before);
            let now_active = active(&after);
            Ok::<_, CliError>((
                after
                    .into_iter()
                    .filter(|i| {
                        i.archived && {
                            let k = (i.timestamp.clone(), i.action.clone());
                            was_active.contains(&k) && !now_active.contains(&k)
                        }
                    })
                    .collect(),
                metadata,
            ))
        })
        .await
        .map_err(|e| CliError::at(&args.table, e))?;
    if args.json {
        return print_json(&serde_json::json!({
            "table": args.table,
            "archived": archived,
            "metadata_table_archived": metadata,
        }));
    }
    let metadata_line = (metadata > 0).then(|| {
        format!(
            "{}: archived {metadata} metadata-table instant(s)",
            label(&args.table, &args.branch)
        )
    });
    if archived.is_empty() {
        return print_text(&metadata_line.unwrap_or_else(|| {
            format!("{}: nothing to archive", label(&args.table, &args.branch))
        }));
    }
    print_table(
        &["INSTANT", "COMPLETED", "ACTION"],
        archived
            .iter()
            .map(|i| {
                vec![
                    i.timestamp.clone(),
                    i.completion_time.clone().unwrap_or_else(|| "-".into()),
                    i.action.clone(),
                ]
            })
            .collect(),
    )?;
    print_text(&format!(
        "{}: archived {} instant(s)",
        label(&args.table, &args.branch),
        archived.len()
    ))?;
    metadata_line.map_or(Ok(()), |l| print_text(&l))
}
