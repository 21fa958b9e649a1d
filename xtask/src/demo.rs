//! `cargo xtask demo`: the main job, on the local file system.
//!
//! What it shows today (issue 2, the foundation): a version-8 table is created, a series of
//! commits goes through requested -> inflight -> completed on the v8 timeline with real Avro
//! commit metadata, the archiver moves the oldest commits into the LSM history, and the
//! `arbor` CLI lists the timeline. Data files, branches, tags and publication arrive with
//! issues 3 to 6; the demo grows with them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_timeline::archive::{ArchivalPolicy, Archiver};
use arbor_timeline::avro::{
    encode_instant_for, HoodieCommitMetadata, InstantContent, WriteOperationType,
};
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, ActiveTimeline, InstantTimeGenerator, TableConfig, TableLayout};
use bytes::Bytes;

const SCHEMA: &str = r#"{"type":"record","name":"trips_record","namespace":"hoodie.trips","fields":[{"name":"uuid","type":"string"},{"name":"city","type":["null","string"],"default":null},{"name":"fare","type":["null","double"],"default":null},{"name":"ts","type":["null","long"],"default":null}]}"#;

/// Runs the demo in `dir` (default `./arbor-demo`).
pub fn run(args: &[String], arbor: impl Fn(&[&str]) -> Result<(), String>) -> Result<(), String> {
    let dir = PathBuf::from(args.first().map(String::as_str).unwrap_or("arbor-demo"));
    let table = dir.join("trips");
    if table.exists() {
        std::fs::remove_dir_all(&table).map_err(|e| {
            format!(
                "cannot remove the previous demo table {}: {e}",
                table.display()
            )
        })?;
    }
    std::fs::create_dir_all(&table)
        .map_err(|e| format!("cannot create {}: {e}", table.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(build_table(&table))
        .map_err(|e| e.to_string())?;
    let path = table.display().to_string();
    println!("\n== arbor timeline {path}");
    arbor(&["timeline", &path])?;
    rt.block_on(archive(&table)).map_err(|e| e.to_string())?;
    println!("\n== after archival: arbor timeline {path} --all");
    arbor(&["timeline", &path, "--all"])?;
    println!(
        "\nThe table is in {path}. Data writes, branches, tags and publication are not built yet \
         (issues 3 to 6)."
    );
    Ok(())
}

async fn build_table(table: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(table)?);
    let config = TableConfig::builder_v8("trips", TableType::CopyOnWrite)
        .record_key_fields(["uuid"])
        .partition_fields(["city"])
        .ordering_field("ts")
        .create_schema(SCHEMA)
        .build()?;
    TableConfig::create(storage.as_ref(), ".hoodie", &config).await?;
    println!(
        "created a version-8 copy-on-write table 'trips' in {}",
        table.display()
    );
    let layout = TableLayout::from_config(".hoodie", &config)?;
    let mut timeline = ActiveTimeline::load(storage.clone(), layout).await?;
    let generator = InstantTimeGenerator::new();
    for (n, op) in [
        WriteOperationType::Insert,
        WriteOperationType::Upsert,
        WriteOperationType::Upsert,
        WriteOperationType::Delete,
        WriteOperationType::Upsert,
        WriteOperationType::Upsert,
    ]
    .into_iter()
    .enumerate()
    {
        let time = generator.next()?;
        let requested = timeline
            .create_requested(time, Action::Commit, Bytes::new())
            .await?;
        let mut meta = HoodieCommitMetadata::default();
        meta.set_operation_type(op);
        meta.insert_extra("schema", SCHEMA);
        let inflight_bytes = encode_instant_for(
            &requested.with_state(arbor_timeline::State::Inflight),
            &InstantContent::Commit(Box::new(meta.clone())),
        )?;
        let inflight = timeline
            .transition_to_inflight(&requested, Bytes::from(inflight_bytes))
            .await?;
        let completion = generator.next()?;
        let mut done = inflight.with_state(arbor_timeline::State::Completed);
        done.completion_time = Some(completion.clone());
        let bytes = encode_instant_for(&done, &InstantContent::Commit(Box::new(meta)))?;
        let completed = timeline
            .complete(&inflight, completion, Bytes::from(bytes))
            .await?;
        println!("commit {} ({}) completed: {completed}", n + 1, op.name());
    }
    Ok(())
}

async fn archive(table: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(table)?);
    let config = TableConfig::load(storage.as_ref(), ".hoodie").await?;
    let layout = TableLayout::from_config(".hoodie", &config)?;
    let policy = ArchivalPolicy {
        min_commits: 2,
        max_commits: 4,
        ..ArchivalPolicy::default()
    };
    let outcome = Archiver::new(storage, layout, policy)?.run().await?;
    println!(
        "\narchived {} instants into .hoodie/timeline/history (keep.min.commits=2, keep.max.commits=4)",
        outcome.archived.len()
    );
    Ok(())
}
