//! Every fixture table: the view's latest slices, time-travel slices and incremental slices
//! against the file slices hudi-rs 0.5.0 reported (`expected/<table>/*.json`).

use std::path::Path;
use std::sync::Arc;

use arbor_fsview::{FileSlice, FileSystemView};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_testkit::{
    expected_dir, expected_json, fixture_zips, fixtures_root_or_skip, unzip_table,
};
use arbor_timeline::naming::LayoutVersion;
use arbor_timeline::InstantTime;
use serde_json::Value;

/// One slice in the shape of the expected JSON (sizes included).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Row {
    partition: String,
    file_id: String,
    base_instant: String,
    base_file: Option<String>,
    base_file_size: Option<u64>,
    log_files: Vec<(String, u64)>,
}

fn row_of(s: &FileSlice) -> Row {
    Row {
        partition: s.partition.clone(),
        file_id: s.file_id.clone(),
        base_instant: s.base_instant.to_string(),
        base_file: s.base_file.as_ref().map(|b| b.file_name()),
        base_file_size: s.base_file.as_ref().map(|b| b.size),
        log_files: s
            .log_files
            .iter()
            .map(|l| (l.file_name(), l.size))
            .collect(),
    }
}

fn rows_of(slices: &[FileSlice]) -> Vec<Row> {
    let mut v: Vec<Row> = slices.iter().map(row_of).collect();
    v.sort();
    v
}

/// The expected rows; `keep_log` filters log files (by name).
fn expected_rows(json: &Value, keep_log: impl Fn(&str) -> bool) -> Vec<Row> {
    let mut v: Vec<Row> = json["file_slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let names = s["log_files"].as_array().unwrap();
            let sizes = s["log_file_sizes"].as_array().unwrap();
            assert_eq!(names.len(), sizes.len());
            Row {
                partition: s["partition"].as_str().unwrap().to_string(),
                file_id: s["file_id"].as_str().unwrap().to_string(),
                base_instant: s["base_instant"].as_str().unwrap().to_string(),
                base_file: s["base_file"].as_str().map(str::to_string),
                base_file_size: s["base_file_size"].as_u64(),
                log_files: names
                    .iter()
                    .zip(sizes)
                    .map(|(n, z)| (n.as_str().unwrap().to_string(), z.as_u64().unwrap()))
                    .filter(|(n, _)| keep_log(n))
                    .collect(),
            }
        })
        .collect();
    v.sort();
    v
}

/// The deltacommit time in a log file name.
fn log_instant(name: &str) -> InstantTime {
    arbor_fsview::LogFile::parse(name, 0)
        .unwrap()
        .delta_commit_time
}

async fn open(base: &Path) -> FileSystemView {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(base).unwrap());
    FileSystemView::open(storage).await.unwrap()
}

/// Snapshot slices equal hudi-rs's for every fixture (names, base instants and sizes).
#[tokio::test]
async fn test_latest_file_slices_every_fixture_matches_expected_snapshot() {
    let Some(root) =
        fixtures_root_or_skip("test_latest_file_slices_every_fixture_matches_expected_snapshot")
    else {
        return;
    };
    let zips = fixture_zips(&root);
    assert_eq!(zips.len(), 30, "fixture count changed");
    for zip in zips {
        let dir = expected_dir(&root, &zip);
        let expected = expected_json(&dir, "snapshot.json")
            .unwrap_or_else(|| panic!("no snapshot.json for {}", zip.display()));
        let (_tmp, base) = unzip_table(&zip);
        let view = open(&base).await;
        let got = view.latest_file_slices(None, None).await.unwrap();
        assert_eq!(
            rows_of(&got),
            expected_rows(&expected, |_| true),
            "{}",
            zip.display()
        );
    }
}

/// Time travel (`asof_first`, `asof_prev`): the base files equal hudi-rs's; log files equal
/// hudi-rs's minus (v8+) those of deltacommits requested after `as_of`, which hudi-rs lists and
/// then filters block by block while reading.
#[tokio::test]
async fn test_latest_file_slices_as_of_every_fixture_matches_expected() {
    let Some(root) =
        fixtures_root_or_skip("test_latest_file_slices_as_of_every_fixture_matches_expected")
    else {
        return;
    };
    let mut compared = 0;
    let mut logs_dropped = 0;
    for zip in fixture_zips(&root) {
        let dir = expected_dir(&root, &zip);
        let (_tmp, base) = unzip_table(&zip);
        let view = open(&base).await;
        let v6 = view.layout().layout == LayoutVersion::V1;
        for name in ["asof_first.json", "asof_prev.json"] {
            let Some(expected) = expected_json(&dir, name) else {
                continue;
            };
            assert!(
                expected.get("file_slices").is_some(),
                "{}/{name} has no file_slices",
                dir.display()
            );
            let as_of = InstantTime::parse(expected["query"]["as_of"].as_str().unwrap()).unwrap();
            let got = view.latest_file_slices(None, Some(&as_of)).await.unwrap();
            let want = expected_rows(&expected, |n| v6 || log_instant(n) <= as_of);
            let unfiltered = expected_rows(&expected, |_| true);
            logs_dropped += unfiltered.iter().map(|r| r.log_files.len()).sum::<usize>()
                - want.iter().map(|r| r.log_files.len()).sum::<usize>();
            assert_eq!(rows_of(&got), want, "{}/{name}", dir.display());
            // Per partition gives the same slices.
            let mut by_partition = Vec::new();
            for p in view.partitions().await.unwrap().iter() {
                by_partition.extend(
                    view.latest_file_slices(Some(p), Some(&as_of))
                        .await
                        .unwrap(),
                );
            }
            assert_eq!(
                rows_of(&by_partition),
                rows_of(&got),
                "{}/{name}",
                dir.display()
            );
            compared += 1;
        }
    }
    assert!(compared >= 50, "only {compared} as-of files compared");
    assert!(
        logs_dropped > 0,
        "no fixture exercised the as-of log filter"
    );
}

/// Incremental (`incremental.json`, completion-time range `(start, end]`): the latest slices of
/// the file groups written in the range equal hudi-rs's.
#[tokio::test]
async fn test_completed_between_every_fixture_matches_expected_incremental() {
    let Some(root) =
        fixtures_root_or_skip("test_completed_between_every_fixture_matches_expected_incremental")
    else {
        return;
    };
    let mut compared = 0;
    for zip in fixture_zips(&root) {
        let dir = expected_dir(&root, &zip);
        let Some(expected) = expected_json(&dir, "incremental.json") else {
            continue;
        };
        let (_tmp, base) = unzip_table(&zip);
        let view = open(&base).await;
        let q = &expected["query"];
        let start = q["start"].as_str().map(|s| InstantTime::parse(s).unwrap());
        let end = q["end"].as_str().map(|s| InstantTime::parse(s).unwrap());
        let inc = view
            .completed_between(start.as_ref(), end.as_ref())
            .await
            .unwrap();
        assert!(!inc.instants.is_empty(), "{}", dir.display());
        assert_eq!(
            rows_of(&inc.file_slices),
            expected_rows(&expected, |_| true),
            "{}",
            dir.display()
        );
        compared += 1;
    }
    assert!(compared >= 25, "only {compared} incremental files compared");
}
