//! Writes and reads split across processes, for `arbor.Table.begin_write` and `arbor.ray`:
//! [`begin_write`] starts a distributed write and returns its [`WriteTransaction`] (the
//! coordinator's handle: commit or abort); [`write_fragment`] writes one fragment anywhere from
//! the serializable context; [`plan_read`] lists the file groups a read selects, pinned to one
//! instant, and [`read_file_groups`] reads some of them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use arbor_table::read::ReadOptions;
use arbor_table::{Fragment, WriteContext};
use arrow::array::{Array, ArrayData, Int64Array};
use arrow_array::ffi_stream::ArrowArrayStreamReader;
use arrow_pyarrow::{PyArrowType, Table as PyTable};
use arrow_schema::Schema;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::convert::collect_input;
use crate::errors::{at, bad_argument, ArborError};
use crate::runtime::block_on;
use crate::table::{commit_dict, filters_of, write_operation, ReadSpec, Table};

/// A distributed write begun by this process (the coordinator): its instant stays pending,
/// its heartbeat renewed, until [`WriteTransaction::commit`] or [`WriteTransaction::abort`].
#[pyclass(module = "arbor._native", name = "WriteTransaction", frozen)]
pub struct WriteTransaction {
    table: Table,
    branch: Option<String>,
    context: String,
    inner: Mutex<Option<arbor_table::WriteTransaction>>,
}

impl WriteTransaction {
    fn take(&self) -> PyResult<arbor_table::WriteTransaction> {
        self.inner
            .lock()
            .map_err(|_| ArborError::new_err("the write transaction's lock is poisoned"))?
            .take()
            .ok_or_else(|| {
                ArborError::new_err(format!(
                    "{}: the write of instant {} was already committed or aborted",
                    self.table.location(),
                    self.instant()
                ))
            })
    }

    fn instant(&self) -> String {
        WriteContext::from_json(&self.context)
            .map(|c| c.instant().to_string())
            .unwrap_or_default()
    }
}

#[pymethods]
impl WriteTransaction {
    /// The serializable context fragment writers need (JSON text).
    #[getter]
    fn context(&self) -> String {
        self.context.clone()
    }

    /// Commits `fragments` (the bytes `write_fragment` returned) as one commit.
    fn commit<'py>(
        &self,
        py: Python<'py>,
        fragments: Vec<Vec<u8>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let transaction = self.take()?;
        let location = self.table.location().to_string();
        let result = py.detach(|| {
            block_on(async {
                let fragments = fragments
                    .iter()
                    .map(|b| Fragment::from_bytes(b))
                    .collect::<Result<Vec<_>, _>>();
                let table = self.table.writable(self.branch.as_deref()).await;
                match (table, fragments) {
                    (Ok(table), Ok(fragments)) => table
                        .commit_fragments(transaction, fragments)
                        .await
                        .map_err(|e| e.to_string()),
                    (Ok(table), Err(e)) => {
                        table.abort_write(transaction).await;
                        Err(e.to_string())
                    }
                    (Err(e), _) => Err(e),
                }
            })
        })?;
        commit_dict(py, &result.map_err(|e| at(&location, e))?)
    }

    /// Gives the write up: its instant is rolled back and its fragments' files deleted.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let transaction = self.take()?;
        let location = self.table.location().to_string();
        let result: Result<(), String> = py.detach(|| {
            block_on(async {
                let table = self.table.writable(self.branch.as_deref()).await?;
                table.abort_write(transaction).await;
                Ok(())
            })
        })?;
        result.map_err(|e| at(&location, e))
    }
}

/// Begins a distributed write of `op` on `table`'s `branch` (main for `None`).
#[pyfunction]
#[pyo3(signature = (table, op, branch=None))]
pub fn begin_write(
    py: Python<'_>,
    table: &Bound<'_, Table>,
    op: &str,
    branch: Option<String>,
) -> PyResult<WriteTransaction> {
    let op = write_operation(op)?;
    let table = table.get().clone();
    let begun = py.detach(|| {
        block_on(async {
            let handle = table.writable(branch.as_deref()).await?;
            handle.begin_write(op).await.map_err(|e| e.to_string())
        })
    })?;
    let transaction = begun.map_err(|e| at(table.location(), e))?;
    Ok(WriteTransaction {
        context: transaction.context().to_json(),
        table,
        branch,
        inner: Mutex::new(Some(transaction)),
    })
}

/// Writes `data` as fragment `task` of the distributed write `context`; returns its bytes.
#[pyfunction]
#[pyo3(signature = (table, context, data, task, branch=None))]
pub fn write_fragment<'py>(
    py: Python<'py>,
    table: &Bound<'_, Table>,
    context: &str,
    data: PyArrowType<ArrowArrayStreamReader>,
    task: u64,
    branch: Option<String>,
) -> PyResult<Bound<'py, PyBytes>> {
    let context = WriteContext::from_json(context).map_err(|e| bad_argument("context", e))?;
    let table = table.get();
    let (_, batches) = py.detach(|| collect_input(data.0))?;
    let written = py.detach(|| {
        block_on(async {
            let handle = table.writable(branch.as_deref()).await?;
            handle
                .write_fragment(&context, task, batches)
                .await
                .map_err(|e| e.to_string())
        })
    })?;
    let fragment = written.map_err(|e| at(table.location(), e))?;
    Ok(PyBytes::new(py, &fragment.to_bytes()))
}

/// The route of every row of `data` for a distributed `op` ([`arbor_table::Table::route`]),
/// as a `pyarrow.Int64Array` (non-negative).
#[pyfunction]
#[pyo3(signature = (table, op, data, branch=None))]
pub fn route(
    py: Python<'_>,
    table: &Bound<'_, Table>,
    op: &str,
    data: PyArrowType<ArrowArrayStreamReader>,
    branch: Option<String>,
) -> PyResult<PyArrowType<ArrayData>> {
    let op = write_operation(op)?;
    let table = table.get();
    let (_, batches) = py.detach(|| collect_input(data.0))?;
    let routed = py.detach(|| {
        block_on(async {
            let handle = table.writable(branch.as_deref()).await?;
            handle.route(op, &batches).await.map_err(|e| e.to_string())
        })
    })?;
    let routes = routed.map_err(|e| at(table.location(), e))?;
    let routes = routes
        .into_iter()
        .map(|r| i64::try_from(r).unwrap_or(i64::MAX));
    Ok(PyArrowType(
        Int64Array::from_iter_values(routes).into_data(),
    ))
}

/// What a fragment's bytes describe: instant, task, record counts, files.
#[pyfunction]
pub fn fragment_info<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let fragment = Fragment::from_bytes(data).map_err(|e| bad_argument("fragment", e))?;
    let d = PyDict::new(py);
    d.set_item("instant", fragment.instant())?;
    d.set_item("task", fragment.task())?;
    let (inserted, updated, deleted) = fragment.records();
    d.set_item("inserted", inserted)?;
    d.set_item("updated", updated)?;
    d.set_item("deleted", deleted)?;
    d.set_item("files", fragment.files())?;
    Ok(d)
}

fn spec(
    columns: Option<Vec<String>>,
    filter: Option<&Bound<'_, PyAny>>,
    (branch, tag, as_of): (Option<String>, Option<String>, Option<String>),
) -> PyResult<ReadSpec> {
    Ok(ReadSpec {
        columns,
        filters: filters_of(filter)?,
        branch,
        tag,
        as_of,
        incremental: None,
        read_optimized: false,
    })
}

/// Plans a read: `{"as_of": <the instant every part reads as of>, "schema": <output schema>,
/// "groups": [(partition, file id, bytes), ...]}` (the file groups the read selects, after
/// partition and data skipping, with the size of their latest slice).
#[pyfunction]
#[pyo3(signature = (table, columns=None, filter=None, branch=None, tag=None, as_of=None))]
pub fn plan_read<'py>(
    py: Python<'py>,
    table: &Bound<'_, Table>,
    columns: Option<Vec<String>>,
    filter: Option<&Bound<'_, PyAny>>,
    branch: Option<String>,
    tag: Option<String>,
    as_of: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = spec(columns, filter, (branch, tag, as_of))?;
    let table = table.get();
    type Planned = (Option<String>, Schema, Vec<(String, String, u64)>);
    let planned: Result<Planned, String> = py.detach(|| {
        block_on(async {
            let (reader, mut options) = table.reader(&spec).await?;
            // Every part reads the same state: the latest completed write when no instant
            // was asked for.
            if options.get_as_of().is_none() {
                let latest = reader
                    .view()
                    .index()
                    .completed_writes()
                    .map(|i| i.requested_time.clone())
                    .max();
                if let Some(latest) = latest {
                    options = options.as_of(latest);
                }
            }
            let schema = reader.output_schema(&options).map_err(|e| e.to_string())?;
            let plan = reader.plan(&options).await.map_err(|e| e.to_string())?;
            let groups = plan
                .file_slices()
                .map(|s| {
                    let bytes = s.base_file.as_ref().map_or(0, |b| b.size)
                        + s.log_files.iter().map(|l| l.size).sum::<u64>();
                    (s.partition.clone(), s.file_id.clone(), bytes)
                })
                .collect();
            Ok((
                options.get_as_of().map(ToString::to_string),
                schema.as_ref().clone(),
                groups,
            ))
        })
        .map_err(|e| e.to_string())?
    });
    let (as_of, schema, groups) = planned.map_err(|e| at(table.location(), e))?;
    let d = PyDict::new(py);
    d.set_item("as_of", as_of)?;
    d.set_item("schema", PyArrowType(schema))?;
    let list = PyList::empty(py);
    for g in groups {
        list.append(g)?;
    }
    d.set_item("groups", list)?;
    Ok(d)
}

/// Reads the file groups `groups` (`(partition, file id)`) of the read the other arguments
/// select.
#[pyfunction]
#[pyo3(signature = (table, groups, columns=None, filter=None, branch=None, tag=None, as_of=None))]
#[allow(clippy::too_many_arguments)]
pub fn read_file_groups(
    py: Python<'_>,
    table: &Bound<'_, Table>,
    groups: Vec<(String, String)>,
    columns: Option<Vec<String>>,
    filter: Option<&Bound<'_, PyAny>>,
    branch: Option<String>,
    tag: Option<String>,
    as_of: Option<String>,
) -> PyResult<PyArrowType<PyTable>> {
    let spec = spec(columns, filter, (branch, tag, as_of))?;
    let table = table.get();
    let mut set: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (partition, file_id) in groups {
        set.entry(partition).or_default().insert(file_id);
    }
    let read: Result<PyTable, String> = py.detach(|| {
        block_on(async {
            let (reader, options) = table.reader(&spec).await?;
            let options: ReadOptions = options.file_groups(set);
            let schema = reader.output_schema(&options).map_err(|e| e.to_string())?;
            let batches = reader.read(options).await.map_err(|e| e.to_string())?;
            PyTable::try_new(batches, schema).map_err(|e| e.to_string())
        })
        .map_err(|e| e.to_string())?
    });
    read.map(PyArrowType).map_err(|e| at(table.location(), e))
}
