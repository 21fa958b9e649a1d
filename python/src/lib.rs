//! The native half of the Python package `arbor` (`arbor._native`): [`table::Table`], a handle
//! on one Hudi table with the CLI's operations (read, write, branches, tags, publication, clean,
//! partition TTL, clones), Arrow data in and out through the Arrow C stream interface, and
//! [`errors::ArborError`] for every failure, carrying the message the CLI prints.

mod convert;
mod distributed;
mod errors;
mod runtime;
mod table;

use pyo3::prelude::*;

/// The module `arbor._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<table::Table>()?;
    m.add_class::<distributed::WriteTransaction>()?;
    m.add_function(wrap_pyfunction!(distributed::begin_write, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::write_fragment, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::fragment_info, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::route, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::plan_read, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::read_file_groups, m)?)?;
    m.add("ArborError", m.py().get_type::<errors::ArborError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
