//! The peer reader (hudi-rs 0.5.0 in a Python environment that `scripts/peer.sh` installs) and
//! row digests by the repo's canonicaliser `scripts/canonical_rows.py`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use serde_json::Value;

use crate::{repo_root, skip};

/// The Python that has hudi 0.5.0 and pyarrow: `ARBOR_PEER_PYTHON` if set, else the last
/// non-empty line `scripts/peer.sh` prints. `Err` says why there is none (the script's stderr,
/// or why it could not run). The script runs at most once per test process.
pub fn peer_python() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("ARBOR_PEER_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    static FROM_SCRIPT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FROM_SCRIPT.get_or_init(run_peer_sh).clone()
}

fn run_peer_sh() -> Result<PathBuf, String> {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/peer.sh"))
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| PathBuf::from(l.trim()))
        .ok_or_else(|| "scripts/peer.sh printed nothing".to_string())
}

/// [`peer_python`], or `None` after a visible `SKIPPED: {need}: {reason}` line (see [`skip`]:
/// under CI the peer is required, so its absence panics).
pub fn peer_python_or_skip(need: &str) -> Option<PathBuf> {
    match peer_python() {
        Ok(python) => Some(python),
        Err(reason) => {
            skip(&format!("SKIPPED: {need}: {reason}"));
            None
        }
    }
}

/// `scripts/peer_reader.py` on the table at `table`: its timeline and row count as hudi-rs
/// sees them (panics, with hudi-rs's stderr, if hudi-rs cannot read the table).
pub fn peer_read(python: &Path, table: &Path) -> Value {
    let out = Command::new(python)
        .arg(repo_root().join("scripts/peer_reader.py"))
        .arg(table)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hudi-rs could not read {}: {}",
        table.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Writes `batches` (all of `schema`) as an Arrow IPC file at `path`.
pub fn write_arrow_ipc(path: &Path, schema: &SchemaRef, batches: &[RecordBatch]) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = arrow::ipc::writer::FileWriter::try_new(file, schema).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.finish().unwrap();
}

/// `(row_count, data_sha256)` of the Arrow IPC file at `file`, by `scripts/canonical_rows.py`.
pub fn canonical_digest(python: &Path, file: &Path) -> (u64, String) {
    let out = Command::new(python)
        .arg(repo_root().join("scripts/canonical_rows.py"))
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["row_count"].as_u64().unwrap(),
        v["data_sha256"].as_str().unwrap().to_string(),
    )
}

/// `(row_count, data_sha256)` of `batches` by [`canonical_digest`], through an IPC file in a
/// temporary directory.
pub fn batches_digest(python: &Path, schema: &SchemaRef, batches: &[RecordBatch]) -> (u64, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rows.arrow");
    write_arrow_ipc(&file, schema, batches);
    canonical_digest(python, &file)
}

/// Runs `scripts/peer_digest.py --batch` on `requests` (one JSON object each: `{"id", "table",
/// ["as_of" | "incremental"]}` for hudi-rs reads, `{"id", "arrow"}` for an Arrow IPC file) and
/// returns the answers by id (panics, with the script's stderr, if it fails).
pub fn peer_digest_batch(
    python: &Path,
    requests: &[Value],
) -> std::collections::BTreeMap<String, Value> {
    let dir = tempfile::tempdir().unwrap();
    let req = dir.path().join("requests.jsonl");
    let text: String = requests.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&req, text).unwrap();
    let out = Command::new(python)
        .arg(repo_root().join("scripts/peer_digest.py"))
        .arg("--batch")
        .arg(&req)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "peer_digest failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["id"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

/// Asserts that hudi-rs reads the latest snapshot of the table at `table` with the same
/// `row_count` and `data_sha256` as `batches` (arbor's read, all of `schema`); `step` names the
/// moment in failure messages.
pub fn assert_peer_snapshot_matches(
    python: &Path,
    table: &Path,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    step: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let arrow = dir.path().join("ours.arrow");
    write_arrow_ipc(&arrow, schema, batches);
    let docs = peer_digest_batch(
        python,
        &[
            serde_json::json!({"id": "p", "table": table.to_string_lossy()}),
            serde_json::json!({"id": "a", "arrow": arrow.to_string_lossy()}),
        ],
    );
    let (peer, ours) = (&docs["p"], &docs["a"]);
    assert!(
        peer.get("error").is_none(),
        "{step}: hudi-rs failed: {peer}"
    );
    assert_eq!(
        (&peer["row_count"], &peer["data_sha256"]),
        (&ours["row_count"], &ours["data_sha256"]),
        "{step}: hudi-rs and arbor differ"
    );
}
