//! `arbor branch create|list|drop|publish <table>`: working branches (RFC-116), and the
//! `--branch` helpers every other command uses to open main or a working branch.

use std::sync::Arc;

use arbor_branching::roots::is_main;
use arbor_branching::{
    create_branch, drop_branch, list_branches, open_branch, publish, BranchSource, BranchStatus,
    BranchingError,
};
use arbor_storage::{Storage, StorageOptions};
use arbor_table::read::TableReader;
use arbor_table::Table;
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::commands::clean::from_cleaner;
use crate::commands::lock::with_chosen_lock;
use crate::commands::open_table_storage;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_table, print_text};

/// The name `--branch` takes by default: main.
pub const MAIN: &str = arbor_timeline::metaroot::MAIN;

/// A branching failure as a CLI error: wrapped library errors keep their own kind, a divergent
/// publication becomes one line naming the instants on each side.
pub fn from_branching(e: BranchingError) -> CliError {
    match e {
        BranchingError::Cleaner(e) => from_cleaner(e),
        BranchingError::Table(e) => CliError::Table(e),
        BranchingError::Timeline(e) => CliError::Timeline(e),
        BranchingError::Storage(e) => CliError::Storage(e),
        BranchingError::Divergent {
            branch,
            base,
            missing_on_branch,
            branch_only,
        } => CliError::Usage(format!(
            "publish {branch} refused: main has writes after the branch's base {base} that the \
             branch does not have: {} (the branch's own writes since then: {}); branches \
             publish only by fast-forward: create a new branch from main and redo the \
             branch's writes there",
            list_or_none(&missing_on_branch),
            list_or_none(&branch_only)
        )),
        other => CliError::Branching(other),
    }
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

/// A branching failure as one line naming the table.
pub fn branching_error(location: &str, e: BranchingError) -> CliError {
    CliError::at(location, from_branching(e))
}

/// `Some(name)` for a working branch, `None` for main (`--branch main`, the default).
pub fn selected(branch: &str) -> Option<&str> {
    if is_main(Some(branch)) {
        None
    } else {
        Some(branch)
    }
}

/// How text output names what a command worked on: the table location, followed by
/// ` (branch B)` for a working branch.
pub fn label(location: &str, branch: &str) -> String {
    match selected(branch) {
        None => location.to_string(),
        Some(b) => format!("{location} (branch {b})"),
    }
}

/// Opens `branch` of the table at `storage` for writing: main through `Table::open` (which
/// follows publications), a working branch through `arbor_branching::open_branch` (identity
/// checked; a missing branch is an error, never created), with the table lock this process
/// uses (`--lock`, the table's lock properties, or the default; see [`with_chosen_lock`]).
pub async fn open_table_at(
    location: &str,
    storage: Arc<dyn Storage>,
    branch: &str,
) -> CliResult<Table> {
    let table = match selected(branch) {
        None => Table::open(storage)
            .await
            .map_err(|e| CliError::at(location, e))?,
        Some(b) => open_branch(storage, b)
            .await
            .map_err(|e| branching_error(location, e))?,
    };
    with_chosen_lock(location, table).await
}

/// Opens the storage at `location` and then `branch` of its table (see [`open_table_at`]).
pub async fn open_table_on(
    location: &str,
    options: &StorageOptions,
    branch: &str,
) -> CliResult<Table> {
    let storage = open_table_storage(location, options)?;
    open_table_at(location, storage, branch).await
}

/// Opens a reader of `branch`: main through `TableReader::open` (which follows
/// publications), a working branch through `arbor_branching::open_reader`.
pub async fn open_reader_at(
    location: &str,
    storage: Arc<dyn Storage>,
    branch: &str,
) -> CliResult<TableReader> {
    match selected(branch) {
        None => TableReader::open(storage)
            .await
            .map_err(|e| CliError::at(location, e)),
        Some(b) => arbor_branching::open_reader(storage, Some(b))
            .await
            .map_err(|e| branching_error(location, e)),
    }
}

/// Arguments of `arbor branch`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    arbor branch create ./trips audit                 # from main's latest completed write\n  \
    arbor write ./trips fixes.csv --branch audit      # writes land only on the branch\n  \
    arbor validate ./trips --branch audit\n  \
    arbor branch publish ./trips audit                # fast-forward main to the branch\n  \
    arbor branch create ./trips replay --from-tag v1  # from a tag on main")]
pub struct BranchArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: BranchCommand,
}

/// The `arbor branch` subcommands.
#[derive(Debug, Subcommand)]
pub enum BranchCommand {
    /// Create a working branch from main's latest completed write (or a tag on main). The
    /// table needs its metadata table; data files are shared, metadata is copied.
    Create {
        /// The table's base path or URL.
        table: String,
        /// The branch name (no `/`, no leading dot, not `main` or `publications`).
        name: String,
        /// Start from this unexpired tag on main instead of main's latest state.
        #[arg(long, value_name = "TAG")]
        from_tag: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the working branches: base instant, head instant, source tag, pending instants.
    List {
        /// The table's base path or URL.
        table: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Drop a working branch (its metadata; shared files stay until a clean releases them).
    /// Refused while the branch has pending instants.
    Drop {
        /// The table's base path or URL.
        table: String,
        /// The branch name.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Publish a working branch to main by strict fast-forward: refused (nothing changed) when
    /// main has writes after the branch's base that the branch does not have.
    Publish {
        /// The table's base path or URL.
        table: String,
        /// The branch name.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// One branch as `--json` prints it.
#[derive(Debug, Serialize)]
struct BranchJson {
    name: String,
    branch_id: String,
    base_instant: Option<String>,
    head_instant: Option<String>,
    from_tag: Option<String>,
    created_at: String,
    pending: usize,
}

impl From<&BranchStatus> for BranchJson {
    fn from(s: &BranchStatus) -> Self {
        BranchJson {
            name: s.info.name.clone(),
            branch_id: s.info.branch_id.clone(),
            base_instant: s.info.base_instant.clone(),
            head_instant: s.head.as_ref().map(ToString::to_string),
            from_tag: s.info.from_tag.clone(),
            created_at: s.info.created_at.to_rfc3339(),
            pending: s.pending,
        }
    }
}

fn or_dash(v: Option<String>) -> String {
    v.unwrap_or_else(|| "-".to_string())
}

/// Runs the command.
pub async fn run(args: BranchArgs, options: &StorageOptions) -> CliResult<()> {
    match args.command {
        BranchCommand::Create {
            table,
            name,
            from_tag,
            json,
        } => {
            let storage = open_table_storage(&table, options)?;
            let main = open_table_at(&table, storage, MAIN).await?;
            let source = match &from_tag {
                Some(t) => BranchSource::Tag(t),
                None => BranchSource::MainHead,
            };
            let info = create_branch(&main, &name, source)
                .await
                .map_err(|e| branching_error(&table, e))?;
            if json {
                return print_json(&serde_json::json!({
                    "table": table,
                    "branch": info.name,
                    "branch_id": info.branch_id,
                    "base_instant": info.base_instant,
                    "from_tag": info.from_tag,
                }));
            }
            let base = info
                .base_instant
                .clone()
                .unwrap_or_else(|| "none (main had no completed write)".to_string());
            let from = info
                .from_tag
                .as_ref()
                .map_or_else(|| "main".to_string(), |t| format!("tag {t} on main"));
            print_text(&format!(
                "{table}: branch {} created from {from} at base instant {base} (branchId {})",
                info.name, info.branch_id
            ))
        }
        BranchCommand::List { table, json } => {
            let storage = open_table_storage(&table, options)?;
            let branches = list_branches(&storage)
                .await
                .map_err(|e| branching_error(&table, e))?;
            if json {
                return print_json(&branches.iter().map(BranchJson::from).collect::<Vec<_>>());
            }
            if branches.is_empty() {
                return print_text(&format!("{table}: no branches"));
            }
            let rows = branches
                .iter()
                .map(|b| {
                    vec![
                        b.info.name.clone(),
                        b.info.branch_id.clone(),
                        or_dash(b.info.base_instant.clone()),
                        or_dash(b.head.as_ref().map(ToString::to_string)),
                        or_dash(b.info.from_tag.clone()),
                        b.pending.to_string(),
                    ]
                })
                .collect();
            print_table(
                &[
                    "NAME",
                    "BRANCH ID",
                    "BASE INSTANT",
                    "HEAD INSTANT",
                    "FROM TAG",
                    "PENDING",
                ],
                rows,
            )
        }
        BranchCommand::Drop { table, name, json } => {
            let storage = open_table_storage(&table, options)?;
            let main = open_table_at(&table, storage, MAIN).await?;
            drop_branch(&main, &name)
                .await
                .map_err(|e| branching_error(&table, e))?;
            if json {
                print_json(&serde_json::json!({ "table": table, "dropped": name }))
            } else {
                print_text(&format!(
                    "{table}: branch {name} dropped (shared files stay until a clean releases them)"
                ))
            }
        }
        BranchCommand::Publish { table, name, json } => {
            let storage = open_table_storage(&table, options)?;
            let branch = open_branch(storage, &name)
                .await
                .map_err(|e| branching_error(&table, e))?;
            let branch = with_chosen_lock(&table, branch).await?;
            let outcome = publish(&branch)
                .await
                .map_err(|e| branching_error(&table, e))?;
            let head = outcome.head.as_ref().map(ToString::to_string);
            if json {
                return print_json(&serde_json::json!({
                    "table": table,
                    "branch": name,
                    "publication": outcome.publication,
                    "head": head,
                    "instants": outcome.instants,
                    "objects": outcome.objects,
                    "legacy_readers_follow": outcome.legacy_root,
                }));
            }
            let legacy = if outcome.legacy_root {
                "readers that know nothing of branches (hudi-rs, Spark) read it at the table path"
            } else {
                "warning: the root hoodie.properties could not be repointed yet; readers that \
                 know nothing of branches read the previous main until the next change of main"
            };
            print_text(&format!(
                "{table}: branch {name} published as publication p{}; main now ends at {} \
                 ({} instant(s), {} object(s) copied); {legacy}",
                outcome.publication,
                head.unwrap_or_else(|| "no write".to_string()),
                outcome.instants,
                outcome.objects
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_selected_main_is_none() {
        assert_eq!(selected("main"), None);
        assert_eq!(selected("audit"), Some("audit"));
        assert_eq!(label("t", "main"), "t");
        assert_eq!(label("t", "audit"), "t (branch audit)");
    }

    #[test]
    fn test_from_branching_divergent_names_instants() {
        let e = from_branching(BranchingError::Divergent {
            branch: "audit".into(),
            base: "20250101000000000".into(),
            missing_on_branch: vec!["20250102000000000".into()],
            branch_only: vec![],
        });
        let text = e.to_string();
        assert!(text.contains("20250102000000000"), "{text}");
        assert!(text.contains("own writes since then: none"), "{text}");
        assert!(text.contains("fast-forward"), "{text}");
    }
}
