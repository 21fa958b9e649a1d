//! The `column_stats` and `partition_stats` partitions of every fixture that has them: the
//! merged records decode, are keyed as Java keys them, and name the table's live files.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use arbor_format::hfile::mdt_column_stats::{
    column_stats_key, partition_stats_key, RECORD_TYPE_COLUMN_STATS, RECORD_TYPE_PARTITION_STATS,
};
use arbor_format::hfile::mdt_index::file_group_index;
use arbor_mdt::column_stats::{
    read_column_stats, read_partition_stats, read_stats_by_file_group, COLUMN_STATS_PARTITION,
    PARTITION_STATS_PARTITION,
};
use arbor_mdt::{MetadataTable, MDT_BASE};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_testkit::fixtures::{fixture_name, fixture_zips, fixtures_root_or_skip, unzip_table};

fn storage_at(base: &Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

#[tokio::test]
async fn test_fixture_column_stats_decode_and_key_by_file_and_partition() {
    let Some(root) = fixtures_root_or_skip("column stats fixtures") else {
        return;
    };
    let mut seen = 0;
    for zip in fixture_zips(&root) {
        let name = fixture_name(&root, &zip);
        let (_dir, base) = unzip_table(&zip);
        if !base.join(MDT_BASE).join(COLUMN_STATS_PARTITION).is_dir() {
            continue;
        }
        seen += 1;
        let storage = storage_at(&base);
        let mdt = MetadataTable::open(storage.clone()).await.unwrap().unwrap();
        let listing = mdt.files_listing().await.unwrap();
        let cs = read_column_stats(storage.as_ref(), &mdt).await.unwrap();
        if name.contains("lance") {
            // Java Hudi 1.2 builds the partition of a table with Lance base files but records
            // no statistics of those files (only of a merge-on-read table's log files).
            let lance_files: Vec<_> = cs
                .records()
                .values()
                .filter_map(|r| r.file_name.clone())
                .filter(|f| f.ends_with(".lance"))
                .collect();
            assert!(
                lance_files.is_empty(),
                "{name}: Spark recorded stats of {lance_files:?}"
            );
            continue;
        }
        assert!(!cs.is_empty(), "{name}: no column stats");
        let mut files_with_stats = BTreeSet::new();
        for (key, rec) in cs.records() {
            let file = rec.file_name.clone().unwrap();
            let column = rec.column_name.clone().unwrap();
            // The partition is the one of the listing that holds the file.
            let partition = listing
                .iter()
                .find(|(_, files)| files.contains_key(&file))
                .map(|(p, _)| p.clone())
                .unwrap_or_else(|| panic!("{name}: {file} is not a live file"));
            let partition = if partition == "." {
                String::new()
            } else {
                partition
            };
            assert_eq!(key, &column_stats_key(&column, &partition, &file), "{name}");
            assert!(!rec.is_deleted && !rec.is_tight_bound, "{name}: {rec:?}");
            let by_file = cs.file(&partition, &file);
            assert_eq!(by_file.get(&column), Some(&rec), "{name}");
            assert_eq!(cs.file_column(&partition, &file, &column), Some(rec));
            files_with_stats.insert(file);
        }
        // Spark writes no stats for the files of a DELETE commit, so not every base file
        // has them; but some do.
        assert!(
            files_with_stats.iter().any(|f| f.ends_with(".parquet")),
            "{name}: no base file has stats"
        );
        // Keys are placed in file group file_group_index(key, n) of the groups sorted by id.
        for (partition, record_type) in [
            (COLUMN_STATS_PARTITION, RECORD_TYPE_COLUMN_STATS),
            (PARTITION_STATS_PARTITION, RECORD_TYPE_PARTITION_STATS),
        ] {
            let groups = read_stats_by_file_group(storage.as_ref(), &mdt, partition, record_type)
                .await
                .unwrap();
            let n = groups.len();
            for (i, group) in groups.values().enumerate() {
                for key in group.records().keys() {
                    assert_eq!(file_group_index(key, n), i, "{name}: {partition} {key}");
                }
            }
        }
        if base.join(MDT_BASE).join(PARTITION_STATS_PARTITION).is_dir() {
            let ps = read_partition_stats(storage.as_ref(), &mdt).await.unwrap();
            assert!(!ps.is_empty(), "{name}: no partition stats");
            for (key, rec) in ps.records() {
                let partition = rec.file_name.clone().unwrap();
                let column = rec.column_name.clone().unwrap();
                assert_eq!(key, &partition_stats_key(&column, &partition), "{name}");
                assert!(rec.is_tight_bound, "{name}: {rec:?}");
                assert_eq!(ps.partition(&partition).get(&column), Some(&rec));
                assert_eq!(ps.partition_column(&partition, &column), Some(rec));
            }
        }
    }
    assert!(seen >= 10, "only {seen} fixtures with column stats");
}
