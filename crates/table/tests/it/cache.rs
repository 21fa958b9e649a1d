//! The process-wide table cache: handles of one process share loaded state, and a cached
//! state is never stale.

use std::sync::Arc;

use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::{
    CacheMode, CacheUse, ListingSource, OpenOptions, ReadOptions, TableReader,
};
use arbor_table::{Table, WriteOperation};
use arbor_timeline::config::TableType;

use super::write_support::*;

/// A second storage handle on the same directory (another "handle" of the process).
fn other_handle(t: &TestTable) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(&t.base).unwrap())
}

async fn open(storage: &Arc<dyn Storage>) -> TableReader {
    TableReader::open(storage.clone()).await.unwrap()
}

#[tokio::test]
async fn test_cache_second_open_of_unchanged_table_is_served_from_cache() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, Layout::Hive).await;
        t.write(WriteOperation::Upsert, &rows(0..20, 1, "a")).await;
        let storage = other_handle(&t);
        let first = open(&storage).await;
        let second = open(&storage).await;
        assert!(second.is_from_cache(), "{table_type:?}");
        assert_eq!(
            rows_of(&first.read(ReadOptions::new()).await.unwrap()),
            rows_of(&second.read(ReadOptions::new()).await.unwrap())
        );
        // Bypass never reads from (nor fills) the cache.
        let cold = TableReader::open_view_opts(
            storage.clone(),
            OpenOptions::new().cache(CacheMode::Bypass),
        )
        .await
        .unwrap();
        assert!(!cold.is_from_cache());
        // Another listing source is another entry.
        let by_dir = TableReader::open_view_with(storage.clone(), ListingSource::Storage)
            .await
            .unwrap();
        assert!(!by_dir.is_from_cache());
    }
}

#[tokio::test]
async fn test_cache_two_handles_one_writes_the_other_opens_and_sees_the_write() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, Layout::Plain).await;
        let mut model = Model::default();
        let first = rows(0..10, 1, "a");
        t.write(WriteOperation::Upsert, &first).await;
        model.upsert(&first);
        let reader_handle = other_handle(&t);
        // Fill the cache from the reader's handle, with partitions listed.
        let before = open(&reader_handle).await;
        assert_eq!(
            rows_of(&before.read(ReadOptions::new()).await.unwrap()),
            model.sorted()
        );
        assert!(open(&reader_handle).await.is_from_cache());
        // The writer is another handle of the same process (a separate `Table`).
        let writer = Table::open(other_handle(&t)).await.unwrap();
        for (i, step) in [rows(5..15, 2, "b"), rows(0..3, 3, "c")].iter().enumerate() {
            writer
                .write(WriteOperation::Upsert, vec![batch(step)])
                .await
                .unwrap();
            model.upsert(step);
            let after = open(&reader_handle).await;
            assert!(!after.is_from_cache(), "{table_type:?} step {i}");
            assert_eq!(
                rows_of(&after.read(ReadOptions::new()).await.unwrap()),
                model.sorted(),
                "{table_type:?} step {i}"
            );
            // The reload was cached in turn and is as fresh.
            let again = open(&reader_handle).await;
            assert!(again.is_from_cache());
            assert_eq!(
                rows_of(&again.read(ReadOptions::new()).await.unwrap()),
                model.sorted()
            );
        }
        // The handle opened before the writes still reads its own snapshot.
        assert_eq!(
            rows_of(&before.read(ReadOptions::new()).await.unwrap()),
            rows_of(
                &t.reader()
                    .await
                    .read(ReadOptions::new().as_of(t.completed().await[0].requested_time.clone()))
                    .await
                    .unwrap()
            )
        );
    }
}

#[tokio::test]
async fn test_cache_writer_plans_against_fresh_state_after_another_writer() {
    // Two `Table` handles write in turn; each write plans against a cached-or-fresh view,
    // so every record lands once (no duplicate inserts into new file groups).
    let t = create(TableType::MergeOnRead, Layout::Hive).await;
    let a = Table::open(other_handle(&t)).await.unwrap();
    let b = Table::open(other_handle(&t)).await.unwrap();
    let mut model = Model::default();
    for (i, step) in [
        rows(0..10, 1, "a"),
        rows(0..10, 2, "b"),
        rows(5..20, 3, "c"),
        rows(0..20, 4, "d"),
    ]
    .iter()
    .enumerate()
    {
        let w = if i % 2 == 0 { &a } else { &b };
        w.write(WriteOperation::Upsert, vec![batch(step)])
            .await
            .unwrap();
        model.upsert(step);
        assert_snapshot(&t, &model, &format!("step {i}")).await;
    }
}

/// Every query of a refreshed reader equals a cold open's, after each kind of change.
async fn assert_refreshed_reads_as_cold(storage: &Arc<dyn Storage>, step: &str) {
    let source = OpenOptions::new().listing(ListingSource::Storage);
    let warm = TableReader::open_view_opts(storage.clone(), source)
        .await
        .unwrap();
    assert_eq!(warm.cache_use(), CacheUse::Refreshed, "{step}");
    let cold = TableReader::open_view_opts(storage.clone(), source.cache(CacheMode::Bypass))
        .await
        .unwrap();
    for options in [
        ReadOptions::new(),
        ReadOptions::new().read_optimized(true),
        ReadOptions::new().incremental(None, None),
    ] {
        assert_eq!(
            rows_of(&warm.read(options.clone()).await.unwrap()),
            rows_of(&cold.read(options).await.unwrap()),
            "{step}"
        );
    }
    let hit = TableReader::open_view_opts(storage.clone(), source)
        .await
        .unwrap();
    assert_eq!(hit.cache_use(), CacheUse::Hit, "{step}");
}

#[tokio::test]
async fn test_cache_directory_listing_reader_is_refreshed_incrementally_and_reads_as_cold() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, Layout::Hive).await;
        t.write(WriteOperation::Insert, &rows(0..12, 1, "a")).await;
        let handle = other_handle(&t);
        let source = OpenOptions::new().listing(ListingSource::Storage);
        let filled = TableReader::open_view_opts(handle.clone(), source)
            .await
            .unwrap();
        assert_eq!(filled.cache_use(), CacheUse::Loaded);
        filled.read(ReadOptions::new()).await.unwrap();
        t.write(WriteOperation::Upsert, &rows(4..20, 2, "b")).await;
        assert_refreshed_reads_as_cold(&handle, "upsert").await;
        t.write(WriteOperation::Delete, &rows(0..3, 3, "")).await;
        assert_refreshed_reads_as_cold(&handle, "delete").await;
        if table_type == TableType::MergeOnRead {
            assert!(!t.table.compact().await.unwrap().is_empty());
            assert_refreshed_reads_as_cold(&handle, "compaction").await;
        }
        t.write(WriteOperation::InsertOverwrite, &rows(30..33, 4, "c"))
            .await;
        assert_refreshed_reads_as_cold(&handle, "insert overwrite").await;
    }
}
