//! Azure Blob Storage, proven against Azurite: the storage conformance suite, the object-store
//! lock suite, conditional writes and `open_storage("az://...")` with `azure.*` options.
//!
//! Azurite is started (and installed when missing) by `scripts/azurite.sh`, which also creates
//! the test container. When it cannot be started the tests fail under `CI` (or when
//! `ARBOR_TEST_AZURITE_ENDPOINT` says a server was provided) and are skipped with a visible
//! message otherwise.

use std::io::Write;
use std::process::Command;
use std::sync::{Arc, OnceLock};

use arbor_storage::conformance::{run_lock_suite, run_storage_suite};
use arbor_storage::{
    open_storage, LockProvider, ObjectStoreLockProvider, Storage, StorageError, StorageOptions,
};
use bytes::Bytes;

use crate::support::uuid_like;

/// The container the tests use (created by the script).
const CONTAINER: &str = "arbor-test";

/// Runs `scripts/azurite.sh container CONTAINER` once per test binary: the endpoint, or why not.
fn azurite() -> Result<String, String> {
    static ENV: OnceLock<Result<String, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/azurite.sh");
        let out = Command::new("bash")
            .args([script, "container", CONTAINER])
            .output()
            .map_err(|e| format!("cannot run {script}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{script} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
        // object_store's emulator mode talks to http://127.0.0.1:10000 unless
        // AZURITE_BLOB_STORAGE_URL says otherwise.
        let target = std::env::var("AZURITE_BLOB_STORAGE_URL")
            .unwrap_or_else(|_| "http://127.0.0.1:10000".to_string());
        if target.trim_end_matches('/') != url {
            return Err(format!(
                "Azurite runs at {url} but object_store would use {target}: set \
                 AZURITE_BLOB_STORAGE_URL={url}"
            ));
        }
        Ok(url)
    })
    .clone()
}

/// The options of the emulator.
fn emulator_options() -> StorageOptions {
    StorageOptions::from_pairs([("azure.use-emulator", "true")]).unwrap()
}

/// A fresh `az://` storage on Azurite, or `None` after a visible skip message (outside CI).
async fn azure_storage() -> Option<Arc<dyn Storage>> {
    match tokio::task::spawn_blocking(azurite).await.unwrap() {
        Ok(_endpoint) => {
            let url = format!("az://{CONTAINER}/it-{}", uuid_like());
            Some(open_storage(&url, &emulator_options()).unwrap())
        }
        Err(reason) => {
            let mandatory = std::env::var_os("CI").is_some()
                || std::env::var("ARBOR_TEST_AZURITE_ENDPOINT").is_ok_and(|v| !v.is_empty());
            assert!(
                !mandatory,
                "Azure tests: Azurite is mandatory under CI but could not be started: {reason}"
            );
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: Azure tests need Azurite: {reason}"
            );
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn test_azure_conformance_suite_on_azurite() {
    let Some(store) = azure_storage().await else {
        return;
    };
    assert!(
        store.to_string().starts_with("az://arbor-test/it-"),
        "{store}"
    );
    run_storage_suite(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_azure_object_store_lock_suite_on_azurite() {
    let Some(store) = azure_storage().await else {
        return;
    };
    run_lock_suite("object-store/azure", move || {
        std::future::ready(
            Arc::new(ObjectStoreLockProvider::new(store.clone(), "locks")) as Arc<dyn LockProvider>,
        )
    })
    .await;
}

#[tokio::test]
async fn test_azure_conditional_writes_honoured_by_azurite() {
    let Some(store) = azure_storage().await else {
        return;
    };
    let v1 = store
        .put_if_absent("k", Bytes::from_static(b"one"))
        .await
        .unwrap();
    let err = store
        .put_if_absent("k", Bytes::from_static(b"two"))
        .await
        .unwrap_err();
    assert!(matches!(err, StorageError::AlreadyExists { .. }), "{err}");
    let v2 = store
        .put_if_match("k", Bytes::from_static(b"two"), &v1)
        .await
        .unwrap();
    assert_ne!(v1, v2);
    let err = store
        .put_if_match("k", Bytes::from_static(b"three"), &v1)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StorageError::PreconditionFailed { .. }),
        "{err}"
    );
    assert_eq!(store.get("k").await.unwrap().0, Bytes::from_static(b"two"));
}
