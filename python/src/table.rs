//! [`Table`]: one Hudi table, by location; every method opens what it needs (as the CLI does),
//! releases the GIL while arbor works, and raises `ArborError` with the CLI's message.

use std::collections::HashMap;
use std::sync::Arc;

use arbor_branching::clone::{clone_table, CloneAt, CloneRequest};
use arbor_branching::{BranchSource, TagFilter};
use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_storage::{open_storage, Storage, StorageOptions};
use arbor_table::read::{parse_time, PartitionFilter, ReadOptions, TableReader};
use arbor_table::ttl::{PolicyScope, Retention, TtlPolicy, TtlStrategy};
use arbor_table::txn::ttl::TtlRunOptions;
use arbor_table::{CommitResult, CreateOptions, WriteOperation};
use arbor_timeline::config::{RecordMergeMode, TableType, TableVersion};
use arbor_timeline::layout::{open_cloned, RegistryOpener};
use arbor_timeline::InstantTime;
use arrow_array::ffi_stream::ArrowArrayStreamReader;
use arrow_array::RecordBatchReader;
use arrow_pyarrow::{PyArrowType, Table as PyTable};
use arrow_schema::Schema;
use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::{collect_input, plain_batches, StreamReader};
use crate::errors::{at, bad_argument};
use crate::runtime::block_on;

/// A Hudi table at a location (a local path or a URL of arbor's storage registry: `s3://`,
/// `az://`, `gs://`, `memory://`), with its storage options (`s3.endpoint`, ...).
#[pyclass(module = "arbor._native", name = "Table", frozen, skip_from_py_object)]
#[derive(Clone)]
pub struct Table {
    location: String,
    options: StorageOptions,
}

fn storage_options(given: Option<HashMap<String, String>>) -> PyResult<StorageOptions> {
    let pairs: Vec<(String, String)> = given.unwrap_or_default().into_iter().collect();
    StorageOptions::from_pairs(pairs).map_err(|e| bad_argument("storage_options", e))
}

pub(crate) fn write_operation(op: &str) -> PyResult<WriteOperation> {
    Ok(
        match op.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "insert" => WriteOperation::Insert,
            "bulk_insert" => WriteOperation::BulkInsert,
            "upsert" => WriteOperation::Upsert,
            "delete" => WriteOperation::Delete,
            "insert_overwrite" => WriteOperation::InsertOverwrite,
            "insert_overwrite_table" => WriteOperation::InsertOverwriteTable,
            other => {
                return Err(bad_argument(
                    "op",
                    format!(
                        "{other:?} is not one of insert, bulk_insert, upsert, delete, \
                     insert_overwrite, insert_overwrite_table"
                    ),
                ))
            }
        },
    )
}

/// `None` for main.
fn branch_of(branch: Option<&str>) -> Option<&str> {
    branch.filter(|b| *b != arbor_timeline::metaroot::MAIN)
}

pub(crate) fn commit_dict<'py>(py: Python<'py>, c: &CommitResult) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("instant", c.instant.to_string())?;
    d.set_item("completion_time", c.completion_time.to_string())?;
    d.set_item("action", c.action.to_string())?;
    d.set_item("operation", format!("{:?}", c.operation))?;
    d.set_item("inserted", c.inserted)?;
    d.set_item("updated", c.updated)?;
    d.set_item("deleted", c.deleted)?;
    d.set_item("files_written", c.files_written)?;
    Ok(d)
}

/// What a read selects.
pub(crate) struct ReadSpec {
    pub(crate) columns: Option<Vec<String>>,
    pub(crate) filters: Vec<String>,
    pub(crate) branch: Option<String>,
    pub(crate) tag: Option<String>,
    pub(crate) as_of: Option<String>,
    pub(crate) incremental: Option<(Option<String>, Option<String>)>,
    pub(crate) read_optimized: bool,
}

impl Table {
    async fn storage(&self) -> Result<Arc<dyn Storage>, String> {
        let own = open_storage(&self.location, &self.options).map_err(|e| e.to_string())?;
        let opener = RegistryOpener::new(self.options.clone());
        open_cloned(own, &self.location, &opener)
            .await
            .map_err(|e| e.to_string())
    }

    /// The location.
    pub(crate) fn location(&self) -> &str {
        &self.location
    }

    /// The table opened for writing on `branch` (main for `None`) with its configured lock.
    pub(crate) async fn writable(
        &self,
        branch: Option<&str>,
    ) -> Result<arbor_table::Table, String> {
        let storage = self.storage().await?;
        let table = arbor_branching::open_table(storage, branch_of(branch))
            .await
            .map_err(|e| e.to_string())?;
        table
            .with_configured_lock()
            .await
            .map_err(|e| e.to_string())
    }

    /// The reader and options a read selects.
    pub(crate) async fn reader(
        &self,
        spec: &ReadSpec,
    ) -> Result<(TableReader, ReadOptions), String> {
        let storage = self.storage().await?;
        let branch = branch_of(spec.branch.as_deref());
        let mut options = ReadOptions::new();
        let reader = match &spec.tag {
            Some(tag) => {
                if spec.as_of.is_some() || spec.incremental.is_some() {
                    return Err("tag cannot be combined with as_of or incremental".into());
                }
                let (reader, instant) = arbor_branching::tag_reader(storage, branch, tag)
                    .await
                    .map_err(|e| e.to_string())?;
                options = options.as_of(instant);
                reader
            }
            None => arbor_branching::open_reader(storage, branch)
                .await
                .map_err(|e| e.to_string())?,
        };
        let zone = reader.config().timeline_timezone();
        let time = |name: &str, t: &str| parse_time(t, zone).map_err(|e| format!("{name}: {e}"));
        if let Some(t) = &spec.as_of {
            let instant = time("as_of", t)?;
            reader
                .check_not_before_first(&instant)
                .map_err(|e| format!("as_of: {e}"))?;
            options = options.as_of(instant);
        }
        if let Some((start, end)) = &spec.incremental {
            let start = start
                .as_deref()
                .map(|s| time("incremental start", s))
                .transpose()?;
            let end = end
                .as_deref()
                .map(|s| time("incremental end", s))
                .transpose()?;
            options = options.incremental(start, end);
        }
        if let Some(columns) = &spec.columns {
            options = options.columns(columns.clone());
        }
        let filters = spec
            .filters
            .iter()
            .map(|f| PartitionFilter::parse(f).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((
            reader,
            options
                .partition_filters(filters)
                .read_optimized(spec.read_optimized),
        ))
    }
}

pub(crate) fn filters_of(filter: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let Some(f) = filter else {
        return Ok(Vec::new());
    };
    if let Ok(one) = f.extract::<String>() {
        return Ok(vec![one]);
    }
    f.extract::<Vec<String>>().map_err(|_| {
        bad_argument(
            "filter",
            "a predicate string (\"city = sf\", \"fare >= 20\", \"x IS NULL\") or a list of them",
        )
    })
}

#[pymethods]
impl Table {
    /// Opens the table at `path` (it must exist).
    #[new]
    #[pyo3(signature = (path, storage_options=None))]
    fn new(
        py: Python<'_>,
        path: String,
        storage_options: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let table = Table {
            location: path,
            options: self::storage_options(storage_options)?,
        };
        let checked: Result<(), String> = py.detach(|| {
            block_on(async {
                let storage = table.storage().await?;
                TableReader::open(storage)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        checked.map_err(|e| at(&table.location, e))?;
        Ok(table)
    }

    /// Creates a table at `path` whose schema is `data`'s, and writes `data`'s rows (if any) as
    /// its first commit.
    #[staticmethod]
    #[pyo3(signature = (path, data, key, partition_by=None, ordering=None, table_type="cow", name=None, table_version=9, storage_options=None, base_format="parquet"))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        path: String,
        data: PyArrowType<ArrowArrayStreamReader>,
        key: Vec<String>,
        partition_by: Option<Vec<String>>,
        ordering: Option<String>,
        table_type: &str,
        name: Option<String>,
        table_version: u32,
        storage_options: Option<HashMap<String, String>>,
        base_format: &str,
    ) -> PyResult<Self> {
        let base_format = match base_format.to_ascii_lowercase().as_str() {
            "parquet" => arbor_table::BaseFormat::Parquet,
            "lance" => arbor_table::BaseFormat::Lance,
            _ => {
                return Err(bad_argument(
                    "base_format",
                    format!("{base_format:?} is not parquet or lance"),
                ))
            }
        };
        let table_type = TableType::parse(table_type).ok_or_else(|| {
            bad_argument("table_type", format!("{table_type:?} is not cow or mor"))
        })?;
        let version = TableVersion::from_code(table_version)
            .filter(|v| v.code() >= 8)
            .ok_or_else(|| {
                bad_argument("table_version", format!("{table_version} is not 8 or 9"))
            })?;
        let reader = data.0;
        let (schema, batches) = py.detach(|| collect_input(reader))?;
        let table = Table {
            location: path,
            options: self::storage_options(storage_options)?,
        };
        let name = name.unwrap_or_else(|| default_name(&table.location));
        let result: Result<(), String> = py.detach(|| {
            block_on(async {
                if let Some(local) = local_path(&table.location) {
                    std::fs::create_dir_all(local).map_err(|e| e.to_string())?;
                }
                let storage =
                    open_storage(&table.location, &table.options).map_err(|e| e.to_string())?;
                let created = arbor_table::Table::create(
                    storage,
                    CreateOptions {
                        name,
                        table_type,
                        record_key_fields: key,
                        partition_fields: partition_by.unwrap_or_default(),
                        hive_style_partitioning: true,
                        merge_mode: ordering
                            .as_ref()
                            .map(|_| RecordMergeMode::EventTimeOrdering),
                        ordering_field: ordering,
                        schema,
                        metadata_table: true,
                        table_version: version,
                        base_format,
                    },
                )
                .await
                .map_err(|e| e.to_string())?;
                if batches.iter().any(|b| b.num_rows() > 0) {
                    created
                        .with_configured_lock()
                        .await
                        .map_err(|e| e.to_string())?
                        .write(WriteOperation::Insert, batches)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            })
            .map_err(|e| e.to_string())?
        });
        result.map_err(|e| at(&table.location, e))?;
        Ok(table)
    }

    /// The table's location.
    #[getter]
    fn path(&self) -> String {
        self.location.clone()
    }

    fn __repr__(&self) -> String {
        format!("arbor.Table({:?})", self.location)
    }

    /// The read schema of `branch` (main by default): meta columns, then data columns.
    #[pyo3(signature = (branch=None))]
    fn schema(&self, py: Python<'_>, branch: Option<String>) -> PyResult<PyArrowType<Schema>> {
        let spec = ReadSpec {
            columns: None,
            filters: Vec::new(),
            branch,
            tag: None,
            as_of: None,
            incremental: None,
            read_optimized: false,
        };
        let schema: Result<Schema, String> = py.detach(|| {
            block_on(async { Ok(self.reader(&spec).await?.0.schema().as_ref().clone()) })
                .map_err(|e| e.to_string())?
        });
        schema.map(PyArrowType).map_err(|e| at(&self.location, e))
    }

    /// Reads main (or `branch`), at `tag`, as of `as_of`, or the incremental range
    /// `incremental=(start, end)`; `columns` in order, rows where every `filter` holds.
    #[pyo3(signature = (columns=None, filter=None, branch=None, tag=None, as_of=None, incremental=None, read_optimized=false))]
    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        py: Python<'_>,
        columns: Option<Vec<String>>,
        filter: Option<&Bound<'_, PyAny>>,
        branch: Option<String>,
        tag: Option<String>,
        as_of: Option<String>,
        incremental: Option<(Option<String>, Option<String>)>,
        read_optimized: bool,
    ) -> PyResult<PyArrowType<PyTable>> {
        let spec = ReadSpec {
            columns,
            filters: filters_of(filter)?,
            branch,
            tag,
            as_of,
            incremental,
            read_optimized,
        };
        let read: Result<PyTable, String> = py.detach(|| {
            block_on(async {
                let (reader, options) = self.reader(&spec).await?;
                let schema = reader.output_schema(&options).map_err(|e| e.to_string())?;
                let batches = reader.read(options).await.map_err(|e| e.to_string())?;
                PyTable::try_new(batches, schema).map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        read.map(PyArrowType).map_err(|e| at(&self.location, e))
    }

    /// [`Table::read`] as a `pyarrow.RecordBatchReader`: batches are read as they are asked
    /// for (memory bounded by the slices in flight).
    #[pyo3(signature = (columns=None, filter=None, branch=None, tag=None, as_of=None, incremental=None, read_optimized=false))]
    #[allow(clippy::too_many_arguments)]
    fn read_batches(
        &self,
        py: Python<'_>,
        columns: Option<Vec<String>>,
        filter: Option<&Bound<'_, PyAny>>,
        branch: Option<String>,
        tag: Option<String>,
        as_of: Option<String>,
        incremental: Option<(Option<String>, Option<String>)>,
        read_optimized: bool,
    ) -> PyResult<PyArrowType<Box<dyn RecordBatchReader + Send>>> {
        let spec = ReadSpec {
            columns,
            filters: filters_of(filter)?,
            branch,
            tag,
            as_of,
            incremental,
            read_optimized,
        };
        let location = self.location.clone();
        let opened: Result<StreamReader, String> = py.detach(|| {
            block_on(async {
                let (reader, options) = self.reader(&spec).await?;
                let schema = reader.output_schema(&options).map_err(|e| e.to_string())?;
                let stream = reader
                    .read_stream(options)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(StreamReader {
                    schema,
                    stream: stream
                        .map(move |b| b.map_err(|e| format!("{location}: {e}")))
                        .boxed(),
                })
            })
            .map_err(|e| e.to_string())?
        });
        let reader: Box<dyn RecordBatchReader + Send> =
            Box::new(opened.map_err(|e| at(&self.location, e))?);
        Ok(PyArrowType(reader))
    }

    /// Writes `data` (anything with `__arrow_c_stream__`: a pyarrow Table or RecordBatchReader,
    /// a polars or pandas DataFrame) as one commit on main or `branch`. Returns the commit.
    #[pyo3(signature = (data, op="upsert", branch=None))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        data: PyArrowType<ArrowArrayStreamReader>,
        op: &str,
        branch: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let op = write_operation(op)?;
        let reader = data.0;
        // A bulk insert streams when the table takes it (`Table::streams`): the input is
        // read, written and dropped a batch at a time, so it may be larger than memory.
        let streams: Result<bool, String> = py.detach(|| {
            block_on(async {
                if op != WriteOperation::BulkInsert {
                    return Ok(false);
                }
                let table = self.writable(branch.as_deref()).await?;
                table.streams(op).await.map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        if streams.map_err(|e| at(&self.location, e))? {
            let result: Result<CommitResult, String> = py.detach(|| {
                block_on(async {
                    let table = self.writable(branch.as_deref()).await?;
                    let batches = futures::stream::iter(plain_batches(reader));
                    table
                        .write_stream(op, batches)
                        .await
                        .map_err(|e| e.to_string())
                })
                .map_err(|e| e.to_string())?
            });
            return commit_dict(py, &result.map_err(|e| at(&self.location, e))?);
        }
        let (_, batches) = py.detach(|| collect_input(reader))?;
        let result: Result<CommitResult, String> = py.detach(|| {
            block_on(async {
                let table = self.writable(branch.as_deref()).await?;
                table.write(op, batches).await.map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        commit_dict(py, &result.map_err(|e| at(&self.location, e))?)
    }

    /// Creates working branch `name` from main's head, or from main's tag `from_tag`.
    #[pyo3(signature = (name, from_tag=None))]
    fn branch(&self, py: Python<'_>, name: String, from_tag: Option<String>) -> PyResult<()> {
        let result: Result<(), String> = py.detach(|| {
            block_on(async {
                let table = self.writable(None).await?;
                let source = match &from_tag {
                    Some(t) => BranchSource::Tag(t),
                    None => BranchSource::MainHead,
                };
                arbor_branching::create_branch(&table, &name, source)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        result.map_err(|e| at(&self.location, e))
    }

    /// The working branches: name, base instant, head instant, source tag, pending instants.
    fn branches<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let listed = py.detach(|| {
            block_on(async {
                let storage = self.storage().await?;
                arbor_branching::list_branches(&storage)
                    .await
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        let listed = listed.map_err(|e| at(&self.location, e))?;
        let out = PyList::empty(py);
        for b in listed {
            let d = PyDict::new(py);
            d.set_item("name", &b.info.name)?;
            d.set_item("base_instant", &b.info.base_instant)?;
            d.set_item("head", b.head.as_ref().map(ToString::to_string))?;
            d.set_item("from_tag", &b.info.from_tag)?;
            d.set_item("pending", b.pending)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Drops working branch `name` (its metadata; files other roots need are kept).
    fn drop_branch(&self, py: Python<'_>, name: String) -> PyResult<()> {
        let result: Result<(), String> = py.detach(|| {
            block_on(async {
                let table = self.writable(None).await?;
                arbor_branching::drop_branch(&table, &name)
                    .await
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        result.map_err(|e| at(&self.location, e))
    }

    /// Fast-forwards main to working branch `branch` (then drops it with `drop=True`).
    #[pyo3(signature = (branch, drop=false))]
    fn publish<'py>(
        &self,
        py: Python<'py>,
        branch: String,
        drop: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let result = py.detach(|| {
            block_on(async {
                let table = self.writable(Some(&branch)).await?;
                let outcome = if drop {
                    arbor_branching::publish_and_drop(&table).await
                } else {
                    arbor_branching::publish(&table).await
                };
                outcome.map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        let o = result.map_err(|e| at(&self.location, e))?;
        let d = PyDict::new(py);
        d.set_item("publication", o.publication)?;
        d.set_item("head", o.head.as_ref().map(ToString::to_string))?;
        d.set_item("instants", o.instants)?;
        Ok(d)
    }

    /// Tags the latest completed write (or `instant`) of main (or `branch`) as `name`.
    #[pyo3(signature = (name, branch=None, instant=None))]
    fn tag<'py>(
        &self,
        py: Python<'py>,
        name: String,
        branch: Option<String>,
        instant: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let result = py.detach(|| {
            block_on(async {
                let table = self.writable(branch.as_deref()).await?;
                let instant = instant
                    .as_deref()
                    .map(InstantTime::parse)
                    .transpose()
                    .map_err(|e| format!("instant: {e}"))?;
                arbor_branching::create_tag(&table, &name, instant.as_ref(), None)
                    .await
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        let t = result.map_err(|e| at(&self.location, e))?;
        let d = PyDict::new(py);
        d.set_item("name", &t.name)?;
        d.set_item("instant", &t.instant)?;
        Ok(d)
    }

    /// The unexpired tags of main (or `branch`): name and instant.
    #[pyo3(signature = (branch=None))]
    fn tags<'py>(&self, py: Python<'py>, branch: Option<String>) -> PyResult<Bound<'py, PyList>> {
        let result = py.detach(|| {
            block_on(async {
                let storage = self.storage().await?;
                arbor_branching::list_tags(
                    &storage,
                    branch_of(branch.as_deref()),
                    TagFilter::Unexpired,
                )
                .await
                .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        let out = PyList::empty(py);
        for t in result.map_err(|e| at(&self.location, e))? {
            let d = PyDict::new(py);
            d.set_item("name", &t.name)?;
            d.set_item("instant", &t.instant)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Drops tag `name` of main (or `branch`) with its savepoints.
    #[pyo3(signature = (name, branch=None))]
    fn drop_tag(&self, py: Python<'_>, name: String, branch: Option<String>) -> PyResult<()> {
        let result: Result<(), String> = py.detach(|| {
            block_on(async {
                let table = self.writable(branch.as_deref()).await?;
                arbor_branching::drop_tag(&table, &name, false, false)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        result.map_err(|e| at(&self.location, e))
    }

    /// Cleans main (or `branch`): `policy` commits (default, `retain` latest writes), versions
    /// or hours; nothing any branch, tag, savepoint or clone needs is deleted.
    #[pyo3(signature = (retain=None, policy="commits", dry_run=false, branch=None))]
    fn clean<'py>(
        &self,
        py: Python<'py>,
        retain: Option<u64>,
        policy: &str,
        dry_run: bool,
        branch: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let policy = match (policy.trim().to_ascii_lowercase().as_str(), retain) {
            ("commits", n) => CleanPolicy::KeepLatestCommits(n.map_or(10, |n| n as usize)),
            ("versions", n) => CleanPolicy::KeepLatestFileVersions(n.map_or(3, |n| n as usize)),
            ("hours", n) => CleanPolicy::KeepLatestByHours(n.unwrap_or(24)),
            (other, _) => {
                return Err(bad_argument(
                    "policy",
                    format!("{other:?} is not commits, versions or hours"),
                ))
            }
        };
        let result = py.detach(|| {
            block_on(async {
                let table = self.writable(branch.as_deref()).await?;
                arbor_branching::clean(
                    &table,
                    CleanOptions {
                        policy,
                        dry_run,
                        archive: !dry_run,
                        extra_sources: Vec::new(),
                    },
                )
                .await
                .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        let o = result.map_err(|e| at(&self.location, e))?;
        let d = PyDict::new(py);
        d.set_item("instant", o.instant.as_ref().map(ToString::to_string))?;
        d.set_item("planned", o.planned())?;
        d.set_item("deleted", o.deleted)?;
        d.set_item("archived", o.archived)?;
        Ok(d)
    }

    /// Sets a partition-TTL policy (`arbor ttl set`): `policy` time, creation-time, event-time,
    /// count or size; `retain` 30d, 12h, 10, 100GiB; for partitions matching `spec`, or the
    /// default policy grouped by `fields`.
    #[pyo3(signature = (policy, retain, spec=None, fields=None, time_field=None, format=None, branch=None))]
    #[allow(clippy::too_many_arguments)]
    fn set_ttl(
        &self,
        py: Python<'_>,
        policy: String,
        retain: String,
        spec: Option<String>,
        fields: Option<Vec<String>>,
        time_field: Option<String>,
        format: Option<String>,
        branch: Option<String>,
    ) -> PyResult<()> {
        let result: Result<(), String> = py.detach(|| {
            block_on(async {
                let table = self.writable(branch.as_deref()).await?;
                let strategy = TtlStrategy::parse(&policy).map_err(|e| format!("policy: {e}"))?;
                let retain =
                    Retention::parse(strategy, &retain).map_err(|e| format!("retain: {e}"))?;
                let scope = match &spec {
                    Some(s) => PolicyScope::Spec(s.clone()),
                    None => PolicyScope::Default {
                        fields: fields.clone().unwrap_or_default(),
                    },
                };
                table
                    .set_ttl_policy(TtlPolicy {
                        strategy,
                        retain,
                        scope,
                        time_field: time_field.clone(),
                        format: format.clone(),
                    })
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        result.map_err(|e| at(&self.location, e))
    }

    /// Runs the partition-TTL policies (`arbor ttl run`): the expired partitions are deleted in
    /// one replacecommit (none with `dry_run`). Returns them.
    #[pyo3(signature = (dry_run=false, max_partitions=None, branch=None))]
    fn run_ttl<'py>(
        &self,
        py: Python<'py>,
        dry_run: bool,
        max_partitions: Option<usize>,
        branch: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let result = py.detach(|| {
            block_on(async {
                let table = self.writable(branch.as_deref()).await?;
                table
                    .run_ttl(&TtlRunOptions {
                        now: None,
                        dry_run,
                        max_partitions,
                    })
                    .await
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        let o = result.map_err(|e| at(&self.location, e))?;
        let d = PyDict::new(py);
        d.set_item("expired", o.plan.expired_partitions())?;
        d.set_item("instant", o.commit.as_ref().map(|c| c.instant.to_string()))?;
        Ok(d)
    }

    /// Clones the table to `target` without copying data (`deep=True` copies the files), at
    /// main's head, a `tag`, an `instant` or a `branch`'s head. Returns the clone.
    #[pyo3(signature = (target, tag=None, instant=None, branch=None, deep=false, storage_options=None))]
    #[allow(clippy::too_many_arguments)]
    fn clone(
        &self,
        py: Python<'_>,
        target: String,
        tag: Option<String>,
        instant: Option<String>,
        branch: Option<String>,
        deep: bool,
        storage_options: Option<HashMap<String, String>>,
    ) -> PyResult<Table> {
        let target_options = match storage_options {
            Some(o) => self::storage_options(Some(o))?,
            None => self.options.clone(),
        };
        let at_ = match (&tag, &instant, branch_of(branch.as_deref())) {
            (Some(t), None, _) => CloneAt::Tag(t.clone()),
            (None, Some(i), _) => {
                CloneAt::Instant(InstantTime::parse(i).map_err(|e| bad_argument("instant", e))?)
            }
            (None, None, Some(b)) => CloneAt::Branch(b.to_string()),
            (None, None, None) => CloneAt::Main,
            (Some(_), Some(_), _) => {
                return Err(bad_argument("tag", "give a tag or an instant, not both"))
            }
        };
        let tag_branch = match at_ {
            CloneAt::Tag(_) | CloneAt::Instant(_) => {
                branch_of(branch.as_deref()).map(str::to_string)
            }
            _ => None,
        };
        let request = CloneRequest {
            source: self.location.clone(),
            target: target.clone(),
            at: at_,
            tag_branch,
            deep,
        };
        let result: Result<(), String> = py.detach(|| {
            block_on(async {
                if let Some(local) = local_path(&target) {
                    std::fs::create_dir_all(local).map_err(|e| e.to_string())?;
                }
                let opener = RegistryOpener::new(self.options.clone());
                clone_table(&opener, &request)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
        });
        result.map_err(|e| at(&self.location, e))?;
        Ok(Table {
            location: target,
            options: target_options,
        })
    }
}

/// The local directory of a location without a scheme (or `file://`).
fn local_path(location: &str) -> Option<&str> {
    if let Some(rest) = location.strip_prefix("file://") {
        Some(rest)
    } else if location.contains("://") {
        None
    } else {
        Some(location)
    }
}

/// A table name from the location's last segment (`trips` for `/data/trips`).
fn default_name(location: &str) -> String {
    let last = location
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let name: String = last
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.is_empty() {
        "table".to_string()
    } else {
        name
    }
}
