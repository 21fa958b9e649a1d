//! The encoders of a streamed bulk insert ([`super::write_stream`]): a fixed pool of
//! `WriteOptions::parallelism` threads, each owning the *lanes* assigned to it (a lane is one
//! partition's sequence of new base files), so the files of many partitions are encoded on
//! every core whatever their number.
//!
//! The writer sends a lane the rows of an input batch that belong to it (the batch is shared;
//! the rows are gathered, keyed and encoded on the worker). After each chunk the worker closes
//! the lane's file once it reaches the maximum file size (the next chunk opens a new one, its
//! rows deciding the columns written without a dictionary), exactly where a file written
//! inline would close; the writer may also ask a lane to close its file early. Every closed
//! file comes back as a [`Closed`]. Queues are bounded, so a writer that runs ahead waits
//! (backpressure). Every lane publishes the memory its open file holds after each chunk.
//!
//! A chunk that fails (a gather or an encoding error, or a panic) drops the lane's file and is
//! reported as a [`Closed`] error; later chunks of that lane are ignored. Dropping the pool
//! closes the queues: the workers drop their unfinished files and end.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arbor_format::base::{BaseFileStream, BaseFileWriter, EncodedBaseFile};
use arrow::datatypes::SchemaRef;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::{Result, TableError};
use crate::write::cow::{input_rows, rows_record_keys, write_token};
use crate::write::planner::{new_file_id, Input};

/// Jobs waiting for one worker.
const QUEUE: usize = 8;

/// The data page size of a streamed write's files: a page is buffered unencoded until it is
/// cut, so with parquet's 1 MiB pages every open file would hold up to a MiB per column
/// whatever its size; at 64 KiB an open file's memory follows its encoded bytes.
const PAGE_BYTES: usize = 64 * 1024;

/// What every file of the write is made with.
pub(crate) struct FileSpec {
    /// The instant the files belong to.
    pub(crate) instant: String,
    /// The Avro schema with meta fields (the footer's).
    pub(crate) avro_with_meta: String,
    /// Whether meta values are written.
    pub(crate) meta_values: bool,
    /// The data schema of the rows.
    pub(crate) schema: SchemaRef,
    /// The data column holding the record keys, when one does.
    pub(crate) record_key_column: Option<usize>,
    /// The format of the files (the table's).
    pub(crate) base_format: arbor_format::base::BaseFormat,
    /// A file closes once its estimated size reaches this.
    pub(crate) max_file_size: u64,
    /// A file's row group is cut once the memory it holds reaches this (the writer lowers it
    /// as lanes open, [`FileSpec::set_row_group_memory`]).
    pub(crate) row_group_memory: AtomicU64,
}

impl FileSpec {
    /// Sets the memory at which an open file's row group is cut.
    pub(crate) fn set_row_group_memory(&self, bytes: u64) {
        self.row_group_memory.store(bytes, Ordering::Relaxed);
    }
}

enum Job {
    /// Rows `rows` of `input` go into lane `lane` of partition `partition`.
    Write {
        lane: u64,
        partition: Arc<str>,
        meter: Arc<Meter>,
        input: Arc<Input>,
        rows: Vec<usize>,
    },
    /// Close lane `lane`'s open file now (answered even when it has none).
    Close { lane: u64, meter: Arc<Meter> },
}

/// A file the pool finished.
pub(crate) struct FinishedFile {
    /// Its storage key.
    pub(crate) key: String,
    /// Its file group.
    pub(crate) file_id: String,
    /// Its partition path.
    pub(crate) partition: String,
    /// Its bytes.
    pub(crate) encoded: EncodedBaseFile,
}

/// A lane's file closed (or a lane's failure).
pub(crate) struct Closed {
    /// The lane.
    pub(crate) lane: u64,
    /// Whether this answers [`EncoderPool::close`] (else the file reached the maximum size).
    pub(crate) asked: bool,
    /// The file (`None` when asked to close a lane with no open file), or why the lane
    /// failed.
    pub(crate) result: Result<Option<FinishedFile>>,
}

/// What a worker publishes of a lane after each chunk.
#[derive(Default)]
pub(crate) struct Meter {
    memory: AtomicU64,
}

/// One lane as the writer sees it.
pub(crate) struct Lane {
    id: u64,
    worker: usize,
    partition: Arc<str>,
    meter: Arc<Meter>,
}

impl Lane {
    /// Bytes of memory the lane's open file held after its last encoded chunk (0 once it
    /// closed).
    pub(crate) fn memory(&self) -> u64 {
        self.meter.memory.load(Ordering::Acquire)
    }

    /// The lane's number.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

/// The pool (see the module doc).
pub(crate) struct EncoderPool {
    spec: Arc<FileSpec>,
    queues: Vec<mpsc::Sender<Job>>,
    workers: Vec<JoinHandle<()>>,
    closed: mpsc::UnboundedReceiver<Closed>,
    next_lane: u64,
}

impl EncoderPool {
    /// Starts `threads` workers (at least one) making files as `spec` says.
    pub(crate) fn start(threads: usize, spec: FileSpec) -> Self {
        let (done_tx, closed) = mpsc::unbounded_channel();
        let spec = Arc::new(spec);
        let files = Arc::new(AtomicU64::new(0));
        let mut queues = Vec::new();
        let mut workers = Vec::new();
        for _ in 0..threads.max(1) {
            let (tx, rx) = mpsc::channel(QUEUE);
            let done = done_tx.clone();
            let spec_of_worker = Arc::clone(&spec);
            let files = Arc::clone(&files);
            workers.push(tokio::task::spawn_blocking(move || {
                work(rx, &done, &spec_of_worker, &files)
            }));
            queues.push(tx);
        }
        EncoderPool {
            spec,
            queues,
            workers,
            closed,
            next_lane: 0,
        }
    }

    /// What the files are made with.
    pub(crate) fn spec(&self) -> &FileSpec {
        &self.spec
    }

    /// A new lane for `partition` (lanes are spread over the workers in turn).
    pub(crate) fn lane(&mut self, partition: &str) -> Lane {
        let id = self.next_lane;
        self.next_lane += 1;
        Lane {
            id,
            worker: usize::try_from(id).unwrap_or(0) % self.queues.len().max(1),
            partition: Arc::from(partition),
            meter: Arc::new(Meter::default()),
        }
    }

    /// Appends rows `rows` of `input` to `lane`.
    pub(crate) async fn append(
        &mut self,
        lane: &Lane,
        input: &Arc<Input>,
        rows: Vec<usize>,
    ) -> Result<()> {
        let job = Job::Write {
            lane: lane.id,
            partition: Arc::clone(&lane.partition),
            meter: Arc::clone(&lane.meter),
            input: Arc::clone(input),
            rows,
        };
        self.send(lane.worker, job).await
    }

    /// Asks `lane` to close its open file; the answer arrives as a [`Closed`] with `asked`.
    pub(crate) async fn close(&mut self, lane: &Lane) -> Result<()> {
        let job = Job::Close {
            lane: lane.id,
            meter: Arc::clone(&lane.meter),
        };
        self.send(lane.worker, job).await
    }

    /// A closed file, when one is ready, without waiting.
    pub(crate) fn try_closed(&mut self) -> Option<Closed> {
        self.closed.try_recv().ok()
    }

    /// Waits for the next closed file (`None` when every worker has ended).
    pub(crate) async fn next_closed(&mut self) -> Option<Closed> {
        self.closed.recv().await
    }

    async fn send(&mut self, worker: usize, job: Job) -> Result<()> {
        let queue = self.queues.get(worker).ok_or_else(stopped)?;
        queue.send(job).await.map_err(|_| stopped())
    }

    /// Closes the queues and waits for the workers to end (unfinished files are dropped);
    /// the pool takes no more jobs after it.
    pub(crate) async fn shut_down(&mut self) {
        self.queues.clear();
        for w in std::mem::take(&mut self.workers) {
            let _ = w.await;
        }
    }
}

/// A lane's open file on its worker.
struct OpenFile {
    stream: BaseFileStream,
    key: String,
    file_id: String,
    partition: String,
}

/// One worker: runs jobs until its queue closes.
fn work(
    mut jobs: mpsc::Receiver<Job>,
    done: &mpsc::UnboundedSender<Closed>,
    spec: &FileSpec,
    files: &AtomicU64,
) {
    let mut open: HashMap<u64, OpenFile> = HashMap::new();
    let mut failed: HashSet<u64> = HashSet::new();
    while let Some(job) = jobs.blocking_recv() {
        match job {
            Job::Write {
                lane,
                partition,
                meter,
                input,
                rows,
            } => {
                if failed.contains(&lane) {
                    continue;
                }
                let chunk = Chunk {
                    spec,
                    files,
                    partition: &partition,
                    input: &input,
                    rows: &rows,
                };
                let written = catch_unwind(AssertUnwindSafe(|| chunk.write(&mut open, lane)))
                    .unwrap_or_else(|_| Err(panicked(&partition)));
                drop(input);
                match written {
                    Ok(Some(file)) => {
                        meter.memory.store(0, Ordering::Release);
                        let _ = done.send(Closed {
                            lane,
                            asked: false,
                            result: Ok(Some(file)),
                        });
                    }
                    Ok(None) => {
                        let memory = open.get(&lane).map_or(0, |f| f.stream.memory_size());
                        meter.memory.store(memory as u64, Ordering::Release);
                    }
                    Err(e) => {
                        open.remove(&lane);
                        failed.insert(lane);
                        meter.memory.store(0, Ordering::Release);
                        let _ = done.send(Closed {
                            lane,
                            asked: false,
                            result: Err(e),
                        });
                    }
                }
            }
            Job::Close { lane, meter } => {
                meter.memory.store(0, Ordering::Release);
                let result = match open.remove(&lane) {
                    Some(file) => catch_unwind(AssertUnwindSafe(|| finish(file)))
                        .unwrap_or_else(|_| Err(panicked("a closing file")))
                        .map(Some),
                    None => Ok(None),
                };
                let _ = done.send(Closed {
                    lane,
                    asked: true,
                    result,
                });
            }
        }
    }
}

/// One chunk of rows for a lane.
struct Chunk<'a> {
    spec: &'a FileSpec,
    files: &'a AtomicU64,
    partition: &'a str,
    input: &'a Input,
    rows: &'a [usize],
}

impl Chunk<'_> {
    /// Gathers the rows and appends them to the lane's open file (opening one first); returns
    /// the file when it reached the maximum size and was finished.
    fn write(&self, open: &mut HashMap<u64, OpenFile>, lane: u64) -> Result<Option<FinishedFile>> {
        let hint = open
            .get(&lane)
            .map_or_else(|| self.partition.to_string(), |f| f.key.clone());
        let data = input_rows(self.input, self.rows, &hint)?;
        let keys = rows_record_keys(
            self.spec.record_key_column,
            &data,
            self.input,
            self.rows,
            &hint,
        )?;
        let file = match open.entry(lane) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(self.open_file(&data)?),
        };
        file.stream.write(&data, &keys)?;
        let cap = self.spec.row_group_memory.load(Ordering::Relaxed);
        if file.stream.row_group_memory() as u64 >= cap {
            file.stream.flush_row_group()?;
        }
        if (file.stream.size_estimate() as u64) < self.spec.max_file_size {
            return Ok(None);
        }
        match open.remove(&lane) {
            Some(file) => finish(file).map(Some),
            None => Ok(None),
        }
    }

    /// A new file group of the lane's partition; `sample` (its first rows) decides the
    /// columns written without a dictionary.
    fn open_file(&self, sample: &arrow::record_batch::RecordBatch) -> Result<OpenFile> {
        let spec = self.spec;
        let task = self.files.fetch_add(1, Ordering::Relaxed);
        let file_id = new_file_id();
        let name = format!(
            "{file_id}_{}_{}.{}",
            write_token((0, 0), task),
            spec.instant,
            spec.base_format.extension()
        );
        let key = arbor_fsview::slice::join(self.partition, &name);
        let writer = BaseFileWriter::new(
            spec.instant.clone(),
            name,
            self.partition.to_string(),
            spec.avro_with_meta.clone(),
        )
        .task_partition_id(task)
        .populate_meta_fields(spec.meta_values)
        .data_page_bytes(PAGE_BYTES);
        let stream = writer.open_stream(&key, spec.schema.clone(), std::slice::from_ref(sample))?;
        Ok(OpenFile {
            stream,
            key,
            file_id,
            partition: self.partition.to_string(),
        })
    }
}

/// Writes a file's footer.
fn finish(file: OpenFile) -> Result<FinishedFile> {
    Ok(FinishedFile {
        encoded: file.stream.finish()?,
        key: file.key,
        file_id: file.file_id,
        partition: file.partition,
    })
}

/// A chunk whose encoding panicked (a defect in an encoder): reported as the lane's error, so
/// the writer never waits for a file that will not come.
fn panicked(what: &str) -> TableError {
    TableError::Unsupported {
        reason: format!("encoding the streamed write's file of {what} panicked"),
    }
}

fn stopped() -> TableError {
    TableError::Unsupported {
        reason: "a streamed write's encoder thread stopped".into(),
    }
}
