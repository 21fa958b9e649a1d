//! The table definition flags (`--type`, `--key`, `--partition-by`, ...) that `arbor create`
//! needs and `arbor write` uses to create a missing table.

use arbor_table::{BaseFormat, CreateOptions};
use arbor_timeline::config::{BaseFileFormat, RecordMergeMode, TableType, TableVersion};
use arbor_timeline::TableConfig;
use arrow::datatypes::SchemaRef;
use clap::{Args, ValueEnum};

use crate::error::{CliError, CliResult};

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
    /// The Hudi table version to create: 9 (Hudi 1.1, the default) or 8 (Hudi 1.0). Every
    /// later write keeps the table at its version; on an existing table the value must be
    /// its version (a table is never converted).
    #[arg(long, value_name = "8|9", value_parser = parse_table_version)]
    pub table_version: Option<TableVersion>,
    /// The format of the table's base files: parquet (the default) or lance (Hudi 1.2's
    /// Lance files; table version 9). MOR log files stay Avro either way.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub base_format: Option<BaseFormatArg>,
}

/// The base file format on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BaseFormatArg {
    /// Apache Parquet (Hudi's default).
    Parquet,
    /// Lance file format 2.0 (Hudi 1.2, `hoodie.table.base.file.format=LANCE`).
    Lance,
}

impl BaseFormatArg {
    /// The format arbor writes.
    pub fn base_format(self) -> BaseFormat {
        match self {
            BaseFormatArg::Parquet => BaseFormat::Parquet,
            BaseFormatArg::Lance => BaseFormat::Lance,
        }
    }

    /// Hudi's name of the format (`PARQUET`, `LANCE`).
    fn hudi_name(self) -> BaseFileFormat {
        match self {
            BaseFormatArg::Parquet => BaseFileFormat::Parquet,
            BaseFormatArg::Lance => BaseFileFormat::Lance,
        }
    }
}

/// Parses `--table-version`: `8` or `9`; any other value is a usage error.
fn parse_table_version(s: &str) -> Result<TableVersion, String> {
    s.trim()
        .parse::<u32>()
        .ok()
        .and_then(TableVersion::writable_from_code)
        .ok_or_else(|| format!("{s:?} is not a table version arbor creates (8 or 9)"))
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
            || self.table_version.is_some()
            || self.base_format.is_some()
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
            table_version: self.table_version.unwrap_or_default(),
            base_format: self
                .base_format
                .map(BaseFormatArg::base_format)
                .unwrap_or_default(),
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
        if let Some(v) = self.table_version {
            if v != config.version() {
                return mismatch("table version", v.to_string(), config.version().to_string());
            }
        }
        if let Some(f) = self.base_format {
            if f.hudi_name() != config.base_file_format() {
                return mismatch(
                    "base file format",
                    f.hudi_name().name().to_string(),
                    config.base_file_format().name().to_string(),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    use std::sync::Arc;

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
}
