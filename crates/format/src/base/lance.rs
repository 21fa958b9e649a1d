//! Lance base files (the `lance` feature): opening and decoding them with arbor-lance, and
//! encoding the batches a [`BaseFileStream`](super::BaseFileStream) buffered.

use std::collections::HashMap;
use std::sync::Arc;

use arbor_lance::{LanceError, LanceFileReader};
use arbor_storage::Storage;
use arrow_array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;

use crate::error::{FormatError, Result};

/// A [`LanceError`] of the file `key` as a [`FormatError`] (storage errors stay storage
/// errors).
pub(super) fn format_error(key: &str, err: LanceError) -> FormatError {
    match err {
        LanceError::Storage(e) => FormatError::Storage(e),
        LanceError::Schema {
            path,
            column,
            reason,
        } => FormatError::Schema {
            field: Some(column),
            reason: format!("base file {path}: {reason}"),
        },
        LanceError::Lance { path, reason } | LanceError::Bridge { path, reason } => {
            FormatError::Lance { path, reason }
        }
        other => FormatError::Lance {
            path: key.to_string(),
            reason: other.to_string(),
        },
    }
}

/// An opened Lance base file and its schema without the schema metadata (Hudi keeps a bloom
/// filter of hundreds of KiB there: it is read through `footer_value`, not carried by every
/// batch).
#[derive(Debug, Clone)]
pub(super) struct LanceBase {
    reader: Arc<LanceFileReader>,
    schema: SchemaRef,
}

impl LanceBase {
    pub(super) async fn open(storage: Arc<dyn Storage>, key: &str, size: u64) -> Result<Self> {
        let reader = LanceFileReader::open(storage, key, size)
            .await
            .map_err(|e| format_error(key, e))?;
        let schema = Arc::new(Schema::new(reader.schema().fields().clone()));
        Ok(LanceBase {
            reader: Arc::new(reader),
            schema,
        })
    }

    pub(super) fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub(super) fn num_rows(&self) -> u64 {
        self.reader.num_rows()
    }

    pub(super) fn metadata(&self) -> &HashMap<String, String> {
        self.reader.metadata()
    }

    pub(super) fn stream(
        &self,
        projection: Option<&[String]>,
        batch_size: usize,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let key = self.reader.key().to_string();
        let stream = self
            .reader
            .stream(projection, batch_size)
            .map_err(|e| format_error(&key, e))?;
        Ok(stream
            .map(move |b| b.map_err(|e| format_error(&key, e)))
            .boxed())
    }
}

/// The Lance bytes of `batches` (of `schema`, whose metadata becomes the file's).
pub(super) fn encode(key: &str, schema: &Schema, batches: &[RecordBatch]) -> Result<Bytes> {
    arbor_lance::encode_blocking(key, schema, batches).map_err(|e| format_error(key, e))
}
