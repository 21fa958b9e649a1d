//! Merge-on-read log appends that share a file group without conflicting (Hudi's
//! non-blocking concurrency control idea, restricted to what readers merge the same way in
//! any order; docs/concurrency.md).
//!
//! Two deltacommits that each appended **only log files** to a file group (no base file
//! written there, nothing replaced) do not conflict over that group when the record keys of
//! their log files are disjoint: each log file is a separate file of the group's latest slice
//! (attached by completion time, `arbor_fsview::slice`), and a reader merges a key's records
//! from the log files that hold it, so logs without a common key give the same rows whatever
//! their order. When a key is in both, the order would decide which value wins, and the
//! later committer fails with a conflict as before (the OCC check).
//!
//! Anything else in the group is a conflict as before: a base file written by either (a
//! copy-on-write style rewrite, `repeated_keys`), a replacecommit (clustering, insert
//! overwrite), a log file whose keys cannot all be read (a block that is neither a data nor a
//! delete block, or a corrupt region).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_format::log::ReadMode;
use arbor_format::log::{decode_data_block, decode_delete_block, read_log_bytes, BlockType};
use arbor_fsview::LogFile;
use arbor_storage::Storage;
use arbor_timeline::avro::{HoodieCommitMetadata, HoodieWriteStat, InstantContent};
use arbor_timeline::Action;

use super::stored_keys::StoredKeys;
use crate::error::Result;

/// A file group, as `(partition, fileId)`.
pub(crate) type GroupId = (String, String);

/// The file groups one deltacommit wrote with log files only, with those log files' keys
/// (storage paths). Empty for any other action.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LogAppends {
    groups: BTreeMap<GroupId, Vec<String>>,
}

fn is_log_path(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    LogFile::parse(name, 0).is_ok()
}

impl LogAppends {
    /// The log-only groups of a `deltacommit`'s metadata (`action`); empty for a compaction
    /// or any other action.
    pub(crate) fn of_metadata(action: Action, metadata: &HoodieCommitMetadata) -> LogAppends {
        if action != Action::DeltaCommit || metadata.is_compacted() {
            return LogAppends::default();
        }
        Self::of_stats(metadata.write_stats())
    }

    /// [`LogAppends::of_metadata`] of a completed instant's content.
    pub(crate) fn of_content(action: Action, content: &InstantContent) -> LogAppends {
        match content {
            InstantContent::Commit(m) => Self::of_metadata(action, m),
            _ => LogAppends::default(),
        }
    }

    fn of_stats<'a>(stats: impl Iterator<Item = (&'a str, &'a HoodieWriteStat)>) -> LogAppends {
        let mut groups: BTreeMap<GroupId, Vec<String>> = BTreeMap::new();
        let mut other: BTreeSet<GroupId> = BTreeSet::new();
        for (partition, stat) in stats {
            let Some(file_id) = &stat.file_id else {
                continue;
            };
            let id = (partition.to_string(), file_id.clone());
            match stat.path.as_deref().filter(|p| is_log_path(p)) {
                Some(path) => groups.entry(id).or_default().push(path.to_string()),
                None => {
                    other.insert(id);
                }
            }
        }
        groups.retain(|g, _| !other.contains(g));
        LogAppends { groups }
    }

    /// True when this instant wrote `group` with log files only.
    pub(crate) fn appends_to(&self, group: &GroupId) -> bool {
        self.groups.contains_key(group)
    }

    fn paths(&self, group: &GroupId) -> &[String] {
        self.groups.get(group).map_or(&[], Vec::as_slice)
    }
}

/// The record keys of the log files of one group of one instant; `None` when some block's
/// keys cannot be read (the caller then treats the group as a conflict).
async fn keys_of(storage: &Arc<dyn Storage>, paths: &[String]) -> Result<Option<BTreeSet<String>>> {
    let mut keys = BTreeSet::new();
    for path in paths {
        let bytes = storage.get(path).await?.0;
        let contents = read_log_bytes(&bytes, path, ReadMode::Lenient)?;
        if !contents.corrupt.is_empty() {
            return Ok(None);
        }
        for block in &contents.blocks {
            match block.block_type {
                BlockType::AvroData | BlockType::ParquetData => {
                    for batch in decode_data_block(block, path, None)? {
                        for k in StoredKeys::Meta.keys(&batch, path)? {
                            match k {
                                Some(k) => keys.insert(k),
                                None => return Ok(None),
                            };
                        }
                    }
                }
                BlockType::Delete => {
                    for d in decode_delete_block(block, path)? {
                        match d.record_key {
                            Some(k) => keys.insert(k),
                            None => return Ok(None),
                        };
                    }
                }
                _ => return Ok(None),
            }
        }
    }
    Ok(Some(keys))
}

/// Decides, for the file groups `shared` by two instants, which still conflict once log
/// appends with disjoint keys are let through; keeps the keys of `ours` it has read across
/// calls (the commit checks several candidates against the same write).
#[derive(Debug)]
pub(crate) struct LogConflictCheck<'a> {
    storage: &'a Arc<dyn Storage>,
    ours: &'a LogAppends,
    our_keys: BTreeMap<GroupId, Option<BTreeSet<String>>>,
}

impl<'a> LogConflictCheck<'a> {
    /// A check of the write whose log appends are `ours`, reading log files from `storage`.
    pub(crate) fn new(storage: &'a Arc<dyn Storage>, ours: &'a LogAppends) -> Self {
        LogConflictCheck {
            storage,
            ours,
            our_keys: BTreeMap::new(),
        }
    }

    /// The groups of `shared` that conflict between this write and the instant whose log
    /// appends are `theirs`: every group but those both wrote with log files only and whose
    /// log files have no record key in common.
    pub(crate) async fn still_conflicting(
        &mut self,
        shared: Vec<GroupId>,
        theirs: &LogAppends,
    ) -> Result<Vec<GroupId>> {
        let mut out = Vec::new();
        for group in shared {
            if !(self.ours.appends_to(&group) && theirs.appends_to(&group)) {
                out.push(group);
                continue;
            }
            if !self.our_keys.contains_key(&group) {
                let k = keys_of(self.storage, self.ours.paths(&group)).await?;
                self.our_keys.insert(group.clone(), k);
            }
            let ours = self.our_keys.get(&group).and_then(Option::as_ref);
            let theirs = keys_of(self.storage, theirs.paths(&group)).await?;
            let disjoint = match (ours, theirs) {
                (Some(a), Some(b)) => a.is_disjoint(&b),
                _ => false,
            };
            if !disjoint {
                out.push(group);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn stat(file_id: &str, path: &str) -> HoodieWriteStat {
        HoodieWriteStat {
            file_id: Some(file_id.into()),
            path: Some(path.into()),
            ..HoodieWriteStat::default()
        }
    }

    #[test]
    fn test_only_log_only_groups_of_deltacommits_count() {
        let mut m = HoodieCommitMetadata::default();
        m.add_write_stat("p", stat("f1", "p/.f1_20250101000000000.log.1_0-0-0"));
        m.add_write_stat("p", stat("f2", "p/f2_0-0-0_20250101000000000.parquet"));
        let a = LogAppends::of_metadata(Action::DeltaCommit, &m);
        assert!(a.appends_to(&("p".into(), "f1".into())));
        assert!(!a.appends_to(&("p".into(), "f2".into())));
        assert_eq!(
            LogAppends::of_metadata(Action::Commit, &m),
            LogAppends::default()
        );
        m.compacted = Some(true);
        assert_eq!(
            LogAppends::of_metadata(Action::DeltaCommit, &m),
            LogAppends::default()
        );
    }

    #[test]
    fn test_group_with_a_base_file_and_a_log_is_not_log_only() {
        let mut m = HoodieCommitMetadata::default();
        m.add_write_stat("p", stat("f1", "p/.f1_20250101000000000.log.1_0-0-0"));
        m.add_write_stat("p", stat("f1", "p/f1_0-0-0_20250101000000000.parquet"));
        let a = LogAppends::of_metadata(Action::DeltaCommit, &m);
        assert!(!a.appends_to(&("p".into(), "f1".into())));
    }
}
