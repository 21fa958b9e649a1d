//! Runs `scripts/peer_digest.py --batch` once for a list of requests and returns the answers;
//! asks hudi-rs for the file slices it plans ([`file_slices`]).

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Sends `requests` (each gets its index as `id`) to `peer_digest.py --batch` with `python`;
/// returns the answers by index. A request the script answered with an error maps to `Err`.
pub fn digest_all(
    python: &Path,
    script: &Path,
    work: &Path,
    requests: &[Value],
) -> Result<HashMap<usize, Result<Value, String>>, String> {
    let path = work.join("requests.jsonl");
    let mut text = Vec::new();
    for (id, r) in requests.iter().enumerate() {
        let mut r = r.clone();
        if let Some(obj) = r.as_object_mut() {
            obj.insert("id".to_string(), Value::from(id));
        }
        writeln!(text, "{r}").map_err(|e| format!("encoding requests: {e}"))?;
    }
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let shown = format!(
        "{} {} --batch {}",
        python.display(),
        script.display(),
        path.display()
    );
    eprintln!("+ {shown}");
    let out = Command::new(python)
        .arg(script)
        .arg("--batch")
        .arg(&path)
        .output()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{shown} failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut answers = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| format!("{shown} printed a line that is not JSON ({e}): {line}"))?;
        let Some(id) = v.get("id").and_then(Value::as_u64) else {
            return Err(format!("{shown} printed an answer without id: {line}"));
        };
        let answer = match v.get("error").and_then(Value::as_str) {
            Some(e) => Err(e.to_string()),
            None => Ok(v),
        };
        answers.insert(id as usize, answer);
    }
    Ok(answers)
}

/// Prints, for each request `{"id": N, "table": DIR}` of the file `argv[1]`, one line
/// `{"id": N, "files": [...]}` with the names of the base and log files of every file slice
/// hudi-rs plans for a snapshot of the table (`HudiTable.get_file_slices`, as
/// `../shared/oracle/hudi_oracle.py --files` reports them), or `{"id": N, "error": ...}`.
const FILE_SLICES_PY: &str = r#"
import json, os, sys
from hudi import HudiReadOptions, HudiTable
with open(sys.argv[1], encoding="utf-8") as f:
    requests = [json.loads(line) for line in f if line.strip()]
for req in requests:
    try:
        table = HudiTable(os.path.abspath(req["table"]))
        names = []
        for s in table.get_file_slices(HudiReadOptions()):
            if s.base_file_name:
                names.append(s.base_file_name)
            names.extend(s.log_file_names)
        doc = {"id": req["id"], "files": sorted(names)}
    except Exception as e:  # hudi raises several exception types; each is this request's failure
        doc = {"id": req["id"], "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(doc))
sys.stdout.flush()
"#;

/// Asks hudi-rs (one `python` process) for the file names of the file slices a snapshot of
/// each of `tables` plans; returns them by index. A table hudi-rs failed on maps to `Err`.
pub fn file_slices(
    python: &Path,
    work: &Path,
    tables: &[&Path],
) -> Result<HashMap<usize, Result<Vec<String>, String>>, String> {
    let path = work.join("file-slices.jsonl");
    let mut text = Vec::new();
    for (id, t) in tables.iter().enumerate() {
        let r = serde_json::json!({ "id": id, "table": t });
        writeln!(text, "{r}").map_err(|e| format!("encoding requests: {e}"))?;
    }
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let shown = format!(
        "{} -c <file slices of each table> {}",
        python.display(),
        path.display()
    );
    eprintln!("+ {shown}");
    let out = Command::new(python)
        .arg("-c")
        .arg(FILE_SLICES_PY)
        .arg(&path)
        .output()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{shown} failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut answers = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| format!("{shown} printed a line that is not JSON ({e}): {line}"))?;
        let Some(id) = v.get("id").and_then(Value::as_u64) else {
            return Err(format!("{shown} printed an answer without id: {line}"));
        };
        let answer = match (v.get("error").and_then(Value::as_str), v.get("files")) {
            (Some(e), _) => Err(format!("hudi-rs: {e}")),
            (None, Some(Value::Array(files))) => Ok(files
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()),
            (None, _) => Err(format!("{shown} printed an answer without files: {line}")),
        };
        answers.insert(id as usize, answer);
    }
    Ok(answers)
}
