//! Helpers of the partition-TTL tests: tables partitioned by a date (`dt`) or by region and
//! date (`region`, `dt`), hive style or not, a model of their rows, and the checks every run
//! must pass (arbor's rows, hudi-rs' rows, the MDT, the indexes, the replacecommit).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use arbor_mdt::validate::validate_table;
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::ttl::{PolicyScope, Retention, TtlPolicy, TtlStrategy};
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_testkit::write_arrow_ipc;
use arbor_timeline::avro::{decode_instant, InstantContent};
use arbor_timeline::config::{RecordMergeMode, TableType};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{Action, ActiveTimeline, Instant, TableConfig, TableLayout};
use arrow::array::{Array, AsArray, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

/// `id` (key), `region`, `dt` (partition fields), `ts` (ordering).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, true),
        Field::new("dt", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
    ]))
}

/// (id, region, dt, ts).
pub type Row = (String, String, String, i64);

pub fn batch(rows: &[Row]) -> RecordBatch {
    let s = |f: fn(&Row) -> &str| Arc::new(StringArray::from_iter_values(rows.iter().map(f)));
    RecordBatch::try_new(
        schema(),
        vec![
            s(|r| r.0.as_str()),
            s(|r| r.1.as_str()),
            s(|r| r.2.as_str()),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
        ],
    )
    .unwrap()
}

/// `n` rows of `region` / `dt`, keys `<region>-<dt>-<i>`.
pub fn rows(region: &str, dt: &str, n: usize, ts: i64) -> Vec<Row> {
    (0..n)
        .map(|i| (format!("{region}-{dt}-{i}"), region.into(), dt.into(), ts))
        .collect()
}

/// How a TTL test table is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub table_type: TableType,
    pub hive: bool,
    /// 1: `dt`; 2: `region`, `dt`.
    pub levels: usize,
}

impl Shape {
    pub fn all() -> Vec<Shape> {
        let mut out = Vec::new();
        for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
            for hive in [true, false] {
                for levels in [1, 2] {
                    out.push(Shape {
                        table_type,
                        hive,
                        levels,
                    });
                }
            }
        }
        out
    }
}

pub struct TtlTable {
    pub _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub storage: Arc<dyn Storage>,
    pub table: Table,
    pub shape: Shape,
    pub model: BTreeMap<String, Row>,
}

pub fn local(base: &std::path::Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

pub async fn create(shape: Shape) -> TtlTable {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    std::fs::create_dir_all(&base).unwrap();
    let storage = local(&base);
    let options = CreateOptions {
        name: "ttl".into(),
        table_type: shape.table_type,
        record_key_fields: vec!["id".into()],
        partition_fields: if shape.levels == 2 {
            vec!["region".into(), "dt".into()]
        } else {
            vec!["dt".into()]
        },
        hive_style_partitioning: shape.hive,
        ordering_field: Some("ts".into()),
        merge_mode: Some(RecordMergeMode::EventTimeOrdering),
        schema: schema(),
        metadata_table: true,
        table_version: Default::default(),
        base_format: Default::default(),
    };
    let table = Table::create(storage.clone(), options).await.unwrap();
    TtlTable {
        _tmp: tmp,
        base,
        storage,
        table,
        shape,
        model: BTreeMap::new(),
    }
}

impl TtlTable {
    /// The partition path of `region` / `dt` (region ignored with one level).
    pub fn partition(&self, region: &str, dt: &str) -> String {
        match (self.shape.levels, self.shape.hive) {
            (2, true) => format!("region={region}/dt={dt}"),
            (2, false) => format!("{region}/{dt}"),
            (_, true) => format!("dt={dt}"),
            (_, false) => dt.to_string(),
        }
    }

    /// The regions of the table's rows (one when the table has one level).
    pub fn regions(&self) -> Vec<&'static str> {
        if self.shape.levels == 2 {
            vec!["eu", "us"]
        } else {
            vec!["eu"]
        }
    }

    pub async fn write(&mut self, op: WriteOperation, rows: &[Row]) -> arbor_table::CommitResult {
        let r = self.table.write(op, vec![batch(rows)]).await.unwrap();
        for row in rows {
            self.model.insert(row.0.clone(), row.clone());
        }
        r
    }

    /// Forgets the model's rows of the partitions `expired` names.
    pub fn drop_partitions(&mut self, expired: &[String]) {
        let doomed: BTreeSet<String> = expired.iter().cloned().collect();
        let parts: Vec<(String, String)> = self
            .model
            .values()
            .map(|r| (r.0.clone(), self.partition(&r.1, &r.2)))
            .collect();
        for (id, p) in parts {
            if doomed.contains(&p) {
                self.model.remove(&id);
            }
        }
    }

    pub fn expected(&self) -> Vec<Row> {
        self.model.values().cloned().collect()
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

    /// Every file group of the latest slices, by partition.
    pub async fn file_groups(&self) -> BTreeMap<String, BTreeSet<String>> {
        let reader = TableReader::open(self.storage.clone()).await.unwrap();
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for s in reader.view().latest_file_slices(None, None).await.unwrap() {
            out.entry(s.partition).or_default().insert(s.file_id);
        }
        out
    }

    /// A fresh handle on the table.
    pub async fn reopen(&self) -> Table {
        Table::open(self.storage.clone()).await.unwrap()
    }
}

/// The data rows of batches, sorted.
pub fn rows_of(batches: &[RecordBatch]) -> Vec<Row> {
    let mut out = Vec::new();
    for b in batches {
        let s = |n: &str| b.column_by_name(n).unwrap().as_string::<i32>().clone();
        let (id, region, dt) = (s("id"), s("region"), s("dt"));
        let ts = b
            .column_by_name("ts")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        for i in 0..b.num_rows() {
            out.push((
                id.value(i).to_string(),
                region.value(i).to_string(),
                dt.value(i).to_string(),
                if ts.is_null(i) { 0 } else { ts.value(i) },
            ));
        }
    }
    out.sort();
    out
}

/// arbor reads the model's rows; the MDT and the indexes agree with storage; hudi-rs reads
/// what arbor reads.
pub async fn assert_table_reads_model(t: &TtlTable, step: &str) {
    let reader = TableReader::open(t.storage.clone()).await.unwrap();
    let batches = reader.snapshot(None).await.unwrap();
    assert_eq!(rows_of(&batches), t.expected(), "arbor's rows after {step}");
    let report = validate_table(t.storage.clone()).await.unwrap();
    assert!(report.has_metadata_table, "{step}");
    assert!(
        report.discrepancies.is_empty(),
        "{step}: the MDT disagrees with storage: {:?}",
        report.discrepancies
    );
    let idx = arbor_table::validate_indexes(t.storage.clone())
        .await
        .unwrap();
    assert!(
        idx.discrepancies.is_empty(),
        "{step}: {:?}",
        idx.discrepancies
    );
    assert_peer_reads(&t.base, &reader, &batches, step);
}

/// hudi-rs 0.5.0's snapshot of the table at `base` has arbor's rows (`row_count` and
/// `data_sha256`); skipped visibly without the peer.
pub fn assert_peer_reads(
    base: &std::path::Path,
    reader: &TableReader,
    batches: &[RecordBatch],
    step: &str,
) {
    let Some(python) =
        arbor_testkit::peer_python_or_skip("TTL peer-reader checks need hudi==0.5.0")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ours.arrow");
    write_arrow_ipc(&path, reader.schema(), batches);
    let requests = vec![
        serde_json::json!({"id": "peer", "table": base.to_string_lossy()}),
        serde_json::json!({"id": "ours", "arrow": path.to_string_lossy()}),
    ];
    let docs = arbor_testkit::peer_digest_batch(&python, &requests);
    let (peer, ours) = (&docs["peer"], &docs["ours"]);
    assert!(
        peer.get("error").is_none(),
        "hudi-rs failed after {step}: {peer}"
    );
    assert_eq!(
        (&peer["row_count"], &peer["data_sha256"]),
        (&ours["row_count"], &ours["data_sha256"]),
        "hudi-rs and arbor differ after {step}"
    );
}

/// The last completed instant is a `replacecommit` with operation `DELETE_PARTITION` whose
/// `partitionToReplaceFileIds` names exactly `groups`.
pub async fn assert_delete_partition_commit(
    t: &TtlTable,
    instant: &arbor_timeline::InstantTime,
    groups: &BTreeMap<String, BTreeSet<String>>,
) {
    let tl = t.timeline().await;
    let done: Vec<Instant> = tl
        .completed()
        .into_iter()
        .filter(|i| &i.requested_time == instant)
        .collect();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].action, Action::ReplaceCommit);
    let bytes = tl.read(&done[0]).await.unwrap();
    let content = decode_instant(&done[0], &bytes, "replacecommit", false).unwrap();
    let InstantContent::ReplaceCommit(m) = content else {
        panic!("not a replacecommit: {content:?}");
    };
    assert_eq!(m.operation_type.as_deref(), Some("DELETE_PARTITION"));
    let named: BTreeMap<String, BTreeSet<String>> = m
        .partition_to_replace_file_ids
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(p, ids)| (p, ids.into_iter().collect()))
        .collect();
    assert_eq!(&named, groups, "the replacecommit names every file group");
}

pub fn event_time(retain: &str, scope: PolicyScope) -> TtlPolicy {
    TtlPolicy {
        strategy: TtlStrategy::EventTime,
        retain: Retention::parse(TtlStrategy::EventTime, retain).unwrap(),
        scope,
        time_field: Some("dt".into()),
        format: Some("yyyy-MM-dd".into()),
    }
}

pub fn whole() -> PolicyScope {
    PolicyScope::Default { fields: vec![] }
}

pub fn utc(text: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&chrono::Utc)
}
