//! `Table`: the handle writers use.

use std::sync::Arc;

use arbor_storage::{LockProvider, Storage};
use arbor_timeline::TableConfig;
use arrow::record_batch::RecordBatch;

use super::options::{CommitResult, CreateOptions, WriteOperation, WriteOptions};
use crate::error::{Result, TableError};
use crate::read::TableReader;

/// A Hudi table opened for writing (main branch).
#[derive(Debug, Clone)]
pub struct Table {
    storage: Arc<dyn Storage>,
    config: TableConfig,
    lock: Option<Arc<dyn LockProvider>>,
    options: WriteOptions,
}

impl Table {
    /// Creates a new version-8 table at the storage root (fails if one exists).
    pub async fn create(storage: Arc<dyn Storage>, options: CreateOptions) -> Result<Table> {
        let _ = (storage, options);
        Err(TableError::Unsupported {
            reason: "Table::create is being written".into(),
        })
    }

    /// Opens an existing table.
    pub async fn open(storage: Arc<dyn Storage>) -> Result<Table> {
        let _ = storage;
        Err(TableError::Unsupported {
            reason: "Table::open is being written".into(),
        })
    }

    /// Uses `lock` as the table lock (default: an object-store lock under `.hoodie/.locks`).
    pub fn with_lock_provider(mut self, lock: Arc<dyn LockProvider>) -> Self {
        self.lock = Some(lock);
        self
    }

    /// Replaces the write options.
    pub fn with_write_options(mut self, options: WriteOptions) -> Self {
        self.options = options;
        self
    }

    /// The table config.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// Writes `batches` (data columns only, matching the table schema) as one commit.
    pub async fn write(
        &self,
        operation: WriteOperation,
        batches: Vec<RecordBatch>,
    ) -> Result<CommitResult> {
        let _ = (operation, batches, &self.storage, &self.options);
        Err(TableError::Unsupported {
            reason: "Table::write is being written".into(),
        })
    }

    /// Deletes whole partitions (a `delete_partition` replacecommit).
    pub async fn delete_partitions(&self, partitions: &[String]) -> Result<CommitResult> {
        let _ = partitions;
        Err(TableError::Unsupported {
            reason: "Table::delete_partitions is being written".into(),
        })
    }

    /// A reader of the table's current state.
    pub async fn reader(&self) -> Result<TableReader> {
        TableReader::open(self.storage.clone()).await
    }
}
