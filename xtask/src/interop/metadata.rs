//! The metadata-table checks of a scenario.
//!
//! - After every step, `arbor_mdt::validate::validate_table` on the copy of the table taken
//!   right after the step (the last one is the final table): the FILES partition lists exactly
//!   the committed data files on storage ([`validate_dir`]). A table created with
//!   `--no-metadata-table` must have no metadata table instead.
//! - Once per scenario, the proof that hudi-rs lists files through arbor's FILES partition (spec
//!   6.6): in a copy of the final table the metadata table's completed deltacommit of the latest
//!   data instant T that wrote files is deleted ([`hide_latest_instant`]). `validate_table` must
//!   then report exactly T's files as missing from the metadata table, and hudi-rs must plan no
//!   file slice with a file of T in the copy while it plans every file of T in the original
//!   ([`decide_hidden`], with the slices `peer::file_slices` returns).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_mdt::validate::{storage_listing, validate_table, FilesDiscrepancy};
use arbor_storage::{ObjectStoreStorage, Storage};

use super::scenario::{copy_dir, Outcome};

/// How many discrepancies a failure message shows.
const SHOWN: usize = 5;

fn local_storage(dir: &Path) -> Result<Arc<dyn Storage>, String> {
    Ok(Arc::new(ObjectStoreStorage::local(dir).map_err(|e| {
        format!("storage at {}: {e}", dir.display())
    })?))
}

/// The first [`SHOWN`] discrepancies, `; `-separated, and how many more there are.
fn describe(discrepancies: &[FilesDiscrepancy]) -> String {
    let mut text: Vec<String> = discrepancies
        .iter()
        .take(SHOWN)
        .map(ToString::to_string)
        .collect();
    if discrepancies.len() > SHOWN {
        text.push(format!("and {} more", discrepancies.len() - SHOWN));
    }
    text.join("; ")
}

/// Validates the table at `dir`. With `expect_mdt`, the table must have a metadata table whose
/// FILES partition agrees with storage on every committed data file (and there must be files to
/// compare); without, the table must have no metadata table.
pub async fn validate_dir(dir: &Path, expect_mdt: bool) -> Result<(), String> {
    let report = validate_table(local_storage(dir)?)
        .await
        .map_err(|e| format!("validate_table {}: {e}", dir.display()))?;
    match (expect_mdt, report.has_metadata_table) {
        (true, false) => return Err("the table has no metadata table".to_string()),
        (false, true) => {
            return Err("the table has a metadata table although created without one".to_string())
        }
        (false, false) => return Ok(()),
        (true, true) => {}
    }
    if !report.discrepancies.is_empty() {
        return Err(format!(
            "validate_table: {} discrepancies: {}",
            report.discrepancies.len(),
            describe(&report.discrepancies)
        ));
    }
    if report.storage_files == 0 {
        return Err("validate_table compared no committed data file".to_string());
    }
    Ok(())
}

/// A copy of a scenario's final table whose metadata table no longer has the completed
/// deltacommit of data instant `instant`.
#[derive(Debug, Clone)]
pub struct HiddenInstant {
    /// T, the requested time of the hidden data instant.
    pub instant: String,
    /// The final table, untouched.
    pub original: PathBuf,
    /// The copy without T's metadata-table deltacommit.
    pub copy: PathBuf,
    /// Names of the data files on storage that carry T (T's new files).
    pub files: BTreeSet<String>,
}

/// Copies the final table of `outcome` to `copy`, deletes there the metadata table's completed
/// deltacommit of the latest completed data instant T that wrote files, and checks that
/// `validate_table` on the copy reports exactly T's files, each as missing from the metadata
/// table.
pub async fn hide_latest_instant(outcome: &Outcome, copy: &Path) -> Result<HiddenInstant, String> {
    let listing = storage_listing(local_storage(&outcome.table_dir)?)
        .await
        .map_err(|e| format!("listing {}: {e}", outcome.table_dir.display()))?;
    let all: Vec<(&String, &String)> = listing
        .iter()
        .flat_map(|(p, files)| files.keys().map(move |n| (p, n)))
        .collect();
    let instant = outcome
        .instants
        .iter()
        .rev()
        .map(|r| r.instant.clone())
        .find(|t| all.iter().any(|(_, n)| n.contains(t.as_str())))
        .ok_or("no completed instant wrote a data file")?;
    let carries_t: Vec<(&String, &String)> = all
        .into_iter()
        .filter(|(_, n)| n.contains(instant.as_str()))
        .collect();
    copy_dir(&outcome.table_dir, copy)?;
    let timeline = copy.join(".hoodie/metadata/.hoodie/timeline");
    let entries = std::fs::read_dir(&timeline)
        .map_err(|e| format!("cannot list {}: {e}", timeline.display()))?;
    let mut removed = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", timeline.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{instant}_")) && name.ends_with(".deltacommit") {
            std::fs::remove_file(entry.path())
                .map_err(|e| format!("cannot delete {}: {e}", entry.path().display()))?;
            removed.push(name);
        }
    }
    if removed.len() != 1 {
        return Err(format!(
            "expected one completed metadata-table deltacommit of {instant} in {}, found {removed:?}",
            timeline.display()
        ));
    }
    let report = validate_table(local_storage(copy)?)
        .await
        .map_err(|e| format!("validate_table {}: {e}", copy.display()))?;
    let expected: Vec<FilesDiscrepancy> = carries_t
        .iter()
        .map(|(p, n)| FilesDiscrepancy::MissingFromMdt {
            partition: (*p).clone(),
            file: (*n).clone(),
        })
        .collect();
    expect_discrepancies(&instant, &expected, &report.discrepancies)?;
    Ok(HiddenInstant {
        instant,
        original: outcome.table_dir.clone(),
        copy: copy.to_path_buf(),
        files: carries_t.into_iter().map(|(_, n)| n.clone()).collect(),
    })
}

/// `found` (validate_table's discrepancies) is exactly `expected` (T's files, missing from the
/// metadata table), in any order.
fn expect_discrepancies(
    instant: &str,
    expected: &[FilesDiscrepancy],
    found: &[FilesDiscrepancy],
) -> Result<(), String> {
    let expected: BTreeSet<&FilesDiscrepancy> = expected.iter().collect();
    let found: BTreeSet<&FilesDiscrepancy> = found.iter().collect();
    if expected == found {
        return Ok(());
    }
    let missing: Vec<FilesDiscrepancy> =
        expected.difference(&found).map(|d| (*d).clone()).collect();
    let extra: Vec<FilesDiscrepancy> = found.difference(&expected).map(|d| (*d).clone()).collect();
    Err(format!(
        "with {instant}'s metadata-table deltacommit deleted, validate_table should report exactly \
         its {} files as missing from the metadata table; not reported: [{}]; reported besides: [{}]",
        expected.len(),
        describe(&missing),
        describe(&extra)
    ))
}

/// Decides the hidden-instant proof from the file names hudi-rs plans for a snapshot of the
/// original table and of the copy: every file of T in the original, none in the copy (which
/// must still plan some files).
pub fn decide_hidden(
    hidden: &HiddenInstant,
    original: &[String],
    copy: &[String],
) -> Result<(), String> {
    let t = hidden.instant.as_str();
    let mut problems = Vec::new();
    let listed: BTreeSet<String> = original.iter().filter(|n| n.contains(t)).cloned().collect();
    if listed != hidden.files {
        let absent: Vec<&String> = hidden.files.difference(&listed).collect();
        let unknown: Vec<&String> = listed.difference(&hidden.files).collect();
        problems.push(format!(
            "hudi-rs on the original table does not plan exactly {t}'s files: absent {absent:?}, \
             not on storage {unknown:?}"
        ));
    }
    let leaked: Vec<&String> = copy.iter().filter(|n| n.contains(t)).collect();
    if !leaked.is_empty() {
        problems.push(format!(
            "hudi-rs still plans files of {t} with its metadata-table deltacommit deleted (it does \
             not list through FILES): {leaked:?}"
        ));
    }
    if copy.is_empty() {
        problems.push(format!(
            "hudi-rs plans no file slice at all with {t}'s metadata-table deltacommit deleted"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::super::scenario::{self, Partitioning, Scenario};
    use super::*;
    use arbor_timeline::config::TableType;

    const T: &str = "20260101000000002";

    fn hidden(files: &[&str]) -> HiddenInstant {
        HiddenInstant {
            instant: T.to_string(),
            original: PathBuf::from("orig"),
            copy: PathBuf::from("copy"),
            files: files.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn test_decide_hidden_t_files_only_in_original_ok() {
        let h = hidden(&["f1_0-0-0_20260101000000002.parquet"]);
        let original = names(&[
            "f1_0-0-0_20260101000000002.parquet",
            "f2_0-0-0_20260101000000001.parquet",
        ]);
        let copy = names(&[
            "f1_0-0-0_20260101000000001.parquet",
            "f2_0-0-0_20260101000000001.parquet",
        ]);
        assert_eq!(decide_hidden(&h, &original, &copy), Ok(()));
    }

    #[test]
    fn test_decide_hidden_t_file_planned_in_copy_error() {
        let h = hidden(&[".f1_20260101000000002.log.1_0-0-0"]);
        let original = names(&[".f1_20260101000000002.log.1_0-0-0"]);
        let e = decide_hidden(&h, &original, &original).unwrap_err();
        assert!(e.contains("does not list through FILES"), "{e}");
    }

    #[test]
    fn test_decide_hidden_t_file_absent_from_original_error() {
        let h = hidden(&[
            "f1_0-0-0_20260101000000002.parquet",
            "f3_0-0-0_20260101000000002.parquet",
        ]);
        let original = names(&["f1_0-0-0_20260101000000002.parquet"]);
        let copy = names(&["f1_0-0-0_20260101000000001.parquet"]);
        let e = decide_hidden(&h, &original, &copy).unwrap_err();
        assert!(
            e.contains("absent [\"f3_0-0-0_20260101000000002.parquet\"]"),
            "{e}"
        );
    }

    #[test]
    fn test_decide_hidden_copy_plans_nothing_error() {
        let h = hidden(&["f1_0-0-0_20260101000000002.parquet"]);
        let original = names(&["f1_0-0-0_20260101000000002.parquet"]);
        let e = decide_hidden(&h, &original, &[]).unwrap_err();
        assert!(e.contains("no file slice at all"), "{e}");
    }

    #[test]
    fn test_expect_discrepancies_extra_size_mismatch_error() {
        let missing = FilesDiscrepancy::MissingFromMdt {
            partition: "a".to_string(),
            file: "f".to_string(),
        };
        let other = FilesDiscrepancy::SizeMismatch {
            partition: "a".to_string(),
            file: "g".to_string(),
            mdt: 1,
            storage: 2,
        };
        assert_eq!(
            expect_discrepancies(
                T,
                std::slice::from_ref(&missing),
                std::slice::from_ref(&missing)
            ),
            Ok(())
        );
        let e = expect_discrepancies(T, std::slice::from_ref(&missing), &[missing.clone(), other])
            .unwrap_err();
        assert!(
            e.contains("reported besides: [files: a/g has size 1"),
            "{e}"
        );
        let e = expect_discrepancies(T, std::slice::from_ref(&missing), &[]).unwrap_err();
        assert!(e.contains("not reported: [files: a/f is committed"), "{e}");
    }

    /// A whole scenario with the metadata table: every step validates, and hiding the last
    /// instant is reported by validate_table as exactly that instant's files.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn test_hide_latest_instant_cow_plain_reports_t_files() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Scenario {
            table_type: TableType::CopyOnWrite,
            partitioning: Partitioning::Plain,
            late_arrivals: false,
            metadata_table: true,
            table_version: Default::default(),
            base_format: arbor_table::BaseFormat::Parquet,
        };
        let outcome = scenario::run(s, tmp.path()).await;
        assert!(outcome.failure.is_none(), "{:?}", outcome.failure);
        for rec in &outcome.instants {
            assert_eq!(
                validate_dir(&rec.copy, true).await,
                Ok(()),
                "{}",
                rec.instant
            );
        }
        assert!(validate_dir(&outcome.table_dir, false).await.is_err());
        let copy = tmp.path().join("hidden");
        let h = hide_latest_instant(&outcome, &copy).await.unwrap();
        let last = outcome.instants.last().unwrap();
        assert_eq!(h.instant, last.instant);
        assert!(!h.files.is_empty());
        assert!(h.files.iter().all(|n| n.contains(&last.instant)));
        // The copy now disagrees with storage, so plain validation fails on it.
        let e = validate_dir(&copy, true).await.unwrap_err();
        assert!(e.contains("missing from the metadata table"), "{e}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn test_validate_dir_no_metadata_table_expected_absent_ok() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Scenario {
            table_type: TableType::MergeOnRead,
            partitioning: Partitioning::None,
            late_arrivals: false,
            metadata_table: false,
            table_version: Default::default(),
            base_format: arbor_table::BaseFormat::Parquet,
        };
        let outcome = scenario::run(s, tmp.path()).await;
        assert!(outcome.failure.is_none(), "{:?}", outcome.failure);
        assert_eq!(validate_dir(&outcome.table_dir, false).await, Ok(()));
        let e = validate_dir(&outcome.table_dir, true).await.unwrap_err();
        assert_eq!(e, "the table has no metadata table");
        assert!(hide_latest_instant(&outcome, &tmp.path().join("hidden"))
            .await
            .is_err());
    }
}
