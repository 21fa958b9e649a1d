//! Interop through the repo's peer-reader harness (`scripts/peer_reader.py`, hudi-rs 0.5.0):
//! a timeline arbor writes (commits, a replacecommit, a pending instant, an archival) is read by
//! hudi-rs with exactly the completed instants and operations arbor lists.

use std::sync::Arc;

use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_testkit::{peer_python_or_skip, peer_read};
use arbor_timeline::archive::{ArchivalPolicy, Archiver};
use arbor_timeline::avro::{
    encode_instant_for, HoodieCommitMetadata, HoodieReplaceCommitMetadata, InstantContent,
    WriteOperationType,
};
use arbor_timeline::config::TableType;
use arbor_timeline::summary::{list_instants, ListScope};
use arbor_timeline::{
    Action, ActiveTimeline, InstantTimeGenerator, State, TableConfig, TableLayout,
};
use bytes::Bytes;
use serde_json::Value;

const SCHEMA: &str = r#"{"type":"record","name":"t_record","namespace":"hoodie.t","fields":[{"name":"id","type":"string"},{"name":"v","type":["null","long"],"default":null}]}"#;

async fn write_instant(
    tl: &mut ActiveTimeline,
    generator: &InstantTimeGenerator,
    action: Action,
    content: InstantContent,
) {
    let time = tl.next_instant_time(generator).await.unwrap();
    let req = tl
        .create_requested(time, action, Bytes::new())
        .await
        .unwrap();
    let infl = tl.transition_to_inflight(&req, Bytes::new()).await.unwrap();
    let completion = tl.next_instant_time(generator).await.unwrap();
    let mut done = infl.with_state(State::Completed);
    done.completion_time = Some(completion.clone());
    let bytes = encode_instant_for(&done, &content).unwrap();
    tl.complete(&infl, completion, Bytes::from(bytes))
        .await
        .unwrap();
}

fn commit(op: WriteOperationType) -> InstantContent {
    let mut m = HoodieCommitMetadata::default();
    m.set_operation_type(op);
    m.insert_extra("schema", SCHEMA);
    InstantContent::Commit(Box::new(m))
}

#[tokio::test]
async fn test_peer_reader_sees_arbor_timeline_before_and_after_archival() {
    let Some(python) = peer_python_or_skip("peer-reader tests need hudi==0.5.0") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    std::fs::create_dir_all(&base).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let config = TableConfig::builder_v8("t", TableType::CopyOnWrite)
        .record_key_fields(["id"])
        .ordering_field("v")
        .create_schema(SCHEMA)
        .build()
        .unwrap();
    TableConfig::create(storage.as_ref(), ".hoodie", &config)
        .await
        .unwrap();
    let layout = TableLayout::from_config(".hoodie", &config).unwrap();
    let mut tl = ActiveTimeline::load(storage.clone(), layout.clone())
        .await
        .unwrap();
    let generator = InstantTimeGenerator::new();
    for op in [
        WriteOperationType::BulkInsert,
        WriteOperationType::Upsert,
        WriteOperationType::Delete,
        WriteOperationType::Insert,
    ] {
        write_instant(&mut tl, &generator, Action::Commit, commit(op)).await;
    }
    let mut replace = HoodieReplaceCommitMetadata::default();
    replace.set_operation_type(WriteOperationType::InsertOverwriteTable);
    replace.insert_extra("schema", SCHEMA);
    write_instant(
        &mut tl,
        &generator,
        Action::ReplaceCommit,
        InstantContent::ReplaceCommit(Box::new(replace)),
    )
    .await;
    write_instant(
        &mut tl,
        &generator,
        Action::Commit,
        commit(WriteOperationType::Upsert),
    )
    .await;
    // A pending instant: neither reader may list it.
    let t = tl.next_instant_time(&generator).await.unwrap();
    tl.create_requested(t, Action::Commit, Bytes::new())
        .await
        .unwrap();

    let check = |phase: &str, peer: &Value, ours: &[arbor_timeline::summary::InstantSummary]| {
        let theirs: Vec<(String, String, Option<String>)> = peer["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                (
                    i["timestamp"].as_str().unwrap().to_string(),
                    i["action"].as_str().unwrap().to_string(),
                    i["operation"].as_str().map(str::to_string),
                )
            })
            .collect();
        let mine: Vec<(String, String, Option<String>)> = ours
            .iter()
            .map(|i| (i.timestamp.clone(), i.action.clone(), i.operation.clone()))
            .collect();
        assert_eq!(theirs, mine, "{phase}");
        assert_eq!(
            peer["latest_commit"].as_str(),
            mine.last().map(|m| m.0.as_str()),
            "{phase}"
        );
        assert_eq!(peer["row_count"], 0, "{phase}");
    };

    let ours = list_instants(storage.clone(), ListScope::CompletedWrites)
        .await
        .unwrap();
    assert_eq!(ours.len(), 6);
    check("before archival", &peer_read(&python, &base), &ours);

    let policy = ArchivalPolicy {
        min_commits: 2,
        max_commits: 3,
        ..ArchivalPolicy::default()
    };
    let outcome = Archiver::new(storage.clone(), layout, policy)
        .unwrap()
        .run()
        .await
        .unwrap();
    assert!(!outcome.archived.is_empty());
    let ours = list_instants(storage.clone(), ListScope::CompletedWrites)
        .await
        .unwrap();
    assert!(ours.len() < 6, "{ours:?}");
    check("after archival", &peer_read(&python, &base), &ours);
    // Everything is still listed once, archived or active.
    let all = list_instants(storage, ListScope::All).await.unwrap();
    assert_eq!(all.iter().filter(|i| i.state == "COMPLETED").count(), 6);
    assert_eq!(all.iter().filter(|i| i.state != "COMPLETED").count(), 1);
}
