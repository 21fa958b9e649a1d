//! Writing a Lance base file in memory (the caller stores the bytes).

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use arrow_array::Array;
use arrow_array::RecordBatch;
use arrow_schema::DataType;
use arrow_schema::Schema;
use async_trait::async_trait;
use bytes::Bytes;
use lance_file::versions::{v2_0, v2_1};
use lance_file::writer::{FileWriter, FileWriterOptions};
use lance_io::object_writer::WriteResult;
use tokio::io::AsyncWrite;

use crate::bridge;
use crate::error::{lance_error, LanceError, Result};

/// Bytes the writer appends to, shared with the caller who takes them after `finish`.
#[derive(Clone, Default)]
struct MemoryFile(Arc<Mutex<Vec<u8>>>);

impl MemoryFile {
    fn len(&self) -> usize {
        self.0.lock().map(|v| v.len()).unwrap_or(0)
    }

    fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

impl AsyncWrite for MemoryFile {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.0.lock() {
            Ok(mut v) => {
                v.extend_from_slice(buf);
                Poll::Ready(Ok(buf.len()))
            }
            Err(_) => Poll::Ready(Err(io::Error::other("lance output buffer poisoned"))),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[async_trait]
impl lance_io::traits::Writer for MemoryFile {
    async fn tell(&mut self) -> lance_core::Result<usize> {
        Ok(self.len())
    }

    async fn shutdown(&mut self) -> lance_core::Result<WriteResult> {
        Ok(WriteResult {
            size: self.len(),
            e_tag: None,
        })
    }
}

/// Whether `data_type` is or holds a map.
fn holds_map(data_type: &DataType) -> bool {
    match data_type {
        DataType::Map(_, _) => true,
        DataType::Struct(fields) => fields.iter().any(|f| holds_map(f.data_type())),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::ListView(f)
        | DataType::LargeListView(f) => holds_map(f.data_type()),
        _ => false,
    }
}

/// Whether `array` holds a null struct value at any depth (Lance format 2.0 cannot store one).
fn has_null_struct(array: &dyn Array) -> bool {
    match array.data_type() {
        DataType::Struct(_) => {
            array.null_count() > 0
                || array
                    .to_data()
                    .child_data()
                    .iter()
                    .any(|c| has_null_struct(&arrow_array::make_array(c.clone())))
        }
        DataType::List(_)
        | DataType::LargeList(_)
        | DataType::FixedSizeList(_, _)
        | DataType::ListView(_)
        | DataType::LargeListView(_)
        | DataType::Map(_, _) => array
            .to_data()
            .child_data()
            .iter()
            .any(|c| has_null_struct(&arrow_array::make_array(c.clone()))),
        _ => false,
    }
}

/// Encodes `batches` (each of `schema`'s fields, in order) as a Lance file of format 2.0 (what
/// Hudi 1.2's Java writer produces), with `schema`'s metadata as the file's schema metadata.
/// Format 2.0 cannot store a null struct value: a file holding one is written in format 2.1
/// (which every reader of Lance 2.x files reads) rather than losing the nulls.
/// `key` only names the file in errors. Lance encodes on tokio tasks: call it from within a
/// tokio runtime (or use [`encode_blocking`]).
pub async fn encode(key: &str, schema: &Schema, batches: &[RecordBatch]) -> Result<Bytes> {
    let bridge_error = |reason: String| LanceError::Bridge {
        path: key.to_string(),
        reason,
    };
    for (i, batch) in batches.iter().enumerate() {
        if batch.schema().fields() != schema.fields() {
            return Err(LanceError::Lance {
                path: key.to_string(),
                reason: format!("batch {i} has another schema than the file's"),
            });
        }
    }
    if let Some(field) = schema.fields().iter().find(|f| holds_map(f.data_type())) {
        return Err(LanceError::Schema {
            path: key.to_string(),
            column: field.name().clone(),
            reason: "a map cannot be stored in Lance formats 2.0 and 2.1 (those Hudi 1.2 \
                     writes and reads)"
                .to_string(),
        });
    }
    let schema58 = bridge::schema_to_58(schema).map_err(bridge_error)?;
    let lance_schema =
        lance_core::datatypes::Schema::try_from(&schema58).map_err(|e| lance_error(key, e))?;
    let out = MemoryFile::default();
    let null_structs = batches
        .iter()
        .any(|b| b.columns().iter().any(|c| has_null_struct(c.as_ref())));
    let mut writer: FileWriter = if null_structs {
        v2_1::Writer::try_new(
            Box::new(out.clone()),
            lance_schema,
            FileWriterOptions::default(),
        )
        .map_err(|e| lance_error(key, e))?
        .into()
    } else {
        v2_0::Writer::try_new(
            Box::new(out.clone()),
            lance_schema,
            FileWriterOptions::default(),
        )
        .map_err(|e| lance_error(key, e))?
        .into()
    };
    for (k, v) in schema.metadata() {
        writer.add_schema_metadata(k.clone(), v.clone());
    }
    for batch in batches {
        if batch.num_rows() == 0 {
            continue;
        }
        let batch58 = bridge::batch_to_58(batch).map_err(bridge_error)?;
        writer
            .write_batch(&batch58)
            .await
            .map_err(|e| lance_error(key, e))?;
    }
    writer.finish().await.map_err(|e| lance_error(key, e))?;
    Ok(Bytes::from(out.take()))
}

/// The runtime [`encode_blocking`] encodes on (Lance spawns tokio tasks; a caller without a
/// runtime, or on a runtime it must not block, uses this one).
fn runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("arbor-lance")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// [`encode`] from synchronous code (inside a runtime or not): the work runs on a runtime of
/// this crate's own while the calling thread waits.
pub fn encode_blocking(key: &str, schema: &Schema, batches: &[RecordBatch]) -> Result<Bytes> {
    let rt = runtime().map_err(|e| lance_error(key, format!("starting the lance runtime: {e}")))?;
    let (key_owned, schema, batches) = (key.to_string(), schema.clone(), batches.to_vec());
    let handle = rt.spawn(async move { encode(&key_owned, &schema, &batches).await });
    futures::executor::block_on(handle)
        .map_err(|e| lance_error(key, format!("lance writer failed: {e}")))?
}
