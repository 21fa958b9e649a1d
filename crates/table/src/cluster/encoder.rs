//! A base file encoded on a blocking thread while the clustering gathers the next rows: the
//! rows go through a bounded channel (backpressure), the bytes come back when it is finished.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arbor_format::base::{BaseFileStream, EncodedBaseFile};
use arrow::array::{RecordBatch, StringArray};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::{Result, TableError};

/// Chunks waiting for the encoder.
const QUEUE: usize = 4;

/// Rows of one chunk: data columns, record keys, commit times, sequence numbers.
pub(crate) struct Chunk {
    pub(crate) data: RecordBatch,
    pub(crate) keys: StringArray,
    pub(crate) times: StringArray,
    pub(crate) seqnos: StringArray,
}

/// One file being encoded (see the module doc).
pub(crate) struct FileEncoder {
    tx: Option<mpsc::Sender<Chunk>>,
    done: JoinHandle<Result<(EncodedBaseFile, u64)>>,
    /// (rows encoded, bytes) as of the last chunk the encoder finished.
    progress: Arc<(AtomicU64, AtomicU64)>,
    rows: u64,
    key: String,
}

impl FileEncoder {
    /// Starts encoding into `stream` (the file at `key`).
    pub(crate) fn start(stream: BaseFileStream, key: &str) -> Self {
        let (tx, mut rx) = mpsc::channel::<Chunk>(QUEUE);
        let progress = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let seen = Arc::clone(&progress);
        let done = tokio::task::spawn_blocking(move || {
            let mut stream = stream;
            while let Some(c) = rx.blocking_recv() {
                stream.write_preserving(&c.data, &c.keys, &c.times, &c.seqnos)?;
                // Bytes first: a reader that sees the new row count sees at least these bytes.
                seen.1
                    .store(stream.size_estimate() as u64, Ordering::Release);
                seen.0.store(stream.rows(), Ordering::Release);
            }
            let estimate = stream.size_estimate() as u64;
            Ok((stream.finish()?, estimate))
        });
        FileEncoder {
            tx: Some(tx),
            done,
            progress,
            rows: 0,
            key: key.to_string(),
        }
    }

    /// Rows sent so far.
    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// The file's bytes per row as the encoder has measured them (`None` before it finished a
    /// chunk).
    pub(crate) fn bytes_per_row(&self) -> Option<u64> {
        let rows = self.progress.0.load(Ordering::Acquire);
        let bytes = self.progress.1.load(Ordering::Acquire);
        bytes.checked_div(rows).map(|b| b.max(1))
    }

    /// Queues a chunk (waits while the queue is full).
    pub(crate) async fn send(&mut self, chunk: Chunk) -> Result<()> {
        let n = chunk.data.num_rows() as u64;
        let sent = match &self.tx {
            Some(tx) => tx.send(chunk).await.is_ok(),
            None => false,
        };
        if !sent {
            // The encoder stopped: its own error says why.
            self.tx = None;
            return Err(match (&mut self.done).await {
                Ok(Err(e)) => e,
                Ok(Ok(_)) | Err(_) => self.stopped(),
            });
        }
        self.rows += n;
        Ok(())
    }

    /// Waits for the encoded file; with it the size the encoder estimated just before the
    /// footer was written (the ratio of the two corrects the estimates of the next file: an
    /// unfinished row group is estimated uncompressed).
    pub(crate) async fn finish(mut self) -> Result<(EncodedBaseFile, u64)> {
        self.tx = None;
        match (&mut self.done).await {
            Ok(r) => r,
            Err(_) => Err(self.stopped()),
        }
    }

    fn stopped(&self) -> TableError {
        TableError::Unsupported {
            reason: format!("clustering: the encoder of {} stopped", self.key),
        }
    }
}
