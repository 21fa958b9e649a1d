//! A base file written batch by batch ([`BaseFileStream`], opened by
//! [`BaseFileWriter::open_stream`]): the form a streamed writer uses, and the one
//! [`BaseFileWriter::encode_keyed`] is built on, so both give the same file for the same rows.

use std::cmp::Ordering;

use arrow_array::{RecordBatch, StringArray};
use arrow_schema::{Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::KeyValue;

use std::sync::Arc;

use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::basic::ZstdLevel;
use parquet::file::properties::{WriterProperties, DEFAULT_DICTIONARY_PAGE_SIZE_LIMIT};
use parquet::schema::types::ColumnPath;

use super::writer::{
    file_schema_plain, parquet_schema, BaseFileWriter, BatchRows, Compression, EncodedBaseFile,
    FOOTER_AVRO_SCHEMA, FOOTER_MAX_RECORD_KEY, FOOTER_MIN_RECORD_KEY, FOOTER_WRITER_MODEL,
};
use super::{dictionary, meta_columns};
use crate::error::{FormatError, Result};
use crate::meta;

/// Where a base file's rows go.
pub(super) enum Sink {
    /// Encoded as they arrive.
    Parquet(Box<ArrowWriter<Vec<u8>>>),
    /// Kept (meta columns as plain strings) and encoded by `finish`: the Lance writer is
    /// asynchronous. `bytes` is their memory size.
    #[cfg_attr(not(feature = "lance"), allow(dead_code))]
    Lance {
        batches: Vec<RecordBatch>,
        bytes: usize,
    },
}

/// An open base file in memory: rows are encoded as they are written (pages and row groups as
/// parquet cuts them), and the footer, with the record key range in Java order, is written by
/// [`finish`](Self::finish). Sequence numbers continue across batches (row `n` of the file is
/// `<instant>_<task>_<n>`).
///
/// Guarantees: every batch has the schema the file was opened with and one non-null record key
/// per row, or [`write`](Self::write) fails naming the file and writes nothing of that batch;
/// it holds its own copy of the writer's settings, so it can live in a map of open files;
/// the bytes of [`finish`](Self::finish) are those [`BaseFileWriter::encode_keyed`] returns
/// for the same batches, keys and dictionary sample. Dropping it unfinished discards the file.
pub struct BaseFileStream {
    config: BaseFileWriter,
    key: String,
    data_schema: SchemaRef,
    file_schema: SchemaRef,
    sink: Sink,
    rows: usize,
    min_key: Option<String>,
    max_key: Option<String>,
}

impl std::fmt::Debug for BaseFileStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BaseFileStream")
            .field("key", &self.key)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl BaseFileStream {
    pub(super) fn new(
        config: BaseFileWriter,
        key: String,
        data_schema: SchemaRef,
        file_schema: SchemaRef,
        sink: Sink,
    ) -> Self {
        BaseFileStream {
            config,
            key,
            data_schema,
            file_schema,
            sink,
            rows: 0,
            min_key: None,
            max_key: None,
        }
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows as u64
    }

    /// Bytes the file holds so far: encoded row groups plus the row group in progress (an
    /// estimate of its encoded size), for deciding when to close it.
    pub fn size_estimate(&self) -> usize {
        match &self.sink {
            Sink::Parquet(w) => w.bytes_written() + w.in_progress_size(),
            // Arrow's in-memory size: Lance's encoding is about as large for most columns.
            Sink::Lance { bytes, .. } => *bytes,
        }
    }

    /// The storage key the file was opened for.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Bytes of memory the open file holds: its encoded row groups plus the row group in
    /// progress as buffered (pages, dictionaries, encoder state), for bounding the memory of
    /// many open files.
    pub fn memory_size(&self) -> usize {
        match &self.sink {
            Sink::Parquet(w) => w.bytes_written() + w.memory_size(),
            Sink::Lance { bytes, .. } => *bytes,
        }
    }

    /// Bytes of memory the row group in progress holds. Encoder state costs several times
    /// the encoded bytes (about 7 MB for a 1.3 MB file of 34,000 rows): a writer holding many
    /// open files cuts their row groups ([`flush_row_group`](Self::flush_row_group)) to bound
    /// it.
    pub fn row_group_memory(&self) -> usize {
        match &self.sink {
            Sink::Parquet(w) => w.memory_size(),
            Sink::Lance { .. } => 0,
        }
    }

    /// Encodes the rows buffered so far as a row group of their own (a no-op without rows),
    /// freeing the encoder state they held.
    /// (A no-op for a Lance file, which holds its rows until [`finish`](Self::finish).)
    pub fn flush_row_group(&mut self) -> Result<()> {
        match &mut self.sink {
            Sink::Parquet(w) => w.flush().map_err(|e| FormatError::Parquet {
                path: self.key.clone(),
                reason: e.to_string(),
            }),
            Sink::Lance { .. } => Ok(()),
        }
    }

    /// Appends `batch` (data columns of the file's schema) with `record_keys`, one non-null
    /// key per row in order.
    pub fn write(&mut self, batch: &RecordBatch, record_keys: &StringArray) -> Result<()> {
        self.write_rows(BatchRows {
            batch,
            record_keys,
            commit_metadata: None,
        })
    }

    /// [`write`](Self::write) for rows that keep the `_hoodie_commit_time` and
    /// `_hoodie_commit_seqno` they were first written with (clustering a streamed input): one
    /// value of each per row, nulls written as nulls. The writer must have been set up with
    /// [`BaseFileWriter::preserve_commit_metadata_per_batch`] (and without preserved values
    /// for the whole file, with meta values written). Fails, writing nothing of the batch,
    /// otherwise or when a list has another length than the batch.
    pub fn write_preserving(
        &mut self,
        batch: &RecordBatch,
        record_keys: &StringArray,
        commit_times: &StringArray,
        commit_seqnos: &StringArray,
    ) -> Result<()> {
        if !self.config.preserves_per_batch() {
            return Err(FormatError::Arrow {
                path: self.key.clone(),
                reason: "per-batch commit metadata for a file not opened for it \
                         (BaseFileWriter::preserve_commit_metadata_per_batch)"
                    .into(),
            });
        }
        self.write_rows(BatchRows {
            batch,
            record_keys,
            commit_metadata: Some((commit_times, commit_seqnos)),
        })
    }

    fn write_rows(&mut self, rows: BatchRows<'_>) -> Result<()> {
        let BatchRows {
            batch, record_keys, ..
        } = rows;
        if batch.schema().fields() != self.data_schema.fields() {
            return Err(FormatError::Arrow {
                path: self.key.clone(),
                reason: "a batch has a different schema than the file's data columns".into(),
            });
        }
        let out = self
            .config
            .file_batch(&self.key, &self.file_schema, rows, self.rows)?;
        if self.config.writes_meta_values() {
            let (min, max) = meta_columns::key_range(record_keys);
            self.min_key = pick(self.min_key.take(), min, Ordering::Less);
            self.max_key = pick(self.max_key.take(), max, Ordering::Greater);
        }
        match &mut self.sink {
            Sink::Parquet(w) => w.write(&out).map_err(|e| FormatError::Parquet {
                path: self.key.clone(),
                reason: e.to_string(),
            })?,
            Sink::Lance { batches, bytes } => {
                let out = plain_meta_columns(&self.key, out)?;
                *bytes += out.get_array_memory_size();
                batches.push(out);
            }
        }
        self.rows += batch.num_rows();
        Ok(())
    }

    /// Writes the footer and returns the file's bytes. Fails when preserved commit metadata
    /// was set for another number of rows than were written.
    pub fn finish(self) -> Result<EncodedBaseFile> {
        if let Some((times, seqnos)) = self.config.preserved_rows() {
            if times != self.rows || seqnos != self.rows {
                return Err(FormatError::Arrow {
                    path: self.key.clone(),
                    reason: format!(
                        "{times} preserved commit times and {seqnos} sequence numbers for {} \
                         rows",
                        self.rows
                    ),
                });
            }
        }
        let bytes = match self.sink {
            Sink::Parquet(writer) => {
                let mut writer = *writer;
                if let (Some(min), Some(max)) = (&self.min_key, &self.max_key) {
                    writer.append_key_value_metadata(KeyValue::new(
                        FOOTER_MIN_RECORD_KEY.to_string(),
                        min.clone(),
                    ));
                    writer.append_key_value_metadata(KeyValue::new(
                        FOOTER_MAX_RECORD_KEY.to_string(),
                        max.clone(),
                    ));
                }
                Bytes::from(writer.into_inner().map_err(|e| FormatError::Parquet {
                    path: self.key.clone(),
                    reason: e.to_string(),
                })?)
            }
            Sink::Lance { batches, .. } => {
                // The key range as Hudi 1.2's Java writer records it: schema metadata.
                let mut metadata = std::collections::HashMap::new();
                if let (Some(min), Some(max)) = (&self.min_key, &self.max_key) {
                    metadata.insert(FOOTER_MIN_RECORD_KEY.to_string(), min.clone());
                    metadata.insert(FOOTER_MAX_RECORD_KEY.to_string(), max.clone());
                }
                let schema = file_schema_plain(&self.data_schema)
                    .as_ref()
                    .clone()
                    .with_metadata(metadata);
                encode_lance(&self.key, &schema, &batches)?
            }
        };
        Ok(EncodedBaseFile {
            bytes,
            num_rows: self.rows as u64,
            min_record_key: self.min_key,
            max_record_key: self.max_key,
        })
    }
}

/// `batch` with its dictionary-encoded constant meta columns as plain strings (a Lance file
/// stores the five meta columns as strings, as Hudi's Java writer does).
fn plain_meta_columns(key: &str, batch: RecordBatch) -> Result<RecordBatch> {
    let schema = file_schema_plain(&Schema::new(
        batch
            .schema()
            .fields()
            .iter()
            .skip(meta::META_COLUMNS.len())
            .cloned()
            .collect::<Vec<_>>(),
    ));
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (column, field) in batch.columns().iter().zip(schema.fields()) {
        if column.data_type() == field.data_type() {
            columns.push(Arc::clone(column));
        } else {
            columns.push(
                arrow::compute::cast(column, field.data_type()).map_err(|e| {
                    FormatError::Arrow {
                        path: key.to_string(),
                        reason: format!("column {:?}: {e}", field.name()),
                    }
                })?,
            );
        }
    }
    RecordBatch::try_new(schema, columns).map_err(|e| FormatError::Arrow {
        path: key.to_string(),
        reason: e.to_string(),
    })
}

#[cfg(feature = "lance")]
fn encode_lance(key: &str, schema: &Schema, batches: &[RecordBatch]) -> Result<Bytes> {
    super::lance::encode(key, schema, batches)
}

#[cfg(not(feature = "lance"))]
fn encode_lance(key: &str, _: &Schema, _: &[RecordBatch]) -> Result<Bytes> {
    Err(FormatError::UnsupportedFormat {
        path: key.to_string(),
        reason: "lance base files need arbor built with the `lance` feature".to_string(),
    })
}

impl BaseFileWriter {
    /// Opens a base file to be written batch by batch ([`BaseFileStream::write`], then
    /// [`BaseFileStream::finish`]) with data columns of `data_schema`; errors name `key`.
    /// `sample` (batches of that schema, possibly none) decides which unique columns are
    /// written without a dictionary ([`super::dictionary`]): [`encode_keyed`](Self::encode_keyed)
    /// passes all its batches, a streamed writer its first ones. The file holds what
    /// [`encode_keyed`](Self::encode_keyed) writes for the same rows, keys and sample.
    pub fn open_stream(
        &self,
        key: &str,
        data_schema: SchemaRef,
        sample: &[RecordBatch],
    ) -> Result<BaseFileStream> {
        for field in data_schema.fields() {
            if meta::is_meta_column(field.name()) {
                return Err(FormatError::Schema {
                    field: Some(field.name().clone()),
                    reason: format!("data for {key} must not contain meta columns"),
                });
            }
        }
        let file_schema = self.file_schema(&data_schema);
        if self.format() == super::BaseFormat::Lance {
            if !super::BaseFormat::Lance.supported() {
                return Err(FormatError::UnsupportedFormat {
                    path: key.to_string(),
                    reason: "lance base files need arbor built with the `lance` feature"
                        .to_string(),
                });
            }
            return Ok(BaseFileStream::new(
                self.clone(),
                key.to_string(),
                data_schema,
                file_schema,
                Sink::Lance {
                    batches: Vec::new(),
                    bytes: 0,
                },
            ));
        }
        let parquet_schema =
            parquet_schema(&file_schema_plain(&data_schema)).map_err(|e| FormatError::Parquet {
                path: key.to_string(),
                reason: e.to_string(),
            })?;
        // The record key range is appended to these when the file closes.
        let kv = vec![
            KeyValue::new(FOOTER_AVRO_SCHEMA.to_string(), self.avro_schema.clone()),
            KeyValue::new(FOOTER_WRITER_MODEL.to_string(), "avro".to_string()),
        ];
        let compression = match self.compression {
            Compression::Snappy => parquet::basic::Compression::SNAPPY,
            Compression::Uncompressed => parquet::basic::Compression::UNCOMPRESSED,
            Compression::Zstd(level) => {
                parquet::basic::Compression::ZSTD(ZstdLevel::try_new(level).map_err(|e| {
                    FormatError::Parquet {
                        path: key.to_string(),
                        reason: e.to_string(),
                    }
                })?)
            }
        };
        // Sequence numbers and record keys are unique per row: a dictionary would only be
        // built to be abandoned (parquet falls back to plain pages once it outgrows its page).
        // So are the data columns a sample shows to be unique enough ([`dictionary`]).
        let mut props = WriterProperties::builder()
            .set_column_dictionary_enabled(ColumnPath::from(meta::COMMIT_SEQNO), false)
            .set_column_dictionary_enabled(ColumnPath::from(meta::RECORD_KEY), false);
        for column in dictionary::plain_columns(
            sample,
            self.row_group_rows,
            DEFAULT_DICTIONARY_PAGE_SIZE_LIMIT,
        ) {
            props = props.set_column_dictionary_enabled(ColumnPath::from(column.as_str()), false);
        }
        if let Some(bytes) = self.data_page_bytes {
            props = props.set_data_page_size_limit(bytes);
        }
        let props = props
            .set_compression(compression)
            .set_max_row_group_row_count(Some(self.row_group_rows))
            .set_key_value_metadata(Some(kv))
            .set_created_by("arbor".to_string())
            .build();
        let options = ArrowWriterOptions::new()
            .with_properties(props)
            .with_skip_arrow_metadata(true)
            .with_parquet_schema(parquet_schema);
        let writer =
            ArrowWriter::try_new_with_options(Vec::new(), Arc::clone(&file_schema), options)
                .map_err(|e| FormatError::Parquet {
                    path: key.to_string(),
                    reason: e.to_string(),
                })?;
        Ok(BaseFileStream::new(
            self.clone(),
            key.to_string(),
            data_schema,
            file_schema,
            Sink::Parquet(Box::new(writer)),
        ))
    }
}

/// `current` or `new`, whichever `new` compares to as `wins` in Java `String` order.
fn pick(current: Option<String>, new: Option<String>, wins: Ordering) -> Option<String> {
    match (current, new) {
        (Some(c), Some(n)) if meta_columns::java_cmp(&n, &c) == wins => Some(n),
        (Some(c), _) => Some(c),
        (None, n) => n,
    }
}
