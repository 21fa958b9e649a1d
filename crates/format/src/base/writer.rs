//! Writing parquet base files the way Spark/parquet-avro does.

use std::sync::Arc;

use arbor_storage::Storage;
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::ArrowSchemaConverter;
use parquet::basic::{LogicalType, Type as PhysicalType};
use parquet::schema::types::{SchemaDescriptor, Type, TypePtr};

use super::meta_columns;
use crate::error::{FormatError, Result};
use crate::meta;

/// Footer key of the smallest record key in the file.
pub const FOOTER_MIN_RECORD_KEY: &str = "hoodie_min_record_key";
/// Footer key of the largest record key in the file.
pub const FOOTER_MAX_RECORD_KEY: &str = "hoodie_max_record_key";
/// Footer key of the Avro writer schema (meta columns included).
pub const FOOTER_AVRO_SCHEMA: &str = "parquet.avro.schema";
/// Footer key naming the object model (`avro`, as parquet-avro writes).
pub const FOOTER_WRITER_MODEL: &str = "writer.model.name";

/// Default rows per row group.
const DEFAULT_ROW_GROUP_ROWS: usize = 1024 * 1024;

/// Page compression of a base file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Snappy (Spark's and Hudi's default).
    #[default]
    Snappy,
    /// Zstandard at the given level (1..=22).
    Zstd(i32),
    /// No compression.
    Uncompressed,
}

/// What was written: the facts a commit's write stat needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenFile {
    /// Key of the file relative to the storage root.
    pub key: String,
    /// Size of the file in bytes.
    pub size: u64,
    /// Number of rows.
    pub num_rows: u64,
    /// Smallest record key (Java `String` order), `None` for a file without rows.
    pub min_record_key: Option<String>,
    /// Largest record key (Java `String` order), `None` for a file without rows.
    pub max_record_key: Option<String>,
}

/// A base file encoded in memory, not yet stored.
#[derive(Debug, Clone)]
pub struct EncodedBaseFile {
    /// The parquet bytes.
    pub bytes: Bytes,
    /// Number of rows.
    pub num_rows: u64,
    /// Smallest record key (Java `String` order), `None` without rows.
    pub min_record_key: Option<String>,
    /// Largest record key (Java `String` order), `None` without rows.
    pub max_record_key: Option<String>,
}

impl EncodedBaseFile {
    /// Creates `key` with these bytes through [`Storage::put_if_absent`] (an existing file is
    /// never overwritten: that fails with the storage's `AlreadyExists`).
    pub async fn store(self, storage: &dyn Storage, key: &str) -> Result<WrittenFile> {
        let size = self.bytes.len() as u64;
        storage.put_if_absent(key, self.bytes).await?;
        Ok(WrittenFile {
            key: key.to_string(),
            size,
            num_rows: self.num_rows,
            min_record_key: self.min_record_key,
            max_record_key: self.max_record_key,
        })
    }
}

/// Writes one base file: the five `_hoodie_*` meta columns (computed here) followed by the
/// caller's data columns.
///
/// Meta column values: `_hoodie_commit_time` = the instant; `_hoodie_commit_seqno` =
/// `<instant>_<task partition id>_<row index>` (row index counted over the whole file);
/// `_hoodie_record_key` = the caller's key of the row; `_hoodie_partition_path` = the partition
/// path; `_hoodie_file_name` = the file name. A rewrite (compaction, clustering) may instead keep
/// each row's original commit time and sequence number
/// ([`preserve_commit_metadata`](Self::preserve_commit_metadata)).
///
/// Guarantees of every file written: meta columns first, all five nullable strings, in
/// [`meta::META_COLUMNS`] order; every top-level data column optional; timestamps as INT64
/// `TIMESTAMP` of the column's unit, `isAdjustedToUTC` exactly when the column has a zone;
/// decimals as `FIXED_LEN_BYTE_ARRAY`; footer
/// key/values [`FOOTER_MIN_RECORD_KEY`], [`FOOTER_MAX_RECORD_KEY`] (when there are rows and
/// meta values are written, see [`populate_meta_fields`](Self::populate_meta_fields)),
/// [`FOOTER_AVRO_SCHEMA`] and [`FOOTER_WRITER_MODEL`]`=avro`; no embedded Arrow schema (like
/// Spark's files).
#[derive(Debug, Clone)]
pub struct BaseFileWriter {
    instant_time: String,
    file_name: String,
    partition_path: String,
    pub(super) avro_schema: String,
    task_partition_id: u64,
    pub(super) compression: Compression,
    pub(super) row_group_rows: usize,
    pub(super) data_page_bytes: Option<usize>,
    preserved: Option<(StringArray, StringArray)>,
    preserved_per_batch: bool,
    populate_meta_fields: bool,
}

/// The rows of one batch a base file receives: data columns, one record key per row and, for
/// rows that keep the commit time and sequence number they were written with (clustering of a
/// streamed input), those two values per row.
#[derive(Debug, Clone, Copy)]
pub(super) struct BatchRows<'a> {
    pub(super) batch: &'a RecordBatch,
    pub(super) record_keys: &'a StringArray,
    pub(super) commit_metadata: Option<(&'a StringArray, &'a StringArray)>,
}

impl BaseFileWriter {
    /// The format the file is written in: Lance for a `file_name` ending in `.lance`
    /// (Hudi 1.2's Lance base files, with the `lance` feature), parquet otherwise.
    pub fn format(&self) -> super::BaseFormat {
        if self.file_name.to_ascii_lowercase().ends_with(".lance") {
            super::BaseFormat::Lance
        } else {
            super::BaseFormat::Parquet
        }
    }

    /// A writer for the file `file_name` (the bare name, e.g.
    /// `<fileId>_<writeToken>_<instant>.parquet`, or `.lance` for a Lance file) in `partition_path` (`""` when
    /// non-partitioned), written by `instant_time`. `avro_schema` is the Avro writer schema JSON
    /// of meta + data columns stored in the footer; [`BaseFileWriter::avro_schema_with_meta_fields`]
    /// adds the meta fields to a data-only schema.
    pub fn new(
        instant_time: impl Into<String>,
        file_name: impl Into<String>,
        partition_path: impl Into<String>,
        avro_schema: impl Into<String>,
    ) -> BaseFileWriter {
        BaseFileWriter {
            instant_time: instant_time.into(),
            file_name: file_name.into(),
            partition_path: partition_path.into(),
            avro_schema: avro_schema.into(),
            task_partition_id: 0,
            compression: Compression::default(),
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
            data_page_bytes: None,
            preserved: None,
            preserved_per_batch: false,
            populate_meta_fields: true,
        }
    }

    /// Whether the meta values are written (default true). A table with
    /// `hoodie.populate.meta.fields=false` keeps the five meta columns in its files, as Spark
    /// writes them, but `_hoodie_commit_time`, `_hoodie_commit_seqno`, `_hoodie_record_key`
    /// and `_hoodie_partition_path` all null (only `_hoodie_file_name` is set), and no
    /// min/max record key footer entries; readers take keys from the data columns.
    pub fn populate_meta_fields(mut self, populate: bool) -> Self {
        self.populate_meta_fields = populate;
        self
    }

    /// The task partition id used in `_hoodie_commit_seqno` (default 0).
    pub fn task_partition_id(mut self, id: u64) -> Self {
        self.task_partition_id = id;
        self
    }

    /// The page compression (default snappy).
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Most rows per row group (default 1 Mi; at least 1).
    pub fn row_group_rows(mut self, rows: usize) -> Self {
        self.row_group_rows = rows.max(1);
        self
    }

    /// The size at which a data page is cut (parquet's default, 1 MiB, when not set; at
    /// least 1 KiB). A page is buffered unencoded until it is cut, so a writer holding many
    /// open files ([`BaseFileWriter::open_stream`]) bounds their memory with smaller pages.
    pub fn data_page_bytes(mut self, bytes: usize) -> Self {
        self.data_page_bytes = Some(bytes.max(1024));
        self
    }

    /// Keeps each row's original `_hoodie_commit_time` and `_hoodie_commit_seqno` (as
    /// compaction and clustering do) instead of computing them; both lists must have one entry
    /// per row.
    pub fn preserve_commit_metadata(
        self,
        commit_times: Vec<String>,
        commit_seqnos: Vec<String>,
    ) -> Self {
        self.preserve_commit_metadata_arrays(
            StringArray::from_iter_values(commit_times),
            StringArray::from_iter_values(commit_seqnos),
        )
    }

    /// [`preserve_commit_metadata`](Self::preserve_commit_metadata) with the values as Arrow
    /// string arrays (one entry per row; nulls are written as nulls).
    pub fn preserve_commit_metadata_arrays(
        mut self,
        commit_times: StringArray,
        commit_seqnos: StringArray,
    ) -> Self {
        self.preserved = Some((commit_times, commit_seqnos));
        self
    }

    /// Keeps each row's original `_hoodie_commit_time` and `_hoodie_commit_seqno`, given with
    /// each batch of a stream ([`super::BaseFileStream::write_preserving`], the form a
    /// streamed clustering writes); every batch must then carry them.
    pub fn preserve_commit_metadata_per_batch(mut self) -> Self {
        self.preserved_per_batch = true;
        self
    }

    /// True when commit metadata comes with each batch.
    pub(super) fn preserves_per_batch(&self) -> bool {
        self.preserved_per_batch && self.preserved.is_none() && self.populate_meta_fields
    }

    /// Prepends the five meta fields (`["null","string"]`, default null, as Hudi declares them)
    /// to an Avro record schema JSON that lacks them; a schema that already starts with them is
    /// returned unchanged (re-serialized). Anything but a record schema is
    /// [`FormatError::Schema`].
    pub fn avro_schema_with_meta_fields(data_schema: &str) -> Result<String> {
        let schema_error = |reason: String| FormatError::Schema {
            field: None,
            reason,
        };
        let mut value: serde_json::Value = serde_json::from_str(data_schema)
            .map_err(|e| schema_error(format!("avro schema is not JSON: {e}")))?;
        let fields = value
            .as_object_mut()
            .filter(|o| o.get("type").and_then(|t| t.as_str()) == Some("record"))
            .and_then(|o| o.get_mut("fields"))
            .and_then(|f| f.as_array_mut())
            .ok_or_else(|| schema_error("avro schema is not a record with fields".into()))?;
        let has = |name: &str, fields: &Vec<serde_json::Value>| {
            fields
                .iter()
                .any(|f| f.get("name").and_then(|n| n.as_str()) == Some(name))
        };
        let missing: Vec<&str> = meta::META_COLUMNS
            .iter()
            .copied()
            .filter(|name| !has(name, fields))
            .collect();
        if missing.len() != meta::META_COLUMNS.len() && !missing.is_empty() {
            return Err(FormatError::Schema {
                field: missing.first().map(|m| m.to_string()),
                reason: "avro schema has some meta fields but not all".into(),
            });
        }
        if !missing.is_empty() {
            let meta_fields = meta::META_COLUMNS.iter().map(|name| {
                serde_json::json!({"name": name, "type": ["null", "string"], "doc": "", "default": null})
            });
            let data: Vec<serde_json::Value> = std::mem::take(fields);
            *fields = meta_fields.chain(data).collect();
        }
        serde_json::to_string(&value).map_err(|e| schema_error(e.to_string()))
    }

    /// Encodes `batches` (data columns only, one schema) with `record_keys` (one per row, in
    /// order) into parquet bytes. Errors name `key` (used only for messages).
    pub fn encode(
        &self,
        key: &str,
        batches: &[RecordBatch],
        record_keys: &[String],
    ) -> Result<EncodedBaseFile> {
        self.encode_keyed(key, batches, &StringArray::from_iter_values(record_keys))
    }

    /// [`encode`](Self::encode) with the record keys as an Arrow string array (one non-null
    /// key per row, in order): the form the write path builds without a `String` per row.
    /// The file is the same as [`encode`](Self::encode) writes for the same keys.
    pub fn encode_keyed(
        &self,
        key: &str,
        batches: &[RecordBatch],
        record_keys: &StringArray,
    ) -> Result<EncodedBaseFile> {
        let arrow_error = |reason: String| FormatError::Arrow {
            path: key.to_string(),
            reason,
        };
        let data_schema = match batches.first() {
            Some(b) => b.schema(),
            None => Arc::new(Schema::empty()),
        };
        for field in data_schema.fields() {
            if meta::is_meta_column(field.name()) {
                return Err(FormatError::Schema {
                    field: Some(field.name().clone()),
                    reason: format!("data for {key} must not contain meta columns"),
                });
            }
        }
        for (i, batch) in batches.iter().enumerate() {
            if batch.schema().fields() != data_schema.fields() {
                return Err(arrow_error(format!(
                    "batch {i} has a different schema than batch 0"
                )));
            }
        }
        let num_rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if record_keys.len() != num_rows {
            return Err(arrow_error(format!(
                "{} record keys for {num_rows} rows",
                record_keys.len()
            )));
        }
        if let Some((times, seqnos)) = &self.preserved {
            if times.len() != num_rows || seqnos.len() != num_rows {
                return Err(arrow_error(format!(
                    "{} preserved commit times and {} sequence numbers for {num_rows} rows",
                    times.len(),
                    seqnos.len()
                )));
            }
        }

        let mut stream = self.open_stream(key, data_schema, batches)?;
        let mut row = 0usize;
        for batch in batches {
            let n = batch.num_rows();
            stream.write(batch, &record_keys.slice(row, n))?;
            row += n;
        }
        stream.finish()
    }

    /// Encodes (see [`encode`](Self::encode)) and creates `key` with
    /// [`Storage::put_if_absent`]: an existing file is never overwritten (that fails with the
    /// storage's `AlreadyExists`).
    pub async fn write(
        &self,
        storage: &dyn Storage,
        key: &str,
        batches: &[RecordBatch],
        record_keys: &[String],
    ) -> Result<WrittenFile> {
        self.encode(key, batches, record_keys)?
            .store(storage, key)
            .await
    }

    /// The Arrow schema fed to the parquet writer: [`file_schema_plain`] with the constant
    /// meta columns as one-value dictionaries (the parquet schema, given apart, is the plain
    /// one: the columns are `BYTE_ARRAY` `STRING` either way).
    pub(super) fn file_schema(&self, data: &Schema) -> SchemaRef {
        let plain = file_schema_plain(data);
        let constant = |name: &str| {
            name == meta::FILE_NAME
                || name == meta::PARTITION_PATH
                || (name == meta::COMMIT_TIME
                    && self.populate_meta_fields
                    && self.preserved.is_none()
                    && !self.preserved_per_batch)
        };
        let fields: Vec<Field> = plain
            .fields()
            .iter()
            .map(|f| {
                if constant(f.name()) {
                    Field::new(f.name(), meta_columns::constant_type(), true)
                } else {
                    f.as_ref().clone()
                }
            })
            .collect();
        Arc::new(Schema::new(fields))
    }

    /// Whether meta values are written ([`populate_meta_fields`](Self::populate_meta_fields)).
    pub(super) fn writes_meta_values(&self) -> bool {
        self.populate_meta_fields
    }

    /// How many rows the preserved commit metadata covers, when some is set.
    pub(super) fn preserved_rows(&self) -> Option<(usize, usize)> {
        self.preserved.as_ref().map(|(t, s)| (t.len(), s.len()))
    }

    /// One output batch: meta columns for rows `first_row..` of the file (`record_keys`: the
    /// keys of `batch`'s rows) then the (converted) data columns.
    pub(super) fn file_batch(
        &self,
        key: &str,
        file_schema: &SchemaRef,
        rows: BatchRows<'_>,
        first_row: usize,
    ) -> Result<RecordBatch> {
        let BatchRows {
            batch,
            record_keys,
            commit_metadata,
        } = rows;
        let n = batch.num_rows();
        let missing = |what: &str| FormatError::Arrow {
            path: key.to_string(),
            reason: format!("{what} missing for rows {first_row}..{}", first_row + n),
        };
        let rows_present = |len: usize| first_row.checked_add(n).is_some_and(|end| end <= len);
        if record_keys.len() != n {
            return Err(FormatError::Arrow {
                path: key.to_string(),
                reason: format!("{} record keys for a batch of {n} rows", record_keys.len()),
            });
        }
        let file_names = meta_columns::constant(&self.file_name, n);
        let mut columns: Vec<ArrayRef> = if self.populate_meta_fields {
            let (commit_times, seqnos): (ArrayRef, ArrayRef) =
                match (commit_metadata, &self.preserved) {
                    (Some((times, seqs)), _) => {
                        if times.len() != n || seqs.len() != n {
                            return Err(missing("commit metadata of the batch"));
                        }
                        (Arc::new(times.clone()), Arc::new(seqs.clone()))
                    }
                    (None, Some((times, seqs))) => {
                        if !rows_present(times.len()) || !rows_present(seqs.len()) {
                            return Err(missing("preserved commit metadata"));
                        }
                        (
                            Arc::new(times.slice(first_row, n)),
                            Arc::new(seqs.slice(first_row, n)),
                        )
                    }
                    (None, None) if self.preserved_per_batch => {
                        return Err(missing("commit metadata of the batch"))
                    }
                    (None, None) => (
                        meta_columns::constant(&self.instant_time, n),
                        Arc::new(meta_columns::seqnos(
                            &self.instant_time,
                            self.task_partition_id,
                            first_row,
                            n,
                        )),
                    ),
                };
            vec![
                commit_times,
                seqnos,
                Arc::new(record_keys.clone()),
                meta_columns::constant(&self.partition_path, n),
                file_names,
            ]
        } else {
            let nulls: ArrayRef = Arc::new(StringArray::new_null(n));
            vec![
                Arc::clone(&nulls),
                Arc::clone(&nulls),
                nulls,
                meta_columns::constant_nulls(n),
                file_names,
            ]
        };
        for (column, field) in batch
            .columns()
            .iter()
            .zip(file_schema.fields().iter().skip(meta::META_COLUMNS.len()))
        {
            let converted = if column.data_type() == field.data_type() {
                Arc::clone(column)
            } else {
                crate::exact_cast(column, field.data_type()).map_err(|e| FormatError::Arrow {
                    path: key.to_string(),
                    reason: format!("column {:?}: {e}", field.name()),
                })?
            };
            columns.push(converted);
        }
        RecordBatch::try_new(Arc::clone(file_schema), columns).map_err(|e| FormatError::Arrow {
            path: key.to_string(),
            reason: e.to_string(),
        })
    }
}

/// The Arrow schema of the file: meta columns, then the data columns made nullable. Types are
/// kept as they are, so the parquet annotations match the Avro schema recorded beside them:
/// a timestamp keeps its unit (`timestamp-millis` stays `TIMESTAMP(MILLIS)`), a zoned
/// timestamp is `isAdjustedToUTC=true` and a naive one (`local-timestamp-*`, Spark's
/// `TIMESTAMP_NTZ`) `isAdjustedToUTC=false`.
pub(super) fn file_schema_plain(data: &Schema) -> SchemaRef {
    let mut fields: Vec<Field> = meta::META_COLUMNS
        .iter()
        .map(|name| Field::new(*name, DataType::Utf8, true))
        .collect();
    for field in data.fields() {
        fields.push(
            Field::new(field.name(), field.data_type().clone(), true)
                .with_metadata(field.metadata().clone()),
        );
    }
    Arc::new(Schema::new(fields))
}

/// The parquet schema parquet-rs would derive, with every decimal stored as
/// `FIXED_LEN_BYTE_ARRAY` (as parquet-avro writes Avro `fixed` decimals) instead of INT32/INT64.
pub(super) fn parquet_schema(schema: &Schema) -> parquet::errors::Result<SchemaDescriptor> {
    let derived = ArrowSchemaConverter::new().convert(schema)?;
    let root = fixed_decimals(&derived.root_schema_ptr())?;
    Ok(SchemaDescriptor::new(root))
}

/// Rewrites INT32/INT64 decimals under `tp` to fixed-length byte arrays.
fn fixed_decimals(tp: &TypePtr) -> parquet::errors::Result<TypePtr> {
    let info = tp.get_basic_info();
    if tp.is_group() {
        let fields = tp
            .get_fields()
            .iter()
            .map(fixed_decimals)
            .collect::<parquet::errors::Result<Vec<_>>>()?;
        let mut builder = Type::group_type_builder(info.name())
            .with_fields(fields)
            .with_converted_type(info.converted_type())
            .with_logical_type(info.logical_type_ref().cloned())
            .with_id(info.has_id().then(|| info.id()));
        if info.has_repetition() {
            builder = builder.with_repetition(info.repetition());
        }
        return Ok(Arc::new(builder.build()?));
    }
    let is_decimal = matches!(info.logical_type_ref(), Some(LogicalType::Decimal { .. }));
    let physical = tp.get_physical_type();
    if !is_decimal || !matches!(physical, PhysicalType::INT32 | PhysicalType::INT64) {
        return Ok(Arc::clone(tp));
    }
    let precision = tp.get_precision();
    let length = decimal_length(precision);
    let builder = Type::primitive_type_builder(info.name(), PhysicalType::FIXED_LEN_BYTE_ARRAY)
        .with_repetition(info.repetition())
        .with_logical_type(info.logical_type_ref().cloned())
        .with_converted_type(info.converted_type())
        .with_precision(precision)
        .with_scale(tp.get_scale())
        .with_length(length)
        .with_id(info.has_id().then(|| info.id()));
    Ok(Arc::new(builder.build()?))
}

/// Bytes a two's-complement decimal of `precision` digits needs (as parquet and Avro size
/// `fixed` decimals).
fn decimal_length(precision: i32) -> i32 {
    // Smallest n with 2^(8n-1) > 10^precision.
    let bits = f64::from(precision) * std::f64::consts::LOG2_10;
    ((bits + 1.0) / 8.0).ceil() as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_decimal_length_matches_avro_sizes() {
        // Sizes Spark wrote in the fixtures: decimal(10,5) -> 5, (15,2) -> 7, (10,2) -> 5.
        assert_eq!(decimal_length(10), 5);
        assert_eq!(decimal_length(15), 7);
        assert_eq!(decimal_length(1), 1);
        assert_eq!(decimal_length(9), 4);
        assert_eq!(decimal_length(18), 8);
        assert_eq!(decimal_length(38), 16);
    }

    #[test]
    fn test_avro_schema_with_meta_fields_prepends_once() {
        let data = r#"{"type":"record","name":"r","fields":[{"name":"id","type":"int"}]}"#;
        let with = BaseFileWriter::avro_schema_with_meta_fields(data).unwrap();
        let v: serde_json::Value = serde_json::from_str(&with).unwrap();
        let names: Vec<&str> = v["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "_hoodie_commit_time",
                "_hoodie_commit_seqno",
                "_hoodie_record_key",
                "_hoodie_partition_path",
                "_hoodie_file_name",
                "id"
            ]
        );
        let again = BaseFileWriter::avro_schema_with_meta_fields(&with).unwrap();
        assert_eq!(again, with);
    }

    #[test]
    fn test_avro_schema_with_meta_fields_not_record_is_schema_error() {
        assert!(matches!(
            BaseFileWriter::avro_schema_with_meta_fields(r#""string""#),
            Err(FormatError::Schema { .. })
        ));
        assert!(matches!(
            BaseFileWriter::avro_schema_with_meta_fields("{not json"),
            Err(FormatError::Schema { .. })
        ));
    }
}
