//! Reading a Lance base file through arbor's [`Storage`].

use std::collections::HashMap;
use std::sync::Arc;

use arbor_storage::Storage;
use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::{Schema, SchemaRef};
use futures::stream::{self, BoxStream};
use futures::{StreamExt, TryStreamExt};
use lance_core::cache::LanceCache;
use lance_encoding::decoder::{DecoderPlugins, FilterExpression};
use lance_file::reader::{FileReader, FileReaderOptions};
use lance_file::versions::reader_projection_from_column_names;
use lance_io::object_store::ObjectStore as LanceStore;
use lance_io::scheduler::{ScanScheduler, SchedulerConfig};
use lance_io::utils::CachedFileSize;
use lance_io::ReadBatchParams;

use crate::bridge;
use crate::error::{lance_error, LanceError, Result};
use crate::store::OneFile;

/// Batches decoded ahead of the consumer.
const READAHEAD: u32 = 4;

/// An opened Lance file: footer and schema read, data not yet.
///
/// Guarantees: [`schema`](Self::schema) is the arrow schema the data decodes to (with the
/// file's schema metadata, where Hudi keeps `hoodie_min_record_key`, `hoodie_max_record_key`
/// and its bloom filter); [`stream`](Self::stream) yields exactly
/// [`num_rows`](Self::num_rows) rows.
pub struct LanceFileReader {
    key: String,
    size: u64,
    reader: FileReader,
    schema: SchemaRef,
}

impl std::fmt::Debug for LanceFileReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LanceFileReader")
            .field("key", &self.key)
            .field("size", &self.size)
            .field("rows", &self.reader.num_rows())
            .finish_non_exhaustive()
    }
}

impl LanceFileReader {
    /// Opens the Lance file `key` of `size` bytes (from a listing or a `head`): reads its
    /// footer and column metadata with ranged reads. A file that is not Lance, of an older
    /// format (v1), or truncated is [`LanceError::Lance`] naming `key`.
    ///
    /// Lance decodes on tokio tasks: call it from within a tokio runtime.
    pub async fn open(storage: Arc<dyn Storage>, key: &str, size: u64) -> Result<Self> {
        let one = Arc::new(OneFile::new(storage, key, size));
        let url = url::Url::parse("memory:///").map_err(|e| lance_error(key, e))?;
        let store = Arc::new(LanceStore::new(
            one, url, None, None, false, true, 8, 1, None,
        ));
        let scheduler =
            ScanScheduler::new(Arc::clone(&store), SchedulerConfig::max_bandwidth(&store));
        let path = object_store_014::path::Path::from("f.lance");
        let file = scheduler
            .open_file(&path, &CachedFileSize::new(size))
            .await
            .map_err(|e| lance_error(key, e))?;
        let reader = FileReader::try_open(
            file,
            None,
            Arc::<DecoderPlugins>::default(),
            &LanceCache::no_cache(),
            FileReaderOptions::default(),
        )
        .await
        .map_err(|e| lance_error(key, format!("not a readable lance file: {e}")))?;
        let lance_schema: arrow_schema_58::Schema = reader.schema().as_ref().into();
        let schema =
            bridge::schema_ref_to_59(&lance_schema).map_err(|reason| LanceError::Bridge {
                path: key.to_string(),
                reason,
            })?;
        Ok(LanceFileReader {
            key: key.to_string(),
            size,
            reader,
            schema,
        })
    }

    /// The file's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The arrow schema of all columns, with the file's schema metadata.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The file's schema metadata (`hoodie_min_record_key`, ...).
    pub fn metadata(&self) -> &HashMap<String, String> {
        self.schema.metadata()
    }

    /// The file's row count (from its footer).
    pub fn num_rows(&self) -> u64 {
        self.reader.num_rows()
    }

    /// Decodes the file in batches of at most `batch_size` rows, projected to the named
    /// top-level columns in the given order (all columns, in file order, for `None`). An
    /// unknown name is [`LanceError::Schema`]; an empty projection yields batches with no
    /// column and the file's rows.
    pub fn stream(
        &self,
        projection: Option<&[String]>,
        batch_size: usize,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let key = self.key.clone();
        let rows = self.num_rows();
        let batch_size = u32::try_from(batch_size.max(1)).unwrap_or(u32::MAX);
        let out_schema: SchemaRef = match projection {
            None => Schema::new(self.schema.fields().clone()).into(),
            Some(names) => {
                let mut fields = Vec::with_capacity(names.len());
                for name in names {
                    let field =
                        self.schema
                            .field_with_name(name)
                            .map_err(|_| LanceError::Schema {
                                path: key.clone(),
                                column: name.clone(),
                                reason: "no such column in the file".to_string(),
                            })?;
                    fields.push(field.clone());
                }
                Arc::new(Schema::new(fields))
            }
        };
        if out_schema.fields().is_empty() {
            // lance-file rejects an empty projection: the row count alone, in batches.
            let size = u64::from(batch_size);
            let counts: Vec<u64> = (0..rows.div_ceil(size))
                .map(|i| size.min(rows - i * size))
                .collect();
            return Ok(stream::iter(counts.into_iter().map(move |n| {
                RecordBatch::try_new_with_options(
                    Arc::new(Schema::empty()),
                    vec![],
                    &RecordBatchOptions::new().with_row_count(Some(n as usize)),
                )
                .map_err(|e| lance_error(&key, e))
            }))
            .boxed());
        }
        let names: Vec<&str> = out_schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        let metadata = self.reader.metadata();
        let projection = reader_projection_from_column_names(
            metadata.version,
            metadata.file_schema.as_ref(),
            &names,
        )
        .map_err(|e| lance_error(&key, e))?;
        let reader = self.reader.clone();
        let fut = async move {
            let lance = reader
                .read_stream_projected(
                    ReadBatchParams::RangeFull,
                    batch_size,
                    READAHEAD,
                    projection,
                    FilterExpression::no_filter(),
                )
                .await
                .map_err(|e| lance_error(&key, e))?;
            let key2 = key.clone();
            Ok::<_, LanceError>(lance.map(move |batch| {
                let batch = batch.map_err(|e| lance_error(&key2, e))?;
                let batch = bridge::batch_to_59(&batch).map_err(|reason| LanceError::Bridge {
                    path: key2.clone(),
                    reason,
                })?;
                // Lance names the projected columns as asked; the schema is the file's (with
                // field metadata) in the order asked.
                RecordBatch::try_new(Arc::clone(&out_schema), batch.columns().to_vec())
                    .map_err(|e| lance_error(&key2, e))
            }))
        };
        Ok(stream::once(fut).try_flatten().boxed())
    }
}
