//! `cargo xtask bench data-path`: the data-path benchmark (issue 3, item 7).

/// Runs a benchmark task.
pub fn run(_args: &[String]) -> Result<(), String> {
    Err("bench: not built yet".to_string())
}
