//! `arbor`: a command-line tool for Apache Hudi tables with Git-like branches and tags.
//!
//! Every command prints one readable line `error: ...` and exits with code 1 on failure; no
//! command panics on bad input.

mod commands;
mod context;
mod emit;
mod error;
mod input;
mod input_hex;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands::archive::ArchiveArgs;
use crate::commands::branch::BranchArgs;
use crate::commands::clean::CleanArgs;
use crate::commands::clone::CloneArgs;
use crate::commands::compact::CompactArgs;
use crate::commands::create::CreateArgs;
use crate::commands::delete_partition::DeletePartitionArgs;
use crate::commands::demo::DemoArgs;
use crate::commands::doctor::DoctorArgs;
use crate::commands::files::FilesArgs;
use crate::commands::index::IndexArgs;
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
    /// Storage option as KEY=VALUE (repeatable), e.g. s3.endpoint=http://127.0.0.1:5055,
    /// s3.region=us-east-1, s3.access-key-id=..., s3.secret-access-key=..., s3.allow-http=true,
    /// azure.account=..., azure.access-key=..., azure.use-emulator=true, gs.service-account-path=...
    /// (an unknown key is an error listing the accepted ones). Credentials are never read from
    /// the environment implicitly.
    #[arg(
        long = "storage-option",
        short = 'o',
        value_name = "KEY=VALUE",
        global = true
    )]
    storage_options: Vec<String>,

    /// The table lock of the commands that change a table: `storage` (the default: an object
    /// in the table's storage under .hoodie/.locks), `file` (OS-locked files in a local table's
    /// .hoodie/.locks), `file:///DIR`, `postgres://USER:PASSWORD@HOST:PORT/DB`, or
    /// `zk://HOST:PORT[,HOST:PORT]/BASE/PATH[?lock_key=KEY]` (Hudi's ZooKeeper lock: use the
    /// base path and lock key of the Spark writers to exclude them). Without it, the table's
    /// `hoodie.write.lock.provider` properties decide, else `storage`.
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
    /// Restore the table to a savepoint: every later write is rolled back
    /// (`arbor restore <table> --to T`).
    Restore(RestoreArgs),
    /// Create, list, drop and publish working branches
    /// (`arbor branch create <table> <name> [--from-tag T]`).
    Branch(BranchArgs),
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
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ARBOR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,arbor::as_of=off")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
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
            Command::Restore(args) => commands::restore::run(args, &options).await,
            Command::Branch(args) => commands::branch::run(args, &options).await,
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
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
