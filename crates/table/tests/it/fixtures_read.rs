//! arbor reads every Spark-written fixture with rows identical to what hudi-rs read
//! (`expected/<table>/{snapshot,asof_first,asof_prev,incremental}.json`: `row_count` and
//! `data_sha256`, computed by the repo's canonicaliser `scripts/canonical_rows.py`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::TableError;
use arbor_timeline::InstantTime;
use arrow::record_batch::RecordBatch;
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn skip(msg: &str) {
    assert!(std::env::var_os("CI").is_none(), "{msg}, but CI is set");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{msg}");
}

fn fixtures_root() -> Option<PathBuf> {
    let root = repo_root().join("../shared/fixtures");
    if root.is_dir() {
        Some(root)
    } else {
        skip("SKIPPED: ../shared/fixtures not found (fixture read tests)");
        None
    }
}

/// The Python with pyarrow that runs `scripts/canonical_rows.py`.
fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ARBOR_PEER_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/peer.sh"))
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| PathBuf::from(l.trim())),
        _ => {
            skip("SKIPPED: fixture read tests need python with pyarrow (scripts/peer.sh failed)");
            None
        }
    }
}

fn zips(root: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if !p.ends_with("expected") {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "zip") {
                let rel = p.strip_prefix(root).unwrap().with_extension("");
                out.push((rel.to_string_lossy().into_owned(), p));
            }
        }
    }
    out.sort();
    out
}

fn unzip(zip_path: &Path) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let mut archive = zip::ZipArchive::new(fs::File::open(zip_path).unwrap()).unwrap();
    archive.extract(tmp.path()).unwrap();
    let mut stack = vec![tmp.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        if d.join(".hoodie").is_dir() {
            return (tmp, d);
        }
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && !p.ends_with("__MACOSX") {
                stack.push(p);
            }
        }
    }
    panic!("no .hoodie in {}", zip_path.display());
}

/// (row_count, data_sha256) of batches, by the canonicaliser.
fn digest(
    python: &Path,
    dir: &Path,
    schema: &arrow::datatypes::SchemaRef,
    batches: &[RecordBatch],
) -> (u64, String) {
    let path = dir.join("rows.arrow");
    let file = fs::File::create(&path).unwrap();
    let mut w = arrow::ipc::writer::FileWriter::try_new(file, schema).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.finish().unwrap();
    let out = Command::new(python)
        .arg(repo_root().join("scripts/canonical_rows.py"))
        .arg(&path)
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

fn t(v: &Value) -> Option<InstantTime> {
    v.as_str().map(|s| InstantTime::parse(s).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_read_every_fixture_matches_peer_reader() {
    let Some(root) = fixtures_root() else { return };
    let Some(python) = python() else { return };
    let mut failures = Vec::new();
    let mut checked = 0;
    for (name, zip) in zips(&root) {
        let (tmp, base) = unzip(&zip);
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
        let lance = name.contains("lance");
        let reader = match TableReader::open(storage).await {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{name}: open: {e}"));
                continue;
            }
        };
        for query in ["snapshot", "asof_first", "asof_prev", "incremental"] {
            let path = root
                .join("expected")
                .join(&name)
                .join(format!("{query}.json"));
            let Ok(text) = fs::read(&path) else { continue };
            let expected: Value = serde_json::from_slice(&text).unwrap();
            let q = &expected["query"];
            let result = if q["type"] == "incremental" {
                reader
                    .incremental(t(&q["start"]).as_ref(), t(&q["end"]).as_ref())
                    .await
            } else {
                reader.snapshot(t(&q["as_of"]).as_ref()).await
            };
            match result {
                Err(TableError::Format(e)) if lance && e.to_string().contains("lance") => {
                    checked += 1;
                }
                Err(e) => failures.push(format!("{name}/{query}: {e}")),
                Ok(batches) => {
                    let (rows, sha) = digest(&python, tmp.path(), reader.schema(), &batches);
                    let want_rows = expected["row_count"].as_u64().unwrap();
                    let want_sha = expected["data_sha256"].as_str().unwrap();
                    if rows != want_rows || sha != want_sha {
                        failures.push(format!(
                            "{name}/{query}: rows {rows} (want {want_rows}), data_sha256 {} (want {})",
                            &sha[..12],
                            &want_sha[..12]
                        ));
                    } else {
                        checked += 1;
                    }
                }
            }
        }
    }
    eprintln!("checked {checked} fixture queries");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
