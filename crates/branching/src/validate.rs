//! Validating one root's metadata table when files are shared by several roots.
//!
//! A root may still list a superseded file it no longer retains (outside its retention, as its
//! last clean decided) that another root's clean deleted once no live root needed it: that root
//! may since have been dropped, or replaced by a publication. Such a file is *released*, not a
//! discrepancy. Everything the root retains (its latest snapshot, the snapshots its last clean
//! kept, its savepoints and tags, the inputs of its pending services; every committed file when
//! it never cleaned) must be on storage exactly as `arbor_mdt::validate::validate_table` checks.

use std::sync::Arc;

use arbor_cleaner::protection::{
    PendingProtection, ProtectionContext, ProtectionSource, SavepointProtection,
};
use arbor_mdt::validate::{validate_table, FilesDiscrepancy, ValidationReport};
use arbor_storage::Storage;
use arbor_table::read::TableReader;

use crate::error::Result;
use crate::protect::retained_by;
use crate::roots::select_root;

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
