//! Clones across backends: a source on the local file system cloned to S3, and a source on S3
//! cloned to a local directory; in both, the clone is written, detached (files copied through
//! the process: no shared root) and read back from its own location alone; and a clone within
//! one bucket, detached with server-side copies.
//!
//! S3 is the server `ARBOR_TEST_S3_ENDPOINT` names (`cargo xtask test` sets it to moto; bucket
//! `ARBOR_TEST_S3_BUCKET`, default `arbor-test`, created if missing); without it the tests are
//! skipped with a visible message (under `CI` a missing endpoint fails them).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use arbor_branching::clone::{detach_clone, CloneAt};
use arbor_storage::{ObjectStoreStorage, Storage, StorageOptions};
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_testkit_tables::{create, rows, schema, Model, Row};
use arbor_timeline::config::{RecordMergeMode, TableType, TableVersion};
use arbor_timeline::layout::{LocationOpener, RegistryOpener};

use crate::clone_detach_support::*;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// The opener with the test S3's options and the bucket, or `None` after a visible skip.
pub(crate) fn s3() -> Option<(RegistryOpener, String)> {
    let Some(endpoint) = std::env::var("ARBOR_TEST_S3_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty())
    else {
        arbor_testkit::skip("SKIPPED: clone S3 tests: ARBOR_TEST_S3_ENDPOINT is not set");
        return None;
    };
    let bucket = env_or("ARBOR_TEST_S3_BUCKET", "arbor-test");
    create_bucket(&endpoint, &bucket);
    let allow_http = endpoint.starts_with("http://").to_string();
    let options = StorageOptions::from_pairs([
        ("s3.endpoint", endpoint),
        ("s3.region", env_or("ARBOR_TEST_S3_REGION", "us-east-1")),
        (
            "s3.access-key-id",
            env_or("ARBOR_TEST_S3_ACCESS_KEY_ID", "arbor-test"),
        ),
        (
            "s3.secret-access-key",
            env_or("ARBOR_TEST_S3_SECRET_ACCESS_KEY", "arbor-test-secret"),
        ),
        ("s3.allow-http", allow_http),
    ])
    .unwrap();
    Some((RegistryOpener::new(options), bucket))
}

/// Creates `bucket` with a plain HTTP PUT (moto checks no signature); an existing one is fine.
/// Other servers (https) must have it already.
fn create_bucket(endpoint: &str, bucket: &str) {
    let Some(hostport) = endpoint.strip_prefix("http://") else {
        return;
    };
    let hostport = hostport.trim_end_matches('/');
    let mut stream = TcpStream::connect(hostport).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let request = format!(
        "PUT /{bucket} HTTP/1.1\r\nHost: {hostport}\r\nContent-Length: 0\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=arbor-test/20240101/us-east-1/s3/aws4_request, \
         SignedHeaders=host, Signature=0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response.split_whitespace().nth(1).unwrap_or("");
    assert!(
        status == "200" || response.contains("BucketAlready"),
        "creating bucket {bucket}: {}",
        response.lines().next().unwrap_or("no response")
    );
}

/// A fresh prefix of the bucket.
pub(crate) fn prefix(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("clone-it-{nanos}-{what}")
}

/// The test table (as `arbor_testkit_tables::create` makes it) in `storage`.
pub(crate) async fn create_in(storage: Arc<dyn Storage>, tt: TableType) -> Table {
    Table::create(
        storage,
        CreateOptions {
            name: "t".into(),
            table_type: tt,
            record_key_fields: vec!["id".into()],
            partition_fields: vec!["region".into()],
            hive_style_partitioning: true,
            ordering_field: Some("ts".into()),
            merge_mode: Some(RecordMergeMode::EventTimeOrdering),
            schema: schema(),
            metadata_table: true,
            table_version: TableVersion::default(),
            base_format: Default::default(),
        },
    )
    .await
    .unwrap()
}

/// Clones `src` into `target`, writes on the clone, detaches it and checks it reads from its
/// own location alone, and that the source still reads `source_rows`.
async fn clone_write_detach(
    opener: &dyn LocationOpener,
    src: &str,
    target: &str,
    source_rows: &[Row],
    server_side: bool,
) {
    let made = shallow(opener, src, target, CloneAt::Main).await;
    assert_eq!(made.pins.len(), 1);
    let mut model = Model::default();
    model.upsert(source_rows);
    let r = rows(0..4, 7, "c");
    write(opener, target, WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    assert_eq!(read(opener, target).await, model.sorted(), "{target}");
    let out = detach_clone(opener, target).await.unwrap();
    assert!(out.files_copied > 0, "{out:?}");
    assert_eq!(out.server_side_copy, server_side, "{out:?}");
    assert_eq!(out.pins_removed.len(), 1);
    assert!(pins(opener, src).await.is_empty());
    assert_self_contained(opener, target, &model.sorted(), target).await;
    let mut source = Model::default();
    source.upsert(source_rows);
    assert_eq!(read(opener, src).await, source.sorted(), "{src}");
}

#[tokio::test]
async fn test_clone_from_local_to_s3_writes_and_detaches() {
    let Some((opener, bucket)) = s3() else {
        return;
    };
    let t = create(TableType::MergeOnRead, true).await;
    let r = rows(0..20, 1, "s");
    t.write(WriteOperation::Upsert, &r).await;
    let target = format!("s3://{bucket}/{}", prefix("from-local"));
    clone_write_detach(&opener, &loc(&t.base), &target, &r, false).await;
}

#[tokio::test]
async fn test_clone_from_s3_to_local_writes_and_detaches() {
    let Some((opener, bucket)) = s3() else {
        return;
    };
    let src = format!("s3://{bucket}/{}", prefix("to-local"));
    let table = create_in(opener.open(&src).unwrap(), TableType::CopyOnWrite).await;
    let r = rows(0..20, 1, "s");
    table
        .write(
            WriteOperation::Upsert,
            vec![arbor_testkit_tables::batch(&r)],
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = loc(&dir.path().join("clone"));
    clone_write_detach(&opener, &src, &target, &r, false).await;
    // The local clone is a plain table: read without any opener.
    let own: Arc<dyn Storage> =
        Arc::new(ObjectStoreStorage::local(&dir.path().join("clone")).unwrap());
    assert_eq!(read_storage(own).await.len(), 20);
}

#[tokio::test]
async fn test_clone_within_one_bucket_detaches_with_server_side_copies() {
    let Some((opener, bucket)) = s3() else {
        return;
    };
    let src = format!("s3://{bucket}/{}", prefix("same-src"));
    let table = create_in(opener.open(&src).unwrap(), TableType::MergeOnRead).await;
    let r = rows(0..20, 1, "s");
    table
        .write(
            WriteOperation::Upsert,
            vec![arbor_testkit_tables::batch(&r)],
        )
        .await
        .unwrap();
    let target = format!("s3://{bucket}/{}", prefix("same-clone"));
    clone_write_detach(&opener, &src, &target, &r, true).await;
}
