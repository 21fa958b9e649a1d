//! Hostile or damaged table content: rollbacks driven by foreign write stats and plans never
//! delete outside the target's files, and log blocks without a usable instant are skipped
//! with a warning.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arbor_format::base::BaseFileWriter;
use arbor_format::log::{encode_avro_data_block_from_batch, encode_block, BlockType, HeaderKey};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::write::rollback::{rollback_failed_writes, rollback_instant};
use arbor_timeline::avro::{
    decode, encode_instant_for, HoodieCommitMetadata, HoodieInstantInfo, HoodieRollbackMetadata,
    HoodieRollbackPlan, HoodieRollbackRequest, HoodieWriteStat, InstantContent, WriteOperationType,
};
use arbor_timeline::config::{RecordMergeMode, TableType};
use arbor_timeline::{
    Action, ActiveTimeline, Instant, InstantTimeGenerator, State, TableConfig, TableLayout,
};
use arrow::array::{Array, AsArray, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;

const DATA_SCHEMA: &str = r#"{"type":"record","name":"r_record","namespace":"hoodie.r","fields":[{"name":"id","type":["null","string"],"default":null},{"name":"v","type":["null","long"],"default":null},{"name":"p","type":["null","string"],"default":null}]}"#;

/// A table under `<tmp>/t`, so that `<tmp>/x` is outside it.
struct Fixture {
    tmp: tempfile::TempDir,
    storage: Arc<dyn Storage>,
    layout: TableLayout,
    generator: InstantTimeGenerator,
}

impl Fixture {
    async fn new(table_type: TableType) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        std::fs::create_dir_all(&base).unwrap();
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
        let config = TableConfig::builder_v8("r", table_type)
            .record_key_fields(["id"])
            .ordering_field("v")
            .merge_mode(RecordMergeMode::EventTimeOrdering)
            .create_schema(DATA_SCHEMA)
            .partition_fields(["p"])
            .build()
            .unwrap();
        TableConfig::create(storage.as_ref(), ".hoodie", &config)
            .await
            .unwrap();
        let layout = TableLayout::from_config(".hoodie", &config).unwrap();
        Fixture {
            tmp,
            storage,
            layout,
            generator: InstantTimeGenerator::new(),
        }
    }

    fn outside(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn inside(&self, key: &str) -> PathBuf {
        self.tmp.path().join("t").join(key)
    }

    async fn timeline(&self) -> ActiveTimeline {
        ActiveTimeline::load(self.storage.clone(), self.layout.clone())
            .await
            .unwrap()
    }

    async fn put(&self, key: &str, data: &[u8]) {
        self.storage
            .put(key, Bytes::copy_from_slice(data))
            .await
            .unwrap();
    }

    async fn partition(&self, p: &str) {
        self.put(
            &format!("{p}/.hoodie_partition_metadata"),
            b"#partition metadata\ncommitTime=0\npartitionDepth=1\n",
        )
        .await;
    }
}

fn base(fid: char, t: &str) -> String {
    format!(
        "{}-0000-0000-0000-000000000000-0_0-1-0_{t}.parquet",
        fid.to_string().repeat(8)
    )
}

fn stat(partition: &str, path: &str) -> HoodieWriteStat {
    HoodieWriteStat {
        file_id: Some("x".into()),
        path: Some(path.to_string()),
        partition_path: Some(partition.to_string()),
        ..Default::default()
    }
}

fn write_victim(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, b"victim").unwrap();
}

#[tokio::test]
async fn test_rollback_instant_hostile_write_stat_paths_never_deleted() {
    let f = Fixture::new(TableType::CopyOnWrite).await;
    let mut tl = f.timeline().await;
    let t = tl.next_instant_time(&f.generator).await.unwrap();
    let ts = t.to_string();
    let other = "20000101000000000";
    let requested = tl
        .create_requested(t.clone(), Action::Commit, Bytes::new())
        .await
        .unwrap();

    f.partition("a").await;
    let legit = format!("a/{}", base('1', &ts));
    let not_ours = format!("a/{}", base('4', other));
    f.put(&legit, b"data").await;
    f.put(&not_ours, b"data").await;
    // Files outside the table carrying the instant, and stats that point at them.
    let victim_x = f.outside(&format!("x/{}", base('2', &ts)));
    let victim_etc = f.outside(&format!("etc/{}", base('3', &ts)));
    write_victim(&victim_x);
    write_victim(&victim_etc);
    let mut m = HoodieCommitMetadata::default();
    m.add_write_stat("a", stat("a", &legit));
    m.add_write_stat("a", stat("a", &not_ours));
    m.add_write_stat("../x", stat("../x", &format!("../x/{}", base('2', &ts))));
    m.add_write_stat(
        "p/../../etc",
        stat("p/../../etc", &format!("p/../../etc/{}", base('3', &ts))),
    );
    // A valid partition whose stat path leaves it.
    m.add_write_stat("a", stat("a", &format!("a/../../x/{}", base('2', &ts))));
    m.add_write_stat("b", stat("b", &format!("../x/{}", base('2', &ts))));
    m.set_operation_type(WriteOperationType::Insert);
    let inflight_instant = requested.with_state(State::Inflight);
    let bytes =
        encode_instant_for(&inflight_instant, &InstantContent::Commit(Box::new(m))).unwrap();
    let inflight = tl
        .transition_to_inflight(&requested, Bytes::from(bytes))
        .await
        .unwrap();

    let r = rollback_instant(&f.storage, &f.layout, &inflight, &f.generator)
        .await
        .unwrap();

    assert!(!f.inside(&legit).exists(), "the target's file is deleted");
    assert!(
        f.inside(&not_ours).exists(),
        "another instant's file is kept"
    );
    assert!(victim_x.exists() && victim_etc.exists());
    let tl = f.timeline().await;
    let plan: HoodieRollbackPlan = decode(
        &tl.read(&Instant::requested(r.clone(), Action::Rollback))
            .await
            .unwrap(),
        "plan",
    )
    .unwrap();
    let planned: Vec<(String, Vec<String>)> = plan
        .rollback_requests
        .unwrap()
        .into_iter()
        .map(|q| (q.partition_path, q.files_to_be_deleted))
        .collect();
    assert_eq!(planned, vec![("a".to_string(), vec![legit.clone()])]);
    let done = tl
        .get(&r, Action::Rollback)
        .unwrap()
        .completed
        .clone()
        .unwrap();
    let meta: HoodieRollbackMetadata = decode(&tl.read(&done).await.unwrap(), "meta").unwrap();
    assert_eq!(meta.total_files_deleted, 1);
    assert_eq!(meta.commits_rollback, vec![ts]);
}

#[tokio::test]
async fn test_rollback_failed_writes_hostile_plan_deletes_only_target_files() {
    let f = Fixture::new(TableType::CopyOnWrite).await;
    let mut tl = f.timeline().await;
    let t = tl.next_instant_time(&f.generator).await.unwrap();
    let ts = t.to_string();
    let other = "20000101000000000";
    let requested = tl
        .create_requested(t.clone(), Action::Commit, Bytes::new())
        .await
        .unwrap();
    tl.transition_to_inflight(&requested, Bytes::new())
        .await
        .unwrap();
    f.partition("a").await;
    let legit = format!("a/{}", base('1', &ts));
    let not_ours = format!("a/{}", base('4', other));
    f.put(&legit, b"data").await;
    f.put(&not_ours, b"data").await;
    let victim = f.outside(&format!("x/{}", base('2', &ts)));
    write_victim(&victim);

    // A rollback plan left by another writer, naming files outside the table and files of
    // another instant.
    let request = |partition: &str, files: Vec<String>| HoodieRollbackRequest {
        partition_path: partition.to_string(),
        file_id: Some(String::new()),
        latest_base_instant: Some(String::new()),
        files_to_be_deleted: files,
        log_blocks_to_be_deleted: Some(BTreeMap::new()),
    };
    let plan = HoodieRollbackPlan {
        instant_to_rollback: Some(HoodieInstantInfo {
            commit_time: ts.clone(),
            action: "commit".into(),
        }),
        rollback_requests: Some(vec![
            request("../x", vec![format!("../x/{}", base('2', &ts))]),
            request("/x", vec![format!("/x/{}", base('2', &ts))]),
            request(
                "a",
                vec![legit.clone(), not_ours.clone(), "a/../../x".to_string()],
            ),
        ]),
        version: Some(1),
    };
    let r_time = tl.next_instant_time(&f.generator).await.unwrap();
    let r_requested = Instant::requested(r_time.clone(), Action::Rollback);
    let bytes =
        encode_instant_for(&r_requested, &InstantContent::RollbackPlan(Box::new(plan))).unwrap();
    tl.create_requested(r_time.clone(), Action::Rollback, Bytes::from(bytes))
        .await
        .unwrap();

    let done = rollback_failed_writes(&f.storage, &f.layout, &f.generator)
        .await
        .unwrap();
    assert_eq!(done, vec![t.clone()]);

    assert!(!f.inside(&legit).exists());
    assert!(f.inside(&not_ours).exists());
    assert!(victim.exists());
    let tl = f.timeline().await;
    assert!(
        tl.get(&t, Action::Commit).is_none(),
        "target's timeline files are gone"
    );
    let completed = tl
        .get(&r_time, Action::Rollback)
        .unwrap()
        .completed
        .clone()
        .unwrap();
    let meta: HoodieRollbackMetadata = decode(&tl.read(&completed).await.unwrap(), "meta").unwrap();
    assert_eq!(
        meta.partition_metadata.keys().cloned().collect::<Vec<_>>(),
        vec!["a".to_string()],
        "invalid partitions are not recorded"
    );
    let a = &meta.partition_metadata["a"];
    assert_eq!(a.success_delete_files, vec![legit.clone()]);
    assert_eq!(
        a.failed_delete_files,
        vec![not_ours.clone(), "a/../../x".to_string()]
    );
}

// ---------------------------------------------------------------------------------------------
// Log blocks without a usable instant
// ---------------------------------------------------------------------------------------------

/// Collects the messages and fields of WARN events of the current thread.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Collect<'a>(&'a mut String);

impl tracing::field::Visit for Collect<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut line = String::new();
            event.record(&mut Collect(&mut line));
            self.0.lock().unwrap().push(line);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn data_batch(t: &str, rows: &[(&str, i64)]) -> RecordBatch {
    let n = rows.len();
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("_hoodie_commit_time", DataType::Utf8, true),
            Field::new("_hoodie_commit_seqno", DataType::Utf8, true),
            Field::new("_hoodie_record_key", DataType::Utf8, true),
            Field::new("_hoodie_partition_path", DataType::Utf8, true),
            Field::new("id", DataType::Utf8, true),
            Field::new("v", DataType::Int64, true),
            Field::new("p", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(StringArray::from_iter_values(std::iter::repeat_n(t, n))),
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("{t}_0_{i}")),
            )),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(std::iter::repeat_n("a", n))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(StringArray::from_iter_values(std::iter::repeat_n("a", n))),
        ],
    )
    .unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn test_snapshot_log_block_without_usable_instant_skipped_with_warning() {
    let f = Fixture::new(TableType::MergeOnRead).await;
    let avro = BaseFileWriter::avro_schema_with_meta_fields(DATA_SCHEMA).unwrap();
    let mut tl = f.timeline().await;
    let t = tl.next_instant_time(&f.generator).await.unwrap();
    let ts = t.to_string();
    let requested = tl
        .create_requested(t.clone(), Action::DeltaCommit, Bytes::new())
        .await
        .unwrap();
    let inflight = tl
        .transition_to_inflight(&requested, Bytes::new())
        .await
        .unwrap();

    // One good block, then a copy of it without INSTANT_TIME, then one with a garbage time.
    f.partition("a").await;
    let good =
        encode_avro_data_block_from_batch(&ts, &avro, &data_batch(&ts, &[("k1", 1)])).unwrap();
    let mut no_time = BTreeMap::new();
    no_time.insert(HeaderKey::Schema, avro.clone());
    let stray = data_batch(&ts, &[("k2", 2)]);
    let stray_block = encode_avro_data_block_from_batch(&ts, &avro, &stray).unwrap();
    let parsed = arbor_format::log::read_log_file(&stray_block, "s").unwrap();
    let content = parsed.blocks[0].content.clone();
    let missing = encode_block(BlockType::AvroData, &no_time, &content, &BTreeMap::new()).unwrap();
    let mut garbage_time = no_time.clone();
    garbage_time.insert(HeaderKey::InstantTime, "not-an-instant".into());
    let garbage = encode_block(
        BlockType::AvroData,
        &garbage_time,
        &content,
        &BTreeMap::new(),
    )
    .unwrap();
    let mut log = good.to_vec();
    let missing_offset = log.len();
    log.extend_from_slice(&missing);
    let garbage_offset = log.len();
    log.extend_from_slice(&garbage);
    let name = format!(".99999999-0000-0000-0000-000000000000-0_{ts}.log.1_0-1-0");
    let key = format!("a/{name}");
    f.put(&key, &log).await;

    let mut m = HoodieCommitMetadata::default();
    m.add_write_stat(
        "a",
        HoodieWriteStat {
            file_id: Some("99999999-0000-0000-0000-000000000000-0".into()),
            path: Some(key.clone()),
            partition_path: Some("a".into()),
            log_files: Some(vec![name.clone()]),
            base_file: Some(String::new()),
            ..Default::default()
        },
    );
    m.insert_extra("schema", DATA_SCHEMA);
    m.set_operation_type(WriteOperationType::Insert);
    let completion = tl.next_instant_time(&f.generator).await.unwrap();
    let mut done = inflight.with_state(State::Completed);
    done.completion_time = Some(completion.clone());
    let bytes = encode_instant_for(&done, &InstantContent::Commit(Box::new(m))).unwrap();
    tl.complete(&inflight, completion, Bytes::from(bytes))
        .await
        .unwrap();

    let warnings = Warnings::default();
    let guard = tracing::subscriber::set_default(warnings.clone());
    let reader = TableReader::open(f.storage.clone()).await.unwrap();
    let batches = reader.snapshot(None).await.unwrap();
    drop(guard);

    let keys: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            let c = b.column_by_name("id").unwrap().as_string::<i32>().clone();
            (0..c.len()).map(move |i| c.value(i).to_string())
        })
        .collect();
    assert_eq!(
        keys,
        vec!["k1".to_string()],
        "only the block with a valid instant is read"
    );
    let warned = warnings.0.lock().unwrap().clone();
    for offset in [missing_offset, garbage_offset] {
        assert!(
            warned
                .iter()
                .any(|w| w.contains(&key) && w.contains(&format!("offset={offset}"))),
            "no warning naming {key} at offset {offset}: {warned:?}"
        );
    }
}
