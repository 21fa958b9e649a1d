//! `TableConfig`: fixtures, create/load/update, bad input, the backup protocol and crash sweeps.

use std::sync::Arc;

use arbor_storage::{
    FaultInjectingStorage, FaultMode, ObjectStoreStorage, Storage, StorageError, StorageExt,
};
use arbor_testkit::{fixture_zips, fixtures_root_or_skip, unzip_table};
use arbor_timeline::config::{
    keys, table_checksum, Properties, TableType, TableVersion, PROPERTIES_FILE,
};
use arbor_timeline::{TableConfig, TimelineError};
use bytes::Bytes;

const MAIN: &str = ".hoodie/hoodie.properties";
const BACKUP: &str = ".hoodie/hoodie.properties.backup";

/// Every object in the storage with its bytes, in key order.
async fn snapshot(storage: &dyn Storage) -> Vec<(String, Bytes)> {
    let mut out = Vec::new();
    for meta in storage.list_all("").await.unwrap() {
        let (bytes, _) = storage.get(&meta.key).await.unwrap();
        out.push((meta.key, bytes));
    }
    out
}

fn v8_config(name: &str) -> TableConfig {
    TableConfig::builder_v8(name, TableType::CopyOnWrite)
        .record_key_fields(["id"])
        .partition_fields(["region"])
        .ordering_field("ts")
        .property("x.unknown.key", "kept")
        .build()
        .unwrap()
}

async fn created(name: &str) -> ObjectStoreStorage {
    let storage = ObjectStoreStorage::memory();
    TableConfig::create(&storage, ".hoodie", &v8_config(name))
        .await
        .unwrap();
    storage
}

// ----- fixtures -----

/// Loads, checks and round-trips one `hoodie.properties`; returns its table version.
async fn check_fixture_config(storage: &dyn Storage, meta_dir: &str, label: &str) -> TableVersion {
    let cfg = TableConfig::load(storage, meta_dir)
        .await
        .unwrap_or_else(|e| panic!("{label} {meta_dir}: {e}"));
    let stored = cfg
        .checksum()
        .unwrap_or_else(|| panic!("{label}: fixture without checksum"));
    assert_eq!(
        stored,
        table_checksum(cfg.database_name(), cfg.name()).to_string(),
        "{label} {meta_dir}"
    );
    // Raw parse -> render -> parse gives an equal map.
    let (bytes, _) = storage
        .get(&format!("{meta_dir}/{PROPERTIES_FILE}"))
        .await
        .unwrap();
    let text = std::str::from_utf8(&bytes).unwrap();
    let parsed = Properties::parse(text).unwrap();
    assert_eq!(&parsed, cfg.properties(), "{label}");
    let non_comment_lines = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .count();
    assert_eq!(parsed.len(), non_comment_lines, "{label}: key count");
    let rendered = parsed.render(&["Updated at x"]);
    assert_eq!(Properties::parse(&rendered).unwrap(), parsed, "{label}");
    // The TableConfig rendering loads back as the same config.
    let again = TableConfig::parse(cfg.render(chrono::Utc::now()).as_bytes(), "re").unwrap();
    assert_eq!(again, cfg, "{label}");
    cfg.version()
}

#[tokio::test]
async fn test_load_every_fixture_data_and_metadata_config_valid() {
    let Some(root) =
        fixtures_root_or_skip("test_load_every_fixture_data_and_metadata_config_valid")
    else {
        return;
    };
    let zips = fixture_zips(&root);
    assert!(zips.len() >= 10, "only {} fixture zips found", zips.len());
    let (mut data, mut mdt) = (0, 0);
    let mut versions = std::collections::BTreeSet::new();
    for zip in &zips {
        let label = zip.display().to_string();
        let (_dir, base) = unzip_table(zip);
        let storage = ObjectStoreStorage::local(&base).unwrap();
        versions.insert(
            check_fixture_config(&storage, ".hoodie", &label)
                .await
                .code(),
        );
        data += 1;
        let mdt_meta = ".hoodie/metadata/.hoodie";
        if storage
            .exists(&format!("{mdt_meta}/{PROPERTIES_FILE}"))
            .await
            .unwrap()
        {
            let v = check_fixture_config(&storage, mdt_meta, &label).await;
            let cfg = TableConfig::load(&storage, mdt_meta).await.unwrap();
            assert_eq!(cfg.database_name(), None, "{label}: MDT has no database");
            assert_eq!(cfg.table_type(), TableType::MergeOnRead);
            assert!(v >= TableVersion::Eight);
            mdt += 1;
        }
    }
    assert_eq!(data, zips.len());
    assert!(mdt > 0, "no metadata table among the fixtures");
    assert_eq!(versions.into_iter().collect::<Vec<_>>(), vec![6, 8, 9]);
}

#[tokio::test]
async fn test_load_v8_fixture_typed_accessors_match_file() {
    let Some(root) = fixtures_root_or_skip("test_load_v8_fixture_typed_accessors_match_file")
    else {
        return;
    };
    let zip = root.join("quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip");
    let (_dir, base) = unzip_table(&zip);
    let storage = ObjectStoreStorage::local(&base).unwrap();
    let cfg = TableConfig::load(&storage, ".hoodie").await.unwrap();
    assert_eq!(cfg.name(), "v8_trips_8i3u1d");
    assert_eq!(cfg.database_name(), Some("default"));
    assert_eq!(cfg.table_type(), TableType::MergeOnRead);
    assert_eq!(cfg.version(), TableVersion::Eight);
    assert_eq!(cfg.record_key_fields(), vec!["uuid"]);
    assert_eq!(cfg.partition_fields(), vec!["city"]);
    assert_eq!(cfg.ordering_fields(), vec!["ts"]);
    assert_eq!(cfg.checksum(), Some("1197752875"));
    assert_eq!(
        cfg.metadata_partitions(),
        vec![
            "column_stats",
            "files",
            "partition_stats",
            "record_index",
            "secondary_index_rider_idx"
        ]
    );
    assert!(cfg.metadata_partitions_inflight().is_empty());
    assert!(cfg.hive_style_partitioning());
    let schema = cfg.get(keys::CREATE_SCHEMA).unwrap();
    assert!(schema.starts_with(r#"{"type":"record""#), "{schema}");

    let mdt = TableConfig::load(&storage, ".hoodie/metadata/.hoodie")
        .await
        .unwrap();
    assert_eq!(mdt.name(), "v8_trips_8i3u1d_metadata");
    assert_eq!(mdt.checksum(), Some("380169000"));
    assert_eq!(
        mdt.base_file_format(),
        arbor_timeline::config::BaseFileFormat::HFile
    );
    assert!(!mdt.populate_meta_fields());
}

#[tokio::test]
async fn test_update_fixture_table_preserves_unknown_keys_and_order() {
    let Some(root) =
        fixtures_root_or_skip("test_update_fixture_table_preserves_unknown_keys_and_order")
    else {
        return;
    };
    let zip = root.join("sample_table/cow/v8_nonpartitioned.zip");
    let (_dir, base) = unzip_table(&zip);
    let storage = ObjectStoreStorage::local(&base).unwrap();
    let before = TableConfig::load(&storage, ".hoodie").await.unwrap();
    let after = TableConfig::update(&storage, ".hoodie", |c| {
        c.set(keys::METADATA_PARTITIONS, "files")
    })
    .await
    .unwrap();
    let reloaded = TableConfig::load(&storage, ".hoodie").await.unwrap();
    assert_eq!(reloaded, after);
    assert_eq!(reloaded.metadata_partitions(), vec!["files"]);
    let keys_before: Vec<&str> = before.properties().iter().map(|(k, _)| k).collect();
    let keys_after: Vec<&str> = reloaded.properties().iter().map(|(k, _)| k).collect();
    assert_eq!(&keys_after[..keys_before.len()], &keys_before[..]);
    assert_eq!(keys_after.last(), Some(&keys::METADATA_PARTITIONS));
    assert!(!storage.exists(BACKUP).await.unwrap());
}

// ----- create / load / update -----

#[tokio::test]
async fn test_update_removes_hadoop_checksums_a_java_writer_left() {
    let dir = tempfile::tempdir().unwrap();
    let storage = ObjectStoreStorage::local(dir.path()).unwrap();
    let config = TableConfig::new_v8("t", TableType::CopyOnWrite).unwrap();
    TableConfig::create(&storage, ".hoodie", &config)
        .await
        .unwrap();
    for crc in [
        ".hoodie/.hoodie.properties.crc",
        ".hoodie/.hoodie.properties.backup.crc",
    ] {
        storage.put(crc, Bytes::from_static(b"crc")).await.unwrap();
    }
    TableConfig::update(&storage, ".hoodie", |c| {
        c.set(keys::METADATA_PARTITIONS, "files")
    })
    .await
    .unwrap();
    for crc in [
        ".hoodie/.hoodie.properties.crc",
        ".hoodie/.hoodie.properties.backup.crc",
    ] {
        assert!(!storage.exists(crc).await.unwrap(), "{crc} left over");
    }
}

#[tokio::test]
async fn test_create_then_load_returns_same_config() {
    let storage = created("t1").await;
    let loaded = TableConfig::load(&storage, ".hoodie").await.unwrap();
    assert_eq!(loaded, v8_config("t1"));
    assert_eq!(loaded.get("x.unknown.key"), Some("kept"));
    let (bytes, _) = storage.get(MAIN).await.unwrap();
    let text = std::str::from_utf8(&bytes).unwrap();
    assert!(text.starts_with("#Updated at "), "{text}");
    assert!(text
        .lines()
        .last()
        .unwrap()
        .starts_with("hoodie.table.checksum="));
}

#[tokio::test]
async fn test_create_existing_table_fails_and_keeps_file() {
    let storage = created("t1").await;
    let before = snapshot(&storage).await;
    let err = TableConfig::create(&storage, ".hoodie", &v8_config("other"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, TimelineError::Storage(StorageError::AlreadyExists { path }) if path == MAIN),
        "{err:?}"
    );
    assert_eq!(snapshot(&storage).await, before);
}

#[tokio::test]
async fn test_create_with_leftover_backup_fails() {
    let storage = ObjectStoreStorage::memory();
    storage
        .put(
            BACKUP,
            Bytes::from(v8_config("t").render(chrono::Utc::now())),
        )
        .await
        .unwrap();
    let err = TableConfig::create(&storage, ".hoodie", &v8_config("t"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, TimelineError::Storage(StorageError::AlreadyExists { path }) if path == BACKUP),
        "{err:?}"
    );
    assert!(!storage.exists(MAIN).await.unwrap());
}

#[tokio::test]
async fn test_update_changes_key_and_removes_backup() {
    let storage = created("t1").await;
    let new = TableConfig::update(&storage, ".hoodie", |c| {
        c.set(keys::METADATA_PARTITIONS, "files,record_index")?;
        c.set(keys::NAME, "t2")
    })
    .await
    .unwrap();
    assert_eq!(new.name(), "t2");
    assert_eq!(
        new.checksum(),
        Some(table_checksum(Some("default"), "t2").to_string().as_str())
    );
    let loaded = TableConfig::load(&storage, ".hoodie").await.unwrap();
    assert_eq!(loaded, new);
    assert_eq!(loaded.metadata_partitions(), vec!["files", "record_index"]);
    let keys: Vec<String> = snapshot(&storage)
        .await
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, vec![MAIN.to_string()]);
}

#[tokio::test]
async fn test_update_rejected_change_modifies_nothing() {
    let storage = created("t1").await;
    let before = snapshot(&storage).await;
    let err = TableConfig::update(&storage, ".hoodie", |c| c.set(keys::VERSION, "7"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, TimelineError::UnsupportedVersion { .. }),
        "{err:?}"
    );
    assert_eq!(snapshot(&storage).await, before);
}

#[tokio::test]
async fn test_update_missing_table_not_a_table() {
    let storage = ObjectStoreStorage::memory();
    let err = TableConfig::update(&storage, ".hoodie", |_| Ok(()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, TimelineError::NotATable { path } if path == MAIN),
        "{err:?}"
    );
    assert!(snapshot(&storage).await.is_empty());
}

// ----- bad input: typed errors naming the path, nothing modified -----

async fn load_bad(main: Option<&[u8]>) -> (TimelineError, ObjectStoreStorage) {
    let storage = ObjectStoreStorage::memory();
    storage
        .put(".hoodie/timeline/x.commit", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    if let Some(bytes) = main {
        storage
            .put(MAIN, Bytes::copy_from_slice(bytes))
            .await
            .unwrap();
    }
    let before = snapshot(&storage).await;
    let err = TableConfig::load(&storage, ".hoodie").await.unwrap_err();
    assert_eq!(
        snapshot(&storage).await,
        before,
        "load modified the storage"
    );
    (err, storage)
}

#[tokio::test]
async fn test_load_empty_file_invalid_config() {
    let (err, _) = load_bad(Some(b"")).await;
    assert!(
        matches!(&err, TimelineError::InvalidConfig { path, .. } if path == MAIN),
        "{err:?}"
    );
}

#[tokio::test]
async fn test_load_garbage_bytes_invalid_config() {
    let (err, _) = load_bad(Some(b"\x00\xff\xfe\x80garbage\xc3\x28")).await;
    assert!(
        matches!(&err, TimelineError::InvalidConfig { path, reason, .. }
            if path == MAIN && reason.contains("UTF-8")),
        "{err:?}"
    );
    // Valid UTF-8 nonsense names the first missing key.
    let (err, _) = load_bad(Some("lorem ipsum\n=\n\\u12".as_bytes())).await;
    assert!(
        matches!(&err, TimelineError::InvalidConfig { path, .. } if path == MAIN),
        "{err:?}"
    );
    let (err, _) = load_bad(Some(b"just some words\nand more\n")).await;
    assert!(
        matches!(&err, TimelineError::InvalidConfig { path, key: Some(k), .. }
            if path == MAIN && k == keys::NAME),
        "{err:?}"
    );
}

#[tokio::test]
async fn test_load_wrong_checksum_checksum_mismatch() {
    let text = v8_config("t").render(chrono::Utc::now()).replace(
        &format!("checksum={}", table_checksum(Some("default"), "t")),
        "checksum=42",
    );
    let (err, _) = load_bad(Some(text.as_bytes())).await;
    assert!(
        matches!(&err, TimelineError::ChecksumMismatch { path, stored, computed }
            if path == MAIN && stored == "42" && *computed == table_checksum(Some("default"), "t")),
        "{err:?}"
    );
}

#[tokio::test]
async fn test_load_version_7_unsupported_version() {
    let text = v8_config("t")
        .render(chrono::Utc::now())
        .replace("hoodie.table.version=8", "hoodie.table.version=7");
    let (err, _) = load_bad(Some(text.as_bytes())).await;
    assert!(
        matches!(&err, TimelineError::UnsupportedVersion { path, version }
            if path == MAIN && version == "7"),
        "{err:?}"
    );
}

#[tokio::test]
async fn test_load_missing_meta_dir_not_a_table() {
    let (err, _) = load_bad(None).await;
    assert!(
        matches!(&err, TimelineError::NotATable { path } if path == MAIN),
        "{err:?}"
    );
    let storage = ObjectStoreStorage::memory();
    let err = TableConfig::load(&storage, "nowhere/.hoodie")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, TimelineError::NotATable { path } if path == "nowhere/.hoodie/hoodie.properties"),
        "{err:?}"
    );
    assert!(err
        .to_string()
        .contains("nowhere/.hoodie/hoodie.properties"));
}

#[tokio::test]
async fn test_load_local_dir_without_hoodie_not_a_table() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.parquet"), b"x").unwrap();
    let storage = ObjectStoreStorage::local(dir.path()).unwrap();
    let err = TableConfig::load(&storage, ".hoodie").await.unwrap_err();
    assert!(
        matches!(&err, TimelineError::NotATable { path } if path == MAIN),
        "{err:?}"
    );
    assert!(!dir.path().join(".hoodie").exists());
}

// ----- backup fallback -----

#[tokio::test]
async fn test_load_main_missing_uses_valid_backup() {
    let storage = ObjectStoreStorage::memory();
    let cfg = v8_config("t");
    storage
        .put(BACKUP, Bytes::from(cfg.render(chrono::Utc::now())))
        .await
        .unwrap();
    let before = snapshot(&storage).await;
    assert_eq!(TableConfig::load(&storage, ".hoodie").await.unwrap(), cfg);
    assert_eq!(snapshot(&storage).await, before);
}

#[tokio::test]
async fn test_load_main_corrupt_uses_valid_backup() {
    for corrupt in [&b""[..], b"\xff\xff", b"hoodie.table.name=t\nhoodie.tab"] {
        let storage = created("t").await;
        let (good, _) = storage.get(MAIN).await.unwrap();
        storage.put(BACKUP, good).await.unwrap();
        storage
            .put(MAIN, Bytes::copy_from_slice(corrupt))
            .await
            .unwrap();
        let before = snapshot(&storage).await;
        let cfg = TableConfig::load(&storage, ".hoodie").await.unwrap();
        assert_eq!(cfg, v8_config("t"));
        assert_eq!(snapshot(&storage).await, before);
    }
}

#[tokio::test]
async fn test_load_both_corrupt_reports_main_error() {
    let storage = ObjectStoreStorage::memory();
    storage.put(MAIN, Bytes::from_static(b"")).await.unwrap();
    storage
        .put(BACKUP, Bytes::from_static(b"\xff"))
        .await
        .unwrap();
    let err = TableConfig::load(&storage, ".hoodie").await.unwrap_err();
    assert!(
        matches!(&err, TimelineError::InvalidConfig { path, .. } if path == MAIN),
        "{err:?}"
    );
}

#[tokio::test]
async fn test_load_valid_main_preferred_over_stale_backup() {
    let storage = created("new").await;
    storage
        .put(
            BACKUP,
            Bytes::from(v8_config("old").render(chrono::Utc::now())),
        )
        .await
        .unwrap();
    let cfg = TableConfig::load(&storage, ".hoodie").await.unwrap();
    assert_eq!(cfg.name(), "new");
}

#[tokio::test]
async fn test_recover_restores_main_from_backup_and_deletes_backup() {
    let storage = ObjectStoreStorage::memory();
    let text = v8_config("t").render(chrono::Utc::now());
    storage
        .put(BACKUP, Bytes::from(text.clone()))
        .await
        .unwrap();
    storage
        .put(MAIN, Bytes::from_static(b"torn"))
        .await
        .unwrap();
    assert!(TableConfig::recover(&storage, ".hoodie").await.unwrap());
    let snap = snapshot(&storage).await;
    assert_eq!(snap, vec![(MAIN.to_string(), Bytes::from(text))]);
    assert!(!TableConfig::recover(&storage, ".hoodie").await.unwrap());
}

#[tokio::test]
async fn test_recover_both_invalid_deletes_nothing() {
    let storage = ObjectStoreStorage::memory();
    storage.put(MAIN, Bytes::from_static(b"x=1")).await.unwrap();
    storage
        .put(BACKUP, Bytes::from_static(b"y=2"))
        .await
        .unwrap();
    let before = snapshot(&storage).await;
    assert!(TableConfig::recover(&storage, ".hoodie").await.is_err());
    assert_eq!(snapshot(&storage).await, before);
}

// ----- crash points -----

/// Every state an interrupted update can leave, built by hand: each loads as old or new.
#[tokio::test]
async fn test_update_hand_made_crash_states_load_old_or_new() {
    let old = v8_config("t");
    let mut new = old.clone();
    new.set(keys::METADATA_PARTITIONS, "files").unwrap();
    let now = chrono::Utc::now();
    let old_text = old.render(now);
    let new_text = new.render(now);
    let torn = &new_text[..new_text.len() / 2];
    let states: Vec<(&str, Option<&str>, Option<&str>, &TableConfig)> = vec![
        ("before anything", Some(&old_text), None, &old),
        ("backup written", Some(&old_text), Some(&old_text), &old),
        ("main deleted (Java step 3)", None, Some(&old_text), &old),
        ("main torn", Some(torn), Some(&old_text), &old),
        ("main empty", Some(""), Some(&old_text), &old),
        ("main replaced", Some(&new_text), Some(&old_text), &new),
        ("backup deleted", Some(&new_text), None, &new),
    ];
    for (label, main, backup, expected) in states {
        let storage = ObjectStoreStorage::memory();
        if let Some(m) = main {
            storage.put(MAIN, Bytes::from(m.to_string())).await.unwrap();
        }
        if let Some(b) = backup {
            storage
                .put(BACKUP, Bytes::from(b.to_string()))
                .await
                .unwrap();
        }
        let loaded = TableConfig::load(&storage, ".hoodie")
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(&loaded, expected, "{label}");
        // A following update recovers and applies on top of what load saw.
        let after = TableConfig::update(&storage, ".hoodie", |c| c.set("y.key", "1"))
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(after.metadata_partitions(), expected.metadata_partitions());
        assert_eq!(after.get("y.key"), Some("1"));
        assert!(!storage.exists(BACKUP).await.unwrap(), "{label}");
    }
}

/// Crash sweep with the fault-injecting storage: the process dies before write N, for every N.
#[tokio::test]
async fn test_update_crash_sweep_every_write_leaves_old_or_new() {
    let mut covered = 0;
    for n in 0..50 {
        let inner: Arc<dyn Storage> = Arc::new(created("t").await);
        let old = TableConfig::load(inner.as_ref(), ".hoodie").await.unwrap();
        let faulty = FaultInjectingStorage::new(inner.clone());
        faulty.set_count_only_writes(true);
        faulty.set_mode(FaultMode::CrashAt(n));
        let result = TableConfig::update(&faulty, ".hoodie", |c| {
            c.set(keys::METADATA_PARTITIONS, "files")
        })
        .await;
        let loaded = TableConfig::load(inner.as_ref(), ".hoodie")
            .await
            .unwrap_or_else(|e| panic!("crash before write {n}: {e}"));
        let mut new = old.clone();
        new.set(keys::METADATA_PARTITIONS, "files").unwrap();
        assert!(
            loaded == old || loaded == new,
            "crash before write {n}: neither old nor new: {loaded:?}"
        );
        if result.is_ok() {
            assert_eq!(loaded, new);
            assert!(!inner.exists(BACKUP).await.unwrap());
        }
        // The next update (after the "restart") succeeds and cleans up.
        TableConfig::update(inner.as_ref(), ".hoodie", |c| c.set("z", "1"))
            .await
            .unwrap_or_else(|e| panic!("update after crash before write {n}: {e}"));
        assert!(!inner.exists(BACKUP).await.unwrap());
        covered += 1;
        if result.is_ok() && faulty.op_count() <= n {
            break;
        }
    }
    assert!(
        covered >= 3,
        "the sweep covered only {covered} crash points"
    );
}

/// Sweep where write N takes effect but reports failure (lost reply): still old or new.
#[tokio::test]
async fn test_update_fail_after_sweep_leaves_old_or_new() {
    for n in 0..6 {
        let inner: Arc<dyn Storage> = Arc::new(created("t").await);
        let old = TableConfig::load(inner.as_ref(), ".hoodie").await.unwrap();
        let faulty = FaultInjectingStorage::new(inner.clone());
        faulty.set_count_only_writes(true);
        faulty.set_mode(FaultMode::FailAfter(n));
        let _ = TableConfig::update(&faulty, ".hoodie", |c| c.set(keys::NAME, "u")).await;
        let loaded = TableConfig::load(inner.as_ref(), ".hoodie").await.unwrap();
        assert!(
            loaded == old || loaded.name() == "u",
            "fail after write {n}: {loaded:?}"
        );
        assert_eq!(
            loaded.checksum(),
            Some(loaded.computed_checksum().to_string().as_str())
        );
    }
}

#[tokio::test]
async fn test_create_under_concurrency_exactly_one_wins() {
    let storage = Arc::new(ObjectStoreStorage::memory());
    let mut handles = Vec::new();
    for i in 0..8 {
        let s = storage.clone();
        handles.push(tokio::spawn(async move {
            TableConfig::create(s.as_ref(), ".hoodie", &v8_config(&format!("t{i}"))).await
        }));
    }
    let mut wins = 0;
    for h in handles {
        if h.await.unwrap().is_ok() {
            wins += 1;
        }
    }
    assert_eq!(wins, 1);
    assert!(TableConfig::load(storage.as_ref(), ".hoodie").await.is_ok());
}
