//! `arbor files <table> [--branch B] [--as-of T | --tag NAME] [--json]`: the latest file slice
//! of every file group.

use arbor_branching::tag_reader;
use arbor_fsview::FileSlice;
use arbor_storage::StorageOptions;
use clap::Args;
use serde::Serialize;

use crate::context::{branching_error, open_reader_at, open_table_storage, selected};
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_table, print_text};

/// Arguments of `arbor files`.
#[derive(Debug, Args)]
pub struct FilesArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The branch whose file slices to list (a working branch, or main).
    #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
    pub branch: String,
    /// The file slices as of this instant (requested time, or an ISO date/time as
    /// `arbor read --as-of` takes) instead of the latest.
    #[arg(long, value_name = "T")]
    pub as_of: Option<String>,
    /// The file slices as of this tag of the branch.
    #[arg(long, value_name = "NAME", conflicts_with = "as_of")]
    pub tag: Option<String>,
    /// Show the base and log file names (default: their sizes and counts only).
    #[arg(long, short = 'l')]
    pub long: bool,
    /// Print JSON (always with file names and sizes) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One data file.
#[derive(Debug, Serialize)]
pub struct FileEntry {
    /// The file name (inside the partition directory).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
}

/// One file slice: what a snapshot query reads of one file group.
#[derive(Debug, Serialize)]
pub struct SliceEntry {
    /// The partition path (`""` when not partitioned).
    pub partition: String,
    /// The file group id.
    pub file_id: String,
    /// The slice's base instant.
    pub base_instant: String,
    /// The base file, if any.
    pub base_file: Option<FileEntry>,
    /// The log files, in order.
    pub log_files: Vec<FileEntry>,
    /// Bytes of all the slice's files.
    pub total_size: u64,
}

impl SliceEntry {
    fn new(s: &FileSlice) -> Self {
        SliceEntry {
            partition: s.partition.clone(),
            file_id: s.file_id.clone(),
            base_instant: s.base_instant.to_string(),
            base_file: s.base_file.as_ref().map(|b| FileEntry {
                name: b.file_name(),
                size: b.size,
            }),
            log_files: s
                .log_files
                .iter()
                .map(|l| FileEntry {
                    name: l.file_name(),
                    size: l.size,
                })
                .collect(),
            total_size: s.total_size(),
        }
    }
}

/// Bytes in a short human form (`1.5 KiB`).
pub fn human_size(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    let name = UNITS.get(unit).copied().unwrap_or("B");
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {name}")
    }
}

/// Which state of which branch `arbor files` lists.
#[derive(Debug, Clone, Copy)]
pub struct SliceSelection<'a> {
    /// The branch (`main` or a working branch).
    pub branch: &'a str,
    /// As of this instant (`--as-of`).
    pub as_of: Option<&'a str>,
    /// As of this tag of the branch (`--tag`).
    pub tag: Option<&'a str>,
}

impl SliceSelection<'static> {
    /// Main's latest file slices.
    pub fn main_latest() -> Self {
        SliceSelection {
            branch: crate::context::MAIN,
            as_of: None,
            tag: None,
        }
    }
}

/// The latest file slices of the table at `location` (of the selected branch, as of the
/// selected instant or tag), sorted by partition then file id.
pub async fn slices(
    location: &str,
    selection: SliceSelection<'_>,
    options: &StorageOptions,
) -> CliResult<Vec<SliceEntry>> {
    let storage = open_table_storage(location, options).await?;
    let (reader, as_of) = match selection.tag {
        Some(tag) => {
            let (reader, instant) = tag_reader(storage, selected(selection.branch), tag)
                .await
                .map_err(|e| branching_error(location, e))?;
            (reader, Some(instant))
        }
        None => {
            let reader = open_reader_at(location, storage, selection.branch).await?;
            let zone = reader.config().timeline_timezone();
            let as_of = selection
                .as_of
                .map(|t| crate::context::parse_time("--as-of", t, zone))
                .transpose()?;
            (reader, as_of)
        }
    };
    let slices = reader
        .view()
        .latest_file_slices(None, as_of.as_ref())
        .await
        .map_err(|e| CliError::at(location, CliError::Usage(e.to_string())))?;
    let mut out: Vec<SliceEntry> = slices.iter().map(SliceEntry::new).collect();
    out.sort_by(|a, b| (&a.partition, &a.file_id).cmp(&(&b.partition, &b.file_id)));
    Ok(out)
}

/// Prints slices as a table; `long` shows file names instead of sizes and counts.
pub fn print_slices(slices: &[SliceEntry], long: bool) -> CliResult<()> {
    if slices.is_empty() {
        return print_text("(no file slices)");
    }
    let rows = slices
        .iter()
        .map(|s| {
            let log_bytes: u64 = s.log_files.iter().map(|l| l.size).sum();
            let (base, logs) = if long {
                (
                    s.base_file
                        .as_ref()
                        .map(|b| b.name.clone())
                        .unwrap_or_else(|| "-".into()),
                    s.log_files
                        .iter()
                        .map(|l| l.name.clone())
                        .collect::<Vec<_>>()
                        .join("\n"),
                )
            } else {
                (
                    s.base_file
                        .as_ref()
                        .map(|b| human_size(b.size))
                        .unwrap_or_else(|| "-".into()),
                    match s.log_files.len() {
                        0 => String::new(),
                        n => format!("{n} ({})", human_size(log_bytes)),
                    },
                )
            };
            vec![
                if s.partition.is_empty() {
                    "-".to_string()
                } else {
                    s.partition.clone()
                },
                s.file_id.clone(),
                s.base_instant.clone(),
                base,
                if logs.is_empty() { "-".into() } else { logs },
                human_size(s.total_size),
            ]
        })
        .collect();
    print_table(
        &[
            "PARTITION",
            "FILE ID",
            "BASE INSTANT",
            "BASE FILE",
            "LOG FILES",
            "TOTAL",
        ],
        rows,
    )?;
    let total: u64 = slices.iter().map(|s| s.total_size).sum();
    print_text(&format!(
        "{} file slices, {}{}",
        slices.len(),
        human_size(total),
        if long { "" } else { " (--long for file names)" }
    ))
}

/// Runs the command.
pub async fn run(args: FilesArgs, options: &StorageOptions) -> CliResult<()> {
    let selection = SliceSelection {
        branch: &args.branch,
        as_of: args.as_of.as_deref(),
        tag: args.tag.as_deref(),
    };
    let slices = slices(&args.table, selection, options).await?;
    if args.json {
        print_json(&slices)
    } else {
        print_slices(&slices, args.long)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_human_size_units() {
        assert_eq!(human_size(12), "12 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(3 * 1024 * 1024), "3.0 MiB");
    }
}
