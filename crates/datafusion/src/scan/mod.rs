//! Planning one scan: arbor's [`ScanPlan`] decides the file slices (partition values, partition
//! and column stats, record and secondary indexes prune); slices without log files (all of a
//! copy-on-write table, compacted or read-optimized merge-on-read slices) are read by
//! DataFusion's own parquet source, the others by [`ArborMergeExec`]; [`ArborScanExec`] unions
//! them and reports the pruning.

mod conform;
mod merge_exec;
mod parquet;
mod scan_exec;

use std::sync::Arc;

use arbor_fsview::FileSlice;
use arbor_storage::Storage;
use arbor_table::read::{PartitionFilter, ReadOptions, TableReader};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::ExecutionPlan;

pub use conform::conform_to;
pub use merge_exec::ArborMergeExec;
pub use scan_exec::{ArborScanExec, ScanSummary};

use crate::error::ArborSqlError;
use crate::filters::to_partition_filters;

/// Everything one scan is planned from.
pub(crate) struct ScanRequest<'a> {
    /// The table location (for messages).
    pub location: &'a str,
    /// The state read, for display.
    pub reference: String,
    /// The provider's declared schema (the read schema when it was opened).
    pub schema: &'a SchemaRef,
    /// The reader of the state read and its query options (as-of, incremental, ...).
    pub reader: TableReader,
    pub options: ReadOptions,
    /// Column indices into `schema` of the output (`None`: all).
    pub projection: Option<&'a Vec<usize>>,
    /// The pushed-down filters.
    pub filters: &'a [Expr],
    /// The filters claimed exact (their columns are partition fields).
    pub exact: Vec<Expr>,
    /// The scan's row limit hint.
    pub limit: Option<usize>,
    /// Where DataFusion finds the table's files.
    pub store_url: &'a datafusion::execution::object_store::ObjectStoreUrl,
}

/// The column arbor's `_hoodie_is_deleted` soft deletes live in.
const IS_DELETED: &str = "_hoodie_is_deleted";

/// Plans `request` in `state`.
pub(crate) async fn plan_scan(
    state: &dyn Session,
    request: ScanRequest<'_>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let schema = request.schema;
    let projection: Vec<usize> = match request.projection {
        Some(p) => p.clone(),
        None => (0..schema.fields().len()).collect(),
    };
    let arbor_filters: Vec<PartitionFilter> = request
        .filters
        .iter()
        .filter_map(|f| to_partition_filters(f, schema))
        .flatten()
        .collect();
    // The columns read: the output, what the exact filters and the soft-delete rule need,
    // and at least one column so that rows can be counted.
    let mut scan_columns: Vec<usize> = projection.clone();
    let mut extra_exprs = request.exact.clone();
    // arbor drops soft deletes only when the column is a boolean (else it is plain data).
    let soft_deletes = schema
        .field_with_name(IS_DELETED)
        .is_ok_and(|f| f.data_type() == &arrow::datatypes::DataType::Boolean);
    if soft_deletes {
        extra_exprs.push(datafusion::logical_expr::col(IS_DELETED).is_not_true());
    }
    for e in &extra_exprs {
        for c in e.column_refs() {
            if let Ok(i) = schema.index_of(&c.name) {
                scan_columns.push(i);
            }
        }
    }
    if scan_columns.is_empty() && !schema.fields().is_empty() {
        let key = schema.index_of("_hoodie_record_key").unwrap_or(0);
        scan_columns.push(key);
    }
    scan_columns.sort_unstable();
    scan_columns.dedup();
    let scan_schema: SchemaRef = Arc::new(schema.project(&scan_columns)?);
    let names: Vec<String> = scan_schema
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let read_options = request.options.clone().columns(names);
    // The translated filters only prune: every row filter the provider claims exact is applied
    // again below, so a filter arbor refuses for this table (a partition field its layout
    // cannot evaluate) is dropped rather than failing the query.
    let plan = match request
        .reader
        .plan(
            &read_options
                .clone()
                .partition_filters(arbor_filters.clone()),
        )
        .await
    {
        Ok(plan) => plan,
        Err(arbor_table::TableError::InvalidInput { reason, .. }) if !arbor_filters.is_empty() => {
            tracing::debug!(%reason, "planning without the translated filters");
            request
                .reader
                .plan(&read_options)
                .await
                .map_err(|e| ArborSqlError::table(request.location, e))?
        }
        Err(e) => return Err(ArborSqlError::table(request.location, e).into()),
    };
    let incremental = plan.incremental().is_some();
    let read_optimized = plan.is_read_optimized();
    let (parquet_slices, merged_slices): (Vec<FileSlice>, Vec<FileSlice>) =
        plan.file_slices().cloned().partition(|s| {
            !incremental
                && (read_optimized || s.log_files.is_empty())
                && s.base_file_path().is_some_and(|p| {
                    // DataFusion addresses files by object-store path: only keys that are
                    // their own path (no character it would escape) go through it.
                    p.ends_with(".parquet")
                        && object_store::path::Path::parse(&p).is_ok_and(|o| o.as_ref() == p)
                })
        });
    let target_partitions = state.config().target_partitions();
    let storage: Arc<dyn Storage> = request.reader.storage().clone();
    let mut inputs: Vec<Arc<dyn ExecutionPlan>> = Vec::new();
    let summary = ScanSummary {
        location: request.location.to_string(),
        reference: request.reference.clone(),
        pruning: plan.pruning().clone(),
        parquet_files: parquet_slices.len(),
        merged_slices: merged_slices.len(),
        filters: arbor_filters
            .iter()
            .map(|f| {
                if f.values.is_empty() {
                    format!("{} {}", f.field, f.op.symbol())
                } else {
                    format!("{} {} {}", f.field, f.op.symbol(), f.values.join(","))
                }
            })
            .collect(),
    };
    if !parquet_slices.is_empty() {
        inputs.push(parquet::parquet_scan(
            state,
            parquet::ParquetRequest {
                store_url: request.store_url,
                table_schema: schema,
                scan_columns: &scan_columns,
                scan_schema: &scan_schema,
                slices: parquet_slices,
                filters: request.filters,
                row_filters: &extra_exprs,
                limit: request.limit,
                target_partitions,
            },
        )?);
    }
    if !merged_slices.is_empty() {
        let merged: Arc<dyn ExecutionPlan> = Arc::new(ArborMergeExec::new(
            plan,
            storage,
            merged_slices,
            scan_schema.clone(),
            target_partitions,
        ));
        // arbor's reader filters the rows too; the exact claims do not depend on it.
        inputs.push(match conjunction(request.exact.iter().cloned()) {
            Some(predicate) => {
                let scan_df = DFSchema::try_from(scan_schema.as_ref().clone())?;
                let predicate = state.create_physical_expr(predicate, &scan_df)?;
                Arc::new(FilterExec::try_new(predicate, merged)?)
            }
            None => merged,
        });
    }
    // Output columns as positions in the scan schema.
    let output: Vec<usize> = projection
        .iter()
        .filter_map(|i| scan_columns.iter().position(|c| c == i))
        .collect();
    Ok(Arc::new(ArborScanExec::new(
        inputs,
        &scan_schema,
        output,
        summary,
    )?))
}
