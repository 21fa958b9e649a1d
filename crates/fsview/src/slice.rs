//! File slices and file groups, and the rule that attaches log files to slices.
//!
//! # Slicing (hudi-format §2.4, §4.5)
//! A file group's slices are keyed by base instant: one slice per base file, plus one per
//! pending compaction of the group (it has no base file until the compaction completes).
//! - **Table version 8 and later** ([`LogAttachRule::CompletionTime`]): a log file written by
//!   deltacommit `d` belongs to the slice with the greatest base instant `<=` the completion time
//!   of `d`. A compaction at `T` therefore starts a new slice: logs of deltacommits that
//!   completed before `T` stay with the old slice, logs completing after `T` join the new one,
//!   even when `d < T` (Hudi 1.x non-blocking semantics). A log with no such slice starts a
//!   *log-only* slice keyed by its own deltacommit time; later logs join it by the same rule.
//! - **Table version 6** ([`LogAttachRule::BaseInstantInName`]): the instant in a log file's
//!   name is the base instant of its slice; a log without that base file forms a log-only slice.
//!
//! Log files of a slice are ordered by (instant in the name, version, write token).

use std::collections::{BTreeMap, BTreeSet};

use arbor_timeline::InstantTime;

use crate::naming::{BaseFile, LogFile};

/// The files of one file group that one query reads: an optional base file and the log files
/// applied on top of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSlice {
    /// The partition path (`""` for non-partitioned tables).
    pub partition: String,
    /// The file group id.
    pub file_id: String,
    /// The base instant: the instant of the base file, of the pending compaction that will write
    /// it, or (log-only slice) of the first log file.
    pub base_instant: InstantTime,
    /// The base file, if any.
    pub base_file: Option<BaseFile>,
    /// The log files, ordered.
    pub log_files: Vec<LogFile>,
}

impl FileSlice {
    /// An empty slice.
    pub fn new(partition: &str, file_id: &str, base_instant: InstantTime) -> Self {
        FileSlice {
            partition: partition.to_string(),
            file_id: file_id.to_string(),
            base_instant,
            base_file: None,
            log_files: Vec::new(),
        }
    }

    /// True if the slice has neither base file nor log files.
    pub fn is_empty(&self) -> bool {
        self.base_file.is_none() && self.log_files.is_empty()
    }

    /// Key of the base file relative to the table base.
    pub fn base_file_path(&self) -> Option<String> {
        self.base_file
            .as_ref()
            .map(|b| join(&self.partition, &b.file_name()))
    }

    /// The base file's size as its listing recorded it; `None` without a base file or when the
    /// size is unknown (recorded as 0), so that a reader looks it up.
    pub fn base_file_size(&self) -> Option<u64> {
        self.base_file.as_ref().map(|b| b.size).filter(|s| *s > 0)
    }

    /// Keys of the log files relative to the table base, in order.
    pub fn log_file_paths(&self) -> Vec<String> {
        self.log_files
            .iter()
            .map(|l| join(&self.partition, &l.file_name()))
            .collect()
    }

    /// Total size of the slice's files in bytes.
    pub fn total_size(&self) -> u64 {
        self.base_file.as_ref().map_or(0, |b| b.size)
            + self.log_files.iter().map(|l| l.size).sum::<u64>()
    }
}

/// Joins a partition path and a file name into a key relative to the table base.
pub fn join(partition: &str, name: &str) -> String {
    if partition.is_empty() {
        name.to_string()
    } else {
        format!("{partition}/{name}")
    }
}

/// All slices of one file group, ordered by base instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileGroup {
    /// The partition path.
    pub partition: String,
    /// The file group id.
    pub file_id: String,
    /// The slices by base instant (none is empty).
    pub slices: BTreeMap<InstantTime, FileSlice>,
}

impl FileGroup {
    /// The slice with the greatest base instant.
    pub fn latest_slice(&self) -> Option<&FileSlice> {
        self.slices.values().next_back()
    }

    /// The slice a reader needs: the latest slice, merged with its predecessor when it is the
    /// slice of a pending compaction (in `pending`) and therefore has no base file yet: the
    /// predecessor's base file and logs followed by the pending slice's logs, keyed by the
    /// predecessor's base instant (Java's "merged file slice"; hudi-rs, which ignores pending
    /// compactions, lists the same files).
    pub fn latest_merged_slice(&self, pending: &BTreeSet<InstantTime>) -> Option<FileSlice> {
        let mut rev = self.slices.values().rev();
        let latest = rev.next()?;
        if latest.base_file.is_some() || !pending.contains(&latest.base_instant) {
            return Some(latest.clone());
        }
        let Some(prev) = rev.next() else {
            return Some(latest.clone());
        };
        let mut merged = prev.clone();
        merged.log_files.extend(latest.log_files.iter().cloned());
        Some(merged)
    }
}

/// How log files find their slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogAttachRule {
    /// Table version 6: by the base instant in the log file name.
    BaseInstantInName,
    /// Table version 8+: by the completion time of the deltacommit in the name.
    CompletionTime,
}

/// Groups the files of one partition into file groups and slices (module doc).
///
/// `pending_starts` maps file ids to the instants of their pending compactions (each starts a
/// slice without base file); `completion_of` gives the completion time of a deltacommit (its
/// requested time when unknown). Two base files with the same file id and instant (a retried
/// task) keep the first by name; slices left without files are dropped. Groups are returned in
/// file-id order.
pub fn build_file_groups(
    partition: &str,
    base_files: Vec<BaseFile>,
    log_files: Vec<LogFile>,
    pending_starts: &BTreeMap<String, BTreeSet<InstantTime>>,
    rule: LogAttachRule,
    completion_of: impl Fn(&InstantTime) -> InstantTime,
) -> Vec<FileGroup> {
    let mut groups: BTreeMap<String, FileGroup> = BTreeMap::new();
    let mut base_files = base_files;
    base_files.sort_by_key(|a| a.file_name());
    for base in base_files {
        let fg = entry(&mut groups, partition, &base.file_id);
        let slice = fg
            .slices
            .entry(base.instant_time.clone())
            .or_insert_with(|| FileSlice::new(partition, &base.file_id, base.instant_time.clone()));
        if let Some(existing) = &slice.base_file {
            tracing::debug!(
                partition,
                kept = %existing,
                skipped = %base,
                "two base files for one file group and instant"
            );
        } else {
            slice.base_file = Some(base);
        }
    }
    if !pending_starts.is_empty() {
        // Pending compactions only start slices in groups that have files.
        for fg in groups.values_mut() {
            for t in pending_starts.get(&fg.file_id).into_iter().flatten() {
                fg.slices
                    .entry(t.clone())
                    .or_insert_with(|| FileSlice::new(partition, &fg.file_id, t.clone()));
            }
        }
    }

    let mut log_files = log_files;
    log_files.sort();
    for log in log_files {
        let fg = entry(&mut groups, partition, &log.file_id);
        if fg.slices.is_empty() {
            for t in pending_starts.get(&log.file_id).into_iter().flatten() {
                fg.slices
                    .entry(t.clone())
                    .or_insert_with(|| FileSlice::new(partition, &log.file_id, t.clone()));
            }
        }
        let key = match rule {
            LogAttachRule::BaseInstantInName => log.delta_commit_time.clone(),
            LogAttachRule::CompletionTime => {
                let completion = completion_of(&log.delta_commit_time);
                fg.slices
                    .range(..=completion)
                    .next_back()
                    .map(|(k, _)| k.clone())
                    .unwrap_or_else(|| log.delta_commit_time.clone())
            }
        };
        fg.slices
            .entry(key.clone())
            .or_insert_with(|| FileSlice::new(partition, &log.file_id, key))
            .log_files
            .push(log);
    }

    groups
        .into_values()
        .filter_map(|mut fg| {
            fg.slices.retain(|_, s| !s.is_empty());
            (!fg.slices.is_empty()).then_some(fg)
        })
        .collect()
}

fn entry<'a>(
    groups: &'a mut BTreeMap<String, FileGroup>,
    partition: &str,
    file_id: &str,
) -> &'a mut FileGroup {
    groups
        .entry(file_id.to_string())
        .or_insert_with(|| FileGroup {
            partition: partition.to_string(),
            file_id: file_id.to_string(),
            slices: BTreeMap::new(),
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    const FID: &str = "0a1b2c3d-0000-0000-0000-000000000000-0";

    fn t(s: &str) -> InstantTime {
        // Short test times: 2025-01-01 00:00:00.<s> with s three digits.
        InstantTime::parse(&format!("20250101000000{s}")).unwrap()
    }

    fn base(time: &str) -> BaseFile {
        BaseFile {
            file_id: FID.into(),
            write_token: "0-1-2".into(),
            instant_time: t(time),
            extension: "parquet".into(),
            size: 10,
        }
    }

    fn log(time: &str) -> LogFile {
        LogFile {
            file_id: FID.into(),
            delta_commit_time: t(time),
            version: 1,
            write_token: Some("0-1-2".into()),
            cdc: false,
            size: 1,
        }
    }

    fn log_times(s: &FileSlice) -> Vec<String> {
        s.log_files
            .iter()
            .map(|l| l.delta_commit_time.to_string())
            .collect()
    }

    /// Completion times: deltacommit 200 completed at 400 (after compaction 300 started),
    /// 150 completed at 160, 500 at 510.
    fn completion(d: &InstantTime) -> InstantTime {
        match &d.as_str()[14..] {
            "200" => t("400"),
            "150" => t("160"),
            "500" => t("510"),
            _ => d.clone(),
        }
    }

    #[test]
    fn test_build_file_groups_v8_log_completed_after_compaction_joins_new_slice() {
        let groups = build_file_groups(
            "p",
            vec![base("100"), base("300")],
            vec![log("150"), log("200"), log("500")],
            &BTreeMap::new(),
            LogAttachRule::CompletionTime,
            completion,
        );
        assert_eq!(groups.len(), 1);
        let fg = &groups[0];
        let old = &fg.slices[&t("100")];
        let new = &fg.slices[&t("300")];
        // 150 completed at 160 < 300: stays with the old slice. 200 was requested before the
        // compaction but completed at 400 > 300: joins the new slice, as does 500.
        assert_eq!(log_times(old), vec![t("150").to_string()]);
        assert_eq!(
            log_times(new),
            vec![t("200").to_string(), t("500").to_string()]
        );
        assert_eq!(fg.latest_slice().unwrap().base_instant, t("300"));
    }

    #[test]
    fn test_build_file_groups_v6_logs_attach_by_name_instant() {
        // Under v6 naming the instant in the name is the base instant: 100's logs stay with
        // 100 whatever their completion.
        let groups = build_file_groups(
            "p",
            vec![base("100"), base("300")],
            vec![log("100"), log("300")],
            &BTreeMap::new(),
            LogAttachRule::BaseInstantInName,
            completion,
        );
        let fg = &groups[0];
        assert_eq!(log_times(&fg.slices[&t("100")]), vec![t("100").to_string()]);
        assert_eq!(log_times(&fg.slices[&t("300")]), vec![t("300").to_string()]);
    }

    #[test]
    fn test_build_file_groups_logs_without_base_form_log_only_slice() {
        let groups = build_file_groups(
            "",
            vec![],
            vec![log("500"), log("150")],
            &BTreeMap::new(),
            LogAttachRule::CompletionTime,
            completion,
        );
        let fg = &groups[0];
        assert_eq!(fg.slices.len(), 1);
        let s = fg.latest_slice().unwrap();
        assert!(s.base_file.is_none());
        assert_eq!(s.base_instant, t("150"));
        assert_eq!(
            log_times(s),
            vec![t("150").to_string(), t("500").to_string()]
        );
        assert_eq!(
            s.log_file_paths()[0],
            format!(".{FID}_{}.log.1_0-1-2", t("150"))
        );
    }

    #[test]
    fn test_build_file_groups_log_only_then_compaction_starts_new_slice() {
        let groups = build_file_groups(
            "p",
            vec![base("300")],
            vec![log("150"), log("500")],
            &BTreeMap::new(),
            LogAttachRule::CompletionTime,
            completion,
        );
        let fg = &groups[0];
        assert_eq!(
            fg.slices.keys().cloned().collect::<Vec<_>>(),
            vec![t("150"), t("300")]
        );
        assert!(fg.slices[&t("150")].base_file.is_none());
        assert_eq!(log_times(&fg.slices[&t("300")]), vec![t("500").to_string()]);
    }

    #[test]
    fn test_latest_merged_slice_pending_compaction_merges_with_predecessor() {
        let pending: BTreeMap<String, BTreeSet<InstantTime>> =
            [(FID.to_string(), [t("300")].into_iter().collect())].into();
        let groups = build_file_groups(
            "p",
            vec![base("100")],
            vec![log("150"), log("200"), log("500")],
            &pending,
            LogAttachRule::CompletionTime,
            completion,
        );
        let fg = &groups[0];
        // The unmerged view has the pending slice (no base file) with the late logs.
        let pending_slice = fg.latest_slice().unwrap();
        assert_eq!(pending_slice.base_instant, t("300"));
        assert!(pending_slice.base_file.is_none());
        assert_eq!(
            log_times(pending_slice),
            vec![t("200").to_string(), t("500").to_string()]
        );
        // The reader's slice: base 100 with every log, in order.
        let merged = fg.latest_merged_slice(&pending[FID]).unwrap();
        assert_eq!(merged.base_instant, t("100"));
        assert_eq!(merged.base_file.as_ref().unwrap().instant_time, t("100"));
        assert_eq!(
            log_times(&merged),
            vec![
                t("150").to_string(),
                t("200").to_string(),
                t("500").to_string()
            ]
        );
        // Without logs after it, the pending compaction leaves no empty slice behind.
        let groups = build_file_groups(
            "p",
            vec![base("100")],
            vec![log("150")],
            &pending,
            LogAttachRule::CompletionTime,
            completion,
        );
        assert_eq!(groups[0].slices.len(), 1);
    }

    #[test]
    fn test_build_file_groups_duplicate_base_keeps_first_by_name() {
        let mut b2 = base("100");
        b2.write_token = "9-9-9".into();
        let groups = build_file_groups(
            "p",
            vec![b2, base("100")],
            vec![],
            &BTreeMap::new(),
            LogAttachRule::CompletionTime,
            completion,
        );
        let s = groups[0].latest_slice().unwrap();
        assert_eq!(s.base_file.as_ref().unwrap().write_token, "0-1-2");
        assert_eq!(
            s.base_file_path().unwrap(),
            format!("p/{FID}_0-1-2_{}.parquet", t("100"))
        );
    }
}
