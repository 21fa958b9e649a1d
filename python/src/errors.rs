//! [`ArborError`]: the exception every arbor failure raises, with the CLI's message (the table
//! location, then what went wrong: the column, row, branch, tag or instant at fault).

use std::fmt::Display;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::PyErr;

create_exception!(
    _native,
    ArborError,
    PyException,
    "An arbor operation failed; the message names the table and what went wrong."
);

/// `ArborError("<location>: <error>")`.
pub fn at(location: &str, e: impl Display) -> PyErr {
    ArborError::new_err(format!("{location}: {e}"))
}

/// `ValueError` for an argument the caller got wrong (`name`: what it is).
pub fn bad_argument(name: &str, reason: impl Display) -> PyErr {
    PyValueError::new_err(format!("{name}: {reason}"))
}
