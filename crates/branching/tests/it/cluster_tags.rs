//! Clustering and branches: a tag taken before a clustering reads the old layout after a clean
//! that removes every other replaced file; a clustering on a working branch leaves main alone.

use arbor_branching::{create_branch, create_tag, tag_reader, BranchSource};
use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_table::cluster::{ClusterOptions, Layout};
use arbor_table::{WriteOperation, WriteOptions};
use arbor_testkit_tables::{batch, create, rows, rows_of};
use arbor_timeline::config::TableType;
use arrow::array::AsArray;

fn sorted_by(col: &str) -> ClusterOptions {
    ClusterOptions {
        sort_by: vec![col.to_string()],
        layout: Layout::Linear,
        ..ClusterOptions::default()
    }
}

#[tokio::test]
async fn test_a_tag_before_clustering_reads_the_old_layout_after_a_clean() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let small = t.table.clone().with_write_options(WriteOptions {
            small_file_limit: 0,
            ..WriteOptions::default()
        });
        for c in 0..4u32 {
            small
                .write(
                    WriteOperation::Insert,
                    vec![batch(&rows(c * 10..c * 10 + 10, 1, "a"))],
                )
                .await
                .unwrap();
        }
        let before = t.read(None).await;
        let files_before = t.data_files().await;
        create_tag(&t.table, "pre", None, None).await.unwrap();
        let out = t.table.cluster(&sorted_by("ts")).await.unwrap();
        assert!(out.instant.is_some(), "{tt:?}");
        let deleted = arbor_branching::clean(
            &t.table,
            CleanOptions {
                policy: CleanPolicy::KeepLatestFileVersions(1),
                ..CleanOptions::default()
            },
        )
        .await
        .unwrap()
        .deleted;
        assert_eq!(deleted, 0, "{tt:?}: the tag keeps every replaced file");
        let (reader, at) = tag_reader(t.storage.clone(), None, "pre").await.unwrap();
        let batches = reader.snapshot(Some(&at)).await.unwrap();
        assert_eq!(rows_of(&batches), before, "{tt:?}");
        for b in &batches {
            let names = b.column_by_name("_hoodie_file_name").unwrap();
            let names = arrow::compute::cast(names, &arrow::datatypes::DataType::Utf8).unwrap();
            for n in names.as_string::<i32>().iter().flatten() {
                assert!(
                    files_before.iter().any(|k| k.ends_with(n)),
                    "{tt:?}: the tag reads {n}, not a pre-clustering file"
                );
            }
        }
        assert_eq!(t.read(None).await, before, "{tt:?}");
        t.assert_valid("main after clustering and a clean").await;
        t.assert_peer_agrees("clustering with a tag", "main after clustering")
            .await;
        // Without the tag, the same clean removes the replaced files.
        arbor_branching::drop_tag(&t.table, "pre", false, false)
            .await
            .unwrap();
        let out = arbor_branching::clean(
            &t.table,
            CleanOptions {
                policy: CleanPolicy::KeepLatestFileVersions(1),
                ..CleanOptions::default()
            },
        )
        .await
        .unwrap();
        assert!(out.deleted > 0, "{tt:?}");
        assert_eq!(t.read(None).await, before, "{tt:?}");
    }
}

#[tokio::test]
async fn test_clustering_a_branch_leaves_main_alone() {
    let t = create(TableType::CopyOnWrite, true).await;
    let small = t.table.clone().with_write_options(WriteOptions {
        small_file_limit: 0,
        ..WriteOptions::default()
    });
    for c in 0..3u32 {
        small
            .write(
                WriteOperation::Insert,
                vec![batch(&rows(c * 10..c * 10 + 10, 1, "a"))],
            )
            .await
            .unwrap();
    }
    create_branch(&t.table, "dev", BranchSource::MainHead)
        .await
        .unwrap();
    let main_files = t.data_files().await;
    let listing = t.listing().await;
    let b = t.branch("dev").await;
    let out = b.cluster(&sorted_by("ts")).await.unwrap();
    assert!(out.instant.is_some());
    assert_eq!(t.read_branch(Some("dev"), None).await, t.read(None).await);
    assert!(t.listing().await.len() > listing.len());
    let reader = arbor_table::read::TableReader::open(t.storage.clone())
        .await
        .unwrap();
    for s in reader.view().latest_file_slices(None, None).await.unwrap() {
        let name = s.base_file.unwrap().file_name();
        assert!(main_files.iter().any(|k| k.ends_with(&name)), "{name}");
    }
    t.assert_branch_valid("dev", "after clustering the branch")
        .await;
    t.assert_valid("main").await;
}
