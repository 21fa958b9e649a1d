//! The CLI on Azure Blob Storage, proven against Azurite: `arbor -o azure.use-emulator=true`
//! `write az://<container>/<table>`, then `read`, `branch create`, a write on the branch and
//! `branch publish`. Azurite is started (installed when missing) by `scripts/azurite.sh`, which
//! creates the container. When it cannot be started the test fails under `CI` (or when
//! `ARBOR_TEST_AZURITE_ENDPOINT` says a server was provided) and is skipped with a visible
//! message otherwise.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::create_write::{file, id_fares, ok, s, TRIPS};

const CONTAINER: &str = "arbor-test";
const EMULATOR: &str = "azure.use-emulator=true";

/// Starts Azurite and creates the container, or says why not. The `arbor` processes inherit
/// `AZURITE_BLOB_STORAGE_URL` when the emulator is not at its default address.
fn azurite() -> Result<(), String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/azurite.sh");
    let out = Command::new("bash")
        .args([script, "container", CONTAINER])
        .output()
        .map_err(|e| format!("cannot run {script}: {e}"))?;
    if out.status.success() {
        let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let target = std::env::var("AZURITE_BLOB_STORAGE_URL")
            .unwrap_or_else(|_| "http://127.0.0.1:10000".to_string());
        if target.trim_end_matches('/') == url {
            Ok(())
        } else {
            Err(format!(
                "Azurite runs at {url} but arbor would use {target}: set \
                 AZURITE_BLOB_STORAGE_URL={url}"
            ))
        }
    } else {
        Err(format!(
            "{script} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `(id, fare)` rows of `table` (optionally of a branch) on Azurite.
fn rows(table: &str, extra: &[&str]) -> Vec<(String, f64)> {
    let mut args = vec!["-o", EMULATOR, "read", table, "--format", "jsonl"];
    args.extend_from_slice(extra);
    let rows: Vec<Value> = ok(&args)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    id_fares(&rows)
}

fn pair(id: &str, fare: f64) -> (String, f64) {
    (id.to_string(), fare)
}

fn write(dir: &Path, table: &str, name: &str, csv: &str, extra: &[&str]) {
    let input = file(dir, name, csv);
    let mut args = vec!["-o", EMULATOR, "write", table, s(&input)];
    args.extend_from_slice(extra);
    ok(&args);
}

#[test]
fn test_azure_cli_write_read_branch_create_publish_on_azurite() {
    if let Err(reason) = azurite() {
        let mandatory = std::env::var_os("CI").is_some()
            || std::env::var("ARBOR_TEST_AZURITE_ENDPOINT").is_ok_and(|v| !v.is_empty());
        assert!(
            !mandatory,
            "Azure CLI test: Azurite is mandatory under CI but could not be started: {reason}"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: Azure CLI test needs Azurite: {reason}"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let table = format!("az://{CONTAINER}/cli-{nanos:x}-{}/t", std::process::id());
    let key = [
        "--op",
        "insert",
        "--type",
        "cow",
        "--key",
        "id",
        "--partition-by",
        "city",
        "--ordering",
        "n",
    ];
    write(dir.path(), &table, "trips.csv", TRIPS, &key);
    let main_rows = vec![pair("a", 1.5), pair("b", 2.5), pair("c", 3.5)];
    assert_eq!(rows(&table, &[]), main_rows);

    ok(&["-o", EMULATOR, "branch", "create", &table, "audit"]);
    write(
        dir.path(),
        &table,
        "fix.csv",
        "id,city,fare,n\nb,sf,9.5,10\n",
        &["--branch", "audit"],
    );
    let branch_rows = vec![pair("a", 1.5), pair("b", 9.5), pair("c", 3.5)];
    assert_eq!(rows(&table, &["--branch", "audit"]), branch_rows);
    // Main is untouched until the branch is published.
    assert_eq!(rows(&table, &[]), main_rows);

    ok(&["-o", EMULATOR, "branch", "publish", &table, "audit"]);
    assert_eq!(rows(&table, &[]), branch_rows);
}
