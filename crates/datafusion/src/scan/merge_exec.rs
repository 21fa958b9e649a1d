//! [`ArborMergeExec`]: the file slices that need arbor's reader (log files to merge, an
//! incremental range, a base file format DataFusion does not read), spread over parallel
//! partitions; each partition reads its slices one after another with
//! `ScanPlan::execute_slice`.

use std::fmt;
use std::sync::Arc;

use arbor_fsview::FileSlice;
use arbor_storage::Storage;
use arbor_table::read::ScanPlan;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, Result};
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::stream::{self, StreamExt, TryStreamExt};

use super::conform::conform_to;

/// Reads and merges file slices of one [`ScanPlan`] with arbor's reader, in
/// `partitions.len()` parallel partitions. The output schema is the plan's output schema as
/// the provider declared it (batches are cast to it when the table's schema has widened since).
#[derive(Debug)]
pub struct ArborMergeExec {
    plan: ScanPlan,
    storage: Arc<dyn Storage>,
    partitions: Vec<Vec<FileSlice>>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl ArborMergeExec {
    /// `slices` of `plan` spread round-robin (largest first) over at most `target_partitions`
    /// partitions (at least one).
    pub fn new(
        plan: ScanPlan,
        storage: Arc<dyn Storage>,
        mut slices: Vec<FileSlice>,
        schema: SchemaRef,
        target_partitions: usize,
    ) -> Self {
        let n = target_partitions.clamp(1, slices.len().max(1));
        slices.sort_by_key(|s| std::cmp::Reverse(slice_size(s)));
        let mut partitions: Vec<Vec<FileSlice>> = vec![Vec::new(); n];
        let mut sizes = vec![0_u64; n];
        for s in slices {
            // The partition with the fewest bytes so far takes the next largest slice.
            let (i, _) = sizes
                .iter()
                .enumerate()
                .min_by_key(|(_, size)| **size)
                .unwrap_or((0, &0));
            if let (Some(p), Some(size)) = (partitions.get_mut(i), sizes.get_mut(i)) {
                *size += slice_size(&s);
                p.push(s);
            }
        }
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(n),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        ArborMergeExec {
            plan,
            storage,
            partitions,
            schema,
            properties,
        }
    }

    /// How many file slices this plan reads.
    pub fn slice_count(&self) -> usize {
        self.partitions.iter().map(Vec::len).sum()
    }
}

/// The bytes of a slice's base and log files.
pub(crate) fn slice_size(s: &FileSlice) -> u64 {
    s.base_file.as_ref().map_or(0, |b| b.size) + s.log_files.iter().map(|l| l.size).sum::<u64>()
}

impl DisplayAs for ArborMergeExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "ArborMergeExec: file_slices={}, partitions={}",
                self.slice_count(),
                self.partitions.len()
            ),
            DisplayFormatType::TreeRender => write!(f, "file_slices={}", self.slice_count()),
        }
    }
}

impl ExecutionPlan for ArborMergeExec {
    fn name(&self) -> &str {
        "ArborMergeExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
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
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("ArborMergeExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let Some(slices) = self.partitions.get(partition) else {
            return internal_err!(
                "ArborMergeExec has {} partitions, asked for partition {partition}",
                self.partitions.len()
            );
        };
        let plan = self.plan.clone();
        let storage = self.storage.clone();
        let schema = self.schema.clone();
        let target = schema.clone();
        let batches = stream::iter(slices.clone())
            .map(move |slice| plan.execute_slice(storage.clone(), slice))
            .flatten()
            .map_err(|e| DataFusionError::External(Box::new(e)))
            .and_then(move |b: RecordBatch| {
                let target = target.clone();
                async move { conform_to(&b, &target) }
            });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)))
    }
}
