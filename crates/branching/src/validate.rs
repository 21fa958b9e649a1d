//! Validating one root's metadata table when files are shared by several roots.
//!
//! A root may still list a superseded file it no longer retains (outside its retention, as its
//! last clean decided) that another root's clean deleted once no live root needed it: that root
//! may since have been dropped, or replaced by a publication. Such a file is *released*, not a
//! discrepancy. Everything the root retains (its latest snapshot, the snapshots its last clean
//! kept, its savepoints and tags, the inputs of its pending services; every committed file when
//! it never cleaned) must be on storage exactly as `arbor_mdt::validate::validate_table` checks.
//! A working branch's history before its base is main's to retain: a file only snapshots
//! before the base read (not the base snapshot, which main's savepoint at the base keeps, nor
//! the branch's latest) may be gone, deleted by main's clean or by an engine that knows nothing
//! of branches (Java's `run_clean`).

use std::sync::Arc;

use arbor_cleaner::protection::{
    snapshot_keys, PendingProtection, ProtectionContext, ProtectionSource, SavepointProtection,
};
use arbor_fsview::{parse_data_file_name, Horizon};
use arbor_mdt::validate::{validate_table, FilesDiscrepancy, ValidationReport};
use arbor_storage::Storage;
use arbor_table::read::TableReader;
use arbor_timeline::layout::branches::find_branch;
use arbor_timeline::{InstantTime, MetaRoot};

use crate::error::Result;
use crate::protect::retained_by;
use crate::roots::select_root;

/// The base instant of working branch `root` (`None` for main, or a branch without one).
async fn branch_base(storage: &Arc<dyn Storage>, root: &MetaRoot) -> Result<Option<InstantTime>> {
    let MetaRoot::Branch(name) = root else {
        return Ok(None);
    };
    Ok(find_branch(storage, name)
        .await?
        .and_then(|i| i.base_instant)
        .and_then(|b| InstantTime::parse(&b).ok()))
}

/// Validates the metadata table of `branch` (main for `None`/`"main"`) against storage,
/// excusing files missing from storage that the root no longer retains (released shared files;
/// see the module doc).
///
/// The root is first opened as a table (its `hoodie.properties` and timeline): a location that
/// is not a valid Hudi table is an error (e.g. `NotATable` naming the missing
/// `.hoodie/hoodie.properties`), never an empty report.
pub async fn validate(
    storage: &Arc<dyn Storage>,
    branch: Option<&str>,
) -> Result<ValidationReport> {
    let root = select_root(storage, branch).await?;
    let view = root.view(storage.clone());
    // Not a table (or a damaged one): fail here rather than report "no metadata table".
    let reader = TableReader::open_view(view.clone()).await?;
    let mut report = validate_table(view.clone()).await?;
    if report
        .discrepancies
        .iter()
        .any(|d| matches!(d, FilesDiscrepancy::MissingFromStorage { .. }))
    {
        let ctx = ProtectionContext {
            storage: &view,
            view: reader.view(),
            now: chrono::Utc::now(),
        };
        let mut retained = retained_by(&ctx).await?;
        // A working branch's history before its base is main's: main's retention (or another
        // engine's clean of main, which knows nothing of the branch) may delete files only
        // those older snapshots read. What the branch keeps of it is its base snapshot (pinned
        // on main by a savepoint pair) and its own later state.
        let before_base = match (&root, branch_base(storage, &root).await?) {
            (MetaRoot::Branch(_), Some(base)) => Some(base),
            _ => None,
        };
        if let Some(base) = &before_base {
            let mut kept = snapshot_keys(reader.view(), &Horizon::AsOf(base.clone())).await?;
            kept.extend(snapshot_keys(reader.view(), &Horizon::Latest).await?);
            let inherited_only = |key: &str| {
                !kept.contains(key)
                    && key
                        .rsplit('/')
                        .next()
                        .and_then(|n| parse_data_file_name(n, 0).ok().flatten())
                        .is_some_and(|f| f.instant_time() < base)
            };
            retained.retain(|k| !inherited_only(k));
        }
        // Savepoints (so tags) and pending services keep their files whatever their instant.
        retained.extend(SavepointProtection.protected(&ctx).await?);
        retained.extend(PendingProtection.protected(&ctx).await?);
        report.discrepancies.retain(|d| match d {
            FilesDiscrepancy::MissingFromStorage { partition, file } => {
                retained.contains(&arbor_fsview::slice::join(partition, file))
            }
            _ => true,
        });
    }
    Ok(report)
}
