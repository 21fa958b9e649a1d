//! [`TableConfig`]: a validated set of properties, its typed accessors and its checked changes.

use chrono::{DateTime, SecondsFormat, Utc};

use super::keys;
use super::properties::Properties;
use super::values::{
    table_checksum, BaseFileFormat, RecordMergeMode, TableType, TableVersion, TimelineTimezone,
};
use super::PROPERTIES_FILE;
use crate::error::{Result, TimelineError};
use crate::naming::LayoutVersion;

/// A validated `hoodie.properties`.
///
/// Guarantees, for every value of this type: a non-empty table name; a table type; a version
/// arbor reads (6, 8, 9); a timeline layout that fits the version (2 for 8 and 9, 1 for 6); a
/// known time zone and base file format when those keys are set; and, when
/// `hoodie.table.checksum` is present, the checksum of `"<database>.<name>"`. Changes through
/// [`TableConfig::set`] and [`TableConfig::remove`] keep these guarantees (they are refused
/// otherwise) and keep the checksum up to date. Unknown keys are kept, in their order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    props: Properties,
    table_type: TableType,
    version: TableVersion,
    layout: LayoutVersion,
    timezone: TimelineTimezone,
    base_file_format: BaseFileFormat,
}

/// Key of `file` inside the meta directory.
pub(super) fn meta_key(meta_dir: &str, file: &str) -> String {
    let dir = meta_dir.trim_end_matches('/');
    if dir.is_empty() {
        file.to_string()
    } else {
        format!("{dir}/{file}")
    }
}

pub(super) fn invalid(path: &str, key: Option<&str>, reason: impl Into<String>) -> TimelineError {
    TimelineError::InvalidConfig {
        path: path.to_string(),
        key: key.map(str::to_string),
        reason: reason.into(),
    }
}

/// Splits a comma separated list, trimming entries and dropping empty ones.
fn split_list(value: Option<&str>) -> Vec<String> {
    value
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

impl TableConfig {
    /// Validates properties read from (or meant for) `path`.
    pub(super) fn validate(props: Properties, path: &str) -> Result<TableConfig> {
        let required = |key: &str| -> Result<&str> {
            match props.get(key).map(str::trim) {
                Some(v) if !v.is_empty() => Ok(v),
                _ => Err(invalid(
                    path,
                    Some(key),
                    format!("missing required key {key}"),
                )),
            }
        };
        let name = required(keys::NAME)?;
        let type_text = required(keys::TYPE)?;
        let table_type = TableType::parse(type_text).ok_or_else(|| {
            invalid(
                path,
                Some(keys::TYPE),
                format!(
                    "{}={type_text:?} is not COPY_ON_WRITE or MERGE_ON_READ",
                    keys::TYPE
                ),
            )
        })?;
        let version_text = required(keys::VERSION)?;
        let code: u32 = version_text.parse().map_err(|_| {
            invalid(
                path,
                Some(keys::VERSION),
                format!("{}={version_text:?} is not a number", keys::VERSION),
            )
        })?;
        let version =
            TableVersion::from_code(code).ok_or_else(|| TimelineError::UnsupportedVersion {
                path: path.to_string(),
                version: version_text.to_string(),
            })?;
        let layout_text = props.get(keys::TIMELINE_LAYOUT_VERSION).map(str::trim);
        let layout = match (version, layout_text) {
            (TableVersion::Eight | TableVersion::Nine, Some("2")) => LayoutVersion::V2,
            (TableVersion::Six, None | Some("1")) => LayoutVersion::V1,
            (_, found) => {
                return Err(invalid(
                    path,
                    Some(keys::TIMELINE_LAYOUT_VERSION),
                    format!(
                        "table version {version} needs {}={} (found {})",
                        keys::TIMELINE_LAYOUT_VERSION,
                        if version == TableVersion::Six { 1 } else { 2 },
                        found.map_or_else(|| "no value".to_string(), |f| format!("{f:?}")),
                    ),
                ))
            }
        };
        let timezone = match props.get(keys::TIMELINE_TIMEZONE) {
            None => TimelineTimezone::Local,
            Some(t) => TimelineTimezone::parse(t).ok_or_else(|| {
                invalid(
                    path,
                    Some(keys::TIMELINE_TIMEZONE),
                    format!("{}={t:?} is not LOCAL or UTC", keys::TIMELINE_TIMEZONE),
                )
            })?,
        };
        let format_key = if props.contains_key(keys::BASE_FILE_FORMAT) {
            keys::BASE_FILE_FORMAT
        } else {
            keys::BASE_FILE_FORMAT_LEGACY
        };
        let base_file_format = match props.get(format_key) {
            None => BaseFileFormat::Parquet,
            Some(f) => BaseFileFormat::parse(f).ok_or_else(|| {
                invalid(
                    path,
                    Some(format_key),
                    format!("{format_key}={f:?} is not a known base file format"),
                )
            })?,
        };
        if let Some(stored) = props.get(keys::CHECKSUM) {
            let computed = table_checksum(props.get(keys::DATABASE_NAME), name);
            // Java compares with Long.parseLong; a value that is no number is as wrong as a
            // mismatch.
            if stored.trim().parse::<i64>().ok() != Some(i64::from(computed)) {
                return Err(TimelineError::ChecksumMismatch {
                    path: path.to_string(),
                    stored: stored.to_string(),
                    computed,
                });
            }
        }
        Ok(TableConfig {
            props,
            table_type,
            version,
            layout,
            timezone,
            base_file_format,
        })
    }

    /// Validates a set of properties (see the type's guarantees). Errors name
    /// `hoodie.properties` as the path.
    pub fn from_properties(props: Properties) -> Result<TableConfig> {
        TableConfig::validate(props, PROPERTIES_FILE)
    }

    /// Parses and validates the bytes of a `hoodie.properties` file; `path` is used in errors.
    /// Empty input, text that is not UTF-8, malformed escapes and a last line without a line
    /// end (a truncated file) are `InvalidConfig`.
    pub fn parse(bytes: &[u8], path: &str) -> Result<TableConfig> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| invalid(path, None, format!("not UTF-8 text: {e}")))?;
        if text.trim().is_empty() {
            return Err(invalid(path, None, "the file is empty"));
        }
        if !text.ends_with(['\n', '\r']) {
            // Java's `Properties.store` and arbor end every line: a last line without its end
            // is what a torn write (or a truncation) leaves, and may have lost keys (the
            // record key fields, the checksum) that its absence would silently change.
            let last = text.lines().last().unwrap_or_default();
            let key = last
                .split(['=', ':'])
                .next()
                .map(str::trim)
                .filter(|k| !k.is_empty() && !k.starts_with(['#', '!']));
            return Err(invalid(
                path,
                key,
                format!(
                    "the file is truncated: its last line {last:?} has no line end (every \
                     line of a complete file ends with one)"
                ),
            ));
        }
        let props = Properties::parse(text).map_err(|e| invalid(path, None, e.to_string()))?;
        TableConfig::validate(props, path)
    }

    /// The text of the file, as Java's `Properties.store` writes it, with a
    /// `#Updated at <ISO time>` and a date comment line; the checksum is always (re)computed
    /// and written (in its place, or last when it was absent).
    pub fn render(&self, now: DateTime<Utc>) -> String {
        let mut props = self.props.clone();
        props.set(keys::CHECKSUM, self.computed_checksum().to_string());
        let updated = format!(
            "Updated at {}",
            now.to_rfc3339_opts(SecondsFormat::AutoSi, true)
        );
        let date = now.format("%a %b %d %H:%M:%S UTC %Y").to_string();
        props.render(&[&updated, &date])
    }

    // ----- typed accessors -----

    /// The value of any key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.props.get(key)
    }

    /// All properties, in order.
    pub fn properties(&self) -> &Properties {
        &self.props
    }

    /// The table name (never empty).
    pub fn name(&self) -> &str {
        self.props
            .get(keys::NAME)
            .map(str::trim)
            .unwrap_or_default()
    }

    /// The database name, if set.
    pub fn database_name(&self) -> Option<&str> {
        self.props.get(keys::DATABASE_NAME)
    }

    /// The table type.
    pub fn table_type(&self) -> TableType {
        self.table_type
    }

    /// The table version.
    pub fn version(&self) -> TableVersion {
        self.version
    }

    /// The timeline layout version (2 for table versions 8 and 9, 1 for 6).
    pub fn timeline_layout_version(&self) -> LayoutVersion {
        self.layout
    }

    /// The active timeline directory under the meta directory (default `timeline`). Only
    /// meaningful for layout 2; layout 1 keeps instants directly in the meta directory.
    pub fn timeline_path(&self) -> &str {
        self.props
            .get(keys::TIMELINE_PATH)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or("timeline")
    }

    /// The archived timeline directory under the timeline directory (default `history`).
    pub fn history_path(&self) -> &str {
        self.props
            .get(keys::TIMELINE_HISTORY_PATH)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or("history")
    }

    /// The record key fields (empty when the key is absent).
    pub fn record_key_fields(&self) -> Vec<String> {
        split_list(self.props.get(keys::RECORD_KEY_FIELDS))
    }

    /// The partition fields as written (empty for a non-partitioned table). With the CUSTOM
    /// key generator an entry may carry a `:<type>` suffix.
    pub fn partition_fields(&self) -> Vec<String> {
        split_list(self.props.get(keys::PARTITION_FIELDS))
    }

    /// The ordering (precombine) fields: `hoodie.table.ordering.fields` (version 9) if present,
    /// else `hoodie.table.precombine.field` (version 8 and earlier).
    pub fn ordering_fields(&self) -> Vec<String> {
        let value = self
            .props
            .get(keys::ORDERING_FIELDS)
            .or_else(|| self.props.get(keys::PRECOMBINE_FIELD));
        split_list(value)
    }

    /// The time zone of instant times; `LOCAL` when the key is absent (Java's default).
    pub fn timeline_timezone(&self) -> TimelineTimezone {
        self.timezone
    }

    /// The base file format; `PARQUET` when the key is absent.
    pub fn base_file_format(&self) -> BaseFileFormat {
        self.base_file_format
    }

    /// The record merge mode, if set; an unknown value is `InvalidConfig`.
    pub fn record_merge_mode(&self) -> Result<Option<RecordMergeMode>> {
        match self.props.get(keys::RECORD_MERGE_MODE) {
            None => Ok(None),
            Some(m) => RecordMergeMode::parse(m).map(Some).ok_or_else(|| {
                invalid(
                    PROPERTIES_FILE,
                    Some(keys::RECORD_MERGE_MODE),
                    format!(
                        "{}={m:?} is not a known merge mode",
                        keys::RECORD_MERGE_MODE
                    ),
                )
            }),
        }
    }

    /// Whether the `_hoodie_*` meta columns are populated (default `true`).
    pub fn populate_meta_fields(&self) -> bool {
        self.bool_or(keys::POPULATE_META_FIELDS, true)
    }

    /// Whether partition paths are hive style (`field=value`; default `false`).
    pub fn hive_style_partitioning(&self) -> bool {
        self.bool_or(keys::HIVE_STYLE_PARTITIONING, false)
    }

    /// Whether partition path values are URL-encoded (default `false`).
    pub fn url_encode_partitioning(&self) -> bool {
        self.bool_or(keys::URL_ENCODE_PARTITIONING, false)
    }

    /// Reads a boolean like Java's `Boolean.parseBoolean` (only `true`, any case, is true).
    fn bool_or(&self, key: &str, default: bool) -> bool {
        self.props
            .get(key)
            .map_or(default, |v| v.trim().eq_ignore_ascii_case("true"))
    }

    /// The metadata-table partitions that are complete and usable.
    pub fn metadata_partitions(&self) -> Vec<String> {
        split_list(self.props.get(keys::METADATA_PARTITIONS))
    }

    /// The metadata-table partitions being built.
    pub fn metadata_partitions_inflight(&self) -> Vec<String> {
        split_list(self.props.get(keys::METADATA_PARTITIONS_INFLIGHT))
    }

    /// The stored `hoodie.table.checksum`, if any (always equal to
    /// [`computed_checksum`](Self::computed_checksum) when present).
    pub fn checksum(&self) -> Option<&str> {
        self.props.get(keys::CHECKSUM)
    }

    /// The checksum of this config's database and table name.
    pub fn computed_checksum(&self) -> u32 {
        table_checksum(self.database_name(), self.name())
    }

    // ----- changes -----

    /// Sets `key` to `value` (in place when the key exists). Refused, leaving the config
    /// unchanged, when the result would break the type's guarantees (e.g. an unreadable
    /// version) or when `key` is the checksum, which is managed: changing the name or the
    /// database name updates it.
    pub fn set(&mut self, key: &str, value: impl Into<String>) -> Result<()> {
        let mut props = self.props.clone();
        props.set(key, value);
        self.replace_props(props, key)
    }

    /// Removes `key`, returning its old value. Refused, leaving the config unchanged, for the
    /// required keys and the checksum.
    pub fn remove(&mut self, key: &str) -> Result<Option<String>> {
        let mut props = self.props.clone();
        let old = props.remove(key);
        self.replace_props(props, key)?;
        Ok(old)
    }

    fn replace_props(&mut self, mut props: Properties, key: &str) -> Result<()> {
        if key == keys::CHECKSUM {
            return Err(invalid(
                PROPERTIES_FILE,
                Some(key),
                "the checksum is computed from the database and table name; it cannot be set",
            ));
        }
        if (key == keys::NAME || key == keys::DATABASE_NAME) && props.contains_key(keys::CHECKSUM) {
            if let Some(name) = props.get(keys::NAME) {
                let sum = table_checksum(props.get(keys::DATABASE_NAME), name.trim());
                props.set(keys::CHECKSUM, sum.to_string());
            }
        }
        *self = TableConfig::validate(props, PROPERTIES_FILE)?;
        Ok(())
    }
}
