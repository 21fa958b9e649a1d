//! Merge-on-read file groups whose base file holds a changed key more than once.
//!
//! A table written by inserts that did not look keys up (Spark SQL `INSERT`, `BULK_INSERT`,
//! partition `INSERT_OVERWRITE`) may hold one key twice in one base file. Readers merge a
//! log record into the first base row of its key only (Java's `KeyBasedFileGroupRecordBuffer`
//! removes the log record when it meets the key; arbor's merge does the same), so a delete or
//! update appended as a log block would leave the other copies as they were: a delete that
//! does not delete. Such a group is written instead as a new base file of the deltacommit
//! (merged slice, changes applied to every copy, as copy-on-write does and as Java's
//! merge-on-read writer does for updates its index cannot put in logs), which every reader
//! reads the same way.
//!
//! Updates are checked on tables without a record index, or with secondary indexes (whose
//! maintenance reads the updated rows anyway). With a record index alone an upsert reads no
//! base file (the point of the index), and an update of a key stored twice in one base file
//! changes the first copy, as Java's writer does. Deletes are always checked.
//!
//! The check costs one read of the record-key column of each changed base file, and runs
//! only where the timeline shows a write that may have stored a key twice in one file (any
//! insert, the first one included: `read::skipping::unique_keys::repeat_risk`; a write reads
//! only the active timeline, so when anything is archived the check runs:
//! [`WriteHistory::repeat_risk`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arbor_format::base::read_base_file;
use arbor_format::meta;
use arbor_fsview::FileSlice;
use arbor_storage::Storage;

use super::history_scope::WriteHistory;
use super::planner::{GroupPlan, Input, WritePlan};
use super::stored_keys::StoredKeys;
use crate::error::Result;

/// The indices (in `plan.groups`) of the existing groups whose base file holds a key the
/// group deletes (or, with `updates`, updates) more than once. Empty when `history` shows
/// no file can hold a key twice (see [`WriteHistory::repeat_risk`]).
pub(crate) async fn groups_to_rewrite(
    storage: &Arc<dyn Storage>,
    stored_keys: &StoredKeys,
    history: WriteHistory<'_>,
    input: &Input,
    plan: &WritePlan,
    updates: bool,
) -> Result<BTreeSet<usize>> {
    let mut out = BTreeSet::new();
    let changing = |g: &GroupPlan| !g.deletes.is_empty() || (updates && !g.updates.is_empty());
    if !plan
        .groups
        .iter()
        .any(|g| g.existing.is_some() && changing(g))
    {
        return Ok(out);
    }
    if history.repeat_risk().await?.is_none() {
        return Ok(out);
    }
    for (i, group) in plan.groups.iter().enumerate() {
        let Some(path) = group
            .existing
            .as_ref()
            .filter(|_| changing(group))
            .and_then(|s| s.base_file_path())
        else {
            continue;
        };
        let changed: HashSet<&str> = group
            .deletes
            .iter()
            .chain(group.updates.iter().filter(|_| updates))
            .filter_map(|&r| input.keys.get(r).map(|k| k.record_key.as_str()))
            .collect();
        let projection = match stored_keys {
            StoredKeys::Meta => Some(vec![meta::RECORD_KEY.to_string()]),
            StoredKeys::Generated(_) => None,
        };
        let mut seen: HashMap<String, u32> = HashMap::new();
        let mut repeated = false;
        for batch in read_base_file(
            storage.clone(),
            &path,
            group.existing.as_ref().and_then(FileSlice::base_file_size),
            projection.as_deref(),
        )
        .await?
        {
            for key in stored_keys.keys(&batch, &path)?.into_iter().flatten() {
                if changed.contains(key.as_str()) {
                    let n = seen.entry(key).or_default();
                    *n += 1;
                    repeated |= *n > 1;
                }
            }
            if repeated {
                break;
            }
        }
        if repeated {
            out.insert(i);
        }
    }
    Ok(out)
}
