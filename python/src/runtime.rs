//! The process-wide tokio runtime the package's calls run on (storage, locks and writes are
//! runtime tasks).

use std::future::Future;
use std::sync::OnceLock;

use pyo3::PyResult;
use tokio::runtime::Runtime;

use crate::errors::ArborError;

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// Runs `f` to completion on the shared multi-threaded runtime (made on first use).
pub fn block_on<F: Future>(f: F) -> PyResult<F::Output> {
    let rt = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("arbor")
            .build()
            .map_err(|e| e.to_string())
    });
    match rt {
        // Called from inside another tokio runtime (a consumer of `read_batches` that runs
        // one): wait without blocking that runtime's machinery, on ours.
        Ok(rt) if tokio::runtime::Handle::try_current().is_ok() => {
            let _entered = rt.enter();
            Ok(futures::executor::block_on(f))
        }
        Ok(rt) => Ok(rt.block_on(f)),
        Err(e) => Err(ArborError::new_err(format!(
            "cannot start the async runtime: {e}"
        ))),
    }
}
