//! `arbor demo [<dir>] [--type cow|mor]`: creates a table of taxi trips in `<dir>/trips`, then
//! inserts, upserts, deletes, reads (latest, time travel, incremental) and lists files and the
//! timeline; then writes on a branch, validates and publishes it, tags main and reads the tag,
//! then expires a partition by a TTL policy (the tag still reads it), then clones the tag into
//! `<dir>/trips-lab` without copying data, writes there, lists the source's clone pins and
//! detaches the clone, printing each step as the `arbor` command that does it.

use std::path::{Path, PathBuf};

use arbor_storage::StorageOptions;
use clap::Args;

use crate::commands::branch::{self, BranchArgs, BranchCommand};
use crate::commands::clone::{self, CloneArgs, CloneCommand};
use crate::commands::files::{print_slices, slices, SliceSelection};
use crate::commands::read::{self, ReadArgs, ReadFormat};
use crate::commands::tag::{self, TagArgs, TagCommand};
use crate::commands::timeline::{self, TimelineArgs};
use crate::commands::ttl::{self, RunArgs, SetArgs, TtlArgs, TtlCommand};
use crate::commands::write::{self, OpArg, WriteArgs};
use crate::context::{CommitReport, TableSpec, TypeArg, MAIN};
use crate::error::{CliError, CliResult};
use crate::output::print_text;

/// The file that marks a directory as the demo's own, so a rerun may replace what it made.
const MARKER: &str = ".arbor-demo";

/// The tag the demo takes on main.
const TAG: &str = "v1";

/// The directory (beside the table) the demo clones the tag into.
const LAB: &str = "trips-lab";

/// Arguments of `arbor demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The directory to work in (created if missing). The demo writes `<dir>/input/` and the
    /// table `<dir>/trips`, and replaces them on a rerun (only if an earlier demo made them).
    #[arg(default_value = "arbor-demo")]
    pub dir: PathBuf,
    /// The table type.
    #[arg(long = "type", value_enum, default_value_t = TypeArg::Cow)]
    pub table_type: TypeArg,
}

const TRIPS_CSV: &str = "\
uuid,city,rider,driver,fare,ts
trip-01,san_francisco,rider-A,driver-K,19.10,1695159649087
trip-02,san_francisco,rider-C,driver-M,27.70,1695091554788
trip-03,san_francisco,rider-D,driver-L,33.90,1695046462179
trip-04,sao_paulo,rider-F,driver-P,34.15,1695516137016
trip-05,sao_paulo,rider-G,driver-Q,43.40,1695376420876
trip-06,chennai,rider-I,driver-S,41.06,1695173887231
trip-07,chennai,rider-J,driver-T,17.85,1695115999911
";

const UPDATES_JSONL: &str = r#"{"uuid":"trip-01","city":"san_francisco","rider":"rider-A","driver":"driver-K","fare":25.00,"ts":1695159700000}
{"uuid":"trip-06","city":"chennai","rider":"rider-I","driver":"driver-S","fare":45.50,"ts":1695173900000}
{"uuid":"trip-08","city":"sao_paulo","rider":"rider-H","driver":"driver-R","fare":12.30,"ts":1695200000000}
"#;

const DELETES_CSV: &str = "\
uuid,city
trip-03,san_francisco
trip-07,chennai
";

const AUDIT_JSONL: &str = r#"{"uuid":"trip-02","city":"san_francisco","rider":"rider-C","driver":"driver-M","fare":29.95,"ts":1695091600000}
{"uuid":"trip-09","city":"chennai","rider":"rider-N","driver":"driver-V","fare":22.40,"ts":1695300000000}
"#;

const LATE_CSV: &str = "\
uuid,city,rider,driver,fare,ts
trip-04,sao_paulo,rider-F,driver-P,36.00,1695516200000
";

const LAB_CSV: &str = "\
uuid,city,rider,driver,fare,ts
trip-10,chennai,rider-X,driver-Y,99.00,1695400000000
";

fn io_err(path: &Path, what: &str, e: std::io::Error) -> CliError {
    CliError::Usage(format!("{}: cannot {what}: {e}", path.display()))
}

/// Prepares `dir`: removes the table and inputs of an earlier demo, refuses to touch anything
/// the demo did not make.
fn prepare(dir: &Path) -> CliResult<(PathBuf, PathBuf)> {
    let table = dir.join("trips");
    let inputs = dir.join("input");
    let lab = dir.join(LAB);
    let marker = dir.join(MARKER);
    if (table.exists() || inputs.exists() || lab.exists()) && !marker.exists() {
        return Err(CliError::Usage(format!(
            "{} already holds trips/, {LAB}/ or input/ that arbor demo did not make; \
             choose another directory",
            dir.display()
        )));
    }
    for d in [&table, &inputs, &lab] {
        if d.exists() {
            std::fs::remove_dir_all(d).map_err(|e| io_err(d, "remove it", e))?;
        }
    }
    std::fs::create_dir_all(&inputs).map_err(|e| io_err(&inputs, "create it", e))?;
    std::fs::write(
        &marker,
        "made by `arbor demo`; a rerun replaces trips/ and input/ here\n",
    )
    .map_err(|e| io_err(&marker, "write it", e))?;
    Ok((table, inputs))
}

fn step(n: u32, title: &str, command: &str) -> CliResult<()> {
    print_text(&format!("\n== {n}. {title}\n$ arbor {command}"))
}

fn read_args(table: &str) -> ReadArgs {
    ReadArgs {
        table: table.to_string(),
        branch: MAIN.to_string(),
        tag: None,
        as_of: None,
        incremental: None,
        read_optimized: false,
        columns: Vec::new(),
        filters: Vec::new(),
        explain: false,
        meta: false,
        format: ReadFormat::Table,
        output: None,
        limit: None,
        wide: false,
    }
}

async fn write_step(
    table: &str,
    input: &Path,
    op: OpArg,
    spec: TableSpec,
    options: &StorageOptions,
) -> CliResult<CommitReport> {
    write_on(table, MAIN, input, op, spec, options).await
}

async fn write_on(
    table: &str,
    branch: &str,
    input: &Path,
    op: OpArg,
    spec: TableSpec,
    options: &StorageOptions,
) -> CliResult<CommitReport> {
    let args = WriteArgs {
        table: table.to_string(),
        input: input.to_path_buf(),
        branch: branch.to_string(),
        op,
        partial: false,
        no_schema_evolution: false,
        drop_columns: Vec::new(),
        spec,
        json: false,
    };
    let report = write::write(&args, options).await?;
    report.print(false)?;
    Ok(report)
}

/// Runs the command.
pub async fn run(args: DemoArgs, options: &StorageOptions) -> CliResult<()> {
    let (table_dir, inputs) = prepare(&args.dir)?;
    let table = table_dir.display().to_string();
    let trips = inputs.join("trips.csv");
    let updates = inputs.join("updates.jsonl");
    let deletes = inputs.join("deletes.csv");
    let audit = inputs.join("audit.jsonl");
    let late = inputs.join("late.csv");
    for (path, text) in [
        (&trips, TRIPS_CSV),
        (&updates, UPDATES_JSONL),
        (&deletes, DELETES_CSV),
        (&audit, AUDIT_JSONL),
        (&late, LATE_CSV),
    ] {
        std::fs::write(path, text).map_err(|e| io_err(path, "write it", e))?;
    }
    let kind = match args.table_type {
        TypeArg::Cow => "cow",
        TypeArg::Mor => "mor",
    };
    print_text(&format!(
        "arbor demo: a {} Hudi table (version 9) of taxi trips in {table}\n\
         inputs: {} (7 trips), {} (2 fare corrections, 1 new trip), {} (2 trips to delete),\n\
         {} (1 fare correction, 1 new trip, written on a branch), {} (1 late fare change)",
        if kind == "cow" {
            "copy-on-write"
        } else {
            "merge-on-read"
        },
        trips.display(),
        updates.display(),
        deletes.display(),
        audit.display(),
        late.display()
    ))?;

    step(
        1,
        "create the table and insert the first trips (the schema is inferred from the CSV)",
        &format!(
            "write {table} {} --op insert --type {kind} --key uuid --partition-by city --ordering ts",
            trips.display()
        ),
    )?;
    let spec = TableSpec {
        table_type: Some(args.table_type),
        key: vec!["uuid".into()],
        partition_by: vec!["city".into()],
        ordering: Some("ts".into()),
        ..TableSpec::default()
    };
    let first = write_step(&table, &trips, OpArg::Insert, spec, options).await?;

    step(2, "read the latest snapshot", &format!("read {table}"))?;
    read::run(read_args(&table), options).await?;

    step(
        3,
        "upsert: two fares change (a larger ts wins), one trip is new",
        &format!("write {table} {} --op upsert", updates.display()),
    )?;
    write_step(
        &table,
        &updates,
        OpArg::Upsert,
        TableSpec::default(),
        options,
    )
    .await?;
    step(4, "read again", &format!("read {table}"))?;
    read::run(read_args(&table), options).await?;

    step(
        5,
        "delete two trips by key (the input names only uuid and city)",
        &format!("write {table} {} --op delete", deletes.display()),
    )?;
    write_step(
        &table,
        &deletes,
        OpArg::Delete,
        TableSpec::default(),
        options,
    )
    .await?;
    step(6, "read again", &format!("read {table}"))?;
    read::run(read_args(&table), options).await?;

    step(
        7,
        "time travel: the table as of the first commit",
        &format!("read {table} --as-of {}", first.instant),
    )?;
    read::run(
        ReadArgs {
            as_of: Some(first.instant.clone()),
            ..read_args(&table)
        },
        options,
    )
    .await?;

    let columns = "_hoodie_commit_time,uuid,city,fare";
    step(
        8,
        "incremental: what changed after the first commit completed",
        &format!(
            "read {table} --incremental {} --columns {columns}",
            first.completion_time
        ),
    )?;
    read::run(
        ReadArgs {
            incremental: Some(vec![first.completion_time.clone()]),
            columns: columns.split(',').map(str::to_string).collect(),
            ..read_args(&table)
        },
        options,
    )
    .await?;

    step(9, "the files a snapshot reads", &format!("files {table}"))?;
    print_slices(
        &slices(&table, SliceSelection::main_latest(), options).await?,
        false,
    )?;

    step(10, "the timeline", &format!("timeline {table}"))?;
    timeline::run(
        TimelineArgs {
            table: table.clone(),
            branch: MAIN.to_string(),
            tag: None,
            all: false,
            json: false,
        },
        options,
    )
    .await?;

    step(
        11,
        "check the metadata table (the file listing readers use) against storage",
        &format!("validate {table}"),
    )?;
    super::validate::run(
        super::validate::ValidateArgs {
            table: table.clone(),
            branch: MAIN.to_string(),
            json: false,
        },
        options,
    )
    .await?;

    branch_steps(&table, &audit, &late, options).await?;

    print_text(&format!(
        "\nDone. The table is in {table}; try:\n  \
         arbor read {table} --format jsonl\n  \
         arbor read {table} --meta --limit 3\n  \
         arbor files {table} --json\n  \
         arbor branch list {table}\n  \
         arbor tag list {table}\n  \
         arbor delete-partition {table} chennai"
    ))
}

/// Steps 12 to 21: write on a branch while main stays as it was, validate and publish the
/// branch, tag main, change main again and read the tag.
async fn branch_steps(
    table: &str,
    audit: &Path,
    late: &Path,
    options: &StorageOptions,
) -> CliResult<()> {
    const BRANCH: &str = "audit";
    step(
        12,
        "create branch audit from main's latest write (metadata is copied, data files are shared)",
        &format!("branch create {table} {BRANCH}"),
    )?;
    branch::run(
        BranchArgs {
            command: BranchCommand::Create {
                table: table.to_string(),
                name: BRANCH.to_string(),
                from_tag: None,
                json: false,
            },
        },
        options,
    )
    .await?;

    step(
        13,
        "write on the branch: a fare correction and a new trip",
        &format!("write {table} {} --branch {BRANCH}", audit.display()),
    )?;
    write_on(
        table,
        BRANCH,
        audit,
        OpArg::Upsert,
        TableSpec::default(),
        options,
    )
    .await?;

    step(14, "main is unchanged", &format!("read {table}"))?;
    read::run(read_args(table), options).await?;

    step(
        15,
        "the branch has the changes",
        &format!("read {table} --branch {BRANCH}"),
    )?;
    read::run(
        ReadArgs {
            branch: BRANCH.to_string(),
            ..read_args(table)
        },
        options,
    )
    .await?;

    step(
        16,
        "validate the branch before publishing it",
        &format!("validate {table} --branch {BRANCH}"),
    )?;
    super::validate::run(
        super::validate::ValidateArgs {
            table: table.to_string(),
            branch: BRANCH.to_string(),
            json: false,
        },
        options,
    )
    .await?;

    step(
        17,
        "publish the branch: main fast-forwards to it",
        &format!("branch publish {table} {BRANCH}"),
    )?;
    branch::run(
        BranchArgs {
            command: BranchCommand::Publish {
                table: table.to_string(),
                name: BRANCH.to_string(),
                drop: false,
                json: false,
            },
        },
        options,
    )
    .await?;

    step(
        18,
        "main now has the branch's rows",
        &format!("read {table}"),
    )?;
    read::run(read_args(table), options).await?;

    step(
        19,
        "tag main's latest write as v1 (a savepoint keeps its files)",
        &format!("tag create {table} {TAG}"),
    )?;
    tag::run(
        TagArgs {
            command: TagCommand::Create {
                table: table.to_string(),
                name: TAG.to_string(),
                branch: MAIN.to_string(),
                instant: None,
                expires_in: None,
                json: false,
            },
        },
        options,
    )
    .await?;

    step(
        20,
        "one more change on main: a late fare change",
        &format!("write {table} {}", late.display()),
    )?;
    write_step(table, late, OpArg::Upsert, TableSpec::default(), options).await?;

    step(
        21,
        "read as of tag v1: the state before that change",
        &format!("read {table} --tag {TAG}"),
    )?;
    read::run(
        ReadArgs {
            tag: Some(TAG.to_string()),
            ..read_args(table)
        },
        options,
    )
    .await?;
    ttl_steps(table, options).await
}

/// Steps 22 to 26: a partition TTL policy, its dry run, its run, and what main and the tag
/// read afterwards.
async fn ttl_steps(table: &str, options: &StorageOptions) -> CliResult<()> {
    step(
        22,
        "a partition TTL policy: keep the 2 greatest city partitions",
        &format!("ttl set {table} --policy count --retain 2"),
    )?;
    ttl::run(
        TtlArgs {
            command: TtlCommand::Set(SetArgs {
                table: table.to_string(),
                policy: "count".to_string(),
                retain: "2".to_string(),
                spec: None,
                fields: Vec::new(),
                time_field: None,
                format: None,
                branch: MAIN.to_string(),
                json: false,
            }),
        },
        options,
    )
    .await?;
    let run_args = |dry_run: bool| RunArgs {
        table: table.to_string(),
        dry_run,
        now: None,
        max_partitions: None,
        branch: MAIN.to_string(),
        json: false,
    };
    step(
        23,
        "what a TTL run would delete, and which refs keep the files",
        &format!("ttl run {table} --dry-run"),
    )?;
    ttl::run(
        TtlArgs {
            command: TtlCommand::Run(run_args(true)),
        },
        options,
    )
    .await?;
    step(
        24,
        "run it: one DELETE_PARTITION replacecommit (the files stay for the tag)",
        &format!("ttl run {table}"),
    )?;
    ttl::run(
        TtlArgs {
            command: TtlCommand::Run(run_args(false)),
        },
        options,
    )
    .await?;
    step(25, "main after the run", &format!("read {table}"))?;
    read::run(read_args(table), options).await?;
    step(
        26,
        "tag v1 still reads the deleted partition",
        &format!("read {table} --tag {TAG}"),
    )?;
    read::run(
        ReadArgs {
            tag: Some(TAG.to_string()),
            ..read_args(table)
        },
        options,
    )
    .await?;
    clone_steps(table, options).await
}

/// Steps 27 to 31: a shallow clone of tag v1, a write on it, its rows, the source's pins, and
/// detaching it.
async fn clone_steps(table: &str, options: &StorageOptions) -> CliResult<()> {
    let table_path = Path::new(table);
    let dir = table_path.parent().unwrap_or(Path::new("."));
    let lab = dir.join(LAB).display().to_string();
    let input = dir.join("input").join("lab.csv");
    std::fs::write(&input, LAB_CSV).map_err(|e| io_err(&input, "write it", e))?;
    step(
        27,
        "clone tag v1 into another directory: metadata only, no data file copied",
        &format!("clone {table} {lab} --tag {TAG}"),
    )?;
    clone::run(
        CloneArgs {
            command: None,
            source: Some(table.to_string()),
            target: Some(lab.clone()),
            tag: Some(TAG.to_string()),
            instant: None,
            branch: None,
            deep: false,
            json: false,
        },
        options,
    )
    .await?;
    step(
        28,
        "write on the clone (its own timeline; the source does not change)",
        &format!("write {lab} {}", input.display()),
    )?;
    write_step(&lab, &input, OpArg::Upsert, TableSpec::default(), options).await?;
    step(29, "read the clone", &format!("read {lab}"))?;
    read::run(read_args(&lab), options).await?;
    step(
        30,
        "the source pins what its clones read",
        &format!("clone list {table}"),
    )?;
    clone::run(
        CloneArgs {
            command: Some(CloneCommand::List {
                source: table.to_string(),
                json: false,
            }),
            source: None,
            target: None,
            tag: None,
            instant: None,
            branch: None,
            deep: false,
            json: false,
        },
        options,
    )
    .await?;
    step(
        31,
        "detach the clone: copy what it reads, release the pin (now every Hudi reader reads it)",
        &format!("clone detach {lab}"),
    )?;
    clone::run(
        CloneArgs {
            command: Some(CloneCommand::Detach {
                clone: lab.clone(),
                json: false,
            }),
            source: None,
            target: None,
            tag: None,
            instant: None,
            branch: None,
            deep: false,
            json: false,
        },
        options,
    )
    .await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_prepare_foreign_directory_refuses() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("trips")).unwrap();
        let err = prepare(dir.path()).unwrap_err().to_string();
        assert!(err.contains("did not make"), "{err}");
        assert!(dir.path().join("trips").exists());
    }

    #[test]
    fn test_prepare_rerun_replaces_own_table() {
        let dir = tempfile::tempdir().unwrap();
        prepare(dir.path()).unwrap();
        std::fs::create_dir_all(dir.path().join("trips/x")).unwrap();
        prepare(dir.path()).unwrap();
        assert!(!dir.path().join("trips").exists());
        assert!(dir.path().join("input").is_dir());
    }
}
