//! Writing the data files of one write ([`write_files`]): log files and base files encoded on
//! `WriteOptions::parallelism` threads, wave after wave, and stored while the next wave
//! encodes.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_format::base::BaseFileWriter;
use arbor_storage::Storage;
use futures::{StreamExt, TryStreamExt};

use super::context::Table;
use crate::error::{Result, TableError};
use crate::keygen::KeyGenerator;
use crate::read::{MergeMode, TableReader};
use crate::write::commit;
use crate::write::cow::{
    encode_base_file, load_current, store_base_file, CurrentRows, EncodedGroup, FileWriteContext,
    WrittenGroup,
};
use crate::write::markers::{create_marker, MarkerType};
use crate::write::mor::{encode_log_file, store_log_file, EncodedLog};
use crate::write::planner::{GroupPlan, Input, WritePlan};
use crate::write::schema::DataSchema;
use crate::write::stored_keys::StoredKeys;

/// The files one write produces: its plan, the merge-on-read groups written as a new base
/// file rather than a log file ([`crate::write::repeated_keys`]), and the reader their
/// current slices are merged with.
#[derive(Clone, Copy)]
pub(super) struct FileSet<'a> {
    /// The plan.
    pub plan: &'a WritePlan,
    /// Indexes (in the plan) of merge-on-read groups rewritten as a base file.
    pub rewrite: &'a BTreeSet<usize>,
    /// The reader merging current slices.
    pub reader: &'a Arc<TableReader>,
    /// Whether the table is merge-on-read.
    pub mor: bool,
    /// The task number of a fragment of a distributed write (the write-token stage; every
    /// file is marked before it is stored), `None` in one process.
    pub fragment: Option<u64>,
}

impl FileSet<'_> {
    /// Whether group `index` receives a log file (merge-on-read, existing group, not
    /// rewritten) rather than a base file.
    fn appends_log(&self, index: usize, group: &GroupPlan) -> bool {
        self.mor && group.existing.is_some() && !self.rewrite.contains(&index)
    }
}

/// Writes the data files of `files` for `instant`; returns one result per group, in plan
/// order. Waves of `width` groups: base files' current rows are loaded in turn, then every
/// file of the wave (log or base) is encoded at once on `width` threads and stored while the
/// next wave encodes (at most two waves of encoded files are held). Results and the commit
/// metadata stay in plan order, never dependent on thread timing; every store has finished
/// when this returns, with or without an error.
pub(super) async fn write_files(
    table: &Table,
    instant: &str,
    input: &Input,
    schema: &DataSchema,
    files: FileSet<'_>,
    (mode, ordering_field): (MergeMode, Option<String>),
) -> Result<Vec<WrittenGroup>> {
    let ctx = &table.ctx;
    let file_ctx = FileWriteContext {
        storage: ctx.storage.clone(),
        instant: instant.to_string(),
        schema: schema.clone(),
        avro_with_meta: BaseFileWriter::avro_schema_with_meta_fields(&schema.avro_json)?,
        mode,
        ordering_field,
        stored_keys: StoredKeys::for_table(&ctx.config)?,
        slice_reader: Some(files.reader.clone()),
        record_key_column: KeyGenerator::from_table_config(&ctx.config)?
            .record_key_column(&schema.arrow)
            .and_then(|name| schema.arrow.index_of(name).ok()),
        stage: files.fragment.map_or((0, 0), |f| (f, fragment_attempt())),
        base_format: crate::write::base_format::of_table(&ctx.config)?,
    };
    let plan = files.plan;
    // A partition with a current file slice has its marker (every writer creates it before
    // the partition's first file); the others are checked, a few at a time.
    let existing: BTreeSet<&str> = plan
        .groups
        .iter()
        .filter(|g| g.existing.is_some())
        .map(|g| g.partition.as_str())
        .collect();
    let new_partitions: BTreeSet<&str> = plan
        .groups
        .iter()
        .map(|g| g.partition.as_str())
        .filter(|p| !existing.contains(p))
        .collect();
    let marks: Vec<_> = new_partitions
        .into_iter()
        .map(|p| {
            let (storage, p, instant) = (ctx.storage.clone(), p.to_string(), instant.to_string());
            async move { commit::ensure_partition_marker(&storage, &p, &instant).await }
        })
        .collect();
    futures::stream::iter(marks)
        .buffer_unordered(ctx.options.parallelism.get().max(4))
        .try_collect::<Vec<()>>()
        .await?;
    let width = ctx.options.parallelism.get();
    let mut out = Vec::with_capacity(plan.groups.len());
    let groups: Vec<(usize, &GroupPlan)> = plan.groups.iter().enumerate().collect();
    let mut storing = PendingStores::default();
    for wave in groups.chunks(width) {
        let encoded = match encode_wave(&file_ctx, input, files, wave).await {
            Ok(e) => e,
            Err(e) => {
                storing.finish_ignoring().await;
                return Err(e);
            }
        };
        storing.finish_into(&mut out).await?;
        for file in encoded {
            let marker = files.fragment.map(|_| instant.to_string());
            storing.start(ctx.storage.clone(), file, marker);
        }
    }
    storing.finish_into(&mut out).await?;
    Ok(out)
}

/// A random attempt number for the write tokens of one fragment attempt (below 2^31, as
/// Java's attempt ids).
fn fragment_attempt() -> u64 {
    u64::from(uuid::Uuid::new_v4().as_u128() as u32 >> 1)
}

/// One file to encode: a log file appended to an existing group, or a base file with the
/// group's current rows (`None` for a new group).
enum Job<'a> {
    Log(u64, &'a GroupPlan),
    Base(u64, &'a GroupPlan, Option<CurrentRows>),
}

impl Job<'_> {
    fn group(&self) -> &GroupPlan {
        match self {
            Job::Log(_, g) | Job::Base(_, g, _) => g,
        }
    }

    fn encode(&self, file_ctx: &FileWriteContext, input: &Input) -> Result<Encoded> {
        match self {
            Job::Log(task, group) => {
                encode_log_file(file_ctx, input, group, *task).map(Encoded::Log)
            }
            Job::Base(task, group, current) => {
                encode_base_file(file_ctx, input, group, current.as_ref(), *task).map(Encoded::Base)
            }
        }
    }
}

/// An encoded file, not yet stored.
#[derive(Debug)]
enum Encoded {
    Log(EncodedLog),
    Base(EncodedGroup),
}

impl Encoded {
    fn key(&self) -> &str {
        match self {
            Encoded::Log(l) => l.key(),
            Encoded::Base(b) => b.key(),
        }
    }

    fn marker_type(&self) -> MarkerType {
        match self {
            Encoded::Log(_) => MarkerType::Append,
            Encoded::Base(_) => MarkerType::Create,
        }
    }

    async fn store(self, storage: &dyn Storage) -> Result<WrittenGroup> {
        match self {
            Encoded::Log(l) => store_log_file(storage, l).await,
            Encoded::Base(b) => store_base_file(storage, b).await,
        }
    }
}

/// Loads the current rows of `wave`'s base files, then encodes every file of the wave, in
/// plan order.
async fn encode_wave(
    file_ctx: &FileWriteContext,
    input: &Input,
    files: FileSet<'_>,
    wave: &[(usize, &GroupPlan)],
) -> Result<Vec<Encoded>> {
    let mut jobs = Vec::with_capacity(wave.len());
    for &(index, group) in wave {
        let task = index as u64;
        jobs.push(if files.appends_log(index, group) {
            Job::Log(task, group)
        } else {
            Job::Base(task, group, load_current(file_ctx, group).await?)
        });
    }
    encode_in_parallel(file_ctx, input, &jobs)
}

/// Files being stored on the runtime while the next wave encodes, in plan order. Dropped
/// unfinished (the write's future cancelled), it aborts the stores not yet started.
#[derive(Default)]
struct PendingStores {
    tasks: Vec<(String, tokio::task::JoinHandle<Result<WrittenGroup>>)>,
}

impl PendingStores {
    /// Starts storing `file` (create-if-absent), first creating its marker for instant
    /// `marker` when given.
    fn start(&mut self, storage: Arc<dyn Storage>, file: Encoded, marker: Option<String>) {
        let key = file.key().to_string();
        let task = tokio::spawn(async move {
            if let Some(instant) = marker {
                create_marker(storage.as_ref(), &instant, file.key(), file.marker_type()).await?;
            }
            file.store(storage.as_ref()).await
        });
        self.tasks.push((key, task));
    }

    /// Waits for every started store; appends their results to `out` in order. On an error,
    /// still waits for the others, then returns the first.
    async fn finish_into(&mut self, out: &mut Vec<WrittenGroup>) -> Result<()> {
        let mut first_error = None;
        for (key, task) in self.tasks.drain(..) {
            let result = task.await.unwrap_or_else(|e| {
                Err(TableError::Unsupported {
                    reason: format!("storing {key} stopped unexpectedly: {e}"),
                })
            });
            match result {
                Ok(w) if first_error.is_none() => out.push(w),
                Ok(_) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Waits for every started store, dropping their results (the write failed already).
    async fn finish_ignoring(&mut self) {
        for (_, task) in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

impl Drop for PendingStores {
    fn drop(&mut self) {
        for (_, task) in &self.tasks {
            task.abort();
        }
    }
}

/// Encodes the files of `jobs`, each on its own scoped thread when there are several; results
/// in the order of `jobs`. The threads only compute (no I/O), so blocking the caller's task
/// for them is what encoding on it would do.
fn encode_in_parallel(
    file_ctx: &FileWriteContext,
    input: &Input,
    jobs: &[Job<'_>],
) -> Result<Vec<Encoded>> {
    if jobs.len() <= 1 {
        return jobs.iter().map(|job| job.encode(file_ctx, input)).collect();
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|job| {
                (
                    job.group(),
                    scope.spawn(move || job.encode(file_ctx, input)),
                )
            })
            .collect();
        handles
            .into_iter()
            .map(|(group, handle)| {
                handle.join().unwrap_or_else(|_| {
                    Err(TableError::Unsupported {
                        reason: format!(
                            "encoding a file of file group {} in partition {:?} stopped \
                             unexpectedly (its thread panicked)",
                            group.file_id, group.partition
                        ),
                    })
                })
            })
            .collect()
    })
}
