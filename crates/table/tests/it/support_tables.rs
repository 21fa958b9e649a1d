//! Test tables built with the lower-level APIs (timeline transitions, `BaseFileWriter`, log
//! block encoders, commit metadata), independent of the write client; row digests of arbor's
//! reader and of the peer reader (hudi-rs 0.5.0).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arbor_format::base::BaseFileWriter;
use arbor_format::log::{encode_avro_data_block_from_batch, encode_delete_block, DeleteRecord};
use arbor_format::meta;
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_testkit::{batches_digest, canonical_digest};
use arbor_timeline::avro::{
    encode_instant_for, HoodieCommitMetadata, HoodieWriteStat, InstantContent, WriteOperationType,
};
use arbor_timeline::config::{RecordMergeMode, TableType};
use arbor_timeline::{
    Action, ActiveTimeline, InstantTime, InstantTimeGenerator, State, TableConfig, TableLayout,
};
use arrow::array::{ArrayRef, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;

/// Data columns of every test table: `id` (record key), `v` (ordering), `p` (partition).
pub const DATA_SCHEMA: &str = r#"{"type":"record","name":"t_record","namespace":"hoodie.t","fields":[{"name":"id","type":["null","string"],"default":null},{"name":"v","type":["null","long"],"default":null},{"name":"p","type":["null","string"],"default":null}]}"#;

/// One row of a test table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    pub v: i64,
    pub p: String,
}

pub fn row(id: &str, v: i64, p: &str) -> Row {
    Row {
        id: id.into(),
        v,
        p: p.into(),
    }
}

/// How far a write gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Completed.
    Complete,
    /// Requested, inflight and data files; never completed (a crashed writer).
    Inflight,
    /// Requested and data files only.
    Requested,
}

/// What a write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// New base files, one new file group per partition.
    InsertBase,
    /// Log data blocks appended to the rows' existing file groups (MOR).
    UpdateLog,
    /// Log data blocks in one new log-only file group per partition (MOR).
    InsertLog,
    /// Delete blocks for the rows' keys in their file groups (MOR).
    DeleteLog,
}

static FILE_IDS: AtomicU64 = AtomicU64::new(1);

fn new_file_id() -> String {
    let n = FILE_IDS.fetch_add(1, Ordering::Relaxed);
    format!("{n:08x}-aaaa-4bbb-8ccc-{n:012x}-0")
}

/// A table in a temporary directory.
pub struct TestTable {
    /// Keeps the directory alive.
    #[allow(dead_code)]
    pub tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub storage: Arc<dyn Storage>,
    pub layout: TableLayout,
    pub generator: InstantTimeGenerator,
    pub table_type: TableType,
    pub partitioned: bool,
    /// key -> (partition, file id, base file name or "") of completed writes.
    groups: Mutex<BTreeMap<String, (String, String, String)>>,
}

pub fn data_arrow_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
        Field::new("p", DataType::Utf8, true),
    ]))
}

fn data_batch(rows: &[&Row]) -> RecordBatch {
    RecordBatch::try_new(
        data_arrow_schema(),
        vec![
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.id.as_str()),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.v))),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.p.as_str()),
            )),
        ],
    )
    .unwrap()
}

impl TestTable {
    /// A new table (event-time ordering on `v`, key `id`, partitioned by `p` or not).
    pub async fn create(table_type: TableType, partitioned: bool) -> TestTable {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        std::fs::create_dir_all(&base).unwrap();
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
        let mut builder = TableConfig::builder_v8("t", table_type)
            .record_key_fields(["id"])
            .ordering_field("v")
            .merge_mode(RecordMergeMode::EventTimeOrdering)
            .create_schema(DATA_SCHEMA);
        if partitioned {
            builder = builder.partition_fields(["p"]);
        } else {
            builder = builder.key_generator_type("NON_PARTITION");
        }
        let config = builder.build().unwrap();
        TableConfig::create(storage.as_ref(), ".hoodie", &config)
            .await
            .unwrap();
        let layout = TableLayout::from_config(".hoodie", &config).unwrap();
        TestTable {
            tmp,
            base,
            storage,
            layout,
            generator: InstantTimeGenerator::new(),
            table_type,
            partitioned,
            groups: Mutex::new(BTreeMap::new()),
        }
    }

    fn partition_of(&self, r: &Row) -> String {
        if self.partitioned {
            r.p.clone()
        } else {
            String::new()
        }
    }

    fn key(partition: &str, name: &str) -> String {
        if partition.is_empty() {
            name.to_string()
        } else {
            format!("{partition}/{name}")
        }
    }

    pub async fn timeline(&self) -> ActiveTimeline {
        ActiveTimeline::load(self.storage.clone(), self.layout.clone())
            .await
            .unwrap()
    }

    /// One write of `rows` (keys for deletes) as one instant. Returns the instant time.
    pub async fn write(&self, kind: Kind, rows: &[Row], finish: Finish) -> InstantTime {
        let action = match self.table_type {
            TableType::CopyOnWrite => Action::Commit,
            TableType::MergeOnRead => Action::DeltaCommit,
        };
        let mut tl = self.timeline().await;
        let t = tl.next_instant_time(&self.generator).await.unwrap();
        let requested = tl
            .create_requested(t.clone(), action, Bytes::new())
            .await
            .unwrap();
        let inflight = if finish == Finish::Requested {
            None
        } else {
            Some(
                tl.transition_to_inflight(&requested, Bytes::new())
                    .await
                    .unwrap(),
            )
        };
        let ts = t.to_string();
        let avro = BaseFileWriter::avro_schema_with_meta_fields(DATA_SCHEMA).unwrap();
        let mut by_group: BTreeMap<(String, String, String), Vec<&Row>> = BTreeMap::new();
        {
            let groups = self.groups.lock().unwrap();
            let mut new_groups: BTreeMap<String, String> = BTreeMap::new();
            for r in rows {
                let partition = self.partition_of(r);
                let g = match kind {
                    Kind::InsertBase | Kind::InsertLog => {
                        let fid = new_groups
                            .entry(partition.clone())
                            .or_insert_with(new_file_id)
                            .clone();
                        (partition, fid, String::new())
                    }
                    Kind::UpdateLog | Kind::DeleteLog => groups
                        .get(&r.id)
                        .cloned()
                        .unwrap_or_else(|| panic!("no file group holds key {}", r.id)),
                };
                by_group.entry(g).or_default().push(r);
            }
        }
        let mut metadata = HoodieCommitMetadata::default();
        let mut placed: Vec<(String, (String, String, String))> = Vec::new();
        for ((partition, fid, base_name), group_rows) in by_group {
            if !partition.is_empty() {
                let marker = format!("{partition}/.hoodie_partition_metadata");
                let _ = self
                    .storage
                    .put_if_absent(
                        &marker,
                        Bytes::from(format!(
                            "#partition metadata\ncommitTime={ts}\npartitionDepth=1\n"
                        )),
                    )
                    .await;
            }
            let keys: Vec<String> = group_rows.iter().map(|r| r.id.clone()).collect();
            let n = group_rows.len() as i64;
            let stat = match kind {
                Kind::InsertBase => {
                    let name = format!("{fid}_0-1-0_{ts}.parquet");
                    let key = Self::key(&partition, &name);
                    let written = BaseFileWriter::new(&ts, &name, &partition, &avro)
                        .write(
                            self.storage.as_ref(),
                            &key,
                            &[data_batch(&group_rows)],
                            &keys,
                        )
                        .await
                        .unwrap();
                    for k in &keys {
                        placed.push((k.clone(), (partition.clone(), fid.clone(), name.clone())));
                    }
                    HoodieWriteStat {
                        file_id: Some(fid.clone()),
                        path: Some(key),
                        prev_commit: Some("null".into()),
                        num_writes: Some(n),
                        num_inserts: Some(n),
                        num_deletes: Some(0),
                        num_update_writes: Some(0),
                        partition_path: Some(partition.clone()),
                        total_write_bytes: Some(written.size as i64),
                        file_size_in_bytes: Some(written.size as i64),
                        ..Default::default()
                    }
                }
                Kind::UpdateLog | Kind::InsertLog | Kind::DeleteLog => {
                    let name = format!(".{fid}_{ts}.log.1_0-1-0");
                    let key = Self::key(&partition, &name);
                    let bytes = if kind == Kind::DeleteLog {
                        let deletes: Vec<DeleteRecord> = group_rows
                            .iter()
                            .map(|r| DeleteRecord::new(r.id.clone(), partition.clone()))
                            .collect();
                        encode_delete_block(&ts, Some(&avro), &deletes).unwrap()
                    } else {
                        let batch = with_meta(&ts, &partition, &fid, &group_rows);
                        encode_avro_data_block_from_batch(&ts, &avro, &batch).unwrap()
                    };
                    let size = bytes.len() as i64;
                    self.storage.put_if_absent(&key, bytes).await.unwrap();
                    if kind == Kind::InsertLog {
                        for k in &keys {
                            placed
                                .push((k.clone(), (partition.clone(), fid.clone(), String::new())));
                        }
                    }
                    HoodieWriteStat {
                        file_id: Some(fid.clone()),
                        path: Some(key),
                        prev_commit: Some(ts.clone()),
                        num_writes: Some(if kind == Kind::DeleteLog { 0 } else { n }),
                        num_deletes: Some(if kind == Kind::DeleteLog { n } else { 0 }),
                        num_update_writes: Some(if kind == Kind::UpdateLog { n } else { 0 }),
                        num_inserts: Some(if kind == Kind::InsertLog { n } else { 0 }),
                        partition_path: Some(partition.clone()),
                        total_write_bytes: Some(size),
                        file_size_in_bytes: Some(size),
                        log_version: Some(1),
                        log_offset: Some(0),
                        base_file: Some(base_name.clone()),
                        log_files: Some(vec![name.clone()]),
                        ..Default::default()
                    }
                }
            };
            metadata.add_write_stat(partition, stat);
        }
        let Some(inflight) = inflight else { return t };
        if finish != Finish::Complete {
            return t;
        }
        metadata.insert_extra("schema", DATA_SCHEMA);
        metadata.set_operation_type(match kind {
            Kind::InsertBase | Kind::InsertLog => WriteOperationType::Insert,
            Kind::UpdateLog => WriteOperationType::Upsert,
            Kind::DeleteLog => WriteOperationType::Delete,
        });
        let completion = tl.next_instant_time(&self.generator).await.unwrap();
        let mut done = inflight.with_state(State::Completed);
        done.completion_time = Some(completion.clone());
        let bytes = encode_instant_for(&done, &InstantContent::Commit(Box::new(metadata))).unwrap();
        tl.complete(&inflight, completion, Bytes::from(bytes))
            .await
            .unwrap();
        let mut groups = self.groups.lock().unwrap();
        for (k, g) in placed {
            groups.insert(k, g);
        }
        t
    }

    /// Every file under the table base except the timeline, as sorted keys.
    pub fn data_files(&self) -> Vec<String> {
        list_files(&self.base)
            .into_iter()
            .filter(|k| !k.starts_with(".hoodie/") && !k.contains(".hoodie_partition_metadata"))
            .collect()
    }

    /// Every file under `.hoodie/timeline` (not history), as sorted names.
    pub fn timeline_files(&self) -> Vec<String> {
        let dir = self.base.join(".hoodie/timeline");
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A fresh local storage over the same directory (what a restarted process sees).
    pub fn fresh_storage(&self) -> Arc<dyn Storage> {
        Arc::new(ObjectStoreStorage::local(&self.base).unwrap())
    }
}

/// Every file under `root` (relative paths, sorted).
pub fn list_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(
                    p.strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/"),
                );
            }
        }
    }
    out.sort();
    out
}

/// Meta columns (as Spark fills them in log records) followed by the data columns.
fn with_meta(instant: &str, partition: &str, fid: &str, rows: &[&Row]) -> RecordBatch {
    let n = rows.len();
    let data = data_batch(rows);
    let mut fields: Vec<Field> = meta::META_COLUMNS
        .iter()
        .map(|c| Field::new(*c, DataType::Utf8, true))
        .collect();
    fields.extend(data.schema().fields().iter().map(|f| f.as_ref().clone()));
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
            instant, n,
        ))),
        Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("{instant}_0_{i}")),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.id.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
            partition, n,
        ))),
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n(fid, n))),
    ];
    columns.extend(data.columns().iter().cloned());
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// Rows as sorted text lines `key|commit_time|seqno|partition|id|v|p` (the file name is left
/// out: compaction changes it).
pub fn lines(batches: &[RecordBatch]) -> Vec<String> {
    let cols = [
        meta::RECORD_KEY,
        meta::COMMIT_TIME,
        meta::COMMIT_SEQNO,
        meta::PARTITION_PATH,
        "id",
        "v",
        "p",
    ];
    let mut out = Vec::new();
    for b in batches {
        let cast: Vec<ArrayRef> = cols
            .iter()
            .map(|c| arrow::compute::cast(b.column_by_name(c).unwrap(), &DataType::Utf8).unwrap())
            .collect();
        for i in 0..b.num_rows() {
            let parts: Vec<String> = cast
                .iter()
                .map(|a| {
                    let s = a.as_any().downcast_ref::<StringArray>().unwrap();
                    if arrow::array::Array::is_null(s, i) {
                        "∅".to_string()
                    } else {
                        s.value(i).to_string()
                    }
                })
                .collect();
            out.push(parts.join("|"));
        }
    }
    out.sort();
    out
}

/// arbor's snapshot (or time travel) of the table under `storage`, as [`lines`].
pub async fn snapshot_lines(
    storage: &Arc<dyn Storage>,
    as_of: Option<&InstantTime>,
) -> Vec<String> {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    lines(&reader.snapshot(as_of).await.unwrap())
}

/// arbor's incremental read over completion times `(start, end]`, as [`lines`].
pub async fn incremental_lines(
    storage: &Arc<dyn Storage>,
    start: Option<&InstantTime>,
    end: Option<&InstantTime>,
) -> Vec<String> {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    lines(&reader.incremental(start, end).await.unwrap())
}

// ----- the peer reader -----

/// The Python with hudi 0.5.0 ([`arbor_testkit::peer_python`]). `None` (visibly skipped) only
/// outside CI.
pub fn peer_python() -> Option<PathBuf> {
    arbor_testkit::peer_python_or_skip("peer-reader checks need hudi==0.5.0")
}

const PEER_SNAPSHOT: &str = r#"
import sys
import pyarrow as pa
from hudi import HudiReadOptions, HudiTable
t = HudiTable(sys.argv[1])
ro = HudiReadOptions()
if len(sys.argv) > 3:
    ro = ro.with_as_of_timestamp(sys.argv[3])
bs = t.read(ro)
schema = bs[0].schema if bs else t.get_schema_with_meta_fields()
with pa.ipc.new_file(sys.argv[2], schema) as w:
    for b in bs:
        w.write_batch(b)
"#;

/// hudi-rs's snapshot (or time travel) digest of the table.
pub fn peer_snapshot_digest(
    python: &Path,
    table: &Path,
    as_of: Option<&InstantTime>,
) -> (u64, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("peer.arrow");
    let mut cmd = Command::new(python);
    cmd.arg("-c").arg(PEER_SNAPSHOT).arg(table).arg(&file);
    if let Some(t) = as_of {
        cmd.arg(t.as_str());
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "hudi-rs could not read {}: {}",
        table.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    canonical_digest(python, &file)
}

/// arbor's snapshot (or time travel) digest of the table, canonicalised the same way.
pub async fn arbor_snapshot_digest(
    python: &Path,
    storage: &Arc<dyn Storage>,
    as_of: Option<&InstantTime>,
) -> (u64, String) {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    let batches = reader.snapshot(as_of).await.unwrap();
    batches_digest(python, reader.schema(), &batches)
}

// ----- tables written by the write client -----

/// A merge-on-read table created and written by [`arbor_table::Table`] (partitioned by `p`,
/// event-time ordering on `v`), in a temporary directory.
pub async fn client_table() -> (tempfile::TempDir, PathBuf, arbor_table::Table) {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    std::fs::create_dir_all(&base).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let options = arbor_table::CreateOptions {
        name: "t".into(),
        table_type: TableType::MergeOnRead,
        record_key_fields: vec!["id".into()],
        partition_fields: vec!["p".into()],
        hive_style_partitioning: false,
        ordering_field: Some("v".into()),
        merge_mode: Some(RecordMergeMode::EventTimeOrdering),
        schema: data_arrow_schema(),
        metadata_table: true,
        table_version: Default::default(),
        base_format: Default::default(),
    };
    let table = arbor_table::Table::create(storage, options).await.unwrap();
    (tmp, base, table)
}

/// Rows as a batch of the data schema.
pub fn rows_batch(rows: &[Row]) -> RecordBatch {
    let refs: Vec<&Row> = rows.iter().collect();
    data_batch(&refs)
}
