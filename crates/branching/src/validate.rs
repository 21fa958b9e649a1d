//! Validating one root's metadata table when files are shared by several roots.
//!
//! A file one root still lists (superseded, outside its retention) may have been deleted by
//! another root's clean once no root needed it any more. For that root this is not a
//! discrepancy: the file is *released*. Everything else is reported as
//! `arbor_mdt::validate::validate_table` reports it.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_mdt::validate::{validate_table, FilesDiscrepancy, ValidationReport};
use arbor_storage::Storage;
use arbor_timeline::avro::{decode, HoodieCleanMetadata};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{Action, ActiveTimeline, MetaRoot, State, TableConfig, TableLayout};

use crate::error::Result;
use crate::roots::{live_roots, select_root};

/// `(partition, file name)` of every file the completed cleans of `root` deleted.
async fn cleaned_by(
    storage: &Arc<dyn Storage>,
    root: &MetaRoot,
) -> Result<BTreeSet<(String, String)>> {
    let view = root.view(storage.clone());
    let config = TableConfig::load(view.as_ref(), DEFAULT_META_DIR).await?;
    let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
    let tl = ActiveTimeline::load(view, layout).await?;
    let mut out = BTreeSet::new();
    for c in tl.filter(&[Action::Clean], &[State::Completed]) {
        let key = tl.key_of(&c)?;
        let meta: HoodieCleanMetadata = decode(&tl.read(&c).await?, &key)?;
        for (partition, pm) in &meta.partition_metadata {
            for f in &pm.success_delete_files {
                let name = f.rsplit('/').next().unwrap_or(f);
                out.insert((partition.clone(), name.to_string()));
            }
        }
    }
    Ok(out)
}

/// Validates the metadata table of `branch` (main for `None`/`"main"`) against storage,
/// excusing files that another live root's completed clean deleted (released shared files).
pub async fn validate(
    storage: &Arc<dyn Storage>,
    branch: Option<&str>,
) -> Result<ValidationReport> {
    let root = select_root(storage, branch).await?;
    let mut report = validate_table(root.view(storage.clone())).await?;
    if report
        .discrepancies
        .iter()
        .any(|d| matches!(d, FilesDiscrepancy::MissingFromStorage { .. }))
    {
        let mut released = BTreeSet::new();
        for other in live_roots(storage).await? {
            if other != root {
                released.extend(cleaned_by(storage, &other).await?);
            }
        }
        report.discrepancies.retain(|d| match d {
            FilesDiscrepancy::MissingFromStorage { partition, file } => {
                !released.contains(&(partition.clone(), file.clone()))
            }
            _ => true,
        });
    }
    Ok(report)
}
