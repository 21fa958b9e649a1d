//! Readers to Arrow: snapshot, time travel, incremental and read-optimized queries.
//!
//! Semantics follow hudi-rs 0.5.0 (the peer reader arbor is checked against):
//! - the read schema is the table's latest schema (`extraMetadata.schema` of the latest
//!   completed write, meta columns first), and every file's rows are shaped to it;
//! - time travel "as of T" sees instants whose requested time is `<= T`;
//! - an incremental query over `(start, end]` bounds completion times (table version 8 and
//!   later; requested times for version 6) and keeps the rows whose `_hoodie_commit_time` is one
//!   of the admitted instants;
//! - log blocks count only when their instant is committed; a rollback command block
//!   invalidates the earlier blocks of its target instant.

mod merge;
mod ordering;
mod schema;

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_format::base::{check_base_file_format, read_base_file};
use arbor_format::log::{
    conform_batch, decode_data_block, decode_delete_block, read_log_bytes, BlockType,
    CommandBlockType, ReadMode,
};
use arbor_format::meta;
use arbor_fsview::{FileSlice, FileSystemView};
use arbor_storage::Storage;
use arbor_timeline::config::RecordMergeMode;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{InstantTime, TableConfig};
use arrow::array::{AsArray, BooleanArray};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;

pub use merge::{merge_slice, LogPart, MergeMode};
pub use ordering::OrderKey;

use crate::error::{Result, TableError};

/// Reads one table (main) at the state it had when opened.
#[derive(Debug)]
pub struct TableReader {
    storage: Arc<dyn Storage>,
    config: TableConfig,
    view: FileSystemView,
    schema: SchemaRef,
    mode: Option<MergeMode>,
    ordering_field: Option<String>,
}

impl TableReader {
    /// Opens main of the table whose base path `storage` is rooted at: config, timeline (active
    /// and archived) and the read schema.
    pub async fn open(storage: Arc<dyn Storage>) -> Result<Self> {
        let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
        let view = FileSystemView::open(storage.clone())
            .await
            .map_err(TableError::from_fsview)?;
        let schema = schema::resolve_read_schema(&storage, &config, &view).await?;
        let ordering_field = config.ordering_fields().into_iter().next();
        let mode = match config.record_merge_mode()? {
            Some(RecordMergeMode::EventTimeOrdering) => Some(MergeMode::EventTime),
            Some(RecordMergeMode::CommitTimeOrdering) => Some(MergeMode::CommitTime),
            Some(RecordMergeMode::Custom) => None,
            None if ordering_field.is_some() => Some(MergeMode::EventTime),
            None => Some(MergeMode::CommitTime),
        };
        Ok(TableReader {
            storage,
            config,
            view,
            schema,
            mode,
            ordering_field,
        })
    }

    /// The read schema: meta columns (when the table populates them) then data columns.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The table config.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// The file-system view the reader plans with.
    pub fn view(&self) -> &FileSystemView {
        &self.view
    }

    /// The latest state (`as_of == None`) or the state as of an instant (time travel by
    /// requested time), merged per file group.
    pub async fn snapshot(&self, as_of: Option<&InstantTime>) -> Result<Vec<RecordBatch>> {
        let slices = self
            .view
            .latest_file_slices(None, as_of)
            .await
            .map_err(TableError::from_fsview)?;
        self.read_slices(&slices, as_of, false).await
    }

    /// Base files only (read-optimized query of a merge-on-read table).
    pub async fn read_optimized(&self, as_of: Option<&InstantTime>) -> Result<Vec<RecordBatch>> {
        let slices = self
            .view
            .latest_file_slices(None, as_of)
            .await
            .map_err(TableError::from_fsview)?;
        self.read_slices(&slices, as_of, true).await
    }

    /// The records written by instants that completed in `(start, end]` (`None`: open bound),
    /// in their latest state as of `end`.
    pub async fn incremental(
        &self,
        start: Option<&InstantTime>,
        end: Option<&InstantTime>,
    ) -> Result<Vec<RecordBatch>> {
        let inc = self
            .view
            .completed_between(start, end)
            .await
            .map_err(TableError::from_fsview)?;
        let admitted: BTreeSet<String> = inc
            .instants
            .iter()
            .map(|i| i.requested_time.to_string())
            .collect();
        if admitted.is_empty() {
            return Ok(Vec::new());
        }
        let batches = self.read_slices(&inc.file_slices, None, false).await?;
        let mut out = Vec::new();
        for b in batches {
            let Some(col) = b.column_by_name(meta::COMMIT_TIME) else {
                return Err(TableError::Unsupported {
                    reason: "incremental queries need the _hoodie_commit_time column".into(),
                });
            };
            let col = arrow::compute::cast(col, &DataType::Utf8).map_err(|e| {
                TableError::Unsupported {
                    reason: format!("incremental filter: {e}"),
                }
            })?;
            let keep: BooleanArray = col
                .as_string::<i32>()
                .iter()
                .map(|v| Some(v.is_some_and(|t| admitted.contains(t))))
                .collect();
            let filtered = arrow::compute::filter_record_batch(&b, &keep).map_err(|e| {
                TableError::Unsupported {
                    reason: format!("incremental filter: {e}"),
                }
            })?;
            if filtered.num_rows() > 0 {
                out.push(filtered);
            }
        }
        Ok(out)
    }

    async fn read_slices(
        &self,
        slices: &[FileSlice],
        as_of: Option<&InstantTime>,
        base_only: bool,
    ) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        for slice in slices {
            if let Some(b) = self.read_slice(slice, as_of, base_only).await? {
                if b.num_rows() > 0 {
                    out.push(b);
                }
            }
        }
        Ok(out)
    }

    /// Reads and merges one file slice.
    pub async fn read_slice(
        &self,
        slice: &FileSlice,
        as_of: Option<&InstantTime>,
        base_only: bool,
    ) -> Result<Option<RecordBatch>> {
        let mut base = Vec::new();
        if let Some(path) = slice.base_file_path() {
            check_base_file_format(&path)?;
            for b in read_base_file(self.storage.clone(), &path, None).await? {
                base.push(conform_batch(&b, &self.schema, &path)?);
            }
        }
        let mut parts: Vec<(String, LogPart)> = Vec::new();
        if !base_only {
            for path in slice.log_file_paths() {
                let bytes = self.storage.get(&path).await?.0;
                let contents = read_log_bytes(&bytes, &path, ReadMode::Lenient)?;
                for block in contents.blocks {
                    let Some(instant) = block.instant_time().map(str::to_string) else {
                        continue;
                    };
                    let Ok(time) = InstantTime::parse(&instant) else {
                        continue;
                    };
                    if !self.view.is_committed(&time) || as_of.is_some_and(|a| &time > a) {
                        continue;
                    }
                    match block.block_type {
                        BlockType::AvroData | BlockType::ParquetData => {
                            for b in decode_data_block(&block, &path, Some(&self.schema))? {
                                parts.push((instant.clone(), LogPart::Rows(b)));
                            }
                        }
                        BlockType::Delete => {
                            let d = decode_delete_block(&block, &path)?;
                            parts.push((instant, LogPart::Deletes(d)));
                        }
                        BlockType::Command
                            if block.command_type() == Some(CommandBlockType::Rollback) =>
                        {
                            if let Some(target) = block.rollback_target() {
                                parts.retain(|(t, _)| t != target);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        let context = format!(
            "file group {} in partition {:?}",
            slice.file_id, slice.partition
        );
        if parts.is_empty() {
            return merge_slice(
                &self.schema,
                MergeMode::CommitTime,
                None,
                base,
                Vec::new(),
                &context,
            );
        }
        let mode = self.mode.ok_or_else(|| TableError::Unsupported {
            reason: format!(
                "{context} has log files, and merge mode CUSTOM is not supported by arbor"
            ),
        })?;
        merge_slice(
            &self.schema,
            mode,
            self.ordering_field.as_deref(),
            base,
            parts.into_iter().map(|(_, p)| p).collect(),
            &context,
        )
    }
}
