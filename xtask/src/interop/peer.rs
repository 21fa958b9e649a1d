//! Runs `scripts/peer_digest.py --batch` once for a list of requests and returns the answers.

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
