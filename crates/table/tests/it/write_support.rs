//! Helpers of the write-client tests: tables created through `Table::create`, an in-memory model
//! of the expected rows, and comparisons with arbor's reader and with the peer reader
//! (hudi-rs 0.5.0 through `scripts/peer_digest.py`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arbor_storage::{ObjectStoreStorage, Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_testkit::write_arrow_ipc;
use arbor_timeline::config::{RecordMergeMode, TableType};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{ActiveTimeline, Instant, TableConfig, TableLayout};
use arrow::array::{Array, AsArray, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde_json::Value;

/// How a test table is partitioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Hive,
    Plain,
    None,
}

/// The data schema of every write test table: `id` (key), `region` (partition), `ts`
/// (ordering), `name`.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]))
}

/// One row: (id, region, ts, name).
pub type Row = (String, String, i64, String);

pub fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.0.as_str()),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.1.as_str()),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.3.as_str()),
            )),
        ],
    )
    .unwrap()
}

pub fn rows(ids: std::ops::Range<u32>, ts: i64, tag: &str) -> Vec<Row> {
    ids.map(|i| {
        let region = if i % 2 == 0 { "us" } else { "eu" };
        (
            format!("k{i:04}"),
            region.to_string(),
            ts,
            format!("{tag}{i}"),
        )
    })
    .collect()
}

/// A table in a temporary directory on local storage.
pub struct TestTable {
    pub _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub storage: Arc<dyn Storage>,
    pub table: Table,
    pub layout: Layout,
}

pub async fn create(table_type: TableType, layout: Layout) -> TestTable {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    std::fs::create_dir_all(&base).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let options = CreateOptions {
        name: "t".into(),
        table_type,
        record_key_fields: vec!["id".into()],
        partition_fields: if layout == Layout::None {
            vec![]
        } else {
            vec!["region".into()]
        },
        hive_style_partitioning: layout == Layout::Hive,
        ordering_field: Some("ts".into()),
        merge_mode: Some(RecordMergeMode::EventTimeOrdering),
        schema: schema(),
        metadata_table: true,
        table_version: Default::default(),
        base_format: Default::default(),
    };
    let table = Table::create(storage.clone(), options).await.unwrap();
    TestTable {
        _tmp: tmp,
        base,
        storage,
        table,
        layout,
    }
}

impl TestTable {
    /// The partition path of a region.
    pub fn partition(&self, region: &str) -> String {
        match self.layout {
            Layout::Hive => format!("region={region}"),
            Layout::Plain => region.to_string(),
            Layout::None => String::new(),
        }
    }

    pub async fn reader(&self) -> TableReader {
        TableReader::open(self.storage.clone()).await.unwrap()
    }

    pub async fn timeline(&self) -> ActiveTimeline {
        let config = TableConfig::load(self.storage.as_ref(), DEFAULT_META_DIR)
            .await
            .unwrap();
        let layout = TableLayout::from_config(DEFAULT_META_DIR, &config).unwrap();
        ActiveTimeline::load(self.storage.clone(), layout)
            .await
            .unwrap()
    }

    pub async fn completed(&self) -> Vec<Instant> {
        self.timeline().await.completed_writes()
    }

    /// Every key in storage (sorted), except the lock and heartbeat objects.
    pub async fn listing(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .storage
            .list_all("")
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .filter(|k| !k.starts_with(".hoodie/.locks") && !k.starts_with(".hoodie/.heartbeat"))
            .collect();
        keys.sort();
        keys
    }

    pub async fn write(&self, op: WriteOperation, rows: &[Row]) -> arbor_table::CommitResult {
        self.table.write(op, vec![batch(rows)]).await.unwrap()
    }
}

/// The expected rows: id -> row.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub rows: BTreeMap<String, Row>,
}

impl Model {
    /// Upsert with event-time ordering: a row with a smaller `ts` than the stored one is ignored.
    pub fn upsert(&mut self, rows: &[Row]) {
        for r in rows {
            match self.rows.get(&r.0) {
                Some(old) if old.2 > r.2 => {}
                _ => {
                    self.rows.insert(r.0.clone(), r.clone());
                }
            }
        }
    }

    pub fn delete(&mut self, rows: &[Row]) {
        for r in rows {
            self.rows.remove(&r.0);
        }
    }

    /// Replaces the rows of the regions `rows` touch (or all rows when `partitioned` is false).
    pub fn overwrite(&mut self, rows: &[Row], partitioned: bool) {
        if partitioned {
            let regions: Vec<String> = rows.iter().map(|r| r.1.clone()).collect();
            self.rows.retain(|_, r| !regions.contains(&r.1));
        } else {
            self.rows.clear();
        }
        self.upsert(rows);
    }

    pub fn drop_region(&mut self, region: &str) {
        self.rows.retain(|_, r| r.1 != region);
    }

    pub fn sorted(&self) -> Vec<Row> {
        self.rows.values().cloned().collect()
    }
}

/// The data rows of batches, sorted by id.
pub fn rows_of(batches: &[RecordBatch]) -> Vec<Row> {
    let mut out = Vec::new();
    for b in batches {
        let s = |n: &str| b.column_by_name(n).unwrap().as_string::<i32>().clone();
        let (id, region, name) = (s("id"), s("region"), s("name"));
        let ts = b
            .column_by_name("ts")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        for i in 0..b.num_rows() {
            out.push((
                id.value(i).to_string(),
                region.value(i).to_string(),
                if ts.is_null(i) { 0 } else { ts.value(i) },
                name.value(i).to_string(),
            ));
        }
    }
    out.sort();
    out
}

/// arbor's snapshot equals the model.
pub async fn assert_snapshot(t: &TestTable, model: &Model, step: &str) {
    let reader = t.reader().await;
    let got = rows_of(&reader.snapshot(None).await.unwrap());
    assert_eq!(got, model.sorted(), "snapshot after {step}");
}

/// The Python that runs the peer reader ([`arbor_testkit::peer_python`]); `None` (visibly
/// skipped) only outside CI.
pub fn peer_python() -> Option<PathBuf> {
    arbor_testkit::peer_python_or_skip("write peer-reader checks need hudi==0.5.0")
}

/// One query for the peer.
#[derive(Debug, Clone)]
pub enum Query {
    Snapshot,
    AsOf(String),
    Incremental(String, String),
}

/// Compares arbor's rows of each query with hudi-rs' (`row_count` and `data_sha256`), in one
/// peer process.
pub async fn assert_peer_agrees(t: &TestTable, queries: &[Query], step: &str) {
    let Some(python) = peer_python() else {
        return;
    };
    let reader = t.reader().await;
    let dir = tempfile::tempdir().unwrap();
    let mut requests = String::new();
    for (i, q) in queries.iter().enumerate() {
        let batches = match q {
            Query::Snapshot => reader.snapshot(None).await.unwrap(),
            Query::AsOf(a) => reader.snapshot(Some(&a.parse().unwrap())).await.unwrap(),
            Query::Incremental(s, e) => reader
                .incremental(Some(&s.parse().unwrap()), Some(&e.parse().unwrap()))
                .await
                .unwrap(),
        };
        let path = dir.path().join(format!("q{i}.arrow"));
        write_arrow_ipc(&path, reader.schema(), &batches);
        let table = t.base.to_string_lossy().to_string();
        let peer = match q {
            Query::Snapshot => serde_json::json!({"id": format!("p{i}"), "table": table}),
            Query::AsOf(a) => {
                serde_json::json!({"id": format!("p{i}"), "table": table, "as_of": a})
            }
            Query::Incremental(s, e) => {
                serde_json::json!({"id": format!("p{i}"), "table": table, "incremental": [s, e]})
            }
        };
        requests.push_str(&peer.to_string());
        requests.push('\n');
        requests.push_str(
            &serde_json::json!({"id": format!("a{i}"), "arrow": path.to_string_lossy()})
                .to_string(),
        );
        requests.push('\n');
    }
    let requests: Vec<Value> = requests
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let docs = arbor_testkit::peer_digest_batch(&python, &requests);
    for (i, q) in queries.iter().enumerate() {
        let peer = &docs[&format!("p{i}")];
        let ours = &docs[&format!("a{i}")];
        assert!(
            peer.get("error").is_none(),
            "hudi-rs failed on {q:?} after {step}: {peer}"
        );
        assert_eq!(
            (&peer["row_count"], &peer["data_sha256"]),
            (&ours["row_count"], &ours["data_sha256"]),
            "hudi-rs and arbor differ on {q:?} after {step}"
        );
    }
}
