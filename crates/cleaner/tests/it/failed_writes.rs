//! The cleaner's failed-writes step: a crashed write (a prepared write that never completes)
//! whose heartbeat expired is rolled back by the next `clean`, its data files removed; a write
//! whose heartbeat is live is left alone. Time is faked by writing an old heartbeat (the
//! heartbeat object holds the writer's last beat in milliseconds since the epoch).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arbor_cleaner::{clean, CleanOptions};
use arbor_storage::StorageExt;
use arbor_table::{WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::paths::heartbeat_key;
use arbor_timeline::{Action, ActiveTimeline, State};
use bytes::Bytes;

use arbor_testkit_tables::{batch, create, rows, Model};

fn ms_ago(d: Duration) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    (now - d).as_millis().to_string()
}

#[tokio::test]
async fn test_clean_removes_a_crashed_write_once_its_heartbeat_expired() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, true).await;
        let base = rows(0..8, 1, "a");
        t.write(WriteOperation::Insert, &base).await;
        // The default heartbeat timeout (60 s), as `arbor clean` uses.
        let table = t.table.clone().with_write_options(WriteOptions::default());
        assert_eq!(
            table.write_options().heartbeat_timeout,
            Duration::from_secs(60)
        );
        let crashed = table
            .prepare(WriteOperation::Upsert, vec![batch(&rows(0..4, 2, "lost"))])
            .await
            .unwrap();
        let instant = crashed.instant().clone();
        let files: Vec<String> = crashed
            .metadata()
            .write_stats()
            .filter_map(|(_, s)| s.path.clone())
            .collect();
        assert!(!files.is_empty());
        // The writer dies: no more renewals, the instant stays inflight.
        drop(crashed);
        for f in &files {
            assert!(t.storage.exists(f).await.unwrap(), "{f}");
        }
        // Its last beat 30 s ago: still live for a 60 s timeout, clean leaves it.
        t.storage
            .put(
                &heartbeat_key(&instant),
                Bytes::from(ms_ago(Duration::from_secs(30))),
            )
            .await
            .unwrap();
        clean(&table, &CleanOptions::default()).await.unwrap();
        let tl = ActiveTimeline::load(t.storage.clone(), t.table.layout().clone())
            .await
            .unwrap();
        assert!(
            tl.pending().iter().any(|i| i.requested_time == instant),
            "{table_type:?}: a live write was rolled back"
        );
        for f in &files {
            assert!(t.storage.exists(f).await.unwrap(), "{f}");
        }
        // 61 s ago: expired. The next clean rolls it back and removes its files.
        t.storage
            .put(
                &heartbeat_key(&instant),
                Bytes::from(ms_ago(Duration::from_secs(61))),
            )
            .await
            .unwrap();
        clean(&table, &CleanOptions::default()).await.unwrap();
        let tl = ActiveTimeline::load(t.storage.clone(), t.table.layout().clone())
            .await
            .unwrap();
        assert!(
            tl.instants().iter().all(|i| i.requested_time != instant),
            "{table_type:?}: the crashed write is still on the timeline"
        );
        assert_eq!(
            tl.filter(&[Action::Rollback], &[State::Completed]).len(),
            1,
            "{table_type:?}"
        );
        for f in &files {
            assert!(
                !t.storage.exists(f).await.unwrap(),
                "{table_type:?}: {f} left"
            );
        }
        assert!(!t.storage.exists(&heartbeat_key(&instant)).await.unwrap());
        let mut m = Model::default();
        m.upsert(&base);
        assert_eq!(t.read(None).await, m.sorted());
        t.assert_valid("after the failed write was cleaned").await;
    }
}
