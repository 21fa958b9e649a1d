//! Running one clustering group: its planned slices are read in order, a few ahead on runtime
//! tasks (each merged as a reader merges it, without the two columns written anew), ordered by
//! the sort key through a sort that spills past its memory budget
//! ([`super::external_sort`]), and written as new file groups of the target size (each file
//! encoded on a thread of its own and stored on a task while the next one fills),
//! every record keeping its `_hoodie_commit_time` and `_hoodie_commit_seqno`
//! (`preserveHoodieMetadata`, as Java's clustering), so incremental reads are unchanged.

use std::sync::Arc;

use arbor_format::base::BaseFileWriter;
use arbor_format::meta;
use arbor_fsview::slice::join;
use arbor_fsview::{BaseFile, FileSlice, LogFile};
use arbor_storage::Storage;
use arbor_timeline::avro::{HoodieClusteringGroup, HoodieSliceInfo, HoodieWriteStat};
use arbor_timeline::InstantTime;
use arrow::array::{Array, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, SchemaRef};
use futures::{StreamExt, TryStreamExt};

use super::encoder::{Chunk, FileEncoder};
use super::external_sort::ExternalSort;
use super::options::ClusterOptions;
use super::sort_key::SortKeys;
use crate::error::{Result, TableError};
use crate::read::TableReader;

/// Slices read ahead of the sort (on runtime tasks, so decoding runs beside it).
const READ_AHEAD: usize = 8;

/// Sizes asked of storage at a time.
const HEADS: usize = 16;

/// Files finished and stored at a time while the next ones fill (fewer when a quarter of the
/// memory budget does not hold as many files of the target size; at least one).
const CLOSING: usize = 3;

/// Rows a new file takes before its bytes per row are known.
const FIRST_ROWS: usize = 1024;

/// What one group wrote.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupOutput {
    /// The partition of the group.
    pub(crate) partition: String,
    /// Write stats of the new files, in order.
    pub(crate) stats: Vec<HoodieWriteStat>,
    /// `(record key, new file id)` of every row written.
    pub(crate) keys: Vec<(String, String)>,
    /// Rows read (and written).
    pub(crate) rows: u64,
    /// Input bytes (base and log files).
    pub(crate) input_bytes: u64,
    /// Whether the sort spilled runs to temporary files.
    pub(crate) spilled_runs: usize,
}

/// The fixed inputs of running a plan's groups.
pub(crate) struct GroupRunner<'a> {
    pub(crate) storage: &'a Arc<dyn Storage>,
    /// The reader (shared with the tasks that read slices ahead).
    pub(crate) reader: &'a Arc<TableReader>,
    pub(crate) instant: &'a InstantTime,
    /// The Avro schema (meta and data fields) stored in the new files' footers.
    pub(crate) avro_schema: &'a str,
    pub(crate) options: &'a ClusterOptions,
    /// Whether the keys written are collected (for the record index).
    pub(crate) collect_keys: bool,
}

fn bad_plan(instant: &InstantTime, group: usize, reason: impl std::fmt::Display) -> TableError {
    TableError::Unsupported {
        reason: format!("clustering {instant}, group {group}: {reason}"),
    }
}

fn file_name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl GroupRunner<'_> {
    /// The file slices of group `index` of the plan, their files' sizes from storage.
    pub(crate) async fn slices_of(
        &self,
        index: usize,
        group: &HoodieClusteringGroup,
    ) -> Result<Vec<FileSlice>> {
        // Futures made first: a closure in the stream would keep the future from being `Send`.
        let sizes: Vec<_> = group
            .slices
            .iter()
            .flatten()
            .map(|info| self.slice_of(index, info))
            .collect();
        futures::stream::iter(sizes)
            .buffered(HEADS)
            .try_collect()
            .await
    }

    async fn slice_of(&self, index: usize, info: &HoodieSliceInfo) -> Result<FileSlice> {
        let partition = info.partition_path.clone().unwrap_or_default();
        let file_id = info
            .file_id
            .clone()
            .filter(|f| !f.is_empty())
            .ok_or_else(|| bad_plan(self.instant, index, "a slice has no file id"))?;
        let base = match info.data_file_path.as_deref().filter(|p| !p.is_empty()) {
            Some(p) => {
                let name = file_name_of(p);
                let size = self.storage.head(&join(&partition, name)).await?.size;
                Some(BaseFile::parse(name, size).map_err(TableError::from_fsview)?)
            }
            None => None,
        };
        let mut logs = Vec::new();
        for p in info.delta_file_paths.iter().flatten() {
            let name = file_name_of(p);
            let size = self.storage.head(&join(&partition, name)).await?.size;
            logs.push(LogFile::parse(name, size).map_err(TableError::from_fsview)?);
        }
        logs.sort();
        let base_instant = match (&base, logs.first()) {
            (Some(b), _) => b.instant_time.clone(),
            (None, Some(l)) => l.delta_commit_time.clone(),
            (None, None) => {
                return Err(bad_plan(
                    self.instant,
                    index,
                    format!("slice of file group {file_id} names no file"),
                ))
            }
        };
        let mut slice = FileSlice::new(&partition, &file_id, base_instant);
        slice.base_file = base;
        slice.log_files = logs;
        Ok(slice)
    }

    /// Runs group `index` over `slices` (all of one partition).
    pub(crate) async fn run(&self, index: usize, slices: &[FileSlice]) -> Result<GroupOutput> {
        let partition = slices
            .first()
            .map(|s| s.partition.clone())
            .unwrap_or_default();
        if let Some(other) = slices.iter().find(|s| s.partition != partition) {
            return Err(bad_plan(
                self.instant,
                index,
                format!(
                    "slices of partitions {partition:?} and {:?} in one group",
                    other.partition
                ),
            ));
        }
        // The file name and partition of a row are written anew: they are not carried through
        // the sort (two string columns fewer to gather).
        let read_schema = self.reader.schema().clone();
        let carried: Vec<usize> = read_schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| f.name() != meta::FILE_NAME && f.name() != meta::PARTITION_PATH)
            .map(|(i, _)| i)
            .collect();
        let schema = Arc::new(
            read_schema
                .project(&carried)
                .map_err(|e| bad_plan(self.instant, index, e))?,
        );
        let keys = SortKeys::new(&schema, &self.options.sort_by, self.options.layout)?;
        let mut out = OutputFiles::new(self, index, &partition);
        out.input_bytes = slices.iter().map(slice_bytes).sum();
        match self
            .sort_and_write(index, slices, schema, keys, &mut out)
            .await
        {
            Ok(rows_in) => {
                let output = out.finish().await?;
                if output.rows != rows_in {
                    return Err(bad_plan(
                        self.instant,
                        index,
                        format!("{rows_in} rows read but {} written", output.rows),
                    ));
                }
                Ok(output)
            }
            Err(e) => {
                out.abandon().await;
                Err(e)
            }
        }
    }

    /// Reads `slices`, sorts their rows and writes them to `out`; returns the rows read.
    async fn sort_and_write(
        &self,
        index: usize,
        slices: &[FileSlice],
        schema: SchemaRef,
        mut keys: Option<SortKeys>,
        out: &mut OutputFiles<'_>,
    ) -> Result<u64> {
        let mut rows_in = 0u64;
        let mut sort = ExternalSort::new(schema.clone(), self.options.memory_budget);
        // Batches held until the curve's boundaries are known (the first half budget of rows,
        // the size of a sorted run).
        let mut sample: Vec<RecordBatch> = Vec::new();
        let mut sample_bytes = 0usize;
        // Slices are read (and decoded) on runtime tasks, READ_AHEAD at a time, in order.
        let mut reads = futures::stream::iter(slices.iter().cloned())
            .map(|slice| {
                let reader = Arc::clone(self.reader);
                let work = schema.clone();
                tokio::spawn(async move { reader.read_slice_columns(&slice, &work).await })
            })
            .buffered(READ_AHEAD);
        let total_input: u64 = slices.iter().map(slice_bytes).sum();
        let mut read_input = 0u64;
        let mut sizes = slices.iter().map(slice_bytes);
        while let Some(joined) = reads.next().await {
            read_input += sizes.next().unwrap_or(0);
            sort.input_progress(read_input, total_input);
            let read =
                joined.map_err(|e| bad_plan(self.instant, index, format!("a read task: {e}")))?;
            let Some(batch) = read? else {
                continue;
            };
            if batch.schema().fields() != schema.fields() {
                return Err(bad_plan(
                    self.instant,
                    index,
                    "a slice was read with other columns than asked for",
                ));
            }
            rows_in += batch.num_rows() as u64;
            match keys.as_mut() {
                None => out.write(&batch).await?,
                Some(k) if k.needs_calibration() => {
                    sample_bytes += batch.get_array_memory_size();
                    sample.push(batch);
                    if sample_bytes >= self.options.memory_budget / 2 {
                        k.calibrate(&sample)?;
                        for b in sample.drain(..) {
                            let key = k.keys(&b)?;
                            sort.push(b, key)?;
                        }
                    }
                }
                Some(k) => {
                    let key = k.keys(&batch)?;
                    sort.push(batch, key)?;
                }
            }
        }
        if let Some(k) = keys.as_mut() {
            if k.needs_calibration() {
                k.calibrate(&sample)?;
            }
            for b in sample.drain(..) {
                let key = k.keys(&b)?;
                sort.push(b, key)?;
            }
            out.spilled_runs = sort.runs();
            let mut sorted = sort.finish()?;
            while let Some(b) = sorted.next_batch()? {
                out.write(&b).await?;
            }
        }
        Ok(rows_in)
    }
}

/// The files one group writes, closed at the target size.
struct OutputFiles<'a> {
    runner: &'a GroupRunner<'a>,
    group: usize,
    partition: String,
    open: Option<(String, String, FileEncoder)>,
    files: usize,
    stats: Vec<HoodieWriteStat>,
    keys: Vec<(String, String)>,
    rows: u64,
    input_bytes: u64,
    spilled_runs: usize,
    /// Bytes a finished file took per byte its encoder estimated (of the last file closed;
    /// 1 before any).
    size_ratio: f64,
    /// The file being finished and stored.
    /// Bytes per row of the last file stored: the estimate for a new file until its encoder
    /// has measured its own rows.
    last_per_row: Option<f64>,
    /// Files being finished and stored, oldest first (at most [`CLOSING`]).
    closing: std::collections::VecDeque<tokio::task::JoinHandle<Result<Closed>>>,
}

impl<'a> OutputFiles<'a> {
    fn new(runner: &'a GroupRunner<'a>, group: usize, partition: &str) -> Self {
        OutputFiles {
            runner,
            group,
            partition: partition.to_string(),
            open: None,
            files: 0,
            stats: Vec::new(),
            keys: Vec::new(),
            rows: 0,
            input_bytes: 0,
            spilled_runs: 0,
            size_ratio: 1.0,
            closing: std::collections::VecDeque::new(),
            last_per_row: None,
        }
    }

    fn err(&self, reason: impl std::fmt::Display) -> TableError {
        bad_plan(self.runner.instant, self.group, reason)
    }

    /// Writes merged rows (meta and data columns).
    async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.poll_closing().await?;
        let (instant, group) = (self.runner.instant, self.group);
        // Not a closure over `self`: the future must stay `Send` (the open file is not `Sync`).
        let strings = |name: &str| meta_strings(batch, name, instant, group);
        let record_keys = strings(meta::RECORD_KEY)?;
        if record_keys.null_count() > 0 {
            return Err(self.err(
                "a record has no _hoodie_record_key (tables without meta fields are not \
                 clustered by arbor)",
            ));
        }
        let times = strings(meta::COMMIT_TIME)?;
        let seqnos = strings(meta::COMMIT_SEQNO)?;
        let schema = batch.schema();
        let data_idx: Vec<usize> = schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| !meta::is_meta_column(f.name()))
            .map(|(i, _)| i)
            .collect();
        let data = batch
            .project(&data_idx)
            .map_err(|e| self.err(format!("data columns: {e}")))?;
        let n = data.num_rows();
        let target = self.runner.options.target_file_size;
        let mut offset = 0;
        while offset < n {
            if self.open.is_none() {
                let sample = data.slice(offset, (n - offset).min(FIRST_ROWS));
                self.open_file(data.schema(), &sample)?;
            }
            let Some((file_id, _, encoder)) = self.open.as_mut() else {
                return Err(self.err("no open file"));
            };
            // Rows that fit the file: its first rows give its bytes per row, corrected by what
            // the last file's estimate turned out to be.
            let sent = encoder.rows();
            let per_row = encoder
                .bytes_per_row()
                .map(|p| (p as f64 * self.size_ratio).max(1.0))
                .or(self.last_per_row);
            let take = match per_row {
                None => (n - offset).min(FIRST_ROWS),
                Some(per_row) => {
                    let room = (target as f64 - per_row * sent as f64).max(0.0) / per_row;
                    // Saturating float-to-int conversion, then at least one row.
                    (room as usize).clamp(1, n - offset)
                }
            };
            let keys = record_keys.slice(offset, take);
            if self.runner.collect_keys {
                let id = file_id.clone();
                self.keys
                    .extend(keys.iter().flatten().map(|k| (k.to_string(), id.clone())));
            }
            encoder
                .send(Chunk {
                    data: data.slice(offset, take),
                    keys,
                    times: times.slice(offset, take),
                    seqnos: seqnos.slice(offset, take),
                })
                .await?;
            let full = encoder
                .bytes_per_row()
                .map(|p| (p as f64 * self.size_ratio).max(1.0))
                .or(self.last_per_row)
                .is_some_and(|p| p * encoder.rows() as f64 >= target as f64);
            offset += take;
            self.rows += take as u64;
            if full {
                self.close().await?;
            }
        }
        Ok(())
    }

    fn open_file(&mut self, data_schema: SchemaRef, sample: &RecordBatch) -> Result<()> {
        let file_id = format!("{}-0", uuid::Uuid::new_v4());
        let instant = self.runner.instant;
        let extension =
            crate::write::base_format::of_table(self.runner.reader.config())?.extension();
        let name = format!(
            "{file_id}_{}-{}-0_{instant}.{extension}",
            self.group, self.files
        );
        let key = join(&self.partition, &name);
        let writer = BaseFileWriter::new(
            instant.as_str(),
            name.clone(),
            self.partition.as_str(),
            self.runner.avro_schema,
        )
        .preserve_commit_metadata_per_batch();
        let stream = writer.open_stream(&key, data_schema, std::slice::from_ref(sample))?;
        self.files += 1;
        let encoder = FileEncoder::start(stream, &key);
        self.open = Some((file_id, key, encoder));
        Ok(())
    }

    /// Closes the open file: its last rows are encoded and it is stored on a task of its own
    /// while the next file fills (up to [`CLOSING`] files close at a time).
    async fn close(&mut self) -> Result<()> {
        // Encoded files wait in memory to be stored: fewer of them when they are large.
        let target = self.runner.options.target_file_size.max(1);
        let budget = self.runner.options.memory_budget as u64;
        let closing = usize::try_from(budget / 4 / target)
            .unwrap_or(usize::MAX)
            .clamp(1, CLOSING);
        while self.closing.len() >= closing {
            self.join_closing().await?;
        }
        let Some((file_id, key, encoder)) = self.open.take() else {
            return Ok(());
        };
        let storage = Arc::clone(self.runner.storage);
        self.closing.push_back(tokio::spawn(async move {
            let (encoded, estimate) = encoder.finish().await?;
            let ratio = (estimate > 0 && !encoded.bytes.is_empty())
                .then(|| (encoded.bytes.len() as f64 / estimate as f64).clamp(0.01, 100.0));
            let written = encoded.store(storage.as_ref(), &key).await?;
            Ok(Closed {
                file_id,
                key,
                size: written.size,
                rows: written.num_rows,
                ratio,
            })
        }));
        Ok(())
    }

    /// Waits for the oldest file closing to be stored and records it.
    async fn join_closing(&mut self) -> Result<()> {
        let Some(handle) = self.closing.pop_front() else {
            return Ok(());
        };
        let closed = handle
            .await
            .map_err(|e| self.err(format!("storing a new file: {e}")))??;
        if let Some(ratio) = closed.ratio {
            self.size_ratio = ratio;
        }
        if closed.rows > 0 {
            self.last_per_row = Some((closed.size as f64 / closed.rows as f64).max(1.0));
        }
        let size = i64::try_from(closed.size).unwrap_or(i64::MAX);
        let rows = i64::try_from(closed.rows).unwrap_or(i64::MAX);
        self.stats.push(HoodieWriteStat {
            file_id: Some(closed.file_id),
            path: Some(closed.key),
            prev_commit: Some("null".to_string()),
            num_writes: Some(rows),
            num_inserts: Some(rows),
            num_deletes: Some(0),
            num_update_writes: Some(0),
            total_write_bytes: Some(size),
            total_write_errors: Some(0),
            partition_path: Some(self.partition.clone()),
            file_size_in_bytes: Some(size),
            ..HoodieWriteStat::default()
        });
        Ok(())
    }

    /// Records the files closing that are already stored, oldest first (their sizes correct
    /// the estimates of the open file early).
    async fn poll_closing(&mut self) -> Result<()> {
        while self.closing.front().is_some_and(|h| h.is_finished()) {
            self.join_closing().await?;
        }
        Ok(())
    }

    async fn finish(mut self) -> Result<GroupOutput> {
        self.close().await?;
        while !self.closing.is_empty() {
            self.join_closing().await?;
        }
        Ok(GroupOutput {
            partition: self.partition,
            stats: self.stats,
            keys: self.keys,
            rows: self.rows,
            input_bytes: self.input_bytes,
            spilled_runs: self.spilled_runs,
        })
    }

    /// After a failure: waits for a file being stored, so that nothing of this group is
    /// written after the error is returned (the caller deletes what was).
    async fn abandon(mut self) {
        self.open = None;
        for handle in self.closing.drain(..) {
            let _ = handle.await;
        }
    }
}

/// A file stored by [`OutputFiles::close`].
struct Closed {
    file_id: String,
    key: String,
    size: u64,
    rows: u64,
    ratio: Option<f64>,
}

/// Bytes of a slice's files on storage.
fn slice_bytes(slice: &FileSlice) -> u64 {
    slice.base_file.as_ref().map_or(0, |b| b.size)
        + slice.log_files.iter().map(|l| l.size).sum::<u64>()
}

/// Column `name` of `batch` as strings.
fn meta_strings(
    batch: &RecordBatch,
    name: &str,
    instant: &InstantTime,
    group: usize,
) -> Result<StringArray> {
    let col = batch
        .column_by_name(name)
        .ok_or_else(|| bad_plan(instant, group, format!("rows without a {name} column")))?;
    let col = arrow::compute::cast(col, &DataType::Utf8)
        .map_err(|e| bad_plan(instant, group, format!("column {name}: {e}")))?;
    Ok(col.as_string::<i32>().clone())
}
