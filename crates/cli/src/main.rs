//! `arbor`: a command-line tool for Apache Hudi tables with Git-like branches and tags.
//!
//! Every command prints one readable line `error: ...` and exits with code 1 on failure; no
//! command panics on bad input.

mod commands;
mod error;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands::timeline::TimelineArgs;

/// arbor: write, read and manage Apache Hudi tables, with branches and tags.
#[derive(Debug, Parser)]
#[command(name = "arbor", version, about, long_about = None)]
struct Cli {
    /// Storage option as KEY=VALUE (repeatable), e.g. s3.endpoint=http://127.0.0.1:5055,
    /// s3.region=us-east-1, s3.access-key-id=..., s3.secret-access-key=..., s3.allow-http=true.
    /// Credentials are never read from the environment implicitly.
    #[arg(
        long = "storage-option",
        short = 'o',
        value_name = "KEY=VALUE",
        global = true
    )]
    storage_options: Vec<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the instants of a table's timeline.
    Timeline(TimelineArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ARBOR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
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
    let result = runtime.block_on(async {
        let options = commands::storage_options(&cli.storage_options)?;
        match cli.command {
            Command::Timeline(args) => commands::timeline::run(args, &options).await,
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
