//! [`FileSystemView::latest_file_slices_union`]: the latest slices as of several instants in
//! one pass over the listing (what a clean's retention window keeps).
//!
//! As of `T` (requested times, [`Horizon::AsOf`]) a file, a pending compaction or a
//! replacement counts exactly when it counts for [`Horizon::Latest`] and its instant is
//! `<= T`. So each partition's listing is parsed once, and for each file group the horizons
//! are told apart only by how many of the group's instants they admit: the group's latest
//! slice is computed once per distinct count (usually once or twice), not once per horizon.

use std::collections::{BTreeMap, BTreeSet};

use arbor_timeline::InstantTime;

use super::FileSystemView;
use crate::error::Result;
use crate::listing::validate_partition;
use crate::naming::{parse_data_file_name, BaseFile, DataFile, LogFile};
use crate::slice::{build_file_groups, FileSlice};
use crate::visibility::Horizon;

/// The files and instants of one file group that count for [`Horizon::Latest`].
#[derive(Default)]
struct GroupFiles {
    bases: Vec<BaseFile>,
    logs: Vec<LogFile>,
    /// Instants of pending compactions of the group.
    pending: BTreeSet<InstantTime>,
    /// Instants of replacecommits that replaced the group.
    replaced: Vec<InstantTime>,
}

impl GroupFiles {
    /// How many of the group's instants are at or before `t` (`None`: all of them): two
    /// horizons with the same count see the same group.
    fn admitted(&self, t: Option<&InstantTime>) -> usize {
        let le = |x: &InstantTime| t.is_none_or(|t| x <= t);
        self.bases.iter().filter(|b| le(&b.instant_time)).count()
            + self
                .logs
                .iter()
                .filter(|l| le(&l.delta_commit_time))
                .count()
            + self.pending.iter().filter(|p| le(p)).count()
            + self.replaced.iter().filter(|r| le(r)).count()
    }
}

impl FileSystemView {
    /// Every slice that is the latest (merged) slice of its file group as of one of `as_of`
    /// ([`Horizon::AsOf`]) or of [`Horizon::Latest`]: exactly the union of
    /// [`FileSystemView::latest_file_slices_within`] over those horizons, each slice once,
    /// ordered by partition, file id, then base instant (groups as
    /// [`FileSystemView::file_groups`] builds them). One pass over each partition's
    /// listing, whatever the number of instants.
    pub async fn latest_file_slices_union(&self, as_of: &[InstantTime]) -> Result<Vec<FileSlice>> {
        let mut horizons: Vec<Option<InstantTime>> = as_of.iter().cloned().map(Some).collect();
        horizons.sort();
        horizons.dedup();
        horizons.push(None);
        let rule = self.attach_rule();
        let mut out = Vec::new();
        for partition in self.partitions().await?.iter() {
            validate_partition(partition)?;
            let mut groups: BTreeMap<String, GroupFiles> = BTreeMap::new();
            for f in self.partition_files(partition).await?.iter() {
                match parse_data_file_name(&f.name, f.size) {
                    Ok(Some(DataFile::Base(b))) => {
                        if self.index.is_visible(&b.instant_time, &Horizon::Latest) {
                            groups.entry(b.file_id.clone()).or_default().bases.push(b);
                        }
                    }
                    Ok(Some(DataFile::Log(l))) => {
                        if !l.cdc && self.log_visible(&l, &Horizon::Latest) {
                            groups.entry(l.file_id.clone()).or_default().logs.push(l);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::debug!(partition = %partition, file = %f.name, error = %e, "skipping a file that is not a data file");
                    }
                }
            }
            for (file_id, pending) in self.pending_starts(partition, &Horizon::Latest) {
                groups.entry(file_id).or_default().pending = pending;
            }
            for r in self.index.replacements() {
                if &r.partition == partition {
                    if let Some(g) = groups.get_mut(&r.file_id) {
                        g.replaced.push(r.instant.clone());
                    }
                }
            }
            for (file_id, group) in &groups {
                let mut seen: BTreeSet<usize> = BTreeSet::new();
                let mut of_group: Vec<FileSlice> = Vec::new();
                for t in &horizons {
                    if !seen.insert(group.admitted(t.as_ref())) {
                        continue;
                    }
                    let le = |x: &InstantTime| t.as_ref().is_none_or(|t| x <= t);
                    if group.replaced.iter().any(le) {
                        continue;
                    }
                    let bases: Vec<BaseFile> = group
                        .bases
                        .iter()
                        .filter(|b| le(&b.instant_time))
                        .cloned()
                        .collect();
                    let logs: Vec<LogFile> = group
                        .logs
                        .iter()
                        .filter(|l| le(&l.delta_commit_time))
                        .cloned()
                        .collect();
                    let pending: BTreeSet<InstantTime> =
                        group.pending.iter().filter(|p| le(p)).cloned().collect();
                    let mut starts = BTreeMap::new();
                    if !pending.is_empty() {
                        starts.insert(file_id.clone(), pending.clone());
                    }
                    let built = build_file_groups(partition, bases, logs, &starts, rule, |d| {
                        self.index.effective_completion(d).clone()
                    });
                    for fg in built {
                        if let Some(slice) = fg.latest_merged_slice(&pending) {
                            if !of_group.contains(&slice) {
                                of_group.push(slice);
                            }
                        }
                    }
                }
                of_group.sort_by(|a, b| a.base_instant.cmp(&b.base_instant));
                out.extend(of_group);
            }
        }
        Ok(out)
    }
}
