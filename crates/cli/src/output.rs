//! Human tables and `--json` output.

use std::io::Write;

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{ContentArrangement, Table};
use serde::Serialize;

use crate::error::{CliError, CliResult};

/// Writes `text` and a newline to stdout. A closed pipe (`arbor ... | head`) is not an error.
pub fn print_text(text: &str) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::Output(e.to_string())),
    }
}

/// Prints `value` as pretty JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) -> CliResult<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| CliError::Output(e.to_string()))?;
    print_text(&text)
}

/// Prints rows as a table with a header on stdout.
pub fn print_table(header: &[&str], rows: Vec<Vec<String>>) -> CliResult<()> {
    let mut table = Table::new();
    table
        .load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    for r in rows {
        table.add_row(r);
    }
    print_text(&table.to_string())
}
