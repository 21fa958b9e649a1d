//! `FileSystemView` on synthetic timelines: the committed rule, replaced groups, the v8 attach
//! rule through the view, pending compaction and clustering, time travel and refresh.

use std::collections::BTreeSet;

use arbor_fsview::{FileSlice, Horizon, Invalidated};
use arbor_timeline::avro::{
    encode, HoodieClusteringGroup, HoodieClusteringPlan, HoodieCompactionOperation,
    HoodieCompactionPlan, HoodieRequestedReplaceMetadata, HoodieSliceInfo,
};
use arbor_timeline::{Action, State};

use crate::synthetic::{base_name, fid, log_name, t, Synthetic};

/// `(partition, file id, base instant, base file, log files)` of one slice.
type SliceSummary = (String, String, String, Option<String>, Vec<String>);

fn summary(slices: &[FileSlice]) -> Vec<SliceSummary> {
    slices
        .iter()
        .map(|s| {
            (
                s.partition.clone(),
                s.file_id.clone(),
                s.base_instant.to_string(),
                s.base_file.as_ref().map(|b| b.file_name()),
                s.log_files.iter().map(|l| l.file_name()).collect(),
            )
        })
        .collect()
}

/// Files of a pending instant and of an instant newer than the archival boundary with no
/// timeline file are dropped; files older than the boundary (archived) are kept.
#[tokio::test]
async fn test_latest_file_slices_uncommitted_files_excluded_archived_kept() {
    let tb = Synthetic::new();
    // Archived (no timeline file, older than every active write): visible.
    tb.data("p=a", &base_name('1', 50)).await;
    tb.commit(100, 110, Action::Commit, &[("p=a", &base_name('2', 100))])
        .await;
    // Pending write: a new group and a newer slice of group 2; both invisible.
    tb.pending(200, Action::Commit).await;
    tb.data("p=a", &base_name('3', 200)).await;
    tb.data("p=a", &base_name('2', 200)).await;
    // Newer than the boundary but in no timeline (rolled back): invisible.
    tb.data("p=a", &base_name('4', 150)).await;
    // Not data files: skipped.
    tb.data("p=a", ".hoodie_partition_metadata").await;
    tb.data("p=a", "notes.txt").await;

    let view = tb.view().await;
    assert_eq!(view.index().boundary(), Some(&t(100)));
    assert!(view.is_committed(&t(50)));
    assert!(!view.is_committed(&t(150)));
    assert!(!view.is_committed(&t(200)));
    let got = view.latest_file_slices(None, None).await.unwrap();
    assert_eq!(
        summary(&got),
        vec![
            (
                "p=a".into(),
                fid('1'),
                t(50).to_string(),
                Some(base_name('1', 50)),
                vec![]
            ),
            (
                "p=a".into(),
                fid('2'),
                t(100).to_string(),
                Some(base_name('2', 100)),
                vec![]
            ),
        ]
    );
}

/// A replacecommit hides the groups it replaced from the moment it is requested on (as-of
/// semantics) and not before.
#[tokio::test]
async fn test_latest_file_slices_replaced_groups_excluded_from_replacecommit_on() {
    let tb = Synthetic::new();
    tb.commit(
        100,
        110,
        Action::Commit,
        &[("p=a", &base_name('a', 100)), ("p=b", &base_name('b', 100))],
    )
    .await;
    tb.replace(200, 210, &[("p=a", &base_name('c', 200))], &[("p=a", 'a')])
        .await;
    let view = tb.view().await;
    assert_eq!(view.replaced_file_groups().len(), 1);
    let latest = view.latest_file_slices(None, None).await.unwrap();
    let ids: Vec<String> = latest.iter().map(|s| s.file_id.clone()).collect();
    assert_eq!(ids, vec![fid('c'), fid('b')]);
    let before = view.latest_file_slices(None, Some(&t(150))).await.unwrap();
    let ids: Vec<String> = before.iter().map(|s| s.file_id.clone()).collect();
    assert_eq!(ids, vec![fid('a'), fid('b')]);
    let only_b = view.latest_file_slices(Some("p=b"), None).await.unwrap();
    assert_eq!(only_b.len(), 1);
}

/// v8 non-blocking compaction through the view: a deltacommit requested before a compaction
/// but completed after it lands in the compaction's slice; as of a time before the
/// compaction, the old slice carries it.
#[tokio::test]
async fn test_latest_file_slices_v8_log_attaches_by_completion_time() {
    let tb = Synthetic::new();
    tb.commit(100, 110, Action::DeltaCommit, &[("", &base_name('a', 100))])
        .await;
    // Deltacommit 200 runs long: completes at 400, after compaction 300 (completed at 350).
    tb.commit(300, 350, Action::Commit, &[("", &base_name('a', 300))])
        .await;
    tb.commit(200, 400, Action::DeltaCommit, &[("", &log_name('a', 200))])
        .await;
    tb.commit(150, 160, Action::DeltaCommit, &[("", &log_name('a', 150))])
        .await;
    let view = tb.view().await;
    let latest = view.latest_file_slices(None, None).await.unwrap();
    assert_eq!(
        summary(&latest),
        vec![(
            String::new(),
            fid('a'),
            t(300).to_string(),
            Some(base_name('a', 300)),
            vec![log_name('a', 200)]
        )]
    );
    // As of 250 (requested times): compaction 300 is out, both deltacommits are in.
    let as_of = view.latest_file_slices(None, Some(&t(250))).await.unwrap();
    assert_eq!(
        summary(&as_of),
        vec![(
            String::new(),
            fid('a'),
            t(100).to_string(),
            Some(base_name('a', 100)),
            vec![log_name('a', 150), log_name('a', 200)]
        )]
    );
    // As of 180: the deltacommit requested at 200 is out.
    let as_of = view.latest_file_slices(None, Some(&t(180))).await.unwrap();
    assert_eq!(as_of[0].log_files.len(), 1);
    // By completion time 360: deltacommit 200 (completed at 400) is not yet visible.
    let by = view
        .latest_file_slices_within(None, &Horizon::CompletedBy(t(360)))
        .await
        .unwrap();
    assert_eq!(
        summary(&by),
        vec![(
            String::new(),
            fid('a'),
            t(300).to_string(),
            Some(base_name('a', 300)),
            vec![]
        )]
    );
}

/// A pending compaction is exposed with its operations; its slice (logs completed after it was
/// requested, no base file) is merged with the previous slice for readers.
#[tokio::test]
async fn test_latest_file_slices_pending_compaction_merged_and_exposed() {
    let tb = Synthetic::new();
    tb.commit(
        100,
        110,
        Action::DeltaCommit,
        &[("p", &base_name('a', 100))],
    )
    .await;
    tb.commit(150, 160, Action::DeltaCommit, &[("p", &log_name('a', 150))])
        .await;
    let plan = HoodieCompactionPlan {
        operations: Some(vec![HoodieCompactionOperation {
            base_instant_time: Some(t(100).to_string()),
            delta_file_paths: Some(vec![log_name('a', 150)]),
            data_file_path: Some(base_name('a', 100)),
            file_id: Some(fid('a')),
            partition_path: Some("p".into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    tb.instant_file(
        300,
        None,
        Action::Compaction,
        State::Requested,
        encode(&plan).unwrap(),
    )
    .await;
    tb.commit(400, 410, Action::DeltaCommit, &[("p", &log_name('a', 400))])
        .await;
    let view = tb.view().await;
    let ops = view.pending_compaction_operations();
    assert_eq!(ops.len(), 1);
    assert_eq!(
        (
            ops[0].instant.clone(),
            ops[0].file_id.clone(),
            ops[0].partition.as_str()
        ),
        (t(300), fid('a'), "p")
    );

    let groups = view.file_groups("p", &Horizon::Latest).await.unwrap();
    let keys: Vec<_> = groups[0].slices.keys().cloned().collect();
    assert_eq!(keys, vec![t(100), t(300)]);
    assert!(groups[0].slices[&t(300)].base_file.is_none());

    let latest = view.latest_file_slices(None, None).await.unwrap();
    assert_eq!(
        summary(&latest),
        vec![(
            "p".into(),
            fid('a'),
            t(100).to_string(),
            Some(base_name('a', 100)),
            vec![log_name('a', 150), log_name('a', 400)]
        )]
    );
}

/// File groups named by a pending clustering plan are exposed.
#[tokio::test]
async fn test_pending_clustering_file_groups_lists_plan_inputs() {
    let tb = Synthetic::new();
    tb.commit(
        100,
        110,
        Action::Commit,
        &[("p", &base_name('a', 100)), ("p", &base_name('b', 100))],
    )
    .await;
    let plan = HoodieRequestedReplaceMetadata {
        operation_type: Some("CLUSTER".into()),
        clustering_plan: Some(HoodieClusteringPlan {
            input_groups: Some(vec![HoodieClusteringGroup {
                slices: Some(vec![HoodieSliceInfo {
                    data_file_path: Some(format!("p/{}", base_name('a', 100))),
                    file_id: Some(fid('a')),
                    partition_path: Some("p".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    tb.instant_file(
        200,
        None,
        Action::Clustering,
        State::Requested,
        encode(&plan).unwrap(),
    )
    .await;
    let view = tb.view().await;
    let pending = view.pending_clustering_file_groups();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending.get(&("p".to_string(), fid('a'))), Some(&t(200)));
    // Pending clustering does not hide anything from readers.
    assert_eq!(view.latest_file_slices(None, None).await.unwrap().len(), 2);
}

/// A MOR group written only as log files is a log-only slice keyed by its first deltacommit.
#[tokio::test]
async fn test_latest_file_slices_log_only_group_has_no_base_file() {
    let tb = Synthetic::new();
    tb.commit(100, 110, Action::DeltaCommit, &[("p", &log_name('a', 100))])
        .await;
    tb.commit(200, 210, Action::DeltaCommit, &[("p", &log_name('a', 200))])
        .await;
    let view = tb.view().await;
    let latest = view.latest_file_slices(None, None).await.unwrap();
    assert_eq!(
        summary(&latest),
        vec![(
            "p".into(),
            fid('a'),
            t(100).to_string(),
            None,
            vec![log_name('a', 100), log_name('a', 200)]
        )]
    );
}

/// Incremental ranges are by completion time: a deltacommit requested early but completed late
/// belongs to the later range.
#[tokio::test]
async fn test_completed_between_ranges_by_completion_time() {
    let tb = Synthetic::new();
    tb.commit(100, 110, Action::Commit, &[("p=a", &base_name('a', 100))])
        .await;
    tb.commit(200, 500, Action::Commit, &[("p=b", &base_name('b', 200))])
        .await;
    tb.commit(300, 310, Action::Commit, &[("p=c", &base_name('c', 300))])
        .await;
    let view = tb.view().await;
    let inc = view
        .completed_between(Some(&t(110)), Some(&t(400)))
        .await
        .unwrap();
    let times: Vec<_> = inc
        .instants
        .iter()
        .map(|i| i.requested_time.clone())
        .collect();
    assert_eq!(times, vec![t(300)]);
    assert_eq!(inc.file_slices.len(), 1);
    assert_eq!(inc.file_slices[0].file_id, fid('c'));
    let inc = view.completed_between(Some(&t(310)), None).await.unwrap();
    let times: Vec<_> = inc
        .instants
        .iter()
        .map(|i| i.requested_time.clone())
        .collect();
    assert_eq!(times, vec![t(200)]);
    assert_eq!(inc.file_slices[0].file_id, fid('b'));
}

/// After one new commit in one partition, refresh re-lists only that partition; the other
/// partitions and the partition list come from the cache, and the new file is visible.
#[tokio::test]
async fn test_refresh_after_one_commit_relists_only_its_partition() {
    let tb = Synthetic::new();
    tb.commit(
        100,
        110,
        Action::Commit,
        &[
            ("p=a", &base_name('a', 100)),
            ("p=b", &base_name('b', 100)),
            ("p=c", &base_name('c', 100)),
        ],
    )
    .await;
    let mut view = tb.view().await;
    assert_eq!(view.latest_file_slices(None, None).await.unwrap().len(), 3);
    let first: BTreeSet<String> = tb.data_dirs_listed().into_iter().collect();
    assert!(first.contains("p=b") && first.contains("p=a"), "{first:?}");

    tb.storage.reset();
    assert_eq!(
        view.refresh().await.unwrap().invalidated,
        Invalidated::Nothing
    );
    view.latest_file_slices(None, None).await.unwrap();
    assert_eq!(tb.data_dirs_listed(), Vec::<String>::new());

    tb.commit(200, 210, Action::Commit, &[("p=b", &base_name('b', 200))])
        .await;
    tb.storage.reset();
    let outcome = view.refresh().await.unwrap();
    assert_eq!(outcome.newly_completed.len(), 1);
    assert_eq!(
        outcome.invalidated,
        Invalidated::Partitions(["p=b".to_string()].into())
    );
    let latest = view.latest_file_slices(None, None).await.unwrap();
    assert_eq!(tb.data_dirs_listed(), vec!["p=b".to_string()]);
    let b = latest.iter().find(|s| s.partition == "p=b").unwrap();
    assert_eq!(b.base_instant, t(200));

    // A commit into a new partition adds it to the cached partition list without re-listing
    // the table.
    tb.commit(300, 310, Action::Commit, &[("p=d", &base_name('d', 300))])
        .await;
    tb.storage.reset();
    view.refresh().await.unwrap();
    let latest = view.latest_file_slices(None, None).await.unwrap();
    assert_eq!(tb.data_dirs_listed(), vec!["p=d".to_string()]);
    assert_eq!(latest.len(), 4);
}

/// A fork answers as its origin, keeps its cached listings, and refreshes on its own: the
/// origin keeps its snapshot.
#[tokio::test]
async fn test_fork_keeps_listings_and_refreshes_without_changing_the_origin() {
    let tb = Synthetic::new();
    tb.commit(
        100,
        110,
        Action::Commit,
        &[("p=a", &base_name('a', 100)), ("p=b", &base_name('b', 100))],
    )
    .await;
    let view = tb.view().await;
    let before = view.latest_file_slices(None, None).await.unwrap();
    tb.storage.reset();
    let mut fork = view.fork();
    assert_eq!(fork.latest_file_slices(None, None).await.unwrap(), before);
    assert_eq!(tb.data_dirs_listed(), Vec::<String>::new());

    tb.commit(200, 210, Action::Commit, &[("p=b", &base_name('b', 200))])
        .await;
    tb.storage.reset();
    fork.refresh().await.unwrap();
    let latest = fork.latest_file_slices(None, None).await.unwrap();
    assert_eq!(tb.data_dirs_listed(), vec!["p=b".to_string()]);
    let b = latest.iter().find(|s| s.partition == "p=b").unwrap();
    assert_eq!(b.base_instant, t(200));
    assert_eq!(view.latest_file_slices(None, None).await.unwrap(), before);
}
