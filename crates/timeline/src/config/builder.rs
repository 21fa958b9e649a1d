//! [`TableConfigBuilder`]: the `hoodie.properties` of a new table of version 8 or 9, in that
//! version's spelling.

use super::keys;
use super::properties::Properties;
use super::table::{invalid, TableConfig};
use super::values::{
    table_checksum, BaseFileFormat, RecordMergeMode, TableType, TableVersion, TimelineTimezone,
};
use super::PROPERTIES_FILE;
use crate::error::Result;

impl TableConfig {
    /// A builder for the config of a new table of the default version, 9
    /// ([`TableConfigBuilder::table_version`] picks another).
    pub fn builder(name: impl Into<String>, table_type: TableType) -> TableConfigBuilder {
        TableConfigBuilder::new(name.into(), table_type)
    }

    /// A builder for the config of a new version-8 table.
    pub fn builder_v8(name: impl Into<String>, table_type: TableType) -> TableConfigBuilder {
        TableConfigBuilder::new(name.into(), table_type).table_version(TableVersion::Eight)
    }

    /// The config of a new version-8 table with every default of [`TableConfigBuilder`].
    pub fn new_v8(name: impl Into<String>, table_type: TableType) -> Result<TableConfig> {
        TableConfig::builder_v8(name, table_type).build()
    }
}

/// Builds the `hoodie.properties` of a new table, writing the keys the spec lists for Java
/// compatibility in the spelling of the table version (spec §1.2):
///
/// - version 8 (Hudi 1.0): the ordering field as `hoodie.table.precombine.field`, and the merge
///   mode with its `hoodie.record.merge.strategy.id` and `hoodie.compaction.payload.class`;
/// - version 9 (Hudi 1.1, the default): `hoodie.table.format=native`, the ordering field as
///   `hoodie.table.ordering.fields`, and for the built-in commit-time and event-time merge
///   modes neither a strategy id nor a payload class (as Spark 1.1 writes them).
///
/// Defaults: database `default`, no partition fields (`NON_PARTITION` key
/// generator), no ordering field (commit-time ordering), timezone `UTC`, layout 2, timeline
/// paths `timeline`/`history`, archive folder `archived`, hive-style partitioning, URL
/// encoding and dropping of partition columns all `false`, empty metadata partition lists.
///
/// Values of the name, database and field keys must not need escaping (hudi-rs does not
/// unescape them): [`build`](Self::build) refuses `=`, `:`, `#`, `!`, `\`, whitespace and
/// non-ASCII in them.
#[derive(Debug, Clone)]
pub struct TableConfigBuilder {
    name: String,
    table_type: TableType,
    version: TableVersion,
    database: Option<String>,
    record_key_fields: Vec<String>,
    partition_fields: Vec<String>,
    ordering_field: Option<String>,
    key_generator_type: Option<String>,
    merge_mode: Option<RecordMergeMode>,
    hive_style: bool,
    url_encode: bool,
    create_schema: Option<String>,
    metadata_partitions: Vec<String>,
    base_file_format: Option<BaseFileFormat>,
    populate_meta_fields: Option<bool>,
    extra: Vec<(String, Option<String>)>,
}

impl TableConfigBuilder {
    fn new(name: String, table_type: TableType) -> Self {
        TableConfigBuilder {
            name,
            table_type,
            version: TableVersion::default(),
            database: Some("default".to_string()),
            record_key_fields: Vec::new(),
            partition_fields: Vec::new(),
            ordering_field: None,
            key_generator_type: None,
            merge_mode: None,
            hive_style: false,
            url_encode: false,
            create_schema: None,
            metadata_partitions: Vec::new(),
            base_file_format: None,
            populate_meta_fields: None,
            extra: Vec::new(),
        }
    }

    /// The table version (8 or 9; default 9). [`build`](Self::build) refuses version 6, which
    /// arbor reads but does not write.
    pub fn table_version(mut self, version: TableVersion) -> Self {
        self.version = version;
        self
    }

    /// The database name (part of the checksum); `None` omits the key (as the metadata table
    /// does).
    pub fn database_name(mut self, database: Option<&str>) -> Self {
        self.database = database.map(str::to_string);
        self
    }

    /// The record key fields.
    pub fn record_key_fields<I, S>(mut self, fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.record_key_fields = fields.into_iter().map(Into::into).collect();
        self
    }

    /// The partition fields (none: the key is omitted, as Spark does for non-partitioned
    /// tables).
    pub fn partition_fields<I, S>(mut self, fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.partition_fields = fields.into_iter().map(Into::into).collect();
        self
    }

    /// The ordering field (`hoodie.table.precombine.field` at version 8,
    /// `hoodie.table.ordering.fields` at version 9); also makes event-time ordering
    /// the default merge mode. hudi-rs accepts at most one.
    pub fn ordering_field(mut self, field: impl Into<String>) -> Self {
        self.ordering_field = Some(field.into());
        self
    }

    /// The key generator type; by default `NON_PARTITION` without partition fields, `SIMPLE`
    /// with one record key and one partition field, else `COMPLEX`.
    pub fn key_generator_type(mut self, key_generator_type: impl Into<String>) -> Self {
        self.key_generator_type = Some(key_generator_type.into());
        self
    }

    /// The merge mode (at version 8 with Hudi 1.0's strategy id and payload class for it; at
    /// version 9 alone, except `CUSTOM`, which keeps its strategy id).
    pub fn merge_mode(mut self, mode: RecordMergeMode) -> Self {
        self.merge_mode = Some(mode);
        self
    }

    /// Hive-style partition paths (`field=value`).
    pub fn hive_style_partitioning(mut self, enabled: bool) -> Self {
        self.hive_style = enabled;
        self
    }

    /// URL-encoded partition path values.
    pub fn url_encode_partitioning(mut self, enabled: bool) -> Self {
        self.url_encode = enabled;
        self
    }

    /// The Avro schema (JSON) of the table, without meta fields.
    pub fn create_schema(mut self, schema_json: impl Into<String>) -> Self {
        self.create_schema = Some(schema_json.into());
        self
    }

    /// The complete metadata-table partitions (e.g. `files`).
    pub fn metadata_partitions<I, S>(mut self, partitions: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.metadata_partitions = partitions.into_iter().map(Into::into).collect();
        self
    }

    /// The base file format (the key is omitted for the default, Parquet, unless set here).
    pub fn base_file_format(mut self, format: BaseFileFormat) -> Self {
        self.base_file_format = Some(format);
        self
    }

    /// Whether meta columns are populated (the key is omitted unless set here).
    pub fn populate_meta_fields(mut self, enabled: bool) -> Self {
        self.populate_meta_fields = Some(enabled);
        self
    }

    /// Sets any other key, or overrides one the builder writes (applied last, in call order).
    pub fn property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra.push((key.into(), Some(value.into())));
        self
    }

    /// Omits a key the builder would write (applied last, in call order).
    pub fn without(mut self, key: impl Into<String>) -> Self {
        self.extra.push((key.into(), None));
        self
    }

    /// The config; `InvalidConfig` for a version arbor does not write (6), an empty name or a
    /// name, database or field that would need escaping.
    pub fn build(self) -> Result<TableConfig> {
        if !self.version.is_writable() {
            return Err(invalid(
                PROPERTIES_FILE,
                Some(keys::VERSION),
                format!(
                    "arbor creates tables of version 8 or 9, not {}",
                    self.version
                ),
            ));
        }
        let v9 = self.version.uses_v9_properties();
        let ordering_key = if v9 {
            keys::ORDERING_FIELDS
        } else {
            keys::PRECOMBINE_FIELD
        };
        let plain = |key: &str, v: &str| -> Result<()> {
            let ok = !v.is_empty()
                && v.chars().all(|c| {
                    c.is_ascii_graphic() && !matches!(c, '=' | ':' | '#' | '!' | '\\' | ',')
                });
            if ok {
                Ok(())
            } else {
                Err(invalid(
                    PROPERTIES_FILE,
                    Some(key),
                    format!(
                        "{key}: {v:?} must be non-empty printable ASCII without \
                         '=', ':', '#', '!', '\\', ',' or spaces"
                    ),
                ))
            }
        };
        plain(keys::NAME, &self.name)?;
        if let Some(db) = &self.database {
            plain(keys::DATABASE_NAME, db)?;
        }
        for f in &self.record_key_fields {
            plain(keys::RECORD_KEY_FIELDS, f)?;
        }
        for f in &self.partition_fields {
            plain(keys::PARTITION_FIELDS, f)?;
        }
        if let Some(f) = &self.ordering_field {
            plain(ordering_key, f)?;
        }
        for p in &self.metadata_partitions {
            plain(keys::METADATA_PARTITIONS, p)?;
        }

        let merge_mode = self.merge_mode.unwrap_or(if self.ordering_field.is_some() {
            RecordMergeMode::EventTimeOrdering
        } else {
            RecordMergeMode::CommitTimeOrdering
        });
        let key_generator_type = self.key_generator_type.clone().unwrap_or_else(|| {
            match (self.record_key_fields.len(), self.partition_fields.len()) {
                (_, 0) => "NON_PARTITION".to_string(),
                (1, 1) => "SIMPLE".to_string(),
                _ => "COMPLEX".to_string(),
            }
        });
        let version = self.version.code().to_string();

        let mut p = Properties::new();
        p.set(keys::NAME, self.name.clone());
        p.set(keys::TYPE, self.table_type.name());
        p.set(keys::VERSION, version.clone());
        p.set(keys::INITIAL_VERSION, version);
        if v9 {
            p.set(keys::TABLE_FORMAT, "native");
        }
        p.set(keys::TIMELINE_LAYOUT_VERSION, "2");
        p.set(keys::TIMELINE_PATH, "timeline");
        p.set(keys::TIMELINE_HISTORY_PATH, "history");
        p.set(keys::ARCHIVELOG_FOLDER, "archived");
        p.set(keys::TIMELINE_TIMEZONE, TimelineTimezone::Utc.name());
        if let Some(db) = &self.database {
            p.set(keys::DATABASE_NAME, db.clone());
        }
        if !self.record_key_fields.is_empty() {
            p.set(keys::RECORD_KEY_FIELDS, self.record_key_fields.join(","));
        }
        if !self.partition_fields.is_empty() {
            p.set(keys::PARTITION_FIELDS, self.partition_fields.join(","));
        }
        if let Some(f) = &self.ordering_field {
            p.set(ordering_key, f.clone());
        }
        p.set(keys::KEY_GENERATOR_TYPE, key_generator_type);
        p.set(keys::RECORD_MERGE_MODE, merge_mode.name());
        // Hudi 1.1 drops the strategy id and payload class of the built-in modes.
        if !v9 || merge_mode == RecordMergeMode::Custom {
            p.set(keys::RECORD_MERGE_STRATEGY_ID, merge_mode.strategy_id());
        }
        if !v9 {
            if let Some(payload) = merge_mode.payload_class() {
                p.set(keys::PAYLOAD_CLASS, payload);
            }
        }
        p.set(keys::HIVE_STYLE_PARTITIONING, self.hive_style.to_string());
        p.set(keys::URL_ENCODE_PARTITIONING, self.url_encode.to_string());
        p.set(keys::DROP_PARTITION_COLUMNS, "false");
        if let Some(format) = self.base_file_format {
            p.set(keys::BASE_FILE_FORMAT, format.name());
        }
        if let Some(enabled) = self.populate_meta_fields {
            p.set(keys::POPULATE_META_FIELDS, enabled.to_string());
        }
        if let Some(schema) = &self.create_schema {
            p.set(keys::CREATE_SCHEMA, schema.clone());
        }
        p.set(
            keys::METADATA_PARTITIONS,
            self.metadata_partitions.join(","),
        );
        p.set(keys::METADATA_PARTITIONS_INFLIGHT, "");
        for (k, v) in self.extra {
            match v {
                Some(v) => p.set(k, v),
                None => {
                    p.remove(&k);
                }
            }
        }
        // The checksum goes last, as Java adds it.
        p.remove(keys::CHECKSUM);
        let name = p.get(keys::NAME).unwrap_or_default().trim().to_string();
        let sum = table_checksum(p.get(keys::DATABASE_NAME), &name);
        p.set(keys::CHECKSUM, sum.to_string());
        TableConfig::validate(p, PROPERTIES_FILE)
    }
}
