//! Fidelity of arbor's column statistics: for every fixture whose metadata table has
//! `column_stats` (and `partition_stats`), arbor's computation over the same data files
//! equals Spark's records field by field (every column of every file: min, max, counts,
//! sizes, flags, value type), the default column rule gives the columns Spark indexed, and
//! the partition stats Spark wrote equal arbor's aggregation of the files Spark aggregated.
//!
//! What Spark aggregates into a partition's stats (found from the fixtures): each file
//! group's latest slice among the files that have column stats, because Spark's DELETE
//! commits write no column stats and do not update partition stats; file groups replaced
//! (insert overwrite, clustering) stay counted until a later commit writes the partition,
//! because Java updates the MDT before the replacecommit completes. arbor's own maintenance
//! aggregates the slices visible after each commit, a tighter bound.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arbor_fsview::{parse_data_file_name, DataFile, FileSystemView};
use arbor_mdt::column_stats::{
    read_column_stats, read_partition_stats, COLUMN_STATS_PARTITION, PARTITION_STATS_PARTITION,
};
use arbor_mdt::column_stats_compute::{
    columns_to_index, file_ranges, partition_ranges, StatsVersion, DEFAULT_MAX_COLUMNS,
};
use arbor_mdt::{IndexDefinitions, MetadataTable, MDT_BASE};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_testkit::fixtures::{fixture_name, fixture_zips, fixtures_root_or_skip, unzip_table};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{InstantTime, TableConfig};

/// A file group's newest base instant with stats and its files with stats.
type Group = (Option<InstantTime>, Vec<(DataFile, String)>);

fn storage_at(base: &Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

#[tokio::test]
async fn test_column_stats_fidelity_every_fixture() {
    let Some(root) = fixtures_root_or_skip("column stats fidelity") else {
        return;
    };
    let mut failures = Vec::new();
    let (mut tables, mut files_checked, mut records_checked, mut partitions_checked) = (0, 0, 0, 0);
    for zip in fixture_zips(&root) {
        let name = fixture_name(&root, &zip);
        let (_dir, base) = unzip_table(&zip);
        if !base.join(MDT_BASE).join(COLUMN_STATS_PARTITION).is_dir() {
            continue;
        }
        tables += 1;
        let storage = storage_at(&base);
        let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR)
            .await
            .unwrap();
        let version = StatsVersion::for_table_version(config.version().code());
        let defs = IndexDefinitions::load(storage.as_ref())
            .await
            .unwrap()
            .unwrap();
        let columns = defs.get("column_stats").unwrap().source_fields.clone();
        // Java's default rule over the table's create schema gives Spark's columns.
        let schema = config
            .get("hoodie.table.create.schema")
            .unwrap()
            .to_string();
        let rule =
            columns_to_index(&schema, true, None, DEFAULT_MAX_COLUMNS, version, &name).unwrap();
        if rule != columns {
            failures.push(format!(
                "{name}: default rule {rule:?} != Spark's {columns:?}"
            ));
        }
        let mdt = MetadataTable::open(storage.clone()).await.unwrap().unwrap();
        let listing = mdt.files_listing().await.unwrap();
        let spark = read_column_stats(storage.as_ref(), &mdt).await.unwrap();
        // Spark's records by file name.
        let mut by_file: BTreeMap<String, BTreeMap<String, _>> = BTreeMap::new();
        for rec in spark.records().values() {
            by_file
                .entry(rec.file_name.clone().unwrap())
                .or_default()
                .insert(rec.column_name.clone().unwrap(), rec.clone());
        }
        for (file, spark_cols) in &by_file {
            let partition = listing
                .iter()
                .find(|(_, files)| files.contains_key(file))
                .map(|(p, _)| if p == "." { String::new() } else { p.clone() })
                .unwrap();
            let key = if partition.is_empty() {
                file.clone()
            } else {
                format!("{partition}/{file}")
            };
            let ranges = file_ranges(&storage, &key, &columns, version)
                .await
                .unwrap();
            files_checked += 1;
            let ours: BTreeMap<String, _> = ranges
                .iter()
                .map(|r| (r.column.clone(), r.to_record(file, false)))
                .collect();
            for (col, theirs) in spark_cols {
                records_checked += 1;
                match ours.get(col) {
                    Some(mine) if mine == theirs => {}
                    Some(mine) => failures.push(format!(
                        "{name}: {file} {col}:\n  arbor {mine:?}\n  spark {theirs:?}"
                    )),
                    None => failures.push(format!("{name}: {file} {col}: arbor has none")),
                }
            }
            for col in ours.keys().filter(|c| !spark_cols.contains_key(*c)) {
                failures.push(format!("{name}: {file} {col}: Spark has none"));
            }
        }
        if !base.join(MDT_BASE).join(PARTITION_STATS_PARTITION).is_dir() {
            continue;
        }
        let spark_ps = read_partition_stats(storage.as_ref(), &mdt).await.unwrap();
        let view = FileSystemView::open(storage.clone()).await.unwrap();
        let mut by_partition: BTreeMap<String, BTreeMap<String, _>> = BTreeMap::new();
        for rec in spark_ps.records().values() {
            by_partition
                .entry(rec.file_name.clone().unwrap())
                .or_default()
                .insert(rec.column_name.clone().unwrap(), rec.clone());
        }
        for (partition, spark_cols) in &by_partition {
            partitions_checked += 1;
            // Spark aggregates the file groups' latest slices among the files it has stats
            // for (module doc): per file group the newest base file with stats and the log
            // files written after it.
            let mut groups: BTreeMap<String, Group> = BTreeMap::new();
            let in_partition = listing
                .get(if partition.is_empty() {
                    "."
                } else {
                    partition.as_str()
                })
                .cloned()
                .unwrap_or_default();
            for file in in_partition.keys().filter(|f| by_file.contains_key(*f)) {
                let Some(df) = parse_data_file_name(file, 0).unwrap() else {
                    continue;
                };
                let g = groups.entry(df.file_id().to_string()).or_default();
                if let DataFile::Base(b) = &df {
                    if g.0.as_ref().is_none_or(|t| *t < b.instant_time) {
                        g.0 = Some(b.instant_time.clone());
                    }
                }
                g.1.push((df, file.clone()));
            }
            // A file group replaced (insert overwrite, clustering) before the partition's last
            // stats-writing instant is left out; one replaced by that instant itself is still
            // counted (Java updates the MDT before the replacement completes).
            let last = groups
                .values()
                .flat_map(|(_, m)| m.iter())
                .map(|(df, _)| match df {
                    DataFile::Base(b) => b.instant_time.clone(),
                    DataFile::Log(l) => l.delta_commit_time.clone(),
                })
                .max();
            let replaced_before: Vec<&str> = view
                .replaced_file_groups()
                .iter()
                .filter(|r| {
                    &r.partition == partition && last.as_ref().is_some_and(|l| r.instant < *l)
                })
                .map(|r| r.file_id.as_str())
                .collect();
            let mut files = Vec::new();
            for (group, (base_instant, members)) in &groups {
                if replaced_before.contains(&group.as_str()) {
                    continue;
                }
                for (df, file) in members {
                    let keep = match (df, base_instant) {
                        (DataFile::Base(b), Some(t)) => b.instant_time == *t,
                        (DataFile::Log(l), Some(t)) => l.delta_commit_time > *t,
                        (DataFile::Log(_), None) => true,
                        (DataFile::Base(_), None) => false,
                    };
                    if !keep {
                        continue;
                    }
                    let key = format!("{partition}/{file}");
                    files.push(
                        file_ranges(&storage, &key, &columns, version)
                            .await
                            .unwrap(),
                    );
                }
            }
            let merged = partition_ranges(&columns, files.iter().map(Vec::as_slice));
            let ours: BTreeMap<String, _> = merged
                .iter()
                .map(|r| (r.column.clone(), r.to_record(partition, true)))
                .collect();
            for (col, theirs) in spark_cols {
                match ours.get(col) {
                    Some(mine) if mine == theirs => {}
                    Some(mine) => failures.push(format!(
                        "{name}: partition {partition} {col}:\n  arbor {mine:?}\n  spark {theirs:?}"
                    )),
                    None => failures.push(format!("{name}: partition {partition} {col}: none")),
                }
            }
        }
    }
    eprintln!(
        "column stats fidelity: {tables} tables, {files_checked} files, {records_checked} \
         file records, {partitions_checked} partitions"
    );
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(tables >= 10, "only {tables} fixtures with column stats");
}
