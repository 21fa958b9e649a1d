//! hudi-rs (PyPI `hudi` 0.5.0) as a read baseline, timed inside Python (`peer_read.py`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The timing script, run with `python -c`.
const SCRIPT: &str = include_str!("peer_read.py");

/// What hudi-rs read, and how long each run took.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerRead {
    /// Seconds of each run of `HudiTable(path).read(HudiReadOptions())`.
    pub seconds: Vec<f64>,
    /// Rows the last run returned.
    pub rows: u64,
    /// Rows of the last run whose `ts` is at least the update threshold.
    pub updated: u64,
}

/// The peer Python: `$ARBOR_PEER_PYTHON`, else what `scripts/peer.sh` prints (which installs
/// `hudi==0.5.0` and pyarrow into `.venv` when missing).
pub fn python() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("ARBOR_PEER_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    crate::script_output("peer.sh", &[])
        .map(PathBuf::from)
        .map_err(|e| format!("bench needs the peer reader (or --no-peer): {e}"))
}

/// Reads `table` `runs` times with hudi-rs in one Python process.
pub fn read(python: &Path, table: &Path, runs: usize, update_ts: i64) -> Result<PeerRead, String> {
    let shown = format!("{} -c <peer_read.py> {}", python.display(), table.display());
    let out = Command::new(python)
        .arg("-c")
        .arg(SCRIPT)
        .arg(table)
        .arg(runs.to_string())
        .arg(update_ts.to_string())
        .output()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{shown} failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or_else(|| format!("{shown} printed nothing"))?;
    parse(line).map_err(|e| format!("{shown}: {e}: {line}"))
}

fn parse(line: &str) -> Result<PeerRead, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let seconds: Vec<f64> = v
        .get("seconds")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    if seconds.is_empty() {
        return Err("no timings".to_string());
    }
    let num = |k: &str| {
        v.get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("no {k}"))
    };
    Ok(PeerRead {
        seconds,
        rows: num("rows")?,
        updated: num("updated")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse_script_output_fields() {
        let p = parse(r#"{"hudi": "0.5.0", "seconds": [0.5, 0.25], "rows": 10, "updated": 1}"#);
        assert_eq!(
            p,
            Ok(PeerRead {
                seconds: vec![0.5, 0.25],
                rows: 10,
                updated: 1
            })
        );
    }

    #[test]
    fn test_parse_without_timings_fails() {
        assert!(parse(r#"{"seconds": [], "rows": 10, "updated": 1}"#).is_err());
        assert!(parse("Traceback").is_err());
    }
}
