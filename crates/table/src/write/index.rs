//! How record keys find their file group: the [`Index`] trait and the [`SimpleIndex`].

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use arbor_format::base::read_base_file;
use arbor_fsview::FileSlice;
use arbor_storage::Storage;
use arbor_timeline::InstantTime;
use arrow::array::RecordBatch;
use async_trait::async_trait;
use futures::StreamExt;

use super::stored_keys::StoredKeys;
use crate::error::{Result, TableError};
use crate::read::{OrderKey, TableReader};

/// Where an existing record lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordLocation {
    /// The partition path.
    pub partition: String,
    /// The file group.
    pub file_id: String,
    /// The base instant of the latest slice holding the record.
    pub base_instant: InstantTime,
}

/// Looks up which file group holds each record key.
///
/// Contract: for every key of `keys` that exists in `partition` in the table state the index
/// was built on (a committed, not deleted record of a latest file slice that is not replaced),
/// the answer maps it to the file group holding it; absent keys are not in the map. An
/// implementation never reports a file group that does not hold the key.
#[async_trait]
pub trait Index: Debug + Send + Sync {
    /// The locations of those `keys` that exist in `partition`.
    async fn locate(
        &self,
        partition: &str,
        keys: &[String],
    ) -> Result<HashMap<String, RecordLocation>>;

    /// Like [`Index::locate`], with the ordering value of each located key's current record
    /// (the value of `ordering_field` in the merged latest slice; `None` when the index does
    /// not know it, which writers treat as "the new record wins"). The default implementation
    /// knows no ordering values.
    async fn locate_with_ordering(
        &self,
        partition: &str,
        keys: &[String],
        ordering_field: &str,
    ) -> Result<HashMap<String, (RecordLocation, Option<OrderKey>)>> {
        let _ = ordering_field;
        Ok(self
            .locate(partition, keys)
            .await?
            .into_iter()
            .map(|(k, l)| (k, (l, None)))
            .collect())
    }

    /// Every file group of `partition` holding each of `keys`, for deletes: a table written by
    /// inserts that did not look keys up (Spark SQL `INSERT`) may hold one key in several file
    /// groups, and a delete must remove every copy, as Java's index tags every one. The default
    /// implementation (an index that keeps one location per key) answers [`Index::locate`].
    async fn locate_all(
        &self,
        partition: &str,
        keys: &[String],
    ) -> Result<HashMap<String, Vec<RecordLocation>>> {
        Ok(self
            .locate(partition, keys)
            .await?
            .into_iter()
            .map(|(k, l)| (k, vec![l]))
            .collect())
    }
}

/// An index that reads the record keys of the latest file slices of the asked partition: the
/// `_hoodie_record_key` column of base files (the key columns through the key generator for a
/// table without meta fields, see [`StoredKeys`]), or the merged slice when it has log files (so
/// keys inserted or deleted in logs are seen).
#[derive(Debug, Clone)]
pub struct SimpleIndex {
    storage: Arc<dyn Storage>,
    reader: Arc<TableReader>,
    parallelism: usize,
}

impl SimpleIndex {
    /// An index over the state `reader` (opened on `storage`) was opened at, reading as many
    /// file slices at a time as the machine has CPUs.
    pub fn new(storage: Arc<dyn Storage>, reader: Arc<TableReader>) -> Self {
        let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());
        SimpleIndex {
            storage,
            reader,
            parallelism,
        }
    }

    /// The same index reading at most `slices` file slices at a time (each on its own task of
    /// the runtime); answers do not depend on it.
    pub fn with_parallelism(mut self, slices: std::num::NonZeroUsize) -> Self {
        self.parallelism = slices.get();
        self
    }

    /// The keys of one latest slice, in file order.
    pub async fn slice_keys(
        storage: &Arc<dyn Storage>,
        reader: &TableReader,
        slice: &FileSlice,
    ) -> Result<Vec<String>> {
        Ok(Self::slice_records(storage, reader, slice, None)
            .await?
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    }

    /// The keys of one latest slice, in file order, each with the ordering value of its
    /// current record when `ordering_field` is given (`OrderKey::Default` for a null value or
    /// a base file without that column); `None` without `ordering_field`. A slice without
    /// log files is read projected to the record key and ordering columns.
    pub async fn slice_records(
        storage: &Arc<dyn Storage>,
        reader: &TableReader,
        slice: &FileSlice,
        ordering_field: Option<&str>,
    ) -> Result<Vec<(String, Option<OrderKey>)>> {
        let source = StoredKeys::for_table(reader.config())?;
        let batches: Vec<RecordBatch> = if slice.log_files.is_empty() {
            match slice.base_file_path() {
                Some(path) => {
                    let key_only = source.columns();
                    match ordering_field {
                        Some(f) => {
                            let mut projection = key_only.clone();
                            if !projection.iter().any(|c| c == f) {
                                projection.push(f.to_string());
                            }
                            match read_base_file(
                                storage.clone(),
                                &path,
                                slice.base_file_size(),
                                Some(&projection),
                            )
                            .await
                            {
                                Ok(b) => b,
                                // A base file written before the ordering column existed (or
                                // any other failure, which the second read reports).
                                Err(_) => {
                                    read_base_file(
                                        storage.clone(),
                                        &path,
                                        slice.base_file_size(),
                                        Some(&key_only),
                                    )
                                    .await?
                                }
                            }
                        }
                        None => {
                            read_base_file(
                                storage.clone(),
                                &path,
                                slice.base_file_size(),
                                Some(&key_only),
                            )
                            .await?
                        }
                    }
                }
                None => Vec::new(),
            }
        } else {
            reader
                .read_slice(slice, None, false)
                .await?
                .into_iter()
                .collect()
        };
        let context = format!(
            "file group {} in partition {:?}",
            slice.file_id, slice.partition
        );
        let mut out = Vec::new();
        for b in &batches {
            let keys = source.keys(b, &context)?;
            let ordering = ordering_field.map(|f| b.column_by_name(f));
            for (i, key) in keys.into_iter().enumerate() {
                if let Some(key) = key {
                    let order = ordering.map(|c| match c {
                        Some(c) => OrderKey::from_column(c, i),
                        None => OrderKey::Default,
                    });
                    out.push((key, order));
                }
            }
        }
        Ok(out)
    }

    async fn locate_in(
        &self,
        partition: &str,
        keys: &[String],
        ordering_field: Option<&str>,
    ) -> Result<HashMap<String, (RecordLocation, Option<OrderKey>)>> {
        let mut out = HashMap::new();
        for (key, mut found) in self.locate_every(partition, keys, ordering_field).await? {
            // One location per key, the last in slice order (as before duplicates were seen).
            if let Some(last) = found.pop() {
                out.insert(key, last);
            }
        }
        Ok(out)
    }

    /// Every (location, ordering value) of each of `keys` in the latest slices of
    /// `partition`, in slice order, one entry per file group holding the key.
    async fn locate_every(
        &self,
        partition: &str,
        keys: &[String],
        ordering_field: Option<&str>,
    ) -> Result<HashMap<String, Vec<(RecordLocation, Option<OrderKey>)>>> {
        let mut out: HashMap<String, Vec<(RecordLocation, Option<OrderKey>)>> = HashMap::new();
        if keys.is_empty() {
            return Ok(out);
        }
        let wanted: std::collections::HashSet<&str> = keys.iter().map(String::as_str).collect();
        let slices = self
            .reader
            .view()
            .latest_file_slices(Some(partition), None)
            .await
            .map_err(TableError::from_fsview)?;
        // The slices are read `parallelism` at a time, each on a task of its own (decoding
        // runs on every core), and consumed in slice order.
        let ordering = ordering_field.map(str::to_string);
        let reads = slices.iter().cloned().map(|read| {
            let (storage, reader, ordering) =
                (self.storage.clone(), self.reader.clone(), ordering.clone());
            let what = format!(
                "file group {} in partition {:?}",
                read.file_id, read.partition
            );
            let task = tokio::spawn(async move {
                Self::slice_records(&storage, &reader, &read, ordering.as_deref()).await
            });
            async move {
                task.await.unwrap_or_else(|e| {
                    Err(TableError::Unsupported {
                        reason: format!("reading the keys of {what} stopped unexpectedly: {e}"),
                    })
                })
            }
        });
        let mut records_of = futures::stream::iter(reads).buffered(self.parallelism.max(1));
        for slice in &slices {
            let records = records_of
                .next()
                .await
                .ok_or_else(|| TableError::Unsupported {
                    reason: format!(
                        "no keys read for file group {} in partition {:?}",
                        slice.file_id, slice.partition
                    ),
                })??;
            for (key, order) in records {
                if wanted.contains(key.as_str()) {
                    let location = RecordLocation {
                        partition: slice.partition.clone(),
                        file_id: slice.file_id.clone(),
                        base_instant: slice.base_instant.clone(),
                    };
                    let found = out.entry(key).or_default();
                    match found
                        .iter_mut()
                        .find(|(l, _)| l.file_id == location.file_id)
                    {
                        Some(same_group) => same_group.1 = order,
                        None => found.push((location, order)),
                    }
                }
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl Index for SimpleIndex {
    async fn locate(
        &self,
        partition: &str,
        keys: &[String],
    ) -> Result<HashMap<String, RecordLocation>> {
        Ok(self
            .locate_in(partition, keys, None)
            .await?
            .into_iter()
            .map(|(k, (l, _))| (k, l))
            .collect())
    }

    async fn locate_with_ordering(
        &self,
        partition: &str,
        keys: &[String],
        ordering_field: &str,
    ) -> Result<HashMap<String, (RecordLocation, Option<OrderKey>)>> {
        self.locate_in(partition, keys, Some(ordering_field)).await
    }

    async fn locate_all(
        &self,
        partition: &str,
        keys: &[String],
    ) -> Result<HashMap<String, Vec<RecordLocation>>> {
        Ok(self
            .locate_every(partition, keys, None)
            .await?
            .into_iter()
            .map(|(k, found)| (k, found.into_iter().map(|(l, _)| l).collect()))
            .collect())
    }
}

/// The index of a delete on a table with a record index whose keys may be duplicated (see
/// `read::skipping::unique_keys`): the record index keeps one location per key, so
/// [`Index::locate_all`] also scans the partition ([`SimpleIndex`]) and answers every file
/// group holding the key. Every other lookup is the record index's.
#[derive(Debug)]
pub struct EveryCopyIndex<'a> {
    /// The record index.
    pub primary: &'a dyn Index,
    /// The partition scan.
    pub scan: &'a SimpleIndex,
}

#[async_trait]
impl Index for EveryCopyIndex<'_> {
    async fn locate(
        &self,
        partition: &str,
        keys: &[String],
    ) -> Result<HashMap<String, RecordLocation>> {
        self.primary.locate(partition, keys).await
    }

    async fn locate_with_ordering(
        &self,
        partition: &str,
        keys: &[String],
        ordering_field: &str,
    ) -> Result<HashMap<String, (RecordLocation, Option<OrderKey>)>> {
        self.primary
            .locate_with_ordering(partition, keys, ordering_field)
            .await
    }

    async fn locate_all(
        &self,
        partition: &str,
        keys: &[String],
    ) -> Result<HashMap<String, Vec<RecordLocation>>> {
        let mut out = self.primary.locate_all(partition, keys).await?;
        for (key, found) in self.scan.locate_all(partition, keys).await? {
            let all = out.entry(key).or_default();
            for loc in found {
                if !all.iter().any(|l| l.file_id == loc.file_id) {
                    all.push(loc);
                }
            }
        }
        Ok(out)
    }
}
