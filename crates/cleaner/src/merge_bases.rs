//! The states a root's next merge compares from, as holders of files.
//!
//! `arbor-branching`'s merge records, in the `extraMetadata` of each merge commit, the source
//! it merged (`arbor.merge.sourceId`: a branch id, or `main`) and the source instant it carried
//! (`arbor.merge.sourceInstant`). The next merge of that source into that root reads the root
//! as of the merge commit and the source as of that instant, so every clean keeps the files of
//! those two snapshots, for the latest merge of each source on each root's active timeline
//! (an archived merge commit is no longer looked at: its states may then be cleaned, and the
//! next merge says so). Java's cleaner does not know them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_fsview::Horizon;
use arbor_storage::Storage;
use arbor_table::read::TableReader;
use arbor_timeline::avro::{decode_instant, InstantContent};
use arbor_timeline::layout::branches::{find_branch, live_roots};
use arbor_timeline::naming::LayoutVersion;
use arbor_timeline::{resolve_main, InstantTime, MetaRoot};

use crate::error::Result;
use crate::protection::{snapshot_keys, ProtectionContext};

/// `extraMetadata` key of a merge commit: the merged source's identity (`branchId`, or `main`).
pub const MERGE_SOURCE_ID: &str = "arbor.merge.sourceId";
/// `extraMetadata` key of a merge commit: the source instant the merge carried.
pub const MERGE_SOURCE_INSTANT: &str = "arbor.merge.sourceInstant";

/// Per merged source, the latest merge commit on the active timeline of `ctx`'s root and the
/// source instant it carried.
async fn latest_merges(
    ctx: &ProtectionContext<'_>,
) -> Result<BTreeMap<String, (InstantTime, InstantTime)>> {
    let active = ctx.view.history().active();
    let legacy_layout = active.layout().layout == LayoutVersion::V1;
    let mut latest = BTreeMap::new();
    let mut writes = active.completed_writes();
    writes.sort_by(|a, b| a.requested_time.cmp(&b.requested_time));
    for w in writes {
        let bytes = active.read(&w).await?;
        if bytes.is_empty() {
            continue;
        }
        let key = active.key_of(&w)?;
        let legacy = legacy_layout || w.completion_time.is_none();
        let extra = match decode_instant(&w, &bytes, &key, legacy)? {
            InstantContent::Commit(m) => m.extra_metadata,
            InstantContent::ReplaceCommit(m) => m.extra_metadata,
            _ => None,
        };
        let Some(extra) = extra else {
            continue;
        };
        if let (Some(id), Some(carried)) = (
            extra.get(MERGE_SOURCE_ID),
            extra
                .get(MERGE_SOURCE_INSTANT)
                .and_then(|t| InstantTime::parse(t).ok()),
        ) {
            latest.insert(id.clone(), (w.requested_time.clone(), carried));
        }
    }
    Ok(latest)
}

/// The root whose identity is `id` (`main`, or a live working branch's `branchId`).
async fn root_of(storage: &Arc<dyn Storage>, id: &str) -> Result<Option<MetaRoot>> {
    if id == "main" {
        return Ok(Some(resolve_main(storage.as_ref()).await?));
    }
    for root in live_roots(storage).await? {
        if let MetaRoot::Branch(name) = &root {
            if find_branch(storage, name)
                .await?
                .is_some_and(|info| info.branch_id == id)
            {
                return Ok(Some(root));
            }
        }
    }
    Ok(None)
}

/// The keys of the files of the states the next merge of each source into `ctx`'s root
/// compares from (module doc); `storage` is the table's own storage.
pub async fn merge_bases(
    storage: &Arc<dyn Storage>,
    ctx: &ProtectionContext<'_>,
) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for (id, (commit, carried)) in latest_merges(ctx).await? {
        out.extend(snapshot_keys(ctx.view, &Horizon::AsOf(commit)).await?);
        if let Some(source) = root_of(storage, &id).await? {
            let reader = TableReader::open_view(source.view(storage.clone())).await?;
            out.extend(snapshot_keys(reader.view(), &Horizon::AsOf(carried)).await?);
        }
    }
    Ok(out)
}

/// The merge bases of the root being cleaned, as a protection source (the other roots' are in
/// [`crate::roots::BranchProtection`]).
#[derive(Debug, Clone)]
pub struct MergeBaseProtection {
    storage: Arc<dyn Storage>,
}

impl MergeBaseProtection {
    /// A source for a clean of a root of the table whose own storage is `storage`.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        MergeBaseProtection { storage }
    }
}

#[async_trait::async_trait]
impl crate::protection::ProtectionSource for MergeBaseProtection {
    fn name(&self) -> String {
        "the states the next merges compare from".to_string()
    }

    async fn protected(&self, ctx: &ProtectionContext<'_>) -> Result<BTreeSet<String>> {
        merge_bases(&self.storage, ctx).await
    }
}
