//! [`ArborScanExec`]: the root of every arbor scan. It unions its inputs (DataFusion's parquet
//! scan of the slices without log files, [`super::ArborMergeExec`] for the others), projects
//! their rows to the query's columns, and reports what planning pruned: in `EXPLAIN`, and as
//! metrics in `EXPLAIN ANALYZE`.

use std::fmt;
use std::sync::Arc;

use arbor_table::read::PruningReport;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::StreamExt;

use super::conform::conform_to;

/// What one scan read and how it was planned, for display.
#[derive(Debug, Clone)]
pub struct ScanSummary {
    /// The table location.
    pub location: String,
    /// The state read (`main`, `branch audit at tag v1`, ...).
    pub reference: String,
    /// Planning's pruning report.
    pub pruning: PruningReport,
    /// File slices read by DataFusion's parquet source.
    pub parquet_files: usize,
    /// File slices read and merged by arbor.
    pub merged_slices: usize,
    /// The arbor filters the plan pruned with (rendered).
    pub filters: Vec<String>,
}

/// Unions `inputs` (each with the same schema), projects their batches with `projection`
/// (indices into that schema) and carries the scan's pruning figures as metrics.
#[derive(Debug)]
pub struct ArborScanExec {
    inputs: Vec<Arc<dyn ExecutionPlan>>,
    projection: Vec<usize>,
    schema: SchemaRef,
    summary: ScanSummary,
    metrics: ExecutionPlanMetricsSet,
    properties: Arc<PlanProperties>,
}

impl ArborScanExec {
    /// The scan over `inputs` (their schema is `input_schema`), output `projection` of it.
    pub fn new(
        inputs: Vec<Arc<dyn ExecutionPlan>>,
        input_schema: &SchemaRef,
        projection: Vec<usize>,
        summary: ScanSummary,
    ) -> Result<Self> {
        let schema = Arc::new(input_schema.project(&projection)?);
        let partitions = inputs
            .iter()
            .map(|i| i.properties().partitioning.partition_count())
            .sum::<usize>()
            .max(1);
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        let metrics = ExecutionPlanMetricsSet::new();
        let r = &summary.pruning;
        for (name, value) in [
            ("partitions_considered", r.partitions_considered),
            (
                "partitions_pruned_by_values",
                r.partitions_skipped_by_values,
            ),
            ("partitions_pruned_by_stats", r.partitions_skipped_by_stats),
            ("files_considered", r.files_considered),
            (
                "files_pruned_by_column_stats",
                r.files_skipped_by_column_stats,
            ),
            (
                "files_pruned_by_record_index",
                r.files_skipped_by_record_index,
            ),
            (
                "files_pruned_by_secondary_index",
                r.files_skipped_by_secondary_index,
            ),
            ("files_read_by_parquet_source", summary.parquet_files),
            ("file_slices_merged", summary.merged_slices),
        ] {
            MetricBuilder::new(&metrics).global_counter(name).add(value);
        }
        Ok(ArborScanExec {
            inputs,
            projection,
            schema,
            summary,
            metrics,
            properties,
        })
    }

    /// What planning pruned and how the slices are read.
    pub fn summary(&self) -> &ScanSummary {
        &self.summary
    }
}

impl DisplayAs for ArborScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let s = &self.summary;
        let r = &s.pruning;
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "ArborScanExec: table={}, ref={}, partitions={}/{} (pruned: {} by values, {} \
                     by stats), file_slices={}/{} (pruned: {} by column stats, {} by record \
                     index, {} by secondary index; {} parquet, {} merged)",
                    s.location,
                    s.reference,
                    r.partitions_read(),
                    r.partitions_considered,
                    r.partitions_skipped_by_values,
                    r.partitions_skipped_by_stats,
                    r.files_read(),
                    r.files_considered,
                    r.files_skipped_by_column_stats,
                    r.files_skipped_by_record_index,
                    r.files_skipped_by_secondary_index,
                    s.parquet_files,
                    s.merged_slices
                )?;
                if !s.filters.is_empty() {
                    write!(f, ", filters=[{}]", s.filters.join(", "))?;
                }
                if !r.notes.is_empty() {
                    write!(f, ", notes=[{}]", r.notes.join("; "))?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => write!(
                f,
                "ref={}\nfile_slices={}/{}",
                s.reference,
                r.files_read(),
                r.files_considered
            ),
        }
    }
}

impl ExecutionPlan for ArborScanExec {
    fn name(&self) -> &str {
        "ArborScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.inputs.iter().collect()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != self.inputs.len() {
            return internal_err!(
                "ArborScanExec has {} children, given {}",
                self.inputs.len(),
                children.len()
            );
        }
        let input_schema = match children.first() {
            Some(c) => c.schema(),
            None => return Ok(self),
        };
        Ok(Arc::new(ArborScanExec::new(
            children,
            &input_schema,
            self.projection.clone(),
            self.summary.clone(),
        )?))
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false; self.inputs.len()]
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut index = partition;
        for input in &self.inputs {
            let count = input.properties().partitioning.partition_count();
            if index < count {
                let stream = input.execute(index, context)?;
                let projection = self.projection.clone();
                let schema = self.schema.clone();
                let rows = MetricBuilder::new(&self.metrics).output_rows(partition);
                let projected = stream.map(move |b| {
                    let b: RecordBatch = conform_to(&b?.project(&projection)?, &schema)?;
                    rows.add(b.num_rows());
                    Ok(b)
                });
                return Ok(Box::pin(RecordBatchStreamAdapter::new(
                    self.schema.clone(),
                    projected,
                )));
            }
            index -= count;
        }
        if self.inputs.is_empty() && partition == 0 {
            return Ok(Box::pin(RecordBatchStreamAdapter::new(
                self.schema.clone(),
                futures::stream::empty(),
            )));
        }
        internal_err!("ArborScanExec has no partition {partition}")
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
