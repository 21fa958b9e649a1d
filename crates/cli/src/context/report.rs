//! What commands print while and after they write: the progress spinner, the commit report of
//! `arbor write` and `arbor delete-partition`, and the storage notes of a new table's columns.

use std::io::IsTerminal;
use std::time::Duration;

use arbor_table::CommitResult;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::open::{selected, MAIN};
use crate::error::CliResult;
use crate::output::{print_json, print_text};

/// A spinner on stderr with a message per phase while long work runs, shown only when stderr
/// is a terminal (never in pipes, files or tests). Drawing never fails the command: indicatif
/// ignores write errors (a closed stderr), and a hidden spinner writes nothing.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// Starts the spinner with `message` (when stderr is a terminal).
    pub fn start(message: &str) -> Self {
        Self::start_if(std::io::stderr().is_terminal(), message)
    }

    /// Starts the spinner with `message` when `visible`, else a spinner that does nothing.
    pub fn start_if(visible: bool, message: &str) -> Self {
        if !visible {
            return Progress(None);
        }
        // Drawn on stderr, which indicatif hides when it is not a terminal.
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} [{elapsed}]") {
            bar.set_style(style);
        }
        bar.set_message(message.to_string());
        bar.enable_steady_tick(Duration::from_millis(100));
        Progress(Some(bar))
    }

    /// Whether the spinner draws nothing (stderr is not a terminal).
    #[cfg(test)]
    pub fn is_hidden(&self) -> bool {
        self.0.as_ref().is_none_or(ProgressBar::is_hidden)
    }

    /// Changes the message.
    pub fn set(&self, message: &str) {
        if let Some(b) = &self.0 {
            b.set_message(message.to_string());
        }
    }

    /// Removes the spinner.
    pub fn finish(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// What `arbor write` and `arbor delete-partition` report.
#[derive(Debug, Serialize)]
pub struct CommitReport {
    /// The table location.
    pub table: String,
    /// The branch written (`main` or a working branch).
    pub branch: String,
    /// True if this command created the table.
    pub created: bool,
    /// Rows read from the input (`None` for delete-partition).
    pub input_rows: Option<usize>,
    /// The instant (requested) time.
    pub instant: String,
    /// The completion time.
    pub completion_time: String,
    /// The completed action.
    pub action: String,
    /// The operation type.
    pub operation: String,
    /// Records inserted.
    pub inserted: u64,
    /// Records updated.
    pub updated: u64,
    /// Records deleted.
    pub deleted: u64,
    /// Input records not written because the stored record of their key is newer (event-time
    /// ordering).
    pub kept: u64,
    /// Data files written.
    pub files_written: usize,
    /// File groups replaced.
    pub file_groups_replaced: usize,
    /// Schema changes the write made (columns added, types widened).
    pub schema_changes: Vec<String>,
}

impl CommitReport {
    /// The report of `result`.
    pub fn new(table: &str, created: bool, input_rows: Option<usize>, r: &CommitResult) -> Self {
        CommitReport {
            table: table.to_string(),
            branch: MAIN.to_string(),
            created,
            input_rows,
            instant: r.instant.to_string(),
            completion_time: r.completion_time.to_string(),
            action: r.action.name().to_string(),
            operation: r.operation.name().to_string(),
            inserted: r.inserted,
            updated: r.updated,
            deleted: r.deleted,
            kept: r.skipped_stale,
            files_written: r.files_written,
            file_groups_replaced: r.file_groups_replaced,
            schema_changes: r.schema_changes.iter().map(ToString::to_string).collect(),
        }
    }

    /// The report of a commit on `branch`.
    pub fn on_branch(mut self, branch: &str) -> Self {
        self.branch = branch.to_string();
        self
    }

    /// The human text: what was committed, then the counts.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if self.created {
            out.push_str(&format!("created the table at {}\n", self.table));
        }
        let on = if selected(&self.branch).is_some() {
            format!(" on branch {}", self.branch)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "{} committed{on}: instant {} ({}, completed {})\n",
            self.operation.to_ascii_lowercase(),
            self.instant,
            self.action,
            self.completion_time
        ));
        if let Some(n) = self.input_rows {
            out.push_str(&format!("  input rows:  {n}\n"));
        }
        let kept = if self.kept > 0 {
            format!(", {} kept (stored record newer)", self.kept)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  records:     {} inserted, {} updated, {} deleted{kept}\n",
            self.inserted, self.updated, self.deleted
        ));
        out.push_str(&format!(
            "  files:       {} written, {} file groups replaced",
            self.files_written, self.file_groups_replaced
        ));
        for change in &self.schema_changes {
            out.push_str(&format!("\n  schema:      {change}"));
        }
        out
    }

    /// Prints the report as text or JSON.
    pub fn print(&self, json: bool) -> CliResult<()> {
        if json {
            print_json(self)
        } else {
            print_text(&self.text())
        }
    }
}

/// Prints (to stderr) how columns of a new table's `schema` are stored where that differs
/// from the input (nanoseconds as microseconds, zones as UTC, naive timestamps as
/// `TIMESTAMP_NTZ`, which hudi-rs 0.5.0 cannot read).
pub fn warn_storage_notes(schema: &arrow::datatypes::Schema) {
    for n in arbor_table::storage_notes(schema) {
        errln!("warning: column {}: {}", n.column, n.note);
        if n.note.contains("TIMESTAMP_NTZ") {
            errln!(
                "warning: column {}: hudi-rs 0.5.0 cannot read tables with such columns (it \
                 panics on Avro local-timestamp); Spark and arbor can",
                n.column
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_progress_is_hidden_off_a_terminal() {
        let hidden = Progress::start_if(false, "reading");
        assert!(hidden.is_hidden());
        hidden.set("writing");
        hidden.finish();
        // Under `cargo test` stderr is a pipe or a file, unless run from a terminal.
        if !std::io::stderr().is_terminal() {
            let p = Progress::start("reading");
            assert!(p.is_hidden());
            p.set("writing");
        }
    }

    #[test]
    fn test_progress_on_a_draw_target_that_is_no_terminal_draws_nothing() {
        // A visible spinner whose target stderr is not a terminal is hidden by indicatif.
        let p = Progress::start_if(true, "reading");
        assert_eq!(p.is_hidden(), !std::io::stderr().is_terminal());
        p.set("writing");
        p.finish();
    }
}
