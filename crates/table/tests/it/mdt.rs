//! The metadata table (MDT) stays exactly in step with the data table: every commit records its
//! files in the FILES partition before it completes, a write whose MDT deltacommit completed
//! but whose data instant did not is invisible and rolled back with its MDT instant, an MDT
//! created for an existing table lists what directory listing finds, tables with MDT
//! partitions arbor does not maintain are refused, readers list through FILES without listing
//! data directories, and `validate_table` names exactly the files a planted discrepancy hides.
//!
//! The `assert_mdt_*` helpers and [`timeline_dir`] are also used by the crash sweeps.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use arbor_fsview::parse_data_file_name;
use arbor_mdt::compaction::DEFAULT_COMPACT_EVERY;
use arbor_mdt::validate::{validate_table, FilesDiscrepancy};
use arbor_mdt::{MdtWriter, MDT_BASE, MDT_META_DIR};
use arbor_storage::{FaultInjectingStorage, ObjectStoreStorage, OpKind, Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::write::files_delta;
use arbor_table::{CreateOptions, ListingSource, Table, TableError, WriteOperation, WriteOptions};
use arbor_timeline::config::{keys, RecordMergeMode, TableType};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{InstantTime, InstantTimeGenerator, State, TableConfig};

use super::write_support::{
    assert_peer_agrees, batch, create, rows, rows_of, schema, Layout, Model, Query, Row, TestTable,
};

// ---------------------------------------------------------------------------------------------
// Shared checks (also used by crash_sweep.rs)
// ---------------------------------------------------------------------------------------------

/// The data table's timeline directory.
pub const DATA_TIMELINE: &str = ".hoodie/timeline";

/// MDT instants written outside the data timeline (partition initialisation:
/// `00000000000000000` for FILES) start with 14 zeros, as hudi-rs and Java test.
pub fn is_mdt_init_instant(time: &str) -> bool {
    time.starts_with("00000000000000")
}

/// The MDT's timeline directory.
pub fn mdt_timeline() -> String {
    format!("{MDT_META_DIR}/timeline")
}

/// `validate_table` finds no discrepancy between the FILES partition and storage.
pub async fn assert_mdt_valid(storage: &Arc<dyn Storage>, label: &str) {
    let report = validate_table(storage.clone())
        .await
        .unwrap_or_else(|e| panic!("{label}: validate failed: {e}"));
    assert!(report.has_metadata_table, "{label}: no metadata table");
    assert!(
        report.discrepancies.is_empty(),
        "{label}: the metadata table disagrees with storage: {:?}",
        report.discrepancies
    );
    assert_eq!(
        report.mdt_files, report.storage_files,
        "{label}: {report:?}"
    );
}

/// The instants of one timeline directory, from its listing (not through `ActiveTimeline`):
/// `completed` holds `(time, completion time, action)` of `<t>_<completion>.<action>` files,
/// `pending` the `(time, action)` of `<t>.<action>.requested|inflight` files without a
/// completed file (the version-8 layout keeps requested and inflight files after completion).
#[derive(Debug, Default)]
pub struct TimelineDir {
    pub completed: BTreeSet<(String, String, String)>,
    pub pending: BTreeSet<(String, String)>,
}

impl TimelineDir {
    /// Times of completed instants.
    pub fn completed_times(&self) -> BTreeSet<&str> {
        self.completed.iter().map(|(t, _, _)| t.as_str()).collect()
    }

    /// Times of completed and pending instants.
    pub fn times(&self) -> BTreeSet<&str> {
        self.completed_times()
            .into_iter()
            .chain(self.pending.iter().map(|(t, _)| t.as_str()))
            .collect()
    }

    /// Times of completed instants of `action`.
    pub fn completed_of(&self, action: &str) -> BTreeSet<&str> {
        self.completed
            .iter()
            .filter(|(_, _, a)| a == action)
            .map(|(t, _, _)| t.as_str())
            .collect()
    }
}

/// Lists the timeline directory `dir` (`.hoodie/timeline`, `.hoodie/metadata/.hoodie/timeline`).
pub async fn timeline_dir(storage: &Arc<dyn Storage>, dir: &str) -> TimelineDir {
    let (objects, _) = storage.list_dir(dir).await.unwrap();
    let mut completed = BTreeSet::new();
    let mut started = BTreeSet::new();
    for o in objects {
        let name = o.key.rsplit('/').next().unwrap().to_string();
        let Some((head, rest)) = name.split_once('.') else {
            continue;
        };
        let (time, completion) = head.split_once('_').unwrap_or((head, ""));
        if time.is_empty() || !time.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        match rest
            .strip_suffix(".requested")
            .or_else(|| rest.strip_suffix(".inflight"))
        {
            Some(action) => {
                started.insert((time.to_string(), action.to_string()));
            }
            None => {
                completed.insert((time.to_string(), completion.to_string(), rest.to_string()));
            }
        }
    }
    let completed_times: BTreeSet<String> = completed.iter().map(|(t, _, _)| t.clone()).collect();
    let pending = started
        .into_iter()
        .filter(|(t, _)| !completed_times.contains(t))
        .collect();
    TimelineDir { completed, pending }
}

/// At any time, also right after a crash: every completed MDT instant is a deltacommit or an
/// MDT compaction (`commit`), and each deltacommit but the initialisation ones has a data
/// instant, in any state, of the same time. The MDT deltacommit completes before its data
/// instant and is removed before the data rollback completes, so it never outlives it.
pub async fn assert_mdt_instants_have_data_instants(storage: &Arc<dyn Storage>, label: &str) {
    let data = timeline_dir(storage, DATA_TIMELINE).await;
    let mdt = timeline_dir(storage, &mdt_timeline()).await;
    let data_times = data.times();
    for (time, _, action) in &mdt.completed {
        assert!(
            action == "deltacommit" || action == "commit" || action == "clean",
            "{label}: MDT instant {time}.{action}"
        );
        assert!(
            action != "deltacommit"
                || is_mdt_init_instant(time)
                || data_times.contains(time.as_str()),
            "{label}: completed MDT deltacommit {time} has no data instant: {data:?}"
        );
    }
}

/// After a successful write (nothing pending on the data timeline): the MDT has no pending
/// instant, each completed MDT deltacommit but the initialisation ones has a completed data
/// instant of the same time, and each data write (commit, deltacommit, replacecommit)
/// completed after the MDT was initialised has a completed MDT deltacommit.
pub async fn assert_mdt_timeline_in_step(storage: &Arc<dyn Storage>, label: &str) {
    let data = timeline_dir(storage, DATA_TIMELINE).await;
    let mdt = timeline_dir(storage, &mdt_timeline()).await;
    assert!(
        mdt.pending.is_empty(),
        "{label}: pending MDT instants after a successful write: {:?}",
        mdt.pending
    );
    let data_completed = data.completed_times();
    let mdt_deltacommits = mdt.completed_of("deltacommit");
    for time in &mdt_deltacommits {
        assert!(
            is_mdt_init_instant(time) || data_completed.contains(time),
            "{label}: completed MDT deltacommit {time} has no completed data instant: {data:?}"
        );
    }
    // Data writes completed before the MDT's initialisation are in its base file. (With the
    // initialisation archived, every data instant still active is newer than it.)
    let initialised = mdt
        .completed
        .iter()
        .filter(|(t, _, _)| is_mdt_init_instant(t))
        .map(|(_, c, _)| c.as_str())
        .min()
        .unwrap_or("");
    for (time, completion, action) in &data.completed {
        if ["commit", "deltacommit", "replacecommit"].contains(&action.as_str())
            && completion.as_str() > initialised
        {
            assert!(
                mdt_deltacommits.contains(time.as_str()),
                "{label}: data {action} {time} completed after the MDT was initialised has no \
                 completed MDT deltacommit: {mdt:?}"
            );
        }
    }
}

/// The data rows (sorted) a reader listing from `source` returns.
pub async fn rows_from(storage: &Arc<dyn Storage>, source: ListingSource) -> Vec<Row> {
    let reader = TableReader::open_with(storage.clone(), source)
        .await
        .unwrap_or_else(|e| panic!("opening a reader listing from {source:?}: {e}"));
    rows_of(&reader.snapshot(None).await.unwrap())
}

/// Readers listing through storage, through the MDT and by default read the model's rows.
async fn assert_sources_read(storage: &Arc<dyn Storage>, model: &Model, label: &str) {
    for source in [
        ListingSource::Storage,
        ListingSource::MetadataTable,
        ListingSource::Auto,
    ] {
        assert_eq!(
            rows_from(storage, source).await,
            model.sorted(),
            "{label}: rows listed from {source:?}"
        );
    }
}

/// Every check of an in-step MDT after a successful write.
async fn assert_in_step(t: &TestTable, model: &Model, label: &str) {
    assert_mdt_valid(&t.storage, label).await;
    assert_mdt_timeline_in_step(&t.storage, label).await;
    assert_sources_read(&t.storage, model, label).await;
}

// ---------------------------------------------------------------------------------------------
// Local helpers
// ---------------------------------------------------------------------------------------------

/// Like [`create`], without a metadata table.
async fn create_without_mdt(table_type: TableType, layout: Layout) -> TestTable {
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
        metadata_table: false,
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

/// Committed and uncommitted data files under the table (not `.hoodie`), as
/// `(partition, file name, instant time)`.
async fn data_files(storage: &Arc<dyn Storage>) -> Vec<(String, String, InstantTime)> {
    let mut out = Vec::new();
    for o in storage.list_all("").await.unwrap() {
        if o.key.starts_with(".hoodie/") {
            continue;
        }
        let (partition, name) = o.key.rsplit_once('/').unwrap_or(("", o.key.as_str()));
        if let Ok(Some(d)) = parse_data_file_name(name, o.size) {
            out.push((
                partition.to_string(),
                name.to_string(),
                d.instant_time().clone(),
            ));
        }
    }
    out.sort();
    out
}

/// Keys of the MDT's FILES log files written for instant `time`.
async fn mdt_log_files_of(storage: &Arc<dyn Storage>, time: &InstantTime) -> Vec<String> {
    let needle = format!("_{time}.log.");
    storage
        .list_all(&format!("{MDT_BASE}/files"))
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .filter(|k| k.rsplit('/').next().unwrap().contains(&needle))
        .collect()
}

/// Keys of the MDT timeline files of instant `time`.
async fn mdt_timeline_files_of(storage: &Arc<dyn Storage>, time: &InstantTime) -> Vec<String> {
    let (objects, _) = storage.list_dir(&mdt_timeline()).await.unwrap();
    objects
        .into_iter()
        .map(|o| o.key)
        .filter(|k| k.rsplit('/').next().unwrap().starts_with(time.as_str()))
        .collect()
}

/// A handle over the same table that rolls back every pending write at once.
fn impatient(t: &TestTable) -> Table {
    t.table.clone().with_write_options(WriteOptions {
        heartbeat_timeout: Duration::ZERO,
        ..WriteOptions::default()
    })
}

fn unsupported_reason(e: TableError) -> String {
    match e {
        TableError::Unsupported { reason } => reason,
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

/// Keys of new rows in a third region (`ap`).
fn ap_rows(ids: std::ops::Range<u32>, ts: i64, tag: &str) -> Vec<Row> {
    ids.map(|i| {
        (
            format!("k{i:04}"),
            "ap".to_string(),
            ts,
            format!("{tag}{i}"),
        )
    })
    .collect()
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// A write whose MDT deltacommit completed but whose data instant never did (the process died
/// between the two) is invisible to readers of either listing source and to hudi-rs, and the
/// next write rolls it back together with its MDT deltacommit and FILES log file.
#[tokio::test]
async fn test_commit_files_mdt_completed_data_pending_is_invisible_and_next_write_rolls_back() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let label = format!("{table_type:?}");
        let t = create(table_type, Layout::Hive).await;
        let mut model = Model::default();
        for (op, r) in [
            (WriteOperation::Insert, rows(0..16, 1, "a")),
            (WriteOperation::Upsert, rows(0..4, 2, "b")),
        ] {
            t.write(op, &r).await;
            model.upsert(&r);
        }
        let mut input = rows(2..8, 5, "u");
        input.extend(ap_rows(200..202, 5, "n"));
        let p = t
            .table
            .prepare(WriteOperation::Upsert, vec![batch(&input)])
            .await
            .unwrap();
        let time = p.instant().clone();
        // What `Table::commit` records in the MDT before completing the data instant.
        let delta = files_delta(p.metadata(), &BTreeSet::new());
        assert!(!delta.is_empty(), "{label}: the write wrote files");
        let mdt = MdtWriter::open(t.storage.clone()).await.unwrap().unwrap();
        mdt.commit_files(&time, &delta, &InstantTimeGenerator::new())
            .await
            .unwrap();
        assert_eq!(
            mdt.instant_state(&time).await.unwrap(),
            Some(State::Completed),
            "{label}"
        );
        assert_eq!(
            mdt_log_files_of(&t.storage, &time).await.len(),
            1,
            "{label}"
        );
        assert!(
            t.timeline()
                .await
                .pending()
                .iter()
                .any(|i| i.requested_time == time),
            "{label}: the data instant stays pending"
        );
        let written: Vec<_> = data_files(&t.storage)
            .await
            .into_iter()
            .filter(|(_, _, i)| i == &time)
            .collect();
        assert!(!written.is_empty(), "{label}");

        // Invisible: rows as before through every listing source, no file slice of `time`.
        let step = format!("{label}: MDT completed, data pending");
        assert_sources_read(&t.storage, &model, &step).await;
        for source in [ListingSource::Storage, ListingSource::MetadataTable] {
            let reader = TableReader::open_with(t.storage.clone(), source)
                .await
                .unwrap();
            for s in reader.view().latest_file_slices(None, None).await.unwrap() {
                let mut times: Vec<&InstantTime> =
                    s.log_files.iter().map(|l| &l.delta_commit_time).collect();
                times.extend(s.base_file.as_ref().map(|b| &b.instant_time));
                assert!(
                    !times.contains(&&time),
                    "{step}: {source:?} lists a slice with files of {time}: {s:?}"
                );
            }
        }
        assert_mdt_valid(&t.storage, &step).await;
        assert_mdt_instants_have_data_instants(&t.storage, &step).await;
        assert_peer_agrees(&t, &[Query::Snapshot], &step).await;

        // The writer is gone (its heartbeat stops); the next write rolls it back.
        drop(p);
        let next_rows = rows(10..12, 50, "z");
        impatient(&t)
            .write(WriteOperation::Upsert, vec![batch(&next_rows)])
            .await
            .unwrap();
        model.upsert(&next_rows);
        let step = format!("{label}: after the next write");
        assert_eq!(mdt.instant_state(&time).await.unwrap(), None, "{step}");
        assert_eq!(
            mdt_timeline_files_of(&t.storage, &time).await,
            Vec::<String>::new(),
            "{step}: MDT timeline files of the rolled-back instant"
        );
        assert_eq!(
            mdt_log_files_of(&t.storage, &time).await,
            Vec::<String>::new(),
            "{step}: FILES log file of the rolled-back instant"
        );
        let left: Vec<_> = data_files(&t.storage)
            .await
            .into_iter()
            .filter(|(_, _, i)| i == &time)
            .collect();
        assert!(left.is_empty(), "{step}: data files left: {left:?}");
        assert!(t.timeline().await.pending().is_empty(), "{step}");
        assert_in_step(&t, &model, &step).await;
        assert_peer_agrees(&t, &[Query::Snapshot], &step).await;
    }
}

/// `Table::init_metadata_table` on a table written without an MDT (COW commits and a
/// delete_partition; MOR deltacommits, a compaction and a delete_partition): FILES lists
/// exactly the committed files, readers of both sources and hudi-rs read the same rows, later
/// writes (through a handle opened before the init) keep it in step, and a second init is
/// refused.
#[tokio::test]
async fn test_init_metadata_table_after_cow_and_mor_writes_lists_committed_files_and_stays_in_step()
{
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let label = format!("{table_type:?}");
        let t = create_without_mdt(table_type, Layout::Hive).await;
        assert!(t.table.config().metadata_partitions().is_empty());
        assert!(!t
            .storage
            .exists(&format!("{MDT_META_DIR}/hoodie.properties"))
            .await
            .unwrap());
        let mut model = Model::default();
        let mut first = rows(0..16, 1, "a");
        first.extend(ap_rows(100..104, 1, "p"));
        t.write(WriteOperation::Insert, &first).await;
        model.upsert(&first);
        t.write(WriteOperation::Upsert, &rows(0..4, 2, "b")).await;
        model.upsert(&rows(0..4, 2, "b"));
        if table_type == TableType::MergeOnRead {
            let done = t.table.compact().await.unwrap();
            assert_eq!(done.len(), 1, "{label}: one compaction");
        }
        t.table
            .delete_partitions(&[t.partition("ap")])
            .await
            .unwrap();
        model.drop_region("ap");
        t.write(WriteOperation::Upsert, &rows(4..6, 3, "c")).await;
        model.upsert(&rows(4..6, 3, "c"));
        let before_init = t.completed().await.len();

        let count = Table::open(t.storage.clone())
            .await
            .unwrap()
            .init_metadata_table()
            .await
            .unwrap();
        let step = format!("{label}: after init");
        let report = validate_table(t.storage.clone()).await.unwrap();
        assert!(report.has_metadata_table, "{step}");
        assert!(report.discrepancies.is_empty(), "{step}: {report:?}");
        assert_eq!(report.storage_files, count, "{step}: {report:?}");
        assert!(count > 0, "{step}");
        assert_eq!(
            TableConfig::load(t.storage.as_ref(), DEFAULT_META_DIR)
                .await
                .unwrap()
                .metadata_partitions(),
            vec!["files".to_string()],
            "{step}"
        );
        // The init adds no data instant.
        assert_eq!(t.completed().await.len(), before_init, "{step}");
        assert_mdt_timeline_in_step(&t.storage, &step).await;
        assert_sources_read(&t.storage, &model, &step).await;
        assert_peer_agrees(&t, &[Query::Snapshot], &step).await;

        // Later writes, through the handle opened before the init, keep it in step.
        t.write(WriteOperation::Upsert, &rows(6..9, 4, "d")).await;
        model.upsert(&rows(6..9, 4, "d"));
        assert_in_step(&t, &model, &format!("{label}: upsert after init")).await;
        let mut more = rows(20..22, 5, "e");
        more.extend(ap_rows(300..302, 5, "q"));
        t.write(WriteOperation::Upsert, &more).await;
        model.upsert(&more);
        if table_type == TableType::MergeOnRead {
            assert_eq!(t.table.compact().await.unwrap().len(), 1, "{label}");
        }
        assert_in_step(&t, &model, &format!("{label}: second write after init")).await;
        t.table
            .delete_partitions(&[t.partition("ap")])
            .await
            .unwrap();
        model.drop_region("ap");
        let step = format!("{label}: delete_partition after init");
        assert_in_step(&t, &model, &step).await;
        assert_peer_agrees(&t, &[Query::Snapshot], &step).await;

        // A second init is refused and changes nothing.
        let listing = t.listing().await;
        let err = t.table.init_metadata_table().await.unwrap_err();
        let reason = unsupported_reason(err);
        assert!(reason.contains("already"), "{label}: {reason}");
        assert_eq!(t.listing().await, listing, "{label}: second init");
    }
}

/// `Table::init_metadata_table` while a live writer's write is prepared but not committed:
/// refused (`Unsupported`, naming the pending instant), nothing is written.
#[tokio::test]
async fn test_init_metadata_table_with_live_pending_write_is_unsupported_and_changes_nothing() {
    let t = create_without_mdt(TableType::MergeOnRead, Layout::Hive).await;
    t.write(WriteOperation::Insert, &rows(0..8, 1, "a")).await;
    let p = t
        .table
        .prepare(WriteOperation::Upsert, vec![batch(&rows(0..2, 2, "b"))])
        .await
        .unwrap();
    let before = t.listing().await;
    let err = Table::open(t.storage.clone())
        .await
        .unwrap()
        .init_metadata_table()
        .await
        .unwrap_err();
    let reason = unsupported_reason(err);
    assert!(
        reason.contains(p.instant().as_str()),
        "the error names the pending instant {}: {reason}",
        p.instant()
    );
    assert_eq!(
        t.listing().await,
        before,
        "the refused init changed storage"
    );
    assert!(before.iter().all(|k| !k.starts_with(MDT_BASE)));
    // The pending write is intact: it commits, and then an init succeeds.
    t.table.commit(p).await.unwrap();
    let mut model = Model::default();
    model.upsert(&rows(0..8, 1, "a"));
    model.upsert(&rows(0..2, 2, "b"));
    t.table.init_metadata_table().await.unwrap();
    assert_in_step(&t, &model, "init after the commit").await;
}

/// A table whose config lists an MDT partition arbor does not maintain (`bloom_filters`,
/// completed or being built) is refused for writing: `Table::open` fails with `Unsupported`
/// naming it, and a handle opened before the change cannot commit.
#[tokio::test]
async fn test_open_with_bloom_filters_partition_is_unsupported_naming_it() {
    for key in [
        keys::METADATA_PARTITIONS,
        keys::METADATA_PARTITIONS_INFLIGHT,
    ] {
        let t = create(TableType::CopyOnWrite, Layout::Hive).await;
        t.write(WriteOperation::Insert, &rows(0..8, 1, "a")).await;
        let value = if key == keys::METADATA_PARTITIONS {
            "files,bloom_filters"
        } else {
            "bloom_filters"
        };
        TableConfig::update(t.storage.as_ref(), DEFAULT_META_DIR, |c| c.set(key, value))
            .await
            .unwrap();
        let err = Table::open(t.storage.clone()).await.unwrap_err();
        let reason = unsupported_reason(err);
        assert!(reason.contains("bloom_filters"), "{key}: {reason}");
        // The handle opened earlier re-reads the config at commit time.
        let completed = t.completed().await.len();
        let err = t
            .table
            .write(WriteOperation::Upsert, vec![batch(&rows(0..2, 2, "b"))])
            .await
            .unwrap_err();
        let reason = unsupported_reason(err);
        assert!(reason.contains("bloom_filters"), "{key}: {reason}");
        assert_eq!(t.completed().await.len(), completed, "{key}");
        let mut model = Model::default();
        model.upsert(&rows(0..8, 1, "a"));
        assert_eq!(
            rows_from(&t.storage, ListingSource::Storage).await,
            model.sorted(),
            "{key}"
        );
    }
}

/// MOR with inline compaction every second deltacommit: the MDT is in step after every write
/// and compaction (also across the MDT's own compaction of FILES), and hudi-rs reads what
/// arbor reads.
#[tokio::test]
async fn test_write_mor_inline_compaction_keeps_mdt_in_step_and_peer_agrees() {
    let t = create(TableType::MergeOnRead, Layout::Hive).await;
    let table = t.table.clone().with_write_options(WriteOptions {
        inline_compact_every: Some(2),
        ..WriteOptions::default()
    });
    let mut model = Model::default();
    let mut steps: Vec<(WriteOperation, Vec<Row>)> = vec![
        (WriteOperation::Insert, rows(0..16, 1, "a")),
        (WriteOperation::Upsert, rows(0..4, 2, "b")),
        (WriteOperation::Upsert, rows(4..10, 3, "c")),
        (WriteOperation::Delete, rows(1..3, 4, "x")),
        (WriteOperation::Upsert, rows(12..20, 5, "d")),
        (WriteOperation::Upsert, rows(0..2, 6, "e")),
        (WriteOperation::Upsert, ap_rows(400..403, 7, "f")),
        (WriteOperation::Delete, ap_rows(400..401, 8, "x")),
    ];
    steps.push((WriteOperation::Upsert, rows(8..14, 9, "g")));
    for (i, (op, r)) in steps.iter().enumerate() {
        table.write(*op, vec![batch(r)]).await.unwrap();
        match op {
            WriteOperation::Delete => model.delete(r),
            _ => model.upsert(r),
        }
        assert_in_step(&t, &model, &format!("write {i} ({op:?})")).await;
    }
    let completed = t.completed().await;
    let compactions = completed
        .iter()
        .filter(|i| i.action == arbor_timeline::Action::Commit)
        .count();
    assert!(compactions >= 3, "inline compactions ran: {compactions}");
    // Every data instant wrote one FILES log file: FILES itself was compacted on the way.
    assert!(completed.len() >= DEFAULT_COMPACT_EVERY, "{completed:?}");
    let mdt = timeline_dir(&t.storage, &mdt_timeline()).await;
    assert!(
        !mdt.completed_of("commit").is_empty(),
        "the MDT compacted FILES: {mdt:?}"
    );
    assert_peer_agrees(&t, &[Query::Snapshot], "inline compactions").await;
}

/// Planted discrepancies are reported exactly: a committed data file deleted from storage is
/// `MissingFromStorage`; a data instant whose completed MDT deltacommit file is removed has
/// each of its files `MissingFromMdt`.
#[tokio::test]
async fn test_validate_table_planted_discrepancies_reports_exactly_those_files() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let build = || async {
            let t = create(table_type, Layout::Hive).await;
            let mut times = Vec::new();
            let mut second = rows(0..6, 2, "b");
            second.extend(ap_rows(500..502, 2, "n"));
            for (op, r) in [
                (WriteOperation::Insert, rows(0..16, 1, "a")),
                (WriteOperation::Upsert, second),
                (WriteOperation::Upsert, rows(6..9, 3, "c")),
            ] {
                times.push(t.write(op, &r).await.instant);
            }
            assert_mdt_valid(&t.storage, "before planting").await;
            (t, times)
        };

        // A committed file deleted from storage.
        let (t, times) = build().await;
        let (partition, file, _) = data_files(&t.storage)
            .await
            .into_iter()
            .find(|(p, _, i)| i == &times[1] && p == "region=us")
            .unwrap();
        t.storage
            .delete(&format!("{partition}/{file}"))
            .await
            .unwrap();
        let report = validate_table(t.storage.clone()).await.unwrap();
        assert_eq!(
            report.discrepancies,
            vec![FilesDiscrepancy::MissingFromStorage { partition, file }],
            "{table_type:?}"
        );

        // The completed MDT deltacommit of the middle instant removed.
        let (t, times) = build().await;
        let target = &times[1];
        let completed: Vec<String> = mdt_timeline_files_of(&t.storage, target)
            .await
            .into_iter()
            .filter(|k| k.ends_with(".deltacommit"))
            .collect();
        assert_eq!(completed.len(), 1, "{completed:?}");
        t.storage.delete(&completed[0]).await.unwrap();
        let mut expected: Vec<FilesDiscrepancy> = data_files(&t.storage)
            .await
            .into_iter()
            .filter(|(_, _, i)| i == target)
            .map(|(partition, file, _)| FilesDiscrepancy::MissingFromMdt { partition, file })
            .collect();
        expected.sort();
        let partitions: BTreeMap<&str, usize> =
            expected.iter().fold(BTreeMap::new(), |mut m, d| {
                if let FilesDiscrepancy::MissingFromMdt { partition, .. } = d {
                    *m.entry(partition.as_str()).or_default() += 1;
                }
                m
            });
        assert!(
            partitions.len() == 3,
            "{table_type:?}: the instant wrote files in three partitions: {expected:?}"
        );
        let report = validate_table(t.storage.clone()).await.unwrap();
        assert_eq!(report.discrepancies, expected, "{table_type:?}");
    }
}

/// With the MDT on, opening a reader and reading a snapshot lists no data directory: every
/// listing is under `.hoodie` (FILES answers). Directory listing (the control) does list them.
#[tokio::test]
async fn test_table_reader_open_with_mdt_lists_no_data_directory() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        for layout in [Layout::Hive, Layout::Plain, Layout::None] {
            let label = format!("{table_type:?} {layout:?}");
            let t = create(table_type, layout).await;
            let mut model = Model::default();
            for (op, r) in [
                (WriteOperation::Insert, rows(0..12, 1, "a")),
                (WriteOperation::Upsert, rows(0..4, 2, "b")),
            ] {
                t.write(op, &r).await;
                model.upsert(&r);
            }
            let listings = |source: ListingSource| {
                let storage = t.storage.clone();
                async move {
                    let faulty = Arc::new(FaultInjectingStorage::new(storage));
                    faulty.reset();
                    let reader = TableReader::open_with(faulty.clone(), source)
                        .await
                        .unwrap();
                    let got = rows_of(&reader.snapshot(None).await.unwrap());
                    let data_listings: Vec<String> = faulty
                        .ops()
                        .into_iter()
                        .filter(|o| matches!(o.kind, OpKind::List | OpKind::ListDir))
                        .map(|o| o.key)
                        .filter(|k| !k.starts_with(".hoodie"))
                        .collect();
                    (got, data_listings)
                }
            };
            let (got, data_listings) = listings(ListingSource::Auto).await;
            assert_eq!(got, model.sorted(), "{label}");
            assert!(
                data_listings.is_empty(),
                "{label}: the MDT reader listed data directories: {data_listings:?}"
            );
            let (got, data_listings) = listings(ListingSource::Storage).await;
            assert_eq!(got, model.sorted(), "{label}");
            assert!(
                !data_listings.is_empty(),
                "{label}: directory listing must show up in the op log"
            );
        }
    }
}
