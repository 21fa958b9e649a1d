//! Hostile timeline content: a foreign commit naming invalid partition paths must not poison
//! the view (cached partition list, incremental queries).

use arbor_fsview::Invalidated;
use arbor_timeline::avro::{encode, HoodieCommitMetadata, HoodieWriteStat};
use arbor_timeline::{Action, State};

use crate::synthetic::{base_name, fid, t, Synthetic};

/// Invalid partition paths a foreign writer could put in commit metadata.
const HOSTILE: [&str; 4] = ["a//b", "/x", "../up", "p=a/./q"];

/// A completed commit whose write stats name every [`HOSTILE`] partition (no data files can
/// exist there) plus one valid file `base_name('z', requested)` in `p=a`.
async fn hostile_commit(tb: &Synthetic, requested: u32, completion: u32) {
    let good = base_name('z', requested);
    tb.data("p=a", &good).await;
    let mut m = HoodieCommitMetadata::default();
    for p in HOSTILE {
        let name = base_name('e', requested);
        m.add_write_stat(
            p,
            HoodieWriteStat {
                file_id: Some(fid('e')),
                path: Some(format!("{p}/{name}")),
                partition_path: Some(p.to_string()),
                ..Default::default()
            },
        );
    }
    m.add_write_stat(
        "p=a",
        HoodieWriteStat {
            file_id: Some(fid('z')),
            path: Some(format!("p=a/{good}")),
            partition_path: Some("p=a".to_string()),
            ..Default::default()
        },
    );
    tb.pending(requested, Action::Commit).await;
    tb.instant_file(
        requested,
        Some(completion),
        Action::Commit,
        State::Completed,
        encode(&m).unwrap(),
    )
    .await;
}

#[tokio::test]
async fn test_refresh_foreign_commit_with_invalid_partitions_skips_them() {
    let tb = Synthetic::new();
    tb.commit(100, 110, Action::Commit, &[("p=a", &base_name('a', 100))])
        .await;
    let mut view = tb.view().await;
    // Caches the partition list, so that refresh merges into it.
    assert_eq!(view.latest_file_slices(None, None).await.unwrap().len(), 1);

    hostile_commit(&tb, 200, 210).await;
    let outcome = view.refresh().await.unwrap();
    assert_eq!(outcome.newly_completed.len(), 1);
    assert_eq!(
        outcome.invalidated,
        Invalidated::Partitions(["p=a".to_string()].into())
    );
    assert_eq!(
        view.partitions().await.unwrap().as_ref(),
        &vec!["p=a".to_string()]
    );
    // Every later read keeps working and sees the valid file of the foreign commit.
    let latest = view.latest_file_slices(None, None).await.unwrap();
    let ids: Vec<String> = latest.iter().map(|s| s.file_id.clone()).collect();
    assert_eq!(ids, vec![fid('a'), fid('z')]);
    let again = view.latest_file_slices(None, Some(&t(300))).await.unwrap();
    assert_eq!(again.len(), 2);
}

#[tokio::test]
async fn test_completed_between_foreign_commit_with_invalid_partitions_skips_them() {
    let tb = Synthetic::new();
    tb.commit(100, 110, Action::Commit, &[("p=a", &base_name('a', 100))])
        .await;
    hostile_commit(&tb, 200, 210).await;
    let view = tb.view().await;
    let inc = view.completed_between(Some(&t(110)), None).await.unwrap();
    assert_eq!(inc.instants.len(), 1);
    assert_eq!(inc.instants[0].requested_time, t(200));
    let got: Vec<(String, String)> = inc
        .file_slices
        .iter()
        .map(|s| (s.partition.clone(), s.file_id.clone()))
        .collect();
    assert_eq!(got, vec![("p=a".to_string(), fid('z'))]);
}
