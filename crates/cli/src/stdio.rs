//! Every write of the CLI to stdout and stderr goes through here, so that no write panics
//! when a stream is closed (`arbor ... | head -1`, `arbor ... 2>&1 | head -2`, `2>&-`), as
//! `println!` and `eprintln!` do: a command whose reader went away goes on to the end of what
//! it started (committing or rolling back, releasing its locks) instead of dying half-way with
//! an inflight instant and a held lock.
//!
//! - stdout ([`out`], [`outln!`]): a reader that went away (EPIPE) is not an error, the text is
//!   dropped; any other failure (a full disk behind `> file`) is the command's error.
//! - stderr ([`err`], [`errln!`], [`QuietStderr`] for the log): failures are ignored.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{CliError, CliResult};

/// Whether anything was written (or tried to be) to stdout by this process.
static WROTE_STDOUT: AtomicBool = AtomicBool::new(false);

/// Writes `text` and a newline to stdout and flushes. A closed pipe is not an error (the text
/// is dropped); other failures are [`CliError::Output`].
pub fn out(text: &str) -> CliResult<()> {
    WROTE_STDOUT.store(true, Ordering::Relaxed);
    let mut stdout = std::io::stdout().lock();
    ignore_broken_pipe(writeln!(stdout, "{text}").and_then(|()| stdout.flush()))
}

/// `result` with a closed pipe (EPIPE) counted as success, other errors as
/// [`CliError::Output`].
pub fn ignore_broken_pipe(result: std::io::Result<()>) -> CliResult<()> {
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::Output(e.to_string())),
    }
}

/// Whether this process has written to stdout (through [`out`]) or is writing to it (rows
/// streamed by `arbor read`): a `--json` failure after that is reported on stderr, so that
/// stdout holds one JSON document.
pub fn wrote_stdout() -> bool {
    WROTE_STDOUT.load(Ordering::Relaxed)
}

/// Records that stdout is being written to other than through [`out`].
pub fn mark_stdout_written() {
    WROTE_STDOUT.store(true, Ordering::Relaxed);
}

/// Writes `text` and a newline to stderr; a failure (closed stderr) is ignored.
pub fn err(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{text}").and_then(|()| stderr.flush());
}

/// Stderr as the log's writer: every write reports success, whether stderr took the bytes or
/// not (tracing-subscriber would otherwise report a failed write with `eprintln!`, which
/// panics when stderr is closed).
#[derive(Debug, Clone, Copy, Default)]
pub struct QuietStderr;

impl QuietStderr {
    /// A writer (the log's `MakeWriter` is this function).
    pub fn make() -> Self {
        QuietStderr
    }
}

impl Write for QuietStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// `println!` that does not panic: formats its arguments, writes them with [`out`] and
/// evaluates to its `CliResult<()>`.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::stdio::out(&format!($($arg)*))
    };
}

/// `eprintln!` that does not panic: formats its arguments and writes them with [`err`]
/// (failures ignored).
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::stdio::err(&format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_broken_pipe_is_success_and_other_errors_are_output_errors() {
        assert!(ignore_broken_pipe(Err(std::io::Error::from(ErrorKind::BrokenPipe))).is_ok());
        let e = ignore_broken_pipe(Err(std::io::Error::other("disk full"))).unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
    }

    #[test]
    fn test_quiet_stderr_reports_every_write_as_done() {
        let mut w = QuietStderr::make();
        assert_eq!(w.write(b"").unwrap(), 0);
        assert!(w.flush().is_ok());
    }
}
