//! `arbor clone <source> <target>`: a shallow (or `--deep`) clone of a table at a tag, an
//! instant or a branch head, in another directory, bucket or backend; and the clone
//! lifecycle: `arbor clone list|detach|forget|prune` (`docs/clones.md`).

use std::path::Path;

use arbor_branching::clone::{
    clone_table, detach_clone, forget_pin, list_pins, prune_pins, CloneAt, CloneOutcome,
    CloneRequest, DetachOutcome, PruneOutcome,
};
use arbor_storage::StorageOptions;
use arbor_timeline::layout::{
    CloneDescriptor, CloneSource, LocationOpener, PinRecord, RegistryOpener,
};
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::context::{branching_error, parse_instant, MAIN};
use crate::error::{CliError, CliResult};
use crate::output::human_bytes;
use crate::output::{print_json, print_table, print_text};

/// Arguments of `arbor clone`.
#[derive(Debug, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Examples:\n  \
    arbor clone ./trips ./trips-exp --tag v1          # shallow: no data file copied\n  \
    arbor clone ./trips s3://lab/trips --branch audit # the branch's head, on S3\n  \
    arbor clone ./trips ./trips-copy --deep           # self-contained copy of main's head\n  \
    arbor clone list ./trips                          # the clones pinning ./trips\n  \
    arbor clone detach ./trips-exp                    # copy what it reads, drop its pins\n  \
    arbor clone prune ./trips                         # drop pins of clones that are gone\n\n\
A shallow clone is read and written by arbor only: its data files stay in the source. Until\n\
`arbor clone detach`, Hudi readers that do not know clones (hudi-rs, Spark and other Java\n\
engines) refuse it: its hoodie.properties has hoodie.table.type=\n\
ARBOR_SHALLOW_CLONE__READ_WITH_ARBOR_OR_RUN_ARBOR_CLONE_DETACH (the real type is kept in\n\
arbor.clone.table.type). After detach, or with --deep, every engine reads it."
)]
pub struct CloneArgs {
    /// A lifecycle subcommand (without one: make a clone).
    #[command(subcommand)]
    pub command: Option<CloneCommand>,
    /// The source table's base path or URL.
    #[arg(required = true)]
    pub source: Option<String>,
    /// Where the clone is made: an empty (or missing) directory, or a URL with nothing below it.
    #[arg(required = true)]
    pub target: Option<String>,
    /// Clone the snapshot of this tag of main.
    #[arg(long, value_name = "T", conflicts_with_all = ["instant", "branch"])]
    pub tag: Option<String>,
    /// Clone main as of this completed write.
    #[arg(long, value_name = "I", conflicts_with = "branch")]
    pub instant: Option<String>,
    /// Clone the head of this branch (default: main's head).
    #[arg(long, value_name = "B")]
    pub branch: Option<String>,
    /// Copy the snapshot's files too: a self-contained table every Hudi reader reads, with no
    /// pin on the source.
    #[arg(long)]
    pub deep: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The `arbor clone` lifecycle subcommands.
#[derive(Debug, Subcommand)]
pub enum CloneCommand {
    /// List the clones pinning a table: id, location, instant, ref, created.
    List {
        /// The source table's base path or URL.
        source: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Make a shallow clone self-contained: copy the files it still reads from its sources,
    /// make it readable by every Hudi engine again, then drop its source references and its
    /// pins.
    Detach {
        /// The clone's base path or URL.
        clone: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove the pin of a clone that is gone (refused while the clone exists, unless --force).
    Forget {
        /// The source table's base path or URL.
        source: String,
        /// The clone's id or location.
        clone: String,
        /// Remove the pin even though the clone exists (it may then lose files to the
        /// source's cleans).
        #[arg(long)]
        force: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove every pin whose location no longer holds its clone.
    Prune {
        /// The source table's base path or URL.
        source: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `arbor clone`.
pub async fn run(args: CloneArgs, options: &StorageOptions) -> CliResult<()> {
    let opener = RegistryOpener::new(options.clone());
    match args.command {
        Some(CloneCommand::List { source, json }) => {
            let pins = list_pins(&opener, &source)
                .await
                .map_err(|e| branching_error(&source, e))?;
            print_pins(&source, &pins, json)
        }
        Some(CloneCommand::Detach { clone, json }) => {
            let out = detach_clone(&opener, &clone)
                .await
                .map_err(|e| branching_error(&clone, e))?;
            print_detach(&clone, &out, json)
        }
        Some(CloneCommand::Forget {
            source,
            clone,
            force,
            json,
        }) => {
            let pin = forget_pin(&opener, &source, &clone, force)
                .await
                .map_err(|e| branching_error(&source, e))?;
            if json {
                return print_json(&serde_json::json!({
                    "source": source,
                    "forgotten": PinJson::from(&pin),
                }));
            }
            print_text(&format!(
                "{source}: forgot clone {} at {} (its snapshot at {} is no longer kept for it)",
                pin.clone_id, pin.location, pin.instant
            ))
        }
        Some(CloneCommand::Prune { source, json }) => {
            let out = prune_pins(&opener, &source)
                .await
                .map_err(|e| branching_error(&source, e))?;
            print_prune(&source, &out, json)
        }
        None => make_clone(args, &opener).await,
    }
}

async fn make_clone(args: CloneArgs, opener: &RegistryOpener) -> CliResult<()> {
    let (Some(source), Some(target)) = (args.source, args.target) else {
        return Err(CliError::Usage(
            "arbor clone needs <SOURCE> <TARGET> (or a subcommand: list, detach, forget, prune)"
                .to_string(),
        ));
    };
    let at = match (&args.tag, &args.instant, &args.branch) {
        (Some(t), _, _) => CloneAt::Tag(t.clone()),
        (_, Some(i), _) => {
            CloneAt::Instant(parse_instant("--instant", i).map_err(|e| CliError::at(&source, e))?)
        }
        (_, _, Some(b)) if b != MAIN => CloneAt::Branch(b.clone()),
        _ => CloneAt::Main,
    };
    let made = make_local_dir(&target)?;
    let req = CloneRequest {
        source: source.clone(),
        target: target.clone(),
        at,
        tag_branch: None,
        deep: args.deep,
    };
    let out = match clone_table(opener, &req).await {
        Ok(out) => out,
        Err(e) => {
            if let Some(dir) = made {
                remove_if_empty(&dir);
            }
            return Err(branching_error(&target, e));
        }
    };
    // Which source each pin is on (the descriptor lists them in the pins' order).
    let sources = match opener.open(&out.location) {
        Ok(own) => CloneDescriptor::load(own.as_ref())
            .await
            .ok()
            .flatten()
            .map(|(d, _)| d.sources)
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    print_clone(&out, &sources, args.json)
}

/// Creates a missing local target directory; returns the outermost directory it made.
fn make_local_dir(target: &str) -> CliResult<Option<std::path::PathBuf>> {
    let path = if let Some(rest) = target.strip_prefix("file://") {
        rest
    } else if target.contains("://") {
        return Ok(None);
    } else {
        target
    };
    let p = Path::new(path);
    if p.is_dir() {
        return Ok(None);
    }
    if p.exists() {
        return Err(CliError::at(
            target,
            CliError::Usage("exists and is not a directory".to_string()),
        ));
    }
    let mut outermost = p.to_path_buf();
    let mut cur = p;
    while let Some(parent) = cur.parent() {
        if parent.as_os_str().is_empty() || parent.exists() {
            break;
        }
        outermost = parent.to_path_buf();
        cur = parent;
    }
    std::fs::create_dir_all(p).map_err(|e| {
        CliError::at(
            target,
            CliError::Usage(format!("cannot create the directory: {e}")),
        )
    })?;
    Ok(Some(outermost))
}

/// Removes a directory this command made when the failed clone left nothing in it (a started
/// creation stays, so that running the clone again resumes it).
fn remove_if_empty(dir: &Path) {
    fn has_files(p: &Path) -> bool {
        std::fs::read_dir(p).map_or(true, |entries| {
            entries.flatten().any(|e| {
                let path = e.path();
                !path.is_dir() || has_files(&path)
            })
        })
    }
    if !has_files(dir) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A pin as `--json` prints it.
#[derive(Serialize)]
struct PinJson<'a> {
    id: &'a str,
    location: &'a str,
    instant: &'a str,
    root: &'a str,
    reference: &'a str,
    created: &'a str,
}

impl<'a> From<&'a PinRecord> for PinJson<'a> {
    fn from(p: &'a PinRecord) -> Self {
        PinJson {
            id: &p.clone_id,
            location: &p.location,
            instant: &p.instant,
            root: &p.root,
            reference: &p.reference,
            created: &p.created,
        }
    }
}

fn print_pins(source: &str, pins: &[PinRecord], json: bool) -> CliResult<()> {
    if json {
        return print_json(&pins.iter().map(PinJson::from).collect::<Vec<_>>());
    }
    if pins.is_empty() {
        return print_text(&format!("{source}: no clone pins it"));
    }
    let rows = pins
        .iter()
        .map(|p| {
            vec![
                p.clone_id.clone(),
                p.location.clone(),
                p.instant.clone(),
                reference_label(&p.reference, &p.root),
                p.created.clone(),
            ]
        })
        .collect();
    print_table(&["ID", "LOCATION", "INSTANT", "REF", "CREATED"], rows)
}

/// `tag:v1` -> `tag v1`; the root is added when it is not main and not in the reference.
fn reference_label(reference: &str, root: &str) -> String {
    let label = match reference.split_once(':') {
        Some((kind, name)) => format!("{kind} {name}"),
        None => reference.to_string(),
    };
    if root == MAIN || reference == format!("branch:{root}") {
        label
    } else {
        format!("{label} (branch {root})")
    }
}

fn print_clone(out: &CloneOutcome, sources: &[CloneSource], json: bool) -> CliResult<()> {
    if json {
        return print_json(&serde_json::json!({
            "id": out.id,
            "location": out.location,
            "source": out.source,
            "root": out.root,
            "reference": out.reference,
            "instant": out.instant.as_str(),
            "deep": out.deep,
            "resumed": out.resumed,
            "metadata_objects": out.metadata_objects,
            "data_files": out.data_files,
            "files_copied": out.files_copied,
            "bytes_copied": out.bytes_copied,
            "server_side_copy": out.server_side_copy,
            "pins": out.pins.iter().map(PinJson::from).collect::<Vec<_>>(),
        }));
    }
    let what = reference_label(&out.reference, &out.root);
    let resumed = if out.resumed {
        " (an unfinished creation resumed)"
    } else {
        ""
    };
    let mut text = if out.deep {
        format!(
            "{}: deep clone {} of {} at {} ({what}){resumed}\n  \
             {} metadata objects written; {} files copied ({}{})",
            out.location,
            out.id,
            out.source,
            out.instant,
            out.metadata_objects,
            out.files_copied,
            human_bytes(out.bytes_copied),
            if out.server_side_copy {
                ", server-side"
            } else {
                ""
            }
        )
    } else {
        format!(
            "{}: shallow clone {} of {} at {} ({what}){resumed}\n  \
             {} metadata objects written; {} data files referenced, none copied",
            out.location, out.id, out.source, out.instant, out.metadata_objects, out.data_files
        )
    };
    for (i, p) in out.pins.iter().enumerate() {
        text.push_str(&format!(
            "\n  pinned on {}: its snapshot at {} ({}) is kept while the clone references it",
            source_of_pin(out, sources, i, p),
            p.instant,
            reference_label(&p.reference, &p.root)
        ));
    }
    if !out.deep {
        text.push_str(
            "\n  arbor reads and writes it; hudi-rs, Spark and other Hudi engines refuse it \
             (hoodie.table.type=ARBOR_SHALLOW_CLONE__...) until `arbor clone detach` makes it \
             self-contained",
        );
    }
    print_text(&text)
}

/// The location of the source a pin of the new clone is on: the descriptor's source holding
/// the pin's instant on the pin's root (the direct source when nothing else matches).
fn source_of_pin(out: &CloneOutcome, sources: &[CloneSource], i: usize, p: &PinRecord) -> String {
    let same = |s: &&CloneSource| s.instant == p.instant && s.root == p.root;
    sources
        .get(i)
        .filter(same)
        .or_else(|| sources.iter().find(same))
        .map_or_else(|| out.source.clone(), |s| s.location.clone())
}

fn print_detach(clone: &str, out: &DetachOutcome, json: bool) -> CliResult<()> {
    if json {
        return print_json(&serde_json::json!({
            "clone": clone,
            "id": out.id,
            "already_detached": out.already_detached,
            "files_copied": out.files_copied,
            "bytes_copied": out.bytes_copied,
            "server_side_copy": out.server_side_copy,
            "files_released": out.files_released,
            "pins_removed": out.pins_removed.iter().map(PinJson::from).collect::<Vec<_>>(),
        }));
    }
    let mut text = if out.already_detached {
        format!("{clone}: clone {} was already detached", out.id)
    } else {
        format!(
            "{clone}: clone {} detached: {} files copied ({}{}); it no longer reads any other \
             location, and every Hudi engine reads it",
            out.id,
            out.files_copied,
            human_bytes(out.bytes_copied),
            if out.server_side_copy {
                ", server-side"
            } else {
                ""
            }
        )
    };
    if out.files_released > 0 {
        text.push_str(&format!(
            "\n  {} listed files were already released by the source and are read by no snapshot the clone keeps",
            out.files_released
        ));
    }
    for p in &out.pins_removed {
        text.push_str(&format!(
            "\n  pin removed at {} ({}): the source's next clean may reclaim what only this clone held",
            p.instant,
            reference_label(&p.reference, &p.root)
        ));
    }
    print_text(&text)
}

fn print_prune(source: &str, out: &PruneOutcome, json: bool) -> CliResult<()> {
    if json {
        return print_json(&serde_json::json!({
            "source": source,
            "removed": out.removed.iter().map(PinJson::from).collect::<Vec<_>>(),
            "kept": out.kept.iter().map(PinJson::from).collect::<Vec<_>>(),
            "unreachable": out.unreachable.iter().map(|(p, why)| serde_json::json!({
                "pin": PinJson::from(p),
                "reason": why,
            })).collect::<Vec<_>>(),
        }));
    }
    let mut text = format!(
        "{source}: {} pin(s) removed, {} kept (clone alive)",
        out.removed.len(),
        out.kept.len()
    );
    for p in &out.removed {
        text.push_str(&format!(
            "\n  removed {} at {} (instant {})",
            p.clone_id, p.location, p.instant
        ));
    }
    for (p, why) in &out.unreachable {
        text.push_str(&format!(
            "\n  kept {} at {}: cannot read the location ({why})",
            p.clone_id, p.location
        ));
    }
    print_text(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_reference_label() {
        assert_eq!(reference_label("tag:v1", "main"), "tag v1");
        assert_eq!(reference_label("branch:audit", "audit"), "branch audit");
        assert_eq!(reference_label("tag:v1", "audit"), "tag v1 (branch audit)");
        assert_eq!(reference_label("main", "main"), "main");
    }

    #[test]
    fn test_human_bytes() {
        assert_eq!(human_bytes(10), "10 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }
}
