//! The record index and secondary indexes of the fixtures' metadata tables against the rows of
//! the tables' expected snapshots (`expected/<fixture>/snapshot.json`, written by hudi-rs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use arbor_format::hfile::mdt_index::{
    file_group_index, secondary_index_file_group, secondary_index_key,
};
use arbor_mdt::record_index::RECORD_INDEX_PARTITION;
use arbor_mdt::secondary_index::{read_secondary_index_by_file_group, secondary_index_partition};
use arbor_mdt::{
    lookup_record_index, read_record_index, read_secondary_index, secondary_lookup,
    IndexDefinitions, MetadataTable,
};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_testkit::fixtures::{
    expected_dir, expected_json, fixture_name, fixture_zips, fixtures_root_or_skip, unzip_table,
};

fn storage_at(base: &Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

/// A snapshot row's record key, partition path and file group id (from `_hoodie_file_name`:
/// base `<fileId>_<token>_<instant>.<ext>` or log `.<fileId>_<instant>.log.<v>_<token>`).
struct Row {
    key: String,
    partition: String,
    file_id: String,
    fields: serde_json::Map<String, serde_json::Value>,
}

/// A fixture's expected snapshot: its rows, the table version and the columns of Avro type
/// `date` (from `hoodie.table.create.schema`).
struct Snapshot {
    rows: Vec<Row>,
    table_version: u32,
    date_columns: BTreeSet<String>,
}

fn load_snapshot(root: &Path, zip: &Path) -> Option<Snapshot> {
    let snapshot = expected_json(&expected_dir(root, zip), "snapshot.json")?;
    let props = &snapshot["table"]["props"];
    let table_version = props["hoodie.table.version"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // Java properties escape ':' as '\:'.
    let schema: serde_json::Value = serde_json::from_str(
        &props["hoodie.table.create.schema"]
            .as_str()
            .unwrap()
            .replace("\\:", ":"),
    )
    .unwrap();
    let date_columns = schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f.to_string().contains(r#""logicalType":"date""#))
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect();
    let rows = snapshot["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let r = r.as_object().unwrap().clone();
            let name = r["_hoodie_file_name"].as_str().unwrap();
            let name = name.strip_prefix('.').unwrap_or(name);
            Row {
                key: r["_hoodie_record_key"].as_str().unwrap().to_string(),
                partition: r["_hoodie_partition_path"].as_str().unwrap().to_string(),
                file_id: name.split('_').next().unwrap().to_string(),
                fields: r,
            }
        })
        .collect();
    Some(Snapshot {
        rows,
        table_version,
        date_columns,
    })
}

/// Days since 1970-01-01 of the proleptic Gregorian date `y-m-d` (H. Hinnant's
/// `days_from_civil`).
fn epoch_days(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The text Hudi indexes for a column value as the expected snapshot shows it: strings as is,
/// `date` columns (shown as `YYYY-MM-DD`) as their epoch-day number — the fixtures store the
/// Avro int, not the ISO text — other scalars in their JSON form, null as `None`.
fn indexed_text(v: Option<&serde_json::Value>, is_date: bool) -> Option<String> {
    match v? {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) if is_date => {
            let parts: Vec<i64> = s.split('-').map(|p| p.parse().unwrap()).collect();
            Some(epoch_days(parts[0], parts[1], parts[2]).to_string())
        }
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

async fn mdt_file_ids(mdt: &MetadataTable, partition: &str) -> Vec<String> {
    let mut ids: Vec<String> = mdt
        .view()
        .latest_file_slices(Some(partition), None)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.file_id)
        .collect();
    ids.sort();
    ids
}

/// Fixtures (unzipped) whose MDT has a `record_index` partition, with their snapshot rows.
fn index_fixtures(what: &str) -> Vec<(String, tempfile::TempDir, std::path::PathBuf, Snapshot)> {
    let Some(root) = fixtures_root_or_skip(what) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for zip in fixture_zips(&root) {
        let name = fixture_name(&root, &zip);
        let (dir, base) = unzip_table(&zip);
        if !base.join(".hoodie/metadata/record_index").is_dir() {
            continue;
        }
        let snapshot = load_snapshot(&root, &zip)
            .unwrap_or_else(|| panic!("{name}: no expected snapshot.json"));
        out.push((name, dir, base, snapshot));
    }
    assert!(!out.is_empty(), "no fixture has a record_index partition");
    out
}

#[tokio::test]
async fn test_read_record_index_fixtures_match_snapshot_rows() {
    let mut failures = Vec::new();
    for (name, _dir, base, snapshot) in index_fixtures("record index") {
        let rows = &snapshot.rows;
        let storage = storage_at(&base);
        let mdt = MetadataTable::open(storage.clone()).await.unwrap().unwrap();
        let index = read_record_index(storage.as_ref(), &mdt).await.unwrap();
        // A key may appear in several partitions (the global index then keeps one of them).
        let mut expected: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
        for r in rows {
            expected
                .entry(r.key.clone())
                .or_default()
                .insert((r.partition.clone(), r.file_id.clone()));
        }
        let actual: BTreeMap<String, (String, String)> = index
            .iter()
            .map(|(k, e)| {
                (
                    k.clone(),
                    (e.location.partition.clone(), e.location.file_id.clone()),
                )
            })
            .collect();
        // Placement: every key is in the file group its hash names.
        let ids = mdt_file_ids(&mdt, RECORD_INDEX_PARTITION).await;
        let misplaced: Vec<&String> = index
            .iter()
            .filter(|(k, e)| ids.get(file_group_index(k, ids.len())) != Some(&e.mdt_file_id))
            .map(|(k, _)| k)
            .collect();
        println!(
            "{name}: {} keys, {} rows, {} MDT file groups, {} misplaced",
            actual.len(),
            expected.len(),
            ids.len(),
            misplaced.len()
        );
        let same_keys = actual.keys().eq(expected.keys());
        let located = actual
            .iter()
            .all(|(k, v)| expected.get(k).is_some_and(|e| e.contains(v)));
        if !same_keys || !located || !misplaced.is_empty() {
            for (k, v) in &expected {
                if !actual.get(k).is_some_and(|a| v.contains(a)) {
                    println!("  {k}: snapshot {v:?}, index {:?}", actual.get(k));
                }
            }
            for k in actual.keys().filter(|k| !expected.contains_key(*k)) {
                println!("  {k}: only in the index {:?}", actual[k]);
            }
            failures.push(name);
        }
    }
    assert!(failures.is_empty(), "record index mismatches: {failures:?}");
}

#[tokio::test]
async fn test_lookup_record_index_fixtures_match_full_read() {
    for (name, _dir, base, snapshot) in index_fixtures("record index lookup") {
        let rows = &snapshot.rows;
        let storage = storage_at(&base);
        let mdt = MetadataTable::open(storage.clone()).await.unwrap().unwrap();
        let full = read_record_index(storage.as_ref(), &mdt).await.unwrap();
        let mut keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
        keys.push("no-such-key");
        let found = lookup_record_index(storage.as_ref(), &mdt, &keys)
            .await
            .unwrap();
        assert_eq!(found, full, "{name}");
        let one = lookup_record_index(storage.as_ref(), &mdt, &keys[..1])
            .await
            .unwrap();
        assert_eq!(one.len(), 1, "{name}");
    }
}

#[tokio::test]
async fn test_read_secondary_index_fixtures_match_snapshot_rows() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for (name, _dir, base, snapshot) in index_fixtures("secondary index") {
        let rows = &snapshot.rows;
        let table_version = snapshot.table_version;
        let storage = storage_at(&base);
        let Some(defs) = IndexDefinitions::load(storage.as_ref()).await.unwrap() else {
            continue;
        };
        let mdt = MetadataTable::open(storage.clone()).await.unwrap().unwrap();
        for def in defs.secondary_indexes() {
            let partition = secondary_index_partition(&def.index_name);
            if !base.join(".hoodie/metadata").join(&partition).is_dir() {
                continue;
            }
            checked += 1;
            let [column] = def.source_fields.as_slice() else {
                panic!("{name}: {} indexes {:?}", def.index_name, def.source_fields);
            };
            let mut expected: BTreeMap<Option<String>, BTreeSet<String>> = BTreeMap::new();
            let is_date = snapshot.date_columns.contains(column);
            for r in rows {
                expected
                    .entry(indexed_text(r.fields.get(column), is_date))
                    .or_default()
                    .insert(r.key.clone());
            }
            let actual = read_secondary_index(storage.as_ref(), &mdt, &def.index_name)
                .await
                .unwrap();
            // Placement by the hash of the index version.
            let ids = mdt_file_ids(&mdt, &partition).await;
            let by_group = read_secondary_index_by_file_group(storage.as_ref(), &mdt, &partition)
                .await
                .unwrap();
            let count_misplaced = |value_only: bool| {
                let mut misplaced = 0;
                for (group, entries) in &by_group {
                    for (value, keys) in entries {
                        for k in keys {
                            let key = secondary_index_key(value.as_deref(), k);
                            let at = secondary_index_file_group(&key, ids.len(), value_only);
                            if ids.get(at) != Some(group) {
                                misplaced += 1;
                            }
                        }
                    }
                }
                misplaced
            };
            println!(
                "{name} {}: misplaced by value hash {}, by whole-key hash {}",
                def.index_name,
                count_misplaced(true),
                count_misplaced(false)
            );
            let value_only = def.hashes_value_only(table_version);
            let misplaced = count_misplaced(value_only);
            println!(
                "{name} {}: {} values ({} expected), {} groups, version {:?}, {misplaced} misplaced",
                def.index_name,
                actual.len(),
                expected.len(),
                ids.len(),
                def.version
            );
            // Lookups of every value agree with the full read.
            for (value, keys) in &expected {
                let found =
                    secondary_lookup(storage.as_ref(), &mdt, &def.index_name, value.as_deref())
                        .await
                        .unwrap();
                let found: BTreeSet<String> = found.into_iter().collect();
                if &found != keys {
                    println!("  lookup {value:?}: {found:?}, expected {keys:?}");
                    failures.push(format!("{name} {} lookup", def.index_name));
                }
            }
            if actual != expected || misplaced > 0 {
                for v in actual
                    .keys()
                    .chain(expected.keys())
                    .collect::<BTreeSet<_>>()
                {
                    if actual.get(v) != expected.get(v) {
                        println!(
                            "  {v:?}: index {:?}, snapshot {:?}",
                            actual.get(v),
                            expected.get(v)
                        );
                    }
                }
                failures.push(format!("{name} {}", def.index_name));
            }
        }
    }
    println!("checked {checked} secondary indexes");
    assert!(
        failures.is_empty(),
        "secondary index mismatches: {failures:?}"
    );
}
