//! Reading several file slices of one plan at once: each slice runs as its own task on the
//! async runtime (so merges and decoding use every core), feeding a small bounded channel;
//! the output stream drains the slices in plan order, so the batches are exactly those of a
//! sequential read, in the same order.
//!
//! Memory is bounded by the slices in flight: at most `parallelism` slices are started ahead
//! of the one being drained, and each holds at most [`CHANNEL_BATCHES`] finished batches (a
//! slice with log files also holds its merged rows while it is cut into batches).

use futures::stream::{self, BoxStream};
use futures::StreamExt;
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use arrow::record_batch::RecordBatch;

use crate::error::{Result, TableError};

/// Finished batches a slice task may hold before the reader takes them.
pub(crate) const CHANNEL_BATCHES: usize = 2;

/// The default degree of parallelism of a read: the machine's available parallelism (1 when
/// unknown).
pub(crate) fn default_parallelism() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// Aborts the task when the stream draining it is dropped (a reader that stops early).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Concatenates `slices` (each a lazy per-slice stream) in order, running up to
/// `parallelism` of them ahead on the current tokio runtime. Without a runtime, or with
/// `parallelism <= 1`, the slices are read one after the other in the polling task.
pub(crate) fn concat_slices(
    slices: Vec<BoxStream<'static, Result<RecordBatch>>>,
    parallelism: usize,
) -> BoxStream<'static, Result<RecordBatch>> {
    let handle = match Handle::try_current() {
        Ok(h) if parallelism > 1 && slices.len() > 1 => h,
        _ => return stream::iter(slices).flatten().boxed(),
    };
    stream::iter(slices)
        .map(move |s| {
            let spawned = spawn_slice(&handle, s);
            async move { spawned }
        })
        .buffered(parallelism)
        .flatten()
        .boxed()
}

/// Starts reading one slice now; its batches come out of the returned stream. A task that
/// panics or is cancelled ends the stream with an error (never with missing rows).
fn spawn_slice(
    handle: &Handle,
    mut slice: BoxStream<'static, Result<RecordBatch>>,
) -> BoxStream<'static, Result<RecordBatch>> {
    let (tx, rx) = mpsc::channel::<Result<RecordBatch>>(CHANNEL_BATCHES);
    let task = handle.spawn(async move {
        while let Some(item) = slice.next().await {
            let failed = item.is_err();
            if tx.send(item).await.is_err() || failed {
                break;
            }
        }
    });
    stream::unfold(Some((rx, AbortOnDrop(task))), |state| async move {
        let (mut rx, mut task) = state?;
        match rx.recv().await {
            Some(item) => Some((item, Some((rx, task)))),
            None => match (&mut task.0).await {
                Ok(()) => None,
                Err(e) => Some((
                    Err(TableError::Unsupported {
                        reason: format!("reading a file slice failed: {e}"),
                    }),
                    None,
                )),
            },
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use std::sync::Arc;

    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use futures::TryStreamExt;

    use super::*;

    fn batch(v: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![v]))]).unwrap()
    }

    /// Slice `i` yields `i * 10 + j` for `j < 3`, the early ones slowest.
    fn slices(n: i64) -> Vec<BoxStream<'static, Result<RecordBatch>>> {
        (0..n)
            .map(|i| {
                stream::iter(0..3)
                    .then(move |j| async move {
                        for _ in 0..(n - i) {
                            tokio::task::yield_now().await;
                        }
                        Ok(batch(i * 10 + j))
                    })
                    .boxed()
            })
            .collect()
    }

    fn values(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn test_concat_slices_parallel_keeps_plan_order() {
        let sequential: Vec<RecordBatch> = concat_slices(slices(8), 1).try_collect().await.unwrap();
        let parallel: Vec<RecordBatch> = concat_slices(slices(8), 4).try_collect().await.unwrap();
        let expected: Vec<i64> = (0..8)
            .flat_map(|i| (0..3).map(move |j| i * 10 + j))
            .collect();
        assert_eq!(values(&sequential), expected);
        assert_eq!(values(&parallel), expected);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn test_concat_slices_error_ends_the_stream() {
        let mut s = slices(3);
        s[1] = stream::iter(vec![
            Ok(batch(10)),
            Err(TableError::Unsupported {
                reason: "broken".into(),
            }),
        ])
        .boxed();
        let got: Vec<Result<RecordBatch>> = concat_slices(s, 4).collect().await;
        let oks: Vec<i64> = got
            .iter()
            .take_while(|r| r.is_ok())
            .flat_map(|r| values(std::slice::from_ref(r.as_ref().unwrap())))
            .collect();
        assert_eq!(oks, vec![0, 1, 2, 10]);
        assert!(got[4].is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn test_concat_slices_panicking_slice_is_an_error_not_missing_rows() {
        let mut s = slices(2);
        s[0] = stream::once(async {
            let v: Vec<i64> = Vec::new();
            // Out of bounds: the task panics.
            Ok(batch(v[std::hint::black_box(0)]))
        })
        .boxed();
        let got: Vec<Result<RecordBatch>> = concat_slices(s, 2).collect().await;
        assert!(got[0].is_err(), "{got:?}");
    }
}
