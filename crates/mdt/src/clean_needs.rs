//! Which metadata-table files a metadata root still needs, for the MDT's own cleaner
//! ([`crate::clean`]).
//!
//! MDT base and log files are shared by every root of a table (main, each working branch), each
//! root has its own MDT timeline, and a shallow clone reads its sources' MDT files. A root
//! needs, in each MDT file group of its view:
//! - **retention** (Java's MDT cleaner: `KEEP_LATEST_COMMITS` with
//!   [`DEFAULT_MDT_COMMITS_RETAINED`] commits): every slice a snapshot as of one of the
//!   retained MDT writes reads, and the latest slice. As Java's `CleanPlanner`, the earliest
//!   retained instant is moved back to the earliest pending instant (data or MDT timeline), so
//!   a write or table service in flight, and a reader that loaded the timeline before a
//!   compaction, keep the slices they may still open;
//! - **savepoints** (so tags and clone pins, which are savepoint pairs): for every completed
//!   savepoint of the root's data or MDT timeline, the slice of each file group as of its
//!   instant, plus every file an MDT savepoint's metadata names;
//! - **pending MDT compactions**: the files of the slices their plans fold.
//!
//! A slice is judged as a whole: its base file and every log file attached to it are kept or
//! released together, so keeping a slice as of an instant also keeps its later log files
//! (more than needed, never less).

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_fsview::{FileGroup, FileSlice, FileSystemView};
use arbor_storage::Storage;
use arbor_timeline::avro::{decode, HoodieSavepointMetadata};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{Action, ActiveTimeline, InstantTime, State, TableConfig, TableLayout};

use crate::error::Result;
use crate::files::MetadataTable;

/// Java's `hoodie.metadata.cleaner.commits.retained` default
/// (`HoodieMetadataConfig.DEFAULT_METADATA_CLEANER_COMMITS_RETAINED`): the MDT keeps every
/// snapshot as of its 20 latest completed writes.
pub const DEFAULT_MDT_COMMITS_RETAINED: usize = 20;

/// The keys (relative to the MDT base: `<mdt partition>/<file name>`) of a slice's files.
pub fn slice_keys(slice: &FileSlice) -> impl Iterator<Item = String> + '_ {
    slice
        .base_file_path()
        .into_iter()
        .chain(slice.log_file_paths())
}

/// Every file group of every partition of an MDT view, all committed slices.
pub async fn all_file_groups(view: &FileSystemView) -> Result<Vec<FileGroup>> {
    let mut out = Vec::new();
    for partition in view.partitions().await?.iter() {
        out.extend(
            view.file_groups(partition, &arbor_fsview::Horizon::Latest)
                .await?,
        );
    }
    Ok(out)
}

/// The earliest instant whose snapshot the retention keeps on an MDT view: the requested time
/// of the `retained`-th latest completed MDT write (by completion), moved back to the earliest
/// of `pending` when that is earlier. `None` when nothing is retained by count (fewer
/// completed writes than `retained`: everything is kept).
pub fn earliest_retained(
    view: &FileSystemView,
    retained: usize,
    pending: Option<&InstantTime>,
) -> Option<InstantTime> {
    let mut writes: Vec<(InstantTime, InstantTime)> = view
        .index()
        .completed_writes()
        .map(|i| {
            let done = i
                .completion_time
                .clone()
                .unwrap_or_else(|| i.requested_time.clone());
            (done, i.requested_time.clone())
        })
        .collect();
    writes.sort();
    if writes.len() < retained.max(1) {
        return None;
    }
    let by_count = writes
        .iter()
        .rev()
        .take(retained.max(1))
        .map(|(_, t)| t.clone())
        .min()?;
    Some(match pending {
        Some(p) if *p < by_count => p.clone(),
        _ => by_count,
    })
}

/// The slices of `group` retention keeps when the earliest retained instant is `earliest`
/// (`None`: every slice): the latest slice, and every slice whose successor starts after
/// `earliest` (a snapshot as of an instant at or after `earliest` may read it).
pub fn retained_slices<'a>(
    group: &'a FileGroup,
    earliest: Option<&InstantTime>,
) -> Vec<&'a FileSlice> {
    let slices: Vec<&FileSlice> = group.slices.values().collect();
    let mut out = Vec::new();
    for (i, slice) in slices.iter().enumerate() {
        let next = slices.get(i + 1).map(|s| &s.base_instant);
        let keep = match (next, earliest) {
            (None, _) | (_, None) => true,
            (Some(n), Some(e)) => n > e,
        };
        if keep {
            out.push(*slice);
        }
    }
    out
}

/// The slice of `group` a snapshot as of `t` reads: the one with the greatest base instant at
/// or before `t`.
pub fn slice_as_of<'a>(group: &'a FileGroup, t: &InstantTime) -> Option<&'a FileSlice> {
    group.slices.range(..=t.clone()).next_back().map(|(_, s)| s)
}

/// Everything one root needs of the MDT files (module doc). `view` is the table as that root
/// sees it (`MetaRoot::view`). A root without a metadata table needs nothing.
pub async fn needed_by_root(view: &Arc<dyn Storage>, retained: usize) -> Result<BTreeSet<String>> {
    let Some(mdt) = MetadataTable::open_active(view.clone()).await? else {
        return Ok(BTreeSet::new());
    };
    let config = TableConfig::load(view.as_ref(), DEFAULT_META_DIR).await?;
    let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
    let data = ActiveTimeline::load(view.clone(), layout).await?;
    let groups = all_file_groups(mdt.view()).await?;
    needed_in(&mdt, &data, &groups, retained).await
}

/// [`needed_by_root`] for an opened MDT, its data timeline and its file groups.
pub async fn needed_in(
    mdt: &MetadataTable,
    data: &ActiveTimeline,
    groups: &[FileGroup],
    retained: usize,
) -> Result<BTreeSet<String>> {
    let view = mdt.view();
    let mdt_active = view.history().active();
    let pending = data
        .pending()
        .into_iter()
        .chain(mdt_active.pending())
        .filter(|i| i.action != Action::Clean)
        .map(|i| i.requested_time)
        .min();
    let earliest = earliest_retained(view, retained, pending.as_ref());
    let mut out = BTreeSet::new();
    for group in groups {
        for slice in retained_slices(group, earliest.as_ref()) {
            out.extend(slice_keys(slice));
        }
    }
    let mut savepoints: Vec<InstantTime> = Vec::new();
    for sp in data.filter(&[Action::Savepoint], &[State::Completed]) {
        savepoints.push(sp.requested_time);
    }
    for sp in mdt_active.filter(&[Action::Savepoint], &[State::Completed]) {
        let key = mdt_active.key_of(&sp)?;
        let meta: HoodieSavepointMetadata = decode(&mdt_active.read(&sp).await?, &key)?;
        for (partition, file) in meta.files() {
            let name = file.rsplit('/').next().unwrap_or(file);
            out.insert(arbor_fsview::slice::join(partition, name));
        }
        savepoints.push(sp.requested_time);
    }
    for t in &savepoints {
        for group in groups {
            if let Some(slice) = slice_as_of(group, t) {
                out.extend(slice_keys(slice));
            }
        }
    }
    for op in view.pending_compaction_operations() {
        let o = &op.operation;
        for name in o
            .data_file_path
            .iter()
            .chain(o.delta_file_paths.iter().flatten())
        {
            let name = name.rsplit('/').next().unwrap_or(name);
            out.insert(arbor_fsview::slice::join(&op.partition, name));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn t(s: &str) -> InstantTime {
        InstantTime::parse(s).unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn group(bases: &[&str]) -> FileGroup {
        let mut slices = BTreeMap::new();
        for b in bases {
            slices.insert(t(b), FileSlice::new("files", "files-0000-0", t(b)));
        }
        FileGroup {
            partition: "files".to_string(),
            file_id: "files-0000-0".to_string(),
            slices,
        }
    }

    fn bases(slices: &[&FileSlice]) -> Vec<String> {
        slices.iter().map(|s| s.base_instant.to_string()).collect()
    }

    #[test]
    fn test_retained_slices_keep_latest_and_those_superseded_after_earliest() {
        let g = group(&[
            "20260101000000000",
            "20260101000010000",
            "20260101000020000",
            "20260101000030000",
        ]);
        // Earliest retained between the 2nd and 3rd compaction: the 2nd slice is still read.
        let kept = retained_slices(&g, Some(&t("20260101000015000")));
        assert_eq!(
            bases(&kept),
            [
                "20260101000010000",
                "20260101000020000",
                "20260101000030000"
            ]
        );
        // Exactly at a compaction: the slice it superseded is no longer read.
        let kept = retained_slices(&g, Some(&t("20260101000020000")));
        assert_eq!(bases(&kept), ["20260101000020000", "20260101000030000"]);
        // Nothing retained by count: everything is kept.
        assert_eq!(retained_slices(&g, None).len(), 4);
        // Far ahead: only the latest slice.
        let kept = retained_slices(&g, Some(&t("20270101000000000")));
        assert_eq!(bases(&kept), ["20260101000030000"]);
    }

    #[test]
    fn test_slice_as_of_picks_the_slice_a_snapshot_reads() {
        let g = group(&["20260101000000000", "20260101000010000"]);
        let s = slice_as_of(&g, &t("20260101000009999")).map(|s| s.base_instant.to_string());
        assert_eq!(s.as_deref(), Some("20260101000000000"));
        let s = slice_as_of(&g, &t("20260101000010000")).map(|s| s.base_instant.to_string());
        assert_eq!(s.as_deref(), Some("20260101000010000"));
        assert!(slice_as_of(&g, &t("20251231000000000")).is_none());
    }
}
