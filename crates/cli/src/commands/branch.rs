//! `arbor branch create|list|drop|merge|rebase|publish <table>`: working branches (RFC-116). The `--branch`
//! helpers every command uses to open main or a working branch are in [`crate::context`].

use arbor_branching::{
    create_branch, drop_branch, list_branches, merge, publish, publish_and_drop, rebase,
    BranchSource, BranchStatus, MergeOptions, RefSpec,
};
use arbor_storage::StorageOptions;
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::context::{
    branching_error, merge_json, merge_text, open_table_at, open_table_storage,
    open_working_branch, rebase_json, rebase_text, StrategyArg, MAIN,
};
use crate::error::CliResult;
use crate::output::{print_json, print_table, print_text};

/// Arguments of `arbor branch`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    arbor branch create ./trips audit                 # from main's latest completed write\n  \
    arbor write ./trips fixes.csv --branch audit      # writes land only on the branch\n  \
    arbor validate ./trips --branch audit\n  \
    arbor branch publish ./trips audit                # fast-forward main to the branch\n  \
    arbor branch create ./trips replay --from-tag v1  # from a tag on main\n  \
    arbor branch merge ./trips audit --dry-run        # what a merge into main would do\n  \
    arbor branch merge ./trips audit --strategy ordering\n  \
    arbor branch rebase ./trips audit                 # onto main's head, then publish")]
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
    /// List the working branches: base and head instants (requested and completion times;
    /// `read --incremental` bounds are completion times), source tag, pending instants
    /// (`--json` adds each branch's id and creation time).
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
    /// Merge a ref (a branch, `main`, `tag:T`, `<branch>@<instant>`) into main or another
    /// branch by record key, as one upsert commit: changes made on one side only are applied;
    /// a key changed differently on both sides is a conflict that `--strategy` settles.
    Merge {
        /// The table's base path or URL.
        table: String,
        /// What to merge: a branch, main, tag:<name>, or <branch>@<instant>.
        source: String,
        /// The branch that receives the changes (default: main).
        #[arg(long, value_name = "BRANCH")]
        into: Option<String>,
        /// What a conflict does.
        #[arg(long, value_enum, default_value = "fail")]
        strategy: StrategyArg,
        /// Print what would be applied and every conflict; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Rebase a working branch onto main's head: its changes since its base are carried onto
    /// main's latest state as one commit (conflicts as in `merge`), so it can be published by
    /// fast-forward. When the branch has tags the rebased branch would lack, its earlier
    /// history stays readable on branch `<name>-pre-rebase`. Rerun it to finish an
    /// interrupted rebase.
    Rebase {
        /// The table's base path or URL.
        table: String,
        /// The branch name.
        name: String,
        /// What a conflict (a key the branch and main changed differently) does; `source` is
        /// the branch's side, `target` main's.
        #[arg(long, value_enum, default_value = "fail")]
        strategy: StrategyArg,
        /// Print what would be carried and every conflict; write nothing.
        #[arg(long)]
        dry_run: bool,
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
        /// Drop the branch after a successful publication (under the same table lock, so no
        /// write lands on it in between); a refused publication keeps it.
        #[arg(long)]
        drop: bool,
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
    /// Requested time of the base instant.
    base_instant: Option<String>,
    /// Completion time of the base instant (what `read --incremental` bounds compare).
    base_completion_time: Option<String>,
    /// Requested time of the latest completed write.
    head_instant: Option<String>,
    /// Completion time of the latest completed write.
    head_completion_time: Option<String>,
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
            base_completion_time: s.base_completed.as_ref().map(ToString::to_string),
            head_instant: s.head.as_ref().map(ToString::to_string),
            head_completion_time: s.head_completed.as_ref().map(ToString::to_string),
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
            let storage = open_table_storage(&table, options).await?;
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
                "{table}: branch {} created from {from} at base instant {base} (requested time) \
                 (branchId {})",
                info.name, info.branch_id
            ))
        }
        BranchCommand::List { table, json } => {
            let storage = open_table_storage(&table, options).await?;
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
                        or_dash(b.info.base_instant.clone()),
                        or_dash(b.base_completed.as_ref().map(ToString::to_string)),
                        or_dash(b.head.as_ref().map(ToString::to_string)),
                        or_dash(b.head_completed.as_ref().map(ToString::to_string)),
                        or_dash(b.info.from_tag.clone()),
                        b.pending.to_string(),
                    ]
                })
                .collect();
            print_table(
                &[
                    "NAME",
                    "BASE (REQUESTED)",
                    "BASE COMPLETED",
                    "HEAD (REQUESTED)",
                    "HEAD COMPLETED",
                    "FROM TAG",
                    "PENDING",
                ],
                rows,
            )
        }
        BranchCommand::Drop { table, name, json } => {
            let storage = open_table_storage(&table, options).await?;
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
        BranchCommand::Merge {
            table,
            source,
            into,
            strategy,
            dry_run,
            json,
        } => {
            let storage = open_table_storage(&table, options).await?;
            let target = open_table_at(&table, storage, into.as_deref().unwrap_or(MAIN)).await?;
            let spec = RefSpec::parse(&source).map_err(|e| branching_error(&table, e))?;
            let options = MergeOptions::new(strategy.into()).with_dry_run(dry_run);
            let outcome = merge(&target, &spec, &options)
                .await
                .map_err(|e| branching_error(&table, e))?;
            if json {
                return print_json(&merge_json(&table, &outcome, &options));
            }
            print_text(&merge_text(&table, &outcome, &options, false))
        }
        BranchCommand::Rebase {
            table,
            name,
            strategy,
            dry_run,
            json,
        } => {
            let storage = open_table_storage(&table, options).await?;
            let main = open_table_at(&table, storage, MAIN).await?;
            let options = MergeOptions::new(strategy.into()).with_dry_run(dry_run);
            let outcome = rebase(&main, &name, &options)
                .await
                .map_err(|e| branching_error(&table, e))?;
            if json {
                return print_json(&rebase_json(&table, &outcome, &options));
            }
            print_text(&rebase_text(&table, &outcome, &options))
        }
        BranchCommand::Publish {
            table,
            name,
            drop,
            json,
        } => {
            let branch = open_working_branch(&table, options, &name).await?;
            let outcome = if drop {
                publish_and_drop(&branch).await
            } else {
                publish(&branch).await
            }
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
                    "dropped": drop,
                }));
            }
            let legacy = if outcome.legacy_root {
                "readers that know nothing of branches (hudi-rs, Spark) read it at the table path"
            } else {
                "warning: the root hoodie.properties could not be repointed yet; readers that \
                 know nothing of branches read the previous main until the next change of main"
            };
            let dropped = if drop {
                format!("; branch {name} dropped")
            } else {
                String::new()
            };
            print_text(&format!(
                "{table}: branch {name} published as publication p{}; main now ends at {} \
                 ({} instant(s), {} object(s) copied); {legacy}{dropped}",
                outcome.publication,
                head.unwrap_or_else(|| "no write".to_string()),
                outcome.instants,
                outcome.objects
            ))
        }
    }
}
