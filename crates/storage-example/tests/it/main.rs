//! The example plugin, registered from outside arbor-storage: the exported storage conformance
//! suite on `example-mem://`, and `open_storage` / `StorageOptions::from_pairs` seeing it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
#![allow(missing_docs)]

use std::sync::Once;

use arbor_storage::conformance::run_storage_suite;
use arbor_storage::{open_storage, registered_schemes, StorageExt, StorageOptions};
use bytes::Bytes;

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| arbor_storage_example::register().unwrap());
}

#[test]
fn test_register_adds_the_scheme() {
    setup();
    assert!(registered_schemes().contains(&"example-mem".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_conformance_suite_on_registered_scheme() {
    setup();
    let store = open_storage("example-mem://suite/t", &StorageOptions::default()).unwrap();
    assert_eq!(store.to_string(), "example-mem://suite/t");
    run_storage_suite(store).await;
}

#[tokio::test]
async fn test_open_storage_shares_named_stores_and_reads_plugin_options() {
    setup();
    let none = StorageOptions::default();
    let a = open_storage("example-mem://shared/t", &none).unwrap();
    a.put("x/1", Bytes::from_static(b"one")).await.unwrap();
    // A second open of the same store sees the object; another prefix does not.
    let b = open_storage("example-mem://shared/t", &none).unwrap();
    assert_eq!(b.get("x/1").await.unwrap().0, Bytes::from_static(b"one"));
    let root = open_storage("example-mem://shared", &none).unwrap();
    assert!(root.exists("t/x/1").await.unwrap());
    // The plugin's own option namespace is accepted and validated by the registry.
    let fresh = StorageOptions::from_pairs([("example.fresh", "true")]).unwrap();
    let c = open_storage("example-mem://shared/t", &fresh).unwrap();
    assert!(!c.exists("x/1").await.unwrap());
    let err = StorageOptions::from_pairs([("example.bogus", "1")]).unwrap_err();
    assert!(err.to_string().contains("example.fresh"), "{err}");
    let bad = StorageOptions::from_pairs([("example.fresh", "perhaps")]).unwrap();
    assert!(open_storage("example-mem://shared", &bad).is_err());
    assert!(open_storage("example-mem:///t", &none).is_err());
}
