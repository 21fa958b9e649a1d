//! `arbor doctor <table> [--fix] [--json]`: a table's clock, lock state, last commit and
//! pending instants; `--fix` repairs what is safe to repair (see `arbor_table::doctor`).

use arbor_storage::StorageOptions;
use arbor_table::doctor::{diagnose, repair, Diagnosis};
use clap::Args;

use crate::context::open_table_on;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_text};

/// Arguments of `arbor doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The table's base path or URL.
    pub table: String,
    /// Repair what is safe to repair: a shared clock ahead of the timeline, the last commit if
    /// a crash left it unfinished, a missing or corrupt lock state, failed writes.
    #[arg(long)]
    pub fix: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn text(d: &Diagnosis) -> String {
    let c = &d.clock;
    let mut out = vec![format!(
        "clock: this machine {}, table clock {}, latest instant {} ({} s {}; allowed {} s ahead)",
        c.now,
        c.shared_clock.as_deref().unwrap_or("-"),
        c.timeline_max.as_deref().unwrap_or("-"),
        c.ahead_s.abs(),
        if c.ahead_s > 0 { "ahead" } else { "behind" },
        c.max_ahead_s
    )];
    let l = &d.lock;
    let marks: Vec<String> = l
        .marks
        .iter()
        .map(|(k, m)| format!("{k}={}", m.map_or("-".to_string(), |m| m.to_string())))
        .collect();
    out.push(format!(
        "lock: {}{}{} (fence {})",
        l.state,
        l.token.map(|t| format!(", token {t}")).unwrap_or_default(),
        l.expires_at
            .as_deref()
            .map(|e| format!(", lease until {e}"))
            .unwrap_or_default(),
        marks.join(", ")
    ));
    match &d.commit {
        Some(r) => out.push(format!(
            "last commit: #{} {} at {} ({})",
            r.seq,
            r.target,
            r.at,
            if r.complete {
                "complete"
            } else {
                "to roll forward"
            }
        )),
        None => out.push("last commit: none recorded".to_string()),
    }
    if d.pending.is_empty() {
        out.push("pending instants: none".to_string());
    }
    for p in &d.pending {
        out.push(format!(
            "pending: {} {} {} (heartbeat {}){}",
            p.instant,
            p.action,
            p.state,
            p.heartbeat_age_s
                .map_or("none".to_string(), |a| format!("{a} s ago")),
            if p.orphaned { ", orphaned" } else { "" }
        ));
    }
    let problems = d.problems();
    if problems.is_empty() {
        out.push("no problems found".to_string());
    } else {
        for p in problems {
            out.push(format!("problem: {p}"));
        }
    }
    out.join("\n")
}

/// Runs the command. Exits 1 when problems remain (after `--fix`, those it could not fix).
pub async fn run(args: DoctorArgs, options: &StorageOptions) -> CliResult<()> {
    let table = open_table_on(&args.table, options, crate::context::MAIN).await?;
    let fixed = if args.fix {
        repair(&table)
            .await
            .map_err(|e| CliError::at(&args.table, e))?
    } else {
        Vec::new()
    };
    let d = diagnose(&table)
        .await
        .map_err(|e| CliError::at(&args.table, e))?;
    let problems = d.problems();
    if args.json {
        print_json(&serde_json::json!({
            "table": args.table,
            "diagnosis": d,
            "problems": problems,
            "fixed": fixed,
        }))?;
    } else {
        let mut lines = fixed
            .iter()
            .map(|f| format!("fixed: {f}"))
            .collect::<Vec<_>>();
        lines.push(text(&d));
        print_text(&lines.join("\n"))?;
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::at(
            &args.table,
            CliError::Usage(format!("{} problem(s) remain", problems.len())),
        ))
    }
}
