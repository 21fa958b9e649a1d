//! The parquet child of a scan: base files read by DataFusion's `ParquetSource` (row-group
//! and page pruning with the query's filters, the session's parquet options), with the rows
//! arbor's reader would drop filtered out (soft deletes, and the filters the provider claimed
//! exact).

use std::sync::Arc;

use arbor_fsview::FileSlice;
use arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, Result};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::ExecutionPlan;

use super::merge_exec::slice_size;

/// What the parquet child reads.
pub(crate) struct ParquetRequest<'a> {
    pub store_url: &'a ObjectStoreUrl,
    /// The provider's schema (every file is adapted to it).
    pub table_schema: &'a SchemaRef,
    /// Indices into `table_schema` of the columns read, ascending.
    pub scan_columns: &'a [usize],
    /// `table_schema` projected to `scan_columns`.
    pub scan_schema: &'a SchemaRef,
    pub slices: Vec<FileSlice>,
    /// Every pushed-down filter (row-group and page pruning only).
    pub filters: &'a [Expr],
    /// Filters applied to every row (soft deletes, exact claims).
    pub row_filters: &'a [Expr],
    pub limit: Option<usize>,
    pub target_partitions: usize,
}

/// The base files of `request.slices` as a `DataSourceExec`, filtered when rows must be.
pub(crate) fn parquet_scan(
    state: &dyn Session,
    request: ParquetRequest<'_>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let table_df = DFSchema::try_from(request.table_schema.as_ref().clone())?;
    let mut source = ParquetSource::new(request.table_schema.clone())
        .with_table_parquet_options(state.table_options().parquet.clone());
    // The row filters are applied by the FilterExec below, which DataFusion's filter pushdown
    // also hands to the parquet source for pruning: the source's own predicate is the rest.
    let pruning_only = request
        .filters
        .iter()
        .filter(|f| !request.row_filters.contains(f))
        .cloned();
    if let Some(predicate) = conjunction(pruning_only) {
        // Pruning only: a predicate DataFusion cannot turn into a physical one is dropped here
        // (DataFusion still applies every filter the provider did not claim exact).
        if let Ok(p) = state.create_physical_expr(predicate, &table_df) {
            source = source.with_predicate(p);
        }
    }
    let n = request
        .target_partitions
        .clamp(1, request.slices.len().max(1));
    let mut groups: Vec<Vec<PartitionedFile>> = vec![Vec::new(); n];
    let mut sizes = vec![0_u64; n];
    let mut slices = request.slices;
    slices.sort_by_key(|s| std::cmp::Reverse(slice_size(s)));
    for s in slices {
        let (Some(path), Some(base)) = (s.base_file_path(), s.base_file.as_ref()) else {
            continue;
        };
        let (i, _) = sizes
            .iter()
            .enumerate()
            .min_by_key(|(_, size)| **size)
            .unwrap_or((0, &0));
        if let (Some(g), Some(size)) = (groups.get_mut(i), sizes.get_mut(i)) {
            *size += base.size;
            // The key as the object-store path it is (`Path::from` would escape it).
            let location = object_store::path::Path::parse(&path)
                .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
            g.push(PartitionedFile::new_from_meta(object_store::ObjectMeta {
                location,
                last_modified: chrono::DateTime::UNIX_EPOCH,
                size: base.size,
                e_tag: None,
                version: None,
            }));
        }
    }
    let filtered = !request.row_filters.is_empty();
    let config = FileScanConfigBuilder::new(request.store_url.clone(), Arc::new(source))
        .with_file_groups(
            groups
                .into_iter()
                .filter(|g| !g.is_empty())
                .map(FileGroup::new)
                .collect(),
        )
        .with_projection_indices(Some(request.scan_columns.to_vec()))?
        .with_limit(if filtered { None } else { request.limit })
        .build();
    let scan: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(config);
    match conjunction(request.row_filters.iter().cloned()) {
        Some(predicate) => {
            let scan_df = DFSchema::try_from(request.scan_schema.as_ref().clone())?;
            let predicate = state.create_physical_expr(predicate, &scan_df)?;
            Ok(Arc::new(FilterExec::try_new(predicate, scan)?))
        }
        None => Ok(scan),
    }
}
