//! Column and partition stats through the table services: a clean tombstones the stats of
//! the files it deletes, a restore to a savepoint brings them back to the savepoint's files,
//! and a working branch keeps its own metadata table's stats in step; `validate_indexes`
//! finds nothing after each step.

use std::sync::Arc;

use arbor_branching::{create_branch, open_branch, BranchSource};
use arbor_cleaner::{clean, create_savepoint, restore, CleanOptions, CleanPolicy};
use arbor_mdt::column_stats::read_column_stats;
use arbor_mdt::MetadataTable;
use arbor_storage::Storage;
use arbor_table::WriteOperation;
use arbor_timeline::config::{TableType, TableVersion};
use arbor_timeline::MetaRoot;

use arbor_testkit_tables::{batch, create, rows};

/// Validation finds nothing, and every stored file record names a file the table has.
async fn assert_stats_valid(storage: &Arc<dyn Storage>, step: &str) {
    let v = arbor_table::validate_indexes(storage.clone())
        .await
        .unwrap();
    assert!(
        v.checked.iter().any(|(n, _)| n == "column_stats")
            && v.checked.iter().any(|(n, _)| n == "partition_stats"),
        "{step}: {:?}",
        v.checked
    );
    assert!(v.discrepancies.is_empty(), "{step}: {:?}", v.discrepancies);
}

/// The number of distinct files the stored `column_stats` records name.
async fn files_with_stats(storage: &Arc<dyn Storage>) -> usize {
    let mdt = MetadataTable::open(storage.clone()).await.unwrap().unwrap();
    let cs = read_column_stats(storage.as_ref(), &mdt).await.unwrap();
    let files: std::collections::BTreeSet<_> =
        cs.records().values().map(|r| r.file_name.clone()).collect();
    files.len()
}

#[tokio::test]
async fn test_clean_restore_and_branch_keep_column_stats_valid() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        t.write(WriteOperation::Insert, &rows(0..10, 1, "a")).await;
        t.table.create_stats_indexes(true, true).await.unwrap();
        let sp = t.write(WriteOperation::Upsert, &rows(0..10, 2, "b")).await;
        create_savepoint(&t.table, Some(&sp), "stats")
            .await
            .unwrap();
        let at_savepoint = files_with_stats(&t.storage).await;
        for i in 3..6 {
            t.write(WriteOperation::Upsert, &rows(0..10, i, "c")).await;
        }
        if tt == TableType::MergeOnRead {
            t.table.compact().await.unwrap();
            t.write(WriteOperation::Upsert, &rows(0..10, 6, "e")).await;
        }
        assert_stats_valid(&t.storage, &format!("{tt:?} writes")).await;
        let before_clean = files_with_stats(&t.storage).await;
        let out = clean(
            &t.table,
            &CleanOptions {
                policy: CleanPolicy::KeepLatestCommits(1),
                ..CleanOptions::default()
            },
        )
        .await
        .unwrap();
        assert!(out.deleted > 0, "{tt:?}: the clean deletes files");
        assert_stats_valid(&t.storage, &format!("{tt:?} clean")).await;
        assert!(
            files_with_stats(&t.storage).await < before_clean,
            "{tt:?}: the clean tombstones the deleted files' stats"
        );

        restore(&t.table, &sp).await.unwrap();
        assert_stats_valid(&t.storage, &format!("{tt:?} restore")).await;
        assert!(
            files_with_stats(&t.storage).await <= at_savepoint,
            "{tt:?} restore"
        );

        create_branch(&t.table, "b", BranchSource::MainHead)
            .await
            .unwrap();
        let b = open_branch(t.storage.clone(), "b").await.unwrap();
        b.write(WriteOperation::Upsert, vec![batch(&rows(0..4, 9, "br"))])
            .await
            .unwrap();
        let view = MetaRoot::Branch("b".to_string()).view(t.storage.clone());
        assert_stats_valid(&view, &format!("{tt:?} branch write")).await;
        t.write(WriteOperation::Upsert, &rows(4..8, 10, "m")).await;
        assert_stats_valid(&t.storage, &format!("{tt:?} main after branch")).await;
    }
}

/// The number of files in MDT partition `partition` (base HFiles and log files).
fn mdt_files_in(t: &arbor_testkit_tables::TestTable, partition: &str) -> usize {
    let dir = t.base.join(".hoodie/metadata").join(partition);
    std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().to_string();
                    name.contains(".log.") || name.ends_with(".hfile")
                })
                .count()
        })
        .unwrap_or(0)
}

/// A long history with cleans and archivals of both timelines: the stats partitions are
/// compacted with FILES, so archiving the MDT's old deltacommits (whose stats blocks would then
/// be invalid) loses no record, and their file count stays bounded by the clean's retention.
/// Version 9 (copy-on-write) and version 8 (merge-on-read, Java 1.0's record schema).
#[tokio::test]
async fn test_long_history_with_archival_keeps_stats_and_bounds_their_files() {
    for (tt, version) in [
        (TableType::CopyOnWrite, TableVersion::Nine),
        (TableType::MergeOnRead, TableVersion::Eight),
    ] {
        let t = arbor_testkit_tables::create_at(tt, true, version).await;
        t.write(WriteOperation::Insert, &rows(0..12, 1, "a")).await;
        t.table.create_stats_indexes(true, true).await.unwrap();
        // Stats files after each write.
        let mut files = Vec::new();
        for i in 2..82u32 {
            let lo = (i * 5) % 12;
            t.write(WriteOperation::Upsert, &rows(lo..lo + 3, i64::from(i), "u"))
                .await;
            if i % 10 == 0 {
                clean(
                    &t.table,
                    &CleanOptions {
                        policy: CleanPolicy::KeepLatestCommits(2),
                        archive: true,
                        ..CleanOptions::default()
                    },
                )
                .await
                .unwrap();
                assert_stats_valid(&t.storage, &format!("{tt:?} after write {i}")).await;
            }
            files.push(mdt_files_in(&t, "column_stats") + mdt_files_in(&t, "partition_stats"));
        }
        // The MDT timeline was archived past the first stats blocks: without their
        // compaction, those blocks would no longer be valid and validation would fail above.
        let archived = t.base.join(".hoodie/metadata/.hoodie/timeline/history");
        let archived_old = t.base.join(".hoodie/metadata/.hoodie/archived");
        assert!(
            archived.exists() || archived_old.exists(),
            "{tt:?}: the MDT timeline was never archived"
        );
        // Three file groups each take one log file per write (240 files in 80 writes if
        // nothing compacted them): compaction every 10 and the clean's retention of 20 MDT
        // commits keep the count in a sawtooth under 3 x (20 + 10) plus a few base files.
        let peak = files.iter().max().copied().unwrap_or(0);
        assert!(
            peak <= 100,
            "{tt:?}: stats partitions keep growing: {files:?}"
        );
        assert_stats_valid(&t.storage, &format!("{tt:?} end")).await;
    }
}
