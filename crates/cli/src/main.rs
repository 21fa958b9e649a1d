//! `arbor`: a command-line tool for Apache Hudi tables with Git-like branches and tags.
//!
//! Every command prints one readable line `error: ...` and exits with code 1 on failure (with
//! `--json`: one JSON object `{"error": ..., "kind": ...}` on stdout instead); no command
//! panics on bad input, nor on a closed stdout or stderr.

#[macro_use]
mod stdio;
mod commands;
mod context;
mod emit;
mod error;
mod input;
mod input_hex;
mod input_read;
mod malloc;
mod output;

use std::process::ExitCode;

use std::io::IsTerminal;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::commands::archive::ArchiveArgs;
use crate::commands::branch::BranchArgs;
use crate::commands::cherry_pick::CherryPickArgs;
use crate::commands::clean::CleanArgs;
use crate::commands::clone::CloneArgs;
use crate::commands::cluster::ClusterArgs;
use crate::commands::compact::CompactArgs;
use crate::commands::create::CreateArgs;
use crate::commands::delete_partition::DeletePartitionArgs;
use crate::commands::demo::DemoArgs;
use crate::commands::diff::DiffArgs;
use crate::commands::doctor::DoctorArgs;
use crate::commands::files::FilesArgs;
use crate::commands::index::IndexArgs;
use crate::commands::maintain::MaintainArgs;
use crate::commands::mdt::MdtArgs;
use crate::commands::read::ReadArgs;
use crate::commands::restore::RestoreArgs;
use crate::commands::savepoint::SavepointArgs;
#[cfg(feature = "sql")]
use crate::commands::sql::SqlArgs;
use crate::commands::tag::TagArgs;
use crate::commands::timeline::TimelineArgs;
use crate::commands::ttl::TtlArgs;
use crate::commands::upgrade::UpgradeArgs;
use crate::commands::validate::ValidateArgs;
use crate::commands::write::WriteArgs;

/// arbor: write, read and manage Apache Hudi tables, with branches and tags.
#[derive(Debug, Parser)]
#[command(name = "arbor", version, about, long_about = None)]
struct Cli {
    /// Storage option KEY=VALUE, repeatable: s3.*, azure.*, gs.* (listed in the README).
    #[arg(
        long = "storage-option",
        short = 'o',
        value_name = "KEY=VALUE",
        global = true
    )]
    storage_options: Vec<String>,

    /// Table lock: storage (default), file, file:///DIR, postgres://..., zk://... (README).
    #[arg(long = "lock", value_name = "URL", global = true)]
    lock: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create an empty table whose schema comes from an input file.
    Create(CreateArgs),
    /// Write rows from a .parquet, .csv or .jsonl file as one commit (creating the table if
    /// asked to).
    Write(WriteArgs),
    /// Delete whole partitions (one replacecommit).
    DeletePartition(DeletePartitionArgs),
    /// Read a table: snapshot, time travel, incremental or read-optimized.
    Read(ReadArgs),
    /// List the latest file slice of every file group.
    Files(FilesArgs),
    /// List the instants of a table's timeline.
    Timeline(TimelineArgs),
    /// Create a table in a fresh directory, write, upsert, delete and read it, then write on a
    /// branch, publish it and read a tag, step by step.
    Demo(DemoArgs),
    /// Manage the metadata table (`arbor mdt init <table>`).
    Mdt(MdtArgs),
    /// Check the metadata table against storage; exit code 1 when they differ.
    Validate(ValidateArgs),
    /// Create, list and query indexes (`arbor index create <table> --secondary <column>`).
    Index(IndexArgs),
    /// Create, list and delete savepoints (`arbor savepoint create <table> [--instant T]`).
    Savepoint(SavepointArgs),
    /// Delete the data files no savepoint, pending instant or retention window needs.
    Clean(CleanArgs),
    /// Move old completed instants to the archived timeline.
    Archive(ArchiveArgs),
    /// Show a table's clock, lock state, last commit and pending instants; `--fix` repairs
    /// what is safe to repair (`arbor doctor <table> [--fix] [--json]`).
    Doctor(DoctorArgs),
    /// Compact a merge-on-read table: merge each file group's log files into a new base file
    /// (`arbor compact <table> [--branch B]`).
    Compact(CompactArgs),
    /// Cluster: rewrite small file slices as sorted file groups of the target size
    /// (`arbor cluster <table> [--sort-by C1,C2] [--layout linear|z-order|hilbert]`).
    Cluster(ClusterArgs),
    /// Run every table service that is due (compaction, clustering, TTL, expired tags, clone
    /// pins, clean, archival), each once, in a safe order (`arbor maintain <table> [--dry-run]`).
    Maintain(MaintainArgs),
    /// Restore the table to a savepoint: every later write is rolled back
    /// (`arbor restore <table> --to T`).
    Restore(RestoreArgs),
    /// Create, list, drop and publish working branches
    /// (`arbor branch create <table> <name> [--from-tag T]`).
    Branch(BranchArgs),
    /// Apply one completed write of a branch to main or another branch
    /// (`arbor cherry-pick <table> <instant> --from <branch> [--branch B]`).
    CherryPick(CherryPickArgs),
    /// The records that differ between two refs, by record key
    /// (`arbor diff <table> main <branch> [--stat] [--keys-only]`).
    Diff(DiffArgs),
    /// Create, list, drop and expire tags (`arbor tag create <table> <name> [--expires-in 7d]`).
    Tag(TagArgs),
    /// Upgrade a version-6 (Hudi 0.x) or version-8 table to version 9 or 8
    /// (`arbor upgrade <table> [--to 8|9]`).
    Upgrade(UpgradeArgs),
    /// Partition TTL: policies that expire old partitions, and the runs that delete them
    /// (`arbor ttl set <table> --policy time --retain 30d`, `arbor ttl run <table> --dry-run`).
    Ttl(TtlArgs),
    /// Query tables with SQL (DataFusion): `arbor sql "SELECT ..." --table t=./trips
    /// [--branch B | --tag T | --as-of I]`.
    #[cfg(feature = "sql")]
    Sql(SqlArgs),
    /// Clone a table to another location without copying data (`arbor clone <source> <target>
    /// [--tag T | --instant I | --branch B] [--deep]`), and manage clones
    /// (`arbor clone list|detach|forget|prune`).
    Clone(CloneArgs),
}

fn main() -> ExitCode {
    malloc::limit_arenas();
    let (cli, json) = match parse() {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ARBOR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,arbor::as_of=off")),
        )
        .with_writer(stdio::QuietStderr::make)
        .log_internal_errors(false)
        .with_ansi(log_in_colour())
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    context::lock::set_lock_url(cli.lock.clone());
    let result = runtime.block_on(async {
        context::lock::release_locks_on_interrupt();
        let options = context::storage_options(&cli.storage_options)?;
        match cli.command {
            Command::Create(args) => commands::create::run(args, &options).await,
            Command::Write(args) => commands::write::run(args, &options).await,
            Command::DeletePartition(args) => commands::delete_partition::run(args, &options).await,
            Command::Read(args) => commands::read::run(args, &options).await,
            Command::Files(args) => commands::files::run(args, &options).await,
            Command::Timeline(args) => commands::timeline::run(args, &options).await,
            Command::Demo(args) => commands::demo::run(args, &options).await,
            Command::Mdt(args) => commands::mdt::run(args, &options).await,
            Command::Validate(args) => commands::validate::run(args, &options).await,
            Command::Index(args) => commands::index::run(args, &options).await,
            Command::Savepoint(args) => commands::savepoint::run(args, &options).await,
            Command::Clean(args) => commands::clean::run(args, &options).await,
            Command::Archive(args) => commands::archive::run(args, &options).await,
            Command::Doctor(args) => commands::doctor::run(args, &options).await,
            Command::Compact(args) => commands::compact::run(args, &options).await,
            Command::Cluster(args) => commands::cluster::run(args, &options).await,
            Command::Maintain(args) => commands::maintain::run(args, &options).await,
            Command::Restore(args) => commands::restore::run(args, &options).await,
            Command::Branch(args) => commands::branch::run(args, &options).await,
            Command::Diff(args) => commands::diff::run(args, &options).await,
            Command::CherryPick(args) => commands::cherry_pick::run(args, &options).await,
            Command::Ttl(args) => commands::ttl::run(args, &options).await,
            Command::Tag(args) => commands::tag::run(args, &options).await,
            Command::Upgrade(args) => commands::upgrade::run(args, &options).await,
            Command::Clone(args) => commands::clone::run(args, &options).await,
            #[cfg(feature = "sql")]
            Command::Sql(args) => commands::sql::run(args, &options).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report_failure(&e.to_string(), e.kind(), json);
            ExitCode::FAILURE
        }
    }
}

/// The parsed command line and whether the command asked for `--json` output; on a usage
/// error (or `--help`, `--version`) the exit code, the message printed.
fn parse() -> Result<(Cli, bool), ExitCode> {
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, wants_json(&m))));
    parsed.map_err(|e| {
        use clap::error::ErrorKind;
        let shown = matches!(
            e.kind(),
            ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
        let code = u8::try_from(e.exit_code()).unwrap_or(2);
        if !shown && std::env::args_os().any(|a| a == "--json") {
            let rendered = e.to_string();
            let line = rendered.lines().next().unwrap_or_default();
            report_failure(line.strip_prefix("error: ").unwrap_or(line), "usage", true);
        } else {
            // clap's own text (help on stdout, errors on stderr); a closed stream is ignored.
            let _ = e.print();
        }
        ExitCode::from(code)
    })
}

/// Whether the (sub)command `matches` names was given `--json`.
fn wants_json(matches: &clap::ArgMatches) -> bool {
    let mut level = Some(matches);
    while let Some(m) = level {
        if matches!(m.try_get_one::<bool>("json"), Ok(Some(true))) {
            return true;
        }
        level = m.subcommand().map(|(_, sub)| sub);
    }
    false
}

/// Prints a failure: `{"error": message, "kind": kind}` on stdout for a `--json` command that
/// has not printed anything to stdout yet (stdout then holds one JSON document), else one
/// line `error: message` on stderr.
fn report_failure(message: &str, kind: &str, json: bool) {
    if json && !stdio::wrote_stdout() {
        let doc = serde_json::json!({ "error": message, "kind": kind });
        if stdio::out(&doc.to_string()).is_ok() {
            return;
        }
    }
    errln!("error: {message}");
}

/// Whether the log on stderr is coloured: only on a terminal, and not when `NO_COLOR` is set
/// to anything but the empty string (<https://no-color.org>).
fn log_in_colour() -> bool {
    colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// Whether output is coloured: on a terminal with `NO_COLOR` unset or empty.
fn colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_colour_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(colour(true, None));
        assert!(colour(true, Some(OsStr::new(""))));
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(!colour(false, None));
    }

    #[test]
    fn test_cli_definition_is_valid() {
        Cli::command().debug_assert();
    }
}
