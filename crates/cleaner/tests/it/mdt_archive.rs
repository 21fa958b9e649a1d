//! Archiving follows through to the metadata table: after the data timeline is archived, the
//! MDT's active timeline comes down with it in the same call, instead of keeping every
//! deltacommit since the data timeline's last archival until the next commit.

use arbor_cleaner::{archive, clean, CleanOptions, CleanPolicy};
use arbor_table::read::TableReader;
use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{Action, ActiveTimeline, TableConfig, TableLayout};

use arbor_testkit_tables::{create, rows};

/// Completed instants of the data timeline and of the MDT's, and how many of the MDT's are at
/// or after its latest compaction (those its readers still need).
async fn active(t: &arbor_testkit_tables::TestTable) -> (usize, usize, usize) {
    let mut timelines = Vec::new();
    for dir in [DEFAULT_META_DIR, ".hoodie/metadata/.hoodie"] {
        let config = TableConfig::load(t.storage.as_ref(), dir).await.unwrap();
        let layout = TableLayout::from_config(dir, &config).unwrap();
        timelines.push(
            ActiveTimeline::load(t.storage.clone(), layout)
                .await
                .unwrap(),
        );
    }
    let (data, mdt) = (&timelines[0], &timelines[1]);
    let completed = mdt.completed();
    let compaction = completed
        .iter()
        .filter(|i| i.action == Action::Commit)
        .map(|i| i.requested_time.clone())
        .max();
    let kept = completed
        .iter()
        .filter(|i| compaction.as_ref().is_some_and(|c| &i.requested_time >= c))
        .count();
    (data.completed().len(), completed.len(), kept)
}

#[tokio::test]
async fn test_archive_brings_the_metadata_timeline_down_with_the_data_timeline() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        t.write(WriteOperation::Insert, &rows(0..20, 1, "a")).await;
        for i in 2..60u32 {
            let lo = (i * 7) % 20;
            t.write(WriteOperation::Upsert, &rows(lo..lo + 3, i64::from(i), "u"))
                .await;
        }
        let (data, mdt, kept) = active(&t).await;
        // Without archival of the data timeline the MDT keeps every deltacommit after it.
        assert!(
            mdt > 30 + kept,
            "{tt:?}: {data} data, {mdt} MDT, {kept} kept"
        );
        let before = TableReader::open(t.storage.clone())
            .await
            .unwrap()
            .snapshot(None)
            .await
            .unwrap();

        clean(
            &t.table,
            &CleanOptions {
                policy: CleanPolicy::KeepLatestCommits(2),
                ..CleanOptions::default()
            },
        )
        .await
        .unwrap();
        let archived = t
            .table
            .with_table_lock(async {
                archive(&t.table)
                    .await
                    .map_err(|e| arbor_table::TableError::Unsupported {
                        reason: e.to_string(),
                    })
            })
            .await
            .unwrap();
        let (data, mdt, kept) = active(&t).await;
        assert!(
            archived.data > 0 && archived.metadata > 0,
            "{tt:?}: {archived:?}"
        );
        assert!(
            mdt <= 2 * data + kept,
            "{tt:?}: {data} data, {mdt} MDT instants, {kept} at or after its last compaction"
        );
        // The table reads as before through the MDT, which still validates.
        let after = TableReader::open(t.storage.clone())
            .await
            .unwrap()
            .snapshot(None)
            .await
            .unwrap();
        assert_eq!(
            arrow::compute::concat_batches(&after[0].schema(), &after).unwrap(),
            arrow::compute::concat_batches(&before[0].schema(), &before).unwrap(),
            "{tt:?}"
        );
        let v = arbor_table::validate_indexes(t.storage.clone())
            .await
            .unwrap();
        assert!(v.discrepancies.is_empty(), "{tt:?}: {:?}", v.discrepancies);
    }
}
