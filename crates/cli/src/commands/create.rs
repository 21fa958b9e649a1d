//! `arbor create <table> --type cow|mor --key <cols> --schema-from <file> [...]`, and the table
//! definition flags `arbor write` shares to create a missing table.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_storage::{open_storage, Storage, StorageExt, StorageOptions};
use arbor_table::{CreateOptions, Table};
use arbor_timeline::config::{RecordMergeMode, TableType};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::TableConfig;
use arrow::datatypes::SchemaRef;
use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::commands::lock::with_chosen_lock;
use crate::error::{CliError, CliResult};
use crate::input;
use crate::output::{print_json, print_text};

/// Arguments of `arbor create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Where to create the table: a local directory (created if missing; it must not hold a
    /// table yet), `file://...` or `s3://bucket/prefix`.
    pub table: String,
    #[command(flatten)]
    pub spec: TableSpec,
    /// A .parquet, .csv or .jsonl file whose columns (names and types, inferred for CSV and
    /// JSON lines) become the table's data schema. Its rows are not written.
    #[arg(long, value_name = "FILE")]
    pub schema_from: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The table type on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TypeArg {
    /// Copy-on-write: every write rewrites the base files it touches.
    Cow,
    /// Merge-on-read: updates and deletes go to log files, merged on read and by compaction.
    Mor,
}

impl TypeArg {
    /// The Hudi table type.
    pub fn table_type(self) -> TableType {
        match self {
            TypeArg::Cow => TableType::CopyOnWrite,
            TypeArg::Mor => TableType::MergeOnRead,
        }
    }
}

/// The merge mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MergeModeArg {
    /// Of two records with one key, the one with the larger ordering value wins.
    EventTime,
    /// Of two records with one key, the later write wins.
    CommitTime,
}

impl MergeModeArg {
    /// The Hudi merge mode.
    pub fn merge_mode(self) -> RecordMergeMode {
        match self {
            MergeModeArg::EventTime => RecordMergeMode::EventTimeOrdering,
            MergeModeArg::CommitTime => RecordMergeMode::CommitTimeOrdering,
        }
    }
}

/// How a new table is defined. `arbor create` needs `--type` and `--key`; `arbor write` uses
/// these flags only to create a table that does not exist yet (and, for an existing table,
/// checks that the flags given agree with it).
#[derive(Debug, Clone, Default, Args)]
pub struct TableSpec {
    /// Table type: cow (copy-on-write) or mor (merge-on-read).
    #[arg(long = "type", value_enum, value_name = "TYPE")]
    pub table_type: Option<TypeArg>,
    /// Record key column(s), comma separated (several: a complex key).
    #[arg(long, value_delimiter = ',', value_name = "COLS")]
    pub key: Vec<String>,
    /// Partition column(s), comma separated; none: a non-partitioned table.
    #[arg(long = "partition-by", value_delimiter = ',', value_name = "COLS")]
    pub partition_by: Vec<String>,
    /// Name partition directories `column=value` (Hive style).
    #[arg(long)]
    pub hive_style: bool,
    /// The ordering (precombine) column: with event-time merging, the larger value wins.
    #[arg(long, value_name = "COL")]
    pub ordering: Option<String>,
    /// Merge mode; default event-time with --ordering, else commit-time.
    #[arg(long, value_enum, value_name = "MODE")]
    pub merge_mode: Option<MergeModeArg>,
    /// The table name (hoodie.table.name); default: the last part of the table path.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Create the table without a metadata table (readers then list directories).
    #[arg(long)]
    pub no_metadata_table: bool,
}

impl TableSpec {
    /// True if any definition flag was given.
    pub fn any_given(&self) -> bool {
        self.table_type.is_some()
            || !self.key.is_empty()
            || !self.partition_by.is_empty()
            || self.hive_style
            || self.ordering.is_some()
            || self.merge_mode.is_some()
            || self.name.is_some()
            || self.no_metadata_table
    }

    /// The create options for a table at `location` with data schema `schema`; `command` names
    /// the command in the error when `--type` or `--key` is missing.
    pub fn create_options(
        &self,
        location: &str,
        schema: SchemaRef,
        command: &str,
    ) -> CliResult<CreateOptions> {
        let table_type = self.table_type.ok_or_else(|| {
            CliError::Usage(format!(
                "{command} needs --type cow|mor and --key COLS to create a table"
            ))
        })?;
        if self.key.iter().all(|k| k.trim().is_empty()) {
            return Err(CliError::Usage(format!(
                "{command} needs --key COLS (the record key columns) to create a table"
            )));
        }
        Ok(CreateOptions {
            name: self
                .name
                .clone()
                .unwrap_or_else(|| default_table_name(location)),
            table_type: table_type.table_type(),
            record_key_fields: clean(&self.key),
            partition_fields: clean(&self.partition_by),
            hive_style_partitioning: self.hive_style,
            ordering_field: self.ordering.clone(),
            merge_mode: self.merge_mode.map(MergeModeArg::merge_mode),
            schema,
            metadata_table: !self.no_metadata_table,
        })
    }

    /// Checks that the flags given agree with an existing table's config; the error names the
    /// first flag that does not.
    pub fn check_matches(&self, config: &TableConfig) -> CliResult<()> {
        let mismatch = |flag: &str, given: String, table: String| {
            Err(CliError::Usage(format!(
                "the table exists and its {flag} is {table}, not {given}; \
                 table definition flags only create a table (leave them out to write to this one)"
            )))
        };
        if let Some(t) = self.table_type {
            if t.table_type() != config.table_type() {
                return mismatch("type", format!("{t:?}"), config.table_type().name().into());
            }
        }
        if !self.key.is_empty() && clean(&self.key) != config.record_key_fields() {
            return mismatch(
                "record key",
                clean(&self.key).join(","),
                config.record_key_fields().join(","),
            );
        }
        if !self.partition_by.is_empty() && clean(&self.partition_by) != config.partition_fields() {
            return mismatch(
                "partitioning",
                clean(&self.partition_by).join(","),
                config.partition_fields().join(","),
            );
        }
        if let Some(o) = &self.ordering {
            if config.ordering_fields().first() != Some(o) {
                return mismatch(
                    "ordering field",
                    o.clone(),
                    config.ordering_fields().join(","),
                );
            }
        }
        if let Some(n) = &self.name {
            if n != config.name() {
                return mismatch("name", n.clone(), config.name().to_string());
            }
        }
        Ok(())
    }
}

fn clean(cols: &[String]) -> Vec<String> {
    cols.iter()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

/// The last path component of `location`, made a valid Avro name (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn default_table_name(location: &str) -> String {
    let last = location
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let mut name: String = last
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

/// Where a table would be created, and whether it already exists.
pub struct Target {
    /// The storage rooted at the table's base path.
    pub storage: Arc<dyn Storage>,
    /// True if `.hoodie/hoodie.properties` exists.
    pub exists: bool,
    /// The local directory this command made (removed again if creation fails).
    pub made_dir: Option<PathBuf>,
}

fn local_path(location: &str) -> Option<&str> {
    if let Some(rest) = location.strip_prefix("file://") {
        Some(rest)
    } else if location.contains("://") {
        None
    } else {
        Some(location)
    }
}

/// Opens the storage at `location` for a command that may create a table there. A missing
/// local directory is created only if `may_create`; otherwise a missing directory means "no
/// table" without touching anything.
pub async fn open_target(
    location: &str,
    options: &StorageOptions,
    may_create: bool,
) -> CliResult<Option<Target>> {
    let mut made_dir = None;
    if let Some(path) = local_path(location) {
        let p = Path::new(path);
        if !p.is_dir() {
            if !may_create {
                return Ok(None);
            }
            if p.exists() {
                return Err(CliError::at(
                    location,
                    CliError::Usage("exists and is not a directory".into()),
                ));
            }
            made_dir = Some(first_missing_ancestor(p));
        }
    }
    let storage = open_storage(location, options).map_err(|e| CliError::at(location, e))?;
    let exists = storage
        .exists(&format!("{DEFAULT_META_DIR}/hoodie.properties"))
        .await
        .map_err(|e| CliError::at(location, e))?;
    Ok(Some(Target {
        storage,
        exists,
        made_dir,
    }))
}

/// The outermost directory of `p` that does not exist yet (what `create_dir_all` will make).
fn first_missing_ancestor(p: &Path) -> PathBuf {
    let mut out = p.to_path_buf();
    let mut cur = p;
    while let Some(parent) = cur.parent() {
        if parent.as_os_str().is_empty() || parent.exists() {
            break;
        }
        out = parent.to_path_buf();
        cur = parent;
    }
    out
}

/// Removes a directory this command created (best effort: the error being reported matters more).
pub fn remove_made_dir(target: &Target) {
    if let Some(dir) = &target.made_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Creates the table; on failure removes the directory this command made.
pub async fn create_table(
    location: &str,
    target: &Target,
    options: CreateOptions,
) -> CliResult<Table> {
    match Table::create(target.storage.clone(), options).await {
        Ok(t) => match with_chosen_lock(location, t).await {
            Ok(t) => Ok(t),
            Err(e) => {
                remove_made_dir(target);
                Err(e)
            }
        },
        Err(e) => {
            remove_made_dir(target);
            Err(CliError::at(location, e))
        }
    }
}

#[derive(Debug, Serialize)]
struct Created {
    table: String,
    name: String,
    table_type: String,
    record_key_fields: Vec<String>,
    partition_fields: Vec<String>,
    hive_style_partitioning: bool,
    ordering_field: Option<String>,
    columns: Vec<Column>,
}

#[derive(Debug, Serialize)]
struct Column {
    name: String,
    data_type: String,
    nullable: bool,
}

/// Prints (to stderr) how columns of a new table's `schema` are stored where that differs
/// from the input (nanoseconds as microseconds, zones as UTC, naive timestamps as
/// `TIMESTAMP_NTZ`, which hudi-rs 0.5.0 cannot read).
pub fn warn_storage_notes(schema: &arrow::datatypes::Schema) {
    for n in arbor_table::storage_notes(schema) {
        eprintln!("warning: column {}: {}", n.column, n.note);
        if n.note.contains("TIMESTAMP_NTZ") {
            eprintln!(
                "warning: column {}: hudi-rs 0.5.0 cannot read tables with such columns (it \
                 panics on Avro local-timestamp); Spark and arbor can",
                n.column
            );
        }
    }
}

/// Runs the command.
pub async fn run(args: CreateArgs, options: &StorageOptions) -> CliResult<()> {
    let schema = input::infer_schema(&args.schema_from)?;
    warn_storage_notes(&schema);
    let create = args
        .spec
        .create_options(&args.table, schema.clone(), "arbor create")?;
    let target = open_target(&args.table, options, true)
        .await?
        .ok_or_else(|| CliError::at(&args.table, CliError::Usage("cannot open".into())))?;
    if target.exists {
        return Err(CliError::at(
            &args.table,
            CliError::Usage("a table already exists here".into()),
        ));
    }
    let table = create_table(&args.table, &target, create).await?;
    let config = table.config();
    let report = Created {
        table: args.table.clone(),
        name: config.name().to_string(),
        table_type: config.table_type().name().to_string(),
        record_key_fields: config.record_key_fields(),
        partition_fields: config.partition_fields(),
        hive_style_partitioning: config.hive_style_partitioning(),
        ordering_field: config.ordering_fields().into_iter().next(),
        // The columns as the table stores them (see arbor_table::storage_type).
        columns: table
            .schema()
            .fields()
            .iter()
            .map(|f| Column {
                name: f.name().clone(),
                data_type: f.data_type().to_string(),
                nullable: f.is_nullable(),
            })
            .collect(),
    };
    if args.json {
        return print_json(&report);
    }
    let partitioning = if report.partition_fields.is_empty() {
        "not partitioned".to_string()
    } else {
        format!(
            "partitioned by {}{}",
            report.partition_fields.join(","),
            if report.hive_style_partitioning {
                " (hive style)"
            } else {
                ""
            }
        )
    };
    print_text(&format!(
        "created {} table {:?} at {}: key {}, {}{}, {} columns",
        report.table_type,
        report.name,
        report.table,
        report.record_key_fields.join(","),
        partitioning,
        report
            .ordering_field
            .as_ref()
            .map(|o| format!(", ordering {o}"))
            .unwrap_or_default(),
        report.columns.len()
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_default_table_name_sanitises_last_component() {
        assert_eq!(default_table_name("/tmp/x/my-trips/"), "my_trips");
        assert_eq!(default_table_name("s3://b/p/2024"), "_2024");
        assert_eq!(default_table_name("trips"), "trips");
    }

    #[test]
    fn test_create_options_without_type_errors() {
        let spec = TableSpec {
            key: vec!["id".into()],
            ..TableSpec::default()
        };
        let schema = Arc::new(arrow::datatypes::Schema::empty());
        let err = spec
            .create_options("t", schema, "arbor create")
            .unwrap_err();
        assert!(err.to_string().contains("--type"), "{err}");
    }

    #[test]
    fn test_first_missing_ancestor_is_outermost_new_dir() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/c");
        assert_eq!(first_missing_ancestor(&p), dir.path().join("a"));
    }
}
