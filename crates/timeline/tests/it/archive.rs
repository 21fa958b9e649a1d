//! The archived (LSM) timeline, `TimelineHistory` and the archiver, including a crash sweep.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_storage::{FaultInjectingStorage, FaultMode, ObjectStoreStorage, Storage, StorageExt};
use arbor_timeline::archive::{
    ArchivalPolicy, ArchivedTimeline, Archiver, InstantLocation, LsmFileName, Snapshot,
    TimelineHistory,
};
use arbor_timeline::avro::{
    encode, HoodieCleanMetadata, HoodieCleanerPlan, HoodieCommitMetadata,
    HoodieReplaceCommitMetadata, HoodieRequestedReplaceMetadata, HoodieSavepointMetadata,
};
use arbor_timeline::{
    Action, ActiveTimeline, Instant, InstantTime, State, TableLayout, TimelineError,
};
use bytes::Bytes;
use chrono::{TimeZone, Utc};

// ---------------------------------------------------------------------------------------------
// Building timelines
// ---------------------------------------------------------------------------------------------

/// The instant time `secs` seconds after 2025-01-01T00:00:00Z.
fn ts(secs: i64) -> InstantTime {
    let base = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
    InstantTime::from_datetime(base + chrono::Duration::seconds(secs))
}

/// Requested time of slot `i` (10 s apart), so tests can place instants between others.
fn t(i: u32) -> InstantTime {
    ts(10 * i64::from(i))
}

/// Completion time of an instant requested in slot `i` (5 s later, before slot `i + 1`).
fn c(i: u32) -> InstantTime {
    ts(10 * i64::from(i) + 5)
}

fn commit_metadata(i: u32) -> Bytes {
    let mut m = HoodieCommitMetadata::default();
    let mut extra = BTreeMap::new();
    extra.insert("schema".to_string(), format!("{{\"slot\":{i}}}"));
    m.extra_metadata = Some(extra);
    m.operation_type = Some("UPSERT".into());
    m.version = Some(1);
    Bytes::from(encode(&m).unwrap())
}

fn replace_metadata(i: u32, partition: &str, file_ids: &[&str]) -> Bytes {
    let mut m = HoodieReplaceCommitMetadata::default();
    let mut extra = BTreeMap::new();
    extra.insert("schema".to_string(), format!("{{\"slot\":{i}}}"));
    m.extra_metadata = Some(extra);
    m.operation_type = Some("INSERT_OVERWRITE".into());
    m.version = Some(1);
    let mut replaced = BTreeMap::new();
    replaced.insert(
        partition.to_string(),
        file_ids.iter().map(|f| f.to_string()).collect(),
    );
    m.partition_to_replace_file_ids = Some(replaced);
    Bytes::from(encode(&m).unwrap())
}

struct Table {
    storage: Arc<dyn Storage>,
    layout: TableLayout,
    tl: ActiveTimeline,
}

impl Table {
    async fn new() -> Self {
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        Self::on(storage).await
    }

    async fn on(storage: Arc<dyn Storage>) -> Self {
        let layout = TableLayout::v2(".hoodie");
        let tl = ActiveTimeline::load(storage.clone(), layout.clone())
            .await
            .unwrap();
        Table {
            storage,
            layout,
            tl,
        }
    }

    /// A full requested -> inflight -> completed instant in slot `i`.
    async fn complete(
        &mut self,
        i: u32,
        action: Action,
        requested: Bytes,
        inflight: Bytes,
        done: Bytes,
    ) -> Instant {
        let r = if action == Action::Savepoint {
            Instant::requested(t(i), action)
        } else {
            self.tl
                .create_requested(t(i), action, requested)
                .await
                .unwrap()
        };
        let f = self.tl.transition_to_inflight(&r, inflight).await.unwrap();
        self.tl.complete(&f, c(i), done).await.unwrap()
    }

    async fn commit(&mut self, i: u32) -> Instant {
        self.complete(
            i,
            Action::Commit,
            Bytes::new(),
            Bytes::new(),
            commit_metadata(i),
        )
        .await
    }

    async fn commits(&mut self, slots: impl IntoIterator<Item = u32>) -> Vec<Instant> {
        let mut out = Vec::new();
        for i in slots {
            out.push(self.commit(i).await);
        }
        out
    }

    async fn replace(&mut self, i: u32, partition: &str, file_ids: &[&str]) -> Instant {
        let plan = Bytes::from(
            encode(&HoodieRequestedReplaceMetadata {
                operation_type: Some("INSERT_OVERWRITE".into()),
                ..Default::default()
            })
            .unwrap(),
        );
        self.complete(
            i,
            Action::ReplaceCommit,
            plan,
            Bytes::new(),
            replace_metadata(i, partition, file_ids),
        )
        .await
    }

    async fn clean(&mut self, i: u32) -> Instant {
        let plan = clean_plan(i);
        let done = Bytes::from(
            encode(&HoodieCleanMetadata {
                start_clean_time: t(i).to_string(),
                ..Default::default()
            })
            .unwrap(),
        );
        self.complete(i, Action::Clean, plan, Bytes::new(), done)
            .await
    }

    async fn savepoint(&mut self, i: u32) -> Instant {
        let done = Bytes::from(
            encode(&HoodieSavepointMetadata {
                savepointed_by: "test".into(),
                ..Default::default()
            })
            .unwrap(),
        );
        self.complete(i, Action::Savepoint, Bytes::new(), Bytes::new(), done)
            .await
    }

    async fn pending(&mut self, i: u32, action: Action) -> Instant {
        self.tl
            .create_requested(t(i), action, Bytes::new())
            .await
            .unwrap()
    }

    fn archiver(&self, policy: ArchivalPolicy) -> Archiver {
        Archiver::new(self.storage.clone(), self.layout.clone(), policy).unwrap()
    }

    async fn history(&self) -> TimelineHistory {
        TimelineHistory::load(self.storage.clone(), self.layout.clone())
            .await
            .unwrap()
    }

    async fn active(&self) -> ActiveTimeline {
        ActiveTimeline::load(self.storage.clone(), self.layout.clone())
            .await
            .unwrap()
    }
}

fn clean_plan(i: u32) -> Bytes {
    Bytes::from(
        encode(&HoodieCleanerPlan {
            policy: format!("KEEP_LATEST_COMMITS_{i}"),
            ..Default::default()
        })
        .unwrap(),
    )
}

fn policy(min: usize, max: usize, batch: usize) -> ArchivalPolicy {
    ArchivalPolicy {
        min_commits: min,
        max_commits: max,
        archive_beyond_savepoint: false,
        lsm_batch_size: batch,
    }
}

fn times(instants: &[Instant]) -> Vec<InstantTime> {
    instants.iter().map(|i| i.requested_time.clone()).collect()
}

fn slots(s: impl IntoIterator<Item = u32>) -> Vec<InstantTime> {
    s.into_iter().map(t).collect()
}

/// Keys of every file in the timeline directory (not the history).
async fn timeline_files(storage: &dyn Storage) -> Vec<String> {
    let (objects, _) = storage.list_dir(".hoodie/timeline").await.unwrap();
    objects.into_iter().map(|o| o.key).collect()
}

// ---------------------------------------------------------------------------------------------
// Selection rules
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn test_run_above_max_archives_oldest_down_to_min() {
    let mut table = Table::new().await;
    let commits = table.commits(0..8).await;
    let out = table.archiver(policy(3, 5, 10)).run().await.unwrap();
    assert_eq!(times(&out.archived), times(&commits[..5]));
    assert!(out.archived.iter().all(|i| i.state == State::Completed));
    let active = table.active().await;
    assert_eq!(times(&active.completed_writes()), times(&commits[5..]));
    // No file of an archived instant is left behind in any state.
    for key in timeline_files(table.storage.as_ref()).await {
        for i in 0..5 {
            assert!(!key.contains(t(i).as_str()), "{key} left behind");
        }
    }
    let history = table.history().await;
    assert_eq!(times(&history.completed_writes()), times(&commits));
    for (n, commit) in commits.iter().enumerate() {
        let h = history.get(&commit.requested_time, Action::Commit).unwrap();
        let expected = if n < 5 {
            InstantLocation::Archived
        } else {
            InstantLocation::Active
        };
        assert_eq!(h.location, expected, "{commit}");
        assert_eq!(h.instant.completion_time, commit.completion_time);
    }
}

#[tokio::test]
async fn test_run_at_max_archives_nothing() {
    let mut table = Table::new().await;
    table.commits(0..5).await;
    let out = table.archiver(policy(3, 5, 10)).run().await.unwrap();
    assert!(out.archived.is_empty());
    assert_eq!(out.data_file, None);
    assert_eq!(out.manifest_version, None);
    assert_eq!(table.active().await.completed_writes().len(), 5);
    let (history_files, _) = table
        .storage
        .list_dir(".hoodie/timeline/history")
        .await
        .unwrap();
    assert!(history_files.is_empty(), "{history_files:?}");
}

#[tokio::test]
async fn test_run_stops_before_earliest_pending_instant() {
    let mut table = Table::new().await;
    // Commits in even slots 0..=18; a pending deltacommit in slot 9 (between commits 8 and 10).
    let commits = table.commits((0..10).map(|k| 2 * k)).await;
    table.pending(9, Action::DeltaCommit).await;
    let out = table.archiver(policy(2, 5, 10)).run().await.unwrap();
    // Java's rule: the last completed commit before the pending instant (slot 8) stays too.
    assert_eq!(times(&out.archived), slots([0, 2, 4, 6]));
    let active = table.active().await;
    assert_eq!(active.pending().len(), 1);
    assert!(times(&active.completed_writes()).contains(&commits[4].requested_time));
    // A pending clean (any action) blocks the same way.
    let mut table = Table::new().await;
    table.commits((0..10).map(|k| 2 * k)).await;
    table.pending(5, Action::Clean).await;
    let out = table.archiver(policy(2, 5, 10)).run().await.unwrap();
    assert_eq!(times(&out.archived), slots([0, 2]));
}

#[tokio::test]
async fn test_run_stops_at_first_savepoint_unless_beyond_savepoint() {
    let mut table = Table::new().await;
    table.commits(0..10).await;
    table.savepoint(3).await;
    let out = table.archiver(policy(2, 5, 10)).run().await.unwrap();
    assert_eq!(times(&out.archived), slots([0, 1, 2]));

    let mut table = Table::new().await;
    table.commits(0..10).await;
    table.savepoint(3).await;
    let beyond = ArchivalPolicy {
        archive_beyond_savepoint: true,
        ..policy(2, 5, 10)
    };
    let out = table.archiver(beyond).run().await.unwrap();
    // The savepointed commit and the savepoint stay; archiving continues past them.
    assert_eq!(times(&out.archived), slots([0, 1, 2, 4, 5, 6, 7, 8]));
    let active = table.active().await;
    assert_eq!(times(&active.completed_writes()), slots([3, 9]));
    assert!(active.get(&t(3), Action::Savepoint).is_some());
    let history = table.history().await;
    assert_eq!(history.completed_writes().len(), 10);
}

#[tokio::test]
async fn test_run_stops_at_replacecommit_until_replaced_files_are_cleaned() {
    let mut table = Table::new().await;
    table.commits(0..2).await;
    table.replace(2, "p1", &["fg1"]).await;
    table.commits(3..10).await;
    let base_file = format!("p1/fg1_0-1-0_{}.parquet", t(0));
    table
        .storage
        .put(&base_file, Bytes::from_static(b"data"))
        .await
        .unwrap();
    // Another file group's file does not block.
    table
        .storage
        .put(
            &format!("p1/fg10_0-1-0_{}.parquet", t(1)),
            Bytes::from_static(b"x"),
        )
        .await
        .unwrap();
    let archiver = table.archiver(policy(2, 5, 10));
    let out = archiver.run().await.unwrap();
    assert_eq!(times(&out.archived), slots([0, 1]));

    // A log file of the replaced group blocks as well.
    table.storage.delete(&base_file).await.unwrap();
    let log_file = format!("p1/.fg1_{}.log.1_0-1-0", t(0));
    table
        .storage
        .put(&log_file, Bytes::from_static(b"log"))
        .await
        .unwrap();
    let out = archiver.run().await.unwrap();
    assert!(out.archived.is_empty(), "{:?}", out.archived);

    // Cleaned: the replacecommit and the commits after it are archived.
    table.storage.delete(&log_file).await.unwrap();
    let out = archiver.run().await.unwrap();
    assert_eq!(times(&out.archived), slots([2, 3, 4, 5, 6, 7]));
}

#[tokio::test]
async fn test_run_non_partitioned_replacecommit_checks_table_root() {
    let mut table = Table::new().await;
    table.replace(0, "", &["fg0"]).await;
    table.commits(1..8).await;
    table
        .storage
        .put(
            &format!("fg0_0-1-0_{}.parquet", t(0)),
            Bytes::from_static(b"d"),
        )
        .await
        .unwrap();
    let out = table.archiver(policy(2, 5, 10)).run().await.unwrap();
    assert!(out.archived.is_empty());
}

#[tokio::test]
async fn test_run_archives_older_cleans_with_commits() {
    let mut table = Table::new().await;
    table.commits([0, 1, 3, 4, 6, 7, 8, 9, 10, 11]).await;
    let clean = table.clean(2).await;
    let late_clean = table.clean(5).await;
    let out = table.archiver(policy(7, 8, 10)).run().await.unwrap();
    // 10 commits, keep 7: commits 0, 1, 3 go, with the clean in slot 2 (older than slot 3); the
    // clean in slot 5 is newer than the last archived commit and stays.
    assert_eq!(times(&out.archived), slots([0, 1, 2, 3]));
    let history = table.history().await;
    let archived_clean = history.get(&clean.requested_time, Action::Clean).unwrap();
    assert_eq!(archived_clean.location, InstantLocation::Archived);
    assert_eq!(
        history
            .get(&late_clean.requested_time, Action::Clean)
            .unwrap()
            .location,
        InstantLocation::Active
    );
    // The clean's plan is the requested file's bytes.
    let row = history
        .archived()
        .get(&clean.requested_time, Action::Clean)
        .unwrap();
    assert_eq!(row.plan.as_ref(), Some(&clean_plan(2)));
}

#[tokio::test]
async fn test_run_with_metadata_table_stops_after_its_latest_compaction() {
    let mut table = Table::new().await;
    table.commits(0..10).await;
    let mdt_layout = TableLayout::v2(".hoodie/metadata/.hoodie");
    table
        .storage
        .put(
            &mdt_layout.properties_key(),
            Bytes::from_static(b"hoodie.table.name=m\n"),
        )
        .await
        .unwrap();
    let archiver = table.archiver(policy(2, 5, 10));
    // No compaction on the metadata table yet: nothing is archived.
    let out = archiver.run().await.unwrap();
    assert!(out.archived.is_empty());

    // An MDT compaction requested at 36 s (after data commit 3 completed at 35 s, before
    // commit 4 completed at 45 s): commits completed after it stay.
    let mut mdt = ActiveTimeline::load(table.storage.clone(), mdt_layout)
        .await
        .unwrap();
    let r = mdt
        .create_requested(ts(36), Action::Compaction, Bytes::new())
        .await
        .unwrap();
    let f = mdt.transition_to_inflight(&r, Bytes::new()).await.unwrap();
    mdt.complete(&f, ts(37), commit_metadata(4)).await.unwrap();
    let out = archiver.run().await.unwrap();
    assert_eq!(times(&out.archived), slots([0, 1, 2, 3]));
}

// ---------------------------------------------------------------------------------------------
// Reading archived instants
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn test_history_reads_archived_content_equal_to_original_files() {
    let mut table = Table::new().await;
    let mut originals = Vec::new();
    for i in 0..8 {
        let instant = table.commit(i).await;
        let bytes = table.tl.read(&instant).await.unwrap();
        originals.push((instant, bytes));
    }
    table.archiver(policy(2, 4, 10)).run().await.unwrap();
    let history = table.history().await;
    for (instant, bytes) in &originals {
        let content = history
            .read_completed_content(&instant.requested_time, instant.action)
            .await
            .unwrap();
        assert_eq!(&content, bytes, "{instant}");
        let h = history
            .get(&instant.requested_time, instant.action)
            .unwrap();
        assert_eq!(h.instant.completion_time, instant.completion_time);
    }
    assert_eq!(
        history.location(&originals[0].0.requested_time, Action::Commit),
        Some(InstantLocation::Archived)
    );
    let missing = history.read_completed_content(&t(99), Action::Commit).await;
    assert!(matches!(
        missing,
        Err(TimelineError::InstantNotFound { .. })
    ));
}

#[tokio::test]
async fn test_archived_timeline_corrupt_data_file_fails_with_path() {
    let mut table = Table::new().await;
    table.commits(0..8).await;
    let out = table.archiver(policy(2, 4, 10)).run().await.unwrap();
    let name = out.data_file.unwrap();
    let key = format!(".hoodie/timeline/history/{name}");
    table
        .storage
        .put(
            &key,
            Bytes::from_static(b"PAR1 definitely not parquet PAR1"),
        )
        .await
        .unwrap();
    let err = ArchivedTimeline::load(table.storage.as_ref(), &table.layout)
        .await
        .unwrap_err();
    assert!(
        matches!(err, TimelineError::Archive { ref path, .. } if *path == key),
        "{err}"
    );
}

#[tokio::test]
async fn test_archived_timeline_missing_or_corrupt_version_file_falls_back_to_manifests() {
    let mut table = Table::new().await;
    table.commits(0..8).await;
    table.archiver(policy(2, 4, 10)).run().await.unwrap();
    let before = ArchivedTimeline::load(table.storage.as_ref(), &table.layout)
        .await
        .unwrap();
    assert_eq!(before.len(), 6);
    let version_key = ".hoodie/timeline/history/_version_";
    table
        .storage
        .put(version_key, Bytes::from_static(b"garbage"))
        .await
        .unwrap();
    let corrupt = ArchivedTimeline::load(table.storage.as_ref(), &table.layout)
        .await
        .unwrap();
    assert_eq!(corrupt.len(), 6);
    table.storage.delete(version_key).await.unwrap();
    let missing = ArchivedTimeline::load(table.storage.as_ref(), &table.layout)
        .await
        .unwrap();
    assert_eq!(missing.len(), 6);
    assert_eq!(missing.snapshot().version, before.snapshot().version);
}

#[tokio::test]
async fn test_history_instant_in_archive_and_active_is_reported_once_from_active() {
    // Stop the archiver right after `_version_` (before any active file is deleted).
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let mut table = Table::on(inner.clone()).await;
    table.commits(0..6).await;
    let faulty = Arc::new(FaultInjectingStorage::new(inner.clone()));
    faulty.set_count_only_writes(true);
    // Writes: data file (0), manifest (1), _version_ (2), first delete (3).
    faulty.set_mode(FaultMode::CrashAt(3));
    let archiver = Archiver::new(faulty.clone(), table.layout.clone(), policy(2, 4, 10)).unwrap();
    assert!(archiver.run().await.is_err());
    let history = table.history().await;
    assert_eq!(history.archived().len(), 4);
    assert_eq!(history.completed_writes().len(), 6);
    assert!(history
        .instants()
        .all(|h| h.location == InstantLocation::Active));
    // The next run deletes the leftovers first.
    let out = table.archiver(policy(2, 4, 10)).run().await.unwrap();
    assert_eq!(times(&out.recovered), slots(0..4));
    assert!(out.archived.is_empty());
    assert_eq!(table.active().await.completed_writes().len(), 2);
}

// ---------------------------------------------------------------------------------------------
// LSM compaction
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn test_run_many_archivals_compacts_level_zero_into_level_one() {
    let mut table = Table::new().await;
    let archiver = table.archiver(policy(1, 2, 3));
    let mut originals = BTreeMap::new();
    let mut compacted = Vec::new();
    let mut slot = 0;
    for _ in 0..10 {
        for _ in 0..2 {
            let i = table.commit(slot).await;
            originals.insert(i.requested_time.clone(), table.tl.read(&i).await.unwrap());
            slot += 1;
        }
        let out = archiver.run().await.unwrap();
        compacted.extend(out.compacted_files);
    }
    assert!(!compacted.is_empty(), "no compaction happened");
    let history = table.history().await;
    let snapshot: &Snapshot = history.archived().snapshot();
    let levels: Vec<u32> = snapshot
        .manifest
        .file_names()
        .map(|n| LsmFileName::parse(n).unwrap().level)
        .collect();
    // Nine level-0 files were written: three level-1 files, merged into one level-2 file.
    assert_eq!(levels, vec![2], "{:?}", snapshot.manifest);
    // Every instant is there once, with its content.
    assert_eq!(history.completed_writes().len(), originals.len());
    for (time, bytes) in &originals {
        let content = history
            .read_completed_content(time, Action::Commit)
            .await
            .unwrap();
        assert_eq!(&content, bytes);
    }
    // Files replaced by compaction are cleaned once their snapshots are no longer retained.
    let (objects, _) = table
        .storage
        .list_dir(".hoodie/timeline/history")
        .await
        .unwrap();
    let parquet: Vec<String> = objects
        .iter()
        .filter_map(|o| o.key.rsplit('/').next())
        .filter(|n| n.ends_with(".parquet"))
        .map(String::from)
        .collect();
    let manifests = objects
        .iter()
        .filter(|o| o.key.contains("manifest_"))
        .count();
    // 3 retained snapshots plus the 2 this run's compactions made.
    assert_eq!(manifests, 5, "{objects:?}");
    // Every data file kept is listed by a kept manifest; the rest were cleaned.
    let mut listed = BTreeSet::new();
    for o in objects.iter().filter(|o| o.key.contains("manifest_")) {
        let (bytes, _) = table.storage.get(&o.key).await.unwrap();
        let m = arbor_timeline::archive::Manifest::from_json(&o.key, &bytes).unwrap();
        listed.extend(m.file_names().map(String::from));
    }
    let on_storage: BTreeSet<String> = parquet.into_iter().collect();
    assert_eq!(on_storage, listed);
    assert!(on_storage.len() < 9 + 3 + 1, "{on_storage:?}");
}

// ---------------------------------------------------------------------------------------------
// Crash sweep
// ---------------------------------------------------------------------------------------------

/// What a reader can observe: every instant with its state, completion time, location and
/// content; the active file names; the current manifest's files.
#[derive(Debug, PartialEq, Eq)]
struct Observed {
    instants: Vec<(Instant, InstantLocation, Bytes)>,
    active_files: Vec<String>,
    manifest_files: BTreeSet<String>,
}

async fn observe(storage: Arc<dyn Storage>) -> Observed {
    let layout = TableLayout::v2(".hoodie");
    let history = TimelineHistory::load(storage.clone(), layout)
        .await
        .unwrap();
    let mut instants = Vec::new();
    for h in history.instants() {
        let content = if h.instant.is_completed() {
            history
                .read_completed_content(&h.instant.requested_time, h.instant.action)
                .await
                .unwrap()
        } else {
            Bytes::new()
        };
        instants.push((h.instant.clone(), h.location, content));
    }
    Observed {
        instants,
        active_files: timeline_files(storage.as_ref()).await,
        manifest_files: history
            .archived()
            .snapshot()
            .manifest
            .file_names()
            .map(String::from)
            .collect(),
    }
}

/// A table with three archivals behind it (manifests 1-4: two level-0 files, their level-1
/// merge, a third level-0 file), so the swept run writes a level-0 file, compacts twice (batch
/// size 2: into level 1, then level 2) and cleans manifests and data files of old snapshots.
async fn crash_sweep_table() -> (Arc<dyn Storage>, ArchivalPolicy) {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let mut table = Table::on(storage.clone()).await;
    let p = policy(2, 4, 2);
    let mut slot = 0;
    for _ in 0..3 {
        while table.active().await.completed_writes().len() < 5 {
            table.commit(slot).await;
            slot += 1;
        }
        table.archiver(p.clone()).run().await.unwrap();
    }
    assert_eq!(slot, 11);
    table.commit(11).await;
    table.clean(12).await;
    table.commits(13..17).await;
    table.pending(17, Action::DeltaCommit).await;
    (storage, p)
}

#[tokio::test]
async fn test_run_crash_at_every_write_leaves_readable_history_and_recovers() {
    let layout = TableLayout::v2(".hoodie");

    // Fault-free reference run, counting the writes.
    let (storage, p) = crash_sweep_table().await;
    let before = observe(storage.clone()).await;
    let faulty = Arc::new(FaultInjectingStorage::new(storage.clone()));
    faulty.set_count_only_writes(true);
    let out = Archiver::new(faulty.clone(), layout.clone(), p.clone())
        .unwrap()
        .run()
        .await
        .unwrap();
    assert!(!out.archived.is_empty());
    assert_eq!(
        out.compacted_files.len(),
        2,
        "the swept run must compact twice"
    );
    assert!(
        out.cleaned.iter().any(|k| k.ends_with(".parquet")),
        "the swept run must clean data files: {:?}",
        out.cleaned
    );
    assert!(out.archived.iter().any(|i| i.action == Action::Clean));
    let writes = faulty.op_count();
    assert_eq!(writes, 19, "{:?}", faulty.ops());
    let expected = observe(storage.clone()).await;

    // The logical instants (time, action, state, completion time, content) never change.
    let logical = |o: &Observed| -> Vec<(Instant, Bytes)> {
        o.instants
            .iter()
            .map(|(i, _, b)| (i.clone(), b.clone()))
            .collect()
    };
    assert_eq!(logical(&before), logical(&expected));

    for n in 0..writes {
        let (storage, p) = crash_sweep_table().await;
        let faulty = Arc::new(FaultInjectingStorage::new(storage.clone()));
        faulty.set_count_only_writes(true);
        faulty.set_mode(FaultMode::CrashAt(n));
        let result = Archiver::new(faulty.clone(), layout.clone(), p.clone())
            .unwrap()
            .run()
            .await;
        assert!(result.is_err(), "crash at write {n} went unnoticed");
        assert!(faulty.has_crashed());

        // What a restarted process sees: every instant once, in its state, with its content.
        let seen = observe(storage.clone()).await;
        assert_eq!(logical(&seen), logical(&before), "after crash at write {n}");
        // No archived instant looks pending: any active files it still has include the
        // completed one.
        let active = ActiveTimeline::load(storage.clone(), layout.clone())
            .await
            .unwrap();
        for (_, files) in active.instant_files() {
            let latest = files.latest().unwrap();
            let was_completed = before.instants.iter().any(|(i, _, _)| {
                i.requested_time == latest.requested_time
                    && i.is_completed()
                    && i.action == latest.action.completed_action()
            });
            if was_completed {
                assert!(
                    files.completed.is_some(),
                    "{latest} looks pending after crash at {n}"
                );
            }
        }

        // A fault-free run finishes the job.
        Archiver::new(storage.clone(), layout.clone(), p.clone())
            .unwrap()
            .run()
            .await
            .unwrap();
        let after = observe(storage.clone()).await;
        assert_eq!(after, expected, "final state after crash at write {n}");
    }
}
