//! The S3 side of `cargo xtask bench mdt`: finding (or starting) the S3 server, creating the
//! bench bucket, copying a table built locally to S3, and removing it afterwards.
//!
//! The server is `$ARBOR_TEST_S3_ENDPOINT` when set (any S3-compatible server; credentials
//! `$ARBOR_TEST_S3_ACCESS_KEY_ID` / `$ARBOR_TEST_S3_SECRET_ACCESS_KEY`, dummies by default),
//! else the moto that `scripts/moto.sh` starts (or finds running), as the storage tests do.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arbor_storage::{ObjectStoreStorage, Storage, StorageExt, StorageOptions, MAX_DELETE_BATCH};
use bytes::Bytes;
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

/// The bucket the bench writes to (created if missing).
pub const BUCKET: &str = "arbor-bench";

/// How many uploads run at once when a local table is copied to S3.
const UPLOAD_CONCURRENCY: usize = 16;

/// Where the bench's S3 lives.
#[derive(Debug, Clone)]
pub struct S3Env {
    /// The endpoint URL (`http://127.0.0.1:5055` for moto).
    pub endpoint: String,
    /// Options for [`ObjectStoreStorage::s3`].
    pub options: StorageOptions,
}

impl S3Env {
    /// A storage over [`BUCKET`] rooted at `prefix`.
    pub fn storage(&self, prefix: &str) -> Result<Arc<dyn Storage>, String> {
        let s = ObjectStoreStorage::s3(BUCKET, prefix, &self.options)
            .map_err(|e| format!("bench: S3 storage s3://{BUCKET}/{prefix}: {e}"))?;
        Ok(Arc::new(s))
    }

    /// What the report calls this server.
    pub fn describe(&self) -> String {
        if std::env::var_os("ARBOR_TEST_S3_ENDPOINT").is_some() {
            format!("S3 at {} ($ARBOR_TEST_S3_ENDPOINT)", self.endpoint)
        } else {
            format!(
                "moto at {} (scripts/moto.sh: one single-threaded Python process on this machine)",
                self.endpoint
            )
        }
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// Finds or starts the S3 server and creates [`BUCKET`].
pub fn env() -> Result<S3Env, String> {
    let endpoint = match std::env::var("ARBOR_TEST_S3_ENDPOINT") {
        Ok(e) if !e.is_empty() => e,
        _ => crate::script_output("moto.sh", &[])?,
    };
    create_bucket(&endpoint, BUCKET)?;
    let allow_http = if endpoint.starts_with("http://") {
        "true"
    } else {
        "false"
    };
    let options = StorageOptions::from_pairs([
        ("s3.endpoint", endpoint.clone()),
        ("s3.region", env_or("ARBOR_TEST_S3_REGION", "us-east-1")),
        (
            "s3.access-key-id",
            env_or("ARBOR_TEST_S3_ACCESS_KEY_ID", "arbor-test"),
        ),
        (
            "s3.secret-access-key",
            env_or("ARBOR_TEST_S3_SECRET_ACCESS_KEY", "arbor-test-secret"),
        ),
        ("s3.allow-http", allow_http.to_string()),
    ])
    .map_err(|e| format!("bad S3 test options: {e}"))?;
    Ok(S3Env { endpoint, options })
}

/// Creates `bucket` with a plain HTTP PUT (moto does not check signatures; the dummy SigV4
/// header only names the service). An existing bucket is fine.
fn create_bucket(endpoint: &str, bucket: &str) -> Result<(), String> {
    let hostport = endpoint
        .strip_prefix("http://")
        .ok_or_else(|| format!("bench: can only create a bucket over http, not at {endpoint}"))?
        .trim_end_matches('/');
    let mut stream = TcpStream::connect(hostport)
        .map_err(|e| format!("bench: cannot connect to {hostport}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| format!("bench: {hostport}: {e}"))?;
    let request = format!(
        "PUT /{bucket} HTTP/1.1\r\nHost: {hostport}\r\nContent-Length: 0\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=arbor-test/20240101/us-east-1/s3/aws4_request, \
         SignedHeaders=host, Signature=0\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("bench: cannot send to {hostport}: {e}"))?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response.split_whitespace().nth(1).unwrap_or("");
    let exists =
        response.contains("BucketAlreadyOwnedByYou") || response.contains("BucketAlreadyExists");
    if status == "200" || (status == "409" && exists) {
        Ok(())
    } else {
        Err(format!(
            "bench: creating bucket {bucket} at {endpoint} failed: {}",
            response.lines().next().unwrap_or("no response")
        ))
    }
}

/// Every regular file below `dir`, with its key (`/`-separated, relative to `dir`).
fn local_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| format!("bench: listing {}: {e}", d.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("bench: listing {}: {e}", d.display()))?;
            let path = entry.path();
            let kind = entry
                .file_type()
                .map_err(|e| format!("bench: {}: {e}", path.display()))?;
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let rel = path
                    .strip_prefix(dir)
                    .map_err(|e| format!("bench: {}: {e}", path.display()))?;
                let key = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                out.push((key, path));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Copies every file of the local directory `dir` to `target` (same keys), at most
/// [`UPLOAD_CONCURRENCY`] puts at a time. Returns the number of objects written.
pub fn upload(rt: &Runtime, dir: &Path, target: &Arc<dyn Storage>) -> Result<usize, String> {
    let files = local_files(dir)?;
    let total = files.len();
    rt.block_on(async {
        let mut tasks = JoinSet::new();
        let mut done = 0usize;
        let mut pending = files.into_iter();
        loop {
            while tasks.len() < UPLOAD_CONCURRENCY {
                let Some((key, path)) = pending.next() else {
                    break;
                };
                let target = target.clone();
                tasks.spawn(async move {
                    let data = tokio::fs::read(&path)
                        .await
                        .map_err(|e| format!("bench: reading {}: {e}", path.display()))?;
                    target
                        .put(&key, Bytes::from(data))
                        .await
                        .map_err(|e| format!("bench: uploading {key} to {target}: {e}"))?;
                    Ok::<(), String>(())
                });
            }
            let Some(joined) = tasks.join_next().await else {
                break;
            };
            joined.map_err(|e| format!("bench: upload task: {e}"))??;
            done += 1;
            if done % 2_000 == 0 {
                eprintln!("bench mdt: uploaded {done}/{total} objects");
            }
        }
        Ok::<(), String>(())
    })?;
    Ok(total)
}

/// Deletes every object of `storage` (the bench's prefix), in batches.
pub fn remove_all(rt: &Runtime, storage: &Arc<dyn Storage>) -> Result<(), String> {
    rt.block_on(async {
        let keys: Vec<String> = storage
            .list_all("")
            .await
            .map_err(|e| format!("bench: listing {storage}: {e}"))?
            .into_iter()
            .map(|o| o.key)
            .collect();
        for chunk in keys.chunks(MAX_DELETE_BATCH) {
            for r in storage
                .delete_batch(chunk)
                .await
                .map_err(|e| format!("bench: deleting under {storage}: {e}"))?
            {
                r.map_err(|e| format!("bench: deleting under {storage}: {e}"))?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_local_files_nested_keys_relative_and_sorted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f1"), b"x").unwrap();
        std::fs::write(dir.path().join("top"), b"y").unwrap();
        let keys: Vec<String> = local_files(dir.path())
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, vec!["a/b/f1".to_string(), "top".to_string()]);
    }

    #[test]
    fn test_upload_memory_target_holds_every_file() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        for i in 0..40 {
            let p = dir.path().join(format!("p{}/f{i}", i % 3));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, format!("{i}")).unwrap();
        }
        let target: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        assert_eq!(upload(&rt, dir.path(), &target).unwrap(), 40);
        let listed = rt.block_on(target.list_all("")).unwrap();
        assert_eq!(listed.len(), 40);
        let (data, _) = rt.block_on(target.get("p1/f7")).unwrap();
        assert_eq!(&data[..], b"7");
        remove_all(&rt, &target).unwrap();
        assert!(rt.block_on(target.list_all("")).unwrap().is_empty());
    }
}
