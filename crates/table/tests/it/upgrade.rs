//! `TableUpgrade` (`arbor upgrade`) on the Spark-written version-6 fixtures: arbor and hudi-rs
//! read identical rows before and after (snapshot and time travel to every completed
//! instant), a re-run changes nothing, writes succeed afterwards and hudi-rs reads them, and
//! a crash sweep over every storage operation of an upgrade leaves a table that reads as
//! before or after and that a retry upgrades.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_storage::{
    FaultInjectingStorage, FaultMode, InProcessLockProvider, ObjectStoreStorage, Storage,
    StorageExt,
};
use arbor_table::read::TableReader;
use arbor_table::{Table, TableUpgrade, WriteOperation};
use arbor_testkit::crash::{copy_dir, fingerprint};
use arbor_testkit::{fixture_name, fixture_zips, fixtures_root_or_skip, unzip_table};
use arbor_timeline::naming::LayoutVersion;
use arbor_timeline::{ActiveTimeline, InstantTime, TableConfig, TableLayout};
use arrow::array::{Array, ArrayRef, Int32Array, Int64Array, StringArray};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use serde_json::{json, Value};

fn local(base: &Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

/// The version-6 fixtures (`(name, zip)`), or `None` (with a visible skip) without fixtures.
fn v6_fixtures() -> Option<Vec<(String, PathBuf)>> {
    let root = fixtures_root_or_skip("upgrade tests on the v6 fixtures")?;
    Some(
        fixture_zips(&root)
            .into_iter()
            .map(|z| (fixture_name(&root, &z), z))
            .filter(|(n, _)| n.rsplit('/').next().unwrap_or("").starts_with("v6_"))
            .collect(),
    )
}

/// The requested times of the completed writes, as the table reads now.
async fn completed_writes(storage: &Arc<dyn Storage>) -> Vec<String> {
    let config = TableConfig::load(storage.as_ref(), ".hoodie")
        .await
        .unwrap();
    let layout = TableLayout::from_config(".hoodie", &config).unwrap();
    ActiveTimeline::load(storage.clone(), layout)
        .await
        .unwrap()
        .completed_writes()
        .into_iter()
        .map(|i| i.requested_time.to_string())
        .collect()
}

/// `(query, row_count, rows_sha256)` of arbor's and (with python) hudi-rs's reads of the table
/// at `base`: the snapshot and time travel to each of `as_of`. Whole rows, meta columns
/// included. `None` for the peer's reads without python.
async fn reads(
    base: &Path,
    as_of: &[String],
) -> (Vec<(String, Value)>, Option<Vec<(String, Value)>>) {
    let storage = local(base);
    let reader = TableReader::open(storage.clone()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queries: Vec<Option<&String>> = std::iter::once(None)
        .chain(as_of.iter().map(Some))
        .collect();
    let python = arbor_testkit::peer_python_or_skip("upgrade peer checks need hudi==0.5.0");
    let mut requests = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let t = q.map(|s| InstantTime::parse(s).unwrap());
        let batches = reader.snapshot(t.as_ref()).await.unwrap();
        let path = dir.path().join(format!("q{i}.arrow"));
        arbor_testkit::write_arrow_ipc(&path, reader.schema(), &batches);
        requests.push(json!({"id": format!("a{i}"), "arrow": path.to_string_lossy()}));
        let mut peer = json!({"id": format!("p{i}"), "table": base.to_string_lossy()});
        if let Some(t) = q {
            peer["as_of"] = json!(t);
        }
        requests.push(peer);
    }
    let Some(python) = python else {
        // Without python, compare arbor's own reads by row count only.
        let mut ours = Vec::new();
        for q in &queries {
            let t = q.map(|s| InstantTime::parse(s).unwrap());
            let n: usize = reader
                .snapshot(t.as_ref())
                .await
                .unwrap()
                .iter()
                .map(|b| b.num_rows())
                .sum();
            ours.push((format!("{q:?}"), json!(n)));
        }
        return (ours, None);
    };
    let docs = arbor_testkit::peer_digest_batch(&python, &requests);
    let pick = |prefix: &str| -> Vec<(String, Value)> {
        queries
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let d = &docs[&format!("{prefix}{i}")];
                assert!(
                    d.get("error").is_none(),
                    "{prefix} {q:?} at {}: {d}",
                    base.display()
                );
                (format!("{q:?}"), json!([d["row_count"], d["rows_sha256"]]))
            })
            .collect()
    };
    (pick("a"), Some(pick("p")))
}

/// Layout-1 instant files left directly in `.hoodie/`.
async fn layout1_files(storage: &Arc<dyn Storage>) -> Vec<String> {
    arbor_timeline::upgrade::layout1_instant_keys(storage.as_ref(), ".hoodie")
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_upgrade_every_v6_fixture_reads_identical() {
    let Some(fixtures) = v6_fixtures() else {
        return;
    };
    assert!(
        fixtures.len() >= 8,
        "expected the 8 v6 fixtures: {fixtures:?}"
    );
    for (name, zip) in &fixtures {
        for to in [8u32, 9] {
            let (_tmp, base) = unzip_table(zip);
            let storage = local(&base);
            let as_of = completed_writes(&storage).await;
            let (arbor_before, peer_before) = reads(&base, &as_of).await;
            if let Some(p) = &peer_before {
                assert_eq!(&arbor_before, p, "{name}: arbor and hudi-rs differ before");
            }
            let report = TableUpgrade::open(storage.clone())
                .await
                .unwrap()
                .run(to)
                .await
                .unwrap_or_else(|e| panic!("{name} --to {to}: {e}"));
            assert!(
                report.upgraded && report.from == 6 && report.to == to,
                "{name}: {report:?}"
            );
            let config = TableConfig::load(storage.as_ref(), ".hoodie")
                .await
                .unwrap();
            assert_eq!(config.version().code(), to, "{name}");
            assert_eq!(
                config.timeline_layout_version(),
                LayoutVersion::V2,
                "{name}"
            );
            assert!(
                layout1_files(&storage).await.is_empty(),
                "{name}: old files left"
            );
            assert_eq!(completed_writes(&storage).await, as_of, "{name}: instants");
            let (arbor_after, peer_after) = reads(&base, &as_of).await;
            assert_eq!(
                arbor_after, arbor_before,
                "{name} --to {to}: arbor reads differ"
            );
            assert_eq!(
                peer_after, peer_before,
                "{name} --to {to}: hudi-rs reads differ"
            );
            // A re-run is a no-op.
            let again = TableUpgrade::open(storage.clone())
                .await
                .unwrap()
                .run(to)
                .await
                .unwrap();
            assert!(
                !again.upgraded && again.old_files_removed == 0,
                "{name}: {again:?}"
            );
            // A downgrade is refused and changes nothing.
            if to == 9 {
                let before = fingerprint(&base);
                let e = TableUpgrade::open(storage.clone())
                    .await
                    .unwrap()
                    .run(8)
                    .await
                    .unwrap_err();
                assert!(e.to_string().contains("does not downgrade"), "{e}");
                assert_eq!(
                    fingerprint(&base),
                    before,
                    "{name}: a refused downgrade changed files"
                );
            }
        }
    }
}

/// Every version-8 fixture upgraded to 9 (Java's 8 -> 9): reads identical for arbor and
/// hudi-rs, ordering field moved, index definitions versioned, metadata table at 9.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_upgrade_v8_fixtures_to_9() {
    let Some(root) = fixtures_root_or_skip("upgrade tests on the v8 fixtures") else {
        return;
    };
    let fixtures: Vec<(String, PathBuf)> = fixture_zips(&root)
        .into_iter()
        .map(|z| (fixture_name(&root, &z), z))
        .filter(|(n, _)| n.rsplit('/').next().unwrap_or("").starts_with("v8_"))
        .collect();
    assert!(fixtures.len() >= 4, "{fixtures:?}");
    let mut with_mdt = 0;
    for (name, zip) in &fixtures {
        let (_tmp, base) = unzip_table(zip);
        let storage = local(&base);
        let old = TableConfig::load(storage.as_ref(), ".hoodie")
            .await
            .unwrap();
        let as_of = completed_writes(&storage).await;
        let (arbor_before, peer_before) = reads(&base, &as_of).await;
        let report = TableUpgrade::open(storage.clone())
            .await
            .unwrap()
            .run(9)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(report.upgraded && report.from == 8, "{name}: {report:?}");
        let config = TableConfig::load(storage.as_ref(), ".hoodie")
            .await
            .unwrap();
        assert_eq!(config.version().code(), 9, "{name}");
        if let Some(p) = old.get("hoodie.table.precombine.field") {
            assert_eq!(
                config.get("hoodie.table.ordering.fields"),
                Some(p),
                "{name}"
            );
            assert_eq!(config.get("hoodie.table.precombine.field"), None, "{name}");
        }
        if let Some(defs) = old.get("hoodie.table.index.defs.path") {
            let (bytes, _) = storage.get(defs).await.unwrap();
            let doc: Value = serde_json::from_slice(&bytes).unwrap();
            for (n, d) in doc["indexDefinitions"].as_object().unwrap() {
                assert_eq!(d["version"], "V1", "{name}: index {n}");
            }
        }
        if let Ok(mdt) = TableConfig::load(storage.as_ref(), ".hoodie/metadata/.hoodie").await {
            assert_eq!(mdt.version().code(), 9, "{name}: metadata table version");
            assert!(report.mdt_version_updated, "{name}");
            with_mdt += 1;
        }
        let (arbor_after, peer_after) = reads(&base, &as_of).await;
        assert_eq!(arbor_after, arbor_before, "{name}: arbor reads differ");
        assert_eq!(peer_after, peer_before, "{name}: hudi-rs reads differ");
    }
    assert!(with_mdt >= 1, "no v8 fixture with a metadata table");
}

/// A version-6 table with a metadata table: the upgrade drops it (the table then lists files
/// from storage and reads the same), `arbor mdt init` (`init_metadata_table`) rebuilds it, and a
/// version-6 metadata table left by an upgrade interrupted after the switch is removed by the
/// next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_upgrade_drops_v6_metadata_table() {
    let Some(fixtures) = v6_fixtures() else {
        return;
    };
    let (_, zip) = fixtures
        .iter()
        .find(|(n, _)| n == "sample_table/cow/v6_simplekeygen_nonhivestyle")
        .unwrap();
    let (_tmp, base) = unzip_table(zip);
    let storage = local(&base);
    let as_of = completed_writes(&storage).await;
    let count = |base: PathBuf, as_of: Vec<String>| async move {
        let reader = TableReader::open(local(&base)).await.unwrap();
        let mut out = Vec::new();
        for t in std::iter::once(None).chain(as_of.iter().map(Some)) {
            let t = t.map(|s| InstantTime::parse(s).unwrap());
            out.push(row_count(&reader.snapshot(t.as_ref()).await.unwrap()));
        }
        out
    };
    let before = count(base.clone(), as_of.clone()).await;
    // A (stand-in) version-6 metadata table listed in the data table's properties.
    let (v6_props, _) = storage.get(".hoodie/hoodie.properties").await.unwrap();
    let make_mdt = || async {
        let mdt = TableConfig::parse(&v6_props, "p").unwrap();
        assert_eq!(mdt.version().code(), 6);
        TableConfig::create(storage.as_ref(), ".hoodie/metadata/.hoodie", &mdt)
            .await
            .unwrap();
        storage
            .put(
                ".hoodie/metadata/files/.files-0000_00000000000000.log.1_0-0-0",
                bytes::Bytes::from_static(b"x"),
            )
            .await
            .unwrap();
    };
    make_mdt().await;
    TableConfig::update(storage.as_ref(), ".hoodie", |c| {
        c.set("hoodie.table.metadata.partitions", "files")
    })
    .await
    .unwrap();
    let report = TableUpgrade::open(storage.clone())
        .await
        .unwrap()
        .run(8)
        .await
        .unwrap();
    assert_eq!(report.mdt_partitions_dropped, vec!["files".to_string()]);
    assert!(report.mdt_removed, "{report:?}");
    assert!(storage
        .list_all(".hoodie/metadata")
        .await
        .unwrap()
        .is_empty());
    let config = TableConfig::load(storage.as_ref(), ".hoodie")
        .await
        .unwrap();
    assert!(config.metadata_partitions().is_empty());
    assert_eq!(count(base.clone(), as_of.clone()).await, before);
    // An upgrade interrupted after the switch left the old metadata table: the next run
    // removes it and nothing else.
    make_mdt().await;
    let again = TableUpgrade::open(storage.clone())
        .await
        .unwrap()
        .run(8)
        .await
        .unwrap();
    assert!(!again.upgraded && again.mdt_removed, "{again:?}");
    assert!(storage
        .list_all(".hoodie/metadata")
        .await
        .unwrap()
        .is_empty());
    // `arbor mdt init` rebuilds it.
    let table = Table::open(storage.clone())
        .await
        .unwrap()
        .with_lock_provider(Arc::new(InProcessLockProvider::new()));
    table.init_metadata_table().await.unwrap();
    let config = TableConfig::load(storage.as_ref(), ".hoodie")
        .await
        .unwrap();
    assert!(config.metadata_partitions().contains(&"files".to_string()));
    assert_eq!(count(base.clone(), as_of.clone()).await, before);
}

/// A version-6 table with a failed write (its last commit reverted to inflight, as a crashed
/// Spark job leaves it): the pending instant moves to layout 2 as pending, both readers skip
/// it before and after, and the first arbor write after the upgrade rolls it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_upgrade_keeps_pending_instants_pending() {
    let Some(fixtures) = v6_fixtures() else {
        return;
    };
    let (_, zip) = fixtures
        .iter()
        .find(|(n, _)| n == "sample_table/cow/v6_simplekeygen_nonhivestyle")
        .unwrap();
    let (_tmp, base) = unzip_table(zip);
    let storage = local(&base);
    let writes = completed_writes(&storage).await;
    let last = writes.last().unwrap().clone();
    storage
        .delete(&format!(".hoodie/{last}.commit"))
        .await
        .unwrap();
    let as_of = completed_writes(&storage).await;
    assert_eq!(as_of.len(), writes.len() - 1);
    let (arbor_before, peer_before) = reads(&base, &as_of).await;
    if let Some(p) = &peer_before {
        assert_eq!(&arbor_before, p, "arbor and hudi-rs differ before");
    }
    TableUpgrade::open(storage.clone())
        .await
        .unwrap()
        .run(8)
        .await
        .unwrap();
    let (names, _) = storage.list_dir(".hoodie/timeline").await.unwrap();
    let names: Vec<String> = names.into_iter().map(|o| o.key).collect();
    assert!(
        names.contains(&format!(".hoodie/timeline/{last}.inflight")),
        "{names:?}"
    );
    assert!(
        names.contains(&format!(".hoodie/timeline/{last}.commit.requested")),
        "{names:?}"
    );
    let (arbor_after, peer_after) = reads(&base, &as_of).await;
    assert_eq!(arbor_after, arbor_before);
    assert_eq!(peer_after, peer_before);
    // The next write rolls the failed instant back.
    let table = Table::open(storage.clone())
        .await
        .unwrap()
        .with_lock_provider(Arc::new(InProcessLockProvider::new()))
        .with_write_options(arbor_table::WriteOptions {
            heartbeat_timeout: std::time::Duration::ZERO,
            ..arbor_table::WriteOptions::default()
        });
    let rows = data_rows(&table).await;
    table
        .write(WriteOperation::Upsert, vec![rows.slice(0, 1)])
        .await
        .unwrap();
    let (names, _) = storage.list_dir(".hoodie/timeline").await.unwrap();
    assert!(
        !names.iter().any(|o| o.key.contains(&format!("/{last}."))),
        "the failed instant is still there: {names:?}"
    );
    let reader = TableReader::open(storage.clone()).await.unwrap();
    let now = reader.snapshot(None).await.unwrap();
    assert_eq!(row_count(&now), rows.num_rows());
    if let Some(python) = arbor_testkit::peer_python_or_skip("upgrade peer checks need hudi==0.5.0")
    {
        arbor_testkit::assert_peer_snapshot_matches(
            &python,
            &base,
            reader.schema(),
            &now,
            "pending",
        );
    }
}

/// Bad requests change nothing: a target other than 8 or 9, and a v6 table whose 0.x
/// archived timeline is not empty (not converted yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_upgrade_refusals_leave_table_unchanged() {
    let Some(fixtures) = v6_fixtures() else {
        return;
    };
    let (_, zip) = fixtures
        .iter()
        .find(|(n, _)| n == "sample_table/cow/v6_nonpartitioned")
        .unwrap();
    let (_tmp, base) = unzip_table(zip);
    let storage = local(&base);
    let print = fingerprint(&base);
    for to in [6, 7, 10] {
        let e = TableUpgrade::open(storage.clone())
            .await
            .unwrap()
            .run(to)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("version 8 or 9"), "{e}");
    }
    storage
        .put(
            ".hoodie/archived/.commits_.archive.1_1-0-1",
            bytes::Bytes::from_static(b"x"),
        )
        .await
        .unwrap();
    let print_with_archive = fingerprint(&base);
    assert_ne!(print, print_with_archive);
    let e = TableUpgrade::open(storage.clone())
        .await
        .unwrap()
        .run(9)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("archived timeline"), "{e}");
    assert_eq!(
        fingerprint(&base),
        print_with_archive,
        "a refused upgrade changed files"
    );
}

/// `batch` with column `name` replaced by `f(column)`.
fn replace_column(
    batch: &RecordBatch,
    name: &str,
    f: impl Fn(&ArrayRef) -> ArrayRef,
) -> RecordBatch {
    let cols: Vec<ArrayRef> = batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, c)| {
            if field.name() == name {
                f(c)
            } else {
                c.clone()
            }
        })
        .collect();
    RecordBatch::try_new(batch.schema(), cols).unwrap()
}

/// Rows of the table's latest snapshot in the table's data schema (meta columns dropped).
async fn data_rows(table: &Table) -> RecordBatch {
    let reader = TableReader::open(table.view_storage().clone())
        .await
        .unwrap();
    let batches = reader.snapshot(None).await.unwrap();
    let all = arrow::compute::concat_batches(reader.schema(), &batches).unwrap();
    let schema = table.schema().clone();
    let cols: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| {
            let c = all.column_by_name(f.name()).unwrap();
            arrow::compute::cast(c, f.data_type()).unwrap()
        })
        .collect();
    RecordBatch::try_new(schema, cols).unwrap()
}

fn row_count(batches: &[RecordBatch]) -> usize {
    batches.iter().map(|b| b.num_rows()).sum()
}

/// After `--to 8`, an insert, an upsert and a delete on every non-empty v6 fixture commit and
/// hudi-rs reads what arbor reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_upgraded_v6_fixtures_take_writes() {
    let Some(fixtures) = v6_fixtures() else {
        return;
    };
    let python = arbor_testkit::peer_python_or_skip("upgrade write peer checks need hudi==0.5.0");
    let mut written = 0;
    for (name, zip) in &fixtures {
        let (_tmp, base) = unzip_table(zip);
        let storage = local(&base);
        TableUpgrade::open(storage.clone())
            .await
            .unwrap()
            .run(8)
            .await
            .unwrap();
        let table = Table::open(storage.clone())
            .await
            .unwrap_or_else(|e| panic!("{name}: open after upgrade: {e}"))
            .with_lock_provider(Arc::new(InProcessLockProvider::new()));
        if table.config().get("hoodie.table.keygenerator.type") == Some("TIMESTAMP") {
            // Writes with timestamp-based keys are item 6 of issue 13, not the upgrade's.
            eprintln!("SKIP {name}: arbor does not write timestamp-based keys yet");
            continue;
        }
        let rows = data_rows(&table).await;
        if rows.num_rows() < 2 {
            continue;
        }
        let key = table.config().record_key_fields()[0].clone();
        let ordering = table.config().ordering_fields().first().cloned();
        let before = rows.num_rows();
        // Insert: the first row under a new key.
        let insert = replace_column(&rows.slice(0, 1), &key, |c| match c.data_type() {
            DataType::Int32 => Arc::new(Int32Array::from(vec![1_000_000])),
            DataType::Int64 => Arc::new(Int64Array::from(vec![1_000_000])),
            DataType::Utf8 => Arc::new(StringArray::from(vec!["upgrade-insert"])),
            other => panic!("{name}: key type {other}"),
        });
        table
            .write(WriteOperation::Insert, vec![insert])
            .await
            .unwrap_or_else(|e| panic!("{name}: insert: {e}"));
        // Upsert: the second row with a larger ordering value.
        let mut upsert = rows.slice(1, 1);
        if let Some(o) = &ordering {
            upsert = replace_column(&upsert, o, |c| match c.data_type() {
                DataType::Int64 => {
                    let a = c.as_any().downcast_ref::<Int64Array>().unwrap();
                    Arc::new(Int64Array::from(vec![a.value(0) + 1]))
                }
                _ => c.clone(),
            });
        }
        table
            .write(WriteOperation::Upsert, vec![upsert])
            .await
            .unwrap_or_else(|e| panic!("{name}: upsert: {e}"));
        // Delete: the first row.
        table
            .write(WriteOperation::Delete, vec![rows.slice(0, 1)])
            .await
            .unwrap_or_else(|e| panic!("{name}: delete: {e}"));
        let reader = TableReader::open(storage.clone()).await.unwrap();
        let now = reader.snapshot(None).await.unwrap();
        assert_eq!(row_count(&now), before, "{name}: +1 insert -1 delete");
        if let Some(python) = &python {
            arbor_testkit::assert_peer_snapshot_matches(python, &base, reader.schema(), &now, name);
        }
        written += 1;
    }
    assert!(written >= 4, "only {written} fixtures written");
}

/// One crash sweep: the upgrade of a copy of `zip` (version 6 or 8) to `to` crashed before
/// each of its storage operations in turn. Every crash point must read as before or after (arbor; hudi-rs once per
/// distinct storage state), and a retry must complete the upgrade and read as after.
async fn sweep(name: &str, zip: &Path, to: u32) -> (usize, usize) {
    let (_tmp, template) = unzip_table(zip);
    let from = TableConfig::load(local(&template).as_ref(), ".hoodie")
        .await
        .unwrap()
        .version()
        .code();
    let as_of = completed_writes(&local(&template)).await;
    let (before, peer_before) = reads(&template, &as_of).await;
    let mut seen = BTreeSet::new();
    let mut peer_checks = 0;
    let mut n = 0;
    loop {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("t");
        copy_dir(&template, &base);
        let faulty = Arc::new(FaultInjectingStorage::new(local(&base)));
        faulty.set_partial_batches(true);
        let upgrade = TableUpgrade::open(faulty.clone() as Arc<dyn Storage>)
            .await
            .unwrap()
            .with_lock_provider(Arc::new(InProcessLockProvider::new()));
        faulty.reset();
        faulty.set_mode(FaultMode::CrashAt(n));
        let result = upgrade.run(to).await;
        let label = format!("{name} --to {to}: crash at operation {n}");
        if let Err(e) = &result {
            assert!(faulty.has_crashed(), "{label}: failed without a crash: {e}");
        }
        // A restarted process reads the table as before or after (the same rows either way).
        let version = TableConfig::load(local(&base).as_ref(), ".hoodie")
            .await
            .unwrap()
            .version()
            .code();
        assert!(
            version == from || version == to,
            "{label}: version {version}"
        );
        if result.is_ok() {
            assert_eq!(version, to, "{label}: a reported upgrade is lost");
        }
        assert_eq!(
            completed_writes(&local(&base)).await,
            as_of,
            "{label}: instants"
        );
        let print = fingerprint(&base);
        if seen.insert(print) {
            let (arbor, peer) = reads(&base, &as_of).await;
            assert_eq!(arbor, before, "{label}: arbor reads differ");
            if peer.is_some() {
                assert_eq!(peer, peer_before, "{label}: hudi-rs reads differ");
                peer_checks += 1;
            }
        }
        // The retry completes the upgrade.
        let retry = TableUpgrade::open(local(&base))
            .await
            .unwrap()
            .run(to)
            .await
            .unwrap_or_else(|e| panic!("{label}: retry: {e}"));
        assert_eq!(retry.to, to, "{label}");
        let fresh = local(&base);
        let config = TableConfig::load(fresh.as_ref(), ".hoodie").await.unwrap();
        assert_eq!(config.version().code(), to, "{label}: after retry");
        assert!(
            layout1_files(&fresh).await.is_empty(),
            "{label}: old files after retry"
        );
        assert!(
            !fresh
                .exists(".hoodie/hoodie.properties.backup")
                .await
                .unwrap(),
            "{label}: backup left"
        );
        if seen.len() <= 3 || result.is_ok() {
            let (arbor, _) = reads(&base, &as_of).await;
            assert_eq!(arbor, before, "{label}: arbor reads differ after retry");
        }
        if result.is_ok() {
            return (n, peer_checks);
        }
        n += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_upgrade_crash_sweep() {
    let Some(root) = fixtures_root_or_skip("upgrade crash sweeps") else {
        return;
    };
    let fixtures: Vec<(String, PathBuf)> = fixture_zips(&root)
        .into_iter()
        .map(|z| (fixture_name(&root, &z), z))
        .collect();
    for (wanted, to) in [
        ("quickstart_trips_table/mor/avro/v6_trips_8i1u", 9),
        ("sample_table/cow/v6_simplekeygen_nonhivestyle", 8),
        // 8 -> 9 with a metadata table and index definitions.
        ("quickstart_trips_table/mor/avro/v8_trips_8i3u1d", 9),
    ] {
        let (name, zip) = fixtures
            .iter()
            .find(|(n, _)| n == wanted)
            .unwrap_or_else(|| panic!("fixture {wanted} missing"));
        let (points, peer_checks) = sweep(name, zip, to).await;
        eprintln!("{name} --to {to}: {points} crash points, {peer_checks} hudi-rs checks");
        assert!(points >= 5, "{name}: only {points} storage operations");
    }
}
