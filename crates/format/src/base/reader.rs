//! Reading base files through [`Storage`] with ranged reads: parquet here, Lance through
//! arbor-lance (the `lance` feature).

use std::ops::Range;
use std::sync::Arc;

use arbor_storage::{Storage, StorageError};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::{AsyncFileReader, MetadataFetch};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use super::format::BaseFormat;
use crate::error::{FormatError, Result};

/// Bytes fetched from the end of the file on the first footer read; most Hudi footers (with the
/// Avro schema and a bloom filter) fit.
const FOOTER_PREFETCH: usize = 64 * 1024;

/// Default rows per decoded batch.
const DEFAULT_BATCH_SIZE: usize = 8192;

/// Options of a base file read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    /// Top-level columns to read, by name, in the order wanted in the output; `None` reads all
    /// columns in file order. A name the file does not have is
    /// [`FormatError::Schema`].
    pub projection: Option<Vec<String>>,
    /// Most rows per output batch (at least 1).
    pub batch_size: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            projection: None,
            batch_size: DEFAULT_BATCH_SIZE,
        }
    }
}

/// Fails with [`FormatError::UnsupportedFormat`] unless `key` names a base file this build
/// reads: parquet, or Lance with the `lance` feature (by the extension; see
/// [`BaseFormat::of_key`]).
pub fn check_base_file_format(key: &str) -> Result<()> {
    BaseFormat::of_key(key).map(|_| ())
}

/// Maps a parquet error of the file `key` to a [`FormatError`], giving back storage errors
/// (missing file, I/O) as [`FormatError::Storage`].
fn parquet_error(key: &str, err: ParquetError) -> FormatError {
    match err {
        ParquetError::External(inner) => match inner.downcast::<StorageError>() {
            Ok(storage) => FormatError::Storage(*storage),
            Err(other) => FormatError::Parquet {
                path: key.to_string(),
                reason: other.to_string(),
            },
        },
        other => FormatError::Parquet {
            path: key.to_string(),
            reason: other.to_string(),
        },
    }
}

/// Ranged reads of one object, borrowed (footer reads).
struct BorrowedFetch<'a> {
    storage: &'a dyn Storage,
    key: &'a str,
}

impl MetadataFetch for BorrowedFetch<'_> {
    fn fetch(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            self.storage
                .get_range(self.key, range)
                .await
                .map_err(|e| ParquetError::External(Box::new(e)))
        }
        .boxed()
    }
}

/// Reads and parses the footer of the parquet base file `key` (of `size` bytes, looked up when
/// `None`). Any other format is [`FormatError::UnsupportedFormat`].
pub async fn base_file_metadata(
    storage: &dyn Storage,
    key: &str,
    size: Option<u64>,
) -> Result<Arc<ParquetMetaData>> {
    if BaseFormat::of_key(key)? != BaseFormat::Parquet {
        return Err(FormatError::UnsupportedFormat {
            path: key.to_string(),
            reason: "not a parquet file: it has no parquet footer".to_string(),
        });
    }
    let size = match size {
        Some(s) => s,
        None => storage.head(key).await?.size,
    };
    let metadata = ParquetMetaDataReader::new()
        .with_prefetch_hint(Some(FOOTER_PREFETCH))
        .load_and_finish(BorrowedFetch { storage, key }, size)
        .await
        .map_err(|e| parquet_error(key, e))?;
    Ok(Arc::new(metadata))
}

/// The Arrow schema of the base file `key` (all columns, meta columns included), read from its
/// footer only.
pub async fn base_file_schema(storage: Arc<dyn Storage>, key: &str) -> Result<SchemaRef> {
    if BaseFormat::of_key(key)? == BaseFormat::Parquet {
        let metadata = base_file_metadata(storage.as_ref(), key, None).await?;
        let arrow = ArrowReaderMetadata::try_new(metadata, ArrowReaderOptions::new())
            .map_err(|e| parquet_error(key, e))?;
        return Ok(Arc::clone(arrow.schema()));
    }
    Ok(BaseFileReader::open(storage, key).await?.schema())
}

/// Reads the whole base file `key` (of `size` bytes when known from a listing, which saves a
/// `head`), optionally projected to the named top-level columns (in the given order). The
/// result has exactly the file's row count.
pub async fn read_base_file(
    storage: Arc<dyn Storage>,
    key: &str,
    size: Option<u64>,
    projection: Option<&[String]>,
) -> Result<Vec<RecordBatch>> {
    let options = ReadOptions {
        projection: projection.map(<[String]>::to_vec),
        ..ReadOptions::default()
    };
    let reader = match size {
        Some(size) => BaseFileReader::open_with_size(storage, key, size).await?,
        None => BaseFileReader::open(storage, key).await?,
    };
    reader.stream(&options)?.try_collect().await
}

/// Byte ranges of one file closer than this are read with one request.
const COALESCE_GAP: u64 = 1024 * 1024;

/// `ranges` sorted and merged where they overlap or lie less than `gap` apart.
fn coalesce(ranges: &[Range<u64>], gap: u64) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = ranges.to_vec();
    sorted.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(gap) => {
                last.end = last.end.max(r.end);
            }
            _ => out.push(r),
        }
    }
    out
}

/// The [`AsyncFileReader`] the parquet decoder pulls bytes through.
struct StorageFileReader {
    storage: Arc<dyn Storage>,
    key: String,
    metadata: Arc<ParquetMetaData>,
    /// The whole file, when it was read at open (small files): ranges are cut from it.
    whole: Option<Bytes>,
}

/// Range `range` of `whole`, the file `key`'s bytes.
fn cut(key: &str, whole: &Bytes, range: &Range<u64>) -> parquet::errors::Result<Bytes> {
    let start = usize::try_from(range.start).unwrap_or(usize::MAX);
    let end = usize::try_from(range.end).unwrap_or(usize::MAX);
    if start > end || end > whole.len() {
        return Err(ParquetError::EOF(format!(
            "range {range:?} of {key} ends past its {} bytes",
            whole.len()
        )));
    }
    Ok(whole.slice(start..end))
}

impl AsyncFileReader for StorageFileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            if let Some(whole) = &self.whole {
                return cut(&self.key, whole, &range);
            }
            self.storage
                .get_range(&self.key, range)
                .await
                .map_err(|e| ParquetError::External(Box::new(e)))
        }
        .boxed()
    }

    /// Ranges less than [`COALESCE_GAP`] apart are read as one (the column chunks of a row
    /// group lie side by side: one read instead of one per column).
    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            if let Some(whole) = &self.whole {
                return ranges.iter().map(|r| cut(&self.key, whole, r)).collect();
            }
            let merged = coalesce(&ranges, COALESCE_GAP);
            let fetched = futures::future::try_join_all(
                merged
                    .iter()
                    .map(|r| self.storage.get_range(&self.key, r.clone())),
            )
            .await
            .map_err(|e| ParquetError::External(Box::new(e)))?;
            ranges
                .iter()
                .map(|r| {
                    let (m, bytes) = merged
                        .iter()
                        .zip(&fetched)
                        .find(|(m, _)| m.start <= r.start && r.end <= m.end)
                        .ok_or_else(|| {
                            ParquetError::General(format!("range {r:?} was not read"))
                        })?;
                    let (start, end) = ((r.start - m.start) as usize, (r.end - m.start) as usize);
                    if start > end || end > bytes.len() {
                        return Err(ParquetError::EOF(format!(
                            "range {r:?} of {} ends past its {} bytes",
                            self.key,
                            m.start + bytes.len() as u64
                        )));
                    }
                    Ok(bytes.slice(start..end))
                })
                .collect()
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        let metadata = Arc::clone(&self.metadata);
        async move { Ok(metadata) }.boxed()
    }
}

/// Fails with [`FormatError::Parquet`] unless the footer's row count is non-negative and is
/// the sum of its row groups' (each non-negative) counts: the rows a reader yields come from
/// the row groups, so any other footer would break [`BaseFileReader::num_rows`]'s promise.
fn check_row_counts(key: &str, metadata: &ParquetMetaData) -> Result<()> {
    let bad = |reason: String| FormatError::Parquet {
        path: key.to_string(),
        reason,
    };
    let total = metadata.file_metadata().num_rows();
    if total < 0 {
        return Err(bad(format!("negative row count {total} in the footer")));
    }
    let mut sum: i64 = 0;
    for (i, rg) in metadata.row_groups().iter().enumerate() {
        let n = rg.num_rows();
        if n < 0 {
            return Err(bad(format!("row group {i} has a negative row count {n}")));
        }
        sum = sum
            .checked_add(n)
            .ok_or_else(|| bad("row group row counts overflow".to_string()))?;
    }
    if sum != total {
        return Err(bad(format!(
            "the footer's row count {total} differs from its row groups' total {sum}"
        )));
    }
    Ok(())
}

/// An opened base file (parquet, or Lance with the `lance` feature): footer parsed, data not
/// yet read.
///
/// Guarantees: the file is of the format its extension names and its footer parsed;
/// [`schema`](Self::schema) is the Arrow schema its data decodes to; [`stream`](Self::stream)
/// yields exactly [`num_rows`](Self::num_rows) rows.
#[derive(Debug, Clone)]
pub struct BaseFileReader {
    storage: Arc<dyn Storage>,
    key: String,
    size: u64,
    inner: Inner,
}

/// The format-specific part of an opened base file.
#[derive(Debug, Clone)]
enum Inner {
    Parquet {
        metadata: ArrowReaderMetadata,
        /// The whole file, for files of at most [`WHOLE_FILE_MAX`] bytes (read with one
        /// request).
        whole: Option<Bytes>,
    },
    #[cfg(feature = "lance")]
    Lance(super::lance::LanceBase),
}

/// Files up to this size are read whole at open, with one request: their footer and every
/// column chunk then come from memory (the footer read would fetch most of them anyway).
const WHOLE_FILE_MAX: u64 = FOOTER_PREFETCH as u64;

impl BaseFileReader {
    /// Opens `key`: checks the format, looks up the size and reads the footer. A footer whose
    /// row count is negative or not the total of its row groups is [`FormatError::Parquet`].
    pub async fn open(storage: Arc<dyn Storage>, key: &str) -> Result<BaseFileReader> {
        let size = storage.head(key).await?.size;
        Self::open_with_size(storage, key, size).await
    }

    /// Opens `key` whose size is already known (from a listing), saving the `head` call. A
    /// file of at most 64 KiB is read whole with this one request, and later reads of it make
    /// none.
    pub async fn open_with_size(
        storage: Arc<dyn Storage>,
        key: &str,
        size: u64,
    ) -> Result<BaseFileReader> {
        #[cfg(feature = "lance")]
        if BaseFormat::of_key(key)? == BaseFormat::Lance {
            let lance = super::lance::LanceBase::open(Arc::clone(&storage), key, size).await?;
            return Ok(BaseFileReader {
                storage,
                key: key.to_string(),
                size,
                inner: Inner::Lance(lance),
            });
        }
        if size <= WHOLE_FILE_MAX {
            check_base_file_format(key)?;
            let (whole, _) = storage.get(key).await?;
            let parquet = ParquetMetaDataReader::new()
                .parse_and_finish(&whole)
                .map_err(|e| parquet_error(key, e))?;
            return Self::with_metadata(storage, key, whole.len() as u64, parquet, Some(whole));
        }
        let parquet = base_file_metadata(storage.as_ref(), key, Some(size)).await?;
        Self::with_metadata(storage, key, size, Arc::unwrap_or_clone(parquet), None)
    }

    fn with_metadata(
        storage: Arc<dyn Storage>,
        key: &str,
        size: u64,
        parquet: ParquetMetaData,
        whole: Option<Bytes>,
    ) -> Result<BaseFileReader> {
        let parquet = Arc::new(parquet);
        check_row_counts(key, &parquet)?;
        let metadata = ArrowReaderMetadata::try_new(parquet, ArrowReaderOptions::new())
            .map_err(|e| parquet_error(key, e))?;
        Ok(BaseFileReader {
            storage,
            key: key.to_string(),
            size,
            inner: Inner::Parquet { metadata, whole },
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

    /// The file's format.
    pub fn format(&self) -> BaseFormat {
        match &self.inner {
            Inner::Parquet { .. } => BaseFormat::Parquet,
            #[cfg(feature = "lance")]
            Inner::Lance(_) => BaseFormat::Lance,
        }
    }

    /// The Arrow schema of all columns.
    pub fn schema(&self) -> SchemaRef {
        match &self.inner {
            Inner::Parquet { metadata, .. } => Arc::clone(metadata.schema()),
            #[cfg(feature = "lance")]
            Inner::Lance(lance) => Arc::clone(lance.schema()),
        }
    }

    /// The parsed parquet footer (`None` for a Lance file).
    pub fn parquet_metadata(&self) -> Option<&Arc<ParquetMetaData>> {
        match &self.inner {
            Inner::Parquet { metadata, .. } => Some(metadata.metadata()),
            #[cfg(feature = "lance")]
            Inner::Lance(_) => None,
        }
    }

    /// The row count recorded in the footer (for parquet, checked at open to be non-negative
    /// and the total of the row groups).
    pub fn num_rows(&self) -> u64 {
        match &self.inner {
            Inner::Parquet { metadata, .. } => {
                u64::try_from(metadata.metadata().file_metadata().num_rows()).unwrap_or(0)
            }
            #[cfg(feature = "lance")]
            Inner::Lance(lance) => lance.num_rows(),
        }
    }

    /// The value of a footer key/value entry (e.g. `hoodie_min_record_key`): parquet's
    /// key/value metadata, a Lance file's schema metadata.
    pub fn footer_value(&self, key: &str) -> Option<&str> {
        match &self.inner {
            Inner::Parquet { metadata, .. } => metadata
                .metadata()
                .file_metadata()
                .key_value_metadata()?
                .iter()
                .find(|kv| kv.key == key)
                .and_then(|kv| kv.value.as_deref()),
            #[cfg(feature = "lance")]
            Inner::Lance(lance) => lance.metadata().get(key).map(String::as_str),
        }
    }

    /// Decodes the file as a stream of batches. With a projection, batches hold exactly the
    /// named columns in the given order; an unknown name is [`FormatError::Schema`].
    pub fn stream(&self, options: &ReadOptions) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let (metadata, whole) = match &self.inner {
            Inner::Parquet { metadata, whole } => (metadata, whole),
            #[cfg(feature = "lance")]
            Inner::Lance(lance) => {
                return lance.stream(options.projection.as_deref(), options.batch_size.max(1))
            }
        };
        let schema = metadata.schema();
        let (mask, order) = match &options.projection {
            None => (ProjectionMask::all(), None),
            Some(names) => {
                let mut indices = Vec::with_capacity(names.len());
                for name in names {
                    let index = schema.index_of(name).map_err(|_| FormatError::Schema {
                        field: Some(name.clone()),
                        reason: format!("base file {} has no column {name:?}", self.key),
                    })?;
                    indices.push(index);
                }
                let mask = ProjectionMask::roots(metadata.parquet_schema(), indices);
                (mask, Some(names.clone()))
            }
        };
        let reader = StorageFileReader {
            storage: Arc::clone(&self.storage),
            key: self.key.clone(),
            metadata: Arc::clone(metadata.metadata()),
            whole: whole.clone(),
        };
        let key = self.key.clone();
        let stream = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata.clone())
            .with_projection(mask)
            .with_batch_size(options.batch_size.max(1))
            .build()
            .map_err(|e| parquet_error(&key, e))?;
        Ok(stream
            .map(move |batch| {
                let batch = batch.map_err(|e| parquet_error(&key, e))?;
                match &order {
                    None => Ok(batch),
                    Some(names) => reorder(&key, batch, names),
                }
            })
            .boxed())
    }
}

/// Puts the columns of a projected batch in the requested order (parquet yields file order).
fn reorder(key: &str, batch: RecordBatch, names: &[String]) -> Result<RecordBatch> {
    let schema = batch.schema();
    let mut indices = Vec::with_capacity(names.len());
    for name in names {
        let index = schema.index_of(name).map_err(|_| FormatError::Schema {
            field: Some(name.clone()),
            reason: format!("projected batch of {key} lacks column {name:?}"),
        })?;
        indices.push(index);
    }
    batch.project(&indices).map_err(|e| FormatError::Arrow {
        path: key.to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_coalesce_merges_ranges_closer_than_the_gap_in_any_order() {
        assert_eq!(
            coalesce(&[20..30, 0..10, 12..15, 100..120, 5..8], 2),
            vec![0..15, 20..30, 100..120]
        );
        assert_eq!(coalesce(&[0..10, 50..60], 40), vec![0..60]);
        assert_eq!(coalesce(&[0..10, 51..60], 40), vec![0..10, 51..60]);
        assert!(coalesce(&[], 1).is_empty());
    }

    #[test]
    fn test_check_base_file_format_parquet_ok() {
        assert!(check_base_file_format("p=1/f_0-1-2_20240101000000000.parquet").is_ok());
    }

    #[test]
    fn test_check_base_file_format_orc_hfile_unsupported_naming_path() {
        assert_eq!(
            check_base_file_format("a/x.lance").is_ok(),
            cfg!(feature = "lance")
        );
        for key in ["a/x.orc", "a/x.hfile", "a/x.txt", "a/noext"] {
            match check_base_file_format(key) {
                Err(FormatError::UnsupportedFormat { path, .. }) => assert_eq!(path, key),
                other => panic!("{key}: expected UnsupportedFormat, got {other:?}"),
            }
        }
    }
}
