//! [`ScanPlan`]: what one query reads, decided before anything is read, and its execution.
//!
//! Planning resolves the query type, lists (and prunes) partitions and picks the file slices;
//! execution reads them. A plan carries everything its execution needs except the storage
//! (file slices with their paths, merge mode, schemas, projection, predicate, as-of instant,
//! incremental range and the commit rule its log blocks are checked against), so an engine
//! can split it by partition or by slice and run [`ScanPlan::execute_slice`] wherever the
//! table's storage can be reached. [`TableReader::read_stream`](crate::read::TableReader::read_stream)
//! is `plan` followed by [`ScanPlan::execute`].

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::sync::Arc;

use arbor_format::meta;
use arbor_fsview::{FileSlice, FileSystemView};
use arbor_storage::Storage;
use arbor_timeline::{InstantTime, TableConfig};
use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::filter::{PartitionFilter, PartitionPruner};
use super::merge::MergeMode;
use super::options::ReadOptions;
use super::schema_history::RenamedColumns;
use super::skipping::{PruningReport, SkipReason, Skipper};
use super::stream::{SlicePlan, SliceReader};
use crate::error::{Result, TableError};

/// How many partitions are listed at once by a filtered read.
const LISTING_CONCURRENCY: usize = 8;

/// The file slices a plan reads in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionScan {
    /// The partition path (`""` for a non-partitioned table).
    pub partition: String,
    /// The slices, ordered by file id; each names its base and log files
    /// ([`FileSlice::base_file_path`], [`FileSlice::log_file_paths`]).
    pub slices: Vec<FileSlice>,
}

/// Which instants' log blocks count: the timeline snapshot the plan was made against.
#[derive(Clone)]
struct CommitRule(Arc<FileSystemView>);

impl fmt::Debug for CommitRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let completed = self.0.history().completed_writes();
        f.debug_struct("CommitRule")
            .field("completed_writes", &completed.len())
            .field(
                "latest",
                &completed.last().map(|i| i.requested_time.to_string()),
            )
            .finish()
    }
}

/// One query, planned: the file slices per partition and how each is read, merged, filtered
/// and projected.
///
/// Guarantees: executing a plan ([`ScanPlan::execute`]) yields exactly the batches
/// [`TableReader::read_stream`](crate::read::TableReader::read_stream) yields for the same
/// options on the same reader, in the same order (partition, then file id); executing each
/// slice of [`ScanPlan::partitions`] with [`ScanPlan::execute_slice`] and concatenating the
/// results in that order does too. A plan is immutable and cheap to clone; it reads nothing
/// until executed.
#[derive(Debug, Clone)]
pub struct ScanPlan {
    partitions: Vec<PartitionScan>,
    mode: Option<MergeMode>,
    ordering_field: Option<String>,
    read_schema: SchemaRef,
    renamed: Option<Arc<RenamedColumns>>,
    key_field: Option<Arc<str>>,
    output_schema: SchemaRef,
    predicate: Vec<PartitionFilter>,
    incremental: Option<(Option<InstantTime>, Option<InstantTime>)>,
    slice: Arc<SlicePlan>,
    commits: CommitRule,
    pruning: PruningReport,
}

impl ScanPlan {
    /// What planning considered and skipped, and why (partition values, partition stats,
    /// column stats, record index, secondary index).
    pub fn pruning(&self) -> &PruningReport {
        &self.pruning
    }

    /// The file slices to read, by partition (ordered by partition path).
    pub fn partitions(&self) -> &[PartitionScan] {
        &self.partitions
    }

    /// Every slice, in execution order.
    pub fn file_slices(&self) -> impl Iterator<Item = &FileSlice> {
        self.partitions.iter().flat_map(|p| p.slices.iter())
    }

    /// How records of a slice with log files are merged (`None`: merge mode CUSTOM, which
    /// fails the execution of any slice that has log blocks to merge).
    pub fn merge_mode(&self) -> Option<MergeMode> {
        self.mode
    }

    /// The ordering field of event-time merges.
    pub fn ordering_field(&self) -> Option<&str> {
        self.ordering_field.as_deref()
    }

    /// The table's read schema (every column).
    pub fn read_schema(&self) -> &SchemaRef {
        &self.read_schema
    }

    /// The columns read and merged: the output columns plus what the merge, the partition
    /// filters and an incremental query need, in read-schema order.
    pub fn work_schema(&self) -> &SchemaRef {
        &self.slice.work
    }

    /// The schema of the batches the execution yields.
    pub fn output_schema(&self) -> &SchemaRef {
        &self.output_schema
    }

    /// Indices into [`ScanPlan::work_schema`] of the output columns, in output order.
    pub fn projection(&self) -> &[usize] {
        &self.slice.projection
    }

    /// The partition filters: applied to partition paths when planning and to rows when
    /// executing.
    pub fn predicate(&self) -> &[PartitionFilter] {
        &self.predicate
    }

    /// The time-travel instant (requested times at or before it), if any.
    pub fn as_of(&self) -> Option<&InstantTime> {
        self.slice.as_of.as_ref()
    }

    /// The incremental range `(start, end]` of completion times, if an incremental query.
    pub fn incremental(&self) -> Option<(Option<&InstantTime>, Option<&InstantTime>)> {
        self.incremental
            .as_ref()
            .map(|(s, e)| (s.as_ref(), e.as_ref()))
    }

    /// Incremental queries: the requested times whose records are kept.
    pub fn admitted_instants(&self) -> Option<&BTreeSet<String>> {
        self.slice.admitted.as_ref()
    }

    /// Whether only base files are read (a read-optimized query).
    pub fn is_read_optimized(&self) -> bool {
        self.slice.base_only
    }

    /// Most rows per output batch.
    pub fn batch_size(&self) -> usize {
        self.slice.batch_size
    }

    /// How many file slices the execution reads at once ([`ReadOptions::parallelism`]).
    pub fn parallelism(&self) -> usize {
        self.slice.parallelism
    }

    /// Reads every slice through `storage` (rooted as the planning reader's storage was) when
    /// the stream is polled: up to [`ScanPlan::parallelism`] slices at once, each as its own
    /// task on the current tokio runtime (one at a time in the polling task without a
    /// runtime). The batches come out in plan order whatever the parallelism, identical to a
    /// sequential read; memory is bounded by the slices in flight.
    pub fn execute(self, storage: Arc<dyn Storage>) -> BoxStream<'static, Result<RecordBatch>> {
        let reader = self.slice_reader(storage);
        let plan = self.slice;
        let parallelism = plan.parallelism;
        let slices: Vec<BoxStream<'static, Result<RecordBatch>>> = self
            .partitions
            .into_iter()
            .flat_map(|p| p.slices.into_iter())
            .map(|slice| reader.clone().slice_stream(slice, plan.clone()))
            .collect();
        super::parallel::concat_slices(slices, parallelism)
    }

    /// Reads the slices of one partition of this plan (`index` into
    /// [`ScanPlan::partitions`]) as [`ScanPlan::execute`] reads them: in plan order, up to
    /// [`ScanPlan::parallelism`] at once. An index past the end reads nothing.
    pub fn execute_partition(
        &self,
        storage: Arc<dyn Storage>,
        index: usize,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        let reader = self.slice_reader(storage);
        let slices: Vec<BoxStream<'static, Result<RecordBatch>>> = self
            .partitions
            .get(index)
            .map(|p| p.slices.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|slice| reader.clone().slice_stream(slice, self.slice.clone()))
            .collect();
        super::parallel::concat_slices(slices, self.slice.parallelism)
    }

    /// Reads one slice of this plan (or any slice of the same table and timeline snapshot)
    /// through `storage`: its output batches, filtered and projected as the plan says.
    pub fn execute_slice(
        &self,
        storage: Arc<dyn Storage>,
        slice: FileSlice,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        self.slice_reader(storage)
            .slice_stream(slice, self.slice.clone())
    }

    fn slice_reader(&self, storage: Arc<dyn Storage>) -> SliceReader {
        SliceReader {
            storage,
            view: self.commits.0.clone(),
            schema: self.read_schema.clone(),
            mode: self.mode,
            ordering_field: self.ordering_field.clone(),
            renamed: self.renamed.clone(),
            key_field: self.key_field.clone(),
            // A plan exists only for a reader without a refusal (see `plan`).
            refusal: None,
        }
    }
}

/// Plans `options` against the table of `config` read by `reader`.
pub(crate) async fn plan(
    config: &TableConfig,
    reader: &SliceReader,
    options: &ReadOptions,
) -> Result<ScanPlan> {
    if let Some(reason) = &reader.refusal {
        return Err(TableError::Unsupported {
            reason: reason.to_string(),
        });
    }
    let schema = &reader.schema;
    let output = output_schema(schema, options)?;
    let pruner = PartitionPruner::new(config, schema, options.get_partition_filters())?;
    let view = &reader.view;
    let mut report = PruningReport::default();
    let (slices, admitted) = match options.get_incremental() {
        Some((start, end)) => {
            if options.get_as_of().is_some()
                || options.is_read_optimized()
                || options.get_file_groups().is_some()
            {
                return Err(TableError::InvalidInput {
                    column: None,
                    row: None,
                    reason: "an incremental query cannot be combined with as_of, \
                             read_optimized or file_groups"
                        .into(),
                });
            }
            let inc = view
                .completed_between(start, end)
                .await
                .map_err(TableError::from_fsview)?;
            let admitted: BTreeSet<String> = inc
                .instants
                .iter()
                .map(|i| i.requested_time.to_string())
                .collect();
            let mut slices = Vec::new();
            if !admitted.is_empty() {
                let partitions: BTreeSet<&str> = inc
                    .file_slices
                    .iter()
                    .map(|s| s.partition.as_str())
                    .collect();
                report.partitions_considered = partitions.len();
                for p in partitions {
                    if !pruner.matches(p)? {
                        report.skip_partition(SkipReason::PartitionValues);
                    }
                }
                for s in inc.file_slices {
                    if pruner.matches(&s.partition)? {
                        slices.push(s);
                    }
                }
            }
            report.files_considered = slices.len();
            (slices, Some(admitted))
        }
        None => {
            if let Some(t) = options.get_as_of() {
                super::as_of::check_not_future(view.history(), config.timeline_timezone(), t)?;
                if let Some(note) =
                    super::as_of::clock_ahead_note(view.history(), config.timeline_timezone(), t)
                {
                    tracing::warn!(target: "arbor::as_of", "as of {t}: {note}");
                }
                super::retained::check_retained(view, t).await?;
            }
            if let Some(groups) = options.get_file_groups() {
                let mut slices = Vec::new();
                for s in view
                    .latest_file_slices_of(groups, options.get_as_of())
                    .await
                    .map_err(TableError::from_fsview)?
                {
                    if pruner.matches(&s.partition)? {
                        slices.push(s);
                    }
                }
                report.partitions_considered = groups.len();
                report.files_considered = slices.len();
                return finish_plan(reader, options, output, pruner, slices, None, report);
            }
            let latest = options.get_as_of().is_none();
            let skipper = if options.is_data_skipping() && latest && !pruner.is_empty() {
                let s = Skipper::open(
                    &reader.storage,
                    view,
                    config,
                    schema,
                    pruner.compiled(),
                    reader.renamed.as_deref(),
                    &mut report,
                );
                Some(Box::pin(s).await)
            } else {
                None
            };
            let slices = pruned_slices(
                view,
                &pruner,
                options.get_as_of(),
                skipper.as_ref(),
                &mut report,
            )
            .await?;
            report.files_considered = slices.len();
            let slices = match &skipper {
                Some(s) => {
                    Box::pin(s.skip_slices(slices, options.is_read_optimized(), &mut report)).await
                }
                None => slices,
            };
            (slices, None)
        }
    };
    finish_plan(reader, options, output, pruner, slices, admitted, report)
}

/// The plan of `slices` (chosen for `options`).
fn finish_plan(
    reader: &SliceReader,
    options: &ReadOptions,
    output: SchemaRef,
    pruner: PartitionPruner,
    slices: Vec<FileSlice>,
    admitted: Option<BTreeSet<String>>,
    report: PruningReport,
) -> Result<ScanPlan> {
    let schema = &reader.schema;
    let view = &reader.view;
    tracing::debug!(pruning = %report, "scan planned");
    let work = work_schema(
        schema,
        reader.ordering_field.as_deref(),
        options,
        admitted.is_some(),
        &pruner.row_columns(),
    );
    let projection = output
        .fields()
        .iter()
        .map(|f| {
            work.index_of(f.name())
                .map_err(|_| unknown_column(&work, f.name()))
        })
        .collect::<Result<Vec<_>>>()?;
    let slice = Arc::new(SlicePlan {
        as_of: options.get_as_of().cloned(),
        base_only: options.is_read_optimized(),
        work,
        projection,
        admitted,
        batch_size: options.get_batch_size(),
        parallelism: options.get_parallelism(),
        row_filter: (!pruner.is_empty()).then_some(pruner),
    });
    Ok(ScanPlan {
        partitions: by_partition(slices),
        mode: reader.mode,
        ordering_field: reader.ordering_field.clone(),
        read_schema: schema.clone(),
        renamed: reader.renamed.clone(),
        key_field: reader.key_field.clone(),
        output_schema: output,
        predicate: options.get_partition_filters().to_vec(),
        incremental: options
            .get_incremental()
            .map(|(s, e)| (s.cloned(), e.cloned())),
        slice,
        commits: CommitRule(view.clone()),
        pruning: report,
    })
}

/// Groups slices ordered by partition into one [`PartitionScan`] per partition, keeping the
/// order.
fn by_partition(slices: Vec<FileSlice>) -> Vec<PartitionScan> {
    let mut out: Vec<PartitionScan> = Vec::new();
    for s in slices {
        match out.last_mut() {
            Some(last) if last.partition == s.partition => last.slices.push(s),
            _ => out.push(PartitionScan {
                partition: s.partition.clone(),
                slices: vec![s],
            }),
        }
    }
    out
}

/// The latest slices (as of `as_of`) of the partitions `pruner` (and the partition stats of
/// `skipper`) keep; only those partitions are listed.
async fn pruned_slices(
    view: &FileSystemView,
    pruner: &PartitionPruner,
    as_of: Option<&InstantTime>,
    skipper: Option<&Skipper<'_>>,
    report: &mut PruningReport,
) -> Result<Vec<FileSlice>> {
    let partitions = view.partitions().await.map_err(TableError::from_fsview)?;
    report.partitions_considered = partitions.len();
    if pruner.is_empty() {
        return view
            .latest_file_slices(None, as_of)
            .await
            .map_err(TableError::from_fsview);
    }
    let mut kept = Vec::new();
    for p in partitions.iter() {
        if !pruner.matches(p)? {
            report.skip_partition(SkipReason::PartitionValues);
        } else if skipper.is_some_and(|s| s.partition_ruled_out(p)) {
            report.skip_partition(SkipReason::PartitionStats);
        } else {
            kept.push(p.clone());
        }
    }
    let per_partition: Vec<Vec<FileSlice>> = futures::stream::iter(kept)
        .map(|p| async move {
            view.latest_file_slices(Some(&p), as_of)
                .await
                .map_err(TableError::from_fsview)
        })
        .buffered(LISTING_CONCURRENCY)
        .try_collect()
        .await?;
    Ok(per_partition.into_iter().flatten().collect())
}

/// The schema of the batches a read returns for `options`: the requested columns in the
/// requested order, else the read schema. An unknown column is
/// [`TableError::InvalidInput`] naming it.
pub(crate) fn output_schema(schema: &SchemaRef, options: &ReadOptions) -> Result<SchemaRef> {
    let Some(columns) = options.get_columns() else {
        return Ok(schema.clone());
    };
    let fields = columns
        .iter()
        .map(|c| {
            schema
                .field_with_name(c)
                .map(|f| Arc::new(f.clone()))
                .map_err(|_| unknown_column(schema, c))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

/// The columns read and merged for `options`: the output columns plus what the merge needs
/// (record key, ordering field, `_hoodie_is_deleted`), the columns partition filters are
/// applied to (`filtered`) and, for incremental queries, `_hoodie_commit_time`; in
/// read-schema order.
fn work_schema(
    schema: &SchemaRef,
    ordering_field: Option<&str>,
    options: &ReadOptions,
    incremental: bool,
    filtered: &[&str],
) -> SchemaRef {
    let Some(columns) = options.get_columns() else {
        return schema.clone();
    };
    let mut needed: HashSet<&str> = columns.iter().map(String::as_str).collect();
    needed.insert(meta::RECORD_KEY);
    needed.insert(meta::IS_DELETED);
    needed.extend(filtered.iter().copied());
    if let Some(f) = ordering_field {
        needed.insert(f);
    }
    if incremental {
        needed.insert(meta::COMMIT_TIME);
    }
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .filter(|f| needed.contains(f.name().as_str()))
        .cloned()
        .collect();
    Arc::new(Schema::new(fields))
}

fn unknown_column(schema: &SchemaRef, column: &str) -> TableError {
    let known: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    TableError::InvalidInput {
        column: Some(column.to_string()),
        row: None,
        reason: format!("unknown column {column:?} (columns: {})", known.join(", ")),
    }
}
