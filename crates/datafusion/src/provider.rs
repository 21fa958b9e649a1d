//! [`ArborTableProvider`]: one Hudi table (main or a branch, at a tag, as of an instant, an
//! incremental range, read-optimized) as a DataFusion table.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arbor_storage::{open_storage, LockProvider, Storage};
use arbor_table::read::{parse_time, ReadOptions, TableReader};
use arbor_table::{Table, WriteOperation};
use arbor_timeline::layout::{open_cloned, RegistryOpener};
use arbor_timeline::InstantTime;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::{Result as DfResult, Statistics};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use crate::error::{ArborSqlError, Result};
use crate::filters::to_partition_filters;
use crate::object_store::StorageObjectStore;
use crate::options::ArborTableOptions;
use crate::scan::{plan_scan, ScanRequest};
use crate::sink::ArborSink;

/// Distinguishes the object-store URLs of the providers of one process.
static NEXT_STORE: AtomicU64 = AtomicU64::new(0);

/// A Hudi table as a DataFusion [`TableProvider`].
///
/// Guarantees:
/// - `SELECT` returns the rows `arbor read` (and hudi-rs) return for the same state: the
///   provider's schema is the table's read schema (meta columns first) when it was opened, and
///   every scan reads the state the options name as it is at that moment (main and branches
///   move with their writes; tags, as-of times and incremental ranges do not);
/// - filters on partition fields are exact (partitions are pruned by their path values and
///   rows filtered); every other filter prunes what it can (partition and column stats, the
///   record and secondary indexes, parquet row groups) and DataFusion applies it to the rows;
/// - `INSERT INTO` writes one commit per statement on main or the branch, through the same
///   write path as `arbor write` (validation, exact conversion, the table lock); on any error
///   nothing is committed. Tags, as-of times and incremental ranges refuse writes.
#[derive(Debug)]
pub struct ArborTableProvider {
    location: String,
    options: ArborTableOptions,
    storage: Arc<dyn Storage>,
    schema: SchemaRef,
    partition_fields: Vec<String>,
    drops_partition_columns: bool,
    store_url: ObjectStoreUrl,
    store: Arc<StorageObjectStore>,
    statistics: Option<Statistics>,
    lock: Option<Arc<dyn LockProvider>>,
    warnings: Vec<String>,
    writable_version: bool,
}

impl ArborTableProvider {
    /// Opens the table at `location` (a local path, `file://`, or any URL of arbor-storage's
    /// registry: `s3://`, `az://`, `gs://`, `memory://`; a shallow clone reads through its
    /// sources) in the state `options` name; a local path must be an existing directory (it is
    /// never created). Fails, naming the location, when the options contradict each other, the
    /// table, branch or tag does not exist, or an as-of time is malformed or before the table's
    /// first commit.
    pub async fn try_new(location: &str, options: ArborTableOptions) -> Result<Self> {
        options.validate()?;
        // Opening local storage creates its directory: a mistyped path must fail, not appear.
        let local = match location.strip_prefix("file://") {
            Some(rest) => Some(rest),
            None if location.contains("://") => None,
            None => Some(location),
        };
        if let Some(path) = local.filter(|p| !std::path::Path::new(p).is_dir()) {
            return Err(ArborSqlError::storage(
                location,
                arbor_storage::StorageError::InvalidLocation {
                    url: path.to_string(),
                    reason: "no such directory".to_string(),
                },
            ));
        }
        let own = open_storage(location, &options.storage)
            .map_err(|e| ArborSqlError::storage(location, e))?;
        let opener = RegistryOpener::new(options.storage.clone());
        let storage = open_cloned(own, location, &opener)
            .await
            .map_err(|e| ArborSqlError::table(location, e.into()))?;
        Self::from_storage(location, storage, options).await
    }

    /// [`ArborTableProvider::try_new`] over storage already opened at the table's base path
    /// (`location` names it in messages).
    pub async fn from_storage(
        location: &str,
        storage: Arc<dyn Storage>,
        options: ArborTableOptions,
    ) -> Result<Self> {
        options.validate()?;
        let (reader, read_options) = open_state(location, &storage, &options).await?;
        let schema = reader.schema().clone();
        let partition_fields = reader
            .config()
            .partition_fields()
            .into_iter()
            .map(|f| f.split(':').next().unwrap_or_default().to_string())
            .collect();
        let drops_partition_columns = reader
            .config()
            .get("hoodie.datasource.write.drop.partition.columns")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let writable_version = reader.config().version().is_writable();
        let statistics = table_statistics(&reader, &read_options, &schema).await;
        let warnings = match (&options.as_of, read_options.get_as_of()) {
            (Some(given), Some(instant)) => reader
                .as_of_clock_note(instant)
                .map(|note| format!("as_of {given}: {note}"))
                .into_iter()
                .collect(),
            _ => Vec::new(),
        };
        let n = NEXT_STORE.fetch_add(1, Ordering::Relaxed);
        let store_url = ObjectStoreUrl::parse(format!("arbor://table-{n}"))?;
        Ok(ArborTableProvider {
            location: location.to_string(),
            store: Arc::new(StorageObjectStore::new(storage.clone())),
            options,
            storage,
            schema,
            partition_fields,
            drops_partition_columns,
            store_url,
            statistics,
            lock: None,
            warnings,
            writable_version,
        })
    }

    /// Writes take this lock provider instead of the one the table's `hoodie.write.lock.*`
    /// properties name (or the storage lock under `.hoodie/.locks`).
    pub fn with_lock_provider(mut self, lock: Arc<dyn LockProvider>) -> Self {
        self.lock = Some(lock);
        self
    }

    /// False for a table of a version arbor reads but does not write (6, Hudi 0.x): it reads
    /// like any other, and `INSERT` fails with the version's error naming `arbor upgrade`.
    pub fn is_writable_version(&self) -> bool {
        self.writable_version
    }

    /// The table location as given.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// What a user should know about the state the provider reads, one sentence each: an
    /// `as_of` time before the latest commit of a table whose clock runs ahead of this
    /// machine ([`TableReader::as_of_clock_note`]). Empty for most tables.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The options the provider was opened with.
    pub fn options(&self) -> &ArborTableOptions {
        &self.options
    }

    /// Whether `filter` is applied exactly by the scan: it translates to arbor filters on
    /// partition fields only.
    fn is_exact(&self, filter: &Expr) -> bool {
        // With the partition columns dropped from the data files, the rows hold nulls there:
        // DataFusion filters what the rows say.
        if self.drops_partition_columns {
            return false;
        }
        to_partition_filters(filter, &self.schema).is_some_and(|fs| {
            !fs.is_empty()
                && fs
                    .iter()
                    .all(|f| self.partition_fields.iter().any(|p| p == &f.field))
        })
    }

    /// The table opened for writing on main or the branch, with its lock.
    pub(crate) async fn writable_table(&self) -> Result<Table> {
        if let Some(reason) = self.options.read_only_reason() {
            return Err(ArborSqlError::ReadOnly {
                location: self.location.clone(),
                reason,
            });
        }
        let table =
            arbor_branching::open_table(self.storage.clone(), self.options.branch.as_deref())
                .await
                .map_err(|e| ArborSqlError::branching(&self.location, e))?;
        match &self.lock {
            Some(l) => Ok(table.with_lock_provider(l.clone())),
            None => table
                .with_configured_lock()
                .await
                .map_err(|e| ArborSqlError::table(&self.location, e)),
        }
    }
}

/// The reader of the state `options` name and the query options that read it.
pub(crate) async fn open_state(
    location: &str,
    storage: &Arc<dyn Storage>,
    options: &ArborTableOptions,
) -> Result<(TableReader, ReadOptions)> {
    let branch = options.branch.as_deref();
    let mut read = ReadOptions::new().data_skipping(options.data_skipping);
    let reader = match &options.tag {
        Some(tag) => {
            let (reader, instant) = arbor_branching::tag_reader(storage.clone(), branch, tag)
                .await
                .map_err(|e| ArborSqlError::branching(location, e))?;
            read = read.as_of(instant);
            reader
        }
        None => arbor_branching::open_reader(storage.clone(), branch)
            .await
            .map_err(|e| ArborSqlError::branching(location, e))?,
    };
    let zone = reader.config().timeline_timezone();
    let time = |key: &str, text: &str| -> Result<InstantTime> {
        parse_time(text, zone).map_err(|e| ArborSqlError::InvalidOption {
            key: key.to_string(),
            reason: e.to_string(),
        })
    };
    if let Some(t) = &options.as_of {
        let instant = time("as_of", t)?;
        reader
            .check_not_before_first(&instant)
            .map_err(|e| ArborSqlError::InvalidOption {
                key: "as_of".to_string(),
                reason: e.to_string(),
            })?;
        read = read.as_of(instant);
    }
    if options.incremental {
        let start = match &options.incremental_start {
            Some(s) => Some(time("incremental_start", s)?),
            None => None,
        };
        let end = match &options.incremental_end {
            Some(s) => Some(time("incremental_end", s)?),
            None => None,
        };
        read = read.incremental(start, end);
    }
    read = read.read_optimized(options.read_optimized);
    Ok((reader, read))
}

/// The table's size as planning sees it without reading data: the bytes of the file slices
/// read (inexact: merged log records are counted with their base rows), when the table lists
/// its files through the metadata table (else `None`: a statistics call never lists
/// directories).
async fn table_statistics(
    reader: &TableReader,
    read: &ReadOptions,
    schema: &SchemaRef,
) -> Option<Statistics> {
    let lists_through_mdt = reader
        .config()
        .metadata_partitions()
        .iter()
        .any(|p| p == arbor_mdt::FILES_PARTITION);
    if !lists_through_mdt || read.get_incremental().is_some() {
        return None;
    }
    let slices = reader
        .view()
        .latest_file_slices(None, read.get_as_of())
        .await
        .ok()?;
    let bytes: u64 = slices
        .iter()
        .map(|s| {
            let base = s.base_file.as_ref().map_or(0, |b| b.size);
            let logs = if read.is_read_optimized() {
                0
            } else {
                s.log_files.iter().map(|l| l.size).sum()
            };
            base + logs
        })
        .sum();
    let mut stats = Statistics::new_unknown(schema);
    stats.total_byte_size = Precision::Inexact(usize::try_from(bytes).unwrap_or(usize::MAX));
    Some(stats)
}

#[async_trait]
impl TableProvider for ArborTableProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if self.is_exact(f) {
                    TableProviderFilterPushDown::Exact
                } else {
                    TableProviderFilterPushDown::Inexact
                }
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        self.statistics.clone()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let (reader, options) = open_state(&self.location, &self.storage, &self.options).await?;
        state
            .runtime_env()
            .register_object_store(self.store_url.as_ref(), self.store.clone());
        let exact = filters
            .iter()
            .filter(|f| self.is_exact(f))
            .cloned()
            .collect();
        plan_scan(
            state,
            ScanRequest {
                location: &self.location,
                reference: self.options.describe(),
                schema: &self.schema,
                reader,
                options,
                projection,
                filters,
                exact,
                limit,
                store_url: &self.store_url,
            },
        )
        .await
    }

    async fn insert_into(
        &self,
        state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let operation = match insert_op {
            InsertOp::Append => self.options.write_operation,
            InsertOp::Overwrite => WriteOperation::InsertOverwrite,
            InsertOp::Replace => {
                return Err(ArborSqlError::InvalidInsert {
                    location: self.location.clone(),
                    reason: "REPLACE INTO is not supported; use INSERT INTO (an upsert by \
                             record key) or INSERT OVERWRITE"
                        .to_string(),
                }
                .into())
            }
        };
        if let Some(reason) = self.options.read_only_reason() {
            return Err(ArborSqlError::ReadOnly {
                location: self.location.clone(),
                reason,
            }
            .into());
        }
        if !crate::insert_rule::is_registered(state) {
            return Err(ArborSqlError::InvalidInsert {
                location: self.location.clone(),
                reason: "this session would convert the values with DataFusion's casts, which \
                         round and truncate; make it with arbor_datafusion::arbor_session or \
                         call register_arbor(&ctx) first"
                    .to_string(),
            }
            .into());
        }
        let table = self.writable_table().await?;
        let sink = ArborSink::new(self.location.clone(), table, operation, self.schema.clone());
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), None)))
    }
}
