//! The rule that says which location holds a file of a shallow clone (`docs/clones.md`).
//!
//! A clone's sources are listed nearest first, each with the instant the clone references
//! there: `(L0, t0), (L1, t1), ..., (Ln, tn)` with `t0 >= t1 >= ... >= tn` (`L0` is the table
//! the clone was made from at `t0`; `L1` is the table `L0` was made from, at `t1`; ...). Every
//! table's clock issues only instants after its own clone point, and Hudi names every data and
//! metadata-table file by the instant that wrote it (base files `<id>_<token>_<instant>.<ext>`,
//! log files `.<id>_<instant>.log.<version>_<token>`). So a shared file (a data file, or a file of
//! a metadata-table partition) named by instant `x`:
//!
//! - lives in the clone itself when `x > t0`;
//! - else in `Lk`, the farthest source with `x <= tk` (the files `Lk` wrote are exactly those
//!   with `t(k+1) < x <= tk`).
//!
//! Instants compare on their first 17 digits (milliseconds), so Hudi 0.x's suffixed
//! metadata-table instants (`<t>001`) fall where `<t>` does. Two kinds of keys have no useful
//! instant and are **searched**, nearest first (the clone itself, then `L0`, `L1`, ...): keys
//! without one (partition markers) and the metadata table's initialisation instants
//! (`00000000000000000`, `00000000000000001`, ...: every table uses the same ones). Metadata
//! (anything else below `.hoodie/`) is always the clone's own.

use crate::instant::InstantTime;
use crate::layout::paths::{DEFAULT_META_DIR, MDT_BASE, MDT_META_DIR};

/// Where a key of a clone lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// In the clone's own location.
    Own,
    /// In source `i` (an index into the sources, nearest first).
    Source(usize),
    /// Search: the clone's own location first, then each source, nearest first.
    Search,
}

/// The instants a clone references, nearest source first (see the module documentation).
#[derive(Debug, Clone)]
pub struct CloneRule {
    points: Vec<String>,
}

/// True for keys of shared files: data files (outside `.hoodie/`) and files of the metadata
/// table's partitions (below `.hoodie/metadata/`, outside its own `.hoodie/`).
pub fn is_shared_file(key: &str) -> bool {
    if below(key, MDT_META_DIR) {
        return false;
    }
    if below(key, MDT_BASE) {
        return key != MDT_BASE;
    }
    !below(key, DEFAULT_META_DIR)
}

/// True for keys of the metadata table's partitions (below `.hoodie/metadata/`, outside its
/// own `.hoodie/`): the part of a clone whose listings include its sources' files.
pub fn is_mdt_file(key: &str) -> bool {
    below(key, MDT_BASE) && key != MDT_BASE && !below(key, MDT_META_DIR)
}

fn below(key: &str, dir: &str) -> bool {
    key == dir
        || key
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The instant a Hudi data or metadata-table file name carries: `<instant>` of a base file
/// `<fileId>_<writeToken>_<instant>.<ext>` or of a log file
/// `.<fileId>_<instant>.log.<version>[_<writeToken>][.cdc]`; `None` for any other name.
pub fn file_name_instant(name: &str) -> Option<&str> {
    let candidate = if let Some(rest) = name.strip_prefix('.') {
        let (head, _) = rest.split_once(".log.")?;
        head.rsplit_once('_')?.1
    } else {
        let (stem, _ext) = name.split_once('.')?;
        stem.rsplit_once('_')?.1
    };
    let digits = candidate.len() >= 14 && candidate.bytes().all(|b| b.is_ascii_digit());
    digits.then_some(candidate)
}

/// The first 17 characters of an instant (the millisecond time), as instants compare here.
fn ms(instant: &str) -> &str {
    instant.get(..17).unwrap_or(instant)
}

/// True for the metadata table's initialisation instants (year 0: shared by every table).
fn is_init_instant(instant: &str) -> bool {
    instant.starts_with("0000")
}

impl CloneRule {
    /// The rule of a clone whose sources reference `points`, nearest first (non-increasing;
    /// [`super::clone_records::CloneDescriptor::from_bytes`] checks it).
    pub fn new(points: &[InstantTime]) -> Self {
        CloneRule {
            points: points.iter().map(|t| t.as_str().to_string()).collect(),
        }
    }

    /// Where `key` (relative to the table base) lives.
    pub fn home(&self, key: &str) -> Home {
        if !is_shared_file(key) || self.points.is_empty() {
            return Home::Own;
        }
        let name = key.rsplit('/').next().unwrap_or(key);
        let Some(x) = file_name_instant(name) else {
            return Home::Search;
        };
        if is_init_instant(x) {
            return Home::Search;
        }
        let x = ms(x);
        let mut home = Home::Own;
        for (i, t) in self.points.iter().enumerate() {
            if x <= ms(t) {
                home = Home::Source(i);
            } else {
                break;
            }
        }
        home
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> InstantTime {
        InstantTime::parse(s).unwrap()
    }

    const FID: &str = "0d9b1c4e-1f2a-4b3c-8d4e-5f6a7b8c9d0e-0";

    #[test]
    fn test_file_name_instant_of_base_log_and_other_names() {
        assert_eq!(
            file_name_instant(&format!("{FID}_0-1-0_20261202000000100.parquet")),
            Some("20261202000000100")
        );
        assert_eq!(
            file_name_instant(&format!(".{FID}_20261202000000100.log.1_0-1-0")),
            Some("20261202000000100")
        );
        assert_eq!(
            file_name_instant("files-0000-0_0-0-0_00000000000000000.hfile"),
            Some("00000000000000000")
        );
        assert_eq!(file_name_instant(".hoodie_partition_metadata"), None);
        assert_eq!(file_name_instant("notes.txt"), None);
    }

    #[test]
    fn test_home_of_a_chain_follows_the_writing_instant() {
        // clone <- c1 at 300 <- s at 100 (c1 was cloned from s at 100).
        let rule = CloneRule::new(&[t("20261202000000300"), t("20261202000000100")]);
        let base = |i: &str| format!("p=1/{FID}_0-1-0_{i}.parquet");
        assert_eq!(rule.home(&base("20261202000000400")), Home::Own);
        assert_eq!(rule.home(&base("20261202000000300")), Home::Source(0));
        assert_eq!(rule.home(&base("20261202000000200")), Home::Source(0));
        assert_eq!(rule.home(&base("20261202000000100")), Home::Source(1));
        assert_eq!(rule.home(&base("20261202000000050")), Home::Source(1));
        // A suffixed 0.x MDT instant falls where its time does.
        assert_eq!(
            rule.home(".hoodie/metadata/files/files-0000-0_0-1-0_20261202000000100001.hfile"),
            Home::Source(1)
        );
        assert_eq!(
            rule.home(".hoodie/metadata/files/files-0000-0_0-0-0_00000000000000000.hfile"),
            Home::Search
        );
        assert_eq!(rule.home("p=1/.hoodie_partition_metadata"), Home::Search);
        for own in [
            ".hoodie/hoodie.properties",
            ".hoodie/timeline/20261202000000100.commit",
            ".hoodie/metadata/.hoodie/timeline/20261202000000100.deltacommit",
            ".hoodie/.locks/table_lock.json",
            ".hoodie/metadata",
        ] {
            assert_eq!(rule.home(own), Home::Own, "{own}");
        }
    }

    #[test]
    fn test_equal_points_give_the_middle_table_nothing() {
        // c1 was cloned from s at 100 and the clone from c1 at 100 as well.
        let rule = CloneRule::new(&[t("20261202000000100"), t("20261202000000100")]);
        let base = format!("p=1/{FID}_0-1-0_20261202000000100.parquet");
        assert_eq!(rule.home(&base), Home::Source(1));
    }

    #[test]
    fn test_is_shared_and_mdt_file() {
        assert!(is_shared_file("p=1/x.parquet"));
        assert!(is_shared_file(".hoodie/metadata/files/x.hfile"));
        assert!(!is_shared_file(
            ".hoodie/metadata/.hoodie/hoodie.properties"
        ));
        assert!(!is_shared_file(".hoodie/clone.json"));
        assert!(is_mdt_file(".hoodie/metadata/files/x.hfile"));
        assert!(!is_mdt_file("p=1/x.parquet"));
        assert!(!is_mdt_file(".hoodie/metadata"));
    }
}
