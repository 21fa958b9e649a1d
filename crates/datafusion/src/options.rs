//! [`ArborTableOptions`]: which state of a table a provider reads (main or a branch, at a tag,
//! as of an instant, an incremental range, read-optimized), how `INSERT INTO` writes, and the
//! storage options of its location; parsed from `CREATE EXTERNAL TABLE ... OPTIONS (...)`.

use std::collections::HashMap;

use arbor_storage::StorageOptions;
use arbor_table::WriteOperation;

use crate::error::{ArborSqlError, Result};

/// The option keys of the table itself (storage options are `s3.*`, `azure.*`, `gs.*`).
pub const TABLE_OPTION_KEYS: [&str; 8] = [
    "branch",
    "tag",
    "as_of",
    "incremental_start",
    "incremental_end",
    "read_optimized",
    "write_operation",
    "data_skipping",
];

/// What a provider reads and how it writes.
///
/// Guarantees (checked by [`ArborTableOptions::validate`], which every constructor of a
/// provider calls): at most one of a tag, an as-of time and an incremental range; no
/// read-optimized incremental query. A provider with a tag, an as-of time or an incremental
/// range is read-only.
#[derive(Debug, Clone, PartialEq)]
pub struct ArborTableOptions {
    /// The branch (`None`: main).
    pub branch: Option<String>,
    /// Read the branch as of this tag of it.
    pub tag: Option<String>,
    /// Time travel: an instant time (`yyyyMMddHHmmss[SSS]`) or an ISO date/time on the
    /// table's timeline clock.
    pub as_of: Option<String>,
    /// Incremental query start (exclusive; completion times, as `as_of`; `None`: open).
    pub incremental_start: Option<String>,
    /// Incremental query end (inclusive; `None`: the latest).
    pub incremental_end: Option<String>,
    /// Whether this is an incremental query (set when either bound is given, or by
    /// [`ArborTableOptions::incremental`]).
    pub incremental: bool,
    /// Base files only (the read-optimized query of a merge-on-read table).
    pub read_optimized: bool,
    /// Whether file slices may be skipped by column stats, partition stats and the record and
    /// secondary indexes (default true; the rows are the same either way).
    pub data_skipping: bool,
    /// How `INSERT INTO` writes (default upsert); `INSERT OVERWRITE` replaces the partitions
    /// written whatever this says.
    pub write_operation: WriteOperation,
    /// Options of the storage backend (`s3.endpoint`, `azure.use-emulator`, ...).
    pub storage: StorageOptions,
}

impl Default for ArborTableOptions {
    fn default() -> Self {
        ArborTableOptions {
            branch: None,
            tag: None,
            as_of: None,
            incremental_start: None,
            incremental_end: None,
            incremental: false,
            read_optimized: false,
            data_skipping: true,
            write_operation: WriteOperation::Upsert,
            storage: StorageOptions::new(),
        }
    }
}

fn normalize(key: &str) -> String {
    key.trim().to_ascii_lowercase().replace('-', "_")
}

fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ArborSqlError::InvalidOption {
            key: key.to_string(),
            reason: format!("{value:?} is not true or false"),
        }),
    }
}

fn non_empty(key: &str, value: &str) -> Result<Option<String>> {
    let value = value.trim();
    if value.is_empty() {
        return Err(ArborSqlError::InvalidOption {
            key: key.to_string(),
            reason: "the value is empty".to_string(),
        });
    }
    Ok(Some(value.to_string()))
}

/// `upsert`, `insert`, `bulk_insert` (any case, `-` or `_`).
pub fn parse_write_operation(value: &str) -> Option<WriteOperation> {
    match normalize(value).as_str() {
        "upsert" => Some(WriteOperation::Upsert),
        "insert" => Some(WriteOperation::Insert),
        "bulk_insert" => Some(WriteOperation::BulkInsert),
        _ => None,
    }
}

impl ArborTableOptions {
    /// Main's latest state, upserts for `INSERT INTO`, no storage options.
    pub fn new() -> Self {
        Self::default()
    }

    /// The branch to read and write (`main` is main).
    pub fn branch(mut self, branch: impl Into<String>) -> Self {
        let b = branch.into();
        self.branch = (b != arbor_timeline::metaroot::MAIN).then_some(b);
        self
    }

    /// Reads the branch as of its tag `name`.
    pub fn tag(mut self, name: impl Into<String>) -> Self {
        self.tag = Some(name.into());
        self
    }

    /// Time travel to `time` (an instant time or an ISO date/time).
    pub fn as_of(mut self, time: impl Into<String>) -> Self {
        self.as_of = Some(time.into());
        self
    }

    /// An incremental query over completion times `(start, end]` (`None`: open bound).
    pub fn incremental(mut self, start: Option<String>, end: Option<String>) -> Self {
        self.incremental = true;
        self.incremental_start = start;
        self.incremental_end = end;
        self
    }

    /// The read-optimized query (base files only).
    pub fn read_optimized(mut self, enabled: bool) -> Self {
        self.read_optimized = enabled;
        self
    }

    /// Whether statistics and indexes may skip file slices.
    pub fn data_skipping(mut self, enabled: bool) -> Self {
        self.data_skipping = enabled;
        self
    }

    /// How `INSERT INTO` writes.
    pub fn write_operation(mut self, operation: WriteOperation) -> Self {
        self.write_operation = operation;
        self
    }

    /// The storage backend's options.
    pub fn storage_options(mut self, options: StorageOptions) -> Self {
        self.storage = options;
        self
    }

    /// Parses `CREATE EXTERNAL TABLE ... OPTIONS (...)` pairs: the keys of
    /// [`TABLE_OPTION_KEYS`] (case and `-`/`_` do not matter; DataFusion's `format.` prefix is
    /// ignored), and storage options (`s3.*`, `azure.*`, `gs.*`, checked by the storage
    /// registry). An unknown key or a malformed value is [`ArborSqlError::InvalidOption`]
    /// naming it and what is accepted; so is a contradiction ([`ArborTableOptions::validate`]).
    pub fn from_map(options: &HashMap<String, String>) -> Result<Self> {
        let mut out = ArborTableOptions::default();
        let mut storage = Vec::new();
        let mut pairs: Vec<(&String, &String)> = options.iter().collect();
        pairs.sort();
        for (given, value) in pairs {
            // DataFusion prefixes keys without a dot with `format.`: messages name the key as
            // the user wrote it.
            let raw_key = given.strip_prefix("format.").unwrap_or(given);
            let key = normalize(raw_key);
            let raw_key = &raw_key.to_string();
            match key.as_str() {
                "branch" => out = out.branch(value.trim()),
                "tag" => out.tag = non_empty(raw_key, value)?,
                "as_of" => out.as_of = non_empty(raw_key, value)?,
                "incremental_start" => {
                    out.incremental = true;
                    out.incremental_start = open_bound(raw_key, value)?;
                }
                "incremental_end" => {
                    out.incremental = true;
                    out.incremental_end = open_bound(raw_key, value)?;
                }
                "read_optimized" => out.read_optimized = parse_bool(raw_key, value)?,
                "data_skipping" => out.data_skipping = parse_bool(raw_key, value)?,
                "write_operation" => {
                    out.write_operation = parse_write_operation(value).ok_or_else(|| {
                        ArborSqlError::InvalidOption {
                            key: raw_key.clone(),
                            reason: format!("{value:?} is not one of upsert, insert, bulk_insert"),
                        }
                    })?
                }
                _ if key.contains('.') => storage.push((given.clone(), value.clone())),
                _ => {
                    return Err(ArborSqlError::InvalidOption {
                        key: raw_key.clone(),
                        reason: format!(
                            "unknown option; accepted: {}, and storage options (s3.*, azure.*, \
                             gs.*)",
                            TABLE_OPTION_KEYS.join(", ")
                        ),
                    })
                }
            }
        }
        if !storage.is_empty() {
            let keys: Vec<String> = storage.iter().map(|(k, _)| k.clone()).collect();
            out.storage =
                StorageOptions::from_pairs(storage).map_err(|e| ArborSqlError::InvalidOption {
                    key: keys.join(", "),
                    reason: e.to_string(),
                })?;
        }
        out.validate()?;
        Ok(out)
    }

    /// Checks that the options do not contradict each other: at most one of `tag`, `as_of`
    /// and an incremental range; `read_optimized` not with an incremental range.
    pub fn validate(&self) -> Result<()> {
        let chosen: Vec<&str> = [
            self.tag.as_ref().map(|_| "tag"),
            self.as_of.as_ref().map(|_| "as_of"),
            self.incremental
                .then_some("incremental_start/incremental_end"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if let [first, second, ..] = chosen.as_slice() {
            return Err(ArborSqlError::InvalidOption {
                key: (*second).to_string(),
                reason: format!("cannot be combined with {first}: choose one state to read"),
            });
        }
        if self.incremental && self.read_optimized {
            return Err(ArborSqlError::InvalidOption {
                key: "read_optimized".to_string(),
                reason: "an incremental query cannot be read-optimized".to_string(),
            });
        }
        Ok(())
    }

    /// Why a provider with these options cannot be written, if it cannot.
    pub fn read_only_reason(&self) -> Option<String> {
        if let Some(tag) = &self.tag {
            return Some(format!("it is opened at tag {tag:?} (a tag never moves)"));
        }
        if let Some(t) = &self.as_of {
            return Some(format!("it is opened as of {t} (time travel is read-only)"));
        }
        if self.incremental {
            return Some("it is opened as an incremental range".to_string());
        }
        None
    }

    /// How the ref reads in messages: `main`, `branch audit`, `main at tag v1`, ...
    pub fn describe(&self) -> String {
        let mut out = match &self.branch {
            Some(b) => format!("branch {b}"),
            None => "main".to_string(),
        };
        if let Some(t) = &self.tag {
            out.push_str(&format!(" at tag {t}"));
        }
        if let Some(t) = &self.as_of {
            out.push_str(&format!(" as of {t}"));
        }
        if self.incremental {
            out.push_str(&format!(
                " incremental ({}, {}]",
                self.incremental_start.as_deref().unwrap_or("-"),
                self.incremental_end.as_deref().unwrap_or("latest")
            ));
        }
        if self.read_optimized {
            out.push_str(" read-optimized");
        }
        out
    }
}

/// An incremental bound: `-` or empty is open.
fn open_bound(key: &str, value: &str) -> Result<Option<String>> {
    let v = value.trim();
    if v.is_empty() || v == "-" {
        return Ok(None);
    }
    non_empty(key, v)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn test_from_map_reads_every_key_and_ignores_the_format_prefix() {
        let o = ArborTableOptions::from_map(&map(&[
            ("format.branch", "audit"),
            ("Read-Optimized", "TRUE"),
            ("write_operation", "bulk-insert"),
            ("data_skipping", "false"),
        ]))
        .unwrap();
        assert_eq!(o.branch.as_deref(), Some("audit"));
        assert!(o.read_optimized);
        assert!(!o.data_skipping);
        assert_eq!(o.write_operation, WriteOperation::BulkInsert);
        assert_eq!(o.describe(), "branch audit read-optimized");
        let main = ArborTableOptions::from_map(&map(&[("branch", "main")])).unwrap();
        assert_eq!(main.branch, None);
    }

    #[test]
    fn test_from_map_incremental_bounds_open_with_dash() {
        let o = ArborTableOptions::from_map(&map(&[
            ("incremental_start", "20250101000000000"),
            ("incremental_end", "-"),
        ]))
        .unwrap();
        assert!(o.incremental);
        assert_eq!(o.incremental_start.as_deref(), Some("20250101000000000"));
        assert_eq!(o.incremental_end, None);
        assert!(o.read_only_reason().unwrap().contains("incremental"));
    }

    #[test]
    fn test_from_map_refuses_unknown_keys_bad_values_and_contradictions() {
        let err = |pairs: &[(&str, &str)]| {
            ArborTableOptions::from_map(&map(pairs))
                .unwrap_err()
                .to_string()
        };
        let e = err(&[("brnach", "x")]);
        assert!(
            e.contains("brnach") && e.contains("accepted: branch, tag"),
            "{e}"
        );
        let e = err(&[("read_optimized", "yes")]);
        assert!(e.contains("not true or false"), "{e}");
        let e = err(&[("write_operation", "merge")]);
        assert!(e.contains("upsert, insert, bulk_insert"), "{e}");
        let e = err(&[("tag", "v1"), ("as_of", "20250101000000")]);
        assert!(e.contains("cannot be combined"), "{e}");
        let e = err(&[("incremental_start", "-"), ("read_optimized", "true")]);
        assert!(e.contains("cannot be read-optimized"), "{e}");
        let e = err(&[("tag", " ")]);
        assert!(e.contains("empty"), "{e}");
        let e = err(&[("s3.no-such-key", "1")]);
        assert!(e.contains("s3.no-such-key"), "{e}");
    }
}
