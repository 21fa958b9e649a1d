//! Data file names (hudi-format §4.1): base files `<fileId>_<writeToken>_<instant>.<ext>` and log
//! files `.<fileId>_<instant>.log.<version>[_<writeToken>][.cdc]`, parsed and rendered both ways.

use std::cmp::Ordering;
use std::fmt;

use arbor_timeline::InstantTime;

use crate::error::{FsViewError, Result};

/// Base file extensions the view recognises: `parquet` (data), `hfile` (metadata table), `lance`
/// (hudi-rs extension; listed but not readable by arbor), `orc` (Java only).
pub const BASE_FILE_EXTENSIONS: [&str; 4] = ["parquet", "hfile", "lance", "orc"];

/// Prefix of the partition marker files (`.hoodie_partition_metadata`, and its base-format
/// variants such as `.hoodie_partition_metadata.parquet`).
pub const PARTITION_METADATA_PREFIX: &str = ".hoodie_partition_metadata";

/// A base file: the columnar file that starts a file slice.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BaseFile {
    /// The file group id (`<uuid>-<n>`; never contains `_`).
    pub file_id: String,
    /// The write token `<task>-<stage>-<attempt>`.
    pub write_token: String,
    /// The instant that wrote the file (insert, rewrite, compaction or clustering).
    pub instant_time: InstantTime,
    /// The extension without the dot (`parquet`, `hfile`, `lance`, `orc`).
    pub extension: String,
    /// Size in bytes (0 when unknown, e.g. for a name parsed without listing).
    pub size: u64,
}

impl BaseFile {
    /// Parses a base file name (no directory part). `size` is recorded as given.
    ///
    /// Fails with [`FsViewError::InvalidFileName`] unless the name is
    /// `<fileId>_<d+-d+-d+>_<instant>.<known extension>` with a non-empty file id without `_`
    /// and a valid instant time.
    pub fn parse(name: &str, size: u64) -> Result<Self> {
        let bad = |reason: &str| FsViewError::file_name(name, reason);
        let (stem, extension) = name.rsplit_once('.').ok_or_else(|| bad("no extension"))?;
        if !BASE_FILE_EXTENSIONS.contains(&extension) {
            return Err(bad("not a base file extension"));
        }
        let mut parts = stem.split('_');
        let (Some(file_id), Some(write_token), Some(instant), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("expected <fileId>_<writeToken>_<instant>"));
        };
        check_file_id(name, file_id)?;
        check_write_token(name, write_token)?;
        let instant_time =
            InstantTime::parse(instant).map_err(|e| bad(&format!("bad instant time: {e}")))?;
        Ok(BaseFile {
            file_id: file_id.to_string(),
            write_token: write_token.to_string(),
            instant_time,
            extension: extension.to_string(),
            size,
        })
    }

    /// The file name: `<fileId>_<writeToken>_<instant>.<ext>`.
    pub fn file_name(&self) -> String {
        format!(
            "{}_{}_{}.{}",
            self.file_id, self.write_token, self.instant_time, self.extension
        )
    }
}

impl fmt::Display for BaseFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file_name())
    }
}

/// A log file of a merge-on-read file group.
///
/// Ordered (within one file group) by delta-commit time, then version, then write token, as
/// Hudi orders log files of a slice.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LogFile {
    /// The file group id.
    pub file_id: String,
    /// The instant in the name: for table version 8 and later the deltacommit that wrote the
    /// file; for version 6 the base instant of the slice the file belongs to.
    pub delta_commit_time: InstantTime,
    /// The log version (starts at 1).
    pub version: u32,
    /// The write token `<task>-<stage>-<attempt>`, when the name has one.
    pub write_token: Option<String>,
    /// True for CDC log files (`.cdc` suffix).
    pub cdc: bool,
    /// Size in bytes (0 when unknown).
    pub size: u64,
}

impl LogFile {
    /// Parses a log file name (no directory part). `size` is recorded as given.
    ///
    /// Accepts `.<fileId>_<instant>.log.<version>[_<d+-d+-d+>][.cdc]` (Hudi's log regex with
    /// the `log` extension); anything else fails with [`FsViewError::InvalidFileName`].
    pub fn parse(name: &str, size: u64) -> Result<Self> {
        let bad = |reason: &str| FsViewError::file_name(name, reason);
        let rest = name
            .strip_prefix('.')
            .ok_or_else(|| bad("a log file name starts with '.'"))?;
        let (head, tail) = rest
            .split_once(".log.")
            .ok_or_else(|| bad("no '.log.' in the name"))?;
        let (file_id, instant) = head
            .rsplit_once('_')
            .ok_or_else(|| bad("expected .<fileId>_<instant>.log.<version>"))?;
        check_file_id(name, file_id)?;
        let delta_commit_time =
            InstantTime::parse(instant).map_err(|e| bad(&format!("bad instant time: {e}")))?;
        let (tail, cdc) = match tail.strip_suffix(".cdc") {
            Some(t) => (t, true),
            None => (tail, false),
        };
        let (version, write_token) = match tail.split_once('_') {
            Some((v, token)) => (v, Some(token)),
            None => (tail, None),
        };
        if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("the log version is not a number"));
        }
        let version: u32 = version
            .parse()
            .map_err(|_| bad("the log version is out of range"))?;
        if let Some(token) = write_token {
            check_write_token(name, token)?;
        }
        Ok(LogFile {
            file_id: file_id.to_string(),
            delta_commit_time,
            version,
            write_token: write_token.map(str::to_string),
            cdc,
            size,
        })
    }

    /// The file name: `.<fileId>_<instant>.log.<version>[_<writeToken>][.cdc]`.
    pub fn file_name(&self) -> String {
        let mut s = format!(
            ".{}_{}.log.{}",
            self.file_id, self.delta_commit_time, self.version
        );
        if let Some(t) = &self.write_token {
            s.push('_');
            s.push_str(t);
        }
        if self.cdc {
            s.push_str(".cdc");
        }
        s
    }
}

impl fmt::Display for LogFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file_name())
    }
}

impl PartialOrd for LogFile {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for LogFile {
    fn cmp(&self, other: &Self) -> Ordering {
        self.file_id
            .cmp(&other.file_id)
            .then_with(|| self.delta_commit_time.cmp(&other.delta_commit_time))
            .then_with(|| self.version.cmp(&other.version))
            .then_with(|| self.write_token.cmp(&other.write_token))
            .then_with(|| self.cdc.cmp(&other.cdc))
            .then_with(|| self.size.cmp(&other.size))
    }
}

/// A parsed data file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataFile {
    /// A base file.
    Base(BaseFile),
    /// A log file.
    Log(LogFile),
}

impl DataFile {
    /// The file group id.
    pub fn file_id(&self) -> &str {
        match self {
            DataFile::Base(b) => &b.file_id,
            DataFile::Log(l) => &l.file_id,
        }
    }

    /// The instant in the name.
    pub fn instant_time(&self) -> &InstantTime {
        match self {
            DataFile::Base(b) => &b.instant_time,
            DataFile::Log(l) => &l.delta_commit_time,
        }
    }

    /// The file name.
    pub fn file_name(&self) -> String {
        match self {
            DataFile::Base(b) => b.file_name(),
            DataFile::Log(l) => l.file_name(),
        }
    }
}

/// True for names a partition directory may hold that are not data files and are skipped
/// without a diagnostic: partition markers (`.hoodie_partition_metadata*`), checksum files
/// (`*.crc`) and in-progress temporary files (`*.tmp`, `*.inprogress`, names containing `#` as
/// object_store's local staging files do).
pub fn is_non_data_file(name: &str) -> bool {
    name.starts_with(PARTITION_METADATA_PREFIX)
        || name.ends_with(".crc")
        || name.ends_with(".tmp")
        || name.ends_with(".inprogress")
        || name.contains('#')
}

/// Classifies one file name of a partition directory: `Ok(None)` for names that are not data
/// files ([`is_non_data_file`]), a base file when the extension is a base file extension, a log
/// file otherwise; `Err` for names that look like neither.
pub fn parse_data_file_name(name: &str, size: u64) -> Result<Option<DataFile>> {
    if is_non_data_file(name) {
        return Ok(None);
    }
    let is_base = name
        .rsplit_once('.')
        .is_some_and(|(_, ext)| BASE_FILE_EXTENSIONS.contains(&ext));
    if is_base && !name.starts_with('.') {
        BaseFile::parse(name, size).map(|b| Some(DataFile::Base(b)))
    } else {
        LogFile::parse(name, size).map(|l| Some(DataFile::Log(l)))
    }
}

fn check_file_id(name: &str, file_id: &str) -> Result<()> {
    if file_id.is_empty() {
        return Err(FsViewError::file_name(name, "empty file id"));
    }
    if file_id.contains(['_', '/']) {
        return Err(FsViewError::file_name(
            name,
            "a file id must not contain '_' or '/'",
        ));
    }
    Ok(())
}

fn check_write_token(name: &str, token: &str) -> Result<()> {
    let mut parts = token.split('-');
    let ok = (0..3).all(|_| {
        parts
            .next()
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    }) && parts.next().is_none();
    if ok {
        Ok(())
    } else {
        Err(FsViewError::file_name(
            name,
            format!("write token {token:?} is not <int>-<int>-<int>"),
        ))
    }
}

/// The file id a data file's name starts with, by Hudi's own rules, without parsing the rest:
/// a base file `<fileId>_<writeToken>_<instant>.<ext>` splits at its first `_`
/// (`FSUtils.getFileId`); a log file `.<fileId>_<instant>.log.<version>[_<token>]` at the last
/// `_` before `.log.` (the greedy group of Java's log file pattern). `None` when the name has
/// neither shape (it is then parsed in full).
pub(crate) fn file_id_hint(name: &str) -> Option<&str> {
    match name.strip_prefix('.') {
        Some(rest) => {
            let end = rest.find(".log.").or_else(|| rest.find(".archive."))?;
            rest.get(..end)?.rsplit_once('_').map(|(id, _)| id)
        }
        None => name.split_once('_').map(|(id, _)| id),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
    use super::*;

    const FID: &str = "3e93c8a9-fda0-4e8a-91dc-b4ade7dab76d-0";

    #[test]
    fn test_base_file_parse_spark_name_round_trips() {
        let name = "c923cb31-a2d3-49c6-8f47-4be96502c239-0_0-27-52_20260307162557587.parquet";
        let b = BaseFile::parse(name, 42).unwrap();
        assert_eq!(b.file_id, "c923cb31-a2d3-49c6-8f47-4be96502c239-0");
        assert_eq!(b.write_token, "0-27-52");
        assert_eq!(b.instant_time.as_str(), "20260307162557587");
        assert_eq!(b.extension, "parquet");
        assert_eq!(b.size, 42);
        assert_eq!(b.file_name(), name);
    }

    #[test]
    fn test_base_file_parse_lance_and_hfile_accepted() {
        for ext in ["lance", "hfile", "orc"] {
            let name = format!("{FID}_1-2-3_20250101000000000.{ext}");
            assert_eq!(BaseFile::parse(&name, 0).unwrap().extension, ext);
        }
    }

    #[test]
    fn test_base_file_parse_malformed_rejected() {
        for bad in [
            "x.parquet",
            "a_b.parquet",
            "a_1-2-3_20250101000000000_x.parquet",
            "a_b_1-2-3_20250101000000000.parquet",
            "_1-2-3_20250101000000000.parquet",
            "a_1-2_20250101000000000.parquet",
            "a_1-2-x_20250101000000000.parquet",
            "a_1-2-3_2025.parquet",
            "a_1-2-3_20250101000000000.csv",
            "a_1-2-3_20250101000000000",
        ] {
            assert!(BaseFile::parse(bad, 0).is_err(), "{bad}");
        }
    }

    #[test]
    fn test_log_file_parse_v8_name_round_trips() {
        let name = format!(".{FID}_20260307162604102.log.1_0-52-126");
        let l = LogFile::parse(&name, 7).unwrap();
        assert_eq!(l.file_id, FID);
        assert_eq!(l.delta_commit_time.as_str(), "20260307162604102");
        assert_eq!(l.version, 1);
        assert_eq!(l.write_token.as_deref(), Some("0-52-126"));
        assert!(!l.cdc);
        assert_eq!(l.file_name(), name);
    }

    #[test]
    fn test_log_file_parse_optional_token_and_cdc_round_trip() {
        for name in [
            format!(".{FID}_20260307162604102.log.12"),
            format!(".{FID}_20260307162604102.log.3_1-2-3.cdc"),
            format!(".{FID}_20240418173551906.log.2_0-1-0"),
        ] {
            let l = LogFile::parse(&name, 0).unwrap();
            assert_eq!(l.file_name(), name);
        }
        let cdc = LogFile::parse(&format!(".{FID}_20260307162604102.log.3_1-2-3.cdc"), 0).unwrap();
        assert!(cdc.cdc);
        assert_eq!(cdc.version, 3);
    }

    #[test]
    fn test_log_file_parse_malformed_rejected() {
        for bad in [
            format!("{FID}_20260307162604102.log.1_0-52-126"),
            format!(".{FID}_20260307162604102.log._0-52-126"),
            format!(".{FID}_20260307162604102.log.x_0-52-126"),
            format!(".{FID}_2026.log.1_0-52-126"),
            format!(".{FID}.log.1_0-52-126"),
            format!(".{FID}_20260307162604102.log.1_0-52"),
            ".a_b_20260307162604102.log.1_0-52-126".to_string(),
            format!(".{FID}_20260307162604102.archive.1_0-52-126"),
        ] {
            assert!(LogFile::parse(&bad, 0).is_err(), "{bad}");
        }
    }

    #[test]
    fn test_parse_data_file_name_non_data_files_skipped() {
        for name in [
            ".hoodie_partition_metadata",
            ".hoodie_partition_metadata.parquet",
            ".x.parquet.crc",
            "part.tmp",
            "abc#1",
        ] {
            assert_eq!(parse_data_file_name(name, 0).unwrap(), None, "{name}");
        }
    }

    #[test]
    fn test_parse_data_file_name_classifies_base_and_log() {
        let base = format!("{FID}_0-1-2_20250101000000000.parquet");
        assert!(matches!(
            parse_data_file_name(&base, 0).unwrap(),
            Some(DataFile::Base(_))
        ));
        let log = format!(".{FID}_20250101000000000.log.1_0-1-2");
        assert!(matches!(
            parse_data_file_name(&log, 0).unwrap(),
            Some(DataFile::Log(_))
        ));
        assert!(parse_data_file_name("README.md", 0).is_err());
    }

    #[test]
    fn test_log_file_ord_by_time_then_version_then_token() {
        let mk = |t: &str, v: u32, tok: &str| LogFile {
            file_id: FID.into(),
            delta_commit_time: InstantTime::parse(t).unwrap(),
            version: v,
            write_token: Some(tok.into()),
            cdc: false,
            size: 0,
        };
        let mut v = [
            mk("20250101000000002", 1, "0-1-1"),
            mk("20250101000000001", 2, "0-1-1"),
            mk("20250101000000001", 1, "1-1-1"),
            mk("20250101000000001", 1, "0-1-1"),
        ];
        v.sort();
        let names: Vec<(String, u32, String)> = v
            .iter()
            .map(|l| {
                (
                    l.delta_commit_time.to_string(),
                    l.version,
                    l.write_token.clone().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                ("20250101000000001".into(), 1, "0-1-1".into()),
                ("20250101000000001".into(), 1, "1-1-1".into()),
                ("20250101000000001".into(), 2, "0-1-1".into()),
                ("20250101000000002".into(), 1, "0-1-1".into()),
            ]
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use proptest::sample::select;

        fn instant() -> impl Strategy<Value = String> {
            (
                2000u32..2100,
                1u32..13,
                1u32..29,
                0u32..24,
                0u32..60,
                0u32..60,
                0u32..1000,
            )
                .prop_map(|(y, mo, d, h, mi, s, ms)| {
                    format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}{ms:03}")
                })
        }

        proptest! {
            #[test]
            fn test_names_render_parse_round_trip(
                fid in "[a-f0-9]{8}-[a-f0-9]{4}-[0-9]{1,3}",
                tt in instant(),
                a in 0u32..1000, b in 0u32..1000, c in 0u32..100000,
                version in 1u32..50,
                cdc in any::<bool>(),
                ext in select(BASE_FILE_EXTENSIONS.to_vec()),
            ) {
                let token = format!("{a}-{b}-{c}");
                let base = BaseFile {
                    file_id: fid.clone(),
                    write_token: token.clone(),
                    instant_time: InstantTime::parse(&tt).unwrap(),
                    extension: ext.to_string(),
                    size: 9,
                };
                prop_assert_eq!(BaseFile::parse(&base.file_name(), 9).unwrap(), base.clone());
                let log = LogFile {
                    file_id: fid,
                    delta_commit_time: InstantTime::parse(&tt).unwrap(),
                    version,
                    write_token: Some(token),
                    cdc,
                    size: 3,
                };
                prop_assert_eq!(LogFile::parse(&log.file_name(), 3).unwrap(), log.clone());
                prop_assert_eq!(
                    parse_data_file_name(&log.file_name(), 3).unwrap(),
                    Some(DataFile::Log(log))
                );
            }
        }
    }

    #[test]
    fn test_file_id_hint_agrees_with_the_full_parse() {
        for name in [
            "f1a2-0_1-2-3_20240101000000000.parquet",
            ".f1a2-0_20240101000000000.log.1_0-1-2",
            ".f1a2-0_20240101000000000.log.2",
            "b7c0e9a4-5f7e-4d8d-9f33-0d3e6f2c7d1a-0_0-22-33_20231231235959999.parquet",
            ".b7c0e9a4-5f7e-4d8d-9f33-0d3e6f2c7d1a-0_20231231235959999.log.1_0-22-33",
        ] {
            let parsed = match parse_data_file_name(name, 1).unwrap() {
                Some(DataFile::Base(b)) => b.file_id,
                Some(DataFile::Log(l)) => l.file_id,
                None => panic!("{name} is a data file"),
            };
            assert_eq!(file_id_hint(name), Some(parsed.as_str()), "{name}");
        }
        assert_eq!(file_id_hint("hoodie_partition_metadata"), Some("hoodie"));
        assert_eq!(file_id_hint(".hoodie_partition_metadata"), None);
        assert_eq!(file_id_hint("README"), None);
    }
}
