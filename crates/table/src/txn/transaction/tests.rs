//! Every operation enters its locked steps through [`Transaction::run`]: a handle whose main
//! moved changes nothing, and a failed write is rolled back before the next state change.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use arbor_storage::{ObjectStoreStorage, Storage, StorageExt};
use arbor_timeline::config::TableType;
use arbor_timeline::{MetaRoot, State};
use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};

use crate::error::TableError;
use crate::{CreateOptions, Table, WriteOperation, WriteOptions};

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
    ]))
}

fn batch(ids: std::ops::Range<i64>, region: &str, ts: i64) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(
                ids.clone().map(|i| format!("k{i}")),
            )),
            Arc::new(StringArray::from_iter_values(ids.clone().map(|_| region))),
            Arc::new(Int64Array::from_iter_values(ids.map(|_| ts))),
        ],
    )
    .unwrap()
}

/// A merge-on-read table in memory (without a metadata table) with one committed write in
/// partitions `us` and `eu`, opened as main.
async fn table() -> (Arc<dyn Storage>, Table) {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let options = CreateOptions {
        name: "t".into(),
        table_type: TableType::MergeOnRead,
        record_key_fields: vec!["id".into()],
        partition_fields: vec!["region".into()],
        hive_style_partitioning: false,
        ordering_field: Some("ts".into()),
        merge_mode: None,
        schema: schema(),
        metadata_table: false,
        table_version: Default::default(),
        base_format: Default::default(),
    };
    let t = Table::create(storage.clone(), options).await.unwrap();
    t.write(
        WriteOperation::Insert,
        vec![batch(0..4, "us", 1), batch(4..8, "eu", 1)],
    )
    .await
    .unwrap();
    // One more deltacommit so that compaction has log files to compact.
    t.write(WriteOperation::Upsert, vec![batch(0..2, "us", 2)])
        .await
        .unwrap();
    (storage.clone(), Table::open(storage).await.unwrap())
}

/// Every key of the table but the lock's own files.
async fn keys(storage: &Arc<dyn Storage>) -> BTreeSet<String> {
    storage
        .list_all("")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.key)
        .filter(|k| !k.starts_with(".hoodie/.locks/"))
        .collect()
}

fn is_main_moved<T>(r: &Result<T, TableError>) -> bool {
    matches!(r, Err(TableError::MainMoved { .. }))
}

#[tokio::test]
async fn test_every_operation_of_a_handle_whose_main_moved_fails_with_main_moved_and_changes_nothing(
) {
    let (storage, table) = table().await;
    // A handle opened as main at metadata that main no longer resolves to (as after a
    // publication completed since it was opened).
    let mut moved = table.clone();
    moved.ctx.root = MetaRoot::Publication(7);
    let before = keys(&storage).await;
    let ran = std::sync::atomic::AtomicBool::new(false);

    let write = moved
        .write(WriteOperation::Upsert, vec![batch(0..1, "us", 3)])
        .await;
    assert!(is_main_moved(&write), "write: {write:?}");
    let dp = moved.delete_partitions(&["us".to_string()]).await;
    assert!(is_main_moved(&dp), "delete_partitions: {dp:?}");
    let compact = moved.compact().await;
    assert!(is_main_moved(&compact), "compact: {compact:?}");
    let init = moved.init_metadata_table().await;
    assert!(is_main_moved(&init), "init_metadata_table: {init:?}");
    let ri = moved.create_record_index().await;
    assert!(is_main_moved(&ri), "create_record_index: {ri:?}");
    let si = moved.create_secondary_index("by_ts", "ts").await;
    assert!(is_main_moved(&si), "create_secondary_index: {si:?}");
    let tx: Result<(), TableError> = moved
        .transact(|_| async {
            ran.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        })
        .await;
    assert!(is_main_moved(&tx), "transact: {tx:?}");
    assert!(
        !ran.load(std::sync::atomic::Ordering::SeqCst),
        "the work of a moved handle ran"
    );
    assert_eq!(
        keys(&storage).await,
        before,
        "a moved handle changed the table"
    );

    // A write prepared before main moved is rolled back at its commit.
    let prepared = table
        .prepare(WriteOperation::Upsert, vec![batch(0..1, "us", 4)])
        .await
        .unwrap();
    let time = prepared.instant().clone();
    let commit = moved.commit(prepared).await;
    assert!(is_main_moved(&commit), "commit: {commit:?}");
    let tl = table.ctx.timeline().await.unwrap();
    assert!(
        tl.instants().iter().all(|i| i.requested_time != time),
        "the write of a moved handle is still on the timeline"
    );
    assert_eq!(
        keys(&storage)
            .await
            .into_iter()
            .filter(|k| k.contains(&time.to_string()) && !k.starts_with(".hoodie/"))
            .collect::<Vec<_>>(),
        Vec::<String>::new(),
        "data files of the moved write are left"
    );
}

/// The pending instant and data files of a write dropped after `prepare`.
async fn failed_write(table: &Table) -> (arbor_timeline::InstantTime, Vec<String>) {
    let prepared = table
        .prepare(WriteOperation::Upsert, vec![batch(4..6, "eu", 5)])
        .await
        .unwrap();
    let time = prepared.instant().clone();
    let files: Vec<String> = prepared
        .metadata()
        .write_stats()
        .filter_map(|(_, s)| s.path.clone())
        .collect();
    assert!(!files.is_empty());
    drop(prepared);
    let tl = table.ctx.timeline().await.unwrap();
    assert!(tl
        .pending()
        .iter()
        .any(|i| i.requested_time == time && i.state == State::Inflight));
    (time, files)
}

#[tokio::test]
async fn test_a_failed_write_is_rolled_back_before_every_new_state_change() {
    type Op = fn(&Table) -> futures::future::BoxFuture<'_, Result<(), TableError>>;
    let ops: [(&str, Op); 5] = [
        ("write", |t| {
            Box::pin(async move {
                t.write(WriteOperation::Upsert, vec![batch(0..1, "us", 6)])
                    .await
                    .map(|_| ())
            })
        }),
        ("delete_partitions", |t| {
            Box::pin(async move { t.delete_partitions(&["us".to_string()]).await.map(|_| ()) })
        }),
        ("init_metadata_table", |t| {
            Box::pin(async move { t.init_metadata_table().await.map(|_| ()) })
        }),
        ("create_secondary_index", |t| {
            Box::pin(async move {
                t.init_metadata_table().await?;
                let _ = failed_write(t).await;
                t.create_secondary_index("by_ts", "ts").await.map(|_| ())
            })
        }),
        ("transact", |t| Box::pin(t.transact(|_| async { Ok(()) }))),
    ];
    for (name, op) in ops {
        let (storage, table) = table().await;
        // Every pending write counts as failed: no timing involved.
        let table = table.with_write_options(WriteOptions {
            heartbeat_timeout: Duration::ZERO,
            ..WriteOptions::default()
        });
        let (time, files) = failed_write(&table).await;
        op(&table).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        let tl = table.ctx.timeline().await.unwrap();
        assert!(
            tl.pending().is_empty(),
            "{name}: pending {:?}",
            tl.pending()
        );
        assert!(
            tl.instants().iter().all(|i| i.requested_time != time),
            "{name}: the failed write is still on the timeline"
        );
        let left = keys(&storage).await;
        for f in &files {
            assert!(!left.contains(f), "{name}: {f} of the failed write is left");
        }
    }
}

#[tokio::test]
async fn test_compaction_leaves_a_pending_write_alone() {
    let (_, table) = table().await;
    let table = table.with_write_options(WriteOptions {
        heartbeat_timeout: Duration::ZERO,
        ..WriteOptions::default()
    });
    let (time, _) = failed_write(&table).await;
    let done = table.compact().await.unwrap();
    assert!(!done.is_empty(), "nothing was compacted");
    let tl = table.ctx.timeline().await.unwrap();
    assert!(
        tl.pending().iter().any(|i| i.requested_time == time),
        "compaction (a service step) rolled back a pending write"
    );
}

#[tokio::test]
async fn test_on_refuses_a_handle_of_another_table_and_shares_the_lock_with_a_reopened_one() {
    let (_, table) = table().await;
    let (_, other) = self::table().await;
    let same = table.reopen_at(MetaRoot::Root).await.unwrap();
    let r: Result<(), TableError> = table
        .transact(|txn| async move {
            assert!(matches!(
                txn.on(&other),
                Err(TableError::Unsupported { .. })
            ));
            let on = txn.on(&same)?;
            assert_eq!(on.root(), &MetaRoot::Root);
            // The reopened handle's work runs under this lock: no second acquisition.
            on.rollback_failed().await?;
            Ok(())
        })
        .await;
    r.unwrap();
}
