//! Reclaiming deleted partitions: after `delete_partitions` (what a TTL run writes), a clean
//! removes a partition's files, its `.hoodie_partition_metadata` and directory, and its entry
//! in the metadata table's partition list, recording it in `partitionsToBeDeleted` and
//! `isPartitionDeleted`, only once no savepoint, tag, branch or retention keeps a file of it;
//! `holders_of_partitions` names who keeps it. COW and MOR, hive-style and plain, one- and
//! two-level partitions, with and without a metadata table; a write after the removal brings
//! the partition back.

use std::path::Path;
use std::sync::Arc;

use arbor_branching::{create_branch, create_tag, drop_branch, drop_tag, BranchSource};
use arbor_cleaner::{
    clean, create_savepoint, delete_savepoint, holders_of_partitions, CleanOptions, CleanOutcome,
    CleanPolicy,
};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_timeline::avro::{decode, HoodieCleanMetadata, HoodieCleanerPlan};
use arbor_timeline::config::{RecordMergeMode, TableType, TableVersion};
use arbor_timeline::{Action, ActiveTimeline, InstantTime, State};

use arbor_testkit_tables::{schema, Model, Row, TestTable};

/// How a scenario's table is partitioned.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    pub table_type: TableType,
    pub hive: bool,
    pub two_level: bool,
    pub metadata_table: bool,
}

impl Layout {
    /// The partition path of rows of `region` (every row has `ts` 0).
    pub fn partition(&self, region: &str) -> String {
        match (self.hive, self.two_level) {
            (true, false) => format!("region={region}"),
            (false, false) => region.to_string(),
            (true, true) => format!("region={region}/ts=0"),
            (false, true) => format!("{region}/0"),
        }
    }
}

/// Creates a table of `layout` (`id` key, partitioned by `region`, and `ts` for two levels).
pub async fn create_table(layout: Layout) -> TestTable {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    std::fs::create_dir_all(&base).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let mut partition_fields = vec!["region".to_string()];
    if layout.two_level {
        partition_fields.push("ts".to_string());
    }
    let table = Table::create(
        storage.clone(),
        CreateOptions {
            name: "t".into(),
            table_type: layout.table_type,
            record_key_fields: vec!["id".into()],
            partition_fields,
            hive_style_partitioning: layout.hive,
            ordering_field: Some("ts".into()),
            merge_mode: Some(RecordMergeMode::EventTimeOrdering),
            schema: schema(),
            metadata_table: layout.metadata_table,
            table_version: TableVersion::default(),
            base_format: Default::default(),
        },
    )
    .await
    .unwrap();
    TestTable {
        _tmp: tmp,
        base,
        storage,
        table,
    }
}

/// Rows `k<i>` for `ids` in regions `us`, `eu`, `ap` (by `i % 3`), `ts` 0, name `<tag><i>`.
pub fn rows3(ids: std::ops::Range<u32>, tag: &str) -> Vec<Row> {
    ids.map(|i| {
        let region = ["us", "eu", "ap"][(i % 3) as usize];
        (
            format!("k{i:04}"),
            region.to_string(),
            0,
            format!("{tag}{i}"),
        )
    })
    .collect()
}

pub fn keep(n: usize) -> CleanOptions {
    CleanOptions {
        policy: CleanPolicy::KeepLatestCommits(n),
        ..CleanOptions::default()
    }
}

/// Two writes (an insert, then updates and more keys) into `us`, `eu`, `ap`. Returns the model.
pub async fn fill(t: &TestTable) -> Model {
    let mut model = Model::default();
    for batch in [rows3(0..12, "a"), rows3(6..18, "b")] {
        t.write(WriteOperation::Upsert, &batch).await;
        model.upsert(&batch);
    }
    model
}

/// The model without `region`'s rows.
pub fn without(model: &Model, region: &str) -> Model {
    let mut m = model.clone();
    m.rows.retain(|_, r| r.1 != region);
    m
}

/// The files (names) stored in directory `partition` of the table (empty when it is gone).
pub fn dir_files(base: &Path, partition: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(base.join(partition)) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// The files (names) of the latest slices of `partition` in main's latest snapshot, sorted.
pub async fn latest_files(storage: &Arc<dyn Storage>, partition: &str) -> Vec<String> {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    let mut out: Vec<String> = reader
        .view()
        .latest_file_slices(Some(partition), None)
        .await
        .unwrap()
        .iter()
        .flat_map(|s| {
            s.base_file_path()
                .into_iter()
                .chain(s.log_file_paths())
                .collect::<Vec<_>>()
        })
        .map(|k| k.rsplit('/').next().unwrap().to_string())
        .collect();
    out.sort();
    out
}

/// Asserts every file of `files` is in directory `partition`, beside its marker.
pub fn assert_files_stay(base: &Path, partition: &str, files: &[String], step: &str) {
    let have = dir_files(base, partition);
    assert!(
        have.iter().any(|f| f == ".hoodie_partition_metadata"),
        "{step}: marker gone: {have:?}"
    );
    for f in files {
        assert!(have.contains(f), "{step}: {f} deleted: {have:?}");
    }
}

/// True when `holders` names only `expected` and, at most, the root's own retention (which
/// keeps older snapshots while the root has no clean that recorded a shorter policy).
pub fn only_and_retention(holders: &[String], expected: &str) -> bool {
    holders.iter().any(|h| h == expected)
        && holders
            .iter()
            .all(|h| h == expected || h.starts_with("retention ("))
}

/// The partitions main's view lists.
pub async fn listed_partitions(storage: &Arc<dyn Storage>) -> Vec<String> {
    let reader = TableReader::open(storage.clone()).await.unwrap();
    reader.view().partitions().await.unwrap().to_vec()
}

/// The plan and metadata of the clean `instant` of main.
pub async fn clean_records(
    t: &TestTable,
    instant: &InstantTime,
) -> (HoodieCleanerPlan, HoodieCleanMetadata) {
    let tl = ActiveTimeline::load(t.storage.clone(), t.table.layout().clone())
        .await
        .unwrap();
    let files = tl.get(instant, Action::Clean).unwrap().clone();
    let done = files.completed.clone().expect("clean completed");
    let requested = done.with_state(State::Requested);
    let plan: HoodieCleanerPlan = decode(
        &tl.read(&requested).await.unwrap(),
        &tl.key_of(&requested).unwrap(),
    )
    .unwrap();
    let meta: HoodieCleanMetadata =
        decode(&tl.read(&done).await.unwrap(), &tl.key_of(&done).unwrap()).unwrap();
    (plan, meta)
}

/// Asserts the clean `out` removed exactly `partitions` and recorded them as Java does.
pub async fn assert_removed(t: &TestTable, out: &CleanOutcome, partitions: &[String], step: &str) {
    let got: Vec<String> = out.partitions_deleted.iter().cloned().collect();
    assert_eq!(got, partitions, "{step}: partitions removed");
    let instant = out.instant.clone().expect("a clean instant");
    let (plan, meta) = clean_records(t, &instant).await;
    let mut planned = plan.partitions_to_be_deleted.clone().unwrap_or_default();
    planned.sort();
    assert_eq!(planned, partitions, "{step}: partitionsToBeDeleted");
    for (p, m) in &meta.partition_metadata {
        assert_eq!(
            m.is_partition_deleted,
            Some(partitions.contains(p)),
            "{step}: isPartitionDeleted of {p}"
        );
    }
    for p in partitions {
        assert!(
            meta.partition_metadata.contains_key(p),
            "{step}: clean metadata lacks {p}"
        );
        assert!(
            plan.file_paths_to_be_deleted_per_partition
                .as_ref()
                .is_some_and(|f| f.contains_key(p)),
            "{step}: the plan lists {p}"
        );
    }
}

/// Checks rows (arbor, hudi-rs), the metadata table and the listed partitions.
pub async fn assert_reads(t: &TestTable, model: &Model, step: &str) {
    assert_eq!(t.read(None).await, model.sorted(), "{step}: arbor rows");
    t.assert_valid(step).await;
    t.assert_peer_agrees("partition reclaim peer check", step)
        .await;
}

/// The whole life of a deleted partition, kept first by a savepoint (or a tag).
async fn savepoint_scenario(layout: Layout, tag: bool) {
    let step = |s: &str| format!("{layout:?} (tag: {tag}): {s}");
    let t = create_table(layout).await;
    let model = fill(&t).await;
    let eu = layout.partition("eu");
    let us = layout.partition("us");
    let eu_files = latest_files(&t.storage, &eu).await;
    assert!(!eu_files.is_empty(), "{}", step("setup"));
    let held_by = if tag {
        create_tag(&t.table, "before-ttl", None, None)
            .await
            .unwrap();
        "tag before-ttl".to_string()
    } else {
        let sp = create_savepoint(&t.table, None, "before delete")
            .await
            .unwrap();
        format!("savepoint {}", sp.instant)
    };
    let kept_at = t.read(None).await;
    assert_eq!(kept_at, model.sorted());
    let sp_instant = arbor_cleaner::list_savepoints(t.table.view_storage(), t.table.layout())
        .await
        .unwrap()[0]
        .instant
        .clone();

    t.table
        .delete_partitions(std::slice::from_ref(&eu))
        .await
        .unwrap();
    let after = without(&model, "eu");
    assert_reads(&t, &after, &step("after delete")).await;

    // Kept by the savepoint: the clean deletes nothing of `eu`.
    let out = clean(&t.table, &keep(1)).await.unwrap();
    assert!(out.partitions_deleted.is_empty(), "{}", step("kept"));
    assert_files_stay(&t.base, &eu, &eu_files, &step("kept files"));
    assert_eq!(
        t.read(Some(&sp_instant)).await,
        model.sorted(),
        "{}",
        step("the savepoint reads every deleted partition")
    );
    assert_reads(&t, &after, &step("after kept clean")).await;
    let holders = holders_of_partitions(&t.table, &[eu.clone(), layout.partition("ap")])
        .await
        .unwrap();
    // With a clean recorded (its policy keeps one commit), the savepoint alone keeps `eu`.
    if out.instant.is_some() {
        assert_eq!(holders[&eu], vec![held_by.clone()], "{}", step("holders"));
    }
    assert!(
        only_and_retention(&holders[&eu], &held_by),
        "{}: {holders:?}",
        step("holders")
    );
    assert!(
        holders[&layout.partition("ap")].contains(&held_by)
            && holders[&layout.partition("ap")]
                .iter()
                .any(|h| h.starts_with("retention")),
        "{}: {holders:?}",
        step("a live partition")
    );

    // Dropped: the next clean removes the files, the marker and the directory.
    if tag {
        assert!(drop_tag(&t.table, "before-ttl", false, false)
            .await
            .unwrap());
    } else {
        delete_savepoint(&t.table, &sp_instant).await.unwrap();
    }
    let holders = holders_of_partitions(&t.table, std::slice::from_ref(&eu))
        .await
        .unwrap();
    assert!(
        holders[&eu].iter().all(|h| h.starts_with("retention (")),
        "{}: {holders:?}",
        step("no ref holds it")
    );
    if out.instant.is_some() {
        assert!(
            holders[&eu].is_empty(),
            "{}: {holders:?}",
            step("no holder")
        );
    }
    let dry = clean(
        &t.table,
        &CleanOptions {
            dry_run: true,
            ..keep(1)
        },
    )
    .await
    .unwrap();
    assert_eq!(
        dry.partitions_deleted.iter().cloned().collect::<Vec<_>>(),
        vec![eu.clone()],
        "{}",
        step("dry run")
    );
    let out = clean(&t.table, &keep(1)).await.unwrap();
    assert_removed(&t, &out, std::slice::from_ref(&eu), &step("removed")).await;
    assert!(
        dir_files(&t.base, &eu).is_empty(),
        "{}: {:?}",
        step("files and marker gone"),
        dir_files(&t.base, &eu)
    );
    assert!(!t.base.join(&eu).exists(), "{}", step("directory gone"));
    assert!(!dir_files(&t.base, &us).is_empty(), "{}", step("us kept"));
    let holders = holders_of_partitions(&t.table, std::slice::from_ref(&eu))
        .await
        .unwrap();
    assert!(holders[&eu].is_empty(), "{}: {holders:?}", step("nobody"));
    let listed = listed_partitions(&t.storage).await;
    assert!(!listed.contains(&eu), "{}: {listed:?}", step("not listed"));
    assert!(listed.contains(&us), "{}: {listed:?}", step("us listed"));
    assert_reads(&t, &after, &step("after removal")).await;
    let again = clean(&t.table, &keep(1)).await.unwrap();
    assert!(
        again.instant.is_none() && again.partitions_deleted.is_empty(),
        "{}: {again:?}",
        step("a second clean finds nothing")
    );

    // A write after the removal brings the partition back.
    let back = rows3(30..36, "c");
    t.write(WriteOperation::Upsert, &back).await;
    let mut model = after;
    model.upsert(&back);
    assert!(
        dir_files(&t.base, &eu)
            .iter()
            .any(|f| f == ".hoodie_partition_metadata"),
        "{}",
        step("marker recreated")
    );
    assert!(listed_partitions(&t.storage).await.contains(&eu));
    assert_reads(&t, &model, &step("after a new write")).await;
}

#[tokio::test]
async fn test_reclaim_savepoint_keeps_deleted_partition_until_dropped_cow_hive_one_level() {
    savepoint_scenario(
        Layout {
            table_type: TableType::CopyOnWrite,
            hive: true,
            two_level: false,
            metadata_table: true,
        },
        false,
    )
    .await;
}

#[tokio::test]
async fn test_reclaim_tag_keeps_deleted_partition_until_dropped_mor_plain_two_level() {
    savepoint_scenario(
        Layout {
            table_type: TableType::MergeOnRead,
            hive: false,
            two_level: true,
            metadata_table: true,
        },
        true,
    )
    .await;
}

#[tokio::test]
async fn test_reclaim_savepoint_mor_hive_two_level() {
    savepoint_scenario(
        Layout {
            table_type: TableType::MergeOnRead,
            hive: true,
            two_level: true,
            metadata_table: true,
        },
        false,
    )
    .await;
}

#[tokio::test]
async fn test_reclaim_tag_cow_plain_one_level_without_metadata_table() {
    savepoint_scenario(
        Layout {
            table_type: TableType::CopyOnWrite,
            hive: false,
            two_level: false,
            metadata_table: false,
        },
        true,
    )
    .await;
}

/// A branch created before the delete keeps the partition's files (and its directory) until it
/// is dropped; it keeps reading the partition throughout.
#[tokio::test]
async fn test_reclaim_branch_keeps_deleted_partition_until_dropped() {
    for layout in [
        Layout {
            table_type: TableType::CopyOnWrite,
            hive: true,
            two_level: true,
            metadata_table: true,
        },
        Layout {
            table_type: TableType::MergeOnRead,
            hive: false,
            two_level: false,
            metadata_table: true,
        },
    ] {
        let step = |s: &str| format!("{layout:?}: {s}");
        let t = create_table(layout).await;
        let model = fill(&t).await;
        let eu = layout.partition("eu");
        create_branch(&t.table, "keep", BranchSource::MainHead)
            .await
            .unwrap();
        let eu_files = latest_files(&t.storage, &eu).await;
        t.table
            .delete_partitions(std::slice::from_ref(&eu))
            .await
            .unwrap();
        let after = without(&model, "eu");

        let out = clean(&t.table, &keep(1)).await.unwrap();
        assert!(out.partitions_deleted.is_empty(), "{}", step("kept"));
        assert_files_stay(&t.base, &eu, &eu_files, &step("kept files"));
        assert_eq!(
            t.read_branch(Some("keep"), None).await,
            model.sorted(),
            "{}",
            step("the branch reads the deleted partition")
        );
        let holders = holders_of_partitions(&t.table, std::slice::from_ref(&eu))
            .await
            .unwrap();
        assert!(
            only_and_retention(&holders[&eu], "branch keep"),
            "{}: {holders:?}",
            step("holders")
        );
        assert_reads(&t, &after, &step("after kept clean")).await;
        t.assert_branch_valid("keep", &step("branch")).await;

        drop_branch(&t.table, "keep").await.unwrap();
        let out = clean(&t.table, &keep(1)).await.unwrap();
        assert_removed(&t, &out, std::slice::from_ref(&eu), &step("removed")).await;
        assert!(!t.base.join(&eu).exists(), "{}", step("directory gone"));
        assert!(!listed_partitions(&t.storage).await.contains(&eu));
        assert_reads(&t, &after, &step("after removal")).await;
    }
}

/// An object the clean does not delete (here a stray file; a data file of another root or of a
/// pending write alike) keeps the directory and the marker: the files go, the partition stays
/// listed, empty. Once it is gone, the next clean removes the partition with no file left to
/// delete (as for a partition a clean emptied before this existed).
#[tokio::test]
async fn test_reclaim_keeps_directory_holding_a_foreign_object_then_removes_it() {
    let layout = Layout {
        table_type: TableType::CopyOnWrite,
        hive: true,
        two_level: false,
        metadata_table: true,
    };
    let t = create_table(layout).await;
    let model = fill(&t).await;
    let eu = layout.partition("eu");
    t.table
        .delete_partitions(std::slice::from_ref(&eu))
        .await
        .unwrap();
    let stray = t.base.join(&eu).join("notes.txt");
    std::fs::write(&stray, b"not hudi's").unwrap();
    let out = clean(&t.table, &keep(1)).await.unwrap();
    assert!(
        out.deleted > 0 && out.partitions_deleted.is_empty(),
        "{out:?}"
    );
    assert_removed(&t, &out, &[], "kept by a foreign object").await;
    assert_eq!(
        dir_files(&t.base, &eu),
        vec![
            ".hoodie_partition_metadata".to_string(),
            "notes.txt".to_string()
        ]
    );
    std::fs::remove_file(&stray).unwrap();
    let after = without(&model, "eu");
    assert_reads(&t, &after, "after the files went").await;

    let out = clean(&t.table, &keep(1)).await.unwrap();
    assert_eq!(out.planned(), 0, "{out:?}");
    assert_removed(
        &t,
        &out,
        std::slice::from_ref(&eu),
        "removed with nothing to delete",
    )
    .await;
    assert!(!t.base.join(&eu).exists());
    assert!(!listed_partitions(&t.storage).await.contains(&eu));
    assert_reads(&t, &after, "after removal").await;
}

/// A write pending on any root (it may be about to put files into the partition, having seen
/// its marker) keeps every deleted partition's directory; once it is gone, the partition goes.
#[tokio::test]
async fn test_reclaim_waits_while_a_write_is_pending() {
    use arbor_cleaner::partitions::{deleted_partitions, pending_write, removable_partitions};
    let layout = Layout {
        table_type: TableType::MergeOnRead,
        hive: true,
        two_level: false,
        metadata_table: true,
    };
    let t = create_table(layout).await;
    fill(&t).await;
    let eu = layout.partition("eu");
    t.table
        .delete_partitions(std::slice::from_ref(&eu))
        .await
        .unwrap();
    let reader = TableReader::open(t.storage.clone()).await.unwrap();
    let candidates = deleted_partitions(reader.view()).await.unwrap();
    assert_eq!(
        candidates.iter().cloned().collect::<Vec<_>>(),
        vec![eu.clone()]
    );
    // Every file of `eu` is deleted by the clean (plan), nothing protected.
    let mut plan = arbor_cleaner::CleanPlan::new();
    plan.insert(
        eu.clone(),
        dir_files(&t.base, &eu)
            .into_iter()
            .filter(|f| !f.starts_with('.') || f.contains(".log."))
            .collect(),
    );
    let none = std::collections::BTreeSet::new();
    let ok = removable_partitions(
        &t.storage,
        &t.storage,
        reader.view(),
        &candidates,
        &plan,
        &none,
    )
    .await
    .unwrap();
    assert_eq!(
        ok.get(&eu),
        Some(&vec![format!("{eu}/.hoodie_partition_metadata")]),
        "{ok:?}"
    );

    let mut tl = ActiveTimeline::load(t.storage.clone(), t.table.layout().clone())
        .await
        .unwrap();
    let time = tl.next_instant_time(t.table.generator()).await.unwrap();
    let requested = tl
        .create_requested(time.clone(), Action::DeltaCommit, bytes::Bytes::new())
        .await
        .unwrap();
    let pending = pending_write(&t.storage).await.unwrap();
    assert!(
        pending
            .as_deref()
            .is_some_and(|p| p.contains(time.as_str())),
        "{pending:?}"
    );
    let held = removable_partitions(
        &t.storage,
        &t.storage,
        reader.view(),
        &candidates,
        &plan,
        &none,
    )
    .await
    .unwrap();
    assert!(held.is_empty(), "{held:?}");

    // The write gone, a protected file of `eu` keeps it too.
    use arbor_storage::StorageExt;
    t.storage
        .delete(&tl.key_of(&requested).unwrap())
        .await
        .unwrap();
    assert_eq!(pending_write(&t.storage).await.unwrap(), None);
    let one = format!("{eu}/{}", plan[&eu].iter().next().unwrap());
    let protected: std::collections::BTreeSet<String> = [one].into_iter().collect();
    let held = removable_partitions(
        &t.storage,
        &t.storage,
        reader.view(),
        &candidates,
        &plan,
        &protected,
    )
    .await
    .unwrap();
    assert!(held.is_empty(), "{held:?}");
}
