//! A commit's cost does not grow with history: an upsert reads neither the archived timeline
//! (of the data table or of its metadata table) nor more of the FILES partition at a long
//! history than at a short one. Storage calls are counted through a pass-through
//! [`FaultInjectingStorage`].

use std::collections::BTreeMap;
use std::sync::Arc;

use arbor_storage::{FaultInjectingStorage, ObjectStoreStorage, OpKind, Storage};
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_timeline::archive::{ArchivalPolicy, ArchivedTimeline, Archiver};
use arbor_timeline::config::{RecordMergeMode, TableType};

use super::write_support::{batch, rows, schema};

/// Where a storage call went.
fn category(kind: OpKind, key: &str) -> String {
    let what = match kind {
        OpKind::List | OpKind::ListDir => "list",
        k if k.is_write() => "write",
        _ => "read",
    };
    let place = if key.starts_with(".hoodie/metadata/.hoodie/timeline/history") {
        "mdt archive"
    } else if key.starts_with(".hoodie/timeline/history") {
        "data archive"
    } else if key.starts_with(".hoodie/metadata/files") {
        "FILES"
    } else if key.starts_with(".hoodie/metadata/.hoodie") {
        "mdt timeline"
    } else if key.starts_with(".hoodie/metadata") {
        "mdt other"
    } else if key.starts_with(".hoodie") {
        "data meta"
    } else {
        "data files"
    };
    format!("{place} {what}")
}

struct Grown {
    _tmp: tempfile::TempDir,
    counter: Arc<FaultInjectingStorage>,
    storage: Arc<dyn Storage>,
    table: Table,
    commits: u32,
}

/// A table with the MDT and 40 rows in two partitions (no upserts yet).
async fn create(table_type: TableType) -> Grown {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    std::fs::create_dir_all(&base).unwrap();
    let local: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let counter = Arc::new(FaultInjectingStorage::new(local));
    let storage: Arc<dyn Storage> = counter.clone();
    let options = CreateOptions {
        name: "t".into(),
        table_type,
        record_key_fields: vec!["id".into()],
        partition_fields: vec!["region".into()],
        hive_style_partitioning: true,
        ordering_field: Some("ts".into()),
        merge_mode: Some(RecordMergeMode::EventTimeOrdering),
        schema: schema(),
        metadata_table: true,
        table_version: Default::default(),
        base_format: Default::default(),
    };
    let table = Table::create(storage.clone(), options).await.unwrap();
    table
        .write(WriteOperation::Insert, vec![batch(&rows(0..40, 0, "v"))])
        .await
        .unwrap();
    Grown {
        _tmp: tmp,
        counter,
        storage,
        table,
        commits: 0,
    }
}

impl Grown {
    /// Upserts of 4 rows until `commits` were made, the data timeline archived after every
    /// tenth.
    async fn grow_to(&mut self, commits: u32) {
        while self.commits < commits {
            let c = self.commits;
            let from = (c * 4) % 40;
            self.table
                .write(
                    WriteOperation::Upsert,
                    vec![batch(&rows(from..from + 4, i64::from(c) + 1, "u"))],
                )
                .await
                .unwrap();
            if c % 10 == 9 {
                // As Hudi's services would: compaction keeps merge-on-read slices short, then
                // archival.
                if table_type_is_mor(&self.table) {
                    self.table.compact().await.unwrap();
                }
                Archiver::new(
                    self.storage.clone(),
                    self.table.layout().clone(),
                    ArchivalPolicy::default(),
                )
                .unwrap()
                .run()
                .await
                .unwrap();
            }
            self.commits += 1;
        }
    }

    /// The storage calls of `n` consecutive 4-row upserts, each through a freshly opened
    /// handle, by category (summed).
    async fn upsert_calls(&mut self, n: u32) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for _ in 0..n {
            let table = Table::open(self.storage.clone()).await.unwrap();
            self.counter.reset();
            let ts = i64::from(self.commits) + 1;
            table
                .write(WriteOperation::Upsert, vec![batch(&rows(0..4, ts, "m"))])
                .await
                .unwrap();
            self.commits += 1;
            for op in self.counter.ops() {
                *out.entry(category(op.kind, &op.key)).or_default() += 1;
            }
        }
        out
    }

    async fn archived_instants(&self) -> usize {
        ArchivedTimeline::load(self.storage.as_ref(), self.table.layout())
            .await
            .unwrap()
            .len()
    }
}

fn table_type_is_mor(table: &Table) -> bool {
    table.config().table_type() == TableType::MergeOnRead
}

fn of(calls: &BTreeMap<String, usize>, category: &str) -> usize {
    calls.get(category).copied().unwrap_or(0)
}

/// Upserts measured at each size: one period of the MDT's compaction cadence (a FILES log
/// file per upsert, compacted every `DEFAULT_COMPACT_EVERY`), so both sums cover the same
/// phases of it.
const MEASURED: u32 = arbor_mdt::compaction::DEFAULT_COMPACT_EVERY as u32;

/// Grows a table to a short and a three times longer history (both past the MDT's own
/// archival onset, the second 90 commits later) and compares the storage calls of
/// [`MEASURED`] upserts at each.
async fn check_flat(table_type: TableType) {
    let mut g = create(table_type).await;
    g.grow_to(40).await;
    let short = g.upsert_calls(MEASURED).await;
    let archived_short = g.archived_instants().await;
    g.grow_to(130).await;
    let long = g.upsert_calls(MEASURED).await;
    let archived_long = g.archived_instants().await;
    let label = format!("{table_type:?}: short {short:#?}\nlong {long:#?}");
    assert!(
        archived_long >= archived_short + 80,
        "{label}\nthe longer history archived {archived_long} instants, the shorter {archived_short}"
    );
    // The data timeline's archive: never listed or read (at most one HEAD of `_version_` per
    // upsert, the same at both sizes).
    assert_eq!(of(&long, "data archive list"), 0, "{label}");
    assert!(
        of(&long, "data archive read") <= MEASURED as usize,
        "{label}"
    );
    for c in [
        "data archive read",
        "FILES list",
        "FILES read",
        "data meta list",
        "data meta read",
        "data files read",
    ] {
        assert_eq!(of(&short, c), of(&long, c), "{c}\n{label}");
    }
    // The MDT's own archival runs after each commit while its timeline is long (a table
    // service): each run reads the LSM manifest and only the archive files whose range holds
    // an active instant, so at most one file more per run at either size, never the grown
    // archive (a full read is one GET per archive file, in every run).
    assert!(
        of(&long, "mdt archive read") <= of(&short, "mdt archive read") + MEASURED as usize,
        "{label}"
    );
    assert!(
        of(&long, "mdt archive list") <= of(&short, "mdt archive list") + 1,
        "{label}"
    );
    let reader = arbor_table::read::TableReader::open(g.storage.clone())
        .await
        .unwrap();
    let rows: usize = reader
        .snapshot(None)
        .await
        .unwrap()
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(rows, 40, "{label}");
}

#[tokio::test]
async fn test_cow_upsert_calls_do_not_grow_with_archived_history() {
    check_flat(TableType::CopyOnWrite).await;
}

#[tokio::test]
async fn test_mor_upsert_calls_do_not_grow_with_archived_history() {
    check_flat(TableType::MergeOnRead).await;
}
