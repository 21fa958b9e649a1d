//! Keys of `hoodie.properties` that arbor reads or writes (Hudi's spellings).

/// Table name (required).
pub const NAME: &str = "hoodie.table.name";
/// Table type, `COPY_ON_WRITE` or `MERGE_ON_READ` (required).
pub const TYPE: &str = "hoodie.table.type";
/// Table version (required): 6, 8 or 9 for arbor.
pub const VERSION: &str = "hoodie.table.version";
/// Table version at creation.
pub const INITIAL_VERSION: &str = "hoodie.table.initial.version";
/// Timeline layout version: 1 for table version 6, 2 for 8 and 9.
pub const TIMELINE_LAYOUT_VERSION: &str = "hoodie.timeline.layout.version";
/// Active timeline directory under the meta directory (default `timeline`).
pub const TIMELINE_PATH: &str = "hoodie.timeline.path";
/// Archived (LSM) timeline directory under the timeline directory (default `history`).
pub const TIMELINE_HISTORY_PATH: &str = "hoodie.timeline.history.path";
/// Deprecated pre-1.0 archive folder; still written for compatibility.
pub const ARCHIVELOG_FOLDER: &str = "hoodie.archivelog.folder";
/// Database name; part of the checksum.
pub const DATABASE_NAME: &str = "hoodie.database.name";
/// Comma separated record key fields.
pub const RECORD_KEY_FIELDS: &str = "hoodie.table.recordkey.fields";
/// Comma separated partition fields (absent for non-partitioned tables).
pub const PARTITION_FIELDS: &str = "hoodie.table.partition.fields";
/// Ordering field, table version 8 spelling.
pub const PRECOMBINE_FIELD: &str = "hoodie.table.precombine.field";
/// Ordering fields, table version 9 spelling.
pub const ORDERING_FIELDS: &str = "hoodie.table.ordering.fields";
/// Key generator type (`SIMPLE`, `COMPLEX`, `NON_PARTITION`, ...), 1.x.
pub const KEY_GENERATOR_TYPE: &str = "hoodie.table.keygenerator.type";
/// Key generator class, 0.x.
pub const KEY_GENERATOR_CLASS: &str = "hoodie.table.keygenerator.class";
/// Avro schema (JSON) the table was created with.
pub const CREATE_SCHEMA: &str = "hoodie.table.create.schema";
/// Record merge mode.
pub const RECORD_MERGE_MODE: &str = "hoodie.record.merge.mode";
/// Record merge strategy id (a UUID).
pub const RECORD_MERGE_STRATEGY_ID: &str = "hoodie.record.merge.strategy.id";
/// Payload class (deprecated in 1.x, still written for version 8).
pub const PAYLOAD_CLASS: &str = "hoodie.compaction.payload.class";
/// Whether partition paths are `field=value`.
pub const HIVE_STYLE_PARTITIONING: &str = "hoodie.datasource.write.hive_style_partitioning";
/// Whether partition path values are URL-encoded.
pub const URL_ENCODE_PARTITIONING: &str = "hoodie.datasource.write.partitionpath.urlencode";
/// Whether partition columns are dropped from data files.
pub const DROP_PARTITION_COLUMNS: &str = "hoodie.datasource.write.drop.partition.columns";
/// Comma separated metadata-table partitions that are complete and usable.
pub const METADATA_PARTITIONS: &str = "hoodie.table.metadata.partitions";
/// Comma separated metadata-table partitions being built.
pub const METADATA_PARTITIONS_INFLIGHT: &str = "hoodie.table.metadata.partitions.inflight";
/// Time zone of instant times: `LOCAL` (Java's default) or `UTC`.
pub const TIMELINE_TIMEZONE: &str = "hoodie.table.timeline.timezone";
/// Base file format (default `PARQUET`).
pub const BASE_FILE_FORMAT: &str = "hoodie.table.base.file.format";
/// Legacy alternative of [`BASE_FILE_FORMAT`].
pub const BASE_FILE_FORMAT_LEGACY: &str = "hoodie.table.ro.file.format";
/// Whether the `_hoodie_*` meta columns are populated (default `true`).
pub const POPULATE_META_FIELDS: &str = "hoodie.populate.meta.fields";
/// Table format (`native`), version 9.
pub const TABLE_FORMAT: &str = "hoodie.table.format";
/// Partial update mode (`NONE`, the default, `IGNORE_DEFAULTS`, `FILL_UNAVAILABLE`, ...),
/// version 9.
pub const PARTIAL_UPDATE_MODE: &str = "hoodie.table.partial.update.mode";
/// Prefix of the merge properties a version 9 writer stores for readers (e.g. the delete
/// marker of a migrated payload): `hoodie.record.merge.property.<name>`.
pub const MERGE_PROPERTY_PREFIX: &str = "hoodie.record.merge.property.";
/// `true` when writers record change-data-capture log files (`.cdc`) beside the data files.
pub const CDC_ENABLED: &str = "hoodie.table.cdc.enabled";
/// Path of the index definitions file (`.hoodie/.index_defs/index.json`), set once a table
/// has index definitions.
pub const INDEX_DEFS_PATH: &str = "hoodie.table.index.defs.path";
/// Checksum of `"<database>.<name>"`.
pub const CHECKSUM: &str = "hoodie.table.checksum";
