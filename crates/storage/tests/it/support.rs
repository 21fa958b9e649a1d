//! Shared helpers of the integration tests: an S3 storage backed by moto.
//!
//! `s3_storage()` uses `ARBOR_TEST_S3_ENDPOINT` when set (any S3-compatible server; bucket
//! `ARBOR_TEST_S3_BUCKET`, default `arbor-test`, credentials `ARBOR_TEST_S3_ACCESS_KEY_ID` /
//! `ARBOR_TEST_S3_SECRET_ACCESS_KEY`, default dummies), else starts moto with `scripts/moto.sh`.
//! When no S3 is available the S3 tests are skipped with a visible message (written straight to
//! the process's stderr, which the test harness does not capture), except under `CI` or when
//! `ARBOR_TEST_S3_ENDPOINT` is set: then S3 is mandatory and they fail.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arbor_storage::{ObjectStoreStorage, Storage, StorageOptions};

/// Where the test S3 lives.
#[derive(Debug, Clone)]
pub struct S3Env {
    /// Endpoint URL (`http://127.0.0.1:5055`).
    pub endpoint: String,
    /// The bucket (created if missing).
    pub bucket: String,
    /// Options for `open_storage` / `ObjectStoreStorage::s3`.
    pub options: StorageOptions,
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// Starts (or finds) the S3 server and creates the bucket, once per test binary.
pub fn s3_env() -> Result<S3Env, String> {
    static ENV: OnceLock<Result<S3Env, String>> = OnceLock::new();
    ENV.get_or_init(init_s3_env).clone()
}

/// The S3 endpoint named explicitly by `ARBOR_TEST_S3_ENDPOINT`, if any.
fn explicit_endpoint() -> Option<String> {
    std::env::var("ARBOR_TEST_S3_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty())
}

fn init_s3_env() -> Result<S3Env, String> {
    let endpoint = match explicit_endpoint() {
        Some(e) => e,
        None => start_moto()?,
    };
    let bucket = env_or("ARBOR_TEST_S3_BUCKET", "arbor-test");
    create_bucket(&endpoint, &bucket)?;
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
    Ok(S3Env {
        endpoint,
        bucket,
        options,
    })
}

/// Runs `scripts/moto.sh` and returns the URL it prints.
fn start_moto() -> Result<String, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/moto.sh");
    let out = Command::new("bash")
        .arg(script)
        .output()
        .map_err(|e| format!("cannot run {script}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{script} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("http"))
        .map(|l| l.trim().to_string())
        .ok_or_else(|| format!("{script} printed no URL: {stdout:?}"))
}

/// Creates `bucket` with a plain HTTP PUT (moto does not check signatures; the fake SigV4
/// header only tells it which service is meant). An existing bucket is fine.
fn create_bucket(endpoint: &str, bucket: &str) -> Result<(), String> {
    let hostport = endpoint
        .strip_prefix("http://")
        .ok_or_else(|| format!("can only create the bucket over http, not at {endpoint}"))?
        .trim_end_matches('/');
    let mut stream =
        TcpStream::connect(hostport).map_err(|e| format!("cannot connect to {hostport}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "PUT /{bucket} HTTP/1.1\r\nHost: {hostport}\r\nContent-Length: 0\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=arbor-test/20240101/us-east-1/s3/aws4_request, \
         SignedHeaders=host, Signature=0\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("cannot send to {hostport}: {e}"))?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response.split_whitespace().nth(1).unwrap_or("");
    match status {
        "200" => Ok(()),
        "409"
            if response.contains("BucketAlreadyOwnedByYou")
                || response.contains("BucketAlreadyExists") =>
        {
            Ok(())
        }
        _ => Err(format!(
            "creating bucket {bucket} at {endpoint} failed: {}",
            response.lines().next().unwrap_or("no response")
        )),
    }
}

/// Reports that S3 is unavailable: a panic under `CI` or when `ARBOR_TEST_S3_ENDPOINT` names a
/// server explicitly (it was asked for, so failing to reach it or to create the bucket is an
/// error), else a visible skip message.
fn unavailable(reason: &str) {
    if let Some(endpoint) = explicit_endpoint() {
        panic!(
            "S3 tests: ARBOR_TEST_S3_ENDPOINT={endpoint} is set, so S3 is mandatory, but it is \
             unusable: {reason}"
        );
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "S3 tests need moto but it is unavailable (CI is set, so they must not skip): {reason}"
        );
    }
    // Written to the real stderr, not through the test harness's capture, so that it shows
    // even for passing tests.
    let _ = writeln!(std::io::stderr(), "SKIPPED: S3 tests need moto: {reason}");
}

/// An S3 storage under a fresh prefix of the test bucket, or `None` (after printing why) when
/// no S3 server can be started outside CI.
pub async fn s3_storage() -> Option<Arc<dyn Storage>> {
    s3_object_storage()
        .await
        .map(|s| Arc::new(s) as Arc<dyn Storage>)
}

/// Like [`s3_storage`], as the concrete type.
pub async fn s3_object_storage() -> Option<ObjectStoreStorage> {
    let env = tokio::task::spawn_blocking(s3_env)
        .await
        .expect("s3_env panicked");
    match env {
        Ok(env) => {
            let prefix = format!("it-{}", uuid_like());
            Some(
                ObjectStoreStorage::s3(&env.bucket, &prefix, &env.options)
                    .expect("cannot open the test S3 storage"),
            )
        }
        Err(reason) => {
            unavailable(&reason);
            None
        }
    }
}

/// A unique-enough name without a uuid dependency: time and a process-wide counter.
pub fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!(
        "{nanos:x}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
